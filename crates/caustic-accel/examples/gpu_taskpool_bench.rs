//! Build times of `bvh-taskpool` (the SAH BVH on the GPU task pool,
//! Vinkler et al. 2013) beside the GPU `bvh-binned`, in the same run, on
//! the standard scenes: per scene and spec two warm-up builds, then the
//! median and best of the timed builds (device events), the median of each
//! stage, the SAH cost, nodes, peak device memory and, for the task pool,
//! the paper's Table 2 analogue: the warps' cycles on chunks against those
//! managing the pool and idle. Every tree is validated once.
//!
//!     cargo run --release -p caustic-accel --example gpu_taskpool_bench -- [SCENE ...]
//!
//! Default scenes: bunny sponza conference dragon.
//! `CAUSTIC_BENCH_REPEATS=N` sets the timed builds (default 7).

#[path = "../tests/common/gpu_scenes.rs"]
mod scenes;

use caustic_accel::bvh::build::{DeviceBuildStats, upload_triangles};
use caustic_accel::bvh::triangle_bvh_cuda::DeviceBvh;
use caustic_accel::registry::DeviceBuilderConfig;
use caustic_gpu::Gpu;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

const SPECS: &[&str] = &["bvh-taskpool", "bvh-binned"];

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() -> Result<()> {
    let gpu = Gpu::probe()?;
    println!("device: {}", gpu.info());
    let mut names: Vec<String> = std::env::args().skip(1).collect();
    if names.is_empty() {
        names = ["bunny", "sponza", "conference", "dragon"]
            .map(String::from)
            .to_vec();
    }
    let repeats: usize = std::env::var("CAUSTIC_BENCH_REPEATS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(7)
        .max(1);
    let mut rows = Vec::new();
    for name in &names {
        let Some(scene) = scenes::scene(name).load() else {
            println!("{name}: not found (CAUSTIC_SCENES)");
            continue;
        };
        let device = upload_triangles(&gpu, &scene.triangles)?;
        for &spec in SPECS {
            let config = DeviceBuilderConfig::parse(spec)?;
            let (bvh, _) = DeviceBvh::build_with(&gpu, &device, config)?;
            bvh.validate(&scene.triangles, config.max_leaf_size())
                .map_err(|e| format!("{name} {spec}: {e}"))?;
            drop(bvh);
            DeviceBvh::build_with(&gpu, &device, config)?;
            let runs: Vec<DeviceBuildStats> = (0..repeats)
                .map(|_| DeviceBvh::build_with(&gpu, &device, config).map(|(_, s)| s))
                .collect::<std::result::Result<_, _>>()?;
            let times: Vec<f64> = runs.iter().map(|r| f64::from(r.build_ms)).collect();
            let best = times.iter().copied().fold(f64::INFINITY, f64::min);
            let last = runs.last().expect("one run at least");
            let stages: Vec<String> = last
                .stages
                .iter()
                .map(|(stage, _)| *stage)
                .fold(Vec::new(), |mut seen, s| {
                    if !seen.contains(&s) {
                        seen.push(s);
                    }
                    seen
                })
                .into_iter()
                .map(|stage| {
                    let ms = median(runs.iter().map(|r| f64::from(r.stage_ms(stage))).collect());
                    format!("{stage} {ms:.3}")
                })
                .collect();
            println!(
                "{name} {spec}: median {:.3} ms, best {best:.3} ms; {}",
                median(times.clone()),
                stages.join(", ")
            );
            let pool = last.pool;
            if let Some(p) = pool {
                println!(
                    "  pool: {p}, overhead {:.3} pool cycles per work cycle",
                    p.overhead()
                );
            }
            rows.push(format!(
                "| {name} | {} | {spec} | {:.3} | {best:.3} | {:.2} | {} | {} | {} |",
                scene.triangles.len(),
                median(times),
                last.sah_cost,
                last.nodes,
                last.peak_device_bytes
                    .map_or("-".into(), |b| format!("{:.1}", b as f64 / 1048576.0)),
                pool.map_or("-".into(), |p| format!(
                    "{:.1} / {:.1} / {:.1}",
                    100.0 * p.work_share(),
                    100.0 * p.pool_share(),
                    100.0 * p.idle_share()
                )),
            ));
        }
    }
    println!();
    println!(
        "| scene | tris | spec | build ms (median) | best | SAH | nodes | peak MiB | work / pool / idle % |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for row in rows {
        println!("{row}");
    }
    Ok(())
}
