//! `caustic render --integrator sppm`: stochastic progressive photon
//! mapping on the CPU or the GPU, with a progress bar over passes and, on request,
//! the error against a reference image at every power-of-two pass.

use crate::render::{Job, Rendered};
use crate::{device, notes, parse};
use anyhow::{Context, Result, bail};
use caustic_render::sppm::{self, PassView, SppmSettings};
use caustic_render::{Film, image_io};
use clap::Args;
use indicatif::ProgressBar;
use std::path::{Path, PathBuf};

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
    /// Linear EXR to score against; prints RMSE and mean at every
    /// power-of-two pass and at the last.
    #[arg(long, value_name = "REF.exr")]
    score: Option<PathBuf>,
}

pub fn run(job: &Job, args: &SppmArgs) -> Result<Rendered> {
    let settings = SppmSettings {
        width: job.width,
        height: job.height,
        passes: args.passes,
        photons_per_pass: args.photons_per_pass,
        initial_radius: args.radius,
        alpha: args.alpha,
        max_depth: job.max_depth.unwrap_or(64),
        light_samples: job.light_samples,
        seed: job.seed,
    };
    settings.validate().context("invalid SPPM settings")?;
    let reference = load_reference(args.score.as_deref(), job.width, job.height)?;
    let bar = progress_bar(args.passes as u64, notes::quiet() || reference.is_some());
    let scored = |passes: u32| passes.is_power_of_two() || passes == args.passes;
    let gpu = device::open(job.device)?;
    let (film, stats) = match &gpu {
        Some(gpu) => {
            let start = std::time::Instant::now();
            let mut on_pass = |view: &sppm::GpuPassView| {
                bar.set_position(view.passes as u64);
                if let Some(reference) = &reference
                    && scored(view.passes)
                    && let Ok(film) = view.film()
                {
                    score_line(
                        view.passes,
                        start.elapsed().as_secs_f64(),
                        &film,
                        reference,
                        None,
                    );
                }
            };
            sppm::render_cuda(gpu, job.scene, job.camera, &settings, &mut on_pass)?
        }
        None => {
            let mut on_pass = |view: &PassView| {
                bar.set_position(view.passes as u64);
                if let Some(reference) = &reference
                    && scored(view.passes)
                {
                    let (seconds, radius) = (view.stats.seconds, view.stats.mean_radius);
                    score_line(view.passes, seconds, &view.film(), reference, Some(radius));
                }
            };
            sppm::render_passes(job.scene, job.camera, &settings, &mut on_pass)?
        }
    };
    bar.finish_and_clear();
    let summary = format!(
        "({}x{}, sppm: {} passes x {} photons, {} triangles): {:.2} s \
         (eye {:.2} s, grid {:.2} s, photons {:.2} s, gather {:.2} s), {:.1} M rays, \
         {:.1} M photons stored, {:.1} M deposits, mean radius {:.3e}, on {}",
        job.width,
        job.height,
        stats.passes,
        args.photons_per_pass,
        job.scene.triangles.len(),
        stats.seconds,
        stats.eye_seconds,
        stats.grid_seconds,
        stats.photon_seconds,
        stats.gather_seconds,
        stats.rays as f64 / 1e6,
        stats.photons_stored as f64 / 1e6,
        stats.deposits as f64 / 1e6,
        stats.mean_radius,
        device::backend_name(gpu.as_ref()),
    );
    Ok(Rendered { film, summary })
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

fn progress_bar(passes: u64, hidden: bool) -> ProgressBar {
    crate::render::styled_progress_bar(
        passes,
        hidden,
        "{spinner} sppm [{bar:40}] pass {pos}/{len} {elapsed_precise} eta {eta}",
    )
}
