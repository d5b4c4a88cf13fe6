//! [`SlabRay`]: the per-ray constants of the exact culling rules that the
//! spatial-subdivision structures (`kdtree`, `grid`) share.
//!
//! Both structures cut space into cells and may reference a triangle from
//! several cells, so the BVH's argument (a node's box holds its whole
//! triangles) does not carry over to their cells. Two facts about the
//! watertight test of `caustic-geom` decide what they may skip:
//!
//! - **Depth.** The test returns `t` as a convex combination of the
//!   vertices' distances along the ray's depth axis (its largest direction
//!   component), up to a few ulps; for a sliver or a grazing ray that `t`
//!   can lie far from the exact crossing (measured on the test soups: up
//!   to 17 % of `t`). So nothing may be skipped on the strength of the
//!   ray's interval inside a cell; only the depth slab of a box holding the
//!   *whole* triangles bounds what they report ([`SlabRay::reach`], the
//!   BVH's rule with its margin `SLACK`).
//! - **Side.** The test decides a hit from edge functions rounded relative
//!   to the vertices' distance from the origin, so it may report a
//!   triangle that the ray passes a few ulps beside. A structure must
//!   therefore treat the ray as `delta` thick ([`SlabRay::delta`]:
//!   [`TOLERANCE`] times the largest coordinate of the scene and of the
//!   origin, 32 times that rounding) when deciding which cells it crosses.

use crate::bvh::traverse::SLACK;
use caustic_geom::{Aabb, Vec3};

/// Relative thickness of a ray (see the module docs): 2^-18, about 32 ulps
/// of the largest coordinate in play.
pub const TOLERANCE: f32 = 1.0 / 262_144.0;

/// Per-ray constants for cell walks and depth-slab culling.
#[derive(Clone, Copy, Debug)]
pub struct SlabRay {
    pub origin: [f32; 3],
    pub dir: [f32; 3],
    pub inv_dir: [f32; 3],
    /// Per axis: the direction is zero or so small its reciprocal is not
    /// finite; the ray has no crossing on that axis, only a side.
    pub parallel: [bool; 3],
    /// Per axis: the ray runs towards smaller coordinates.
    pub negative: [bool; 3],
    /// Half the ray's thickness (see the module docs).
    pub delta: f32,
    /// The axis along which the triangle test measures `t` (the
    /// direction's largest component, first axis on ties, as
    /// `RayTriangleTest` chooses it).
    pub depth: usize,
}

impl SlabRay {
    /// Precomputes the constants for a structure whose largest absolute
    /// coordinate is `scale`; `dir` must be finite and non-zero.
    pub fn new(origin: Vec3, dir: Vec3, scale: f32) -> Self {
        let inv_dir = [0, 1, 2].map(|k| 1.0 / dir[k]);
        Self {
            origin: origin.to_array(),
            dir: dir.to_array(),
            inv_dir,
            parallel: inv_dir.map(|inv| !inv.is_finite()),
            negative: [0, 1, 2].map(|k| dir[k] < 0.0),
            delta: TOLERANCE * (scale + origin.abs().max_element()),
            depth: depth_axis(dir),
        }
    }

    /// The line's parameter interval inside `b` grown by `grow`.
    pub fn clip_to(&self, b: &Aabb, grow: f32) -> Option<(f32, f32)> {
        let (mut lo, mut hi) = (f32::NEG_INFINITY, f32::INFINITY);
        for k in 0..3 {
            let (min, max) = (b.min[k] - grow, b.max[k] + grow);
            if self.parallel[k] {
                if !(min <= self.origin[k] && self.origin[k] <= max) {
                    return None;
                }
                continue;
            }
            let a = (min - self.origin[k]) * self.inv_dir[k];
            let b = (max - self.origin[k]) * self.inv_dir[k];
            lo = lo.max(a.min(b));
            hi = hi.min(a.max(b));
        }
        (lo <= hi).then_some((lo, hi))
    }

    /// Lower bound of the `t` that any triangle inside `bounds` can report,
    /// when the box's depth slab (widened by the rounding margin) meets
    /// `[t_min, cutoff]`; `None` otherwise, also for the empty box.
    #[inline(always)]
    pub fn reach(&self, bounds: &Aabb, t_min: f32, cutoff: f32) -> Option<f32> {
        let k = self.depth;
        let (entry, exit) = if self.negative[k] {
            (bounds.max[k], bounds.min[k])
        } else {
            (bounds.min[k], bounds.max[k])
        };
        let near = self.depth_t(entry);
        let far = self.depth_t(exit);
        let margin = near.abs().max(far.abs()) * SLACK;
        let (lo, hi) = (near - margin, far + margin);
        // NaN (the empty box) fails both comparisons.
        (lo <= cutoff && hi >= t_min).then_some(lo)
    }

    /// The `t` at which the ray reaches coordinate `x` on its depth axis.
    #[inline(always)]
    pub fn depth_t(&self, x: f32) -> f32 {
        (x - self.origin[self.depth]) * self.inv_dir[self.depth]
    }

    /// `t` widened by the rounding margin towards smaller values.
    #[inline(always)]
    pub fn below(t: f32) -> f32 {
        t - t.abs() * SLACK
    }

    /// `t` widened by the rounding margin towards larger values.
    #[inline(always)]
    pub fn above(t: f32) -> f32 {
        t + t.abs() * SLACK
    }
}

/// The axis of the direction's largest magnitude, first axis on ties.
fn depth_axis(dir: Vec3) -> usize {
    let a = dir.abs();
    if a.x >= a.y && a.x >= a.z {
        0
    } else if a.y >= a.z {
        1
    } else {
        2
    }
}

/// The smallest `f32` above `x` (`f32::next_up` is newer than the
/// workspace's minimum Rust): the limit that lets a triangle test accept a
/// `t` equal to the closest hit so far, for the lowest-id tie rule.
#[inline(always)]
pub(crate) fn next_up(x: f32) -> f32 {
    if x.is_nan() || x == f32::INFINITY {
        x
    } else if x == 0.0 {
        f32::from_bits(1)
    } else if x > 0.0 {
        f32::from_bits(x.to_bits() + 1)
    } else {
        f32::from_bits(x.to_bits() - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit() -> Aabb {
        Aabb::new(Vec3::ZERO, Vec3::ONE)
    }

    /// The device twin (`slab_ray.cuh`) thickens rays by the same
    /// tolerance and widens slabs by the same margin.
    #[test]
    fn the_device_twin_has_the_cpus_constants() {
        let device = include_str!("slab_ray.cuh");
        assert!(device.contains("__fmul_rn(1.0f / 262144.0f,"));
        assert_eq!(TOLERANCE, 1.0 / 262_144.0);
        assert!(device.contains("BVH_SLACK"));
    }

    #[test]
    fn reach_is_the_depth_slab_entry() {
        // Depth axis z; the box's z slab starts at t = 1 even though the
        // ray enters the box through x = 0 at t = 2.
        let ray = SlabRay::new(Vec3::new(-0.5, 0.5, -1.0), Vec3::new(0.25, 0.0, 1.0), 1.0);
        let bound = ray.reach(&unit(), 0.0, f32::INFINITY).unwrap();
        assert!((bound - 1.0).abs() < 1e-5 && bound <= 1.0);
        assert_eq!(ray.reach(&unit(), 0.0, 0.9), None);
        assert_eq!(ray.reach(&unit(), 2.1, f32::INFINITY), None);
        assert_eq!(ray.reach(&Aabb::EMPTY, 0.0, f32::INFINITY), None);
        let back = SlabRay::new(Vec3::new(0.5, 0.5, 3.0), -Vec3::Z, 1.0);
        assert!((back.reach(&unit(), 0.0, f32::INFINITY).unwrap() - 2.0).abs() < 1e-5);
    }

    #[test]
    fn clipping_to_flat_boxes_keeps_a_short_interval() {
        let flat = Aabb::new(Vec3::ZERO, Vec3::new(1.0, 1.0, 0.0));
        let ray = SlabRay::new(Vec3::new(0.5, 0.5, -1.0), Vec3::Z, 1.0);
        let (lo, hi) = ray.clip_to(&flat, ray.delta).unwrap();
        assert!(lo < 1.0 && hi > 1.0 && hi - lo < 1e-4);
        let beside = SlabRay::new(Vec3::new(2.0, 0.5, -1.0), Vec3::Z, 1.0);
        assert_eq!(beside.clip_to(&flat, beside.delta), None);
        // Parallel to x, inside the slab of the box: no limit from x.
        let along = SlabRay::new(Vec3::new(-5.0, 0.5, 0.0), Vec3::new(1.0, 0.0, -0.0), 1.0);
        assert!(along.parallel[1] && along.parallel[2]);
        let (lo, hi) = along.clip_to(&flat, 0.0).unwrap();
        assert!((lo - 5.0).abs() < 1e-6 && (hi - 6.0).abs() < 1e-6);
    }
}
