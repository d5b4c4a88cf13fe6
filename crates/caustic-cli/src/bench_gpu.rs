//! `caustic bench gpu`: the CUDA backend's numbers in one command: the
//! primitives against the memory ceiling, and for every structure the GPU
//! builds (`--accel`) on every scene its build time by stage, quality and
//! memory and its Mrays/s on the anchor ray protocol (rays generated on the
//! device), so that the GPU tables of `docs/BENCHMARKS.md` and the OptiX
//! comparison (`scripts/gpu_vs_optix.py`) come from the same code on every
//! machine.
//!
//! This file holds the flags, which every build parses alike; the run is
//! `bench_gpu_cuda.rs`, compiled with the `cuda` feature only. The
//! measuring itself lives in `caustic_gpu::bench` (primitives) and
//! `caustic_accel::bvh::trace_bench_cuda` (builds and traversal).

use crate::camera::CameraArgs;
use crate::{camera_presets, parse};
use anyhow::{Result, bail};
use caustic::Device;
use caustic_accel::registry::{DEFAULT_GPU_SPEC, GPU_STRUCTURES};
use clap::Args;
use std::path::PathBuf;

/// Examples, then how cameras are chosen.
pub fn help() -> String {
    format!(
        "Examples:\n  caustic bench gpu                                # primitives only\n  \
         caustic bench gpu --camera standard --scene target/scenes/sponza-dabrovic/sponza.obj \
         target/scenes/dragon/dragon_vrip.ply@16 --accel all --json gpu.json\n\n\
         Structures the GPU builds (--accel): {} (default {DEFAULT_GPU_SPEC}); \
         `all` = {}.\n\n{}",
        GPU_STRUCTURES.join(", "),
        ALL_STRUCTURES.join(", "),
        camera_presets::help()
    )
}

#[derive(Args)]
// Without CUDA the flags are parsed (so they are checked, and `--help`
// says the same in every build) but nothing reads them.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub struct GpuBenchArgs {
    /// Scene files or folders of scene files (searched one level deep). A
    /// file may end in `@N`: N copies of it on a square grid, framed by the
    /// GPU anchor's camera (`dragon_vrip.ply@16` is its 14 M-triangle scene).
    /// Without scenes only the primitives run.
    #[arg(long, num_args = 1..)]
    pub(crate) scene: Vec<String>,
    /// The CUDA device: `cuda` or `cuda:N`.
    #[arg(long, default_value = "cuda")]
    pub(crate) device: Device,
    /// Several GPUs at once instead (`0,1,2,3` or `all`): every GPU builds
    /// and traces each scene's rays at the same time as the others (one
    /// thread each), and the table gives each GPU's rays per second under
    /// that load and their sum, the machine's throughput. The primitives
    /// are not run.
    #[arg(long, value_parser = parse_devices)]
    pub(crate) devices: Option<DeviceList>,
    /// Image width: primary rays per row.
    #[arg(long, default_value_t = 1920, value_parser = clap::value_parser!(u32).range(1..=parse::MAX_SIDE as i64), allow_negative_numbers = true)]
    pub(crate) width: u32,
    /// Image height: rows of primary rays.
    #[arg(long, default_value_t = 1080, value_parser = clap::value_parser!(u32).range(1..=parse::MAX_SIDE as i64), allow_negative_numbers = true)]
    pub(crate) height: u32,
    /// Untimed runs of each step before the timed ones.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(0..), allow_negative_numbers = true)]
    pub(crate) warm_up: u16,
    /// Timed runs of each step; the median is reported (and the best).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u16).range(1..), allow_negative_numbers = true)]
    pub(crate) reps: u16,
    /// The primitives run on 2^LOG2_N elements (0: skip them; at most 28,
    /// as the sorts hold several buffers of 2^N keys).
    #[arg(long, default_value_t = 26, value_parser = clap::value_parser!(u32).range(0..=28), allow_negative_numbers = true)]
    pub(crate) log2_n: u32,
    /// Check every Nth ray of each pass against the CPU traversal before
    /// timing (0: no check).
    #[arg(long, default_value_t = 16)]
    pub(crate) check_every: usize,
    /// Write every number, with the device and the settings, as one JSON
    /// object to this file.
    #[arg(long)]
    pub(crate) json: Option<PathBuf>,
    /// The structures to build and trace, comma-separated GPU specs
    /// (`ploc`, `lbvh:bits=63`, `hlbvh`, `bvh-binned`,
    /// `bvh-binned:schedule=65536@64/0@8`, `bvh-sweep`, `bvh-wide:from=lbvh`,
    /// `cpu:bvh-binned`) or `all`.
    #[arg(long, default_value = DEFAULT_GPU_SPEC)]
    pub(crate) accel: String,
    #[command(flatten)]
    pub(crate) camera: CameraArgs,
}

/// What `--accel all` builds: every device builder, the wide BVH over the
/// default, the kd-tree, the uniform grid, and the CPU's binned SAH tree uploaded, for
/// comparison with the GPU's.
pub(crate) const ALL_STRUCTURES: &[&str] = &[
    "lbvh",
    "hlbvh",
    "ploc",
    "bvh-binned",
    "bvh-binned-staged",
    "bvh-sweep",
    "bvh-taskpool",
    "bvh-wide",
    "kdtree",
    "grid",
    "cpu:bvh-binned",
];

/// `--devices`: GPU numbers, or none for all of them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceList(pub Vec<usize>);

/// `--devices`: GPU numbers, comma-separated, or `all` (an empty list).
fn parse_devices(text: &str) -> std::result::Result<DeviceList, String> {
    if text.eq_ignore_ascii_case("all") {
        return Ok(DeviceList(Vec::new()));
    }
    let ordinals = text
        .split(',')
        .map(|n| n.trim().parse::<usize>())
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|_| format!("{text}: expected GPU numbers such as 0,1,2 or `all`"))?;
    let mut unique = ordinals.clone();
    unique.sort_unstable();
    unique.dedup();
    if unique.len() != ordinals.len() {
        return Err(format!("{text}: a GPU is named twice"));
    }
    Ok(DeviceList(ordinals))
}

/// Measures the CUDA device `--device` names (or the GPUs `--devices`
/// names); any other device is refused, so a GPU benchmark never quietly
/// measures a CPU.
pub fn run(args: GpuBenchArgs) -> Result<()> {
    if args.devices.is_some() {
        return measure_devices(args);
    }
    let ordinal = match args.device {
        Device::Cuda(n) => n,
        other => bail!(
            "caustic bench gpu measures a CUDA device; --device {other} is not one (use cuda or cuda:N)"
        ),
    };
    measure(args, ordinal)
}

#[cfg(feature = "cuda")]
fn measure(args: GpuBenchArgs, ordinal: usize) -> Result<()> {
    crate::bench_gpu_cuda::run(args, ordinal)
}

#[cfg(feature = "cuda")]
fn measure_devices(args: GpuBenchArgs) -> Result<()> {
    crate::bench_gpu_cuda::run_devices(args)
}

#[cfg(not(feature = "cuda"))]
fn measure_devices(args: GpuBenchArgs) -> Result<()> {
    measure(args, 0)
}

#[cfg(not(feature = "cuda"))]
fn measure(_: GpuBenchArgs, _: usize) -> Result<()> {
    bail!(
        "caustic bench gpu needs the `cuda` feature: this caustic was built without CUDA support; \
         rebuild with the default `cuda` feature"
    )
}

#[cfg(test)]
mod tests {
    use super::{DeviceList, parse_devices};

    #[test]
    fn device_lists_parse() {
        assert_eq!(parse_devices("0,1, 3"), Ok(DeviceList(vec![0, 1, 3])));
        assert_eq!(parse_devices("ALL"), Ok(DeviceList(vec![])));
        assert!(parse_devices("0,0").unwrap_err().contains("twice"));
        assert!(parse_devices("cuda:0").is_err());
        assert!(parse_devices("").is_err());
    }
}
