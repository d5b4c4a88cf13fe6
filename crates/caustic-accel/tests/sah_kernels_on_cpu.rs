//! The GPU top-down SAH builders (`bvh-binned`, `bvh-binned-staged`,
//! `bvh-sweep`) run on the CPU: their kernels (`src/bvh/build/binned_sah.cu`,
//! `sweep_sah.cu`, `sah_device.cu`) compiled unchanged by the host C++
//! compiler over a fiber shim (`tests/cpu_emulation/cuda_fibers.h`: every
//! CUDA thread a fiber, with barriers, shuffles and ballots; floating-point
//! contraction off, so each operation rounds once as the kernels' `_rn`
//! intrinsics do), driven by the host steps of `binned_sah_cuda.rs`
//! (`sah_kernels.cpp`), on soups with every awkward case and every setting:
//!
//! - the tree passes `Bvh2::validate` and `validate_tight` (exact boxes,
//!   leaves within `max_leaf_size`, non-finite triangles parked), every slot
//!   holds its scene triangle with its id, the slot map inverts, and the
//!   depth reported is the tree's;
//! - its SAH cost is within 1 % of the CPU builder's with the same bins and
//!   schedule (`BinnedSahBuilder` on `SahBuilderConfig::binned`).
//!
//! What this cannot see (the runtime's primitives, the real scheduling of
//! warps and blocks, the Rust host code) the GPU tests (`gpu_binned.rs`)
//! check on the device. Needs a C++17 compiler (`CXX`, else `c++`) and an
//! x86-64 host; without them it says so and skips.

#[path = "common/soups.rs"]
mod soups;

#[path = "common/host_harness.rs"]
mod host_harness;

#[path = "common/emulated_tree.rs"]
mod emulated_tree;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use caustic_accel::bvh::build::sah_records_cuda::SahParams;
use caustic_accel::bvh::build::{BinnedSahBuilder, Bvh2Builder};
use caustic_accel::registry::SahBuilderConfig;
use caustic_accel::{BuildInput, sah_cost};
use caustic_geom::{Pcg32, Triangle, Vec3};
use emulated_tree::{EmulatedTree, check_slots, read_tree, triangle_words};
use soups::{awkward_soup, grid_soup};

/// The harness, compiled once per test process; `None` without a compiler.
fn harness() -> Option<&'static Path> {
    static HARNESS: OnceLock<Option<PathBuf>> = OnceLock::new();
    host_harness::compile_fibers_once(&HARNESS, "sah-kernels", "sah_kernels.cpp")
}

/// What the emulated build produced.
struct Emulated {
    built: EmulatedTree,
    levels: u32,
    small_roots: u32,
    depth: u32,
}

fn emulate(exe: &Path, params: &SahParams, tris: &[Triangle]) -> Emulated {
    let mut input = bytemuck::bytes_of(params).to_vec();
    input.extend_from_slice(&(tris.len() as u32).to_le_bytes());
    input.extend_from_slice(bytemuck::cast_slice(&triangle_words(tris)));
    let output = host_harness::run(exe, "sah-kernels", &input);
    let (built, rest) = read_tree(&output, tris.len());
    let shape: Vec<u32> = bytemuck::pod_collect_to_vec(&rest[..12]);
    Emulated {
        built,
        levels: shape[0],
        small_roots: shape[1],
        depth: shape[2],
    }
}

/// Builds `tris` with the emulated kernels for `spec` and checks the tree
/// (module docs); a line for the log, or what is wrong.
fn check(exe: &Path, spec: &str, tris: &[Triangle]) -> Result<String, String> {
    let config = SahBuilderConfig::parse(spec).unwrap();
    let binned = config.binned();
    let got = emulate(exe, &SahParams::from_config(&binned), tris);
    let input = BuildInput::from_triangles(tris);
    let tree = &got.built.tree;
    tree.validate(&input.bounds)?;
    tree.validate_tight(&input, config.max_leaf_size())?;
    check_slots(&got.built, got.depth, tris)?;
    let cpu = BinnedSahBuilder::new(binned).build(&input);
    let (gpu_sah, cpu_sah) = (sah_cost(tree), sah_cost(&cpu));
    let off = if cpu_sah > 0.0 {
        gpu_sah / cpu_sah - 1.0
    } else {
        0.0
    };
    let line = format!(
        "SAH {gpu_sah:.4} (CPU {cpu_sah:.4}, {:+.3} %), {} nodes (CPU {}), depth {}, {} levels, {} small roots",
        100.0 * off,
        tree.nodes.len(),
        cpu.nodes.len(),
        got.depth,
        got.levels,
        got.small_roots
    );
    if off.abs() > 0.01 && (gpu_sah - cpu_sah).abs() > 1e-5 {
        return Err(format!("SAH beyond 1 % of the CPU's: {line}"));
    }
    Ok(line)
}

/// Triangles collapsed to points.
fn points(ps: &[Vec3]) -> Vec<Triangle> {
    ps.iter().map(|&p| Triangle::new(p, p, p)).collect()
}

fn soups(rng: &mut Pcg32) -> Vec<(String, Vec<Triangle>)> {
    let one = Triangle::new(Vec3::ZERO, Vec3::X, Vec3::Y);
    let nan = Triangle::new(Vec3::splat(f32::NAN), Vec3::X, Vec3::Y);
    let inf = Triangle::new(Vec3::ZERO, Vec3::splat(f32::INFINITY), Vec3::ONE);
    let mut soups: Vec<(String, Vec<Triangle>)> = vec![
        ("empty".into(), vec![]),
        ("one triangle".into(), vec![one]),
        ("only non-finite".into(), vec![nan, nan]),
        ("some non-finite".into(), vec![one, nan, one, inf]),
        (
            "geometric series".into(),
            points(
                &(0..120)
                    .map(|k| Vec3::splat(0.5f32.powi(k)))
                    .collect::<Vec<_>>(),
            ),
        ),
        (
            "huge coordinates".into(),
            points(&[
                Vec3::splat(-3e38),
                Vec3::splat(3e38),
                Vec3::ZERO,
                Vec3::new(1e-30, 0.0, 0.0),
                Vec3::new(2e-45, 0.0, 0.0),
            ]),
        ),
        ("height field 2x24x24".into(), grid_soup(rng, 24)),
    ];
    for n in [5, 65, 3000, 9000] {
        soups.push((format!("{n} coincident"), vec![one; n]));
    }
    for n in [37, 64, 65, 2049, 9000, 20_000] {
        soups.push((format!("awkward soup {n}"), awkward_soup(rng, n)));
    }
    soups
}

/// Every registered builder and settings that exercise the other paths:
/// bin counts, leaf bounds, no exact sweep, a small one, schedules.
const SPECS: &[&str] = &[
    "bvh-binned",
    "bvh-binned-staged",
    "bvh-sweep",
    "bvh-binned:bins=8:leaf=1",
    "bvh-binned:leaf=16",
    "bvh-binned:sweep=0",
    "bvh-binned:sweep=9:schedule=4096@16/0@4",
    "bvh-binned-staged:leaf=4:sweep=16",
];

#[test]
fn emulated_kernels_build_valid_trees_within_one_percent_of_the_cpu() {
    let Some(exe) = harness() else { return };
    let mut rng = Pcg32::new(0x5a4, 11);
    let soups = soups(&mut rng);
    let mut failures = Vec::new();
    for spec in SPECS {
        for (name, tris) in &soups {
            // The large soups once per registered builder is enough.
            if tris.len() > 5000 && spec.contains(':') {
                continue;
            }
            match check(exe, spec, tris) {
                Ok(line) => eprintln!("{spec}, {name}: {line}"),
                Err(e) => failures.push(format!("{spec}, {name}: {e}")),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
