//! Benchmarks of the CUDA backend, shared by `caustic bench gpu` and the
//! GPU machine's scripts, so every number in `docs/BENCHMARKS.md` comes from
//! one implementation of the timing rules:
//!
//! - every result is checked against the CPU once before it is timed (a
//!   fast wrong kernel must not produce a number);
//! - compilation and first-launch costs stay out: the modules are loaded
//!   first and each timed step runs `warm_up` times untimed;
//! - each repetition is timed with two device events around the step alone,
//!   and the median (and best) of the repetitions is reported.
//!
//! [`primitives`] measures the memory ceiling (a device-to-device copy) and
//! the scan and radix sorts against it; `caustic_accel::bvh::trace_bench_cuda`
//! measures the BVH traversal with the same rules.

use std::cell::RefCell;

use caustic_geom::Pcg32;

use crate::buffer::DeviceBuffer;
use crate::context::Gpu;
use crate::error::GpuError;
use crate::kernels::{ops_radix_sort, ops_scan};
use crate::ops::cpu;
use crate::ops::radix_sort::{self, RadixKey};
use crate::ops::scan::{self, Direction, ScanKind};

/// How often each step runs: `warm_up` untimed runs, then `repeats` timed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repeats {
    pub warm_up: usize,
    pub repeats: usize,
}

impl Default for Repeats {
    /// METHOD.md's rule of thumb: a few warm-ups, a median of twenty.
    fn default() -> Self {
        Self {
            warm_up: 3,
            repeats: 20,
        }
    }
}

/// Median and best of the timed repetitions of one step, in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timing {
    pub median_ms: f64,
    pub best_ms: f64,
    pub repeats: usize,
}

impl Timing {
    /// The median, best and count of `runs` (milliseconds).
    pub fn from_runs(mut runs: Vec<f64>) -> Self {
        runs.sort_by(f64::total_cmp);
        Self {
            median_ms: runs[runs.len() / 2],
            best_ms: runs[0],
            repeats: runs.len(),
        }
    }

    /// Items per second, in millions, at the median and at the best time.
    pub fn millions_per_s(&self, items: usize) -> (f64, f64) {
        let rate = |ms: f64| items as f64 / ms / 1e3;
        (rate(self.median_ms), rate(self.best_ms))
    }
}

/// Times `step` with device events: `warm_up` untimed runs, then `repeats`
/// timed ones; `prepare` runs before each, outside the timed region (to
/// restore an input that the step overwrites, say).
pub fn time_device(
    gpu: &Gpu,
    repeats: Repeats,
    mut prepare: impl FnMut() -> Result<(), GpuError>,
    mut step: impl FnMut() -> Result<(), GpuError>,
) -> Result<Timing, GpuError> {
    if repeats.repeats == 0 {
        return Err(GpuError::Invalid {
            what: "benchmark repeats",
            message: "at least one timed repetition is needed".into(),
        });
    }
    let mut runs = Vec::with_capacity(repeats.repeats);
    for i in 0..repeats.warm_up + repeats.repeats {
        prepare()?;
        let ms = f64::from(gpu.time_ms(&mut step)?);
        if i >= repeats.warm_up {
            runs.push(ms);
        }
    }
    Ok(Timing::from_runs(runs))
}

/// The primitives [`primitives`] measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Primitive {
    /// Device-to-device copy of `n` u32: the memory ceiling.
    Copy,
    /// Exclusive scan of `n` u32.
    ScanU32,
    /// Stable radix sort of `n` u32 keys with u32 values.
    SortPairsU32,
    /// Radix sort of `n` u32 keys alone.
    SortKeysU32,
    /// Stable radix sort of `n` u64 keys with u32 values.
    SortPairsU64,
    /// Radix sort of `n` u64 keys alone.
    SortKeysU64,
}

impl Primitive {
    pub const ALL: [Primitive; 6] = [
        Primitive::Copy,
        Primitive::ScanU32,
        Primitive::SortPairsU32,
        Primitive::SortKeysU32,
        Primitive::SortPairsU64,
        Primitive::SortKeysU64,
    ];

    /// A short name for tables and JSON keys.
    pub fn key(self) -> &'static str {
        match self {
            Primitive::Copy => "copy_u32",
            Primitive::ScanU32 => "scan_exclusive_u32",
            Primitive::SortPairsU32 => "sort_pairs_u32",
            Primitive::SortKeysU32 => "sort_keys_u32",
            Primitive::SortPairsU64 => "sort_pairs_u64",
            Primitive::SortKeysU64 => "sort_keys_u64",
        }
    }

    /// What the row measures, in words.
    pub fn description(self) -> &'static str {
        match self {
            Primitive::Copy => "device-to-device copy (u32)",
            Primitive::ScanU32 => "exclusive scan u32",
            Primitive::SortPairsU32 => "radix sort u32 keys + u32 values",
            Primitive::SortKeysU32 => "radix sort u32 keys only",
            Primitive::SortPairsU64 => "radix sort u64 keys + u32 values",
            Primitive::SortKeysU64 => "radix sort u64 keys only",
        }
    }

    /// Copy and scan are reported as bandwidth (bytes read plus bytes
    /// written, one pass: the floor a perfect kernel reaches); sorts as keys
    /// per second, the unit CUB and the literature use.
    pub fn is_bandwidth(self) -> bool {
        matches!(self, Primitive::Copy | Primitive::ScanU32)
    }
}

/// One primitive's measurement.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PrimitiveResult {
    pub primitive: Primitive,
    pub n: usize,
    pub timing: Timing,
}

impl PrimitiveResult {
    /// GB/s (read + written) at the median, for copy and scan.
    pub fn gb_per_s(&self) -> Option<f64> {
        let bytes = 2 * self.n * std::mem::size_of::<u32>();
        self.primitive
            .is_bandwidth()
            .then(|| bytes as f64 / self.timing.median_ms / 1e6)
    }

    /// Gkeys/s at the median, for the sorts.
    pub fn gkeys_per_s(&self) -> Option<f64> {
        (!self.primitive.is_bandwidth()).then(|| self.n as f64 / self.timing.median_ms / 1e6)
    }

    /// The throughput with its unit.
    pub fn throughput(&self) -> String {
        match (self.gb_per_s(), self.gkeys_per_s()) {
            (Some(gb), _) => format!("{gb:.1} GB/s"),
            (_, Some(gk)) => format!("{gk:.2} Gkeys/s"),
            _ => String::new(),
        }
    }
}

/// Measures every [`Primitive`] on `n` random keys (a fixed seed, so runs
/// compare), each checked against its CPU twin first.
pub fn primitives(gpu: &Gpu, n: usize, repeats: Repeats) -> Result<Vec<PrimitiveResult>, GpuError> {
    for module in [&ops_scan::MODULE, &ops_radix_sort::MODULE] {
        gpu.load(module)?; // compile outside the timings
    }
    let mut rng = Pcg32::new(0x0be7c4, 1);
    let keys: Vec<u32> = (0..n).map(|_| rng.next_u32()).collect();
    let keys64: Vec<u64> = keys
        .iter()
        .map(|&k| (u64::from(rng.next_u32()) << 32) | u64::from(k))
        .collect();
    let mut out = Vec::with_capacity(Primitive::ALL.len());
    for primitive in Primitive::ALL {
        let timing = match primitive {
            Primitive::Copy => time_copy(gpu, &keys, repeats)?,
            Primitive::ScanU32 => time_scan(gpu, &keys, repeats)?,
            Primitive::SortPairsU32 => time_sort_pairs(gpu, &keys, repeats)?,
            Primitive::SortKeysU32 => time_sort_keys(gpu, &keys, repeats)?,
            Primitive::SortPairsU64 => time_sort_pairs(gpu, &keys64, repeats)?,
            Primitive::SortKeysU64 => time_sort_keys(gpu, &keys64, repeats)?,
        };
        out.push(PrimitiveResult {
            primitive,
            n,
            timing,
        });
    }
    Ok(out)
}

/// The error a benchmark returns when a result differs from its CPU twin.
pub fn mismatch(what: &'static str, message: impl Into<String>) -> GpuError {
    GpuError::Mismatch {
        what,
        message: message.into(),
    }
}

fn time_copy(gpu: &Gpu, data: &[u32], repeats: Repeats) -> Result<Timing, GpuError> {
    let source = DeviceBuffer::from_slice(gpu, "copy source", data)?;
    let mut target = DeviceBuffer::<u32>::uninit(gpu, "copy target", data.len())?;
    target.copy_from(&source)?;
    if target.download()? != data {
        return Err(mismatch("device copy", "the copy differs from its source"));
    }
    time_device(gpu, repeats, || Ok(()), || target.copy_from(&source))
}

fn time_scan(gpu: &Gpu, data: &[u32], repeats: Repeats) -> Result<Timing, GpuError> {
    let input = DeviceBuffer::from_slice(gpu, "scan input", data)?;
    let mut output = DeviceBuffer::<u32>::uninit(gpu, "scan output", data.len())?;
    output.poison()?;
    scan::exclusive_u32(&input, &mut output)?;
    let (expected, _) = cpu::scan_u32(data, ScanKind::Exclusive, Direction::Forward);
    if output.download()? != expected {
        return Err(mismatch("exclusive scan", "differs from the CPU scan"));
    }
    time_device(
        gpu,
        repeats,
        || Ok(()),
        || scan::exclusive_u32(&input, &mut output),
    )
}

/// Each repetition sorts a fresh copy of the unsorted input (restored
/// outside the timed region), so every pass sees random keys.
fn time_sort_pairs<K: RadixKey + Ord + std::fmt::Debug>(
    gpu: &Gpu,
    keys: &[K],
    repeats: Repeats,
) -> Result<Timing, GpuError> {
    let n = keys.len();
    let order: Vec<u32> = (0..n as u32).collect();
    let pristine_keys = DeviceBuffer::from_slice(gpu, "sort input keys", keys)?;
    let pristine_values = DeviceBuffer::from_slice(gpu, "sort input values", &order)?;
    let mut work_keys = DeviceBuffer::<K>::uninit(gpu, "sort keys", n)?;
    let mut work_values = DeviceBuffer::<u32>::uninit(gpu, "sort values", n)?;
    work_keys.copy_from(&pristine_keys)?;
    work_values.copy_from(&pristine_values)?;
    radix_sort::sort_pairs(&mut work_keys, &mut work_values)?;
    cpu::verify_stable_sort(keys, &work_keys.download()?, &work_values.download()?)
        .map_err(|why| mismatch("radix sort of pairs", why))?;
    let work = RefCell::new((work_keys, work_values));
    time_device(
        gpu,
        repeats,
        || {
            let (k, v) = &mut *work.borrow_mut();
            k.copy_from(&pristine_keys)?;
            v.copy_from(&pristine_values)
        },
        || {
            let (k, v) = &mut *work.borrow_mut();
            radix_sort::sort_pairs(k, v)
        },
    )
}

fn time_sort_keys<K: RadixKey + Ord>(
    gpu: &Gpu,
    keys: &[K],
    repeats: Repeats,
) -> Result<Timing, GpuError> {
    let pristine = DeviceBuffer::from_slice(gpu, "sort input keys", keys)?;
    let mut work = DeviceBuffer::<K>::uninit(gpu, "sort keys", keys.len())?;
    work.copy_from(&pristine)?;
    radix_sort::sort_keys(&mut work)?;
    let mut expected = keys.to_vec();
    expected.sort_unstable();
    if work.download()? != expected {
        return Err(mismatch("radix sort of keys", "differs from the CPU sort"));
    }
    let work = RefCell::new(work);
    time_device(
        gpu,
        repeats,
        || work.borrow_mut().copy_from(&pristine),
        || radix_sort::sort_keys(&mut work.borrow_mut()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timing_takes_the_median_and_the_best() {
        let t = Timing::from_runs(vec![3.0, 1.0, 2.0, 9.0, 2.5]);
        assert_eq!(t.median_ms, 2.5);
        assert_eq!(t.best_ms, 1.0);
        assert_eq!(t.repeats, 5);
        let (median, best) = t.millions_per_s(5_000);
        assert!((median - 2.0).abs() < 1e-12 && (best - 5.0).abs() < 1e-12);
    }

    #[test]
    fn throughput_units_follow_the_primitive() {
        let timing = Timing::from_runs(vec![1.0]);
        let copy = PrimitiveResult {
            primitive: Primitive::Copy,
            n: 1 << 20,
            timing,
        };
        assert_eq!(copy.gkeys_per_s(), None);
        assert!((copy.gb_per_s().unwrap() - 8.388608).abs() < 1e-9);
        let sort = PrimitiveResult {
            primitive: Primitive::SortKeysU32,
            ..copy
        };
        assert_eq!(sort.gb_per_s(), None);
        assert!(sort.throughput().ends_with("Gkeys/s"));
    }
}
