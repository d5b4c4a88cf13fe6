//! The standard scenes (`shared/scenes`, found through
//! `caustic_scene::data_dirs`) that the GPU trace tests use, with the cameras of `shared/scenes/README.md`, and the
//! 16-dragon scene of the OptiX anchor (`shared/anchors/gpu/optix_anchor.py`).
//! Used by `tests/gpu_trace.rs`; `caustic bench gpu` loads the same files
//! with the same cameras (`caustic-cli/src/scene_arg.rs`).

#![allow(dead_code)] // each includer uses its own part

use caustic_geom::protocol::{self, ProtocolCamera};
use caustic_geom::{Triangle, Vec3};
use caustic_scene::{Camera, Scene, data_dirs};

/// A scene file under the scenes folder and the camera its README gives.
pub struct StandardScene {
    pub name: &'static str,
    pub file: &'static str,
    pub eye: [f32; 3],
    pub at: [f32; 3],
    pub up: [f32; 3],
    pub fov_deg: f32,
}

const Y: [f32; 3] = [0.0, 1.0, 0.0];
const Z: [f32; 3] = [0.0, 0.0, 1.0];

/// Every standard scene, small to large.
pub const SCENES: &[StandardScene] = &[
    StandardScene {
        name: "cornell-box",
        file: "cornell-box/cornell_box.obj",
        eye: [278.0, 273.0, -800.0],
        at: [278.0, 273.0, 0.0],
        up: Y,
        fov_deg: 39.3,
    },
    StandardScene {
        name: "cornell-sphere",
        file: "cornell-box/mcguire/CornellBox-Sphere.obj",
        eye: [0.0, 0.8, 3.4],
        at: [0.0, 0.8, 0.0],
        up: Y,
        fov_deg: 39.3,
    },
    StandardScene {
        name: "mn-cardioid",
        file: "caustics-mnrt/MNCardioid.obj",
        eye: [-7.0, 7.0, 7.0],
        at: [0.0, 0.0, 0.0],
        up: Y,
        fov_deg: 45.0,
    },
    StandardScene {
        name: "mn-ring",
        file: "caustics-mnrt/MNRing.obj",
        eye: [-6.0, 6.0, 6.0],
        at: [0.0, 0.0, 0.0],
        up: Y,
        fov_deg: 45.0,
    },
    StandardScene {
        name: "sponza",
        file: "sponza-dabrovic/sponza.obj",
        eye: [-14.0, 0.0, 2.5],
        at: [0.0, 0.0, 4.0],
        up: Z,
        fov_deg: 65.0,
    },
    StandardScene {
        name: "conference",
        file: "conference-69k/conference.obj",
        eye: [-850.0, -550.0, 480.0],
        at: [700.0, 350.0, 100.0],
        up: Z,
        fov_deg: 65.0,
    },
    StandardScene {
        name: "bunny",
        file: "bunny/bun_zipper.ply",
        eye: [0.1031, 0.1959, 0.3413],
        at: [-0.0168, 0.1102, -0.0015],
        up: Y,
        fov_deg: 40.0,
    },
    StandardScene {
        name: "sibenik",
        file: "sibenik/sibenik.obj",
        eye: [-17.0, -9.0, 0.0],
        at: [10.0, -11.0, 0.0],
        up: Y,
        fov_deg: 65.0,
    },
    StandardScene {
        name: "buddha-100k",
        file: "buddha-100k/buddha_100k.obj",
        eye: [1.0434, 0.7718, 3.2197],
        at: [-0.0544, -0.0124, 0.0831],
        up: Y,
        fov_deg: 40.0,
    },
    StandardScene {
        name: "dragon",
        file: "dragon/dragon_vrip.ply",
        eye: [0.1221, 0.2164, 0.3610],
        at: [-0.0059, 0.1250, -0.0046],
        up: Y,
        fov_deg: 40.0,
    },
];

pub fn scene(name: &str) -> &'static StandardScene {
    SCENES
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no standard scene {name}"))
}

/// A loaded scene: its triangles in scene numbering and the protocol camera.
pub struct Loaded {
    pub name: String,
    pub triangles: Vec<Triangle>,
    pub camera: ProtocolCamera,
}

impl StandardScene {
    /// The protocol camera as `caustic bench accel` makes it: the README's
    /// numbers as `f32` (`Camera`), widened to `f64`.
    pub fn camera(&self) -> ProtocolCamera {
        let v = |a: [f32; 3]| Vec3::from_array(a);
        let c = Camera::look_at(v(self.eye), v(self.at), v(self.up), self.fov_deg);
        ProtocolCamera::from_f32(c.eye, c.target, c.up, c.fov_deg)
    }

    /// Loads the scene, or `None` (saying why) when its file is absent.
    pub fn load(&self) -> Option<Loaded> {
        let path = data_dirs::scene_file(self.file)?;
        let scene = Scene::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        Some(Loaded {
            name: self.name.to_owned(),
            triangles: scene.triangles(),
            camera: self.camera(),
        })
    }
}

/// `copies` copies of `mesh` on a square grid with the anchor's framing
/// camera (`caustic_geom::protocol::replicate_grid` and `framing_camera`,
/// as `optix_anchor.py` does): 16 dragons make its 14 M-triangle scene.
pub fn replicated(mesh: &Loaded, copies: usize, fov_deg: f64) -> Loaded {
    let triangles = protocol::replicate_grid(&mesh.triangles, copies);
    let side = (copies as f64).sqrt() as usize;
    Loaded {
        name: format!("{}x{}", mesh.name, side * side),
        camera: protocol::framing_camera(&triangles, fov_deg),
        triangles,
    }
}

/// The protocol camera as the GPU generator takes it.
pub fn gpu_camera(camera: &ProtocolCamera) -> caustic_accel::protocol_cuda::PrimaryCamera {
    caustic_accel::protocol_cuda::PrimaryCamera {
        eye: camera.eye,
        look_at: camera.look_at,
        up: camera.up,
        fov_deg: camera.fov_deg,
    }
}

/// The end of a test over the standard scenes: says how many were
/// checked, fails when scenes are missing under `CAUSTIC_REQUIRE_SCENES`,
/// and fails with every failure line.
pub fn finish(checked: usize, failures: &[String]) {
    eprintln!("{checked} of {} standard scenes checked", SCENES.len());
    if std::env::var_os("CAUSTIC_REQUIRE_SCENES").is_some() {
        assert_eq!(checked, SCENES.len(), "scenes are missing");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
