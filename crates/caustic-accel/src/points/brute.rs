//! `brute`: brute-force k nearest neighbours, the baseline of Garcia,
//! Debreuve and Barlaud (CVPR workshops 2008) that Fleisz (2009, §2.3)
//! compares against.
//!
//! Garcia's GPU version fills a query-by-point distance matrix, then runs a
//! modified insertion sort that only orders the first `k` entries; Fleisz
//! added an early exit at the query radius. On a CPU the row need not be
//! materialised: each distance is offered to a bounded sorted list as soon
//! as it is computed, which is the same modified insertion sort streamed
//! (same result, `O(k)` memory instead of `O(n)` per query). "Building" is
//! a copy of the finite points, as Garcia's setup is a copy to the device.

use super::neighbours::SortedList;
use super::{Neighbour, PointStats, PointStructure, dist2, query_is_valid};
use caustic_geom::Vec3;
use std::time::Instant;

/// Every point for every query.
pub struct BrutePoints {
    /// The finite input points with their input indices.
    points: Vec<Vec3>,
    ids: Vec<u32>,
    len: usize,
    stats: PointStats,
}

impl BrutePoints {
    pub fn build(points: &[Vec3]) -> Self {
        let start = Instant::now();
        let (ids, kept): (Vec<u32>, Vec<Vec3>) = points
            .iter()
            .enumerate()
            .filter(|(_, p)| p.is_finite())
            .map(|(i, &p)| (i as u32, p))
            .unzip();
        let stats = PointStats {
            name: "brute",
            build_ms: start.elapsed().as_secs_f64() * 1e3,
            points: points.len(),
            bytes: kept.len() * (std::mem::size_of::<Vec3>() + 4),
            detail: "streamed insertion list".into(),
            ..Default::default()
        };
        Self {
            points: kept,
            ids,
            len: points.len(),
            stats,
        }
    }
}

impl PointStructure for BrutePoints {
    fn name(&self) -> &'static str {
        "brute"
    }

    fn len(&self) -> usize {
        self.len
    }

    fn knn(&self, query: Vec3, k: usize, max_radius: f32, out: &mut Vec<Neighbour>) {
        out.clear();
        if k == 0 || !query_is_valid(query, max_radius) {
            return;
        }
        let radius2 = max_radius * max_radius;
        let mut list = SortedList::new(out, k);
        for (&p, &id) in self.points.iter().zip(&self.ids) {
            let d2 = dist2(p, query);
            if d2 <= list.bound(radius2) {
                list.offer(Neighbour::new(id, d2));
            }
        }
    }

    fn for_each_in_radius(&self, query: Vec3, radius: f32, visit: &mut dyn FnMut(Neighbour)) {
        if !query_is_valid(query, radius) {
            return;
        }
        let radius2 = radius * radius;
        for (&p, &id) in self.points.iter().zip(&self.ids) {
            let d2 = dist2(p, query);
            if d2 <= radius2 {
                visit(Neighbour::new(id, d2));
            }
        }
    }

    fn stats(&self) -> &PointStats {
        &self.stats
    }
}
