//! `bvh-taskpool`: the SAH BVH of Vinkler, Bittner, Havran and Hapala (CGF
//! 2013, §4), built on the GPU by the task pool of persistent warps
//! (`taskpool_cuda.rs`, `taskpool.cu`). This file holds its configuration
//! and its CPU twin, which the registry builds where there is no GPU and
//! which the GPU tree is compared with.
//!
//! The paper's builder takes 32 candidate planes per node above 32
//! primitives (one per lane of a warp) and the full SAH below, leaves of at
//! most 4 primitives or by SAH termination. The CPU twin is the binned
//! builder with that shape: above 31 primitives it prices the kernel's 32
//! planes (11 on x and y at twelfths of the split-point extent, 10 on z at
//! elevenths, placed with the kernel's `f32` operations:
//! `BinnedSahBuilder::with_task_pool_planes`), below it the exact sweep,
//! with the same leaf bound and costs; the kernel's one-warp sweep takes
//! the twin's leaf test, tie rule and median fallback. So the two build the
//! same tree but where equal split points meet in another order (the
//! device's partition order depends on its warps' timing) and where a node
//! falls back to halving (coincident split points, the depth budget):
//! `tests/taskpool_kernels_on_cpu.rs` checks it on the CPU. Until
//! 2026-11-27 the twin binned with 11 bins (30 planes at elevenths), which
//! the kernel did not price: on a 37-triangle soup the device's tree had
//! SAH 3.795 against the twin's 2.889.

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
            // The gaps between the kernel's planes (12 on x and y, 11 on
            // z: `BinMapping::task_pool`), which replace the bins.
            bins: 12,
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
            binned: BinnedSahBuilder::with_task_pool_planes(config.binned()),
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
