//! Renderers of caustic and what they share.
//!
//! - [`RenderScene`]: a [`caustic_scene::Scene`] flattened for tracing: one
//!   triangle array in scene numbering, an acceleration structure over it,
//!   per-triangle materials and shading attributes, and the area lights
//!   gathered from emissive triangles.
//! - [`PinholeCamera`]: primary rays, the exact convention of the Mitsuba
//!   references and the ray protocol.
//! - [`whitted`]: the Whitted ray tracer (specular chains from the eye, then
//!   direct light with shadow rays), parallel over Morton-ordered tiles;
//!   [`whitted_cuda`]: the same renderer as a CUDA wavefront, same image.
//! - [`sppm`]: stochastic progressive photon mapping, the consistent
//!   global-illumination renderer (eye passes, a hash grid over visible
//!   points, photon passes, per-pixel radius reduction).
//! - [`Film`] and [`image_io`]: linear radiance images, EXR and sRGB PNG
//!   output, and image metrics (RMSE, PSNR) for comparisons.

pub mod bsdf;
mod camera;
pub mod direct;
mod film;
pub mod image_io;
mod lights;
pub mod photon;
mod scene_data;
pub mod sppm;
pub mod tiles;
pub mod whitted;
pub mod whitted_cuda;

pub use camera::PinholeCamera;
pub use film::Film;
pub use lights::{AreaLight, LightSample};
pub use scene_data::{RenderScene, SurfaceHit};
pub use whitted::{FresnelMode, RenderStats, WhittedSettings};
