//! The run of `caustic bench gpu` (flags in `bench_gpu.rs`): the
//! primitives, then every structure (`--accel`) on every scene: its build
//! by stage, quality and memory and its traversal passes, as markdown
//! tables and JSON. Compiled with the `cuda` feature only.

use crate::bench::{BenchScene, scene_specs};
use crate::bench_gpu::GpuBenchArgs;
use anyhow::{Context, Result, bail};
use caustic_accel::bvh::device_accel_cuda::GpuAccelSpec;
use caustic_accel::bvh::trace_bench_cuda::{self as trace_bench, Pass, TraceResult, TraceSettings};
use caustic_accel::protocol_cuda::PrimaryCamera;
use caustic_geom::protocol::ProtocolCamera;
use caustic_gpu::Gpu;
use caustic_gpu::bench::{self, PrimitiveResult, Repeats};
use serde_json::{Value, json};
use std::path::Path;

/// `--accel`'s list, each spec checked before any GPU work.
fn accel_specs(list: &str) -> Result<Vec<GpuAccelSpec>> {
    let specs: Vec<&str> = match list.trim() {
        "all" => crate::bench_gpu::ALL_STRUCTURES.to_vec(),
        other => split_specs(other),
    };
    specs
        .iter()
        .map(|spec| {
            spec.parse::<GpuAccelSpec>()
                .with_context(|| format!("--accel {spec}"))
        })
        .collect()
}

/// The SAH cost to two decimals; a dash for a structure with no tree
/// (the grid, whose measures are its cells and references).
fn sah_cell(cost: f32) -> String {
    if cost.is_nan() {
        "-".to_owned()
    } else {
        format!("{cost:.2}")
    }
}

/// Splits a comma-separated list of specs; a `bvh-wide:from=` spec keeps
/// its own parameters (they contain no commas either).
fn split_specs(list: &str) -> Vec<&str> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

/// One structure on one scene, with what the tables and the JSON need.
struct SceneRow {
    name: String,
    accel: String,
    camera: ProtocolCamera,
    result: TraceResult,
}

/// Opens CUDA device `ordinal` and measures what `args` asks.
pub fn run(args: GpuBenchArgs, ordinal: usize) -> Result<()> {
    if let Some(path) = &args.json {
        crate::output::check_writable(path)?;
    }
    // Parse every scene argument before the GPU work starts, so a typo
    // fails at once rather than after minutes of primitives.
    let scenes = scene_specs(&args.scene)?;
    let accels = accel_specs(&args.accel)?;
    let gpu = Gpu::open(ordinal).context("caustic bench gpu needs a CUDA GPU")?;
    println!("device: {}", gpu.info());
    let repeats = Repeats {
        warm_up: args.warm_up.into(),
        repeats: args.reps.into(),
    };

    let primitives = if args.log2_n > 0 {
        eprintln!("bench gpu: primitives on 2^{} elements", args.log2_n);
        bench::primitives(&gpu, 1 << args.log2_n, repeats)?
    } else {
        Vec::new()
    };

    let settings = trace_settings(&args);
    let mut rows = Vec::new();
    for spec in &scenes {
        let BenchScene {
            name,
            triangles,
            camera,
            ..
        } = spec.load(&args.camera, args.width, args.height)?;
        eprintln!("bench gpu: {name} ({} triangles)", triangles.len());
        let gpu_camera = primary_camera(&camera);
        for spec in &accels {
            eprintln!("bench gpu: {name}: {spec}");
            let result = trace_bench::trace_scene(&gpu, &triangles, spec, &gpu_camera, &settings)
                .with_context(|| format!("{spec} on {name}"))?;
            rows.push(SceneRow {
                name: name.clone(),
                accel: spec.to_string(),
                camera,
                result,
            });
        }
    }

    print_primitives(&primitives, args.warm_up.into());
    print_scenes(&gpu, &rows, &args);
    if let Some(path) = &args.json {
        write_json(path, &gpu, &primitives, &rows, &args)?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

/// The trace benchmark's settings from the flags.
fn trace_settings(args: &GpuBenchArgs) -> TraceSettings {
    TraceSettings {
        width: args.width,
        height: args.height,
        repeats: Repeats {
            warm_up: args.warm_up.into(),
            repeats: args.reps.into(),
        },
        check_every: args.check_every,
    }
}

/// The protocol's camera as the device's primary-ray kernel takes it.
fn primary_camera(camera: &ProtocolCamera) -> PrimaryCamera {
    PrimaryCamera {
        eye: camera.eye,
        look_at: camera.look_at,
        up: camera.up,
        fov_deg: camera.fov_deg,
    }
}

/// `--devices`: every scene and structure built and traced on all the
/// named GPUs at once, one thread each; each GPU's rates come from its own
/// device events while the others run, and their sum is the machine's.
pub fn run_devices(args: GpuBenchArgs) -> Result<()> {
    if args.scene.is_empty() {
        bail!("caustic bench gpu --devices traces scenes: name them with --scene");
    }
    let scenes = scene_specs(&args.scene)?;
    let accels = accel_specs(&args.accel)?;
    let available = caustic_gpu::device_count().context("caustic bench gpu needs a CUDA GPU")?;
    let mut ordinals = args.devices.clone().map(|d| d.0).unwrap_or_default();
    if ordinals.is_empty() {
        ordinals = (0..available).collect();
    }
    if let Some(&bad) = ordinals.iter().find(|&&n| n >= available) {
        bail!("--devices names GPU {bad}; this machine has {available}");
    }
    let gpus = ordinals
        .iter()
        .map(|&n| Gpu::open(n).with_context(|| format!("opening GPU {n}")))
        .collect::<Result<Vec<_>>>()?;
    for gpu in &gpus {
        println!("device: {}", gpu.info());
    }
    let settings = trace_settings(&args);
    println!(
        "\nEach GPU traces the whole protocol ({}x{} primary rays, then AO and diffuse) at the same time as the others; Mrays/s at the median of {} timed runs (device events)\n",
        args.width, args.height, args.reps
    );
    println!("| scene | structure | GPU | primary | AO | diffuse |");
    println!("|---|---|---|---:|---:|---:|");
    for spec in &scenes {
        let BenchScene {
            name,
            triangles,
            camera,
            ..
        } = spec.load(&args.camera, args.width, args.height)?;
        let camera = primary_camera(&camera);
        for accel in &accels {
            eprintln!("bench gpu: {name}: {accel} on {} GPUs", gpus.len());
            let results: Vec<Result<TraceResult>> = std::thread::scope(|scope| {
                let threads: Vec<_> = gpus
                    .iter()
                    .map(|gpu| {
                        let (triangles, camera, settings) = (&triangles, &camera, &settings);
                        scope.spawn(move || {
                            trace_bench::trace_scene(gpu, triangles, accel, camera, settings)
                                .map_err(anyhow::Error::from)
                        })
                    })
                    .collect();
                threads
                    .into_iter()
                    .map(|t| {
                        t.join()
                            .unwrap_or_else(|_| Err(anyhow::anyhow!("a GPU's thread panicked")))
                    })
                    .collect()
            });
            let mut total = [0.0; 3];
            for (&ordinal, result) in ordinals.iter().zip(results) {
                let r = result.with_context(|| format!("{accel} on {name}, GPU {ordinal}"))?;
                let rates = [&r.primary, &r.ao, &r.diffuse].map(|p| p.mrays_per_s().0);
                for (sum, rate) in total.iter_mut().zip(rates) {
                    *sum += rate;
                }
                println!(
                    "| {name} | {accel} | {ordinal} | {:.0} | {:.0} | {:.0} |",
                    rates[0], rates[1], rates[2]
                );
            }
            println!(
                "| {name} | {accel} | **all {}** | **{:.0}** | **{:.0}** | **{:.0}** |",
                gpus.len(),
                total[0],
                total[1],
                total[2]
            );
        }
    }
    Ok(())
}

fn print_primitives(rows: &[PrimitiveResult], warm_up: usize) {
    let Some(first) = rows.first() else { return };
    let copy_gbps = rows
        .iter()
        .find(|r| r.primitive == bench::Primitive::Copy)
        .and_then(PrimitiveResult::gb_per_s);
    println!(
        "\nPrimitives on 2^{} elements: device events, median (best) of {} after {} warm-ups\n",
        first.n.trailing_zeros(),
        first.timing.repeats,
        warm_up
    );
    println!("| operation | median ms | best ms | throughput | of copy bandwidth |");
    println!("|---|---:|---:|---:|---:|");
    for r in rows {
        let share = match (r.gb_per_s(), copy_gbps) {
            (Some(gb), Some(copy)) if r.primitive != bench::Primitive::Copy => {
                format!("{:.0} %", 100.0 * gb / copy)
            }
            _ => String::new(),
        };
        println!(
            "| {} | {:.3} | {:.3} | {} | {share} |",
            r.primitive.description(),
            r.timing.median_ms,
            r.timing.best_ms,
            r.throughput()
        );
    }
}

fn print_scenes(gpu: &Gpu, rows: &[SceneRow], args: &GpuBenchArgs) {
    if rows.is_empty() {
        return;
    }
    println!(
        "\nStructures built and traced on {} ({} SMs), {}x{} anchor-protocol rays generated on the device; build: device ms of its stages; Mrays/s and ms median (best) of {} after {} warm-ups\n",
        gpu.info().name,
        gpu.info().multiprocessors,
        args.width,
        args.height,
        args.reps,
        args.warm_up
    );
    println!(
        "| scene | structure | triangles | build ms | SAH | nodes (cells) | refs | MB | peak MB | primary | AO | diffuse | build + primary frame ms |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let cell = |p: &Pass| {
        let (median, best) = p.mrays_per_s();
        format!("{median:.0} ({best:.0})")
    };
    let mb = |bytes: usize| bytes as f64 / (1 << 20) as f64;
    for row in rows {
        let r = &row.result;
        let peak = r
            .stats
            .peak_device_bytes
            .map_or("n/a".to_owned(), |b| format!("{:.0}", mb(b)));
        println!(
            "| {} | {} | {} | {:.2} ({:.2}) | {} | {} | {} | {:.0} | {peak} | {} | {} | {} | {:.2} |",
            row.name,
            row.accel,
            r.triangles,
            r.build.median_ms,
            r.build.best_ms,
            sah_cell(r.stats.sah_cost),
            r.stats.nodes,
            r.stats.references,
            mb(r.stats.bytes),
            cell(&r.primary),
            cell(&r.ao),
            cell(&r.diffuse),
            r.frame_ms(),
        );
    }
    println!("\nBuild stages (device ms, the last build), and the protocol's checksums\n");
    println!(
        "| scene | structure | stages | primary hits / t_sum | AO occluded | diffuse hits / t_sum |"
    );
    println!("|---|---|---|---|---:|---|");
    for row in rows {
        let r = &row.result;
        let stages: Vec<String> = r
            .stats
            .stages
            .iter()
            .map(|(stage, ms)| format!("{stage} {ms:.2}"))
            .collect();
        println!(
            "| {} | {} | {} | {} / {:.6e} | {} | {} / {:.6e} |",
            row.name,
            row.accel,
            stages.join(", "),
            r.primary_check.0,
            r.primary_check.1,
            r.occluded,
            r.diffuse_check.0,
            r.diffuse_check.1
        );
    }
    print_pools(rows);
}

/// The task pool's own figures (Vinkler et al. 2013, Table 2's question:
/// how much of the build is scheduling) for the builders that run on it.
fn print_pools(rows: &[SceneRow]) {
    let pooled: Vec<_> = rows
        .iter()
        .filter_map(|row| row.result.stats.pool.map(|pool| (row, pool)))
        .collect();
    if pooled.is_empty() {
        return;
    }
    println!("\nTask pools (the last build): where the persistent warps' cycles went\n");
    println!("| scene | structure | pool |");
    println!("|---|---|---|");
    for (row, pool) in pooled {
        println!("| {} | {} | {pool} |", row.name, row.accel);
    }
}

fn pass_json(p: &Pass) -> Value {
    let (median, best) = p.mrays_per_s();
    json!({
        "rays": p.rays,
        "median_ms": p.timing.median_ms,
        "best_ms": p.timing.best_ms,
        "mrays_s": {"median": median, "best": best},
    })
}

fn write_json(
    path: &Path,
    gpu: &Gpu,
    primitives: &[PrimitiveResult],
    rows: &[SceneRow],
    args: &GpuBenchArgs,
) -> Result<()> {
    let info = gpu.info();
    let primitives: Vec<Value> = primitives
        .iter()
        .map(|r| {
            json!({
                "op": r.primitive.key(),
                "n": r.n,
                "median_ms": r.timing.median_ms,
                "best_ms": r.timing.best_ms,
                "gb_s": r.gb_per_s(),
                "gkeys_s": r.gkeys_per_s(),
            })
        })
        .collect();
    let scenes: Vec<Value> = rows
        .iter()
        .map(|row| {
            let r = &row.result;
            let c = &row.camera;
            let stages: serde_json::Map<String, Value> = r
                .stats
                .stages
                .iter()
                .map(|(stage, ms)| ((*stage).to_owned(), json!(ms)))
                .collect();
            json!({
                "scene": row.name,
                "accel": row.accel,
                "tris": r.triangles,
                "diag": r.diag,
                "camera": {"eye": c.eye.to_array(), "look_at": c.look_at.to_array(), "up": c.up.to_array(), "fov_deg": c.fov_deg},
                "build": {
                    "median_ms": r.build.median_ms,
                    "best_ms": r.build.best_ms,
                    "stages_ms": stages,
                    "sah_cost": r.stats.sah_cost,
                    "nodes": r.stats.nodes,
                    "references": r.stats.references,
                    "bytes": r.stats.bytes,
                    "peak_device_bytes": r.stats.peak_device_bytes,
                },
                "frame_ms": r.frame_ms(),
                "primary": {"hits": r.primary_check.0, "t_sum": r.primary_check.1, "tiles_8x4": pass_json(&r.primary), "rows": pass_json(&r.primary_rows)},
                "ao": {"tmax": r.ao_tmax, "occluded": r.occluded, "pass": pass_json(&r.ao)},
                "diffuse": {"hits": r.diffuse_check.0, "t_sum": r.diffuse_check.1, "pass": pass_json(&r.diffuse)},
            })
        })
        .collect();
    let doc = json!({
        "protocol": "anchors-ray-protocol-1",
        "library": "caustic",
        "library_version": env!("CARGO_PKG_VERSION"),
        "device": {
            "name": info.name,
            "ordinal": info.ordinal,
            "arch": info.capability.arch(),
            "multiprocessors": info.multiprocessors,
            "memory_bytes": info.total_memory,
            "l2_bytes": info.l2_cache_bytes,
            "driver_cuda": format!("{}.{}", info.driver_version.0, info.driver_version.1),
        },
        "settings": {"width": args.width, "height": args.height, "warm_up": args.warm_up, "reps": args.reps, "check_every": args.check_every, "accel": args.accel},
        "primitives": primitives,
        "scenes": scenes,
    });
    let text = serde_json::to_string_pretty(&doc)?;
    std::fs::write(path, text + "\n").with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accel_lists_parse_before_the_gpu_work() {
        let all = accel_specs("all").unwrap();
        let names: Vec<String> = all.iter().map(ToString::to_string).collect();
        for name in [
            "bvh-binned",
            "bvh-binned-staged",
            "bvh-sweep",
            "bvh-taskpool",
            "ploc",
            "kdtree",
            "grid",
        ] {
            assert!(names.iter().any(|n| n == name), "{names:?}");
        }
        let two = accel_specs("bvh-binned:bins=16, bvh-sweep").unwrap();
        assert_eq!(two[0].to_string(), "bvh-binned:bins=16");
        assert_eq!(two[1].to_string(), "bvh-sweep");
        assert!(accel_specs("bvh-binned,brute").is_err());
    }
}
