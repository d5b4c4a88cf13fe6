//! Trace throughput of the GPU BVH traversal on the anchor ray protocol
//! (`shared/anchors/PROTOCOL.md`) at 1920x1080: primary (closest hit), AO
//! (any hit within 0.1 diag) and diffuse (closest hit) rays, all generated
//! on the device, on the standard scenes and the 16-dragon scene of the
//! OptiX anchor. The tree is built on the CPU (`bvh-binned`) and uploaded.
//!
//! Before timing, every pass is checked against the CPU traversal on a
//! sample of its rays (every 16th; `tests/gpu_trace.rs` compares them all).
//! Timings are device events around the trace launch alone (ray generation
//! outside), after warm-up, as the median and best of the repeats. Primary
//! rays are traced in 8x4-pixel tiles (`Tracer::intersect_image`); the
//! `RESULT` lines also give them in buffer (row) order.
//!
//!     cargo run --release -p caustic-gpu --example trace_bench -- [SCENE...]
//!
//! SCENE is a name from `tests/common/scenes.rs` or `dragon-x16`; default:
//! the benchmark set. `RESULT` lines at the end are for scripts.

#[path = "../tests/common/scenes.rs"]
mod scenes;

use std::time::Instant;

use caustic_accel::{Accel, TriangleBvh};
use caustic_geom::protocol;
use caustic_geom::{Hit, Ray};
use caustic_gpu::rays::{self, SecondaryRays};
use caustic_gpu::{DeviceBuffer, DeviceBvh, Gpu, GpuError, GpuHit, GpuRay, ModuleId, Tracer};

const WIDTH: u32 = 1920;
const HEIGHT: u32 = 1080;
const WARM_UP: usize = 3;
const REPEATS: usize = 20;
/// Every SAMPLE-th ray is checked against the CPU before timing.
const SAMPLE: usize = 16;
const DEFAULT_SCENES: &[&str] = &[
    "bunny",
    "dragon",
    "buddha-100k",
    "sponza",
    "sibenik",
    "conference",
    "dragon-x16",
];

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// Median and best milliseconds of one pass, and its ray count.
struct Timing {
    rays: usize,
    median_ms: f64,
    best_ms: f64,
}

impl Timing {
    fn mrays(&self) -> (f64, f64) {
        let per = |ms: f64| self.rays as f64 / ms / 1e3;
        (per(self.median_ms), per(self.best_ms))
    }
}

struct Row {
    scene: String,
    triangles: usize,
    build_ms: f64,
    primary: Timing,
    /// Primary rays in buffer (row) order instead of tiles.
    primary_rows: Timing,
    ao: Timing,
    diffuse: Timing,
    primary_check: (u64, f64),
    occluded: u64,
    diffuse_check: (u64, f64),
}

fn main() -> Result<()> {
    let requested: Vec<String> = std::env::args().skip(1).collect();
    let names: Vec<&str> = if requested.is_empty() {
        DEFAULT_SCENES.to_vec()
    } else {
        requested.iter().map(String::as_str).collect()
    };
    let gpu = Gpu::probe()?;
    println!("device: {}", gpu.info());
    for module in [ModuleId::TraverseBvh2, ModuleId::Rays, ModuleId::Compact] {
        gpu.load(module)?; // compile outside the timings
    }
    let mut tracer = Tracer::new(&gpu)?;
    let mut rows = Vec::new();
    for name in names {
        let Some(scene) = load(name) else { continue };
        eprintln!("{}: {} triangles", scene.name, scene.triangles.len());
        rows.push(bench_scene(&gpu, &mut tracer, &scene)?);
    }
    print_table(&gpu, &rows);
    Ok(())
}

fn load(name: &str) -> Option<scenes::Loaded> {
    if name == "dragon-x16" {
        let dragon = scenes::scene("dragon").load()?;
        return Some(scenes::replicated(&dragon, 16, 40.0));
    }
    scenes::scene(name).load()
}

fn bench_scene(gpu: &Gpu, tracer: &mut Tracer, scene: &scenes::Loaded) -> Result<Row> {
    let start = Instant::now();
    let accel = TriangleBvh::build(&scene.triangles);
    let build_ms = start.elapsed().as_secs_f64() * 1e3;
    let bvh = DeviceBvh::upload(gpu, &accel)?;
    let camera = scenes::gpu_camera(&scene.camera);
    let primary = rays::primary_rays(gpu, &camera, WIDTH, HEIGHT)?;

    // Primary rays go out in 8x4-pixel tiles (the protocol lets the tracer
    // choose its task order); buffer (row) order is timed for comparison.
    let mut hits = DeviceBuffer::<GpuHit>::uninit(gpu, "primary hits", primary.len())?;
    tracer.intersect(&bvh, &primary, &mut hits)?;
    let primary_rays = primary.download()?;
    check_closest("primary (rows)", &accel, &primary_rays, &hits.download()?)?;
    let rows_time = time(gpu, primary.len(), || {
        tracer.intersect(&bvh, &primary, &mut hits)
    })?;
    tracer.intersect_image(&bvh, &primary, WIDTH, &mut hits)?;
    let primary_hits = hits.download()?;
    check_closest("primary", &accel, &primary_rays, &primary_hits)?;
    let primary_time = time(gpu, primary.len(), || {
        tracer.intersect_image(&bvh, &primary, WIDTH, &mut hits)
    })?;

    let diag = protocol::scene_diagonal(&scene.triangles);
    let SecondaryRays { diffuse, ao, .. } = rays::secondary_rays(&bvh, &primary, &hits, diag)?;
    let mut occluded = DeviceBuffer::<u32>::uninit(gpu, "AO results", ao.len())?;
    tracer.occluded(&bvh, &ao, &mut occluded)?;
    let ao_results = occluded.download()?;
    check_occluded(&accel, &ao.download()?, &ao_results)?;
    let ao_time = time(gpu, ao.len(), || tracer.occluded(&bvh, &ao, &mut occluded))?;

    let mut diffuse_hits = DeviceBuffer::<GpuHit>::uninit(gpu, "diffuse hits", diffuse.len())?;
    tracer.intersect(&bvh, &diffuse, &mut diffuse_hits)?;
    let diffuse_results = diffuse_hits.download()?;
    check_closest("diffuse", &accel, &diffuse.download()?, &diffuse_results)?;
    let diffuse_time = time(gpu, diffuse.len(), || {
        tracer.intersect(&bvh, &diffuse, &mut diffuse_hits)
    })?;

    Ok(Row {
        scene: scene.name.clone(),
        triangles: scene.triangles.len(),
        build_ms,
        primary: primary_time,
        primary_rows: rows_time,
        ao: ao_time,
        diffuse: diffuse_time,
        primary_check: checksum(&primary_hits),
        occluded: ao_results.iter().map(|&o| u64::from(o)).sum(),
        diffuse_check: checksum(&diffuse_results),
    })
}

/// The protocol's (hits, t_sum) checksum.
fn checksum(hits: &[GpuHit]) -> (u64, f64) {
    protocol::hit_checksum(&hits.iter().map(GpuHit::to_hit).collect::<Vec<_>>())
}

fn sample<T: Copy>(items: &[T]) -> Vec<T> {
    items.iter().step_by(SAMPLE).copied().collect()
}

/// Every SAMPLE-th closest hit must equal the CPU's, bit for bit.
fn check_closest(pass: &str, accel: &TriangleBvh, rays: &[GpuRay], hits: &[GpuHit]) -> Result<()> {
    let rays: Vec<Ray> = sample(rays).iter().map(GpuRay::to_ray).collect();
    let mut expected: Vec<Option<Hit>> = vec![None; rays.len()];
    accel.intersect_batch(&rays, &mut expected);
    let differ = sample(hits)
        .iter()
        .zip(&expected)
        .filter(|(g, c)| **g != GpuHit::from_hit(**c))
        .count();
    if differ > 0 {
        return Err(format!(
            "{pass}: {differ} of {} sampled hits differ from the CPU",
            rays.len()
        )
        .into());
    }
    Ok(())
}

fn check_occluded(accel: &TriangleBvh, rays: &[GpuRay], results: &[u32]) -> Result<()> {
    let rays: Vec<Ray> = sample(rays).iter().map(GpuRay::to_ray).collect();
    let mut expected = vec![false; rays.len()];
    accel.occluded_batch(&rays, &mut expected);
    let differ = sample(results)
        .iter()
        .zip(&expected)
        .filter(|(g, c)| **g != u32::from(**c))
        .count();
    if differ > 0 {
        return Err(format!(
            "AO: {differ} of {} sampled results differ from the CPU",
            rays.len()
        )
        .into());
    }
    Ok(())
}

/// Median and best of REPEATS device-event timings of `pass` after WARM_UP runs.
fn time(
    gpu: &Gpu,
    rays: usize,
    mut pass: impl FnMut() -> std::result::Result<(), GpuError>,
) -> Result<Timing> {
    let mut times = Vec::with_capacity(REPEATS);
    for i in 0..WARM_UP + REPEATS {
        let ms = f64::from(gpu.time_ms(&mut pass)?);
        if i >= WARM_UP {
            times.push(ms);
        }
    }
    times.sort_by(f64::total_cmp);
    Ok(Timing {
        rays,
        median_ms: times[times.len() / 2],
        best_ms: times[0],
    })
}

fn print_table(gpu: &Gpu, rows: &[Row]) {
    println!(
        "\nGPU BVH2 traversal, {WIDTH}x{HEIGHT}, anchor ray protocol, {} ({} SMs); Mrays/s median (best) of {REPEATS} after {WARM_UP} warm-ups\n",
        gpu.info().name,
        gpu.info().multiprocessors
    );
    println!(
        "| scene | triangles | CPU build ms | primary | AO | diffuse | primary hits / t_sum | AO occluded | diffuse hits / t_sum |"
    );
    println!("|---|---:|---:|---:|---:|---:|---|---:|---|");
    for r in rows {
        let cell = |t: &Timing| {
            let (median, best) = t.mrays();
            format!("{median:.0} ({best:.0})")
        };
        println!(
            "| {} | {} | {:.0} | {} | {} | {} | {} / {:.6e} | {} | {} / {:.6e} |",
            r.scene,
            r.triangles,
            r.build_ms,
            cell(&r.primary),
            cell(&r.ao),
            cell(&r.diffuse),
            r.primary_check.0,
            r.primary_check.1,
            r.occluded,
            r.diffuse_check.0,
            r.diffuse_check.1
        );
    }
    for r in rows {
        println!(
            "RESULT scene={} tris={} primary_mrays={:.1} primary_rows_mrays={:.1} ao_mrays={:.1} diffuse_mrays={:.1} primary_ms={:.3} ao_ms={:.3} diffuse_ms={:.3}",
            r.scene,
            r.triangles,
            r.primary.mrays().0,
            r.primary_rows.mrays().0,
            r.ao.mrays().0,
            r.diffuse.mrays().0,
            r.primary.median_ms,
            r.ao.median_ms,
            r.diffuse.median_ms
        );
    }
}
