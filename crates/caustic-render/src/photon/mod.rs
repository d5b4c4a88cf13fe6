//! Photon mapping, first pass: photons shot from the lights and stored on
//! diffuse surfaces (Jensen, "Realistic Image Synthesis Using Photon
//! Mapping", 2001; the GPU formulation of Zeidan 2011 §15, and
//! the maps of Fleisz 2009 §2.1).
//!
//! - [`emit`]: each light is a photon source chosen by power; area lights
//!   emit cosine-distributed photons from uniformly chosen points on their
//!   emitting side, point lights uniformly over the sphere, spot lights
//!   inside their cone weighted by the falloff, directional lights from a
//!   disc covering the scene;
//! - [`trace`]: photons bounce until absorbed (Russian roulette by albedo
//!   at diffuse surfaces), are stored at diffuse surfaces only, and go to a
//!   **global map** and a **caustic map** (`L S+ D` paths); parallel with
//!   rayon and deterministic for a seed and photon count whatever the
//!   thread count;
//! - [`record`]: the 32-byte [`Photon`] record;
//! - [`map`]: a photon list plus a point structure from
//!   `caustic_accel::points` over its positions, queried by photon index.
//!
//!
//! Second pass, the image (`render`, `caustic render --integrator
//! photon`): direct light by shadow rays, specular chains by ray tracing,
//! caustics by the radiance estimate of [`estimate`] in the caustic map,
//! indirect light by a final gather ([`gather`]) at irradiance samples
//! placed adaptively in screen space and interpolated
//! ([`irradiance_samples`]), or by the global map directly.
//!
//! On a CUDA GPU ([`trace_cuda`], [`render_cuda`]): the same photon passes
//! as a wavefront with stream compaction, hash-grid maps, and the eye pass
//! of the wavefront Whitted renderer with the radiance estimates added at
//! its diffuse hits (global-map mode).
//!
//! Powers are normalised by the number of photons **emitted** (not
//! stored), so a density estimate `Σ f·ΔΦ / (π r²)` is unbiased in the
//! photon-count limit.

pub mod emit;
pub mod estimate;
#[cfg(feature = "cuda")]
pub mod estimate_cuda;
pub mod gather;
#[cfg(feature = "cuda")]
pub mod gather_cuda;
pub mod irradiance_samples;
#[cfg(feature = "cuda")]
pub mod irradiance_samples_cuda;
pub mod map;
pub mod precomputed;
pub mod record;
#[cfg(feature = "cuda")]
pub mod records_cuda;
pub mod render;
#[cfg(feature = "cuda")]
pub mod render_cuda;
pub mod trace;
#[cfg(feature = "cuda")]
pub mod trace_cuda;

pub use emit::PhotonSources;
pub use map::PhotonMap;
pub use record::Photon;
pub use render::{
    PhotonRenderError, PhotonRenderSettings, PhotonRenderStats, render, render_in_team,
};
#[cfg(feature = "cuda")]
pub use render_cuda::render_cuda_in_team;
pub use trace::{
    GlobalRule, PhotonMaps, PhotonSettings, PhotonStats, RouletteRule, trace_caustic_photons,
    trace_photon_range, trace_photons,
};
