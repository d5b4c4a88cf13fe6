//! glTF 2.0 animations (specification section 3.11): node translation,
//! rotation and scale channels and morph-target weights, with STEP, LINEAR
//! and CUBICSPLINE samplers (`animation::sampler`); morph targets (section
//! 3.7.2.2, POSITION and NORMAL offsets) and skins (section 3.7.3, four
//! joints per vertex from JOINTS_0 / WEIGHTS_0) of meshes that move.
//!
//! Only files with animations get an [`Animation`]; the first clip plays
//! (further clips are named in a warning). Every node the walk reaches
//! becomes a node of the transform graph; meshes at or below an animated
//! node, skinned meshes and meshes with animated weights keep their local
//! geometry and become moving meshes; the rest is baked into world space
//! as before. Cameras and lights on animated nodes follow them. The clock
//! runs from 0 to the last key at [`DEFAULT_FPS`].
//!
//! Not read: further clips, sparse accessors (an error, as elsewhere),
//! JOINTS_1/WEIGHTS_1 (a warning), morph targets and skins of files
//! without animations (their rest pose is loaded, as before).

use super::Loader;
use crate::animation::graph::{GraphNode, Local, SampledTransform};
use crate::animation::sampler::{Interpolation, Sampler};
use crate::animation::{
    Animation, CameraTrack, Deform, LightMotion, LightTrack, MeshTrack, Morph, Skin,
};
use crate::{DEFAULT_FPS, ErrorKind, Mesh, SceneError, Timeline};
use ::gltf::animation::{Interpolation as GltfInterpolation, Property};
use ::gltf::mesh::Semantic;
use ::gltf::{Node, Primitive};
use caustic_geom::{Mat4, Vec3};
use glam::Quat;
use std::collections::HashMap;

/// The channels of one node.
#[derive(Default)]
struct NodeChannels {
    translation: Option<Sampler>,
    rotation: Option<Sampler>,
    scale: Option<Sampler>,
    weights: Option<Sampler>,
}

/// What the walk gathers for the animation.
pub(super) struct GltfAnimation {
    channels: HashMap<usize, NodeChannels>,
    duration: f32,
    graph: Vec<GraphNode>,
    /// Graph node of each glTF node reached.
    graph_of: Vec<Option<u32>>,
    /// Whether each graph node moves (own channels or a moving ancestor).
    moving: Vec<bool>,
    tracks: Vec<MeshTrack>,
    /// Per skinned track: its index and the glTF nodes of its joints.
    skins: Vec<(usize, Vec<usize>)>,
    camera: Option<CameraTrack>,
    lights: Vec<LightTrack>,
    objects: usize,
}

impl Loader<'_> {
    /// The first clip's channels, or `None` for a file without animations.
    pub(super) fn read_animations(&mut self) -> Result<Option<GltfAnimation>, SceneError> {
        let doc = self.doc;
        let Some(clip) = doc.animations().next() else {
            return Ok(None);
        };
        if doc.animations().len() > 1 {
            self.warn(
                "animations",
                format!(
                    "{} animation clips; only the first ('{}') plays",
                    doc.animations().len(),
                    clip.name().unwrap_or("unnamed")
                ),
            );
        }
        let mut channels: HashMap<usize, NodeChannels> = HashMap::new();
        let mut duration = 0f32;
        for channel in clip.channels() {
            let at = format!("animation {} channel {}", clip.index(), channel.index());
            let node = channel.target().node();
            let property = channel.target().property();
            let width = match property {
                Property::Translation | Property::Scale => 3,
                Property::Rotation => 4,
                Property::MorphTargetWeights => morph_target_count(&node).max(1),
            };
            let sampler = channel.sampler();
            let times: Vec<f32> = self
                .read_floats::<1>(&sampler.input(), &at, "input times")?
                .into_iter()
                .map(|[t]| t)
                .collect();
            let values = self.read_flat(&sampler.output(), &at)?;
            let interpolation = match sampler.interpolation() {
                GltfInterpolation::Step => Interpolation::Step,
                GltfInterpolation::Linear => Interpolation::Linear,
                GltfInterpolation::CubicSpline => Interpolation::CubicSpline,
            };
            let rotation = property == Property::Rotation;
            let sampler = Sampler::new(times, values, width, interpolation, rotation)
                .map_err(|e| self.error(ErrorKind::Syntax, &at, e))?;
            duration = duration.max(sampler.end());
            let slot = channels.entry(node.index()).or_default();
            match property {
                Property::Translation => slot.translation = Some(sampler),
                Property::Rotation => slot.rotation = Some(sampler),
                Property::Scale => slot.scale = Some(sampler),
                Property::MorphTargetWeights => slot.weights = Some(sampler),
            }
        }
        Ok(Some(GltfAnimation {
            channels,
            duration,
            graph: Vec::new(),
            graph_of: vec![None; doc.nodes().len()],
            moving: Vec::new(),
            tracks: Vec::new(),
            skins: Vec::new(),
            camera: None,
            lights: Vec::new(),
            objects: 0,
        }))
    }

    /// Any accessor's components as floats, in order.
    fn read_flat(&self, acc: &::gltf::Accessor, at: &str) -> Result<Vec<f32>, SceneError> {
        let what = "output values";
        Ok(match acc.dimensions().multiplicity() {
            1 => self.read_floats::<1>(acc, at, what)?.concat(),
            2 => self.read_floats::<2>(acc, at, what)?.concat(),
            3 => self.read_floats::<3>(acc, at, what)?.concat(),
            4 => self.read_floats::<4>(acc, at, what)?.concat(),
            n => {
                return Err(self.error(
                    ErrorKind::Syntax,
                    at,
                    format!("output accessor of {n} components per element"),
                ));
            }
        })
    }
}

fn morph_target_count(node: &Node) -> usize {
    node.mesh()
        .and_then(|m| m.primitives().map(|p| p.morph_targets().len()).max())
        .unwrap_or(0)
}

impl GltfAnimation {
    /// Adds a reached node to the graph under `parent` (a graph node);
    /// returns its graph node and whether it moves.
    pub(super) fn add_node(&mut self, node: &Node, parent: Option<u32>) -> (u32, bool) {
        let channels = self.channels.get_mut(&node.index());
        let trs = channels
            .as_ref()
            .is_some_and(|c| c.translation.is_some() || c.rotation.is_some() || c.scale.is_some());
        let local = match channels {
            Some(c) if trs => {
                let (t, r, s) = node.transform().decomposed();
                Local::Sampled(Box::new(SampledTransform {
                    translation: Vec3::from_array(t),
                    rotation: Quat::from_array(r),
                    scale: Vec3::from_array(s),
                    translation_channel: c.translation.take(),
                    rotation_channel: c.rotation.take(),
                    scale_channel: c.scale.take(),
                }))
            }
            _ => Local::Static(Mat4::from_cols_array_2d(&node.transform().matrix())),
        };
        let id = self.graph.len() as u32;
        let moving = trs || parent.is_some_and(|p| self.moving[p as usize]);
        self.graph.push(GraphNode { parent, local });
        self.moving.push(moving);
        self.graph_of[node.index()] = Some(id);
        (id, moving)
    }

    /// Whether a mesh on this node must be posed every frame.
    pub(super) fn mesh_moves(&self, node: &Node, graph_id: u32) -> bool {
        let weights = self
            .channels
            .get(&node.index())
            .is_some_and(|c| c.weights.is_some());
        self.moving[graph_id as usize] || weights || node.skin().is_some()
    }

    pub(super) fn camera_on(&mut self, graph_id: u32) {
        if self.moving[graph_id as usize] && self.camera.is_none() {
            self.camera = Some(CameraTrack::Node(graph_id));
        }
    }

    pub(super) fn light_on(&mut self, light: usize, graph_id: u32) {
        if self.moving[graph_id as usize] {
            self.lights.push(LightTrack {
                light,
                motion: LightMotion::Node(graph_id),
            });
        }
    }
}

impl Loader<'_> {
    /// A moving mesh of a primitive (kept in its local space): its track,
    /// with morph targets and skin when it has them.
    pub(super) fn moving_primitive(
        &mut self,
        anim: &mut GltfAnimation,
        (node, graph_id): (&Node, u32),
        prim: &Primitive,
        (mesh, mesh_index): (&Mesh, usize),
        at: &str,
    ) -> Result<(), SceneError> {
        let mut deform = Deform::default();
        if prim.morph_targets().len() > 0 {
            deform.morph = Some(self.morph(node, prim, mesh, anim, at)?);
        }
        let mut joints = Vec::new();
        if let Some(skin) = node.skin() {
            let (s, j) = self.skin(&skin, prim, mesh.positions.len(), at)?;
            deform.skin = Some(s);
            joints = j;
        }
        let track = MeshTrack {
            mesh: mesh_index,
            node: Some(graph_id),
            rest_positions: mesh.positions.clone(),
            rest_normals: mesh.normals.clone(),
            deform,
        };
        if !joints.is_empty() {
            anim.skins.push((anim.tracks.len(), joints));
        }
        anim.tracks.push(track);
        anim.objects += 1;
        Ok(())
    }

    fn morph(
        &mut self,
        node: &Node,
        prim: &Primitive,
        mesh: &Mesh,
        anim: &mut GltfAnimation,
        at: &str,
    ) -> Result<Morph, SceneError> {
        let n = mesh.positions.len();
        let mut morph = Morph {
            positions: Vec::new(),
            normals: Vec::new(),
            default_weights: Vec::new(),
            weights: None,
        };
        for (k, target) in prim.morph_targets().enumerate() {
            let what = format!("morph target {k}");
            let read =
                |acc: Option<::gltf::Accessor>, this: &Self| -> Result<Vec<Vec3>, SceneError> {
                    match acc {
                        Some(acc) => {
                            let v: Vec<Vec3> = this
                                .read_floats::<3>(&acc, at, &what)?
                                .into_iter()
                                .map(Vec3::from_array)
                                .collect();
                            if v.len() != n {
                                return Err(this.error(
                                    ErrorKind::Syntax,
                                    at,
                                    format!("{what} has {} offsets for {n} vertices", v.len()),
                                ));
                            }
                            Ok(v)
                        }
                        None => Ok(vec![Vec3::ZERO; n]),
                    }
                };
            morph.positions.push(read(target.positions(), self)?);
            if !mesh.normals.is_empty() {
                morph.normals.push(read(target.normals(), self)?);
            }
        }
        let targets = morph.positions.len();
        // The node's weights override the mesh's (section 3.7.2.2).
        let defaults: Vec<f32> = node
            .weights()
            .map(<[f32]>::to_vec)
            .or_else(|| node.mesh().and_then(|m| m.weights().map(<[f32]>::to_vec)))
            .unwrap_or_default();
        morph.default_weights = (0..targets)
            .map(|k| defaults.get(k).copied().unwrap_or(0.0))
            .collect();
        if let Some(sampler) = anim
            .channels
            .get(&node.index())
            .and_then(|c| c.weights.clone())
        {
            morph.weights = Some(sampler);
        }
        Ok(morph)
    }

    /// The skin of a primitive: its influences, inverse bind matrices and
    /// joint nodes (glTF indices, mapped to graph nodes after the walk).
    fn skin(
        &mut self,
        skin: &::gltf::Skin,
        prim: &Primitive,
        vertices: usize,
        at: &str,
    ) -> Result<(Skin, Vec<usize>), SceneError> {
        let joints: Vec<usize> = skin.joints().map(|j| j.index()).collect();
        let inverse_bind = match skin.inverse_bind_matrices() {
            Some(acc) => self
                .read_floats::<16>(&acc, at, "inverse bind matrices")?
                .into_iter()
                .map(|m| Mat4::from_cols_array(&m))
                .collect(),
            None => vec![Mat4::IDENTITY; joints.len()],
        };
        if inverse_bind.len() < joints.len() {
            return Err(self.error(
                ErrorKind::Syntax,
                at,
                format!(
                    "skin {}: {} inverse bind matrices for {} joints",
                    skin.index(),
                    inverse_bind.len(),
                    joints.len()
                ),
            ));
        }
        if prim.get(&Semantic::Joints(1)).is_some() {
            self.warn(
                at,
                "JOINTS_1/WEIGHTS_1 ignored: four joints per vertex are read",
            );
        }
        let (Some(j_acc), Some(w_acc)) = (
            prim.get(&Semantic::Joints(0)),
            prim.get(&Semantic::Weights(0)),
        ) else {
            return Err(self.error(
                ErrorKind::Syntax,
                at,
                "skinned primitive without JOINTS_0 and WEIGHTS_0",
            ));
        };
        let js = self.read_floats::<4>(&j_acc, at, "JOINTS_0")?;
        let ws = self.read_floats::<4>(&w_acc, at, "WEIGHTS_0")?;
        if js.len() != vertices || ws.len() != vertices {
            return Err(self.error(
                ErrorKind::Syntax,
                at,
                format!(
                    "JOINTS_0/WEIGHTS_0 have {}/{} entries for {vertices} vertices",
                    js.len(),
                    ws.len()
                ),
            ));
        }
        let mut influences = Vec::with_capacity(vertices);
        for (j, w) in js.iter().zip(&ws) {
            let mut slot = [(0u16, 0f32); 4];
            for k in 0..4 {
                let joint = j[k];
                if !(0.0..joints.len() as f32).contains(&joint) {
                    return Err(self.error(
                        ErrorKind::IndexOutOfRange,
                        at,
                        format!(
                            "JOINTS_0 names joint {joint} of a skin with {}",
                            joints.len()
                        ),
                    ));
                }
                slot[k] = (joint as u16, w[k]);
            }
            influences.push(slot);
        }
        Ok((
            Skin {
                joints: Vec::new(),
                inverse_bind,
                influences,
            },
            joints,
        ))
    }

    /// The animation, once the walk is done: skins' joints resolved to
    /// graph nodes, the clock set, the scene posed at 0.
    pub(super) fn finish_animation(&mut self, mut anim: GltfAnimation) -> Animation {
        for (track, joints) in std::mem::take(&mut anim.skins) {
            let mut missing = 0;
            let ids: Vec<u32> = joints
                .iter()
                .map(|&j| {
                    anim.graph_of[j].unwrap_or_else(|| {
                        missing += 1;
                        u32::MAX
                    })
                })
                .collect();
            if missing > 0 {
                self.warn(
                    format!("mesh track {track}"),
                    format!(
                        "{missing} skin joint(s) are not in the scene; they stay at the origin"
                    ),
                );
            }
            if let Some(skin) = &mut anim.tracks[track].deform.skin {
                skin.joints = ids;
            }
        }
        let mut animation = Animation::new(Timeline::from_duration(anim.duration, DEFAULT_FPS));
        animation.objects = anim.objects + anim.lights.len() + anim.camera.is_some() as usize;
        animation.graph = anim.graph;
        animation.meshes = anim.tracks;
        animation.base_camera = self.scene.camera;
        animation.camera = anim.camera;
        animation.lights = anim.lights;
        animation.pose(&mut self.scene, 0.0);
        animation
    }
}
