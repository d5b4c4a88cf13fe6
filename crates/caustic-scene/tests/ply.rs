//! PLY loading through `Scene::load`: ASCII and both binary byte orders
//! of one sample, every scalar type, one test per failure class.

mod common;

use caustic_geom::{Vec2, Vec3};
use caustic_scene::{ErrorKind, Scene};
use common::*;

#[test]
fn ply_ascii_and_binary_formats_give_identical_meshes() {
    let data = PlyData::sample();
    let ascii = load_text("m.ply", data.ascii()).unwrap();
    let little = load_text("m.ply", data.binary(false)).unwrap();
    let big = load_text("m.ply", data.binary(true)).unwrap();
    let mesh = &ascii.meshes[0];
    assert_eq!(mesh.positions.len(), 5);
    assert_eq!(mesh.indices, vec![[0, 1, 2], [0, 2, 3], [2, 4, 3]]);
    assert_eq!(mesh.normals[4], Vec3::new(0.6, 0.0, 0.8));
    assert_eq!(mesh.uvs[4], Vec2::new(0.25, 0.75));
    assert_eq!(mesh.material_ids, vec![0; 3]);
    assert_eq!(&little.meshes[0], mesh);
    assert_eq!(&big.meshes[0], mesh);
    // The unknown element is skipped with a note, the same in every format.
    for scene in [&ascii, &little, &big] {
        assert_eq!(scene.warnings.len(), 1);
        let message = &scene.warnings[0].message;
        assert!(message.starts_with("skipped element 'strip'"), "{message}");
    }
}

#[test]
fn ply_normals_uvs_quad_and_unknown_element() {
    let scene = Scene::load(fixture("ply/quad_normals.ply")).unwrap();
    assert_eq!(scene.meshes.len(), 1);
    let mesh = &scene.meshes[0];
    assert_eq!(mesh.name, "quad_normals");
    assert_eq!(mesh.indices, vec![[0, 1, 2], [0, 2, 3]]);
    assert_eq!(mesh.normals, vec![Vec3::Z; 4]);
    assert_eq!(mesh.uvs[2], Vec2::ONE);
    assert_eq!(scene.materials.len(), 1);
    assert!(scene.materials[0].two_sided);
    assert!(warnings_text(&scene).contains("'edge'"));
}

#[test]
fn ply_reads_every_scalar_type_and_alias() {
    let header = "ply\nformat binary_big_endian 1.0\nelement vertex 3\n\
                  property char a\nproperty uint8 b\nproperty int16 x\nproperty ushort c\n\
                  property int32 y\nproperty uint d\nproperty float32 z\nproperty float64 e\n\
                  element face 1\nproperty list uint8 uint32 vertex_index\nend_header\n";
    let mut bytes = header.as_bytes().to_vec();
    for (x, y, z) in [
        (-300i16, 70000i32, 0.5f32),
        (300, 70000, 0.5),
        (0, -70000, 0.5),
    ] {
        bytes.push((-1i8) as u8);
        bytes.push(200);
        bytes.extend(x.to_be_bytes());
        bytes.extend(60000u16.to_be_bytes());
        bytes.extend(y.to_be_bytes());
        bytes.extend(4000000000u32.to_be_bytes());
        bytes.extend(z.to_be_bytes());
        bytes.extend(1e300f64.to_be_bytes());
    }
    bytes.push(3);
    for i in 0u32..3 {
        bytes.extend(i.to_be_bytes());
    }
    let scene = load_text("types.ply", bytes).unwrap();
    let mesh = &scene.meshes[0];
    assert_eq!(mesh.positions[0], Vec3::new(-300.0, 70000.0, 0.5));
    assert_eq!(mesh.positions[2], Vec3::new(0.0, -70000.0, 0.5));
    assert_eq!(mesh.indices, vec![[0, 1, 2]]);
}

#[test]
fn ply_truncated_binary_names_counts() {
    let data = PlyData::sample();
    let bytes = data.binary(false);
    let header = data.header("binary_little_endian").len();
    // Cut inside the third vertex (each is 5 floats + 3 doubles = 44 bytes).
    let cut = &bytes[..header + 2 * 44 + 10];
    let err = assert_error(
        load_text("cut.ply", cut),
        ErrorKind::Truncated,
        "cut.ply",
        "after 2 of 5 vertices",
    );
    assert!(err.message.starts_with("file ends"), "{err}");
    // Cut inside the faces.
    let cut = &bytes[..header + 5 * 44 + 8];
    assert_error(
        load_text("cut.ply", cut),
        ErrorKind::Truncated,
        "cut.ply",
        "after 0 of 2 faces",
    );
}

#[test]
fn ply_truncated_ascii_names_counts() {
    let text = String::from_utf8(PlyData::sample().ascii()).unwrap();
    let cut: Vec<&str> = text.lines().take(21).collect();
    let result = load_text("cut.ply", cut.join("\n"));
    assert_error(
        result,
        ErrorKind::Truncated,
        "cut.ply",
        "after 3 of 5 vertices",
    );
}

#[test]
fn ply_truncated_header_is_truncated() {
    let result = load_text("head.ply", "ply\nformat ascii 1.0\nelement vertex 3\n");
    assert_error(result, ErrorKind::Truncated, "head.ply", "header");
}

#[test]
fn ply_garbage_number_names_line() {
    let text = String::from_utf8(PlyData::sample().ascii())
        .unwrap()
        .replace("0.1 0.2 0.3", "0.1 zero 0.3");
    let err = assert_error(
        load_text("junk.ply", text),
        ErrorKind::Syntax,
        "junk.ply",
        "line 23",
    );
    assert!(
        err.message.contains("'zero'") && err.message.contains("vertex 4"),
        "{err}"
    );
}

#[test]
fn ply_face_index_out_of_range_names_face() {
    let mut data = PlyData::sample();
    data.faces[1][2] = 5;
    let ascii = load_text("range.ply", data.ascii());
    assert_error(ascii, ErrorKind::IndexOutOfRange, "range.ply", "face 1");
    let binary = load_text("range.ply", data.binary(true));
    assert_error(binary, ErrorKind::IndexOutOfRange, "range.ply", "face 1");
    data.faces[1][2] = -1;
    let negative = load_text("range.ply", data.binary(false));
    assert_error(
        negative,
        ErrorKind::IndexOutOfRange,
        "range.ply",
        "vertex -1",
    );
}

#[test]
fn ply_bad_headers_name_line() {
    let body = "element vertex 0\nend_header\n";
    let cases = [
        ("PLY\nformat ascii 1.0\n", "line 1"),
        ("ply\nformat ascii 2.0\n", "line 2"),
        ("ply\nformat text 1.0\n", "line 2"),
        ("ply\nformat ascii 1.0\nproperty float x\n", "line 3"),
        (
            "ply\nformat ascii 1.0\nelement vertex 3\nproperty real x\n",
            "line 4",
        ),
        (
            "ply\nformat ascii 1.0\nelement face 1\nproperty list float int vertex_indices\n",
            "line 4",
        ),
        ("ply\nformat ascii 1.0\nelement vertex many\n", "line 3"),
        ("ply\nformat ascii 1.0\nvertices 3\n", "line 3"),
    ];
    for (header, line) in cases {
        let result = load_text("head.ply", format!("{header}{body}"));
        assert_error(result, ErrorKind::Syntax, "head.ply", line);
    }
}

#[test]
fn ply_without_position_property_names_element() {
    let text = "ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\nproperty float y\nend_header\n0 0\n";
    let err = assert_error(
        load_text("xy.ply", text),
        ErrorKind::Syntax,
        "xy.ply",
        "line 3",
    );
    assert!(err.message.contains("'z'"), "{err}");
}

#[test]
fn ply_without_faces_is_empty() {
    let text = "ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\nproperty float y\nproperty float z\nend_header\n0 0 0\n1 0 0\n0 1 0\n";
    assert_error(
        load_text("points.ply", text),
        ErrorKind::Empty,
        "points.ply",
        "no triangles",
    );
}

#[test]
fn ply_nan_and_degenerate_faces_are_skipped_with_warnings() {
    let text = "ply\nformat ascii 1.0\nelement vertex 5\nproperty float x\nproperty float y\nproperty float z\n\
                element face 4\nproperty list uchar uint vertex_indices\nend_header\n\
                0 0 0\n1 0 0\n0 1 0\nnan 0 0\n2 0 0\n3 0 1 2\n3 0 1 3\n3 0 1 4\n2 0 1\n";
    let scene = load_text("mixed.ply", text).unwrap();
    assert_eq!(scene.triangle_count(), 1);
    let warnings = warnings_text(&scene);
    for needle in ["NaN", "zero-area", "fewer than 3"] {
        assert!(warnings.contains(needle), "{warnings}");
    }
}

#[test]
fn ply_lying_counts_do_not_exhaust_memory() {
    let text = "ply\nformat binary_little_endian 1.0\nelement vertex 4000000000\nproperty float x\nproperty float y\nproperty float z\nend_header\n";
    assert_error(
        load_text("huge.ply", text),
        ErrorKind::Truncated,
        "huge.ply",
        "0 of 4000000000",
    );
}

#[test]
fn ply_huge_counts_of_empty_records_do_not_hang() {
    // An element without properties takes no bytes, so nothing bounds its
    // count by the file size: it used to be skipped record by record.
    for format in ["ascii", "binary_little_endian"] {
        let text = format!(
            "ply\nformat {format} 1.0\nelement nothing 18446744073709551615\n\
             element vertex 3\nproperty float x\nproperty float y\nproperty float z\n\
             element face 1\nproperty list uchar int vertex_indices\nend_header\n"
        );
        let mut bytes = text.into_bytes();
        if format == "ascii" {
            bytes.extend(b"0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n");
        } else {
            for v in [[0f32, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]] {
                bytes.extend(v.iter().flat_map(|x| x.to_le_bytes()));
            }
            bytes.push(3);
            bytes.extend([0i32, 1, 2].iter().flat_map(|i| i.to_le_bytes()));
        }
        let start = std::time::Instant::now();
        let scene = load_text("empty_records.ply", bytes).unwrap();
        assert_eq!(scene.triangle_count(), 1);
        assert!(
            start.elapsed().as_secs() < 5,
            "{format}: {:?}",
            start.elapsed()
        );
        assert_warns(&scene, "skipped element 'nothing'");
    }
}

#[test]
fn ply_vertex_colours_are_ignored_with_a_warning() {
    let text = "ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\nproperty float y\n\
                property float z\nproperty uchar red\nproperty uchar green\nproperty uchar blue\n\
                element face 1\nproperty list uchar int vertex_indices\nend_header\n\
                0 0 0 255 0 0\n1 0 0 0 255 0\n0 1 0 0 0 255\n3 0 1 2\n";
    let scene = load_text("colours.ply", text).unwrap();
    assert_eq!(scene.triangle_count(), 1);
    assert_warns(
        &scene,
        "vertex colours (red, green, blue) are ignored (caustic shades with materials)",
    );
}

#[test]
fn ply_concave_faces_are_ear_clipped_like_obj_polygons() {
    // The star of tests/data/obj/concave_star.obj as one PLY face, listed
    // after the faces element would allow (the vertex element comes last).
    let corners: Vec<(f32, f32)> = (0..10)
        .map(|i| {
            let a = std::f32::consts::FRAC_PI_2 + i as f32 * std::f32::consts::PI / 5.0;
            let r = if i % 2 == 0 { 1.0 } else { 0.4 };
            (r * a.cos(), r * a.sin())
        })
        .collect();
    let mut text = "ply\nformat ascii 1.0\nelement face 1\nproperty list uchar int vertex_indices\n\
                    element vertex 10\nproperty float x\nproperty float y\nproperty float z\nend_header\n10"
        .to_string();
    for i in 0..10 {
        text += &format!(" {i}");
    }
    text += "\n";
    for (x, y) in &corners {
        text += &format!("{x} {y} 0\n");
    }
    let scene = load_text("star.ply", text).unwrap();
    let mesh = &scene.meshes[0];
    assert_eq!(mesh.indices.len(), 8);
    let area: f32 = (0..8).map(|i| mesh.triangle(i).area()).sum();
    let expected = 10.0 * 0.5 * 0.4 * 36f32.to_radians().sin();
    assert!(
        (area - expected).abs() < 1e-5,
        "area {area}, expected {expected}"
    );
    assert!((0..8).all(|i| mesh.triangle(i).cross().z > 0.0));
}
