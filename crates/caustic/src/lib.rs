//! caustic from Rust: parallel ray tracing and photon-mapped global
//! illumination on multi-core CPUs and NVIDIA GPUs, behind one small typed
//! interface.
//!
//! Two entry points, each taking a [`Device`]:
//!
//! - **Rendering**: [`Renderer`] takes a [`Scene`], an acceleration
//!   structure ([`AccelKind`]) and a device, and renders with an
//!   [`Integrator`] — Whitted ray tracing, photon mapping or stochastic
//!   progressive photon mapping, each with typed settings — into a
//!   [`Film`] of linear radiance, which [`image_io::write_image`] saves as
//!   EXR (linear) or PNG (sRGB).
//! - **Ray queries**: [`Accelerator`] builds a structure over triangles and
//!   traces batches of rays: closest hit ([`Accelerator::intersect`]) or
//!   any hit ([`Accelerator::occluded`]).
//!
//! ```
//! use caustic::{
//!     AccelKind, Accelerator, Device, Integrator, PhotonSettings, Ray, Renderer, Vec3,
//! };
//!
//! let scene = caustic::load_scene("cornell-box")?;
//!
//! // Ray queries: one ray from the camera into the box.
//! let accel = Accelerator::build(&scene.triangles(), AccelKind::default(), Device::Cpu)?;
//! let camera = scene.camera_or_default();
//! let ray = Ray::new(camera.eye, camera.target - camera.eye);
//! let hit = accel.intersect(&[ray])?[0].expect("the camera looks at the box");
//! assert!(hit.t > 0.0);
//!
//! // Rendering: photon mapping, a tiny image.
//! let settings = PhotonSettings {
//!     width: 16,
//!     height: 16,
//!     spp: 1,
//!     global_photons: 2_000,
//!     caustic_photons: 2_000,
//!     gather_rays: 16,
//!     ..PhotonSettings::default()
//! };
//! let image = Renderer::new(&scene)
//!     .device(Device::Cpu)
//!     .render(&camera, &Integrator::Photon(settings))?;
//! assert_eq!(image.film.pixels.len(), 16 * 16);
//! # Ok::<(), caustic::Error>(())
//! ```
//!
//! `examples/quickstart.rs` does the whole round trip (load, build, trace,
//! render, save): `cargo run --release -p caustic --example quickstart`.
//!
//! # Devices
//!
//! [`Device`] is `Auto`, `Cpu` or `Cuda(n)` and parses from `auto`, `cpu`,
//! `cuda`, `cuda:N`. `Auto` takes the GPU when a CUDA driver, NVRTC and a
//! device are present, the CPU otherwise, and says which in one line
//! ([`Backend::note`], [`Rendered::note`], [`Accelerator::note`]) for the
//! caller to print or drop. An explicit `Cuda(n)` that cannot be had is an
//! [`Error`], never a panic. On a GPU the renderers trace a structure built
//! on the device (`Renderer::gpu_accel_spec`, feature `cuda`: `ploc` unless told
//! otherwise); one the GPU does not build keeps `Auto` on the CPU, with the
//! reason in the note. The CPU work runs on rayon's global pool; size
//! it with `rayon::ThreadPoolBuilder` before the first render.
//!
//! # Features
//!
//! - `cuda` (default): the GPU backend, through cudarc, which loads the
//!   CUDA driver and NVRTC at run time (nothing CUDA is needed to build).
//!   Without it (`default-features = false`) caustic is CPU-only and does
//!   not depend on cudarc; `Device::Cuda` is then an error naming the
//!   feature.
//!
//! # Determinism
//!
//! Every random decision is keyed by what it decides (pixel, sample,
//! branch, photon index), so an image depends neither on the thread count
//! nor on the photon-map structure, and the GPU renderers draw the same
//! numbers as the CPU ones.

mod accelerator;
#[cfg(feature = "cuda")]
mod accelerator_cuda;
mod device;
mod error;
mod integrator;
mod renderer;

pub mod accel;

pub use accel::{AccelKind, AccelStats};
pub use accelerator::Accelerator;
pub use device::{Backend, Device, GpuSet};
pub use error::{Error, Result};
pub use integrator::{
    FresnelMode, Integrator, PassJitter, PhotonMapKind, PhotonRenderStats, PhotonSettings,
    RenderStats, SampleSettings, SppmSettings, SppmStats, Stats, TraceMode, WhittedSettings,
};
pub use renderer::{FrameCarry, FrameUpdate, Progress, Rendered, Renderer, SppmPass};

pub use caustic_accel::bvh::{UpdateAction, UpdatePolicy};
pub use caustic_geom::{Hit, Ray, Rgb, Triangle, Vec3};
pub use caustic_render::{Film, PinholeCamera, RenderScene, image_io, team};
pub use caustic_scene::{BUILTIN_SCENES, Camera, FovAxis, Light, Scene};

use std::path::Path;

/// Loads a scene file (`.obj`, `.ply`, `.gltf`, `.glb`, Mitsuba `.xml`,
/// BART's `.aff`, or a numbered sequence such as `frames/frame_####.obj`),
/// or makes the built-in scene of that name (`cornell-box`,
/// `cornell-caustics`) when no such file exists. Loader warnings are in
/// [`Scene::warnings`].
///
/// ```
/// let scene = caustic::load_scene("cornell-caustics")?;
/// assert!(scene.triangle_count() > 40_000);
/// assert!(caustic::load_scene("no-such-scene").is_err());
/// # Ok::<(), caustic::Error>(())
/// ```
pub fn load_scene(name_or_path: impl AsRef<Path>) -> Result<Scene> {
    let path = name_or_path.as_ref();
    if path.exists() || Scene::is_sequence_pattern(path) {
        return Ok(Scene::load(path)?);
    }
    if let Some(scene) = path.to_str().and_then(Scene::builtin) {
        return Ok(scene);
    }
    let builtins: Vec<&str> = BUILTIN_SCENES.iter().map(|(name, _)| *name).collect();
    Err(Error::NoScene {
        name: path.display().to_string(),
        builtins: builtins.join(", "),
    })
}
