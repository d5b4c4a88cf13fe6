//! Single-ray traversal of a [`WideBvh`]: one SIMD slab test of all `N`
//! children of a node, the nearest hit child visited next and the others
//! pushed far-to-near with their cull bounds; generic over the SIMD backend
//! ([`Lanes`]), over closest-hit and any-hit (`ANY_HIT`), and over the leaf
//! test (a closure over a leaf's triangle groups).
//!
//! The box test is the exact culling rule of the binary traversal
//! ([`crate::bvh::traverse`], whose module docs give the proof), evaluated
//! lane by lane with the same operations and the same NaN behaviour:
//! a child is kept when the ray crosses its box (all three slabs, widened by
//! [`SLACK`] times the depth slab's largest distance) and when its slab along
//! the depth axis overlaps `[t_min, closest hit]`, widened the same way. The
//! watertight test's `t` is a convex combination of the vertices' distances
//! along that axis, so any hit the reference would return lies inside the
//! widened depth slab of every box holding its triangle: the wide tree
//! returns exactly what brute force returns. Children are ordered by their
//! exact entry distance (no margin), which only affects speed.
//!
//! The stack holds at most `N - 1` entries per level of the current path,
//! and depth is bounded by [`MAX_DEPTH`] (checked by `WideBvh::validate`),
//! so a fixed array of [`stack_capacity`] entries cannot overflow; on an
//! invalid, deeper tree the bounds check panics instead.

use super::leaf::set_bits;
use super::node::{TriangleGroup, WideNode};
use super::simd::Lanes;
use super::{WideBvh, root_entry};
use crate::bvh::MAX_DEPTH;
use crate::bvh::traverse::SLACK;
use caustic_geom::Vec3;
use std::mem::MaybeUninit;

/// Entries the traversal stack needs for an `N`-wide tree of depth at most
/// [`MAX_DEPTH`].
pub const fn stack_capacity(n: usize) -> usize {
    (n - 1) * (MAX_DEPTH + 1) + 1
}

/// Largest stack of any width here (`N = 8`).
const STACK: usize = stack_capacity(8);

/// Per-ray constants of the `N`-lane slab test.
#[derive(Clone, Copy, Debug)]
pub struct RayBoxes<const N: usize, V: Lanes<N>> {
    /// The backend's token, for the vectors made from nodes.
    isa: V::Isa,
    /// Per axis in the order `[other, other, depth]` (the depth axis is the
    /// direction's largest component, as in the triangle test): the node row
    /// holding the plane the ray enters through, and the one it leaves by.
    near_row: [usize; 3],
    far_row: [usize; 3],
    origin: [V; 3],
    inv_dir: [V; 3],
}

impl<const N: usize, V: Lanes<N>> RayBoxes<N, V> {
    /// `dir` must be finite and non-zero.
    #[inline(always)]
    pub fn new(isa: V::Isa, origin: Vec3, dir: Vec3) -> Self {
        let depth = depth_axis(dir);
        let axes = [(depth + 1) % 3, (depth + 2) % 3, depth];
        let inv_dir = [1.0 / dir[axes[0]], 1.0 / dir[axes[1]], 1.0 / dir[axes[2]]];
        // A `-0.0` component gives `-inf`: the ray runs down that axis.
        let negative = |k: usize| usize::from(inv_dir[k].is_sign_negative());
        // No SIMD inside closures: see the soundness note in `simd`.
        Self {
            isa,
            near_row: [0, 1, 2].map(|k| axes[k] + 3 * negative(k)),
            far_row: [0, 1, 2].map(|k| axes[k] + 3 * (1 - negative(k))),
            origin: [
                V::splat(isa, origin[axes[0]]),
                V::splat(isa, origin[axes[1]]),
                V::splat(isa, origin[axes[2]]),
            ],
            inv_dir: [
                V::splat(isa, inv_dir[0]),
                V::splat(isa, inv_dir[1]),
                V::splat(isa, inv_dir[2]),
            ],
        }
    }

    /// Distances to the planes in row `row` of `node` along slot axis `k`.
    #[inline(always)]
    fn slab(&self, node: &WideNode<N>, row: usize, k: usize) -> V {
        (V::load(self.isa, &node.bounds[row]) - self.origin[k]) * self.inv_dir[k]
    }

    /// Tests the `N` child boxes of `node` over `[t_min, cutoff]`: the
    /// children that may hold a hit (bit per slot), each child's entry
    /// distance (the visiting order) and its cull bound (no hit inside can
    /// have a smaller `t`). Lane for lane the rule of `RayBoxTest::entry`.
    #[inline(always)]
    pub fn test(&self, node: &WideNode<N>, t_min: V, cutoff: V) -> (u32, V, V) {
        let n0 = self.slab(node, self.near_row[0], 0);
        let n1 = self.slab(node, self.near_row[1], 1);
        let n2 = self.slab(node, self.near_row[2], 2);
        let f0 = self.slab(node, self.far_row[0], 0);
        let f1 = self.slab(node, self.far_row[1], 1);
        let f2 = self.slab(node, self.far_row[2], 2);
        // `max_or(a, b)` skips a NaN `a`, and the depth slab's distances are
        // never NaN (its direction component is the largest, so non-zero):
        // this is the maximum of the slabs that are not NaN, as in
        // `RayBoxTest::entry`, in two dependent steps instead of three.
        let near = n0.max_or(n1.max_or(n2));
        let far = f0.min_or(f1.min_or(f2));
        let margin = n2.abs().max_or(f2.abs()) * V::splat(self.isa, SLACK);
        let crosses = (near - margin).le(far + margin);
        let lo = t_min.max_or(n2 - margin);
        let hi = cutoff.min_or(f2 + margin);
        (V::bits(crosses & lo.le(hi)), near, lo)
    }
}

/// The axis of the direction's largest magnitude, first axis on ties: the
/// depth axis of both the slab test and the triangle test.
#[inline(always)]
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

/// A child waiting on the stack: where it leads and its cull bound.
#[derive(Clone, Copy, Debug)]
struct Entry {
    child: u32,
    groups: u32,
    bound: f32,
}

/// The test a traversal runs at each leaf it reaches.
pub trait LeafTest<const N: usize> {
    /// Tests a leaf's triangle groups; `Some(t)` when it found a hit that
    /// becomes the new closest distance `t` (the test keeps the hit itself).
    fn test(&mut self, groups: &[TriangleGroup<N>]) -> Option<f32>;
}

/// Traverses `bvh` for a ray over `(t_min, t_max)`, running `leaf` on every
/// leaf that may hold a hit. With `ANY_HIT` the traversal stops at the
/// first leaf that reports one; otherwise it goes on with the interval cut
/// to the reported `t`. Returns whether any leaf reported a hit.
///
/// The leaf test is a trait, not a closure, because a closure is compiled
/// without the SIMD backend's target features (see `simd`).
#[inline(always)]
pub fn traverse<const N: usize, V: Lanes<N>, const ANY_HIT: bool>(
    bvh: &WideBvh<N>,
    boxes: &RayBoxes<N, V>,
    t_min: f32,
    t_max: f32,
    leaf: &mut impl LeafTest<N>,
) -> bool {
    let Some(start) = root_entry(bvh.root) else {
        return false;
    };
    traverse_from::<N, V, ANY_HIT>(bvh, boxes, start, t_min, t_max, leaf)
}

/// [`traverse`] of the subtree `start` (a node or leaf as the
/// `(child, groups)` pair of a slot) instead of the whole tree.
#[inline(always)]
pub fn traverse_from<const N: usize, V: Lanes<N>, const ANY_HIT: bool>(
    bvh: &WideBvh<N>,
    boxes: &RayBoxes<N, V>,
    start: (u32, u32),
    t_min: f32,
    t_max: f32,
    leaf: &mut impl LeafTest<N>,
) -> bool {
    assert!(stack_capacity(N) <= STACK, "widths up to 8");
    let (mut child, mut groups) = start;
    let t_min_v = V::splat(boxes.isa, t_min);
    let mut cutoff = t_max;
    let mut stack = [const { MaybeUninit::<Entry>::uninit() }; STACK];
    let mut depth = 0;
    let mut found = false;
    loop {
        if groups == 0 {
            let node = &bvh.nodes[child as usize];
            let (hits, order, bound) = boxes.test(node, t_min_v, V::splat(boxes.isa, cutoff));
            if hits != 0 {
                let first = hits.trailing_zeros() as usize;
                let rest = hits & (hits - 1);
                let nearest = if rest == 0 {
                    first
                } else if ANY_HIT {
                    // Any hit will do: no order, push the rest as they come.
                    let bound = bound.to_array();
                    for slot in set_bits(rest) {
                        stack[depth].write(Entry {
                            child: node.child[slot],
                            groups: node.groups[slot],
                            bound: bound[slot],
                        });
                        depth += 1;
                    }
                    first
                } else if rest & (rest - 1) == 0 {
                    // Two children, the most common case: one comparison.
                    let second = rest.trailing_zeros() as usize;
                    let (order, bound) = (order.to_array(), bound.to_array());
                    let (near, far) = if order[second] < order[first] {
                        (second, first)
                    } else {
                        (first, second)
                    };
                    stack[depth].write(Entry {
                        child: node.child[far],
                        groups: node.groups[far],
                        bound: bound[far],
                    });
                    depth += 1;
                    near
                } else {
                    push_far_children(node, hits, order, bound, &mut stack, &mut depth)
                };
                child = node.child[nearest];
                groups = node.groups[nearest];
                continue;
            }
        } else {
            let range = child as usize..(child + groups) as usize;
            if let Some(t) = leaf.test(&bvh.groups[range]) {
                found = true;
                if ANY_HIT {
                    return true;
                }
                cutoff = t;
            }
        }
        // Pop the next child that still starts before the closest hit.
        loop {
            if depth == 0 {
                return found;
            }
            depth -= 1;
            // SAFETY: entries below `depth` were written by the pushes.
            let entry = unsafe { stack[depth].assume_init() };
            if ANY_HIT || entry.bound <= cutoff {
                child = entry.child;
                groups = entry.groups;
                break;
            }
        }
    }
}

/// Sorts the hit children (`hits`, at least three) by entry distance, pushes
/// all but the nearest far-to-near and returns the nearest's slot.
#[inline(always)]
fn push_far_children<const N: usize, V: Lanes<N>>(
    node: &WideNode<N>,
    hits: u32,
    order: V,
    bound: V,
    stack: &mut [MaybeUninit<Entry>; STACK],
    depth: &mut usize,
) -> usize {
    let order = order.to_array();
    let bound = bound.to_array();
    // Insertion sort of the slots, farthest first.
    let mut slots = [0usize; N];
    let mut count = 0;
    let mut bits = hits;
    while bits != 0 {
        let slot = bits.trailing_zeros() as usize;
        bits &= bits - 1;
        let mut j = count;
        while j > 0 && order[slots[j - 1]] < order[slot] {
            slots[j] = slots[j - 1];
            j -= 1;
        }
        slots[j] = slot;
        count += 1;
    }
    for &slot in &slots[..count - 1] {
        stack[*depth].write(Entry {
            child: node.child[slot],
            groups: node.groups[slot],
            bound: bound[slot],
        });
        *depth += 1;
    }
    slots[count - 1]
}

#[cfg(test)]
mod tests {
    use super::super::node::{ChildRef, WideNode};
    use super::super::simd::{AnyCpu, Portable};
    use super::*;
    use crate::bvh::BvhNode;
    use crate::bvh::traverse::RayBoxTest;
    use caustic_geom::{Aabb, Pcg32};

    /// Every slot of the SIMD test decides and bounds exactly as the binary
    /// traversal's scalar test does on the same box.
    #[test]
    fn lanes_match_the_scalar_box_test() {
        let mut rng = Pcg32::new(7, 1);
        let mut unit = || rng.next_f32() * 2.0 - 1.0;
        for _ in 0..3000 {
            let mut node = WideNode::<4>::empty();
            for slot in 0..3 {
                let p = Vec3::new(unit(), unit(), unit()) * 4.0;
                let e = Vec3::new(unit().abs(), unit().abs(), unit().abs() * 0.01);
                node.set(slot, Aabb::new(p - e, p + e), ChildRef::Node(0));
            }
            let origin = Vec3::new(unit(), unit(), unit()) * 6.0;
            let mut dir = Vec3::new(unit(), unit(), unit());
            if unit() < -0.5 {
                dir.y = if unit() < 0.0 { 0.0 } else { -0.0 };
                node.bounds[1][0] = origin.y.min(node.bounds[4][0]);
            }
            let (t_min, cutoff) = (unit().abs(), 3.0 * unit().abs());
            let wide = RayBoxes::<4, Portable<4>>::new(AnyCpu, origin, dir);
            let (hits, order, bound) =
                wide.test(&node, Portable([t_min; 4]), Portable([cutoff; 4]));
            let scalar = RayBoxTest::new(origin, dir);
            for slot in 0..4 {
                let b = node.slot_bounds(slot);
                let expected = scalar.entry(&BvhNode::leaf(b, 0, 1), t_min, cutoff);
                assert_eq!(hits & (1 << slot) != 0, expected.is_some(), "slot {slot}");
                if let Some(e) = expected {
                    assert_eq!(e.bound.to_bits(), bound.0[slot].to_bits());
                    assert_eq!(e.order, order.0[slot], "signed zeros may differ");
                }
            }
        }
    }

    #[test]
    fn capacity_covers_a_full_path() {
        assert_eq!(stack_capacity(2), MAX_DEPTH + 2);
        assert!(stack_capacity(8) >= 7 * MAX_DEPTH);
    }
}
