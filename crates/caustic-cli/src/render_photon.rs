//! `caustic render --integrator photon`: the photon-mapping renderer's
//! flags, its settings and its summary lines.

use crate::parse;
use crate::render::{Built, Common};
use caustic::{Backend, PhotonMapKind, PhotonRenderStats, PhotonSettings, SampleSettings};
use caustic_accel::points::POINT_STRUCTURE_NAMES;
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
    #[arg(long, value_parser = point_structure())]
    points: Option<PhotonMapKind>,
    /// Most surface interactions per photon.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=1024), allow_negative_numbers = true)]
    photon_bounces: u32,
}

/// Photon counts: at least one (an empty map is never what was meant),
/// at most what 32-bit photon indices number.
fn photon_count() -> clap::builder::RangedU64ValueParser<u64> {
    clap::value_parser!(u64).range(1..=u32::MAX as u64)
}

/// `--points`: one of the registry's names (listed in the help and the
/// error), as the facade's typed kind.
fn point_structure() -> impl clap::builder::TypedValueParser<Value = PhotonMapKind> {
    use clap::builder::{PossibleValuesParser, TypedValueParser};
    PossibleValuesParser::new(POINT_STRUCTURE_NAMES).try_map(|name| name.parse())
}

/// Photons per estimate: the k-th photon sets the radius, so at least 2.
fn neighbour_count() -> clap::builder::RangedU64ValueParser<u64> {
    clap::value_parser!(u64).range(2..=4096)
}

impl PhotonArgs {
    /// The photon mapper's settings from the shared flags and this
    /// section's. The point structure stays the device's own unless
    /// `--points` names one.
    pub fn settings(&self, common: &Common) -> PhotonSettings {
        PhotonSettings {
            width: common.width,
            height: common.height,
            spp: common.spp,
            max_depth: common.max_depth.unwrap_or(5),
            light_samples: common.light_samples,
            seed: common.seed,
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
            points: self.points,
            trace: Default::default(),
        }
    }
}

/// The summary after `wrote FILE`: sizes, the structure and the device
/// `on`. The photon mapper's device is the facade's choice: `--device
/// cuda` renders on the GPU (global map read directly or by the final
/// gather, hash-grid maps) and refuses other settings, `--device auto`
/// takes the GPU when there is one and the settings suit it.
pub fn summary(s: &PhotonSettings, built: &Built, on: &str) -> String {
    format!(
        "({}x{}, {} spp, {} triangles, {}) on {on}",
        s.width, s.height, s.spp, built.triangles, built.accel,
    )
}

/// One line with the pass timings; `backend` says which point structure
/// the maps got.
pub fn passes(s: &PhotonSettings, stats: &PhotonRenderStats, backend: &Backend) -> String {
    let gather = if s.gather_rays == 0 {
        "global map directly".to_owned()
    } else {
        format!(
            "irradiance at {} photons in {:.0} ms, final gather {} rays, {} irradiance samples + {} point gathers in {:.0} ms",
            stats.precomputed,
            stats.precompute_ms,
            s.gather_rays,
            stats.samples,
            stats.point_gathers,
            stats.sample_ms
        )
    };
    // The device renderer times the eye pass's stages: where a frame's
    // time goes, on one GPU and in a team.
    let stages = if stats.stage_ms.is_empty() {
        String::new()
    } else {
        let named: Vec<String> = stats
            .stage_ms
            .iter()
            .map(|(name, ms)| format!("{name} {ms:.0}"))
            .collect();
        format!(" ({} ms)", named.join(", "))
    };
    format!(
        "photon: {} photons traced in {:.0} ms ({} global, {} caustic stored), {} maps built in {:.1} ms, {gather}, image {:.0} ms{stages}; total {:.2} s, {:.1} M rays",
        stats.photons_traced,
        stats.photon_ms,
        stats.global_stored,
        stats.caustic_stored,
        s.points_on(backend.is_gpu()),
        stats.build_ms,
        stats.render_ms,
        stats.seconds,
        stats.rays as f64 / 1e6,
    )
}
