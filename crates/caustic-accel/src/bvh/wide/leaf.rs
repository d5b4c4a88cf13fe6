//! The leaf test of the wide BVH: the watertight ray/triangle test of Woop,
//! Benthin and Wald ("Watertight Ray/Triangle Intersection", JCGT 2013) on
//! all `N` lanes of a [`TriangleGroup`] at once, bit-identical to the scalar
//! `caustic_geom::RayTriangleTest` that [`crate::BruteForce`] uses.
//!
//! Why the bits agree: each lane performs the same IEEE operations in the
//! same order as the scalar code (`a = v0 - o`, `ax = a[kx] - sx * a[kz]`,
//! `u = cx * by - cy * bx`, ..., `t = (u * az + v * bz + w * cz) * (1 / det)`),
//! without fused multiply-adds (`v0 - o` as `v0 + (-o)`, which IEEE
//! defines as the same operation), and every comparison has the scalar
//! code's NaN behaviour. The one step the lanes cannot take is the scalar test's
//! `f64` recomputation of edge functions that came out exactly zero; lanes
//! with a zero edge function go to the scalar test instead (rare: it needs a
//! ray through an edge or vertex in `f32`). A test checks the agreement on
//! random and adversarial triangles.
//!
//! The scalar test's crossing rule (`RayTriangleTest::within_crossing`,
//! after `caustic_geom::conditioned`) applies to hit lanes alone: the
//! conditioning bound on the lanes in SIMD (the same operations), the rule
//! itself for the few lanes it does not vouch for, out of line here and
//! inline in the packets' lane test (`crossing_breaks`).
//!
//! Hit selection keeps the accel contract: the smallest `t`, and among equal
//! `t` the lowest scene id, whatever order the lanes and leaves come in.

use super::node::TriangleGroup;
use super::simd::Lanes;
use crate::slab_ray::next_up;
use caustic_geom::{CONDITIONED, CROSSING_ROUNDING, CROSSING_SLACK, Hit, Ray, RayTriangleTest};

/// Per-ray constants of the watertight test, broadcast to `N` lanes.
#[derive(Clone, Copy, Debug)]
pub struct RayTriangles<'a, const N: usize, V: Lanes<N>> {
    /// The backend's token, for the vectors made from triangles.
    isa: V::Isa,
    /// Vertex rows `kx, ky, kz` of the sheared frame (see `RayTriangleTest`).
    rows: [usize; 3],
    /// Origin coordinates along `kx, ky, kz`, negated: `v - o` is computed
    /// as `v + (-o)`, the same IEEE result (subtraction is the addition of
    /// the negation), so that the vertex load folds into the addition.
    neg_origin: [V; 3],
    sx: V,
    sy: V,
    sz: V,
    /// The ray, for the scalar test of lanes with a zero edge function
    /// (set up only then: it costs as much as a group test); by reference,
    /// so that nothing is copied for that rare path.
    ray: &'a Ray,
}

impl<'a, const N: usize, V: Lanes<N>> RayTriangles<'a, N, V> {
    /// The constants of `RayTriangleTest::new`, computed the same way: the
    /// depth axis `kz` is the direction's largest component (first wins
    /// ties), and `kx`, `ky` swap when it is negative to keep the winding.
    #[inline(always)]
    pub fn new(isa: V::Isa, ray: &'a Ray) -> Self {
        let abs = ray.dir.abs();
        // One copy per depth axis `kz`, so that the axes are constants.
        if abs.x >= abs.y && abs.x >= abs.z {
            Self::in_frame::<1, 2, 0>(isa, ray)
        } else if abs.y >= abs.z {
            Self::in_frame::<2, 0, 1>(isa, ray)
        } else {
            Self::in_frame::<0, 1, 2>(isa, ray)
        }
    }

    /// [`RayTriangles::new`] with `kz = Z` and, before the swap for a
    /// negative `dir[kz]`, `kx = X`, `ky = Y`.
    #[inline(always)]
    fn in_frame<const X: usize, const Y: usize, const Z: usize>(isa: V::Isa, ray: &'a Ray) -> Self {
        let (o, d) = (ray.origin.to_array(), ray.dir.to_array());
        let ([kx, ky], [ox, oy], [dx, dy]) = if d[Z] < 0.0 {
            ([Y, X], [o[Y], o[X]], [d[Y], d[X]])
        } else {
            ([X, Y], [o[X], o[Y]], [d[X], d[Y]])
        };
        Self {
            isa,
            rows: [kx, ky, Z],
            neg_origin: [V::splat(isa, -ox), V::splat(isa, -oy), V::splat(isa, -o[Z])],
            sx: V::splat(isa, dx / d[Z]),
            sy: V::splat(isa, dy / d[Z]),
            sz: V::splat(isa, 1.0 / d[Z]),
            ray,
        }
    }

    /// The constants from parts computed elsewhere: a packet lane's
    /// (`LaneRays::triangle_constants`), divided as [`RayTriangles::new`]
    /// divides, in the frame `rows` it picks; the origin comes negated.
    #[inline(always)]
    pub(super) fn from_parts(
        isa: V::Isa,
        rows: [usize; 3],
        neg_origin: [f32; 3],
        [sx, sy, sz]: [f32; 3],
        ray: &'a Ray,
    ) -> Self {
        Self {
            isa,
            rows,
            neg_origin: [
                V::splat(isa, neg_origin[0]),
                V::splat(isa, neg_origin[1]),
                V::splat(isa, neg_origin[2]),
            ],
            sx: V::splat(isa, sx),
            sy: V::splat(isa, sy),
            sz: V::splat(isa, sz),
            ray,
        }
    }

    /// Vertex `v` of the group's lanes relative to the origin, sheared:
    /// `(a[kx] - sx * a[kz], a[ky] - sy * a[kz], a[kz])`.
    #[inline(always)]
    fn sheared(&self, group: &TriangleGroup<N>, v: usize) -> (V, V, V) {
        let isa = self.isa;
        let x = V::load(isa, &group.vertex[3 * v + self.rows[0]]) + self.neg_origin[0];
        let y = V::load(isa, &group.vertex[3 * v + self.rows[1]]) + self.neg_origin[1];
        let z = V::load(isa, &group.vertex[3 * v + self.rows[2]]) + self.neg_origin[2];
        (x - self.sx * z, y - self.sy * z, z)
    }

    /// Tests every lane of `group` for a hit with `t` in `(t_min, t_max)`.
    #[inline(always)]
    pub fn test(&self, group: &TriangleGroup<N>, t_min: V, t_max: V) -> GroupHits<N, V> {
        let (ax, ay, az) = self.sheared(group, 0);
        let (bx, by, bz) = self.sheared(group, 1);
        let (cx, cy, cz) = self.sheared(group, 2);
        let u = cx * by - cy * bx;
        let v = ax * cy - ay * cx;
        let w = bx * ay - by * ax;
        let zero = V::splat(self.isa, 0.0);
        let on_edge = V::bits(u.eq(zero) | v.eq(zero) | w.eq(zero));
        // Lanes whose edge functions share a sign (all `>= 0` or all
        // `<= 0`): the scalar test's "no mixed signs" with NaN lanes left
        // out, from the smallest and largest of the three. A lane left out
        // has mixed signs, or a NaN edge function (then the determinant is
        // NaN and the scalar test rejects it too), so no hit is lost; and
        // padding lanes (NaN vertices) are left out, so a group that is not
        // full can leave early as well.
        let lo = u.min_or(v.min_or(w));
        let hi = u.max_or(v.max_or(w));
        let inside = V::bits(zero.le(lo) | hi.le(zero));
        // Most groups a ray reaches have no lane inside all three edges:
        // leave before the division and the depth test (as Embree's test
        // does). Lanes that go on see exactly the arithmetic of the scalar
        // test, so the bits still agree.
        if inside | on_edge == 0 {
            return GroupHits {
                hits: 0,
                on_edge: 0,
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
            & t.gt(t_min)
            & t.lt(t_max);
        let mut hits = V::bits(accepted) & inside & !on_edge;
        if hits != 0 {
            // Hits the conditioning bound cannot vouch for (grazing rays,
            // slivers) take the crossing rule on the lanes' triangle boxes.
            // (No closures here: a closure is a function of its own, which
            // is not compiled with the caller's instruction set.)
            let sheared = [ax, ay, bx, by, cx, cy];
            let doubtful = hits & !V::bits(conditioned_lanes(self.isa, sheared, det));
            if doubtful != 0 {
                hits &= !breaking_crossing(self.ray, group, doubtful, &t.to_array());
            }
        }
        GroupHits {
            hits,
            on_edge,
            t,
            v,
            w,
            inv_det,
        }
    }

    /// Closest hit among `groups` with `t` in `(t_min, best.t]` (ties to the
    /// lower id), folded into `best`; returns whether `best` changed.
    #[inline(always)]
    pub fn closest(&self, groups: &[TriangleGroup<N>], t_min: f32, best: &mut Closest) -> bool {
        let mut improved = false;
        let t_min_v = V::splat(self.isa, t_min);
        // Groups with a lane on an edge, for the scalar test after the loop
        // (as in `any`).
        let mut on_edge = 0;
        for (g, group) in groups.iter().enumerate() {
            // Accept `t == best.t` too, so that equal distances go to the lower id.
            let limit = next_up(best.t);
            let found = self.test(group, t_min_v, V::splat(self.isa, limit));
            if found.hits | found.on_edge == 0 {
                continue;
            }
            if found.on_edge != 0 {
                on_edge |= mark(g);
            }
            if found.hits != 0 {
                let (t, v, w, inv_det) = (
                    found.t.to_array(),
                    found.v.to_array(),
                    found.w.to_array(),
                    found.inv_det.to_array(),
                );
                for lane in set_bits(found.hits) {
                    let hit = (t[lane], v[lane] * inv_det[lane], w[lane] * inv_det[lane]);
                    improved |= best.offer(hit, group.id[lane]);
                }
            }
        }
        if on_edge != 0 {
            improved |= closest_exact(self.ray, groups, on_edge, t_min, best);
        }
        improved
    }

    /// Whether any triangle of `groups` has a hit in `(t_min, t_max)`.
    #[inline(always)]
    pub fn any(&self, groups: &[TriangleGroup<N>], t_min: f32, t_max: f32) -> bool {
        let (t_min_v, t_max_v) = (V::splat(self.isa, t_min), V::splat(self.isa, t_max));
        // Groups with a lane on an edge ([`mark`]), left to the scalar test
        // after the loop: with no call inside it, the loop keeps the ray's
        // constants in registers (every vector register is the caller's to
        // save).
        let mut on_edge = 0;
        for (g, group) in groups.iter().enumerate() {
            let found = self.test(group, t_min_v, t_max_v);
            if found.hits != 0 {
                return true;
            }
            if found.on_edge != 0 {
                on_edge |= mark(g);
            }
        }
        on_edge != 0 && any_exact(self.ray, groups, on_edge, t_min, t_max)
    }
}

/// A leaf test to run with the watertight test's frame (`kx, ky, kz`) as
/// constants of the code: [`in_frame`] makes one copy per frame, so the
/// vertex rows of a group are fixed offsets rather than computed ones.
pub(super) trait FrameTest {
    type Output;
    fn run<const X: usize, const Y: usize, const Z: usize>(self) -> Self::Output;
}

/// The frame of the watertight test a ray picks (`RayTriangles::new`):
/// the depth axis `kz` and the sign of `dir[kz]`, which orders `kx, ky`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Frame {
    X,
    XNegative,
    Y,
    YNegative,
    Z,
    ZNegative,
}

impl Frame {
    /// The frame of rays with depth axis `depth` whose direction along it
    /// is negative or not.
    pub(super) fn new(depth: usize, negative: bool) -> Self {
        match (depth, negative) {
            (0, false) => Self::X,
            (0, true) => Self::XNegative,
            (1, false) => Self::Y,
            (1, true) => Self::YNegative,
            (_, false) => Self::Z,
            (_, true) => Self::ZNegative,
        }
    }

    /// The vertex rows `kx, ky, kz`.
    pub(super) fn rows(self) -> [usize; 3] {
        match self {
            Self::X => [1, 2, 0],
            Self::XNegative => [2, 1, 0],
            Self::Y => [2, 0, 1],
            Self::YNegative => [0, 2, 1],
            Self::Z => [0, 1, 2],
            Self::ZNegative => [1, 0, 2],
        }
    }
}

/// Runs `test` in `frame`, one copy of its code per frame.
#[inline(always)]
pub(super) fn in_frame<T: FrameTest>(frame: Frame, test: T) -> T::Output {
    match frame {
        Frame::X => test.run::<1, 2, 0>(),
        Frame::XNegative => test.run::<2, 1, 0>(),
        Frame::Y => test.run::<2, 0, 1>(),
        Frame::YNegative => test.run::<0, 2, 1>(),
        Frame::Z => test.run::<0, 1, 2>(),
        Frame::ZNegative => test.run::<1, 0, 2>(),
    }
}

/// Bit `i` of a mask of the groups (or triangles) a leaf's loop leaves to
/// the scalar rule after it; the last bit stands for every index from 63
/// on, so a leaf of any size fits one `u64` (a marked index is tested
/// again, which only costs time, and only in the rare scalar path).
#[inline(always)]
pub(super) fn mark(i: usize) -> u64 {
    1 << i.min(63)
}

/// The lanes holding a triangle in the groups `marked` ([`mark`]).
fn marked_lanes<const N: usize>(
    groups: &[TriangleGroup<N>],
    marked: u64,
) -> impl Iterator<Item = (&TriangleGroup<N>, usize)> {
    let tested = groups
        .iter()
        .enumerate()
        .filter(move |&(g, _)| marked & mark(g) != 0);
    tested.flat_map(|(_, group)| group.lanes().map(move |lane| (group, lane)))
}

/// Whether the scalar test finds a hit in `(t_min, t_max)` on a lane of
/// the groups `marked`: [`RayTriangles::any`]'s lanes on an edge. Every
/// lane of a marked group is tested, since the others' scalar answers are
/// the group test's (no hit).
#[cold]
#[inline(never)]
fn any_exact<const N: usize>(
    ray: &Ray,
    groups: &[TriangleGroup<N>],
    marked: u64,
    t_min: f32,
    t_max: f32,
) -> bool {
    let test = RayTriangleTest::new(ray.origin, ray.dir);
    marked_lanes(groups, marked).any(|(group, lane)| {
        test.intersect(&group.triangle(lane), t_min, t_max)
            .is_some()
    })
}

/// The scalar test's closest hit in `(t_min, best.t]` (ties to the lower
/// id) on the lanes of the groups `marked` (as in [`any_exact`]), folded
/// into `best`; whether `best` changed. A lane the group test already
/// offered is offered again with the same bits, which changes nothing.
#[cold]
#[inline(never)]
fn closest_exact<const N: usize>(
    ray: &Ray,
    groups: &[TriangleGroup<N>],
    marked: u64,
    t_min: f32,
    best: &mut Closest,
) -> bool {
    let test = RayTriangleTest::new(ray.origin, ray.dir);
    let mut improved = false;
    for (group, lane) in marked_lanes(groups, marked) {
        if let Some(h) = test.intersect(&group.triangle(lane), t_min, next_up(best.t)) {
            improved |= best.offer((h.t, h.u, h.v), group.id[lane]);
        }
    }
    improved
}

/// The lanes whose hit the scalar test's conditioning bound vouches for
/// (`caustic_geom::conditioned`, the same operations on every lane):
/// `sheared` holds the lanes' `ax, ay, bx, by, cx, cy`.
#[inline(always)]
pub(super) fn conditioned_lanes<const N: usize, V: Lanes<N>>(
    isa: V::Isa,
    [ax, ay, bx, by, cx, cy]: [V; 6],
    det: V,
) -> V::Mask {
    let size = (cx * by)
        .abs()
        .max_or((cy * bx).abs())
        .max_or((ax * cy).abs())
        .max_or((ay * cx).abs())
        .max_or((bx * ay).abs())
        .max_or((by * ax).abs());
    det.abs().gt(size * V::splat(isa, CONDITIONED))
}

/// The lanes that break the crossing rule of the scalar test
/// (`RayTriangleTest::within_crossing`: the same operations in the same
/// order on every lane, so the same answer) at distances `t`: `spans` holds,
/// per axis of the test's frame `kx, ky, kz`, the lanes' triangle box planes
/// relative to their ray's origin (`lo - o`, `hi - o`), `shear` the lanes'
/// `sx, sy, sz`. Inline, for the packets' lanes (a call in their triangle
/// loop, even a cold one, costs more than this does).
#[inline(always)]
pub(super) fn crossing_breaks<const N: usize, V: Lanes<N>>(
    isa: V::Isa,
    spans: [(V, V); 3],
    [sx, sy, sz]: [V; 3],
    t: V,
) -> V::Mask {
    let (a, b) = (spans[2].0 * sz, spans[2].1 * sz);
    let (near, far) = (a.min_or(b), a.max_or(b));
    let margin = (far - near) * V::splat(isa, CROSSING_SLACK)
        + near.abs().max_or(far.abs()) * V::splat(isa, CROSSING_ROUNDING);
    let mut breaks = t.lt(near - margin) | t.gt(far + margin);
    for ((lo, hi), s) in [(spans[0], sx), (spans[1], sy)] {
        let (a, b) = (lo * sz, hi * sz);
        let (reach, slack) = (t * s, margin * s.abs());
        breaks = breaks | reach.lt(a.min_or(b) - slack) | reach.gt(a.max_or(b) + slack);
    }
    breaks
}

/// The lanes of `lanes` (of `group`, at distances `t`) whose hit breaks the
/// scalar test's crossing rule (`RayTriangleTest::within_crossing`, the
/// same function, so the same answer). Cold and out of line: only hits the
/// conditioning bound cannot vouch for come here (grazing rays, slivers).
#[cold]
#[inline(never)]
pub(super) fn breaking_crossing<const N: usize>(
    ray: &Ray,
    group: &TriangleGroup<N>,
    lanes: u32,
    t: &[f32; N],
) -> u32 {
    let test = RayTriangleTest::new(ray.origin, ray.dir);
    set_bits(lanes)
        .filter(|&lane| !test.within_crossing(&group.triangle(lane), t[lane]))
        .fold(0, |broken, lane| broken | 1 << lane)
}

/// Lanes of one group test.
#[derive(Clone, Copy, Debug)]
pub struct GroupHits<const N: usize, V> {
    /// Lanes with an accepted hit (bit per lane).
    pub hits: u32,
    /// Lanes with an edge function exactly zero, left to the scalar test.
    pub on_edge: u32,
    pub t: V,
    /// Unnormalised barycentrics of `v1` and `v2`, and `1 / det`.
    pub v: V,
    pub w: V,
    pub inv_det: V,
}

/// The closest hit so far of one ray.
#[derive(Clone, Copy, Debug)]
pub struct Closest {
    /// Its distance, or the ray's `tmax` while there is none.
    pub t: f32,
    pub hit: Option<Hit>,
}

impl Closest {
    pub fn new(t_max: f32) -> Self {
        Self {
            t: t_max,
            hit: None,
        }
    }

    /// Takes `(t, u, v)` of triangle `prim` when it is nearer, or as near
    /// with a lower id; the caller guarantees `t <= self.t`.
    #[inline(always)]
    pub(super) fn offer(&mut self, (t, u, v): (f32, f32, f32), prim: u32) -> bool {
        let better = t < self.t || (t == self.t && self.hit.is_some_and(|h| prim < h.prim));
        if better {
            self.t = t;
            self.hit = Some(Hit { t, prim, u, v });
        }
        better
    }
}

/// Indices of the set bits of `bits`, lowest first.
#[inline(always)]
pub fn set_bits(mut bits: u32) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        (bits != 0).then(|| {
            let lane = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            lane
        })
    })
}

#[cfg(test)]
mod tests {
    use super::super::simd::{AnyCpu, Portable};
    use super::*;
    use caustic_geom::{Pcg32, Triangle, Vec3};

    fn random_vec(rng: &mut Pcg32, scale: f32) -> Vec3 {
        Vec3::new(
            rng.next_f32() - 0.5,
            rng.next_f32() - 0.5,
            rng.next_f32() - 0.5,
        ) * scale
    }

    /// Triangles that stress the test: shared edges and vertices hit head
    /// on, slivers, degenerate ones, non-finite ones.
    fn adversarial(rng: &mut Pcg32, origin: Vec3, dir: Vec3) -> Triangle {
        let p = origin + dir * (1.0 + 4.0 * rng.next_f32());
        let (a, b) = (random_vec(rng, 2.0), random_vec(rng, 2.0));
        match rng.next_u32() % 6 {
            0 => Triangle::new(p, p + a, p + b),
            1 => Triangle::new(p - a, p + a, p + b),
            2 => Triangle::new(p + a, p + 4.0 * a, p + 4.0 * a + 1e-5 * b),
            3 => Triangle::new(p, p + a, p + 2.0 * a),
            4 => Triangle::new(p, p + a, Vec3::new(f32::NAN, p.y, p.z)),
            _ => Triangle::new(p + a, p + b, p + a + b),
        }
    }

    /// The lanes of one group give exactly the scalar test's answers.
    fn group_agrees_with_scalar<const N: usize, V: Lanes<N>>(isa: V::Isa, seed: u64) {
        let mut rng = Pcg32::new(seed, 3);
        for _ in 0..2000 {
            let origin = random_vec(&mut rng, 10.0);
            let mut dir = random_vec(&mut rng, 2.0);
            if rng.next_u32() & 3 == 0 {
                dir[rng.next_u32() as usize % 3] = 0.0;
            }
            if dir == Vec3::ZERO {
                continue;
            }
            let scalar = RayTriangleTest::new(origin, dir);
            let ray = Ray::new(origin, dir);
            let test = RayTriangles::<N, V>::new(isa, &ray);
            let mut group = TriangleGroup::<N>::padding();
            let lanes = 1 + rng.next_u32() as usize % N;
            let tris: Vec<Triangle> = (0..lanes)
                .map(|_| adversarial(&mut rng, origin, dir))
                .collect();
            for (lane, tri) in tris.iter().enumerate() {
                group.set(lane, tri, lane as u32);
            }
            let (t_min, t_max) = (0.5, 4.0 + 2.0 * rng.next_f32());
            let found = test.test(&group, V::splat(isa, t_min), V::splat(isa, t_max));
            let t = found.t.to_array();
            for (lane, tri) in tris.iter().enumerate() {
                let expected = scalar.intersect(tri, t_min, t_max);
                if found.on_edge & (1 << lane) != 0 {
                    continue;
                }
                let got = (found.hits & (1 << lane) != 0).then_some(t[lane]);
                assert_eq!(
                    got.map(f32::to_bits),
                    expected.map(|h| h.t.to_bits()),
                    "{tri:?}"
                );
            }
            assert_eq!(found.hits >> lanes, 0, "padding lanes never hit");
            let mut best = Closest::new(t_max);
            test.closest(std::slice::from_ref(&group), t_min, &mut best);
            let mut reference = Closest::new(t_max);
            for (prim, tri) in tris.iter().enumerate() {
                if let Some(h) = scalar.intersect(tri, t_min, reference.t) {
                    reference.t = h.t;
                    reference.hit = Some(Hit {
                        t: h.t,
                        prim: prim as u32,
                        u: h.u,
                        v: h.v,
                    });
                }
            }
            assert_eq!(best.hit, reference.hit);
            assert_eq!(
                test.any(std::slice::from_ref(&group), t_min, t_max),
                reference.hit.is_some()
            );
        }
    }

    #[test]
    fn portable_groups_agree_with_the_scalar_test() {
        group_agrees_with_scalar::<4, Portable<4>>(AnyCpu, 1);
        group_agrees_with_scalar::<8, Portable<8>>(AnyCpu, 2);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn sse_groups_agree_with_the_scalar_test() {
        use super::super::simd::{Sse2, Sse4};
        group_agrees_with_scalar::<4, Sse4>(Sse2, 3);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx_groups_agree_with_the_scalar_test() {
        use super::super::simd::{Avx8, avx2_for_test};
        if let Some(avx) = avx2_for_test("avx_groups_agree_with_the_scalar_test") {
            group_agrees_with_scalar::<8, Avx8>(avx, 4);
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx512_groups_agree_with_the_scalar_test() {
        use super::super::simd::{Avx8k, avx512_for_test};
        if let Some(isa) = avx512_for_test("avx512_groups_agree_with_the_scalar_test") {
            group_agrees_with_scalar::<8, Avx8k>(isa, 5);
        }
    }

    #[test]
    fn edge_hits_go_to_the_scalar_test() {
        // A ray straight through the shared edge of two triangles.
        let (a, b) = (Vec3::new(0.0, 0.0, 1.0), Vec3::new(1.0, 1.0, 1.0));
        let mut group = TriangleGroup::<4>::padding();
        group.set(0, &Triangle::new(a, Vec3::new(1.0, 0.0, 1.0), b), 5);
        group.set(1, &Triangle::new(a, b, Vec3::new(0.0, 1.0, 1.0)), 3);
        let ray = Ray::new(Vec3::new(0.5, 0.5, 0.0), Vec3::Z);
        let test = RayTriangles::<4, Portable<4>>::new(AnyCpu, &ray);
        let found = test.test(&group, Portable([0.0; 4]), Portable([9.0; 4]));
        assert_ne!(found.on_edge, 0);
        let mut best = Closest::new(f32::INFINITY);
        assert!(test.closest(&[group], 0.0, &mut best));
        assert_eq!(best.hit.map(|h| (h.prim, h.t)), Some((3, 1.0)));
    }

    #[test]
    fn next_up_steps_one_ulp() {
        assert_eq!(next_up(1.0), 1.0 + f32::EPSILON);
        assert_eq!(next_up(0.0), f32::from_bits(1));
        assert_eq!(next_up(-0.0), f32::from_bits(1));
        assert!(next_up(-1.0) > -1.0);
        assert_eq!(next_up(f32::INFINITY), f32::INFINITY);
    }
}
