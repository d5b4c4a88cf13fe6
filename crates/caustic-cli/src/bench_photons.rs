//! `caustic bench photons`: the measurements of seed 003 (Fleisz 2009) for
//! every point structure: build time and memory (after the build and at
//! its peak) against the photon count, and kNN / radius query time against
//! map size, k, radius and image resolution, for the global and the
//! caustic map of a scene. The queries are the visible points of the
//! camera's pixels (the first diffuse surface along each pixel's specular
//! chain), as a photon-mapping renderer issues them.
//!
//! All structures answer every query identically (the crate's query
//! contract); each query pass folds its answers into a checksum and the
//! benchmark fails if two structures disagree. With `--device cuda` the
//! GPU's kd-tree, hash grid and brute force join the sweeps (rows `cuda:…`),
//! checked against the CPU's answers the same way.

use crate::alloc_counter;
use crate::bench::{Timing, time_ms};
use crate::plot;
use crate::scene_arg::{self, CameraArgs};
use anyhow::{Context, Result, bail};
use caustic_accel::points::{
    Neighbour, POINT_STRUCTURE_NAMES, PointStructure, build_point_structure,
};
use caustic_geom::{Ray, Vec3};
use caustic_render::bsdf::{reflect, refract};
use caustic_render::direct::face_towards;
use caustic_render::photon::{PhotonSettings, trace_photons};
use caustic_render::{PinholeCamera, RenderScene};
use caustic_scene::{Bsdf, Camera};
use clap::Args;
use rayon::prelude::*;
use serde_json::json;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(Args)]
pub struct PhotonBenchArgs {
    /// Scene file or built-in scene name.
    #[arg(long, default_value = "cornell-caustics")]
    scene: String,
    /// Point structures, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "kdtree,hashgrid,brute")]
    points: Vec<String>,
    /// Photon maps to measure: `global`, `caustic`.
    #[arg(long, value_delimiter = ',', default_value = "global,caustic")]
    maps: Vec<String>,
    /// Map sizes (stored photons) of the build and map-size sweeps; `1e6`
    /// and `250k` style counts are accepted.
    #[arg(long, value_delimiter = ',', default_value = "1e4,1e5,1e6,5e6", value_parser = parse_count)]
    sizes: Vec<usize>,
    /// Map size of the k, radius and resolution sweeps (the largest size
    /// up to it that the map reaches).
    #[arg(long, default_value = "1e6", value_parser = parse_count)]
    at_size: usize,
    /// Neighbour counts of the k sweep.
    #[arg(long, value_delimiter = ',', default_value = "10,25,50,100")]
    k: Vec<usize>,
    /// k of the other sweeps.
    #[arg(long, default_value_t = 50)]
    at_k: usize,
    /// Radii of the radius-query sweep, as fractions of the scene diagonal.
    #[arg(long, value_delimiter = ',', default_value = "0.0025,0.005,0.01,0.02")]
    radius: Vec<f32>,
    /// Largest kNN radius, as a fraction of the scene diagonal (the hash
    /// grid's cell size and the kd-tree's VVH radius).
    #[arg(long, default_value_t = 0.02)]
    max_radius: f32,
    /// Image sizes of the resolution sweep (one query per pixel).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "256x256,512x512,1024x768,1920x1080"
    )]
    resolution: Vec<String>,
    /// Image size of the other sweeps.
    #[arg(long, default_value = "512x512")]
    at_resolution: String,
    /// Timed repetitions of each build and query pass (after one warm-up).
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Worker threads (0 = all cores).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Most photons emitted to fill the largest map (caustic maps fill
    /// slowly: sizes they cannot reach are skipped, saying so).
    #[arg(long, default_value = "1e7", value_parser = parse_count)]
    max_emitted: usize,
    /// Brute force is skipped where queries × photons exceeds this.
    #[arg(long, default_value = "2e10", value_parser = parse_count)]
    brute_limit: usize,
    /// Seed of the photon paths.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// `cuda` (or `cuda:N`) also measures the GPU's kd-tree, hash grid and
    /// brute force (rows `cuda:kdtree`, `cuda:hashgrid`, `cuda:brute`),
    /// answers checked against the CPU structures'; `auto` when a GPU opens.
    #[arg(long, default_value = "cpu")]
    device: caustic_gpu::Device,
    /// Append one JSON object per measurement to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write PREFIX-build.svg and PREFIX-query.svg (time against map size).
    #[arg(long)]
    plot: Option<PathBuf>,
    #[command(flatten)]
    camera: CameraArgs,
}

/// `12345`, `1e6`, `2.5e6`, `250k`, `5M`.
fn parse_count(text: &str) -> Result<usize, String> {
    let t = text.trim();
    let (number, scale) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1e3),
        Some('m' | 'M') => (&t[..t.len() - 1], 1e6),
        _ => (t, 1.0),
    };
    match number.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 && v * scale < 1e15 => Ok((v * scale).round() as usize),
        _ => Err(format!("`{text}` is not a count (e.g. 1000, 1e6, 250k)")),
    }
}

fn parse_resolution(text: &str) -> Result<(u32, u32)> {
    let parsed = text
        .split_once(['x', 'X'])
        .and_then(|(w, h)| Some((w.trim().parse().ok()?, h.trim().parse().ok()?)));
    match parsed {
        Some((w, h)) if w > 0 && h > 0 && w <= 1 << 15 && h <= 1 << 15 => Ok((w, h)),
        _ => bail!("`{text}` is not an image size such as 512x512"),
    }
}

/// One untimed warm-up run, then `reps` timed ones.
fn time_runs(reps: usize, mut run: impl FnMut()) -> Timing {
    run();
    let runs: Vec<f64> = (0..reps).map(|_| time_ms(&mut run)).collect();
    Timing::from_runs(&runs)
}

struct BuildRow {
    map: String,
    structure: String,
    photons: usize,
    time: Timing,
    bytes: usize,
    peak_bytes: usize,
}

/// What a query pass asked.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Query {
    Knn { k: usize, max_radius: f32 },
    Radius { radius: f32 },
}

struct QueryRow {
    sweep: &'static str,
    map: String,
    structure: String,
    photons: usize,
    query: Query,
    resolution: (u32, u32),
    queries: usize,
    time: Timing,
    mean_found: f64,
    checksum: u64,
}

/// The photon positions of one map.
struct MapPoints {
    name: String,
    positions: Vec<Vec3>,
}

pub fn run(args: PhotonBenchArgs) -> Result<()> {
    crate::set_threads(args.threads)?;
    check_args(&args)?;
    let loaded = scene_arg::load(&args.scene)?;
    let camera = args.camera.resolve(&loaded.scene)?;
    let scene = RenderScene::new(&loaded.scene, "bvh-wide")?;
    if scene.lights.is_empty() && scene.area_lights.is_empty() {
        bail!("{}: no lights, so no photons to map", args.scene);
    }
    let diag = scene.scene_diagonal;
    let maps = trace_maps(&scene, &args)?;
    let max_radius = args.max_radius * diag;
    let sizes_of = |map: &MapPoints| -> Vec<usize> {
        let mut sizes: Vec<usize> = args
            .sizes
            .iter()
            .map(|&s| s.min(map.positions.len()))
            .filter(|&s| s > 0)
            .collect();
        sizes.dedup();
        sizes
    };

    let mut builds = Vec::new();
    let mut queries = Vec::new();
    let (at_w, at_h) = parse_resolution(&args.at_resolution)?;
    let at_points = visible_points(&scene, &camera, at_w, at_h);
    eprintln!(
        "bench photons: {} visible points at {at_w}x{at_h}",
        at_points.len()
    );
    let knn_at = Query::Knn {
        k: args.at_k,
        max_radius,
    };
    let gpu = match args.device {
        caustic_gpu::Device::Cpu => None,
        caustic_gpu::Device::Cuda(_) => caustic_gpu::select(args.device)?.gpu,
        caustic_gpu::Device::Auto => caustic_gpu::select(args.device).ok().and_then(|s| s.gpu),
    };
    let gpu_bench = gpu.as_ref().map(|gpu| GpuBench { gpu, args: &args });
    if let Some(gpu) = &gpu {
        eprintln!(
            "bench photons: also on {} (kd-tree, hash grid, brute force)",
            gpu.info().name
        );
    }
    for map in &maps {
        for size in sizes_of(map) {
            let points = &map.positions[..size];
            for name in &args.points {
                eprintln!("bench photons: {} map, {size} photons, {name}", map.name);
                let (structure, row) = measure_build(name, &map.name, points, max_radius, &args)?;
                builds.push(row);
                let context = QueryContext {
                    map: &map.name,
                    structure: structure.as_ref(),
                    photons: size,
                    args: &args,
                };
                if let Some(row) = context.measure("size", knn_at, &at_points, (at_w, at_h)) {
                    queries.push(row);
                }
            }
            if let Some(bench) = &gpu_bench {
                let mut on = bench.on(&map.name, points, max_radius)?;
                builds.extend(on.build_rows()?);
                queries.extend(on.measure("size", knn_at, &at_points, (at_w, at_h))?);
            }
        }
        let size = sizes_of(map)
            .into_iter()
            .filter(|&s| s <= args.at_size)
            .max()
            .unwrap_or(map.positions.len().min(args.at_size));
        let points = &map.positions[..size];
        for name in &args.points {
            eprintln!(
                "bench photons: {} map, {size} photons, {name}: k, radius and resolution sweeps",
                map.name
            );
            let structure = build_point_structure(name, points, max_radius)?;
            let context = QueryContext {
                map: &map.name,
                structure: structure.as_ref(),
                photons: size,
                args: &args,
            };
            for &k in &args.k {
                let query = Query::Knn { k, max_radius };
                queries.extend(context.measure("k", query, &at_points, (at_w, at_h)));
            }
            for &fraction in &args.radius {
                let query = Query::Radius {
                    radius: fraction * diag,
                };
                queries.extend(context.measure("radius", query, &at_points, (at_w, at_h)));
            }
            for text in &args.resolution {
                let (w, h) = parse_resolution(text)?;
                let points = visible_points(&scene, &camera, w, h);
                queries.extend(context.measure("resolution", knn_at, &points, (w, h)));
            }
        }
        if let Some(bench) = &gpu_bench {
            let mut on = bench.on(&map.name, points, max_radius)?;
            for &k in &args.k {
                let query = Query::Knn { k, max_radius };
                queries.extend(on.measure("k", query, &at_points, (at_w, at_h))?);
            }
            for &fraction in &args.radius {
                let query = Query::Radius {
                    radius: fraction * diag,
                };
                queries.extend(on.measure("radius", query, &at_points, (at_w, at_h))?);
            }
            for text in &args.resolution {
                let (w, h) = parse_resolution(text)?;
                let points = visible_points(&scene, &camera, w, h);
                queries.extend(on.measure("resolution", knn_at, &points, (w, h))?);
            }
        }
    }
    check_agreement(&queries)?;
    print_tables(&builds, &queries, &args, diag);
    if let Some(path) = &args.json {
        write_json(path, &builds, &queries, &args)?;
    }
    if let Some(prefix) = &args.plot {
        write_plots(prefix, &builds, &queries)?;
    }
    Ok(())
}

fn check_args(args: &PhotonBenchArgs) -> Result<()> {
    if args.reps == 0 {
        bail!("--reps must be at least 1");
    }
    if args.k.contains(&0) || args.at_k == 0 {
        bail!("k must be at least 1");
    }
    let positive = |r: f32| r.is_finite() && r > 0.0;
    if !positive(args.max_radius) || !args.radius.iter().all(|&r| positive(r)) {
        bail!("radii must be positive fractions of the scene diagonal");
    }
    for name in &args.points {
        if !POINT_STRUCTURE_NAMES.contains(&name.as_str()) {
            bail!(
                "unknown point structure `{name}` (known: {})",
                POINT_STRUCTURE_NAMES.join(", ")
            );
        }
    }
    for map in &args.maps {
        if map != "global" && map != "caustic" {
            bail!("unknown map `{map}`: use global or caustic");
        }
    }
    for text in args.resolution.iter().chain([&args.at_resolution]) {
        parse_resolution(text)?;
    }
    Ok(())
}

/// Traces enough photons for each map's largest requested size (within
/// `--max-emitted`; caustic maps fill slowly): a probe of 10^5 photons
/// gives each map's stored fraction.
fn trace_maps(scene: &RenderScene, args: &PhotonBenchArgs) -> Result<Vec<MapPoints>> {
    let largest = args
        .sizes
        .iter()
        .copied()
        .max()
        .unwrap_or(0)
        .max(args.at_size);
    let trace = |photons: usize| {
        trace_photons(
            scene,
            &PhotonSettings {
                photons: photons as u64,
                seed: args.seed,
                ..PhotonSettings::default()
            },
        )
    };
    const PROBE: usize = 100_000;
    let probe = trace(PROBE);
    let mut out = Vec::new();
    for name in &args.maps {
        let pick = |maps: &caustic_render::photon::PhotonMaps| -> Vec<Vec3> {
            let photons = if name == "global" {
                &maps.global
            } else {
                &maps.caustic
            };
            photons.iter().map(|p| p.position()).collect()
        };
        let stored = pick(&probe).len();
        if stored == 0 {
            eprintln!("note: the {name} map stays empty ({PROBE} photons emitted): skipped");
            continue;
        }
        let needed = (largest as f64 * PROBE as f64 / stored as f64 * 1.02).ceil() as usize;
        let emitted = needed.clamp(PROBE, args.max_emitted.max(PROBE));
        let start = Instant::now();
        let positions = pick(&trace(emitted));
        eprintln!(
            "bench photons: {name} map: {} photons stored of {emitted} emitted ({:.0} ms)",
            positions.len(),
            start.elapsed().as_secs_f64() * 1e3
        );
        if positions.len() < largest {
            eprintln!(
                "note: the {name} map reaches {} photons within --max-emitted {}; larger sizes are cut to that",
                positions.len(),
                args.max_emitted
            );
        }
        out.push(MapPoints {
            name: name.clone(),
            positions,
        });
    }
    if out.is_empty() {
        bail!("no photon was stored in the requested maps");
    }
    Ok(out)
}

fn measure_build(
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
struct QueryContext<'a> {
    map: &'a str,
    structure: &'a dyn PointStructure,
    photons: usize,
    args: &'a PhotonBenchArgs,
}

impl QueryContext<'_> {
    /// Times `query` at every point (best and median of the repetitions);
    /// `None` for brute force above `--brute-limit`.
    fn measure(
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

/// The GPU side of the benchmark: `cuda:kdtree` and `cuda:hashgrid` (built on the device)
/// and `cuda:brute`, kNN queries from device buffers. Times are host wall
/// time around a synchronised launch sequence (the build reads its bounds
/// back once); answers are downloaded after timing and checksummed as the
/// CPU's, so `check_agreement` compares them with the CPU structures.
struct GpuBench<'a> {
    gpu: &'a caustic_gpu::Gpu,
    args: &'a PhotonBenchArgs,
}

impl<'a> GpuBench<'a> {
    /// The map's points uploaded, for the wanted structures.
    fn on(&self, map: &'a str, points: &[Vec3], max_radius: f32) -> Result<GpuMap<'a>> {
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
struct GpuMap<'a> {
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
    fn build_rows(&mut self) -> Result<Vec<BuildRow>> {
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
    fn measure(
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

/// Every structure must give the same answers to the same queries.
fn check_agreement(rows: &[QueryRow]) -> Result<()> {
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

/// The first diffuse or glossy point along each pixel-centre ray, following
/// mirrors and refracting through glass (total internal reflection
/// reflects) for up to 8 bounces; pixels that see nothing diffuse give
/// none.
fn visible_points(scene: &RenderScene, camera: &Camera, width: u32, height: u32) -> Vec<Vec3> {
    let pinhole = PinholeCamera::new(camera, width, height);
    (0..height)
        .into_par_iter()
        .flat_map_iter(|y| {
            let pinhole = &pinhole;
            (0..width).filter_map(move |x| {
                let ray = pinhole.ray(x as f32 + 0.5, y as f32 + 0.5);
                first_diffuse(scene, ray)
            })
        })
        .collect()
}

fn first_diffuse(scene: &RenderScene, mut ray: Ray) -> Option<Vec3> {
    for _ in 0..8 {
        let hit = scene.intersect(&ray)?;
        let surface = scene.surface(&ray, &hit);
        let material = &scene.materials[surface.material as usize];
        let dir = match material.bsdf {
            Bsdf::Diffuse { .. } | Bsdf::Glossy { .. } => return Some(surface.point),
            Bsdf::Mirror { .. } => reflect(ray.dir, face_towards(surface.shading_normal, -ray.dir)),
            Bsdf::Dielectric { ior, .. } => {
                let (n, eta) = surface.interface(ray.dir, ior);
                refract(ray.dir, n, eta).unwrap_or_else(|| reflect(ray.dir, n))
            }
        };
        ray = scene.spawn(&surface, dir);
    }
    None
}

fn megabytes(bytes: usize) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

fn query_text(query: Query, diag: f32) -> String {
    match query {
        Query::Knn { k, .. } => format!("kNN k={k}"),
        Query::Radius { radius } => format!("radius {:.4} diag", radius / diag),
    }
}

fn print_tables(builds: &[BuildRow], queries: &[QueryRow], args: &PhotonBenchArgs, diag: f32) {
    println!(
        "\nphoton structures, {} threads, best of {} (median in the JSON); kNN radius cap {} x diagonal\n",
        rayon::current_num_threads(),
        args.reps,
        args.max_radius
    );
    println!("#### Build\n");
    println!("| map | photons | structure | build ms | Mphotons/s | MB | peak build MB |");
    println!("|---|---:|---|---:|---:|---:|---:|");
    for r in builds {
        // The allocation counter sees host memory only.
        let peak = if r.structure.starts_with("cuda:") {
            "n/a (device)".to_owned()
        } else {
            format!("{:.1}", megabytes(r.peak_bytes))
        };
        println!(
            "| {} | {} | {} | {:.2} | {:.1} | {:.1} | {peak} |",
            r.map,
            r.photons,
            r.structure,
            r.time.best_ms,
            r.photons as f64 / r.time.best_ms.max(1e-9) / 1e3,
            megabytes(r.bytes),
        );
    }
    let titles = [
        ("size", "kNN query time against map size"),
        ("k", "kNN query time against k"),
        ("radius", "Radius query time against radius"),
        ("resolution", "kNN query time against image resolution"),
    ];
    for (sweep, title) in titles {
        println!("\n#### {title}\n");
        println!(
            "| map | photons | structure | query | image | queries | ms | Mqueries/s | mean found |"
        );
        println!("|---|---:|---|---|---|---:|---:|---:|---:|");
        for r in queries.iter().filter(|r| r.sweep == sweep) {
            println!(
                "| {} | {} | {} | {} | {}x{} | {} | {:.2} | {:.2} | {:.1} |",
                r.map,
                r.photons,
                r.structure,
                query_text(r.query, diag),
                r.resolution.0,
                r.resolution.1,
                r.queries,
                r.time.best_ms,
                r.queries as f64 / r.time.best_ms.max(1e-9) / 1e3,
                r.mean_found,
            );
        }
    }
    if args.points.iter().any(|p| p == "brute") {
        println!(
            "\nBrute force runs only where queries x photons <= {:.0e} (--brute-limit).",
            args.brute_limit as f64
        );
    }
}

fn write_json(
    path: &Path,
    builds: &[BuildRow],
    queries: &[QueryRow],
    args: &PhotonBenchArgs,
) -> Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    let threads = rayon::current_num_threads();
    for r in builds {
        let obj = json!({
            "bench": "photons", "kind": "build", "scene": args.scene, "threads": threads,
            "map": r.map, "structure": r.structure, "photons": r.photons,
            "build_ms": {"best": r.time.best_ms, "median": r.time.median_ms},
            "bytes": r.bytes, "peak_build_bytes": r.peak_bytes,
        });
        writeln!(file, "{obj}").with_context(|| format!("cannot write {}", path.display()))?;
    }
    for r in queries {
        let (k, radius) = match r.query {
            Query::Knn { k, max_radius } => (Some(k), max_radius),
            Query::Radius { radius } => (None, radius),
        };
        let obj = json!({
            "bench": "photons", "kind": "query", "sweep": r.sweep, "scene": args.scene,
            "threads": threads, "map": r.map, "structure": r.structure, "photons": r.photons,
            "k": k, "radius": radius, "width": r.resolution.0, "height": r.resolution.1,
            "queries": r.queries, "ms": {"best": r.time.best_ms, "median": r.time.median_ms},
            "mean_found": r.mean_found, "checksum": r.checksum,
        });
        writeln!(file, "{obj}").with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

fn write_plots(prefix: &Path, builds: &[BuildRow], queries: &[QueryRow]) -> Result<()> {
    let series = |pairs: Vec<(String, f64, f64)>| {
        let mut out: Vec<plot::Series> = Vec::new();
        for (name, x, y) in pairs {
            match out.iter_mut().find(|s| s.name == name) {
                Some(s) => s.points.push((x, y)),
                None => out.push(plot::Series {
                    name,
                    points: vec![(x, y)],
                }),
            }
        }
        out
    };
    let build = series(
        builds
            .iter()
            .map(|r| {
                let name = format!("{} ({})", r.structure, r.map);
                (name, r.photons as f64, r.time.best_ms)
            })
            .collect(),
    );
    let with_suffix = |suffix: &str| {
        let mut name = prefix.as_os_str().to_owned();
        name.push(suffix);
        PathBuf::from(name)
    };
    plot::lines(
        &with_suffix("-build.svg"),
        "Photon structure build time",
        "photons",
        "build ms (best)",
        &build,
    )?;
    let query = series(
        queries
            .iter()
            .filter(|r| r.sweep == "size")
            .map(|r| {
                let name = format!("{} ({})", r.structure, r.map);
                (name, r.photons as f64, r.time.best_ms)
            })
            .collect(),
    );
    plot::lines(
        &with_suffix("-query.svg"),
        "kNN query pass time against map size",
        "photons",
        "ms for all queries (best)",
        &query,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_resolutions_parse() {
        assert_eq!(parse_count("12345"), Ok(12345));
        assert_eq!(parse_count("1e6"), Ok(1_000_000));
        assert_eq!(parse_count("2.5e6"), Ok(2_500_000));
        assert_eq!(parse_count("250k"), Ok(250_000));
        assert_eq!(parse_count("5M"), Ok(5_000_000));
        assert!(parse_count("-3").is_err());
        assert!(parse_count("many").is_err());
        assert_eq!(parse_resolution("1920x1080").unwrap(), (1920, 1080));
        assert!(parse_resolution("0x10").is_err());
        assert!(parse_resolution("512").is_err());
    }
}
