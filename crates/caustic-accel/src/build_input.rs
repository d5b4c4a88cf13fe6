//! What a BVH builder sees of the primitives: one box and one centroid each,
//! never the triangles themselves (only spatial-split and clipping builders
//! will get the triangles, through an explicit extra argument). Keeping
//! builders on boxes lets one builder serve triangles, instances, photon
//! disks or any other boundable primitive.

use caustic_geom::{Aabb, Triangle, Vec3};
use rayon::prelude::*;

/// Inputs of a hierarchy build, indexed by primitive id.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BuildInput {
    /// Box of each primitive.
    pub bounds: Vec<Aabb>,
    /// Point that represents each primitive when splitting (for triangles,
    /// the vertex average). Must lie inside the primitive's box.
    pub centroids: Vec<Vec3>,
}

/// Below this many primitives the inputs are computed on one thread.
const PARALLEL_MIN: usize = 16 * 1024;

impl BuildInput {
    /// Boxes and vertex-average centroids of triangles, in parallel for large inputs.
    pub fn from_triangles(triangles: &[Triangle]) -> Self {
        let (bounds, centroids) = if triangles.len() >= PARALLEL_MIN {
            triangles
                .par_iter()
                .map(|t| (t.bounds(), t.centroid()))
                .unzip()
        } else {
            triangles.iter().map(|t| (t.bounds(), t.centroid())).unzip()
        };
        Self { bounds, centroids }
    }

    /// Number of primitives.
    pub fn len(&self) -> usize {
        self.bounds.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bounds.is_empty()
    }

    /// True when primitive `i` can be placed in a hierarchy: finite box and
    /// centroid. Others (NaN or infinite coordinates) can never be hit; the
    /// builders park them in one leaf with the empty box.
    pub fn is_placeable(&self, i: usize) -> bool {
        self.bounds[i].is_finite() && !self.bounds[i].is_empty() && self.centroids[i].is_finite()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn triangle_boxes_and_centroids() {
        let tris = [
            Triangle::new(Vec3::ZERO, Vec3::X, Vec3::Y),
            Triangle::new(Vec3::splat(f32::NAN), Vec3::X, Vec3::Y),
        ];
        let input = BuildInput::from_triangles(&tris);
        assert_eq!(input.len(), 2);
        assert_eq!(
            input.bounds[0],
            Aabb::new(Vec3::ZERO, Vec3::new(1.0, 1.0, 0.0))
        );
        assert!((input.centroids[0] - Vec3::new(1.0 / 3.0, 1.0 / 3.0, 0.0)).length() < 1e-6);
        assert!(input.is_placeable(0));
        assert!(!input.is_placeable(1));
    }
}
