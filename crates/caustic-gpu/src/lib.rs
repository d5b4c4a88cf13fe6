//! caustic-gpu: the CUDA backend of caustic, on cudarc with the driver and
//! NVRTC loaded at run time, so the crate builds and its CPU paths run on a
//! machine with no CUDA at all.
//!
//! - [`Gpu`]: a safe probe (a missing driver, NVRTC or device is an error,
//!   never a panic), the device's facts, one stream, launches.
//! - [`Device`] and [`select`]: `--device auto|cpu|cuda|cuda:N`.
//! - [`DeviceBuffer`]: typed device memory, allocation failures named.
//! - [`kernels`]: the `.cu` modules in `kernels/`, their kernel names as
//!   generated constants; [`compile`]: NVRTC compilation for the device's
//!   architecture, cached per process and loaded once per device.
//! - [`ops`]: data-parallel primitives (reduce, scan, compact, split, radix
//!   sort, segment utilities), each with a CPU twin in [`ops::cpu`].
//! - [`bvh`], [`trace`], [`rays`]: a `Bvh2` on the device in the CPU's node
//!   layout ([`layout`] checks the CUDA structs against the Rust ones), its
//!   closest-hit and any-hit traversal (Aila and Laine's persistent
//!   while-while), and the ray protocol's rays generated on the device; hits
//!   equal the CPU traversal's bit for bit.
//! - [`points`]: photon-map neighbour search: the spatial hash grid of
//!   seed 003 and brute-force kNN, answers equal to the CPU reference.
//! - [`point_kdtree`]: the photon kd-tree of seed 002 built on the device
//!   (large nodes level by level with empty-space cuts and spatial medians,
//!   small roots by the VVH, one warp each), equal to the CPU's; kNN and
//!   radius queries.
//! - [`photon`]: the device records and kernels of the GPU photon mapper
//!   (photon wavefront with stream compaction, radiance estimates in
//!   hash-grid maps; `caustic_render::photon::trace_cuda`, `render_cuda`).
//! - [`sppm`]: the device records and kernels of GPU stochastic progressive
//!   photon mapping (`caustic_render::sppm::renderer_cuda`).
//! - [`bench`]: the benchmarks behind `caustic bench gpu` (primitives
//!   against the copy ceiling, trace throughput on the ray protocol).
//! - [`whitted`]: the device records and kernels of the wavefront Whitted
//!   renderer (`caustic_render::whitted_cuda`).
//!
//! Set `CAUSTIC_GPU_SYNC=1` to synchronise after every launch, so that a
//! kernel fault is reported as [`GpuError::Launch`] naming that kernel.

pub mod bench;
pub mod buffer;
pub mod bvh;
pub mod compile;
pub mod context;
pub mod device;
pub mod error;
pub mod irradiance;
pub mod kernels;
pub mod layout;
pub mod ops;
pub mod photon;
pub mod point_kdtree;
pub mod points;
pub mod rays;
pub mod sppm;
pub mod trace;
pub mod whitted;

pub use buffer::DeviceBuffer;
pub use bvh::{DeviceBvh, GpuTriangle};
pub use compile::ComputeCapability;
pub use context::{DeviceInfo, Gpu, device_count, driver_available};
pub use device::{Device, Selection, select};
pub use error::GpuError;
pub use kernels::{Kernel, ModuleId};
pub use rays::{PrimaryCamera, SecondaryRays};
pub use trace::{GpuHit, GpuRay, Tracer};
