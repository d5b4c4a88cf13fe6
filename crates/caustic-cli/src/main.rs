//! `caustic`: render scenes, inspect them, benchmark acceleration structures.

mod alloc_counter;
mod bench;
mod bench_collide;
mod bench_dacrt;
#[cfg(feature = "cuda")]
mod bench_dacrt_cuda;
mod bench_gpu;
#[cfg(feature = "cuda")]
mod bench_gpu_cuda;
mod bench_photons;
mod camera;
mod camera_presets;
mod collide;
mod compare;
mod device;
mod frame_writer;
mod info;
mod notes;
mod output;
mod parse;
mod plot;
mod ranks;
mod render;
mod render_photon;
mod render_sppm;
mod render_whitted;
mod scene_arg;
mod view;

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
    /// Collision detection of moving agents by ray segments (Vinkler et
    /// al. 2013): DACRT against BVH build + trace, answers per agent and frame.
    Collide(collide::CollideArgs),
    /// Look around a scene in the browser: a local web page streams the
    /// progressively refined image; orbit, pan and zoom with the mouse,
    /// play or scrub an animation, switch integrator and structure.
    View(view::ViewArgs),
    /// Benchmarks.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
}

fn main() -> ExitCode {
    end_quietly_when_the_reader_leaves();
    let cli = Cli::parse();
    // A render started by `mpirun` joins its job (kept until the end of
    // `main`, where MPI is finalised).
    let _membership = match &cli.command {
        Command::Render(_) => match ranks::join() {
            Ok(membership) => Some(membership),
            Err(err) => {
                ranks::fail(&err);
                return ExitCode::FAILURE;
            }
        },
        _ => None,
    };
    let result = match cli.command {
        Command::Render(args) => {
            with_threads(ranks::render_threads(args.threads()), || render::run(args))
        }
        Command::Info(args) => with_threads(0, || info::run(args)),
        Command::Compare(args) => compare::run(args),
        Command::Collide(args) => with_threads(args.threads, || collide::run(args)),
        // The viewer runs its own pool for its render threads.
        Command::View(args) => view::run(args),
        Command::Bench(bench::BenchCommand::View(args)) => view::bench::run(args),
        Command::Bench(cmd) => with_threads(cmd.threads(), || bench::run(cmd)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            ranks::fail(&err);
            ExitCode::FAILURE
        }
    }
}

/// Rust starts with SIGPIPE ignored, so a print to a closed pipe
/// (`caustic info scene | head`) panics; the default action ends the
/// process quietly, as other command-line tools do.
fn end_quietly_when_the_reader_leaves() {
    #[cfg(unix)]
    // SAFETY: called first in `main`, before any other thread exists;
    // SIG_DFL is a valid disposition for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Runs `job` on a rayon pool of `threads` workers (0: one per core), so
/// every parallel loop inside it runs there, whatever touched rayon's
/// global pool first (checking an `--accel` spec builds over no
/// triangles). Workers get 16 MiB stacks (reserved, touched only as used):
/// the builders recurse under `rayon::join`, and a worker that waits there
/// runs stolen tasks on top of its own stack, so the depth a stack holds is
/// not the tree's depth alone.
fn with_threads<T: Send>(
    threads: usize,
    job: impl FnOnce() -> anyhow::Result<T> + Send,
) -> anyhow::Result<T> {
    thread_pool(threads)?.install(job)
}

/// The rayon pool of `threads` workers (0: one per core) that
/// [`with_threads`] runs in, with its 16 MiB stacks.
fn thread_pool(threads: usize) -> anyhow::Result<rayon::ThreadPool> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .stack_size(16 << 20)
        .build()
        .map_err(|e| anyhow::anyhow!("cannot set up {threads} threads: {e}"))
}
