//! What every GPU test binary shares: the device, opened once, and random
//! generators seeded from `CAUSTIC_TEST_SEED` or the clock (the seed is
//! printed, so a failure can be replayed).

use std::sync::OnceLock;

use caustic_geom::Pcg32;
use caustic_gpu::{Gpu, GpuError};

/// The first CUDA device; panics, saying why, where there is none (the
/// tests are `#[ignore]`d and run only on the GPU machine).
pub fn gpu() -> &'static Gpu {
    static GPU: OnceLock<Gpu> = OnceLock::new();
    GPU.get_or_init(|| {
        let gpu = Gpu::probe().unwrap_or_else(|e| panic!("these tests need a CUDA GPU: {e}"));
        eprintln!("device: {}", gpu.info());
        gpu
    })
}

/// A generator on `stream`, seeded from CAUSTIC_TEST_SEED or the clock;
/// prints the seed under the test's name.
pub fn seeded_rng(test: &str, stream: u64) -> Pcg32 {
    let seed = std::env::var("CAUSTIC_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!("{test}: CAUSTIC_TEST_SEED={seed}");
    Pcg32::new(seed, stream)
}

/// Passes when `result` is [`GpuError::OutOfMemory`] whose message
/// contains `allocation` (printed after `context`); panics, saying what
/// came instead, otherwise.
#[allow(dead_code)] // the includers that test memory exhaustion use it
pub fn expect_out_of_memory<T: std::fmt::Debug>(
    result: Result<T, GpuError>,
    allocation: &str,
    context: &str,
) {
    match result {
        Err(e @ GpuError::OutOfMemory { .. }) => {
            eprintln!("{context}: {e}");
            assert!(e.to_string().contains(allocation), "{e}");
        }
        other => panic!("expected out of memory, got {other:?}"),
    }
}
