//! `caustic render --integrator whitted`: the Whitted ray tracer on the
//! CPU (rayon over tiles) or the GPU (a CUDA wavefront), same image.

use crate::device;
use crate::render::{Job, Rendered, pixel_progress_bar};
use anyhow::Result;
use caustic_render::whitted::render_cuda as whitted_cuda;
use caustic_render::whitted::{self, FresnelMode, WhittedSettings};
use clap::ValueEnum;

/// `--fresnel`: the reflectance formula for glass.
#[derive(Clone, Copy, ValueEnum)]
pub enum Fresnel {
    Exact,
    Schlick,
}

pub fn run(job: &Job, fresnel: Fresnel) -> Result<Rendered> {
    let settings = WhittedSettings {
        width: job.width,
        height: job.height,
        spp: job.spp,
        max_depth: job.max_depth.unwrap_or(5),
        light_samples: job.light_samples,
        fresnel: match fresnel {
            Fresnel::Exact => FresnelMode::Exact,
            Fresnel::Schlick => FresnelMode::Schlick,
        },
        seed: job.seed,
    };
    let gpu = device::open(job.device)?;
    let (film, stats) = match &gpu {
        Some(gpu) => whitted_cuda::render(gpu, job.scene, job.camera, &settings)?,
        None => {
            let bar = pixel_progress_bar(job.width, job.height);
            let result = whitted::render(job.scene, job.camera, &settings, &|n| bar.inc(n));
            bar.finish_and_clear();
            result
        }
    };
    let build = job.scene.accel.stats();
    let summary = format!(
        "({}x{}, {} spp, {} triangles, {} build {:.1} ms): {:.2} s, {:.1} M rays, {:.2} Mrays/s on {}",
        job.width,
        job.height,
        job.spp,
        job.scene.triangles.len(),
        build.name,
        build.build_ms,
        stats.seconds,
        stats.rays as f64 / 1e6,
        stats.mrays_per_second(),
        device::backend_name(gpu.as_ref()),
    );
    Ok(Rendered { film, summary })
}
