//! Input that must end in a clear error and never in a panic or a hang:
//! the crash files of earlier fuzzing (`tests/data/fuzz-regressions`, see
//! `docs/FUZZING.md`), files that are no scene at all, UTF-16 text, errors
//! that carry the warnings collected before them, and a quick property test
//! of mutated files (the real campaign is `scripts/fuzz.sh`).

mod common;

use caustic_scene::{ErrorKind, Scene};
use common::*;
use proptest::prelude::*;
use std::path::{Path, PathBuf};

// ------------------------------------------------- fuzzing regressions --

/// Loads a file of `tests/data/fuzz-regressions`, which must fail with
/// `kind` and a message containing every one of `needles`.
fn assert_regression(name: &str, kind: ErrorKind, needles: &[&str]) {
    let path = fixture(&format!("fuzz-regressions/{name}"));
    let err = Scene::load(&path).expect_err("a crash file must not load");
    let text = err.to_string();
    assert_eq!(err.kind, kind, "{text}");
    for needle in needles {
        assert!(text.contains(needle), "'{text}' should contain '{needle}'");
    }
}

#[test]
fn gltf_position_accessor_past_an_empty_accessor_list_is_an_error() {
    // `accessors` misspelt: POSITION names accessor 2 of none. gltf-json
    // 1.4.1 indexed its accessor list with it during validation and
    // panicked ("the len is 0 but the index is 2").
    assert_regression(
        "gltf-json-mesh-index-1.glb",
        ErrorKind::IndexOutOfRange,
        &[
            "meshes[0].primitives[0]",
            "attribute POSITION refers to accessor 2, but the file has 0 accessor(s)",
        ],
    );
}

#[test]
fn gltf_huge_position_accessor_index_is_an_error() {
    // POSITION: 99999999999 (read as 1215752191 by the JSON layer).
    assert_regression(
        "gltf-json-mesh-index-2.gltf",
        ErrorKind::IndexOutOfRange,
        &[
            "meshes[0].primitives[0]",
            "attribute POSITION refers to accessor",
            "but the file has 2 accessor(s)",
        ],
    );
}

#[test]
fn gltf_image_without_uri_or_buffer_view_is_an_error() {
    // Found by the gltf fuzz target: `bufferView` misspelt (GLB) or `uri`
    // misspelt (JSON) leaves an image with no source; the validation of
    // gltf 1.4.1 accepts it and `Image::source` unwrapped the missing uri.
    for name in [
        "gltf-image-without-source-1.glb",
        "gltf-image-without-source-2.gltf",
    ] {
        assert_regression(
            name,
            ErrorKind::Syntax,
            &["images[0]", "an image needs a uri or a bufferView"],
        );
    }
}

#[test]
fn gltf_image_in_a_buffer_view_without_mime_type_is_an_error() {
    // The same accessor unwraps the mimeType of a buffer-view image.
    let json =
        std::fs::read_to_string(fixture("fuzz-regressions/gltf-image-without-source-2.gltf"))
            .unwrap()
            .replace(
                r#""ur1": "data:image/png;base64,"#,
                r#""bufferView": 0, "name": ""#,
            );
    let err = load_text("no_mime.gltf", json).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Syntax, "{err}");
    assert!(
        err.to_string()
            .contains("images[0]: an image in a buffer view needs a mimeType"),
        "{err}"
    );
}

#[test]
fn gltf_camera_without_its_projection_object_is_an_error() {
    // The validation wants one of `perspective` or `orthographic`, not the
    // one `type` names; `Camera::projection` unwrapped that one.
    let json = r#"{"asset": {"version": "2.0"},
        "cameras": [{"type": "perspective", "orthographic": {"xmag": 1, "ymag": 1, "znear": 0.1, "zfar": 10}}]}"#;
    let err = load_text("camera.gltf", json).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Syntax, "{err}");
    assert!(
        err.to_string()
            .contains("cameras[0]: a camera of type 'perspective' needs a 'perspective' object"),
        "{err}"
    );
}

/// Replays every input of the fuzz corpus (`fuzz/corpus/TARGET`) the way
/// its fuzz target does (see `fuzz/fuzz_targets`), so that `cargo test`
/// keeps the campaign's findings fixed without libFuzzer. A successful
/// load must hold what `Scene::load` promises.
#[test]
fn the_fuzz_corpus_loads_or_fails_cleanly() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
    let mut replayed = 0;
    for target in ["obj", "ply", "gltf", "mitsuba"] {
        let dir = TempDir::new();
        dir.write("buffer.bin", GLTF_BUFFER);
        dir.write("mesh.obj", "v 0 0 0\nv 1 0 0\nv 1 1 0\nf 1 2 3\n");
        dir.write(
            "mesh.ply",
            std::fs::read(fixture("ply/quad_normals.ply")).unwrap(),
        );
        let mut inputs: Vec<PathBuf> = std::fs::read_dir(corpus.join(target))
            .unwrap_or_else(|e| panic!("fuzz/corpus/{target}: {e}"))
            .map(|entry| entry.unwrap().path())
            .collect();
        inputs.sort();
        for input in inputs {
            let data = std::fs::read(&input).unwrap();
            let result = match target {
                "obj" => {
                    let (obj, mtl) =
                        data.split_at(data.iter().position(|&b| b == 0).unwrap_or(data.len()));
                    dir.write("scene.mtl", mtl.get(1..).unwrap_or_default());
                    Scene::load(dir.write("scene.obj", obj))
                }
                "ply" => Scene::load(dir.write("scene.ply", &data)),
                "gltf" if data.starts_with(b"glTF") => Scene::load(dir.write("scene.glb", &data)),
                "gltf" => Scene::load(dir.write("scene.gltf", &data)),
                _ => Scene::load(dir.write("scene.xml", &data)),
            };
            check_promises(&input, result);
            replayed += 1;
        }
    }
    assert!(replayed >= 40, "only {replayed} corpus inputs");
}

/// The buffer `fuzz/fuzz_targets/gltf.rs` puts beside its input.
const GLTF_BUFFER: [u8; 42] = [
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80, 0x3f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0x80, 0x3f, 0, 0, 0, 0, 0, 0, 1, 0, 2, 0,
];

fn check_promises(input: &Path, result: Result<Scene, caustic_scene::SceneError>) {
    let name = input.display();
    let scene = match result {
        Ok(scene) => scene,
        Err(e) => return assert!(!e.message.is_empty(), "{name}: empty error"),
    };
    assert!(scene.triangle_count() > 0, "{name}");
    for mesh in &scene.meshes {
        let n = mesh.positions.len();
        assert!(mesh.normals.is_empty() || mesh.normals.len() == n, "{name}");
        assert!(mesh.uvs.is_empty() || mesh.uvs.len() == n, "{name}");
        assert!(
            mesh.indices.iter().flatten().all(|&i| (i as usize) < n),
            "{name}"
        );
        assert!(
            mesh.material_ids
                .iter()
                .all(|&m| (m as usize) < scene.materials.len()),
            "{name}"
        );
    }
    let bounds = scene.bounds();
    assert!(bounds.min.is_finite() && bounds.max.is_finite(), "{name}");
}

// ------------------------------------------------------ not scene files --

#[test]
fn a_directory_is_not_a_scene_file() {
    let dir = TempDir::new();
    let err = Scene::load(&dir.0).unwrap_err();
    assert_eq!(err.kind, ErrorKind::UnsupportedFormat);
    assert!(
        err.message
            .starts_with("not a scene file: it is a directory (scene files end in .obj, .ply"),
        "{err}"
    );
}

#[test]
fn a_file_without_extension_is_not_a_scene_file() {
    let err = load_text("README", "v 0 0 0\n").unwrap_err();
    assert_eq!(err.kind, ErrorKind::UnsupportedFormat);
    assert!(
        err.message
            .contains("not a scene file: the name has no extension"),
        "{err}"
    );
    let err = load_text("scene.fbx", "x").unwrap_err();
    assert!(err.message.contains("unknown extension '.fbx'"), "{err}");
}

// --------------------------------------------------------------- UTF-16 --

fn utf16le_with_bom(text: &str) -> Vec<u8> {
    std::iter::once(0xFEFF)
        .chain(text.encode_utf16())
        .flat_map(u16::to_le_bytes)
        .collect()
}

#[test]
fn utf16_text_is_named_in_every_text_format() {
    let samples = [
        ("t.obj", "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n"),
        ("t.ply", "ply\nformat ascii 1.0\nend_header\n"),
        ("t.gltf", r#"{"asset": {"version": "2.0"}}"#),
        ("t.xml", r#"<scene version="3.0.0"/>"#),
    ];
    for (name, text) in samples {
        let err = load_text(name, utf16le_with_bom(text)).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Syntax, "{name}: {err}");
        assert!(
            err.message
                .contains("UTF-16 text is not supported; convert the file to UTF-8"),
            "{name}: {err}"
        );
    }
}

#[test]
fn a_utf16_material_library_is_named() {
    let dir = TempDir::new();
    dir.write("m.mtl", utf16le_with_bom("newmtl red\nKd 1 0 0\n"));
    let obj = dir.write(
        "t.obj",
        "mtllib m.mtl\nv 0 0 0\nv 1 0 0\nv 0 1 0\nusemtl red\nf 1 2 3\n",
    );
    let err = Scene::load(obj).unwrap_err();
    assert!(err.path.ends_with("m.mtl"), "{err}");
    assert!(err.message.contains("UTF-16"), "{err}");
}

// ------------------------------------------------ warnings with errors --

#[test]
fn an_error_lists_the_warnings_that_explain_it() {
    // Every shape is of a type caustic does not read: the load fails with
    // "no triangles", and the skipped shapes say why.
    let xml = r#"<scene version="3.0.0">
        <shape type="disk"/>
        <shape type="cylinder"/>
    </scene>"#;
    let err = load_text("only_unsupported.xml", xml).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Empty);
    let text = err.to_string();
    assert!(text.contains("the scene contains no triangles"), "{text}");
    assert_eq!(err.warnings.len(), 2, "{text}");
    assert!(
        text.contains("<shape type=\"disk\"> at line 2: unsupported shape type; skipped"),
        "{text}"
    );
    assert!(
        text.contains("<shape type=\"cylinder\"> at line 3"),
        "{text}"
    );
}

#[test]
fn a_failing_obj_keeps_its_warnings() {
    // Only points and lines: ignored with a warning, then nothing is left.
    let err = load_text("lines.obj", "v 0 0 0\nv 1 0 0\nl 1 2\np 1\n").unwrap_err();
    assert_eq!(err.kind, ErrorKind::Empty);
    assert!(
        err.to_string()
            .contains("ignored 2 statement(s) caustic does not render"),
        "{err}"
    );
}

#[test]
fn a_failing_ply_keeps_its_warnings() {
    // The colour warning is collected before the body turns out short.
    let ply = "ply\nformat ascii 1.0\nelement vertex 2\nproperty float x\nproperty float y\n\
               property float z\nproperty uchar red\nend_header\n0 0 0 255\n";
    let err = load_text("short.ply", ply).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Truncated);
    let text = err.to_string();
    assert!(text.contains("file ends after 1 of 2 vertices"), "{text}");
    assert!(text.contains("vertex colours (red) are ignored"), "{text}");
}

// ------------------------------------------------------ property tests --

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
