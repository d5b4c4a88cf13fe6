//! `caustic bench`: acceleration-structure benchmarks on the anchor ray
//! protocol (`caustic_geom::protocol`: primary rays from a pinhole camera,
//! then ambient-occlusion and diffuse rays from their hits), so the numbers
//! stand next to the Embree and obvhs harnesses' on the same scene, rays
//! and machine.

use crate::camera::CameraArgs;
use crate::render::DEFAULT_ACCEL;
use crate::scene_arg::{self, LoadedScene};
use crate::{camera_presets, parse, plot};
use anyhow::{Context, Result, bail};
use caustic_accel::dacrt::{Dacrt, DacrtConfig};
use caustic_accel::{ACCEL_NAMES, Accel, AccelStats, build_accel};
use caustic_geom::protocol::{self, ProtocolCamera};
use caustic_geom::{Hit, Ray, Triangle};
use caustic_scene::FovAxis;
use clap::{Args, Subcommand};
use rayon::prelude::*;
use serde_json::json;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(Subcommand)]
pub enum BenchCommand {
    /// Build and trace timings per acceleration structure: build ms, SAH
    /// cost, memory, and Mrays/s for primary, AO and diffuse rays.
    #[command(after_help = accel_help())]
    Accel(AccelBenchArgs),
    /// Photon-map structures (kd-tree, hash grid, brute force): build time
    /// and memory against photon count, query time against map size, k,
    /// radius and image resolution (the measurements of Fleisz 2009).
    #[command(after_help = crate::bench_photons::help())]
    Photons(crate::bench_photons::PhotonBenchArgs),
    /// The CUDA backend: copy, scan and radix sort throughput against the
    /// memory ceiling, and BVH traversal Mrays/s for primary, AO and diffuse
    /// rays at 1920x1080 (rays generated on the device). Needs a CUDA GPU
    /// and a build with the `cuda` feature (the default).
    #[command(
        after_help = crate::bench_gpu::help()
    )]
    Gpu(crate::bench_gpu::GpuBenchArgs),
    /// Divide-and-conquer ray tracing (no structure kept) against a BVH's
    /// build and trace as the number of rays grows, with the crossover ray
    /// count (Vinkler et al. 2013); primary, AO, diffuse and collision rays.
    Dacrt(crate::bench_dacrt::DacrtBenchArgs),
    /// The viewer's interaction latency: `caustic view`'s server started
    /// in this process on a free local port, a WebSocket client that moves
    /// the camera N times, and the time from each move to the first frame
    /// of the new view (median and 95th percentile).
    #[command(after_help = crate::view::bench::help())]
    View(crate::view::bench::ViewBenchArgs),
    /// The collision experiment of Vinkler et al. 2013 (their Figure 7):
    /// ms per frame (build + trace) against the number of agents, for
    /// DACRT and the BVH builders on the CPU and the GPU; a Markdown
    /// table and an SVG plot.
    Collide(crate::bench_collide::CollideBenchArgs),
}

/// Examples, then every structure with the parameters its spec takes.
fn accel_help() -> String {
    let mut help = String::from(
        "Examples:\n  caustic bench accel --scene cornell-caustics\n  \
         caustic bench accel --scene target/scenes/bunny/bun_zipper.ply --camera bunny\n  \
         caustic bench accel --scene target/scenes/sibenik/sibenik.obj --eye=-16,-10,0 --at=10,-10,0 --fov 60 --json sibenik.jsonl\n  \
         caustic bench accel --scene target/scenes --camera standard --accel all\n  \
         caustic bench accel --scene target/scenes/dragon/dragon_vrip.ply --camera dragon --accel bvh-binned,bvh-binned-staged,lbvh:bits=30,lbvh:bits=63\n\n\
         Structures and their parameters (NAME:key=value:key=value):\n",
    );
    for (name, params) in caustic_accel::ACCEL_PARAMS {
        help.push_str(&format!("  {name:<18} {params}\n"));
    }
    help.push('\n');
    help.push_str(&camera_presets::help());
    help
}

#[derive(Args)]
pub struct AccelBenchArgs {
    /// Scene files, folders of scene files (searched one level deep) or
    /// built-in scene names; `FILE@N` traces N copies of a file side by
    /// side (`dragon_vrip.ply@16` is the 14 M-triangle scene).
    #[arg(long, required = true, num_args = 1..)]
    scene: Vec<String>,
    /// Acceleration structures, comma separated, or `all`. Each is a name
    /// with optional `:key=value` parameters, e.g. `lbvh:bits=63`,
    /// `ploc:r=32`, `bvh-binned:schedule=65536@64/4096@32/0@8`,
    /// `bvh-wide:width=4:from=ploc` (the list is below), or
    /// `dacrt[:split=median|rdh][:...]`: divide-and-conquer ray tracing,
    /// nothing built, each pass traced as one batch.
    #[arg(long, value_delimiter = ',', default_value = DEFAULT_ACCEL)]
    accel: Vec<String>,
    /// Image width: primary rays per row.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..=parse::MAX_SIDE as i64), allow_negative_numbers = true)]
    width: u32,
    /// Image height: rows of primary rays.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..=parse::MAX_SIDE as i64), allow_negative_numbers = true)]
    height: u32,
    /// Timed repetitions of each build and trace pass (after one warm-up).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u16).range(1..), allow_negative_numbers = true)]
    reps: u16,
    /// Worker threads (0 = all cores).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u16).range(0..=4096), allow_negative_numbers = true)]
    threads: u16,
    /// Append one protocol JSON object per scene and structure to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write an SVG plot of build time against trace time per structure.
    #[arg(long)]
    plot: Option<PathBuf>,
    #[command(flatten)]
    camera: CameraArgs,
}

/// Best and median of a list of durations in milliseconds (also used by
/// `bench photons`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Timing {
    pub(crate) best_ms: f64,
    pub(crate) median_ms: f64,
}

impl Timing {
    pub(crate) fn from_runs(runs: &[f64]) -> Self {
        let mut sorted = runs.to_vec();
        sorted.sort_by(f64::total_cmp);
        Self {
            best_ms: sorted[0],
            median_ms: sorted[sorted.len() / 2],
        }
    }

    fn mrays(&self, rays: usize) -> (f64, f64) {
        let per_ms = |ms: f64| rays as f64 / (ms * 1e-3) / 1e6;
        (per_ms(self.best_ms), per_ms(self.median_ms))
    }
}

struct PassResult {
    rays: usize,
    timing: Timing,
}

struct Row {
    scene: String,
    accel: String,
    prims: usize,
    diag: f64,
    build: Timing,
    build_runs: Vec<f64>,
    stats: AccelStats,
    primary: PassResult,
    primary_check: (u64, f64),
    ao: PassResult,
    ao_tmax: f32,
    occluded: u64,
    diffuse: PassResult,
    diffuse_check: (u64, f64),
}

impl BenchCommand {
    /// `--threads` of `bench accel` and `bench photons` (0: one per
    /// core); `bench gpu` uses every core for its CPU references.
    pub fn threads(&self) -> usize {
        match self {
            BenchCommand::Accel(args) => args.threads.into(),
            BenchCommand::Photons(args) => args.threads.into(),
            BenchCommand::Gpu(_) => 0,
            BenchCommand::Dacrt(args) => args.threads,
            BenchCommand::View(_) => 0,
            BenchCommand::Collide(args) => args.threads,
        }
    }
}

pub fn run(cmd: BenchCommand) -> Result<()> {
    match cmd {
        BenchCommand::Accel(args) => accel(args),
        BenchCommand::Photons(args) => crate::bench_photons::run(args),
        BenchCommand::Gpu(args) => crate::bench_gpu::run(args),
        BenchCommand::Dacrt(args) => crate::bench_dacrt::run(args),
        BenchCommand::View(args) => crate::view::bench::run(args),
        BenchCommand::Collide(args) => crate::bench_collide::run(args),
    }
}

fn accel(args: AccelBenchArgs) -> Result<()> {
    for path in args.json.iter().chain(&args.plot) {
        crate::output::check_writable(path)?;
    }
    let names = accel_names(&args.accel)?;
    let scenes = scene_specs(&args.scene)?;
    let mut rows = Vec::new();
    for spec in &scenes {
        let scene = spec.load(&args.camera, args.width, args.height)?;
        for name in &names {
            eprintln!(
                "bench: {} with {name} ({} triangles)",
                scene.name,
                scene.triangles.len()
            );
            let mut row = bench_one(&spec.label(), name, &scene.triangles, &scene.camera, &args)?;
            // The protocol counts every triangle of the file; the loader
            // dropped the degenerate ones, which no ray can hit anyway.
            row.prims += scene.skipped_triangles;
            if let Some(json_path) = &args.json {
                append_json(json_path, &row, &scene.camera, &args)?;
            }
            rows.push(row);
        }
    }
    print_table(&rows, &args);
    if let Some(path) = &args.plot {
        let points: Vec<plot::TradeoffPoint> = rows
            .iter()
            .map(|r| plot::TradeoffPoint {
                series: r.accel.clone(),
                label: short_name(&r.scene),
                build_ms: r.build.best_ms,
                trace_ms: r.primary.timing.best_ms + r.ao.timing.best_ms + r.diffuse.timing.best_ms,
            })
            .collect();
        let title = format!(
            "caustic bench accel, {}x{} protocol rays",
            args.width, args.height
        );
        plot::build_vs_trace(path, &title, &points)?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

fn accel_names(requested: &[String]) -> Result<Vec<String>> {
    // `all` stands for every registered structure but brute force, in
    // registry order; other specs may follow it (`all,lbvh:bits=63`).
    let mut specs: Vec<String> = Vec::new();
    for spec in requested {
        if spec == "all" {
            specs.extend(
                ACCEL_NAMES
                    .iter()
                    .filter(|n| **n != "brute")
                    .map(|n| n.to_string()),
            );
        } else {
            specs.push(spec.clone());
        }
    }
    let mut seen = std::collections::HashSet::new();
    specs.retain(|spec| seen.insert(spec.clone()));
    // Specs are checked up front (an empty build parses them), so a typo
    // in the last one does not surface after minutes of benchmarking.
    for spec in &specs {
        build_bench_accel(spec, &[])?;
    }
    Ok(specs)
}

/// The scene files `args` name: files, the scene files in folders (and
/// their subfolders, one level down), and built-in scene names as given.
pub(crate) fn scene_files(args: &[PathBuf]) -> Result<Vec<PathBuf>> {
    const EXTENSIONS: [&str; 5] = ["obj", "ply", "gltf", "glb", "xml"];
    let is_scene = |p: &Path| {
        p.extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
    };
    let mut out = Vec::new();
    for arg in args {
        if arg.is_dir() {
            let mut found = Vec::new();
            for entry in
                std::fs::read_dir(arg).with_context(|| format!("cannot list {}", arg.display()))?
            {
                let p = entry?.path();
                if p.is_dir() {
                    if let Ok(inner) = std::fs::read_dir(&p) {
                        found.extend(inner.flatten().map(|e| e.path()).filter(|p| is_scene(p)));
                    }
                } else if is_scene(&p) {
                    found.push(p);
                }
            }
            found.sort();
            out.extend(found);
        } else {
            out.push(arg.clone());
        }
    }
    if out.is_empty() {
        bail!("no scene files found in {:?}", args);
    }
    Ok(out)
}

/// A scene argument of a benchmark: a scene file (or built-in name) and
/// how many copies of it to trace, from `FILE@N`.
pub(crate) struct SceneSpec {
    pub(crate) path: PathBuf,
    pub(crate) copies: usize,
}

/// A benchmark's scene, loaded: its triangles (copies laid out side by
/// side) and the protocol camera that frames them.
pub(crate) struct BenchScene {
    pub(crate) name: String,
    pub(crate) triangles: Vec<Triangle>,
    pub(crate) camera: ProtocolCamera,
    /// Degenerate triangles the loader dropped (all copies).
    pub(crate) skipped_triangles: usize,
}

impl SceneSpec {
    /// The argument as written: the path, and `@N` for copies.
    pub(crate) fn label(&self) -> String {
        match self.copies {
            1 => self.path.to_string_lossy().into_owned(),
            n => format!("{}@{n}", self.path.to_string_lossy()),
        }
    }

    /// Loads the scene; copies get a camera framing all of them with the
    /// scene camera's field of view.
    pub(crate) fn load(&self, camera: &CameraArgs, width: u32, height: u32) -> Result<BenchScene> {
        let arg = self.path.to_string_lossy();
        let loaded = scene_arg::load(&arg)?;
        let mut camera = protocol_camera(camera, &loaded, width, height)?;
        let (name, triangles) = scene_arg::copies_of(&loaded, self.copies);
        if self.copies > 1 {
            camera = protocol::framing_camera(&triangles, camera.fov_deg);
        }
        Ok(BenchScene {
            name,
            triangles,
            camera,
            skipped_triangles: loaded.scene.skipped_triangles * self.copies,
        })
    }
}

/// The scenes `args` name, as [`scene_files`] finds them, each with the
/// copies an `@N` suffix asks for.
pub(crate) fn scene_specs(args: &[String]) -> Result<Vec<SceneSpec>> {
    let mut out = Vec::new();
    for arg in args {
        let (path, copies) = scene_arg::split_copies(arg)?;
        if copies > 1 && Path::new(path).is_dir() {
            bail!("{arg}: @N replicates one scene file, not a folder");
        }
        let files = if Path::new(path).exists() {
            scene_files(&[PathBuf::from(path)])?
        } else {
            // Not a file: a built-in scene name, which scene_arg resolves.
            vec![PathBuf::from(path)]
        };
        out.extend(files.into_iter().map(|path| SceneSpec { path, copies }));
    }
    Ok(out)
}

/// The protocol camera: the scene's (or overridden) camera with its field of
/// view turned into the vertical one the protocol takes.
pub(crate) fn protocol_camera(
    args: &CameraArgs,
    scene: &LoadedScene,
    width: u32,
    height: u32,
) -> Result<ProtocolCamera> {
    let camera = args.resolve(scene)?;
    let mut pc = ProtocolCamera::from_f32(camera.eye, camera.target, camera.up, camera.fov_deg);
    if camera.fov_axis == FovAxis::X {
        let (_, ty) = camera.half_extents(width as f32 / height as f32);
        pc.fov_deg = 2.0 * (ty as f64).atan().to_degrees();
    }
    // Numbers given on the command line are used exactly as written, as
    // the anchor harnesses use them.
    if let (Some(eye), Some(at)) = (args.eye, args.at) {
        pc.eye = eye;
        pc.look_at = at;
        pc.up = args.up.unwrap_or(caustic_geom::DVec3::Y);
    }
    if let Some(fov) = args.fov {
        pc.fov_deg = fov;
    }
    Ok(pc)
}

pub(crate) fn time_ms(f: impl FnOnce()) -> f64 {
    let start = Instant::now();
    f();
    start.elapsed().as_secs_f64() * 1e3
}

/// The structure a `bench accel` spec names: a registered one, or
/// `dacrt[:...]`, which keeps only the triangles (its "build" is their
/// copy) and traces each pass as one batch.
fn build_bench_accel(spec: &str, triangles: &[Triangle]) -> Result<Box<dyn Accel>> {
    if spec.starts_with("dacrt") {
        let config =
            DacrtConfig::parse(spec).map_err(|e| anyhow::anyhow!("--accel {spec}: {e}"))?;
        return Ok(Box::new(Dacrt::new(triangles, config)));
    }
    Ok(build_accel(spec, triangles)?)
}

fn bench_one(
    scene: &str,
    name: &str,
    triangles: &[Triangle],
    camera: &ProtocolCamera,
    args: &AccelBenchArgs,
) -> Result<Row> {
    // Build: one warm-up, then `reps` timed builds; the last one is traced.
    drop(build_bench_accel(name, triangles)?);
    let mut build_runs = Vec::with_capacity(args.reps.into());
    let mut accel = None;
    for _ in 0..args.reps {
        drop(accel.take());
        let mut built = None;
        build_runs.push(time_ms(|| built = Some(build_bench_accel(name, triangles))));
        accel = Some(built.expect("build ran")?);
    }
    let accel = accel.expect("at least one rep");
    // DACRT traces a pass as one batch (its parallelism is inside); the
    // structures trace chunks handed out to the threads.
    let batch = name.starts_with("dacrt");
    let chunk = |n: usize, rays: &[Ray]| if batch { rays.len().max(1) } else { n };

    let primary_rays = protocol::primary_rays(camera, args.width, args.height);
    let order = tile_order(args.width, args.height, 16);
    let tiled: Vec<Ray> = order.iter().map(|&i| primary_rays[i as usize]).collect();
    let (primary, tiled_hits) =
        closest_pass(accel.as_ref(), &tiled, chunk(256, &tiled), args.reps.into())?;
    let mut primary_hits = vec![None; tiled_hits.len()];
    for (j, &i) in order.iter().enumerate() {
        primary_hits[i as usize] = tiled_hits[j];
    }
    let diag = protocol::scene_diagonal(triangles);
    let secondary = protocol::secondary_rays(&primary_rays, &primary_hits, triangles, diag);
    let ao_tmax = protocol::ao_tmax(diag);
    let ao_rays: Vec<Ray> = secondary
        .iter()
        .map(|r| Ray::segment(r.origin, r.dir, 0.0, ao_tmax))
        .collect();
    let (ao, occluded) = occlusion_pass(
        accel.as_ref(),
        &ao_rays,
        chunk(1024, &ao_rays),
        args.reps.into(),
    )?;
    let (diffuse, diffuse_hits) = closest_pass(
        accel.as_ref(),
        &secondary,
        chunk(1024, &secondary),
        args.reps.into(),
    )?;
    Ok(Row {
        scene: scene.to_string(),
        accel: name.to_string(),
        prims: triangles.len(),
        diag,
        build: Timing::from_runs(&build_runs),
        build_runs,
        stats: accel.stats().clone(),
        primary,
        primary_check: protocol::hit_checksum(&primary_hits),
        ao,
        ao_tmax,
        occluded: occluded.iter().filter(|&&o| o).count() as u64,
        diffuse,
        diffuse_check: protocol::hit_checksum(&diffuse_hits),
    })
}

/// Pixel indices in `tile × tile` tiles, row-major tiles.
fn tile_order(width: u32, height: u32, tile: u32) -> Vec<u32> {
    let mut order = Vec::with_capacity((width * height) as usize);
    for ty in (0..height).step_by(tile as usize) {
        for tx in (0..width).step_by(tile as usize) {
            for y in ty..(ty + tile).min(height) {
                for x in tx..(tx + tile).min(width) {
                    order.push(y * width + x);
                }
            }
        }
    }
    order
}

/// Warm-up plus `reps` timed closest-hit passes in chunks handed out
/// dynamically; every pass must reproduce the warm-up's results.
fn closest_pass(
    accel: &dyn Accel,
    rays: &[Ray],
    chunk: usize,
    reps: usize,
) -> Result<(PassResult, Vec<Option<Hit>>)> {
    let mut hits = vec![None; rays.len()];
    // Each chunk goes through the structure's batch query, so structures
    // with a packet path (bvh-wide) trace coherent chunks together.
    let trace = |out: &mut [Option<Hit>]| {
        out.par_chunks_mut(chunk)
            .zip(rays.par_chunks(chunk))
            .for_each(|(o, r)| accel.intersect_batch(r, o));
    };
    trace(&mut hits);
    let reference = protocol::hit_checksum(&hits);
    let mut runs = Vec::with_capacity(reps);
    for _ in 0..reps {
        runs.push(time_ms(|| trace(&mut hits)));
        if protocol::hit_checksum(&hits) != reference {
            bail!("closest-hit results changed between passes");
        }
    }
    Ok((
        PassResult {
            rays: rays.len(),
            timing: Timing::from_runs(&runs),
        },
        hits,
    ))
}

/// Warm-up plus `reps` timed any-hit passes in chunks handed out
/// dynamically, each through the structure's batch query (bvh-wide
/// regroups a chunk's rays by direction into packets; the default batch
/// query traces them one by one).
fn occlusion_pass(
    accel: &dyn Accel,
    rays: &[Ray],
    chunk: usize,
    reps: usize,
) -> Result<(PassResult, Vec<bool>)> {
    let mut occluded = vec![false; rays.len()];
    let trace = |out: &mut [bool]| {
        out.par_chunks_mut(chunk)
            .zip(rays.par_chunks(chunk))
            .for_each(|(o, r)| accel.occluded_batch(r, o));
    };
    trace(&mut occluded);
    let reference = occluded.iter().filter(|&&o| o).count();
    let mut runs = Vec::with_capacity(reps);
    for _ in 0..reps {
        runs.push(time_ms(|| trace(&mut occluded)));
        if occluded.iter().filter(|&&o| o).count() != reference {
            bail!("occlusion results changed between passes");
        }
    }
    Ok((
        PassResult {
            rays: rays.len(),
            timing: Timing::from_runs(&runs),
        },
        occluded,
    ))
}

fn print_table(rows: &[Row], args: &AccelBenchArgs) {
    println!(
        "\n{}x{} rays per the anchor protocol, {} threads, best of {} (median in the JSON)\n",
        args.width,
        args.height,
        rayon::current_num_threads(),
        args.reps
    );
    println!(
        "| scene | accel | prims | build ms | SAH | nodes | MB | primary Mrays/s | AO Mrays/s | diffuse Mrays/s | primary hits / t_sum | AO occluded | diffuse hits / t_sum |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---|");
    for r in rows {
        println!(
            "| {} | {} | {} | {:.1} | {} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {} / {:.6e} | {} | {} / {:.6e} |",
            short_name(&r.scene),
            r.accel,
            r.prims,
            r.build.best_ms,
            sah_text(&r.stats),
            r.stats.nodes,
            megabytes(r.stats.bytes),
            r.primary.timing.mrays(r.primary.rays).0,
            r.ao.timing.mrays(r.ao.rays).0,
            r.diffuse.timing.mrays(r.diffuse.rays).0,
            r.primary_check.0,
            r.primary_check.1,
            r.occluded,
            r.diffuse_check.0,
            r.diffuse_check.1,
        );
    }
    print_structure_tables(rows);
}

/// One table per structure over the scenes, with the columns of Zeidan's (2011)
/// tables 4.3-4.9 (build, ray cast, their sum, SAH cost, nodes, memory)
/// and the rest of the quality metrics: leaves, average and largest leaf,
/// depth, and the build's peak working memory. "Ray cast" is the primary
/// pass (one ray per pixel), as in the thesis.
fn print_structure_tables(rows: &[Row]) {
    let mut names: Vec<&str> = Vec::new();
    for r in rows {
        if !names.contains(&r.accel.as_str()) {
            names.push(&r.accel);
        }
    }
    if rows.len() < 2 {
        return;
    }
    for name in names {
        println!("\n#### {name}\n");
        println!(
            "| scene | prims | build ms | ray cast ms | build + ray cast ms | SAH | nodes | leaves | avg leaf | max leaf | depth | MB | peak build MB |"
        );
        println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for r in rows.iter().filter(|r| r.accel == name) {
            let cast = r.primary.timing.best_ms;
            println!(
                "| {} | {} | {:.2} | {:.2} | {:.2} | {} | {} | {} | {:.2} | {} | {} | {:.2} | {:.2} |",
                short_name(&r.scene),
                r.prims,
                r.build.best_ms,
                cast,
                r.build.best_ms + cast,
                sah_text(&r.stats),
                r.stats.nodes,
                r.stats.leaves,
                r.stats.avg_leaf_size,
                r.stats.max_leaf_size,
                r.stats.max_depth,
                megabytes(r.stats.bytes),
                megabytes(r.stats.peak_build_bytes),
            );
        }
    }
}

/// The SAH cost, or `-` for structures without one (the grid has no
/// node hierarchy to cost).
fn sah_text(stats: &AccelStats) -> String {
    if stats.nodes == 0 && stats.sah_cost == 0.0 {
        "-".into()
    } else {
        format!("{:.2}", stats.sah_cost)
    }
}

fn short_name(scene: &str) -> String {
    Path::new(scene)
        .file_name()
        .map(|f| f.to_string_lossy().to_string())
        .unwrap_or_else(|| scene.to_string())
}

fn megabytes(bytes: usize) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

fn append_json(path: &Path, r: &Row, camera: &ProtocolCamera, args: &AccelBenchArgs) -> Result<()> {
    let mrays = |p: &PassResult| {
        let (best, median) = p.timing.mrays(p.rays);
        json!({"best": best, "median": median})
    };
    let obj = json!({
        "protocol": "anchors-ray-protocol-1",
        "library": "caustic",
        "library_version": env!("CARGO_PKG_VERSION"),
        "config": r.accel,
        "api": if r.accel.starts_with("dacrt") {
            json!({"primary": "one batch (Dacrt::closest_hits)", "ao": "one batch (Dacrt::any_hits)", "diffuse": "one batch (Dacrt::closest_hits)"})
        } else {
            json!({"primary": "Accel::intersect_batch per chunk of 256 rays (16x16 tiles)", "ao": "Accel::occluded_batch per run of 1024", "diffuse": "Accel::intersect_batch per run of 1024"})
        },
        "scene": r.scene,
        "prims": r.prims,
        "diag": r.diag,
        "width": args.width,
        "height": args.height,
        "threads": rayon::current_num_threads(),
        "camera": {"eye": camera.eye.to_array(), "look_at": camera.look_at.to_array(), "up": camera.up.to_array(), "fov_deg": camera.fov_deg},
        "build_ms": {"best": r.build.best_ms, "median": r.build.median_ms, "runs": r.build_runs},
        "primary": {"rays": r.primary.rays, "mrays_s": mrays(&r.primary), "hits": r.primary_check.0, "t_sum": r.primary_check.1},
        "ao": {"rays": r.ao.rays, "tmax": r.ao_tmax, "mrays_s": mrays(&r.ao), "occluded": r.occluded},
        "diffuse": {"rays": r.diffuse.rays, "mrays_s": mrays(&r.diffuse), "hits": r.diffuse_check.0, "t_sum": r.diffuse_check.1},
        "sah_cost": r.stats.sah_cost,
        "nodes": r.stats.nodes,
        "leaves": r.stats.leaves,
        "avg_leaf_size": r.stats.avg_leaf_size,
        "max_leaf_size": r.stats.max_leaf_size,
        "max_depth": r.stats.max_depth,
        "bytes": r.stats.bytes,
        "peak_build_bytes": r.stats.peak_build_bytes,
    });
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    writeln!(file, "{obj}").with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scene_copies_follow_an_at_sign() {
        let specs = scene_specs(&["cornell-box@16".into(), "cornell-box".into()]).unwrap();
        assert_eq!(specs[0].path, PathBuf::from("cornell-box"));
        assert_eq!(specs[0].copies, 16);
        assert_eq!(specs[0].label(), "cornell-box@16");
        assert_eq!(specs[1].copies, 1);
        for bad in ["scene.ply@0", "scene.ply@x", "scene.ply@2000"] {
            assert!(
                scene_specs(&[bad.into()]).is_err(),
                "{bad} should be refused"
            );
        }
    }
}
