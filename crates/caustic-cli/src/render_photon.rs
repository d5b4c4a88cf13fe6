//! `caustic render --integrator photon`: the photon-mapping renderer's flags
//! and its run, kept apart from the Whitted path of `render.rs`.

use anyhow::{Result, bail};
use caustic_accel::points::POINT_STRUCTURE_NAMES;
use caustic_render::photon::irradiance_samples::SampleSettings;
use caustic_render::photon::{self, PhotonRenderSettings, PhotonRenderStats};
use caustic_render::{Film, RenderScene};
use caustic_scene::Camera;
use clap::Args;
use indicatif::ProgressBar;

/// Flags of the photon integrator (ignored by `whitted`).
#[derive(Args, Clone, Debug)]
#[command(next_help_heading = "Photon mapping (--integrator photon)")]
pub struct PhotonArgs {
    /// Photons emitted for the global map.
    #[arg(long, default_value_t = 200_000)]
    photons: u64,
    /// Photons emitted for the caustic map.
    #[arg(long, default_value_t = 1_000_000)]
    caustic_photons: u64,
    /// Photons per global-map radiance estimate.
    #[arg(long, default_value_t = 64)]
    k: usize,
    /// Photons per caustic-map radiance estimate.
    #[arg(long, default_value_t = 64)]
    caustic_k: usize,
    /// Largest global-map search radius, as a fraction of the scene diagonal.
    #[arg(long, default_value_t = 0.05)]
    max_radius: f32,
    /// Largest caustic-map search radius, as a fraction of the scene diagonal.
    #[arg(long, default_value_t = 0.02)]
    caustic_radius: f32,
    /// Cone filter on the caustic estimate (sharper caustics).
    #[arg(long)]
    cone_filter: bool,
    /// Final-gather rays per gather (0 = read the global map directly).
    #[arg(long, default_value_t = 256)]
    gather_rays: u32,
    /// Read the global map directly at shading points (same as --gather-rays 0).
    #[arg(long)]
    no_final_gather: bool,
    /// Mean distance between irradiance samples in pixels (0 = final gather
    /// at every shading point).
    #[arg(long, default_value_t = 4.0)]
    sample_spacing: f32,
    /// Final-gather rays read irradiance precomputed at every N-th global
    /// photon (0 = a full radiance estimate at every gather hit).
    #[arg(long, default_value_t = 4)]
    precompute: usize,
    /// Point structure of the photon maps [default: kdtree on the CPU,
    /// hashgrid on the GPU, which supports only it].
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(POINT_STRUCTURE_NAMES))]
    points: Option<String>,
    /// Most surface interactions per photon.
    #[arg(long, default_value_t = 32)]
    photon_bounces: u32,
}

/// What `render.rs` has already worked out for any integrator.
pub struct Common<'a> {
    pub scene: &'a RenderScene,
    pub camera: &'a Camera,
    pub width: u32,
    pub height: u32,
    pub spp: u32,
    pub max_depth: u32,
    pub light_samples: u32,
    pub seed: u64,
}

impl PhotonArgs {
    /// The renderer's settings, or a clear error for a value it cannot use.
    fn settings(&self, common: &Common, on_gpu: bool) -> Result<PhotonRenderSettings> {
        if self.photons == 0 && self.caustic_photons == 0 {
            bail!("--photons and --caustic-photons are both 0: there would be no photon map");
        }
        if self.max_radius <= 0.0 || self.caustic_radius <= 0.0 {
            bail!("--max-radius and --caustic-radius must be positive");
        }
        let settings = PhotonRenderSettings {
            width: common.width,
            height: common.height,
            spp: common.spp,
            max_depth: common.max_depth,
            light_samples: common.light_samples,
            seed: common.seed,
            global_photons: self.photons,
            caustic_photons: self.caustic_photons,
            photon_bounces: self.photon_bounces,
            k: self.k,
            caustic_k: self.caustic_k,
            max_radius: self.max_radius,
            caustic_max_radius: self.caustic_radius,
            cone_filter: self.cone_filter,
            gather_rays: if self.no_final_gather {
                0
            } else {
                self.gather_rays
            },
            samples: SampleSettings {
                spacing: self.sample_spacing,
                ..SampleSettings::default()
            },
            precompute: self.precompute,
            points: self.points.clone().unwrap_or_else(|| {
                let default = if on_gpu { "hashgrid" } else { "kdtree" };
                default.to_owned()
            }),
        };
        settings.validate()?;
        Ok(settings)
    }
}

/// Renders with the photon mapper on the device `device` selects; `bar`
/// counts image pixels. Returns the image and the backend's name.
///
/// `--device cuda` renders on the GPU, whose photon mapper reads the global
/// map directly or by the final gather (irradiance samples or every shading
/// point), with hash-grid maps, and says so clearly for other settings;
/// `--device auto` takes the GPU when there is one and the settings suit
/// it, the CPU otherwise.
pub fn run(
    args: &PhotonArgs,
    common: &Common,
    device: caustic_gpu::Device,
    bar: &ProgressBar,
) -> Result<(Film, String)> {
    let gpu_settings = args.settings(common, true)?;
    let gpu = match device {
        caustic_gpu::Device::Cpu => None,
        caustic_gpu::Device::Cuda(_) => {
            gpu_path_supports(&gpu_settings)?;
            caustic_gpu::select(device)?.gpu
        }
        caustic_gpu::Device::Auto if gpu_path_supports(&gpu_settings).is_ok() => {
            caustic_gpu::select(device).ok().and_then(|s| s.gpu)
        }
        caustic_gpu::Device::Auto => None,
    };
    if let Some(gpu) = gpu {
        bar.finish_and_clear();
        let (film, stats) =
            photon::render_cuda::render(&gpu, common.scene, common.camera, &gpu_settings)?;
        eprintln!("{}", summary(&gpu_settings, &stats));
        return Ok((film, gpu.info().name.clone()));
    }
    let settings = args.settings(common, false)?;
    let (film, stats) = photon::render(common.scene, common.camera, &settings, &|n| bar.inc(n))?;
    bar.finish_and_clear();
    eprintln!("{}", summary(&settings, &stats));
    Ok((
        film,
        format!("{} CPU threads", rayon::current_num_threads()),
    ))
}

/// Whether the GPU photon mapper can render these settings.
fn gpu_path_supports(settings: &PhotonRenderSettings) -> Result<()> {
    if settings.gather_rays > 0 && settings.precompute == 0 {
        bail!("the GPU final gather reads precomputed irradiance: --precompute must be 1 or more");
    }
    if settings.points != "hashgrid" {
        bail!("the GPU photon mapper indexes its maps with hash grids: use --points hashgrid");
    }
    Ok(())
}

/// One line with the pass timings.
fn summary(settings: &PhotonRenderSettings, stats: &PhotonRenderStats) -> String {
    let gather = if settings.gather_rays == 0 {
        "global map directly".to_owned()
    } else {
        format!(
            "irradiance at {} photons in {:.0} ms, final gather {} rays, {} irradiance samples + {} point gathers in {:.0} ms",
            stats.precomputed,
            stats.precompute_ms,
            settings.gather_rays,
            stats.samples,
            stats.point_gathers,
            stats.sample_ms
        )
    };
    format!(
        "photon: {} photons traced in {:.0} ms ({} global, {} caustic stored), {} maps built in {:.1} ms, {gather}, image {:.0} ms; total {:.2} s, {:.1} M rays",
        stats.photons_traced,
        stats.photon_ms,
        stats.global_stored,
        stats.caustic_stored,
        settings.points,
        stats.build_ms,
        stats.render_ms,
        stats.seconds,
        stats.rays as f64 / 1e6,
    )
}
