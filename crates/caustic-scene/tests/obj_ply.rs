//! OBJ + MTL and PLY loading through `Scene::load`: small fixtures in
//! `tests/data`, one test per failure class, the standard scenes when they
//! are unpacked, and a property test that no input makes a loader panic.

use caustic_geom::{Rgb, Vec2, Vec3};
use caustic_scene::{Bsdf, ErrorKind, Scene, SceneError, Texture, data_dirs};
use proptest::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

// ------------------------------------------------------------- helpers --

fn fixture(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(relative)
}

/// A fresh folder under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("caustic-obj-ply-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn write(&self, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, contents).unwrap();
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Loads `contents` written to a temp file called `name`.
fn load_text(name: &str, contents: impl AsRef<[u8]>) -> Result<Scene, SceneError> {
    let dir = TempDir::new();
    Scene::load(dir.write(name, contents))
}

/// Asserts the error class and that the message names the file and `place`.
fn assert_error(
    result: Result<Scene, SceneError>,
    kind: ErrorKind,
    file: &str,
    place: &str,
) -> SceneError {
    let err = result.expect_err("loading should fail");
    let text = err.to_string();
    assert_eq!(err.kind, kind, "{text}");
    assert!(text.contains(file), "'{text}' should name {file}");
    assert!(text.contains(place), "'{text}' should name {place}");
    err
}

/// The `materials.obj` fixture and its MTL copied into a temp folder, with
/// the 2x2 texture the MTL names (top row red and sRGB grey 128, bottom row
/// blue and white), made here because the repository ignores `*.png`.
fn materials_dir() -> TempDir {
    let dir = TempDir::new();
    for file in ["materials.obj", "materials.mtl"] {
        std::fs::copy(fixture(&format!("obj/{file}")), dir.0.join(file)).unwrap();
    }
    let texels = vec![255, 0, 0, 128, 128, 128, 0, 0, 255, 255, 255, 255];
    image::RgbImage::from_raw(2, 2, texels)
        .unwrap()
        .save(dir.0.join("checker.png"))
        .unwrap();
    dir
}

fn load_materials_scene() -> Scene {
    let dir = materials_dir();
    Scene::load(dir.0.join("materials.obj")).unwrap()
}

fn warnings_text(scene: &Scene) -> String {
    scene
        .warnings
        .iter()
        .map(|w| w.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

fn assert_close(a: Rgb, b: Rgb) {
    assert!((a - b).abs().max_element() < 1e-6, "{a} != {b}");
}

// ------------------------------------------------------------ OBJ good --

#[test]
fn obj_quad_with_negative_indices_and_polygon_are_fanned() {
    let scene = Scene::load(fixture("obj/quad_polygon.obj")).unwrap();
    assert_eq!(scene.triangle_count(), 5);
    assert!(scene.warnings.is_empty(), "{}", warnings_text(&scene));
    let quad = &scene.meshes[0];
    assert_eq!(quad.name, "quad");
    // -4 -3 -2 -1 after 4 vertices are the 1st..4th: a unit quad of area 1.
    let area: f32 = (0..quad.indices.len())
        .map(|i| quad.triangle(i).cross().length() / 2.0)
        .sum();
    assert!((area - 1.0).abs() < 1e-6);
    let pentagon = &scene.meshes[1];
    assert_eq!(pentagon.indices.len(), 3);
    let first = pentagon.positions[pentagon.indices[0][0] as usize];
    assert!(
        pentagon
            .indices
            .iter()
            .all(|t| pentagon.positions[t[0] as usize] == first)
    );
    // No MTL: everything gets the one default material.
    assert_eq!(scene.materials.len(), 1);
    assert_eq!(scene.materials[0].name, "default");
}

#[test]
fn obj_with_crlf_and_tabs_loads_like_plain_file() {
    let dir = materials_dir();
    let plain = std::fs::read_to_string(dir.0.join("materials.obj")).unwrap();
    let windows = plain.replace(' ', "\t").replace('\n', "\r\n");
    let a = Scene::load(dir.0.join("materials.obj")).unwrap();
    let b = Scene::load(dir.write("windows.obj", windows)).unwrap();
    assert_eq!(a.meshes, b.meshes);
    assert_eq!(a.materials, b.materials);
    assert_eq!(b.warnings, []);
}

#[test]
fn obj_mtl_materials_map_to_bsdfs() {
    let scene = load_materials_scene();
    assert!(scene.warnings.is_empty(), "{}", warnings_text(&scene));
    assert_eq!(scene.triangle_count(), 6);
    let material_of = |mesh: &str| {
        let m = scene.meshes.iter().find(|m| m.name == mesh).unwrap();
        &scene.materials[m.material_ids[0] as usize]
    };
    let painted = material_of("textured");
    assert_eq!(
        painted.bsdf,
        Bsdf::Diffuse {
            albedo: Rgb::new(0.8, 0.6, 0.4),
            texture: Some(0)
        }
    );
    assert!(painted.two_sided);
    assert_eq!(material_of("lamp").emission, Rgb::new(17.0, 12.0, 4.0));
    assert!(material_of("lamp").is_emissive());
    assert_eq!(
        material_of("looking_glass").bsdf,
        Bsdf::Mirror {
            reflectance: Rgb::splat(0.9)
        }
    );
    assert_eq!(
        material_of("window").bsdf,
        Bsdf::Dielectric {
            ior: 1.33,
            tint: Rgb::new(0.9, 0.95, 1.0)
        }
    );
    assert_eq!(
        material_of("teapot").bsdf,
        Bsdf::Glossy {
            albedo: Rgb::splat(0.2),
            texture: None,
            specular: Rgb::splat(0.5),
            exponent: 50.0
        }
    );
    // The face before any `usemtl` gets the default grey, appended once.
    let unnamed = material_of("unnamed_object");
    assert_eq!(unnamed.name, "default");
    assert_eq!(
        scene
            .materials
            .iter()
            .filter(|m| m.name == "default")
            .count(),
        1
    );
    // Normals and uvs survive where every corner names them.
    let textured = scene.meshes.iter().find(|m| m.name == "textured").unwrap();
    assert_eq!(textured.normals, vec![Vec3::Z; 3]);
    assert_eq!(textured.uvs, vec![Vec2::ZERO, Vec2::X, Vec2::Y]);
    assert!(
        scene
            .meshes
            .iter()
            .find(|m| m.name == "lamp")
            .unwrap()
            .uvs
            .is_empty()
    );
}

#[test]
fn obj_texture_is_linear_with_row_zero_on_top() {
    let scene = load_materials_scene();
    assert_eq!(scene.textures.len(), 1);
    let t = &scene.textures[0];
    assert_eq!((t.width, t.height), (2, 2));
    let grey = Texture::srgb_to_linear(128);
    assert!((grey - 0.2158).abs() < 1e-3);
    assert_close(t.texels[0], Rgb::X);
    assert_close(t.texels[1], Rgb::splat(grey));
    assert_close(t.texels[2], Rgb::Z);
    assert_close(t.texels[3], Rgb::ONE);
}

#[test]
fn obj_textures_are_shared_between_materials() {
    let dir = materials_dir();
    dir.write(
        "two.mtl",
        "newmtl a\nmap_Kd checker.png\nnewmtl b\nKd 0.1 0.1 0.1\nmap_Kd checker.png\n",
    );
    let obj = dir.write(
        "two.obj",
        "mtllib two.mtl\nv 0 0 0\nv 1 0 0\nv 0 1 0\nusemtl a\nf 1 2 3\nusemtl b\nf 1 2 3\n",
    );
    let scene = Scene::load(obj).unwrap();
    assert_eq!(scene.textures.len(), 1);
    for m in &scene.materials {
        assert!(
            matches!(
                m.bsdf,
                Bsdf::Diffuse {
                    texture: Some(0),
                    ..
                }
            ),
            "{m:?}"
        );
    }
}

// --------------------------------------------------- OBJ with problems --

#[test]
fn obj_missing_mtl_warns_and_uses_default_material() {
    let scene = Scene::load(fixture("obj/missing_mtl.obj")).unwrap();
    assert_eq!(scene.warnings.len(), 1, "{}", warnings_text(&scene));
    let warning = scene.warnings[0].to_string();
    assert!(warning.contains("not_there.mtl"), "{warning}");
    assert_eq!(scene.materials.len(), 1);
    assert_eq!(scene.materials[0].name, "default");
}

#[test]
fn obj_missing_texture_warns_and_keeps_material_untextured() {
    let scene = Scene::load(fixture("obj/missing_texture.obj")).unwrap();
    assert_eq!(scene.warnings.len(), 1, "{}", warnings_text(&scene));
    assert!(scene.warnings[0].to_string().contains("not_there.png"));
    assert_eq!(scene.materials[0].name, "wood");
    assert_eq!(
        scene.materials[0].bsdf,
        Bsdf::Diffuse {
            albedo: Rgb::new(0.5, 0.3, 0.1),
            texture: None
        }
    );
}

#[test]
fn obj_undefined_material_warns() {
    let dir = TempDir::new();
    dir.write("lib.mtl", "newmtl known\nKd 1 0 0\n");
    let obj = dir.write(
        "u.obj",
        "mtllib lib.mtl\nv 0 0 0\nv 1 0 0\nv 0 1 0\nusemtl unknown\nf 1 2 3\n",
    );
    let scene = Scene::load(obj).unwrap();
    let text = warnings_text(&scene);
    assert!(
        text.contains("'unknown'") && text.contains("line 5"),
        "{text}"
    );
    assert_eq!(scene.materials.last().unwrap().name, "default");
}

#[test]
fn obj_non_numeric_coordinate_names_line() {
    let result = load_text("bad.obj", "v 0 0 0\nv 1 0 0\nv a b c\nf 1 2 3\n");
    assert_error(result, ErrorKind::Syntax, "bad.obj", "line 3");
}

#[test]
fn obj_too_few_coordinates_names_line() {
    let result = load_text("short.obj", "# comment\nv 0 0 0\nv 1 2\n");
    let err = assert_error(result, ErrorKind::Syntax, "short.obj", "line 3");
    assert!(err.message.contains("found 2"), "{err}");
}

#[test]
fn obj_bad_face_index_names_line() {
    let result = load_text("face.obj", "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 x 3\n");
    assert_error(result, ErrorKind::Syntax, "face.obj", "line 4");
}

#[test]
fn obj_face_index_out_of_range_names_line() {
    for face in [
        "f 1 2 4",
        "f 1 2 -4",
        "f 0 1 2",
        "f 1/2 2/1 3/1",
        "f 1//2 2//1 3//1",
    ] {
        let text = format!("v 0 0 0\nv 1 0 0\nv 0 1 0\nvt 0 0\nvn 0 0 1\n{face}\n");
        assert_error(
            load_text("range.obj", text),
            ErrorKind::IndexOutOfRange,
            "range.obj",
            "line 6",
        );
    }
    // Indices far beyond anything an integer type holds are a syntax error.
    let huge = "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 99999999999999999999999\n";
    assert_error(
        load_text("huge.obj", huge),
        ErrorKind::Syntax,
        "huge.obj",
        "line 4",
    );
}

#[test]
fn obj_nan_coordinate_skips_triangle_with_warning() {
    let text = "v 0 0 0\nv 1 0 0\nv 0 1 0\nv nan 0 0\nf 1 2 3\nf 1 2 4\n";
    let scene = load_text("nan.obj", text).unwrap();
    assert_eq!(scene.triangle_count(), 1);
    assert!(
        warnings_text(&scene).contains("NaN"),
        "{}",
        warnings_text(&scene)
    );
}

#[test]
fn obj_zero_area_triangle_skipped_with_warning() {
    let text = "v 0 0 0\nv 1 0 0\nv 0 1 0\nv 2 0 0\nf 1 2 3\nf 1 2 4\n";
    let scene = load_text("flat.obj", text).unwrap();
    assert_eq!(scene.triangle_count(), 1);
    assert!(
        warnings_text(&scene).contains("zero-area"),
        "{}",
        warnings_text(&scene)
    );
}

#[test]
fn obj_without_faces_is_empty() {
    let result = load_text("empty.obj", "v 0 0 0\nv 1 0 0\nv 0 1 0\nl 1 2\ng nothing\n");
    assert_error(result, ErrorKind::Empty, "empty.obj", "no triangles");
}

#[test]
fn obj_malformed_mtl_names_mtl_line() {
    let dir = TempDir::new();
    dir.write("bad.mtl", "newmtl a\nKd 1 0 0\nKs 1 1\n");
    let obj = dir.write(
        "m.obj",
        "mtllib bad.mtl\nv 0 0 0\nv 1 0 0\nv 0 1 0\nusemtl a\nf 1 2 3\n",
    );
    assert_error(Scene::load(obj), ErrorKind::Syntax, "bad.mtl", "line 3");
}

#[test]
fn missing_file_is_io_error() {
    let dir = TempDir::new();
    let result = Scene::load(dir.0.join("nowhere.obj"));
    assert_error(result, ErrorKind::Io, "nowhere.obj", "no such file");
}

#[test]
fn unknown_extension_is_unsupported_format() {
    let result = load_text("scene.stl", "solid nothing\n");
    assert_error(result, ErrorKind::UnsupportedFormat, "scene.stl", ".stl");
}

// ----------------------------------------------------------------- PLY --

/// A small PLY: 5 vertices with normals and uvs, a quad and a triangle
/// (with an extra per-face property) and an unknown element with a list.
struct PlyData {
    vertices: Vec<[f32; 8]>,
    faces: Vec<Vec<i32>>,
}

impl PlyData {
    fn sample() -> Self {
        Self {
            vertices: vec![
                [0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0],
                [1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0],
                [1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0],
                [0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 1.0],
                [0.1, 0.2, 0.3, 0.6, 0.0, 0.8, 0.25, 0.75],
            ],
            faces: vec![vec![0, 1, 2, 3], vec![2, 4, 3]],
        }
    }

    fn header(&self, format: &str) -> String {
        format!(
            "ply\nformat {format} 1.0\ncomment test data\n\
             element vertex {}\nproperty float x\nproperty float y\nproperty float z\n\
             property double nx\nproperty double ny\nproperty double nz\n\
             property float u\nproperty float v\n\
             element face {}\nproperty list uchar int vertex_indices\nproperty short flags\n\
             element strip 1\nproperty list int uint vertex_indices\n\
             end_header\n",
            self.vertices.len(),
            self.faces.len()
        )
    }

    fn ascii(&self) -> Vec<u8> {
        let mut out = self.header("ascii");
        for v in &self.vertices {
            let words: Vec<String> = v.iter().map(|x| x.to_string()).collect();
            out += &format!("{}\n", words.join(" "));
        }
        for f in &self.faces {
            let words: Vec<String> = f.iter().map(|x| x.to_string()).collect();
            out += &format!("{} {} -7\n", f.len(), words.join(" "));
        }
        out += "3 0 1 2\n";
        out.into_bytes()
    }

    fn binary(&self, big_endian: bool) -> Vec<u8> {
        let format = if big_endian {
            "binary_big_endian"
        } else {
            "binary_little_endian"
        };
        let mut out = self.header(format).into_bytes();
        fn put<const N: usize>(out: &mut Vec<u8>, mut bytes: [u8; N], big_endian: bool) {
            if big_endian {
                bytes.reverse();
            }
            out.extend_from_slice(&bytes);
        }
        for v in &self.vertices {
            for (i, &x) in v.iter().enumerate() {
                if (3..6).contains(&i) {
                    put(&mut out, f64::from(x).to_le_bytes(), big_endian);
                } else {
                    put(&mut out, x.to_le_bytes(), big_endian);
                }
            }
        }
        for f in &self.faces {
            out.push(f.len() as u8);
            for &i in f {
                put(&mut out, i.to_le_bytes(), big_endian);
            }
            put(&mut out, (-7i16).to_le_bytes(), big_endian);
        }
        put(&mut out, 3i32.to_le_bytes(), big_endian);
        for i in 0u32..3 {
            put(&mut out, i.to_le_bytes(), big_endian);
        }
        out
    }
}

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

// --------------------------------------------------------- real scenes --

fn load_real(relative: &str) -> Option<Scene> {
    let path = data_dirs::scene_file(relative)?;
    let start = std::time::Instant::now();
    let scene = Scene::load(&path).unwrap_or_else(|e| panic!("{e}"));
    eprintln!(
        "{relative}: {} triangles, {} materials, {} textures in {:.3} s",
        scene.triangle_count(),
        scene.materials.len(),
        scene.textures.len(),
        start.elapsed().as_secs_f64()
    );
    for w in &scene.warnings {
        eprintln!("  warning: {w}");
    }
    Some(scene)
}

/// Triangles the loader read, counting the zero-area ones it then dropped
/// (from its "skipped N ... triangle(s)" warnings): the file's face count.
fn triangles_in_file(scene: &Scene) -> usize {
    let dropped: usize = scene
        .warnings
        .iter()
        .filter(|w| w.message.ends_with("triangle(s)"))
        .filter_map(|w| {
            w.message
                .split("skipped ")
                .nth(1)?
                .split(' ')
                .next()?
                .parse::<usize>()
                .ok()
        })
        .sum();
    scene.triangle_count() + dropped
}

#[test]
fn real_bunny() {
    let Some(scene) = load_real("bunny/bun_zipper.ply") else {
        return;
    };
    assert_eq!(triangles_in_file(&scene), 69451);
}

#[test]
fn real_dragon() {
    let Some(scene) = load_real("dragon/dragon_vrip.ply") else {
        return;
    };
    assert_eq!(triangles_in_file(&scene), 871414);
}

#[test]
fn real_sponza() {
    let Some(scene) = load_real("sponza-dabrovic/sponza.obj") else {
        return;
    };
    assert_eq!(triangles_in_file(&scene), 66450);
    assert!(!scene.textures.is_empty());
}

#[test]
fn real_sibenik() {
    let Some(scene) = load_real("sibenik/sibenik.obj") else {
        return;
    };
    assert_eq!(triangles_in_file(&scene), 73564);
    assert!(
        scene
            .materials
            .iter()
            .any(|m| matches!(m.bsdf, Bsdf::Dielectric { .. }))
    );
}

#[test]
fn real_conference() {
    let Some(scene) = load_real("conference-69k/conference.obj") else {
        return;
    };
    assert_eq!(triangles_in_file(&scene), 69047);
}

#[test]
fn real_cornell_box_original() {
    let Some(scene) = load_real("cornell-box/mcguire/CornellBox-Original.obj") else {
        return;
    };
    assert_eq!(scene.triangle_count(), 36);
    let light = scene.materials.iter().find(|m| m.name == "light").unwrap();
    assert_eq!(light.emission, Rgb::new(17.0, 12.0, 4.0));
    assert_eq!(scene.emissive_materials().count(), 1);
    assert!(scene.warnings.is_empty(), "{}", warnings_text(&scene));
}

#[test]
fn real_cornell_box_variants() {
    for (name, triangles) in [("Mirror", 36), ("Sphere", 2188), ("Water", 7088)] {
        let Some(scene) = load_real(&format!("cornell-box/mcguire/CornellBox-{name}.obj")) else {
            return;
        };
        assert_eq!(triangles_in_file(&scene), triangles, "{name}");
        assert!(scene.materials.iter().any(|m| m.is_specular()), "{name}");
    }
}

#[test]
fn refs_cornell_box_parts() {
    for part in [
        "back",
        "ceiling",
        "floor",
        "green_wall",
        "large_box",
        "light",
        "red_wall",
        "small_box",
    ] {
        let Some(path) = data_dirs::ref_file(&format!("cornell-box/{part}.obj")) else {
            continue;
        };
        let scene = Scene::load(&path).unwrap_or_else(|e| panic!("{e}"));
        let expected = if part.ends_with("box") { 12 } else { 2 };
        assert_eq!(scene.triangle_count(), expected, "{part}");
    }
}

// -------------------------------------------------------------- fuzzing --

/// Words that tend to reach the corners of the parsers.
const VOCABULARY: &[&str] = &[
    "-1",
    "0",
    "4294967295",
    "-2147483648",
    "99999999999999999999",
    "nan",
    "inf",
    "1e39",
    "/",
    "//",
    "\n",
    "\r\n",
    "\t",
    " ",
    "#",
    "f",
    "v",
    "vt",
    "vn",
    "usemtl",
    "mtllib",
    "list",
    "element",
    "property",
    "end_header",
    "uchar",
    "double",
    "-",
    "1/1/1",
    "3",
];

/// A mutation of a file: overwrite a byte, insert a word, delete a range
/// or cut the file.
#[derive(Clone, Debug)]
enum Mutation {
    Byte(usize, u8),
    Insert(usize, usize),
    Delete(usize, usize),
    Cut(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Byte(i, b)),
        (any::<usize>(), 0..VOCABULARY.len()).prop_map(|(i, w)| Mutation::Insert(i, w)),
        (any::<usize>(), 1usize..16).prop_map(|(i, n)| Mutation::Delete(i, n)),
        any::<usize>().prop_map(Mutation::Cut),
    ]
}

fn mutate(mut bytes: Vec<u8>, mutations: &[Mutation]) -> Vec<u8> {
    for m in mutations {
        let len = bytes.len().max(1);
        match *m {
            Mutation::Byte(i, b) => {
                if !bytes.is_empty() {
                    bytes[i % len] = b;
                }
            }
            Mutation::Insert(i, w) => {
                let at = i % (bytes.len() + 1);
                bytes.splice(at..at, VOCABULARY[w].bytes());
            }
            Mutation::Delete(i, n) => {
                let at = i % len;
                let end = (at + n).min(bytes.len());
                bytes.drain(at.min(end)..end);
            }
            Mutation::Cut(i) => bytes.truncate(i % len),
        }
    }
    bytes
}

/// Loads `bytes` as `name`; reaching the end without a panic is the test.
fn load_never_panics(dir: &TempDir, name: &str, bytes: &[u8]) {
    let path = dir.write(name, bytes);
    let _ = Scene::load(path);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300), ply_header in any::<bool>()) {
        let dir = TempDir::new();
        let mut ply = if ply_header { b"ply\nformat binary_little_endian 1.0\n".to_vec() } else { Vec::new() };
        ply.extend_from_slice(&bytes);
        load_never_panics(&dir, "random.ply", &ply);
        load_never_panics(&dir, "random.obj", &bytes);
    }

    #[test]
    fn mutated_ply_never_panics(mutations in proptest::collection::vec(mutation(), 1..6), which in 0..3u8) {
        let data = PlyData::sample();
        let bytes = match which {
            0 => data.ascii(),
            1 => data.binary(false),
            _ => data.binary(true),
        };
        let dir = TempDir::new();
        load_never_panics(&dir, "mutated.ply", &mutate(bytes, &mutations));
    }

    #[test]
    fn mutated_obj_and_mtl_never_panic(mutations in proptest::collection::vec(mutation(), 1..6), in_mtl in any::<bool>()) {
        let dir = materials_dir();
        let obj = std::fs::read(fixture("obj/materials.obj")).unwrap();
        let mtl = std::fs::read(fixture("obj/materials.mtl")).unwrap();
        let (obj, mtl) = if in_mtl { (obj, mutate(mtl, &mutations)) } else { (mutate(obj, &mutations), mtl) };
        dir.write("materials.mtl", mtl);
        load_never_panics(&dir, "materials.obj", &obj);
    }
}
