//! Stack-based traversal of a [`Bvh2`](super::Bvh2), written once and
//! generic over closest-hit and any-hit (the `ANY_HIT` const parameter) and
//! over the leaf test (a closure over a range of primitive slots).
//!
//! Order: at an inner node both children's boxes are tested and the nearer
//! one is visited first while the farther is pushed with its depth bound,
//! so a closest-hit query shrinks its interval early and can drop popped
//! nodes that now start beyond the closest hit (Aila and Laine, "Understanding
//! the Efficiency of Ray Traversal on GPUs", HPG 2009, for the trade-offs of
//! this ordering). The stack is a fixed array of [`MAX_DEPTH`] entries: it
//! holds at most one node per level of the current path, and builders bound
//! the depth by `MAX_DEPTH` (checked by `Bvh2::validate`), so it cannot
//! overflow; on a deeper, invalid tree the bounds check panics instead of
//! corrupting memory.
//!
//! Robustness of the slab test ([`RayBoxTest`]):
//! - it picks the entry and exit plane of each axis from the sign of the
//!   reciprocal direction (Williams et al., "An Efficient and Robust
//!   Ray-Box Intersection Algorithm", JGT 2005), so `-0.0` and `+0.0`
//!   components give the right infinities and the empty box
//!   (`min = +inf, max = -inf`) is never hit;
//! - a ray parallel to a slab and lying in its boundary plane gives
//!   `0 * inf = NaN`; every slab distance enters a comparison as the operand
//!   that loses to NaN, so that slab imposes no limit (the ray is inside the
//!   closed slab) instead of poisoning the result;
//! - a box is kept when the ray crosses it (all three slabs) and when its
//!   slab along the ray's depth axis (the direction's largest component)
//!   overlaps `[t_min, closest hit]`, both widened by a margin of [`SLACK`]
//!   times that slab's largest distance. Why the depth slab alone: the
//!   watertight triangle test computes `t` as a convex combination of the
//!   vertices' distances along that axis, so its result lies inside the
//!   depth slab of any box holding the triangle, up to a few ulps of the
//!   slab's distances, whatever the triangle's shape; it does *not*
//!   necessarily lie inside the box's exact entry/exit interval (a sliver's
//!   `t` was measured 4e-4 relative short of its plane's). Culling by the
//!   exact interval, even widened relative to `t` as in Ize, "Robust BVH Ray
//!   Traversal" (JCGT 2013), therefore skipped boxes holding hits that the
//!   reference returned, until the reference dropped such hits (the
//!   crossing rule, `caustic_geom::RayTriangleTest::within_crossing`; the
//!   wide BVH now culls by the interval widened by 1/512 of the depth slab,
//!   see `bvh::wide::traverse`; this binary traversal keeps the depth-slab
//!   rule, which stays exact). With this rule the hierarchy returns exactly what
//!   testing every triangle returns, ties included (equal `t` goes to the
//!   lower id), which the tests check bit for bit. Price, measured on the
//!   bunny with random rays: closest-hit 1.7 instead of 2.1 Mrays/s per
//!   core; the exact entry distance still orders the children, which
//!   recovers half of the loss.

use super::{BvhNode, MAX_DEPTH};
use caustic_geom::Vec3;
use std::ops::Range;

/// Rounding margin of the slab test, relative to the box's distances along
/// the depth axis: 2^-19, about 16 ulps.
pub const SLACK: f32 = 1.0 / 524_288.0;

/// Per-ray constants of the slab test.
#[derive(Clone, Copy, Debug)]
pub struct RayBoxTest {
    /// Origin, per axis in the order `[other, other, depth]`, where the
    /// depth axis is the direction's largest component: the one along which
    /// the triangle test measures `t`, whose slab sets the rounding margin.
    /// Fixing its position spares the per-node test a lookup.
    origin: [f32; 3],
    /// Reciprocal direction, same axis order.
    inv_dir: [f32; 3],
    /// Per axis (same order), the word of a node (`0..3` min, `4..7` max, see
    /// [`BvhNode`]'s layout) holding the plane the ray enters through.
    entry_word: [usize; 3],
    /// Per axis (same order), the word holding the plane the ray leaves through.
    exit_word: [usize; 3],
}

impl RayBoxTest {
    /// Precomputes the reciprocal direction and the entry/exit planes; `dir`
    /// must be finite and non-zero.
    pub fn new(origin: Vec3, dir: Vec3) -> Self {
        let depth = depth_axis(dir);
        let axes = [(depth + 1) % 3, (depth + 2) % 3, depth];
        let inv_dir = axes.map(|axis| 1.0 / dir[axis]);
        let negative = inv_dir.map(|inv| usize::from(inv.is_sign_negative()));
        Self {
            origin: axes.map(|axis| origin[axis]),
            inv_dir,
            entry_word: [0, 1, 2].map(|k| axes[k] + 4 * negative[k]),
            exit_word: [0, 1, 2].map(|k| axes[k] + 4 * (1 - negative[k])),
        }
    }

    /// Tests `node`'s box against the ray over `[t_min, cutoff]`, widened by
    /// the rounding margin (see the module docs); `None` when it cannot hold
    /// a hit there.
    #[inline(always)]
    pub fn entry(&self, node: &BvhNode, t_min: f32, cutoff: f32) -> Option<BoxEntry> {
        let words: &[f32; 8] = bytemuck::cast_ref(node);
        let slab = |word: usize, k: usize| (words[word & 7] - self.origin[k]) * self.inv_dir[k];
        let nears = [0, 1, 2].map(|k| slab(self.entry_word[k], k));
        let fars = [0, 1, 2].map(|k| slab(self.exit_word[k], k));
        let near = max_skip_nan(
            nears[2],
            max_skip_nan(nears[1], max_skip_nan(nears[0], f32::NEG_INFINITY)),
        );
        let far = min_skip_nan(
            fars[2],
            min_skip_nan(fars[1], min_skip_nan(fars[0], f32::INFINITY)),
        );
        let margin = max_skip_nan(nears[2].abs(), fars[2].abs()) * SLACK;
        // Does the ray pass through the box at all (all three slabs)?
        let crosses = near - margin <= far + margin;
        // Depth: the triangle test's `t` is a convex combination of vertex
        // distances along the depth axis, so only that slab bounds it; the
        // other slabs bound the exact hit, which the computed `t` of a thin
        // or grazing triangle can miss by far more than any margin. A NaN
        // bound (`inf - inf`: the empty box, or a box at infinity) stays in
        // the accumulator and fails `lo <= hi`: a miss.
        let lo = max_skip_nan(t_min, nears[2] - margin);
        let hi = min_skip_nan(cutoff, fars[2] + margin);
        (crosses && lo <= hi).then_some(BoxEntry {
            bound: lo,
            order: near,
        })
    }
}

/// A box the ray may find hits in.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BoxEntry {
    /// No hit inside the box can be reported with a smaller `t` (the depth
    /// slab's entry, less the margin, at least `t_min`): what the closest
    /// hit is compared with to cull the box later.
    pub bound: f32,
    /// Where the ray enters the box (all slabs, no margin): the key for
    /// visiting the nearer child first.
    pub order: f32,
}

/// The axis of the direction's largest magnitude, chosen exactly as
/// `RayTriangleTest` chooses it (first axis wins ties).
fn depth_axis(dir: Vec3) -> usize {
    let a = dir.abs();
    if a.x >= a.y && a.x >= a.z {
        0
    } else if a.y >= a.z {
        1
    } else {
        2
    }
}

/// `max(candidate, acc)` that keeps `acc` when `candidate` is NaN.
#[inline(always)]
fn max_skip_nan(candidate: f32, acc: f32) -> f32 {
    if candidate > acc { candidate } else { acc }
}

/// `min(candidate, acc)` that keeps `acc` when `candidate` is NaN.
#[inline(always)]
fn min_skip_nan(candidate: f32, acc: f32) -> f32 {
    if candidate < acc { candidate } else { acc }
}

/// Traverses `nodes` for a ray over `(t_min, t_max)`.
///
/// `leaf(slots)` tests the primitives in those slots of `prim_indices` and
/// returns `Some(t)` when it found a hit that becomes the new closest
/// distance `t` (it keeps the hit itself). With `ANY_HIT` the traversal stops
/// at the first such leaf; otherwise it goes on with the interval cut to
/// `t`. Returns whether any leaf reported a hit.
#[inline]
pub fn traverse<const ANY_HIT: bool>(
    nodes: &[BvhNode],
    ray: &RayBoxTest,
    t_min: f32,
    t_max: f32,
    mut leaf: impl FnMut(Range<usize>) -> Option<f32>,
) -> bool {
    let Some(root) = nodes.first() else {
        return false;
    };
    let mut cutoff = t_max;
    if ray.entry(root, t_min, cutoff).is_none() {
        return false;
    }
    let mut stack = [(0u32, 0.0f32); MAX_DEPTH];
    let mut depth = 0;
    let mut current = 0;
    let mut found = false;
    loop {
        let node = &nodes[current];
        if node.is_leaf() {
            if let Some(t) = leaf(node.prim_range()) {
                found = true;
                if ANY_HIT {
                    return true;
                }
                cutoff = t;
            }
        } else {
            let left = node.left_child();
            let left_entry = ray.entry(&nodes[left], t_min, cutoff);
            let right_entry = ray.entry(&nodes[left + 1], t_min, cutoff);
            match (left_entry, right_entry) {
                (Some(l), Some(r)) => {
                    let (near, far, far_bound) = if r.order < l.order {
                        (left + 1, left, l.bound)
                    } else {
                        (left, left + 1, r.bound)
                    };
                    stack[depth] = (far as u32, far_bound);
                    depth += 1;
                    current = near;
                    continue;
                }
                (Some(_), None) => {
                    current = left;
                    continue;
                }
                (None, Some(_)) => {
                    current = left + 1;
                    continue;
                }
                (None, None) => {}
            }
        }
        // Pop the next node that still starts before the closest hit.
        loop {
            if depth == 0 {
                return found;
            }
            depth -= 1;
            let (index, bound) = stack[depth];
            if bound <= cutoff {
                current = index as usize;
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use caustic_geom::Aabb;

    fn unit_node() -> BvhNode {
        BvhNode::leaf(Aabb::new(Vec3::ZERO, Vec3::ONE), 0, 1)
    }

    /// The box's cull bound, rounded so the margin disappears; inf for a miss.
    fn entry(origin: Vec3, dir: Vec3, node: &BvhNode) -> f32 {
        let hit = RayBoxTest::new(origin, dir).entry(node, 0.0, f32::INFINITY);
        hit.map_or(f32::INFINITY, |e| (e.bound * 1e4).round() / 1e4)
    }

    #[test]
    fn ordinary_hits_and_misses() {
        let node = unit_node();
        assert_eq!(entry(Vec3::new(0.5, 0.5, -2.0), Vec3::Z, &node), 2.0);
        assert_eq!(entry(Vec3::new(0.5, 0.5, 2.0), -Vec3::Z, &node), 1.0);
        assert_eq!(entry(Vec3::new(0.5, 0.5, 0.5), Vec3::X, &node), 0.0);
        assert_eq!(
            entry(Vec3::new(2.5, 0.5, -2.0), Vec3::Z, &node),
            f32::INFINITY
        );
        assert_eq!(
            entry(Vec3::new(0.5, 0.5, 2.0), Vec3::Z, &node),
            f32::INFINITY
        );
    }

    #[test]
    fn axis_parallel_rays_on_box_planes_hit() {
        let node = unit_node();
        for plane in [0.0, 1.0] {
            for zero in [0.0, -0.0] {
                let origin = Vec3::new(plane, 0.5, -2.0);
                assert_eq!(entry(origin, Vec3::new(zero, zero, 1.0), &node), 2.0);
                let origin = Vec3::new(plane, plane, -2.0);
                assert_eq!(entry(origin, Vec3::new(zero, 0.0, 1.0), &node), 2.0);
            }
        }
        // Parallel but outside the slab: miss.
        let origin = Vec3::new(1.0 + 1e-6, 0.5, -2.0);
        assert_eq!(entry(origin, Vec3::Z, &node), f32::INFINITY);
    }

    #[test]
    fn empty_box_is_never_hit() {
        let node = BvhNode::leaf(Aabb::EMPTY, 0, 1);
        for dir in [
            Vec3::X,
            -Vec3::X,
            Vec3::new(0.0, -0.0, 1.0),
            Vec3::ONE,
            -Vec3::ONE,
        ] {
            assert_eq!(entry(Vec3::ZERO, dir, &node), f32::INFINITY);
            assert_eq!(entry(Vec3::splat(1e30), dir, &node), f32::INFINITY);
        }
    }

    #[test]
    fn interval_limits_cull() {
        let node = unit_node();
        let test = RayBoxTest::new(Vec3::new(0.5, 0.5, -2.0), Vec3::Z);
        let bound = |t_min, cutoff| test.entry(&node, t_min, cutoff).map(|e| e.bound);
        assert_eq!(bound(0.0, 1.5), None);
        assert_eq!(bound(3.5, f32::INFINITY), None);
        assert_eq!(bound(2.5, f32::INFINITY), Some(2.5));
        // A box starting exactly at the cutoff is kept, one just past the
        // rounding margin is not.
        assert!(bound(0.0, 2.0).unwrap() <= 2.0);
        assert_eq!(bound(0.0, 2.0 - 1e-4), None);
    }

    #[test]
    fn depth_bound_comes_from_the_depth_axis_slab() {
        // The ray enters the unit box through its x = 0 face at t = 2, but
        // the depth axis is z, whose slab starts at t = 1: a sliver in the
        // box may report any t the z slab allows, so culling uses 1.
        let test = RayBoxTest::new(Vec3::new(-0.5, 0.5, -1.0), Vec3::new(0.25, 0.0, 1.0));
        let hit = test.entry(&unit_node(), 0.0, f32::INFINITY).unwrap();
        assert!((hit.order - 2.0).abs() < 1e-6);
        assert!((hit.bound - 1.0).abs() < 1e-4 && hit.bound <= 1.0);
    }

    #[test]
    fn traversal_of_an_empty_tree_finds_nothing() {
        let test = RayBoxTest::new(Vec3::ZERO, Vec3::X);
        let visited = traverse::<false>(&[], &test, 0.0, f32::INFINITY, |_| Some(1.0));
        assert!(!visited);
    }
}
