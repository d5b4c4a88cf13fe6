//! Closest-hit ray streams over a [`WideBvh`], for the incoherent rays that
//! packets cannot take (diffuse bounces), after Embree's `rtcIntersect1M`
//! (Wald et al., "Embree: A Kernel Framework for Efficient CPU Ray
//! Tracing", SIGGRAPH 2014; Fuetterling et al., "Efficient Ray Tracing
//! Kernels for Modern CPU Architectures", JCGT 2015).
//!
//! [`closest_batch`] traces each run of [`RUN`] rays in packets of `P * N`
//! consecutive rays where they are coherent (as [`super::packet`] does),
//! then in packets of `N`; the rays left over are regrouped by direction
//! class ([`super::stream`]'s regrouping) and traced in streams of up to 32
//! rays.
//!
//! The default node step is the any-hit streams' per-ray step
//! (`ray_masks`): at a node, each ray of the mask tests all `N`
//! children with its own constants (rows of `StreamRays`, no packet) and
//! its own cutoff, its hit so far, and ORs its bit into the masks of the
//! children it keeps; each kept child also gets a cull bound, the smallest
//! of its rays' own (`max(t_min, entry along the depth axis)`, the value
//! each ray's rule compares with its cutoff). The children are visited
//! nearest bound first, the nearest without a trip through the stack; a
//! popped subtree keeps only the rays whose cutoff is not below its bound
//! (a vector compare over the stream's cutoffs), and at a leaf each of them
//! runs the single-ray closest-hit test in the class's frame. Against the
//! former step, diffuse rays are 1.43–1.46× faster on the bunny, sponza
//! and conference (docs/BENCHMARKS.md, "CPU rays, session 18").
//!
//! The former step ([`super::StreamStep::Lanes`], `CAUSTIC_WIDE_DIFFUSE=
//! lanes`), kept for measuring, walks the tree as the lane-wise any-hit
//! stream does (a bit mask of its rays per subtree, the packet's interval
//! test culling a node's children for all rays, then each vector's
//! lane-wise box test per child) with three differences that closest hits
//! need:
//!
//! - every ray culls against its own closest hit so far (the lanes of the
//!   box test carry one cutoff per ray), and the interval test against the
//!   farthest of them;
//! - a node's kept children are visited nearest first, by the interval
//!   test's entry bound, and a popped subtree is dropped when its cull
//!   bound lies beyond every ray's hit;
//! - at a leaf, the rays of the mask first run the lane-wise box test of
//!   the leaf's box again with their current hits (they may have found
//!   nearer ones since the parent pushed it), then their triangle tests.
//!
//! Exactness of the per-ray step: each ray's test is its single-ray rule
//! with its hit so far as the cutoff (bit for bit, `ray_masks`),
//! and a ray leaves a subtree's mask only when its cutoff is below the
//! subtree's bound, which is at most its own bound for that box, so that
//! its rule would cull the box too. A ray's hit so far is never nearer
//! than its final hit, so every ray reaches the leaf holding the triangle
//! brute force returns, and the leaf test's selection (below) gives the
//! same hit.
//!
//! Exactness of the former step: a ray's hit so far is never nearer than its
//! final hit, so its own rule (the single-ray rule of [`super::traverse`])
//! keeps every box holding the triangle of its final hit, and the interval
//! test keeps a child whenever any ray's rule does (the proof is in
//! [`super::packet`]; its cutoff is the farthest hit of the stream). Every
//! ray therefore runs the triangle test on the triangle brute force returns,
//! and the leaf test's selection (smallest `t`, ties to the lower id, in any
//! order; see [`super::leaf`]) makes the hit the same, bit for bit.

use super::leaf::{Closest, FrameTest, RayTriangles, in_frame, set_bits};
use super::node::{TriangleGroup, WideNode};
use super::packet::{Packet, closest_packet};
use super::packet_lanes::highest;
use super::ray_masks::StreamRays;
use super::simd::Lanes;
use super::stream::{
    CLASSES, RUN, RayConstants, STREAM, padded_stream, regroup, stream_class, stream_mask, streams,
};
use super::traverse::{LeafTest, far_to_near, stack_capacity, traverse_from};
use super::{StreamStep, WideBvh, root_entry};
use crate::is_traceable;
use caustic_geom::{Hit, Ray};
use std::mem::MaybeUninit;

/// A subtree that at most this many rays of a stream enter is finished by
/// their single-ray traversals (the any-hit stream's [`super::stream::ALONE`]
/// is 3). Callgrind on the protocol's 256² rays, primary and diffuse
/// together: 8 rays trace 8.5 %, 4.8 % and 3.6 % fewer instructions than 3
/// on bunny, sponza and conference (5 rays: 4.8 % and 2.3 % on bunny and
/// conference), and interleaved wall-clock runs found them as fast (diffuse
/// Mrays/s, one thread, means of three runs, 3 against 8 rays: 5.90 / 5.88,
/// 3.14 / 3.10, 5.67 / 5.75; `docs/bench/cpu-rays5/knobs-avx512.txt`). For
/// any-hit streams 8 rays were slower (see [`super::stream::ALONE`]).
const ALONE: u32 = 8;

/// Stack entries of a stream: up to `N` children per level of the path.
const STACK: usize = stack_capacity(8) + 8;

/// Closest hits of `rays` into `hits` (same length): packets of `P * N`
/// rays (then of `N`) where runs of rays are coherent; the rays of a run
/// that no packet takes (their indices in the run, at least one) go to
/// `leftovers` with the run's rays and hits, which traces them in streams
/// ([`closest_leftovers`]).
///
/// `leftovers` is a call rather than inlined code: with the streams
/// inlined beside the packets, the primary rays (almost all in packets)
/// were 7 to 10 % slower on the bunny though they ran the same
/// instructions (the code's layout; docs/BENCHMARKS.md, "CPU rays,
/// session 18").
#[inline(always)]
pub fn closest_batch<const N: usize, const P: usize, V: Lanes<N>>(
    isa: V::Isa,
    bvh: &WideBvh<N>,
    rays: &[Ray],
    hits: &mut [Option<Hit>],
    mut leftovers: impl FnMut(&[Ray], &[u16], &mut [Option<Hit>]),
) {
    assert_eq!(rays.len(), hits.len(), "one hit slot per ray");
    let mut rest = [0u16; RUN];
    // One packet of each size for the whole batch, set in place per packet.
    let mut packet = Packet::<N, P, V>::blank(isa);
    let mut vector = Packet::<N, 1, V>::blank(isa);
    for (rays, hits) in rays.chunks(RUN).zip(hits.chunks_mut(RUN)) {
        let mut left = 0;
        for (k, (rays, hits)) in rays.chunks(N * P).zip(hits.chunks_mut(N * P)).enumerate() {
            if may_share_a_class(rays) && closest_packet(&mut packet, bvh, rays, hits) {
                continue;
            }
            for (j, (rays, hits)) in rays.chunks(N).zip(hits.chunks_mut(N)).enumerate() {
                if P > 1 && may_share_a_class(rays) && closest_packet(&mut vector, bvh, rays, hits)
                {
                    continue;
                }
                for i in 0..rays.len() {
                    rest[left] = (k * N * P + j * N + i) as u16;
                    left += 1;
                }
            }
        }
        if left > 0 {
            leftovers(rays, &rest[..left], hits);
        }
    }
}

/// Closest hits of the rays `rest` (indices into `rays`, a run of at most
/// [`RUN`]) into `hits` (the run's): regrouped by direction class and
/// traced in streams with the node step `step` (of up to 32 rays
/// with the per-ray step, of `S * N` with the lane-wise one); rays that
/// are not traceable get no hit.
#[inline(always)]
pub fn closest_leftovers<const N: usize, const S: usize, V: Lanes<N>>(
    isa: V::Isa,
    bvh: &WideBvh<N>,
    rays: &[Ray],
    rest: &[u16],
    hits: &mut [Option<Hit>],
    step: StreamStep,
) {
    assert!(N * S <= STREAM, "at most {STREAM} rays per stream");
    // The leftovers' classes only: in a primary run they are a few rays.
    let mut classes = [CLASSES as u8; RUN];
    for &i in rest {
        classes[usize::from(i)] = stream_class(&rays[usize::from(i)]) as u8;
    }
    let mut order = [0u16; RUN];
    let start = regroup(&classes, rest, &mut order);
    // The leftovers of a run the packets mostly took are nearly coherent
    // rays (a primary run's along a class boundary), for which the
    // lane-wise step's interval test is cheaper than a test per ray.
    let coherent = 2 * rest.len() < rays.len();
    let per_ray = step == StreamStep::PerRay && !coherent;
    if per_ray {
        let mut stream = StreamRays::<N>::blank();
        for (class, members) in streams(&order, &start, STREAM) {
            trace_per_ray::<N, V>(isa, bvh, (rays, members, class), &mut stream, hits);
        }
    } else {
        for (_, members) in streams(&order, &start, N * S) {
            trace_stream::<N, S, V>(isa, bvh, rays, members, hits);
        }
    }
    for &i in &order[start[CLASSES]..start[CLASSES + 1]] {
        let ray = &rays[i as usize];
        hits[i as usize] = if is_traceable(ray) {
            super::accel::closest::<N, V>(isa, bvh, ray)
        } else {
            None
        };
    }
}

/// Whether `rays` (not empty) may make a packet: their first and last ray
/// share a stream class. A cheap filter before `Packet::new`, which checks
/// every ray and costs a transposition of the rays: incoherent rays (a
/// diffuse bounce's) almost never pass it, camera rays almost always.
#[inline(always)]
fn may_share_a_class(rays: &[Ray]) -> bool {
    let class = stream_class(&rays[0]);
    class < CLASSES && class == stream_class(&rays[rays.len() - 1])
}

/// A subtree waiting on the stream's stack: the rays that enter it, the
/// stream's cull bound for it (below every ray's own) and the node and
/// slot holding its box (`parent == u32::MAX` for the root).
#[derive(Clone, Copy)]
struct Entry {
    child: u32,
    groups: u32,
    rays: u32,
    bound: f32,
    parent: u32,
    slot: u32,
}

/// Closest-hit leaf test of one ray, for the single-ray finish.
struct ClosestLeaf<'a, const N: usize, V: Lanes<N>> {
    triangles: &'a RayTriangles<'a, N, V>,
    t_min: f32,
    best: &'a mut Closest,
}

impl<const N: usize, V: Lanes<N>> LeafTest<N> for ClosestLeaf<'_, N, V> {
    #[inline(always)]
    fn test(&mut self, groups: &[TriangleGroup<N>]) -> Option<f32> {
        let improved = self.triangles.closest(groups, self.t_min, self.best);
        improved.then_some(self.best.t)
    }
}

/// Each ray's closest distance so far, one vector of `N` rays per packet
/// vector, and the farthest of them: the cutoffs of the box tests.
struct Cutoffs<const N: usize, const P: usize, V: Lanes<N>> {
    isa: V::Isa,
    /// The distances as scalars; padding lanes hold `-inf`, so that the
    /// farthest is a real ray's.
    rows: [[f32; N]; P],
    lanes: [V; P],
    farthest: f32,
}

impl<const N: usize, const P: usize, V: Lanes<N>> Cutoffs<N, P, V> {
    #[inline(always)]
    fn new(isa: V::Isa, best: &[Closest]) -> Self {
        let mut rows = [[f32::NEG_INFINITY; N]; P];
        for (r, best) in best.iter().enumerate() {
            rows[r / N][r % N] = best.t;
        }
        // No SIMD inside closures: see the soundness note in `simd`.
        let mut lanes = [V::splat(isa, 0.0); P];
        for (lane, row) in lanes.iter_mut().zip(&rows) {
            *lane = V::load(isa, row);
        }
        let mut cutoffs = Self {
            isa,
            rows,
            lanes,
            farthest: 0.0,
        };
        cutoffs.refresh_farthest();
        cutoffs
    }

    #[inline(always)]
    fn refresh_farthest(&mut self) {
        let mut far = self.lanes[0];
        for lane in &self.lanes[1..] {
            far = lane.max_or(far);
        }
        self.farthest = highest(far.to_array());
    }

    /// Ray `r`'s distance is now `t`.
    #[inline(always)]
    fn set(&mut self, r: usize, t: f32) {
        let (p, lane) = (r / N, r % N);
        self.rows[p][lane] = t;
        self.lanes[p] = V::load(self.isa, &self.rows[p]);
    }
}

impl<const N: usize, const P: usize, V: Lanes<N>> Packet<'_, N, P, V> {
    /// The rays of `mask` whose own box rule (the single-ray rule, against
    /// each ray's hit so far in `cutoffs`) keeps `node`'s child `slot`.
    #[inline(always)]
    fn rays_keeping(
        &self,
        node: &WideNode<N>,
        slot: usize,
        mask: u32,
        cutoffs: &Cutoffs<N, P, V>,
    ) -> u32 {
        let lane_all = (1u32 << N) - 1;
        let mut kept = 0;
        for (p, lanes) in self.lanes.iter().enumerate() {
            let part = (mask >> (p * N)) & lane_all;
            if part != 0 {
                let keeps = lanes.keeps(
                    node,
                    slot,
                    self.near_row,
                    self.far_row,
                    cutoffs.lanes[p],
                    None,
                );
                kept |= (keeps & part) << (p * N);
            }
        }
        kept
    }
}

/// Traces the rays `members` (at most `N * P`, of one class) of `rays` as
/// one closest-hit stream, writing each one's hit into `hits`.
#[inline(always)]
fn trace_stream<const N: usize, const P: usize, V: Lanes<N>>(
    isa: V::Isa,
    bvh: &WideBvh<N>,
    rays: &[Ray],
    members: &[u16],
    hits: &mut [Option<Hit>],
) {
    let Some((child, groups)) = root_entry(bvh.root) else {
        for &i in members {
            hits[i as usize] = None;
        }
        return;
    };
    let count = members.len();
    debug_assert!(count <= N * P);
    let padded = padded_stream(rays, members);
    let Some(packet) = Packet::<N, P, V>::new(isa, &padded[..N * P], &bvh.bounds) else {
        for &i in members {
            hits[i as usize] = super::accel::closest::<N, V>(isa, bvh, &rays[i as usize]);
        }
        return;
    };
    let mut best: [Closest; STREAM] = std::array::from_fn(|r| Closest::new(padded[r].tmax));
    let mut cutoffs = Cutoffs::<N, P, V>::new(isa, &best[..count]);
    // Per-ray constants as scalars, broadcast where a ray tests a leaf or
    // finishes a subtree alone (as the any-hit stream keeps them: cheaper
    // than writing every ray's broadcast constants up front).
    let constants = RayConstants::new(&packet);
    let all = stream_mask(count);
    let mut stack = [const { MaybeUninit::<Entry>::uninit() }; STACK];
    stack[0].write(Entry {
        child,
        groups,
        rays: all,
        bound: f32::NEG_INFINITY,
        parent: u32::MAX,
        slot: 0,
    });
    let mut depth = 1;
    while depth > 0 {
        depth -= 1;
        // SAFETY: entries below `depth` were written by the pushes.
        let entry = unsafe { stack[depth].assume_init() };
        if entry.bound > cutoffs.farthest {
            continue; // beyond every ray's hit
        }
        let mut mask = entry.rays;
        if entry.groups != 0 && entry.parent != u32::MAX {
            // The leaf's box again, against the rays' current hits.
            let node = &bvh.nodes[entry.parent as usize];
            mask = packet.rays_keeping(node, entry.slot as usize, mask, &cutoffs);
        }
        if mask == 0 {
            continue;
        }
        if mask.count_ones() <= ALONE && entry.groups == 0 {
            // Few rays left here: their own traversals finish the subtree.
            for r in set_bits(mask) {
                let ray = &rays[members[r] as usize];
                let ray_boxes = constants.boxes::<V>(isa, r, ray, &bvh.bounds);
                let triangles = constants.triangles::<V>(isa, packet.rows, r, ray);
                let cutoff = best[r].t;
                let mut leaf = ClosestLeaf {
                    triangles: &triangles,
                    t_min: ray.tmin,
                    best: &mut best[r],
                };
                let start = (entry.child, entry.groups);
                if traverse_from::<N, V, false>(bvh, &ray_boxes, start, ray.tmin, cutoff, &mut leaf)
                {
                    cutoffs.set(r, best[r].t);
                }
            }
            cutoffs.refresh_farthest();
            continue;
        }
        if entry.groups == 0 {
            let node = &bvh.nodes[entry.child as usize];
            let far_cut = V::splat(isa, cutoffs.farthest);
            let (candidates, order, bound) = packet.test_children(node, far_cut);
            let mut slot_rays = [0u32; N];
            let mut kept = 0;
            for slot in set_bits(candidates) {
                let rays_in = packet.rays_keeping(node, slot, mask, &cutoffs);
                if rays_in != 0 {
                    slot_rays[slot] = rays_in;
                    kept |= 1 << slot;
                }
            }
            let order = far_to_near(kept, &order.to_array());
            let bound = bound.to_array();
            for slot in order.slots() {
                stack[depth].write(Entry {
                    child: node.child[slot],
                    groups: node.groups[slot],
                    rays: slot_rays[slot],
                    bound: bound[slot],
                    parent: entry.child,
                    slot: slot as u32,
                });
                depth += 1;
            }
        } else {
            let range = entry.child as usize..(entry.child + entry.groups) as usize;
            let groups = &bvh.groups[range];
            let mut improved = false;
            for r in set_bits(mask) {
                let test = ClosestRay::<N, P, V> {
                    constants: &constants,
                    isa,
                    groups,
                    r,
                    ray: &rays[members[r] as usize],
                    best: &mut best[r],
                };
                if in_frame(packet.frame, test) {
                    cutoffs.set(r, best[r].t);
                    improved = true;
                }
            }
            if improved {
                cutoffs.refresh_farthest();
            }
        }
    }
    for (r, &i) in members.iter().enumerate() {
        hits[i as usize] = best[r].hit;
    }
}

/// A subtree waiting on a per-ray stream's stack: the rays that enter it
/// and its cull bound (the smallest of theirs, see
/// [`StreamRays::children_nearest`]).
#[derive(Clone, Copy)]
struct RaysEntry {
    child: u32,
    groups: u32,
    rays: u32,
    bound: f32,
}

/// Traces the rays `members` (at most [`STREAM`], of direction class
/// `class`) of `rays` as one closest-hit stream with the per-ray node step
/// (as the any-hit streams do, [`super::stream`]), writing each one's hit
/// into `hits`. Each ray's cutoff is its hit so far; a node's kept
/// children are visited nearest first (by their cull bounds), the nearest
/// without a trip through the stack; a popped subtree keeps only the rays
/// whose cutoff has not come below its bound. The rays' constants go in
/// `stream` (set here).
#[inline(always)]
fn trace_per_ray<const N: usize, V: Lanes<N>>(
    isa: V::Isa,
    bvh: &WideBvh<N>,
    (rays, members, class): (&[Ray], &[u16], usize),
    stream: &mut StreamRays<N>,
    hits: &mut [Option<Hit>],
) {
    let Some((child, groups)) = root_entry(bvh.root) else {
        for &i in members {
            hits[i as usize] = None;
        }
        return;
    };
    stream.set_class::<V>(isa, (rays, members), class, bvh);
    let last = members.len() - 1;
    let mut best: [Closest; STREAM] =
        std::array::from_fn(|r| Closest::new(rays[usize::from(members[r.min(last)])].tmax));
    let mut stack = [const { MaybeUninit::<RaysEntry>::uninit() }; STACK];
    stack[0].write(RaysEntry {
        child,
        groups,
        rays: stream_mask(members.len()),
        bound: f32::NEG_INFINITY,
    });
    let mut depth = 1;
    while depth > 0 {
        depth -= 1;
        // SAFETY: entries below `depth` were written by the pushes.
        let entry = unsafe { stack[depth].assume_init() };
        let mut mask = stream.within::<V>(isa, entry.rays, entry.bound);
        let (mut child, mut groups) = (entry.child, entry.groups);
        // Down the tree, nearest child first; the others pushed, farthest
        // deepest.
        while mask != 0 && groups == 0 {
            let node = &bvh.nodes[child as usize];
            let (used, slot_rays, bounds) = stream.children_nearest::<V>(isa, node, mask);
            if used == 0 {
                mask = 0;
                break;
            }
            let order = far_to_near(used, &bounds);
            for slot in order.farther() {
                stack[depth].write(RaysEntry {
                    child: node.child[slot],
                    groups: node.groups[slot],
                    rays: slot_rays[slot],
                    bound: bounds[slot],
                });
                depth += 1;
            }
            let nearest = order.nearest();
            (child, groups, mask) = (
                node.child[nearest],
                node.groups[nearest],
                slot_rays[nearest],
            );
        }
        if mask == 0 {
            continue;
        }
        let range = child as usize..(child + groups) as usize;
        let groups = &bvh.groups[range];
        for r in set_bits(mask) {
            let ray = &rays[usize::from(members[r])];
            if stream.closest_in::<V>(isa, groups, r, ray, &mut best[r]) {
                stream.set_cutoff(r, best[r].t);
            }
        }
    }
    for (r, &i) in members.iter().enumerate() {
        hits[i as usize] = best[r].hit;
    }
}

/// Ray `r`'s closest-hit leaf test against `groups`, folded into `best`,
/// run by [`in_frame`] with the stream's frame as a constant.
struct ClosestRay<'s, const N: usize, const P: usize, V: Lanes<N>> {
    constants: &'s RayConstants<N, P>,
    isa: V::Isa,
    groups: &'s [TriangleGroup<N>],
    r: usize,
    ray: &'s Ray,
    best: &'s mut Closest,
}

impl<const N: usize, const P: usize, V: Lanes<N>> FrameTest for ClosestRay<'_, N, P, V> {
    type Output = bool;

    #[inline(always)]
    fn run<const X: usize, const Y: usize, const Z: usize>(self) -> bool {
        let triangles = self
            .constants
            .triangles::<V>(self.isa, [X, Y, Z], self.r, self.ray);
        triangles.closest(self.groups, self.ray.tmin, self.best)
    }
}
