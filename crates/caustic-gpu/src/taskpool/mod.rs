//! The GPU task pool of Vinkler, Bittner, Havran and Hapala ("Massively
//! Parallel Hierarchical Scene Processing with Applications in Rendering",
//! CGF 2013, §3): one launch of persistent warps that retrieve work chunks
//! of tasks from a pool in global memory, advance them phase by phase,
//! create child tasks and activate dependent ones, with no host in the loop.
//!
//! - `task_pool.cuh` (device): the runtime, included by name from any
//!   crate's kernels; its comments explain the header word, whose
//!   generation and kind bits make the paper's stale-atomic hazard harmless.
//! - [`TaskPool`] (host): sizes the launch by occupancy, resets the pool,
//!   turns the device's error word into a [`GpuError`](crate::GpuError) and
//!   reads the warps' cycle counters as [`PoolStats`].
//! - `self_test`: a recursive sum with task dependencies that checks the
//!   runtime on the device.

mod self_test;
mod task_pool;

pub use self_test::{RecursiveSum, recursive_sum};
pub use task_pool::{
    K, PAYLOAD_WORDS, PoolArgs, PoolStats, RECORD_WORDS, TaskPool, TaskPoolConfig, check_capacity,
};
