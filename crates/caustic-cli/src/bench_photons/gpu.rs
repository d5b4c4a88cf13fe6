//! The GPU side of `caustic bench photons`: the device's kd-tree, hash
//! grid and brute force over the same maps and queries as the CPU's, rows
//! `cuda:…`, answers checksummed the same way so that the CPU structures
//! vouch for them.

use super::PhotonBenchArgs;
use super::measure::{BuildRow, Query, QueryRow, time_runs};
use crate::bench::Timing;
use anyhow::{Context, Result};
use caustic_geom::Vec3;

/// The GPU side of the benchmark: `cuda:kdtree` and `cuda:hashgrid` (built on the device)
/// and `cuda:brute`, kNN queries from device buffers. Times are host wall
/// time around a synchronised launch sequence (the build reads its bounds
/// back once); answers are downloaded after timing and checksummed as the
/// CPU's, so `check_agreement` compares them with the CPU structures.
pub(super) struct GpuBench<'a> {
    pub(super) gpu: &'a caustic_gpu::Gpu,
    pub(super) args: &'a PhotonBenchArgs,
}

impl<'a> GpuBench<'a> {
    /// The map's points uploaded, for the wanted structures.
    pub(super) fn on(&self, map: &'a str, points: &[Vec3], max_radius: f32) -> Result<GpuMap<'a>> {
        let flat: Vec<[f32; 3]> = points.iter().map(|p| p.to_array()).collect();
        let device = caustic_gpu::DeviceBuffer::from_slice(self.gpu, "bench photons", &flat)?;
        Ok(GpuMap {
            bench: GpuBench {
                gpu: self.gpu,
                args: self.args,
            },
            map,
            points: device,
            max_radius,
            grid: None,
            kdtree: None,
        })
    }
}

/// One map's points on the device, with its hash grid once built.
pub(super) struct GpuMap<'a> {
    bench: GpuBench<'a>,
    map: &'a str,
    points: caustic_gpu::DeviceBuffer<[f32; 3]>,
    /// The build radius: the largest kNN radius of the benchmark.
    max_radius: f32,
    grid: Option<caustic_accel::points::hash_grid_cuda::GpuHashGrid>,
    kdtree: Option<caustic_accel::points::kdtree::build_cuda::GpuPointKdTree>,
}

impl GpuMap<'_> {
    fn wants(&self, name: &str) -> bool {
        self.bench.args.points.iter().any(|p| p == name)
    }

    /// Times the builds of the GPU structures benchmarked (hash grid,
    /// kd-tree) and keeps them for the queries.
    pub(super) fn build_rows(&mut self) -> Result<Vec<BuildRow>> {
        let mut rows = Vec::new();
        if self.wants("hashgrid") {
            let (grid, time) = self.time_build(|points, r| {
                let grid = caustic_accel::points::hash_grid_cuda::GpuHashGrid::build(points, r)?;
                Ok((grid.bytes(), grid))
            })?;
            rows.push(self.build_row("cuda:hashgrid", time, grid.0));
            self.grid = Some(grid.1);
        }
        if self.wants("kdtree") {
            // The CPU kd-tree's configuration (`build_point_structure`):
            // the same VVH radius, so both build the same tree.
            let (tree, time) = self.time_build(|points, r| {
                let config = caustic_accel::points::PointKdTreeConfig::with_radius(r);
                let tree = caustic_accel::points::kdtree::build_cuda::GpuPointKdTree::build_with(
                    points, &config,
                )?;
                Ok((tree.bytes(), tree))
            })?;
            rows.push(self.build_row("cuda:kdtree", time, tree.0));
            self.kdtree = Some(tree.1);
        }
        Ok(rows)
    }

    fn build_row(&self, structure: &str, time: Timing, bytes: usize) -> BuildRow {
        BuildRow {
            map: self.map.to_owned(),
            structure: structure.to_owned(),
            photons: self.points.len(),
            time,
            bytes,
            peak_bytes: 0,
        }
    }

    /// Times `build` (synchronised) after a warm-up; the last build is kept.
    fn time_build<T>(
        &self,
        build: impl Fn(&caustic_gpu::DeviceBuffer<[f32; 3]>, f32) -> Result<T, caustic_gpu::GpuError>,
    ) -> Result<(T, Timing)> {
        let gpu = self.bench.gpu;
        let mut last = None;
        let time = time_runs(self.bench.args.reps, || {
            drop(last.take());
            last = Some(
                build(&self.points, self.max_radius).and_then(|t| gpu.synchronize().map(|()| t)),
            );
        });
        Ok((last.context("a GPU build ran")??, time))
    }

    /// Times `query` at `points` with the GPU structures benchmarked.
    pub(super) fn measure(
        &mut self,
        sweep: &'static str,
        query: Query,
        points: &[Vec3],
        resolution: (u32, u32),
    ) -> Result<Vec<QueryRow>> {
        if self.grid.is_none() && self.kdtree.is_none() {
            self.build_rows()?;
        }
        let gpu = self.bench.gpu;
        let flat: Vec<[f32; 3]> = points.iter().map(|p| p.to_array()).collect();
        let queries = caustic_gpu::DeviceBuffer::from_slice(gpu, "bench queries", &flat)?;
        let mut rows = Vec::new();
        let brute_ok =
            points.len().saturating_mul(self.points.len()) <= self.bench.args.brute_limit;
        for name in ["kdtree", "hashgrid", "brute"] {
            // The grid answers radii up to the one it was built for.
            let too_wide = matches!(query, Query::Radius { radius } if radius > self.max_radius);
            if !self.wants(name)
                || (name == "brute" && !brute_ok)
                || (name == "hashgrid" && too_wide)
            {
                continue;
            }
            let grid = self.grid.as_ref().filter(|_| name == "hashgrid");
            let tree = self.kdtree.as_ref().filter(|_| name == "kdtree");
            // Timed: the queries on the device, synchronised; the answers
            // are downloaded once afterwards for the checksum.
            let run = || -> Result<GpuAnswers, caustic_gpu::GpuError> {
                let answers = match (query, grid, tree) {
                    (Query::Knn { k, max_radius }, _, Some(tree)) => {
                        GpuAnswers::Knn(tree.knn(&queries, k, max_radius)?)
                    }
                    (Query::Radius { radius }, _, Some(tree)) => {
                        GpuAnswers::Radius(tree.radius(&queries, radius)?)
                    }
                    (Query::Knn { k, max_radius }, Some(grid), None) => {
                        GpuAnswers::Knn(grid.knn(&queries, k, max_radius)?)
                    }
                    (Query::Knn { k, max_radius }, None, None) => {
                        GpuAnswers::Knn(caustic_accel::points::hash_grid_cuda::knn_brute(
                            &self.points,
                            &queries,
                            k,
                            max_radius,
                        )?)
                    }
                    (Query::Radius { radius }, Some(grid), None) => {
                        GpuAnswers::Radius(grid.radius(&queries, radius)?)
                    }
                    (Query::Radius { radius }, None, None) => {
                        GpuAnswers::Radius(caustic_accel::points::hash_grid_cuda::radius_brute(
                            &self.points,
                            &queries,
                            radius,
                        )?)
                    }
                };
                gpu.synchronize()?;
                Ok(answers)
            };
            let mut last = None;
            let time = time_runs(self.bench.args.reps, || last = Some(run()));
            let answers = last.context("a GPU query pass ran")??.download()?;
            let (found, sum) = checksum(query, &answers);
            rows.push(QueryRow {
                sweep,
                map: self.map.to_owned(),
                structure: format!("cuda:{name}"),
                photons: self.points.len(),
                query,
                resolution,
                queries: points.len(),
                time,
                mean_found: found as f64 / points.len().max(1) as f64,
                checksum: sum,
            });
        }
        Ok(rows)
    }
}

/// A GPU query pass's answers, on the device.
enum GpuAnswers {
    Knn(caustic_accel::points::hash_grid_cuda::GpuNeighbours),
    Radius(caustic_accel::points::hash_grid_cuda::GpuRadiusNeighbours),
}

impl GpuAnswers {
    fn download(&self) -> Result<Vec<Vec<(u32, f32)>>, caustic_gpu::GpuError> {
        match self {
            Self::Knn(a) => a.download(),
            Self::Radius(a) => a.download(),
        }
    }
}

/// The answers' count and checksum, as `run_queries` folds them: kNN by
/// rank, radius answers unordered.
fn checksum(query: Query, answers: &[Vec<(u32, f32)>]) -> (u64, u64) {
    let (mut found, mut sum) = (0u64, 0u64);
    for row in answers {
        found += row.len() as u64;
        for (rank, (index, _)) in row.iter().enumerate() {
            let term = match query {
                Query::Knn { .. } => (*index as u64 + 1) * (rank as u64 + 1),
                Query::Radius { .. } => *index as u64 + 1,
            };
            sum = sum.wrapping_add(term);
        }
    }
    (found, sum)
}
