//! Device memory shared between the processes of one node (CUDA IPC).
//!
//! The GPU ranks of an MPI job on one machine exchange device buffers
//! without the host: each rank copies what it shares into its
//! [`IpcExchange`]'s staging allocation, exports it as an [`IpcHandle`]
//! (64 opaque bytes that travel through any byte exchange), and every
//! other rank opens that handle, which maps the exporter's memory into its
//! own context, and copies from it device to device (over NVLink where
//! the GPUs have it).
//!
//! Why a staging allocation of its own: `cuIpcGetMemHandle` exports only
//! plain `cuMemAlloc` allocations, while every [`DeviceBuffer`] comes from
//! the stream-ordered memory pool where the device has one. The staging
//! allocation grows on demand and is kept across exchanges (a render
//! exchanges every pass), and so are the peers' opened mappings, cached
//! per (rank, handle): opening costs a driver call and a mapping, reusing
//! costs nothing.
//!
//! The one rule the driver does not enforce: an exporter must not free an
//! allocation while a peer may still read it. When the staging allocation
//! grows, the old one is *retired*, not freed; the caller frees retired
//! allocations ([`IpcExchange::release_retired`]) once every peer has
//! opened the new handle (which closes its mapping of the old one) and
//! finished its copies, i.e. after a barrier.

use std::collections::HashMap;
use std::ffi::c_char;
use std::sync::Arc;

use bytemuck::Pod;
use cudarc::driver::{CudaContext, sys};

use crate::buffer::{DeviceBuffer, PeerHandle};
use crate::context::Gpu;
use crate::error::GpuError;

/// Bytes of a CUDA IPC memory handle.
pub const IPC_HANDLE_BYTES: usize = 64;

/// A device allocation exported to other processes (`cuIpcGetMemHandle`):
/// plain bytes, so it can travel through an exchange of bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, bytemuck::Pod, bytemuck::Zeroable)]
pub struct IpcHandle {
    pub bytes: [u8; IPC_HANDLE_BYTES],
}

impl IpcHandle {
    fn from_raw(raw: &sys::CUipcMemHandle) -> Self {
        Self {
            bytes: raw.reserved.map(|b| b as u8),
        }
    }

    fn to_raw(self) -> sys::CUipcMemHandle {
        sys::CUipcMemHandle {
            reserved: self.bytes.map(|b| b as c_char),
        }
    }
}

/// The staging allocations are sized in steps of this many bytes, so a
/// share that grows by a little does not reallocate every time.
const STAGING_STEP: usize = 2 << 20;

/// A plain (`cuMemAlloc`) allocation and its exported handle.
struct Staging {
    ptr: sys::CUdeviceptr,
    bytes: usize,
    handle: IpcHandle,
}

/// A peer's allocation mapped into this context.
struct Opened {
    handle: IpcHandle,
    ptr: sys::CUdeviceptr,
}

/// One device's side of CUDA IPC exchanges: its exportable staging
/// allocation (grown on demand, kept across exchanges) and the peers'
/// allocations it has opened, by rank. Each [`Gpu`] holds one
/// ([`Gpu::ipc`]); dropping it closes the mappings and frees the
/// allocations.
pub struct IpcExchange {
    /// The context everything below lives in, bound on drop.
    context: Arc<CudaContext>,
    staging: Option<Staging>,
    /// Staging allocations replaced by larger ones, which peers may still
    /// have mapped: freed by [`IpcExchange::release_retired`].
    retired: Vec<sys::CUdeviceptr>,
    opened: HashMap<usize, Opened>,
}

impl IpcExchange {
    pub(crate) fn new(context: Arc<CudaContext>) -> Self {
        Self {
            context,
            staging: None,
            retired: Vec::new(),
            opened: HashMap::new(),
        }
    }

    /// Copies the elements `range` of `source` to the start of the
    /// staging allocation (growing it first if they do not fit) and waits
    /// for the copy, so that a peer may read them as soon as it has the
    /// returned handle; `None` when nothing was ever staged (an empty
    /// range and no allocation yet: there is nothing for a peer to read).
    pub fn stage<T: Pod>(
        &mut self,
        source: &DeviceBuffer<T>,
        range: std::ops::Range<usize>,
    ) -> Result<Option<IpcHandle>, GpuError> {
        let gpu = source.gpu();
        self.expect_device(gpu)?;
        if range.start > range.end || range.end > source.len() {
            return Err(GpuError::LengthMismatch {
                operation: "IpcExchange::stage",
                what: "range end",
                expected: source.len(),
                actual: range.end.max(range.start),
            });
        }
        let bytes = range.len() * size_of::<T>();
        if bytes == 0 && self.staging.is_none() {
            return Ok(None);
        }
        gpu.bind()?;
        let staging = self.reserve(gpu, bytes)?;
        let (ptr, handle) = (staging.ptr, staging.handle);
        if bytes > 0 {
            let from = source.device_ptr() + (range.start * size_of::<T>()) as u64;
            // SAFETY: the context is current; `from .. from + bytes` lies
            // inside `source` (checked above) and the staging allocation
            // holds at least `bytes` (reserved above); they are distinct
            // allocations (pool and plain).
            unsafe { sys::cuMemcpyDtoDAsync_v2(ptr, from, bytes, gpu.raw_stream()) }
                .result()
                .map_err(GpuError::driver("staging a buffer for other processes"))?;
        }
        gpu.synchronize()?;
        Ok(Some(handle))
    }

    /// A staging allocation of at least `bytes` (> 0 unless one exists):
    /// the current one, or a larger new one whose predecessor is retired.
    fn reserve(&mut self, gpu: &Gpu, bytes: usize) -> Result<&Staging, GpuError> {
        let fits = self.staging.as_ref().is_some_and(|s| s.bytes >= bytes);
        if !fits {
            let size = bytes
                .max(self.staging.as_ref().map_or(0, |s| s.bytes + s.bytes / 2))
                .max(1)
                .next_multiple_of(STAGING_STEP);
            let staging = allocate_exported(gpu, size)?;
            if let Some(old) = self.staging.replace(staging) {
                self.retired.push(old.ptr);
            }
        }
        self.staging.as_ref().ok_or(GpuError::Invalid {
            what: "IPC staging",
            message: "no staging allocation after reserving one".into(),
        })
    }

    /// Rank `rank`'s allocation `handle`, mapped into this device's
    /// context (`cuIpcOpenMemHandle` with lazy peer access), as a
    /// [`PeerHandle`] of `bytes` bytes from its start, which
    /// [`DeviceBuffer::copy_from_peer`] copies from. The mapping is kept
    /// for the next exchange; a different handle from the same rank (its
    /// staging grew) closes the old mapping first.
    pub fn open(
        &mut self,
        gpu: &Gpu,
        rank: usize,
        handle: &IpcHandle,
        bytes: u64,
    ) -> Result<PeerHandle, GpuError> {
        self.expect_device(gpu)?;
        gpu.bind()?;
        let context = gpu.context().cu_ctx() as u64;
        if let Some(open) = self.opened.get(&rank)
            && open.handle == *handle
        {
            return Ok(PeerHandle {
                ptr: open.ptr,
                context,
                bytes,
            });
        }
        if let Some(old) = self.opened.remove(&rank) {
            close(old.ptr)?;
        }
        let mut ptr = 0;
        // SAFETY: the context is current; `ptr` is valid for a write; the
        // handle is plain bytes that the driver checks (a foreign or stale
        // handle is an error, not a mapping).
        unsafe {
            sys::cuIpcOpenMemHandle_v2(
                &mut ptr,
                handle.to_raw(),
                sys::CUipcMem_flags::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS as u32,
            )
        }
        .result()
        .map_err(GpuError::driver("opening another process's GPU memory"))?;
        self.opened.insert(
            rank,
            Opened {
                handle: *handle,
                ptr,
            },
        );
        Ok(PeerHandle {
            ptr,
            context,
            bytes,
        })
    }

    /// Frees the staging allocations that larger ones replaced. Call it
    /// only once every peer that may have mapped them has opened the
    /// current handle (closing the old mapping) and finished reading.
    pub fn release_retired(&mut self) -> Result<(), GpuError> {
        if self.retired.is_empty() {
            return Ok(());
        }
        self.context
            .bind_to_thread()
            .map_err(GpuError::driver("making the context current"))?;
        for ptr in self.retired.drain(..) {
            // SAFETY: `ptr` came from `cuMemAlloc` in this context and is
            // freed once (drained); nothing of this process uses it since
            // it was retired, and the caller vouches for the peers.
            unsafe { sys::cuMemFree_v2(ptr) }
                .result()
                .map_err(GpuError::driver("freeing a retired IPC staging buffer"))?;
        }
        Ok(())
    }

    /// Bytes of the staging allocation (0 before the first stage).
    pub fn staging_bytes(&self) -> usize {
        self.staging.as_ref().map_or(0, |s| s.bytes)
    }

    fn expect_device(&self, gpu: &Gpu) -> Result<(), GpuError> {
        if gpu.context().cu_ctx() == self.context.cu_ctx() {
            Ok(())
        } else {
            Err(GpuError::Invalid {
                what: "IPC exchange",
                message: "a buffer of another device than the exchange's".into(),
            })
        }
    }
}

impl Drop for IpcExchange {
    fn drop(&mut self) {
        // Errors cannot be returned from drop: a failed close or free
        // leaks until the process ends.
        if self.context.bind_to_thread().is_err() {
            return;
        }
        for (_, open) in self.opened.drain() {
            let _ = close(open.ptr);
        }
        let staged = self.staging.take().map(|s| s.ptr);
        for ptr in self.retired.drain(..).chain(staged) {
            // SAFETY: each pointer came from `cuMemAlloc` in this context
            // and is freed once; every copy from or into it was waited for
            // (`stage` and the exchanges synchronise).
            let _ = unsafe { sys::cuMemFree_v2(ptr) };
        }
    }
}

/// A plain `cuMemAlloc` allocation of `bytes` and its exported handle.
fn allocate_exported(gpu: &Gpu, bytes: usize) -> Result<Staging, GpuError> {
    let mut ptr = 0;
    // SAFETY: the context is current (the caller bound it); `ptr` is valid
    // for a write.
    unsafe { sys::cuMemAlloc_v2(&mut ptr, bytes) }
        .result()
        .map_err(|e| {
            if e.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
                let (free, total) = gpu.memory().unwrap_or((0, 0));
                GpuError::OutOfMemory {
                    what: "IPC staging buffer",
                    bytes,
                    free,
                    total,
                }
            } else {
                GpuError::driver("allocating an IPC staging buffer")(e)
            }
        })?;
    let mut raw = sys::CUipcMemHandle {
        reserved: [0; IPC_HANDLE_BYTES],
    };
    // SAFETY: `raw` is valid for a write; `ptr` is a live plain allocation
    // of this context (exportable, unlike pool allocations).
    let exported = unsafe { sys::cuIpcGetMemHandle(&mut raw, ptr) }.result();
    if let Err(e) = exported {
        // SAFETY: `ptr` was allocated just above and is used by nothing.
        let _ = unsafe { sys::cuMemFree_v2(ptr) };
        return Err(GpuError::driver("exporting GPU memory to other processes")(
            e,
        ));
    }
    Ok(Staging {
        ptr,
        bytes,
        handle: IpcHandle::from_raw(&raw),
    })
}

/// Unmaps a peer's allocation opened in the current context.
fn close(ptr: sys::CUdeviceptr) -> Result<(), GpuError> {
    // SAFETY: `ptr` came from `cuIpcOpenMemHandle` in the current context
    // and is closed once (its record was removed); every copy from it was
    // waited for before the exchange that opened it ended.
    unsafe { sys::cuIpcCloseMemHandle(ptr) }
        .result()
        .map_err(GpuError::driver("closing another process's GPU memory"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_keep_every_byte_through_the_drivers_type() {
        let mut bytes = [0u8; IPC_HANDLE_BYTES];
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = (i * 37 + 200) as u8;
        }
        let handle = IpcHandle { bytes };
        assert_eq!(IpcHandle::from_raw(&handle.to_raw()), handle);
        assert_eq!(bytemuck::bytes_of(&handle), &bytes[..]);
    }
}
