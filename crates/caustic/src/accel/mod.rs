//! Acceleration structures by type: [`AccelKind`] names a structure of
//! `caustic_accel`'s registry with its parameters as typed fields, and
//! converts to and from the registry's spec strings (`ploc:r=32`,
//! `bvh-wide:width=4:from=lbvh:bits=63`), so a typed value and a
//! command-line string always mean the same structure. Builds go through
//! the registry itself, the one place that turns a spec into a structure.
//!
//! ```
//! use caustic::AccelKind;
//! use caustic::accel::Ploc;
//!
//! let kind = AccelKind::Ploc(Ploc { radius: 32, ..Ploc::default() });
//! assert_eq!(kind.to_string(), "ploc:r=32");
//! assert_eq!("ploc:r=32".parse::<AccelKind>()?, kind);
//! assert_eq!(AccelKind::default().to_string(), "bvh-wide");
//! # Ok::<(), caustic::Error>(())
//! ```

mod params;
mod spec;

pub use caustic_accel::AccelStats;
pub use caustic_accel::bvh::build::{BinSchedule, BinStage, MortonBits};
/// A structure built on the GPU by spec (`ploc:r=32`, `bvh-wide`,
/// `cpu:bvh-binned`), for [`Renderer::gpu_accel`](crate::Renderer::gpu_accel),
/// and what its build did.
#[cfg(feature = "cuda")]
pub use caustic_accel::bvh::device_accel_cuda::{GpuAccelSpec, GpuAccelStats};
/// The structures the GPU builds (the names of [`GpuAccelSpec`]) and the
/// one it builds when none is chosen; in every build, so a CPU-only
/// program can name them.
pub use caustic_accel::registry::{DEFAULT_GPU_SPEC, GPU_STRUCTURES};
pub use params::{
    BinnedSah, Grid, Hlbvh, KdTree, Lbvh, Ploc, SpatialSah, SweepSah, TaskPoolBvh, WideBvh,
};

use crate::error::Result;
use caustic_accel::Accel;
use caustic_geom::Triangle;

/// A triangle acceleration structure and its parameters: one variant per
/// name of `caustic_accel::ACCEL_NAMES`, displayed as its spec string.
///
/// The default is `bvh-wide` (8-wide, collapsed from `bvh-binned`), the
/// structure `caustic render` uses: the fastest to trace on the CPU.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum AccelKind {
    /// `bvh-binned`: binned SAH.
    BvhBinned(BinnedSah),
    /// `bvh-binned-staged`: binned SAH with a multi-stage bin schedule
    /// (its defaults are [`BinnedSah::STAGED`]).
    BvhBinnedStaged(BinnedSah),
    /// `bvh-sweep`: full-sweep SAH.
    BvhSweep(SweepSah),
    /// `bvh-spatial`: binned SAH with spatial splits.
    BvhSpatial(SpatialSah),
    /// `bvh-taskpool`: SAH over 32 candidates per task (the GPU task pool's).
    BvhTaskPool(TaskPoolBvh),
    /// `bvh-wide`: a binary BVH collapsed to 4 or 8 children per node.
    BvhWide(WideBvh),
    /// `lbvh`: linear BVH over Morton codes.
    Lbvh(Lbvh),
    /// `hlbvh`: hierarchical linear BVH.
    Hlbvh(Hlbvh),
    /// `ploc`: parallel locally-ordered clustering.
    Ploc(Ploc),
    /// `kdtree`: SAH kd-tree.
    KdTree(KdTree),
    /// `grid`: uniform grid.
    Grid(Grid),
    /// `brute`: every triangle for every ray (the reference).
    Brute,
}

impl Default for AccelKind {
    fn default() -> Self {
        AccelKind::BvhWide(WideBvh::default())
    }
}

/// The binary BVHs: what `bvh-wide` collapses, and what a GPU traces.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum BinaryBvh {
    BvhBinned(BinnedSah),
    BvhBinnedStaged(BinnedSah),
    BvhSweep(SweepSah),
    BvhSpatial(SpatialSah),
    BvhTaskPool(TaskPoolBvh),
    Lbvh(Lbvh),
    Hlbvh(Hlbvh),
    Ploc(Ploc),
}

impl Default for BinaryBvh {
    fn default() -> Self {
        BinaryBvh::BvhBinned(BinnedSah::DEFAULT)
    }
}

impl From<BinaryBvh> for AccelKind {
    fn from(bvh: BinaryBvh) -> Self {
        match bvh {
            BinaryBvh::BvhBinned(p) => AccelKind::BvhBinned(p),
            BinaryBvh::BvhBinnedStaged(p) => AccelKind::BvhBinnedStaged(p),
            BinaryBvh::BvhSweep(p) => AccelKind::BvhSweep(p),
            BinaryBvh::BvhSpatial(p) => AccelKind::BvhSpatial(p),
            BinaryBvh::BvhTaskPool(p) => AccelKind::BvhTaskPool(p),
            BinaryBvh::Lbvh(p) => AccelKind::Lbvh(p),
            BinaryBvh::Hlbvh(p) => AccelKind::Hlbvh(p),
            BinaryBvh::Ploc(p) => AccelKind::Ploc(p),
        }
    }
}

impl AccelKind {
    /// The registry name (`bvh-wide`, `ploc`, ...), which is also the
    /// `name` of the built structure's stats.
    pub fn name(&self) -> &'static str {
        match self {
            AccelKind::BvhBinned(_) => "bvh-binned",
            AccelKind::BvhBinnedStaged(_) => "bvh-binned-staged",
            AccelKind::BvhSweep(_) => "bvh-sweep",
            AccelKind::BvhSpatial(_) => "bvh-spatial",
            AccelKind::BvhTaskPool(_) => "bvh-taskpool",
            AccelKind::BvhWide(_) => "bvh-wide",
            AccelKind::Lbvh(_) => "lbvh",
            AccelKind::Hlbvh(_) => "hlbvh",
            AccelKind::Ploc(_) => "ploc",
            AccelKind::KdTree(_) => "kdtree",
            AccelKind::Grid(_) => "grid",
            AccelKind::Brute => "brute",
        }
    }

    /// The binary BVH a GPU traces in place of this structure: the
    /// structure itself for a binary BVH, the tree it collapses for
    /// `bvh-wide` (the GPU traversal, after Aila and Laine, HPG 2009, walks
    /// binary nodes); `None` for the kd-tree and the grid (traced on the
    /// GPU by kernels of their own) and brute force.
    pub fn gpu_tree(&self) -> Option<BinaryBvh> {
        Some(match *self {
            AccelKind::BvhBinned(p) => BinaryBvh::BvhBinned(p),
            AccelKind::BvhBinnedStaged(p) => BinaryBvh::BvhBinnedStaged(p),
            AccelKind::BvhSweep(p) => BinaryBvh::BvhSweep(p),
            AccelKind::BvhSpatial(p) => BinaryBvh::BvhSpatial(p),
            AccelKind::BvhTaskPool(p) => BinaryBvh::BvhTaskPool(p),
            AccelKind::BvhWide(p) => p.from,
            AccelKind::Lbvh(p) => BinaryBvh::Lbvh(p),
            AccelKind::Hlbvh(p) => BinaryBvh::Hlbvh(p),
            AccelKind::Ploc(p) => BinaryBvh::Ploc(p),
            AccelKind::KdTree(_) | AccelKind::Grid(_) | AccelKind::Brute => return None,
        })
    }

    /// Whether a GPU builds and traces this structure: every BVH (see
    /// [`AccelKind::gpu_tree`]), the kd-tree and the uniform grid; brute
    /// force runs on the CPU only.
    pub fn runs_on_gpu(&self) -> bool {
        self.gpu_tree().is_some() || matches!(self, AccelKind::Grid(_) | AccelKind::KdTree(_))
    }

    /// Builds the structure on the CPU through the registry. Values out of
    /// the documented ranges are an [`Error::AccelSpec`](crate::Error::AccelSpec)
    /// naming the parameter and its range.
    pub fn build(&self, triangles: &[Triangle]) -> Result<Box<dyn Accel>> {
        Ok(caustic_accel::build_accel(&self.to_string(), triangles)?)
    }
}
