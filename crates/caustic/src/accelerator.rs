//! Ray queries: build a structure over triangles on a device, then trace
//! batches of rays, closest hit or any hit.
//!
//! Every structure on every device gives the same answers (the query
//! contract of `caustic_accel`): the smallest `t` strictly inside
//! `(ray.tmin, ray.tmax)` by the watertight ray/triangle test of Woop,
//! Benthin and Wald (JCGT 2013), ties to the lowest triangle index, and
//! `Hit::prim` the triangle's index in the slice the structure was built
//! from. Rays with a non-finite origin or direction, a zero direction or
//! an empty interval miss.

use crate::accel::{AccelKind, AccelStats};
use crate::device::{Backend, Device};
use crate::error::Result;
use caustic_accel::Accel;
use caustic_geom::{Hit, Ray, Triangle};

/// An acceleration structure built on a device, answering batches of ray
/// queries there.
///
/// ```
/// use caustic::{AccelKind, Accelerator, Device, Ray, Triangle, Vec3};
///
/// let triangles = [Triangle::new(Vec3::ZERO, Vec3::X, Vec3::Y)];
/// let accel = Accelerator::build(&triangles, AccelKind::default(), Device::Cpu)?;
/// let rays = [
///     Ray::new(Vec3::new(0.25, 0.25, 1.0), -Vec3::Z),
///     Ray::new(Vec3::new(2.0, 2.0, 1.0), -Vec3::Z),
/// ];
/// let hits = accel.intersect(&rays)?;
/// assert_eq!(hits[0].map(|h| (h.prim, h.t)), Some((0, 1.0)));
/// assert!(hits[1].is_none());
/// assert_eq!(accel.occluded(&rays)?, [true, false]);
/// assert_eq!(accel.stats().prims, 1);
/// # Ok::<(), caustic::Error>(())
/// ```
pub struct Accelerator {
    structure: Structure,
    backend: Backend,
}

/// Where the structure lives.
enum Structure {
    Cpu(Box<dyn Accel>),
    /// Boxed: the device buffers and tracer are ten times the CPU
    /// variant's size.
    #[cfg(feature = "cuda")]
    Gpu(Box<crate::accelerator_cuda::GpuAccel>),
}

impl Accelerator {
    /// Builds `kind` over `triangles` for `device`.
    ///
    /// On a GPU, binary BVHs are built on the device by the GPU builder of
    /// the same name, or on the CPU and uploaded where there is none
    /// (`bvh-sweep`); `bvh-wide` collapses the binary tree of its `from`
    /// (see [`AccelKind::gpu_tree`]).
    /// The kd-tree and the grid are built and traced on the device too.
    /// Brute force runs on the CPU only: `Auto` takes the CPU for it (and
    /// says so in [`Accelerator::note`]), an explicit `Cuda` is an error.
    pub fn build(triangles: &[Triangle], kind: AccelKind, device: Device) -> Result<Self> {
        let backend = if kind.runs_on_gpu() {
            device.resolve()?
        } else {
            device.cpu_only(
                kind.name(),
                "the GPU traces BVHs (lbvh, hlbvh, ploc, bvh-binned and bvh-binned-staged built there, bvh-wide collapsed there, bvh-sweep built on the CPU and uploaded), the kd-tree and the uniform grid",
            )?
        };
        let structure = Self::build_on(&backend, triangles, kind)?;
        Ok(Self { structure, backend })
    }

    #[cfg(feature = "cuda")]
    fn build_on(backend: &Backend, triangles: &[Triangle], kind: AccelKind) -> Result<Structure> {
        let Some(gpu) = backend.gpu() else {
            return Ok(Structure::Cpu(kind.build(triangles)?));
        };
        match crate::accelerator_cuda::gpu_spec(&kind)? {
            Some(spec) => Ok(Structure::Gpu(Box::new(
                crate::accelerator_cuda::GpuAccel::build(gpu, triangles, &spec)?,
            ))),
            None => Ok(Structure::Cpu(kind.build(triangles)?)),
        }
    }

    #[cfg(not(feature = "cuda"))]
    fn build_on(_: &Backend, triangles: &[Triangle], kind: AccelKind) -> Result<Structure> {
        Ok(Structure::Cpu(kind.build(triangles)?))
    }

    /// The closest hit of every ray, in ray order (`None`: a miss). On the
    /// CPU this runs on rayon's pool; on a GPU it is one upload, one
    /// launch and one download.
    pub fn intersect(&self, rays: &[Ray]) -> Result<Vec<Option<Hit>>> {
        match &self.structure {
            Structure::Cpu(accel) => {
                let mut hits = vec![None; rays.len()];
                accel.intersect_batch(rays, &mut hits);
                Ok(hits)
            }
            #[cfg(feature = "cuda")]
            Structure::Gpu(accel) => accel.intersect(rays),
        }
    }

    /// For every ray, whether anything lies in `(tmin, tmax)`: shadow and
    /// visibility rays, which stop at the first hit found.
    pub fn occluded(&self, rays: &[Ray]) -> Result<Vec<bool>> {
        match &self.structure {
            Structure::Cpu(accel) => {
                let mut out = vec![false; rays.len()];
                accel.occluded_batch(rays, &mut out);
                Ok(out)
            }
            #[cfg(feature = "cuda")]
            Structure::Gpu(accel) => accel.occluded(rays),
        }
    }

    /// Build time, SAH cost (`C_trav = C_isect = 1`, over the root's
    /// area), nodes, leaves and bytes. On a GPU: those of the structure
    /// built there (its device build time, its peak device memory).
    pub fn stats(&self) -> &AccelStats {
        match &self.structure {
            Structure::Cpu(accel) => accel.stats(),
            #[cfg(feature = "cuda")]
            Structure::Gpu(accel) => accel.stats(),
        }
    }

    /// Whether the queries run on a GPU.
    pub fn is_gpu(&self) -> bool {
        !matches!(self.structure, Structure::Cpu(_))
    }

    /// The device the queries run on, resolved.
    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    /// One line saying where the queries run and, for `Auto`, why.
    pub fn note(&self) -> &str {
        self.backend.note()
    }
}
