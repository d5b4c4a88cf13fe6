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
    /// Point structure of the photon maps.
    #[arg(long, default_value = "kdtree", value_parser = clap::builder::PossibleValuesParser::new(POINT_STRUCTURE_NAMES))]
    points: String,
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
    fn settings(&self, common: &Common) -> Result<PhotonRenderSettings> {
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
            points: self.points.clone(),
        };
        settings.validate()?;
        Ok(settings)
    }
}

/// Renders with the photon mapper on the CPU; `bar` counts image pixels.
pub fn run(args: &PhotonArgs, common: &Common, bar: &ProgressBar) -> Result<Film> {
    let settings = args.settings(common)?;
    let (film, stats) = photon::render(common.scene, common.camera, &settings, &|n| bar.inc(n))?;
    bar.finish_and_clear();
    eprintln!("{}", summary(&settings, &stats));
    Ok(film)
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
