//! Any-hit ray streams over a [`WideBvh`]: occlusion for many incoherent
//! rays at once, after Embree's `rtcOccluded1M` (Wald et al., "Embree: A
//! Kernel Framework for Efficient CPU Ray Tracing", SIGGRAPH 2014, and
//! Fuetterling et al., "Efficient Ray Tracing Kernels for Modern CPU
//! Architectures", JCGT 2015): up to 32 rays walk the tree
//! together, each node is visited once for all the rays that reach it, and
//! every ray keeps its own exact tests.
//!
//! [`occluded_batch`] regroups each run of [`RUN`] rays by direction class
//! (depth axis and octant, keeping their order inside a class so that
//! neighbouring origins stay together) and cuts the classes into streams.
//! A stream carries a bit mask of its rays down the tree. At an inner
//! node, each ray of the mask tests all `N` children at once, the
//! single-ray test of [`super::traverse`] with its own constants broadcast,
//! and its bit goes into the masks of the children it keeps, one masked OR
//! of a vector of `N` ray masks (`ray_masks`, after Embree's
//! incoherent streams); the children with rays go on the stack with their
//! masks. At a leaf, each ray of the mask runs the single-ray group test
//! of [`super::leaf`], and a ray with a hit leaves the stream. Rays that
//! cannot share a class (a zero direction component) trace alone. The
//! per-ray step needs no packet: its constants are rows over the
//! stream's rays (`ray_masks::StreamRays`).
//!
//! The former node step (`PER_RAY = false`, [`super::StreamStep::Lanes`]),
//! kept for measuring: the interval test of [`super::packet`] (the stream
//! as `P` vectors of `N` rays; a class shares the depth axis and the
//! direction signs, so the rays share entry and exit planes) culls the
//! children no ray can keep; for each remaining child, each vector with
//! rays in the mask runs the lane-wise box test, the single-ray rule for
//! each lane's own ray and interval. A mask down to a few rays (three)
//! leaves its subtree to their single-ray traversals: each such ray
//! collects the subtrees it finishes alone and, when the stream is done
//! (or its list is full), runs them all in one single-ray traversal (one
//! set-up of its constants, one stack; a ray the stream's leaves found
//! occluded meanwhile skips them). The per-ray step takes fewer
//! instructions and less time on the bunny and sponza and about the same
//! on conference (docs/BENCHMARKS.md, "CPU rays, session 16"); with it,
//! finishing alone was no faster, so it never does.
//!
//! Exactness: the per-ray test is each ray's single-ray rule, bit for bit;
//! in the former step the interval test keeps a child whenever any ray's
//! own rule does (the proof is in [`super::packet`]), and the lane-wise
//! test is that rule. Either way every ray reaches exactly the leaves its
//! own any-hit traversal could reach (in another order, which any-hit does
//! not depend on) and runs the same triangle test there: the answer is the
//! same, whether a triangle has a hit in `(tmin, tmax)`, which the tests
//! check against brute force and the single-ray query.

use super::leaf::{RayTriangles, set_bits};
use super::node::{TriangleGroup, WideNode};
use super::packet::Packet;
use super::packet_lanes::highest;
use super::ray_masks::StreamRays;
use super::simd::Lanes;
use super::traverse::{
    BoxParts, LeafTest, MORE_STARTS, RayBoxes, RowOffsets, stack_capacity, traverse_subtrees,
};
use super::{StreamStep, WideBvh, root_entry};
use crate::is_traceable;
use caustic_geom::{Aabb, Ray};
use std::mem::MaybeUninit;

/// Rays per regrouping: the run sorted by direction class before streams
/// are cut (the protocol's runs of secondary rays).
pub const RUN: usize = 1024;

/// Rays per stream (bits of the ray mask). 32 rays keep the per-ray
/// constants of an 8-wide AVX stream (about 15 KB) inside the L1 cache.
pub(super) const STREAM: usize = 32;

/// The bits of a stream's first `count` rays (1 to [`STREAM`]).
pub(super) fn stream_mask(count: usize) -> u32 {
    debug_assert!((1..=STREAM).contains(&count));
    u32::MAX >> (STREAM - count)
}

/// The rays `members` of `rays` as a full stream, padded with copies of
/// the last one (their lanes are in no mask, [`stream_mask`]).
pub(super) fn padded_stream(rays: &[Ray], members: &[u16]) -> [Ray; STREAM] {
    let last = members.len() - 1;
    std::array::from_fn(|r| rays[members[r.min(last)] as usize])
}

/// With the lane-wise node step ([`super::StreamStep::Lanes`]), a subtree
/// that at most this many rays of a stream enter is finished by their
/// single-ray traversals (a stream's node step costs the interval
/// test plus a lane-wise test per vector; measured on bunny AO, one
/// thread, two runs each: 1 ray 6.8 / 6.6, 2 rays 6.9 / 6.9, 3 rays
/// 7.1 / 7.0 Mrays/s; 5 rays slower than 3). Since the finishing rays
/// take their constants from the packet, 5 and 8 rays trace 4 % and 7 %
/// fewer instructions on the bunny's AO (1 to 2 % on sponza and
/// conference) but were no faster in interleaved runs: the stream's gain
/// is locality, not instructions. Measured again with the subtrees of a
/// ray finished in one traversal (session 14, AVX-512, one thread, means
/// of three interleaved runs, 3 / 5 / 8 rays): bunny 7.62 / 7.56 / 7.34,
/// sponza 7.59 / 7.43 / 7.26, conference 13.21 / 13.51 / 13.24 Mrays/s,
/// though 8 rays trace 11.5 % fewer instructions on the bunny.
pub(super) const ALONE: u32 = 3;

/// Direction classes of [`stream_class`]: depth axis times octant.
pub(super) const CLASSES: usize = 24;

/// Stack entries of a stream: up to `N` children per level of the path.
const STACK: usize = stack_capacity(8) + 8;

/// The stream class of a ray: its depth axis (the direction's largest
/// component, first axis on ties) times 8 plus its octant (bit `k` for a
/// negative component `k`); [`CLASSES`] for a ray that cannot share a
/// stream (not traceable, see [`is_traceable`], or with a zero direction
/// component). Branch-free on the bits: of finite floats, the magnitudes
/// order as their bits without the sign, and a non-zero component's sign
/// is its top bit (about half the instructions of the float compares,
/// docs/BENCHMARKS.md, "CPU rays, session 18").
#[inline(always)]
pub(super) fn stream_class(ray: &Ray) -> usize {
    let (o, d) = (ray.origin, ray.dir);
    // `x * 0` is a zero for a finite `x` and NaN otherwise (as in
    // `is_traceable`).
    let finite = o.x * 0.0 + o.y * 0.0 + o.z * 0.0 + d.x * 0.0 + d.y * 0.0 + d.z * 0.0 == 0.0;
    let [x, y, z] = [d.x, d.y, d.z].map(f32::to_bits);
    let [ax, ay, az] = [x, y, z].map(|bits| bits & 0x7fff_ffff);
    let shareable = finite & (ax != 0) & (ay != 0) & (az != 0) & (ray.tmin < ray.tmax);
    let depth = if (ax >= ay) & (ax >= az) {
        0
    } else {
        1 + usize::from(ay < az)
    };
    let octant = (x >> 31 | (y >> 30) & 2 | (z >> 29) & 4) as usize;
    if shareable {
        depth * 8 + octant
    } else {
        CLASSES
    }
}

/// The depth axis and the direction signs (negative or not, per axis) of
/// the rays of class `class` (below [`CLASSES`], see [`stream_class`]).
#[inline(always)]
pub(super) fn class_shape(class: usize) -> (usize, [bool; 3]) {
    debug_assert!(class < CLASSES);
    let octant = class % 8;
    (class / 8, [0, 1, 2].map(|k| octant & (1 << k) != 0))
}

/// [`occluded_batch`] with the node step `step` chosen at run time.
#[inline(always)]
pub fn occluded_batch_with<const N: usize, const P: usize, V: Lanes<N>>(
    isa: V::Isa,
    bvh: &WideBvh<N>,
    rays: &[Ray],
    out: &mut [bool],
    step: StreamStep,
) {
    match step {
        StreamStep::PerRay => occluded_batch::<N, P, V, true>(isa, bvh, rays, out),
        StreamStep::Lanes => occluded_batch::<N, P, V, false>(isa, bvh, rays, out),
    }
}

/// Whether each of `rays` has a hit in its `(tmin, tmax)`, into `out`
/// (same length); rays that are not traceable are not occluded. `PER_RAY`
/// picks the node step (see the module docs).
#[inline(always)]
pub fn occluded_batch<const N: usize, const P: usize, V: Lanes<N>, const PER_RAY: bool>(
    isa: V::Isa,
    bvh: &WideBvh<N>,
    rays: &[Ray],
    out: &mut [bool],
) {
    assert_eq!(rays.len(), out.len(), "one result slot per ray");
    assert!(N * P <= STREAM, "at most {STREAM} rays per stream");
    let mut order = [0u16; RUN];
    let mut stream = StreamRays::<N>::blank();
    for (rays, out) in rays.chunks(RUN).zip(out.chunks_mut(RUN)) {
        let classes = classify(rays);
        let start = regroup(&classes, &EVERY_RAY[..rays.len()], &mut order);
        if PER_RAY {
            for (class, members) in streams(&order, &start, STREAM) {
                trace_per_ray::<N, V>(isa, bvh, (rays, members, class), &mut stream, out);
            }
        } else {
            for (_, members) in streams(&order, &start, N * P) {
                trace_stream::<N, P, V>(isa, bvh, rays, members, out);
            }
        }
        for &i in &order[start[CLASSES]..start[CLASSES + 1]] {
            let ray = &rays[i as usize];
            out[i as usize] = is_traceable(ray) && super::accel::occluded::<N, V>(isa, bvh, ray);
        }
    }
}

/// `0, 1, ..., RUN - 1`: every ray of a run as [`regroup`]'s members.
const EVERY_RAY: [u16; RUN] = {
    let mut all = [0; RUN];
    let mut i = 0;
    while i < RUN {
        all[i] = i as u16;
        i += 1;
    }
    all
};

/// The [`stream_class`] of each of `rays` (at most [`RUN`]), by index. A
/// loop of its own over the rays themselves, which the compiler makes
/// branch-free: about 25 instructions per ray, against 56 where the
/// classes were computed through the members' indices in the counting
/// loop (docs/BENCHMARKS.md, "CPU rays, session 18").
#[inline(always)]
pub(super) fn classify(rays: &[Ray]) -> [u8; RUN] {
    debug_assert!(rays.len() <= RUN);
    let mut classes = [CLASSES as u8; RUN];
    for (ray, class) in rays.iter().zip(&mut classes) {
        *class = stream_class(ray) as u8;
    }
    classes
}

/// Counting sort of `members` (indices into a run of at most [`RUN`]
/// rays whose classes are `classes`, by index) by class into `order`,
/// keeping their order inside a class; returns where each class starts in
/// `order`. Class [`CLASSES`], last, holds the rays that cannot share a
/// stream (not traceable, or a zero direction component).
#[inline(always)]
pub(super) fn regroup(
    classes: &[u8; RUN],
    members: &[u16],
    order: &mut [u16; RUN],
) -> [usize; CLASSES + 2] {
    let mut start = [0usize; CLASSES + 2];
    for &i in members {
        start[usize::from(classes[usize::from(i)]) + 1] += 1;
    }
    for c in 0..=CLASSES {
        start[c + 1] += start[c];
    }
    let mut next = start;
    for &i in members {
        let c = usize::from(classes[usize::from(i)]);
        order[next[c]] = i;
        next[c] += 1;
    }
    start
}

/// The streams of a regrouped run (`order` and `start` from [`regroup`]):
/// each class's rays cut into runs of at most `size`, with their class.
#[inline(always)]
pub(super) fn streams<'a>(
    order: &'a [u16; RUN],
    start: &'a [usize; CLASSES + 2],
    size: usize,
) -> impl Iterator<Item = (usize, &'a [u16])> + 'a {
    (0..CLASSES).flat_map(move |class| {
        let members = &order[start[class]..start[class + 1]];
        members.chunks(size).map(move |stream| (class, stream))
    })
}

/// A subtree waiting on the stream's stack with the rays that enter it.
#[derive(Clone, Copy)]
struct Entry {
    child: u32,
    groups: u32,
    rays: u32,
}

/// Any-hit leaf test of one ray: whether the groups hold a hit.
struct AnyLeaf<'a, const N: usize, V: Lanes<N>> {
    triangles: &'a RayTriangles<'a, N, V>,
    t_min: f32,
    t_max: f32,
}

impl<const N: usize, V: Lanes<N>> LeafTest<N> for AnyLeaf<'_, N, V> {
    #[inline(always)]
    fn test(&mut self, groups: &[TriangleGroup<N>]) -> Option<f32> {
        self.triangles
            .any(groups, self.t_min, self.t_max)
            .then_some(self.t_max)
    }
}

/// Pushes the children `used` of `node` with the rays that keep each, the
/// highest slot first (so the lowest is visited first).
#[inline(always)]
fn push_children<const N: usize>(
    node: &WideNode<N>,
    used: u32,
    slot_rays: &[u32; N],
    stack: &mut [MaybeUninit<Entry>; STACK],
    depth: &mut usize,
) {
    let mut bits = used;
    while bits != 0 {
        let slot = 31 - bits.leading_zeros() as usize;
        bits &= !(1 << slot);
        stack[*depth].write(Entry {
            child: node.child[slot],
            groups: node.groups[slot],
            rays: slot_rays[slot],
        });
        *depth += 1;
    }
}

/// Traces the rays `members` (at most [`STREAM`], of direction class
/// `class`) of `rays` as one stream with the per-ray node step, their
/// constants in `stream` (set here), writing each one's occlusion into
/// `out`.
#[inline(always)]
fn trace_per_ray<const N: usize, V: Lanes<N>>(
    isa: V::Isa,
    bvh: &WideBvh<N>,
    (rays, members, class): (&[Ray], &[u16], usize),
    stream: &mut StreamRays<N>,
    out: &mut [bool],
) {
    let Some((child, groups)) = root_entry(bvh.root) else {
        for &i in members {
            out[i as usize] = false;
        }
        return;
    };
    stream.set_class::<V>(isa, (rays, members), class, bvh);
    let mut alive = stream_mask(members.len());
    let mut stack = [const { MaybeUninit::<Entry>::uninit() }; STACK];
    stack[0].write(Entry {
        child,
        groups,
        rays: alive,
    });
    let mut depth = 1;
    'pop: while depth > 0 {
        depth -= 1;
        // SAFETY: entries below `depth` were written by the pushes.
        let mut entry = unsafe { stack[depth].assume_init() };
        // Down the tree: the lowest kept child next, without a trip
        // through the stack (as Embree's streams do), the others pushed.
        loop {
            let mask = entry.rays & alive;
            if mask == 0 {
                continue 'pop;
            }
            if entry.groups != 0 {
                break;
            }
            let node = &bvh.nodes[entry.child as usize];
            let (used, slot_rays) = stream.children::<V>(isa, node, mask);
            if used == 0 {
                continue 'pop;
            }
            let first = used.trailing_zeros() as usize;
            push_children(node, used & (used - 1), &slot_rays, &mut stack, &mut depth);
            entry = Entry {
                child: node.child[first],
                groups: node.groups[first],
                rays: slot_rays[first],
            };
        }
        let range = entry.child as usize..(entry.child + entry.groups) as usize;
        let groups = &bvh.groups[range];
        for r in set_bits(entry.rays & alive) {
            if stream.occluded_in::<V>(isa, groups, r, &rays[members[r] as usize]) {
                alive &= !(1 << r);
            }
        }
        if alive == 0 {
            break;
        }
    }
    for (r, &i) in members.iter().enumerate() {
        out[i as usize] = alive & (1 << r) == 0;
    }
}

/// Traces the rays `members` (at most `N * P`, of one class) of `rays` as
/// one stream, writing each one's occlusion into `out`.
#[inline(always)]
fn trace_stream<const N: usize, const P: usize, V: Lanes<N>>(
    isa: V::Isa,
    bvh: &WideBvh<N>,
    rays: &[Ray],
    members: &[u16],
    out: &mut [bool],
) {
    let Some((child, groups)) = root_entry(bvh.root) else {
        for &i in members {
            out[i as usize] = false;
        }
        return;
    };
    let count = members.len();
    debug_assert!(count <= N * P);
    // The stream as `P` vectors of `N` rays, the last one padded with
    // copies of the last ray (their lanes are in no mask): the interval
    // test of the packet culls a node's children for all rays at once, and
    // each vector's lane-wise test (the single-ray rule) says which rays
    // keep a child.
    let padded = padded_stream(rays, members);
    let Some(packet) = Packet::<N, P, V>::new(isa, &padded[..N * P], &bvh.bounds) else {
        for &i in members {
            out[i as usize] = super::accel::occluded::<N, V>(isa, bvh, &rays[i as usize]);
        }
        return;
    };
    let cutoff = {
        let mut far = packet.lanes[0].t_max;
        for lanes in &packet.lanes[1..] {
            far = lanes.t_max.max_or(far);
        }
        V::splat(isa, highest(far.to_array()))
    };
    // Per-ray constants, from the packet's lanes, which computed them in
    // SIMD, kept as scalars and broadcast where a ray tests a leaf or
    // finishes subtrees on its own (a stored array of broadcast constants
    // cost more to write and copy than the broadcasts).
    let constants = RayConstants::new(&packet);
    let all = stream_mask(count);
    let mut alive = all;
    let mut stack = [const { MaybeUninit::<Entry>::uninit() }; STACK];
    stack[0].write(Entry {
        child,
        groups,
        rays: all,
    });
    let mut depth = 1;
    // The subtrees each ray finishes alone, waiting until the stream is
    // done (or the ray's list is full): one single-ray traversal per ray
    // then runs them all with one set-up and one stack, and a ray the
    // stream's leaves find occluded meanwhile skips them.
    let mut waiting = [[MaybeUninit::<(u32, u32)>::uninit(); MORE_STARTS + 1]; STREAM];
    let mut waits = [0u8; STREAM];
    while depth > 0 {
        depth -= 1;
        // SAFETY: entries below `depth` were written by the pushes.
        let entry = unsafe { stack[depth].assume_init() };
        let mask = entry.rays & alive;
        if mask == 0 {
            continue;
        }
        if mask.count_ones() <= ALONE && entry.groups == 0 {
            // Few rays left here: their own traversals finish the subtree,
            // later.
            for r in set_bits(mask) {
                let n = usize::from(waits[r]);
                waiting[r][n].write((entry.child, entry.groups));
                if n < MORE_STARTS {
                    waits[r] += 1;
                    continue;
                }
                waits[r] = 0;
                let ray = &rays[members[r] as usize];
                // SAFETY: the ray's first `n + 1` entries are written.
                let starts = unsafe { written(&waiting[r], n + 1) };
                if finish_alone(isa, bvh, &packet, &constants, r, ray, starts) {
                    alive &= !(1 << r);
                }
            }
            continue;
        }
        if entry.groups == 0 {
            let node = &bvh.nodes[entry.child as usize];
            let mut slot_rays = [0u32; N];
            let mut used = 0u32;
            let (candidates, _, _) = packet.test_children(node, cutoff);
            let lane_all = (1u32 << N) - 1;
            for slot in set_bits(candidates) {
                let mut rays_in = 0u32;
                for (p, lanes) in packet.lanes.iter().enumerate() {
                    let part = (mask >> (p * N)) & lane_all;
                    if part != 0 {
                        let (near, far) = (packet.near_row, packet.far_row);
                        let kept = lanes.keeps(node, slot, near, far, lanes.t_max, None);
                        rays_in |= (kept & part) << (p * N);
                    }
                }
                if rays_in != 0 {
                    slot_rays[slot] = rays_in;
                    used |= 1 << slot;
                }
            }
            push_children(node, used, &slot_rays, &mut stack, &mut depth);
        } else {
            let range = entry.child as usize..(entry.child + entry.groups) as usize;
            let groups = &bvh.groups[range];
            for r in set_bits(mask) {
                let ray = &rays[members[r] as usize];
                let triangles = constants.triangles::<V>(isa, packet.rows, r, ray);
                if triangles.any(groups, ray.tmin, ray.tmax) {
                    alive &= !(1 << r);
                }
            }
            if alive == 0 {
                break;
            }
        }
    }
    for r in set_bits(alive) {
        let n = usize::from(waits[r]);
        if n > 0 {
            let ray = &rays[members[r] as usize];
            // SAFETY: the ray's first `n` entries are written.
            let starts = unsafe { written(&waiting[r], n) };
            if finish_alone(isa, bvh, &packet, &constants, r, ray, starts) {
                alive &= !(1 << r);
            }
        }
    }
    for (r, &i) in members.iter().enumerate() {
        out[i as usize] = alive & (1 << r) == 0;
    }
}

/// The first `n` entries of `list`.
///
/// # Safety
///
/// They must have been written.
#[inline(always)]
unsafe fn written<T>(list: &[MaybeUninit<T>], n: usize) -> &[T] {
    let part = &list[..n];
    // SAFETY: the caller says these are initialised; `MaybeUninit<T>` has
    // the layout of `T`.
    unsafe { std::slice::from_raw_parts(part.as_ptr().cast::<T>(), n) }
}

/// A ray's box constants as scalars, per axis in the slab test's order:
/// reciprocal direction, entry planes' shifts, exit planes' shifts.
pub(super) type BoxScalars = ([f32; 3], [f32; 3], [f32; 3]);

/// A stream's per-ray constants as scalars, lanes as arrays per vector of
/// the packet: the box test's (`LaneRays::box_constants`) and the
/// triangle test's (`LaneRays::triangle_constants`).
pub(super) struct RayConstants<const N: usize, const P: usize> {
    boxes: [[[[f32; N]; 3]; 3]; P],
    triangles: [[[f32; N]; 6]; P],
    /// Rays whose box constants are [`RayBoxes::new`]'s (bit per ray: a
    /// ray's reciprocals are finite; see `LaneRays::box_constants`).
    finite: u32,
    rows: RowOffsets<N>,
}

impl<const N: usize, const P: usize> RayConstants<N, P> {
    #[inline(always)]
    pub(super) fn new<V: Lanes<N>>(packet: &Packet<'_, N, P, V>) -> Self {
        let mut constants = Self {
            boxes: [[[[0.0; N]; 3]; 3]; P],
            triangles: [[[0.0; N]; 6]; P],
            finite: 0,
            rows: RowOffsets::new((packet.near_row, packet.far_row)),
        };
        for (p, lanes) in packet.lanes.iter().enumerate() {
            let (boxes, finite) = lanes.box_constants();
            constants.boxes[p] = boxes;
            constants.triangles[p] = lanes.triangle_constants();
            constants.finite |= finite << (p * N);
        }
        constants
    }

    /// Whether ray `r`'s lane gave its single-ray box constants (its
    /// reciprocals are finite).
    #[cfg(test)]
    pub(super) fn finite_boxes(&self, r: usize) -> bool {
        self.finite & (1 << r) != 0
    }

    /// Ray `r`'s single-ray box constants over `bounds` (the tree's box,
    /// the one the packet used): the lane's, or where its bit of `finite`
    /// is clear, its own from [`RayBoxes::new`].
    #[inline(always)]
    pub(super) fn boxes<V: Lanes<N>>(
        &self,
        isa: V::Isa,
        r: usize,
        ray: &Ray,
        bounds: &Aabb,
    ) -> RayBoxes<N, V> {
        let (inv, near, far) = self.box_parts(r, ray, bounds);
        RayBoxes::from_parts(isa, self.rows, inv, near, far)
    }

    /// Ray `r`'s box constants of [`RayConstants::boxes`] as scalars: its
    /// reciprocal direction and its entry and exit planes' shifts.
    #[inline(always)]
    pub(super) fn box_parts(&self, r: usize, ray: &Ray, bounds: &Aabb) -> BoxScalars {
        if self.finite & (1 << r) == 0 {
            // Its own constants: a reciprocal is infinite (a tiny direction
            // component), which `RayBoxes::new` treats as parallel. The
            // stream's rays share the depth axis and the signs, so the rows.
            let parts = BoxParts::new(ray.origin, ray.dir, bounds);
            debug_assert!(RowOffsets::<N>::new(parts.rows) == self.rows);
            return (parts.inv, parts.near_shift, parts.far_shift);
        }
        let [inv, near, far] = &self.boxes[r / N];
        let lane = r % N;
        let at = |x: &[[f32; N]; 3]| [x[0][lane], x[1][lane], x[2][lane]];
        (at(inv), at(near), at(far))
    }

    /// Ray `r`'s triangle constants ([`RayTriangles::from_parts`] of the
    /// parts `LaneRays::triangle_constants` gives), in the frame `rows`.
    #[inline(always)]
    pub(super) fn triangles<'a, V: Lanes<N>>(
        &self,
        isa: V::Isa,
        rows: [usize; 3],
        r: usize,
        ray: &'a Ray,
    ) -> RayTriangles<'a, N, V> {
        let c = &self.triangles[r / N];
        let lane = r % N;
        let neg_origin = [c[0][lane], c[1][lane], c[2][lane]];
        let shear = [c[3][lane], c[4][lane], c[5][lane]];
        RayTriangles::from_parts(isa, rows, neg_origin, shear, ray)
    }
}

/// Ray `r` of a stream finishes the subtrees `starts` (one to
/// `MORE_STARTS + 1`) alone, in one single-ray any-hit traversal; whether
/// it found a hit.
#[inline(always)]
fn finish_alone<const N: usize, const P: usize, V: Lanes<N>>(
    isa: V::Isa,
    bvh: &WideBvh<N>,
    packet: &Packet<'_, N, P, V>,
    constants: &RayConstants<N, P>,
    r: usize,
    ray: &Ray,
    starts: &[(u32, u32)],
) -> bool {
    let triangles = constants.triangles::<V>(isa, packet.rows, r, ray);
    let mut leaf = AnyLeaf {
        triangles: &triangles,
        t_min: ray.tmin,
        t_max: ray.tmax,
    };
    let boxes = constants.boxes(isa, r, ray, &bvh.bounds);
    let (&first, more) = starts.split_last().expect("at least one subtree");
    traverse_subtrees::<N, V, true>(bvh, &boxes, first, more, ray.tmin, ray.tmax, &mut leaf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use caustic_geom::{Pcg32, Vec3};

    /// The class by the float compares: traceable, no zero component, then
    /// the largest magnitude (first axis on ties) and the signs.
    fn class_by_compares(ray: &Ray) -> usize {
        let d = ray.dir;
        if !(is_traceable(ray) && d.x != 0.0 && d.y != 0.0 && d.z != 0.0) {
            return CLASSES;
        }
        let a = d.abs();
        let depth = if a.x >= a.y && a.x >= a.z {
            0
        } else if a.y >= a.z {
            1
        } else {
            2
        };
        let octant =
            usize::from(d.x < 0.0) | (usize::from(d.y < 0.0) << 1) | (usize::from(d.z < 0.0) << 2);
        depth * 8 + octant
    }

    #[test]
    fn stream_class_is_the_float_rule_on_awkward_rays() {
        let specials = [
            0.0,
            -0.0,
            1.0,
            -1.0,
            0.5,
            -0.5,
            1e-39,
            -1e-39,
            f32::MAX,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
        ];
        let mut rng = Pcg32::new(21, 4);
        let mut pick = || {
            let k = rng.next_u32() as usize % (specials.len() + 4);
            // Mostly specials (ties of magnitude among them), some random.
            specials
                .get(k)
                .copied()
                .unwrap_or(rng.next_f32() * 2.0 - 1.0)
        };
        let mut seen = [false; CLASSES + 1];
        for _ in 0..20_000 {
            let origin = Vec3::new(pick(), pick(), pick());
            let dir = Vec3::new(pick(), pick(), pick());
            let (tmin, tmax) = (pick(), pick());
            let ray = Ray::segment(origin, dir, tmin, tmax);
            let class = stream_class(&ray);
            assert_eq!(class, class_by_compares(&ray), "{ray:?}");
            seen[class] = true;
            if class < CLASSES {
                // The class gives back the signs and the largest axis.
                let (axis, negative) = class_shape(class);
                assert_eq!(negative, [dir.x < 0.0, dir.y < 0.0, dir.z < 0.0]);
                let a = dir.abs().to_array();
                assert!(a.iter().all(|&c| c <= a[axis]), "{ray:?}");
            }
        }
        assert!(
            seen.iter().all(|&s| s),
            "every class and the rest: {seen:?}"
        );
    }
}
