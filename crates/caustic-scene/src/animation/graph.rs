//! The transform hierarchy of an animated scene: nodes in an order where
//! every parent comes before its children, each with a local transform
//! that is static, TCB-keyed (AFF) or sampled (glTF). Evaluating it at an
//! instant gives every node's world matrix and visibility in one pass.

use super::sampler::Sampler;
use super::spline::{RotationSpline, VectorSpline};
use caustic_geom::{Mat4, Vec3};
use glam::Quat;

/// A node: its parent (an earlier node) and local transform.
#[derive(Clone, Debug)]
pub(crate) struct GraphNode {
    pub parent: Option<u32>,
    pub local: Local,
}

#[derive(Clone, Debug)]
pub(crate) enum Local {
    Static(Mat4),
    Keyed(Box<KeyedTransform>),
    Sampled(Box<SampledTransform>),
}

/// An AFF keyframed transform (`x name` with `k name`): `T * R * S`, each
/// part identity when it has no keys (BART's `GetMatrix`), and visibility
/// switching at its keys (visible before the first).
#[derive(Clone, Debug, Default)]
pub(crate) struct KeyedTransform {
    pub translation: Option<VectorSpline>,
    pub rotation: Option<RotationSpline>,
    pub scale: Option<VectorSpline>,
    /// `(time, visible)` in file order.
    pub visibility: Vec<(f32, bool)>,
}

impl KeyedTransform {
    pub fn matrix(&self, t: f32) -> Mat4 {
        let t = t as f64;
        let translation = self
            .translation
            .as_ref()
            .map_or(Vec3::ZERO, |s| s.eval(t).as_vec3());
        let rotation = self
            .rotation
            .as_ref()
            .map_or(Quat::IDENTITY, |s| s.eval(t).as_quat());
        let scale = self
            .scale
            .as_ref()
            .map_or(Vec3::ONE, |s| s.eval(t).as_vec3());
        Mat4::from_scale_rotation_translation(scale, rotation, translation)
    }

    /// BART's `GetVisibility`: the flag of the last key at or before `t`.
    pub fn visible(&self, t: f32) -> bool {
        self.visibility
            .iter()
            .take_while(|(time, _)| t >= *time)
            .last()
            .is_none_or(|&(_, shown)| shown)
    }
}

/// A glTF node's TRS with animated channels overriding parts of it.
#[derive(Clone, Debug)]
pub(crate) struct SampledTransform {
    pub translation: Vec3,
    pub rotation: Quat,
    pub scale: Vec3,
    pub translation_channel: Option<Sampler>,
    pub rotation_channel: Option<Sampler>,
    pub scale_channel: Option<Sampler>,
}

impl SampledTransform {
    pub fn matrix(&self, t: f32) -> Mat4 {
        let mut v3 = [0f32; 3];
        let mut v4 = [0f32; 4];
        let translation = match &self.translation_channel {
            Some(s) => {
                s.eval(t, &mut v3);
                Vec3::from_array(v3)
            }
            None => self.translation,
        };
        let rotation = match &self.rotation_channel {
            Some(s) => {
                s.eval(t, &mut v4);
                Quat::from_array(v4).normalize()
            }
            None => self.rotation,
        };
        let scale = match &self.scale_channel {
            Some(s) => {
                s.eval(t, &mut v3);
                Vec3::from_array(v3)
            }
            None => self.scale,
        };
        Mat4::from_scale_rotation_translation(scale, rotation, translation)
    }
}

/// World matrices and visibilities of all nodes at instant `t`.
pub(crate) fn evaluate(nodes: &[GraphNode], t: f32) -> (Vec<Mat4>, Vec<bool>) {
    let mut world = Vec::with_capacity(nodes.len());
    let mut visible = Vec::with_capacity(nodes.len());
    for node in nodes {
        let (local, shown) = match &node.local {
            Local::Static(m) => (*m, true),
            Local::Keyed(k) => (k.matrix(t), k.visible(t)),
            Local::Sampled(s) => (s.matrix(t), true),
        };
        // Parents come first (checked where graphs are built); a bad index
        // falls back to the root rather than panicking.
        let parent = node.parent.map(|p| p as usize).filter(|&p| p < world.len());
        match parent {
            Some(p) => {
                world.push(world[p] * local);
                visible.push(visible[p] && shown);
            }
            None => {
                world.push(local);
                visible.push(shown);
            }
        }
    }
    (world, visible)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visibility_switches_at_its_keys() {
        let k = KeyedTransform {
            visibility: vec![(0.5, false), (2.0, true)],
            ..Default::default()
        };
        assert!(k.visible(0.0));
        assert!(!k.visible(0.5));
        assert!(!k.visible(1.9));
        assert!(k.visible(2.0));
        assert!(k.visible(100.0));
    }

    #[test]
    fn children_compose_with_their_parents() {
        let nodes = vec![
            GraphNode {
                parent: None,
                local: Local::Static(Mat4::from_translation(Vec3::X)),
            },
            GraphNode {
                parent: Some(0),
                local: Local::Static(Mat4::from_scale(Vec3::splat(2.0))),
            },
        ];
        let (world, visible) = evaluate(&nodes, 0.0);
        assert_eq!(world[1].transform_point3(Vec3::Y), Vec3::new(1.0, 2.0, 0.0));
        assert_eq!(visible, [true, true]);
    }
}
