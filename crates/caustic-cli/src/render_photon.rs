//! `caustic render --integrator photon`: the photon-mapping renderer's flags
//! and its run, kept apart from the Whitted path of `render.rs`.

use crate::render::{Job, Rendered, pixel_progress_bar};
use crate::{device, parse};
use anyhow::{Result, bail};
use caustic_accel::points::POINT_STRUCTURE_NAMES;
use caustic_render::photon::irradiance_samples::SampleSettings;
use caustic_render::photon::{self, PhotonRenderSettings, PhotonRenderStats};
use clap::Args;

/// Flags of the photon integrator (ignored by the others).
#[derive(Args, Clone, Debug)]
#[command(next_help_heading = "Photon mapping (--integrator photon)")]
pub struct PhotonArgs {
    /// Photons emitted for the global map (indirect light). The defaults
    /// of this section render the built-in scenes in seconds on two cores;
    /// more photons, gather rays and --spp give smoother images.
    #[arg(long, default_value_t = 100_000, value_parser = photon_count())]
    photons: u64,
    /// Photons emitted for the caustic map.
    #[arg(long, default_value_t = 500_000, value_parser = photon_count())]
    caustic_photons: u64,
    /// Photons per global-map radiance estimate.
    #[arg(long, default_value_t = 64, value_parser = neighbour_count())]
    k: u64,
    /// Photons per caustic-map radiance estimate.
    #[arg(long, default_value_t = 64, value_parser = neighbour_count())]
    caustic_k: u64,
    /// Largest global-map search radius, as a fraction of the scene
    /// diagonal, in (0, 1].
    #[arg(long, default_value_t = 0.05, value_parser = parse::diagonal_fraction, allow_negative_numbers = true)]
    max_radius: f32,
    /// Largest caustic-map search radius, as a fraction of the scene
    /// diagonal, in (0, 1].
    #[arg(long, default_value_t = 0.02, value_parser = parse::diagonal_fraction, allow_negative_numbers = true)]
    caustic_radius: f32,
    /// Cone filter on the caustic estimate (sharper caustics).
    #[arg(long)]
    cone_filter: bool,
    /// Final-gather rays per gather (0 = read the global map directly).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(0..=65536), allow_negative_numbers = true)]
    gather_rays: u32,
    /// Read the global map directly at shading points (same as --gather-rays 0).
    #[arg(long)]
    no_final_gather: bool,
    /// Mean distance between irradiance samples in pixels (0 = final gather
    /// at every shading point).
    #[arg(long, default_value_t = 4.0, value_parser = parse::non_negative_f32, allow_negative_numbers = true)]
    sample_spacing: f32,
    /// Final-gather rays read irradiance precomputed at every N-th global
    /// photon (0 = a full radiance estimate at every gather hit).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(0..=1_000_000), allow_negative_numbers = true)]
    precompute: u32,
    /// Point structure of the photon maps [default: kdtree on the CPU,
    /// hashgrid on the GPU, which supports only it].
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(POINT_STRUCTURE_NAMES))]
    points: Option<String>,
    /// Most surface interactions per photon.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=1024), allow_negative_numbers = true)]
    photon_bounces: u32,
}

/// Photon counts: at least one (an empty map is never what was meant),
/// at most what 32-bit photon indices number.
fn photon_count() -> clap::builder::RangedU64ValueParser<u64> {
    clap::value_parser!(u64).range(1..=u32::MAX as u64)
}

/// Photons per estimate: the k-th photon sets the radius, so at least 2.
fn neighbour_count() -> clap::builder::RangedU64ValueParser<u64> {
    clap::value_parser!(u64).range(2..=4096)
}

impl PhotonArgs {
    /// The renderer's settings, or a clear error for a value it cannot use.
    fn settings(&self, job: &Job, on_gpu: bool) -> Result<PhotonRenderSettings> {
        let settings = PhotonRenderSettings {
            width: job.width,
            height: job.height,
            spp: job.spp,
            max_depth: job.max_depth.unwrap_or(5),
            light_samples: job.light_samples,
            seed: job.seed,
            global_photons: self.photons,
            caustic_photons: self.caustic_photons,
            photon_bounces: self.photon_bounces,
            k: self.k as usize,
            caustic_k: self.caustic_k as usize,
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
            precompute: self.precompute as usize,
            points: self.points.clone().unwrap_or_else(|| {
                let default = if on_gpu { "hashgrid" } else { "kdtree" };
                default.to_owned()
            }),
        };
        settings.validate()?;
        Ok(settings)
    }
}

/// Renders with the photon mapper on the device `job.device` selects.
///
/// `--device cuda` renders on the GPU, whose photon mapper reads the global
/// map directly or by the final gather (irradiance samples or every shading
/// point), with hash-grid maps, and says so clearly for other settings;
/// `--device auto` takes the GPU when there is one and the settings suit
/// it, the CPU otherwise.
pub fn run(args: &PhotonArgs, job: &Job) -> Result<Rendered> {
    let gpu_settings = args.settings(job, true)?;
    let gpu = match (job.device, gpu_path_supports(&gpu_settings)) {
        (caustic_gpu::Device::Cpu, _) | (caustic_gpu::Device::Auto, Ok(())) => {
            device::open(job.device)?
        }
        (caustic_gpu::Device::Cuda(_), supported) => {
            supported?;
            device::open(job.device)?
        }
        (caustic_gpu::Device::Auto, Err(why)) => {
            device::cpu_because(&format!("{why:#}"));
            None
        }
    };
    let (film, settings, stats) = match &gpu {
        Some(gpu) => {
            let (film, stats) =
                photon::render_cuda::render(gpu, job.scene, job.camera, &gpu_settings)?;
            (film, gpu_settings, stats)
        }
        None => {
            let settings = args.settings(job, false)?;
            let bar = pixel_progress_bar(job.width, job.height);
            let (film, stats) = photon::render(job.scene, job.camera, &settings, &|n| bar.inc(n))?;
            bar.finish_and_clear();
            (film, settings, stats)
        }
    };
    eprintln!("{}", summary(&settings, &stats));
    let build = job.scene.accel.stats();
    let summary = format!(
        "({}x{}, {} spp, {} triangles, {} build {:.1} ms) on {}",
        job.width,
        job.height,
        job.spp,
        job.scene.triangles.len(),
        build.name,
        build.build_ms,
        device::backend_name(gpu.as_ref()),
    );
    Ok(Rendered { film, summary })
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
