//! Triangle clipping for the kd-tree builder: the box of the part of a
//! triangle that lies inside an axis-aligned cell, by Sutherland–Hodgman
//! polygon clipping (Sutherland and Hodgman, "Reentrant Polygon Clipping",
//! CACM 17(1), 1974) of the triangle against the cell's six planes.
//!
//! Zhou et al. (2008, §3.1) clip every triangle that straddles a
//! large node's split plane, so each child sees the triangle's *tight* box
//! inside it; Zeidan 2011 (§6.1) clipped only the triangle's box to the child
//! (box ∩ child cell), which keeps boxes that the triangle never reaches
//! (a diagonal triangle's box corner) and blamed its slower tree on that.
//!
//! Invariants of [`clipped_bounds`]:
//! - the result lies inside both the cell and the triangle's own box
//!   (it is intersected with both);
//! - it is conservative: the clipping runs in `f64` and the `f32` bounds
//!   are rounded outwards, so it contains every point of triangle ∩ cell up
//!   to the `f64` rounding (about 1e-16 relative), far below the traversal's
//!   tolerance;
//! - the cell is closed: a triangle that only touches it (a vertex or edge
//!   on a face) keeps that touching point or segment. `None` means the
//!   triangle misses the closed cell.

use caustic_geom::{Aabb, DVec3, Triangle, Vec3};

/// Vertices of a triangle clipped by six planes: at most 3 + 6.
const MAX_VERTICES: usize = 9;

/// A convex polygon on the stack.
#[derive(Clone, Copy)]
struct Polygon {
    vertices: [DVec3; MAX_VERTICES],
    len: usize,
}

impl Polygon {
    fn push(&mut self, p: DVec3) {
        self.vertices[self.len] = p;
        self.len += 1;
    }

    fn vertices(&self) -> &[DVec3] {
        &self.vertices[..self.len]
    }

    /// Keeps the part with `sign * (p[axis] - plane) >= 0` (one
    /// Sutherland–Hodgman pass).
    fn clip(&self, axis: usize, plane: f64, sign: f64) -> Polygon {
        let mut out = Polygon {
            vertices: [DVec3::ZERO; MAX_VERTICES],
            len: 0,
        };
        let inside = |p: DVec3| sign * (p[axis] - plane) >= 0.0;
        let n = self.len;
        for i in 0..n {
            let current = self.vertices[i];
            let previous = self.vertices[(i + n - 1) % n];
            match (inside(previous), inside(current)) {
                (true, true) => out.push(current),
                (true, false) => out.push(crossing(previous, current, axis, plane)),
                (false, true) => {
                    out.push(crossing(previous, current, axis, plane));
                    out.push(current);
                }
                (false, false) => {}
            }
        }
        out
    }
}

/// Where segment `a`–`b` crosses `p[axis] = plane` (the endpoints lie on
/// opposite sides), with that coordinate set exactly.
fn crossing(a: DVec3, b: DVec3, axis: usize, plane: f64) -> DVec3 {
    let s = (plane - a[axis]) / (b[axis] - a[axis]);
    let mut p = a + (b - a) * s;
    p[axis] = plane;
    p
}

/// Box of `triangle ∩ cell` (closed cell), or `None` when they do not
/// meet. Both inputs must be finite.
pub fn clipped_bounds(triangle: &Triangle, cell: &Aabb) -> Option<Aabb> {
    let mut polygon = Polygon {
        vertices: [DVec3::ZERO; MAX_VERTICES],
        len: 0,
    };
    for v in [triangle.v0, triangle.v1, triangle.v2] {
        polygon.push(v.as_dvec3());
    }
    // Only planes that cut the triangle's box can change the polygon.
    let tb = triangle.bounds();
    for axis in 0..3 {
        if tb.min[axis] < cell.min[axis] {
            polygon = polygon.clip(axis, cell.min[axis] as f64, 1.0);
        }
        if tb.max[axis] > cell.max[axis] {
            polygon = polygon.clip(axis, cell.max[axis] as f64, -1.0);
        }
        if polygon.len == 0 {
            return None;
        }
    }
    let (mut lo, mut hi) = (DVec3::INFINITY, DVec3::NEG_INFINITY);
    for &p in polygon.vertices() {
        lo = lo.min(p);
        hi = hi.max(p);
    }
    let outward = Aabb::new(
        Vec3::from_array(lo.to_array().map(round_down)),
        Vec3::from_array(hi.to_array().map(round_up)),
    );
    Some(outward.intersection(*cell).intersection(tb))
}

/// The largest `f32` not above `x`.
fn round_down(x: f64) -> f32 {
    let f = x as f32;
    if f as f64 > x { step_down(f) } else { f }
}

/// The smallest `f32` not below `x`.
fn round_up(x: f64) -> f32 {
    -round_down(-x)
}

/// The next `f32` towards minus infinity (finite, non-NaN input).
fn step_down(f: f32) -> f32 {
    if f == 0.0 {
        -f32::from_bits(1)
    } else if f > 0.0 {
        f32::from_bits(f.to_bits() - 1)
    } else {
        f32::from_bits(f.to_bits() + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use caustic_geom::Pcg32;

    fn unit_cell() -> Aabb {
        Aabb::new(Vec3::ZERO, Vec3::ONE)
    }

    #[test]
    fn a_triangle_inside_keeps_its_box() {
        let tri = Triangle::new(
            Vec3::new(0.1, 0.2, 0.3),
            Vec3::new(0.9, 0.2, 0.5),
            Vec3::new(0.4, 0.8, 0.6),
        );
        assert_eq!(clipped_bounds(&tri, &unit_cell()), Some(tri.bounds()));
    }

    #[test]
    fn a_diagonal_triangle_gets_a_box_tighter_than_box_clipping() {
        // The triangle x + y <= 2 in z = 0.5, clipped to x >= 1.5: its
        // part is the corner x in [1.5, 2], y in [0, 0.5], whereas clipping
        // the box would keep y in [0, 2].
        let tri = Triangle::new(
            Vec3::new(0.0, 0.0, 0.5),
            Vec3::new(2.0, 0.0, 0.5),
            Vec3::new(0.0, 2.0, 0.5),
        );
        let cell = Aabb::new(Vec3::new(1.5, -1.0, 0.0), Vec3::new(3.0, 3.0, 1.0));
        let b = clipped_bounds(&tri, &cell).unwrap();
        assert_eq!((b.min.x, b.max.x), (1.5, 2.0));
        assert!(b.min.y == 0.0 && (b.max.y - 0.5).abs() < 1e-6 && b.max.y >= 0.5);
        assert_eq!((b.min.z, b.max.z), (0.5, 0.5));
    }

    #[test]
    fn misses_and_touches() {
        let tri = Triangle::new(Vec3::ZERO, Vec3::X, Vec3::Y);
        // x + y <= 1 misses the cell [0.6, 1]^2 (its corner is at 1.2).
        let corner = Aabb::new(Vec3::new(0.6, 0.6, -1.0), Vec3::new(1.0, 1.0, 1.0));
        assert_eq!(clipped_bounds(&tri, &corner), None);
        // A cell whose face holds the vertex (1, 0, 0) keeps that point.
        let beside = Aabb::new(Vec3::new(1.0, -1.0, -1.0), Vec3::new(2.0, 1.0, 1.0));
        let b = clipped_bounds(&tri, &beside).unwrap();
        assert_eq!((b.min, b.max), (Vec3::X, Vec3::X));
    }

    #[test]
    fn random_clips_lie_in_both_boxes_and_hold_points_of_the_triangle() {
        let mut rng = Pcg32::new(7, 1);
        let mut coord = || rng.next_f32() * 4.0 - 2.0;
        for _ in 0..2000 {
            let mut point = || Vec3::new(coord(), coord(), coord());
            let tri = Triangle::new(point(), point(), point());
            let (a, b) = (point(), point());
            let cell = Aabb::new(a.min(b), a.max(b));
            let samples: Vec<Vec3> = (0..=20)
                .flat_map(|i| (0..=20 - i).map(move |j| (i as f32 / 20.0, j as f32 / 20.0)))
                .map(|(u, v)| tri.point_at(u, v))
                .filter(|p| cell.contains_point(*p))
                .collect();
            let Some(clipped) = clipped_bounds(&tri, &cell) else {
                assert!(samples.is_empty(), "{tri:?} misses {cell:?}");
                continue;
            };
            assert!(cell.contains(&clipped) && tri.bounds().contains(&clipped));
            for p in samples {
                // Sample points are rounded in f32; allow for that.
                let slack = Vec3::splat(1e-5);
                let grown = Aabb::new(clipped.min - slack, clipped.max + slack);
                assert!(grown.contains_point(p), "{p:?} outside {clipped:?}");
            }
        }
    }

    #[test]
    fn outward_rounding() {
        let x = 0.1f64;
        assert!((round_down(x) as f64) <= x && (round_up(x) as f64) >= x);
        assert!(round_up(x) > round_down(x));
        assert_eq!(round_down(1.0), 1.0);
        assert_eq!(round_up(-0.5), -0.5);
        assert!(round_down(-1e-50) < 0.0 && round_up(1e-50) > 0.0);
    }
}
