//! `caustic render --integrator whitted`: the Whitted ray tracer's settings
//! and summary. It runs on the CPU (rayon over tiles) or the GPU (a CUDA
//! wavefront), same image, as the facade's device choice decides.

use crate::render::{Built, Common};
use caustic::{FresnelMode, RenderStats, WhittedSettings};
use clap::ValueEnum;

/// `--fresnel`: the reflectance formula for glass.
#[derive(Clone, Copy, ValueEnum)]
pub enum Fresnel {
    Exact,
    Schlick,
}

/// The renderer's settings from the shared flags and `--fresnel`.
pub fn settings(common: &Common, fresnel: Fresnel) -> WhittedSettings {
    WhittedSettings {
        width: common.width,
        height: common.height,
        spp: common.spp,
        max_depth: common.max_depth.unwrap_or(5),
        light_samples: common.light_samples,
        fresnel: match fresnel {
            Fresnel::Exact => FresnelMode::Exact,
            Fresnel::Schlick => FresnelMode::Schlick,
        },
        seed: common.seed,
        trace: Default::default(),
    }
}

/// Sizes, the structure, time and ray throughput, and the device `on`.
pub fn summary(s: &WhittedSettings, stats: &RenderStats, built: &Built, on: &str) -> String {
    format!(
        "({}x{}, {} spp, {} triangles, {}): {:.2} s, {:.1} M rays, {:.2} Mrays/s on {on}",
        s.width,
        s.height,
        s.spp,
        built.triangles,
        built.accel,
        stats.seconds,
        stats.rays as f64 / 1e6,
        stats.mrays_per_second(),
    )
}
