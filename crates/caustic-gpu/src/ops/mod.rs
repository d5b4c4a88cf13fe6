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
use crate::context::Gpu;
use crate::error::GpuError;
use crate::kernel::{DevicePtrMut, Kernel, Signature};

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

    /// The tile status words and the tile counter, as the kernels take them.
    pub(crate) fn pointers(&mut self) -> (DevicePtrMut<'_, u64>, DevicePtrMut<'_, u32>) {
        let (status, counter) = self.words.ptr_mut().split_at(self.status_words);
        (status, counter.cast())
    }
}

/// Threads per block of the grid-stride kernels (`SEGMENT_THREADS`,
/// `SEGSPLIT_THREADS`, `POINTS_THREADS` in the `.cu` files).
pub const GRID_STRIDE_THREADS: u32 = 256;
/// Grid-stride launches stop adding blocks here; each thread then loops.
const GRID_STRIDE_MAX_BLOCKS: u32 = 1 << 16;

/// Queues a grid-stride kernel (one thread per element, looping over
/// 64-bit indices) over `n` elements; nothing for `n == 0`.
pub fn launch_grid_stride<S: Signature>(
    gpu: &Gpu,
    kernel: Kernel<S>,
    n: usize,
    args: S::Args<'_>,
) -> Result<(), GpuError> {
    if n == 0 {
        return Ok(());
    }
    gpu.launch(kernel, grid_stride_blocks(n), GRID_STRIDE_THREADS, args)
}

/// The blocks [`launch_grid_stride`] launches over `n` elements: what a
/// kernel that writes one result per block needs room for.
pub fn grid_stride_blocks(n: usize) -> u32 {
    blocks_for(n, GRID_STRIDE_THREADS as usize).min(GRID_STRIDE_MAX_BLOCKS)
}

/// Threads per block of the one-thread-per-element kernels of the
/// renderers (`WHITTED_THREADS`, `PHOTON_THREADS`, `SPPM_THREADS`,
/// `compact_gather_wave`).
pub const ELEMENT_THREADS: u32 = 256;

/// Queues a kernel with one thread per element (32-bit indices) over `n`
/// elements; nothing for `n == 0`.
pub fn launch_per_element<S: Signature>(
    gpu: &Gpu,
    kernel: Kernel<S>,
    n: usize,
    args: S::Args<'_>,
) -> Result<(), GpuError> {
    launch_per_element_in(gpu, kernel, n, ELEMENT_THREADS, args)
}

/// [`launch_per_element`] in blocks of `threads` threads (a kernel whose
/// blocks are sized for their shared memory or their tiles).
pub fn launch_per_element_in<S: Signature>(
    gpu: &Gpu,
    kernel: Kernel<S>,
    n: usize,
    threads: u32,
    args: S::Args<'_>,
) -> Result<(), GpuError> {
    if n == 0 {
        return Ok(());
    }
    check_len(kernel.name(), n, u32::MAX as usize)?;
    gpu.launch(kernel, blocks_for(n, threads as usize), threads, args)
}

/// Number of blocks that cover `len` elements, `per_block` at a time.
pub fn blocks_for(len: usize, per_block: usize) -> u32 {
    u32::try_from(len.div_ceil(per_block)).expect("callers bound len so the grid fits")
}

/// [`GpuError::TooLarge`] when `len` exceeds `max`.
pub fn check_len(operation: &'static str, len: usize, max: usize) -> Result<(), GpuError> {
    if len > max {
        return Err(GpuError::TooLarge {
            operation,
            len,
            max,
        });
    }
    Ok(())
}

/// [`GpuError::LengthMismatch`] when `actual` is not `expected`.
pub fn check_same_len(
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

/// Blocks of a single-pass look-back scan over `len` elements.
pub(crate) fn lookback_blocks(len: usize) -> u32 {
    blocks_for(len, SCAN_TILE)
}

/// Fresh zeroed tile scratch for one look-back launch over `len` elements.
pub(crate) fn lookback_scratch(gpu: &Gpu, len: usize) -> Result<LookbackScratch, GpuError> {
    LookbackScratch::new(gpu, "scan tile status", len.div_ceil(SCAN_TILE))
}

#[cfg(test)]
mod tests {
    use crate::kernels::{ops_radix_sort, ops_reduce, ops_scan, ops_segment, ops_split};

    /// The tile sizes the host launches with are the kernels' own.
    #[test]
    fn host_constants_match_the_kernels() {
        let scan = &ops_scan::MODULE;
        assert_eq!(
            scan.define("SCAN_THREADS") * scan.define("SCAN_ITEMS"),
            super::SCAN_TILE
        );
        assert_eq!(scan.define("SCAN_THREADS"), super::SCAN_THREADS as usize);
        assert_eq!(
            scan.define("SCAN_PIPE_THREADS") * scan.define("SCAN_PIPE_ITEMS"),
            super::scan::SCAN_PIPE_TILE
        );
        assert_eq!(
            scan.define("SCAN_PIPE_THREADS"),
            super::scan::SCAN_PIPE_THREADS as usize
        );
        let sort = &ops_radix_sort::MODULE;
        use super::radix_sort::RadixKey;
        let threads = sort.define("SORT_THREADS");
        assert_eq!(
            threads * sort.define("SORT_ITEMS_U32"),
            <u32 as RadixKey>::TILE
        );
        assert_eq!(
            threads * sort.define("SORT_ITEMS_U64"),
            <u64 as RadixKey>::TILE
        );
        assert_eq!(threads, super::radix_sort::SORT_THREADS as usize);
        let keys_threads = sort.define("SORT_KEYS_THREADS_U32");
        assert_eq!(
            keys_threads * sort.define("SORT_KEYS_ITEMS_U32"),
            <u32 as RadixKey>::KEYS_TILE
        );
        assert_eq!(keys_threads, <u32 as RadixKey>::KEYS_THREADS as usize);
        assert_eq!(<u64 as RadixKey>::KEYS_TILE, <u64 as RadixKey>::TILE);
        assert_eq!(sort.define("SORT_RADIX"), super::radix_sort::RADIX);
        assert_eq!(
            sort.define("SORT_MAX_PASSES"),
            super::radix_sort::MAX_PASSES
        );
        assert_eq!(
            ops_reduce::MODULE.define("REDUCE_THREADS"),
            super::reduce::THREADS as usize
        );
        // Every grid-stride kernel family is launched with one block size.
        for (module, name) in [
            (&ops_segment::MODULE, "SEGMENT_THREADS"),
            (&ops_split::MODULE, "SEGSPLIT_THREADS"),
        ] {
            assert_eq!(
                module.define(name),
                super::GRID_STRIDE_THREADS as usize,
                "{name}"
            );
        }
    }
}
