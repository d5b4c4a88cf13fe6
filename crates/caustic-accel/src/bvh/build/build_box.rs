//! [`BuildBox`]: the builders' working box, on `Vec3A` so that growing and
//! merging boxes are single SIMD min/max instructions (the `Aabb` of
//! `caustic-geom` uses NaN-aware scalar `f32::min`, several instructions per
//! lane). Builders only put finite boxes in it, so NaN semantics do not
//! matter here.

use caustic_geom::{Aabb, Vec3, Vec3A};

#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Zeroable)]
pub(crate) struct BuildBox {
    pub min: Vec3A,
    pub max: Vec3A,
}

impl BuildBox {
    /// The box that contains nothing (`min = +inf`, `max = -inf`).
    pub const EMPTY: Self = Self {
        min: Vec3A::INFINITY,
        max: Vec3A::NEG_INFINITY,
    };

    pub fn from_aabb(b: Aabb) -> Self {
        Self {
            min: b.min.into(),
            max: b.max.into(),
        }
    }

    pub fn to_aabb(self) -> Aabb {
        Aabb::new(self.min.into(), self.max.into())
    }

    #[inline(always)]
    #[must_use]
    pub fn union(self, other: Self) -> Self {
        Self {
            min: self.min.min(other.min),
            max: self.max.max(other.max),
        }
    }

    #[inline(always)]
    pub fn grow(&mut self, p: Vec3) {
        let p = Vec3A::from(p);
        self.min = self.min.min(p);
        self.max = self.max.max(p);
    }

    #[inline(always)]
    pub fn grow_a(&mut self, p: Vec3A) {
        self.min = self.min.min(p);
        self.max = self.max.max(p);
    }

    /// Twice the box's center, `min + max`: the split point of the binned
    /// and sweep builders (the factor 2 cancels in every comparison and
    /// saves a multiply per primitive).
    #[inline(always)]
    pub fn center2(&self) -> Vec3A {
        self.min + self.max
    }

    /// Half the surface area; 0 for the empty box.
    #[inline(always)]
    pub fn half_area(&self) -> f32 {
        let e = (self.max - self.min).max(Vec3A::ZERO);
        e.x * e.y + e.y * e.z + e.z * e.x
    }

    /// The box common to both (inverted, hence empty, when they are disjoint).
    #[inline(always)]
    #[must_use]
    pub fn intersection(self, other: Self) -> Self {
        Self {
            min: self.min.max(other.min),
            max: self.max.min(other.max),
        }
    }

    /// True when the box holds no point (`min > max` on some axis).
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.min.cmpgt(self.max).any()
    }

    pub fn largest_axis(&self) -> usize {
        self.to_aabb().largest_axis()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_aabb() {
        let a = Aabb::new(Vec3::new(0.0, 1.0, 2.0), Vec3::new(1.0, 3.0, 2.5));
        let b = Aabb::new(Vec3::splat(-1.0), Vec3::splat(0.5));
        let fast = BuildBox::from_aabb(a).union(BuildBox::from_aabb(b));
        assert_eq!(fast.to_aabb(), a.union(b));
        assert_eq!(fast.half_area(), a.union(b).half_area());
        assert_eq!(BuildBox::EMPTY.half_area(), 0.0);
        let mut grown = BuildBox::EMPTY;
        grown.grow(Vec3::ONE);
        assert_eq!(grown.to_aabb(), Aabb::from_point(Vec3::ONE));
    }
}
