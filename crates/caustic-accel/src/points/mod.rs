//! Nearest-neighbour structures over point sets: the photon maps' search
//! side. One trait, [`PointStructure`], answers k-nearest-neighbour and
//! fixed-radius queries; three implementations are registered by name in
//! [`POINT_STRUCTURE_NAMES`] (the CLI, the tests and the benchmarks loop over
//! it and build through [`build_point_structure`]):
//!
//! - `kdtree` ([`PointKdTree`]): the photon kd-tree of Zhou et al. (2008)
//!   as seeds 002 and 000 describe it: large nodes split at the spatial
//!   median after cutting off empty space, small nodes by the voxel volume
//!   heuristic, nodes in pre-order; kNN by a bounded priority queue
//!   (default) or by Zhou's iterative histogram radius search;
//! - `hashgrid` ([`PointHashGrid`]): the spatial hash of Fleisz (2009,
//!   Fleisz 2009): cells of the maximum query radius, linear or Teschner hash,
//!   radix sort, one contiguous run per bucket;
//! - `brute` ([`BrutePoints`]): every point for every query, the Garcia et
//!   al. (2008) baseline of Fleisz 2009.
//!
//! The structures index positions only; a photon's payload (power,
//! direction) stays with the renderer, which looks it up by the returned
//! index.
//!
//! # Query contract (identical for all three; the tests check it against
//! [`reference`](mod@reference))
//!
//! - Distances are squared Euclidean distances computed by [`dist2`]: the
//!   same `f32` expression everywhere, so every structure sees the same bits.
//! - A point is *within* radius `r` when `dist2 <= r * r` (inclusive);
//!   `r = +inf` admits every point.
//! - **Tie rule**: neighbours are ordered by `(dist2, index)`, so among
//!   points at exactly the same distance the lower input index comes first
//!   (and wins the last kNN slot). [`Neighbour::key`] is this order as one
//!   `u64`.
//! - `knn(q, k, r)` returns the first `k` points of that order among those
//!   within `r`, sorted; fewer when fewer are within `r`.
//! - `radius(q, r)` returns every point within `r`, sorted the same way.
//! - Points with a NaN or infinite coordinate are never returned; a query
//!   with a non-finite position, `k = 0` or a NaN/negative radius returns
//!   nothing. Nothing panics on degenerate input (no points, all points
//!   coincident, all on a plane).

mod brute;
mod hash_grid;
#[cfg(feature = "cuda")]
pub mod hash_grid_cuda;
pub mod kdtree;
mod neighbours;
mod radix_sort;
pub mod reference;

pub use brute::BrutePoints;
pub use hash_grid::{HashFunction, HashGridConfig, PointHashGrid};
pub use kdtree::{KdKnnMethod, PointKdNode, PointKdTree, PointKdTreeConfig};
pub use neighbours::Neighbour;

use caustic_geom::Vec3;
use std::fmt;

/// Every point-structure name [`build_point_structure`] knows, in the order
/// reports list them.
pub const POINT_STRUCTURE_NAMES: &[&str] = &["kdtree", "hashgrid", "brute"];

/// Squared distance between two points: the one expression every structure
/// and the reference use, so that ties and radius tests agree bit for bit.
#[inline(always)]
pub fn dist2(a: Vec3, b: Vec3) -> f32 {
    let dx = a.x - b.x;
    let dy = a.y - b.y;
    let dz = a.z - b.z;
    dx * dx + dy * dy + dz * dz
}

/// A structure answering neighbour queries over a fixed point set.
pub trait PointStructure: Send + Sync {
    /// The registry name (`kdtree`, `hashgrid`, `brute`).
    fn name(&self) -> &'static str;

    /// Number of input points (non-finite ones included, never returned).
    fn len(&self) -> usize;

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Replaces `out` with the `k` nearest points within `max_radius` of
    /// `query`, sorted by `(dist2, index)` (see the module's contract).
    fn knn(&self, query: Vec3, k: usize, max_radius: f32, out: &mut Vec<Neighbour>);

    /// Calls `visit` once for every point within `radius` of `query`, in no
    /// particular order.
    fn for_each_in_radius(&self, query: Vec3, radius: f32, visit: &mut dyn FnMut(Neighbour));

    /// Replaces `out` with every point within `radius` of `query`, sorted by
    /// `(dist2, index)`.
    fn radius(&self, query: Vec3, radius: f32, out: &mut Vec<Neighbour>) {
        out.clear();
        self.for_each_in_radius(query, radius, &mut |n| out.push(n));
        out.sort_unstable_by_key(Neighbour::key);
    }

    fn stats(&self) -> &PointStats;
}

/// What a point structure reports about itself; benchmark tables print it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PointStats {
    pub name: &'static str,
    /// Wall time of the build, from positions to a queryable structure.
    pub build_ms: f64,
    pub points: usize,
    /// Memory held after the build: nodes or tables, point copies, indices.
    pub bytes: usize,
    /// Tree nodes (kd-tree) or hash buckets (hash grid); 0 for brute force.
    pub nodes: usize,
    /// Leaves (kd-tree) or non-empty buckets (hash grid).
    pub leaves: usize,
    /// Depth of the deepest leaf (kd-tree).
    pub max_depth: usize,
    /// Most points in one leaf or bucket.
    pub max_leaf_size: usize,
    /// Variant details for reports (hash function, kNN method, ...).
    pub detail: String,
}

/// A name that is not in [`POINT_STRUCTURE_NAMES`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownPointStructure {
    pub name: String,
}

impl fmt::Display for UnknownPointStructure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown point structure `{}`; valid names: {}",
            self.name,
            POINT_STRUCTURE_NAMES.join(", ")
        )
    }
}

impl std::error::Error for UnknownPointStructure {}

/// Builds the structure called `name` over `points` with its default
/// settings. `max_radius` is the largest radius queries are expected to use
/// (the hash grid's cell size, the kd-tree's VVH radius); larger queries
/// stay exact, only slower. Non-finite or non-positive values let each
/// structure choose.
pub fn build_point_structure(
    name: &str,
    points: &[Vec3],
    max_radius: f32,
) -> Result<Box<dyn PointStructure>, UnknownPointStructure> {
    match name {
        "kdtree" => Ok(Box::new(PointKdTree::build(
            points,
            &PointKdTreeConfig::with_radius(max_radius),
        ))),
        "hashgrid" => Ok(Box::new(PointHashGrid::build(
            points,
            &HashGridConfig::with_radius(max_radius),
        ))),
        "brute" => Ok(Box::new(BrutePoints::build(points))),
        _ => Err(UnknownPointStructure {
            name: name.to_owned(),
        }),
    }
}

/// Whether a query can return anything: finite position, a radius that is
/// not NaN or negative.
#[inline]
fn query_is_valid(query: Vec3, radius: f32) -> bool {
    query.is_finite() && radius >= 0.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_registered_name_builds_and_reports_it() {
        let points = [Vec3::ZERO, Vec3::X, Vec3::new(0.0, 2.0, 0.0)];
        for &name in POINT_STRUCTURE_NAMES {
            let s = build_point_structure(name, &points, 1.0).unwrap();
            assert_eq!(s.name(), name);
            assert_eq!(s.stats().name, name);
            assert_eq!(s.len(), 3);
            let mut out = Vec::new();
            s.knn(Vec3::new(0.9, 0.0, 0.0), 2, 10.0, &mut out);
            let ids: Vec<u32> = out.iter().map(|n| n.index).collect();
            assert_eq!(ids, [1, 0], "{name}");
        }
    }

    #[test]
    fn unknown_name_lists_the_valid_ones() {
        let err = build_point_structure("octree", &[], 1.0).err().unwrap();
        let message = err.to_string();
        assert!(message.contains("octree"));
        for name in POINT_STRUCTURE_NAMES {
            assert!(message.contains(name));
        }
    }
}
