//! The runtime's self-test (`self_test.cu`): a recursive sum whose tasks
//! depend on each other. Every range longer than `leaf` values splits into
//! a dependent COMBINE and two halves, so the run exercises storing,
//! retrieval by many warps, the inline rule for small steps, slot reuse by
//! a parent, dependencies and their activation order, and termination; the
//! host knows the total, the tasks and the COMBINEs the tree must have.

use super::task_pool::{PoolStats, TaskPool, TaskPoolConfig};
use crate::kernels::taskpool_self_test as d;
use crate::{DeviceBuffer, Gpu, GpuError};

/// What a run of the recursive sum reports.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RecursiveSum {
    /// The device's total.
    pub sum: u64,
    /// COMBINE tasks run, SUM tasks that reduced values.
    pub combines: u64,
    pub reduces: u64,
    /// COMBINEs found activated before both inputs arrived (0 when the
    /// dependency order holds).
    pub early_activations: u64,
    /// Device milliseconds of the persistent kernel.
    pub kernel_ms: f32,
    pub pool: PoolStats,
}

impl RecursiveSum {
    /// The SUM tasks that reduce values for `n` values in tasks of at most
    /// `leaf`: the leaves of the halving tree. Every other SUM split, which
    /// stored a COMBINE and a SUM; with the root, tasks stored are
    /// `1 + 2 (leaves - 1)` and COMBINEs `leaves - 1`.
    pub fn expected_leaves(n: u64, leaf: u64) -> u64 {
        if n <= leaf {
            1
        } else {
            Self::expected_leaves(n / 2, leaf) + Self::expected_leaves(n - n / 2, leaf)
        }
    }
}

/// Sums `values` on the device by recursive halving into tasks of at most
/// `leaf` values, in a pool of `config.capacity` slots.
pub fn recursive_sum(
    gpu: &Gpu,
    values: &[u32],
    leaf: u32,
    config: TaskPoolConfig,
) -> Result<RecursiveSum, GpuError> {
    if leaf == 0 {
        return Err(GpuError::Invalid {
            what: "recursive sum",
            message: "the leaf size is at least 1".into(),
        });
    }
    crate::ops::check_len("recursive sum", values.len(), u32::MAX as usize)?;
    let input = DeviceBuffer::from_slice(gpu, "sum values", values)?;
    let mut output = DeviceBuffer::<u64>::zeroed(gpu, "sum output", 1)?;
    let mut counts = DeviceBuffer::<u32>::zeroed(gpu, "sum counts", 3)?;
    let mut pool = TaskPool::new(gpu, d::TASK_POOL_RECURSIVE_SUM, config)?;
    pool.reset()?;
    let (blocks, threads) = pool.launch_shape();
    let kernel_ms = gpu.time_ms(|| {
        let p = pool.args();
        gpu.launch(
            d::TASK_POOL_RECURSIVE_SUM,
            blocks,
            threads,
            (
                input.ptr(),
                values.len() as u64,
                leaf,
                output.ptr_mut(),
                counts.ptr_mut(),
                p.headers,
                p.records,
                p.control,
                p.counters,
                p.capacity,
                p.watchdog_ns,
            ),
        )
    })?;
    let stats = pool.finish(d::TASK_POOL_RECURSIVE_SUM.name())?;
    let counts = counts.download()?;
    Ok(RecursiveSum {
        sum: output.download()?[0],
        combines: counts[0] as u64,
        reduces: counts[1] as u64,
        early_activations: counts[2] as u64,
        kernel_ms,
        pool: stats,
    })
}
