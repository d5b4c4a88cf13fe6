//! The per-ray node step of the any-hit and closest-hit streams
//! ([`super::stream`], [`super::stream_closest`]), after
//! Embree's incoherent stream traversal (Fuetterling et al., "Efficient
//! Ray Tracing Kernels for Modern CPU Architectures", JCGT 2015, section
//! 4; Embree's `bvh_intersector_stream`): at an inner node, each ray of the
//! stream's mask tests all `N` children at once with its own constants
//! broadcast, and ORs its bit into a vector of `N` ray masks (one per
//! child) in the lanes of the children it keeps. The transposition from
//! "children of a ray" to "rays of a child" is one masked OR per ray, with
//! no scalar loop over children or rays; the node's six rows are loaded
//! once for all the rays. At a leaf, each ray of the mask runs the
//! single-ray group test.
//!
//! The rays' constants ([`StreamRays`]) are computed `N` rays at a time,
//! as a packet's lanes compute them, and kept as one row per constant over
//! the stream's rays, from which each ray's test broadcasts its own: no
//! packet, no copies per ray. The leaf test takes the class's frame (depth
//! axis and its sign) as a constant of the code, one copy per frame, so
//! the triangles' vertex rows are fixed offsets. Together these took a
//! fifth of the instructions of an AO ray (docs/BENCHMARKS.md, "CPU rays,
//! session 17").
//!
//! Exactness: a ray's test is [`super::traverse::RayBoxes::test`] with the
//! constants `RayBoxes::new` gives it (the same operations in the
//! same order on the same values, so the same bits, which a test checks),
//! its `tmin` and, for any-hit, its `tmax` as the cutoff: each ray keeps
//! exactly the children its own single-ray traversal keeps, and so reaches
//! exactly the leaves that traversal could reach.

use super::WideBvh;
use super::leaf::{Closest, Frame, FrameTest, RayTriangles, in_frame, set_bits};
use super::node::{TriangleGroup, WideNode};
use super::packet_lanes::LaneRays;
use super::simd::Lanes;
use super::stream::{STREAM, class_shape};
use super::traverse::{BoxParts, Crossing, RowOffsets, class_rows, slab_axes, slab_rule};
use caustic_geom::{Aabb, Ray};

/// Each ray's bit in a stream's masks, as the bits of an `f32` (the value
/// a ray ORs into the lanes of the children it keeps).
const RAY_BITS: [f32; STREAM] = {
    let mut bits = [0.0; STREAM];
    let mut r = 0;
    while r < STREAM {
        bits[r] = f32::from_bits(1 << r);
        r += 1;
    }
    bits
};

/// A stream's rays as the per-ray steps test them: every constant of the
/// box test and of the triangle test as a row over the stream's rays,
/// written by vector stores at set-up and broadcast from memory by each
/// ray's test (one load per constant, folded into the arithmetic where the
/// backend can).
pub(super) struct StreamRays<const N: usize> {
    /// The rows of the entry and exit planes, shared by the stream's rays
    /// (one depth axis and one sign per axis).
    rows: RowOffsets<N>,
    /// The triangle test's frame, shared too.
    frame: Frame,
    /// Box test, per axis in the slab test's order `[other, other,
    /// depth]`: reciprocal direction, entry planes' and exit planes'
    /// shifts (`RayBoxes::from_parts`' parts).
    inv: [[f32; STREAM]; 3],
    near: [[f32; STREAM]; 3],
    far: [[f32; STREAM]; 3],
    t_min: [f32; STREAM],
    t_max: [f32; STREAM],
    /// Triangle test: the origin along `kx, ky, kz`, negated, then the
    /// shear `sx, sy, sz` (`RayTriangles::from_parts`' parts).
    triangle: [[f32; STREAM]; 6],
    /// Whether the box test culls by the crossing rule
    /// ([`StreamRays::crossing`], `traverse::slab_rule`).
    crossing: bool,
}

impl<const N: usize> StreamRays<N> {
    /// A stream's rows before its rays are set ([`StreamRays::set`]): one
    /// per batch of streams, refilled in place for each stream, since the
    /// rows (about 2 KB) cost more to clear and to move than to fill (a
    /// `memset` and a `memcpy` per stream, 4 % of the Cornell box's AO
    /// instructions; docs/BENCHMARKS.md, "CPU rays, session 24").
    pub(super) fn blank() -> Self {
        Self {
            rows: RowOffsets::new(class_rows(0, [false; 3])),
            frame: Frame::new(0, false),
            inv: [[0.0; STREAM]; 3],
            near: [[0.0; STREAM]; 3],
            far: [[0.0; STREAM]; 3],
            t_min: [0.0; STREAM],
            t_max: [0.0; STREAM],
            triangle: [[0.0; STREAM]; 6],
            crossing: false,
        }
    }

    /// [`StreamRays::set`] for a stream of direction class `class` (see
    /// `stream::stream_class`) through `bvh`.
    #[inline(always)]
    pub(super) fn set_class<V: Lanes<N>>(
        &mut self,
        isa: V::Isa,
        (rays, members): (&[Ray], &[u16]),
        class: usize,
        bvh: &WideBvh<N>,
    ) {
        let (depth, negative) = class_shape(class);
        let (bounds, whole_leaves) = (&bvh.bounds, bvh.whole_leaves);
        self.set::<V>(isa, rays, members, depth, negative, bounds, whole_leaves);
    }

    /// Sets the constants of the rays `members` of `rays` (at most
    /// [`STREAM`], all traceable, sharing the depth axis `depth` and the
    /// direction signs `negative`, with no zero direction component: one
    /// class of the stream's regrouping), each the single-ray traversal's
    /// own over `bounds`, the tree's box; the boxes are culled by the
    /// crossing rule when `whole_leaves` (the tree's
    /// [`super::WideBvh::whole_leaves`], see `traverse::slab_rule`).
    /// Computed `N` rays at a time as a packet's lanes compute them
    /// (`LaneRays::shear`); a ray whose reciprocal overflows (a direction
    /// component below about `3e-39`) takes [`BoxParts::new`]'s, which
    /// treat that axis as parallel. The rows past the last vector of rays
    /// keep an earlier stream's values: no mask holds their bits.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(super) fn set<V: Lanes<N>>(
        &mut self,
        isa: V::Isa,
        rays: &[Ray],
        members: &[u16],
        depth: usize,
        negative: [bool; 3],
        bounds: &Aabb,
        whole_leaves: bool,
    ) {
        let count = members.len();
        debug_assert!((1..=STREAM).contains(&count) && depth < 3);
        let frame = Frame::new(depth, negative[depth]);
        self.rows = RowOffsets::new(class_rows(depth, negative));
        self.frame = frame;
        self.crossing = whole_leaves;
        let last = count - 1;
        for first in (0..count).step_by(N) {
            // `N` rays, the last vector padded with copies of the last ray
            // (their lanes are in no mask).
            let chunk: [Ray; N] =
                std::array::from_fn(|i| rays[usize::from(members[(first + i).min(last)])]);
            let mut lanes = LaneRays::<N, V>::gather(isa, &chunk);
            debug_assert_eq!(lanes.shape(), Some((depth, negative)));
            lanes.shear(frame.rows(), slab_axes(depth), bounds);
            let ([inv, near, far], finite) = lanes.box_constants();
            let part = first..first + N;
            for k in 0..3 {
                self.inv[k][part.clone()].copy_from_slice(&inv[k]);
                self.near[k][part.clone()].copy_from_slice(&near[k]);
                self.far[k][part.clone()].copy_from_slice(&far[k]);
            }
            let triangle = lanes.triangle_constants();
            for (row, lanes) in self.triangle.iter_mut().zip(&triangle) {
                row[part.clone()].copy_from_slice(lanes);
            }
            self.t_min[part.clone()].copy_from_slice(&lanes.t_min.to_array());
            self.t_max[part.clone()].copy_from_slice(&lanes.t_max.to_array());
            let all = (1u32 << N) - 1;
            if finite != all {
                self.own_box_constants(&chunk, first, !finite & all, bounds);
            }
        }
    }

    /// The box constants [`BoxParts::new`] gives the lanes `lanes` of the
    /// vector of `chunk` starting at ray `first` (rays with an infinite
    /// reciprocal, which `RayBoxes::new` treats as parallel).
    #[cold]
    fn own_box_constants(&mut self, chunk: &[Ray], first: usize, lanes: u32, bounds: &Aabb) {
        for lane in set_bits(lanes) {
            let ray = &chunk[lane];
            let parts = BoxParts::new(ray.origin, ray.dir, bounds);
            debug_assert!(RowOffsets::<N>::new(parts.rows) == self.rows);
            for k in 0..3 {
                self.inv[k][first + lane] = parts.inv[k];
                self.near[k][first + lane] = parts.near_shift[k];
                self.far[k][first + lane] = parts.far_shift[k];
            }
        }
    }

    /// The children of `node` the rays `mask` keep (bit per slot) and,
    /// per slot, the rays that keep it (bit per ray).
    #[inline(always)]
    pub(super) fn children<V: Lanes<N>>(
        &self,
        isa: V::Isa,
        node: &WideNode<N>,
        mask: u32,
    ) -> (u32, [u32; N]) {
        let rows = self.rows.load::<V>(isa, node);
        let crossing = Crossing::when(isa, self.crossing);
        let mut masks = V::splat(isa, 0.0);
        let mut used = 0;
        for r in set_bits(mask) {
            let (keeps, _) = self.keeps::<V>(isa, &rows, r, crossing);
            masks = masks.or_where(keeps, V::splat(isa, RAY_BITS[r]));
            used |= V::bits(keeps);
        }
        (used, masks.to_array().map(f32::to_bits))
    }

    /// [`StreamRays::children`] for closest hits (a loop of its own: one
    /// generic over whether to keep the bounds took 0.4 % more instructions on
    /// AO rays and 0.7 % on closest hits), which also gives each kept child's
    /// cull bound: the smallest, over the rays that keep it, of a ray's own
    /// bound (`max(t_min, entry along the depth axis)`, which the ray's rule
    /// compares with its cutoff). A ray whose cutoff has come below a subtree's
    /// bound would cull it by its own rule ([`StreamRays::within`]); the bound
    /// also orders the children.
    #[inline(always)]
    pub(super) fn children_nearest<V: Lanes<N>>(
        &self,
        isa: V::Isa,
        node: &WideNode<N>,
        mask: u32,
    ) -> (u32, [u32; N], [f32; N]) {
        let rows = self.rows.load::<V>(isa, node);
        let crossing = Crossing::when(isa, self.crossing);
        let mut masks = V::splat(isa, 0.0);
        let mut bounds = V::splat(isa, f32::INFINITY);
        let mut used = 0;
        for r in set_bits(mask) {
            let (keeps, bound) = self.keeps::<V>(isa, &rows, r, crossing);
            masks = masks.or_where(keeps, V::splat(isa, RAY_BITS[r]));
            // A kept lane's bound is a number (it passed `lo <= hi`).
            bounds = V::select(keeps, bound.min_or(bounds), bounds);
            used |= V::bits(keeps);
        }
        (used, masks.to_array().map(f32::to_bits), bounds.to_array())
    }

    /// The rays of `mask` whose cutoff (`t_max`, a closest-hit stream's
    /// hit so far) is not below `bound`: the others' own rule culls every
    /// box whose bound is `bound` or more.
    #[inline(always)]
    pub(super) fn within<V: Lanes<N>>(&self, isa: V::Isa, mask: u32, bound: f32) -> u32 {
        let bound = V::splat(isa, bound);
        let mut kept = 0;
        for (k, chunk) in self.t_max.chunks_exact(N).enumerate() {
            let cutoffs = V::load(isa, chunk.try_into().expect("N lanes"));
            kept |= V::bits(bound.le(cutoffs)) << (k * N);
        }
        mask & kept
    }

    /// Ray `r`'s cutoff is now `t` (a closest-hit stream's nearer hit).
    #[inline(always)]
    pub(super) fn set_cutoff(&mut self, r: usize, t: f32) {
        self.t_max[r] = t;
    }

    /// Ray `r`'s [`super::traverse::RayBoxes::test`] over its `[t_min,
    /// t_max]` for the node rows `rows`: the same rule ([`slab_rule`]) on
    /// the same constants, broadcast. The children it keeps and their cull
    /// bounds.
    #[inline(always)]
    fn keeps<V: Lanes<N>>(
        &self,
        isa: V::Isa,
        rows: &[[V; 3]; 2],
        r: usize,
        crossing: Option<Crossing<V>>,
    ) -> (V::Mask, V) {
        let at = |row: &[[f32; STREAM]; 3]| {
            [
                V::splat(isa, row[0][r]),
                V::splat(isa, row[1][r]),
                V::splat(isa, row[2][r]),
            ]
        };
        let (inv, near, far) = (at(&self.inv), at(&self.near), at(&self.far));
        let (t_min, t_max) = (V::splat(isa, self.t_min[r]), V::splat(isa, self.t_max[r]));
        let (keeps, _, bound) = slab_rule(rows, &inv, [&near, &far], t_min, t_max, crossing);
        (keeps, bound)
    }

    /// Whether ray `r` (`ray`) has a hit in its `(tmin, tmax)` among
    /// `groups`: the single-ray any-hit leaf test, in the class's frame as
    /// a constant ([`in_frame`]).
    #[inline(always)]
    pub(super) fn occluded_in<V: Lanes<N>>(
        &self,
        isa: V::Isa,
        groups: &[TriangleGroup<N>],
        r: usize,
        ray: &Ray,
    ) -> bool {
        let test = OccludedRay::<N, V> {
            stream: self,
            isa,
            groups,
            r,
            ray,
        };
        in_frame(self.frame, test)
    }
}

impl<const N: usize> StreamRays<N> {
    /// Ray `r` (`ray`)'s closest hit among `groups`, folded into `best`
    /// (whether it improved): the single-ray closest-hit leaf test, in the
    /// class's frame as a constant ([`in_frame`]).
    #[inline(always)]
    pub(super) fn closest_in<V: Lanes<N>>(
        &self,
        isa: V::Isa,
        groups: &[TriangleGroup<N>],
        r: usize,
        ray: &Ray,
        best: &mut Closest,
    ) -> bool {
        let test = NearestRay::<N, V> {
            stream: self,
            isa,
            groups,
            r,
            ray,
            best,
        };
        in_frame(self.frame, test)
    }

    /// Ray `r`'s triangle constants in the frame `[X, Y, Z]`.
    #[inline(always)]
    fn triangles<'a, V: Lanes<N>, const X: usize, const Y: usize, const Z: usize>(
        &self,
        isa: V::Isa,
        r: usize,
        ray: &'a Ray,
    ) -> RayTriangles<'a, N, V> {
        let c = &self.triangle;
        let neg_origin = [c[0][r], c[1][r], c[2][r]];
        let shear = [c[3][r], c[4][r], c[5][r]];
        RayTriangles::<N, V>::from_parts(isa, [X, Y, Z], neg_origin, shear, ray)
    }
}

/// [`StreamRays::closest_in`]'s test, run by [`in_frame`].
struct NearestRay<'s, const N: usize, V: Lanes<N>> {
    stream: &'s StreamRays<N>,
    isa: V::Isa,
    groups: &'s [TriangleGroup<N>],
    r: usize,
    ray: &'s Ray,
    best: &'s mut Closest,
}

impl<const N: usize, V: Lanes<N>> FrameTest for NearestRay<'_, N, V> {
    type Output = bool;

    #[inline(always)]
    fn run<const X: usize, const Y: usize, const Z: usize>(self) -> bool {
        let triangles = self
            .stream
            .triangles::<V, X, Y, Z>(self.isa, self.r, self.ray);
        triangles.closest(self.groups, self.ray.tmin, self.best)
    }
}

/// [`StreamRays::occluded_in`]'s test, run by [`in_frame`].
struct OccludedRay<'s, const N: usize, V: Lanes<N>> {
    stream: &'s StreamRays<N>,
    isa: V::Isa,
    groups: &'s [TriangleGroup<N>],
    r: usize,
    ray: &'s Ray,
}

impl<const N: usize, V: Lanes<N>> FrameTest for OccludedRay<'_, N, V> {
    type Output = bool;

    #[inline(always)]
    fn run<const X: usize, const Y: usize, const Z: usize>(self) -> bool {
        let ray = self.ray;
        let triangles = self.stream.triangles::<V, X, Y, Z>(self.isa, self.r, ray);
        triangles.any(self.groups, ray.tmin, ray.tmax)
    }
}

#[cfg(test)]
mod tests {
    use super::super::node::ChildRef;
    use super::super::simd::{AnyCpu, Portable};
    use super::super::traverse::RayBoxes;
    use super::*;
    use caustic_geom::{Pcg32, Vec3};

    /// A node of `N - 1` random boxes (one slot empty) and the box of them.
    fn random_node<const N: usize>(unit: &mut impl FnMut() -> f32) -> (WideNode<N>, Aabb) {
        let mut node = WideNode::<N>::empty();
        let mut bounds = Aabb::EMPTY;
        for slot in 0..N - 1 {
            let p = Vec3::new(unit(), unit(), unit()) * 4.0;
            let e = Vec3::new(unit().abs(), unit().abs(), unit().abs()) * 2.0;
            let b = Aabb::new(p - e, p + e);
            node.set(slot, b, ChildRef::Node(0));
            bounds = bounds.union(b);
        }
        (node, bounds)
    }

    /// Each ray's mask bits are its single-ray test's hits, for every ray
    /// of a stream of random rays sharing a direction class, also with
    /// tiny direction components (infinite reciprocals, which
    /// `RayBoxes::new` treats as parallel) and rays in a box's plane.
    fn masks_are_the_single_ray_tests<const N: usize, V: Lanes<N>>(isa: V::Isa) {
        let mut rng = Pcg32::new(5, 3);
        let mut unit = || rng.next_f32() * 2.0 - 1.0;
        let (mut kept, mut tested) = (0, 0);
        for case in 0..400 {
            let (node, bounds) = random_node::<N>(&mut unit);
            // One class: x the depth axis, signs (+, -, +).
            let count = 1 + case % STREAM;
            let rays: Vec<(Vec3, Vec3, f32, f32)> = (0..count)
                .map(|r| {
                    // From the -x side, towards the boxes.
                    let mut origin = Vec3::new(-8.0 + unit(), 4.0 * unit(), 4.0 * unit());
                    let mut dir = Vec3::new(1.0, -0.3 * unit().abs(), 0.3 * unit().abs());
                    match (case + r) % 5 {
                        1 => dir.y = -1e-39,
                        2 => dir.z = 1e-30,
                        3 => origin.z = node.bounds[2][0],
                        _ => {}
                    }
                    (origin, dir, unit().abs(), 4.0 + 12.0 * unit().abs())
                })
                .collect();
            let rays: Vec<Ray> = rays
                .iter()
                .map(|&(o, d, t_min, t_max)| Ray::segment(o, d, t_min, t_max))
                .collect();
            let members: Vec<u16> = (0..count as u16).collect();
            let negative = [false, true, false];
            let mut stream = StreamRays::<N>::blank();
            stream.set::<V>(isa, &rays, &members, 0, negative, &bounds, false);
            let mask = (u32::MAX >> (STREAM - count)) & !(1 << (case % count));
            let (used, masks) = stream.children::<V>(isa, &node, mask);
            let mut expected = [0u32; N];
            for r in set_bits(mask) {
                let ray = &rays[r];
                let single = RayBoxes::<N, V>::new(isa, ray.origin, ray.dir, &bounds);
                let (t_min, t_max) = (V::splat(isa, ray.tmin), V::splat(isa, ray.tmax));
                let (hits, _, _) = single.test(&node, t_min, t_max);
                for slot in set_bits(hits) {
                    expected[slot] |= 1 << r;
                }
            }
            assert_eq!(masks, expected, "case {case}");
            let nonzero = (0..N).filter(|&s| expected[s] != 0);
            assert_eq!(used, nonzero.fold(0, |u, s| u | (1 << s)), "case {case}");
            kept += expected.iter().map(|m| m.count_ones()).sum::<u32>();
            tested += mask.count_ones() * (N as u32 - 1);
        }
        // Neither all kept nor all culled.
        assert!(
            kept * 40 > tested && kept * 2 < tested,
            "{kept} of {tested} kept"
        );
    }

    #[test]
    fn portable_masks_are_the_single_ray_tests() {
        masks_are_the_single_ray_tests::<8, Portable<8>>(AnyCpu);
        masks_are_the_single_ray_tests::<4, Portable<4>>(AnyCpu);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn simd_masks_are_the_single_ray_tests() {
        use super::super::simd::{Avx8, Avx8k, Sse2, Sse4, avx2_for_test, avx512_for_test};
        masks_are_the_single_ray_tests::<4, Sse4>(Sse2);
        if let Some(avx) = avx2_for_test("simd_masks_are_the_single_ray_tests") {
            masks_are_the_single_ray_tests::<8, Avx8>(avx);
        }
        if let Some(avx512) = avx512_for_test("simd_masks_are_the_single_ray_tests") {
            masks_are_the_single_ray_tests::<8, Avx8k>(avx512);
        }
    }
}
