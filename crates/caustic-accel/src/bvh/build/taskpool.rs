//! `bvh-taskpool`: the SAH BVH of Vinkler, Bittner, Havran and Hapala (CGF
//! 2013, §4), built on the GPU by the task pool of persistent warps
//! (`taskpool_cuda.rs`, `taskpool.cu`). This file holds its configuration
//! and its CPU twin, which the registry builds where there is no GPU and
//! which the GPU tree is compared with.
//!
//! The paper's builder takes 32 candidate planes per node above 32
//! primitives (one per lane of a warp) and the full SAH below, leaves of at
//! most 4 primitives or by SAH termination. The CPU twin is the binned
//! builder with that shape: 11 bins per axis (10 planes each, 30
//! candidates), the exact sweep on subtrees of at most 31 primitives, the
//! same leaf bound and costs. The kernel prices exactly these candidates
//! (lanes 30 and 31 idle) with the binned builder's bin arithmetic, and its
//! one-warp sweep takes the twin's leaf test, tie rule and median
//! fallback, so the two build the same tree but where equal split points
//! meet in another order (the device's partition order depends on its
//! warps' timing) and where a node falls back to halving (coincident split
//! points, the depth budget). The paper's 32 planes at twelfths and
//! elevenths of the extent were not the twin's: on a 37-triangle soup with
//! two huge triangles they missed the plane that isolates them (SAH 3.795
//! against the twin's 2.889, `tests/taskpool_kernels_on_cpu.rs`).

use super::{BinnedSahBuilder, BinnedSahConfig, Bvh2Builder};
use crate::BuildInput;
use crate::bvh::Bvh2;

/// The settings of `bvh-taskpool` (`bvh-taskpool:leaf=N`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TaskPoolBvhConfig {
    /// Largest leaf (1 to 16; the paper's 4). Nodes of more are split;
    /// nodes of at most this many become leaves where the SAH says so.
    pub max_leaf_size: usize,
    /// Cost of visiting an inner node and of one primitive test, in the SAH
    /// that drives splits and leaves (the crate's unit costs).
    pub traversal_cost: f32,
    pub intersection_cost: f32,
    /// The GPU pool's minimum grab (Eq. 1's K, 1 to 14; the paper's 14).
    /// The CPU twin has no pool and ignores it.
    pub min_grab: u32,
}

impl TaskPoolBvhConfig {
    /// Leaves of at most 4 primitives (the paper's), unit costs.
    pub const DEFAULT: Self = Self {
        max_leaf_size: 4,
        traversal_cost: 1.0,
        intersection_cost: 1.0,
        min_grab: 14,
    };
    /// The largest `max_leaf_size`: below the 32 primitives under which a
    /// node is built by one warp, so every pool task splits.
    pub const MAX_LEAF: usize = 16;

    /// The binned configuration of the CPU twin.
    pub fn binned(&self) -> BinnedSahConfig {
        BinnedSahConfig {
            bins: 11,
            sweep_max_prims: 31,
            max_leaf_size: self.max_leaf_size,
            traversal_cost: self.traversal_cost,
            intersection_cost: self.intersection_cost,
            ..BinnedSahConfig::DEFAULT
        }
    }

    /// The spec string (parses back to `self`).
    pub fn spec(&self) -> String {
        let mut spec = "bvh-taskpool".to_owned();
        if self.max_leaf_size != Self::DEFAULT.max_leaf_size {
            spec += &format!(":leaf={}", self.max_leaf_size);
        }
        if self.min_grab != Self::DEFAULT.min_grab {
            spec += &format!(":grab={}", self.min_grab);
        }
        spec
    }
}

impl Default for TaskPoolBvhConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// The CPU twin of `bvh-taskpool` (see the module docs).
pub struct TaskPoolBvhBuilder {
    binned: BinnedSahBuilder,
}

impl TaskPoolBvhBuilder {
    pub fn new(config: TaskPoolBvhConfig) -> Self {
        Self {
            binned: BinnedSahBuilder::new(config.binned()),
        }
    }
}

impl Bvh2Builder for TaskPoolBvhBuilder {
    fn name(&self) -> &'static str {
        "bvh-taskpool"
    }

    fn build(&self, input: &BuildInput) -> Bvh2 {
        self.binned.build(input)
    }

    fn build_with_peak(&self, input: &BuildInput) -> (Bvh2, usize) {
        self.binned.build_with_peak(input)
    }
}
