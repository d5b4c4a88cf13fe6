//! Triangles and the watertight ray/triangle test of Woop, Benthin and Wald,
//! "Watertight Ray/Triangle Intersection", JCGT 2(1), 2013.
//!
//! The test shears the triangle into a ray-aligned frame in which the ray is
//! the +z axis and decides the hit from the signs of three 2D edge functions.
//! Edges shared by two triangles are tested with identical arithmetic from
//! both sides, so a ray through an edge or a vertex hits at least one of the
//! triangles: no cracks. Edge functions that come out exactly zero are
//! recomputed in `f64`, as the paper prescribes. Hits are two-sided.

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
        Some(TriangleHit {
            t,
            u: v * inv_det,
            v: w * inv_det,
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
