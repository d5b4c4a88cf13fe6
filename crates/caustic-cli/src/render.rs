//! `caustic render`: the flags every integrator shares, the scene, camera
//! and light set-up, the render itself through the library facade
//! (`caustic::Renderer`: structure, device, integrator, progress) and the
//! image out. Each integrator's own flags, settings and summary live in
//! `render_whitted.rs`, `render_photon.rs` and `render_sppm.rs`.

use crate::camera::CameraArgs;
use crate::frame_writer::FrameWriter;
use crate::parse::AccelArg;
use crate::render_photon::{self, PhotonArgs};
use crate::render_sppm::{self, Scorer, SppmArgs};
use crate::render_whitted::{self, Fresnel};
use crate::{camera_presets, device, notes, output, parse, ranks, scene_arg};
use anyhow::{Context, Result, bail};
use caustic::accel::{DEFAULT_GPU_SPEC, GPU_STRUCTURES};
use caustic::{
    AccelKind, Backend, Device, Film, Integrator, Light, Progress, Rendered, Renderer, Rgb, Scene,
    Stats, Vec3, image_io,
};
use caustic_accel::bvh::{UpdatePolicy, UpdateTracker};
use caustic_accel::{Accel as _, TriangleBvh};
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The acceleration structure `render` (on the CPU) and `bench accel` use
/// unless told otherwise: the 8-wide SIMD BVH, the fastest CPU structure to
/// trace. On a GPU `render` builds `DEFAULT_GPU_SPEC` there.
pub const DEFAULT_ACCEL: &str = "bvh-wide";

/// The built-in scene a bare `caustic render` draws: caustics and indirect
/// light, what photon mapping is for.
const DEFAULT_SCENE: &str = "cornell-caustics";

fn help() -> String {
    format!(
        "Examples:\n  \
         caustic render                       # cornell-caustics by photon mapping -> cornell-caustics.png\n  \
         caustic render cornell-caustics --spp 16 --photons 400000 -o caustics.exr\n  \
         caustic render cornell-box --integrator whitted -o cb.png\n  \
         caustic render scene.xml --integrator sppm --passes 256 -o sppm.exr\n  \
         caustic render model.glb --two-sided --width 1280 --height 720\n  \
         caustic render target/scenes/sibenik/sibenik.obj --camera sibenik\n  \
         caustic render cornell-box --device cuda --accel lbvh:bits=63\n  \
         caustic render cornell-box --device cuda --accel cpu:bvh-binned   # CPU-built, uploaded\n  \
         caustic render cornell-box --integrator whitted --accel dacrt:split=rdh   # wavefronts on the CPU\n\n\
         --accel on a GPU (--device cuda, or auto with a GPU): the structure of that name built \
         on the device: {} (default {DEFAULT_GPU_SPEC}); cpu:SPEC traces a tree the CPU built \
         (on the CPU, cpu:SPEC is SPEC). Brute force, which the GPU does not run, \
         is an error with --device cuda and renders on the CPU \
         with --device auto.\n\n\
         --accel dacrt[:split=median|rdh] builds nothing: each batch of rays is traced by \
         divide and conquer. Every integrator traces it, on a GPU and on the CPU, where the \
         renderers trace by waves of batched queries instead of one ray at a time (the same \
         image as per ray).\n\n{}",
        GPU_STRUCTURES.join(", "),
        camera_presets::help()
    )
}

#[derive(Args)]
#[command(after_help = help())]
pub struct RenderArgs {
    /// Scene file (.obj, .ply, .gltf, .glb, .xml) or built-in scene name
    /// (cornell-box, cornell-caustics).
    #[arg(default_value = DEFAULT_SCENE)]
    scene: String,
    /// Output image: .png (sRGB) or .exr (linear radiance). Default: SCENE.png.
    /// With --frames, a pattern with `%04d` (any width) for the frame
    /// number: `-o out_%04d.png`.
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Frames of an animated scene to render, `A..B` (inclusive) or one
    /// frame `N`; frame numbers follow the scene's clock (or --fps).
    #[arg(long, value_parser = frame_range, conflicts_with = "time")]
    frames: Option<(u32, u32)>,
    /// Render an animated scene at this instant (seconds on its clock).
    #[arg(long, allow_negative_numbers = true)]
    time: Option<f32>,
    /// Frames per second for --frames, instead of the scene's own.
    #[arg(long, value_parser = parse::positive_f32)]
    fps: Option<f32>,
    /// Light transport. All three run on the CPU or an NVIDIA GPU (--device).
    #[arg(long, value_enum, default_value_t = IntegratorName::Photon)]
    integrator: IntegratorName,
    /// Samples (eye rays) per pixel [default: 16 for whitted, 4 for photon;
    /// sppm takes one per pass].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), allow_negative_numbers = true)]
    spp: Option<u32>,
    /// No progress bar and no notes (the device line among them);
    /// warnings, errors and the summary still print.
    #[arg(short, long)]
    quiet: bool,
    #[command(flatten)]
    flags: RenderFlags,
}

/// The flags `render` and `view` share: what the image is made of and
/// how (size, light transport, structure, device, camera, each
/// integrator's section).
#[derive(Args)]
pub struct RenderFlags {
    /// How the structure follows an animation: `rebuild` every frame,
    /// `refit` the first frame's tree, or `auto` (refit while its SAH stays
    /// within 1.3 times the last build's; `auto:BOUND` for another bound).
    /// Refitting needs a binary BVH on the CPU (bvh-binned, ploc, ...),
    /// a BVH on a GPU (binary or bvh-wide, refitted on the device); other
    /// structures rebuild. On a GPU the scene stays on the device between
    /// frames and only the moving meshes' triangles are uploaded.
    #[arg(long, default_value = "auto")]
    pub update: UpdatePolicy,
    /// Image width in pixels [default: the scene file's, else 512; view: 640].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=parse::MAX_SIDE as i64), allow_negative_numbers = true)]
    width: Option<u32>,
    /// Image height in pixels [default: the scene file's, else 512; view: 480].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=parse::MAX_SIDE as i64), allow_negative_numbers = true)]
    height: Option<u32>,
    /// Most specular bounces after the primary ray (sppm: also the most
    /// photon bounces) [default: 5 for whitted and photon, 64 for sppm].
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=256), allow_negative_numbers = true)]
    max_depth: Option<u32>,
    /// Shadow rays per area light at each shaded point.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=1024), allow_negative_numbers = true)]
    light_samples: u32,
    /// Acceleration structure, with optional parameters (e.g. `ploc:r=32`;
    /// `caustic bench accel --help` lists them). On the CPU the default,
    /// the 8-wide SIMD BVH, traces about twice as fast as the binary
    /// `bvh-binned`; on a GPU the structure is built there (`render --help` lists them).
    /// `dacrt[:split=median|rdh]`: no structure, batches traced by divide
    /// and conquer (on the CPU every integrator traces it by waves)
    /// [default: bvh-wide on the CPU, bvh-binned on a GPU].
    #[arg(long, value_parser = parse::accel_arg)]
    pub accel: Option<AccelArg>,
    /// Worker threads (0 = all cores; MPI ranks of one node that the
    /// launcher did not bind to cores share them: cores / ranks each).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u16).range(0..=4096), allow_negative_numbers = true)]
    threads: u16,
    /// Fresnel formula for glass (whitted only; photon and sppm use the
    /// exact one).
    #[arg(long, value_enum, default_value_t = Fresnel::Exact)]
    fresnel: Fresnel,
    /// Seed of the random sample streams (the viewer's later passes take
    /// the next seeds).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Exposure in stops of PNG images and the viewer's frames (linear
    /// values are scaled by 2^exposure).
    #[arg(long, default_value_t = 0.0, allow_hyphen_values = true, value_parser = parse::exposure)]
    pub exposure: f32,
    /// Render every material two-sided (both faces shaded, emitters emit
    /// from both): for files whose faces point the wrong way.
    #[arg(long)]
    two_sided: bool,
    /// Where to render: `auto` (CUDA when a driver and GPU are present,
    /// else the CPU), `cpu`, `cuda`, `cuda:N`, or several GPUs
    /// `cuda:N,M,…` / `cuda:all` (every integrator splits among them:
    /// tile rows, photons, final gathers).
    #[arg(long, default_value = "auto")]
    pub device: Device,
    #[command(flatten)]
    pub camera: CameraArgs,
    #[command(flatten)]
    photon: PhotonArgs,
    #[command(flatten)]
    pub sppm: SppmArgs,
}

/// The light transport algorithms of `caustic render` (and `caustic view`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum IntegratorName {
    /// Specular chains, direct light by shadow rays: no indirect light.
    Whitted,
    /// Photon mapping: caustic map, final gather into a global map with
    /// adaptive irradiance samples.
    Photon,
    /// Stochastic progressive photon mapping: full global illumination,
    /// consistent (the error goes to zero as --passes grows).
    Sppm,
}

/// The settings every integrator shares, resolved once from the flags and
/// the scene; each integrator's module adds its own.
pub struct Common {
    pub width: u32,
    pub height: u32,
    pub spp: u32,
    /// `None`: the integrator's own default.
    pub max_depth: Option<u32>,
    pub light_samples: u32,
    pub seed: u64,
}

impl RenderArgs {
    /// `--threads` (0: one per core).
    pub fn threads(&self) -> usize {
        self.flags.threads()
    }
}

pub fn run(args: RenderArgs) -> Result<()> {
    if args.frames.is_some() || args.time.is_some() {
        return run_animation(args);
    }
    notes::set_quiet(args.quiet || !ranks::is_root());
    // Everything that can be refused is refused before the scene loads.
    let output = args
        .output
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("{}.png", scene_arg::short_name(&args.scene))));
    if ranks::is_root() {
        output::check_image_path(&output)?; // the writer checks (it probes by creating)
    }
    if args.integrator != IntegratorName::Whitted && matches!(args.flags.fresnel, Fresnel::Schlick)
    {
        bail!(
            "--fresnel schlick is for --integrator whitted; photon and sppm use the exact Fresnel equations"
        );
    }
    check_gpu_flags(args.flags.device, args.flags.accel.as_ref())?;
    let loaded = scene_arg::load(&args.scene)?;
    let camera = args.flags.camera.resolve(&loaded)?;
    let mut scene = loaded.scene;
    args.flags.apply_sides(&mut scene);
    add_headlight_if_unlit(&mut scene, camera.eye);
    // Settings and the reference are checked before the structure is built.
    let integrator = args.integrator(&scene);
    integrator.validate()?;
    let reference = match &integrator {
        Integrator::Sppm(settings) => args.flags.sppm.reference(settings)?,
        _ => None,
    };
    let renderer = args.renderer(&scene);
    let backend = renderer.backend_for(&integrator)?;
    device::say(&backend);
    let watch = Watch::new(&integrator, &backend, reference);
    let renderer = renderer.on_progress(|progress| watch.report(progress));
    let rendered = renderer.render(&camera, &integrator);
    watch.finish();
    let rendered = rendered?;
    let summary = summary(&integrator, &rendered, &backend, &renderer)?;
    if !ranks::is_root() {
        return Ok(()); // rank 0 writes the image every rank holds
    }
    warn_if_empty(&rendered.film);
    image_io::write_image(&rendered.film, &output, args.flags.exposure)
        .with_context(|| format!("cannot write {}", output.display()))?;
    eprintln!("wrote {} {summary}", output.display());
    Ok(())
}

/// `--frames A..B` or `--time T`: the scene posed at each instant, the
/// camera taken again from the posed scene unless the flags place it, one
/// image per frame. On the CPU the frames carry a binary BVH and refit it
/// ([`CarriedTree`]) or build afresh; on a GPU they carry the scene on the
/// device ([`caustic::FrameCarry`]): each frame uploads only the moving
/// meshes' triangles, in place, and rebuilds or refits the structure there.
fn run_animation(args: RenderArgs) -> Result<()> {
    notes::set_quiet(args.quiet || !ranks::is_root());
    let pattern = args.output.clone().unwrap_or_else(|| {
        PathBuf::from(format!("{}_%04d.png", scene_arg::short_name(&args.scene)))
    });
    if args.frames.is_some() && frame_path(&pattern, 0).is_none() {
        bail!(
            "--frames writes one image per frame: give -o a pattern with %04d, e.g. -o out_%04d.png"
        );
    }
    if ranks::is_root() {
        output::check_image_path(&frame_path(&pattern, 0).unwrap_or_else(|| pattern.clone()))?;
    }
    check_gpu_flags(args.flags.device, args.flags.accel.as_ref())?;
    let mut loaded = scene_arg::load(&args.scene)?;
    let Some(clock) = loaded.scene.timeline() else {
        bail!(
            "{} is not animated: --frames and --time need an animated scene (AFF, glTF with animations, a numbered mesh sequence, or cornell-caustics-moving)",
            args.scene
        );
    };
    let instants: Vec<(Option<u32>, f32)> = match (args.frames, args.time) {
        (Some((first, last)), _) => (first..=last)
            .map(|f| {
                let t = match args.fps {
                    Some(fps) => clock.start + f as f32 / fps,
                    None => clock.time_of_frame(f),
                };
                (Some(f), t)
            })
            .collect(),
        (None, Some(t)) => vec![(None, t)],
        (None, None) => unreachable!("run_animation runs for --frames or --time"),
    };
    if let Some(&(_, last)) = instants.last()
        && (last > clock.end || instants[0].1 < clock.start)
    {
        notes::note(format!(
            "the scene's clock runs from {} s to {} s ({} frames); instants outside it show its first or last pose",
            clock.start, clock.end, clock.frames
        ));
    }
    args.flags.apply_sides(&mut loaded.scene);
    let fixed = loaded
        .scene
        .animation
        .as_ref()
        .is_none_or(|a| a.fixed_topology());
    let flags = &args.flags;
    let backend = flags.device.resolve()?;
    let lanes = backend.each_device();
    let mut carried =
        CarriedTree::new(flags.accel.as_ref(), !backend.is_gpu(), flags.update, fixed)?;
    let started = Instant::now();
    let count = instants.len();
    let team = ranks::team().filter(|_| count > 1);
    let (width, height) = args.integrator(&loaded.scene).size();
    let writer = FrameWriter::for_frames(
        width as usize * height as usize,
        rayon::current_num_threads(),
    );
    let dealt = if team.is_none() && lanes.len() > 1 && count > 1 {
        let bar = frames_bar(count, args.quiet);
        deal_frames(
            &args,
            &loaded,
            (&pattern, &instants),
            (lanes, &bar),
            &writer,
        )?;
        writer.finish()?;
        bar.finish_and_clear();
        format!(", dealt over {} GPUs", backend.device_count())
    } else {
        // One device: every frame, or among MPI ranks rank r's frames
        // r, r + N, …, rendered alone on its own device and written by it.
        let (mine, alone) = match &team {
            Some(team) => (every_nth(&instants, team.rank(), team.size()), true),
            None => (instants.clone(), false),
        };
        let bar = frames_bar(mine.len(), args.quiet);
        let frames = Frames {
            pattern: &pattern,
            instants: &mine,
            bar: &bar,
            alone,
            writer: &writer,
        };
        render_frames(&args, &mut loaded, frames, None, &mut carried)?;
        writer.finish()?;
        // Every rank's frames written before rank 0 reports.
        if let Some(team) = &team {
            team.all_gather(&[]).map_err(|e| anyhow::anyhow!("{e}"))?;
        }
        bar.finish_and_clear();
        team.map_or(String::new(), |t| {
            format!(", dealt over {} ranks", t.size())
        })
    };
    let seconds = started.elapsed().as_secs_f64();
    if ranks::is_root() && count > 1 {
        eprintln!(
            "animation: {count} frames in {seconds:.2} s ({:.1} frames/s{dealt})",
            count as f64 / seconds
        );
    }
    Ok(())
}

/// Every `n`-th of `instants` from the `k`-th: the frames of one of `n`
/// devices or ranks that deal out an animation.
fn every_nth(instants: &[(Option<u32>, f32)], k: usize, n: usize) -> Vec<(Option<u32>, f32)> {
    instants.iter().skip(k).step_by(n).copied().collect()
}

/// The frames one thread renders: their instants, where their images go,
/// the bar they advance and the writers that write them; `alone` when an
/// MPI rank renders them without the other ranks (frames dealt among the
/// ranks), writing them itself.
#[derive(Clone, Copy)]
struct Frames<'a> {
    pattern: &'a Path,
    instants: &'a [(Option<u32>, f32)],
    bar: &'a ProgressBar,
    alone: bool,
    writer: &'a FrameWriter,
}

/// Every frame of `lanes`' devices at once, frame `k` on device `k mod
/// lanes` (each with its own copy of the scene, posed at its own frames,
/// and its own carried structure): an animation's frames are independent,
/// so its frame rate grows with the GPUs while each frame is the one GPU's
/// image. Frames split among the GPUs one by one (`render_instant` on the
/// whole set) wait for the slowest part of every frame instead.
fn deal_frames(
    args: &RenderArgs,
    loaded: &scene_arg::LoadedScene,
    (pattern, instants): (&Path, &[(Option<u32>, f32)]),
    (lanes, bar): (Vec<Backend>, &ProgressBar),
    writer: &FrameWriter,
) -> Result<()> {
    let n = lanes.len();
    if ranks::is_root() {
        bar.suspend(|| eprintln!("frames dealt over {n} GPUs, each frame on one"));
    }
    let results: Vec<Result<()>> = std::thread::scope(|scope| {
        let threads: Vec<_> = lanes
            .into_iter()
            .enumerate()
            .map(|(k, lane)| {
                let mine = every_nth(instants, k, n);
                let mut copy = scene_arg::LoadedScene {
                    scene: loaded.scene.clone(),
                    name: loaded.name.clone(),
                    path: loaded.path.clone(),
                };
                scope.spawn(move || {
                    let frames = Frames {
                        pattern,
                        instants: &mine,
                        bar,
                        alone: false,
                        writer,
                    };
                    render_frames(args, &mut copy, frames, Some(lane), &mut None)
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| {
                t.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    });
    results.into_iter().collect()
}

/// `frames` rendered one after another on `backend` (opened by the first
/// frame when `None`), each from its instant to its image, with the
/// structure `carried` refits on the CPU.
fn render_frames(
    args: &RenderArgs,
    loaded: &mut scene_arg::LoadedScene,
    frames: Frames,
    mut backend: Option<Backend>,
    carried: &mut Option<CarriedTree>,
) -> Result<()> {
    let show_device = backend.is_none();
    let mut gpu_carry = None;
    for &(frame, t) in frames.instants {
        let started = Instant::now();
        loaded.scene.set_time(t);
        let pose_ms = started.elapsed().as_secs_f64() * 1e3;
        let path = match frame {
            Some(f) => frame_path(frames.pattern, f).expect("checked above"),
            None => frames.pattern.to_path_buf(),
        };
        let (structure, update) = match carried {
            Some(tree) => {
                let update = tree.update(&loaded.scene.triangles())?;
                (Some(tree.shared()), update)
            }
            None => (None, "update rebuild".to_owned()),
        };
        // Posing, update, upload and render: what a frame of the animation
        // costs from its instant to its image.
        let shared = Shared {
            backend: &mut backend,
            gpu_carry: &mut gpu_carry,
            show_device,
            alone: frames.alone,
            writer: frames.writer,
        };
        let done = render_instant(args, loaded, &path, structure, (started, shared))?;
        let update = done.update.unwrap_or(update);
        let label = frame.map_or(String::new(), |f| format!("frame {f} "));
        let stages = done.stages.stages(pose_ms);
        if ranks::is_root() {
            frames.bar.suspend(|| {
                eprintln!(
                    "{label}(t = {t:.3} s, {update}, frame {:.1} ms; {stages}): wrote {} {}",
                    done.frame_ms,
                    path.display(),
                    done.summary
                )
            });
        }
        frames.bar.inc(1);
    }
    Ok(())
}

/// The CPU tree an animation refits from frame to frame, with the policy
/// that decides when to build afresh (also `caustic view`'s).
pub(crate) struct CarriedTree {
    spec: String,
    tree: std::sync::Arc<TriangleBvh>,
    tracker: UpdateTracker,
}

impl CarriedTree {
    /// A carried tree of the structure `accel` when the render can refit:
    /// it runs `on_cpu`, the structure is a binary BVH, the policy is not
    /// `rebuild`, and the scene keeps its triangles from frame to frame.
    /// `--update refit` where it cannot refit is an error; `auto` then
    /// rebuilds every frame.
    pub(crate) fn new(
        accel: Option<&AccelArg>,
        on_cpu: bool,
        update: UpdatePolicy,
        fixed_topology: bool,
    ) -> Result<Option<Self>> {
        if update == UpdatePolicy::Rebuild {
            return Ok(None);
        }
        let spec = accel
            .and_then(|a| a.cpu)
            .unwrap_or_else(default_accel)
            .to_string();
        if !on_cpu {
            // The GPU carries its scene and structure itself (the facade's
            // `FrameCarry`): it refits a BVH, and rebuilds the others.
            if update == UpdatePolicy::Refit {
                if !fixed_topology {
                    bail!("--update refit: the scene's triangles change from frame to frame");
                }
                if !gpu_refits(accel) {
                    bail!(
                        "--update refit: the GPU refits a BVH (bvh-binned, lbvh, ploc, hlbvh, bvh-sweep, bvh-wide, cpu:SPEC); {} is rebuilt every frame",
                        accel.map_or(DEFAULT_GPU_SPEC, |a| a.spec.as_str())
                    );
                }
            }
            return Ok(None);
        }
        // DACRT (no CPU spec) keeps no tree: nothing to refit.
        let binary = accel.is_none_or(|a| a.cpu.is_some())
            && caustic_accel::registry::build_triangle_bvh(&spec, &[]).is_ok();
        let why_not = if !binary {
            Some("refitting needs a binary BVH (--accel bvh-binned, bvh-sweep, ploc, lbvh, ...)")
        } else if !fixed_topology {
            Some("the scene's triangles change from frame to frame")
        } else {
            None
        };
        match (why_not, update) {
            (Some(reason), UpdatePolicy::Refit) => bail!("--update refit: {reason}"),
            (Some(_), _) => Ok(None),
            (None, policy) => Ok(Some(Self {
                spec,
                tree: std::sync::Arc::new(TriangleBvh::build(&[])),
                tracker: UpdateTracker::new(policy),
            })),
        }
    }

    /// Follows the posed `triangles`: refits, or builds afresh where the
    /// policy says so; returns the frame's update words.
    pub(crate) fn update(&mut self, triangles: &[caustic_geom::Triangle]) -> Result<String> {
        let start = Instant::now();
        let mut refit_sah = None;
        if !self.tracker.must_rebuild() {
            let tree = std::sync::Arc::get_mut(&mut self.tree)
                .expect("the previous frame's renderer has dropped its share");
            tree.refit(triangles).map_err(anyhow::Error::msg)?;
            let sah = tree.stats().sah_cost;
            if self.tracker.keeps_refit(sah) {
                let ms = start.elapsed().as_secs_f64() * 1e3;
                return Ok(format!("update refit {ms:.1} ms, SAH {sah:.1}"));
            }
            refit_sah = Some(sah);
        }
        let tree = caustic_accel::registry::build_triangle_bvh(&self.spec, triangles)?;
        let sah = tree.stats().sah_cost;
        self.tracker.built(sah);
        self.tree = std::sync::Arc::new(tree);
        let ms = start.elapsed().as_secs_f64() * 1e3;
        let why = refit_sah.map_or(String::new(), |r| {
            format!(" (a refit's SAH {r:.1} passed the bound)")
        });
        Ok(format!("update rebuild {ms:.1} ms, SAH {sah:.1}{why}"))
    }

    /// The tree, for a renderer of the pose it follows.
    pub(crate) fn shared(&self) -> Box<dyn caustic_accel::Accel> {
        Box::new(std::sync::Arc::clone(&self.tree))
    }
}

/// What the frames of an animation share: the device (opened by the
/// first, so later frames neither reopen it nor reload its kernels) and,
/// on a GPU, the scene left on it by the previous frame.
struct Shared<'a> {
    backend: &'a mut Option<Backend>,
    gpu_carry: &'a mut Option<caustic::FrameCarry>,
    /// Say which device the first frame opened.
    show_device: bool,
    /// An MPI rank's own frame ([`Frames::alone`]).
    alone: bool,
    writer: &'a FrameWriter,
}

/// One rendered frame of an animation.
struct FrameDone {
    /// The summary after `wrote FILE`.
    summary: String,
    /// From the instant's posing until the image is ready (before the
    /// file is written).
    frame_ms: f64,
    /// The update words of a GPU frame that followed the previous one
    /// (`update refit 0.3 ms, SAH 41.2`); `None` where the caller's hold.
    update: Option<String>,
    stages: FrameStages,
}

/// Where a frame's time went, stage by stage.
#[derive(Default)]
pub(crate) struct FrameStages {
    /// The GPU frame's update, when it followed the previous frame.
    pub update: Option<caustic::FrameUpdate>,
    /// Preparing the frame (flattening and upload, or the carried
    /// scene's update) before the render.
    pub prepare_ms: f64,
    /// The render, the image's download excluded.
    pub render_ms: f64,
    pub download_ms: f64,
}

impl FrameStages {
    /// `pose 0.1 ms, repose 0.1 ms, upload 96.0 KB 0.1 ms, update 0.4 ms,
    /// render 5.2 ms, download 1.3 ms` (a followed GPU frame), or `pose
    /// 0.1 ms, prepare 20.3 ms, render ...` (a frame prepared afresh).
    pub(crate) fn stages(&self, pose_ms: f64) -> String {
        let prepare = match &self.update {
            Some(u) => format!(
                "repose {:.2} ms, upload {:.1} KB {:.2} ms, update {:.2} ms",
                u.repose_ms,
                u.upload_bytes as f64 / 1024.0,
                u.upload_ms,
                u.update_ms
            ),
            None => format!("prepare {:.1} ms", self.prepare_ms),
        };
        format!(
            "pose {pose_ms:.2} ms, {prepare}, render {:.2} ms, download {:.2} ms",
            self.render_ms, self.download_ms
        )
    }
}

/// The update words of a followed GPU frame: `update refit 0.4 ms, SAH
/// 41.2` (with the rejected refit's SAH where `auto` rebuilt).
pub(crate) fn update_words(u: &caustic::FrameUpdate) -> String {
    let action = match u.action {
        caustic_accel::bvh::UpdateAction::Refitted => "refit",
        caustic_accel::bvh::UpdateAction::Rebuilt => "rebuild",
    };
    let why = u.rejected_refit_sah.map_or(String::new(), |r| {
        format!(" (a refit's SAH {r:.1} passed the bound)")
    });
    format!(
        "update {action} {:.2} ms, SAH {:.1}{why}, {} moved triangles",
        u.update_ms, u.sah_cost, u.moved_triangles
    )
}

/// One frame of an animation, posed at `started`.
fn render_instant(
    args: &RenderArgs,
    loaded: &scene_arg::LoadedScene,
    path: &Path,
    structure: Option<Box<dyn caustic_accel::Accel>>,
    (started, shared): (Instant, Shared),
) -> Result<FrameDone> {
    let camera = args.flags.camera.resolve(loaded)?;
    // Only an unlit scene is copied (to light it from the camera).
    let lit;
    let scene = if needs_headlight(&loaded.scene) {
        let mut copy = loaded.scene.clone();
        add_headlight_if_unlit(&mut copy, camera.eye);
        lit = copy;
        &lit
    } else {
        &loaded.scene
    };
    let integrator = args.integrator(scene);
    integrator.validate()?;
    let renderer = match shared.alone {
        true => args.renderer_alone(scene),
        false => args.renderer(scene),
    };
    let mut renderer = renderer.update_policy(args.flags.update);
    if let Some(backend) = shared.backend.clone() {
        renderer = renderer.on_backend(backend);
    }
    if let Some(carry) = shared.gpu_carry.take() {
        renderer = renderer.follow(carry);
    }
    if let Some(structure) = structure {
        renderer = renderer.cpu_structure(structure);
    }
    let prepare = Instant::now();
    let backend = renderer.backend_for(&integrator)?;
    let prepare_ms = prepare.elapsed().as_secs_f64() * 1e3;
    if shared.backend.is_none() {
        if shared.show_device {
            device::say(&backend);
        }
        *shared.backend = Some(renderer.backend()?.clone());
    }
    let render = Instant::now();
    let rendered = renderer.render(&camera, &integrator)?;
    let render_ms = render.elapsed().as_secs_f64() * 1e3;
    let frame_ms = started.elapsed().as_secs_f64() * 1e3;
    let download_ms = match &rendered.stats {
        Stats::Whitted(s) => s.download_ms,
        Stats::Photon(s) => s
            .stage_ms
            .iter()
            .find(|(stage, _)| *stage == "download")
            .map_or(0.0, |&(_, ms)| ms),
        _ => 0.0,
    };
    let summary = summary(&integrator, &rendered, &backend, &renderer)?;
    let update = renderer.frame_update();
    let stages = FrameStages {
        update,
        prepare_ms,
        render_ms: render_ms - download_ms,
        download_ms,
    };
    *shared.gpu_carry = renderer.into_carry();
    if ranks::is_root() || shared.alone {
        shared
            .writer
            .write(rendered.film, path.to_path_buf(), args.flags.exposure)?;
    }
    Ok(FrameDone {
        summary,
        frame_ms,
        update: update.as_ref().map(update_words),
        stages,
    })
}

/// Whether the GPU can refit the structure `accel` names (its default
/// without one): a BVH, binary or wide.
fn gpu_refits(accel: Option<&AccelArg>) -> bool {
    #[cfg(feature = "cuda")]
    {
        use caustic::accel::GpuAccelSpec;
        let spec = accel.map_or(DEFAULT_GPU_SPEC, |a| a.spec.as_str());
        matches!(
            spec.parse::<GpuAccelSpec>(),
            Ok(GpuAccelSpec::Device(_) | GpuAccelSpec::Uploaded(_) | GpuAccelSpec::Wide(_))
        )
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = accel;
        false
    }
}

/// `pattern` with its `%0Nd` (or `%d`) replaced by `frame`; `None` when
/// it has none.
fn frame_path(pattern: &Path, frame: u32) -> Option<PathBuf> {
    let text = pattern.to_string_lossy();
    let start = text.find('%')?;
    let rest = &text[start + 1..];
    let end = rest.find('d')?;
    let width = rest[..end].trim_start_matches('0');
    let width: usize = if width.is_empty() {
        0
    } else {
        width.parse().ok()?
    };
    let number = format!("{frame:0width$}");
    Some(PathBuf::from(format!(
        "{}{number}{}",
        &text[..start],
        &rest[end + 1..]
    )))
}

/// `A..B` (inclusive, A <= B) or `N`.
fn frame_range(text: &str) -> Result<(u32, u32), String> {
    let parse = |s: &str| {
        s.trim()
            .parse::<u32>()
            .map_err(|_| format!("`{s}` is not a frame number"))
    };
    let (first, last) = match text.split_once("..") {
        Some((a, b)) => (parse(a)?, parse(b.trim_start_matches('='))?),
        None => (parse(text)?, parse(text)?),
    };
    if first > last {
        return Err(format!(
            "{first}..{last}: the first frame comes after the last"
        ));
    }
    Ok((first, last))
}

/// The bar over the frames of an animation (hidden under `-q`).
fn frames_bar(frames: usize, quiet: bool) -> ProgressBar {
    if quiet || frames < 2 {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(frames as u64), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("frames {bar:30} {pos}/{len} {elapsed} (eta {eta})")
            .expect("a valid template"),
    );
    bar
}

/// `--device cuda` renders on the GPU or not at all: a structure the GPU
/// does not build is refused from the flags, before the scene loads or the
/// device opens (and a build without CUDA refuses `cuda` here too).
pub(crate) fn check_gpu_flags(device: Device, accel: Option<&AccelArg>) -> Result<()> {
    if !matches!(device, Device::Cuda(_)) {
        return Ok(());
    }
    #[cfg(feature = "cuda")]
    if let Some(accel) = accel
        && let Err(e) = accel.spec.parse::<caustic::accel::GpuAccelSpec>()
    {
        bail!("--accel {} with --device {device}: {e}", accel.spec);
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = accel;
        device.resolve()?;
    }
    Ok(())
}

/// The facade's renderer of `scene` with the structure `accel` names on
/// each device (see [`AccelArg`]; the defaults without it) on `device`.
pub(crate) fn renderer<'a>(
    scene: &'a Scene,
    accel: Option<&AccelArg>,
    device: Device,
) -> Renderer<'a> {
    let cpu = accel.and_then(|a| a.cpu).unwrap_or_else(default_accel);
    let mut renderer = Renderer::new(scene).accel(cpu).device(device);
    if let Some(dacrt) = cpu_dacrt(scene, accel, device) {
        renderer = renderer.cpu_structure(dacrt);
    }
    with_gpu_accel(renderer, accel)
}

/// `--accel dacrt[...]` where the render may run on the CPU (every device
/// but an explicit `cuda`): DACRT over the scene's triangles, which the CPU
/// renderers trace by waves (it prefers batches, `caustic_render::waves`). It keeps
/// only a copy of the triangles, so on `auto` with a GPU, which ignores it
/// and traces its own, it costs that copy.
fn cpu_dacrt(
    scene: &Scene,
    accel: Option<&AccelArg>,
    device: Device,
) -> Option<Box<dyn caustic_accel::Accel>> {
    let accel = accel.filter(|a| a.cpu.is_none())?;
    if matches!(device, Device::Cuda(_) | Device::Gpus(_)) {
        return None;
    }
    let config = caustic_accel::dacrt::DacrtConfig::parse(&accel.spec).ok()?;
    Some(Box::new(caustic_accel::dacrt::Dacrt::new(
        &scene.triangles(),
        config,
    )))
}

/// The GPU's structure: `accel` as the GPU reads it, or its default.
#[cfg(feature = "cuda")]
fn with_gpu_accel<'a>(renderer: Renderer<'a>, accel: Option<&AccelArg>) -> Renderer<'a> {
    renderer.gpu_accel_spec(accel.map_or(DEFAULT_GPU_SPEC, |a| a.spec.as_str()))
}

#[cfg(not(feature = "cuda"))]
fn with_gpu_accel<'a>(renderer: Renderer<'a>, _accel: Option<&AccelArg>) -> Renderer<'a> {
    renderer
}

impl RenderArgs {
    /// The facade's renderer of `scene` with `--accel` and `--device`,
    /// shared with the other ranks of an MPI job: `auto` is the CPU there,
    /// `cuda` the rank's own GPU of its node (SPPM splits on GPUs).
    fn renderer<'a>(&self, scene: &'a Scene) -> Renderer<'a> {
        let Some(team) = ranks::team() else {
            return self.flags.renderer(scene);
        };
        self.renderer_alone(scene).team(team)
    }

    /// The renderer of `scene` on this rank's device (as
    /// [`Self::renderer`] chooses it) without the other ranks: for work
    /// the ranks deal out whole, such as an animation's frames.
    fn renderer_alone<'a>(&self, scene: &'a Scene) -> Renderer<'a> {
        if ranks::team().is_none() {
            return self.flags.renderer(scene);
        }
        let device = match self.flags.device {
            Device::Auto => Device::Cpu,
            Device::Cuda(0) => ranks::local_gpu(),
            chosen => chosen,
        };
        renderer(scene, self.flags.accel.as_ref(), device)
    }

    /// The chosen integrator with its typed settings.
    fn integrator(&self, scene: &Scene) -> Integrator {
        let spp = self.spp.unwrap_or(match self.integrator {
            IntegratorName::Whitted => 16,
            _ => 4,
        });
        let common = self.flags.common(scene, spp, (512, 512));
        self.flags.integrator(self.integrator, &common)
    }
}

impl RenderFlags {
    /// `--threads` (0: one per core).
    pub fn threads(&self) -> usize {
        self.threads.into()
    }

    /// `--two-sided` applied to `scene`'s materials.
    pub fn apply_sides(&self, scene: &mut Scene) {
        if self.two_sided {
            scene.materials.iter_mut().for_each(|m| m.two_sided = true);
        }
    }

    /// The facade's renderer of `scene` with `--accel` and `--device`.
    pub fn renderer<'a>(&self, scene: &'a Scene) -> Renderer<'a> {
        renderer(scene, self.accel.as_ref(), self.device)
    }

    /// The settings every integrator shares at `spp` samples per pixel;
    /// the size is the flags', else the scene file's, else `size`.
    pub fn common(&self, scene: &Scene, spp: u32, size: (u32, u32)) -> Common {
        let film = scene.film;
        Common {
            width: self.width.or(film.map(|f| f.width)).unwrap_or(size.0),
            height: self.height.or(film.map(|f| f.height)).unwrap_or(size.1),
            spp,
            max_depth: self.max_depth,
            light_samples: self.light_samples,
            seed: self.seed,
        }
    }

    /// The integrator `name` with its typed settings from `common` and
    /// its section's flags.
    pub fn integrator(&self, name: IntegratorName, common: &Common) -> Integrator {
        match name {
            IntegratorName::Whitted => {
                Integrator::Whitted(render_whitted::settings(common, self.fresnel))
            }
            IntegratorName::Photon => Integrator::Photon(self.photon.settings(common)),
            IntegratorName::Sppm => Integrator::Sppm(self.sppm.settings(common)),
        }
    }
}

/// The CPU's structure when `--accel` is not given.
fn default_accel() -> AccelKind {
    parse::accel_spec(DEFAULT_ACCEL).expect("the default structure's spec parses")
}

/// What the summaries say of the scene: its triangles, and the structure
/// the render traced with its build time on the device that built it
/// (`bvh-wide build 3.1 ms`, `ploc build 0.4 ms on the GPU`).
pub struct Built {
    pub triangles: usize,
    pub accel: String,
}

/// The structure a render traced, from the facade's build statistics.
pub(crate) fn structure(renderer: &Renderer, on_gpu: bool) -> String {
    if let Some(gpu) = gpu_structure(renderer, on_gpu) {
        return gpu;
    }
    match renderer.cpu_accel_stats() {
        Some(stats) => format!("{} build {:.1} ms", stats.name, stats.build_ms),
        None => "no structure built".to_owned(),
    }
}

/// The GPU's structure, when the render ran there: the spec, and the
/// build's device time (a `cpu:SPEC` tree is built on the CPU, then uploaded).
#[cfg(feature = "cuda")]
fn gpu_structure(renderer: &Renderer, on_gpu: bool) -> Option<String> {
    let stats = renderer.gpu_accel_stats().filter(|_| on_gpu)?;
    if let Some(u) = renderer.frame_update() {
        let action = match u.action {
            caustic_accel::bvh::UpdateAction::Refitted => "refit",
            caustic_accel::bvh::UpdateAction::Rebuilt => "rebuild",
        };
        return Some(format!(
            "{} {action} {:.1} ms on the GPU",
            stats.spec, u.update_ms
        ));
    }
    let built_on = if stats.spec.starts_with("cpu:") {
        "CPU"
    } else if stats.spec.contains("cpu:") {
        "CPU and GPU"
    } else {
        "GPU"
    };
    // A first build in the process waits for its kernels to compile; say
    // how much of its time that was, rather than let it pass for the build.
    let loading = if stats.loading_ms >= 1.0 {
        format!(", {:.0} ms of it loading kernels", stats.loading_ms)
    } else {
        String::new()
    };
    Some(format!(
        "{} build {:.1} ms on the {built_on}{loading}",
        stats.spec, stats.build_ms
    ))
}

#[cfg(not(feature = "cuda"))]
fn gpu_structure(_: &Renderer, _: bool) -> Option<String> {
    None
}

/// The text after `wrote FILE`: sizes, counts, times and the device, in
/// each integrator's words (the photon mapper also prints its passes).
fn summary(
    integrator: &Integrator,
    rendered: &Rendered,
    backend: &Backend,
    renderer: &Renderer,
) -> Result<String> {
    let built = Built {
        triangles: renderer.prepare()?.triangles.len(),
        accel: structure(renderer, backend.is_gpu()),
    };
    let on = &match ranks::team() {
        Some(team) => format!("{} MPI ranks x {}", team.size(), rendered.device),
        None => rendered.device.clone(),
    };
    Ok(match (integrator, &rendered.stats) {
        (Integrator::Whitted(s), Stats::Whitted(stats)) => {
            render_whitted::summary(s, stats, &built, on)
        }
        (Integrator::Photon(s), Stats::Photon(stats)) => {
            if ranks::is_root() {
                eprintln!("{}", render_photon::passes(s, stats, backend));
            }
            render_photon::summary(s, &built, on)
        }
        (Integrator::Sppm(s), Stats::Sppm(stats)) => render_sppm::summary(s, stats, &built, on),
        _ => bail!(
            "the {} render reported another integrator's statistics",
            integrator.name()
        ),
    })
}

/// The progress a render shows, fed by the facade's reports from the
/// worker threads: a bar over pixels (CPU Whitted and photon mapping) or
/// SPPM passes, and SPPM's error against a reference.
struct Watch {
    bar: ProgressBar,
    scorer: Option<Scorer>,
    /// Pixels the bar counts for each pixel this process reports.
    pixel_scale: u64,
}

impl Watch {
    fn new(integrator: &Integrator, backend: &Backend, reference: Option<Film>) -> Self {
        let (width, height) = integrator.size();
        let bar = match integrator {
            // The score lines would tear a bar apart.
            Integrator::Sppm(s) => {
                render_sppm::progress_bar(s.passes.into(), notes::quiet() || reference.is_some())
            }
            // The GPU renderers report no pixels: a bar would stand still.
            _ if backend.is_gpu() => ProgressBar::hidden(),
            _ => pixel_progress_bar(width, height),
        };
        Self {
            bar,
            scorer: reference.map(Scorer::new),
            // In a team, rank 0 sees its own share of the pixels: about
            // one in `size` of them.
            pixel_scale: ranks::team().map_or(1, |t| t.size() as u64),
        }
    }

    fn report(&self, progress: Progress<'_>) {
        match progress {
            Progress::Pixels(n) => self.bar.inc(n * self.pixel_scale),
            Progress::Pass(pass) => {
                self.bar.set_position(pass.passes().into());
                if let Some(scorer) = &self.scorer {
                    scorer.score(&pass);
                }
            }
            _ => {}
        }
    }

    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// A scene with no light of any kind would render black: light it from the
/// camera, and say so. The intensity gives a 50 % grey surface facing the
/// camera at the scene's centre a radiance of about 0.5 (`I = π d²`), so a
/// model without materials shows mid-grey rather than near-black.
pub(crate) fn add_headlight_if_unlit(scene: &mut Scene, eye: Vec3) {
    if !needs_headlight(scene) {
        return;
    }
    let bounds = scene.bounds();
    let distance = eye.distance(bounds.center()).max(1e-3);
    let intensity = Rgb::splat(std::f32::consts::PI * distance * distance);
    notes::note("the scene has no lights; adding a point light at the camera");
    scene.lights.push(Light::Point {
        position: eye,
        intensity,
    });
}

/// Whether `scene` has no light of any kind (see [`add_headlight_if_unlit`]).
fn needs_headlight(scene: &Scene) -> bool {
    scene.lights.is_empty() && scene.emissive_materials().next().is_none()
}

/// Warns when every pixel has the same value: nothing lit is in view.
fn warn_if_empty(film: &Film) {
    let Some(&first) = film.pixels.first() else {
        return;
    };
    if film.pixels.iter().any(|&p| p != first) {
        return;
    }
    let what = if first.max_element() <= 0.0 {
        "black"
    } else {
        "one colour (the background)"
    };
    notes::warn(format!(
        "the image is entirely {what}: nothing lit is in view. Check the camera (--camera, \
         --eye/--at; `caustic info` shows the scene's bounds) and the lights; faces that point \
         away from the camera or the light may need --two-sided"
    ));
}

/// A progress bar on stderr counting to `total` with `template`, or a
/// hidden one when `quiet`.
pub(crate) fn styled_progress_bar(total: u64, quiet: bool, template: &str) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template(template)
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar
}

/// The image-pass progress bar, hidden under `-q`.
fn pixel_progress_bar(width: u32, height: u32) -> ProgressBar {
    styled_progress_bar(
        width as u64 * height as u64,
        notes::quiet(),
        "{spinner} rendering [{bar:40}] {percent:>3}% {elapsed_precise} eta {eta}",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_patterns_and_ranges() {
        let p = |s: &str, f| frame_path(Path::new(s), f).map(|p| p.display().to_string());
        assert_eq!(p("out_%04d.png", 7).as_deref(), Some("out_0007.png"));
        assert_eq!(p("f%d.exr", 12).as_deref(), Some("f12.exr"));
        assert_eq!(
            p("dir/a_%06d_b.png", 3).as_deref(),
            Some("dir/a_000003_b.png")
        );
        assert_eq!(p("out.png", 1), None);
        assert_eq!(frame_range("3..7"), Ok((3, 7)));
        assert_eq!(frame_range("3..=7"), Ok((3, 7)));
        assert_eq!(frame_range("5"), Ok((5, 5)));
        assert!(frame_range("7..3").is_err());
        assert!(frame_range("a..b").is_err());
    }

    /// On a GPU the frames carry their scene themselves (no CPU tree);
    /// `--update refit` is refused where the GPU cannot refit, `auto` and
    /// `rebuild` never are.
    #[cfg(feature = "cuda")]
    #[test]
    fn gpu_frames_refit_a_bvh_and_rebuild_the_rest() {
        let arg = |s: &str| crate::parse::accel_arg(s).unwrap();
        let on_gpu = |accel: Option<&AccelArg>, update: &str, fixed| {
            CarriedTree::new(accel, false, update.parse().unwrap(), fixed)
                .map(|tree| tree.is_none())
                .map_err(|e| e.to_string())
        };
        for spec in ["bvh-binned", "lbvh", "ploc", "bvh-wide", "cpu:bvh-binned"] {
            assert!(gpu_refits(Some(&arg(spec))), "{spec}");
            assert_eq!(on_gpu(Some(&arg(spec)), "refit", true), Ok(true), "{spec}");
        }
        assert!(gpu_refits(None), "the default GPU structure refits");
        for spec in ["kdtree", "grid", "dacrt"] {
            assert!(!gpu_refits(Some(&arg(spec))), "{spec}");
            let refused = on_gpu(Some(&arg(spec)), "refit", true).unwrap_err();
            assert!(refused.contains("the GPU refits a BVH"), "{refused}");
            assert_eq!(on_gpu(Some(&arg(spec)), "auto", true), Ok(true));
            assert_eq!(on_gpu(Some(&arg(spec)), "rebuild", true), Ok(true));
        }
        let moving = on_gpu(None, "refit", false).unwrap_err();
        assert!(moving.contains("change from frame to frame"), "{moving}");
    }

    #[test]
    fn frame_stages_read_as_the_table_script_parses_them() {
        let stages = FrameStages {
            update: None,
            prepare_ms: 20.25,
            render_ms: 5.5,
            download_ms: 0.5,
        };
        assert_eq!(
            stages.stages(0.125),
            "pose 0.12 ms, prepare 20.2 ms, render 5.50 ms, download 0.50 ms"
        );
    }
}
