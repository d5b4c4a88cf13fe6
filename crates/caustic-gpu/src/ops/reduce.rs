//! Reductions (`kernels/reduce.cu`): sum, min, max, count of non-zeros and
//! the union of boxes, each in two launches (per-block partial results, then
//! one block over the partials). Semantics: [`super::cpu`]; u32 sums wrap,
//! f32 sums are exact up to rounding in an unspecified order, min/max skip
//! NaN, and an empty input gives the operator's identity.

use bytemuck::Pod;
use caustic_geom::Aabb;

use super::{blocks_for, check_same_len};
use crate::buffer::DeviceBuffer;
use crate::error::GpuError;
use crate::kernel::{Kernel, Ptr, PtrMut};
use crate::kernels::ops_reduce as k;

/// Threads per block (`REDUCE_THREADS` in reduce.cu).
pub(crate) const THREADS: u32 = 256;
/// Partial results of the first launch; the second launch's block reads them all.
const MAX_BLOCKS: usize = 1024;
/// Elements a thread reduces at least before another block is worth starting.
const MIN_PER_THREAD: usize = 8;

/// Sum modulo 2^32.
pub fn sum_u32(input: &DeviceBuffer<u32>) -> Result<u32, GpuError> {
    to_host(input, k::REDUCE_SUM_U32, k::REDUCE_SUM_U32)
}

/// Number of non-zero elements.
pub fn count_nonzero_u32(input: &DeviceBuffer<u32>) -> Result<u32, GpuError> {
    to_host(input, k::REDUCE_COUNT_NONZERO_U32, k::REDUCE_SUM_U32)
}

/// Smallest element; `u32::MAX` when empty.
pub fn min_u32(input: &DeviceBuffer<u32>) -> Result<u32, GpuError> {
    to_host(input, k::REDUCE_MIN_U32, k::REDUCE_MIN_U32)
}

/// Largest element; 0 when empty.
pub fn max_u32(input: &DeviceBuffer<u32>) -> Result<u32, GpuError> {
    to_host(input, k::REDUCE_MAX_U32, k::REDUCE_MAX_U32)
}

/// Sum in f32 (tree order, so it may differ from a sequential sum by rounding).
pub fn sum_f32(input: &DeviceBuffer<f32>) -> Result<f32, GpuError> {
    to_host(input, k::REDUCE_SUM_F32, k::REDUCE_SUM_F32)
}

/// Smallest non-NaN element; +inf when empty or all NaN.
pub fn min_f32(input: &DeviceBuffer<f32>) -> Result<f32, GpuError> {
    to_host(input, k::REDUCE_MIN_F32, k::REDUCE_MIN_F32)
}

/// Largest non-NaN element; -inf when empty or all NaN.
pub fn max_f32(input: &DeviceBuffer<f32>) -> Result<f32, GpuError> {
    to_host(input, k::REDUCE_MAX_F32, k::REDUCE_MAX_F32)
}

/// The box that bounds every box; [`Aabb::EMPTY`] when there are none.
pub fn union_aabb(input: &DeviceBuffer<Aabb>) -> Result<Aabb, GpuError> {
    to_host(input, k::REDUCE_UNION_AABB, k::REDUCE_UNION_AABB)
}

/// Counts the non-zero elements into `out[0]` on the device, without waiting.
pub fn count_nonzero_u32_into(
    input: &DeviceBuffer<u32>,
    out: &mut DeviceBuffer<u32>,
) -> Result<(), GpuError> {
    into_device(input, k::REDUCE_COUNT_NONZERO_U32, k::REDUCE_SUM_U32, out)
}

/// The box that bounds every box, into `out[0]` on the device, without waiting.
pub fn union_aabb_into(
    input: &DeviceBuffer<Aabb>,
    out: &mut DeviceBuffer<Aabb>,
) -> Result<(), GpuError> {
    into_device(input, k::REDUCE_UNION_AABB, k::REDUCE_UNION_AABB, out)
}

/// A reduction kernel: `(input, n, per-block results)`.
type Reduction<T, R> = Kernel<(Ptr<T>, u64, PtrMut<R>)>;

fn to_host<T: Pod, R: Pod>(
    input: &DeviceBuffer<T>,
    first: Reduction<T, R>,
    last: Reduction<R, R>,
) -> Result<R, GpuError> {
    let mut out = DeviceBuffer::<R>::uninit(input.gpu(), "reduction result", 1)?;
    into_device(input, first, last, &mut out)?;
    Ok(out.download()?[0])
}

/// `first` reduces the input to per-block partials (or, with one block,
/// straight to `out`); `last` reduces the partials. `R` is the result type:
/// counting u32 gives u32, every other reduction keeps its element type.
fn into_device<T: Pod, R: Pod>(
    input: &DeviceBuffer<T>,
    first: Reduction<T, R>,
    last: Reduction<R, R>,
    out: &mut DeviceBuffer<R>,
) -> Result<(), GpuError> {
    check_same_len(first.name(), "result buffer", 1, out.len())?;
    let gpu = input.gpu();
    let n = input.len();
    let blocks = blocks_for(n.max(1), THREADS as usize * MIN_PER_THREAD).min(MAX_BLOCKS as u32);
    if blocks == 1 {
        return gpu.launch(first, 1, THREADS, (input.ptr(), n as u64, out.ptr_mut()));
    }
    let mut partials = DeviceBuffer::<R>::uninit(gpu, "reduction partials", blocks as usize)?;
    gpu.launch(
        first,
        blocks,
        THREADS,
        (input.ptr(), n as u64, partials.ptr_mut()),
    )?;
    let count = blocks as u64;
    gpu.launch(last, 1, THREADS, (partials.ptr(), count, out.ptr_mut()))
}
