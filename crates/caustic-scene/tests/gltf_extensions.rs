//! glTF primitives and extensions beyond plain triangle lists: strips and
//! fans (read), points and lines (skipped by name), vertex colours and
//! `KHR_texture_transform` (ignored with a warning), Draco and other
//! required extensions (errors naming them). The fixture is a unit square
//! written by the tests.

mod common;

use caustic_scene::{ErrorKind, Scene, SceneError};
use common::scratch::*;

/// The unit square at z = 0 as one mesh whose primitive is `primitive`
/// (JSON members), instanced by `instances` nodes, with `extra` members in
/// the root. Accessors: 0 the four corners, 1 the u16 indices 0 1 2 3, 2
/// the u16 indices 0 1 3 2, 3 the corners again (as colours).
fn square_gltf(primitive: &str, instances: usize, extra: &str) -> String {
    let corners: [f32; 12] = [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0];
    let mut buffer: Vec<u8> = corners.iter().flat_map(|f| f.to_le_bytes()).collect();
    for i in [0u16, 1, 2, 3, 0, 1, 3, 2] {
        buffer.extend(i.to_le_bytes());
    }
    let nodes = vec![r#"{"mesh": 0}"#; instances].join(", ");
    let roots: Vec<String> = (0..instances).map(|i| i.to_string()).collect();
    format!(
        r#"{{
  "asset": {{"version": "2.0"}}, {extra}
  "scenes": [{{"nodes": [{roots}]}}],
  "nodes": [{nodes}],
  "meshes": [{{"name": "square", "primitives": [{{{primitive}}}]}}],
  "accessors": [
    {{"bufferView": 0, "componentType": 5126, "count": 4, "type": "VEC3", "min": [0, 0, 0], "max": [1, 1, 0]}},
    {{"bufferView": 1, "componentType": 5123, "count": 4, "type": "SCALAR"}},
    {{"bufferView": 2, "componentType": 5123, "count": 4, "type": "SCALAR"}},
    {{"bufferView": 0, "componentType": 5126, "count": 4, "type": "VEC3"}}
  ],
  "bufferViews": [
    {{"buffer": 0, "byteOffset": 0, "byteLength": 48}},
    {{"buffer": 0, "byteOffset": 48, "byteLength": 8}},
    {{"buffer": 0, "byteOffset": 56, "byteLength": 8}}
  ],
  "buffers": [{{"byteLength": {}, "uri": "data:application/octet-stream;base64,{}"}}]
}}"#,
        buffer.len(),
        base64(&buffer),
        roots = roots.join(", "),
    )
}

fn load_square(
    test: &str,
    primitive: &str,
    instances: usize,
    extra: &str,
) -> Result<Scene, SceneError> {
    let dir = scratch(test);
    Scene::load(write(
        &dir,
        "square.gltf",
        square_gltf(primitive, instances, extra),
    ))
}

/// Every triangle of the scene faces +z, and together they cover the
/// unit square once.
fn assert_covers_square_facing_up(scene: &Scene) {
    let mesh = &scene.meshes[0];
    let area: f32 = (0..mesh.indices.len())
        .map(|i| mesh.triangle(i).area())
        .sum();
    assert!((area - 1.0).abs() < 1e-6, "area {area}: {:?}", mesh.indices);
    for i in 0..mesh.indices.len() {
        assert!(mesh.triangle(i).cross().z > 0.0, "triangle {i} faces down");
    }
}

#[test]
fn gltf_triangle_strips_are_unrolled_keeping_the_winding() {
    let scene = load_square(
        "strip",
        r#""attributes": {"POSITION": 0}, "indices": 1, "mode": 5"#,
        1,
        "",
    )
    .unwrap();
    assert_eq!(scene.meshes[0].indices, [[0, 1, 2], [1, 3, 2]]);
    assert_covers_square_facing_up(&scene);
    // Without indices the vertices are the strip.
    let scene = load_square(
        "strip_plain",
        r#""attributes": {"POSITION": 0}, "mode": 5"#,
        1,
        "",
    )
    .unwrap();
    assert_covers_square_facing_up(&scene);
}

#[test]
fn gltf_triangle_fans_are_unrolled_keeping_the_winding() {
    let scene = load_square(
        "fan",
        r#""attributes": {"POSITION": 0}, "indices": 2, "mode": 6"#,
        1,
        "",
    )
    .unwrap();
    assert_eq!(scene.meshes[0].indices, [[1, 3, 0], [3, 2, 0]]);
    assert_covers_square_facing_up(&scene);
}

#[test]
fn gltf_points_and_lines_are_skipped_by_name() {
    for (mode, name) in [
        (0, "POINTS"),
        (1, "LINES"),
        (2, "LINE_LOOP"),
        (3, "LINE_STRIP"),
    ] {
        let primitive = format!(r#""attributes": {{"POSITION": 0}}, "mode": {mode}"#);
        let err = load_square(&format!("mode{mode}"), &primitive, 1, "").unwrap_err();
        // Nothing else is in the file: the error carries the reason.
        assert_eq!(err.kind, ErrorKind::Empty);
        assert!(
            err.to_string().contains(&format!(
                "mode {name} is not supported (caustic renders triangles, strips and fans); skipped"
            )),
            "{err}"
        );
    }
}

#[test]
fn gltf_vertex_colours_are_ignored_with_one_collapsed_warning() {
    let primitive = r#""attributes": {"POSITION": 0, "COLOR_0": 3}, "indices": 1, "mode": 5"#;
    let scene = load_square("colours", primitive, 37, "").unwrap();
    assert_eq!(scene.meshes.len(), 37);
    let colour: Vec<String> = scene
        .warnings
        .iter()
        .filter(|w| w.message.contains("COLOR_0"))
        .map(|w| w.to_string())
        .collect();
    assert_eq!(colour.len(), 1, "{colour:?}");
    assert!(
        colour[0].ends_with(
            "mesh 0 ('square') primitive 0: vertex colours (COLOR_0) are ignored (caustic shades with materials) (×37)"
        ),
        "{colour:?}"
    );
}

#[test]
fn gltf_required_draco_is_an_error_naming_it() {
    let extra = r#""extensionsUsed": ["KHR_draco_mesh_compression"],
                   "extensionsRequired": ["KHR_draco_mesh_compression"],"#;
    let err = load_square(
        "draco_required",
        r#""attributes": {"POSITION": 0}"#,
        1,
        extra,
    )
    .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Unsupported);
    assert!(
        err.message
            .contains("Draco-compressed meshes (KHR_draco_mesh_compression) are not supported"),
        "{err}"
    );
}

#[test]
fn gltf_optional_draco_reads_the_fallback_or_names_draco() {
    let extra = r#""extensionsUsed": ["KHR_draco_mesh_compression"],"#;
    // With uncompressed fallback accessors the file loads, with a warning.
    let scene = load_square(
        "draco_fallback",
        r#""attributes": {"POSITION": 0}, "indices": 1, "mode": 5"#,
        1,
        extra,
    )
    .unwrap();
    common::assert_warns(
        &scene,
        "KHR_draco_mesh_compression is not supported; reading the uncompressed fallback data",
    );
    // Without them (an accessor with no buffer view), the error says why.
    let dir = scratch("draco_no_fallback");
    let json = square_gltf(r#""attributes": {"POSITION": 4}"#, 1, extra).replace(
        r#""type": "VEC3"}
  ],"#,
        r#""type": "VEC3"},
    {"componentType": 5126, "count": 4, "type": "VEC3", "min": [0, 0, 0], "max": [1, 1, 0]}
  ],"#,
    );
    let err = Scene::load(write(&dir, "d.gltf", json)).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Unsupported, "{err}");
    assert!(err.message.contains("the mesh is Draco-compressed (KHR_draco_mesh_compression), which caustic does not decode"), "{err}");
}

#[test]
fn gltf_texture_transform_is_ignored_with_a_warning() {
    for (test, extra) in [
        ("tt_used", r#""extensionsUsed": ["KHR_texture_transform"],"#),
        (
            "tt_required",
            r#""extensionsUsed": ["KHR_texture_transform"], "extensionsRequired": ["KHR_texture_transform"],"#,
        ),
    ] {
        let scene = load_square(
            test,
            r#""attributes": {"POSITION": 0}, "indices": 1, "mode": 5"#,
            1,
            extra,
        )
        .unwrap();
        common::assert_warns(&scene, "KHR_texture_transform is ignored");
    }
}

#[test]
fn gltf_other_required_extensions_are_named() {
    let extra = r#""extensionsUsed": ["EXT_meshopt_compression"], "extensionsRequired": ["EXT_meshopt_compression"],"#;
    let err = load_square("meshopt", r#""attributes": {"POSITION": 0}"#, 1, extra).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Unsupported);
    assert!(
        err.message.contains(
            "requires glTF extension(s) caustic does not support: EXT_meshopt_compression"
        ),
        "{err}"
    );
}
