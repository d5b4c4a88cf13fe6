//! Mitsuba 3 XML: the input is the scene file; `mesh.obj` and `mesh.ply`
//! beside it are fixed small meshes that `<shape type="obj|ply">` can name.
#![no_main]

use libfuzzer_sys::fuzz_target;

const OBJ: &[u8] = b"v 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\nvn 0 0 1\nf 1//1 2//1 3//1 4//1\n";
const PLY: &[u8] = b"ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\nproperty float y\nproperty float z\nelement face 1\nproperty list uchar int vertex_indices\nend_header\n0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n";

fuzz_target!(|data: &[u8]| {
    caustic_fuzz::check(caustic_fuzz::load(&[
        ("scene.xml", data),
        ("mesh.obj", OBJ),
        ("mesh.ply", PLY),
    ]));
});
