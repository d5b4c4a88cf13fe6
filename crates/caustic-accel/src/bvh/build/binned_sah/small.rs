//! The binned builder's small-node path: a subtree of at most
//! [`SWEEP_MAX`] primitives is built with the exact SAH sweep of
//! [`crate::bvh::build::sorted_sweep`] instead of binning. Filling and
//! sweeping `3 * bins` bins costs more than the few primitives themselves
//! there, while sorting them once on each axis (on the stack) and keeping
//! the orders sorted through the partitions makes every level below a pair
//! of linear sweeps. The exact sweep also finds planes at least as good as
//! any binning would.
//!
//! Ties between equal split-point coordinates keep the order the partitions
//! above left the primitives in, which is deterministic.

use super::Refs;
use crate::bvh::BvhNode;
use crate::bvh::build::build_box::BuildBox;
use crate::bvh::build::sorted_sweep::{NodeLists, SahRules, SortedSweep, sort_key};
use glam::Vec4;
use std::cell::Cell;

/// Largest subtree the exact path takes (its scratch lives on the stack).
pub(super) const SWEEP_MAX: usize = 64;

/// Stack scratch of the small path, made once per sequential fragment and
/// reused by each small subtree in it (zeroing it per subtree would cost
/// more than the sweeps of the smallest ones).
pub(super) struct SmallScratch {
    keys: [u64; SWEEP_MAX],
    ids: [u32; SWEEP_MAX],
    orders: [[u32; SWEEP_MAX]; 3],
    costs: [Vec4; SWEEP_MAX],
    temp: [u32; SWEEP_MAX],
}

impl SmallScratch {
    pub fn new() -> Self {
        Self {
            keys: [0; SWEEP_MAX],
            ids: [0; SWEEP_MAX],
            orders: [[0; SWEEP_MAX]; 3],
            costs: [Vec4::ZERO; SWEEP_MAX],
            temp: [0; SWEEP_MAX],
        }
    }
}

/// Builds the subtree over `refs` (slots `offset ..`), pushing the nodes
/// below its root into `out` and returning the root.
///
/// Afterwards only the ids of `refs` are meaningful: they are rewritten
/// into leaf order, while the boxes are left where they were (nothing reads
/// them again).
pub(super) fn small_subtree(
    refs: Refs,
    scratch: &mut SmallScratch,
    rules: SahRules,
    bounds: BuildBox,
    offset: usize,
    depth: usize,
    out: &mut Vec<BvhNode>,
) -> BvhNode {
    let n = refs.len();
    assert!(
        (1..=SWEEP_MAX).contains(&n),
        "small path takes 1 to {SWEEP_MAX} prims"
    );
    let SmallScratch {
        keys,
        ids,
        orders,
        costs,
        temp,
    } = scratch;
    // Local ids are positions in `refs`; equal coordinates keep that order.
    for (axis, order) in orders.iter_mut().enumerate() {
        for (i, (key, b)) in keys.iter_mut().zip(refs.boxes.iter()).enumerate() {
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
        boxes: refs.boxes,
        rules,
        marks: &marks[..],
    };
    let root = sweep.subtree(lists, bounds, offset, depth, out);
    // Leaf order: the x order after all partitions.
    ids[..n].copy_from_slice(refs.ids);
    for (id, &local) in refs.ids.iter_mut().zip(&o0[..n]) {
        *id = ids[local as usize];
    }
    root
}
