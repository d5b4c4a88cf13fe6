//! `caustic collide`: the collision experiment of Vinkler et al. 2013,
//! §6.2 (`caustic_accel::collision`), by DACRT (median or RDH splits, no
//! structure kept) and by any BVH builder (built and traced every frame,
//! as the paper's HLBVH and "OurBVH" curves), on the CPU or the GPU (DACRT
//! there on the task pool, `caustic_accel::dacrt::DacrtTracer`; on the GPU
//! a frame's segments are made, traced and reduced per agent on the
//! device, `caustic_accel::collision_cuda::DeviceAgents`). Every method
//! traces the same rays; the answers of each are checked against the
//! first method's.

use crate::device;
use crate::scene_arg;
use anyhow::{Context, Result, bail};
use caustic::Device;
use caustic_accel::collision::{Agents, FrameAnswers};
use caustic_accel::dacrt::{Dacrt, DacrtConfig};
use caustic_accel::{build_accel, check_spec};
use caustic_geom::Triangle;
use clap::Args;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::Instant;

#[derive(Args)]
#[command(after_help = "Examples:\n  \
    caustic collide target/scenes/sponza-dabrovic/sponza.obj --agents 4096\n  \
    caustic collide cornell-box --agents 256 --method dacrt,dacrt-rdh,bvh-binned,ploc --json collide.json\n  \
    caustic collide sponza.obj --agents 65536 --method dacrt,dacrt-rdh,ploc,bvh-binned --device cuda\n\n\
    Methods: dacrt[:split=median|rdh][:sched=concurrent|waves][:sort=C][:rays=N][:tris=N] (spatial-median \
    or ray distribution heuristic splits; on the GPU all seven children at once, or the paper's dependency \
    waves; the paper's C_SORT = 80, 32 rays, 16 triangles by default), dacrt-rdh, or any \
    --accel structure (bvh-binned, ploc, lbvh, ..., with parameters), built and traced every frame.")]
pub struct CollideArgs {
    /// Scene file or built-in scene name; `FILE@N` for N copies of it on a
    /// square grid (`dragon_vrip.ply@16`, as `caustic bench gpu` takes it).
    scene: String,
    /// Moving agents.
    #[arg(long, default_value_t = 1024)]
    agents: usize,
    /// Positions per agent, one per frame (at least 2).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(2..=100_000))]
    frames: u32,
    /// Segments each agent shoots per frame.
    #[arg(long, default_value_t = 128, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    rays: u32,
    /// Comma-separated methods; the first one's answers are the JSON's and
    /// the others are checked against them.
    #[arg(long, default_value = "dacrt,dacrt-rdh,bvh-binned")]
    method: String,
    /// cpu, cuda[:N] or auto.
    #[arg(long, default_value = "cpu")]
    device: Device,
    /// Seed of the agents' paths and rays.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write every agent's answer per frame and the timings as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
    /// CPU threads (0: all cores).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
}

/// A way to answer a frame's rays.
#[derive(Clone, Debug)]
pub(crate) enum Method {
    Dacrt(DacrtConfig),
    /// An accel spec, built every frame.
    Structure(String),
}

impl Method {
    pub(crate) fn parse(text: &str) -> Result<Self> {
        Ok(match text {
            spec if spec.starts_with("dacrt") => Self::Dacrt(
                DacrtConfig::parse(spec).map_err(|e| anyhow::anyhow!("--method {spec}: {e}"))?,
            ),
            spec => {
                let cpu = spec.strip_prefix("cpu:").unwrap_or(spec);
                check_spec(cpu).with_context(|| format!("--method {spec}"))?;
                Self::Structure(spec.to_owned())
            }
        })
    }

    /// A comma-separated list of methods, at least one.
    pub(crate) fn parse_list(list: &str) -> Result<Vec<Self>> {
        let methods: Vec<Self> = list
            .split(',')
            .map(str::trim)
            .filter(|m| !m.is_empty())
            .map(Self::parse)
            .collect::<Result<_>>()?;
        if methods.is_empty() {
            bail!("--method names no method in `{list}`");
        }
        Ok(methods)
    }

    pub(crate) fn name(&self) -> String {
        match self {
            Self::Dacrt(c) => c.spec(),
            Self::Structure(spec) => spec.clone(),
        }
    }
}

/// One method's run over every frame.
pub(crate) struct MethodRun {
    pub(crate) name: String,
    pub(crate) device: String,
    pub(crate) build_ms: Vec<f64>,
    pub(crate) trace_ms: Vec<f64>,
    pub(crate) answers: Vec<FrameAnswers>,
}

impl MethodRun {
    pub(crate) fn mean(v: &[f64]) -> f64 {
        v.iter().sum::<f64>() / v.len().max(1) as f64
    }
}

pub fn run(args: CollideArgs) -> Result<()> {
    let methods = Method::parse_list(&args.method)?;
    if args.agents == 0 {
        bail!("--agents must be at least 1");
    }
    let backend = device::open(args.device)?;
    let (_, triangles) = scene_arg::load_triangles(&args.scene)?;
    if triangles.is_empty() {
        bail!("{} has no triangles to collide with", args.scene);
    }
    let bounds = triangles
        .iter()
        .fold(caustic_geom::Aabb::EMPTY, |b, t| b.union(t.bounds()));
    let agents = Agents::random(
        &bounds,
        args.agents,
        args.frames as usize,
        args.rays as usize,
        args.seed,
    );
    eprintln!(
        "{}: {} triangles, {} agents x {} rays = {} segments per frame, {} frames",
        args.scene,
        triangles.len(),
        agents.count(),
        agents.rays_per_agent(),
        agents.count() * agents.rays_per_agent(),
        agents.frames()
    );
    let mut runs = Vec::new();
    for method in &methods {
        let run = run_method(method, &backend, &triangles, &agents)?;
        eprintln!(
            "{}: {:.2} ms per frame ({:.2} build + {:.2} trace)",
            run.name,
            MethodRun::mean(&run.build_ms) + MethodRun::mean(&run.trace_ms),
            MethodRun::mean(&run.build_ms),
            MethodRun::mean(&run.trace_ms)
        );
        runs.push(run);
    }
    let disagreements = print_summary(&runs, &agents);
    if let Some(path) = &args.json {
        write_json(path, &args, triangles.len(), &agents, &runs)?;
        eprintln!("wrote {}", path.display());
    }
    if disagreements > 0 {
        bail!("{disagreements} agent answers differ between methods");
    }
    Ok(())
}

/// Every frame of `agents` by `method`. A frame's time is its build (BVH
/// methods) and its trace, which includes making the frame's segments and
/// reducing their hits to the agents' answers, on the device that traces.
pub(crate) fn run_method(
    method: &Method,
    backend: &caustic::Backend,
    triangles: &[Triangle],
    agents: &Agents,
) -> Result<MethodRun> {
    let mut run = MethodRun {
        name: method.name(),
        device: if backend.is_gpu() { "GPU" } else { "CPU" }.into(),
        build_ms: Vec::new(),
        trace_ms: Vec::new(),
        answers: Vec::new(),
    };
    #[cfg(feature = "cuda")]
    if let Some(gpu) = backend.gpu() {
        gpu_frames(gpu, method, triangles, agents, &mut run)?;
        return Ok(run);
    }
    // DACRT keeps the triangles and nothing else: made once, like the
    // scene the BVH methods build over every frame.
    let dacrt = match method {
        Method::Dacrt(config) => Some(Dacrt::new(triangles, *config)),
        Method::Structure(_) => None,
    };
    for frame in 0..agents.frames() {
        let start = Instant::now();
        let (build_ms, hits) = match (method, &dacrt) {
            (_, Some(dacrt)) => {
                let rays = agents.frame_rays(frame);
                let mut hits = vec![None; rays.len()];
                let stats = dacrt.closest_hits(&rays, &mut hits);
                if std::env::var_os("CAUSTIC_DACRT_STATS").is_some() {
                    eprintln!("{stats:?}");
                }
                (0.0, hits)
            }
            (Method::Structure(spec), None) => {
                let cpu = spec.strip_prefix("cpu:").unwrap_or(spec);
                let accel = build_accel(cpu, triangles)?;
                let build_ms = start.elapsed().as_secs_f64() * 1e3;
                let rays = agents.frame_rays(frame);
                let mut hits = vec![None; rays.len()];
                accel.intersect_batch(&rays, &mut hits);
                (build_ms, hits)
            }
            (Method::Dacrt(_), None) => unreachable!("made above"),
        };
        let answers = agents.answers(&hits);
        let total = start.elapsed().as_secs_f64() * 1e3;
        run.build_ms.push(build_ms);
        run.trace_ms.push(total - build_ms);
        run.answers.push(answers);
    }
    Ok(run)
}

/// Every frame on the GPU, after one untimed warm-up frame (kernels
/// compiled and loaded, pools sized). The triangles go up once and the
/// agents' paths once ([`DeviceAgents`]); a BVH method rebuilds its
/// structure over them every frame (device time of the build's stages;
/// a CPU-built tree, `cpu:SPEC`, is built and uploaded again), then the
/// frame's segments are made, traced and reduced per agent on the device
/// and the agents' answers read back (host time, from the first launch to
/// the answers on the host). DACRT builds nothing.
#[cfg(feature = "cuda")]
fn gpu_frames(
    gpu: &caustic_gpu::Gpu,
    method: &Method,
    triangles: &[Triangle],
    agents: &Agents,
    run: &mut MethodRun,
) -> Result<()> {
    use caustic_accel::bvh::device_accel_cuda::{DeviceAccel, GpuAccelSpec};
    use caustic_accel::collision_cuda::DeviceAgents;
    let spec: GpuAccelSpec = method
        .name()
        .parse()
        .with_context(|| format!("--method {} on the GPU", method.name()))?;
    let rebuilds = !matches!(
        spec,
        GpuAccelSpec::Uploaded(_) | GpuAccelSpec::KdTree(_) | GpuAccelSpec::Grid(_)
    );
    let mut device_agents = DeviceAgents::new(gpu, agents)?;
    let mut accel = DeviceAccel::build(gpu, triangles, &spec)?;
    let mut tracer = accel.tracer()?;
    // The warm-up frame, with a rebuild beside the first structure: the
    // timed frames find the memory pool grown to hold the old structure and
    // the new one's build at once, as every later frame does.
    if rebuilds && matches!(method, Method::Structure(_)) {
        accel.rebuild_in_place()?;
    }
    device_agents.frame(&accel, &mut tracer, 0)?;
    for frame in 0..agents.frames() {
        let build_ms = match (method, rebuilds) {
            (Method::Dacrt(_), _) => 0.0,
            (Method::Structure(_), true) => {
                accel.rebuild_in_place()?;
                accel.stats().build_ms
            }
            (Method::Structure(_), false) => {
                accel = DeviceAccel::build(gpu, triangles, &spec)?;
                accel.stats().build_ms
            }
        };
        let start = Instant::now();
        let answers = device_agents.frame(&accel, &mut tracer, frame)?;
        run.build_ms.push(build_ms);
        run.trace_ms.push(start.elapsed().as_secs_f64() * 1e3);
        run.answers.push(answers);
    }
    Ok(())
}

/// Prints the per-method table; returns how many agent answers differ
/// from the first method's.
fn print_summary(runs: &[MethodRun], agents: &Agents) -> usize {
    println!(
        "| method | device | agents | segments per frame | build ms | trace ms | frame ms | colliding agents per frame | answers |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---|");
    let mut total_differences = 0;
    for run in runs {
        let colliding: usize = run
            .answers
            .iter()
            .map(|f| f.iter().filter(|a| a.collides).count())
            .sum();
        let differences: usize = run
            .answers
            .iter()
            .zip(&runs[0].answers)
            .map(|(a, b)| a.iter().zip(b).filter(|(x, y)| x != y).count())
            .sum();
        total_differences += differences;
        let verdict = if differences == 0 {
            format!("= {}", runs[0].name)
        } else {
            format!("{differences} differ from {}", runs[0].name)
        };
        let (build, trace) = (
            MethodRun::mean(&run.build_ms),
            MethodRun::mean(&run.trace_ms),
        );
        println!(
            "| {} | {} | {} | {} | {build:.2} | {trace:.2} | {:.2} | {:.1} | {verdict} |",
            run.name,
            run.device,
            agents.count(),
            agents.count() * agents.rays_per_agent(),
            build + trace,
            colliding as f64 / run.answers.len().max(1) as f64,
        );
    }
    total_differences
}

fn write_json(
    path: &std::path::Path,
    args: &CollideArgs,
    triangles: usize,
    agents: &Agents,
    runs: &[MethodRun],
) -> Result<()> {
    let methods: Vec<Value> = runs
        .iter()
        .map(|r| {
            json!({
                "method": r.name,
                "device": r.device,
                "build_ms": r.build_ms,
                "trace_ms": r.trace_ms,
                "mean_frame_ms": MethodRun::mean(&r.build_ms) + MethodRun::mean(&r.trace_ms),
            })
        })
        .collect();
    // Per frame, per agent: [collides, distance, triangle] (null when none).
    let answers: Vec<Value> = runs[0]
        .answers
        .iter()
        .map(|frame| {
            Value::Array(
                frame
                    .iter()
                    .map(|a| match a.nearest {
                        Some((t, prim)) => json!([a.collides, t, prim]),
                        None => json!([a.collides, null, null]),
                    })
                    .collect(),
            )
        })
        .collect();
    let doc = json!({
        "scene": args.scene,
        "triangles": triangles,
        "agents": agents.count(),
        "frames": agents.frames(),
        "rays_per_agent": agents.rays_per_agent(),
        "seed": args.seed,
        "methods": methods,
        "answers_of": runs[0].name,
        "answers": answers,
    });
    std::fs::write(path, serde_json::to_string(&doc)?)
        .with_context(|| format!("writing {}", path.display()))
}
