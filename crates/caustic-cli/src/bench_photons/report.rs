//! The output of `caustic bench photons`: markdown tables, JSON lines
//! and SVG plots.

use super::PhotonBenchArgs;
use super::measure::{BuildRow, Query, QueryRow};
use crate::plot;
use anyhow::{Context, Result};
use serde_json::json;
use std::io::Write;
use std::path::{Path, PathBuf};

fn megabytes(bytes: usize) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

fn query_text(query: Query, diag: f32) -> String {
    match query {
        Query::Knn { k, .. } => format!("kNN k={k}"),
        Query::Radius { radius } => format!("radius {:.4} diag", radius / diag),
    }
}

pub(super) fn print_tables(
    builds: &[BuildRow],
    queries: &[QueryRow],
    args: &PhotonBenchArgs,
    diag: f32,
) {
    println!(
        "\nphoton structures, {} threads, best of {} (median in the JSON); kNN radius cap {} x diagonal\n",
        rayon::current_num_threads(),
        args.reps,
        args.max_radius
    );
    println!("#### Build\n");
    println!("| map | photons | structure | build ms | Mphotons/s | MB | peak build MB |");
    println!("|---|---:|---|---:|---:|---:|---:|");
    for r in builds {
        // The allocation counter sees host memory only.
        let peak = if r.structure.starts_with("cuda:") {
            "n/a (device)".to_owned()
        } else {
            format!("{:.1}", megabytes(r.peak_bytes))
        };
        println!(
            "| {} | {} | {} | {:.2} | {:.1} | {:.1} | {peak} |",
            r.map,
            r.photons,
            r.structure,
            r.time.best_ms,
            r.photons as f64 / r.time.best_ms.max(1e-9) / 1e3,
            megabytes(r.bytes),
        );
    }
    let titles = [
        ("size", "kNN query time against map size"),
        ("k", "kNN query time against k"),
        ("radius", "Radius query time against radius"),
        ("resolution", "kNN query time against image resolution"),
    ];
    for (sweep, title) in titles {
        println!("\n#### {title}\n");
        println!(
            "| map | photons | structure | query | image | queries | ms | Mqueries/s | mean found |"
        );
        println!("|---|---:|---|---|---|---:|---:|---:|---:|");
        for r in queries.iter().filter(|r| r.sweep == sweep) {
            println!(
                "| {} | {} | {} | {} | {}x{} | {} | {:.2} | {:.2} | {:.1} |",
                r.map,
                r.photons,
                r.structure,
                query_text(r.query, diag),
                r.resolution.0,
                r.resolution.1,
                r.queries,
                r.time.best_ms,
                r.queries as f64 / r.time.best_ms.max(1e-9) / 1e3,
                r.mean_found,
            );
        }
    }
    if args.points.iter().any(|p| p == "brute") {
        println!(
            "\nBrute force runs only where queries x photons <= {:.0e} (--brute-limit).",
            args.brute_limit as f64
        );
    }
}

pub(super) fn write_json(
    path: &Path,
    builds: &[BuildRow],
    queries: &[QueryRow],
    args: &PhotonBenchArgs,
) -> Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    let threads = rayon::current_num_threads();
    for r in builds {
        let obj = json!({
            "bench": "photons", "kind": "build", "scene": args.scene, "threads": threads,
            "map": r.map, "structure": r.structure, "photons": r.photons,
            "build_ms": {"best": r.time.best_ms, "median": r.time.median_ms},
            "bytes": r.bytes, "peak_build_bytes": r.peak_bytes,
        });
        writeln!(file, "{obj}").with_context(|| format!("cannot write {}", path.display()))?;
    }
    for r in queries {
        let (k, radius) = match r.query {
            Query::Knn { k, max_radius } => (Some(k), max_radius),
            Query::Radius { radius } => (None, radius),
        };
        let obj = json!({
            "bench": "photons", "kind": "query", "sweep": r.sweep, "scene": args.scene,
            "threads": threads, "map": r.map, "structure": r.structure, "photons": r.photons,
            "k": k, "radius": radius, "width": r.resolution.0, "height": r.resolution.1,
            "queries": r.queries, "ms": {"best": r.time.best_ms, "median": r.time.median_ms},
            "mean_found": r.mean_found, "checksum": r.checksum,
        });
        writeln!(file, "{obj}").with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

pub(super) fn write_plots(prefix: &Path, builds: &[BuildRow], queries: &[QueryRow]) -> Result<()> {
    let series = |pairs: Vec<(String, f64, f64)>| {
        let mut out: Vec<plot::Series> = Vec::new();
        for (name, x, y) in pairs {
            match out.iter_mut().find(|s| s.name == name) {
                Some(s) => s.points.push((x, y)),
                None => out.push(plot::Series {
                    name,
                    points: vec![(x, y)],
                }),
            }
        }
        out
    };
    let build = series(
        builds
            .iter()
            .map(|r| {
                let name = format!("{} ({})", r.structure, r.map);
                (name, r.photons as f64, r.time.best_ms)
            })
            .collect(),
    );
    let with_suffix = |suffix: &str| {
        let mut name = prefix.as_os_str().to_owned();
        name.push(suffix);
        PathBuf::from(name)
    };
    plot::lines(
        &with_suffix("-build.svg"),
        "Photon structure build time",
        "photons",
        "build ms (best)",
        &build,
    )?;
    let query = series(
        queries
            .iter()
            .filter(|r| r.sweep == "size")
            .map(|r| {
                let name = format!("{} ({})", r.structure, r.map);
                (name, r.photons as f64, r.time.best_ms)
            })
            .collect(),
    );
    plot::lines(
        &with_suffix("-query.svg"),
        "kNN query pass time against map size",
        "photons",
        "ms for all queries (best)",
        &query,
    )
}
