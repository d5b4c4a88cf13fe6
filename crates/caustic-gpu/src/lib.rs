//! caustic-gpu: the CUDA backend of caustic, on cudarc with the driver and
//! NVRTC loaded at run time, so the crate builds and its CPU paths run on a
//! machine with no CUDA at all.
//!
//! - [`Gpu`]: a safe probe (a missing driver, NVRTC or device is an error,
//!   never a panic), the device's facts, one stream, launches.
//! - [`Device`] and [`select`]: `--device auto|cpu|cuda|cuda:N`.
//! - [`DeviceBuffer`]: typed device memory, allocation failures named.
//! - [`IpcExchange`]: device memory shared with other processes of the
//!   node (CUDA IPC), for GPU ranks of an MPI job.
//! - [`Module`], [`Kernel`]: CUDA modules and kernels typed by their
//!   parameter lists (generated from the `.cu` sources by
//!   `caustic-gpu-build`), launched with [`Gpu::launch`] on tuples of
//!   [`DevicePtr`]s and scalars checked against that list at compile time;
//!   [`compile`]: NVRTC compilation for the device's architecture, cached
//!   per process and loaded once per device.
//! - [`RUNTIME_HEADERS`]: the device code every module may include
//!   (`common.cuh`: vector math, boxes, Morton codes; the block and
//!   tile-scan helpers; `layout_check.cuh` with [`layout`], which checks
//!   CUDA structs against their Rust twins).
//! - [`ops`]: data-parallel primitives (reduce, scan, compact, split, radix
//!   sort, segment utilities), each with a CPU twin in [`ops::cpu`].
//! - [`taskpool`]: the task pool of persistent warps (Vinkler et al.
//!   2013): the device runtime `task_pool.cuh` that other crates' kernels
//!   include, its host side [`taskpool::TaskPool`] and a self-test.
//! - `bench`: the timing rules of every GPU benchmark and the primitives
//!   measured against the copy ceiling.
//!
//! This crate is the runtime only. Each algorithm's CUDA host code and
//! kernels live next to its CPU version, behind the `cuda` feature of its
//! crate: the BVH upload and traversal, the device ray generation and the
//! point structures in `caustic-accel`; the Whitted, photon-mapping and
//! SPPM renderers in `caustic-render`.
//!
//! Set `CAUSTIC_GPU_SYNC=1` to synchronise after every launch, so that a
//! kernel fault is reported as [`GpuError::Launch`] naming that kernel.

pub mod bench;
pub mod buffer;
pub mod compile;
pub mod context;
pub mod device;
pub mod disk_cache;
pub mod error;
pub mod ipc;
pub mod kernel;
pub mod kernels;
pub mod layout;
pub mod ops;
pub mod pinned;
pub mod taskpool;
pub mod trace;

pub use buffer::{DeviceBuffer, PeerHandle};
pub use compile::ComputeCapability;
pub use context::{DeviceInfo, Gpu, StageClock, StreamPriority, device_count, driver_available};
pub use device::{Device, Selection, select};
pub use error::GpuError;
pub use ipc::{IpcExchange, IpcHandle};
pub use kernel::{DevicePtr, DevicePtrMut, HeaderSet, Kernel, Module, Ptr, PtrMut, Signature};
pub use kernels::HEADERS as RUNTIME_HEADERS;
pub use pinned::{PinnedBuffer, upload_ranges};
