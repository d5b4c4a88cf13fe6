//! Named cameras for the standard test scenes, most of which carry no
//! camera of their own. They are used only when asked for: `--camera NAME`,
//! or `--camera standard`, which picks each scene's preset by its file name
//! (for benchmark runs over several scenes). A scene is never given one
//! silently because of what its file is called.

use caustic_geom::Vec3;
use caustic_scene::Camera;

/// One preset: its name, the scene files it frames, and the camera.
pub struct Preset {
    pub name: &'static str,
    pub files: &'static [&'static str],
    eye: [f32; 3],
    at: [f32; 3],
    up: [f32; 3],
    fov_deg: f32,
}

impl Preset {
    pub fn camera(&self) -> Camera {
        Camera::look_at(
            Vec3::from(self.eye),
            Vec3::from(self.at),
            Vec3::from(self.up),
            self.fov_deg,
        )
    }
}

const Y: [f32; 3] = [0.0, 1.0, 0.0];
const Z: [f32; 3] = [0.0, 0.0, 1.0];

/// The standard scenes' cameras: right-handed look-at, vertical fov.
pub const PRESETS: &[Preset] = &[
    Preset {
        name: "cornell-mm",
        files: &["cornell_box.obj"],
        eye: [278.0, 273.0, -800.0],
        at: [278.0, 273.0, 0.0],
        up: Y,
        fov_deg: 39.3,
    },
    Preset {
        name: "cornell-original",
        files: &[
            "CornellBox-Original.obj",
            "CornellBox-Mirror.obj",
            "CornellBox-Empty-RG.obj",
        ],
        eye: [0.0, 1.0, 3.9],
        at: [0.0, 1.0, 0.0],
        up: Y,
        fov_deg: 39.3,
    },
    Preset {
        name: "cornell-sphere",
        files: &[
            "CornellBox-Sphere.obj",
            "CornellBox-Water.obj",
            "CornellBox-Glossy.obj",
        ],
        eye: [0.0, 0.8, 3.4],
        at: [0.0, 0.8, 0.0],
        up: Y,
        fov_deg: 39.3,
    },
    Preset {
        name: "bunny",
        files: &["bun_zipper.ply"],
        eye: [0.1031, 0.1959, 0.3413],
        at: [-0.0168, 0.1102, -0.0015],
        up: Y,
        fov_deg: 40.0,
    },
    Preset {
        name: "dragon",
        files: &[
            "dragon_vrip.ply",
            "dragon_vrip_res2.ply",
            "dragon_vrip_res3.ply",
            "dragon_vrip_res4.ply",
        ],
        eye: [0.1221, 0.2164, 0.3610],
        at: [-0.0059, 0.1250, -0.0046],
        up: Y,
        fov_deg: 40.0,
    },
    Preset {
        name: "buddha",
        files: &["buddha_100k.obj"],
        eye: [1.0434, 0.7718, 3.2197],
        at: [-0.0544, -0.0124, 0.0831],
        up: Y,
        fov_deg: 40.0,
    },
    Preset {
        name: "sponza",
        files: &["sponza.obj"],
        eye: [-14.0, 0.0, 2.5],
        at: [0.0, 0.0, 4.0],
        up: Z,
        fov_deg: 65.0,
    },
    Preset {
        name: "sibenik",
        files: &["sibenik.obj"],
        eye: [-17.0, -9.0, 0.0],
        at: [10.0, -11.0, 0.0],
        up: Y,
        fov_deg: 65.0,
    },
    Preset {
        name: "conference",
        files: &["conference.obj"],
        eye: [-850.0, -550.0, 480.0],
        at: [700.0, 350.0, 100.0],
        up: Z,
        fov_deg: 65.0,
    },
    Preset {
        name: "mn-cardioid",
        files: &["MNCardioid.obj"],
        eye: [-7.0, 7.0, 7.0],
        at: [0.0, 0.0, 0.0],
        up: Y,
        fov_deg: 45.0,
    },
    Preset {
        name: "mn-ring",
        files: &["MNRing.obj"],
        eye: [-6.0, 6.0, 6.0],
        at: [0.0, 0.0, 0.0],
        up: Y,
        fov_deg: 45.0,
    },
];

/// The preset called `name`.
pub fn by_name(name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.name == name)
}

/// The preset made for a scene file called `file_name`.
pub fn for_file(file_name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.files.contains(&file_name))
}

/// The names, comma separated, for error messages.
pub fn names() -> String {
    PRESETS
        .iter()
        .map(|p| p.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The `--help` section on choosing a camera: the sources in order, the
/// camera-file format, and every preset with the files it frames.
pub fn help() -> String {
    let mut help = String::from(
        "Camera: --eye/--at (with --up, --fov) win; else --camera; else a camera file next to \
         the scene, named after it plus `.camera` (sponza.obj -> sponza.obj.camera); else the \
         scene's own camera; else a 3/4 view from above framing the scene's bounds.\n\
         A camera file holds `key = value` lines (`#` starts a comment):\n  \
         eye = -14, 0, 2.5\n  at = 0, 0, 4\n  up = 0, 0, 1      # optional, default 0, 1, 0\n  \
         fov = 65          # optional, vertical degrees, default 45\n\
         --camera PRESET for the standard test scenes (`--camera standard` picks each scene's \
         by its file name):\n",
    );
    for preset in PRESETS {
        help.push_str(&format!(
            "  {:<17} {}\n",
            preset.name,
            preset.files.join(", ")
        ));
    }
    help
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_is_a_valid_camera_with_a_unique_name_and_files() {
        for (i, preset) in PRESETS.iter().enumerate() {
            assert!(preset.camera().is_valid(), "{}", preset.name);
            assert_ne!(preset.name, "standard", "a reserved word");
            for other in &PRESETS[i + 1..] {
                assert_ne!(preset.name, other.name);
                assert!(preset.files.iter().all(|f| !other.files.contains(f)));
            }
        }
        assert_eq!(for_file("sponza.obj").unwrap().name, "sponza");
        assert!(for_file("my-sponza.obj").is_none());
        assert_eq!(by_name("dragon").unwrap().files[0], "dragon_vrip.ply");
    }
}
