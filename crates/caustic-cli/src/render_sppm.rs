//! `caustic render --integrator sppm`: stochastic progressive photon
//! mapping's flags and settings, its progress bar over passes and, on
//! request, the error against a reference image at every power-of-two
//! pass, fed by the facade's pass reports on the CPU or the GPU.

use crate::parse;
use crate::render::{Built, Common};
use anyhow::{Context, Result, bail};
use caustic::{Film, PassJitter, SppmPass, SppmSettings, SppmStats, image_io};
use clap::{Args, ValueEnum};
use indicatif::ProgressBar;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Options of the `sppm` integrator.
#[derive(Args)]
#[command(next_help_heading = "Progressive photon mapping (--integrator sppm)")]
pub struct SppmArgs {
    /// Eye pass + photon pass pairs.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..), allow_negative_numbers = true)]
    passes: u32,
    /// Photons emitted per pass.
    #[arg(long, default_value_t = 200_000, value_parser = clap::value_parser!(u64).range(1..=u32::MAX as u64), allow_negative_numbers = true)]
    photons_per_pass: u64,
    /// Initial gather radius in scene units [default: 2 pixel footprints
    /// at each pixel's first visible point].
    #[arg(long, value_parser = parse::positive_f32, allow_negative_numbers = true)]
    radius: Option<f32>,
    /// Fraction of new photons kept per pass, strictly between 0 and 1.
    #[arg(long, default_value_t = 2.0 / 3.0, value_parser = parse::open_unit, allow_negative_numbers = true)]
    alpha: f32,
    /// Where each pass's primary ray falls in its pixel: `sequence`, a
    /// low-discrepancy sequence over the passes shifted per pixel (edges,
    /// such as a light's outline, converge about like 1/passes), or
    /// `independent` draws (the images before the sequence).
    #[arg(long, value_enum, default_value_t = Jitter::Sequence)]
    jitter: Jitter,
    /// Linear EXR to score against; prints RMSE and mean at every
    /// power-of-two pass and at the last.
    #[arg(long, value_name = "REF.exr")]
    score: Option<PathBuf>,
}

/// `--jitter`'s values.
#[derive(Clone, Copy, ValueEnum)]
enum Jitter {
    Sequence,
    Independent,
}

impl SppmArgs {
    /// The renderer's settings from the shared flags and this section's.
    pub fn settings(&self, common: &Common) -> SppmSettings {
        SppmSettings {
            width: common.width,
            height: common.height,
            passes: self.passes,
            photons_per_pass: self.photons_per_pass,
            initial_radius: self.radius,
            alpha: self.alpha,
            max_depth: common.max_depth.unwrap_or(64),
            light_samples: common.light_samples,
            seed: common.seed,
            jitter: match self.jitter {
                Jitter::Sequence => PassJitter::Sequence,
                Jitter::Independent => PassJitter::Independent,
            },
            trace: Default::default(),
        }
    }

    /// Whether `--score` was given.
    pub fn scores(&self) -> bool {
        self.score.is_some()
    }

    /// The `--score` reference, read and checked against the render's
    /// size before anything renders.
    pub fn reference(&self, settings: &SppmSettings) -> Result<Option<Film>> {
        load_reference(self.score.as_deref(), settings.width, settings.height)
    }
}

/// The error against a reference at every power-of-two pass and at the
/// last, one line each, as the facade reports the passes.
pub struct Scorer {
    reference: Film,
    /// The GPU keeps no statistics as it goes: its lines are timed here.
    start: Instant,
}

impl Scorer {
    pub fn new(reference: Film) -> Self {
        Self {
            reference,
            start: Instant::now(),
        }
    }

    pub fn score(&self, pass: &SppmPass) {
        let passes = pass.passes();
        if !(passes.is_power_of_two() || passes == pass.total()) {
            return;
        }
        let Ok(film) = pass.film() else {
            return;
        };
        let (seconds, radius) = match pass.stats() {
            Some(stats) => (stats.seconds, Some(stats.mean_radius)),
            None => (self.start.elapsed().as_secs_f64(), None),
        };
        score_line(passes, seconds, &film, &self.reference, radius);
    }
}

/// Sizes, passes, time per stage, counts and the device `on`.
pub fn summary(s: &SppmSettings, stats: &SppmStats, built: &Built, on: &str) -> String {
    let mut exchange = String::new();
    for (name, seconds) in [
        ("exchange", stats.exchange_seconds),
        ("setup", stats.setup_seconds),
        ("film", stats.film_seconds),
    ] {
        if seconds > 0.0 {
            exchange += &format!(", {name} {seconds:.2} s");
        }
    }
    // A team's balance: its members' own eye and photon work.
    for (name, [fastest, slowest]) in [
        ("members' eye", stats.eye_member_seconds),
        ("members' photons", stats.photon_member_seconds),
    ] {
        if slowest > 0.0 {
            exchange += &format!(", {name} {fastest:.2}-{slowest:.2} s");
        }
    }
    format!(
        "({}x{}, sppm: {} passes x {} photons, {} triangles, {}): {:.2} s \
         (eye {:.2} s, grid {:.2} s, photons {:.2} s, gather {:.2} s{exchange}), {:.1} M rays, \
         {:.1} M photons stored, {:.1} M deposits, mean radius {:.3e}, on {on}",
        s.width,
        s.height,
        stats.passes,
        s.photons_per_pass,
        built.triangles,
        built.accel,
        stats.seconds,
        stats.eye_seconds,
        stats.grid_seconds,
        stats.photon_seconds,
        stats.gather_seconds,
        stats.rays as f64 / 1e6,
        stats.photons_stored as f64 / 1e6,
        stats.deposits as f64 / 1e6,
        stats.mean_radius,
    )
}

/// The reference to score against, checked for size before the render.
fn load_reference(path: Option<&Path>, width: u32, height: u32) -> Result<Option<Film>> {
    let Some(path) = path else {
        return Ok(None);
    };
    let film =
        image_io::read_exr(path).with_context(|| format!("cannot read {}", path.display()))?;
    if film.width != width || film.height != height {
        bail!(
            "{} is {}x{}, the render {width}x{height}",
            path.display(),
            film.width,
            film.height
        );
    }
    Ok(Some(film))
}

/// One line of the convergence table: pass, time, RMSE, mean (and the
/// mean radius when known).
fn score_line(passes: u32, seconds: f64, film: &Film, reference: &Film, radius: Option<f64>) {
    let Ok(rmse) = image_io::rmse(film, reference) else {
        return;
    };
    let m = film.mean();
    let radius = radius.map_or(String::new(), |r| format!("  radius {r:.3e}"));
    eprintln!(
        "pass {passes:5}: {seconds:8.2} s  rmse {rmse:.5}  mean ({:.4}, {:.4}, {:.4}){radius}",
        m.x, m.y, m.z
    );
}

/// The bar over passes; `hidden` under `-q` and while scoring.
pub fn progress_bar(passes: u64, hidden: bool) -> ProgressBar {
    crate::render::styled_progress_bar(
        passes,
        hidden,
        "{spinner} sppm [{bar:40}] pass {pos}/{len} {elapsed_precise} eta {eta}",
    )
}
