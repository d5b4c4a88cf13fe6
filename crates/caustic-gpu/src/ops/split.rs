//! Stable partition by flag (`kernels/split.cu`): elements with a zero flag
//! first, then the others, each group in input order; the split point is the
//! number of zero flags. One counting reduction, then one fused scan-scatter
//! pass. Semantics: [`super::cpu::split_u32`].

use super::{MAX_SCAN_LEN, check_len, check_same_len, launch_lookback, reduce};
use crate::buffer::DeviceBuffer;
use crate::error::GpuError;
use crate::kernels::split as k;

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
    launch_lookback(
        gpu,
        kernel,
        n,
        &[
            values.arg(),
            flags.arg(),
            out.arg(),
            split_point.arg(),
            trues.arg(),
            n.into(),
        ],
    )
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
    launch_lookback(
        gpu,
        kernel,
        n,
        &[
            flags.arg(),
            out.arg(),
            split_point.arg(),
            trues.arg(),
            n.into(),
        ],
    )
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
    let out = DeviceBuffer::<u32>::uninit(gpu, "segmented split output", n)?;
    if n == 0 {
        return Ok(out);
    }
    let zeros = DeviceBuffer::<u32>::uninit(gpu, "segmented split falses", n)?;
    let ones = DeviceBuffer::<u32>::uninit(gpu, "segmented split ones", n)?;
    super::launch_grid_stride(
        gpu,
        k::SPLIT_SEGMENTED_FLAGS_U32,
        n,
        &[flags.arg(), n.into(), zeros.arg(), ones.arg()],
    )?;
    let mut rank0 = DeviceBuffer::<u32>::uninit(gpu, "segmented split ranks", n)?;
    let mut pos = DeviceBuffer::<u32>::uninit(gpu, "segmented split positions", n)?;
    segmented_u32(&zeros, heads, &mut rank0, ScanKind::Exclusive, None)?;
    segmented_u32(&ones, heads, &mut pos, ScanKind::Exclusive, None)?;
    let falses = DeviceBuffer::<u32>::uninit(gpu, "segmented split counts", n)?;
    super::launch_grid_stride(
        gpu,
        k::SPLIT_SEGMENTED_TOTALS_U32,
        n,
        &[
            zeros.arg(),
            rank0.arg(),
            pos.arg(),
            heads.arg(),
            n.into(),
            falses.arg(),
        ],
    )?;
    super::launch_grid_stride(
        gpu,
        kernel,
        n,
        &[
            values.arg(),
            flags.arg(),
            rank0.arg(),
            pos.arg(),
            falses.arg(),
            n.into(),
            out.arg(),
        ],
    )?;
    Ok(out)
}
