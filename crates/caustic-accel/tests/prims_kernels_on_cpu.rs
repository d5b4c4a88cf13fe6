//! caustic-gpu's forward scans and u32 radix sorts run on the CPU: their
//! kernels (`caustic-gpu/src/ops/scan.cu`, `radix_sort.cu`) compiled
//! unchanged by the host C++ compiler over the fiber shim
//! (`tests/cpu_emulation/cuda_fibers.h`) and driven by the launch sequence
//! of `scan.rs` and `radix_sort.rs` (`prims_kernels.cpp`), on lengths that
//! end inside a vector, a warp's run and a tile, and on grids smaller and
//! larger than the tile count; every result equals its CPU twin
//! (`caustic_gpu::ops::cpu`).
//!
//! The blocks run one after another here, so the look-backs always find
//! their predecessors finished; the GPU tests (`caustic-gpu/tests/gpu_ops.rs`)
//! check the real concurrency. Needs a C++17 compiler (`CXX`, else `c++`)
//! and an x86-64 host; without them it says so and skips.

#[path = "common/host_harness.rs"]
mod host_harness;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use caustic_geom::Pcg32;
use caustic_gpu::ops::cpu;
use caustic_gpu::ops::scan::{Direction, ScanKind};

fn harness() -> Option<&'static Path> {
    static HARNESS: OnceLock<Option<PathBuf>> = OnceLock::new();
    host_harness::compile_fibers_once(&HARNESS, "prims-kernels", "prims_kernels.cpp")
}

fn words(values: &[u32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn unwords(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// Runs operation `op` on `keys` (and `values`) with `grid` scan blocks.
fn emulate(exe: &Path, op: u32, grid: u32, keys: &[u32], values: &[u32]) -> Vec<u32> {
    let mut input = words(&[op, grid, keys.len() as u32]);
    input.extend(words(keys));
    input.extend(words(values));
    unwords(&host_harness::run(exe, "prims-kernels", &input))
}

fn random(n: usize, seed: u64, mask: u32) -> Vec<u32> {
    let mut rng = Pcg32::new(seed, 7);
    (0..n).map(|_| rng.next_u32() & mask).collect()
}

/// Lengths around the scan's vectors (4), warp runs (1024) and tiles
/// (4096), and enough tiles that a block holds one while it reduces the next.
const SCAN_LENGTHS: [usize; 10] = [1, 3, 4, 1023, 1029, 4095, 4096, 4101, 8197, 20_483];

#[test]
fn forward_scans_match_cpu() {
    let Some(exe) = harness() else { return };
    for (i, &n) in SCAN_LENGTHS.iter().enumerate() {
        let input = random(n, i as u64, u32::MAX);
        for (op, kind) in [(0, ScanKind::Exclusive), (1, ScanKind::Inclusive)] {
            let (expected, total) = cpu::scan_u32(&input, kind, Direction::Forward);
            // One tile per block, and a persistent grid of two blocks (the
            // second finds the tiles taken when the first has run).
            for grid in [0, 2] {
                let out = emulate(exe, op, grid, &input, &[]);
                assert_eq!(out.len(), n + 1);
                assert!(
                    out[..n] == expected[..],
                    "{kind:?} scan of {n}, grid {grid}"
                );
                assert_eq!(out[n], total, "{kind:?} total of {n}, grid {grid}");
            }
        }
    }
}

#[test]
fn u32_sorts_match_cpu() {
    let Some(exe) = harness() else { return };
    // Around the keys-only tile (7680) and the pair tile (4096); few
    // distinct keys make long runs of one digit (stability).
    for (i, &(n, mask)) in [
        (2, u32::MAX),
        (383, u32::MAX),
        (4097, 0xff00_00ff),
        (7680, u32::MAX),
        (15_361, 0x0303_0303),
    ]
    .iter()
    .enumerate()
    {
        let keys = random(n, 100 + i as u64, mask);
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        assert!(
            emulate(exe, 2, 0, &keys, &[]) == sorted,
            "keys only, n = {n}"
        );
        let values: Vec<u32> = (0..n as u32).collect();
        let out = emulate(exe, 3, 0, &keys, &values);
        let (expected_keys, expected_values) = cpu::sort_pairs(&keys, &values);
        assert!(out[..n] == expected_keys[..], "pair keys, n = {n}");
        assert!(out[n..] == expected_values[..], "pair values, n = {n}");
    }
}
