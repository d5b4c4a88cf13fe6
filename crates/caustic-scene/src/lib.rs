//! The scene model of caustic and its loaders.
//!
//! A [`Scene`] is triangle meshes with per-triangle materials, analytic
//! lights, an optional camera and film size. Area lights are not a separate
//! kind: any triangle whose material emits is an area light. Units are
//! radiometric (see `docs/ARCHITECTURE.md`): emission is radiance, point and
//! spot lights give intensity, directional lights irradiance.
//!
//! [`Scene::load`] picks a loader by file extension: Wavefront OBJ + MTL,
//! PLY (ASCII and binary), glTF 2.0 (`.gltf`, `.glb`, with animations),
//! the Mitsuba 3 XML subset of `refs/`, BART's AFF (`.aff`, animated), and
//! numbered mesh sequences (`frame_####.obj`). [`Scene::builtin`] makes
//! the scenes that need no file.
//!
//! Animated scenes are scenes posed at the start of their clock that carry
//! an [`Animation`]: [`Scene::at_time`], [`Scene::at_frame`] and
//! [`Scene::set_time`] pose them (see the [`animation`] module).
//! Loaders never panic on bad input: they return a [`SceneError`] naming the
//! file and the line or element, or record a [`Warning`] and skip the item.

pub mod animation;
mod builtin;
mod camera;
pub mod data_dirs;
mod error;
mod light;
mod loaders;
mod material;
mod mesh;
mod texture;

pub use animation::{Animation, DEFAULT_FPS, Timeline};
pub use builtin::BUILTIN_SCENES;
pub use camera::{Camera, FovAxis};
pub use error::{ErrorKind, SceneError, Warning};
pub use light::Light;
pub use material::{Bsdf, Material};
pub use mesh::Mesh;
pub use texture::{Texture, TextureId};

use caustic_geom::{Aabb, Rgb, Triangle};
use std::path::Path;
use std::sync::Arc;

/// Image size a scene file asks for (Mitsuba's `<film>`, a glTF camera's
/// aspect ratio does not set it). The CLI's `--width/--height` override it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FilmSize {
    pub width: u32,
    pub height: u32,
}

/// A renderable scene.
#[derive(Clone, Debug, Default)]
pub struct Scene {
    pub meshes: Vec<Mesh>,
    /// Indexed by [`Mesh::material_ids`]. Never empty once a loader returns.
    pub materials: Vec<Material>,
    pub textures: Vec<Texture>,
    pub lights: Vec<Light>,
    pub camera: Option<Camera>,
    pub film: Option<FilmSize>,
    /// Radiance of rays that leave the scene.
    pub background: Rgb,
    /// What the loader skipped or changed, one line each.
    pub warnings: Vec<Warning>,
    /// Triangles the file has but the scene dropped (zero area, or NaN or
    /// infinite coordinates); the ray protocol still counts them.
    pub skipped_triangles: usize,
    /// What moves, for an animated scene (`None`: a still scene). The
    /// fields above hold the scene posed at the start of its clock; see
    /// [`Scene::at_time`] and the [`animation`] module.
    pub animation: Option<Arc<Animation>>,
}

impl Scene {
    /// Loads a scene file, choosing the loader by extension
    /// (`obj`, `ply`, `gltf`, `glb`, `xml`, `aff`). A file name with a run
    /// of `#` (`frames/frame_####.obj`) loads the numbered files it matches
    /// as the frames of an animation (see [`Scene::is_sequence_pattern`]).
    pub fn load(path: impl AsRef<Path>) -> Result<Scene, SceneError> {
        loaders::load(path.as_ref())
    }

    /// Whether `path` names a numbered mesh sequence rather than a file: a
    /// run of `#` in its file name, and no file of that exact name.
    pub fn is_sequence_pattern(path: impl AsRef<Path>) -> bool {
        let path = path.as_ref();
        !path.exists() && loaders::is_sequence_pattern(path)
    }

    /// A built-in scene by name (see [`BUILTIN_SCENES`]).
    pub fn builtin(name: &str) -> Option<Scene> {
        builtin::make(name)
    }

    pub fn triangle_count(&self) -> usize {
        self.meshes.iter().map(|m| m.indices.len()).sum()
    }

    pub fn bounds(&self) -> Aabb {
        self.meshes
            .iter()
            .fold(Aabb::EMPTY, |b, m| b.union(m.bounds()))
    }

    /// All triangles of all meshes, in mesh order then triangle order: the
    /// scene's triangle numbering, used by hits and acceleration structures.
    pub fn triangles(&self) -> Vec<Triangle> {
        let mut out = Vec::with_capacity(self.triangle_count());
        for mesh in &self.meshes {
            out.extend((0..mesh.indices.len()).map(|i| mesh.triangle(i)));
        }
        out
    }

    /// The scene's camera, or one that frames its bounds from above and in
    /// front ([`Camera::framing`]) when the file has none.
    pub fn camera_or_default(&self) -> Camera {
        self.camera
            .unwrap_or_else(|| Camera::framing(self.bounds()))
    }

    /// Indices of materials that emit light (area-light materials).
    pub fn emissive_materials(&self) -> impl Iterator<Item = usize> + '_ {
        self.materials
            .iter()
            .enumerate()
            .filter(|(_, m)| m.is_emissive())
            .map(|(i, _)| i)
    }
}
