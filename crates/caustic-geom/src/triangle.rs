//! Triangles and the watertight ray/triangle test of Woop, Benthin and Wald,
//! "Watertight Ray/Triangle Intersection", JCGT 2(1), 2013.
//!
//! The test shears the triangle into a ray-aligned frame in which the ray is
//! the +z axis and decides the hit from the signs of three 2D edge functions.
//! Edges shared by two triangles are tested with identical arithmetic from
//! both sides, so a ray through an edge or a vertex hits at least one of the
//! triangles: no cracks. Edge functions that come out exactly zero are
//! recomputed in `f64`, as the paper prescribes. Hits are two-sided.
//!
//! One rule is added to the paper's test: a hit's `t` must lie where the
//! ray crosses the triangle's bounding box, widened by [`CROSSING_SLACK`]
//! of the box's depth along the ray plus [`CROSSING_ROUNDING`] of its
//! distance ([`RayTriangleTest::within_crossing`]). The test computes `t`
//! from the edge functions as a convex combination of the vertices'
//! distances along the ray's dominant axis, so for a well-conditioned hit
//! it is the distance to the point where the ray meets the triangle, a few
//! ulps off; but where the edge functions carry a large relative error (a
//! ray grazing the triangle's plane or a sliver, `det` tiny), `t` can be
//! anywhere in the triangle's depth range, far from that point. Those hits
//! are dropped (the error must exceed 1/512 of the triangle's depth), and in
//! exchange a hierarchy may cull a box by the interval where the ray
//! crosses it, as Embree does, instead of by its depth range alone: every
//! `t` this test returns lies in the widened crossing of every box that
//! holds the whole triangle (`caustic_accel`'s wide BVH, "the crossing
//! rule").

use crate::Aabb;
use bytemuck::{Pod, Zeroable};
use glam::Vec3;

/// A triangle as three positions. The geometric normal is
/// `cross(v1 - v0, v2 - v0)` (counter-clockwise winding faces the viewer).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct Triangle {
    pub v0: Vec3,
    pub v1: Vec3,
    pub v2: Vec3,
}

const _: () = assert!(std::mem::size_of::<Triangle>() == 36);

impl Triangle {
    pub fn new(v0: Vec3, v1: Vec3, v2: Vec3) -> Self {
        Self { v0, v1, v2 }
    }

    pub fn bounds(&self) -> Aabb {
        Aabb {
            min: self.v0.min(self.v1).min(self.v2),
            max: self.v0.max(self.v1).max(self.v2),
        }
    }

    pub fn centroid(&self) -> Vec3 {
        (self.v0 + self.v1 + self.v2) * (1.0 / 3.0)
    }

    /// The unnormalised geometric normal; its length is twice the area.
    pub fn cross(&self) -> Vec3 {
        (self.v1 - self.v0).cross(self.v2 - self.v0)
    }

    pub fn area(&self) -> f32 {
        0.5 * self.cross().length()
    }

    /// Unit geometric normal, or `None` for a zero-area triangle.
    pub fn normal(&self) -> Option<Vec3> {
        self.cross().try_normalize()
    }

    pub fn is_finite(&self) -> bool {
        self.v0.is_finite() && self.v1.is_finite() && self.v2.is_finite()
    }

    /// Point at barycentrics `(u, v)`: `(1-u-v) v0 + u v1 + v v2`.
    pub fn point_at(&self, u: f32, v: f32) -> Vec3 {
        (1.0 - u - v) * self.v0 + u * self.v1 + v * self.v2
    }
}

/// Margin of the crossing rule ([`RayTriangleTest::within_crossing`]),
/// relative to the depth of the triangle's box along the ray (its extent
/// along the ray's dominant axis, as a distance): `2^-9`, 1.6 times the
/// most a [`conditioned`] hit's `t` can be off (`1.25 * 2^-10` of that
/// depth, see there; the random slivers and grazing rays of the tests stay
/// within `2^-12`).
/// The rule drops a hit only when its `t` is off by more than this: edge
/// functions with a relative error of at least as much (a ray within about
/// `10^-2` degrees of a well-shaped triangle's plane, or a sliver). The
/// margin is what a hierarchy adds to a box's crossing interval, so it
/// decides how many boxes behind a ray's origin are still tested: with
/// 1/64 a sponza AO ray tested 1.76 leaves, with 1/512 it tests 1.42.
pub const CROSSING_SLACK: f32 = 1.0 / 512.0;

/// Rounding margin of the crossing rule, relative to the larger distance of
/// the box's depth range: `2^-19` (about 16 ulps), as `SLACK` in the
/// hierarchies' box tests, which it must not exceed.
pub const CROSSING_ROUNDING: f32 = 1.0 / 524_288.0;

/// The conditioning bound of [`conditioned`]: `2^-10`.
pub const CONDITIONED: f32 = 1.0 / 1024.0;

/// Whether a hit's edge functions are accurate enough that its `t` keeps
/// the crossing rule without testing it: `|det|` above `CONDITIONED` times
/// the largest of the six products the edge functions subtract (`size`).
/// Each edge function is off by at most `2^-22 size` (two products and a
/// difference, each rounded), so each barycentric by at most `(e_i + b_i
/// sum e) / det`, `1.5 * 2^-10` in all, and since the computed barycentrics
/// still sum to one, `t = sum b_i z_i` is off by at most half that times
/// the depth range `max z - min z`; a hit the exact edge functions would
/// place just outside the triangle (two barycentrics below zero by at most
/// `2^-12` each) adds at most `2^-11` of overshoot beyond the box: below
/// `1.25 * 2^-10` of the depth range together, under the rule's
/// `CROSSING_SLACK` (`2^-9`). Roundings of the vertex
/// distances and of `t` itself scale with the distance, not the depth, and
/// are `CROSSING_ROUNDING`'s. Only grazing rays and slivers go on to the
/// rule itself. The sheared vertices come as
/// `[ax, ay, bx, by, cx, cy]`; the products are the edge functions' own
/// (`cx * by`, `cy * bx`, ...), recomputed, so the same bits.
#[inline]
pub fn conditioned([ax, ay, bx, by, cx, cy]: [f32; 6], det: f32) -> bool {
    let size = (cx * by)
        .abs()
        .max((cy * bx).abs())
        .max((ax * cy).abs())
        .max((ay * cx).abs())
        .max((bx * ay).abs())
        .max((by * ax).abs());
    det.abs() > size * CONDITIONED
}

/// Per-ray constants of the watertight test, computed once per ray and reused
/// for every triangle the ray is tested against.
#[derive(Clone, Copy, Debug)]
pub struct RayTriangleTest {
    origin: Vec3,
    kx: usize,
    ky: usize,
    kz: usize,
    sx: f32,
    sy: f32,
    sz: f32,
}

/// Result of a successful triangle test: distance and barycentrics `(u, v)`
/// of `v1` and `v2`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TriangleHit {
    pub t: f32,
    pub u: f32,
    pub v: f32,
}

impl RayTriangleTest {
    pub fn new(origin: Vec3, dir: Vec3) -> Self {
        let abs = dir.abs();
        let kz = if abs.x >= abs.y && abs.x >= abs.z {
            0
        } else if abs.y >= abs.z {
            1
        } else {
            2
        };
        let mut kx = (kz + 1) % 3;
        let mut ky = (kx + 1) % 3;
        // Keep the winding of the sheared frame: swapping x and y when the
        // dominant component is negative preserves the edge-function signs.
        if dir[kz] < 0.0 {
            std::mem::swap(&mut kx, &mut ky);
        }
        Self {
            origin,
            kx,
            ky,
            kz,
            sx: dir[kx] / dir[kz],
            sy: dir[ky] / dir[kz],
            sz: 1.0 / dir[kz],
        }
    }

    /// Intersects the triangle; returns a hit when its distance lies in
    /// `(tmin, tmax)`. A ray with a zero or non-finite direction never hits.
    #[inline]
    pub fn intersect(&self, tri: &Triangle, tmin: f32, tmax: f32) -> Option<TriangleHit> {
        let (hit, sheared, det) = self.watertight(tri, tmin, tmax)?;
        (conditioned(sheared, det) || self.within_crossing(tri, hit.t)).then_some(hit)
    }

    /// The paper's test alone, without the crossing rule: the hit, the
    /// sheared vertices `[ax, ay, bx, by, cx, cy]` and `det`.
    #[inline]
    fn watertight(
        &self,
        tri: &Triangle,
        tmin: f32,
        tmax: f32,
    ) -> Option<(TriangleHit, [f32; 6], f32)> {
        let a = tri.v0 - self.origin;
        let b = tri.v1 - self.origin;
        let c = tri.v2 - self.origin;
        let (kx, ky, kz) = (self.kx, self.ky, self.kz);
        let ax = a[kx] - self.sx * a[kz];
        let ay = a[ky] - self.sy * a[kz];
        let bx = b[kx] - self.sx * b[kz];
        let by = b[ky] - self.sy * b[kz];
        let cx = c[kx] - self.sx * c[kz];
        let cy = c[ky] - self.sy * c[kz];
        let mut u = cx * by - cy * bx;
        let mut v = ax * cy - ay * cx;
        let mut w = bx * ay - by * ax;
        if u == 0.0 || v == 0.0 || w == 0.0 {
            // Exactly on an edge in f32: decide in f64 so that neighbouring
            // triangles agree on which of them owns the edge.
            u = (cx as f64 * by as f64 - cy as f64 * bx as f64) as f32;
            v = (ax as f64 * cy as f64 - ay as f64 * cx as f64) as f32;
            w = (bx as f64 * ay as f64 - by as f64 * ax as f64) as f32;
        }
        if (u < 0.0 || v < 0.0 || w < 0.0) && (u > 0.0 || v > 0.0 || w > 0.0) {
            return None;
        }
        let det = u + v + w;
        if det == 0.0 || !det.is_finite() {
            return None;
        }
        let az = self.sz * a[kz];
        let bz = self.sz * b[kz];
        let cz = self.sz * c[kz];
        let t_scaled = u * az + v * bz + w * cz;
        let inv_det = 1.0 / det;
        let t = t_scaled * inv_det;
        if !(t > tmin && t < tmax) {
            return None;
        }
        let hit = TriangleHit {
            t,
            u: v * inv_det,
            v: w * inv_det,
        };
        Some((hit, [ax, ay, bx, by, cx, cy], det))
    }

    /// The crossing rule: whether the point at `t` lies in the triangle's
    /// bounding box widened by a margin: `CROSSING_SLACK` times the box's
    /// depth range along the ray (its slab on the dominant axis `kz`, as
    /// distances) plus `CROSSING_ROUNDING` times that range's larger
    /// distance, as a distance along the ray; on a lateral axis `k` the
    /// margin is that distance's reach along `k`. In other words `t` lies
    /// where the ray crosses the box, each slab's interval widened by the
    /// margin.
    ///
    /// Along `kz` the box's planes are at distances `(p - o[kz]) * sz`, as
    /// the test's own vertex distances. Along `kx` and `ky` the comparison
    /// is scaled by `sz = 1 / dir[kz]` so that it needs no division: the
    /// ray's offset `t * s` (`s` the shear `sx` or `sy`, `dir[k] /
    /// dir[kz]`) against the planes' `(p - o[k]) * sz`, the margin times
    /// `|s|`. A slab the ray runs parallel to (`s = 0`) must hold the
    /// origin. Every comparison that meets a NaN passes, so the rule only
    /// ever drops a hit on finite evidence. The GPU's `triangle_intersect`
    /// and the wide BVH's SIMD leaf tests do the same operations in the
    /// same order.
    #[inline]
    pub fn within_crossing(&self, tri: &Triangle, t: f32) -> bool {
        let span = |k: usize| {
            let lo = tri.v0[k].min(tri.v1[k]).min(tri.v2[k]);
            let hi = tri.v0[k].max(tri.v1[k]).max(tri.v2[k]);
            (
                (lo - self.origin[k]) * self.sz,
                (hi - self.origin[k]) * self.sz,
            )
        };
        let (a, b) = span(self.kz);
        let (near, far) = (a.min(b), a.max(b));
        let margin = (far - near) * CROSSING_SLACK + near.abs().max(far.abs()) * CROSSING_ROUNDING;
        if t < near - margin || t > far + margin {
            return false;
        }
        [(self.kx, self.sx), (self.ky, self.sy)]
            .into_iter()
            .all(|(k, s)| {
                let (a, b) = span(k);
                let (reach, slack) = (t * s, margin * s.abs());
                !(reach < a.min(b) - slack || reach > a.max(b) + slack)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit_tri() -> Triangle {
        Triangle::new(Vec3::ZERO, Vec3::X, Vec3::Y)
    }

    #[test]
    fn hits_front_and_back() {
        let tri = unit_tri();
        let front = RayTriangleTest::new(Vec3::new(0.25, 0.25, 1.0), -Vec3::Z);
        let h = front.intersect(&tri, 0.0, f32::INFINITY).unwrap();
        assert!((h.t - 1.0).abs() < 1e-6);
        assert!((tri.point_at(h.u, h.v) - Vec3::new(0.25, 0.25, 0.0)).length() < 1e-6);
        let back = RayTriangleTest::new(Vec3::new(0.25, 0.25, -2.0), Vec3::Z);
        assert!((back.intersect(&tri, 0.0, f32::INFINITY).unwrap().t - 2.0).abs() < 1e-6);
    }

    #[test]
    fn misses_outside_and_beyond_range() {
        let tri = unit_tri();
        let r = RayTriangleTest::new(Vec3::new(0.75, 0.75, 1.0), -Vec3::Z);
        assert!(r.intersect(&tri, 0.0, f32::INFINITY).is_none());
        let r = RayTriangleTest::new(Vec3::new(0.25, 0.25, 1.0), -Vec3::Z);
        assert!(r.intersect(&tri, 0.0, 0.5).is_none());
        assert!(r.intersect(&tri, 1.5, 9.0).is_none());
    }

    #[test]
    fn degenerate_triangle_never_hits() {
        let tri = Triangle::new(Vec3::ZERO, Vec3::X, 2.0 * Vec3::X);
        let r = RayTriangleTest::new(Vec3::new(0.5, 0.0, 1.0), -Vec3::Z);
        assert!(r.intersect(&tri, 0.0, f32::INFINITY).is_none());
    }

    /// Random slivers and grazing rays, the cases the crossing rule is for.
    fn adversarial(rng: &mut crate::Pcg32) -> (Triangle, Vec3, Vec3) {
        let mut unit = || rng.next_f32() * 2.0 - 1.0;
        let v0 = Vec3::new(unit(), unit(), unit()) * 4.0;
        let v1 = v0 + Vec3::new(unit(), unit(), unit()) * 3.0;
        // Half of them slivers: v2 near the line through v0 and v1.
        let thin = [1.0, 1e-3, 1e-5, 1e-7][(unit().abs() * 3.99) as usize];
        let v2 = v0 + (v1 - v0) * unit() * 2.0 + Vec3::new(unit(), unit(), unit()) * thin;
        let tri = Triangle::new(v0, v1, v2);
        // Aim at a point of the triangle, from a direction close to its
        // plane half of the time.
        let (s, r) = (unit().abs(), unit().abs());
        let target = tri.point_at(s * (1.0 - r), r * s);
        let normal = tri.cross().normalize_or_zero();
        let along = (v1 - v0).normalize_or_zero();
        let tilt = unit() * [1.0, 1e-3, 1e-5, 1e-7][(unit().abs() * 3.99) as usize];
        let dir = (along * unit() + normal * tilt + Vec3::new(unit(), unit(), unit()) * 0.01)
            .normalize_or_zero();
        let origin = target - dir * (1.0 + 8.0 * unit().abs());
        (tri, origin, dir)
    }

    #[test]
    fn conditioned_hits_keep_the_crossing_rule() {
        // The bound the traversals rely on: a hit `conditioned` vouches for
        // lies where the ray crosses the triangle's box (widened), so it is
        // never dropped; the rule drops only hits it does not vouch for.
        let mut rng = crate::Pcg32::new(7, 11);
        let (mut hits, mut dropped) = (0, 0);
        for _ in 0..400_000 {
            let (tri, origin, dir) = adversarial(&mut rng);
            if dir == Vec3::ZERO {
                continue;
            }
            let test = RayTriangleTest::new(origin, dir);
            let Some((hit, sheared, det)) = test.watertight(&tri, 0.0, f32::INFINITY) else {
                continue;
            };
            hits += 1;
            let kept = test.within_crossing(&tri, hit.t);
            assert!(
                kept || !conditioned(sheared, det),
                "a conditioned hit outside the crossing: {tri:?} {origin:?} {dir:?} t {}",
                hit.t
            );
            match test.intersect(&tri, 0.0, f32::INFINITY) {
                Some(h) => assert_eq!(h, hit),
                None => dropped += 1,
            }
        }
        assert!(hits > 100_000, "{hits} hits");
        // The rule is exercised, and rare.
        assert!(
            dropped > 0 && dropped * 1000 < hits,
            "{dropped} of {hits} hits dropped"
        );
    }

    #[test]
    fn well_posed_hits_are_never_dropped() {
        // Rays through the interior of well-shaped triangles from at least
        // a degree off their plane: every hit the paper's test finds stays.
        let mut rng = crate::Pcg32::new(3, 5);
        for _ in 0..100_000 {
            let tri = Triangle::new(
                Vec3::new(rng.next_f32(), rng.next_f32(), 0.0) * 10.0,
                Vec3::new(10.0 + rng.next_f32(), 0.0, rng.next_f32()),
                Vec3::new(0.0, 10.0 + rng.next_f32(), rng.next_f32()),
            );
            let target = tri.point_at(0.2 + 0.3 * rng.next_f32(), 0.2 + 0.3 * rng.next_f32());
            let normal = tri.normal().unwrap();
            let tangent = (tri.v1 - tri.v0).normalize();
            let angle = (1.0 + 89.0 * rng.next_f32()).to_radians();
            let dir = tangent * angle.cos() + normal * angle.sin();
            let origin = target - dir * (0.5 + 20.0 * rng.next_f32());
            let test = RayTriangleTest::new(origin, dir);
            let raw = test
                .watertight(&tri, 0.0, f32::INFINITY)
                .map(|(hit, _, _)| hit);
            assert!(raw.is_some());
            assert_eq!(test.intersect(&tri, 0.0, f32::INFINITY), raw);
        }
    }

    #[test]
    fn shared_edge_is_watertight() {
        // Two triangles sharing the diagonal of the unit square; rays through
        // points on the diagonal must hit at least one of them.
        let t1 = Triangle::new(Vec3::ZERO, Vec3::X, Vec3::new(1.0, 1.0, 0.0));
        let t2 = Triangle::new(Vec3::ZERO, Vec3::new(1.0, 1.0, 0.0), Vec3::Y);
        for i in 1..1000 {
            let s = i as f32 / 1000.0;
            let o = Vec3::new(s, s, 1.0) + Vec3::new(0.1, -0.07, 0.0);
            let d = Vec3::new(s, s, 0.0) - o;
            let test = RayTriangleTest::new(o, d);
            let hit1 = test.intersect(&t1, 0.0, f32::INFINITY).is_some();
            let hit2 = test.intersect(&t2, 0.0, f32::INFINITY).is_some();
            assert!(hit1 || hit2, "crack at s = {s}");
        }
    }
}
