//! `caustic render --integrator sppm`: stochastic progressive photon
//! mapping on the CPU, with a progress bar over passes and, on request,
//! the error against a reference image at every power-of-two pass.

use anyhow::{Context, Result, bail};
use caustic_render::sppm::{self, PassView, SppmSettings};
use caustic_render::{Film, RenderScene, image_io};
use caustic_scene::Camera;
use clap::Args;
use indicatif::ProgressBar;
use std::path::{Path, PathBuf};

/// Options of the `sppm` integrator.
#[derive(Args)]
pub struct SppmArgs {
    /// SPPM: eye pass + photon pass pairs.
    #[arg(long, default_value_t = 64)]
    passes: u32,
    /// SPPM: photons emitted per pass.
    #[arg(long, default_value_t = 200_000)]
    photons_per_pass: u64,
    /// SPPM: initial gather radius in scene units (default: 2 pixel
    /// footprints at each pixel's first visible point).
    #[arg(long, allow_hyphen_values = true)]
    radius: Option<f32>,
    /// SPPM: fraction of new photons kept per pass, in (0, 1).
    #[arg(long, default_value_t = 2.0 / 3.0, allow_hyphen_values = true)]
    alpha: f32,
    /// SPPM: linear EXR to score against; prints RMSE and mean at every
    /// power-of-two pass and at the last.
    #[arg(long, value_name = "REF.exr")]
    score: Option<PathBuf>,
}

/// What `render` has already resolved from the shared options.
pub struct SppmJob<'a> {
    pub scene: &'a RenderScene,
    pub camera: &'a Camera,
    pub width: u32,
    pub height: u32,
    pub max_depth: u32,
    pub light_samples: u32,
    pub seed: u64,
    pub output: &'a Path,
    pub exposure: f32,
    pub quiet: bool,
    /// `--device`: `cuda` renders on the GPU, `auto` there when one opens.
    pub device: caustic_gpu::Device,
}

pub fn run(job: SppmJob, args: &SppmArgs) -> Result<()> {
    let settings = SppmSettings {
        width: job.width,
        height: job.height,
        passes: args.passes,
        photons_per_pass: args.photons_per_pass,
        initial_radius: args.radius,
        alpha: args.alpha,
        max_depth: job.max_depth,
        light_samples: job.light_samples,
        seed: job.seed,
    };
    settings.validate().context("invalid SPPM settings")?;
    let reference = load_reference(args.score.as_deref(), job.width, job.height)?;
    let bar = progress_bar(args.passes as u64, job.quiet || reference.is_some());
    let scored = |passes: u32| passes.is_power_of_two() || passes == args.passes;
    let gpu = match job.device {
        caustic_gpu::Device::Cpu => None,
        caustic_gpu::Device::Cuda(_) => caustic_gpu::select(job.device)?.gpu,
        caustic_gpu::Device::Auto => caustic_gpu::select(job.device).ok().and_then(|s| s.gpu),
    };
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
    let backend = match &gpu {
        Some(gpu) => gpu.info().name.clone(),
        None => format!("{} CPU threads", rayon::current_num_threads()),
    };
    image_io::write_image(&film, job.output, job.exposure)
        .with_context(|| format!("cannot write {}", job.output.display()))?;
    eprintln!(
        "wrote {} ({}x{}, sppm: {} passes x {} photons, {} triangles): {:.2} s \
         (eye {:.2} s, grid {:.2} s, photons {:.2} s, gather {:.2} s), {:.1} M rays, \
         {:.1} M photons stored, {:.1} M deposits, mean radius {:.3e}, on {backend}",
        job.output.display(),
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
    );
    Ok(())
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
