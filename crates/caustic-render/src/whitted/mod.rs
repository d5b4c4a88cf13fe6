//! The Whitted ray tracer: specular chains from the eye, direct light by
//! shadow rays at the first diffuse or glossy hit ([`render`], rayon over
//! Morton-ordered tiles, one ray at a time or, for structures that prefer
//! batches, by wavefronts of batched queries with the same image:
//! [`TraceMode`](crate::waves::TraceMode), `wavefront.rs`), and the same renderer as a CUDA wavefront with
//! stream compaction ([`render_cuda`], kernels in `render.cu`), which
//! draws the same random numbers ([`crate::draw`]) and gives the same image.

mod render;
#[cfg(feature = "cuda")]
pub mod render_cuda;
mod wavefront;

pub use render::*;
#[cfg(feature = "cuda")]
pub use render_cuda::render_cuda_in_team;
