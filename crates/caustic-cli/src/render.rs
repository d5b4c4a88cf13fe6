//! `caustic render`.

use crate::render_photon::{self, PhotonArgs};
use crate::render_sppm::{self, SppmArgs, SppmJob};
use crate::scene_arg::{self, CameraArgs};
use anyhow::{Context, Result, bail};
use caustic_render::whitted::render_cuda as whitted_cuda;
use caustic_render::whitted::{self, FresnelMode, WhittedSettings};
use caustic_render::{RenderScene, image_io};
use caustic_scene::{Light, Scene};
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::path::PathBuf;

#[derive(Args)]
#[command(
    after_help = "Examples:\n  caustic render                                   # built-in Cornell box -> cornell-box.png\n  \
    caustic render cornell-caustics --spp 64 -o caustics.exr\n  \
    caustic render ../shared/refs/cornell-box/cornell-box.xml -o cb.exr --spp 256\n  \
    caustic render ../shared/refs/cornell-caustics/cornell-caustics.xml --integrator photon -o pm.exr\n  \
    caustic render target/scenes/sibenik/sibenik.obj --width 1280 --height 720\n  \
    caustic render ../shared/refs/cornell-caustics/cornell-caustics.xml --integrator sppm --passes 256 -o sppm.exr"
)]
pub struct RenderArgs {
    /// Scene file (.obj, .ply, .gltf, .glb, .xml) or built-in scene name
    /// (cornell-box, cornell-caustics).
    #[arg(default_value = "cornell-box")]
    scene: String,
    /// Output image: .png (sRGB) or .exr (linear radiance). Default: SCENE.png.
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Image width in pixels (default: the scene file's, else 512).
    #[arg(long)]
    width: Option<u32>,
    /// Image height in pixels (default: the scene file's, else 512).
    #[arg(long)]
    height: Option<u32>,
    /// Light transport: `whitted` (specular chains + direct light; CPU or
    /// CUDA), `photon` (photon mapping: + caustics and indirect light; CPU)
    /// or `sppm` (progressive photon mapping, consistent; CPU).
    #[arg(long, value_enum, default_value_t = Integrator::Whitted)]
    integrator: Integrator,
    /// Samples (primary rays) per pixel.
    #[arg(long, default_value_t = 16)]
    spp: u32,
    /// Largest number of specular bounces after the primary ray (sppm:
    /// also the most photon bounces) [default: 5 for whitted, 64 for sppm].
    #[arg(long)]
    max_depth: Option<u32>,
    /// Shadow rays per area light at each shaded point.
    #[arg(long, default_value_t = 4)]
    light_samples: u32,
    /// Acceleration structure, with optional parameters (e.g. `ploc:r=32`;
    /// `caustic bench accel --help` lists them). The default, the 8-wide
    /// SIMD BVH, traces about twice as fast as the binary `bvh-binned`.
    #[arg(long, default_value = "bvh-wide")]
    accel: String,
    /// Worker threads (0 = all cores).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Fresnel formula for glass.
    #[arg(long, value_enum, default_value_t = Fresnel::Exact)]
    fresnel: Fresnel,
    /// Seed of the random sample streams.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// PNG exposure in stops (linear values are scaled by 2^exposure).
    #[arg(long, default_value_t = 0.0, allow_hyphen_values = true)]
    exposure: f32,
    /// No progress bar.
    #[arg(short, long)]
    quiet: bool,
    /// Where to render: `auto` (CUDA when a driver and GPU are present,
    /// else the CPU), `cpu`, `cuda` or `cuda:N`.
    #[arg(long, default_value = "auto")]
    device: caustic_gpu::Device,
    #[command(flatten)]
    camera: CameraArgs,
    #[command(flatten)]
    photon: PhotonArgs,
    #[command(flatten)]
    sppm: SppmArgs,
}

/// The light transport algorithms of `caustic render`.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Integrator {
    /// Specular chains, direct light by shadow rays (CPU or CUDA).
    Whitted,
    /// Photon mapping: caustic map, final gather into a global map with
    /// adaptive irradiance samples (CPU).
    Photon,
    /// Stochastic progressive photon mapping: full global illumination,
    /// consistent (CPU).
    Sppm,
}

#[derive(Clone, Copy, ValueEnum)]
enum Fresnel {
    Exact,
    Schlick,
}

pub fn run(args: RenderArgs) -> Result<()> {
    crate::set_threads(args.threads)?;
    let loaded = scene_arg::load(&args.scene)?;
    let mut scene = loaded.scene;
    let camera = args.camera.resolve(&scene)?;
    add_headlight_if_unlit(&mut scene, camera.eye);
    let film_size = scene.film;
    let width = args.width.or(film_size.map(|f| f.width)).unwrap_or(512);
    let height = args.height.or(film_size.map(|f| f.height)).unwrap_or(512);
    if width == 0 || height == 0 || width > 1 << 15 || height > 1 << 15 {
        bail!("image size {width}x{height} is out of range (1..=32768 per side)");
    }
    if args.integrator == Integrator::Whitted && args.spp == 0 {
        bail!("--spp must be at least 1");
    }
    let output = args
        .output
        .unwrap_or_else(|| PathBuf::from(format!("{}.png", loaded.name)));
    check_output_extension(&output)?;

    let render_scene = RenderScene::new(&scene, &args.accel)?;
    let build = render_scene.accel.stats().clone();
    if args.integrator == Integrator::Photon {
        if matches!(args.fresnel, Fresnel::Schlick) {
            bail!("--integrator photon uses the exact Fresnel equations only");
        }
        let common = render_photon::Common {
            scene: &render_scene,
            camera: &camera,
            width,
            height,
            spp: args.spp,
            max_depth: args.max_depth.unwrap_or(5),
            light_samples: args.light_samples.max(1),
            seed: args.seed,
        };
        let bar = progress_bar(width as u64 * height as u64, args.quiet);
        let (film, backend) = render_photon::run(&args.photon, &common, args.device, &bar)?;
        image_io::write_image(&film, &output, args.exposure)
            .with_context(|| format!("cannot write {}", output.display()))?;
        eprintln!(
            "wrote {} ({width}x{height}, {} spp, {} triangles, {} build {:.1} ms) on {backend}",
            output.display(),
            args.spp,
            render_scene.triangles.len(),
            build.name,
            build.build_ms,
        );
        return Ok(());
    }
    if args.integrator == Integrator::Sppm {
        let job = SppmJob {
            scene: &render_scene,
            camera: &camera,
            width,
            height,
            max_depth: args.max_depth.unwrap_or(64),
            light_samples: args.light_samples,
            seed: args.seed,
            output: &output,
            exposure: args.exposure,
            quiet: args.quiet,
            device: args.device,
        };
        return render_sppm::run(job, &args.sppm);
    }
    let settings = WhittedSettings {
        width,
        height,
        spp: args.spp,
        max_depth: args.max_depth.unwrap_or(5),
        light_samples: args.light_samples.max(1),
        fresnel: match args.fresnel {
            Fresnel::Exact => FresnelMode::Exact,
            Fresnel::Schlick => FresnelMode::Schlick,
        },
        seed: args.seed,
    };
    let selection = caustic_gpu::select(args.device)?;
    eprintln!("{}", selection.message);
    let (film, stats) = match &selection.gpu {
        Some(gpu) => whitted_cuda::render(gpu, &render_scene, &camera, &settings)?,
        None => {
            let bar = progress_bar(width as u64 * height as u64, args.quiet);
            let result = whitted::render(&render_scene, &camera, &settings, &|n| bar.inc(n));
            bar.finish_and_clear();
            result
        }
    };
    image_io::write_image(&film, &output, args.exposure)
        .with_context(|| format!("cannot write {}", output.display()))?;
    let backend = match &selection.gpu {
        Some(gpu) => gpu.info().name.clone(),
        None => format!("{} CPU threads", rayon::current_num_threads()),
    };
    eprintln!(
        "wrote {} ({width}x{height}, {} spp, {} triangles, {} build {:.1} ms): {:.2} s, {:.1} M rays, {:.2} Mrays/s on {backend}",
        output.display(),
        args.spp,
        render_scene.triangles.len(),
        build.name,
        build.build_ms,
        stats.seconds,
        stats.rays as f64 / 1e6,
        stats.mrays_per_second(),
    );
    Ok(())
}

fn check_output_extension(path: &std::path::Path) -> Result<()> {
    match path
        .extension()
        .and_then(|e| e.to_str())
        .map(|e| e.to_ascii_lowercase())
    {
        Some(e) if e == "png" || e == "exr" => Ok(()),
        _ => bail!("{}: output must end in .png or .exr", path.display()),
    }
}

/// A scene with no light of any kind would render black: light it from the
/// camera, and say so.
fn add_headlight_if_unlit(scene: &mut Scene, eye: caustic_geom::Vec3) {
    if !scene.lights.is_empty() || scene.emissive_materials().next().is_some() {
        return;
    }
    let diag = scene.bounds().diagonal().max(1e-3);
    let intensity = caustic_geom::Rgb::splat(0.5 * diag * diag);
    eprintln!("note: the scene has no lights; adding a point light at the camera");
    scene.lights.push(Light::Point {
        position: eye,
        intensity,
    });
}

fn progress_bar(total: u64, quiet: bool) -> ProgressBar {
    styled_progress_bar(
        total,
        quiet,
        "{spinner} rendering [{bar:40}] {percent:>3}% {elapsed_precise} eta {eta}",
    )
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
