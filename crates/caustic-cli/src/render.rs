//! `caustic render`: the flags every integrator shares, the scene and
//! camera set-up, and the image out; each integrator's own flags and run
//! live in `render_whitted.rs`, `render_photon.rs` and `render_sppm.rs`.

use crate::camera::CameraArgs;
use crate::render_photon::{self, PhotonArgs};
use crate::render_sppm::{self, SppmArgs};
use crate::render_whitted::{self, Fresnel};
use crate::{camera_presets, notes, output, parse, scene_arg};
use anyhow::{Context, Result, bail};
use caustic_geom::{Rgb, Vec3};
use caustic_render::{Film, RenderScene, image_io};
use caustic_scene::{Camera, Light, Scene};
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::path::PathBuf;

/// The acceleration structure `render` and `bench accel` use unless told
/// otherwise: the 8-wide SIMD BVH, the fastest CPU structure to trace.
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
         caustic render target/scenes/sibenik/sibenik.obj --camera sibenik\n\n{}",
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
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Image width in pixels [default: the scene file's, else 512].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=parse::MAX_SIDE as i64), allow_negative_numbers = true)]
    width: Option<u32>,
    /// Image height in pixels [default: the scene file's, else 512].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=parse::MAX_SIDE as i64), allow_negative_numbers = true)]
    height: Option<u32>,
    /// Light transport. All three run on the CPU or an NVIDIA GPU (--device).
    #[arg(long, value_enum, default_value_t = Integrator::Photon)]
    integrator: Integrator,
    /// Samples (eye rays) per pixel [default: 16 for whitted, 4 for photon;
    /// sppm takes one per pass].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), allow_negative_numbers = true)]
    spp: Option<u32>,
    /// Most specular bounces after the primary ray (sppm: also the most
    /// photon bounces) [default: 5 for whitted and photon, 64 for sppm].
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=256), allow_negative_numbers = true)]
    max_depth: Option<u32>,
    /// Shadow rays per area light at each shaded point.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=1024), allow_negative_numbers = true)]
    light_samples: u32,
    /// Acceleration structure, with optional parameters (e.g. `ploc:r=32`;
    /// `caustic bench accel --help` lists them). The default, the 8-wide
    /// SIMD BVH, traces about twice as fast as the binary `bvh-binned`.
    #[arg(long, default_value = DEFAULT_ACCEL, value_parser = parse::accel_spec)]
    accel: String,
    /// Worker threads (0 = all cores).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u16).range(0..=4096), allow_negative_numbers = true)]
    threads: u16,
    /// Fresnel formula for glass (whitted only; photon and sppm use the
    /// exact one).
    #[arg(long, value_enum, default_value_t = Fresnel::Exact)]
    fresnel: Fresnel,
    /// Seed of the random sample streams.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// PNG exposure in stops (linear values are scaled by 2^exposure).
    #[arg(long, default_value_t = 0.0, allow_hyphen_values = true, value_parser = parse::exposure)]
    exposure: f32,
    /// Render every material two-sided (both faces shaded, emitters emit
    /// from both): for files whose faces point the wrong way.
    #[arg(long)]
    two_sided: bool,
    /// No progress bar and no notes (the device line among them);
    /// warnings, errors and the summary still print.
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
    /// Specular chains, direct light by shadow rays: no indirect light.
    Whitted,
    /// Photon mapping: caustic map, final gather into a global map with
    /// adaptive irradiance samples.
    Photon,
    /// Stochastic progressive photon mapping: full global illumination,
    /// consistent (the error goes to zero as --passes grows).
    Sppm,
}

/// What every integrator needs, resolved once.
pub struct Job<'a> {
    pub scene: &'a RenderScene,
    pub camera: &'a Camera,
    pub width: u32,
    pub height: u32,
    pub spp: u32,
    pub max_depth: Option<u32>,
    pub light_samples: u32,
    pub seed: u64,
    pub device: caustic_gpu::Device,
}

/// An integrator's result: the image, and the summary that follows
/// `wrote FILE` (sizes, counts, times, backend).
pub struct Rendered {
    pub film: Film,
    pub summary: String,
}

pub fn run(args: RenderArgs) -> Result<()> {
    notes::set_quiet(args.quiet);
    crate::set_threads(args.threads.into())?;
    // Everything that can be refused is refused before the scene loads.
    let output = args
        .output
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("{}.png", scene_arg::short_name(&args.scene))));
    output::check_image_path(&output)?;
    if args.integrator != Integrator::Whitted && matches!(args.fresnel, Fresnel::Schlick) {
        bail!(
            "--fresnel schlick is for --integrator whitted; photon and sppm use the exact Fresnel equations"
        );
    }
    let loaded = scene_arg::load(&args.scene)?;
    let camera = args.camera.resolve(&loaded)?;
    let mut scene = loaded.scene;
    if args.two_sided {
        scene.materials.iter_mut().for_each(|m| m.two_sided = true);
    }
    add_headlight_if_unlit(&mut scene, camera.eye);
    let film_size = scene.film;
    let render_scene = RenderScene::new(&scene, &args.accel)?;
    let job = Job {
        scene: &render_scene,
        camera: &camera,
        width: args.width.or(film_size.map(|f| f.width)).unwrap_or(512),
        height: args.height.or(film_size.map(|f| f.height)).unwrap_or(512),
        spp: args.spp.unwrap_or(match args.integrator {
            Integrator::Whitted => 16,
            _ => 4,
        }),
        max_depth: args.max_depth,
        light_samples: args.light_samples,
        seed: args.seed,
        device: args.device,
    };
    if job.width > parse::MAX_SIDE || job.height > parse::MAX_SIDE || job.width * job.height == 0 {
        bail!(
            "image size {}x{} is out of range (1..={} per side)",
            job.width,
            job.height,
            parse::MAX_SIDE
        );
    }
    let rendered = match args.integrator {
        Integrator::Whitted => render_whitted::run(&job, args.fresnel)?,
        Integrator::Photon => render_photon::run(&args.photon, &job)?,
        Integrator::Sppm => render_sppm::run(&job, &args.sppm)?,
    };
    warn_if_empty(&rendered.film);
    image_io::write_image(&rendered.film, &output, args.exposure)
        .with_context(|| format!("cannot write {}", output.display()))?;
    eprintln!("wrote {} {}", output.display(), rendered.summary);
    Ok(())
}

/// A scene with no light of any kind would render black: light it from the
/// camera, and say so. The intensity gives a 50 % grey surface facing the
/// camera at the scene's centre a radiance of about 0.5 (`I = π d²`), so a
/// model without materials shows mid-grey rather than near-black.
fn add_headlight_if_unlit(scene: &mut Scene, eye: Vec3) {
    if !scene.lights.is_empty() || scene.emissive_materials().next().is_some() {
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
pub(crate) fn pixel_progress_bar(width: u32, height: u32) -> ProgressBar {
    styled_progress_bar(
        width as u64 * height as u64,
        notes::quiet(),
        "{spinner} rendering [{bar:40}] {percent:>3}% {elapsed_precise} eta {eta}",
    )
}
