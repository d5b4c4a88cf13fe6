//! The parameters of each structure, as typed fields. Each field names its
//! key in the spec language (`caustic_accel::registry`) and the range the
//! registry accepts; the defaults are read from the builders' own default
//! configurations, so there is one source for every number.

use caustic_accel::bvh::build::{
    BinSchedule, BinnedSahConfig, HlbvhConfig, LbvhConfig, MortonBits, PlocConfig,
    SpatialSahConfig, SweepSahConfig,
};
use caustic_accel::bvh::wide::{WideBvhConfig, Width};
use caustic_accel::grid::GridConfig;
use caustic_accel::kdtree::KdTreeConfig;

/// Top-down SAH construction with binning (Wald, "On fast Construction of
/// SAH-based Bounding Volume Hierarchies", IRT 2007): `bvh-binned`; with
/// [`BinnedSah::STAGED`] the multi-stage bin schedule of Zeidan's M.Sc.
/// thesis (2011, §4.6), `bvh-binned-staged`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BinnedSah {
    /// `bins`: bins per axis where no stage of `schedule` applies, 2..=64.
    pub bins: usize,
    /// `schedule=MIN@BINS/...`: nodes of at least `MIN` primitives use
    /// `BINS` bins, stages by decreasing `MIN`; empty: `bins` everywhere.
    pub schedule: BinSchedule,
    /// `sweep`: subtrees of at most this many primitives are built by the
    /// exact SAH sweep instead of binning, 0..=64 (0: bin everywhere).
    pub sweep: usize,
    /// `leaf`: largest leaf, 1..=64 primitives.
    pub max_leaf: usize,
}

impl BinnedSah {
    /// `bvh-binned`'s defaults: 32 bins, no stages, exact sweep below 64
    /// primitives, leaves of up to 8.
    pub const DEFAULT: Self = Self::from_config(&BinnedSahConfig::DEFAULT);
    /// `bvh-binned-staged`'s defaults: the five-stage schedule
    /// `65536@64/4096@32/256@16/0@8`.
    pub const STAGED: Self = Self::from_config(&BinnedSahConfig::STAGED);

    const fn from_config(config: &BinnedSahConfig) -> Self {
        Self {
            bins: config.bins,
            schedule: config.stages,
            sweep: config.sweep_max_prims,
            max_leaf: config.max_leaf_size,
        }
    }
}

impl Default for BinnedSah {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Binned SAH with spatial splits (Stich, Friedrich and Dietrich, "Spatial
/// Splits in Bounding Volume Hierarchies", HPG 2009): `bvh-spatial`, which
/// may reference a triangle from several leaves.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SpatialSah {
    /// The object splits, leaves and small nodes, as `bvh-binned`'s keys.
    pub binned: BinnedSah,
    /// `sbins`: spatial bins per axis, 2..=64.
    pub spatial_bins: usize,
    /// `alpha`: spatial splits are tried where an object split's children
    /// overlap by more than this fraction of the root's area, 0..=1.
    pub alpha: f32,
    /// `dup`: most references per triangle over the tree, 1..=16.
    pub duplication: f32,
    /// `saxes`: axes binned for spatial splits, 1 (the node's longest) or
    /// 3 (every axis).
    pub spatial_axes: usize,
}

impl Default for SpatialSah {
    fn default() -> Self {
        let config = SpatialSahConfig::DEFAULT;
        Self {
            binned: BinnedSah::from_config(&config.base),
            spatial_bins: config.spatial_bins,
            alpha: config.overlap_alpha,
            duplication: config.duplication,
            spatial_axes: config.spatial_axes,
        }
    }
}

/// Top-down SAH construction with a full sweep over every object split
/// (MacDonald and Booth, "Heuristics for ray tracing using space
/// subdivision", The Visual Computer 1990; the `O(n log n)` sweep of Wald,
/// Boulos and Shirley, ACM TOG 2007): `bvh-sweep`, the quality reference of
/// the BVH builders.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SweepSah {
    /// `leaf`: largest leaf, 1..=64 primitives.
    pub max_leaf: usize,
}

impl Default for SweepSah {
    fn default() -> Self {
        Self {
            max_leaf: SweepSahConfig::DEFAULT.max_leaf_size,
        }
    }
}

/// The SAH BVH built by a task pool of persistent warps on the GPU
/// (Vinkler, Bittner, Havran and Hapala 2013, §4: 32 candidate planes per
/// task, one warp's full SAH below 32 triangles): `bvh-taskpool`. Its CPU
/// twin bins the same candidates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskPoolBvh {
    /// `leaf`: largest leaf, 1..=16 primitives (the paper's 4).
    pub max_leaf: usize,
}

impl Default for TaskPoolBvh {
    fn default() -> Self {
        Self {
            max_leaf: caustic_accel::bvh::build::TaskPoolBvhConfig::DEFAULT.max_leaf_size,
        }
    }
}

/// The linear BVH over sorted Morton codes (Lauterbach et al., Eurographics
/// 2009, as Zeidan's thesis restates it, 2011, §4.7), its radix tree built
/// in parallel by Karras ("Maximizing Parallelism in the Construction of
/// BVHs, Octrees, and k-d Trees", HPG 2012): `lbvh`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lbvh {
    /// `bits`: Morton code width, 30 or 63.
    pub bits: MortonBits,
    /// `leaf`: largest leaf the SAH collapse may form, 1..=64 primitives.
    pub max_leaf: usize,
}

impl Default for Lbvh {
    fn default() -> Self {
        let config = LbvhConfig::DEFAULT;
        Self {
            bits: config.morton_bits,
            max_leaf: config.max_leaf_size as usize,
        }
    }
}

/// The hierarchical LBVH: Morton clusters, an SAH tree over them and one
/// below each (Pantaleoni and Luebke, "HLBVH: Hierarchical LBVH
/// Construction for Real-Time Ray Tracing of Dynamic Geometry", HPG 2010;
/// Garanzha, Pantaleoni and McAllister, "Simpler and Faster HLBVH with Work
/// Queues", HPG 2011): `hlbvh`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hlbvh {
    /// `bits`: Morton code width, 30 or 63.
    pub bits: MortonBits,
    /// `k`: leading code bits that make a cluster, 3..=30.
    pub cluster_bits: u32,
    /// `bins`: bins per axis in both SAH stages, 2..=32.
    pub bins: usize,
    /// `leaf`: largest leaf, 1..=64 primitives.
    pub max_leaf: usize,
}

impl Default for Hlbvh {
    fn default() -> Self {
        let config = HlbvhConfig::DEFAULT;
        Self {
            bits: config.morton_bits,
            cluster_bits: config.cluster_bits,
            bins: config.bins,
            max_leaf: config.max_leaf_size,
        }
    }
}

/// Parallel locally-ordered clustering (Meister and Bittner, "Parallel
/// Locally-Ordered Clustering for Bounding Volume Hierarchy Construction",
/// IEEE TVCG 2018): `ploc`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ploc {
    /// `r`: clusters searched on each side for the nearest neighbour,
    /// 1..=256.
    pub radius: usize,
    /// `bits`: Morton code width, 30 or 63.
    pub bits: MortonBits,
    /// `leaf`: largest leaf the SAH collapse may form, 1..=64 primitives.
    pub max_leaf: usize,
}

impl Default for Ploc {
    fn default() -> Self {
        let config = PlocConfig::DEFAULT;
        Self {
            radius: config.radius,
            bits: config.morton_bits,
            max_leaf: config.max_leaf_size as usize,
        }
    }
}

/// A binary BVH collapsed into 4- or 8-wide nodes traced with SIMD, the
/// layout of Embree's BVH4/BVH8 (Wald et al., "Embree: A Kernel Framework
/// for Efficient CPU Ray Tracing", SIGGRAPH 2014): `bvh-wide`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WideBvh {
    /// `width`: children per node, 4 or 8.
    pub width: usize,
    /// `from`: the binary BVH that is collapsed (on a GPU, the tree that is
    /// traced, the GPU traversal being binary).
    pub from: super::BinaryBvh,
}

impl Default for WideBvh {
    fn default() -> Self {
        Self {
            width: match WideBvhConfig::DEFAULT.width {
                Width::Four => 4,
                Width::Eight => 8,
            },
            from: super::BinaryBvh::default(),
        }
    }
}

/// The SAH kd-tree with a large-node stage of spatial medians and
/// empty-space cut-offs and a small-node stage of exact SAH (Zhou et al.,
/// "Real-Time KD-Tree Construction on Graphics Hardware", SIGGRAPH Asia
/// 2008, §3.1 and §3.2): `kdtree`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KdTree {
    /// `small`: nodes of at most this many references go to the SAH
    /// stage, 1..=64 (Zhou's `T`).
    pub small: usize,
    /// `empty`: empty space of at least this fraction of a node's extent
    /// is cut off, 0..=1 (Zhou's `C_e`).
    pub empty: f32,
    /// `ct`: traversal cost over intersection cost in the SAH, 0.001..=1000.
    pub cost_ratio: f32,
}

impl Default for KdTree {
    fn default() -> Self {
        let config = KdTreeConfig::DEFAULT;
        Self {
            small: config.small_node_max,
            empty: config.empty_space_ratio,
            cost_ratio: config.traversal_cost / config.intersection_cost,
        }
    }
}

/// The uniform grid built in parallel passes and traced by 3D-DDA
/// (Kalojanov and Slusallek, "A Parallel Algorithm for Construction of
/// Uniform Grids", HPG 2009; the five passes of Ivson, "Ray Tracing Dynamic
/// Scenes on the GPU", M.Sc. dissertation, PUC-Rio 2009, §4.2): `grid`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Grid {
    /// `k`: cells per triangle, the density of the resolution formula,
    /// 0.001..=1000.
    pub density: f32,
    /// `exact`: a triangle goes only into the cells it overlaps, not every
    /// cell its box overlaps.
    pub exact_overlap: bool,
    /// `macro`: cells per side of a macro cell, the unit of culling, 1..=16.
    pub macro_size: usize,
}

impl Default for Grid {
    fn default() -> Self {
        let config = GridConfig::DEFAULT;
        Self {
            density: config.density,
            exact_overlap: config.exact_overlap,
            macro_size: config.macro_size,
        }
    }
}
