//! The per-lane half of the packet traversal ([`super::packet`]): `N` rays
//! of a packet in SIMD lanes ([`LaneRays`]) with their own box test of a
//! leaf (the single-ray rule of [`super::traverse`], lane by lane) and the
//! watertight triangle test with the triangle broadcast and one ray per
//! lane (the lane-for-lane arithmetic of [`super::leaf`], so each lane's
//! result is bit-identical to the scalar test), and their closest hits so
//! far ([`LaneBest`]), updated in SIMD with the accel's tie rule.

use super::leaf::{
    Closest, Frame, FrameTest, conditioned_lanes, crossing_breaks, in_frame, mark, set_bits,
};
use super::node::{NO_PRIM, TriangleGroup, WideNode};
use super::simd::Lanes;
use super::traverse::{Crossing, SlabFrame, slabs_rule};
use crate::slab_ray::next_up;
use caustic_geom::{Aabb, Hit, Ray, RayTriangleTest};

/// One triangle against `N` rays: lane masks and values.
pub(super) struct LaneHits<const N: usize, V: Lanes<N>> {
    hits: V::Mask,
    on_edge: V::Mask,
    t: V,
    v: V,
    w: V,
    inv_det: V,
}

/// `N` rays of a packet, one per lane, with the per-lane constants of the
/// watertight triangle test.
#[derive(Clone, Copy)]
pub(super) struct LaneRays<'a, const N: usize, V: Lanes<N>> {
    /// The backend's token, for the vectors made from triangles and boxes.
    isa: V::Isa,
    rays: &'a [Ray],
    /// Origin and direction per axis `x, y, z`.
    pub(super) origin: [V; 3],
    dir: [V; 3],
    /// `1 / dir`, per axis.
    pub(super) inv: [V; 3],
    pub(super) t_min: V,
    pub(super) t_max: V,
    /// Origin along `kx, ky, kz` and the shear constants of the
    /// watertight test (see `RayTriangles`).
    tri_origin: [V; 3],
    sx: V,
    sy: V,
    sz: V,
    /// Reciprocal direction in the box test's axis order `[other, other,
    /// depth]`, and the entry and exit planes' constants of the folded
    /// rule (`RayBoxes::test`, `SlabFrame::shifts`).
    box_inv: [V; 3],
    box_near_shift: [V; 3],
    box_far_shift: [V; 3],
}

/// The smallest of `values`, none of them NaN (plain comparisons:
/// `f32::min` spends extra instructions on NaN).
#[inline(always)]
pub(super) fn lowest<const N: usize>(values: [f32; N]) -> f32 {
    values[1..]
        .iter()
        .fold(values[0], |lo, &x| if x < lo { x } else { lo })
}

/// The largest of `values`, none of them NaN.
#[inline(always)]
pub(super) fn highest<const N: usize>(values: [f32; N]) -> f32 {
    values[1..]
        .iter()
        .fold(values[0], |hi, &x| if x > hi { x } else { hi })
}

/// The closest hit so far of each of `N` rays, in lanes.
#[derive(Clone, Copy)]
pub(super) struct LaneBest<const N: usize, V: Lanes<N>> {
    /// The backend's token, for writing lanes back.
    isa: V::Isa,
    /// Distance of the hit, or the ray's `tmax` while there is none.
    pub(super) t: V,
    u: V,
    v: V,
    /// Scene id of the hit as `f32` bits; `NO_PRIM` while there is none.
    id: V,
    /// Each ray's `tmax`: hits at exactly `tmax` are outside the interval.
    t_max: V,
}

impl<const N: usize, V: Lanes<N>> LaneBest<N, V> {
    #[inline(always)]
    pub(super) fn new(isa: V::Isa, t_max: V) -> Self {
        let zero = V::splat(isa, 0.0);
        Self {
            isa,
            t: t_max,
            u: zero,
            v: zero,
            id: V::splat(isa, f32::from_bits(NO_PRIM)),
            t_max,
        }
    }

    /// Lane by lane, as [`Closest`].
    #[inline(always)]
    fn lane(&self, lane: usize) -> Closest {
        // (No closure around `to_array`: see `RayTriangles::test`.)
        let id = self.id.to_array()[lane].to_bits();
        let t = self.t.to_array()[lane];
        let hit = if id == NO_PRIM {
            None
        } else {
            Some(Hit {
                t,
                prim: id,
                u: self.u.to_array()[lane],
                v: self.v.to_array()[lane],
            })
        };
        Closest { t, hit }
    }

    /// The lanes whose closest hit so far is triangle `id`, among `lanes`.
    /// Scalar (the rare path of a tie): a float comparison of id bits would
    /// equate two subnormal ids under denormals-are-zero.
    #[inline(always)]
    fn holding(&self, id: u32, lanes: u32) -> u32 {
        let ids = self.id.to_array();
        set_bits(lanes)
            .filter(|&lane| ids[lane].to_bits() == id)
            .fold(0, |held, lane| held | 1 << lane)
    }

    /// Writes lane `lane` back from a [`Closest`].
    #[inline(always)]
    fn set_lane(&mut self, lane: usize, closest: &Closest) {
        let hit = closest.hit.expect("set only after a hit");
        let isa = self.isa;
        self.t = with_lane(isa, self.t, lane, closest.t);
        self.u = with_lane(isa, self.u, lane, hit.u);
        self.v = with_lane(isa, self.v, lane, hit.v);
        self.id = with_lane(isa, self.id, lane, f32::from_bits(hit.prim));
    }

    #[inline(always)]
    pub(super) fn finish(self) -> [Closest; N] {
        let (t, u, v, id) = (
            self.t.to_array(),
            self.u.to_array(),
            self.v.to_array(),
            self.id.to_array(),
        );
        let mut out = [Closest::new(0.0); N];
        for (lane, out) in out.iter_mut().enumerate() {
            let prim = id[lane].to_bits();
            let hit = (prim != NO_PRIM).then_some(Hit {
                t: t[lane],
                prim,
                u: u[lane],
                v: v[lane],
            });
            *out = Closest { t: t[lane], hit };
        }
        out
    }
}

/// `v` with lane `lane` replaced by `x` (a function, not a closure, so
/// that it is compiled with the caller's instruction set).
#[inline(always)]
fn with_lane<const N: usize, V: Lanes<N>>(isa: V::Isa, v: V, lane: usize, x: f32) -> V {
    let mut lanes = v.to_array();
    lanes[lane] = x;
    V::load(isa, &lanes)
}

impl<'a, const N: usize, V: Lanes<N>> LaneRays<'a, N, V> {
    /// Lanes of no rays, zero everywhere: the place a [`Packet`]'s lanes
    /// are gathered into ([`Packet::blank`]).
    #[inline(always)]
    pub(super) fn blank(isa: V::Isa) -> Self {
        let zero = V::splat(isa, 0.0);
        Self {
            isa,
            rays: &[],
            origin: [zero; 3],
            dir: [zero; 3],
            inv: [zero; 3],
            t_min: zero,
            t_max: zero,
            tri_origin: [zero; 3],
            sx: zero,
            sy: zero,
            sz: zero,
            box_inv: [zero; 3],
            box_near_shift: [zero; 3],
            box_far_shift: [zero; 3],
        }
    }

    /// The rays' fields in lanes; `shear` completes the triangle constants.
    #[inline(always)]
    pub(super) fn gather(isa: V::Isa, rays: &'a [Ray]) -> Self {
        let mut o = [[0.0f32; N]; 3];
        let mut d = [[0.0f32; N]; 3];
        let (mut t_min, mut t_max) = ([0.0f32; N], [0.0f32; N]);
        for i in 0..N {
            let ray = &rays[i];
            for k in 0..3 {
                o[k][i] = ray.origin[k];
                d[k][i] = ray.dir[k];
            }
            (t_min[i], t_max[i]) = (ray.tmin, ray.tmax);
        }
        let zero = V::splat(isa, 0.0);
        let one = V::splat(isa, 1.0);
        let dir = [
            V::load(isa, &d[0]),
            V::load(isa, &d[1]),
            V::load(isa, &d[2]),
        ];
        Self {
            isa,
            rays,
            origin: [
                V::load(isa, &o[0]),
                V::load(isa, &o[1]),
                V::load(isa, &o[2]),
            ],
            dir,
            inv: [one / dir[0], one / dir[1], one / dir[2]],
            sx: zero,
            sy: zero,
            sz: zero,
            t_min: V::load(isa, &t_min),
            t_max: V::load(isa, &t_max),
            tri_origin: [zero; 3],
            box_inv: [zero; 3],
            box_near_shift: [zero; 3],
            box_far_shift: [zero; 3],
        }
    }

    /// The depth axis and the direction signs all `N` rays share, or `None`
    /// when they differ or a ray is not traceable or has a zero direction
    /// component: the coherence test of [`Packet::new`], on whole vectors.
    #[inline(always)]
    pub(super) fn shape(&self) -> Option<(usize, [bool; 3])> {
        let all = (1u32 << N) - 1;
        let zero = V::splat(self.isa, 0.0);
        let inf = V::splat(self.isa, f32::INFINITY);
        let [dx, dy, dz] = self.dir;
        let finite = self.origin[0].abs().lt(inf)
            & self.origin[1].abs().lt(inf)
            & self.origin[2].abs().lt(inf)
            & dx.abs().lt(inf)
            & dy.abs().lt(inf)
            & dz.abs().lt(inf);
        let nonzero = dx.ne_ordered(zero) & dy.ne_ordered(zero) & dz.ne_ordered(zero);
        if V::bits(finite & nonzero & self.t_min.lt(self.t_max)) != all {
            return None;
        }
        let (ax, ay, az) = (dx.abs(), dy.abs(), dz.abs());
        let x_deepest = V::bits(ay.le(ax) & az.le(ax));
        let z_below_y = V::bits(az.le(ay));
        let depth = match (x_deepest, z_below_y) {
            (x, _) if x == all => 0,
            (0, y) if y == all => 1,
            (0, 0) => 2,
            _ => return None,
        };
        let mut sign = [false; 3];
        for (k, d) in [dx, dy, dz].into_iter().enumerate() {
            sign[k] = match V::bits(d.lt(zero)) {
                0 => false,
                bits if bits == all => true,
                _ => return None,
            };
        }
        Some((depth, sign))
    }

    /// The triangle test's per-lane constants for the frame `kx, ky, kz`,
    /// divided as `RayTriangleTest::new` divides (one IEEE division per lane).
    #[inline(always)]
    /// Also the box test's constants over `bounds`, the box of every node.
    pub(super) fn shear(&mut self, [kx, ky, kz]: [usize; 3], axes: [usize; 3], bounds: &Aabb) {
        self.sx = self.dir[kx] / self.dir[kz];
        self.sy = self.dir[ky] / self.dir[kz];
        self.sz = self.inv[kz];
        self.tri_origin = [self.origin[kx], self.origin[ky], self.origin[kz]];
        self.box_inv = [self.inv[axes[0]], self.inv[axes[1]], self.inv[axes[2]]];
        let (lo, hi) = (bounds.min.to_array(), bounds.max.to_array());
        let frame = SlabFrame {
            isa: self.isa,
            origin: [
                self.origin[axes[0]],
                self.origin[axes[1]],
                self.origin[axes[2]],
            ],
            inv_dir: self.box_inv,
            low: [
                V::splat(self.isa, lo[axes[0]]),
                V::splat(self.isa, lo[axes[1]]),
                V::splat(self.isa, lo[axes[2]]),
            ],
            high: [
                V::splat(self.isa, hi[axes[0]]),
                V::splat(self.isa, hi[axes[1]]),
                V::splat(self.isa, hi[axes[2]]),
            ],
        };
        // A packet has no zero direction component (`shape`), so no floor.
        let zero = V::splat(self.isa, 0.0);
        (self.box_near_shift, self.box_far_shift) = frame.shifts(frame.reach(), [zero; 3]);
    }

    /// Each lane's single-ray box constants (`RayBoxes::from_parts`'s
    /// reciprocal direction and entry and exit shifts, per axis, lanes as
    /// arrays) and the lanes whose reciprocals are all finite (bit per
    /// lane: the others' constants are not `RayBoxes::new`'s, which
    /// treats such an axis as parallel).
    #[inline(always)]
    pub(super) fn box_constants(&self) -> ([[[f32; N]; 3]; 3], u32) {
        let inf = V::splat(self.isa, f32::INFINITY);
        let [i0, i1, i2] = self.box_inv;
        let finite = V::bits(i0.abs().lt(inf) & i1.abs().lt(inf) & i2.abs().lt(inf));
        // No SIMD inside closures: see the soundness note in `simd`.
        let (inv, near, far) = (self.box_inv, self.box_near_shift, self.box_far_shift);
        (
            [
                [inv[0].to_array(), inv[1].to_array(), inv[2].to_array()],
                [near[0].to_array(), near[1].to_array(), near[2].to_array()],
                [far[0].to_array(), far[1].to_array(), far[2].to_array()],
            ],
            finite,
        )
    }

    /// Each lane's single-ray triangle constants as scalars, lanes as
    /// arrays: the origin along the frame's axes `kx, ky, kz`, negated (as
    /// the leaf test adds it), and the shear `sx, sy, sz`
    /// (`RayTriangles::from_parts`' parts).
    #[inline(always)]
    pub(super) fn triangle_constants(&self) -> [[f32; N]; 6] {
        let origin = self.tri_origin;
        let negated = |x: V| x.to_array().map(|c| -c);
        [
            negated(origin[0]),
            negated(origin[1]),
            negated(origin[2]),
            self.sx.to_array(),
            self.sy.to_array(),
            self.sz.to_array(),
        ]
    }

    /// Lanes whose own box test (the folded rule of `RayBoxes::test`, which
    /// keeps every box the exact rule of `RayBoxTest::entry` keeps, for
    /// each lane's ray against its closest hit `cutoff`) keeps slot `slot`
    /// of `node`: the others would not reach this leaf on their own.
    #[inline(always)]
    pub(super) fn keeps(
        &self,
        node: &WideNode<N>,
        slot: usize,
        near_row: [usize; 3],
        far_row: [usize; 3],
        cutoff: V,
        crossing: Option<Crossing<V>>,
    ) -> u32 {
        let n0 = self.plane(node.bounds[near_row[0]][slot], 0, self.box_near_shift[0]);
        let n1 = self.plane(node.bounds[near_row[1]][slot], 1, self.box_near_shift[1]);
        let n2 = self.plane(node.bounds[near_row[2]][slot], 2, self.box_near_shift[2]);
        let f0 = self.plane(node.bounds[far_row[0]][slot], 0, self.box_far_shift[0]);
        let f1 = self.plane(node.bounds[far_row[1]][slot], 1, self.box_far_shift[1]);
        let f2 = self.plane(node.bounds[far_row[2]][slot], 2, self.box_far_shift[2]);
        let (kept, _, _) = slabs_rule([n0, n1, n2], [f0, f1, f2], self.t_min, cutoff, crossing);
        V::bits(kept)
    }

    /// Each lane's widened distance to `plane` along slot axis `k`.
    #[inline(always)]
    fn plane(&self, plane: f32, k: usize, shift: V) -> V {
        V::splat(self.isa, plane).mul_add(self.box_inv[k], shift)
    }

    /// Tests every triangle of `groups` against the `N` rays, folding hits
    /// into `best` with the rule of `Closest::offer`: a nearer hit replaces
    /// the lane's in SIMD; one exactly as near (rare) is settled by id in
    /// scalar code, like hits on an edge. The rays share the triangle
    /// test's `frame`, which the code takes as a constant (`in_frame`).
    #[inline(always)]
    pub(super) fn leaf(
        &self,
        groups: &[TriangleGroup<N>],
        frame: Frame,
        best: &mut LaneBest<N, V>,
    ) -> bool {
        let leaf = PacketLeaf {
            lanes: self,
            groups,
            best,
        };
        in_frame(frame, leaf)
    }

    /// [`LaneRays::leaf`] in the frame `rows`. The scalar rule runs after
    /// the loop, for the triangles that need it (`leaf::mark` of
    /// `g * N + tri`): with no call inside it, the loop keeps the rays'
    /// constants in registers.
    #[inline(always)]
    fn leaf_in(
        &self,
        groups: &[TriangleGroup<N>],
        rows: [usize; 3],
        best: &mut LaneBest<N, V>,
    ) -> bool {
        let mut improved = false;
        let mut unsettled = 0u64;
        for (g, group) in groups.iter().enumerate() {
            for tri in 0..N {
                let id = group.id[tri];
                if id == NO_PRIM {
                    continue; // padding
                }
                let found = self.test_triangle(group, tri, rows, best);
                let (hits, on_edge) = (V::bits(found.hits), V::bits(found.on_edge));
                if hits | on_edge == 0 {
                    continue;
                }
                improved = true;
                let nearer = self.take_nearer(&found, id, best);
                // A tie with the triangle a lane already holds is the same
                // hit again: a triangle that spatial splits put in several
                // leaves (`bvh-spatial`) is met once per leaf the packet
                // visits, and its hits tie bit for bit.
                let ties = hits & !nearer;
                let ties = if ties == 0 {
                    0
                } else {
                    ties & !best.holding(id, ties)
                };
                if ties | on_edge != 0 {
                    unsettled |= mark(g * N + tri);
                }
            }
        }
        if unsettled != 0 {
            V::out_of_line(
                self.isa,
                #[inline(always)]
                || self.settle_later(groups, rows, unsettled, best),
            );
        }
        improved
    }

    /// Lanes whose hit in `found` (triangle `id`) is nearer than their
    /// closest so far take it, in SIMD; returns those lanes.
    #[inline(always)]
    fn take_nearer(&self, found: &LaneHits<N, V>, id: u32, best: &mut LaneBest<N, V>) -> u32 {
        let nearer = found.t.lt(best.t) & found.hits;
        best.t = V::select(nearer, found.t, best.t);
        best.u = V::select(nearer, found.v * found.inv_det, best.u);
        best.v = V::select(nearer, found.w * found.inv_det, best.v);
        let id_lanes = V::splat(self.isa, f32::from_bits(id));
        best.id = V::select(nearer, id_lanes, best.id);
        V::bits(nearer)
    }

    /// The scalar rule for the triangles `unsettled` of `groups` (see
    /// [`LaneRays::leaf_in`]), tested again against the closest hits after
    /// the whole leaf: every hit was folded in, so none is nearer now; a
    /// hit as near as a lane's closest is a tie, settled by id, and lanes
    /// on an edge take the scalar test. A triangle settled twice (the last
    /// bit's) changes nothing the second time.
    // Out of the loop's way through `Lanes::out_of_line`: an
    // `#[inline(never)]` function of its own was compiled without the
    // backend's instruction set (its SIMD helpers became calls, 11 % of the
    // Cornell box's primary rays); inline, it cost the conference's primary
    // rays 4 %.
    #[inline(always)]
    fn settle_later(
        &self,
        groups: &[TriangleGroup<N>],
        rows: [usize; 3],
        unsettled: u64,
        best: &mut LaneBest<N, V>,
    ) {
        for (g, group) in groups.iter().enumerate() {
            for tri in 0..N {
                if unsettled & mark(g * N + tri) == 0 || group.id[tri] == NO_PRIM {
                    continue;
                }
                let found = self.test_triangle(group, tri, rows, best);
                let (hits, on_edge) = (V::bits(found.hits), V::bits(found.on_edge));
                let nearer = self.take_nearer(&found, group.id[tri], best);
                debug_assert_eq!(nearer, 0, "every hit was folded in already");
                let ties = hits & !nearer;
                if ties | on_edge != 0 {
                    self.settle(group, tri, ties, on_edge, &found, best);
                }
            }
        }
    }

    /// Scalar rule for lanes whose hit ties the current closest (`ties`)
    /// and for lanes the SIMD test left to the scalar test (`on_edge`).
    #[inline(always)]
    fn settle(
        &self,
        group: &TriangleGroup<N>,
        tri: usize,
        ties: u32,
        on_edge: u32,
        found: &LaneHits<N, V>,
        best: &mut LaneBest<N, V>,
    ) {
        let id = group.id[tri];
        let (t, v, w, inv_det) = (
            found.t.to_array(),
            found.v.to_array(),
            found.w.to_array(),
            found.inv_det.to_array(),
        );
        for lane in set_bits(ties) {
            let mut closest = best.lane(lane);
            if closest.offer(
                (t[lane], v[lane] * inv_det[lane], w[lane] * inv_det[lane]),
                id,
            ) {
                best.set_lane(lane, &closest);
            }
        }
        for lane in set_bits(on_edge) {
            let ray = &self.rays[lane];
            let mut closest = best.lane(lane);
            let exact = RayTriangleTest::new(ray.origin, ray.dir).intersect(
                &group.triangle(tri),
                ray.tmin,
                next_up(closest.t),
            );
            if exact.is_some_and(|h| closest.offer((h.t, h.u, h.v), id)) {
                best.set_lane(lane, &closest);
            }
        }
    }

    /// The watertight test of triangle `tri` of `group` against every lane's
    /// ray: the lane-for-lane arithmetic of `RayTriangles::test`, with the
    /// triangle broadcast instead of the ray, accepting `t` in
    /// `(tmin, tmax)` no farther than the lane's closest hit (equal
    /// included, for the tie rule).
    #[inline(always)]
    fn test_triangle(
        &self,
        group: &TriangleGroup<N>,
        tri: usize,
        rows: [usize; 3],
        best: &LaneBest<N, V>,
    ) -> LaneHits<N, V> {
        let (ax, ay, az) = self.sheared(group, tri, rows, 0);
        let (bx, by, bz) = self.sheared(group, tri, rows, 1);
        let (cx, cy, cz) = self.sheared(group, tri, rows, 2);
        let u = cx * by - cy * bx;
        let v = ax * cy - ay * cx;
        let w = bx * ay - by * ax;
        let zero = V::splat(self.isa, 0.0);
        let on_edge = u.eq(zero) | v.eq(zero) | w.eq(zero);
        // Lanes whose edge functions share a sign, NaN lanes left out (see
        // `RayTriangles::test`): when no lane is inside or on an edge, no
        // lane can hit, and the division and depth test are skipped.
        let lo = u.min_or(v.min_or(w));
        let hi = u.max_or(v.max_or(w));
        let inside = zero.le(lo) | hi.le(zero);
        if V::bits(inside | on_edge) == 0 {
            let none = zero.lt(zero);
            return LaneHits {
                hits: none,
                on_edge: none,
                t: zero,
                v,
                w,
                inv_det: zero,
            };
        }
        let det = u + v + w;
        let t_scaled = u * (self.sz * az) + v * (self.sz * bz) + w * (self.sz * cz);
        let inv_det = V::splat(self.isa, 1.0) / det;
        let t = t_scaled * inv_det;
        let accepted = det.ne_ordered(zero)
            & det.abs().lt(V::splat(self.isa, f32::INFINITY))
            & t.gt(self.t_min)
            & t.lt(best.t_max)
            & t.le(best.t);
        let mut hits = V::andnot(on_edge, accepted & inside);
        if V::bits(hits) != 0 {
            // Hits the conditioning bound cannot vouch for take the
            // crossing rule on the triangle's box (see `RayTriangles::test`;
            // no closures there either).
            let sheared = [ax, ay, bx, by, cx, cy];
            let doubtful = V::andnot(conditioned_lanes(self.isa, sheared, det), hits);
            if V::bits(doubtful) != 0 {
                let spans = [
                    self.span(group, tri, rows, 0),
                    self.span(group, tri, rows, 1),
                    self.span(group, tri, rows, 2),
                ];
                let breaks = crossing_breaks(self.isa, spans, [self.sx, self.sy, self.sz], t);
                hits = V::andnot(doubtful & breaks, hits);
            }
        }
        LaneHits {
            hits,
            on_edge,
            t,
            v,
            w,
            inv_det,
        }
    }

    /// Triangle `tri`'s box planes on axis `axis` of the frame `rows`,
    /// relative to each lane's origin (the scalar rule's `min(v) - o`).
    #[inline(always)]
    fn span(&self, group: &TriangleGroup<N>, tri: usize, rows: [usize; 3], axis: usize) -> (V, V) {
        let row = rows[axis];
        let (p, q, r) = (
            group.vertex[row][tri],
            group.vertex[3 + row][tri],
            group.vertex[6 + row][tri],
        );
        let (lo, hi) = (p.min(q).min(r), p.max(q).max(r));
        let origin = self.tri_origin[axis];
        (
            V::splat(self.isa, lo) - origin,
            V::splat(self.isa, hi) - origin,
        )
    }

    /// Vertex `v` of triangle `tri` relative to each lane's origin, sheared.
    #[inline(always)]
    fn sheared(
        &self,
        group: &TriangleGroup<N>,
        tri: usize,
        rows: [usize; 3],
        v: usize,
    ) -> (V, V, V) {
        let coord = |k: usize| group.vertex[3 * v + rows[k]][tri];
        let x = V::splat(self.isa, coord(0)) - self.tri_origin[0];
        let y = V::splat(self.isa, coord(1)) - self.tri_origin[1];
        let z = V::splat(self.isa, coord(2)) - self.tri_origin[2];
        (x - self.sx * z, y - self.sy * z, z)
    }
}

/// [`LaneRays::leaf`]'s test, run by [`in_frame`].
struct PacketLeaf<'s, 'a, const N: usize, V: Lanes<N>> {
    lanes: &'s LaneRays<'a, N, V>,
    groups: &'s [TriangleGroup<N>],
    best: &'s mut LaneBest<N, V>,
}

impl<const N: usize, V: Lanes<N>> FrameTest for PacketLeaf<'_, '_, N, V> {
    type Output = bool;

    #[inline(always)]
    fn run<const X: usize, const Y: usize, const Z: usize>(self) -> bool {
        self.lanes.leaf_in(self.groups, [X, Y, Z], self.best)
    }
}

#[cfg(test)]
mod tests {
    use super::super::leaf::RayTriangles;
    use super::super::node::{ChildRef, TriangleGroup, WideNode};
    use super::super::packet::Packet;
    use super::super::simd::{AnyCpu, Portable};
    use super::super::stream::RayConstants;
    use super::super::traverse::RayBoxes;
    use super::*;
    use caustic_geom::{Pcg32, Triangle, Vec3};

    type V8 = Portable<8>;

    /// Eight rays of one direction class (the depth axis and signs of
    /// `base`), origins spread over the scene, as a stream forms them.
    fn coherent_rays(rng: &mut Pcg32, base: Vec3) -> Vec<Ray> {
        let mut unit = || rng.next_f32() * 2.0 - 1.0;
        (0..8)
            .map(|_| {
                let jitter = Vec3::new(unit(), unit(), unit()) * 0.05;
                let dir = (base + jitter * base.abs()).normalize();
                let origin = Vec3::new(unit(), unit(), unit()) * 3.0;
                Ray {
                    origin,
                    dir,
                    tmin: 0.01,
                    tmax: 1.0 + 9.0 * unit().abs(),
                }
            })
            .collect()
    }

    /// A node of eight random boxes inside `[-4, 4]^3`.
    fn random_node(rng: &mut Pcg32) -> WideNode<8> {
        let mut unit = || rng.next_f32() * 2.0 - 1.0;
        let mut node = WideNode::<8>::empty();
        for slot in 0..8 {
            let p = Vec3::new(unit(), unit(), unit()) * 3.0;
            let e = Vec3::new(unit().abs(), unit().abs(), unit().abs());
            node.set(slot, Aabb::new(p - e, p + e), ChildRef::Node(0));
        }
        node
    }

    /// A group of eight random triangles inside `[-4, 4]^3`.
    fn random_group(rng: &mut Pcg32) -> TriangleGroup<8> {
        let mut unit = || rng.next_f32() * 2.0 - 1.0;
        let mut group = TriangleGroup::<8>::padding();
        for lane in 0..8 {
            let p = Vec3::new(unit(), unit(), unit()) * 3.0;
            let (a, b) = (
                Vec3::new(unit(), unit(), unit()),
                Vec3::new(unit(), unit(), unit()),
            );
            group.set(lane, &Triangle::new(p, p + a, p + b), lane as u32);
        }
        group
    }

    /// The per-ray constants a stream takes from its packet
    /// (`stream::RayConstants`) give every node and triangle test exactly
    /// the bits of the constants each ray computes alone (`RayBoxes::new`,
    /// `RayTriangles::new`).
    #[test]
    fn lane_constants_are_the_single_ray_ones() {
        let mut rng = Pcg32::new(11, 4);
        let bounds = Aabb::new(Vec3::splat(-4.0), Vec3::splat(4.0));
        let mut compared = 0;
        for case in 0..300 {
            let base = [
                Vec3::new(1.0, 0.3, -0.2),
                Vec3::new(-0.1, -1.0, 0.4),
                Vec3::new(0.2, 0.5, -1.0),
            ][case % 3];
            let rays = coherent_rays(&mut rng, base);
            let Some(packet) = Packet::<8, 1, V8>::new(AnyCpu, &rays, &bounds) else {
                continue;
            };
            let constants = RayConstants::new(&packet);
            let node = random_node(&mut rng);
            let group = random_group(&mut rng);
            for (lane, ray) in rays.iter().enumerate() {
                assert!(constants.finite_boxes(lane), "case {case} lane {lane}");
                let (t_min, t_max) = (V8::splat(AnyCpu, ray.tmin), V8::splat(AnyCpu, ray.tmax));
                let alone = RayBoxes::<8, V8>::new(AnyCpu, ray.origin, ray.dir, &bounds);
                let from_lane = constants.boxes::<V8>(AnyCpu, lane, ray, &bounds);
                assert_same_box_tests(&alone, &from_lane, &node, (t_min, t_max));
                let alone = RayTriangles::<8, V8>::new(AnyCpu, ray);
                let from_lane = constants.triangles::<V8>(AnyCpu, packet.rows, lane, ray);
                let (g0, g1) = (
                    alone.test(&group, t_min, t_max),
                    from_lane.test(&group, t_min, t_max),
                );
                assert_eq!((g0.hits, g0.on_edge), (g1.hits, g1.on_edge));
                assert_eq!(g0.t.0.map(f32::to_bits), g1.t.0.map(f32::to_bits));
                compared += 1;
            }
        }
        assert!(compared >= 2000, "only {compared} rays formed packets");
    }

    /// Both constants give the same bits in a box test of `node`.
    fn assert_same_box_tests(
        a: &RayBoxes<8, V8>,
        b: &RayBoxes<8, V8>,
        node: &WideNode<8>,
        (t_min, t_max): (V8, V8),
    ) {
        let (h0, o0, b0) = a.test(node, t_min, t_max);
        let (h1, o1, b1) = b.test(node, t_min, t_max);
        assert_eq!(h0, h1);
        assert_eq!(o0.0.map(f32::to_bits), o1.0.map(f32::to_bits));
        assert_eq!(b0.0.map(f32::to_bits), b1.0.map(f32::to_bits));
    }

    /// A direction component so small that its reciprocal overflows: the
    /// lane's box constants are not the single-ray ones, and the stream
    /// computes that ray's own (`RayBoxes::new`, which treats the axis as
    /// parallel).
    #[test]
    fn overflowing_reciprocals_give_no_lane_boxes() {
        let bounds = Aabb::new(Vec3::splat(-4.0), Vec3::splat(4.0));
        let rays: Vec<Ray> = (0..8)
            .map(|i| {
                Ray::new(
                    Vec3::new(i as f32 * 0.1, 0.0, 0.0),
                    Vec3::new(1.0, 1e-39, 0.5),
                )
            })
            .collect();
        let packet = Packet::<8, 1, V8>::new(AnyCpu, &rays, &bounds).expect("one class");
        let constants = RayConstants::new(&packet);
        assert!(!constants.finite_boxes(0));
        let mut rng = Pcg32::new(5, 3);
        let ray = &rays[0];
        let alone = RayBoxes::<8, V8>::new(AnyCpu, ray.origin, ray.dir, &bounds);
        let (t_min, t_max) = (V8::splat(AnyCpu, ray.tmin), V8::splat(AnyCpu, 10.0));
        for _ in 0..50 {
            let node = random_node(&mut rng);
            let from_stream = constants.boxes::<V8>(AnyCpu, 0, ray, &bounds);
            assert_same_box_tests(&alone, &from_stream, &node, (t_min, t_max));
        }
    }
}
