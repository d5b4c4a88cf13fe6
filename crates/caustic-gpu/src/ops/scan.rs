//! Prefix sums of u32 (`kernels/scan.cu`): exclusive or inclusive, forward
//! or backward, plain or segmented by head flags, each one pass over the data
//! with a decoupled look-back (Merrill & Garland 2016). Sums wrap modulo
//! 2^32. Semantics and the thesis's test vectors: [`super::cpu`].

use super::{
    LookbackScratch, MAX_SCAN_LEN, SCAN_THREADS, blocks_for, check_len, check_same_len,
    lookback_blocks, lookback_scratch,
};
use crate::buffer::DeviceBuffer;
use crate::error::GpuError;
use crate::kernel::DevicePtrMut;
use crate::kernels::ops_scan as k;

/// Threads per block of the forward scans (`SCAN_PIPE_THREADS` in scan.cu).
pub(crate) const SCAN_PIPE_THREADS: u32 = 128;
/// Elements per tile of the forward scans (`SCAN_PIPE_THREADS * SCAN_PIPE_ITEMS`).
pub(crate) const SCAN_PIPE_TILE: usize = 128 * 32;

/// Whether element i of the result includes input i.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanKind {
    /// `out[i] = in[0] + … + in[i-1]`, `out[0] = 0`.
    Exclusive,
    /// `out[i] = in[0] + … + in[i]`.
    Inclusive,
}

/// Which end the sums start from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Forward,
    /// Sums run from the last element: `out[i]` sums `in[i+1..]` (exclusive).
    Backward,
}

/// Scans `input` into `output` (same length). When `total` is given, its
/// single element receives the sum of the whole input (the thesis's ScanTail).
pub fn scan_u32(
    input: &DeviceBuffer<u32>,
    output: &mut DeviceBuffer<u32>,
    kind: ScanKind,
    direction: Direction,
    total: Option<&mut DeviceBuffer<u32>>,
) -> Result<(), GpuError> {
    let kernel = match (kind, direction) {
        (ScanKind::Exclusive, Direction::Forward) => k::SCAN_EXCLUSIVE_U32,
        (ScanKind::Inclusive, Direction::Forward) => k::SCAN_INCLUSIVE_U32,
        (ScanKind::Exclusive, Direction::Backward) => k::SCAN_EXCLUSIVE_BACKWARD_U32,
        (ScanKind::Inclusive, Direction::Backward) => k::SCAN_INCLUSIVE_BACKWARD_U32,
    };
    let n = input.len();
    check_len(kernel.name(), n, MAX_SCAN_LEN)?;
    check_same_len(kernel.name(), "output", n, output.len())?;
    let total = total_arg(kernel.name(), total)?;
    if n == 0 {
        return Ok(());
    }
    let gpu = input.gpu();
    let (mut scratch, blocks, threads) = if direction == Direction::Forward {
        // The persistent pipelined kernels (scan.cu): any grid; as many
        // blocks as the SMs hold, each looping over tiles. Their 16-byte
        // vector accesses need aligned buffers, which device allocations are.
        debug_assert!(
            input.device_ptr().is_multiple_of(16) && output.device_ptr().is_multiple_of(16)
        );
        let tiles = n.div_ceil(SCAN_PIPE_TILE);
        let resident =
            gpu.info().multiprocessors.max(1) * gpu.resident_blocks(kernel, SCAN_PIPE_THREADS)?;
        let blocks = blocks_for(n, SCAN_PIPE_TILE).min(resident);
        let scratch = LookbackScratch::new(gpu, "scan tile status", tiles)?;
        (scratch, blocks, SCAN_PIPE_THREADS)
    } else {
        (lookback_scratch(gpu, n)?, lookback_blocks(n), SCAN_THREADS)
    };
    let (status, counter) = scratch.pointers();
    let args = (
        input.ptr(),
        output.ptr_mut(),
        total,
        n as u64,
        status,
        counter,
    );
    gpu.launch(kernel, blocks, threads, args)
}

/// Forward exclusive scan.
pub fn exclusive_u32(
    input: &DeviceBuffer<u32>,
    output: &mut DeviceBuffer<u32>,
) -> Result<(), GpuError> {
    scan_u32(input, output, ScanKind::Exclusive, Direction::Forward, None)
}

/// Forward inclusive scan.
pub fn inclusive_u32(
    input: &DeviceBuffer<u32>,
    output: &mut DeviceBuffer<u32>,
) -> Result<(), GpuError> {
    scan_u32(input, output, ScanKind::Inclusive, Direction::Forward, None)
}

/// Scan that restarts at every element whose head flag is non-zero (element
/// 0 always starts a segment). An exclusive result is 0 at every head. When
/// `total` is given, it receives the sum of the last segment.
pub fn segmented_u32(
    values: &DeviceBuffer<u32>,
    heads: &DeviceBuffer<u32>,
    output: &mut DeviceBuffer<u32>,
    kind: ScanKind,
    total: Option<&mut DeviceBuffer<u32>>,
) -> Result<(), GpuError> {
    let kernel = match kind {
        ScanKind::Exclusive => k::SCAN_SEGMENTED_EXCLUSIVE_U32,
        ScanKind::Inclusive => k::SCAN_SEGMENTED_INCLUSIVE_U32,
    };
    let n = values.len();
    check_len(kernel.name(), n, MAX_SCAN_LEN)?;
    check_same_len(kernel.name(), "head flags", n, heads.len())?;
    check_same_len(kernel.name(), "output", n, output.len())?;
    let total = total_arg(kernel.name(), total)?;
    if n == 0 {
        return Ok(());
    }
    let gpu = values.gpu();
    let mut scratch = lookback_scratch(gpu, n)?;
    let (status, counter) = scratch.pointers();
    let args = (
        values.ptr(),
        heads.ptr(),
        output.ptr_mut(),
        total,
        n as u64,
        status,
        counter,
    );
    gpu.launch(kernel, lookback_blocks(n), SCAN_THREADS, args)
}

/// The address of the one-element total buffer, or null.
fn total_arg<'a>(
    operation: &'static str,
    total: Option<&'a mut DeviceBuffer<u32>>,
) -> Result<DevicePtrMut<'a, u32>, GpuError> {
    match total {
        None => Ok(DevicePtrMut::null()),
        Some(total) => {
            check_same_len(operation, "total", 1, total.len())?;
            // An empty input launches nothing, so set its total here.
            total.fill_zero()?;
            Ok(total.ptr_mut())
        }
    }
}
