//! Large downloads into pageable host memory (a finished image of hundreds
//! of megabytes): the driver stages a pageable copy through its own small
//! pinned buffer and one thread, and the destination's first touch (fresh
//! pages) is paid on that thread too, about 1.4 GB/s for an 805 MB image.
//! Here the device writes chunks of a page-locked staging buffer at the
//! link's speed, and the host's threads copy each chunk out in parallel.

use bytemuck::Pod;
use caustic_gpu::{DeviceBuffer, GpuError, PinnedBuffer};
use rayon::prelude::*;

/// Bytes of each staged chunk: large enough that a copy's fixed cost is
/// small, small enough that the pinned allocation is quick.
const CHUNK_BYTES: usize = 64 << 20;

/// Below this a plain download is as fast (the staging buffer's
/// allocation would cost more than it saves).
const STAGED_FROM_BYTES: usize = 16 << 20;

/// Copies `source` into `out` (the same length), staged through page-locked
/// memory when it is large.
pub fn download_large<T: Pod + Send + Sync>(
    source: &DeviceBuffer<T>,
    out: &mut [T],
) -> Result<(), GpuError> {
    let size = size_of::<T>().max(1);
    if std::mem::size_of_val(out) < STAGED_FROM_BYTES || out.len() != source.len() {
        return source.download_into(out);
    }
    let chunk = (CHUNK_BYTES / size).max(1);
    let mut staging = PinnedBuffer::<T>::zeroed(source.gpu(), chunk)?;
    for (index, part) in out.chunks_mut(chunk).enumerate() {
        let staged = &mut staging.as_mut_slice()[..part.len()];
        source.download_range_into(index * chunk, staged)?;
        // Copies of about a megabyte per task: the fresh pages' faults
        // spread over the threads.
        let per_task = ((1 << 20) / size).max(1);
        part.par_chunks_mut(per_task)
            .zip(staged.par_chunks(per_task))
            .for_each(|(to, from)| to.copy_from_slice(from));
    }
    Ok(())
}
