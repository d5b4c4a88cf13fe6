//! Page-locked ("pinned") host memory: a [`PinnedBuffer`] is `len`
//! elements on the host that the GPU's copy engines read and write
//! directly. A copy from pageable memory is staged by the driver through a
//! pinned bounce buffer, chunk by chunk, at a fraction of the link's
//! bandwidth; a buffer kept from frame to frame (a renderer's image) is
//! copied at full speed and pays the pinning once.

use bytemuck::Pod;
use cudarc::driver::result;

use crate::buffer::DeviceBuffer;
use crate::context::Gpu;
use crate::error::GpuError;

/// `len` values of `T` in page-locked host memory of `gpu`'s context.
pub struct PinnedBuffer<T: Pod> {
    ptr: *mut T,
    len: usize,
    gpu: Gpu,
}

// SAFETY: the buffer owns its allocation like a `Vec<T>`; `T: Pod` is
// `Send + Sync`.
unsafe impl<T: Pod> Send for PinnedBuffer<T> {}
unsafe impl<T: Pod> Sync for PinnedBuffer<T> {}

impl<T: Pod> PinnedBuffer<T> {
    /// Allocates `len` zeroed elements.
    pub fn zeroed(gpu: &Gpu, len: usize) -> Result<Self, GpuError> {
        let bytes = len.checked_mul(size_of::<T>()).ok_or(GpuError::TooLarge {
            operation: "pinned host buffer",
            len,
            max: usize::MAX / size_of::<T>().max(1),
        })?;
        let ptr = if bytes == 0 {
            std::ptr::NonNull::<T>::dangling().as_ptr()
        } else {
            gpu.bind()?;
            // SAFETY: the context is current; the memory is zeroed below
            // before any read.
            let ptr = unsafe { result::malloc_host(bytes, 0) }
                .map_err(GpuError::driver("allocating pinned host memory"))?;
            // SAFETY: `ptr` holds `bytes` writable bytes.
            unsafe { std::ptr::write_bytes(ptr.cast::<u8>(), 0, bytes) };
            ptr.cast::<T>()
        };
        Ok(Self {
            ptr,
            len,
            gpu: gpu.clone(),
        })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_slice(&self) -> &[T] {
        // SAFETY: `ptr` holds `len` initialised elements (zeroed at
        // allocation, any bytes are a valid `T`).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: as `as_slice`, and `&mut self` is unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }

    /// Copies `source` (same length) here, waiting for queued work first.
    pub fn download_from(&mut self, source: &DeviceBuffer<T>) -> Result<(), GpuError> {
        source.download_into(self.as_mut_slice())
    }
}

impl<T: Pod> Drop for PinnedBuffer<T> {
    fn drop(&mut self) {
        if self.len == 0 || size_of::<T>() == 0 {
            return;
        }
        // A failed free leaks; drop cannot report it. Copies queued from or
        // into the buffer finish first.
        if self.gpu.bind().is_ok() && self.gpu.synchronize().is_ok() {
            // SAFETY: `ptr` came from `malloc_host` and is freed once.
            unsafe {
                let _ = result::free_host(self.ptr.cast());
            }
        }
    }
}

/// Writes, for each range `r` of `ranges`, new values into `target[r]`,
/// leaving the rest of `target` as it is: `fill` writes all of them,
/// ranges concatenated in order, into page-locked `staging` (allocated or
/// grown here, kept by the caller from call to call), from which each
/// range is one direct copy. Waits first for work queued before, so that
/// the copies of the previous call out of `staging` are done. Returns the
/// bytes copied.
pub fn upload_ranges<T: Pod>(
    staging: &mut Option<PinnedBuffer<T>>,
    target: &mut DeviceBuffer<T>,
    ranges: &[std::ops::Range<usize>],
    fill: impl FnOnce(&mut [T]),
) -> Result<usize, GpuError> {
    if let Some(bad) = ranges
        .iter()
        .find(|r| r.start > r.end || r.end > target.len())
    {
        return Err(GpuError::Invalid {
            what: "upload ranges",
            message: format!("range {bad:?} outside 0..{}", target.len()),
        });
    }
    let total: usize = ranges.iter().map(|r| r.len()).sum();
    if total == 0 {
        return Ok(0);
    }
    let gpu = target.gpu().clone();
    gpu.synchronize()?;
    let buffer = match staging {
        Some(buffer) if buffer.len() >= total => buffer,
        other => other.insert(PinnedBuffer::zeroed(&gpu, total)?),
    };
    let packed = &mut buffer.as_mut_slice()[..total];
    fill(packed);
    let mut offset = 0;
    for range in ranges {
        target.upload_at(range.start, &packed[offset..offset + range.len()])?;
        offset += range.len();
    }
    Ok(total * size_of::<T>())
}
