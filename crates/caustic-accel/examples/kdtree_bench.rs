//! The SAH kd-tree on the GPU against the binary BVH traversal (Zhou et
//! al. 2008, Table 2: GPU build and trace against the CPU builder): for
//! each scene, the kd-tree built on the device (device time of the whole
//! build and of each stage, median of the timed runs after warm-ups;
//! nodes, references, SAH cost, bytes, peak device memory), checked to be
//! valid and the CPU builder's tree, then traced with the anchor protocol's
//! primary (8x4 tiles), AO and diffuse rays at 1920x1080, generated on the
//! device, by the kd-tree traversal and by the BVH [`Tracer`] (the
//! `bvh-binned` tree built on the CPU), every kd-tree result checked
//! against the BVH's before anything is timed. Prints markdown tables.
//!
//!     cargo run --release -p caustic-accel --example kdtree_bench -- [SCENE ...]
//!
//! SCENE is a standard scene's name (`tests/common/gpu_scenes.rs`; default:
//! bunny, sponza, conference, sibenik, dragon). `CAUSTIC_BENCH_REPEATS=N`
//! sets the timed repetitions (20; 3 warm-ups).

#[path = "../tests/common/gpu_scenes.rs"]
mod scenes;

use std::cell::RefCell;
use std::time::Instant;

use caustic_accel::Accel;
use caustic_accel::TriangleBvh;
use caustic_accel::bvh::traverse_cuda::{GpuHit, GpuRay, Tracer};
use caustic_accel::bvh::triangle_bvh_cuda::{DeviceBvh, GpuTriangle};
use caustic_accel::kdtree::build_cuda::{GpuKdTree, KdBuildStats};
use caustic_accel::kdtree::traverse_cuda::KdTracer;
use caustic_accel::kdtree::{KdTreeConfig, TriangleKdTree};
use caustic_accel::protocol_cuda as rays;
use caustic_geom::protocol;
use caustic_gpu::bench::{Repeats, Timing, time_device};
use caustic_gpu::{DeviceBuffer, Gpu, GpuError};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

const WIDTH: u32 = 1920;
const HEIGHT: u32 = 1080;

/// One scene's figures.
struct Row {
    name: String,
    tris: usize,
    timing: Timing,
    /// Per-stage medians over the timed runs.
    stages: KdBuildStats,
    cpu_ms: f64,
    cpu_sah: f32,
    bvh_ms: f64,
    /// Mrays/s (median) per pass: primary, AO, diffuse.
    bvh: [f64; 3],
    kd: [f64; 3],
}

fn main() -> Result<()> {
    let mut names: Vec<String> = std::env::args().skip(1).collect();
    if names.is_empty() {
        names = ["bunny", "sponza", "conference", "sibenik", "dragon"]
            .map(String::from)
            .to_vec();
    }
    let repeats = Repeats {
        warm_up: 3,
        repeats: std::env::var("CAUSTIC_BENCH_REPEATS")
            .ok()
            .and_then(|r| r.parse().ok())
            .unwrap_or(20),
    };
    let gpu = Gpu::probe()?;
    println!("device: {}", gpu.info());
    let kd_tracer = KdTracer::new(&gpu)?;
    let mut bvh_tracer = Tracer::new(&gpu)?;
    let config = KdTreeConfig::DEFAULT;
    let mut rows = Vec::new();
    for name in &names {
        let Some(loaded) = scenes::scene(name).load() else {
            println!("{name}: not unpacked, skipped");
            continue;
        };
        let tris = &loaded.triangles;
        let device_tris: Vec<GpuTriangle> = tris
            .iter()
            .enumerate()
            .map(|(i, t)| GpuTriangle::new(t, i as u32))
            .collect();
        let device_tris = DeviceBuffer::from_slice(&gpu, "bench triangles", &device_tris)?;

        // The BVH and the protocol's rays, generated on the device.
        let start = Instant::now();
        let accel = TriangleBvh::build(tris);
        let bvh_ms = start.elapsed().as_secs_f64() * 1e3;
        let bvh = DeviceBvh::upload(&gpu, &accel)?;
        let camera = scenes::gpu_camera(&loaded.camera);
        let primary = rays::primary_rays(&gpu, &camera, WIDTH, HEIGHT)?;
        let mut hits = DeviceBuffer::<GpuHit>::uninit(&gpu, "primary hits", primary.len())?;
        bvh_tracer.intersect(&bvh, &primary, &mut hits)?;
        let diag = protocol::scene_diagonal(tris);
        let secondary = rays::secondary_rays(&bvh, &primary, &hits, diag)?;
        let passes: [(&str, &DeviceBuffer<GpuRay>); 3] = [
            ("primary", &primary),
            ("AO", &secondary.ao),
            ("diffuse", &secondary.diffuse),
        ];
        let mut bvh_rates = [0.0; 3];
        for (p, (pass, rays)) in passes.iter().enumerate() {
            let timing = time_pass(&gpu, repeats, p, rays, |rays, out| match out {
                Out::Hits(hits) if p == 0 => bvh_tracer.intersect_image(&bvh, rays, WIDTH, hits),
                Out::Hits(hits) => bvh_tracer.intersect(&bvh, rays, hits),
                Out::Occluded(o) => bvh_tracer.occluded(&bvh, rays, o),
            })?;
            bvh_rates[p] = timing.1.millions_per_s(rays.len()).0;
            println!(
                "{name} {pass}: {} rays, BVH {:.3} ms median ({:.0} Mrays/s)",
                rays.len(),
                timing.1.median_ms,
                bvh_rates[p]
            );
        }
        let bvh_results: Vec<Vec<u32>> = passes
            .iter()
            .enumerate()
            .map(|(p, (_, rays))| {
                results(&gpu, p, rays, |rays, out| match out {
                    Out::Hits(hits) => bvh_tracer.intersect(&bvh, rays, hits),
                    Out::Occluded(o) => bvh_tracer.occluded(&bvh, rays, o),
                })
            })
            .collect::<std::result::Result<_, _>>()?;

        let start = Instant::now();
        let cpu = TriangleKdTree::build_with(tris, config);
        let cpu_ms = start.elapsed().as_secs_f64() * 1e3;
        let (timing, stages, tree) = time_build(&gpu, repeats, &device_tris, &config)?;
        let down = tree.download()?;
        down.validate(tris)
            .map_err(|e| format!("{name}: the GPU kd-tree is invalid: {e}"))?;
        let shape = down.shape();
        let cpu_shape = cpu.tree().shape();
        if (shape.nodes, shape.references) != (cpu_shape.nodes, cpu_shape.references) {
            return Err(format!(
                "{name}: the GPU kd-tree ({shape:?}) is not the CPU's ({cpu_shape:?})"
            )
            .into());
        }
        println!(
            "{name}: {} triangles, {} nodes, {} refs, depth {}, SAH {:.2} (CPU {:.2}), {:.1} MB, peak {:.1} MB; build {:.3} ms median ({:.3} best; stages {:.3} bounds, {:.3} large ({} levels), {:.3} small ({} roots), {:.3} culling; host {:.3} ms), CPU {:.1} ms",
            tris.len(),
            stages.nodes,
            stages.references,
            stages.max_depth,
            stages.sah_cost,
            cpu.stats().sah_cost,
            stages.bytes as f64 / 1e6,
            stages.peak_bytes as f64 / 1e6,
            timing.median_ms,
            timing.best_ms,
            stages.bounds_ms,
            stages.large_ms,
            stages.levels,
            stages.small_ms,
            stages.small_roots,
            stages.culling_ms,
            stages.total_ms,
            cpu_ms
        );
        let mut kd = [0.0; 3];
        for (p, (pass, rays)) in passes.iter().enumerate() {
            let got = results(&gpu, p, rays, |rays, out| match out {
                Out::Hits(hits) if p == 0 => kd_tracer.intersect_image(&tree, rays, WIDTH, hits),
                Out::Hits(hits) => kd_tracer.intersect(&tree, rays, hits),
                Out::Occluded(o) => kd_tracer.occluded(&tree, rays, o),
            })?;
            let differ = got
                .chunks(if p == 1 { 1 } else { 4 })
                .zip(bvh_results[p].chunks(if p == 1 { 1 } else { 4 }))
                .filter(|(a, b)| a != b)
                .count();
            if differ > 0 {
                return Err(
                    format!("{name} {pass}: {differ} results differ from the BVH's").into(),
                );
            }
            let (_, timing) = time_pass(&gpu, repeats, p, rays, |rays, out| match out {
                Out::Hits(hits) if p == 0 => kd_tracer.intersect_image(&tree, rays, WIDTH, hits),
                Out::Hits(hits) => kd_tracer.intersect(&tree, rays, hits),
                Out::Occluded(o) => kd_tracer.occluded(&tree, rays, o),
            })?;
            kd[p] = timing.millions_per_s(rays.len()).0;
            println!(
                "{name} {pass}: kd-tree {:.3} ms median ({:.0} Mrays/s, {:.2}x the BVH's time), identical to the BVH",
                timing.median_ms,
                kd[p],
                bvh_rates[p] / kd[p]
            );
        }
        rows.push(Row {
            name: loaded.name.clone(),
            tris: tris.len(),
            timing,
            stages,
            cpu_ms,
            cpu_sah: cpu.stats().sah_cost,
            bvh_ms,
            bvh: bvh_rates,
            kd,
        });
    }
    println!(
        "\n| scene | tris | nodes | refs | SAH (CPU) | MB | peak MB | GPU build ms | bounds / large / small / culling ms | levels | small roots | CPU build ms |"
    );
    println!("| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: |");
    for r in &rows {
        let s = &r.stages;
        println!(
            "| {} | {} | {} | {} | {:.2} ({:.2}) | {:.1} | {:.1} | {:.3} | {:.3} / {:.3} / {:.3} / {:.3} | {} | {} | {:.1} |",
            r.name,
            r.tris,
            s.nodes,
            s.references,
            s.sah_cost,
            r.cpu_sah,
            s.bytes as f64 / 1e6,
            s.peak_bytes as f64 / 1e6,
            r.timing.median_ms,
            s.bounds_ms,
            s.large_ms,
            s.small_ms,
            s.culling_ms,
            s.levels,
            s.small_roots,
            r.cpu_ms
        );
    }
    println!(
        "\n| scene | structure | primary Mrays/s | AO Mrays/s | diffuse Mrays/s | kd-tree rate / BVH rate (primary, AO, diffuse) |"
    );
    println!("| --- | --- | ---: | ---: | ---: | --- |");
    for r in &rows {
        println!(
            "| {} | BVH (bvh-binned, CPU build {:.0} ms) | {:.0} | {:.0} | {:.0} | 1 |",
            r.name, r.bvh_ms, r.bvh[0], r.bvh[1], r.bvh[2]
        );
        println!(
            "| {} | kdtree (GPU build) | {:.0} | {:.0} | {:.0} | {:.2}, {:.2}, {:.2} |",
            r.name,
            r.kd[0],
            r.kd[1],
            r.kd[2],
            r.kd[0] / r.bvh[0],
            r.kd[1] / r.bvh[1],
            r.kd[2] / r.bvh[2]
        );
    }
    Ok(())
}

/// Where a pass writes: hits (primary, diffuse) or occlusion flags (AO).
enum Out<'a> {
    Hits(&'a mut DeviceBuffer<GpuHit>),
    Occluded(&'a mut DeviceBuffer<u32>),
}

/// Output buffers for pass `p` (1 is AO).
fn outputs(
    gpu: &Gpu,
    p: usize,
    n: usize,
) -> std::result::Result<(DeviceBuffer<GpuHit>, DeviceBuffer<u32>), GpuError> {
    let hits = DeviceBuffer::uninit(gpu, "bench hits", if p == 1 { 0 } else { n })?;
    let occluded = DeviceBuffer::uninit(gpu, "bench occlusion", if p == 1 { n } else { 0 })?;
    Ok((hits, occluded))
}

/// Pass `p`'s results as words, poisoned first.
fn results(
    gpu: &Gpu,
    p: usize,
    rays: &DeviceBuffer<GpuRay>,
    mut trace: impl FnMut(&DeviceBuffer<GpuRay>, Out<'_>) -> std::result::Result<(), GpuError>,
) -> std::result::Result<Vec<u32>, GpuError> {
    let (mut hits, mut occluded) = outputs(gpu, p, rays.len())?;
    if p == 1 {
        occluded.poison()?;
        trace(rays, Out::Occluded(&mut occluded))?;
        occluded.download()
    } else {
        hits.poison()?;
        trace(rays, Out::Hits(&mut hits))?;
        Ok(bytemuck::cast_slice(&hits.download()?).to_vec())
    }
}

/// Times pass `p` with device events.
fn time_pass(
    gpu: &Gpu,
    repeats: Repeats,
    p: usize,
    rays: &DeviceBuffer<GpuRay>,
    mut trace: impl FnMut(&DeviceBuffer<GpuRay>, Out<'_>) -> std::result::Result<(), GpuError>,
) -> std::result::Result<(usize, Timing), GpuError> {
    let (mut hits, mut occluded) = outputs(gpu, p, rays.len())?;
    let timing = time_device(
        gpu,
        repeats,
        || Ok(()),
        || {
            if p == 1 {
                trace(rays, Out::Occluded(&mut occluded))
            } else {
                trace(rays, Out::Hits(&mut hits))
            }
        },
    )?;
    Ok((rays.len(), timing))
}

/// Times whole builds; the per-stage medians of the timed runs; the last
/// tree.
fn time_build(
    gpu: &Gpu,
    repeats: Repeats,
    tris: &DeviceBuffer<GpuTriangle>,
    config: &KdTreeConfig,
) -> std::result::Result<(Timing, KdBuildStats, GpuKdTree), GpuError> {
    let last = RefCell::new(None);
    let stats = RefCell::new(Vec::new());
    let timing = time_device(
        gpu,
        repeats,
        || Ok(()),
        || {
            let tree = GpuKdTree::build(gpu, tris, config)?;
            stats.borrow_mut().push(*tree.stats());
            *last.borrow_mut() = Some(tree);
            Ok(())
        },
    )?;
    let runs = stats.into_inner();
    let timed = &runs[runs.len() - repeats.repeats..];
    let median = |f: fn(&KdBuildStats) -> f64| {
        let mut v: Vec<f64> = timed.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let stages = KdBuildStats {
        bounds_ms: median(|s| s.bounds_ms),
        large_ms: median(|s| s.large_ms),
        small_ms: median(|s| s.small_ms),
        culling_ms: median(|s| s.culling_ms),
        total_ms: median(|s| s.total_ms),
        ..timed[0]
    };
    Ok((timing, stages, last.into_inner().expect("built")))
}
