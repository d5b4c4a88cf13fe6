//! Device build times of the GPU builders, stage by stage:
//!
//! `gpu_build_timing [SCENES] [SPECS] [REPS]`
//!
//! `SCENES` is a comma-separated list of files under the scenes folder
//! (default `bunny/bun_zipper.ply,dragon/dragon_vrip.ply`), each optionally
//! followed by `*N` for N copies on a grid (`dragon/dragon_vrip.ply*16`,
//! the OptiX anchor's 14 M-triangle scene); `SPECS` registry specs
//! (default `lbvh,lbvh:bits=63,ploc,hlbvh`); `REPS` timed builds per spec
//! after two warm-up builds (default 15). The triangles are uploaded once
//! per scene; each build starts from them, as a renderer's would.
//!
//! Prints, per scene and spec, the median and best device time (events,
//! host waits included), the median of each stage, the SAH cost, nodes,
//! the result's size and the peak device memory of the build. Results are
//! checked (node count and SAH the same every run) before they are timed.

use caustic_accel::bvh::build::{DeviceBuildStats, upload_triangles};
use caustic_accel::bvh::triangle_bvh_cuda::DeviceBvh;
use caustic_accel::registry::DeviceBuilderConfig;
use caustic_geom::protocol::replicate_grid;
use caustic_gpu::Gpu;

fn main() {
    let mut args = std::env::args().skip(1);
    let scenes = args
        .next()
        .unwrap_or_else(|| "bunny/bun_zipper.ply,dragon/dragon_vrip.ply".into());
    let specs = args
        .next()
        .unwrap_or_else(|| "lbvh,lbvh:bits=63,ploc,hlbvh".into());
    let reps: usize = args.next().map_or(15, |s| s.parse().expect("repetitions"));
    let gpu = match Gpu::probe() {
        Ok(gpu) => gpu,
        Err(e) => {
            eprintln!("gpu_build_timing: {e}");
            return;
        }
    };
    println!("device: {}", gpu.info());
    let mut rows = Vec::new();
    for scene in scenes.split(',') {
        let (file, copies) = match scene.split_once('*') {
            Some((file, n)) => (file, n.parse::<usize>().expect("copies")),
            None => (scene, 1),
        };
        let Some(path) = caustic_scene::data_dirs::scene_file(file) else {
            continue;
        };
        let mut tris = caustic_scene::Scene::load(&path)
            .expect("scene loads")
            .triangles();
        if copies > 1 {
            tris = replicate_grid(&tris, copies);
        }
        let device = upload_triangles(&gpu, &tris).expect("upload");
        for spec in specs.split(',') {
            let config = DeviceBuilderConfig::parse(spec).expect("a GPU spec");
            let mut runs: Vec<DeviceBuildStats> = Vec::new();
            for rep in 0..reps + 2 {
                let (bvh, stats) = DeviceBvh::build_with(&gpu, &device, config).expect("build");
                drop(bvh);
                if let Some(first) = runs.first() {
                    assert_eq!(
                        (first.nodes, first.sah_cost),
                        (stats.nodes, stats.sah_cost),
                        "{spec}: builds differ"
                    );
                }
                if rep >= 2 {
                    runs.push(stats);
                }
            }
            rows.push(row(scene, spec, &runs));
        }
    }
    println!(
        "| scene | spec | median ms | best ms | stages (median ms) | SAH | nodes | MB | peak MB | iters |"
    );
    println!("|---|---|---:|---:|---|---:|---:|---:|---:|---:|");
    for r in rows {
        println!("{r}");
    }
}

fn median(mut v: Vec<f32>) -> f32 {
    v.sort_by(f32::total_cmp);
    v[v.len() / 2]
}

/// One table row over the timed runs of a spec.
fn row(scene: &str, spec: &str, runs: &[DeviceBuildStats]) -> String {
    let last = runs.last().expect("at least one run");
    let total = median(runs.iter().map(|s| s.build_ms).collect());
    let best = runs
        .iter()
        .map(|s| s.build_ms)
        .fold(f32::INFINITY, f32::min);
    let mut stage_names: Vec<&str> = Vec::new();
    for (name, _) in &last.stages {
        if !stage_names.contains(name) {
            stage_names.push(name);
        }
    }
    let stages: Vec<String> = stage_names
        .iter()
        .map(|name| {
            let ms = median(runs.iter().map(|s| s.stage_ms(name)).collect());
            format!("{name} {ms:.3}")
        })
        .collect();
    format!(
        "| {scene} ({} tris) | {spec} | {total:.3} | {best:.3} | {} | {:.3} | {} | {:.1} | {} | {} |",
        last.prims,
        stages.join(", "),
        last.sah_cost,
        last.nodes,
        last.bytes as f64 / 1e6,
        last.peak_device_bytes
            .map_or("n/a".into(), |b| format!("{:.1}", b as f64 / 1e6)),
        last.iterations,
    )
}
