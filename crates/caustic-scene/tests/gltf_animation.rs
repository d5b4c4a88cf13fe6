//! glTF 2.0 animations on small generated files: translation, rotation and
//! scale channels with STEP, LINEAR and CUBICSPLINE samplers, children of
//! animated nodes, morph-target weights and a skin.

mod common;

use caustic_geom::Vec3;
use caustic_scene::Scene;
use common::*;

/// A glTF file under construction: one binary buffer (written beside the
/// JSON) and its views and accessors.
#[derive(Default)]
struct Builder {
    bin: Vec<u8>,
    accessors: Vec<String>,
}

impl Builder {
    /// An accessor over `data` (floats, or u16 when `joints`).
    fn floats(&mut self, data: &[f32], ty: &str, min_max: bool) -> usize {
        let width = match ty {
            "SCALAR" => 1,
            "VEC3" => 3,
            "VEC4" => 4,
            _ => unreachable!(),
        };
        let offset = self.bin.len();
        for x in data {
            self.bin.extend_from_slice(&x.to_le_bytes());
        }
        let bounds = if min_max {
            let col = |k: usize, f: fn(f32, f32) -> f32| {
                data.chunks(width).map(|c| c[k]).fold(data[k], f)
            };
            let min: Vec<String> = (0..width).map(|k| col(k, f32::min).to_string()).collect();
            let max: Vec<String> = (0..width).map(|k| col(k, f32::max).to_string()).collect();
            format!(r#","min":[{}],"max":[{}]"#, min.join(","), max.join(","))
        } else {
            String::new()
        };
        self.accessor(offset, 5126, data.len() / width, ty, &bounds)
    }

    fn joints(&mut self, data: &[u16]) -> usize {
        let offset = self.bin.len();
        for x in data {
            self.bin.extend_from_slice(&x.to_le_bytes());
        }
        while !self.bin.len().is_multiple_of(4) {
            self.bin.push(0);
        }
        self.accessor(offset, 5123, data.len() / 4, "VEC4", "")
    }

    fn accessor(
        &mut self,
        offset: usize,
        component: u32,
        count: usize,
        ty: &str,
        extra: &str,
    ) -> usize {
        self.accessors.push(format!(
            r#"{{"bufferView":VIEW,"byteOffset":{offset},"componentType":{component},"count":{count},"type":"{ty}"{extra}}}"#
        ));
        self.accessors.len() - 1
    }

    /// Writes `scene.gltf` + `scene.bin` with the given JSON parts and loads it.
    fn load(self, meshes: &str, nodes: &str, extra: &str) -> Scene {
        let dir = TempDir::new();
        dir.write("scene.bin", &self.bin);
        let accessors = self.accessors.join(",").replace("VIEW", "0");
        let json = format!(
            r#"{{"asset":{{"version":"2.0"}},"scene":0,"scenes":[{{"nodes":[0]}}],
            "buffers":[{{"uri":"scene.bin","byteLength":{len}}}],
            "bufferViews":[{{"buffer":0,"byteLength":{len}}}],
            "accessors":[{accessors}],"meshes":[{meshes}],"nodes":[{nodes}]{extra}}}"#,
            len = self.bin.len()
        );
        Scene::load(dir.write("scene.gltf", json)).unwrap_or_else(|e| panic!("{e}"))
    }
}

const TRIANGLE: [f32; 9] = [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0];

fn close(a: Vec3, b: Vec3) -> bool {
    (a - b).length() < 1e-4
}

/// One triangle on node 0 and one channel of `path` on node `target`
/// (node 1, a child of node 0, holds a second triangle).
fn one_channel(path: &str, interpolation: &str, times: &[f32], values: &[f32]) -> Scene {
    let mut b = Builder::default();
    let pos = b.floats(&TRIANGLE, "VEC3", true);
    let ty = if path == "rotation" { "VEC4" } else { "VEC3" };
    let input = b.floats(times, "SCALAR", true);
    let output = b.floats(values, ty, false);
    let meshes = format!(r#"{{"primitives":[{{"attributes":{{"POSITION":{pos}}}}}]}}"#);
    let nodes = r#"{"mesh":0,"children":[1]},{"mesh":0,"translation":[0,0,5]}"#;
    let animations = format!(
        r#","animations":[{{"channels":[{{"sampler":0,"target":{{"node":0,"path":"{path}"}}}}],
        "samplers":[{{"input":{input},"output":{output},"interpolation":"{interpolation}"}}]}}]"#
    );
    b.load(&meshes, nodes, &animations)
}

#[test]
fn linear_translation_moves_the_node_and_its_children() {
    let scene = one_channel(
        "translation",
        "LINEAR",
        &[0.0, 1.0],
        &[0.0, 0.0, 0.0, 2.0, 0.0, 0.0],
    );
    let clock = scene.timeline().unwrap();
    assert_eq!((clock.start, clock.end, clock.frames), (0.0, 1.0, 31));
    let animation = scene.animation.as_ref().unwrap();
    assert_eq!(animation.moving_meshes(), [0, 1]);
    let mid = scene.at_time(0.5);
    assert!(close(mid.meshes[0].positions[1], Vec3::new(2.0, 0.0, 0.0)));
    assert!(close(mid.meshes[1].positions[0], Vec3::new(1.0, 0.0, 5.0)));
    assert!(close(
        scene.at_time(7.0).meshes[0].positions[0],
        Vec3::new(2.0, 0.0, 0.0)
    ));
}

#[test]
fn step_holds_until_the_next_key() {
    let scene = one_channel(
        "translation",
        "STEP",
        &[0.0, 1.0],
        &[0.0, 0.0, 0.0, 2.0, 0.0, 0.0],
    );
    assert_eq!(scene.at_time(0.99).meshes[0].positions[0], Vec3::ZERO);
    assert!(close(
        scene.at_time(1.0).meshes[0].positions[0],
        Vec3::new(2.0, 0.0, 0.0)
    ));
}

/// CUBICSPLINE keys are (in-tangent, value, out-tangent); zero tangents
/// ease in and out: a quarter of the way the value is smoothstep(0.25).
#[test]
fn cubic_spline_translation() {
    let zero = [0.0; 3];
    let values = [zero, zero, zero, zero, [4.0, 0.0, 0.0], zero].concat();
    let scene = one_channel("translation", "CUBICSPLINE", &[0.0, 2.0], &values);
    let x = scene.at_time(0.5).meshes[0].positions[0].x;
    assert!((x - 4.0 * 0.15625).abs() < 1e-4, "{x}");
}

#[test]
fn linear_rotation_slerps() {
    let h = std::f32::consts::FRAC_1_SQRT_2;
    let values = [0.0, 0.0, 0.0, 1.0, 0.0, h, 0.0, h];
    let scene = one_channel("rotation", "LINEAR", &[0.0, 1.0], &values);
    // Vertex (1,0,0) turned 45° about +y.
    let p = scene.at_time(0.5).meshes[0].positions[1];
    assert!(close(p, Vec3::new(h, 0.0, -h)), "{p}");
}

#[test]
fn scale_channel() {
    let scene = one_channel(
        "scale",
        "LINEAR",
        &[0.0, 1.0],
        &[1.0, 1.0, 1.0, 3.0, 3.0, 3.0],
    );
    assert!(close(
        scene.at_time(0.5).meshes[0].positions[2],
        Vec3::new(0.0, 2.0, 0.0)
    ));
}

/// A morph target lifting every vertex by 1, its weight keyed 0 → 1.
#[test]
fn morph_target_weights() {
    let mut b = Builder::default();
    let pos = b.floats(&TRIANGLE, "VEC3", true);
    let lift = b.floats(&[0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0], "VEC3", true);
    let input = b.floats(&[0.0, 1.0], "SCALAR", true);
    let output = b.floats(&[0.0, 1.0], "SCALAR", false);
    let meshes = format!(
        r#"{{"primitives":[{{"attributes":{{"POSITION":{pos}}},"targets":[{{"POSITION":{lift}}}]}}],"weights":[0]}}"#
    );
    let animations = format!(
        r#","animations":[{{"channels":[{{"sampler":0,"target":{{"node":0,"path":"weights"}}}}],
        "samplers":[{{"input":{input},"output":{output}}}]}}]"#
    );
    let scene = b.load(&meshes, r#"{"mesh":0}"#, &animations);
    assert_eq!(scene.meshes[0].positions[0], Vec3::ZERO);
    assert!(close(
        scene.at_time(0.25).meshes[0].positions[0],
        Vec3::new(0.0, 0.25, 0.0)
    ));
}

/// A skinned triangle: vertex 0 follows joint 1 (translated by its
/// channel), the others joint 0 (still); the skinned node's own transform
/// is ignored.
#[test]
fn skinned_mesh_follows_its_joints() {
    let mut b = Builder::default();
    let pos = b.floats(&TRIANGLE, "VEC3", true);
    let joints = b.joints(&[1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    let weights = b.floats(
        &[1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0],
        "VEC4",
        false,
    );
    let input = b.floats(&[0.0, 1.0], "SCALAR", true);
    let output = b.floats(&[0.0, 0.0, 0.0, 0.0, 0.0, 4.0], "VEC3", false);
    let meshes = format!(
        r#"{{"primitives":[{{"attributes":{{"POSITION":{pos},"JOINTS_0":{joints},"WEIGHTS_0":{weights}}}}}]}}"#
    );
    let nodes = r#"{"mesh":0,"skin":0,"translation":[9,9,9],"children":[1,2]},{},{}"#;
    let extra = format!(
        r#","skins":[{{"joints":[1,2]}}],"animations":[{{"channels":[{{"sampler":0,"target":{{"node":2,"path":"translation"}}}}],
        "samplers":[{{"input":{input},"output":{output}}}]}}]"#
    );
    let scene = b.load(&meshes, nodes, &extra);
    let posed = scene.at_time(0.5);
    let p = &posed.meshes[0].positions;
    // Joints 1 and 2 are children of the skinned node (at 9,9,9).
    assert!(close(p[0], Vec3::new(9.0, 9.0, 11.0)), "{p:?}");
    assert!(close(p[1], Vec3::new(10.0, 9.0, 9.0)), "{p:?}");
}

#[test]
fn files_without_animations_stay_still() {
    let mut b = Builder::default();
    let pos = b.floats(&TRIANGLE, "VEC3", true);
    let meshes = format!(r#"{{"primitives":[{{"attributes":{{"POSITION":{pos}}}}}]}}"#);
    let scene = b.load(&meshes, r#"{"mesh":0}"#, "");
    assert!(!scene.is_animated());
}

#[test]
fn malformed_channels_are_errors() {
    let mut b = Builder::default();
    let pos = b.floats(&TRIANGLE, "VEC3", true);
    let input = b.floats(&[0.0, 1.0, 2.0], "SCALAR", true);
    let output = b.floats(&[0.0, 0.0, 0.0, 2.0, 0.0, 0.0], "VEC3", false);
    let meshes = format!(r#"{{"primitives":[{{"attributes":{{"POSITION":{pos}}}}}]}}"#);
    let animations = format!(
        r#","animations":[{{"channels":[{{"sampler":0,"target":{{"node":0,"path":"translation"}}}}],
        "samplers":[{{"input":{input},"output":{output}}}]}}]"#
    );
    let dir = TempDir::new();
    dir.write("scene.bin", &b.bin);
    let accessors = b.accessors.join(",").replace("VIEW", "0");
    let json = format!(
        r#"{{"asset":{{"version":"2.0"}},"scenes":[{{"nodes":[0]}}],"buffers":[{{"uri":"scene.bin","byteLength":{len}}}],
        "bufferViews":[{{"buffer":0,"byteLength":{len}}}],"accessors":[{accessors}],"meshes":[{meshes}],"nodes":[{{"mesh":0}}]{animations}}}"#,
        len = b.bin.len()
    );
    let err = Scene::load(dir.write("bad.gltf", json)).unwrap_err();
    assert!(err.to_string().contains("animation 0 channel 0"), "{err}");
}
