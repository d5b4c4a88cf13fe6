use bytemuck::{Pod, Zeroable};
use glam::Vec3;

/// Axis-aligned bounding box. The empty box has `min = +inf`, `max = -inf`,
/// so that growing it by any point or box gives that point or box.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct Aabb {
    pub min: Vec3,
    pub max: Vec3,
}

impl Default for Aabb {
    fn default() -> Self {
        Self::EMPTY
    }
}

impl Aabb {
    /// The box that contains nothing.
    pub const EMPTY: Aabb = Aabb {
        min: Vec3::splat(f32::INFINITY),
        max: Vec3::splat(f32::NEG_INFINITY),
    };

    pub fn new(min: Vec3, max: Vec3) -> Self {
        Self { min, max }
    }

    pub fn from_point(p: Vec3) -> Self {
        Self { min: p, max: p }
    }

    pub fn from_points(points: impl IntoIterator<Item = Vec3>) -> Self {
        points.into_iter().fold(Self::EMPTY, |b, p| b.grown(p))
    }

    /// True when the box contains no point (`min > max` on some axis).
    pub fn is_empty(&self) -> bool {
        self.min.cmpgt(self.max).any()
    }

    pub fn grow(&mut self, p: Vec3) {
        self.min = self.min.min(p);
        self.max = self.max.max(p);
    }

    #[must_use]
    pub fn grown(self, p: Vec3) -> Self {
        Self {
            min: self.min.min(p),
            max: self.max.max(p),
        }
    }

    #[must_use]
    pub fn union(self, other: Aabb) -> Self {
        Self {
            min: self.min.min(other.min),
            max: self.max.max(other.max),
        }
    }

    #[must_use]
    pub fn intersection(self, other: Aabb) -> Self {
        Self {
            min: self.min.max(other.min),
            max: self.max.min(other.max),
        }
    }

    pub fn extent(&self) -> Vec3 {
        self.max - self.min
    }

    pub fn center(&self) -> Vec3 {
        0.5 * (self.min + self.max)
    }

    /// Surface area; 0 for an empty or flat-to-a-line box.
    pub fn surface_area(&self) -> f32 {
        if self.is_empty() {
            return 0.0;
        }
        let e = self.extent();
        2.0 * (e.x * e.y + e.y * e.z + e.z * e.x)
    }

    /// Half the surface area: the SAH only needs ratios, and this saves a multiply.
    pub fn half_area(&self) -> f32 {
        if self.is_empty() {
            return 0.0;
        }
        let e = self.extent();
        e.x * e.y + e.y * e.z + e.z * e.x
    }

    /// Index (0, 1, 2) of the longest side.
    pub fn largest_axis(&self) -> usize {
        let e = self.extent();
        if e.x >= e.y && e.x >= e.z {
            0
        } else if e.y >= e.z {
            1
        } else {
            2
        }
    }

    pub fn diagonal(&self) -> f32 {
        if self.is_empty() {
            0.0
        } else {
            self.extent().length()
        }
    }

    pub fn contains_point(&self, p: Vec3) -> bool {
        p.cmpge(self.min).all() && p.cmple(self.max).all()
    }

    /// True when `other` lies inside `self` (boundaries included).
    pub fn contains(&self, other: &Aabb) -> bool {
        other.is_empty() || (other.min.cmpge(self.min).all() && other.max.cmple(self.max).all())
    }

    /// True when min and max are finite on all axes.
    pub fn is_finite(&self) -> bool {
        self.min.is_finite() && self.max.is_finite()
    }

    /// Slab test against a ray given its reciprocal direction. Returns the
    /// entry distance when the ray's `[tmin, tmax]` overlaps the box.
    #[inline(always)]
    pub fn intersect_ray(&self, origin: Vec3, inv_dir: Vec3, tmin: f32, tmax: f32) -> Option<f32> {
        let t0 = (self.min - origin) * inv_dir;
        let t1 = (self.max - origin) * inv_dir;
        let near = t0.min(t1).max_element().max(tmin);
        let far = t0.max(t1).min_element().min(tmax);
        (near <= far).then_some(near)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_box_grows_to_point() {
        let mut b = Aabb::EMPTY;
        assert!(b.is_empty());
        assert_eq!(b.surface_area(), 0.0);
        b.grow(Vec3::new(1.0, 2.0, 3.0));
        assert!(!b.is_empty());
        assert_eq!(b.min, b.max);
    }

    #[test]
    fn unit_cube_area_and_axis() {
        let b = Aabb::new(Vec3::ZERO, Vec3::new(1.0, 2.0, 3.0));
        assert_eq!(b.surface_area(), 2.0 * (2.0 + 6.0 + 3.0));
        assert_eq!(b.largest_axis(), 2);
        assert!(b.contains_point(Vec3::new(0.5, 0.5, 0.5)));
    }

    #[test]
    fn slab_test_hits_and_misses() {
        let b = Aabb::new(Vec3::splat(-1.0), Vec3::splat(1.0));
        let o = Vec3::new(0.0, 0.0, -5.0);
        let d = Vec3::Z;
        assert_eq!(b.intersect_ray(o, d.recip(), 0.0, f32::INFINITY), Some(4.0));
        assert_eq!(b.intersect_ray(o, d.recip(), 0.0, 3.0), None);
        let d2 = Vec3::X;
        assert_eq!(b.intersect_ray(o, d2.recip(), 0.0, f32::INFINITY), None);
    }
}
