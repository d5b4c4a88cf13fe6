//! Stack-based traversal of a [`Bvh2`](super::Bvh2), written once and
//! generic over closest-hit and any-hit (the `ANY_HIT` const parameter) and
//! over the leaf test (a closure over a range of primitive slots).
//!
//! Order: at an inner node both children's boxes are tested and the nearer
//! one is visited first while the farther is pushed with its entry distance,
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
//! - the interval is widened on both ends by a margin of [`SLACK`] times
//!   the box's largest distance along the ray's depth axis (the direction's
//!   largest component). The watertight triangle test computes `t` as a
//!   convex combination of the vertices' distances along that axis, so its
//!   rounding error is bounded by a few ulps of the largest of them, which
//!   the box's slab on that axis bounds in turn. With this margin a box is
//!   never culled, by the ray interval or by the closest hit so far, while
//!   it holds a triangle whose *computed* `t` would pass; the hierarchy
//!   therefore returns exactly what testing every triangle returns, ties
//!   included (ties go to the lower primitive id). A margin relative to
//!   `t` alone, as in Ize, "Robust BVH Ray Traversal" (JCGT 2013), is not
//!   enough: near `t = 0`, or for triangles much larger than `t`, the
//!   triangle's `t` error is absolute, not relative.

use super::{BvhNode, MAX_DEPTH};
use caustic_geom::Vec3;
use std::ops::Range;

/// Rounding margin of the slab test, relative to the box's distances along
/// the depth axis: 2^-19, about 16 ulps.
pub const SLACK: f32 = 1.0 / 524_288.0;

/// Per-ray constants of the slab test.
#[derive(Clone, Copy, Debug)]
pub struct RayBoxTest {
    origin: Vec3,
    inv_dir: Vec3,
    /// Per axis, the word of a node (`0..3` min, `4..7` max, see
    /// [`BvhNode`]'s layout) holding the plane the ray enters through.
    entry_word: [usize; 3],
    /// Per axis, the word holding the plane the ray leaves through.
    exit_word: [usize; 3],
    /// The direction's largest component: the axis along which the triangle
    /// test measures `t`, whose slab sets the rounding margin.
    depth_axis: usize,
}

impl RayBoxTest {
    /// Precomputes the reciprocal direction and the entry/exit planes; `dir`
    /// must be finite and non-zero.
    pub fn new(origin: Vec3, dir: Vec3) -> Self {
        let inv_dir = dir.recip();
        let negative = [0, 1, 2].map(|axis| usize::from(inv_dir[axis].is_sign_negative()));
        Self {
            origin,
            inv_dir,
            entry_word: [0, 1, 2].map(|axis| axis + 4 * negative[axis]),
            exit_word: [0, 1, 2].map(|axis| axis + 4 * (1 - negative[axis])),
            depth_axis: depth_axis(dir),
        }
    }

    /// Distance at which the ray enters `node`'s box within `[t_min, cutoff]`,
    /// widened by the rounding margin (see the module docs), or
    /// `f32::INFINITY` when it misses (a box entered only at infinity cannot
    /// hold a hit either).
    #[inline(always)]
    pub fn entry(&self, node: &BvhNode, t_min: f32, cutoff: f32) -> f32 {
        let words: &[f32; 8] = bytemuck::cast_ref(node);
        let slab =
            |word: usize, axis: usize| (words[word & 7] - self.origin[axis]) * self.inv_dir[axis];
        let nears = [0, 1, 2].map(|axis| slab(self.entry_word[axis], axis));
        let fars = [0, 1, 2].map(|axis| slab(self.exit_word[axis], axis));
        let near = max_skip_nan(
            nears[2],
            max_skip_nan(nears[1], max_skip_nan(nears[0], f32::NEG_INFINITY)),
        );
        let far = min_skip_nan(
            fars[2],
            min_skip_nan(fars[1], min_skip_nan(fars[0], f32::INFINITY)),
        );
        let axis = self.depth_axis;
        let margin = nears[axis].abs().max(fars[axis].abs()) * SLACK;
        // A NaN bound here (`inf - inf`: the empty box, or a box at
        // infinity) stays in the accumulator and fails `lo <= hi`: a miss.
        let lo = max_skip_nan(t_min, near - margin);
        let hi = min_skip_nan(cutoff, far + margin);
        if lo <= hi { lo } else { f32::INFINITY }
    }
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
    if ray.entry(root, t_min, cutoff) == f32::INFINITY {
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
            let hit_left = left_entry < f32::INFINITY;
            let hit_right = right_entry < f32::INFINITY;
            if hit_left && hit_right {
                let (near, far, far_entry) = if right_entry < left_entry {
                    (left + 1, left, left_entry)
                } else {
                    (left, left + 1, right_entry)
                };
                stack[depth] = (far as u32, far_entry);
                depth += 1;
                current = near;
                continue;
            } else if hit_left || hit_right {
                current = if hit_left { left } else { left + 1 };
                continue;
            }
        }
        // Pop the next node that still starts before the closest hit.
        loop {
            if depth == 0 {
                return found;
            }
            depth -= 1;
            let (index, entry) = stack[depth];
            if entry <= cutoff {
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

    fn entry(origin: Vec3, dir: Vec3, node: &BvhNode) -> f32 {
        let t = RayBoxTest::new(origin, dir).entry(node, 0.0, f32::INFINITY);
        // Round the margin away so the tests can compare exact distances.
        if t.is_finite() {
            (t * 1e4).round() / 1e4
        } else {
            t
        }
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
        assert_eq!(test.entry(&node, 0.0, 1.5), f32::INFINITY);
        assert_eq!(test.entry(&node, 3.5, f32::INFINITY), f32::INFINITY);
        assert_eq!(test.entry(&node, 2.5, f32::INFINITY), 2.5);
        // A box starting exactly at the cutoff is kept, one just past the
        // rounding margin is not.
        assert!(test.entry(&node, 0.0, 2.0) <= 2.0);
        assert_eq!(test.entry(&node, 0.0, 2.0 - 1e-4), f32::INFINITY);
    }

    #[test]
    fn traversal_of_an_empty_tree_finds_nothing() {
        let test = RayBoxTest::new(Vec3::ZERO, Vec3::X);
        let visited = traverse::<false>(&[], &test, 0.0, f32::INFINITY, |_| Some(1.0));
        assert!(!visited);
    }
}
