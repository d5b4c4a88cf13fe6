//! Exact triangle–box overlap by the separating axis theorem
//! (Akenine-Möller, "Fast 3D Triangle-Box Overlap Testing", JGT 6(1),
//! 2001): a triangle and a box are disjoint exactly when one of 13 axes
//! separates them — the box's three face normals, the triangle's normal,
//! and the nine cross products of a box axis with a triangle edge.
//!
//! The grid builder may use it to keep a triangle out of the cells its
//! box overlaps but the triangle itself does not (Ivson 2009 tested only
//! boxes and found exact tests slower on its GPU). Callers pass boxes
//! already grown by the grid's tolerance, so rounding near a face cannot
//! drop a cell the triangle touches: an axis separates only when the gap
//! exceeds a few ulps of the projected extents.

use caustic_geom::{Aabb, Triangle, Vec3};

/// Relative slack on a separating gap, so that touching counts as overlap.
pub(super) const SLACK: f32 = 1e-6;

/// Whether `tri` overlaps the closed box `b` (finite inputs).
pub fn triangle_overlaps_box(tri: &Triangle, b: &Aabb) -> bool {
    let center = b.center();
    let half = b.extent() * 0.5;
    let v = [tri.v0 - center, tri.v1 - center, tri.v2 - center];
    // Box face normals: the boxes' own overlap.
    let tb = tri.bounds();
    if tb.min.cmpgt(b.max).any() || tb.max.cmplt(b.min).any() {
        return false;
    }
    let edges = [v[1] - v[0], v[2] - v[1], v[0] - v[2]];
    // Nine edge × box-axis directions.
    for e in edges {
        for axis in [Vec3::X, Vec3::Y, Vec3::Z] {
            if separates(axis.cross(e), &v, half) {
                return false;
            }
        }
    }
    // The triangle's plane.
    !separates(edges[0].cross(edges[1]), &v, half)
}

/// Whether the direction `n` separates the triangle `v` (relative to the
/// box centre) from the box of half extents `half`. A zero direction
/// (parallel edge and axis, or a degenerate triangle's normal) separates
/// nothing.
fn separates(n: Vec3, v: &[Vec3; 3], half: Vec3) -> bool {
    let p = [n.dot(v[0]), n.dot(v[1]), n.dot(v[2])];
    let lo = p[0].min(p[1]).min(p[2]);
    let hi = p[0].max(p[1]).max(p[2]);
    let radius = half.dot(n.abs());
    let slack = SLACK * (radius + lo.abs().max(hi.abs()));
    lo > radius + slack || hi < -radius - slack
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(x: f32, y: f32, z: f32) -> Aabb {
        Aabb::new(Vec3::new(x, y, z), Vec3::new(x + 1.0, y + 1.0, z + 1.0))
    }

    #[test]
    fn a_diagonal_triangle_misses_the_far_corner_of_its_box() {
        // x + y <= 3 in z = 0.5 over [0, 3]^2: cell (2, 2) is in its box
        // but beyond the hypotenuse; cells (0, 0), (1, 1) and (2, 0) hold it.
        let tri = Triangle::new(
            Vec3::new(0.0, 0.0, 0.5),
            Vec3::new(3.0, 0.0, 0.5),
            Vec3::new(0.0, 3.0, 0.5),
        );
        assert!(!triangle_overlaps_box(&tri, &cell(2.0, 2.0, 0.0)));
        assert!(triangle_overlaps_box(&tri, &cell(0.0, 0.0, 0.0)));
        assert!(triangle_overlaps_box(&tri, &cell(1.0, 1.0, 0.0)));
        assert!(triangle_overlaps_box(&tri, &cell(2.0, 0.0, 0.0)));
        // Off its plane.
        assert!(!triangle_overlaps_box(&tri, &cell(0.0, 0.0, 0.6)));
    }

    #[test]
    fn touching_counts_and_degenerate_triangles_use_their_box() {
        // The hypotenuse x + y = 2 touches cell (1, 1)'s corner.
        let tri = Triangle::new(
            Vec3::ZERO,
            Vec3::new(2.0, 0.0, 0.0),
            Vec3::new(0.0, 2.0, 0.0),
        );
        assert!(triangle_overlaps_box(&tri, &cell(1.0, 1.0, 0.0)));
        let point = Triangle::new(Vec3::ONE, Vec3::ONE, Vec3::ONE);
        assert!(triangle_overlaps_box(&point, &cell(0.0, 0.0, 0.0)));
        assert!(!triangle_overlaps_box(&point, &cell(1.5, 0.0, 0.0)));
    }

    #[test]
    fn agrees_with_clipping_on_random_cases() {
        let mut rng = caustic_geom::Pcg32::new(9, 9);
        let mut coord = || rng.next_f32() * 4.0 - 2.0;
        for _ in 0..5000 {
            let mut point = || Vec3::new(coord(), coord(), coord());
            let tri = Triangle::new(point(), point(), point());
            let (a, b) = (point(), point());
            let cell = Aabb::new(a.min(b), a.max(b));
            let clipped = crate::kdtree::clipped_bounds(&tri, &cell).is_some();
            assert_eq!(
                triangle_overlaps_box(&tri, &cell),
                clipped,
                "{tri:?} {cell:?}"
            );
        }
    }
}
