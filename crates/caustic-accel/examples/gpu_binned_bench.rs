//! Build times of the GPU top-down SAH builders (`bvh-binned`,
//! `bvh-binned-staged`, `bvh-sweep`) on the standard scenes, beside the CPU
//! builders': for each scene and spec, two warm-up builds, then the median
//! and best of the timed builds (device events around every stage, the
//! host's waits for counts included), the median of each stage, and the
//! SAH cost, nodes, bytes and peak device memory; then the CPU builder of
//! the same spec (its wall time on this machine's cores, its SAH). Every
//! device tree is validated once (`DeviceBvh::validate`) and every timed
//! build must give the same tree size and SAH before anything is printed.
//!
//!     cargo run --release -p caustic-accel --example gpu_binned_bench -- [SCENE ...]
//!
//! SCENE is a standard scene's name (`tests/common/gpu_scenes.rs`; default
//! `bunny dragon dragon@16`), `@N` for N copies on a grid (`dragon@16`
//! is the OptiX anchor's 14 M-triangle scene). `CAUSTIC_BENCH_REPEATS=N`
//! sets the timed builds (default 7); `CAUSTIC_BENCH_SPECS=SPEC,...` the
//! specs (default `bvh-binned,bvh-binned-staged,bvh-sweep`).

#[path = "../tests/common/gpu_scenes.rs"]
mod scenes;

use caustic_accel::bvh::build::{DeviceBuildStats, upload_triangles};
use caustic_accel::bvh::triangle_bvh_cuda::DeviceBvh;
use caustic_accel::registry::SahBuilderConfig;
use caustic_accel::{BuildInput, sah_cost};
use caustic_gpu::Gpu;
use std::time::Instant;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// The median of each stage's per-build total, in first-seen order.
fn stage_medians(runs: &[DeviceBuildStats]) -> Vec<(&'static str, f64)> {
    let mut names: Vec<&'static str> = Vec::new();
    for (name, _) in &runs[0].stages {
        if !names.contains(name) {
            names.push(name);
        }
    }
    names
        .into_iter()
        .map(|name| {
            let per_run = runs.iter().map(|r| f64::from(r.stage_ms(name))).collect();
            (name, median(per_run))
        })
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
    let mut scene_specs: Vec<String> = std::env::args().skip(1).collect();
    if scene_specs.is_empty() {
        scene_specs = ["bunny", "dragon", "dragon@16"].map(String::from).to_vec();
    }
    let repeats: usize = std::env::var("CAUSTIC_BENCH_REPEATS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(7)
        .max(1);
    let specs: Vec<String> = std::env::var("CAUSTIC_BENCH_SPECS")
        .unwrap_or_else(|_| "bvh-binned,bvh-binned-staged,bvh-sweep".into())
        .split(',')
        .map(String::from)
        .collect();
    let gpu = Gpu::probe()?;
    println!("device: {}", gpu.info());
    // The CPU builds run in a pool of their own with large stacks: a
    // worker's default 2 MiB overflowed once in two runs, in the CPU's
    // `bvh-binned-staged` on 16 dragons with 16 threads (its parallel
    // binning kept its partial bins on the stack; main's 97b7e47 moves
    // them to the heap).
    let cpu_pool = rayon::ThreadPoolBuilder::new()
        .stack_size(64 << 20)
        .build()?;
    let mut rows = Vec::new();
    let mut stage_rows = Vec::new();
    for scene_spec in &scene_specs {
        let Some(scene) = load(scene_spec) else {
            println!("{scene_spec}: not found, skipped");
            continue;
        };
        let tris = &scene.triangles;
        let device = upload_triangles(&gpu, tris)?;
        for spec in &specs {
            let config = SahBuilderConfig::parse(spec)?;
            let (bvh, first) = DeviceBvh::build_with(&gpu, &device, config)?;
            bvh.validate(tris, config.max_leaf_size())
                .map_err(|e| format!("{spec} on {}: invalid tree: {e}", scene.name))?;
            drop(bvh);
            DeviceBvh::build_with(&gpu, &device, config)?;
            let mut runs = Vec::with_capacity(repeats);
            for _ in 0..repeats {
                let (bvh, stats) = DeviceBvh::build_with(&gpu, &device, config)?;
                drop(bvh);
                if (stats.nodes, stats.sah_cost) != (first.nodes, first.sah_cost) {
                    return Err(format!("{spec} on {}: builds differ", scene.name).into());
                }
                runs.push(stats);
            }
            let times: Vec<f64> = runs.iter().map(|r| f64::from(r.build_ms)).collect();
            let best = times.iter().copied().fold(f64::INFINITY, f64::min);
            let med = median(times);
            let start = Instant::now();
            let cpu = cpu_pool.install(|| {
                config
                    .cpu_builder()
                    .build(&BuildInput::from_triangles(tris))
            });
            let cpu_ms = start.elapsed().as_secs_f64() * 1e3;
            let cpu_sah = sah_cost(&cpu);
            let mb = |b: usize| b as f64 / f64::from(1 << 20);
            let row = format!(
                "| {} | {} | {spec} | {med:.2} | {best:.2} | {cpu_ms:.1} | {:.1} | {:.3} | {cpu_sah:.3} | {:+.2} % | {} | {:.1} | {} |",
                scene.name,
                tris.len(),
                cpu_ms / med,
                first.sah_cost,
                100.0 * (f64::from(first.sah_cost) / f64::from(cpu_sah) - 1.0),
                first.nodes,
                mb(first.bytes),
                first
                    .peak_device_bytes
                    .map_or("-".into(), |b| format!("{:.1}", mb(b))),
            );
            println!("{row}");
            rows.push(row);
            let stages: Vec<String> = stage_medians(&runs)
                .iter()
                .map(|(name, ms)| format!("{name} {ms:.2}"))
                .collect();
            stage_rows.push(format!(
                "| {} | {spec} | {} | {} levels, {} small roots, depth {}, wall {:.1} ms |",
                scene.name,
                stages.join(", "),
                first.iterations,
                first.small_roots,
                first.height,
                runs[0].wall_ms
            ));
        }
    }
    println!(
        "\nGPU builds: median and best of {repeats} after 2 warm-ups (device events, host waits included); CPU: one build, wall time\n"
    );
    println!(
        "| scene | tris | spec | GPU ms | best | CPU ms | CPU/GPU | SAH GPU | SAH CPU | GPU vs CPU | nodes | MB | peak MB |"
    );
    println!("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in &rows {
        println!("{r}");
    }
    println!("\n| scene | spec | stage medians (ms) | shape |\n|---|---|---|---|");
    for r in &stage_rows {
        println!("{r}");
    }
    Ok(())
}
