//! Stable partition by flag (`kernels/split.cu`): elements with a zero flag
//! first, then the others, each group in input order; the split point is the
//! number of zero flags. One counting reduction, then one fused scan-scatter
//! pass. Semantics: [`super::cpu::split_u32`].

use super::{
    MAX_SCAN_LEN, SCAN_THREADS, check_len, check_same_len, lookback_blocks, lookback_scratch,
    reduce,
};
use crate::buffer::DeviceBuffer;
use crate::error::GpuError;
use crate::kernels::ops_split as k;

/// Partitions `values` into `out` (same length) and writes the split point
/// to `split_point[0]`, without waiting for the GPU.
pub fn partition_u32_into(
    values: &DeviceBuffer<u32>,
    flags: &DeviceBuffer<u32>,
    out: &mut DeviceBuffer<u32>,
    split_point: &mut DeviceBuffer<u32>,
) -> Result<(), GpuError> {
    let kernel = k::SPLIT_PARTITION_U32;
    let n = values.len();
    check_len(kernel.name(), n, MAX_SCAN_LEN)?;
    check_same_len(kernel.name(), "flags", n, flags.len())?;
    check_same_len(kernel.name(), "output", n, out.len())?;
    check_same_len(kernel.name(), "split point", 1, split_point.len())?;
    let gpu = values.gpu();
    if n == 0 {
        return split_point.fill_zero();
    }
    let mut trues = DeviceBuffer::uninit(gpu, "split true count", 1)?;
    reduce::count_nonzero_u32_into(flags, &mut trues)?;
    let mut scratch = lookback_scratch(gpu, n)?;
    let (status, counter) = scratch.pointers();
    let args = (
        values.ptr(),
        flags.ptr(),
        out.ptr_mut(),
        split_point.ptr_mut(),
        trues.ptr(),
        n as u64,
        status,
        counter,
    );
    gpu.launch(kernel, lookback_blocks(n), SCAN_THREADS, args)
}

/// Partitions the indices 0..n by `flags` into `out` (length n) and writes
/// the split point to `split_point[0]`, without waiting for the GPU.
pub fn partition_indices_into(
    flags: &DeviceBuffer<u32>,
    out: &mut DeviceBuffer<u32>,
    split_point: &mut DeviceBuffer<u32>,
) -> Result<(), GpuError> {
    let kernel = k::SPLIT_PARTITION_INDICES;
    let n = flags.len();
    check_len(kernel.name(), n, MAX_SCAN_LEN)?;
    check_same_len(kernel.name(), "output", n, out.len())?;
    check_same_len(kernel.name(), "split point", 1, split_point.len())?;
    let gpu = flags.gpu();
    if n == 0 {
        return split_point.fill_zero();
    }
    let mut trues = DeviceBuffer::uninit(gpu, "split true count", 1)?;
    reduce::count_nonzero_u32_into(flags, &mut trues)?;
    let mut scratch = lookback_scratch(gpu, n)?;
    let (status, counter) = scratch.pointers();
    let args = (
        flags.ptr(),
        out.ptr_mut(),
        split_point.ptr_mut(),
        trues.ptr(),
        n as u64,
        status,
        counter,
    );
    gpu.launch(kernel, lookback_blocks(n), SCAN_THREADS, args)
}

/// Partitions `values` into `out` and returns the split point (waits for the GPU).
pub fn partition_u32(
    values: &DeviceBuffer<u32>,
    flags: &DeviceBuffer<u32>,
    out: &mut DeviceBuffer<u32>,
) -> Result<usize, GpuError> {
    let mut split_point = DeviceBuffer::uninit(values.gpu(), "split point", 1)?;
    partition_u32_into(values, flags, out, &mut split_point)?;
    Ok(split_point.download()?[0] as usize)
}

/// Stable partition by flag inside every segment (Zeidan 2011's SegSplit):
/// segments start at non-zero `heads` (element 0 always starts one), and
/// within each the values with a zero flag come first, then the others,
/// both in input order. Semantics: [`super::cpu::segmented_split_u32`].
pub fn segmented_partition_u32(
    values: &DeviceBuffer<u32>,
    flags: &DeviceBuffer<u32>,
    heads: &DeviceBuffer<u32>,
) -> Result<DeviceBuffer<u32>, GpuError> {
    use super::scan::{ScanKind, segmented_u32};
    let kernel = k::SPLIT_SEGMENTED_SCATTER_U32;
    let n = values.len();
    super::check_len(kernel.name(), n, super::MAX_SCAN_LEN)?;
    super::check_same_len(kernel.name(), "flags", n, flags.len())?;
    super::check_same_len(kernel.name(), "head flags", n, heads.len())?;
    let gpu = values.gpu();
    let mut out = DeviceBuffer::<u32>::uninit(gpu, "segmented split output", n)?;
    if n == 0 {
        return Ok(out);
    }
    let mut zeros = DeviceBuffer::<u32>::uninit(gpu, "segmented split falses", n)?;
    let mut ones = DeviceBuffer::<u32>::uninit(gpu, "segmented split ones", n)?;
    super::launch_grid_stride(
        gpu,
        k::SPLIT_SEGMENTED_FLAGS_U32,
        n,
        (flags.ptr(), n as u64, zeros.ptr_mut(), ones.ptr_mut()),
    )?;
    let mut rank0 = DeviceBuffer::<u32>::uninit(gpu, "segmented split ranks", n)?;
    let mut pos = DeviceBuffer::<u32>::uninit(gpu, "segmented split positions", n)?;
    segmented_u32(&zeros, heads, &mut rank0, ScanKind::Exclusive, None)?;
    segmented_u32(&ones, heads, &mut pos, ScanKind::Exclusive, None)?;
    let mut falses = DeviceBuffer::<u32>::uninit(gpu, "segmented split counts", n)?;
    super::launch_grid_stride(
        gpu,
        k::SPLIT_SEGMENTED_TOTALS_U32,
        n,
        (
            zeros.ptr(),
            rank0.ptr(),
            pos.ptr(),
            heads.ptr(),
            n as u64,
            falses.ptr_mut(),
        ),
    )?;
    super::launch_grid_stride(
        gpu,
        kernel,
        n,
        (
            values.ptr(),
            flags.ptr(),
            rank0.ptr(),
            pos.ptr(),
            falses.ptr(),
            n as u64,
            out.ptr_mut(),
        ),
    )?;
    Ok(out)
}
