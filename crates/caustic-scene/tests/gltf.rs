//! The glTF 2.0 loader: what it reads, the conventions it follows, and how
//! it fails on malformed input (errors, never panics). Fixtures are written
//! by the tests: JSON with a base64 buffer, and a GLB built from the same
//! JSON and buffer.

mod common;

use caustic_geom::{Rgb, Vec3};
use caustic_scene::{Bsdf, ErrorKind, FovAxis, Light, Scene};
use common::scratch::*;
use std::fs;

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
    assert!(has_warning(&scene, "mode LINES is not supported"));
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
