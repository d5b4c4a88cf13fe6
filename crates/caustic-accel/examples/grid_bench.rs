//! The uniform grid on the GPU against the binary BVH traversal: for each
//! scene, the grid built on the device (box and exact overlap; device time
//! of the whole build and of each stage, median of the timed runs after
//! warm-ups; cells, references, bytes, peak device memory), checked equal
//! to the CPU grid, and traced with the anchor protocol's primary (8x4
//! tiles), AO and diffuse rays at 1920x1080, generated on the device, by
//! the grid's 3D-DDA and by the BVH [`Tracer`] (the `bvh-binned` tree built
//! on the CPU), every result of the grid checked against the BVH's before
//! anything is timed. Prints markdown tables.
//!
//!     cargo run --release -p caustic-accel --example grid_bench -- [SCENE ...]
//!
//! SCENE is a standard scene's name (`tests/common/gpu_scenes.rs`; default:
//! bunny, sponza, conference, sibenik, dragon). `CAUSTIC_BENCH_REPEATS=N`
//! sets the timed repetitions (20; 3 warm-ups).

#[path = "../tests/common/gpu_scenes.rs"]
mod scenes;

use std::cell::RefCell;
use std::time::Instant;

use caustic_accel::TriangleBvh;
use caustic_accel::bvh::traverse_cuda::{GpuHit, GpuRay, Tracer};
use caustic_accel::bvh::triangle_bvh_cuda::{DeviceBvh, GpuTriangle};
use caustic_accel::grid::build_cuda::{GpuGrid, GridBuildStats};
use caustic_accel::grid::dda_cuda::GridTracer;
use caustic_accel::grid::validate_cuda::first_difference;
use caustic_accel::grid::{GridConfig, UniformGrid};
use caustic_accel::protocol_cuda as rays;
use caustic_geom::protocol;
use caustic_gpu::bench::{Repeats, Timing, time_device};
use caustic_gpu::{DeviceBuffer, Gpu, GpuError};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

const WIDTH: u32 = 1920;
const HEIGHT: u32 = 1080;

/// One configuration's build on one scene.
struct Build {
    label: &'static str,
    timing: Timing,
    /// Per-stage medians over the timed runs.
    stages: GridBuildStats,
    cpu_ms: f64,
    /// Mrays/s of the grid (median) per pass: primary, AO, diffuse.
    trace: [f64; 3],
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
    let grid_tracer = GridTracer::new(&gpu)?;
    let mut bvh_tracer = Tracer::new(&gpu)?;
    use caustic_accel::kernels::grid_dda as dda;
    println!(
        "grid closest: {} blocks of 128 threads per multiprocessor, any: {}",
        gpu.resident_blocks(dda::GRID_TRACE_CLOSEST, 128)?,
        gpu.resident_blocks(dda::GRID_TRACE_ANY, 128)?
    );
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

        let mut builds = Vec::new();
        for (label, config) in [
            ("box", GridConfig::DEFAULT),
            (
                "exact",
                GridConfig {
                    exact_overlap: true,
                    ..GridConfig::DEFAULT
                },
            ),
        ] {
            let start = Instant::now();
            let cpu = UniformGrid::build_with(tris, &config);
            let cpu_ms = start.elapsed().as_secs_f64() * 1e3;
            let (timing, stages, grid) = time_build(&gpu, repeats, &device_tris, &config)?;
            let down = grid.download()?;
            first_difference(&down, &cpu, &config)
                .map_err(|e| format!("{name} {label}: the GPU grid differs from the CPU's: {e}"))?;
            println!(
                "{name} {label}: {} triangles, res {:?}, {} refs, {:.1} MB, peak {:.1} MB; build {:.3} ms median ({:.3} best; stages {:.3} bounds, {:.3} count, {:.3} scan, {:.3} write, {:.3} sort, {:.3} ranges, {:.3} culling), CPU {:.1} ms",
                tris.len(),
                down.res,
                stages.references,
                stages.bytes as f64 / 1e6,
                stages.peak_bytes as f64 / 1e6,
                timing.median_ms,
                timing.best_ms,
                stages.bounds_ms,
                stages.count_ms,
                stages.scan_ms,
                stages.write_ms,
                stages.sort_ms,
                stages.ranges_ms,
                stages.culling_ms,
                cpu_ms
            );
            let mut trace = [0.0; 3];
            for (p, (pass, rays)) in passes.iter().enumerate() {
                let got = results(&gpu, p, rays, |rays, out| match out {
                    Out::Hits(hits) if p == 0 => {
                        grid_tracer.intersect_image(&grid, rays, WIDTH, hits)
                    }
                    Out::Hits(hits) => grid_tracer.intersect(&grid, rays, hits),
                    Out::Occluded(o) => grid_tracer.occluded(&grid, rays, o),
                })?;
                let differ = got
                    .chunks(if p == 1 { 1 } else { 4 })
                    .zip(bvh_results[p].chunks(if p == 1 { 1 } else { 4 }))
                    .filter(|(a, b)| a != b)
                    .count();
                if differ > 0 {
                    return Err(format!(
                        "{name} {label} {pass}: {differ} results differ from the BVH's"
                    )
                    .into());
                }
                let (_, timing) = time_pass(&gpu, repeats, p, rays, |rays, out| match out {
                    Out::Hits(hits) if p == 0 => {
                        grid_tracer.intersect_image(&grid, rays, WIDTH, hits)
                    }
                    Out::Hits(hits) => grid_tracer.intersect(&grid, rays, hits),
                    Out::Occluded(o) => grid_tracer.occluded(&grid, rays, o),
                })?;
                trace[p] = timing.millions_per_s(rays.len()).0;
                println!(
                    "{name} {label} {pass}: grid {:.3} ms median ({:.0} Mrays/s, {:.2}x the BVH's time), identical to the BVH",
                    timing.median_ms,
                    trace[p],
                    bvh_rates[p] / trace[p]
                );
            }
            builds.push(Build {
                label,
                timing,
                stages,
                cpu_ms,
                trace,
            });
        }
        rows.push((loaded.name.clone(), tris.len(), bvh_ms, bvh_rates, builds));
    }
    println!(
        "\n| scene | tris | overlap | cells | refs | MB | peak MB | GPU build ms | count / scan / write / sort / ranges / culling ms | CPU build ms |"
    );
    println!("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: |");
    for (name, tris, _, _, builds) in &rows {
        for b in builds {
            let s = &b.stages;
            println!(
                "| {name} | {tris} | {} | {} | {} | {:.1} | {:.1} | {:.3} | {:.3} / {:.3} / {:.3} / {:.3} / {:.3} / {:.3} | {:.1} |",
                b.label,
                s.cells,
                s.references,
                s.bytes as f64 / 1e6,
                s.peak_bytes as f64 / 1e6,
                b.timing.median_ms,
                s.count_ms,
                s.scan_ms,
                s.write_ms,
                s.sort_ms,
                s.ranges_ms,
                s.culling_ms,
                b.cpu_ms
            );
        }
    }
    println!(
        "\n| scene | structure | primary Mrays/s | AO Mrays/s | diffuse Mrays/s | BVH time / grid time (primary, AO, diffuse) |"
    );
    println!("| --- | --- | ---: | ---: | ---: | --- |");
    for (name, _, bvh_ms, bvh, builds) in &rows {
        println!(
            "| {name} | BVH (bvh-binned, CPU build {bvh_ms:.0} ms) | {:.0} | {:.0} | {:.0} | 1 |",
            bvh[0], bvh[1], bvh[2]
        );
        for b in builds {
            println!(
                "| {name} | grid ({}) | {:.0} | {:.0} | {:.0} | {:.2}, {:.2}, {:.2} |",
                b.label,
                b.trace[0],
                b.trace[1],
                b.trace[2],
                b.trace[0] / bvh[0],
                b.trace[1] / bvh[1],
                b.trace[2] / bvh[2]
            );
        }
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

/// Times whole builds (a fresh copy of the triangles each, made outside
/// the timed region); the per-stage medians of the timed runs; the last grid.
fn time_build(
    gpu: &Gpu,
    repeats: Repeats,
    tris: &DeviceBuffer<GpuTriangle>,
    config: &GridConfig,
) -> std::result::Result<(Timing, GridBuildStats, GpuGrid), GpuError> {
    let input = RefCell::new(None);
    let last = RefCell::new(None);
    let stats = RefCell::new(Vec::new());
    let timing = time_device(
        gpu,
        repeats,
        || {
            let mut copy = DeviceBuffer::uninit(gpu, "bench triangles (copy)", tris.len())?;
            copy.copy_from(tris)?;
            *input.borrow_mut() = Some(copy);
            Ok(())
        },
        || {
            let copy = input.borrow_mut().take().expect("prepared");
            let grid = GpuGrid::build(copy, config)?;
            stats.borrow_mut().push(*grid.stats());
            *last.borrow_mut() = Some(grid);
            Ok(())
        },
    )?;
    let runs = stats.into_inner();
    let timed = &runs[runs.len() - repeats.repeats..];
    let median = |f: fn(&GridBuildStats) -> f64| {
        let mut v: Vec<f64> = timed.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let stages = GridBuildStats {
        bounds_ms: median(|s| s.bounds_ms),
        count_ms: median(|s| s.count_ms),
        scan_ms: median(|s| s.scan_ms),
        write_ms: median(|s| s.write_ms),
        sort_ms: median(|s| s.sort_ms),
        ranges_ms: median(|s| s.ranges_ms),
        culling_ms: median(|s| s.culling_ms),
        total_ms: median(|s| s.total_ms),
        ..timed[0]
    };
    Ok((timing, stages, last.into_inner().expect("built")))
}
