//! The small end of `hlbvh`'s bottom trees: subtrees of at most
//! [`SWEEP_MAX`] primitives are built by the exact SAH sweep that
//! `bvh-binned` and `bvh-sweep` share (`sorted_sweep`), the way
//! `bvh-binned` builds its own small nodes: sort the primitives once per
//! axis, on the stack, and keep the three orders sorted through every
//! partition below, so each level is a pair of linear sweeps instead of a
//! round of binning. Most clusters are this small (sibenik's median cluster
//! at 15 prefix bits holds 4 primitives, the dragon's 145), so this is where
//! most of a bottom tree's nodes are made.

use super::PrimRef;
use crate::bvh::BvhNode;
use crate::bvh::build::build_box::BuildBox;
use crate::bvh::build::sorted_sweep::{NodeLists, SahRules, SortedSweep, sort_key};
use glam::Vec4;
use std::cell::Cell;

/// Largest subtree built by the sweep (its scratch lives on the stack).
pub const SWEEP_MAX: usize = 64;

/// Scratch of the sweep, made once per bottom tree and reused by each small
/// subtree in it (clearing ~8 KiB per subtree would cost more than the
/// smallest subtrees themselves).
pub struct SweepScratch {
    boxes: [BuildBox; SWEEP_MAX],
    keys: [u64; SWEEP_MAX],
    orders: [[u32; SWEEP_MAX]; 3],
    costs: [Vec4; SWEEP_MAX],
    temp: [u32; SWEEP_MAX],
    prims: [PrimRef; SWEEP_MAX],
}

impl SweepScratch {
    pub fn new() -> Box<Self> {
        let empty = PrimRef {
            bounds: BuildBox::EMPTY,
            centroid: caustic_geom::Vec3::ZERO,
            id: 0,
        };
        Box::new(Self {
            boxes: [BuildBox::EMPTY; SWEEP_MAX],
            keys: [0; SWEEP_MAX],
            orders: [[0; SWEEP_MAX]; 3],
            costs: [Vec4::ZERO; SWEEP_MAX],
            temp: [0; SWEEP_MAX],
            prims: [empty; SWEEP_MAX],
        })
    }
}

/// Builds the subtree over `prims` (slots `offset ..`, box `bounds`, at
/// `depth`): pushes the nodes below its root into `out` and returns the
/// root; `prims` end up in leaf order.
pub fn sweep_subtree(
    prims: &mut [PrimRef],
    scratch: &mut SweepScratch,
    rules: SahRules,
    bounds: BuildBox,
    offset: usize,
    depth: usize,
    out: &mut Vec<BvhNode>,
) -> BvhNode {
    let n = prims.len();
    assert!(
        (1..=SWEEP_MAX).contains(&n),
        "the sweep takes 1 to {SWEEP_MAX} prims"
    );
    let SweepScratch {
        boxes,
        keys,
        orders,
        costs,
        temp,
        prims: copy,
    } = scratch;
    for (b, p) in boxes.iter_mut().zip(prims.iter()) {
        *b = p.bounds;
    }
    // Local ids are positions in `prims`; equal split points keep that order.
    for (axis, order) in orders.iter_mut().enumerate() {
        for (i, (key, b)) in keys.iter_mut().zip(&boxes[..n]).enumerate() {
            *key = sort_key(b.min[axis] + b.max[axis], i as u32);
        }
        keys[..n].sort_unstable();
        for (slot, &key) in order.iter_mut().zip(&keys[..n]) {
            *slot = key as u32;
        }
    }
    let [o0, o1, o2] = orders;
    let lists = NodeLists {
        orders: [&mut o0[..n], &mut o1[..n], &mut o2[..n]],
        costs: &mut costs[..n],
        temp: &mut temp[..n],
    };
    let marks: [Cell<u64>; SWEEP_MAX / 64] = Default::default();
    let sweep = SortedSweep {
        boxes: &boxes[..n],
        rules,
        marks: &marks[..],
    };
    let root = sweep.subtree(lists, bounds, offset, depth, out);
    // Leaf order is the x order after all partitions.
    copy[..n].copy_from_slice(prims);
    for (p, &local) in prims.iter_mut().zip(&o0[..n]) {
        *p = copy[local as usize];
    }
    root
}
