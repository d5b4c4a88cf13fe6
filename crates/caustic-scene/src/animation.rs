//! Scenes that move: a clock ([`Timeline`]) and the description of what
//! moves ([`Animation`]), from which a static [`Scene`] is posed at any
//! instant.
//!
//! An animated scene is an ordinary [`Scene`] posed at the start of its
//! clock, carrying its [`Animation`] in [`Scene::animation`]. Code that
//! ignores time sees the first frame; code that renders frames asks for
//! snapshots ([`Scene::at_time`], [`Scene::at_frame`]) or poses a scene in
//! place ([`Scene::set_time`]), which rewrites only what moves: the
//! positions and normals of [`Animation::moving_meshes`], the camera and
//! the animated lights. Unless the animation replaces whole meshes
//! ([`Animation::fixed_topology`] false: numbered mesh sequences), every
//! pose has the same meshes, triangles, vertex indices and materials in
//! the same order, so acceleration structures can be refit.
//!
//! What moves is described once, by source-independent parts:
//! - a transform hierarchy (`graph`): static matrices, TCB-keyed
//!   transforms (AFF, [`spline`]) and glTF sampled channels ([`sampler`]);
//! - mesh tracks: a mesh's rest (local) geometry, the node that places it
//!   and its deformation (per-vertex keys of AFF `tpa`, glTF morph targets
//!   and skins);
//! - camera and light tracks (a keyed path or a node);
//! - for mesh sequences, the meshes of every frame.

pub(crate) mod graph;
pub mod sampler;
pub mod spline;

use graph::GraphNode;

use crate::{Camera, Light, Mesh, Scene};
use caustic_geom::{Mat3, Mat4, Vec3};
use spline::{RotationSpline, VectorSpline};

/// Frames per second given to clocks whose file names none (glTF, mesh
/// sequences, the built-in moving scene).
pub const DEFAULT_FPS: f32 = 30.0;

/// The clock of an animated scene: `frames` instants from `start` to `end`
/// seconds, both included, evenly spaced (AFF's `a start end frames`,
/// whose step is `(end - start) / (frames - 1)`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timeline {
    pub start: f32,
    pub end: f32,
    pub frames: u32,
}

impl Timeline {
    /// A clock of `duration` seconds from 0 at `fps` frames per second
    /// (the frame count rounded, at least 1).
    pub fn from_duration(duration: f32, fps: f32) -> Self {
        let duration = if duration.is_finite() {
            duration.max(0.0)
        } else {
            0.0
        };
        let steps = (duration * fps).round();
        let frames = if steps.is_finite() && steps < u32::MAX as f32 {
            steps as u32 + 1
        } else {
            1
        };
        Self {
            start: 0.0,
            end: duration,
            frames,
        }
    }

    /// Length of the clock in seconds.
    pub fn duration(&self) -> f32 {
        self.end - self.start
    }

    /// Frames per second, `(frames - 1) / duration`; `None` for a clock of
    /// one frame or no duration.
    pub fn fps(&self) -> Option<f32> {
        (self.frames > 1 && self.duration() > 0.0)
            .then(|| (self.frames - 1) as f32 / self.duration())
    }

    /// The instant of frame `frame` (0-based; later frames clamp to `end`).
    pub fn time_of_frame(&self, frame: u32) -> f32 {
        if self.frames <= 1 {
            return self.start;
        }
        let f = frame.min(self.frames - 1) as f64 / (self.frames - 1) as f64;
        (self.start as f64 + f * (self.end - self.start) as f64) as f32
    }

    /// The frame nearest to instant `t` (clamped to the clock).
    pub fn frame_at(&self, t: f32) -> u32 {
        if self.frames <= 1 || self.duration() <= 0.0 || t.is_nan() {
            return 0;
        }
        let f = (t - self.start) / self.duration() * (self.frames - 1) as f32;
        f.round().clamp(0.0, (self.frames - 1) as f32) as u32
    }
}

/// How a deforming mesh's vertices move before its node places it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Deform {
    /// AFF `tpa`: triangle `i` owns vertices `3i..3i+3`, keyed in time.
    pub vertex_keys: Option<Vec<TriangleKeys>>,
    pub morph: Option<Morph>,
    pub skin: Option<Skin>,
}

/// One AFF animated triangle: times and, per time, three corners
/// (position, normal), interpolated linearly (AFF description, `tpa`).
#[derive(Clone, Debug)]
pub(crate) struct TriangleKeys {
    pub times: Vec<f32>,
    pub corners: Vec<[(Vec3, Vec3); 3]>,
}

/// glTF morph targets: per target, position and normal offsets per vertex
/// (normals empty when absent), blended by weights that a sampler may
/// animate (glTF 2.0, section 3.7.2.2).
#[derive(Clone, Debug)]
pub(crate) struct Morph {
    pub positions: Vec<Vec<Vec3>>,
    pub normals: Vec<Vec<Vec3>>,
    pub default_weights: Vec<f32>,
    pub weights: Option<sampler::Sampler>,
}

/// glTF skin (section 3.7.3): each vertex is placed by up to four joints,
/// `Σ w_i · world(joint_i) · inverse_bind_i`; the skinned node's own
/// transform is ignored, as the specification requires.
#[derive(Clone, Debug)]
pub(crate) struct Skin {
    /// Graph node of each joint.
    pub joints: Vec<u32>,
    pub inverse_bind: Vec<Mat4>,
    /// Per vertex: four (joint slot, weight) pairs.
    pub influences: Vec<[(u16, f32); 4]>,
}

/// A mesh of the scene that moves: its rest geometry, the node that places
/// it (`None`: already in world space) and how it deforms.
#[derive(Clone, Debug)]
pub(crate) struct MeshTrack {
    /// Index into `Scene::meshes`.
    pub mesh: usize,
    pub node: Option<u32>,
    pub rest_positions: Vec<Vec3>,
    /// Empty, or one per position.
    pub rest_normals: Vec<Vec3>,
    pub deform: Deform,
}

/// How the camera moves.
#[derive(Clone, Debug)]
pub(crate) enum CameraTrack {
    /// AFF `k camera`: the eye follows the translation; the rotation turns
    /// the view direction (-z) and up (+y) (BART's `GetCamera`). Either may
    /// be absent, leaving the file's `v` value.
    Keyed {
        translation: Option<VectorSpline>,
        rotation: Option<RotationSpline>,
    },
    /// A glTF camera on an animated node: eye at the node's origin, looking
    /// down its -z with +y up.
    Node(u32),
}

/// How an analytic light moves: `Keyed` positions (AFF `la` with `k`), or
/// a node that places it (origin, and -z for spot and directional lights).
#[derive(Clone, Debug)]
pub(crate) enum LightMotion {
    Keyed(VectorSpline),
    Node(u32),
}

#[derive(Clone, Debug)]
pub(crate) struct LightTrack {
    /// Index into `Scene::lights`.
    pub light: usize,
    pub motion: LightMotion,
}

/// What moves in a scene, and its clock. See the module documentation.
#[derive(Clone, Debug)]
pub struct Animation {
    pub(crate) timeline: Timeline,
    pub(crate) graph: Vec<GraphNode>,
    pub(crate) meshes: Vec<MeshTrack>,
    pub(crate) camera: Option<CameraTrack>,
    /// The camera of the file (`v`), which keyed tracks start from.
    pub(crate) base_camera: Option<Camera>,
    pub(crate) lights: Vec<LightTrack>,
    /// Mesh sequences: the complete meshes of every frame.
    pub(crate) frames: Option<Vec<Vec<Mesh>>>,
    /// Animated objects as the source counts them (keyed transforms that
    /// carry geometry, deforming meshes, sequence frames' meshes).
    pub(crate) objects: usize,
}

impl Animation {
    pub(crate) fn new(timeline: Timeline) -> Self {
        Self {
            timeline,
            graph: Vec::new(),
            meshes: Vec::new(),
            camera: None,
            base_camera: None,
            lights: Vec::new(),
            frames: None,
            objects: 0,
        }
    }

    /// The clock.
    pub fn timeline(&self) -> Timeline {
        self.timeline
    }

    /// How many objects move: for AFF scenes the keyframed transforms that
    /// carry geometry plus the meshes of animated triangles, for glTF the
    /// animated nodes that carry or move geometry plus deforming meshes.
    pub fn animated_objects(&self) -> usize {
        self.objects
    }

    /// Indices (into `Scene::meshes`) of the meshes whose vertices change
    /// with time, in increasing order. All others keep their geometry
    /// (for a mesh sequence every mesh changes).
    pub fn moving_meshes(&self) -> Vec<usize> {
        if let Some(frames) = &self.frames {
            return (0..frames.iter().map(Vec::len).max().unwrap_or(0)).collect();
        }
        let mut out: Vec<usize> = self.meshes.iter().map(|t| t.mesh).collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Whether the camera moves.
    pub fn animates_camera(&self) -> bool {
        self.camera.is_some()
    }

    /// How many analytic lights move.
    pub fn animated_lights(&self) -> usize {
        self.lights.len()
    }

    /// True when every pose has the same meshes, triangles and vertex
    /// indices (only positions and normals change): what refitting an
    /// acceleration structure needs. False for mesh sequences.
    pub fn fixed_topology(&self) -> bool {
        self.frames.is_none()
    }

    /// Follows a loader dropping meshes: `new_index[i]` is where mesh `i`
    /// went (`None`: dropped, its track too).
    pub(crate) fn renumber_meshes(&mut self, new_index: &[Option<usize>]) {
        self.meshes
            .retain_mut(|track| match new_index.get(track.mesh).copied().flatten() {
                Some(i) => {
                    track.mesh = i;
                    true
                }
                None => false,
            });
    }

    /// Poses `scene` at instant `t` (seconds, clamped to the clock by the
    /// keys): rewrites the moving meshes' positions and normals, the camera
    /// and the animated lights, or, for a mesh sequence, the meshes.
    pub fn pose(&self, scene: &mut Scene, t: f32) {
        if let Some(frames) = &self.frames {
            let frame = self.timeline.frame_at(t) as usize;
            if let Some(meshes) = frames.get(frame) {
                scene.meshes.clone_from(meshes);
            }
        }
        let (world, visible) = graph::evaluate(&self.graph, t);
        // Each track rewrites its own mesh: in parallel where no two
        // tracks share one (every loader's case), in order otherwise.
        let mut slots: Vec<Option<&mut Mesh>> = scene.meshes.iter_mut().map(Some).collect();
        let mut posed = Vec::with_capacity(self.meshes.len());
        for track in &self.meshes {
            match slots.get_mut(track.mesh).and_then(Option::take) {
                Some(mesh) => posed.push((track, mesh)),
                None if track.mesh < slots.len() => {
                    // A second track of one mesh: pose all in order.
                    posed.clear();
                    break;
                }
                None => {}
            }
        }
        if posed.is_empty() {
            drop(slots);
            for track in &self.meshes {
                if let Some(mesh) = scene.meshes.get_mut(track.mesh) {
                    pose_mesh(track, mesh, &world, &visible, t);
                }
            }
        } else {
            use rayon::prelude::*;
            posed
                .into_par_iter()
                .for_each(|(track, mesh)| pose_mesh(track, mesh, &world, &visible, t));
        }
        if let Some(camera) = self.posed_camera(scene.camera, &world, t) {
            scene.camera = Some(camera);
        }
        for track in &self.lights {
            if let Some(light) = scene.lights.get_mut(track.light) {
                pose_light(&track.motion, light, &world, t);
            }
        }
    }

    fn posed_camera(&self, current: Option<Camera>, world: &[Mat4], t: f32) -> Option<Camera> {
        let base = self.base_camera.or(current)?;
        let camera = match self.camera.as_ref()? {
            CameraTrack::Keyed {
                translation,
                rotation,
            } => {
                let eye = translation
                    .as_ref()
                    .map_or(base.eye, |s| s.eval(t as f64).as_vec3());
                let (dir, up) = match rotation {
                    Some(r) => {
                        let q = r.eval(t as f64).as_quat();
                        let reach = (base.target - base.eye).length().max(1e-6);
                        (q * Vec3::NEG_Z * reach, q * Vec3::Y)
                    }
                    None => (base.target - base.eye, base.up),
                };
                Camera {
                    eye,
                    target: eye + dir,
                    up,
                    ..base
                }
            }
            CameraTrack::Node(node) => {
                let m = world.get(*node as usize)?;
                let eye = m.transform_point3(Vec3::ZERO);
                let dir = m.transform_vector3(Vec3::NEG_Z).normalize_or_zero();
                Camera {
                    eye,
                    target: eye + dir,
                    up: m.transform_vector3(Vec3::Y),
                    ..base
                }
            }
        };
        // A pose that degenerates (a zero scale, coinciding keys) keeps the
        // last good camera rather than handing renderers NaNs.
        camera.is_valid().then_some(camera)
    }
}

/// Rest geometry → deformed → placed by its node; an invisible node
/// collapses the mesh onto its origin, which keeps the triangle numbering
/// (zero-area triangles are never hit).
fn pose_mesh(track: &MeshTrack, mesh: &mut Mesh, world: &[Mat4], visible: &[bool], t: f32) {
    let n = track.rest_positions.len();
    if mesh.positions.len() != n {
        return;
    }
    mesh.positions.copy_from_slice(&track.rest_positions);
    let has_normals = !track.rest_normals.is_empty() && mesh.normals.len() == n;
    if has_normals {
        mesh.normals.copy_from_slice(&track.rest_normals);
    }
    let normals: &mut [Vec3] = if has_normals {
        &mut mesh.normals
    } else {
        &mut []
    };
    deform(&track.deform, &mut mesh.positions, normals, world, t);
    if track.deform.skin.is_some() {
        return;
    }
    let Some(node) = track.node.map(|n| n as usize) else {
        return;
    };
    let (Some(m), Some(&shown)) = (world.get(node), visible.get(node)) else {
        return;
    };
    if !shown {
        let origin = m.transform_point3(Vec3::ZERO);
        mesh.positions.fill(origin);
        return;
    }
    transform_in_place(m, &mut mesh.positions, normals);
}

fn transform_in_place(m: &Mat4, positions: &mut [Vec3], normals: &mut [Vec3]) {
    for p in positions.iter_mut() {
        *p = m.transform_point3(*p);
    }
    if normals.is_empty() {
        return;
    }
    let normal_matrix = Mat3::from_mat4(*m).inverse().transpose();
    for nrm in normals.iter_mut() {
        *nrm = (normal_matrix * *nrm).normalize_or_zero();
    }
}

fn deform(d: &Deform, positions: &mut [Vec3], normals: &mut [Vec3], world: &[Mat4], t: f32) {
    if let Some(keys) = &d.vertex_keys {
        for (i, tri) in keys.iter().enumerate() {
            let corners = keyed_corners(tri, t);
            for (c, (p, n)) in corners.iter().enumerate() {
                if let Some(slot) = positions.get_mut(3 * i + c) {
                    *slot = *p;
                }
                if let Some(slot) = normals.get_mut(3 * i + c) {
                    *slot = n.normalize_or_zero();
                }
            }
        }
    }
    if let Some(morph) = &d.morph {
        apply_morph(morph, positions, normals, t);
    }
    if let Some(skin) = &d.skin {
        apply_skin(skin, positions, normals, world);
    }
}

/// Linear interpolation between the two keys around `t`, clamped at the
/// ends (the AFF description of `tpa`).
fn keyed_corners(tri: &TriangleKeys, t: f32) -> [(Vec3, Vec3); 3] {
    let last = tri.times.len() - 1;
    if t.is_nan() || t <= tri.times[0] {
        return tri.corners[0];
    }
    if t >= tri.times[last] {
        return tri.corners[last];
    }
    let k = tri.times.partition_point(|&x| x <= t) - 1;
    let span = tri.times[k + 1] - tri.times[k];
    let u = if span > 0.0 {
        (t - tri.times[k]) / span
    } else {
        1.0
    };
    let (a, b) = (tri.corners[k], tri.corners[k + 1]);
    std::array::from_fn(|c| (a[c].0.lerp(b[c].0, u), a[c].1.lerp(b[c].1, u)))
}

fn apply_morph(morph: &Morph, positions: &mut [Vec3], normals: &mut [Vec3], t: f32) {
    let mut weights = morph.default_weights.clone();
    if let Some(sampler) = &morph.weights {
        sampler.eval(t, &mut weights);
    }
    for (target, &w) in weights.iter().enumerate() {
        if w == 0.0 {
            continue;
        }
        if let Some(offsets) = morph.positions.get(target) {
            for (p, d) in positions.iter_mut().zip(offsets) {
                *p += w * *d;
            }
        }
        if let Some(offsets) = morph.normals.get(target) {
            for (n, d) in normals.iter_mut().zip(offsets) {
                *n += w * *d;
            }
        }
    }
    for n in normals.iter_mut() {
        *n = n.normalize_or_zero();
    }
}

fn apply_skin(skin: &Skin, positions: &mut [Vec3], normals: &mut [Vec3], world: &[Mat4]) {
    let joint_matrices: Vec<Mat4> = skin
        .joints
        .iter()
        .zip(&skin.inverse_bind)
        .map(|(&j, ib)| world.get(j as usize).copied().unwrap_or(Mat4::IDENTITY) * *ib)
        .collect();
    for (v, influences) in skin.influences.iter().enumerate() {
        let mut m = Mat4::ZERO;
        for &(slot, w) in influences {
            if let (true, Some(jm)) = (w != 0.0, joint_matrices.get(slot as usize)) {
                m += *jm * w;
            }
        }
        if let Some(p) = positions.get_mut(v) {
            *p = m.transform_point3(*p);
        }
        if let Some(n) = normals.get_mut(v) {
            let nm = Mat3::from_mat4(m).inverse().transpose();
            *n = (nm * *n).normalize_or_zero();
        }
    }
}

fn pose_light(motion: &LightMotion, light: &mut Light, world: &[Mat4], t: f32) {
    let (position, direction) = match motion {
        LightMotion::Keyed(path) => (path.eval(t as f64).as_vec3(), None),
        LightMotion::Node(node) => {
            let Some(m) = world.get(*node as usize) else {
                return;
            };
            let dir = m.transform_vector3(Vec3::NEG_Z).try_normalize();
            (m.transform_point3(Vec3::ZERO), dir)
        }
    };
    if !position.is_finite() {
        return;
    }
    match light {
        Light::Point { position: p, .. } => *p = position,
        Light::Spot {
            position: p,
            direction: d,
            ..
        } => {
            *p = position;
            if let Some(dir) = direction {
                *d = dir;
            }
        }
        Light::Directional { direction: d, .. } => {
            if let Some(dir) = direction {
                *d = dir;
            }
        }
    }
}

impl Scene {
    /// Whether the scene moves (it carries an [`Animation`]).
    pub fn is_animated(&self) -> bool {
        self.animation.is_some()
    }

    /// The clock of an animated scene.
    pub fn timeline(&self) -> Option<Timeline> {
        self.animation.as_ref().map(|a| a.timeline)
    }

    /// The scene posed at instant `t` (seconds): a static snapshot for the
    /// renderers, still carrying the animation. A static scene returns a
    /// copy of itself.
    pub fn at_time(&self, t: f32) -> Scene {
        let mut posed = self.clone();
        posed.set_time(t);
        posed
    }

    /// The scene posed at frame `frame` of its clock (a copy for static
    /// scenes).
    pub fn at_frame(&self, frame: u32) -> Scene {
        match self.timeline() {
            Some(clock) => self.at_time(clock.time_of_frame(frame)),
            None => self.clone(),
        }
    }

    /// Poses the scene at `t` in place, rewriting only what moves (see
    /// [`Animation::pose`]); nothing happens for a static scene.
    pub fn set_time(&mut self, t: f32) {
        if let Some(animation) = self.animation.clone() {
            animation.pose(self, t);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeline_frames_follow_the_aff_step() {
        let clock = Timeline {
            start: 0.0,
            end: 20.0,
            frames: 800,
        };
        assert_eq!(clock.time_of_frame(0), 0.0);
        assert_eq!(clock.time_of_frame(799), 20.0);
        assert_eq!(clock.time_of_frame(5000), 20.0);
        assert!((clock.fps().unwrap() - 799.0 / 20.0).abs() < 1e-4);
        assert_eq!(clock.frame_at(clock.time_of_frame(123)), 123);
        assert_eq!(clock.frame_at(-4.0), 0);
    }

    #[test]
    fn timeline_from_duration() {
        let clock = Timeline::from_duration(2.0, 30.0);
        assert_eq!(clock.frames, 61);
        assert_eq!(clock.fps(), Some(30.0));
        let still = Timeline::from_duration(f32::NAN, 30.0);
        assert_eq!((still.frames, still.fps()), (1, None));
    }
}
