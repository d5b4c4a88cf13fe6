//! Builders of the binary BVH ([`Bvh2`]). Each builder is one file and sees
//! only a [`BuildInput`] (boxes and centroids), so it can build over any
//! boundable primitive; each has a documented config with named presets.
//!
//! Parallelism comes from the caller's rayon pool: run a build inside
//! `pool.install(..)` to choose the threads (a one-thread pool makes it
//! sequential).

mod binned_sah;
#[cfg(feature = "cuda")]
mod binned_sah_cuda;
mod build_box;
#[cfg(feature = "cuda")]
mod device_build;
mod fragment;
mod hlbvh;
mod lbvh;
#[cfg(feature = "cuda")]
pub(crate) mod lbvh_cuda;
mod linked_tree;
#[cfg(feature = "cuda")]
pub(crate) mod linked_tree_cuda;
mod memory;
#[cfg(feature = "cuda")]
pub(crate) mod morton_cuda;
mod morton_order;
mod ploc;
#[cfg(feature = "cuda")]
pub(crate) mod ploc_cuda;
mod radix_sort;
#[cfg(feature = "cuda")]
mod sah_levels_cuda;
#[cfg(feature = "cuda")]
pub mod sah_records_cuda;
mod sorted_sweep;
mod sweep_sah;
#[cfg(feature = "cuda")]
mod sweep_sah_cuda;
mod taskpool;
#[cfg(feature = "cuda")]
mod taskpool_cuda;

pub use binned_sah::{
    BinSchedule, BinStage, BinnedSahBuilder, BinnedSahConfig, FIVE_STAGES, MAX_BINS,
    MAX_SPATIAL_BINS, MAX_STAGES, SpatialSahBuilder, SpatialSahConfig,
};
#[cfg(feature = "cuda")]
pub use binned_sah_cuda::MAX_TRIANGLES as GPU_SAH_MAX_TRIANGLES;
#[cfg(feature = "cuda")]
pub use device_build::{DeviceBuildError, DeviceBuildStats, upload_triangles};
pub use hlbvh::{HlbvhBuilder, HlbvhConfig};
pub use lbvh::{LbvhBuilder, LbvhConfig};
pub use memory::PeakMemory;
pub use morton_order::MortonBits;
pub use ploc::{PlocBuilder, PlocConfig};
pub use sweep_sah::{SweepSahBuilder, SweepSahConfig};
pub use taskpool::{TaskPoolBvhBuilder, TaskPoolBvhConfig};
#[cfg(feature = "cuda")]
pub use taskpool_cuda::MAX_TRIANGLES as GPU_TASKPOOL_MAX_TRIANGLES;

use super::Bvh2;
use crate::BuildInput;
use caustic_geom::Triangle;

/// Something that turns boxes and centroids into a [`Bvh2`].
pub trait Bvh2Builder: Send + Sync {
    /// The algorithm's registry name (`bvh-binned`, ...).
    fn name(&self) -> &'static str;

    /// Builds the hierarchy; `prim_indices` refer to positions in `input`.
    /// Never panics on degenerate input (no primitives, coincident centroids,
    /// NaN or infinite boxes).
    fn build(&self, input: &BuildInput) -> Bvh2;

    /// [`Self::build`] plus the peak bytes of working memory the builder
    /// counted (see [`PeakMemory`]); 0 when it does not count.
    fn build_with_peak(&self, input: &BuildInput) -> (Bvh2, usize) {
        (self.build(input), 0)
    }

    /// [`Self::build_with_peak`] over triangles: `input` is
    /// [`BuildInput::from_triangles`] of `triangles`. Builders that cut
    /// triangles (spatial splits, `bvh-spatial`) need them and may then
    /// reference a triangle from several leaves, each leaf's box holding
    /// the part of it inside ([`Bvh2::validate_split`]); the others build
    /// on the boxes alone.
    fn build_triangles(&self, input: &BuildInput, triangles: &[Triangle]) -> (Bvh2, usize) {
        let _ = triangles;
        self.build_with_peak(input)
    }
}

/// Runs [`Bvh2::validate`] in debug builds and panics with the builder's
/// name and the violation; compiled out of release builds.
#[inline]
pub(crate) fn debug_validate(builder: &str, bvh: &Bvh2, input: &BuildInput) {
    if !cfg!(debug_assertions) {
        return;
    }
    if let Err(problem) = bvh.validate(&input.bounds) {
        panic!("{builder} built an invalid BVH: {problem}");
    }
}

/// [`debug_validate`] for trees whose triangles may be cut into several
/// references ([`Bvh2::validate_split`]).
#[inline]
pub(crate) fn debug_validate_split(builder: &str, bvh: &Bvh2, input: &BuildInput) {
    if !cfg!(debug_assertions) {
        return;
    }
    if let Err(problem) = bvh.validate_split(&input.bounds) {
        panic!("{builder} built an invalid BVH: {problem}");
    }
}
