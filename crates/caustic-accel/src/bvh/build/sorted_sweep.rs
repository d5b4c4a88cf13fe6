//! The exact SAH step over split-point-sorted orders, shared by the full-sweep
//! builder (`bvh-sweep`, which runs it from the root) and the binned builder
//! (`bvh-binned`, which runs it on small nodes, where sorting a few
//! primitives once is cheaper than filling bins at every level).
//!
//! A node holds its primitives three times, once per axis, each sorted by
//! split point (box center) along that axis (ties by id). One pass from the right per axis
//! stores the suffix costs `A_R N_R`; one pass from the left grows the
//! prefix box and evaluates every one of the `n - 1` split positions, so the
//! plane found is the SAH optimum among all object splits by a sorted
//! split-point coordinate (the "full sweep" of MacDonald and Booth, "Heuristics
//! for ray tracing using space subdivision", The Visual Computer 1990; Wald,
//! Boulos and Shirley, "Ray Tracing Deformable Scenes using Dynamic Bounding
//! Volume Hierarchies", ACM TOG 2007). Applying the split keeps all three
//! orders sorted without sorting again: the split axis's order is cut at the
//! position, and the other two are partitioned stably by a side mark per
//! primitive.
//!
//! Leaf rules (the same as `bvh-binned`): a node with at most
//! `min_leaf_size` primitives is a leaf; otherwise it splits when the SAH
//! says so (`C_trav A + C_isect (A_L N_L + A_R N_R) <= C_isect N A`, with
//! half areas) or when it holds more than `max_leaf_size`. Depth bound: when
//! `depth + ceil(log2 n)` reaches [`MAX_DEPTH`] the node splits at the
//! median of its widest axis instead, which halves `n` per level, so no leaf
//! is deeper than `MAX_DEPTH`. Non-finite costs (boxes of huge extent) never
//! win; a node with no finite candidate splits at the median if it must.

use super::build_box::BuildBox;
use crate::bvh::{BvhNode, MAX_DEPTH};
use bytemuck::Zeroable;
use glam::Vec4;
use std::cell::Cell;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// Leaf-size bounds and SAH constants of a top-down build.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SahRules {
    /// Nodes with at most this many primitives are always leaves.
    pub min_leaf_size: usize,
    /// Nodes with more primitives are always split.
    pub max_leaf_size: usize,
    pub traversal_cost: f32,
    pub intersection_cost: f32,
}

impl SahRules {
    /// SAH leaf test, multiplied through by the node's half area so that
    /// flat or point-like nodes (area 0) need no division; `weighted_area`
    /// is the split's `A_L N_L + A_R N_R`.
    #[inline]
    pub fn leaf_is_cheaper(&self, n: usize, half_area: f32, weighted_area: f32) -> bool {
        let leaf = self.intersection_cost * n as f32 * half_area;
        let split = self.traversal_cost * half_area + self.intersection_cost * weighted_area;
        leaf <= split
    }

    /// Whether a node at `depth` may still split by SAH; past this budget it
    /// must split at a median to stay within [`MAX_DEPTH`].
    #[inline]
    pub fn sah_allowed(n: usize, depth: usize) -> bool {
        depth + ceil_log2(n) < MAX_DEPTH
    }
}

/// `ceil(log2(n))` for `n >= 1`: the depth a median-split subtree of `n`
/// single-primitive leaves needs.
pub fn ceil_log2(n: usize) -> usize {
    (usize::BITS - (n.max(1) - 1).leading_zeros()) as usize
}

/// The key that sorts primitive `id` by the split-point coordinate `x` (total
/// order on finite floats), ties by id.
#[inline]
pub fn sort_key(x: f32, id: u32) -> u64 {
    let bits = x.to_bits();
    let ordered = if bits >> 31 == 1 {
        !bits
    } else {
        bits | 0x8000_0000
    };
    (u64::from(ordered) << 32) | u64::from(id)
}

/// Which side of the current split each primitive goes to, by id. Splits
/// running in parallel touch disjoint ids.
pub trait SideMarks {
    fn mark(&self, id: u32, left: bool);
    fn is_left(&self, id: u32) -> bool;
}

/// One flag per primitive, shared by parallel subtrees (relaxed atomics
/// compile to plain byte loads and stores).
impl SideMarks for [AtomicBool] {
    #[inline(always)]
    fn mark(&self, id: u32, left: bool) {
        self.get(id as usize)
            .expect("id in range")
            .store(left, Relaxed);
    }
    #[inline(always)]
    fn is_left(&self, id: u32) -> bool {
        self[id as usize].load(Relaxed)
    }
}

/// A bit per primitive, for small nodes with local ids (`64 * len` of them).
impl SideMarks for [Cell<u64>] {
    #[inline(always)]
    fn mark(&self, id: u32, left: bool) {
        let (word, bit) = (&self[id as usize / 64], id % 64);
        word.set(word.get() & !(1 << bit) | u64::from(left) << bit);
    }
    #[inline(always)]
    fn is_left(&self, id: u32) -> bool {
        self[id as usize / 64].get() >> (id % 64) & 1 == 1
    }
}

/// A node's split: the first `left_count` primitives of the `axis` order
/// go left. The sides' boxes come out of [`mark_sides`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SweepSplit {
    pub axis: usize,
    pub left_count: usize,
    /// `A_L N_L + A_R N_R` with half areas.
    pub weighted_area: f32,
}

/// The cheapest split position on each axis: `(A_L N_L + A_R N_R, left
/// count)`, or `None` when no cost on that axis is finite. Among equal
/// costs the one nearest the middle from the left wins, so coincident
/// primitives split in halves. `right_costs` is scratch of the orders'
/// length.
///
/// The three axes are swept together, one SIMD lane each: a pass from the
/// right stores the suffix costs, a pass from the left keeps the running
/// minimum with lane masks, so the loops have no data-dependent branches
/// (on short sweeps a mispredicted "new best" costs more than the
/// arithmetic).
#[inline]
pub fn sweep_axes(
    boxes: &[BuildBox],
    orders: [&[u32]; 3],
    right_costs: &mut [Vec4],
) -> [Option<(f32, usize)>; 3] {
    let [o0, o1, o2] = orders;
    let n = o0.len();
    let mut acc = [BuildBox::EMPTY; 3];
    let mut count = Vec4::ZERO;
    let suffixes = o0.iter().zip(o1).zip(o2).zip(right_costs.iter_mut());
    for (((&i0, &i1), &i2), right_cost) in suffixes.skip(1).rev() {
        acc[0] = acc[0].union(boxes[i0 as usize]);
        acc[1] = acc[1].union(boxes[i1 as usize]);
        acc[2] = acc[2].union(boxes[i2 as usize]);
        count += Vec4::ONE;
        *right_cost = half_areas(&acc) * count;
    }
    // `f32::MAX` rather than infinity, so infinite costs never win.
    let (mut best_cost, mut best_k) = (Vec4::splat(f32::MAX), Vec4::ZERO);
    let mut left = [BuildBox::EMPTY; 3];
    let mut count = Vec4::ZERO;
    // Cutting after entry `k - 1`: its box joins the left side.
    let prefixes = o0.iter().zip(o1).zip(o2).zip(&right_costs[1..]);
    for (k, (((&i0, &i1), &i2), &right_cost)) in (1..n).zip(prefixes) {
        left[0] = left[0].union(boxes[i0 as usize]);
        left[1] = left[1].union(boxes[i1 as usize]);
        left[2] = left[2].union(boxes[i2 as usize]);
        count += Vec4::ONE;
        let cost = half_areas(&left) * count + right_cost;
        let better = if 2 * k <= n {
            cost.cmple(best_cost)
        } else {
            cost.cmplt(best_cost)
        };
        best_cost = Vec4::select(better, cost, best_cost);
        // `count` is `k` here.
        best_k = Vec4::select(better, count, best_k);
    }
    std::array::from_fn(|axis| {
        (best_k[axis] > 0.0).then(|| (best_cost[axis], best_k[axis] as usize))
    })
}

/// Half the surface areas of three non-empty boxes, one per lane (the
/// fourth is 0).
#[inline(always)]
pub fn half_areas(b: &[BuildBox; 3]) -> Vec4 {
    let e = b.map(|b| b.max - b.min);
    let x = Vec4::new(e[0].x, e[1].x, e[2].x, 0.0);
    let y = Vec4::new(e[0].y, e[1].y, e[2].y, 0.0);
    let z = Vec4::new(e[0].z, e[1].z, e[2].z, 0.0);
    x * y + y * z + z * x
}

/// Picks the winner among per-axis results (the first axis wins ties).
pub fn finish_split(per_axis: [Option<(f32, usize)>; 3]) -> Option<SweepSplit> {
    let mut winner: Option<SweepSplit> = None;
    for (axis, result) in per_axis.into_iter().enumerate() {
        let Some((cost, left_count)) = result else {
            continue;
        };
        if winner.is_none_or(|best| cost < best.weighted_area) {
            winner = Some(SweepSplit {
                axis,
                left_count,
                weighted_area: cost,
            });
        }
    }
    winner
}

/// Box of the primitives `ids`.
#[inline]
pub fn union_of(boxes: &[BuildBox], ids: &[u32]) -> BuildBox {
    ids.iter()
        .fold(BuildBox::EMPTY, |b, &id| b.union(boxes[id as usize]))
}

/// The median split of a node's widest axis (by its box): the depth-bounding
/// fallback.
pub fn median_split(n: usize, bounds: &BuildBox) -> SweepSplit {
    SweepSplit {
        axis: bounds.largest_axis(),
        left_count: n / 2,
        weighted_area: f32::NAN,
    }
}

/// Marks each primitive's side (those in the first `left_count` entries of
/// the split axis's order go left) and returns both sides' boxes.
#[inline]
pub fn mark_sides<M: SideMarks + ?Sized>(
    boxes: &[BuildBox],
    order: &[u32],
    left_count: usize,
    marks: &M,
) -> (BuildBox, BuildBox) {
    let (left, right) = order.split_at(left_count);
    let mark = |ids: &[u32], side: bool| {
        ids.iter().fold(BuildBox::EMPTY, |b, &id| {
            marks.mark(id, side);
            b.union(boxes[id as usize])
        })
    };
    (mark(left, true), mark(right, false))
}

/// Moves the left-marked ids of `order` to its front, keeping the relative
/// order on both sides; `temp` is scratch of the same length. Branch-free:
/// every id is written to both candidate places and only one cursor moves.
#[inline]
pub fn stable_partition<M: SideMarks + ?Sized>(order: &mut [u32], temp: &mut [u32], marks: &M) {
    let n = order.len();
    let (mut left, mut right) = (0, 0);
    for i in 0..n {
        let id = order[i];
        let goes_left = marks.is_left(id);
        order[left] = id;
        temp[right] = id;
        left += usize::from(goes_left);
        right += usize::from(!goes_left);
    }
    order[left..].copy_from_slice(&temp[..right]);
}

/// Scratch and orders of one node, all of the node's length.
pub struct NodeLists<'a> {
    /// Per axis, the node's ids sorted by split point along that axis.
    pub orders: [&'a mut [u32]; 3],
    /// Suffix-cost scratch, one lane per axis.
    pub costs: &'a mut [Vec4],
    /// Partition scratch.
    pub temp: &'a mut [u32],
}

impl<'a> NodeLists<'a> {
    pub fn len(&self) -> usize {
        self.temp.len()
    }

    /// The lists of both children, after the orders have been partitioned.
    pub fn split_at(self, k: usize) -> (NodeLists<'a>, NodeLists<'a>) {
        let [o0, o1, o2] = self.orders;
        let (o0l, o0r) = o0.split_at_mut(k);
        let (o1l, o1r) = o1.split_at_mut(k);
        let (o2l, o2r) = o2.split_at_mut(k);
        let (cl, cr) = self.costs.split_at_mut(k);
        let (tl, tr) = self.temp.split_at_mut(k);
        (
            NodeLists {
                orders: [o0l, o1l, o2l],
                costs: cl,
                temp: tl,
            },
            NodeLists {
                orders: [o0r, o1r, o2r],
                costs: cr,
                temp: tr,
            },
        )
    }

    /// The lists of the node over the entries `range`, reborrowed.
    #[inline(always)]
    pub fn range(&mut self, range: Range<usize>) -> NodeLists<'_> {
        let [o0, o1, o2] = &mut self.orders;
        NodeLists {
            orders: [
                &mut o0[range.clone()],
                &mut o1[range.clone()],
                &mut o2[range.clone()],
            ],
            costs: &mut self.costs[range.clone()],
            temp: &mut self.temp[range],
        }
    }
}

/// Sequential exact-SAH recursion over a node's [`NodeLists`].
pub struct SortedSweep<'a, M: ?Sized> {
    /// Box of every primitive, indexed by the ids in the orders.
    pub boxes: &'a [BuildBox],
    pub rules: SahRules,
    pub marks: &'a M,
}

impl<M: SideMarks + ?Sized> SortedSweep<'_, M> {
    /// Leaf or split for a node.
    pub fn decide(
        &self,
        lists: &mut NodeLists,
        bounds: &BuildBox,
        depth: usize,
    ) -> Option<SweepSplit> {
        let n = lists.len();
        if n <= self.rules.min_leaf_size {
            return None;
        }
        let must_split = n > self.rules.max_leaf_size;
        if n == 2 {
            return self.decide_pair(lists.orders[0], bounds, must_split);
        }
        if SahRules::sah_allowed(n, depth) {
            let [o0, o1, o2] = &lists.orders;
            let per_axis = sweep_axes(self.boxes, [o0, o1, o2], lists.costs);
            if let Some(split) = finish_split(per_axis) {
                let cheaper =
                    self.rules
                        .leaf_is_cheaper(n, bounds.half_area(), split.weighted_area);
                return (must_split || !cheaper).then_some(split);
            }
        }
        must_split.then(|| median_split(n, bounds))
    }

    /// Two primitives split the same way on every axis, one per side.
    #[inline]
    fn decide_pair(
        &self,
        order: &[u32],
        bounds: &BuildBox,
        must_split: bool,
    ) -> Option<SweepSplit> {
        let (a, b) = (self.boxes[order[0] as usize], self.boxes[order[1] as usize]);
        let weighted_area = a.half_area() + b.half_area();
        let cheaper = self
            .rules
            .leaf_is_cheaper(2, bounds.half_area(), weighted_area);
        (must_split || !cheaper).then_some(SweepSplit {
            axis: 0,
            left_count: 1,
            weighted_area,
        })
    }

    /// Partitions the two orders other than the split axis's stably by
    /// side; returns both sides' boxes.
    pub fn apply(&self, lists: &mut NodeLists, split: &SweepSplit) -> (BuildBox, BuildBox) {
        let order = &lists.orders[split.axis];
        let sides = mark_sides(self.boxes, order, split.left_count, self.marks);
        for axis in (0..3).filter(|&axis| axis != split.axis) {
            stable_partition(lists.orders[axis], lists.temp, self.marks);
        }
        sides
    }

    /// Builds the subtree over `lists` (slots `offset ..`): pushes the nodes
    /// below it into `out` (children as a pair, then their subtrees, indices
    /// relative to `out`'s start) and returns its root.
    pub fn subtree(
        &self,
        mut lists: NodeLists,
        bounds: BuildBox,
        offset: usize,
        depth: usize,
        out: &mut Vec<BvhNode>,
    ) -> BvhNode {
        let n = lists.len();
        self.subtree_range(&mut lists, 0..n, bounds, offset, depth, out)
    }

    /// [`Self::subtree`] over the entries `range` of `lists`, whose first
    /// entry is slot `offset - range.start`.
    fn subtree_range(
        &self,
        lists: &mut NodeLists,
        range: Range<usize>,
        bounds: BuildBox,
        offset: usize,
        depth: usize,
        out: &mut Vec<BvhNode>,
    ) -> BvhNode {
        let n = range.len();
        let split = {
            let mut node = lists.range(range.clone());
            self.decide(&mut node, &bounds, depth)
                .map(|split| (split, self.apply(&mut node, &split)))
        };
        let Some((split, (left_bounds, right_bounds))) = split else {
            return BvhNode::leaf(bounds.to_aabb(), offset as u32, n as u32);
        };
        let pair = out.len();
        out.extend([BvhNode::zeroed(); 2]);
        let (k, mid) = (split.left_count, range.start + split.left_count);
        let left = self.subtree_range(lists, range.start..mid, left_bounds, offset, depth + 1, out);
        let right = self.subtree_range(
            lists,
            mid..range.end,
            right_bounds,
            offset + k,
            depth + 1,
            out,
        );
        out[pair] = left;
        out[pair + 1] = right;
        BvhNode::inner(bounds.to_aabb(), pair as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use caustic_geom::{Aabb, Vec3};

    #[test]
    fn ceil_log2_values() {
        let got: Vec<usize> = [1, 2, 3, 4, 5, 8, 9].map(ceil_log2).to_vec();
        assert_eq!(got, [0, 1, 2, 2, 3, 3, 4]);
    }

    #[test]
    fn sort_keys_follow_the_floats() {
        let xs = [-3.0f32, -0.5, -0.0, 0.0, 1e-30, 2.0, 1e30];
        for pair in xs.windows(2) {
            assert!(sort_key(pair[0], 9) < sort_key(pair[1], 0), "{pair:?}");
        }
        assert!(sort_key(1.0, 3) < sort_key(1.0, 4));
    }

    #[test]
    fn stable_partition_keeps_relative_order() {
        let marks = [Cell::new(0u64)];
        let marks = &marks[..];
        let mut order = [5u32, 1, 4, 0, 3, 2];
        for id in [1, 3, 2] {
            marks.mark(id, true);
        }
        let mut temp = [0u32; 6];
        stable_partition(&mut order, &mut temp, marks);
        assert_eq!(order, [1, 3, 2, 5, 4, 0]);
        // Marks past the first word of bits.
        let words: [Cell<u64>; 3] = Default::default();
        for id in [0, 63, 64, 130, 191] {
            words[..].mark(id, true);
        }
        words[..].mark(63, false);
        let left: Vec<u32> = (0..192).filter(|&id| words[..].is_left(id)).collect();
        assert_eq!(left, [0, 64, 130, 191]);
    }

    #[test]
    fn sweep_finds_the_gap_between_two_clusters() {
        let boxes: Vec<BuildBox> = [0.0, 0.1, 0.2, 5.0, 5.1]
            .iter()
            .map(|&x| {
                let p = Vec3::new(x, 0.0, 0.0);
                BuildBox::from_aabb(Aabb::new(p, p + 0.05))
            })
            .collect();
        let order = [0u32, 1, 2, 3, 4];
        let mut costs = [Vec4::ZERO; 5];
        let [x, _, _] = sweep_axes(&boxes, [&order; 3], &mut costs);
        assert_eq!(x.unwrap().1, 3);
    }

    /// `A_L N_L + A_R N_R` of cutting `order` after `k` entries, directly.
    fn cost_of(boxes: &[BuildBox], order: &[u32], k: usize) -> f32 {
        let (left, right) = order.split_at(k);
        union_of(boxes, left).half_area() * k as f32
            + union_of(boxes, right).half_area() * right.len() as f32
    }

    #[test]
    fn sweep_finds_the_cheapest_cut_of_every_axis() {
        let mut rng = caustic_geom::Pcg32::new(21, 22);
        for n in 2..40 {
            let boxes: Vec<BuildBox> = (0..n)
                .map(|_| {
                    let mut c = || (rng.next_u32() % 8) as f32;
                    let p = Vec3::new(c(), c(), c());
                    let r = Vec3::new(c(), c(), c()) * 0.2;
                    BuildBox::from_aabb(Aabb::new(p - r, p + r))
                })
                .collect();
            let orders: [Vec<u32>; 3] = std::array::from_fn(|axis| {
                let mut keys: Vec<u64> = (0..n as u32)
                    .map(|i| sort_key(boxes[i as usize].min[axis], i))
                    .collect();
                keys.sort_unstable();
                keys.iter().map(|&k| k as u32).collect()
            });
            let mut costs = vec![Vec4::ZERO; n];
            let found = sweep_axes(&boxes, [&orders[0], &orders[1], &orders[2]], &mut costs);
            for (axis, order) in orders.iter().enumerate() {
                let (cost, k) = found[axis].unwrap();
                let best = (1..n)
                    .map(|k| cost_of(&boxes, order, k))
                    .fold(f32::INFINITY, f32::min);
                assert!((cost - best).abs() <= 1e-4 * best, "{n} prims, axis {axis}");
                assert!((cost - cost_of(&boxes, order, k)).abs() <= 1e-4 * best);
            }
        }
    }
}
