//! Build timings and tree quality, without tracing:
//!
//! `cargo run --release -p caustic-accel --example build_timing [SCENE] [NAMES] [REPS]`
//!
//! `SCENE` is a path relative to the scenes folder (default
//! `sibenik/sibenik.obj`); `NAMES` a comma-separated list of registry names
//! (default `bvh-binned`), where `bvh-binned` may carry settings for tuning,
//! as in `bvh-binned:bins=16:sweep=24:par=1024:parbin=32768:staged:seq`; `REPS` the timed builds
//! per name after one warm-up (default 15; 0 only loads the scene).
//!
//! The names take turns within each repetition, so they see the same load
//! on a shared machine. Prints the median and best wall time of a build,
//! the least CPU time one took (summed over threads, from Linux's
//! per-thread scheduler statistics: on a busy machine it is steadier than
//! wall time), the SAH cost, the node count and the peak build memory;
//! handy under `perf record` too.

use caustic_accel::bvh::build::{BinnedSahBuilder, BinnedSahConfig, FIVE_STAGES};
use caustic_accel::{Accel, TriangleBvh, build_accel};
use caustic_geom::Triangle;

fn main() {
    let mut args = std::env::args().skip(1);
    let scene = args.next().unwrap_or_else(|| "sibenik/sibenik.obj".into());
    let names = args.next().unwrap_or_else(|| "bvh-binned".into());
    let reps: usize = args.next().map_or(15, |s| s.parse().expect("repetitions"));
    let path = caustic_scene::data_dirs::find_scene(&scene).unwrap_or_else(|missing| {
        eprintln!("{missing}");
        std::process::exit(2);
    });
    let tris = caustic_scene::Scene::load(&path)
        .expect("scene loads")
        .triangles();
    let threads = rayon::current_num_threads();
    println!("{scene}: {} triangles, {threads} threads", tris.len());
    if reps == 0 {
        return;
    }
    let names: Vec<&str> = names.split(',').collect();
    let mut runs: Vec<Runs> = names.iter().map(|_| Runs::default()).collect();
    for rep in 0..=reps {
        for (name, runs) in names.iter().zip(&mut runs) {
            drop(runs.last.take());
            let cpu_before = cpu_ns();
            let accel = build(name, &tris);
            let cpu_ms = (cpu_ns() - cpu_before) as f64 * 1e-6;
            // Repetition 0 warms up.
            if rep > 0 {
                runs.wall_ms.push(accel.stats().build_ms);
                runs.least_cpu_ms = runs.least_cpu_ms.min(cpu_ms);
            }
            runs.last = Some(accel);
        }
    }
    println!("| accel | median ms | best ms | least CPU ms | SAH | nodes | peak build MB |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (name, mut runs) in names.iter().zip(runs) {
        runs.wall_ms.sort_by(f64::total_cmp);
        let stats = runs.last.expect("built").stats().clone();
        println!(
            "| {name} | {:.2} | {:.2} | {:.2} | {:.3} | {} | {:.1} |",
            runs.wall_ms[runs.wall_ms.len() / 2],
            runs.wall_ms[0],
            runs.least_cpu_ms,
            stats.sah_cost,
            stats.nodes,
            stats.peak_build_bytes as f64 / 1e6,
        );
    }
}

/// Timings of one name.
struct Runs {
    wall_ms: Vec<f64>,
    least_cpu_ms: f64,
    last: Option<Box<dyn Accel>>,
}

impl Default for Runs {
    fn default() -> Self {
        Self {
            wall_ms: Vec::new(),
            least_cpu_ms: f64::INFINITY,
            last: None,
        }
    }
}

/// Builds a registered accel, or `bvh-binned` with the settings after `:`.
fn build(name: &str, tris: &[Triangle]) -> Box<dyn Accel> {
    let mut parts = name.split(':');
    let base = parts.next().expect("a name");
    let settings: Vec<&str> = parts.collect();
    if settings.is_empty() {
        return build_accel(base, tris).expect("registered name");
    }
    assert_eq!(base, "bvh-binned", "only bvh-binned takes settings");
    let mut config = BinnedSahConfig::DEFAULT;
    for setting in settings {
        match setting.split_once('=') {
            Some(("bins", v)) => config.bins = v.parse().expect("bins"),
            Some(("sweep", v)) => config.sweep_max_prims = v.parse().expect("sweep size"),
            Some(("par", v)) => config.parallel_min_prims = v.parse().expect("task size"),
            Some(("parbin", v)) => {
                config.parallel_binning_min_prims = v.parse().expect("binning task size");
            }
            None if setting == "staged" => config.stages = FIVE_STAGES,
            None if setting == "seq" => config = config.sequential(),
            _ => panic!("unknown setting {setting}"),
        }
    }
    Box::new(TriangleBvh::build_with(
        tris,
        &BinnedSahBuilder::new(config),
    ))
}

/// CPU time of all the process's threads so far, in ns (0 where
/// `/proc/self/task/*/schedstat` is missing).
fn cpu_ns() -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}
