//! The task pool's runtime on the device (`taskpool`): the recursive sum
//! with dependencies gives the right total, stores exactly the tasks its
//! tree has, never activates a task before its inputs arrive, and a pool
//! too small for the tasks alive at once stops with a clear error, not a
//! hang.
//!
//! These need a CUDA GPU: run with `--include-ignored --test-threads=1` on
//! the GPU machine. Each test prints its seed; `CAUSTIC_TEST_SEED=N`
//! replays it.

#[path = "common/device.rs"]
mod device;

use caustic_gpu::GpuError;
use caustic_gpu::taskpool::{RecursiveSum, TaskPoolConfig, recursive_sum};
use device::{gpu, seeded_rng};
use std::time::Duration;

fn check_sum(n: usize, leaf: u32, config: TaskPoolConfig, values: &[u32]) -> RecursiveSum {
    let capacity = config.capacity;
    let grab = config.min_grab;
    let run = recursive_sum(gpu(), &values[..n], leaf, config)
        .unwrap_or_else(|e| panic!("n = {n}, leaf = {leaf}, grab = {grab}: {e}"));
    let expected: u64 = values[..n].iter().map(|&v| v as u64).sum();
    let leaves = RecursiveSum::expected_leaves(n as u64, leaf as u64);
    eprintln!(
        "n = {n:>8}, leaf = {leaf:>4}, grab = {grab:>2}, slots = {capacity:>6}: {:.3} ms; {}",
        run.kernel_ms, run.pool
    );
    assert_eq!(run.sum, expected, "n = {n}, leaf = {leaf}");
    assert_eq!(run.early_activations, 0, "n = {n}, leaf = {leaf}");
    assert_eq!(run.reduces, leaves, "n = {n}, leaf = {leaf}");
    assert_eq!(run.combines, leaves - 1, "n = {n}, leaf = {leaf}");
    assert_eq!(
        run.pool.tasks_stored,
        2 * leaves - 1,
        "n = {n}, leaf = {leaf}"
    );
    assert!(run.pool.peak_live <= capacity);
    assert!(run.pool.work_cycles > 0 && run.pool.pool_cycles > 0);
    run
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn recursive_sum_with_dependencies_is_exact() {
    let mut rng = seeded_rng("recursive_sum_with_dependencies_is_exact", 1);
    let values: Vec<u32> = (0..1 << 22).map(|_| rng.next_u32()).collect();
    for (n, leaf) in [
        (1, 1),
        (31, 4),
        (1000, 1),
        (4097, 32),
        (100_000, 64),
        (1 << 20, 256),
        (1 << 22, 4096),
        (3_000_001, 1000),
    ] {
        // Every COMBINE waits in a slot while its subtree runs: room for
        // the whole tree.
        let leaves = RecursiveSum::expected_leaves(n as u64, leaf as u64) as usize;
        check_sum(n, leaf, TaskPoolConfig::new(2 * leaves + 64), &values);
    }
}

/// Slots reused many times over with thousands of warps claiming: the case
/// where a header read as active is reused before a warp's atomic lands;
/// claims of one chunk (the smallest grab) make the most of them.
#[test]
#[ignore = "needs a CUDA GPU"]
fn slot_reuse_under_contention_stays_exact() {
    let mut rng = seeded_rng("slot_reuse_under_contention_stays_exact", 2);
    let values: Vec<u32> = (0..1 << 21).map(|_| rng.next_u32() >> 4).collect();
    let mut stale = 0;
    for round in 0..20 {
        let leaf = [32, 64, 100, 512][round % 4];
        let leaves = RecursiveSum::expected_leaves(values.len() as u64, leaf) as usize;
        let config = TaskPoolConfig {
            min_grab: [14, 1, 4][round % 3],
            ..TaskPoolConfig::new(2 * leaves + 64)
        };
        let run = check_sum(values.len(), leaf as u32, config, &values);
        stale += run.pool.stale_claims;
    }
    eprintln!("stale claims handled over the rounds: {stale}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_pool_too_small_stops_with_an_error() {
    let values = vec![1u32; 1 << 16];
    let config = TaskPoolConfig {
        watchdog: Duration::from_millis(200),
        ..TaskPoolConfig::new(8)
    };
    let started = std::time::Instant::now();
    match recursive_sum(gpu(), &values, 4, config) {
        Err(e @ GpuError::TaskPool { .. }) => {
            let message = e.to_string();
            eprintln!("as expected: {message}");
            assert!(message.contains("slots") || message.contains("no task finished"));
        }
        other => panic!("expected a task-pool error, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(10));
    // The device is still usable.
    check_sum(1000, 16, TaskPoolConfig::new(256), &values);
}
