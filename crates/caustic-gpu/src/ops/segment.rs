//! Segment utilities (`kernels/segment.cu`), from Zeidan 2011 (table 4.1,
//! appendix B): segmented reduction by owner (SegReduce), gather (which with
//! segment last indices gives SegScanTails), sorted-bounds extraction
//! (FindSortedBounds) and chunk creation (CreateChunks, method 2).
//! Semantics: the functions of the same names in [`super::cpu`].

use super::scan::{self, Direction, ScanKind};
use super::{MAX_SCAN_LEN, check_len, check_same_len};
use crate::buffer::DeviceBuffer;
use crate::error::GpuError;
use crate::kernel::{Kernel, Ptr, PtrMut, Signature};
use crate::kernels::ops_segment as k;

/// A segmented-reduction kernel: `(values, owner, n, out)`.
type SegmentReduction = Kernel<(Ptr<u32>, Ptr<u32>, u64, PtrMut<u32>)>;

/// The operator of a segmented reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SegmentOp {
    /// Sum modulo 2^32; empty segments are 0.
    Sum,
    /// Minimum; empty segments are `u32::MAX`.
    Min,
    /// Maximum; empty segments are 0.
    Max,
}

impl SegmentOp {
    fn kernel(self) -> SegmentReduction {
        match self {
            SegmentOp::Sum => k::SEGMENT_REDUCE_SUM_U32,
            SegmentOp::Min => k::SEGMENT_REDUCE_MIN_U32,
            SegmentOp::Max => k::SEGMENT_REDUCE_MAX_U32,
        }
    }

    /// The identity, which empty segments keep.
    pub fn identity(self) -> u32 {
        match self {
            SegmentOp::Sum | SegmentOp::Max => 0,
            SegmentOp::Min => u32::MAX,
        }
    }
}

/// `out[s]` = the reduction of the `values[i]` with `owner[i] == s`, for the
/// `segments` segments (every owner must be below `segments`). Owners need
/// not be sorted; sorted owners are fastest.
pub fn reduce_by_owner(
    values: &DeviceBuffer<u32>,
    owner: &DeviceBuffer<u32>,
    segments: usize,
    op: SegmentOp,
) -> Result<DeviceBuffer<u32>, GpuError> {
    let kernel = op.kernel();
    let n = values.len();
    check_same_len(kernel.name(), "owners", n, owner.len())?;
    let gpu = values.gpu();
    let mut out = DeviceBuffer::<u32>::uninit(gpu, "segmented reduction", segments)?;
    let identity = op.identity().to_le_bytes();
    debug_assert!(identity.iter().all(|&b| b == identity[0]));
    out.fill_bytes(identity[0])?;
    launch_elementwise(
        values,
        kernel,
        n,
        (values.ptr(), owner.ptr(), n as u64, out.ptr_mut()),
    )?;
    Ok(out)
}

/// `out[i] = values[indices[i]]`; every index must be below `values.len()`.
pub fn gather_u32(
    values: &DeviceBuffer<u32>,
    indices: &DeviceBuffer<u32>,
) -> Result<DeviceBuffer<u32>, GpuError> {
    let n = indices.len();
    let mut out = DeviceBuffer::<u32>::uninit(values.gpu(), "gathered values", n)?;
    let kernel = k::SEGMENT_GATHER_U32;
    launch_elementwise(
        values,
        kernel,
        n,
        (values.ptr(), indices.ptr(), n as u64, out.ptr_mut()),
    )?;
    Ok(out)
}

/// For `sorted` keys below `values`: `(start, end)` with `start[v]..end[v]`
/// the run of value `v`, and `0..0` for values that do not occur.
pub fn find_sorted_bounds(
    sorted: &DeviceBuffer<u32>,
    values: usize,
) -> Result<(DeviceBuffer<u32>, DeviceBuffer<u32>), GpuError> {
    let gpu = sorted.gpu();
    let n = sorted.len();
    check_len(k::SEGMENT_FIND_SORTED_BOUNDS.name(), n, MAX_SCAN_LEN)?;
    let mut start = DeviceBuffer::<u32>::zeroed(gpu, "sorted bounds start", values)?;
    let mut end = DeviceBuffer::<u32>::zeroed(gpu, "sorted bounds end", values)?;
    let kernel = k::SEGMENT_FIND_SORTED_BOUNDS;
    launch_elementwise(
        sorted,
        kernel,
        n,
        (sorted.ptr(), n as u64, start.ptr_mut(), end.ptr_mut()),
    )?;
    Ok((start, end))
}

/// Chunks of at most `chunk` consecutive elements covering each node's
/// range `[start, start + size)`, in node order (structure of arrays).
pub struct Chunks {
    /// The node each chunk belongs to.
    pub owner: DeviceBuffer<u32>,
    /// First element of each chunk.
    pub start: DeviceBuffer<u32>,
    /// Elements in each chunk, 1..=chunk.
    pub size: DeviceBuffer<u32>,
}

/// Splits every node's range into chunks of at most `chunk` elements
/// (CreateChunks method 2: one scan for the chunk counts and one for the
/// owners). Waits for the GPU once, to size the outputs.
pub fn create_chunks(
    node_start: &DeviceBuffer<u32>,
    node_size: &DeviceBuffer<u32>,
    chunk: u32,
) -> Result<Chunks, GpuError> {
    assert!(chunk > 0, "chunk size must be positive");
    let nodes = node_start.len();
    check_same_len(
        k::SEGMENT_CHUNK_COUNTS.name(),
        "node sizes",
        nodes,
        node_size.len(),
    )?;
    check_len(k::SEGMENT_CHUNK_COUNTS.name(), nodes, MAX_SCAN_LEN)?;
    let gpu = node_start.gpu();

    let mut counts = DeviceBuffer::<u32>::uninit(gpu, "chunks per node", nodes)?;
    launch_elementwise(
        node_size,
        k::SEGMENT_CHUNK_COUNTS,
        nodes,
        (node_size.ptr(), nodes as u64, chunk, counts.ptr_mut()),
    )?;
    let mut first = DeviceBuffer::<u32>::uninit(gpu, "first chunk per node", nodes)?;
    let mut total = DeviceBuffer::<u32>::uninit(gpu, "chunk count", 1)?;
    scan::scan_u32(
        &counts,
        &mut first,
        ScanKind::Exclusive,
        Direction::Forward,
        Some(&mut total),
    )?;
    let chunks = total.download()?[0] as usize;

    let mut heads = DeviceBuffer::<u32>::zeroed(gpu, "chunk heads", chunks)?;
    launch_elementwise(
        node_start,
        k::SEGMENT_CHUNK_HEADS,
        nodes,
        (first.ptr(), nodes as u64, chunks as u32, heads.ptr_mut()),
    )?;
    let mut owner = DeviceBuffer::<u32>::uninit(gpu, "chunk owners", chunks)?;
    scan::inclusive_u32(&heads, &mut owner)?;
    let mut start = DeviceBuffer::<u32>::uninit(gpu, "chunk starts", chunks)?;
    let mut size = DeviceBuffer::<u32>::uninit(gpu, "chunk sizes", chunks)?;
    launch_elementwise(
        node_start,
        k::SEGMENT_CHUNK_FILL,
        chunks,
        (
            owner.ptr(),
            first.ptr(),
            node_start.ptr(),
            node_size.ptr(),
            chunks as u64,
            chunk,
            start.ptr_mut(),
            size.ptr_mut(),
        ),
    )?;
    Ok(Chunks { owner, start, size })
}

/// Launches a grid-stride kernel over `n` elements on `on`'s GPU.
fn launch_elementwise<T: bytemuck::Pod, S: Signature>(
    on: &DeviceBuffer<T>,
    kernel: Kernel<S>,
    n: usize,
    args: S::Args<'_>,
) -> Result<(), GpuError> {
    super::launch_grid_stride(on.gpu(), kernel, n, args)
}
