//! Typed device memory.
//!
//! A [`DeviceBuffer<T>`] is `len` elements of a plain-data type on the
//! device, allocated and freed in stream order on its [`Gpu`]'s stream (from
//! the driver's memory pool where the device has one). Because `T: Pod`, any
//! bytes are a valid `T`, so an uninitialised or poisoned buffer is still
//! safe to read back: tests poison outputs to catch unwritten elements.

use std::marker::PhantomData;

use bytemuck::Pod;
use cudarc::driver::{result, sys};

use crate::context::Gpu;
use crate::error::GpuError;

/// The byte that [`DeviceBuffer::poison`] fills with: 0xA5A5A5A5 as a u32,
/// a large negative float, and neither 0, !0 nor any operator's identity.
pub const POISON_BYTE: u8 = 0xA5;

/// A device allocation named for another thread of the process: its
/// address, its context and its size (plain numbers, so a team can pass it
/// through an exchange of bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct PeerHandle {
    pub ptr: u64,
    pub context: u64,
    pub bytes: u64,
}

/// `len` values of `T` in device memory.
pub struct DeviceBuffer<T: Pod> {
    /// Device address; 0 for an empty buffer, which owns no allocation.
    ptr: sys::CUdeviceptr,
    len: usize,
    /// Elements the allocation holds (`len` may be shorter: [`Self::set_len`]).
    capacity: usize,
    /// What the buffer holds, for out-of-memory messages.
    what: &'static str,
    gpu: Gpu,
    _element: PhantomData<T>,
}

impl<T: Pod> DeviceBuffer<T> {
    /// Allocates `len` elements with unspecified contents. `what` names the
    /// allocation in an out-of-memory error.
    pub fn uninit(gpu: &Gpu, what: &'static str, len: usize) -> Result<Self, GpuError> {
        let bytes = len.checked_mul(size_of::<T>()).ok_or(GpuError::TooLarge {
            operation: what,
            len,
            max: usize::MAX / size_of::<T>().max(1),
        })?;
        let ptr = if bytes == 0 {
            0
        } else {
            allocate(gpu, what, bytes)?
        };
        Ok(DeviceBuffer {
            ptr,
            len,
            capacity: len,
            what,
            gpu: gpu.clone(),
            _element: PhantomData,
        })
    }

    /// Allocates `len` zeroed elements.
    pub fn zeroed(gpu: &Gpu, what: &'static str, len: usize) -> Result<Self, GpuError> {
        let mut buffer = Self::uninit(gpu, what, len)?;
        buffer.fill_bytes(0)?;
        Ok(buffer)
    }

    /// Allocates and uploads a copy of `data`.
    pub fn from_slice(gpu: &Gpu, what: &'static str, data: &[T]) -> Result<Self, GpuError> {
        let mut buffer = Self::uninit(gpu, what, data.len())?;
        buffer.upload(data)?;
        Ok(buffer)
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Size of the elements in bytes.
    pub fn bytes(&self) -> usize {
        self.len * size_of::<T>()
    }

    /// The name given at allocation.
    pub fn what(&self) -> &'static str {
        self.what
    }

    /// The same allocation under a new name, for a buffer that changes
    /// roles (a build's scratch kept as the structure's array).
    pub fn renamed(mut self, what: &'static str) -> Self {
        self.what = what;
        self
    }

    /// The device the buffer lives on.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// The device address (0 when empty), for kernels this crate does not wrap.
    pub fn device_ptr(&self) -> u64 {
        self.ptr
    }

    /// Exchanges the device memory of two buffers of equal length, keeping
    /// each buffer's name: a ping-pong pass can end in the caller's buffer
    /// without a copy.
    pub(crate) fn swap_storage(&mut self, other: &mut DeviceBuffer<T>) {
        assert_eq!(self.len, other.len, "swap_storage needs equal lengths");
        std::mem::swap(&mut self.ptr, &mut other.ptr);
        std::mem::swap(&mut self.capacity, &mut other.capacity);
    }

    /// Shortens the buffer to `len` elements, keeping the allocation.
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Makes the buffer `len` elements long within its allocation (the
    /// elements past the old length keep what they held): a loop reuses
    /// one allocation for steps of different lengths, with no allocation
    /// or free per step.
    pub fn set_len(&mut self, len: usize) -> Result<(), GpuError> {
        if len > self.capacity {
            return Err(GpuError::LengthMismatch {
                operation: "set_len",
                what: self.what,
                expected: self.capacity,
                actual: len,
            });
        }
        self.len = len;
        Ok(())
    }

    /// Elements the allocation holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Copies `data` (exactly `len()` elements) to the device.
    pub fn upload(&mut self, data: &[T]) -> Result<(), GpuError> {
        self.expect_len("upload", "host data", data.len())?;
        if data.is_empty() {
            return Ok(());
        }
        self.gpu.bind()?;
        // SAFETY: the allocation holds `data.len()` elements; the driver
        // stages pageable host memory before returning, so `data` may go.
        unsafe { result::memcpy_htod_async(self.ptr, data, self.gpu.raw_stream()) }
            .map_err(GpuError::driver("copying to the GPU"))
    }

    /// Copies `data` into elements `offset .. offset + data.len()`, leaving
    /// the others as they are: how a moving scene rewrites only the
    /// triangles that moved in a buffer that stays on the device.
    pub fn upload_at(&mut self, offset: usize, data: &[T]) -> Result<(), GpuError> {
        if offset
            .checked_add(data.len())
            .is_none_or(|end| end > self.len)
        {
            return Err(GpuError::LengthMismatch {
                operation: "upload_at",
                what: "offset + host data",
                expected: self.len,
                actual: offset.saturating_add(data.len()),
            });
        }
        if data.is_empty() {
            return Ok(());
        }
        self.gpu.bind()?;
        let at = self.ptr + (offset * size_of::<T>()) as sys::CUdeviceptr;
        // SAFETY: `at .. at + size_of_val(data)` lies inside the allocation
        // (checked above); the driver stages pageable host memory before
        // returning, so `data` may go; page-locked memory (a
        // `PinnedBuffer`) is read by the copy later, in stream order, which
        // `pinned::upload_ranges` waits for before writing it again.
        unsafe { result::memcpy_htod_async(at, data, self.gpu.raw_stream()) }
            .map_err(GpuError::driver("copying to the GPU"))
    }

    /// Copies the buffer to a new vector, waiting for queued work first.
    pub fn download(&self) -> Result<Vec<T>, GpuError> {
        let mut out = vec![T::zeroed(); self.len];
        self.download_into(&mut out)?;
        Ok(out)
    }

    /// Copies the elements `at .. at + out.len()` into `out`, waiting for
    /// queued work first.
    pub fn download_range_into(&self, at: usize, out: &mut [T]) -> Result<(), GpuError> {
        if at.checked_add(out.len()).is_none_or(|end| end > self.len) {
            return Err(GpuError::LengthMismatch {
                operation: "download_range_into",
                what: self.what,
                expected: self.len,
                actual: at.saturating_add(out.len()),
            });
        }
        if out.is_empty() {
            return Ok(());
        }
        self.gpu.bind()?;
        let from = self.ptr + (at * size_of::<T>()) as sys::CUdeviceptr;
        // SAFETY: the elements `at .. at + out.len()` lie inside the
        // allocation (checked above); the stream is synchronised before
        // `out` is read.
        unsafe { result::memcpy_dtoh_async(out, from, self.gpu.raw_stream()) }
            .map_err(GpuError::driver("copying from the GPU"))?;
        self.gpu.synchronize()
    }

    /// Copies the buffer into `out` (exactly `len()` elements).
    pub fn download_into(&self, out: &mut [T]) -> Result<(), GpuError> {
        self.expect_len("download", "host slice", out.len())?;
        self.download_range_into(0, out)
    }

    /// Copies `source` (same length) into this buffer on the device.
    pub fn copy_from(&mut self, source: &DeviceBuffer<T>) -> Result<(), GpuError> {
        self.expect_len("copy_from", "source", source.len())?;
        if self.is_empty() {
            return Ok(());
        }
        self.gpu.bind()?;
        // SAFETY: both allocations hold `bytes()` bytes and are distinct
        // (`&mut self` and `&source` cannot alias).
        unsafe {
            result::memcpy_dtod_async(self.ptr, source.ptr, self.bytes(), self.gpu.raw_stream())
        }
        .map_err(GpuError::driver("copying on the GPU"))
    }

    /// Where this buffer lives, for [`DeviceBuffer::copy_from_peer`] on
    /// another thread of this process (another device's, say).
    pub fn peer_handle(&self) -> PeerHandle {
        PeerHandle {
            ptr: self.ptr,
            context: self.gpu.context().cu_ctx() as u64,
            bytes: self.bytes() as u64,
        }
    }

    /// Copies the buffer `source` names (on any device of this process)
    /// into this one from byte `at` on, device to device
    /// (`cuMemcpyPeerAsync`: over NVLink or PCIe where the two devices are
    /// peers, else staged by the driver), queued on this buffer's stream.
    ///
    /// # Safety
    /// `source` must come from [`DeviceBuffer::peer_handle`] of a buffer of
    /// this process, or from [`crate::IpcExchange::open`] (another
    /// process's allocation mapped into this device's context), whose
    /// contents are complete (its stream synchronised) and which stays
    /// allocated until this buffer's device is synchronised after the
    /// copy.
    pub unsafe fn copy_from_peer(&mut self, at: usize, source: PeerHandle) -> Result<(), GpuError> {
        let bytes = usize::try_from(source.bytes).unwrap_or(usize::MAX);
        if at.checked_add(bytes).is_none_or(|end| end > self.bytes()) {
            return Err(GpuError::LengthMismatch {
                operation: "copy_from_peer",
                what: "offset + source bytes",
                expected: self.bytes(),
                actual: at.saturating_add(bytes),
            });
        }
        if bytes == 0 {
            return Ok(());
        }
        self.gpu.bind()?;
        // SAFETY: the range fits this allocation (checked above); the caller
        // vouches that `source` is a live, complete allocation of `bytes`
        // bytes in the context it names.
        unsafe {
            result::memcpy_peer_async(
                self.gpu.context().cu_ctx(),
                self.ptr + at as u64,
                source.context as sys::CUcontext,
                source.ptr,
                bytes,
                self.gpu.raw_stream(),
            )
        }
        .map_err(GpuError::driver("copying from another device"))
    }

    /// Copies all of `source` into elements `offset .. offset + source.len()`
    /// of this buffer on the device (concatenating buffers).
    pub fn copy_from_at(
        &mut self,
        source: &DeviceBuffer<T>,
        offset: usize,
    ) -> Result<(), GpuError> {
        if offset
            .checked_add(source.len())
            .is_none_or(|end| end > self.len)
        {
            return Err(GpuError::LengthMismatch {
                operation: "copy_from_at",
                what: "offset + source",
                expected: self.len,
                actual: offset.saturating_add(source.len()),
            });
        }
        if source.is_empty() {
            return Ok(());
        }
        self.gpu.bind()?;
        let at = self.ptr + (offset * size_of::<T>()) as sys::CUdeviceptr;
        // SAFETY: the range `at .. at + source.bytes()` lies inside this
        // allocation (checked above) and the buffers are distinct.
        unsafe { result::memcpy_dtod_async(at, source.ptr, source.bytes(), self.gpu.raw_stream()) }
            .map_err(GpuError::driver("copying on the GPU"))
    }

    /// Sets every byte to `byte`.
    pub fn fill_bytes(&mut self, byte: u8) -> Result<(), GpuError> {
        self.fill_bytes_in(0..self.len, byte)
    }

    /// Sets every byte of the elements `range` to `byte`.
    pub fn fill_bytes_in(
        &mut self,
        range: std::ops::Range<usize>,
        byte: u8,
    ) -> Result<(), GpuError> {
        if range.start > range.end || range.end > self.len {
            return Err(GpuError::LengthMismatch {
                operation: "fill_bytes_in",
                what: self.what,
                expected: self.len,
                actual: range.end.max(range.start),
            });
        }
        if range.is_empty() {
            return Ok(());
        }
        self.gpu.bind()?;
        let size = size_of::<T>();
        let at = self.ptr + (range.start * size) as sys::CUdeviceptr;
        // SAFETY: the elements `range` lie inside the allocation (checked
        // above).
        unsafe { result::memset_d8_async(at, byte, range.len() * size, self.gpu.raw_stream()) }
            .map_err(GpuError::driver("filling GPU memory"))
    }

    /// Sets every element to zero.
    pub fn fill_zero(&mut self) -> Result<(), GpuError> {
        self.fill_bytes(0)
    }

    /// Fills with [`POISON_BYTE`], so that an element a kernel fails to
    /// write shows up in a comparison.
    pub fn poison(&mut self) -> Result<(), GpuError> {
        self.fill_bytes(POISON_BYTE)
    }

    fn expect_len(
        &self,
        operation: &'static str,
        what: &'static str,
        actual: usize,
    ) -> Result<(), GpuError> {
        if actual == self.len {
            Ok(())
        } else {
            Err(GpuError::LengthMismatch {
                operation,
                what,
                expected: self.len,
                actual,
            })
        }
    }
}

impl<T: Pod> std::fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceBuffer")
            .field("what", &self.what)
            .field("len", &self.len)
            .field("ptr", &format_args!("{:#x}", self.ptr))
            .finish()
    }
}

impl<T: Pod> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        if self.ptr == 0 {
            return;
        }
        // Errors cannot be returned from drop; a failed free leaks, and a
        // fault behind it is reported by the next synchronisation.
        if self.gpu.bind().is_ok() {
            // SAFETY: `ptr` came from `allocate` on this stream and is freed
            // once; stream order keeps it alive for work queued before.
            unsafe {
                let _ = if self.gpu.has_async_alloc() {
                    result::free_async(self.ptr, self.gpu.raw_stream())
                } else {
                    result::free_sync(self.ptr)
                };
            }
        }
    }
}

/// Allocates `bytes` (> 0) in stream order, naming `what` if memory runs out.
fn allocate(gpu: &Gpu, what: &'static str, bytes: usize) -> Result<sys::CUdeviceptr, GpuError> {
    gpu.bind()?;
    // SAFETY: the context is current and the stream belongs to it.
    let allocated = unsafe {
        if gpu.has_async_alloc() {
            result::malloc_async(gpu.raw_stream(), bytes)
        } else {
            result::malloc_sync(bytes)
        }
    };
    allocated.map_err(|e| {
        if e.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
            let (free, total) = gpu.memory().unwrap_or((0, 0));
            GpuError::OutOfMemory {
                what,
                bytes,
                free,
                total,
            }
        } else {
            GpuError::driver("allocating GPU memory")(e)
        }
    })
}
