//! Cutting a triangle reference at an axis-aligned plane: what a spatial
//! split does to every reference that straddles its plane (Stich, Friedrich
//! and Dietrich, "Spatial Splits in Bounding Volume Hierarchies", HPG 2009,
//! §4.2: the triangle's edges are intersected with the plane, and each
//! side's box is that of the vertices and crossing points on it, clipped to
//! the reference's box).
//!
//! Conservative by construction: each crossing point is widened by a bound
//! on its `f32` rounding error, so each side's box holds every point of
//! `triangle ∩ reference box` on that (closed) side. The traversal's
//! exactness rests on this: wherever a ray can hit a triangle, the hit point
//! lies in the box of some leaf that holds the triangle. (Computing the
//! crossings in `f64` and rounding outwards, as the kd-tree's clipper does,
//! made this function 80 % of a build.)

use crate::bvh::build::build_box::BuildBox;
use caustic_geom::{Triangle, Vec3A};
use glam::BVec3A;

/// A crossing point's error bound, relative to `|a| + |b|` of its edge:
/// `s = (plane - a) / (b - a)` carries at most 3 roundings of `u = 2^-24`
/// and `a + (b - a) s` three more, so the computed point is within
/// `6u (|a| + |b|)` of the true one (to first order); twice that here.
const CROSSING_ERROR: f32 = 12.0 / (1u32 << 24) as f32;

/// The boxes of a reference's two parts when its triangle is cut by the
/// plane `p[axis] = plane`: `(below, above)`, each the box of the
/// triangle's part on that closed side, intersected with `bounds` (the
/// reference's current box) and with the side's half-space. A part that
/// misses `bounds` comes back empty ([`BuildBox::is_empty`]).
#[inline]
pub(super) fn chop(
    triangle: &Triangle,
    bounds: &BuildBox,
    axis: usize,
    plane: f32,
) -> (BuildBox, BuildBox) {
    match axis {
        0 => chop_on::<0>(triangle, bounds, plane),
        1 => chop_on::<1>(triangle, bounds, plane),
        _ => chop_on::<2>(triangle, bounds, plane),
    }
}

/// [`chop`] on axis `AXIS`, a constant: the coordinates along it are fixed
/// lanes, and the sides are clamped to the plane by a lane select. (With
/// the axis a run-time index, writing one lane of a box on the stack and
/// reading the whole box back stalled store forwarding: about a fifth of
/// spatial binning's time, `perf annotate`.)
#[inline(always)]
pub(super) fn chop_on<const AXIS: usize>(
    triangle: &Triangle,
    bounds: &BuildBox,
    plane: f32,
) -> (BuildBox, BuildBox) {
    let corners = [triangle.v0, triangle.v1, triangle.v2].map(Vec3A::from);
    let (mut below, mut above) = (BuildBox::EMPTY, BuildBox::EMPTY);
    for (i, &a) in corners.iter().enumerate() {
        let b = corners[(i + 1) % 3];
        let (da, db) = (a[AXIS], b[AXIS]);
        if da <= plane {
            below.grow_a(a);
        }
        if da >= plane {
            above.grow_a(a);
        }
        if (da < plane && plane < db) || (db < plane && plane < da) {
            let s = (plane - da) / (db - da);
            let p = a + (b - a) * s;
            let margin = (a.abs() + b.abs()) * CROSSING_ERROR;
            for part in [&mut below, &mut above] {
                part.grow_a(p - margin);
                part.grow_a(p + margin);
            }
        }
    }
    let on_axis = BVec3A::from(std::array::from_fn(|k| k == AXIS));
    let plane = Vec3A::splat(plane);
    let mut below = below.intersection(*bounds);
    below.max = Vec3A::select(on_axis, below.max.min(plane), below.max);
    let mut above = above.intersection(*bounds);
    above.min = Vec3A::select(on_axis, above.min.max(plane), above.min);
    (below, above)
}

#[cfg(test)]
mod tests {
    use super::*;
    use caustic_geom::{Aabb, DVec3, Pcg32, Vec3};

    fn whole(triangle: &Triangle) -> BuildBox {
        BuildBox::from_aabb(triangle.bounds())
    }

    #[test]
    fn a_diagonal_triangle_is_cut_into_tight_parts() {
        let tri = Triangle::new(
            Vec3::ZERO,
            Vec3::new(4.0, 0.0, 0.0),
            Vec3::new(0.0, 4.0, 0.0),
        );
        let (below, above) = chop(&tri, &whole(&tri), 0, 1.0);
        assert_eq!(
            below.to_aabb(),
            Aabb::new(Vec3::ZERO, Vec3::new(1.0, 4.0, 0.0))
        );
        // Right of x = 1 the hypotenuse has come down to y = 3 (the crossing
        // widened by its error bound, a few millionths).
        assert_eq!(above.min.to_array(), [1.0, 0.0, 0.0]);
        let [x, y, z] = above.max.to_array();
        assert_eq!((x, z), (4.0, 0.0));
        assert!((3.0..3.0 + 1e-5).contains(&y), "{y}");
    }

    #[test]
    fn a_part_outside_the_reference_box_is_empty() {
        let tri = Triangle::new(
            Vec3::ZERO,
            Vec3::new(4.0, 0.0, 0.0),
            Vec3::new(0.0, 4.0, 0.0),
        );
        // A reference already clipped to x >= 2: nothing of it lies below x = 1.
        let reference = BuildBox::from_aabb(Aabb::new(
            Vec3::new(2.0, 0.0, 0.0),
            Vec3::new(4.0, 2.0, 0.0),
        ));
        let (below, above) = chop(&tri, &reference, 0, 1.0);
        assert!(below.is_empty());
        assert_eq!(above, reference);
    }

    /// Points of the triangle inside the reference box on either side of
    /// the plane lie in that side's box, for random triangles, planes and
    /// reference boxes (the conservativeness the traversal relies on). The
    /// points are made in `f64`, so they lie on the triangle to about 1e-16.
    #[test]
    fn parts_hold_every_point_of_the_triangle_on_their_side() {
        let mut rng = Pcg32::new(11, 3);
        let coord = |rng: &mut Pcg32| rng.next_f32() * 20.0 - 10.0;
        let point = |rng: &mut Pcg32| Vec3::new(coord(rng), coord(rng), coord(rng));
        let holds = |bx: &BuildBox, p: DVec3| {
            (0..3).all(|k| f64::from(bx.min[k]) <= p[k] && p[k] <= f64::from(bx.max[k]))
        };
        for _ in 0..2000 {
            let tri = Triangle::new(point(&mut rng), point(&mut rng), point(&mut rng));
            let b = whole(&tri);
            // A reference box: a random part of the triangle's box.
            let (low, high) = (rng.next_f32() * 0.5, rng.next_f32() * 0.5);
            let reference = BuildBox {
                min: b.min + (b.max - b.min) * low,
                max: b.max - (b.max - b.min) * high,
            };
            let axis = (rng.next_u32() % 3) as usize;
            let plane = b.min[axis] + (b.max[axis] - b.min[axis]) * rng.next_f32();
            let (below, above) = chop(&tri, &reference, axis, plane);
            for _ in 0..64 {
                let (mut u, mut w) = (f64::from(rng.next_f32()), f64::from(rng.next_f32()));
                if u + w > 1.0 {
                    (u, w) = (1.0 - u, 1.0 - w);
                }
                let [v0, v1, v2] = [tri.v0, tri.v1, tri.v2].map(Vec3::as_dvec3);
                let p = v0 + (v1 - v0) * u + (v2 - v0) * w;
                if !holds(&reference, p) {
                    continue;
                }
                let plane = f64::from(plane);
                if p[axis] <= plane {
                    assert!(holds(&below, p), "{p:?} below {plane} on {axis}: {below:?}");
                }
                if p[axis] >= plane {
                    assert!(holds(&above, p), "{p:?} above {plane} on {axis}: {above:?}");
                }
            }
        }
    }
}
