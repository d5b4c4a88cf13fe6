//! Acceleration structures of caustic and the one interface they share,
//! [`Accel`]: closest-hit and any-hit ray queries, single and batched, plus
//! build statistics.
//!
//! - [`bvh`]: the binary BVH ([`Bvh2`]) as plain data, its builders
//!   ([`bvh::build`], starting with the binned SAH builder `bvh-binned`), its
//!   traversal ([`bvh::traverse`]) and [`TriangleBvh`], the traceable
//!   triangle accel;
//! - [`BruteForce`]: every triangle for every ray, the reference for tests;
//! - [`registry`]: the names the CLI, tests and benchmarks loop over.
//!
//! Query contract, identical for every accel (tests compare them with
//! [`BruteForce`] bit for bit): a hit is the smallest `t` strictly inside
//! `(ray.tmin, ray.tmax)` found by the watertight triangle test of
//! `caustic-geom`, ties going to the lowest scene id; `Hit::prim` is the
//! triangle's index in the slice the accel was built from. `occluded` is
//! true exactly when such a hit exists. Rays that cannot be traced (see
//! [`is_traceable`]) miss. Nothing panics on degenerate geometry.

mod brute_force;
mod build_input;
pub mod bvh;
pub mod collision;
#[cfg(feature = "cuda")]
pub mod collision_cuda;
pub mod dacrt;
pub mod grid;
pub mod kdtree;
#[cfg(feature = "cuda")]
pub mod kernels;
#[cfg(feature = "cuda")]
mod layout_cuda;
pub mod points;
#[cfg(feature = "cuda")]
pub mod protocol_cuda;
pub mod registry;
mod slab_ray;

pub use brute_force::BruteForce;
pub use build_input::BuildInput;
pub use bvh::{Bvh2, BvhNode, TriangleBvh, sah_cost};
pub use registry::{
    ACCEL_NAMES, ACCEL_PARAMS, AccelSpecError, UnknownAccel, build_accel, check_spec,
};

use caustic_geom::{Hit, Ray, Vec3};
use rayon::prelude::*;

/// Rays per rayon task in the default batch queries.
const BATCH_CHUNK: usize = 256;

/// A structure that answers ray queries over a fixed set of triangles.
pub trait Accel: Send + Sync {
    /// The closest hit in `(ray.tmin, ray.tmax)`, ties to the lowest id.
    fn intersect(&self, ray: &Ray) -> Option<Hit>;

    /// Whether any hit lies in `(ray.tmin, ray.tmax)` (shadow rays).
    fn occluded(&self, ray: &Ray) -> bool;

    /// [`Accel::intersect`] for each ray, in parallel; `hits.len()` must equal `rays.len()`.
    fn intersect_batch(&self, rays: &[Ray], hits: &mut [Option<Hit>]) {
        assert_eq!(rays.len(), hits.len(), "one hit slot per ray");
        rays.par_chunks(BATCH_CHUNK)
            .zip(hits.par_chunks_mut(BATCH_CHUNK))
            .for_each(|(rays, hits)| {
                for (ray, hit) in rays.iter().zip(hits) {
                    *hit = self.intersect(ray);
                }
            });
    }

    /// [`Accel::occluded`] for each ray, in parallel; `out.len()` must equal `rays.len()`.
    fn occluded_batch(&self, rays: &[Ray], out: &mut [bool]) {
        assert_eq!(rays.len(), out.len(), "one result slot per ray");
        rays.par_chunks(BATCH_CHUNK)
            .zip(out.par_chunks_mut(BATCH_CHUNK))
            .for_each(|(rays, out)| {
                for (ray, o) in rays.iter().zip(out) {
                    *o = self.occluded(ray);
                }
            });
    }

    /// Whether the structure answers whole batches much faster than one
    /// ray at a time ([`crate::dacrt::Dacrt`], which builds nothing between
    /// batches and answers a single ray by brute force): renderers that can
    /// trace either way (the CPU renderers) then trace wavefronts
    /// through [`Accel::intersect_batch`] and [`Accel::occluded_batch`].
    fn prefers_batches(&self) -> bool {
        false
    }

    fn stats(&self) -> &AccelStats;

    /// The registry name (`bvh-binned`, `brute`, ...).
    fn name(&self) -> &'static str;
}

/// A shared structure traces as the structure itself: an animation hands
/// a renderer an `Arc` of the tree it refits between frames.
impl<A: Accel + ?Sized> Accel for std::sync::Arc<A> {
    fn intersect(&self, ray: &Ray) -> Option<Hit> {
        (**self).intersect(ray)
    }

    fn occluded(&self, ray: &Ray) -> bool {
        (**self).occluded(ray)
    }

    fn intersect_batch(&self, rays: &[Ray], hits: &mut [Option<Hit>]) {
        (**self).intersect_batch(rays, hits);
    }

    fn occluded_batch(&self, rays: &[Ray], out: &mut [bool]) {
        (**self).occluded_batch(rays, out);
    }

    fn prefers_batches(&self) -> bool {
        (**self).prefers_batches()
    }

    fn stats(&self) -> &AccelStats {
        (**self).stats()
    }

    fn name(&self) -> &'static str {
        (**self).name()
    }
}

/// What an accel reports about itself; the benchmark tables print these.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AccelStats {
    pub name: &'static str,
    /// Wall time of the build, from triangles to a traceable structure.
    pub build_ms: f64,
    /// Expected cost with `C_trav = C_isect = 1` over the root's area
    /// ([`sah_cost`]); 0 for structures without a hierarchy.
    pub sah_cost: f32,
    pub nodes: usize,
    pub leaves: usize,
    /// Depth of the deepest leaf (root at 0).
    pub max_depth: usize,
    pub max_leaf_size: usize,
    /// Primitives per leaf.
    pub avg_leaf_size: f32,
    /// Memory held: nodes, indices and triangle copies.
    pub bytes: usize,
    /// Primitives the structure was built over.
    pub prims: usize,
    /// Peak bytes of working memory the build allocated beyond its input
    /// triangles, as counted by the builder itself (its large scratch and
    /// output buffers; see each builder's docs); 0 = not measured.
    pub peak_build_bytes: usize,
}

/// Whether a ray can be traced: finite origin and direction, a non-zero
/// direction and a non-empty interval (`tmin < tmax`, neither NaN; infinite
/// ends are fine). Accels return no hit for other rays.
#[inline]
pub fn is_traceable(ray: &Ray) -> bool {
    let (o, d) = (ray.origin, ray.dir);
    // `x * 0` is a zero for a finite `x` and NaN otherwise, so the sum is a
    // zero exactly when all six are finite: one test instead of six.
    let finite = o.x * 0.0 + o.y * 0.0 + o.z * 0.0 + d.x * 0.0 + d.y * 0.0 + d.z * 0.0 == 0.0;
    finite && d != Vec3::ZERO && ray.tmin < ray.tmax
}
