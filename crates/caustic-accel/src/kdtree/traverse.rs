//! Stack-based front-to-back traversal of a [`KdTree`], generic over
//! closest-hit and any-hit (the `ANY_HIT` const parameter) and over the
//! leaf test (a closure over a range of references).
//!
//! The classic kd-tree loop (Havran's thesis, 2000; Wald's, 2004): the
//! ray's parameter interval inside the current cell is cut at the split
//! plane, the child on the origin's side is visited first and the other is
//! pushed with its interval. What is not classic is where the loop lets a
//! hit lie, which the crate's exact contract (results identical to testing
//! every triangle) decides; `crate::slab_ray` explains the two rounding
//! facts behind it:
//!
//! - **Culling by whole-triangle boxes.** A leaf cannot limit hits to the
//!   ray's interval inside its cell, nor can traversal stop once the
//!   closest hit lies before the next cell: a clipped triangle in a later
//!   cell may report a smaller `t`. Each node therefore carries
//!   `ref_bounds`, the box of the whole triangles below it, and a subtree
//!   is skipped only when that box's depth slab misses `[t_min, closest
//!   hit]` (`SlabRay::reach`). Hits are taken wherever they lie; the
//!   closest wins, ties to the lowest id. The check costs a load, so it is
//!   tried only where it is likely to succeed, when the ray's interval in
//!   the subtree's cell lies outside `[t_min, closest hit]`; a subtree
//!   whose interval overlaps it is visited unchecked, which is always
//!   correct.
//! - **Thick planes.** Which cells the ray crosses is decided on the whole
//!   line (not cut to `[t_min, t_max]`: a triangle crossed just beyond
//!   `t_max` can report a `t` inside it), and a split plane counts as
//!   crossed within `delta` of it: the left child gets the part of the
//!   line with `x[axis] <= split + delta`, the right child `x[axis] >=
//!   split - delta`, and a ray parallel to the plane goes to every child
//!   within `delta` of it.
//!
//! The price of exactness, counted on sibenik with rays leaving surfaces
//! in random directions: a quarter of the inner nodes visited and 17
//! culling-box checks per ray lie behind the origin, in subtrees holding
//! triangles whose boxes reach past it (the surface the ray leaves, first
//! of all); camera rays, which start outside, hardly pay.
//!
//! The stack is a fixed array of [`MAX_DEPTH`] entries: it holds at most
//! one far child per level of the current path, and the builder bounds the
//! depth by `MAX_DEPTH` (checked by [`KdTree::validate`]).

use super::{KdNode, KdTree, MAX_DEPTH};
use crate::slab_ray::SlabRay;
use std::ops::Range;

/// Intervals of the line in the two children of `node` (an inner node
/// whose cell the line crosses over `[ta, tb]`), nearer child first:
/// `(index, interval)`, the interval empty (lo > hi) where the line misses
/// that child.
#[inline(always)]
fn children(ray: &SlabRay, node: &KdNode, ta: f32, tb: f32) -> [(usize, (f32, f32)); 2] {
    let (axis, split, left) = (node.axis(), node.split(), node.left_child());
    let o = ray.origin[axis];
    if ray.parallel[axis] {
        let off = o - split;
        let miss = (f32::INFINITY, f32::NEG_INFINITY);
        let side = |inside: bool| if inside { (ta, tb) } else { miss };
        return [
            (left, side(off <= ray.delta)),
            (left + 1, side(off >= -ray.delta)),
        ];
    }
    let inv = ray.inv_dir[axis];
    // Where the line leaves `x <= split + delta` and enters
    // `x >= split - delta` (the other way round when it runs down).
    let t_below = (split + ray.delta - o) * inv;
    let t_above = (split - ray.delta - o) * inv;
    if ray.negative[axis] {
        [
            (left + 1, (ta, tb.min(t_above))),
            (left, (ta.max(t_below), tb)),
        ]
    } else {
        [
            (left, (ta, tb.min(t_below))),
            (left + 1, (ta.max(t_above), tb)),
        ]
    }
}

/// A far child waiting on the stack: its node and its line interval.
#[derive(Clone, Copy, Debug, Default)]
struct Pending {
    node: u32,
    ta: f32,
    tb: f32,
}

/// Traverses `tree` for a ray over `(t_min, t_max)`.
///
/// `leaf(refs)` tests the references in that range and returns `Some(t)`
/// when it found a hit that becomes the new closest distance `t` (it keeps
/// the hit itself). With `ANY_HIT` the traversal stops at the first such
/// leaf; otherwise it goes on, culling by `t`. Returns whether any leaf
/// reported a hit.
#[inline]
pub fn traverse<const ANY_HIT: bool>(
    tree: &KdTree,
    ray: &SlabRay,
    t_min: f32,
    t_max: f32,
    mut leaf: impl FnMut(Range<usize>) -> Option<f32>,
) -> bool {
    let (nodes, boxes) = (&tree.nodes[..], &tree.ref_bounds[..]);
    if nodes.is_empty() || ray.reach(&boxes[0], t_min, t_max).is_none() {
        return false;
    }
    let Some((mut ta, mut tb)) = ray.clip_to(&tree.bounds, ray.delta) else {
        return false;
    };
    let mut cutoff = t_max;
    // May triangles below `index`, whose cell the line crosses over
    // `[lo, hi]`, still report a hit in `[t_min, cutoff]`?
    let relevant = |index: usize, lo: f32, hi: f32, cutoff: f32| {
        (lo <= cutoff && hi >= t_min) || ray.reach(&boxes[index], t_min, cutoff).is_some()
    };
    let mut stack = [Pending::default(); MAX_DEPTH];
    let mut depth = 0;
    let mut current = 0;
    let mut found = false;
    loop {
        let node = &nodes[current];
        if node.is_leaf() {
            let relevant_leaf = node.count() > 0 && relevant(current, ta, tb, cutoff);
            if let Some(t) = relevant_leaf.then(|| leaf(node.refs())).flatten() {
                found = true;
                if ANY_HIT {
                    return true;
                }
                cutoff = t;
            }
        } else {
            let [(near, (near_lo, near_hi)), (far, (far_lo, far_hi))] = children(ray, node, ta, tb);
            let visit_near = near_lo <= near_hi && relevant(near, near_lo, near_hi, cutoff);
            let visit_far = far_lo <= far_hi;
            if visit_near {
                if visit_far {
                    stack[depth] = Pending {
                        node: far as u32,
                        ta: far_lo,
                        tb: far_hi,
                    };
                    depth += 1;
                }
                (current, ta, tb) = (near, near_lo, near_hi);
                continue;
            }
            if visit_far && relevant(far, far_lo, far_hi, cutoff) {
                (current, ta, tb) = (far, far_lo, far_hi);
                continue;
            }
        }
        // Pop the next far child whose triangles may still beat the cutoff.
        loop {
            if depth == 0 {
                return found;
            }
            depth -= 1;
            let entry = stack[depth];
            let index = entry.node as usize;
            if relevant(index, entry.ta, entry.tb, cutoff) {
                (current, ta, tb) = (index, entry.ta, entry.tb);
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use caustic_geom::Vec3;

    #[test]
    fn children_split_the_interval_with_overlap_delta() {
        let node = KdNode::inner(0, 1.0, 5);
        let ray = SlabRay::new(Vec3::ZERO, Vec3::X, 2.0);
        let [(near, (a, b)), (far, (c, d))] = children(&ray, &node, 0.0, 2.0);
        assert_eq!((near, far), (5, 6));
        assert!(a == 0.0 && b > 1.0 && b < 1.0 + 1e-4);
        assert!(c < 1.0 && c > 1.0 - 1e-4 && d == 2.0);
        // Running down x, the right child comes first.
        let down = SlabRay::new(Vec3::new(2.0, 0.0, 0.0), -Vec3::X, 2.0);
        let [(near, _), (far, _)] = children(&down, &node, 0.0, 2.0);
        assert_eq!((near, far), (6, 5));
        // Parallel to the plane: only the side the origin is on, or both
        // within delta of it.
        let parallel = SlabRay::new(Vec3::new(0.5, 0.0, 0.0), Vec3::Y, 2.0);
        let [(_, l), (_, r)] = children(&parallel, &node, 0.0, 2.0);
        assert!(l.0 <= l.1 && r.0 > r.1);
        let on_plane = SlabRay::new(Vec3::new(1.0, 0.0, 0.0), Vec3::new(-0.0, 1.0, 0.0), 2.0);
        let [(_, l), (_, r)] = children(&on_plane, &node, 0.0, 2.0);
        assert!(l.0 <= l.1 && r.0 <= r.1);
    }

    #[test]
    fn the_empty_tree_is_never_hit() {
        let ray = SlabRay::new(Vec3::ZERO, Vec3::X, 1.0);
        let tree = KdTree::empty();
        assert!(!traverse::<false>(&tree, &ray, 0.0, f32::INFINITY, |_| {
            Some(1.0)
        }));
    }
}
