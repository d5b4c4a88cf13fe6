//! Renderers of caustic and what they share.
//!
//! - [`RenderScene`]: a [`caustic_scene::Scene`] flattened for tracing: one
//!   triangle array in scene numbering, an acceleration structure over it,
//!   per-triangle materials and shading attributes, and the area lights
//!   gathered from emissive triangles.
//! - [`PinholeCamera`]: primary rays, the exact convention of the Mitsuba
//!   references and the ray protocol.
//! - [`whitted`]: the Whitted ray tracer (specular chains from the eye, then
//!   direct light with shadow rays), parallel over Morton-ordered tiles,
//!   and the same renderer as a CUDA wavefront (`whitted::render_cuda`,
//!   feature `cuda`), same image.
//! - [`photon`]: photon mapping (photon tracing, global and caustic maps,
//!   radiance estimates, final gather at adaptive irradiance samples), on
//!   the CPU and the GPU.
//! - [`draw`]: the counter-based random numbers every renderer draws from,
//!   on both devices; `scene_cuda` (feature `cuda`): the scene on the GPU
//!   that every CUDA renderer shares.
//! - [`sppm`]: stochastic progressive photon mapping, the consistent
//!   global-illumination renderer (eye passes, a hash grid over visible
//!   points, photon passes, per-pixel radius reduction).
//! - [`team`]: one render shared by several processes (MPI ranks) or
//!   threads, bit-identical to a single process's.
//! - [`waves`]: every CPU renderer traces one ray at a time or, for
//!   structures that prefer batches (DACRT), by waves of batched queries,
//!   with the same image ([`TraceMode`]); `specular_tree` holds the eye
//!   samples' specular trees that the Whitted and photon renderers share.
//! - [`Film`] and [`image_io`]: linear radiance images, EXR and sRGB PNG
//!   output, and image metrics (RMSE, PSNR) for comparisons.

pub mod bsdf;
mod camera;
pub mod direct;
#[cfg(feature = "cuda")]
mod download_cuda;
pub mod draw;
mod film;
pub mod image_io;
#[cfg(feature = "cuda")]
pub mod kernels;
#[cfg(feature = "cuda")]
mod layout_cuda;
mod lights;
pub mod photon;
#[cfg(feature = "cuda")]
pub mod scene_cuda;
mod scene_data;
mod specular_tree;
pub mod sppm;
pub mod team;
#[cfg(feature = "cuda")]
pub mod team_cuda;
pub mod tiles;
#[cfg(feature = "cuda")]
mod wavefront_cuda;
pub mod waves;
pub mod whitted;

pub use camera::PinholeCamera;
pub use film::Film;
pub use lights::{AreaLight, LightSample};
pub use scene_data::{MeshLayout, RenderScene, SurfaceHit};
pub use waves::TraceMode;
pub use whitted::{FresnelMode, RenderStats, WhittedSettings};
