//! Scenes that need no file: the Cornell boxes of `refs/`, built in code.
//!
//! `cornell-box` and `cornell-caustics` are the reference scenes of
//! `refs/README.md` exactly (same triangles in the same order, materials,
//! light, camera, film), so a render of a built-in scene can be compared
//! with the reference images without the scene files.

mod cornell;
mod icosphere;

pub(crate) use icosphere::{SPHERE_LEVEL, icosphere};

use crate::Scene;

/// Names and one-line descriptions of the built-in scenes.
pub const BUILTIN_SCENES: &[(&str, &str)] = &[
    (
        "cornell-box",
        "Cornell box with two diffuse boxes (refs/cornell-box), 36 triangles",
    ),
    (
        "cornell-caustics",
        "Cornell box with a mirror and a glass sphere (refs/cornell-caustics), 40972 triangles",
    ),
    (
        "cornell-caustics-moving",
        "cornell-caustics with the glass sphere hopping across the floor and back: 121 frames over 4 s (30 fps)",
    ),
];

pub(crate) fn make(name: &str) -> Option<Scene> {
    match name {
        "cornell-box" => Some(cornell::cornell_box()),
        "cornell-caustics" => Some(cornell::cornell_caustics()),
        "cornell-caustics-moving" => Some(cornell::cornell_caustics_moving()),
        _ => None,
    }
}
