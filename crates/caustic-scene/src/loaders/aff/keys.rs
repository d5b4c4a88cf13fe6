//! AFF keyframes (`k name { … }`) and the assembly of the animation: the
//! transform hierarchy, the moving meshes, the camera and the lights.
//!
//! A block holds up to one of each motion (AFF description, `k`):
//! `transl n` rows `time x y z tension continuity bias`, `rot n` rows
//! `time ax ay az degrees tension continuity bias`, `scale n` rows like
//! `transl`, and `visibility n` rows `time flag`. A group's transform is
//! `T·R·S`. Keys named `camera` move the camera; keys named like an `la`
//! light move that light (translation only).

use super::lexer::Cursor;
use super::shapes::Place;
use super::{GroupKind, Loader};
use crate::animation::graph::{GraphNode, KeyedTransform, Local};
use crate::animation::spline::{RotationSpline, TcbKey, VectorSpline};
use crate::animation::{Animation, CameraTrack, Deform, LightMotion, LightTrack, MeshTrack};
use crate::{DEFAULT_FPS, ErrorKind, Mesh, Scene, SceneError, Timeline};
use caustic_geom::Mat4;
use std::collections::HashMap;
use std::path::PathBuf;

/// One `k` block, where it was, and whether anything used it.
pub(super) struct KeyBlock {
    transform: KeyedTransform,
    path: PathBuf,
    line: u32,
    used: bool,
}

#[derive(Default)]
pub(super) struct Keys {
    by_name: HashMap<String, KeyBlock>,
    /// Names in file order, for deterministic warnings.
    order: Vec<String>,
}

const MOTIONS: &[&str] = &["transl", "rot", "scale", "visibility", "}"];

impl Loader {
    pub(super) fn keyframes(&mut self, c: &mut Cursor, line: u32) -> Result<(), SceneError> {
        let name = c.word("the keyframes' name")?.text.to_string();
        c.expect("{", "after 'k name'")?;
        let mut transform = KeyedTransform::default();
        loop {
            let t = c.word("a motion or '}' in a keyframe block")?;
            let motion_line = t.line;
            let spline_error = |c: &Cursor, e: crate::animation::spline::SplineError| {
                c.error_at(
                    motion_line,
                    ErrorKind::InvalidValue,
                    format!("keyframes '{name}' {}: {e}", t.text),
                )
            };
            match t.text {
                "}" => break,
                "transl" | "scale" => {
                    let n = c.items(&format!("{} keyframe count", t.text), 7)?;
                    let mut keys = Vec::with_capacity(n);
                    for _ in 0..n {
                        let time = c.number("keyframe time")? as f64;
                        let value = c.vec3("keyframe value")?.as_dvec3();
                        keys.push(tcb(c, time, value)?);
                    }
                    self.drop_late_keys(&mut keys, c, motion_line, &name, t.text);
                    let spline = VectorSpline::new(&keys).map_err(|e| spline_error(c, e))?;
                    if t.text == "transl" {
                        transform.translation = Some(spline);
                    } else {
                        transform.scale = Some(spline);
                    }
                }
                "rot" => {
                    let n = c.items("rot keyframe count", 8)?;
                    let mut keys = Vec::with_capacity(n);
                    for _ in 0..n {
                        let time = c.number("keyframe time")? as f64;
                        let axis = c.vec3("rotation axis")?.as_dvec3();
                        let angle = (c.number("rotation angle")? as f64).to_radians();
                        keys.push(tcb(c, time, (axis, angle))?);
                    }
                    self.drop_late_keys(&mut keys, c, motion_line, &name, t.text);
                    transform.rotation =
                        Some(RotationSpline::new(&keys).map_err(|e| spline_error(c, e))?);
                }
                "visibility" => {
                    let n = c.items("visibility keyframe count", 2)?;
                    transform.visibility.clear();
                    for _ in 0..n {
                        let time = c.number("visibility time")?;
                        let flag = c.number("visibility flag")?;
                        transform.visibility.push((time, flag != 0.0));
                    }
                }
                other => {
                    let path = c.path.clone();
                    self.warn(
                        &path,
                        motion_line,
                        format!("unknown motion '{other}' in keyframes '{name}'; skipped"),
                    );
                    while c.peek().is_some_and(|t| !MOTIONS.contains(&t.text)) {
                        c.next();
                    }
                }
            }
        }
        let block = KeyBlock {
            transform,
            path: c.path.clone(),
            line,
            used: false,
        };
        if let Some(old) = self.keys.by_name.insert(name.clone(), block) {
            // A file included twice defines its keys twice: not news.
            if old.path == c.path && old.line == line {
                return Ok(());
            }
            let path = c.path.clone();
            self.warn(
                &path,
                line,
                format!(
                    "keyframes '{name}' given again (first at {} line {}); the later ones are used",
                    old.path.display(),
                    old.line
                ),
            );
        } else {
            self.keys.order.push(name);
        }
        Ok(())
    }
}

impl Loader {
    /// Drops keys earlier than a key before them, with a warning. BART's
    /// robots have such runs (a second, shorter list of keys appended to a
    /// block); BART's evaluation, which takes the first segment ending
    /// after the instant, never reaches them, so neither does this.
    fn drop_late_keys<T>(
        &mut self,
        keys: &mut Vec<TcbKey<T>>,
        c: &Cursor,
        line: u32,
        name: &str,
        motion: &str,
    ) {
        let before = keys.len();
        let mut latest = f64::NEG_INFINITY;
        keys.retain(|k| {
            let keep = k.time >= latest;
            latest = latest.max(k.time);
            keep
        });
        if keys.len() < before {
            let path = c.path.clone();
            self.warn(
                &path,
                line,
                format!(
                    "keyframes '{name}' {motion}: {} key(s) earlier than a key before them ignored",
                    before - keys.len()
                ),
            );
        }
    }
}

/// The tension, continuity and bias that end a key row.
fn tcb<T>(c: &mut Cursor, time: f64, value: T) -> Result<TcbKey<T>, SceneError> {
    Ok(TcbKey {
        time,
        value,
        tension: c.number("tension")? as f64,
        continuity: c.number("continuity")? as f64,
        bias: c.number("bias")? as f64,
    })
}

/// Builds the scene's meshes from the batches and, when anything moves or
/// the file sets a clock, its animation; poses the scene at the start.
pub(super) fn build(
    loader: &mut Loader,
    scene: &mut Scene,
) -> Result<Option<Animation>, SceneError> {
    let graph = graph(loader);
    let animated = animated_groups(loader, &graph);
    let start = loader.clock.map_or(0.0, |c| c.start);
    let (world, _) = crate::animation::graph::evaluate(&graph, start);
    let mut tracks = Vec::new();
    let mut keyed_meshes = 0;
    for batch in std::mem::take(&mut loader.batches.list) {
        if batch.mesh.indices.is_empty() {
            continue;
        }
        let index = scene.meshes.len();
        let mut mesh = batch.mesh;
        let node = match batch.place {
            Place::World(_) => None,
            Place::Group(g) if !animated[g as usize] => {
                mesh.transform(&world[g as usize]);
                None
            }
            Place::Group(g) => Some(g),
            Place::Keyed(g) => {
                keyed_meshes += 1;
                tracks.push(track(index, &mesh, g, Some(batch.keys)));
                scene.meshes.push(mesh);
                continue;
            }
        };
        if let Some(g) = node {
            tracks.push(track(index, &mesh, Some(g), None));
        }
        scene.meshes.push(mesh);
    }
    let objects = carrying_groups(loader, &graph, &tracks) + keyed_meshes;
    let camera = camera_track(loader);
    let lights = light_tracks(loader);
    warn_unused_keys(loader);
    let moves = !tracks.is_empty() || camera.is_some() || !lights.is_empty();
    let Some(timeline) = loader
        .clock
        .or_else(|| moves.then(|| default_clock(loader, &graph)))
    else {
        return Ok(None);
    };
    let mut animation = Animation::new(timeline);
    animation.graph = graph;
    animation.meshes = tracks;
    animation.base_camera = scene.camera;
    animation.camera = camera;
    animation.lights = lights;
    animation.objects = objects;
    animation.pose(scene, timeline.start);
    Ok(Some(animation))
}

/// The groups as graph nodes, keyframed ones resolved by name.
fn graph(loader: &mut Loader) -> Vec<GraphNode> {
    let mut nodes = Vec::with_capacity(loader.groups.len());
    let mut missing = Vec::new();
    for group in &loader.groups {
        let local = match &group.kind {
            GroupKind::Static(m) => Local::Static(*m),
            GroupKind::Named(name) => match loader.keys.by_name.get_mut(name) {
                Some(block) => {
                    block.used = true;
                    Local::Keyed(Box::new(block.transform.clone()))
                }
                None => {
                    missing.push((group.path.clone(), group.line, name.clone()));
                    Local::Static(Mat4::IDENTITY)
                }
            },
        };
        nodes.push(GraphNode {
            parent: group.parent,
            local,
        });
    }
    for (path, line, name) in missing {
        loader.warn(
            &path,
            line,
            format!("transform '{name}' has no keyframes ('k {name}'); it stays still"),
        );
    }
    nodes
}

/// Which groups move: keyframed ones and everything inside them.
fn animated_groups(loader: &Loader, graph: &[GraphNode]) -> Vec<bool> {
    let mut animated = vec![false; graph.len()];
    for (i, node) in graph.iter().enumerate() {
        let own = matches!(node.local, Local::Keyed(_));
        let parent = node.parent.is_some_and(|p| animated[p as usize]);
        animated[i] = own || parent;
    }
    debug_assert_eq!(animated.len(), loader.groups.len());
    animated
}

fn track(
    mesh_index: usize,
    mesh: &Mesh,
    node: Option<u32>,
    keys: Option<Vec<crate::animation::TriangleKeys>>,
) -> MeshTrack {
    MeshTrack {
        mesh: mesh_index,
        node,
        rest_positions: mesh.positions.clone(),
        rest_normals: mesh.normals.clone(),
        deform: Deform {
            vertex_keys: keys,
            ..Deform::default()
        },
    }
}

/// Keyframed groups with moving geometry at or below them, counted by
/// name (a file included twice animates one object twice): BART's
/// "animated objects".
fn carrying_groups(loader: &Loader, graph: &[GraphNode], tracks: &[MeshTrack]) -> usize {
    let mut carries = vec![false; graph.len()];
    for track in tracks {
        let mut node = track.node;
        while let Some(g) = node {
            let g = g as usize;
            if carries[g] {
                break;
            }
            carries[g] = matches!(graph[g].local, Local::Keyed(_));
            node = graph[g].parent;
        }
    }
    let names: std::collections::HashSet<&str> = carries
        .iter()
        .enumerate()
        .filter(|(_, c)| **c)
        .filter_map(|(g, _)| match &loader.groups[g].kind {
            GroupKind::Named(name) => Some(name.as_str()),
            GroupKind::Static(_) => None,
        })
        .collect();
    names.len()
}

fn camera_track(loader: &mut Loader) -> Option<CameraTrack> {
    let block = loader.keys.by_name.get_mut("camera")?;
    block.used = true;
    let t = &block.transform;
    let (path, line) = (block.path.clone(), block.line);
    let track = CameraTrack::Keyed {
        translation: t.translation.clone(),
        rotation: t.rotation.clone(),
    };
    if t.scale.is_some() || !t.visibility.is_empty() {
        loader.warn(
            &path,
            line,
            "camera keyframes: scale and visibility do not apply to a camera; ignored".into(),
        );
    }
    Some(track)
}

fn light_tracks(loader: &mut Loader) -> Vec<LightTrack> {
    let mut tracks = Vec::new();
    for (light, name, path, line) in std::mem::take(&mut loader.named_lights) {
        let path_of = loader.keys.by_name.get_mut(&name).and_then(|b| {
            b.used = true;
            b.transform.translation.clone()
        });
        match path_of {
            Some(spline) => tracks.push(LightTrack {
                light,
                motion: LightMotion::Keyed(spline),
            }),
            None => loader.warn(
                &path,
                line,
                format!("animated light '{name}' has no translation keyframes; it stays still"),
            ),
        }
    }
    tracks
}

fn warn_unused_keys(loader: &mut Loader) {
    let unused: Vec<(PathBuf, u32, String)> = loader
        .keys
        .order
        .iter()
        .filter_map(|name| {
            let b = &loader.keys.by_name[name];
            (!b.used).then(|| (b.path.clone(), b.line, name.clone()))
        })
        .collect();
    for (path, line, name) in unused {
        loader.warn(
            &path,
            line,
            format!("keyframes '{name}' move nothing (no transform 'x {name}', animated light or camera of that name)"),
        );
    }
}

/// Without an `a` statement: the span of all keys at [`DEFAULT_FPS`].
fn default_clock(loader: &mut Loader, graph: &[GraphNode]) -> Timeline {
    let mut range = (f64::INFINITY, f64::NEG_INFINITY);
    let mut widen = |(a, b): (f64, f64)| range = (range.0.min(a), range.1.max(b));
    for node in graph {
        if let Local::Keyed(k) = &node.local {
            for s in [&k.translation, &k.scale].into_iter().flatten() {
                widen(s.range());
            }
        }
    }
    if let Some(s) = loader
        .keys
        .by_name
        .get("camera")
        .and_then(|b| b.transform.translation.as_ref())
    {
        widen(s.range());
    }
    let top = loader.top.clone();
    loader.warn(
        &top,
        1,
        format!("no animation clock ('a start end frames'); using the keyframes' span at {DEFAULT_FPS} fps"),
    );
    let (start, end) = if range.0 <= range.1 {
        range
    } else {
        (0.0, 0.0)
    };
    let mut clock = Timeline::from_duration((end - start) as f32, DEFAULT_FPS);
    clock.start = start as f32;
    clock.end = end as f32;
    clock
}
