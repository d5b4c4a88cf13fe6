//! `caustic bench collide`: Figure 7 of Vinkler, Bittner, Havran and
//! Hapala 2013 (§6.2) as numbers and a plot: the time of one collision
//! frame (build + trace, averaged over the frames) against the number of
//! agents, for DACRT (median and RDH splits) and the BVH builders, on the
//! CPU and the GPU. Each point is a `caustic collide` run
//! ([`crate::collide::run_method`]: the same agents, rays and answers); a
//! method whose answers differ from the first one's fails the benchmark.

use crate::collide::{Method, MethodRun, run_method};
use crate::{device, plot, scene_arg};
use anyhow::{Result, bail};
use caustic::Device;
use caustic_accel::collision::{Agents, FrameAnswers};
use caustic_geom::{Aabb, Ray};
use clap::Args;
use serde_json::json;
use std::path::PathBuf;

#[derive(Args)]
#[command(after_help = "Examples:\n  \
    caustic bench collide --scene target/scenes/sponza-dabrovic/sponza.obj --device cpu,cuda --plot sponza.svg\n  \
    caustic bench collide --scene target/scenes/dragon/dragon_vrip.ply@16 --device cuda --agents 64,1024,10000 --frames 3\n\n\
    scripts/dacrt-figure7.sh runs both scenes of the paper's figure.")]
pub struct CollideBenchArgs {
    /// Scene file or built-in scene name; `FILE@N` for N copies of it on a
    /// square grid (`dragon_vrip.ply@16`, the 14 M-triangle stand-in for
    /// the paper's Power Plant).
    #[arg(long)]
    scene: String,
    /// Agent counts, comma separated [default: 2^6 .. 2^16].
    #[arg(long, value_delimiter = ',', value_parser = crate::parse::count)]
    agents: Vec<usize>,
    /// Methods, comma separated, as `caustic collide --method` takes them.
    #[arg(long, default_value = "dacrt,dacrt-rdh,bvh-binned,lbvh,hlbvh,ploc")]
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
    /// Write every point as JSON to this file.
    #[arg(long)]
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
    let methods = parse_methods(&args.method)?;
    let cpu_methods = match &args.cpu_method {
        Some(list) => parse_methods(list)?,
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
    let (name, triangles) = scene_arg::load_triangles(&args.scene)?;
    if triangles.is_empty() {
        bail!("{} has no triangles to collide with", args.scene);
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
            let frames: Vec<Vec<Ray>> =
                (0..agents.frames()).map(|f| agents.frame_rays(f)).collect();
            let methods = if backend.is_gpu() {
                &methods
            } else {
                &cpu_methods
            };
            for method in methods {
                let run = run_method(method, &backend, &triangles, &agents, &frames)?;
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
    print_table(&name, &args, &counts, &points);
    if let Some(path) = &args.json {
        write_json(path, &name, triangles.len(), &args, &points)?;
        eprintln!("wrote {}", path.display());
    }
    if let Some(path) = &args.plot {
        let mut series: Vec<plot::Series> = Vec::new();
        for p in &points {
            match series.iter_mut().find(|s| s.name == p.series) {
                Some(s) => s.points.push((p.agents as f64, p.frame_ms())),
                None => series.push(plot::Series {
                    name: p.series.clone(),
                    points: vec![(p.agents as f64, p.frame_ms())],
                }),
            }
        }
        let title = format!(
            "Collision frames on {name} ({} triangles), {} rays per agent",
            triangles.len(),
            args.rays
        );
        plot::lines(
            path,
            &title,
            "agents",
            "ms per frame (build + trace)",
            &series,
        )?;
        eprintln!("wrote {}", path.display());
    }
    if !disagreements.is_empty() {
        bail!(
            "answers differ from the first method's: {}",
            disagreements.join("; ")
        );
    }
    Ok(())
}

fn parse_methods(list: &str) -> Result<Vec<Method>> {
    let methods: Vec<Method> = list
        .split(',')
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .map(Method::parse)
        .collect::<Result<_>>()?;
    if methods.is_empty() {
        bail!("no method named in `{list}`");
    }
    Ok(methods)
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
    println!(
        "\n{name}: ms per collision frame (build + trace), mean of {} frames, {} rays per agent\n",
        args.frames, args.rays
    );
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
