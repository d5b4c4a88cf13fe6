//! A photon map: the stored photons plus a neighbour structure over their
//! positions, built by name from `caustic_accel::points` (`kdtree`,
//! `hashgrid`, `brute`). Queries return photon indices into
//! [`PhotonMap::photons`]; the structure never sees the payload.

use super::record::{Photon, positions};
use caustic_accel::points::{
    Neighbour, PointStructure, UnknownPointStructure, build_point_structure,
};
use caustic_geom::Vec3;

/// Photons and the structure that finds them.
pub struct PhotonMap {
    pub photons: Vec<Photon>,
    index: Box<dyn PointStructure>,
}

impl PhotonMap {
    /// Builds the point structure `structure` over the photons' positions;
    /// `max_radius` is the largest query radius (the hash grid's cell, the
    /// kd-tree's VVH radius).
    pub fn build(
        photons: Vec<Photon>,
        structure: &str,
        max_radius: f32,
    ) -> Result<Self, UnknownPointStructure> {
        let index = build_point_structure(structure, &positions(&photons), max_radius)?;
        Ok(Self { photons, index })
    }

    pub fn len(&self) -> usize {
        self.photons.len()
    }

    pub fn is_empty(&self) -> bool {
        self.photons.is_empty()
    }

    /// The structure, for its name and statistics.
    pub fn structure(&self) -> &dyn PointStructure {
        self.index.as_ref()
    }

    /// The `k` photons nearest to `query` within `max_radius`, sorted by
    /// distance (ties by index); `out[i].index` indexes [`Self::photons`].
    pub fn knn(&self, query: Vec3, k: usize, max_radius: f32, out: &mut Vec<Neighbour>) {
        self.index.knn(query, k, max_radius, out);
    }

    /// Every photon within `radius` of `query`, sorted like [`Self::knn`].
    pub fn radius(&self, query: Vec3, radius: f32, out: &mut Vec<Neighbour>) {
        self.index.radius(query, radius, out);
    }
}
