//! Data-parallel primitives (Zeidan 2011, chapter 3 and appendix A): one
//! Rust file per kernel file, and a CPU twin of every operation in [`cpu`]
//! that defines its semantics and is the reference in the GPU tests.
//!
//! | module | kernels | operations |
//! | --- | --- | --- |
//! | [`reduce`] | `reduce.cu` | sum, min, max, count of non-zeros, box union |
//! | [`scan`] | `scan.cu` | exclusive / inclusive, forward / backward, segmented |
//! | [`compact`] | `compact.cu` | stable select by flag |
//! | [`split`] | `split.cu` | stable partition by flag, falses first |
//! | [`radix_sort`] | `radix_sort.cu` | stable key-value sort, u32 and u64 keys |
//! | [`segment`] | `segment.cu` | sorted bounds, gather (segment tails), chunks |
//!
//! Every operation queues its work on the buffers' stream and returns; only
//! functions that return a host value wait for the GPU.

pub mod compact;
pub mod cpu;
pub mod radix_sort;
pub mod reduce;
pub mod scan;
pub mod segment;
pub mod split;

use crate::buffer::DeviceBuffer;
use crate::context::{Arg, Gpu};
use crate::error::GpuError;

/// Elements per tile of the single-pass scans (`SCAN_TILE` in tile_scan.cuh).
pub(crate) const SCAN_TILE: usize = 4096;
/// Threads per block of the single-pass scans (`SCAN_THREADS`).
pub(crate) const SCAN_THREADS: u32 = 256;

/// The largest input of the scan-based operations: their counts are u32.
pub const MAX_SCAN_LEN: usize = u32::MAX as usize;

/// Scratch of one single-pass look-back launch: `status_words` zeroed words
/// of tile status, then the zeroed tile counter, in one allocation.
pub(crate) struct LookbackScratch {
    words: DeviceBuffer<u64>,
    status_words: usize,
}

impl LookbackScratch {
    pub(crate) fn new(
        gpu: &Gpu,
        what: &'static str,
        status_words: usize,
    ) -> Result<Self, GpuError> {
        let words = DeviceBuffer::zeroed(gpu, what, status_words + 1)?;
        Ok(LookbackScratch {
            words,
            status_words,
        })
    }

    /// Zeroes status and counter again, for another launch.
    pub(crate) fn reset(&mut self) -> Result<(), GpuError> {
        self.words.fill_zero()
    }

    pub(crate) fn status(&self) -> Arg {
        self.words.arg()
    }

    pub(crate) fn counter(&self) -> Arg {
        Arg::U64(self.words.device_ptr() + 8 * self.status_words as u64)
    }
}

/// Number of blocks that cover `len` elements, `per_block` at a time.
/// Threads per block of the grid-stride kernels (`SEGMENT_THREADS`,
/// `SEGSPLIT_THREADS`, `POINTS_THREADS` in the `.cu` files).
pub(crate) const GRID_STRIDE_THREADS: u32 = 256;
/// Grid-stride launches stop adding blocks here; each thread then loops.
const GRID_STRIDE_MAX_BLOCKS: u32 = 1 << 16;

/// Queues a grid-stride kernel (one thread per element, looping over
/// 64-bit indices) over `n` elements; nothing for `n == 0`.
pub(crate) fn launch_grid_stride(
    gpu: &crate::context::Gpu,
    kernel: crate::kernels::Kernel,
    n: usize,
    args: &[crate::context::Arg],
) -> Result<(), GpuError> {
    if n == 0 {
        return Ok(());
    }
    let blocks = blocks_for(n, GRID_STRIDE_THREADS as usize).min(GRID_STRIDE_MAX_BLOCKS);
    gpu.launch(kernel, blocks, GRID_STRIDE_THREADS, args)
}

/// Threads per block of the one-thread-per-element kernels of the
/// renderers (`WHITTED_THREADS`, `PHOTON_THREADS`, `SPPM_THREADS`,
/// `compact_gather_wave`).
pub(crate) const ELEMENT_THREADS: u32 = 256;

/// Queues a kernel with one thread per element (32-bit indices) over `n`
/// elements; nothing for `n == 0`.
pub(crate) fn launch_per_element(
    gpu: &crate::context::Gpu,
    kernel: crate::kernels::Kernel,
    n: usize,
    args: &[crate::context::Arg],
) -> Result<(), GpuError> {
    if n == 0 {
        return Ok(());
    }
    check_len(kernel.name(), n, u32::MAX as usize)?;
    gpu.launch(
        kernel,
        blocks_for(n, ELEMENT_THREADS as usize),
        ELEMENT_THREADS,
        args,
    )
}

pub(crate) fn blocks_for(len: usize, per_block: usize) -> u32 {
    u32::try_from(len.div_ceil(per_block)).expect("callers bound len so the grid fits")
}

pub(crate) fn check_len(operation: &'static str, len: usize, max: usize) -> Result<(), GpuError> {
    if len > max {
        return Err(GpuError::TooLarge {
            operation,
            len,
            max,
        });
    }
    Ok(())
}

pub(crate) fn check_same_len(
    operation: &'static str,
    what: &'static str,
    expected: usize,
    actual: usize,
) -> Result<(), GpuError> {
    if expected != actual {
        return Err(GpuError::LengthMismatch {
            operation,
            what,
            expected,
            actual,
        });
    }
    Ok(())
}

/// Runs one single-pass look-back scan kernel over `len` elements: the tile
/// scratch is allocated, zeroed and appended to `args` (status, counter).
pub(crate) fn launch_lookback(
    gpu: &Gpu,
    kernel: crate::kernels::Kernel,
    len: usize,
    args: &[Arg],
) -> Result<(), GpuError> {
    if len == 0 {
        return Ok(());
    }
    let tiles = len.div_ceil(SCAN_TILE);
    let scratch = LookbackScratch::new(gpu, "scan tile status", tiles)?;
    let mut all = args.to_vec();
    all.extend([scratch.status(), scratch.counter()]);
    gpu.launch(kernel, blocks_for(len, SCAN_TILE), SCAN_THREADS, &all)
}

#[cfg(test)]
mod tests {
    use crate::kernels::ModuleId;

    /// The value of `#define NAME VALUEu` in a module's source or headers.
    fn define(sources: &[&str], name: &str) -> usize {
        let prefix = format!("#define {name} ");
        sources
            .iter()
            .flat_map(|s| s.lines())
            .find_map(|line| line.strip_prefix(&prefix))
            .and_then(|v| v.trim().trim_end_matches('u').parse().ok())
            .unwrap_or_else(|| panic!("no numeric #define {name}"))
    }

    fn header(name: &str) -> &'static str {
        crate::kernels::HEADERS
            .iter()
            .find(|(file, _)| *file == name)
            .unwrap()
            .1
    }

    /// The tile sizes the host launches with are the kernels' own.
    #[test]
    fn host_constants_match_the_kernels() {
        let scan = [header("tile_scan.cuh")];
        assert_eq!(
            define(&scan, "SCAN_THREADS") * define(&scan, "SCAN_ITEMS"),
            super::SCAN_TILE
        );
        assert_eq!(define(&scan, "SCAN_THREADS"), super::SCAN_THREADS as usize);
        let sort = [ModuleId::RadixSort.source()];
        use super::radix_sort::RadixKey;
        let threads = define(&sort, "SORT_THREADS");
        assert_eq!(
            threads * define(&sort, "SORT_ITEMS_U32"),
            <u32 as RadixKey>::TILE
        );
        assert_eq!(
            threads * define(&sort, "SORT_ITEMS_U64"),
            <u64 as RadixKey>::TILE
        );
        assert_eq!(
            define(&sort, "SORT_THREADS"),
            super::radix_sort::SORT_THREADS as usize
        );
        assert_eq!(define(&sort, "SORT_RADIX"), super::radix_sort::RADIX);
        assert_eq!(
            define(&sort, "SORT_MAX_PASSES"),
            super::radix_sort::MAX_PASSES
        );
        let reduce = [ModuleId::Reduce.source()];
        assert_eq!(
            define(&reduce, "REDUCE_THREADS"),
            super::reduce::THREADS as usize
        );
        // Every grid-stride kernel family is launched with one block size.
        for (module, name) in [
            (ModuleId::Segment, "SEGMENT_THREADS"),
            (ModuleId::Split, "SEGSPLIT_THREADS"),
            (ModuleId::Points, "POINTS_THREADS"),
        ] {
            assert_eq!(
                define(&[module.source()], name),
                super::GRID_STRIDE_THREADS as usize,
                "{name}"
            );
        }
        // And every one-thread-per-element family with another.
        for (module, name) in [
            (ModuleId::Whitted, "WHITTED_THREADS"),
            (ModuleId::Photon, "PHOTON_THREADS"),
            (ModuleId::Sppm, "SPPM_THREADS"),
        ] {
            assert_eq!(
                define(&[module.source()], name),
                super::ELEMENT_THREADS as usize,
                "{name}"
            );
        }
    }
}
