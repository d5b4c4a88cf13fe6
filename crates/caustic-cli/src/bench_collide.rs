//! `caustic bench collide`: Figure 7 of Vinkler, Bittner, Havran and
//! Hapala 2013 (§6.2) as numbers and a plot: the time of one collision
//! frame (build + trace, averaged over the frames) against the number of
//! agents, for DACRT (median and RDH splits) and the BVH builders, on the
//! CPU and the GPU. Each point is a `caustic collide` run
//! ([`crate::collide::run_method`]: the same agents, rays and answers); a
//! method whose answers differ from the first one's fails the benchmark.

use crate::collide::{Method, MethodRun, run_method};
use crate::{device, plot, scene_arg};
use anyhow::{Context, Result, bail};
use caustic::Device;
use caustic_accel::collision::{Agents, FrameAnswers};
use caustic_geom::Aabb;
use clap::Args;
use serde_json::json;
use std::path::PathBuf;

#[derive(Args)]
#[command(after_help = "Examples:\n  \
    caustic bench collide --scene target/scenes/sponza-dabrovic/sponza.obj --device cpu,cuda --plot sponza.svg\n  \
    caustic bench collide --scene target/scenes/dragon/dragon_vrip.ply@16 --device cuda --agents 64,1024,10000 --frames 3\n\n\
    caustic bench collide --from gpu.json --from cpu.json --plot both.svg   # one table and plot of earlier runs\n\n\
    scripts/dacrt-figure7.sh runs both scenes of the paper's figure.")]
pub struct CollideBenchArgs {
    /// Scene file or built-in scene name; `FILE@N` for N copies of it on a
    /// square grid (`dragon_vrip.ply@16`, the 14 M-triangle stand-in for
    /// the paper's Power Plant).
    #[arg(long, required_unless_present = "from")]
    scene: Option<String>,
    /// Measure nothing: the table and the plot of the points in these
    /// JSON files (written by `--json`: other devices, other machines).
    #[arg(long, conflicts_with = "scene")]
    from: Vec<PathBuf>,
    /// Agent counts, comma separated [default: 2^6 .. 2^16].
    #[arg(long, value_delimiter = ',', value_parser = crate::parse::count)]
    agents: Vec<usize>,
    /// Methods, comma separated, as `caustic collide --method` takes them.
    #[arg(
        long,
        default_value = "dacrt,dacrt-rdh,bvh-binned,lbvh,lbvh:leaf=1,hlbvh,ploc"
    )]
    method: String,
    /// Devices, comma separated: cpu, cuda[:N].
    #[arg(long, value_delimiter = ',', default_value = "cuda")]
    device: Vec<Device>,
    /// The most agents measured on the CPU (its BVH builds over a large
    /// scene take seconds a frame); none by default.
    #[arg(long, value_parser = crate::parse::count)]
    cpu_max_agents: Option<usize>,
    /// The methods measured on the CPU, when they differ from --method.
    #[arg(long)]
    cpu_method: Option<String>,
    /// Positions per agent, one frame each (the paper's 20; at least 2).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(2..=1000))]
    frames: u32,
    /// Segments each agent shoots per frame.
    #[arg(long, default_value_t = 128, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    rays: u32,
    /// Seed of the agents' paths and rays.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write every point as JSON to this file (not with --from).
    #[arg(long, conflicts_with = "from")]
    json: Option<PathBuf>,
    /// Write the figure (frame ms against agents, log-log) as SVG.
    #[arg(long)]
    plot: Option<PathBuf>,
    /// CPU threads (0: all cores).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
}

/// One method on one device at one agent count.
struct Point {
    series: String,
    agents: usize,
    build_ms: f64,
    trace_ms: f64,
}

impl Point {
    fn frame_ms(&self) -> f64 {
        self.build_ms + self.trace_ms
    }
}

pub fn run(args: CollideBenchArgs) -> Result<()> {
    for path in args.json.iter().chain(&args.plot) {
        crate::output::check_writable(path)?;
    }
    let Some(scene) = &args.scene else {
        let (name, triangles, points) = read_points(&args.from)?;
        let mut counts: Vec<usize> = points.iter().map(|p| p.agents).collect();
        counts.sort_unstable();
        counts.dedup();
        return report(&args, &name, triangles, &counts, &points);
    };
    let methods = Method::parse_list(&args.method)?;
    let cpu_methods = match &args.cpu_method {
        Some(list) => Method::parse_list(list)?,
        None => methods.clone(),
    };
    let counts = if args.agents.is_empty() {
        (6..=16).map(|k| 1usize << k).collect()
    } else {
        args.agents.clone()
    };
    if counts.contains(&0) {
        bail!("--agents: every count must be at least 1");
    }
    let (name, triangles) = scene_arg::load_triangles(scene)?;
    if triangles.is_empty() {
        bail!("{scene} has no triangles to collide with");
    }
    let bounds = triangles
        .iter()
        .fold(Aabb::EMPTY, |b, t| b.union(t.bounds()));
    eprintln!("bench collide: {name}, {} triangles", triangles.len());
    let mut points = Vec::new();
    // Per agent count, the first run's answers: every other must match.
    let mut reference: Vec<Option<Vec<FrameAnswers>>> = vec![None; counts.len()];
    let mut disagreements = Vec::new();
    for &choice in &args.device {
        let backend = device::open(choice)?;
        let label = if backend.is_gpu() { "GPU" } else { "CPU" };
        for (i, &count) in counts.iter().enumerate() {
            if !backend.is_gpu() && args.cpu_max_agents.is_some_and(|max| count > max) {
                continue;
            }
            let agents = Agents::random(
                &bounds,
                count,
                args.frames as usize,
                args.rays as usize,
                args.seed,
            );
            let methods = if backend.is_gpu() {
                &methods
            } else {
                &cpu_methods
            };
            for method in methods {
                let run = run_method(method, &backend, &triangles, &agents)?;
                let point = Point {
                    series: format!("{} ({label})", run.name),
                    agents: count,
                    build_ms: MethodRun::mean(&run.build_ms),
                    trace_ms: MethodRun::mean(&run.trace_ms),
                };
                eprintln!(
                    "bench collide: {count} agents, {}: {:.3} ms per frame",
                    point.series,
                    point.frame_ms()
                );
                match &reference[i] {
                    None => reference[i] = Some(run.answers),
                    Some(answers) if *answers != run.answers => {
                        disagreements.push(format!("{count} agents: {}", point.series))
                    }
                    Some(_) => {}
                }
                points.push(point);
            }
        }
    }
    report(&args, &name, triangles.len(), &counts, &points)?;
    if !disagreements.is_empty() {
        bail!(
            "answers differ from the first method's: {}",
            disagreements.join("; ")
        );
    }
    Ok(())
}

/// The table, and the JSON and the plot where asked.
fn report(
    args: &CollideBenchArgs,
    name: &str,
    triangles: usize,
    counts: &[usize],
    points: &[Point],
) -> Result<()> {
    print_table(name, args, counts, points);
    if let Some(path) = &args.json {
        write_json(path, name, triangles, args, points)?;
        eprintln!("wrote {}", path.display());
    }
    if let Some(path) = &args.plot {
        let mut series: Vec<plot::Series> = Vec::new();
        for p in points {
            match series.iter_mut().find(|s| s.name == p.series) {
                Some(s) => s.points.push((p.agents as f64, p.frame_ms())),
                None => series.push(plot::Series {
                    name: p.series.clone(),
                    points: vec![(p.agents as f64, p.frame_ms())],
                }),
            }
        }
        let title = if args.from.is_empty() {
            format!(
                "Collision frames on {name} ({triangles} triangles), {} rays per agent",
                args.rays
            )
        } else {
            format!("Collision frames on {name} ({triangles} triangles)")
        };
        plot::lines(
            path,
            &title,
            "agents",
            "ms per frame (build + trace)",
            &series,
        )?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

/// The points of `--json` files: the first one's scene and triangle count.
fn read_points(paths: &[PathBuf]) -> Result<(String, usize, Vec<Point>)> {
    let mut scene = None;
    let mut points = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let doc: serde_json::Value = serde_json::from_str(&text)
            .with_context(|| format!("{} is not JSON", path.display()))?;
        let bad = || anyhow::anyhow!("{}: not a `bench collide --json` file", path.display());
        scene.get_or_insert((
            doc["scene"].as_str().ok_or_else(bad)?.to_owned(),
            doc["triangles"].as_u64().ok_or_else(bad)? as usize,
        ));
        for p in doc["points"].as_array().ok_or_else(bad)? {
            points.push(Point {
                series: p["series"].as_str().ok_or_else(bad)?.to_owned(),
                agents: p["agents"].as_u64().ok_or_else(bad)? as usize,
                build_ms: p["build_ms"].as_f64().ok_or_else(bad)?,
                trace_ms: p["trace_ms"].as_f64().ok_or_else(bad)?,
            });
        }
    }
    let (name, triangles) = scene.ok_or_else(|| anyhow::anyhow!("--from names no file"))?;
    Ok((name, triangles, points))
}

/// Markdown: one row per agent count, one column per method and device,
/// ms per frame (build + trace); a dash where a method was not run.
fn print_table(name: &str, args: &CollideBenchArgs, counts: &[usize], points: &[Point]) {
    let mut series: Vec<&str> = Vec::new();
    for p in points {
        if !series.contains(&p.series.as_str()) {
            series.push(&p.series);
        }
    }
    if args.from.is_empty() {
        println!(
            "\n{name}: ms per collision frame (build + trace), mean of {} frames, {} rays per agent\n",
            args.frames, args.rays
        );
    } else {
        println!("\n{name}: ms per collision frame (build + trace)\n");
    }
    println!("| agents | {} |", series.join(" | "));
    println!("|---:|{}", "---:|".repeat(series.len()));
    for &count in counts {
        let cells: Vec<String> = series
            .iter()
            .map(|s| {
                points
                    .iter()
                    .find(|p| p.agents == count && p.series == *s)
                    .map_or("-".into(), |p| format!("{:.2}", p.frame_ms()))
            })
            .collect();
        println!("| {count} | {} |", cells.join(" | "));
    }
}

fn write_json(
    path: &std::path::Path,
    name: &str,
    triangles: usize,
    args: &CollideBenchArgs,
    points: &[Point],
) -> Result<()> {
    let rows: Vec<serde_json::Value> = points
        .iter()
        .map(|p| {
            json!({
                "series": p.series, "agents": p.agents, "build_ms": p.build_ms,
                "trace_ms": p.trace_ms, "frame_ms": p.frame_ms(),
            })
        })
        .collect();
    let doc = json!({
        "scene": name, "triangles": triangles, "frames": args.frames,
        "rays_per_agent": args.rays, "seed": args.seed, "points": rows,
    });
    std::fs::write(path, serde_json::to_string_pretty(&doc)? + "\n")?;
    Ok(())
}
