//! The host side of `task_pool.cuh`: a pool's device memory, the launch
//! shape of its persistent warps, its reset, and what a run reports.

use crate::kernels::taskpool_task_pool as d;
use crate::ops::launch_grid_stride;
use crate::{DeviceBuffer, DevicePtrMut, Gpu, GpuError, Kernel};
use std::time::Duration;

/// Eq. 1's minimum grab, `TASK_POOL_K` (14 in the paper, §3.4).
pub const K: u32 = 14;
/// Words of one task record, `TASK_POOL_RECORD_WORDS`.
pub const RECORD_WORDS: usize = 80;
/// Words of a record's application payload, `TASK_POOL_PAYLOAD_WORDS`.
pub const PAYLOAD_WORDS: usize = 64;
const CONTROL_WORDS: usize = 9;
const COUNTER_WORDS: usize = 4;
/// The most slots a pool has (header generation and slot indices stay far
/// from their limits).
const MAX_CAPACITY: usize = 1 << 28;

// Control words (task_pool.cuh).
const LIVE: usize = 0;
const ERROR: usize = 1;
const ERROR_DETAIL: usize = 2;
const HIGH_WATER: usize = 4;
const STALE_CLAIMS: usize = 5;
const STORED: usize = 6;
const PEAK_LIVE: usize = 7;
/// Set by the reset kernel from its argument, read by the warps.
#[cfg(test)]
const MIN_GRAB: usize = 8;

/// How a pool is sized and guarded.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TaskPoolConfig {
    /// Task slots: at least the most tasks alive at once.
    pub capacity: usize,
    /// Threads per block of the persistent kernel (a multiple of 32).
    pub block_threads: u32,
    /// How long a store may find no free slot, or a warp see no progress,
    /// before the kernel stops itself with an error.
    pub watchdog: Duration,
    /// Eq. 1's floor on the chunks one claim takes (1 to [`K`]; the
    /// paper's [`K`] by default). Fewer lets more warps share a step when
    /// few chunks are in sight.
    pub min_grab: u32,
}

impl TaskPoolConfig {
    /// `capacity` slots, blocks of 128 threads, a one-second watchdog.
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            block_threads: 128,
            watchdog: Duration::from_secs(1),
            min_grab: K,
        }
    }
}

/// [`GpuError::TooLarge`] / [`GpuError::Invalid`] for a capacity the pool
/// cannot have.
pub fn check_capacity(capacity: usize) -> Result<(), GpuError> {
    if capacity == 0 {
        return Err(GpuError::Invalid {
            what: "task pool capacity",
            message: "a pool needs at least one slot".into(),
        });
    }
    crate::ops::check_len("task pool slots", capacity, MAX_CAPACITY)
}

/// A task pool on the device, sized for one persistent kernel.
pub struct TaskPool {
    gpu: Gpu,
    config: TaskPoolConfig,
    blocks: u32,
    headers: DeviceBuffer<u64>,
    records: DeviceBuffer<u32>,
    control: DeviceBuffer<u32>,
    counters: DeviceBuffer<u64>,
}

/// The pool's part of a persistent kernel's parameter list, in the order
/// `task_pool_attach` takes it.
pub struct PoolArgs<'a> {
    pub headers: DevicePtrMut<'a, u64>,
    pub records: DevicePtrMut<'a, u32>,
    pub control: DevicePtrMut<'a, u32>,
    pub counters: DevicePtrMut<'a, u64>,
    pub capacity: u32,
    pub watchdog_ns: u64,
}

impl TaskPool {
    /// A pool of `config.capacity` slots for `kernel`, launched with as many
    /// blocks as are resident on the device at once (occupancy query).
    pub fn new<S>(gpu: &Gpu, kernel: Kernel<S>, config: TaskPoolConfig) -> Result<Self, GpuError> {
        check_capacity(config.capacity)?;
        if !(1..=K).contains(&config.min_grab) {
            return Err(GpuError::Invalid {
                what: "task pool minimum grab",
                message: format!("{} chunks: it is 1 to {K}", config.min_grab),
            });
        }
        if config.block_threads == 0
            || !config.block_threads.is_multiple_of(32)
            || config.block_threads > 1024
        {
            return Err(GpuError::Invalid {
                what: "task pool block",
                message: format!(
                    "{} threads: a block is 32 to 1024 threads, whole warps",
                    config.block_threads
                ),
            });
        }
        let per_sm = gpu.resident_blocks(kernel, config.block_threads)?;
        let blocks = per_sm * gpu.info().multiprocessors.max(1);
        let warps = blocks as usize * (config.block_threads as usize / 32);
        Ok(Self {
            gpu: gpu.clone(),
            config,
            blocks,
            headers: DeviceBuffer::uninit(gpu, "task pool headers", config.capacity)?,
            records: DeviceBuffer::uninit(
                gpu,
                "task pool records",
                config.capacity * RECORD_WORDS,
            )?,
            control: DeviceBuffer::uninit(gpu, "task pool control", CONTROL_WORDS)?,
            counters: DeviceBuffer::uninit(gpu, "task pool counters", warps * COUNTER_WORDS)?,
        })
    }

    /// Blocks and threads per block of the persistent launch.
    pub fn launch_shape(&self) -> (u32, u32) {
        (self.blocks, self.config.block_threads)
    }

    /// Persistent warps of a launch.
    pub fn warps(&self) -> usize {
        self.blocks as usize * (self.config.block_threads as usize / 32)
    }

    /// Slots.
    pub fn capacity(&self) -> usize {
        self.config.capacity
    }

    /// Device bytes the pool holds.
    pub fn bytes(&self) -> usize {
        self.headers.bytes() + self.records.bytes() + self.control.bytes() + self.counters.bytes()
    }

    /// Empties the pool before a run (queued on the stream).
    pub fn reset(&mut self) -> Result<(), GpuError> {
        let counter_words = self.counters.len();
        let work = self.config.capacity.max(counter_words).max(CONTROL_WORDS);
        launch_grid_stride(
            &self.gpu,
            d::TASK_POOL_RESET,
            work,
            (
                self.headers.ptr_mut(),
                self.config.capacity as u32,
                self.control.ptr_mut(),
                self.counters.ptr_mut(),
                counter_words as u32,
                self.config.min_grab,
            ),
        )
    }

    /// The pool's kernel parameters.
    pub fn args(&mut self) -> PoolArgs<'_> {
        PoolArgs {
            headers: self.headers.ptr_mut(),
            records: self.records.ptr_mut(),
            control: self.control.ptr_mut(),
            counters: self.counters.ptr_mut(),
            capacity: self.config.capacity as u32,
            watchdog_ns: self.config.watchdog.as_nanos().min(u64::MAX as u128) as u64,
        }
    }

    /// After the run of `kernel` (this waits for it): the error it stopped
    /// with, as a [`GpuError::TaskPool`], or what it did.
    pub fn finish(&self, kernel: &'static str) -> Result<PoolStats, GpuError> {
        let control = self.control.download()?;
        let fail = |message: String| Err(GpuError::TaskPool { kernel, message });
        let detail = control[ERROR_DETAIL];
        match control[ERROR] {
            0 => {}
            1 => {
                return fail(format!(
                    "the pool's {} slots were all taken for longer than the watchdog ({:?}); \
                     size it for the most tasks alive at once",
                    self.config.capacity, self.config.watchdog
                ));
            }
            2 => {
                return fail(format!(
                    "no task finished for longer than the watchdog ({:?}) after {detail} had \
                     (a dependency that is never resolved, or a step that never ends)",
                    self.config.watchdog
                ));
            }
            3 => {
                return fail(format!(
                    "slot {detail}: a claimed header's generation differs from its record's"
                ));
            }
            4 => return fail(format!("the application reported a failure ({detail})")),
            code => return fail(format!("unknown error code {code} ({detail})")),
        }
        if control[LIVE] != 0 {
            return fail(format!("ended with {} tasks still live", control[LIVE]));
        }
        let counters = self.counters.download()?;
        let mut stats = PoolStats {
            warps: self.warps(),
            tasks_stored: control[STORED] as u64,
            peak_live: control[PEAK_LIVE] as usize,
            slots_used: control[HIGH_WATER] as usize,
            stale_claims: control[STALE_CLAIMS] as u64,
            ..PoolStats::default()
        };
        for warp in counters.chunks_exact(COUNTER_WORDS) {
            stats.work_cycles += warp[0];
            stats.pool_cycles += warp[1];
            stats.idle_cycles += warp[2];
            stats.chunks += warp[3];
        }
        Ok(stats)
    }
}

/// What one run of a pool did: the analogue of the paper's Table 2, where
/// the time a warp spends managing the pool (retrieving, finishing and
/// storing tasks) and waiting for work stands against the time it spends
/// on the application's chunks.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PoolStats {
    /// Persistent warps launched.
    pub warps: usize,
    /// Tasks stored (the seeds included).
    pub tasks_stored: u64,
    /// Most tasks alive at once, and the slots ever used.
    pub peak_live: usize,
    pub slots_used: usize,
    /// Chunks processed (published and inline).
    pub chunks: u64,
    /// Claims whose header had been reused since the warp read it: real
    /// chunks of the newer task, processed as such (`task_pool.cuh`).
    pub stale_claims: u64,
    /// clock64 cycles summed over the warps: on chunks and in the
    /// application's step changes; in the pool; finding nothing to do.
    pub work_cycles: u64,
    pub pool_cycles: u64,
    pub idle_cycles: u64,
}

impl PoolStats {
    fn total_cycles(&self) -> f64 {
        (self.work_cycles + self.pool_cycles + self.idle_cycles).max(1) as f64
    }

    /// Share of the warps' time on the application's work.
    pub fn work_share(&self) -> f64 {
        self.work_cycles as f64 / self.total_cycles()
    }

    /// Share of the warps' time managing the pool.
    pub fn pool_share(&self) -> f64 {
        self.pool_cycles as f64 / self.total_cycles()
    }

    /// Share of the warps' time without work.
    pub fn idle_share(&self) -> f64 {
        self.idle_cycles as f64 / self.total_cycles()
    }

    /// Pool cycles per work cycle: the overhead of scheduling on the device.
    pub fn overhead(&self) -> f64 {
        self.pool_cycles as f64 / self.work_cycles.max(1) as f64
    }
}

impl std::fmt::Display for PoolStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} warps, {} tasks (peak {} live), {} chunks; work {:.1} %, pool {:.1} %, idle {:.1} %; {} stale claims",
            self.warps,
            self.tasks_stored,
            self.peak_live,
            self.chunks,
            100.0 * self.work_share(),
            100.0 * self.pool_share(),
            100.0 * self.idle_share(),
            self.stale_claims
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The constants above are the header's.
    #[test]
    fn constants_match_the_device_header() {
        let header = include_str!("task_pool.cuh");
        let define = |name: &str| -> u64 {
            let line = header
                .lines()
                .find(|l| l.starts_with(&format!("#define {name} ")))
                .unwrap_or_else(|| panic!("{name} not defined"));
            let value = line.split_whitespace().nth(2).unwrap();
            value.trim_end_matches('u').parse().unwrap()
        };
        assert_eq!(define("TASK_POOL_K"), K as u64);
        assert_eq!(define("TASK_POOL_RECORD_WORDS"), RECORD_WORDS as u64);
        assert_eq!(define("TASK_POOL_PAYLOAD_WORDS"), PAYLOAD_WORDS as u64);
        assert_eq!(define("TASK_POOL_CONTROL_WORDS"), CONTROL_WORDS as u64);
        assert_eq!(define("TASK_POOL_COUNTER_WORDS"), COUNTER_WORDS as u64);
        for (name, index) in [
            ("TASK_POOL_LIVE", LIVE),
            ("TASK_POOL_ERROR", ERROR),
            ("TASK_POOL_ERROR_DETAIL", ERROR_DETAIL),
            ("TASK_POOL_HIGH_WATER", HIGH_WATER),
            ("TASK_POOL_STALE_CLAIMS", STALE_CLAIMS),
            ("TASK_POOL_STORED", STORED),
            ("TASK_POOL_PEAK_LIVE", PEAK_LIVE),
            ("TASK_POOL_MIN_GRAB", MIN_GRAB),
        ] {
            assert_eq!(define(name), index as u64, "{name}");
        }
    }

    #[test]
    fn shares_add_up() {
        let stats = PoolStats {
            work_cycles: 60,
            pool_cycles: 30,
            idle_cycles: 10,
            ..PoolStats::default()
        };
        assert!((stats.work_share() - 0.6).abs() < 1e-12);
        assert!((stats.pool_share() - 0.3).abs() < 1e-12);
        assert!((stats.overhead() - 0.5).abs() < 1e-12);
        assert!(check_capacity(0).is_err());
        assert!(check_capacity(1 << 29).is_err());
    }
}
