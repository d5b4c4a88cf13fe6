//! Build times of the GPU top-down SAH builders (`bvh-binned`,
//! `bvh-binned-staged`, `bvh-sweep`; `GpuSahBuilder`) on the standard
//! scenes: for each scene and builder, warm-up builds, then the median and
//! best of timed builds (device events around every stage; the host's waits
//! for counts included), the median of each stage, the SAH cost against the
//! CPU twin's with the same settings (and its wall time on this machine's
//! cores), nodes, bytes and peak device memory. Every tree is validated
//! once (`Bvh2::validate` on the download) before it is timed. Prints
//! markdown tables.
//!
//!     cargo run --release -p caustic-accel --example gpu_binned_bench -- [SCENE ...]
//!
//! SCENE is a standard scene's name (`tests/common/gpu_scenes.rs`; default:
//! bunny, sponza, conference, sibenik, dragon) or `dragon@16` for the OptiX
//! anchor's 16 dragons (14 M triangles). `CAUSTIC_BENCH_REPEATS=N` sets the
//! timed builds (10; 2 warm-ups); `CAUSTIC_BENCH_BUILDERS=bvh-binned,...`
//! chooses builders.

#[path = "../tests/common/gpu_scenes.rs"]
mod scenes;

use caustic_accel::bvh::build::{
    BinnedSahBuilder, BinnedSahConfig, Bvh2Builder, GpuSahBuilder, SahBuildStats,
    SweepSahBuilder, SweepSahConfig,
};
use caustic_accel::{Accel, BuildInput, TriangleBvh};
use caustic_geom::Triangle;
use caustic_gpu::{DeviceBuffer, Gpu};
use std::time::Instant;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn twins(name: &str) -> Option<(GpuSahBuilder, Box<dyn Bvh2Builder>)> {
    Some(match name {
        "bvh-binned" => (
            GpuSahBuilder::binned(BinnedSahConfig::DEFAULT),
            Box::new(BinnedSahBuilder::new(BinnedSahConfig::DEFAULT)),
        ),
        "bvh-binned-staged" => (
            GpuSahBuilder::binned(BinnedSahConfig::STAGED),
            Box::new(BinnedSahBuilder::new(BinnedSahConfig::STAGED)),
        ),
        "bvh-sweep" => (
            GpuSahBuilder::sweep(SweepSahConfig::DEFAULT),
            Box::new(SweepSahBuilder::new(SweepSahConfig::DEFAULT)),
        ),
        _ => return None,
    })
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// The median of each stage's per-build total, in first-seen order.
fn stage_medians(runs: &[SahBuildStats]) -> Vec<(&'static str, f64)> {
    let mut names: Vec<&'static str> = Vec::new();
    for (name, _) in &runs[0].stages {
        if !names.contains(name) {
            names.push(name);
        }
    }
    names
        .into_iter()
        .map(|name| (name, median(runs.iter().map(|r| f64::from(r.stage_ms(name))).collect())))
        .collect()
}

fn load(spec: &str) -> Option<scenes::Loaded> {
    let (name, copies) = match spec.split_once('@') {
        Some((name, copies)) => (name, copies.parse().ok()?),
        None => (spec, 1),
    };
    let mesh = scenes::scene(name).load()?;
    Some(if copies > 1 {
        scenes::replicated(&mesh, copies, 40.0)
    } else {
        mesh
    })
}

fn main() -> Result<()> {
    let mut specs: Vec<String> = std::env::args().skip(1).collect();
    if specs.is_empty() {
        specs = ["bunny", "sponza", "conference", "sibenik", "dragon"]
            .map(String::from)
            .to_vec();
    }
    let repeats: usize = std::env::var("CAUSTIC_BENCH_REPEATS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(10);
    let builders: Vec<String> = std::env::var("CAUSTIC_BENCH_BUILDERS")
        .unwrap_or_else(|_| "bvh-binned,bvh-binned-staged,bvh-sweep".into())
        .split(',')
        .map(String::from)
        .collect();
    let gpu = Gpu::probe()?;
    println!("device: {}", gpu.info());
    let mut rows = Vec::new();
    let mut stage_rows = Vec::new();
    for spec in &specs {
        let Some(scene) = load(spec) else {
            println!("{spec}: not found, skipped");
            continue;
        };
        let tris = &scene.triangles;
        let words: Vec<_> = tris
            .iter()
            .enumerate()
            .map(|(i, t)| caustic_accel::bvh::triangle_bvh_cuda::GpuTriangle::new(t, i as u32))
            .collect();
        let device = DeviceBuffer::from_slice(&gpu, "scene triangles", &words)?;
        for builder in &builders {
            let Some((gpu_builder, cpu_builder)) = twins(builder) else {
                println!("{builder}: unknown builder, skipped");
                continue;
            };
            let row = measure(&gpu, &device, tris, &gpu_builder, cpu_builder.as_ref(), repeats)?;
            println!("{}", row.0);
            rows.push(format!("| {} | {} | {}", scene.name, tris.len(), row.0));
            stage_rows.push(format!("| {} | {} | {}", scene.name, builder, row.1));
        }
    }
    println!("\nGPU SAH builds (median of {repeats} after 2 warm-ups; device events, host waits included):\n");
    println!("| scene | tris | builder | GPU ms median | best | SAH GPU | SAH CPU | GPU/CPU | nodes | MB | peak MB | CPU ms | CPU/GPU |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for r in &rows {
        println!("{r}");
    }
    println!("\nStage medians (ms):\n");
    for r in &stage_rows {
        println!("{r}");
    }
    Ok(())
}

/// Validates, times and compares one builder on one scene: the table row
/// and the stage breakdown.
fn measure(
    gpu: &Gpu,
    device: &DeviceBuffer<caustic_accel::bvh::triangle_bvh_cuda::GpuTriangle>,
    tris: &[Triangle],
    builder: &GpuSahBuilder,
    cpu_builder: &dyn Bvh2Builder,
    repeats: usize,
) -> Result<(String, String)> {
    let (bvh, first) = builder.build(gpu, device)?;
    let (tree, _) = bvh.download()?;
    tree.validate(&BuildInput::from_triangles(tris).bounds)
        .map_err(|e| format!("{}: invalid tree: {e}", builder.name()))?;
    drop(bvh);
    for _ in 0..1 {
        builder.build(gpu, device)?;
    }
    let mut runs = Vec::with_capacity(repeats);
    for _ in 0..repeats.max(1) {
        let (bvh, stats) = builder.build(gpu, device)?;
        drop(bvh);
        runs.push(stats);
    }
    let times: Vec<f64> = runs.iter().map(|r| f64::from(r.build_ms)).collect();
    let best = times.iter().copied().fold(f64::INFINITY, f64::min);
    let med = median(times);
    let start = Instant::now();
    let cpu = TriangleBvh::build_with(tris, cpu_builder);
    let cpu_ms = start.elapsed().as_secs_f64() * 1e3;
    let cpu_sah = cpu.stats().sah_cost;
    let mb = |b: usize| b as f64 / (1 << 20) as f64;
    let row = format!(
        "{} | {med:.3} | {best:.3} | {:.3} | {cpu_sah:.3} | {:.4} | {} | {:.1} | {} | {cpu_ms:.1} | {:.1} |",
        builder.name(),
        first.sah_cost,
        first.sah_cost / cpu_sah,
        first.nodes,
        mb(first.bytes),
        first.peak_device_bytes.map_or("-".into(), |b| format!("{:.1}", mb(b))),
        cpu_ms / med,
    );
    let stages = stage_medians(&runs)
        .iter()
        .map(|(name, ms)| format!("{name} {ms:.3}"))
        .collect::<Vec<_>>()
        .join(", ");
    let extra = format!(
        "{stages}, levels {}, small roots {}, depth {}, wall {:.2} ms |",
        first.levels, first.small_roots, first.max_depth, runs[0].wall_ms
    );
    Ok((row, extra))
}
