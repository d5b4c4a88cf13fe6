//! Refitting a [`Bvh2`] to primitives that moved: the same topology, every
//! box recomputed bottom-up from the primitives' new boxes (Lauterbach,
//! Yoon, Manocha and Tuft 2006; Wald, Boulos and Shirley 2007, "Ray tracing
//! deformable scenes using dynamic bounding volume hierarchies", §3). A
//! refit costs a fraction of a build, keeps every invariant the traversal
//! relies on (a node's box holds its primitives' boxes, so hits stay
//! exact), and lets the tree's quality decay as primitives move away from
//! the neighbours they were grouped with; [`UpdatePolicy::Auto`] rebuilds
//! once the decay passes a bound.

use super::{Bvh2, sah_cost};
use caustic_geom::Aabb;
use rayon::prelude::*;
use std::fmt;
use std::str::FromStr;

impl Bvh2 {
    /// Recomputes every node's box from `prim_bounds` (one box per input
    /// primitive, indexed as `prim_indices` references them); the topology
    /// is kept. Primitives without a finite box (they can never be hit)
    /// add nothing to their leaf's box.
    ///
    /// # Errors
    /// When `prim_bounds` does not cover every referenced primitive.
    pub fn refit(&mut self, prim_bounds: &[Aabb]) -> Result<(), String> {
        if let Some(&bad) = self
            .prim_indices
            .iter()
            .find(|&&p| p as usize >= prim_bounds.len())
        {
            return Err(format!(
                "refit: the tree references primitive {bad}, but {} boxes were given",
                prim_bounds.len()
            ));
        }
        let mut order = Vec::with_capacity(self.nodes.len());
        self.walk(|node, _| order.push(node));
        // Leaves in parallel (most of the work: every primitive's box).
        let leaf_boxes: Vec<Option<Aabb>> = self
            .nodes
            .par_iter()
            .map(|n| {
                (n.count > 0).then(|| {
                    let slots = n.first as usize..(n.first + n.count) as usize;
                    self.prim_indices[slots]
                        .iter()
                        .map(|&p| prim_bounds[p as usize])
                        .filter(Aabb::is_finite)
                        .fold(Aabb::EMPTY, Aabb::union)
                })
            })
            .collect();
        // Inner nodes after their children: a pre-order walk reversed.
        for &index in order.iter().rev() {
            let node = self.nodes[index];
            let bounds = match leaf_boxes[index] {
                Some(b) => b,
                None => {
                    let left = self.nodes[node.first as usize].bounds();
                    let right = self.nodes[node.first as usize + 1].bounds();
                    left.union(right)
                }
            };
            self.nodes[index].min = bounds.min.to_array();
            self.nodes[index].max = bounds.max.to_array();
        }
        Ok(())
    }
}

/// How a moving scene's structure follows it from frame to frame.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum UpdatePolicy {
    /// Build afresh every frame.
    Rebuild,
    /// Refit the first frame's tree every frame.
    Refit,
    /// Refit while the refitted tree's SAH cost stays within `bound` times
    /// the SAH of the last fresh build; rebuild (and start counting again)
    /// once it does not.
    Auto { bound: f32 },
}

impl UpdatePolicy {
    /// `auto`'s bound: 1.3. A refitted tree traces about as much slower
    /// as its SAH cost is higher (the SAH is the expected number of node
    /// visits and triangle tests of a random ray), and a build costs about
    /// as much as tracing a few hundred thousand rays on the CPU (see
    /// `docs/BENCHMARKS.md`), so rebuilding pays once the trace of a frame
    /// of a million rays or more is 30 % slower.
    pub const AUTO_BOUND: f32 = 1.3;
}

impl Default for UpdatePolicy {
    fn default() -> Self {
        Self::Auto {
            bound: Self::AUTO_BOUND,
        }
    }
}

impl FromStr for UpdatePolicy {
    type Err = String;

    /// `rebuild`, `refit`, `auto` or `auto:BOUND` (a bound above 1).
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "rebuild" => Ok(Self::Rebuild),
            "refit" => Ok(Self::Refit),
            "auto" => Ok(Self::default()),
            other => {
                let bound = other
                    .strip_prefix("auto:")
                    .and_then(|b| b.parse::<f32>().ok())
                    .filter(|b| b.is_finite() && *b >= 1.0)
                    .ok_or_else(|| {
                        format!("`{other}`: the update is rebuild, refit, auto or auto:BOUND (BOUND >= 1)")
                    })?;
                Ok(Self::Auto { bound })
            }
        }
    }
}

impl fmt::Display for UpdatePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Rebuild => f.write_str("rebuild"),
            Self::Refit => f.write_str("refit"),
            Self::Auto { bound } if *bound == Self::AUTO_BOUND => f.write_str("auto"),
            Self::Auto { bound } => write!(f, "auto:{bound}"),
        }
    }
}

/// What the policy decided for one frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpdateAction {
    Rebuilt,
    Refitted,
}

/// Decides rebuild or refit for a sequence of frames and remembers the SAH
/// of the last fresh build.
#[derive(Clone, Copy, Debug)]
pub struct UpdateTracker {
    policy: UpdatePolicy,
    /// SAH of the last fresh build; `None` before the first frame.
    built_sah: Option<f32>,
}

impl UpdateTracker {
    pub fn new(policy: UpdatePolicy) -> Self {
        Self {
            policy,
            built_sah: None,
        }
    }

    pub fn policy(&self) -> UpdatePolicy {
        self.policy
    }

    /// Whether this frame starts from a fresh build (before looking at a
    /// refit): the first frame, and every frame under `Rebuild`.
    pub fn must_rebuild(&self) -> bool {
        self.built_sah.is_none() || self.policy == UpdatePolicy::Rebuild
    }

    /// Records a fresh build's SAH.
    pub fn built(&mut self, sah: f32) {
        self.built_sah = Some(sah);
    }

    /// Whether a refitted tree of SAH `refit_sah` is kept: always under
    /// `Refit`, within the bound under `Auto`.
    pub fn keeps_refit(&self, refit_sah: f32) -> bool {
        match (self.policy, self.built_sah) {
            (UpdatePolicy::Refit, _) => true,
            (UpdatePolicy::Auto { bound }, Some(built)) => refit_sah <= bound * built.max(0.0),
            _ => false,
        }
    }

    /// Refits `bvh` to `prim_bounds` or asks for a rebuild: `Refitted` when
    /// the refitted tree is kept, `Rebuilt` when the caller must build
    /// afresh (and then call [`UpdateTracker::built`]).
    pub fn update(&mut self, bvh: &mut Bvh2, prim_bounds: &[Aabb]) -> UpdateAction {
        if self.must_rebuild() || bvh.refit(prim_bounds).is_err() {
            return UpdateAction::Rebuilt;
        }
        if self.keeps_refit(sah_cost(bvh)) {
            UpdateAction::Refitted
        } else {
            UpdateAction::Rebuilt
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bvh::build::{BinnedSahBuilder, Bvh2Builder};
    use crate::{Accel, BruteForce, BuildInput, TriangleBvh};
    use caustic_geom::{Pcg32, Ray, Triangle, Vec3};

    fn soup(rng: &mut Pcg32, n: usize, shift: f32) -> Vec<Triangle> {
        (0..n)
            .map(|i| {
                let c = Vec3::new(rng.next_f32(), rng.next_f32(), rng.next_f32()) * 10.0;
                // Every other triangle moves by `shift` along x.
                let c = c + Vec3::X * if i % 2 == 0 { shift } else { 0.0 };
                Triangle::new(
                    c,
                    c + Vec3::new(0.3, 0.0, 0.1),
                    c + Vec3::new(0.0, 0.3, 0.2),
                )
            })
            .collect()
    }

    #[test]
    fn a_refitted_tree_is_valid_and_traces_like_brute_force() {
        let mut rng = Pcg32::new(5, 2);
        let before = soup(&mut rng, 2000, 0.0);
        let mut rng = Pcg32::new(5, 2);
        let mut after = soup(&mut rng, 2000, 7.0);
        after[3] = Triangle::new(Vec3::splat(f32::NAN), Vec3::X, Vec3::Y);
        let mut bvh = BinnedSahBuilder::default().build(&BuildInput::from_triangles(&before));
        let bounds = BuildInput::from_triangles(&after).bounds;
        bvh.refit(&bounds).unwrap();
        let finite: Vec<Aabb> = bounds
            .iter()
            .map(|b| if b.is_finite() { *b } else { Aabb::EMPTY })
            .collect();
        bvh.validate(&finite).unwrap();
        let traced = TriangleBvh::from_bvh(bvh.clone(), &after, "refit").unwrap();
        let brute = BruteForce::new(&after);
        let mut rng = Pcg32::new(9, 1);
        for _ in 0..2000 {
            let o = Vec3::new(rng.next_f32(), rng.next_f32(), rng.next_f32()) * 20.0 - 2.0;
            let d = Vec3::new(rng.next_f32(), rng.next_f32(), rng.next_f32()) - 0.5;
            let ray = Ray::new(o, d);
            assert_eq!(traced.intersect(&ray), brute.intersect(&ray));
        }
        // The moved half spreads the tree: its SAH rises above a fresh build's.
        let fresh = BinnedSahBuilder::default().build(&BuildInput::from_triangles(&after));
        assert!(sah_cost(&bvh) > sah_cost(&fresh));
        assert!(bvh.refit(&bounds[..10]).is_err());
    }

    #[test]
    fn auto_refits_within_its_bound_and_asks_for_a_rebuild_beyond() {
        let mut rng = Pcg32::new(5, 2);
        let before = soup(&mut rng, 2000, 0.0);
        let build = |tris: &[Triangle]| {
            BinnedSahBuilder::default().build(&BuildInput::from_triangles(tris))
        };
        let mut tracker = UpdateTracker::new("auto".parse().unwrap());
        let mut bvh = build(&before);
        assert!(tracker.must_rebuild());
        tracker.built(sah_cost(&bvh));
        // No motion: the refit is the same tree, kept.
        let bounds = BuildInput::from_triangles(&before).bounds;
        assert_eq!(tracker.update(&mut bvh, &bounds), UpdateAction::Refitted);
        // Half the triangles 7 units away: far past the bound.
        let mut rng = Pcg32::new(5, 2);
        let moved = BuildInput::from_triangles(&soup(&mut rng, 2000, 7.0)).bounds;
        assert_eq!(tracker.update(&mut bvh, &moved), UpdateAction::Rebuilt);
        // `refit` keeps it anyway; `rebuild` never refits.
        let mut refit = UpdateTracker::new(UpdatePolicy::Refit);
        refit.built(1.0);
        assert_eq!(refit.update(&mut bvh, &moved), UpdateAction::Refitted);
        let mut rebuild = UpdateTracker::new(UpdatePolicy::Rebuild);
        rebuild.built(1.0);
        assert_eq!(rebuild.update(&mut bvh, &moved), UpdateAction::Rebuilt);
    }

    #[test]
    fn policies_parse_and_print() {
        for text in ["rebuild", "refit", "auto", "auto:2"] {
            assert_eq!(text.parse::<UpdatePolicy>().unwrap().to_string(), text);
        }
        assert!("auto:0.5".parse::<UpdatePolicy>().is_err());
        assert!("sometimes".parse::<UpdatePolicy>().is_err());
    }
}
