//! The CPU side of `caustic bench photons`: timing each point structure's
//! build (and its peak memory) and its query passes, and the check that
//! every structure, CPU or GPU, gave the same answers.

use super::PhotonBenchArgs;
use crate::alloc_counter;
use crate::bench::{Timing, time_ms};
use anyhow::{Context, Result, bail};
use caustic_accel::points::{Neighbour, PointStructure, build_point_structure};
use caustic_geom::Vec3;
use rayon::prelude::*;

/// One untimed warm-up run, then `reps` timed ones.
pub(super) fn time_runs(reps: usize, mut run: impl FnMut()) -> Timing {
    run();
    let runs: Vec<f64> = (0..reps).map(|_| time_ms(&mut run)).collect();
    Timing::from_runs(&runs)
}

pub(super) struct BuildRow {
    pub(super) map: String,
    pub(super) structure: String,
    pub(super) photons: usize,
    pub(super) time: Timing,
    pub(super) bytes: usize,
    pub(super) peak_bytes: usize,
}

/// What a query pass asked.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Query {
    Knn { k: usize, max_radius: f32 },
    Radius { radius: f32 },
}

pub(super) struct QueryRow {
    pub(super) sweep: &'static str,
    pub(super) map: String,
    pub(super) structure: String,
    pub(super) photons: usize,
    pub(super) query: Query,
    pub(super) resolution: (u32, u32),
    pub(super) queries: usize,
    pub(super) time: Timing,
    pub(super) mean_found: f64,
    pub(super) checksum: u64,
}

pub(super) fn measure_build(
    name: &str,
    map: &str,
    points: &[Vec3],
    max_radius: f32,
    args: &PhotonBenchArgs,
) -> Result<(Box<dyn PointStructure>, BuildRow)> {
    // The peak comes from a build of its own, with nothing else running.
    let (first, peak_bytes) =
        alloc_counter::peak_during(|| build_point_structure(name, points, max_radius));
    let first = first?;
    let bytes = first.stats().bytes;
    drop(first);
    let mut built = None;
    let time = time_runs(args.reps, || {
        drop(built.take());
        built = Some(build_point_structure(name, points, max_radius));
    });
    let structure = built.context("a build ran")??;
    let row = BuildRow {
        map: map.to_owned(),
        structure: name.to_owned(),
        photons: points.len(),
        time,
        bytes,
        peak_bytes,
    };
    Ok((structure, row))
}

/// One structure over one map, ready for query passes.
pub(super) struct QueryContext<'a> {
    pub(super) map: &'a str,
    pub(super) structure: &'a dyn PointStructure,
    pub(super) photons: usize,
    pub(super) args: &'a PhotonBenchArgs,
}

impl QueryContext<'_> {
    /// Times `query` at every point (best and median of the repetitions);
    /// `None` for brute force above `--brute-limit`.
    pub(super) fn measure(
        &self,
        sweep: &'static str,
        query: Query,
        points: &[Vec3],
        resolution: (u32, u32),
    ) -> Option<QueryRow> {
        let name = self.structure.name();
        if name == "brute" && points.len().saturating_mul(self.photons) > self.args.brute_limit {
            return None;
        }
        let mut answer = (0u64, 0u64);
        let time = time_runs(self.args.reps, || {
            answer = run_queries(self.structure, query, points);
        });
        Some(QueryRow {
            sweep,
            map: self.map.to_owned(),
            structure: name.to_owned(),
            photons: self.photons,
            query,
            resolution,
            queries: points.len(),
            time,
            mean_found: answer.0 as f64 / points.len().max(1) as f64,
            checksum: answer.1,
        })
    }
}

/// Runs `query` at every point in parallel: (neighbours found, checksum of
/// the answers). kNN answers are checked in order; radius answers are
/// summed without order (the visit order is free).
fn run_queries(structure: &dyn PointStructure, query: Query, points: &[Vec3]) -> (u64, u64) {
    points
        .par_chunks(256)
        .map(|chunk| {
            let mut out: Vec<Neighbour> = Vec::new();
            let (mut found, mut sum) = (0u64, 0u64);
            for &p in chunk {
                match query {
                    Query::Knn { k, max_radius } => {
                        structure.knn(p, k, max_radius, &mut out);
                        found += out.len() as u64;
                        for (rank, n) in out.iter().enumerate() {
                            sum = sum.wrapping_add((n.index as u64 + 1) * (rank as u64 + 1));
                        }
                    }
                    Query::Radius { radius } => {
                        structure.for_each_in_radius(p, radius, &mut |n| {
                            found += 1;
                            sum = sum.wrapping_add(n.index as u64 + 1);
                        });
                    }
                }
            }
            (found, sum)
        })
        .reduce(|| (0, 0), |a, b| (a.0 + b.0, a.1.wrapping_add(b.1)))
}

/// Every structure must give the same answers to the same queries.
pub(super) fn check_agreement(rows: &[QueryRow]) -> Result<()> {
    for (i, a) in rows.iter().enumerate() {
        for b in &rows[i + 1..] {
            let same_question = a.map == b.map
                && a.photons == b.photons
                && a.query == b.query
                && a.resolution == b.resolution;
            if same_question && a.checksum != b.checksum {
                bail!(
                    "{} and {} disagree on the {} map ({} photons, {:?}): a bug",
                    a.structure,
                    b.structure,
                    a.map,
                    a.photons,
                    a.query
                );
            }
        }
    }
    Ok(())
}
