//! The glTF 2.0 and Mitsuba 3 XML loaders: what they read, the conventions
//! they follow, and how they fail on malformed input (errors, never panics).
//!
//! glTF fixtures are written by the tests (JSON with a base64 buffer, and a
//! GLB built from the same JSON and buffer); Mitsuba fixtures live in
//! `tests/data/mitsuba`, and the reference scenes come from `refs/` when
//! present.

use caustic_geom::{Rgb, Vec3};
use caustic_scene::{Bsdf, Camera, ErrorKind, FilmSize, FovAxis, Light, Scene, SceneError};
use std::fs;
use std::path::{Path, PathBuf};

// ---------------------------------------------------------------------------
// Helpers

/// A fresh, empty folder for one test's files.
fn scratch(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("gltf_mitsuba")
        .join(test);
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

fn write(dir: &Path, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
    let path = dir.join(name);
    fs::write(&path, contents).unwrap();
    path
}

fn data(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(relative)
}

fn close(a: Vec3, b: Vec3, tolerance: f32) -> bool {
    (a - b).abs().max_element() <= tolerance
}

#[track_caller]
fn assert_close(a: Vec3, b: Vec3) {
    assert!(close(a, b, 1e-5), "{a} != {b}");
}

#[track_caller]
fn expect_error(result: Result<Scene, SceneError>, kind: ErrorKind) -> SceneError {
    match result {
        Ok(_) => panic!("expected a {kind:?} error, but the scene loaded"),
        Err(e) => {
            assert_eq!(e.kind, kind, "{e}");
            e
        }
    }
}

fn has_warning(scene: &Scene, needle: &str) -> bool {
    scene
        .warnings
        .iter()
        .any(|w| w.to_string().contains(needle))
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | (b as u32) << (16 - 8 * i));
        for k in 0..=chunk.len() {
            out.push(ALPHABET[(n >> (18 - 6 * k) & 63) as usize] as char);
        }
        out.push_str(&"=".repeat(3 - chunk.len()));
    }
    out
}

/// A deterministic byte generator for the mutation tests.
fn lcg(seed: &mut u64) -> u64 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *seed >> 33
}

// ---------------------------------------------------------------------------
// glTF fixture: one triangle, shared by meshes with different materials.

/// Positions (0,0,0) (1,0,0) (0,1,0), normals +z, uvs (0,0) (1,0) (0,1),
/// u16 indices 0 1 2: 104 bytes.
fn triangle_buffer() -> Vec<u8> {
    let floats: [f32; 24] = [
        0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, // POSITION
        0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0, // NORMAL
        0.0, 0.0, 1.0, 0.0, 0.0, 1.0, // TEXCOORD_0
    ];
    let mut bytes: Vec<u8> = floats.iter().flat_map(|f| f.to_le_bytes()).collect();
    for i in [0u16, 1, 2, 0] {
        bytes.extend(i.to_le_bytes()); // the last one pads to 4 bytes
    }
    bytes
}

/// The glTF document; `buffer` is the JSON of `buffers[0]`.
///
/// Node 0 translates by (1, 2, 3) and holds node 1, which rotates 90° about
/// +z and scales by 2: the triangle lands on (1,2,3) (1,4,3) (-1,2,3).
fn gltf_json(buffer: &str) -> String {
    let q = std::f32::consts::FRAC_1_SQRT_2;
    format!(
        r#"{{
  "asset": {{"version": "2.0"}},
  "extensionsUsed": ["KHR_lights_punctual", "KHR_materials_transmission",
                     "KHR_materials_ior", "KHR_materials_emissive_strength"],
  "scene": 0,
  "scenes": [{{"nodes": [0, 2, 3, 4, 5, 6, 7, 8]}}],
  "nodes": [
    {{"name": "parent", "translation": [1, 2, 3], "children": [1]}},
    {{"name": "triangle", "mesh": 0, "rotation": [0, 0, {q}, {q}], "scale": [2, 2, 2]}},
    {{"name": "camera", "camera": 0, "translation": [0, 0, 5]}},
    {{"name": "second camera", "camera": 0}},
    {{"name": "ortho", "camera": 1}},
    {{"name": "bulb", "translation": [0, 3, 0],
      "extensions": {{"KHR_lights_punctual": {{"light": 0}}}}}},
    {{"name": "spot", "translation": [0, 4, 0], "rotation": [-{q}, 0, 0, {q}],
      "extensions": {{"KHR_lights_punctual": {{"light": 1}}}}}},
    {{"name": "sun", "extensions": {{"KHR_lights_punctual": {{"light": 2}}}}}},
    {{"name": "materials", "mesh": 1}}
  ],
  "cameras": [
    {{"type": "perspective", "perspective": {{"yfov": 0.8, "znear": 0.1, "aspectRatio": 1.5}}}},
    {{"type": "orthographic", "orthographic": {{"xmag": 1, "ymag": 1, "znear": 0.1, "zfar": 10}}}}
  ],
  "extensions": {{"KHR_lights_punctual": {{"lights": [
    {{"type": "point", "color": [1, 0.5, 0.25], "intensity": 4}},
    {{"type": "spot", "intensity": 3, "spot": {{"innerConeAngle": 0.2, "outerConeAngle": 0.5}}}},
    {{"type": "directional", "intensity": 2}}
  ]}}}},
  "meshes": [
    {{"name": "tri", "primitives": [
      {{"attributes": {{"POSITION": 0, "NORMAL": 1, "TEXCOORD_0": 2}}, "indices": 3, "material": 0}}
    ]}},
    {{"name": "looks", "primitives": [
      {{"attributes": {{"POSITION": 0}}, "indices": 3, "material": 1}},
      {{"attributes": {{"POSITION": 0}}, "indices": 3, "material": 2}},
      {{"attributes": {{"POSITION": 0}}, "material": 3}},
      {{"attributes": {{"POSITION": 0}}, "mode": 1}}
    ]}}
  ],
  "materials": [
    {{"name": "red", "doubleSided": true,
      "pbrMetallicRoughness": {{"baseColorFactor": [0.8, 0.1, 0.1, 1], "metallicFactor": 0, "roughnessFactor": 1}}}},
    {{"name": "mirror",
      "pbrMetallicRoughness": {{"baseColorFactor": [0.9, 0.8, 0.7, 1], "metallicFactor": 1, "roughnessFactor": 0}}}},
    {{"name": "glass", "pbrMetallicRoughness": {{"metallicFactor": 0, "roughnessFactor": 0}},
      "extensions": {{"KHR_materials_transmission": {{"transmissionFactor": 1}},
                     "KHR_materials_ior": {{"ior": 1.33}}}}}},
    {{"name": "lamp", "emissiveFactor": [1, 0.5, 0.25],
      "extensions": {{"KHR_materials_emissive_strength": {{"emissiveStrength": 10}}}}}}
  ],
  "accessors": [
    {{"bufferView": 0, "byteOffset": 0, "componentType": 5126, "count": 3, "type": "VEC3",
      "min": [0, 0, 0], "max": [1, 1, 0]}},
    {{"bufferView": 0, "byteOffset": 36, "componentType": 5126, "count": 3, "type": "VEC3"}},
    {{"bufferView": 0, "byteOffset": 72, "componentType": 5126, "count": 3, "type": "VEC2"}},
    {{"bufferView": 1, "componentType": 5123, "count": 3, "type": "SCALAR"}}
  ],
  "bufferViews": [
    {{"buffer": 0, "byteOffset": 0, "byteLength": 96}},
    {{"buffer": 0, "byteOffset": 96, "byteLength": 6}}
  ],
  "buffers": [{buffer}]
}}"#
    )
}

fn embedded_gltf() -> String {
    let buffer = triangle_buffer();
    gltf_json(&format!(
        r#"{{"byteLength": {}, "uri": "data:application/octet-stream;base64,{}"}}"#,
        buffer.len(),
        base64(&buffer)
    ))
}

/// A GLB container: JSON chunk padded with spaces, BIN chunk with zeros.
fn glb(json: &str, bin: Option<&[u8]>) -> Vec<u8> {
    let mut json = json.as_bytes().to_vec();
    json.resize(json.len().next_multiple_of(4), b' ');
    let mut body = Vec::new();
    body.extend((json.len() as u32).to_le_bytes());
    body.extend(b"JSON");
    body.extend(&json);
    if let Some(bin) = bin {
        let mut bin = bin.to_vec();
        bin.resize(bin.len().next_multiple_of(4), 0);
        body.extend((bin.len() as u32).to_le_bytes());
        body.extend(b"BIN\0");
        body.extend(&bin);
    }
    let mut out = b"glTF".to_vec();
    out.extend(2u32.to_le_bytes());
    out.extend((12 + body.len() as u32).to_le_bytes());
    out.extend(body);
    out
}

fn load_embedded(test: &str) -> Scene {
    let dir = scratch(test);
    Scene::load(write(&dir, "scene.gltf", embedded_gltf())).unwrap()
}

/// The first mesh's triangle, in world space.
fn first_triangle(scene: &Scene) -> [Vec3; 3] {
    let tri = scene.meshes[0].triangle(0);
    [tri.v0, tri.v1, tri.v2]
}

// ---------------------------------------------------------------------------
// glTF: content

#[test]
fn gltf_node_transforms_compose_down_the_tree() {
    let scene = load_embedded("gltf_transforms");
    let [a, b, c] = first_triangle(&scene);
    assert_close(a, Vec3::new(1.0, 2.0, 3.0));
    assert_close(b, Vec3::new(1.0, 4.0, 3.0));
    assert_close(c, Vec3::new(-1.0, 2.0, 3.0));
    // Rotation about +z keeps the normal on +z.
    for n in &scene.meshes[0].normals {
        assert_close(*n, Vec3::Z);
    }
}

#[test]
fn gltf_uvs_are_flipped_to_the_obj_convention() {
    let scene = load_embedded("gltf_uvs");
    let uvs = &scene.meshes[0].uvs;
    assert_eq!(uvs.len(), 3);
    assert_eq!(uvs[0].to_array(), [0.0, 1.0]);
    assert_eq!(uvs[1].to_array(), [1.0, 1.0]);
    assert_eq!(uvs[2].to_array(), [0.0, 0.0]);
}

#[test]
fn gltf_glb_matches_the_json_file() {
    let dir = scratch("gltf_glb");
    let buffer = triangle_buffer();
    let json = gltf_json(&format!(r#"{{"byteLength": {}}}"#, buffer.len()));
    let from_glb = Scene::load(write(&dir, "scene.glb", glb(&json, Some(&buffer)))).unwrap();
    let from_json = Scene::load(write(&dir, "scene.gltf", embedded_gltf())).unwrap();
    assert_eq!(from_glb.meshes, from_json.meshes);
    assert_eq!(from_glb.materials, from_json.materials);
    assert_eq!(from_glb.lights, from_json.lights);
    assert_eq!(from_glb.camera, from_json.camera);
}

#[test]
fn gltf_external_buffer_is_read_relative_to_the_file() {
    let dir = scratch("gltf_external");
    fs::create_dir_all(dir.join("sub dir")).unwrap();
    write(&dir, "sub dir/tri.bin", triangle_buffer());
    let json = gltf_json(r#"{"byteLength": 104, "uri": "sub%20dir/tri.bin"}"#);
    let scene = Scene::load(write(&dir, "scene.gltf", json)).unwrap();
    assert_close(first_triangle(&scene)[1], Vec3::new(1.0, 4.0, 3.0));
}

#[test]
fn gltf_first_perspective_camera_looks_down_minus_z() {
    let scene = load_embedded("gltf_camera");
    let camera = scene.camera.expect("camera");
    assert_close(camera.eye, Vec3::new(0.0, 0.0, 5.0));
    assert_close(camera.target, Vec3::new(0.0, 0.0, 4.0));
    assert_close(camera.up, Vec3::Y);
    assert_eq!(camera.fov_axis, FovAxis::Y);
    assert!((camera.fov_deg - 0.8f32.to_degrees()).abs() < 1e-4);
    assert!(has_warning(&scene, "only the first camera"));
    assert!(has_warning(&scene, "orthographic"));
}

#[test]
fn gltf_punctual_lights() {
    let scene = load_embedded("gltf_lights");
    assert_eq!(scene.lights.len(), 3);
    let Light::Point {
        position,
        intensity,
    } = scene.lights[0]
    else {
        panic!("{:?}", scene.lights[0])
    };
    assert_close(position, Vec3::new(0.0, 3.0, 0.0));
    assert_close(intensity, Rgb::new(4.0, 2.0, 1.0));
    let Light::Spot {
        position,
        direction,
        intensity,
        cos_falloff_start,
        cos_total_width,
    } = scene.lights[1]
    else {
        panic!("{:?}", scene.lights[1])
    };
    assert_close(position, Vec3::new(0.0, 4.0, 0.0));
    assert_close(direction, -Vec3::Y);
    assert_close(intensity, Rgb::splat(3.0));
    assert!((cos_falloff_start - 0.2f32.cos()).abs() < 1e-6);
    assert!((cos_total_width - 0.5f32.cos()).abs() < 1e-6);
    let Light::Directional {
        direction,
        irradiance,
    } = scene.lights[2]
    else {
        panic!("{:?}", scene.lights[2])
    };
    assert_close(direction, -Vec3::Z);
    assert_close(irradiance, Rgb::splat(2.0));
}

#[test]
fn gltf_materials_mirror_glass_emission() {
    let scene = load_embedded("gltf_materials");
    let by_name = |name: &str| {
        scene
            .materials
            .iter()
            .find(|m| m.name == name)
            .unwrap_or_else(|| panic!("no material '{name}'"))
    };
    let red = by_name("red");
    assert!(red.two_sided);
    assert_eq!(
        red.bsdf,
        Bsdf::Diffuse {
            albedo: Rgb::new(0.8, 0.1, 0.1),
            texture: None
        }
    );
    let mirror = by_name("mirror");
    assert!(!mirror.two_sided);
    assert_eq!(
        mirror.bsdf,
        Bsdf::Mirror {
            reflectance: Rgb::new(0.9, 0.8, 0.7)
        }
    );
    let Bsdf::Dielectric { ior, .. } = by_name("glass").bsdf else {
        panic!("glass is {:?}", by_name("glass").bsdf)
    };
    assert!((ior - 1.33).abs() < 1e-6);
    assert!(by_name("glass").two_sided, "glass refracts on both faces");
    assert_close(by_name("lamp").emission, Rgb::new(10.0, 5.0, 2.5));
    // The non-indexed primitive still makes a triangle; the LINES one is skipped.
    assert_eq!(scene.meshes.len(), 4);
    assert!(has_warning(&scene, "Lines"));
}

#[test]
fn gltf_base_color_texture_is_decoded_to_linear() {
    let dir = scratch("gltf_texture");
    let mut png = Vec::new();
    let pixels = image::RgbImage::from_fn(2, 1, |x, _| {
        if x == 0 {
            image::Rgb([255, 0, 0])
        } else {
            image::Rgb([0, 0, 188])
        }
    });
    pixels
        .write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
        .unwrap();
    write(&dir, "tex.png", &png);
    let json = embedded_gltf().replace(
        r#""pbrMetallicRoughness": {"baseColorFactor": [0.8, 0.1, 0.1, 1], "metallicFactor": 0, "roughnessFactor": 1}"#,
        r#""pbrMetallicRoughness": {"baseColorTexture": {"index": 0}, "metallicFactor": 0, "roughnessFactor": 1}"#,
    );
    let json = json.replacen(
        r#""accessors""#,
        r#""textures": [{"source": 0}], "images": [{"uri": "tex.png"}], "accessors""#,
        1,
    );
    let scene = Scene::load(write(&dir, "scene.gltf", json)).unwrap();
    assert_eq!(scene.textures.len(), 1);
    let texture = &scene.textures[0];
    assert_eq!((texture.width, texture.height), (2, 1));
    assert_close(texture.texels[0], Rgb::new(1.0, 0.0, 0.0));
    assert!(
        (texture.texels[1].z - 0.5).abs() < 0.01,
        "188 is about 0.5 linear"
    );
    let red = scene.materials.iter().find(|m| m.name == "red").unwrap();
    assert_eq!(
        red.bsdf,
        Bsdf::Diffuse {
            albedo: Rgb::ONE,
            texture: Some(0)
        }
    );
}

#[test]
fn gltf_missing_texture_is_a_warning() {
    let dir = scratch("gltf_missing_texture");
    let json = embedded_gltf()
        .replace(
            r#""metallicFactor": 0, "roughnessFactor": 1}"#,
            r#""metallicFactor": 0, "roughnessFactor": 1, "baseColorTexture": {"index": 0}}"#,
        )
        .replacen(
            r#""accessors""#,
            r#""textures": [{"source": 0}], "images": [{"uri": "nowhere.png"}], "accessors""#,
            1,
        );
    let scene = Scene::load(write(&dir, "scene.gltf", json)).unwrap();
    assert!(scene.textures.is_empty());
    assert!(has_warning(&scene, "nowhere.png"));
}

// ---------------------------------------------------------------------------
// glTF: malformed input

#[test]
fn gltf_malformed_json_is_a_syntax_error_with_a_line() {
    let dir = scratch("gltf_bad_json");
    let path = write(
        &dir,
        "bad.gltf",
        "{\n  \"asset\": {\"version\": \"2.0\"},\n  \"nodes\": [,]\n}",
    );
    let e = expect_error(Scene::load(path), ErrorKind::Syntax);
    assert_eq!(
        e.location.as_deref().map(|l| l.starts_with("line 3")),
        Some(true),
        "{e}"
    );
}

#[test]
fn gltf_buffer_index_out_of_range_is_an_error() {
    let dir = scratch("gltf_bad_buffer_index");
    let json = embedded_gltf().replace(
        r#"{"buffer": 0, "byteOffset": 96"#,
        r#"{"buffer": 7, "byteOffset": 96"#,
    );
    expect_error(
        Scene::load(write(&dir, "scene.gltf", json)),
        ErrorKind::IndexOutOfRange,
    );
}

#[test]
fn gltf_accessor_past_the_buffer_end_is_an_error() {
    let dir = scratch("gltf_accessor_past_end");
    let json = embedded_gltf().replace(
        r#""byteOffset": 72, "componentType": 5126, "count": 3"#,
        r#""byteOffset": 72, "componentType": 5126, "count": 300"#,
    );
    let e = expect_error(
        Scene::load(write(&dir, "scene.gltf", json)),
        ErrorKind::IndexOutOfRange,
    );
    assert!(e.to_string().contains("accessor 2"), "{e}");
    // A buffer view reaching past its buffer.
    let json = embedded_gltf().replace(r#""byteLength": 96}"#, r#""byteLength": 960}"#);
    expect_error(
        Scene::load(write(&dir, "view.gltf", json)),
        ErrorKind::IndexOutOfRange,
    );
}

#[test]
fn gltf_vertex_index_out_of_range_is_an_error() {
    let dir = scratch("gltf_bad_vertex_index");
    let mut buffer = triangle_buffer();
    buffer[98] = 9; // third index: 2 -> 9
    let json = gltf_json(&format!(
        r#"{{"byteLength": 104, "uri": "data:;base64,{}"}}"#,
        base64(&buffer)
    ));
    expect_error(
        Scene::load(write(&dir, "scene.gltf", json)),
        ErrorKind::IndexOutOfRange,
    );
}

#[test]
fn gltf_missing_external_buffer_is_a_missing_reference() {
    let dir = scratch("gltf_missing_bin");
    let json = gltf_json(r#"{"byteLength": 104, "uri": "gone.bin"}"#);
    let e = expect_error(
        Scene::load(write(&dir, "scene.gltf", json)),
        ErrorKind::MissingReference,
    );
    assert!(e.to_string().contains("gone.bin"), "{e}");
}

#[test]
fn gltf_short_buffer_and_glb_without_bin_are_errors() {
    let dir = scratch("gltf_short");
    let short = &triangle_buffer()[..50];
    let json = gltf_json(&format!(
        r#"{{"byteLength": 104, "uri": "data:;base64,{}"}}"#,
        base64(short)
    ));
    expect_error(
        Scene::load(write(&dir, "short.gltf", json)),
        ErrorKind::Truncated,
    );
    let json = gltf_json(r#"{"byteLength": 104}"#);
    expect_error(
        Scene::load(write(&dir, "nobin.glb", glb(&json, None))),
        ErrorKind::MissingReference,
    );
}

#[test]
fn gltf_truncated_glb_is_an_error() {
    let dir = scratch("gltf_truncated_glb");
    let buffer = triangle_buffer();
    let json = gltf_json(&format!(r#"{{"byteLength": {}}}"#, buffer.len()));
    let bytes = glb(&json, Some(&buffer));
    for cut in [4, 11, 12, 19, 40, bytes.len() - 1] {
        let path = write(&dir, "cut.glb", &bytes[..cut]);
        assert!(Scene::load(path).is_err(), "cut at {cut}");
    }
}

#[test]
fn gltf_mutated_glb_never_panics() {
    let dir = scratch("gltf_mutations");
    let buffer = triangle_buffer();
    let json = gltf_json(&format!(r#"{{"byteLength": {}}}"#, buffer.len()));
    let original = glb(&json, Some(&buffer));
    let mut seed = 7;
    for round in 0..300 {
        let mut bytes = original.clone();
        for _ in 0..1 + round % 4 {
            let at = lcg(&mut seed) as usize % bytes.len();
            bytes[at] = lcg(&mut seed) as u8;
        }
        // Any outcome but a panic is fine.
        let _ = Scene::load(write(&dir, "m.glb", &bytes));
    }
    // Structured damage to the binary data: every byte of the BIN chunk.
    let bin_start = original.len() - buffer.len();
    for at in bin_start..original.len() {
        let mut bytes = original.clone();
        bytes[at] = 0xff;
        let _ = Scene::load(write(&dir, "b.glb", &bytes));
    }
}

#[test]
fn gltf_truncated_json_never_panics() {
    let dir = scratch("gltf_truncated_json");
    let json = embedded_gltf();
    for cut in (0..json.len()).step_by(37) {
        let _ = Scene::load(write(&dir, "t.gltf", &json[..cut]));
    }
}

// ---------------------------------------------------------------------------
// Mitsuba: the reference scenes

/// The white, red and green reflectances of `refs/README.md`.
const WHITE: Rgb = Rgb::new(0.885809, 0.698859, 0.666422);
const RED: Rgb = Rgb::new(0.570068, 0.0430135, 0.0443706);
const GREEN: Rgb = Rgb::new(0.105421, 0.37798, 0.076425);
const LIGHT: Rgb = Rgb::new(18.387, 13.9873, 6.75357);

fn reference_camera() -> Camera {
    Camera {
        eye: Vec3::new(0.0, 0.0, 3.9),
        target: Vec3::ZERO,
        up: Vec3::Y,
        fov_deg: 39.3077,
        fov_axis: FovAxis::X,
    }
}

/// Checks what both reference scenes share: room materials, the light,
/// one-sidedness, flat normals, camera and film.
fn check_reference_room(scene: &Scene) {
    let material_of = |mesh: &str| {
        let mesh = scene.meshes.iter().find(|m| m.name == mesh).unwrap();
        &scene.materials[mesh.material_ids[0] as usize]
    };
    let diffuse = |albedo| Bsdf::Diffuse {
        albedo,
        texture: None,
    };
    for (mesh, albedo) in [
        ("floor", WHITE),
        ("ceiling", WHITE),
        ("back", WHITE),
        ("red_wall", RED),
        ("green_wall", GREEN),
        ("light", WHITE),
    ] {
        let material = material_of(mesh);
        assert_eq!(material.bsdf, diffuse(albedo), "{mesh}");
        assert!(!material.two_sided, "{mesh} must be one-sided");
    }
    assert_eq!(material_of("light").emission, LIGHT);
    assert_eq!(material_of("floor").emission, Rgb::ZERO);
    assert_eq!(scene.emissive_materials().count(), 1);
    // The light faces down.
    let light = scene.meshes.iter().find(|m| m.name == "light").unwrap();
    for i in 0..light.indices.len() {
        assert_close(light.triangle(i).normal().unwrap(), -Vec3::Y);
    }
    assert!(
        scene.meshes.iter().all(|m| m.normals.is_empty()),
        "face_normals"
    );
    let camera = scene.camera.unwrap();
    assert_eq!(camera, reference_camera());
    // Image right is world +x (the green wall).
    assert_close(camera.frame().1, Vec3::X);
    assert_eq!(
        scene.film,
        Some(FilmSize {
            width: 512,
            height: 512
        })
    );
    assert!(scene.lights.is_empty());
    assert_eq!(scene.background, Rgb::ZERO);
    assert!(scene.warnings.is_empty(), "{:?}", scene.warnings);
}

#[test]
fn mitsuba_reference_cornell_box() {
    let Some(path) = caustic_scene::data_dirs::ref_file("cornell-box/cornell-box.xml") else {
        return;
    };
    let scene = Scene::load(path).unwrap();
    assert_eq!(scene.meshes.len(), 8);
    assert_eq!(scene.triangle_count(), 36);
    check_reference_room(&scene);
    let bounds = scene.bounds();
    assert_close(bounds.min, Vec3::new(-1.0, -1.01, -1.0));
    assert_close(bounds.max, Vec3::ONE);
}

#[test]
fn mitsuba_reference_cornell_caustics() {
    let Some(path) = caustic_scene::data_dirs::ref_file("cornell-caustics/cornell-caustics.xml")
    else {
        return;
    };
    let scene = Scene::load(path).unwrap();
    assert_eq!(scene.triangle_count(), 12 + 2 * 20480);
    check_reference_room(&scene);
    let material_of = |mesh: &str| {
        let mesh = scene.meshes.iter().find(|m| m.name == mesh).unwrap();
        &scene.materials[mesh.material_ids[0] as usize]
    };
    assert_eq!(
        material_of("mirror_sphere").bsdf,
        Bsdf::Mirror {
            reflectance: Rgb::ONE
        }
    );
    assert_eq!(
        material_of("glass_sphere").bsdf,
        Bsdf::Dielectric {
            ior: 1.5,
            tint: Rgb::ONE
        }
    );
}

// ---------------------------------------------------------------------------
// Mitsuba: the feature fixture (tests/data/mitsuba/features.xml)

fn features() -> Scene {
    Scene::load(data("mitsuba/features.xml")).unwrap()
}

#[test]
fn mitsuba_defaults_and_bsdfs() {
    let scene = features();
    let names: Vec<&str> = scene.materials.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(
        names[..3],
        ["paint", "paper", "water"],
        "materials in order of first use"
    );
    let [paint, paper, water] = [0, 1, 2].map(|i| &scene.materials[i]);
    assert_eq!(
        paint.bsdf,
        Bsdf::Diffuse {
            albedo: Rgb::new(0.2, 0.4, 0.6),
            texture: None
        }
    );
    assert!(!paint.two_sided);
    assert_eq!(
        paper.bsdf,
        Bsdf::Diffuse {
            albedo: Rgb::splat(0.5),
            texture: None
        }
    );
    assert!(paper.two_sided);
    assert_eq!(
        water.bsdf,
        Bsdf::Dielectric {
            ior: 1.333,
            tint: Rgb::ONE
        }
    );
    let by_name = |name: &str| scene.materials.iter().find(|m| m.name == name).unwrap();
    assert_eq!(
        by_name("chrome").bsdf,
        Bsdf::Mirror {
            reflectance: Rgb::splat(0.9)
        }
    );
    assert!(matches!(by_name("plastic").bsdf, Bsdf::Glossy { .. }));
    assert!(has_warning(&scene, "roughplastic approximated"));
    // The unknown BSDF becomes the default grey diffuse, with a warning.
    assert_eq!(
        by_name("fur").bsdf,
        Bsdf::Diffuse {
            albedo: Rgb::splat(0.5),
            texture: None
        }
    );
    assert!(has_warning(&scene, "<bsdf type=\"hair\"> at line 44"));
}

#[test]
fn mitsuba_transforms_compose_in_document_order() {
    let scene = features();
    // translate x=1 then scale 2: [-1, 1]^2 -> [0, 4] x [-2, 2].
    let quad = &scene.meshes[0];
    let bounds = quad.bounds();
    assert_close(bounds.min, Vec3::new(0.0, -2.0, 0.0));
    assert_close(bounds.max, Vec3::new(4.0, 2.0, 0.0));
    assert_close(quad.triangle(0).normal().unwrap(), Vec3::Z);
    // scale 0.5, rotate 45° about y, then translate: a unit cube turned
    // by 45° about y, centred at (0, -1, 0).
    let cube = &scene.meshes[1];
    let b = cube.bounds();
    let half_diagonal = 0.5 * 2f32.sqrt();
    assert_close(b.min, Vec3::new(-half_diagonal, -1.5, -half_diagonal));
    assert_close(b.max, Vec3::new(half_diagonal, -0.5, half_diagonal));
    for i in 0..cube.indices.len() {
        let tri = cube.triangle(i);
        let outward = tri.centroid() - Vec3::new(0.0, -1.0, 0.0);
        assert!(tri.cross().dot(outward) > 0.0, "cube triangle {i} faces in");
    }
}

#[test]
fn mitsuba_sphere_is_an_icosphere_with_radial_normals() {
    let scene = features();
    let sphere = &scene.meshes[2];
    assert_eq!(sphere.indices.len(), 20480);
    let center = Vec3::new(0.0, 1.0, 0.0);
    for (p, n) in sphere.positions.iter().zip(&sphere.normals) {
        assert!(((*p - center).length() - 0.5).abs() < 1e-6);
        assert_close(*n, (*p - center).normalize());
    }
}

#[test]
fn mitsuba_area_emitter_gets_its_own_one_sided_material() {
    let scene = features();
    let light = &scene.meshes[3];
    let material = &scene.materials[light.material_ids[0] as usize];
    assert_eq!(material.emission, Rgb::splat(5.0));
    assert!(!material.two_sided);
    assert_eq!(
        material.bsdf,
        Bsdf::Diffuse {
            albedo: Rgb::splat(0.5),
            texture: None
        }
    );
    assert_eq!(scene.emissive_materials().count(), 1);
    for i in 0..light.indices.len() {
        let tri = light.triangle(i);
        assert_close(tri.normal().unwrap(), -Vec3::Y);
        assert!((tri.centroid().y - 2.0).abs() < 1e-6);
    }
}

#[test]
fn mitsuba_obj_normals_follow_face_normals_flag() {
    let scene = features();
    let smooth = &scene.meshes[4];
    assert_eq!(smooth.name, "tent");
    assert_eq!(smooth.normals.len(), smooth.positions.len());
    // (1, 0, 0) belongs to the flat triangle only.
    let corner = smooth.positions.iter().position(|&p| p == Vec3::X).unwrap();
    assert_close(smooth.normals[corner], Vec3::Z);
    let shared = smooth
        .positions
        .iter()
        .position(|&p| p == Vec3::ZERO)
        .unwrap();
    assert!(smooth.normals[shared].dot(Vec3::Z) < 0.99, "blended normal");
    let flat = &scene.meshes[5];
    assert!(flat.normals.is_empty(), "face_normals drops vertex normals");
    // flip_normals reverses the winding: the flat triangle now faces -z.
    let tri = (0..2)
        .map(|i| flat.triangle(i))
        .find(|t| t.v0.z == 0.0 && t.v1.z == 0.0 && t.v2.z == 0.0)
        .unwrap();
    assert_close(tri.normal().unwrap(), -Vec3::Z);
}

#[test]
fn mitsuba_unknown_plugins_are_skipped_with_warnings() {
    let scene = features();
    assert_eq!(scene.meshes.len(), 7, "the nurbs shape is skipped");
    assert!(has_warning(&scene, "<shape type=\"nurbs\"> at line 93"));
    assert!(has_warning(&scene, "<emitter type=\"envmap\">"));
}

#[test]
fn mitsuba_emitters_and_sensor() {
    let scene = features();
    assert_eq!(
        scene.lights,
        [
            Light::Point {
                position: Vec3::new(0.0, 3.0, 0.0),
                intensity: Rgb::splat(10.0)
            },
            Light::Directional {
                direction: -Vec3::Y,
                irradiance: Rgb::splat(2.0)
            },
        ]
    );
    assert_eq!(scene.background, Rgb::new(0.1, 0.2, 0.3));
    // fov_axis "smaller" on a 200 x 100 film is the vertical axis.
    let camera = scene.camera.unwrap();
    assert_eq!(camera.fov_axis, FovAxis::Y);
    assert_eq!(camera.fov_deg, 60.0);
    assert_close(camera.eye, Vec3::new(0.0, 0.0, 5.0));
    assert_close(camera.target, Vec3::ZERO);
    assert_eq!(
        scene.film,
        Some(FilmSize {
            width: 200,
            height: 100
        })
    );
}

// ---------------------------------------------------------------------------
// Mitsuba: sensors written inline

fn scene_with(body: &str) -> String {
    format!("<scene version=\"3.0.0\">\n{body}\n<shape type=\"rectangle\"/>\n</scene>\n")
}

fn load_xml(test: &str, xml: &str) -> Result<Scene, SceneError> {
    let dir = scratch(test);
    Scene::load(write(&dir, "scene.xml", xml))
}

#[test]
fn mitsuba_sensor_matrix_gives_the_same_camera_as_lookat() {
    // The reference camera's lookat as a row-major matrix: columns are
    // left = (-1, 0, 0), up = (0, 1, 0), forward = (0, 0, -1), origin.
    let xml = scene_with(
        r#"<sensor type="perspective">
             <float name="fov" value="39.3077"/>
             <transform name="to_world">
               <matrix value="-1 0 0 0  0 1 0 0  0 0 -1 3.9  0 0 0 1"/>
             </transform>
           </sensor>"#,
    );
    let camera = load_xml("mitsuba_sensor_matrix", &xml)
        .unwrap()
        .camera
        .unwrap();
    let reference = reference_camera();
    assert_close(camera.eye, reference.eye);
    assert_close(camera.up, reference.up);
    assert_close(camera.frame().0, -Vec3::Z);
    assert_close(camera.frame().1, Vec3::X);
    assert_eq!(camera.fov_axis, FovAxis::X);
}

#[test]
fn mitsuba_diagonal_fov_is_converted_to_horizontal() {
    let xml = scene_with(
        r#"<sensor type="perspective">
             <float name="fov" value="90"/>
             <string name="fov_axis" value="diagonal"/>
             <film type="hdrfilm">
               <integer name="width" value="300"/>
               <integer name="height" value="400"/>
             </film>
           </sensor>"#,
    );
    let camera = load_xml("mitsuba_diagonal", &xml).unwrap().camera.unwrap();
    assert_eq!(camera.fov_axis, FovAxis::X);
    // tan(fov_x / 2) = tan(45°) * 300 / 500.
    let expected = 2.0 * 0.6f32.atan().to_degrees();
    assert!((camera.fov_deg - expected).abs() < 1e-4);
}

#[test]
fn mitsuba_ply_shape_and_spot_light() {
    let dir = scratch("mitsuba_ply_spot");
    let ply = "ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\n\
               property float y\nproperty float z\nelement face 1\n\
               property list uchar int vertex_indices\nend_header\n\
               0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n";
    write(&dir, "tri.ply", ply);
    let xml = r#"<scene version="3.0.0">
        <shape type="ply">
            <string name="filename" value="tri.ply"/>
            <boolean name="face_normals" value="true"/>
            <transform name="to_world"><translate z="-2"/></transform>
        </shape>
        <emitter type="spot">
            <transform name="to_world">
                <lookat origin="0, 5, 0" target="0, 0, 0" up="0, 0, 1"/>
            </transform>
            <float name="cutoff_angle" value="30"/>
            <rgb name="intensity" value="7"/>
        </emitter>
    </scene>"#;
    let scene = Scene::load(write(&dir, "scene.xml", xml)).unwrap();
    let [a, b, c] = first_triangle(&scene);
    assert_close(a, Vec3::new(0.0, 0.0, -2.0));
    assert_close(b, Vec3::new(1.0, 0.0, -2.0));
    assert_close(c, Vec3::new(0.0, 1.0, -2.0));
    let Light::Spot {
        position,
        direction,
        intensity,
        cos_falloff_start,
        cos_total_width,
    } = scene.lights[0]
    else {
        panic!("{:?}", scene.lights)
    };
    assert_close(position, Vec3::new(0.0, 5.0, 0.0));
    assert_close(direction, -Vec3::Y);
    assert_close(intensity, Rgb::splat(7.0));
    assert!((cos_total_width - 30f32.to_radians().cos()).abs() < 1e-6);
    assert!((cos_falloff_start - 22.5f32.to_radians().cos()).abs() < 1e-6);
}

// ---------------------------------------------------------------------------
// Mitsuba: malformed input

#[test]
fn mitsuba_malformed_xml_is_a_syntax_error_with_line_and_column() {
    let e = expect_error(
        load_xml(
            "mitsuba_bad_xml",
            "<scene version=\"3.0.0\">\n  <shape type=\"cube\">\n</scene>\n",
        ),
        ErrorKind::Syntax,
    );
    let location = e.location.unwrap();
    assert!(location.starts_with("line 3, column"), "{location}");
}

#[test]
fn mitsuba_missing_mesh_file_names_file_and_line() {
    let xml = scene_with(
        r#"<shape type="obj">
             <string name="filename" value="nowhere.obj"/>
           </shape>"#,
    );
    let e = expect_error(
        load_xml("mitsuba_missing_mesh", &xml),
        ErrorKind::MissingReference,
    );
    assert!(e.message.contains("nowhere.obj"), "{e}");
    assert_eq!(
        e.location.as_deref(),
        Some("<shape type=\"obj\"> at line 2")
    );
}

#[test]
fn mitsuba_unknown_ref_is_an_error() {
    let xml = scene_with(r#"<shape type="cube"><ref id="nothing"/></shape>"#);
    let e = expect_error(
        load_xml("mitsuba_unknown_ref", &xml),
        ErrorKind::MissingReference,
    );
    assert!(e.message.contains("nothing"), "{e}");
}

#[test]
fn mitsuba_bad_numbers_are_invalid_values_with_a_line() {
    for (test, body) in [
        (
            "mitsuba_bad_float",
            r#"<bsdf type="diffuse" id="a"><rgb name="reflectance" value="0.5, zero, 1"/></bsdf><shape type="cube"><ref id="a"/></shape>"#,
        ),
        (
            "mitsuba_nan",
            r#"<shape type="sphere"><float name="radius" value="nan"/></shape>"#,
        ),
        (
            "mitsuba_negative_radius",
            r#"<shape type="sphere"><float name="radius" value="-1"/></shape>"#,
        ),
        (
            "mitsuba_short_matrix",
            r#"<shape type="cube"><transform name="to_world"><matrix value="1 2 3"/></transform></shape>"#,
        ),
        (
            "mitsuba_undefined_default",
            r#"<shape type="cube"><float name="x" value="$nope"/></shape>"#,
        ),
    ] {
        let e = expect_error(load_xml(test, &scene_with(body)), ErrorKind::InvalidValue);
        assert!(e.location.unwrap().contains("at line 2"), "{test}");
    }
}

#[test]
fn mitsuba_wrong_root_and_empty_scene_are_errors() {
    expect_error(load_xml("mitsuba_root", "<world/>"), ErrorKind::Syntax);
    expect_error(
        load_xml("mitsuba_empty", "<scene version=\"3.0.0\"/>"),
        ErrorKind::Empty,
    );
}

#[test]
fn mitsuba_truncated_xml_never_panics() {
    let text = fs::read_to_string(data("mitsuba/features.xml")).unwrap();
    let dir = scratch("mitsuba_truncated");
    fs::copy(data("mitsuba/tent.obj"), dir.join("tent.obj")).unwrap();
    for cut in (0..text.len()).step_by(53) {
        let _ = Scene::load(write(&dir, "t.xml", &text[..cut]));
    }
}
