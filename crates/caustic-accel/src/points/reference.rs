//! The exact reference every point structure is tested against: compute the
//! distance to every point, keep those within the radius, sort them all by
//! `(dist2, index)`. Deliberately the simplest correct code, with no
//! structure and no bounded lists, so that it shares no logic with what it
//! checks except [`dist2`] and the tie rule.

use super::{Neighbour, dist2, query_is_valid};
use caustic_geom::Vec3;

/// Every finite point within `radius` of `query`, sorted by `(dist2, index)`.
pub fn radius(points: &[Vec3], query: Vec3, radius: f32) -> Vec<Neighbour> {
    if !query_is_valid(query, radius) {
        return Vec::new();
    }
    let radius2 = radius * radius;
    let mut all: Vec<Neighbour> = points
        .iter()
        .enumerate()
        .filter(|(_, p)| p.is_finite())
        .map(|(i, &p)| Neighbour::new(i as u32, dist2(p, query)))
        .filter(|n| n.dist2 <= radius2)
        .collect();
    all.sort_by(|a, b| {
        a.dist2
            .partial_cmp(&b.dist2)
            .expect("finite distances")
            .then(a.index.cmp(&b.index))
    });
    all
}

/// The first `k` of [`radius`]: the exact k nearest within `max_radius`.
pub fn knn(points: &[Vec3], query: Vec3, k: usize, max_radius: f32) -> Vec<Neighbour> {
    let mut all = radius(points, query, max_radius);
    all.truncate(k);
    all
}
