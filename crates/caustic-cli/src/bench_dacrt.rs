//! `caustic bench dacrt`: divide-and-conquer ray tracing against a BVH's
//! build and trace as a function of the number of rays, the crossover
//! analysis of Vinkler et al. 2013 §6.2: DACRT builds nothing, so it wins when the rays
//! are few (or short) enough that a structure's build does not pay off;
//! the crossover is the ray count at which both take equal time.
//!
//! The rays are the anchor protocol's (primary at the camera, AO and
//! diffuse from the primary hits) or collision segments (agents shooting
//! 128 short segments each); a batch of N is the first N of a fixed random
//! permutation, so every batch samples the whole image. Every DACRT batch's
//! hits are checked against the BVH's. With `--device cuda` both sides run
//! on the GPU (`bench_dacrt_cuda.rs`): DACRT on the task pool against the
//! device build of `--accel` and its traversal, device times.

use crate::bench::{Timing, protocol_camera, scene_files, time_ms};
use crate::camera::CameraArgs;
use crate::scene_arg;
use anyhow::{Result, bail};
use caustic_accel::collision::Agents;
use caustic_accel::dacrt::{Dacrt, DacrtConfig};
use caustic_accel::{Accel, build_accel, check_spec};
use caustic_geom::{Hit, Pcg32, Ray, Triangle, protocol};
use clap::Args;
use serde_json::json;
use std::io::Write;
use std::path::PathBuf;

#[derive(Args)]
#[command(after_help = "Examples:\n  \
    caustic bench dacrt --scene target/scenes/sponza-dabrovic/sponza.obj --camera standard\n  \
    caustic bench dacrt --scene target/scenes/sponza-dabrovic/sponza.obj --camera standard --device cuda --max-log2 21\n  \
    caustic bench dacrt --scene cornell-box --kind collision,ao --max-log2 18 --json dacrt.jsonl")]
pub struct DacrtBenchArgs {
    /// Scene files, folders of scene files or built-in scene names.
    #[arg(long, required = true, num_args = 1..)]
    scene: Vec<PathBuf>,
    /// Ray kinds, comma separated: primary, ao, diffuse, collision.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "primary,ao,diffuse,collision"
    )]
    kind: Vec<String>,
    /// DACRT variants, comma separated (dacrt specs): the paper's constants
    /// (C_SORT = 80, 32 rays, 16 triangles, tuned for its GPU) with median
    /// and RDH splits, and constants for a CPU, where partitioning costs
    /// about one triangle test (C_SORT = 1, 2 rays, 2 triangles).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "dacrt,dacrt-rdh,dacrt:sort=1:rays=2:tris=2"
    )]
    dacrt: Vec<String>,
    /// The BVH built and traced for comparison (any --accel spec).
    #[arg(long, default_value = "bvh-binned")]
    accel: String,
    /// Smallest batch: 2^N rays.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(0..=24))]
    min_log2: u32,
    /// Largest batch: 2^N rays (capped by the rays the kind has).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(0..=24))]
    max_log2: u32,
    /// Timed repetitions per batch (median reported, after one warm-up).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..))]
    reps: u16,
    /// CPU threads (0: all cores).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// `cpu`, or `cuda[:N]`: DACRT on the GPU's task pool against the GPU
    /// build of `--accel` and its traversal (device times).
    #[arg(long, default_value = "cpu")]
    device: caustic::Device,
    /// Append one JSON object per scene, kind and batch to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    #[command(flatten)]
    camera: CameraArgs,
}

/// One batch: its size and the median times.
pub(crate) struct BatchRow {
    pub(crate) rays: usize,
    /// Per DACRT variant, trace ms.
    pub(crate) dacrt_ms: Vec<f64>,
    pub(crate) bvh_trace_ms: f64,
}

pub fn run(args: DacrtBenchArgs) -> Result<()> {
    if args.min_log2 > args.max_log2 {
        bail!("--min-log2 must not exceed --max-log2");
    }
    let configs: Vec<DacrtConfig> = args
        .dacrt
        .iter()
        .map(|s| DacrtConfig::parse(s).map_err(|e| anyhow::anyhow!("--dacrt {s}: {e}")))
        .collect::<Result<_>>()?;
    let backend = crate::device::open(args.device)?;
    // The GPU's reading of --accel (a GPU spec) is checked by its parser.
    #[cfg(feature = "cuda")]
    let gpu = backend.gpu().cloned();
    #[cfg(not(feature = "cuda"))]
    let gpu: Option<()> = backend.is_gpu().then_some(());
    if gpu.is_none() {
        check_spec(&args.accel)?;
    }
    for kind in &args.kind {
        if !["primary", "ao", "diffuse", "collision"].contains(&kind.as_str()) {
            bail!("--kind {kind}: one of primary, ao, diffuse, collision");
        }
    }
    for path in scene_files(&args.scene)? {
        let name = path.to_string_lossy().to_string();
        let loaded = scene_arg::load(&name)?;
        let camera = protocol_camera(&args.camera, &loaded, 1920, 1080)?;
        let triangles = loaded.scene.triangles();
        if triangles.is_empty() {
            bail!("{name} has no triangles");
        }
        let cpu_accel = if gpu.is_some() {
            "bvh-binned"
        } else {
            &args.accel
        };
        let accel = build_accel(cpu_accel, &triangles)?;
        let rays = ray_sets(&triangles, &camera, accel.as_ref(), &args.kind);
        #[cfg(feature = "cuda")]
        if let Some(gpu) = &gpu {
            let mut bench = crate::bench_dacrt_cuda::GpuBatches::new(
                gpu,
                &args.accel,
                &configs,
                &triangles,
                args.reps,
            )?;
            for (kind, rays) in rays {
                let rows = bench.batches(&rays, kind == "ao", args.min_log2, args.max_log2)?;
                let label = format!("{name} (GPU)");
                print_rows(&label, &kind, &args, &configs, bench.build_ms(), &rows);
                if let Some(path) = &args.json {
                    append_json(
                        path,
                        &label,
                        &kind,
                        &args,
                        &configs,
                        bench.build_ms(),
                        &rows,
                    )?;
                }
            }
            continue;
        }
        let build = Timing::from_runs(
            &(0..args.reps)
                .map(|_| time_ms(|| drop(build_accel(&args.accel, &triangles))))
                .collect::<Vec<_>>(),
        );
        for (kind, rays) in rays {
            let any_hit = kind == "ao";
            let rows = batches(&args, &configs, &triangles, accel.as_ref(), &rays, any_hit)?;
            print_rows(&name, &kind, &args, &configs, build.median_ms, &rows);
            if let Some(path) = &args.json {
                append_json(path, &name, &kind, &args, &configs, build.median_ms, &rows)?;
            }
        }
    }
    Ok(())
}

/// The rays of each requested kind, shuffled once (fixed seed).
fn ray_sets(
    triangles: &[Triangle],
    camera: &protocol::ProtocolCamera,
    accel: &dyn Accel,
    kinds: &[String],
) -> Vec<(String, Vec<Ray>)> {
    let primary = protocol::primary_rays(camera, 1920, 1080);
    let mut hits = vec![None; primary.len()];
    accel.intersect_batch(&primary, &mut hits);
    let diag = protocol::scene_diagonal(triangles);
    let diffuse = protocol::secondary_rays(&primary, &hits, triangles, diag);
    let ao_tmax = protocol::ao_tmax(diag);
    let bounds = triangles
        .iter()
        .fold(caustic_geom::Aabb::EMPTY, |b, t| b.union(t.bounds()));
    kinds
        .iter()
        .map(|kind| {
            let mut rays = match kind.as_str() {
                "primary" => primary.clone(),
                "ao" => diffuse
                    .iter()
                    .map(|r| Ray::segment(r.origin, r.dir, 0.0, ao_tmax))
                    .collect(),
                "diffuse" => diffuse.clone(),
                _ => Agents::random(&bounds, 1 << 13, 20, 128, 1).frame_rays(0),
            };
            shuffle(&mut rays);
            (kind.clone(), rays)
        })
        .collect()
}

/// A fixed Fisher–Yates shuffle, so a prefix samples the whole set.
fn shuffle(rays: &mut [Ray]) {
    let mut rng = Pcg32::new(0xdac7, 1);
    for i in (1..rays.len()).rev() {
        let j = (rng.next_u32() as usize) % (i + 1);
        rays.swap(i, j);
    }
}

fn batches(
    args: &DacrtBenchArgs,
    configs: &[DacrtConfig],
    triangles: &[Triangle],
    accel: &dyn Accel,
    rays: &[Ray],
    any_hit: bool,
) -> Result<Vec<BatchRow>> {
    let mut rows = Vec::new();
    for log2 in args.min_log2..=args.max_log2 {
        let n = (1usize << log2).min(rays.len());
        if rows.last().is_some_and(|r: &BatchRow| r.rays == n) {
            break;
        }
        let batch = &rays[..n];
        let mut want = vec![None; n];
        let bvh_trace_ms = median(args.reps, || trace(accel, batch, any_hit, &mut want));
        let mut dacrt_ms = Vec::new();
        for config in configs {
            let dacrt = Dacrt::new(triangles, *config);
            let mut got = vec![None; n];
            dacrt_ms.push(median(args.reps, || {
                trace(&dacrt, batch, any_hit, &mut got)
            }));
            if got != want {
                bail!(
                    "{} disagrees with {} on {n} rays",
                    config.spec(),
                    args.accel
                );
            }
        }
        rows.push(BatchRow {
            rays: n,
            dacrt_ms,
            bvh_trace_ms,
        });
    }
    Ok(rows)
}

/// Traces the batch (closest hits, or occlusion as a hit marker).
fn trace(accel: &dyn Accel, rays: &[Ray], any_hit: bool, out: &mut [Option<Hit>]) {
    if any_hit {
        let mut occluded = vec![false; rays.len()];
        accel.occluded_batch(rays, &mut occluded);
        for (o, &b) in out.iter_mut().zip(&occluded) {
            *o = b.then_some(Hit {
                t: 0.0,
                prim: 0,
                u: 0.0,
                v: 0.0,
            });
        }
    } else {
        accel.intersect_batch(rays, out);
    }
}

/// Median wall ms of `reps` runs after one warm-up.
fn median(reps: u16, mut f: impl FnMut()) -> f64 {
    f();
    Timing::from_runs(&(0..reps).map(|_| time_ms(&mut f)).collect::<Vec<_>>()).median_ms
}

/// The ray count at which DACRT and build + trace take equal time,
/// interpolated in log-log between the two batches that bracket it; `None`
/// when one side wins on every batch.
fn crossover(rows: &[BatchRow], variant: usize, build_ms: f64) -> Option<f64> {
    let gap = |r: &BatchRow| (r.dacrt_ms[variant] / (build_ms + r.bvh_trace_ms)).ln();
    rows.windows(2).find_map(|w| {
        let (a, b) = (gap(&w[0]), gap(&w[1]));
        (a <= 0.0 && b > 0.0).then(|| {
            let (la, lb) = ((w[0].rays as f64).ln(), (w[1].rays as f64).ln());
            (la + (lb - la) * (-a) / (b - a)).exp()
        })
    })
}

fn print_rows(
    scene: &str,
    kind: &str,
    args: &DacrtBenchArgs,
    configs: &[DacrtConfig],
    build_ms: f64,
    rows: &[BatchRow],
) {
    let names: Vec<String> = configs.iter().map(DacrtConfig::spec).collect();
    println!(
        "\n{scene}, {kind} rays: {} build {build_ms:.2} ms (median of {})\n",
        args.accel, args.reps
    );
    println!(
        "| rays | {} | {} trace ms | {} build + trace ms |",
        names
            .iter()
            .map(|n| format!("{n} ms"))
            .collect::<Vec<_>>()
            .join(" | "),
        args.accel,
        args.accel
    );
    println!("|---:|{}---:|---:|", "---:|".repeat(names.len()));
    for r in rows {
        println!(
            "| {} | {} | {:.3} | {:.3} |",
            r.rays,
            r.dacrt_ms
                .iter()
                .map(|ms| format!("{ms:.3}"))
                .collect::<Vec<_>>()
                .join(" | "),
            r.bvh_trace_ms,
            build_ms + r.bvh_trace_ms
        );
    }
    for (i, name) in names.iter().enumerate() {
        match crossover(rows, i, build_ms) {
            Some(n) => println!("crossover {name}: {n:.0} rays (DACRT faster below)"),
            None if rows
                .first()
                .is_some_and(|r| r.dacrt_ms[i] > build_ms + r.bvh_trace_ms) =>
            {
                println!("crossover {name}: none, build + trace is faster on every batch")
            }
            None => println!("crossover {name}: none, DACRT is faster on every batch"),
        }
    }
}

fn append_json(
    path: &PathBuf,
    scene: &str,
    kind: &str,
    args: &DacrtBenchArgs,
    configs: &[DacrtConfig],
    build_ms: f64,
    rows: &[BatchRow],
) -> Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    for r in rows {
        let dacrt: serde_json::Map<String, serde_json::Value> = configs
            .iter()
            .zip(&r.dacrt_ms)
            .map(|(c, ms)| (c.spec(), json!(ms)))
            .collect();
        let line = json!({
            "scene": scene, "kind": kind, "rays": r.rays, "accel": args.accel,
            "build_ms": build_ms, "trace_ms": r.bvh_trace_ms, "dacrt_ms": dacrt,
        });
        writeln!(file, "{line}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_crossover_is_where_the_times_meet() {
        let row = |rays, dacrt: f64, trace| BatchRow {
            rays,
            dacrt_ms: vec![dacrt],
            bvh_trace_ms: trace,
        };
        // Build 10 ms; DACRT 1 ms at 100 rays, 100 ms at 10 000 rays; the
        // BVH traces in 0 ms: equal at 10 ms, halfway in log: 1000 rays.
        let rows = [row(100, 1.0, 0.0), row(10_000, 100.0, 0.0)];
        let n = crossover(&rows, 0, 10.0).unwrap();
        assert!((n - 1000.0).abs() < 1e-6, "{n}");
        assert_eq!(crossover(&rows, 0, 1000.0), None);
    }
}
