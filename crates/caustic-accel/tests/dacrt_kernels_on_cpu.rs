//! GPU DACRT (`src/dacrt/taskpool.cu`) run on the CPU: its kernels and the
//! task-pool runtime (`caustic-gpu`'s `task_pool.cuh`) compiled unchanged
//! by the host C++ compiler over the fiber shim
//! (`tests/cpu_emulation/cuda_fibers.h`: every CUDA thread a fiber, with
//! barriers, shuffles and ballots), driven by the steps of
//! `taskpool_cuda.rs` (`dacrt_kernels.cpp`): the persistent kernel as one
//! block of four warps taking turns, so the pool's dependencies, slot reuse
//! and phase changes run as on the device without its timing. On soups
//! with degenerate, huge, thin, duplicated and non-finite triangles and
//! awkward rays, every closest hit (bit for bit, ties to the lowest id) and
//! every any-hit answer equals brute force's, for both splits and for
//! constants that subdivide deeply; the pool ends empty, without error,
//! with its RDH bins cleared.
//!
//! What this cannot see (true concurrency, the memory model, the Rust host
//! code) the GPU tests (`gpu_dacrt.rs`) check on the device. Needs a C++17
//! compiler (`CXX`, else `c++`) and an x86-64 host; without them it says so
//! and skips.

#[path = "common/soups.rs"]
mod soups;

#[path = "common/host_harness.rs"]
mod host_harness;

use rayon::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use caustic_accel::bvh::traverse_cuda::{GpuHit, GpuRay};
use caustic_accel::bvh::triangle_bvh_cuda::GpuTriangle;
use caustic_accel::dacrt::{DacrtConfig, kernel_params, kernel_table};
use caustic_accel::{Accel, BruteForce};
use caustic_geom::{Hit, Pcg32, Ray, Triangle, Vec3};
use soups::{awkward_rays, awkward_soup, far_rays, grid_soup, segments};

/// The harness, compiled once per test process; `None` without a compiler.
fn harness() -> Option<&'static Path> {
    static HARNESS: OnceLock<Option<PathBuf>> = OnceLock::new();
    host_harness::compile_fibers_once(&HARNESS, "dacrt-kernels", "dacrt_kernels.cpp")
}

/// One trace of the harness: the stats words of its last pool run, the
/// pool's error word and how many runs it took (the concurrent schedule's
/// arenas start small and grow, so deep inputs take several).
struct Run {
    words: [u64; 8],
    error: u32,
    runs: u32,
}

/// What one run of the harness gave: closest hits and occlusion, and per
/// query kind its trace.
struct Emulated {
    hits: Vec<Option<Hit>>,
    occluded: Vec<bool>,
    runs: [Run; 2],
}

fn emulate(exe: &Path, config: &DacrtConfig, tris: &[Triangle], rays: &[Ray]) -> Emulated {
    let mut input: Vec<u8> = Vec::new();
    input.extend(bytemuck::cast_slice(&kernel_params(config)));
    let table = kernel_table();
    input.extend((table.len() as u32).to_le_bytes());
    input.extend(bytemuck::cast_slice(&table));
    let gpu_tris: Vec<GpuTriangle> = tris
        .iter()
        .enumerate()
        .map(|(i, t)| GpuTriangle::new(t, i as u32))
        .collect();
    input.extend((gpu_tris.len() as u32).to_le_bytes());
    input.extend(bytemuck::cast_slice(&gpu_tris));
    let gpu_rays: Vec<GpuRay> = rays.iter().map(GpuRay::from).collect();
    input.extend((gpu_rays.len() as u32).to_le_bytes());
    input.extend(bytemuck::cast_slice(&gpu_rays));
    let out = host_harness::run(exe, "dacrt-kernels", &input);
    let n = rays.len();
    let (hits, rest) = out.split_at(n * size_of::<GpuHit>());
    let (flags, rest) = rest.split_at(n * 4);
    let hits: Vec<GpuHit> = bytemuck::pod_collect_to_vec(hits);
    let flags: Vec<u32> = bytemuck::pod_collect_to_vec(flags);
    let run = |bytes: &[u8]| {
        let words: Vec<u64> = bytemuck::pod_collect_to_vec(&bytes[..64]);
        Run {
            words: <[u64; 8]>::try_from(words).unwrap(),
            error: u32::from_le_bytes(bytes[64..68].try_into().unwrap()),
            runs: u32::from_le_bytes(bytes[68..72].try_into().unwrap()),
        }
    };
    Emulated {
        hits: hits.iter().map(GpuHit::to_hit).collect(),
        occluded: flags.iter().map(|&f| f != 0).collect(),
        runs: [run(&rest[..72]), run(&rest[72..144])],
    }
}

/// The first few rays whose answers differ from brute force's, and the
/// pool's errors (empty when all is well), and the runs of the closest-hit
/// trace (0 without a compiler).
fn problems(config: &DacrtConfig, tris: &[Triangle], rays: &[Ray]) -> (Vec<String>, u32) {
    let Some(exe) = harness() else {
        return (Vec::new(), 0);
    };
    let got = emulate(exe, config, tris, rays);
    let brute = BruteForce::new(tris);
    let mut want = vec![None; rays.len()];
    brute.intersect_batch(rays, &mut want);
    let mut out: Vec<String> = got
        .runs
        .iter()
        .zip(["closest", "any"])
        .filter(|(run, _)| run.error != 0)
        .map(|(run, kind)| format!("{kind}: pool error {}", run.error))
        .collect();
    out.extend(
        (0..rays.len())
            .filter(|&i| got.hits[i] != want[i] || got.occluded[i] != want[i].is_some())
            .take(5)
            .map(|i| {
                format!(
                    "ray {i} {:?}: emulated {:?} (any {}), brute force {:?}",
                    rays[i], got.hits[i], got.occluded[i], want[i]
                )
            }),
    );
    let [tasks, direct, pairs, depth, lost, ray_words, tri_words, _] = got.runs[0].words;
    eprintln!(
        "{} tris, {} rays, {}: {tasks} tasks ({direct} direct, {pairs} pairs), depth {depth}, {lost} lost, \
         arenas {ray_words} + {tri_words} words, {} runs",
        tris.len(),
        rays.len(),
        config.spec(),
        got.runs[0].runs
    );
    (out, got.runs[0].runs)
}

/// The paper's two splits, constants that subdivide deeply, each under
/// the concurrent schedule (the deep RDH one with near-before-far
/// dependencies down six levels), and the paper's waves for a median and
/// a deep RDH configuration.
fn configs() -> [DacrtConfig; 6] {
    [
        DacrtConfig::MEDIAN,
        DacrtConfig::RDH,
        DacrtConfig::parse("dacrt:sort=1:rays=2:tris=2").unwrap(),
        DacrtConfig::parse("dacrt-rdh:sort=2:rays=4:tris=4:near=6").unwrap(),
        DacrtConfig::parse("dacrt:sched=waves").unwrap(),
        DacrtConfig::parse("dacrt-rdh:sched=waves:sort=2:rays=4:tris=4").unwrap(),
    ]
}

#[test]
fn random_soups_equal_brute_force() {
    let mut failures = Vec::new();
    let mut most_runs = 0;
    for seed in 1..=3u64 {
        let mut rng = Pcg32::new(seed, 0xdac7);
        let tris = match seed {
            1 => awkward_soup(&mut rng, 1500),
            2 => grid_soup(&mut rng, 24),
            _ => {
                let one = Triangle::new(Vec3::ZERO, Vec3::X, Vec3::Y);
                let mut tris = vec![one; 300];
                tris.extend(awkward_soup(&mut rng, 400));
                tris
            }
        };
        let mut rays = awkward_rays(&mut rng, &tris, 1500);
        rays.extend(far_rays(&mut rng, &tris, 200));
        rays.extend(segments(&rays.clone(), 0.1));
        // Each emulation is a process of its own: run the configurations
        // side by side.
        let configs = configs();
        let answers: Vec<_> = configs
            .par_iter()
            .map(|config| (config, problems(config, &tris, &rays)))
            .collect();
        for (config, (found, runs)) in answers {
            for p in found {
                failures.push(format!("seed {seed}, {}: {p}", config.spec()));
            }
            most_runs = most_runs.max(runs);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The harness's small arenas ran out and grew somewhere (the spill,
    // drain and repeated run were exercised), unless it could not run.
    assert!(
        harness().is_none() || most_runs > 1,
        "no trace outgrew its arenas"
    );
}

#[test]
fn empty_and_degenerate_inputs_answer_as_brute_force() {
    let one = Triangle::new(Vec3::ZERO, Vec3::X, Vec3::Y);
    let nan = Triangle::new(Vec3::splat(f32::NAN), Vec3::X, Vec3::Y);
    let down = Ray::new(Vec3::new(0.2, 0.2, 1.0), -Vec3::Z);
    let mut rays = vec![down; 40];
    rays.push(Ray::new(Vec3::new(0.2, 0.2, 1.0), Vec3::ZERO));
    let mut failures = Vec::new();
    for (name, tris) in [
        ("no triangles", vec![]),
        ("only non-finite", vec![nan; 20]),
        ("duplicates", vec![one; 64]),
        ("one and a non-finite", vec![nan, one]),
    ] {
        for config in configs() {
            for p in problems(&config, &tris, &rays).0 {
                failures.push(format!("{name}, {}: {p}", config.spec()));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
