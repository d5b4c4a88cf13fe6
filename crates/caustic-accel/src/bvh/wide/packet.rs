//! Packet traversal of a [`WideBvh`] for coherent rays: `P * N` rays walk
//! the tree together, after Wald et al. ("Interactive Rendering with
//! Coherent Ray Tracing", EG 2001) and Embree's packet kernels, with the
//! node test of interval arithmetic (Boulos et al., "Geometric and
//! Arithmetic Culling Methods for Entire Ray Packets", 2006).
//!
//! `closest_packet` forms a packet from `P * N` consecutive rays when they
//! are all traceable, share the depth axis and the sign of every direction
//! component and have no zero component;
//! [`super::stream_closest::closest_batch`] tries packets of `P * N` rays,
//! then of `N`, then streams for the rest. Sharing the signs means every ray enters a box
//! through the same planes and shears triangles into the same frame.
//!
//! - Nodes: one SIMD test of all `N` children for the whole packet, as in
//!   the single-ray traversal, but on intervals: the packet's origins and
//!   reciprocal directions per axis are ranges, and every slab distance is
//!   replaced by the smallest (entry) or largest (exit) value any ray of
//!   the packet can compute. The node cost is shared by all `P * N` rays.
//! - Leaves: each vector of `N` rays first runs its own lane-wise box test
//!   of the leaf (the single-ray rule, against each ray's closest hit) and
//!   skips the leaf when no lane keeps it; otherwise the leaf's triangles
//!   are broadcast one at a time and tested against the `N` rays at once.
//!
//! Exactness. Correctly rounded `fl(p - o)` is monotone in `o` and
//! `fl(x * i)` is monotone in `x` and, for fixed `x`, in `i`, so the
//! smallest value any ray computes for `fl(fl(p - o) * i)` is the smallest
//! of the two products at the interval ends `fl(p - o_near) * i_low` and
//! `* i_high` (and likewise for the largest): the interval slab distances
//! bound every ray's own computed distances, not only the exact ones. The
//! single-ray rule (see [`super::traverse`]) is a conjunction of
//! comparisons between maxima, minima, sums and differences of those
//! distances and each ray's `t_min` and closest hit, every one monotone in
//! its operands, and no operand is NaN here (no zero direction component,
//! finite boxes or the empty box's infinities), so evaluating it on the
//! bounds (lowest entries, highest exits, largest margin, lowest `t_min`,
//! farthest closest hit of the packet) keeps a child whenever any ray's own
//! rule keeps it. The packet therefore reaches every leaf any of its rays
//! would reach alone, the lane-wise leaf test is exactly the single-ray
//! rule, and the triangle test is the lane-for-lane arithmetic of
//! [`super::leaf`]: each ray gets the same hit as on its own, which the
//! tests check against brute force.

use super::leaf::Frame;
use super::node::{TriangleGroup, WideNode};
use super::packet_lanes::{LaneBest, LaneRays, highest, lowest};
use super::simd::Lanes;
use super::traverse::{Crossing, class_rows, far_to_near, slab_axes, stack_capacity};
use super::{WideBvh, root_entry};
use crate::bvh::traverse::SLACK;
use caustic_geom::{Aabb, Hit, Ray};
use std::mem::MaybeUninit;

/// Largest stack of any packet width here (`N = 8`).
const STACK: usize = stack_capacity(8);

/// Closest hits of `rays` into `hits` (same length) as one packet, when
/// they make one (`P * N` coherent rays, see [`Packet::set`]), set in
/// `packet` (a run's packet, reused); `false`, with `hits` untouched, when
/// they do not.
#[inline(always)]
pub(super) fn closest_packet<'a, const N: usize, const P: usize, V: Lanes<N>>(
    packet: &mut Packet<'a, N, P, V>,
    bvh: &WideBvh<N>,
    rays: &'a [Ray],
    hits: &mut [Option<Hit>],
) -> bool {
    if !packet.set(rays, &bvh.bounds, bvh.whole_leaves) {
        return false;
    }
    packet.closest(bvh, hits);
    true
}

/// `P * N` coherent rays: their box-test bounds as intervals over the
/// packet, their triangle-test constants one ray per lane.
pub(super) struct Packet<'a, const N: usize, const P: usize, V: Lanes<N>> {
    isa: V::Isa,
    pub(super) lanes: [LaneRays<'a, N, V>; P],
    /// Box test, per axis in the order `[other, other, depth]` (see
    /// `RayBoxes`): rows of the entry and exit planes, shared by all rays.
    pub(super) near_row: [usize; 3],
    pub(super) far_row: [usize; 3],
    /// Per axis, the origin coordinate that gives the smallest distance to
    /// any plane (the largest origin when the rays run up the axis) and the
    /// one that gives the largest.
    origin_low: [V; 3],
    origin_high: [V; 3],
    /// Per axis, the smallest and largest reciprocal direction.
    inv_low: [V; 3],
    inv_high: [V; 3],
    /// Smallest `tmin` of the packet.
    t_min: V,
    /// The triangle test's frame, shared, and its vertex rows `kx, ky, kz`.
    pub(super) frame: Frame,
    pub(super) rows: [usize; 3],
    /// The crossing rule's factors when the tree's leaves hold whole
    /// triangles: boxes are culled by the crossing rule
    /// (`traverse::slab_rule`), else by the depth-range rule.
    pub(super) crossing: Option<Crossing<V>>,
}

/// A child waiting on the stack with its cull bound for the packet.
#[derive(Clone, Copy)]
struct Entry {
    child: u32,
    groups: u32,
    bound: f32,
    /// The node and slot holding the child's box.
    parent: u32,
    slot: u32,
}

/// Where traversal goes next: a child and the node and slot of its box.
#[derive(Clone, Copy)]
struct Next {
    child: u32,
    groups: u32,
    parent: u32,
    slot: u32,
}

impl<'a, const N: usize, const P: usize, V: Lanes<N>> Packet<'a, N, P, V> {
    /// The packet of `rays`, or `None` when they are not `P * N` traceable
    /// rays with the same depth axis and direction signs and no zero
    /// direction component (whose infinite reciprocal the interval bounds
    /// exclude). Culls by the depth-range rule; see [`Packet::set`].
    #[inline(always)]
    pub(super) fn new(isa: V::Isa, rays: &'a [Ray], bounds: &Aabb) -> Option<Self> {
        let mut packet = Self::blank(isa);
        packet.set(rays, bounds, false).then_some(packet)
    }

    /// A packet of no rays, to be [`Packet::set`] in place: a run of
    /// packets reuses one, since moving its 3 KB (a packet was built, then
    /// moved into an `Option` and out again) cost two `memcpy`s a packet,
    /// 5 % of the Cornell box's closest-hit instructions (docs/BENCHMARKS.md,
    /// "CPU rays, session 24").
    #[inline(always)]
    pub(super) fn blank(isa: V::Isa) -> Self {
        let zero = V::splat(isa, 0.0);
        Self {
            isa,
            lanes: [LaneRays::blank(isa); P],
            near_row: [0; 3],
            far_row: [0; 3],
            origin_low: [zero; 3],
            origin_high: [zero; 3],
            inv_low: [zero; 3],
            inv_high: [zero; 3],
            t_min: zero,
            frame: Frame::new(0, false),
            rows: [0; 3],
            crossing: None,
        }
    }

    /// Makes this the packet of `rays` and returns `true`, or returns
    /// `false` (leaving it unusable until the next `set` that succeeds)
    /// when they are not `P * N` traceable rays with the same depth axis
    /// and direction signs and no zero direction component. Boxes are
    /// culled by the crossing rule when `whole_leaves` (the tree's
    /// [`super::WideBvh::whole_leaves`], see `traverse::slab_rule`), else
    /// by the depth-range rule.
    #[inline(always)]
    pub(super) fn set(&mut self, rays: &'a [Ray], bounds: &Aabb, whole_leaves: bool) -> bool {
        if rays.len() != N * P {
            return false;
        }
        let isa = self.isa;
        self.lanes[0] = LaneRays::gather(isa, &rays[..N]);
        let Some((depth, sign)) = self.lanes[0].shape() else {
            return false;
        };
        for p in 1..P {
            self.lanes[p] = LaneRays::gather(isa, &rays[p * N..(p + 1) * N]);
            if self.lanes[p].shape() != Some((depth, sign)) {
                return false;
            }
        }
        let axes = slab_axes(depth);
        (self.near_row, self.far_row) = class_rows(depth, sign);
        // Ranges over the packet, per axis: origin and reciprocal
        // direction; lane-wise over the vectors, then across lanes.
        let first = &self.lanes[0];
        let (mut origin_min, mut origin_max) = (first.origin, first.origin);
        let (mut inv_min, mut inv_max) = (first.inv, first.inv);
        let mut t_min = first.t_min;
        for lane in &self.lanes[1..] {
            for k in 0..3 {
                origin_min[k] = lane.origin[k].min_or(origin_min[k]);
                origin_max[k] = lane.origin[k].max_or(origin_max[k]);
                inv_min[k] = lane.inv[k].min_or(inv_min[k]);
                inv_max[k] = lane.inv[k].max_or(inv_max[k]);
            }
            t_min = lane.t_min.min_or(t_min);
        }
        let mut origin = [(0.0, 0.0); 3];
        let mut inv = [(0.0, 0.0); 3];
        for k in 0..3 {
            origin[k] = (
                lowest(origin_min[axes[k]].to_array()),
                highest(origin_max[axes[k]].to_array()),
            );
            inv[k] = (
                lowest(inv_min[axes[k]].to_array()),
                highest(inv_max[axes[k]].to_array()),
            );
        }
        let t_min = lowest(t_min.to_array());
        // Running up an axis, the largest origin is nearest every plane.
        let up = axes.map(|axis| !sign[axis]);
        // The triangle test's frame (see `RayTriangles::new`).
        let frame = Frame::new(depth, sign[depth]);
        for lane in &mut self.lanes {
            lane.shear(frame.rows(), axes, bounds);
        }
        // Loops, not closures: no SIMD inside closures (see the soundness
        // note in `simd`).
        for k in 0..3 {
            let (low, high) = if up[k] {
                (origin[k].1, origin[k].0)
            } else {
                (origin[k].0, origin[k].1)
            };
            self.origin_low[k] = V::splat(isa, low);
            self.origin_high[k] = V::splat(isa, high);
            self.inv_low[k] = V::splat(isa, inv[k].0);
            self.inv_high[k] = V::splat(isa, inv[k].1);
        }
        self.t_min = V::splat(isa, t_min);
        self.frame = frame;
        self.rows = frame.rows();
        self.crossing = Crossing::when(isa, whole_leaves);
        true
    }

    /// The smallest slab distance any ray of the packet computes to the
    /// planes in row `row` along slot axis `k`, children in lanes.
    #[inline(always)]
    fn slab_low(&self, node: &WideNode<N>, row: usize, k: usize) -> V {
        let x = V::load(self.isa, &node.bounds[row]) - self.origin_low[k];
        (x * self.inv_low[k]).min_or(x * self.inv_high[k])
    }

    /// The largest such distance.
    #[inline(always)]
    fn slab_high(&self, node: &WideNode<N>, row: usize, k: usize) -> V {
        let x = V::load(self.isa, &node.bounds[row]) - self.origin_high[k];
        (x * self.inv_low[k]).max_or(x * self.inv_high[k])
    }

    /// The exact box rule (`RayBoxTest::entry`) in interval arithmetic over the
    /// packet, children in lanes: the children some ray may keep, their
    /// entry bounds (the visiting order) and their cull bounds (below every
    /// ray's own). See the module docs for why it is conservative.
    #[inline(always)]
    pub(super) fn test_children(&self, node: &WideNode<N>, cutoff: V) -> (u32, V, V) {
        let n0 = self.slab_low(node, self.near_row[0], 0);
        let n1 = self.slab_low(node, self.near_row[1], 1);
        let n2 = self.slab_low(node, self.near_row[2], 2);
        let f0 = self.slab_high(node, self.far_row[0], 0);
        let f1 = self.slab_high(node, self.far_row[1], 1);
        let f2 = self.slab_high(node, self.far_row[2], 2);
        let n2_high = self.slab_high(node, self.near_row[2], 2);
        let f2_low = self.slab_low(node, self.far_row[2], 2);
        let near = n0.max_or(n1.max_or(n2));
        let far = f0.min_or(f1.min_or(f2));
        let depth_extent = n2
            .abs()
            .max_or(n2_high.abs())
            .max_or(f2.abs().max_or(f2_low.abs()));
        let margin = depth_extent * V::splat(self.isa, SLACK);
        if let Some(Crossing { up: slack, .. }) = self.crossing {
            // The crossing rule on the bounds: the widest depth slab of the
            // packet gives every ray's margin or more.
            let widen = margin + (f2 - n2) * slack;
            let lo = self.t_min.max_or(near - widen);
            let hi = cutoff.min_or(far + widen);
            return (V::bits(lo.le(hi)), near, lo);
        }
        let crosses = (near - margin).le(far + margin);
        let lo = self.t_min.max_or(n2 - margin);
        let hi = cutoff.min_or(f2 + margin);
        (V::bits(crosses & lo.le(hi)), near, lo)
    }

    /// Traces the packet; the closest hit of each lane into `hits` (`P *
    /// N` of them, lane order).
    #[inline(always)]
    fn closest(&self, bvh: &WideBvh<N>, hits: &mut [Option<Hit>]) {
        // Loops, not `array::from_fn` or `map`: their closures are compiled
        // without the backend's instruction set (see `simd`).
        let mut best = [LaneBest::new(self.isa, self.lanes[0].t_max); P];
        for (best, lanes) in best.iter_mut().zip(&self.lanes).skip(1) {
            *best = LaneBest::new(self.isa, lanes.t_max);
        }
        if let Some((child, groups)) = root_entry(bvh.root) {
            self.trace(bvh, child, groups, &mut best);
        }
        for (hits, best) in hits.chunks_exact_mut(N).zip(&best) {
            for (hit, found) in hits.iter_mut().zip(&best.finish()) {
                *hit = found.hit;
            }
        }
    }

    /// The traversal loop of [`Packet::closest`] from `(child, groups)`.
    #[inline(always)]
    fn trace(&self, bvh: &WideBvh<N>, child: u32, groups: u32, best: &mut [LaneBest<N, V>; P]) {
        // The largest closest distance in the packet.
        let mut cutoff = farthest(best);
        let mut stack = [const { MaybeUninit::<Entry>::uninit() }; STACK];
        let mut depth = 0;
        let mut next = Next {
            child,
            groups,
            parent: u32::MAX,
            slot: 0,
        };
        loop {
            if next.groups == 0 {
                let node = &bvh.nodes[next.child as usize];
                if let Some(found) = self.visit(node, next.child, cutoff, &mut stack, &mut depth) {
                    next = found;
                    continue;
                }
            } else {
                let range = next.child as usize..(next.child + next.groups) as usize;
                // The root leaf has no box: every lane tests it.
                let slot_box = bvh
                    .nodes
                    .get(next.parent as usize)
                    .map(|node| (node, next.slot as usize));
                if self.leaf(&bvh.groups[range], slot_box, best) {
                    cutoff = farthest(best);
                }
            }
            // Pop the next child some ray may still enter before its hit.
            loop {
                if depth == 0 {
                    return;
                }
                depth -= 1;
                // SAFETY: entries below `depth` were written by `visit`.
                let entry = unsafe { stack[depth].assume_init() };
                if entry.bound <= cutoff {
                    next = Next {
                        child: entry.child,
                        groups: entry.groups,
                        parent: entry.parent,
                        slot: entry.slot,
                    };
                    break;
                }
            }
        }
    }

    /// Tests the children of `node`, pushes all kept children but the
    /// nearest (farthest first) and returns the nearest; `None` when no ray
    /// may enter any child.
    #[inline(always)]
    fn visit(
        &self,
        node: &WideNode<N>,
        index: u32,
        cutoff: f32,
        stack: &mut [MaybeUninit<Entry>; STACK],
        depth: &mut usize,
    ) -> Option<Next> {
        let (hits, order, bound) = self.test_children(node, V::splat(self.isa, cutoff));
        if hits == 0 {
            return None;
        }
        let bound = bound.to_array();
        let order = far_to_near(hits, &order.to_array());
        for slot in order.farther() {
            stack[*depth].write(Entry {
                child: node.child[slot],
                groups: node.groups[slot],
                bound: bound[slot],
                parent: index,
                slot: slot as u32,
            });
            *depth += 1;
        }
        let nearest = order.nearest();
        Some(Next {
            child: node.child[nearest],
            groups: node.groups[nearest],
            parent: index,
            slot: nearest as u32,
        })
    }

    /// Tests every triangle of `groups` against the rays whose own box test
    /// keeps the leaf's box (`slot_box`, absent for a root leaf), a vector
    /// of `N` rays at a time, folding hits into `best`; returns whether any
    /// ray's hit changed.
    #[inline(always)]
    fn leaf(
        &self,
        groups: &[TriangleGroup<N>],
        slot_box: Option<(&WideNode<N>, usize)>,
        best: &mut [LaneBest<N, V>; P],
    ) -> bool {
        let mut improved = false;
        for (lanes, best) in self.lanes.iter().zip(best) {
            let reached = match slot_box {
                Some((node, slot)) => {
                    lanes.keeps(
                        node,
                        slot,
                        self.near_row,
                        self.far_row,
                        best.t,
                        self.crossing,
                    ) != 0
                }
                None => true,
            };
            if !reached {
                continue;
            }
            improved |= lanes.leaf(groups, self.frame, best);
        }
        improved
    }
}

/// The largest closest distance over the packet.
#[inline(always)]
fn farthest<const N: usize, const P: usize, V: Lanes<N>>(best: &[LaneBest<N, V>; P]) -> f32 {
    let mut far = best[0].t;
    for lane in &best[1..] {
        far = lane.t.max_or(far);
    }
    highest(far.to_array())
}
