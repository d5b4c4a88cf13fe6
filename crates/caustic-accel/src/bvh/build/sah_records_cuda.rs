//! The records the GPU top-down SAH builders (`super::binned_sah_cuda`)
//! share with their kernels (`sah_records.cuh`, which checks each CUDA twin
//! field by field against `accel_layout.cuh`, generated from these), and
//! [`SahParams`], a [`BinnedSahConfig`] as the kernels read it.

use super::binned_sah::{BinnedSahConfig, MAX_STAGES};
use bytemuck::{Pod, Zeroable};

/// A primitive reference: its box with the scene id in the fourth word of
/// the lower corner (two aligned 16-byte loads).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct PrimRef {
    pub lo: [f32; 3],
    pub id: u32,
    pub hi: [f32; 3],
    pub pad: u32,
}

/// A node of the level being split: references `start .. start + count`,
/// its box, the box of its split points (doubled box centres), its node
/// slot and depth.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct SahTask {
    pub lo: [f32; 3],
    pub start: u32,
    pub hi: [f32; 3],
    pub count: u32,
    pub clo: [f32; 3],
    pub slot: u32,
    pub chi: [f32; 3],
    pub depth: u32,
}

/// What a level node does (`kind`: 0 leaf, 1 binned plane, 2 object
/// median); written by the planning kernels, read by the partitions and
/// the numbering.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct SahPlan {
    pub kind: u32,
    pub axis: u32,
    pub bin: u32,
    pub left: u32,
    pub origin: f32,
    pub scale: f32,
    pub top: f32,
    pub pivot_hi: u32,
    pub pivot_lo: u32,
    pub pad: [u32; 3],
}

/// Both sides of a partition: boxes and split-point boxes (min xyz, max xyz).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct SplitSides {
    pub left: [f32; 6],
    pub right: [f32; 6],
    pub left_centers: [f32; 6],
    pub right_centers: [f32; 6],
}

/// A chunk of a large node (Zeidan 2011's CreateChunks): the node's index
/// in its level, the chunk's references, and how many references of the
/// node's earlier chunks go left.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct SahChunk {
    pub node: u32,
    pub start: u32,
    pub count: u32,
    pub left_offset: u32,
}

/// A node of at most `sweep_max_prims` references, built by one warp with
/// the full sweep; `parity` names the reference buffer that holds them.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct SahSmallRoot {
    pub lo: [f32; 3],
    pub start: u32,
    pub hi: [f32; 3],
    pub count: u32,
    pub slot: u32,
    pub depth: u32,
    pub parity: u32,
    pub pad: u32,
}

/// A [`BinnedSahConfig`] as the kernels read it: the bin stages (by
/// decreasing `min_prims`), the default bin count, the exact-sweep size and
/// the leaf rules.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct SahParams {
    pub stage_min: [u32; MAX_STAGES],
    pub stage_bins: [u32; MAX_STAGES],
    pub stages: u32,
    pub bins: u32,
    pub sweep_max: u32,
    pub min_leaf: u32,
    pub max_leaf: u32,
    pub traversal_cost: f32,
    pub intersection_cost: f32,
    pub pad: u32,
}

const _: () = assert!(size_of::<PrimRef>() == 32);
const _: () = assert!(size_of::<SahTask>() == 64);
const _: () = assert!(size_of::<SahPlan>() == 48);
const _: () = assert!(size_of::<SplitSides>() == 96);
const _: () = assert!(size_of::<SahSmallRoot>() == 48);
const _: () = assert!(size_of::<SahParams>() == 96);

/// Counts are `u32` on the device; larger values saturate, which only
/// matters for stage bounds (a bound past `u32::MAX` is never reached).
fn saturate(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl SahParams {
    /// The kernels' view of `config` (which must pass
    /// [`BinnedSahConfig::validate`]).
    pub fn from_config(config: &BinnedSahConfig) -> Self {
        let mut params = Self {
            stages: config.stages.len() as u32,
            bins: config.bins as u32,
            sweep_max: saturate(config.sweep_max_prims),
            min_leaf: saturate(config.min_leaf_size),
            max_leaf: saturate(config.max_leaf_size),
            traversal_cost: config.traversal_cost,
            intersection_cost: config.intersection_cost,
            ..Self::default()
        };
        for (k, stage) in config.stages.iter().enumerate() {
            params.stage_min[k] = saturate(stage.min_prims);
            params.stage_bins[k] = stage.bins as u32;
        }
        params
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bvh::build::FIVE_STAGES;

    #[test]
    fn params_carry_the_schedule_and_the_leaf_rules() {
        let config = BinnedSahConfig {
            stages: FIVE_STAGES,
            max_leaf_size: 4,
            ..BinnedSahConfig::DEFAULT
        };
        let p = SahParams::from_config(&config);
        assert_eq!(p.stages, 4);
        assert_eq!(&p.stage_min[..4], &[65536, 4096, 256, 0]);
        assert_eq!(&p.stage_bins[..4], &[64, 32, 16, 8]);
        assert_eq!(
            (p.bins, p.sweep_max, p.min_leaf, p.max_leaf),
            (32, 64, 1, 4)
        );
    }
}
