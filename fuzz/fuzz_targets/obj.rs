//! OBJ + MTL: the input is an OBJ file, optionally followed by a NUL byte
//! and the MTL file it can name as `mtllib scene.mtl`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (obj, mtl) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    caustic_fuzz::check(caustic_fuzz::load(&[
        ("scene.obj", obj),
        ("scene.mtl", mtl),
    ]));
});
