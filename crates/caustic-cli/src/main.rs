//! `caustic`: render scenes, inspect them, benchmark acceleration structures.

mod alloc_counter;
mod bench;
mod bench_gpu;
#[cfg(feature = "cuda")]
mod bench_gpu_cuda;
mod bench_photons;
mod camera;
mod camera_presets;
mod compare;
mod device;
mod info;
mod notes;
mod output;
mod parse;
mod plot;
mod render;
mod render_photon;
mod render_sppm;
mod render_whitted;
mod scene_arg;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Counts heap bytes so benchmarks can report peak build memory.
#[global_allocator]
static ALLOCATOR: alloc_counter::CountingAllocator = alloc_counter::CountingAllocator;

#[derive(Parser)]
#[command(
    name = "caustic",
    version,
    about = "Parallel ray tracing and photon-mapped global illumination",
    long_about = "caustic renders triangle scenes (OBJ, PLY, glTF, Mitsuba 3 XML, or a built-in \
                  scene) with global illumination: photon mapping (caustic and global maps, final \
                  gather), stochastic progressive photon mapping, or a Whitted ray tracer, each on \
                  the CPU or an NVIDIA GPU. It also benchmarks acceleration structures and \
                  photon-map structures on a shared ray protocol.",
    after_help = "Examples:\n  caustic render                       # cornell-caustics by photon mapping -> cornell-caustics.png\n  \
                  caustic render cornell-box --integrator whitted -o cb.exr --spp 64\n  \
                  caustic info cornell-caustics\n  \
                  caustic compare cb.exr reference.exr --block 8\n  \
                  caustic bench accel --scene target/scenes/bunny/bun_zipper.ply --camera bunny"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Render a scene to an image (EXR: linear radiance; PNG: sRGB).
    Render(render::RenderArgs),
    /// Print what a scene contains: triangles, bounds, materials, lights, camera.
    Info(info::InfoArgs),
    /// Image metrics (RMSE, PSNR, means) of an image against a reference,
    /// in linear values (EXR as stored, PNG converted from sRGB).
    Compare(compare::CompareArgs),
    /// Benchmarks.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Render(args) => render::run(args),
        Command::Info(args) => info::run(args),
        Command::Compare(args) => compare::run(args),
        Command::Bench(cmd) => bench::run(cmd),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// Sets the size of rayon's global pool (0 = all cores).
pub(crate) fn set_threads(threads: usize) -> anyhow::Result<()> {
    if threads > 0 {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build_global()
            .map_err(|e| anyhow::anyhow!("cannot set up {threads} threads: {e}"))?;
    }
    Ok(())
}
