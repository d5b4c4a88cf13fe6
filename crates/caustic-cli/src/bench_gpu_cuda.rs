//! The run of `caustic bench gpu` (flags in `bench_gpu.rs`): the
//! primitives, then every structure (`--accel`) on every scene: its build
//! by stage, quality and memory and its traversal passes, as markdown
//! tables and JSON. Compiled with the `cuda` feature only.

use crate::bench::{protocol_camera, scene_files};
use crate::bench_gpu::GpuBenchArgs;
use crate::scene_arg;
use anyhow::{Context, Result, bail};
use caustic_accel::bvh::device_accel_cuda::GpuAccelSpec;
use caustic_accel::bvh::trace_bench_cuda::{self as trace_bench, Pass, TraceResult, TraceSettings};
use caustic_accel::protocol_cuda::PrimaryCamera;
use caustic_geom::protocol::{self, ProtocolCamera};
use caustic_gpu::Gpu;
use caustic_gpu::bench::{self, PrimitiveResult, Repeats};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

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

    let settings = TraceSettings {
        width: args.width,
        height: args.height,
        repeats,
        check_every: args.check_every,
    };
    let mut rows = Vec::new();
    for spec in &scenes {
        let loaded = scene_arg::load(&spec.path.to_string_lossy())?;
        let mut camera = protocol_camera(&args.camera, &loaded, args.width, args.height)?;
        let mut triangles = loaded.scene.triangles();
        let mut name = loaded.name.clone();
        if spec.copies > 1 {
            triangles = protocol::replicate_grid(&triangles, spec.copies);
            camera = protocol::framing_camera(&triangles, camera.fov_deg);
            name = format!("{name} x{}", spec.copies);
        }
        eprintln!("bench gpu: {name} ({} triangles)", triangles.len());
        let gpu_camera = PrimaryCamera {
            eye: camera.eye,
            look_at: camera.look_at,
            up: camera.up,
            fov_deg: camera.fov_deg,
        };
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

/// A scene file and how many copies of it to trace.
struct SceneSpec {
    path: PathBuf,
    copies: usize,
}

fn scene_specs(args: &[String]) -> Result<Vec<SceneSpec>> {
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
    fn scene_copies_follow_an_at_sign() {
        let specs = scene_specs(&["cornell-box@16".into(), "cornell-box".into()]).unwrap();
        assert_eq!(specs[0].path, PathBuf::from("cornell-box"));
        assert_eq!(specs[0].copies, 16);
        assert_eq!(specs[1].copies, 1);
        for bad in ["scene.ply@0", "scene.ply@x", "scene.ply@2000"] {
            assert!(
                scene_specs(&[bad.into()]).is_err(),
                "{bad} should be refused"
            );
        }
    }

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
