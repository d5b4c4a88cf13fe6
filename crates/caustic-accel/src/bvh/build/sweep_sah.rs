//! `bvh-sweep`: top-down SAH BVH construction with a full sweep, the
//! quality reference of the BVH builders: every node evaluates the surface
//! area heuristic at all `n - 1` object splits of its center-sorted
//! primitives on each of the three axes (MacDonald and Booth, "Heuristics for
//! ray tracing using space subdivision", The Visual Computer 1990; Wald,
//! Boulos and Shirley, "Ray Tracing Deformable Scenes using Dynamic Bounding
//! Volume Hierarchies", ACM TOG 2007, whose `O(n log n)` variant this is).
//!
//! Split points: the center of each primitive's box, as in `bvh-binned`
//! (whose module docs give the measurements behind that choice), so the two
//! builders differ only in binning and the SAH gap between them measures
//! what binning loses.
//!
//! Sorting once: the split points are sorted on all three axes at the start
//! (three parallel sorts of `(coordinate, id)` keys). A node owns the same
//! range in the three orders; its split cuts the split axis's order at the
//! chosen position and partitions the other two stably by a side mark per
//! primitive, so both children's orders stay sorted and no node sorts again.
//! The per-node step (prefix/suffix area sweeps, leaf rules, depth bound) is
//! [`super::sorted_sweep`], shared with the small nodes of `bvh-binned`; its
//! leaf rules and costs are `bvh-binned`'s (`C_trav = C_isect = 1`, leaves
//! of 1 to 8 primitives by default).
//!
//! Parallelism: nodes of at least `parallel_min_prims` primitives partition
//! their two other orders in parallel and build their children with
//! `rayon::join` (their sweep itself runs on one thread, the three axes in
//! SIMD lanes); smaller subtrees recurse on one thread into a flat fragment
//! ([`super::fragment`]), assembled at the end into the depth-first node
//! array. The result does not depend on the number of threads.
//!
//! Memory (counted for `peak_build_bytes`): a 32-byte box per primitive,
//! three `u32` orders, a 16-byte suffix-cost entry (one lane per axis) and a
//! `u32` partition buffer per placed primitive, a side flag per primitive,
//! the sort keys (8 bytes per primitive and axis, freed after sorting), the
//! fragments and the output. Non-finite primitives are parked as in
//! `bvh-binned`.

use super::build_box::BuildBox;
use super::fragment::{Body, Subtree, assemble, unplaceable_ids};
use super::memory::PeakMemory;
use super::sorted_sweep::{
    NodeLists, SahRules, SortedSweep, SweepSplit, mark_sides, sort_key, stable_partition, union_of,
};
use super::{Bvh2Builder, debug_validate};
use crate::BuildInput;
use crate::bvh::{Bvh2, BvhNode};
use glam::Vec4;
use rayon::prelude::*;
use std::sync::atomic::AtomicBool;

/// Tuning of [`SweepSahBuilder`]; need `1 <= min_leaf_size <= max_leaf_size`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SweepSahConfig {
    /// Nodes with at most this many primitives are always leaves.
    pub min_leaf_size: usize,
    /// Nodes with more primitives are always split: a hard leaf-size bound.
    pub max_leaf_size: usize,
    /// Cost of visiting an inner node, in the SAH that drives the splits.
    pub traversal_cost: f32,
    /// Cost of one primitive test, in the SAH that drives the splits.
    pub intersection_cost: f32,
    /// Subtrees with at least this many primitives sweep, partition and
    /// build their children in parallel; `usize::MAX` builds on one thread.
    pub parallel_min_prims: usize,
}

impl SweepSahConfig {
    /// Leaves of 1 to 8 primitives, unit costs: the `bvh-sweep` default,
    /// with the same leaf rules as `bvh-binned`'s default.
    pub const DEFAULT: Self = Self {
        min_leaf_size: 1,
        max_leaf_size: 8,
        traversal_cost: 1.0,
        intersection_cost: 1.0,
        parallel_min_prims: 4096,
    };

    /// The same settings on one thread (for timing or reproducing).
    #[must_use]
    pub const fn sequential(self) -> Self {
        Self {
            parallel_min_prims: usize::MAX,
            ..self
        }
    }

    fn rules(&self) -> SahRules {
        SahRules {
            min_leaf_size: self.min_leaf_size,
            max_leaf_size: self.max_leaf_size,
            traversal_cost: self.traversal_cost,
            intersection_cost: self.intersection_cost,
        }
    }
}

impl Default for SweepSahConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// The full-sweep SAH builder (`bvh-sweep`); see the module docs.
#[derive(Clone, Debug, Default)]
pub struct SweepSahBuilder {
    pub config: SweepSahConfig,
}

impl SweepSahBuilder {
    pub fn new(config: SweepSahConfig) -> Self {
        assert!(
            1 <= config.min_leaf_size && config.min_leaf_size <= config.max_leaf_size,
            "need 1 <= min_leaf_size <= max_leaf_size"
        );
        Self { config }
    }
}

impl Bvh2Builder for SweepSahBuilder {
    fn name(&self) -> &'static str {
        "bvh-sweep"
    }

    fn build(&self, input: &BuildInput) -> Bvh2 {
        self.build_with_peak(input).0
    }

    fn build_with_peak(&self, input: &BuildInput) -> (Bvh2, usize) {
        let memory = PeakMemory::new();
        let bvh = run(&self.config, input, &memory);
        debug_validate(self.name(), &bvh, input);
        (bvh, memory.peak())
    }
}

fn run(config: &SweepSahConfig, input: &BuildInput, memory: &PeakMemory) -> Bvh2 {
    let n = input.len();
    assert!(n <= u32::MAX as usize, "at most 2^32 - 1 primitives");
    let boxes: Vec<BuildBox> = input
        .bounds
        .par_iter()
        .map(|&b| BuildBox::from_aabb(b))
        .collect();
    memory.alloc_array::<BuildBox>(n);
    let parked = unplaceable_ids(input);
    let [order_x, mut order_y, mut order_z] = sorted_orders(input, parked.is_empty(), memory);
    let placed = order_x.len();
    let mut order_x = order_x;
    let mut costs = vec![Vec4::ZERO; placed];
    let mut temp = vec![0u32; placed];
    let marks: Vec<AtomicBool> = (0..n).map(|_| AtomicBool::new(false)).collect();
    memory.alloc_array::<Vec4>(placed);
    memory.alloc_array::<u32>(placed);
    memory.alloc_array::<AtomicBool>(n);
    let tree = (placed > 0).then(|| {
        let lists = NodeLists {
            orders: [&mut order_x, &mut order_y, &mut order_z],
            costs: &mut costs,
            temp: &mut temp,
        };
        let bounds = union_of(&boxes, lists.orders[0]);
        let build = Build {
            sweep: SortedSweep {
                boxes: &boxes,
                rules: config.rules(),
                marks: marks.as_slice(),
            },
            parallel_min_prims: config.parallel_min_prims.max(2),
            memory,
        };
        // With parked primitives the placed tree hangs one level lower.
        build.subtree(lists, bounds, 0, usize::from(!parked.is_empty()))
    });
    drop((costs, temp, marks, boxes, order_y, order_z));
    memory.free_array::<Vec4>(placed);
    memory.free_array::<u32>(3 * placed);
    memory.free_array::<AtomicBool>(n);
    memory.free_array::<BuildBox>(n);
    // All three orders hold each leaf's primitives; x's is the leaf order.
    assemble(tree, order_x, &parked, memory)
}

/// The placeable primitives' ids sorted by box center on each axis (ties
/// by id); `all_placeable` spares the filter.
fn sorted_orders(input: &BuildInput, all_placeable: bool, memory: &PeakMemory) -> [Vec<u32>; 3] {
    let sort_axis = |axis: usize| {
        let b = &input.bounds;
        let key = |i: usize| sort_key(b[i].min[axis] + b[i].max[axis], i as u32);
        let mut keys: Vec<u64> = if all_placeable {
            (0..input.len()).into_par_iter().map(key).collect()
        } else {
            (0..input.len())
                .into_par_iter()
                .filter(|&i| input.is_placeable(i))
                .map(key)
                .collect()
        };
        memory.alloc_array::<u64>(keys.len());
        keys.par_sort_unstable();
        let order: Vec<u32> = keys.par_iter().map(|&k| k as u32).collect();
        memory.alloc_array::<u32>(order.len());
        memory.free_array::<u64>(keys.len());
        order
    };
    let (x, (y, z)) = rayon::join(
        || sort_axis(0),
        || rayon::join(|| sort_axis(1), || sort_axis(2)),
    );
    [x, y, z]
}

/// One build: the sweep step, the parallel threshold and the memory count.
struct Build<'a> {
    sweep: SortedSweep<'a, [AtomicBool]>,
    parallel_min_prims: usize,
    memory: &'a PeakMemory,
}

impl Build<'_> {
    /// Builds the subtree over `lists` (slots `offset ..`), in parallel while
    /// it is large enough.
    fn subtree(
        &self,
        mut lists: NodeLists,
        bounds: BuildBox,
        offset: usize,
        depth: usize,
    ) -> Subtree {
        let n = lists.len();
        if n < self.parallel_min_prims {
            self.memory.alloc_array::<BvhNode>(2 * n);
            let mut body = Vec::with_capacity(2 * n);
            let root = self.sweep.subtree(lists, bounds, offset, depth, &mut body);
            return Subtree {
                root,
                body: Body::Flat(body),
            };
        }
        let Some(split) = self.sweep.decide(&mut lists, &bounds, depth) else {
            return Subtree::leaf(bounds.to_aabb(), offset, n);
        };
        let (left_bounds, right_bounds) = self.apply(&mut lists, &split);
        let k = split.left_count;
        let (left_lists, right_lists) = lists.split_at(k);
        let (left, right) = rayon::join(
            || self.subtree(left_lists, left_bounds, offset, depth + 1),
            || self.subtree(right_lists, right_bounds, offset + k, depth + 1),
        );
        Subtree::pair(bounds.to_aabb(), left, right)
    }

    /// [`SortedSweep::apply`] with the two other orders partitioned in
    /// parallel; the second one borrows the suffix-cost scratch (free
    /// between sweeps) as its scratch.
    fn apply(&self, lists: &mut NodeLists, split: &SweepSplit) -> (BuildBox, BuildBox) {
        let marks = self.sweep.marks;
        let order = &lists.orders[split.axis];
        let sides = mark_sides(self.sweep.boxes, order, split.left_count, marks);
        let [o0, o1, o2] = &mut lists.orders;
        let (first, second) = match split.axis {
            0 => (o1, o2),
            1 => (o0, o2),
            _ => (o0, o1),
        };
        let temp = &mut *lists.temp;
        let second_temp: &mut [u32] = bytemuck::cast_slice_mut(&mut *lists.costs);
        rayon::join(
            || stable_partition(first, temp, marks),
            || stable_partition(second, second_temp, marks),
        );
        sides
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bvh::build::{BinnedSahBuilder, BinnedSahConfig};
    use crate::bvh::{MAX_DEPTH, sah_cost};
    use caustic_geom::{Aabb, Pcg32, Vec3};

    fn point_input(points: &[Vec3]) -> BuildInput {
        BuildInput {
            bounds: points
                .iter()
                .map(|&p| Aabb::new(p - 0.01, p + 0.01))
                .collect(),
            centroids: points.to_vec(),
        }
    }

    fn random_points(n: usize, seed: u64) -> Vec<Vec3> {
        let mut rng = Pcg32::new(seed, 1);
        (0..n)
            .map(|_| Vec3::new(rng.next_f32(), rng.next_f32(), rng.next_f32()) * 100.0)
            .collect()
    }

    fn build(input: &BuildInput, config: SweepSahConfig) -> Bvh2 {
        let bvh = SweepSahBuilder::new(config).build(input);
        bvh.validate(&input.bounds).unwrap();
        bvh
    }

    #[test]
    fn empty_and_single_inputs() {
        assert!(build(&BuildInput::default(), SweepSahConfig::DEFAULT).is_empty());
        let bvh = build(&point_input(&[Vec3::ONE]), SweepSahConfig::DEFAULT);
        assert_eq!(
            (bvh.nodes.len(), bvh.prim_indices.as_slice()),
            (1, &[0][..])
        );
    }

    #[test]
    fn coincident_centroids_split_in_halves_down_to_the_leaf_bound() {
        let input = point_input(&vec![Vec3::splat(3.0); 100]);
        let shape = build(&input, SweepSahConfig::DEFAULT).shape();
        assert!(shape.max_leaf_size <= 8);
        assert!(shape.max_depth <= 5, "{shape:?}");
    }

    #[test]
    fn geometric_series_stays_within_max_depth() {
        let points: Vec<Vec3> = (0..120).map(|k| Vec3::splat(0.5f32.powi(k))).collect();
        let input = BuildInput {
            bounds: points.iter().map(|&p| Aabb::from_point(p)).collect(),
            centroids: points,
        };
        let config = SweepSahConfig {
            max_leaf_size: 1,
            ..SweepSahConfig::DEFAULT
        };
        let shape = build(&input, config).shape();
        assert!(shape.max_depth <= MAX_DEPTH);
        assert_eq!(shape.leaves, 120);
    }

    #[test]
    fn non_finite_prims_are_parked_in_an_empty_leaf() {
        let mut input = point_input(&[Vec3::ZERO, Vec3::ONE, Vec3::splat(2.0)]);
        input
            .bounds
            .push(Aabb::new(Vec3::splat(f32::NAN), Vec3::ONE));
        input.centroids.push(Vec3::splat(f32::NAN));
        let bvh = build(&input, SweepSahConfig::DEFAULT);
        let park = bvh.nodes[bvh.nodes[0].left_child() + 1];
        assert!(park.is_leaf() && park.bounds().is_empty());
        assert_eq!(bvh.prim_indices[park.prim_range()], [3]);
    }

    #[test]
    fn parallel_and_sequential_builds_agree() {
        let input = point_input(&random_points(20_000, 3));
        let small_tasks = SweepSahConfig {
            parallel_min_prims: 64,
            ..SweepSahConfig::DEFAULT
        };
        let parallel = build(&input, small_tasks);
        let sequential = build(&input, SweepSahConfig::DEFAULT.sequential());
        assert_eq!(parallel, sequential);
    }

    #[test]
    fn leaves_respect_the_size_bounds() {
        let input = point_input(&random_points(1000, 4));
        for max_leaf_size in [1, 2, 8, 16] {
            let config = SweepSahConfig {
                max_leaf_size,
                ..SweepSahConfig::DEFAULT
            };
            assert!(build(&input, config).shape().max_leaf_size <= max_leaf_size);
        }
    }

    #[test]
    fn full_sweep_trees_are_no_worse_than_binned_ones() {
        // Not a theorem for whole trees (both are greedy), but the full
        // sweep's planes include every binned plane, so on plain random
        // input it should never lose by more than noise.
        for seed in 0..4 {
            let input = point_input(&random_points(5000, seed));
            let sweep = sah_cost(&build(&input, SweepSahConfig::DEFAULT));
            let binned = sah_cost(&BinnedSahBuilder::new(BinnedSahConfig::FAST).build(&input));
            assert!(sweep <= binned * 1.001, "sweep {sweep} binned {binned}");
        }
    }

    #[test]
    fn peak_memory_covers_the_scratch_and_the_output() {
        let input = point_input(&random_points(3000, 5));
        let (bvh, peak) = SweepSahBuilder::default().build_with_peak(&input);
        let output = bvh.nodes.len() * 32 + bvh.prim_indices.len() * 4;
        // Boxes alone are 32 bytes per primitive.
        assert!(peak >= output && peak >= 32 * 3000, "{peak}");
    }
}
