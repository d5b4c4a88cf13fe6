//! `hlbvh`: a hierarchical linear BVH in the manner of Pantaleoni and
//! Luebke, "HLBVH: Hierarchical LBVH Construction for Real-Time Ray Tracing
//! of Dynamic Geometry" (HPG 2010), and Garanzha, Pantaleoni and McAllister,
//! "Simpler and Faster HLBVH with Work Queues" (HPG 2011): the Morton order
//! cuts the primitives into clusters, an SAH tree is built over the
//! clusters, and each cluster gets its own tree below.
//!
//! 1. Morton codes sorted by radix sort ([`MortonOrder`]), as in `lbvh`.
//! 2. **Clusters**: maximal runs of equal `cluster_bits`-bit code prefix,
//!    i.e. the occupied cells of a `2^(cluster_bits / 3)`-per-axis grid
//!    over the centroid box (`cluster_bits = 15`: 32^3 cells). This is the
//!    parameter `k` of the HLBVH papers counted from the top of the code:
//!    Vinkler et al. (2013) write the cluster prefix as `30 - 3k`
//!    bits of a 30-bit code, so the default is their `k = 5`.
//! 3. **Top tree**: binned SAH over the clusters, each weighing its
//!    primitive count (Garanzha et al. build it with SAH too), down to one
//!    cluster per leaf, or to a group of clusters holding at most
//!    `max_leaf_size` primitives, which the bottom stage then treats as one.
//! 4. **Bottom trees**: binned SAH over the primitives of each top leaf
//!    (subtrees of at most 64 by the exact sweep `bvh-binned` uses for its
//!    small nodes, see `sweep.rs`), with SAH leaf termination and leaves of
//!    at most `max_leaf_size`, where
//!    Garanzha et al. split the remaining Morton bits at their midpoint;
//!    this is Zeidan's (2011) preferred division of labour turned upside down
//!    (its hybrid builds the top by LBVH and the rest by binned SAH; seed
//!    001's HLBVH baseline, like this one, does SAH at the top). The top
//!    tree's levels are cheap (one item per cluster) and the bottom trees
//!    are small, independent and cache-resident, so both stages parallelise
//!    without the wide binning passes a full binned build needs at its root.
//!
//! Parallelism: the top recursion splits with `rayon::join` for large
//! subtrees; each top leaf builds its bottom tree on one thread into its own
//! node fragment, which `fragment::assemble` copies into place. (So one
//! cluster holding most of the scene, say a million coincident centroids,
//! is built on one thread.)
//!
//! Depth bound [`MAX_DEPTH`]: a node at depth `d` over `w` primitives keeps
//! `d + ceil(log2 w) <= MAX_DEPTH`. The top tree stops early (making the
//! node's clusters one bottom tree) when SAH splitting could break it; the
//! bottom trees switch to median splits, which halve `w`, when their budget
//! runs out, as `bvh-binned` does.

mod binning;
// The GPU build plans its top on the host with the CPU builder's code.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
mod cluster_top;
#[cfg(feature = "cuda")]
pub(crate) mod cuda;
mod sweep;

use super::build_box::BuildBox;
use super::fragment::{Body, Subtree, assemble};
use super::memory::PeakMemory;
use super::morton_order::{MortonBits, MortonOrder};
use super::sorted_sweep::SahRules;
use super::{Bvh2Builder, debug_validate};
use crate::BuildInput;
use crate::bvh::{Bvh2, BvhNode, MAX_DEPTH};
use binning::{
    BinMapping, Binned, NodeInfo, SMALL, Split, best_plane, median_split, partition, small_split,
};
use bytemuck::Zeroable;
use caustic_geom::Vec3;
use rayon::prelude::*;
use sweep::{SWEEP_MAX, SweepScratch, sweep_subtree};

/// Tuning of [`HlbvhBuilder`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HlbvhConfig {
    /// Width of the Morton codes.
    pub morton_bits: MortonBits,
    /// Leading code bits that define a cluster (a multiple of 3 gives cubic
    /// cells; at most the code width).
    pub cluster_bits: u32,
    /// Bins per axis in both SAH stages, 2 to 32.
    pub bins: usize,
    /// Nodes with more primitives are always split; the bottom trees' hard
    /// leaf-size bound.
    pub max_leaf_size: usize,
    /// Cost of visiting an inner node, in the SAH.
    pub traversal_cost: f32,
    /// Cost of one primitive test, in the SAH.
    pub intersection_cost: f32,
    /// Top-tree subtrees with at least this many primitives split into two
    /// parallel tasks.
    pub parallel_min_prims: usize,
}

impl HlbvhConfig {
    /// 30-bit codes, 15-bit cluster prefixes (32^3 cells), 16 bins, leaves
    /// of up to 8: the `hlbvh` default. Measured SAH cost with 12, 15 and
    /// 18 prefix bits: 57.2, 52.9, 50.6 on sibenik and 52.1, 52.4, 52.9 on
    /// the dragon, at build times within noise of each other; 8 bins cost
    /// 1 to 2% more SAH than 16 for no measurable speed-up. (The Morton
    /// width only decides the clusters, so 63 bits buy nothing here.)
    pub const DEFAULT: Self = Self {
        morton_bits: MortonBits::Bits30,
        cluster_bits: 15,
        bins: 16,
        max_leaf_size: 8,
        traversal_cost: 1.0,
        intersection_cost: 1.0,
        parallel_min_prims: 4096,
    };

    /// 12-bit prefixes (16^3 cells): bigger clusters, more of the tree by
    /// primitive-level SAH.
    pub const COARSE_CLUSTERS: Self = Self {
        cluster_bits: 12,
        ..Self::DEFAULT
    };

    /// 18-bit prefixes (64^3 cells): smaller clusters, more of the tree by
    /// cluster-level SAH.
    pub const FINE_CLUSTERS: Self = Self {
        cluster_bits: 18,
        ..Self::DEFAULT
    };
}

impl Default for HlbvhConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// The HLBVH builder (`hlbvh`); see the module docs.
#[derive(Clone, Debug, Default)]
pub struct HlbvhBuilder {
    pub config: HlbvhConfig,
}

impl HlbvhBuilder {
    pub fn new(config: HlbvhConfig) -> Self {
        assert!(
            (2..=binning::MAX_BINS).contains(&config.bins),
            "bins must be in 2..={}",
            binning::MAX_BINS
        );
        assert!(
            config.max_leaf_size >= 1,
            "leaves hold at least one primitive"
        );
        assert!(
            (1..=config.morton_bits.bits()).contains(&config.cluster_bits),
            "cluster_bits must be in 1..=code bits"
        );
        Self { config }
    }
}

impl Bvh2Builder for HlbvhBuilder {
    fn name(&self) -> &'static str {
        "hlbvh"
    }

    fn build(&self, input: &BuildInput) -> Bvh2 {
        self.build_with_peak(input).0
    }

    fn build_with_peak(&self, input: &BuildInput) -> (Bvh2, usize) {
        let memory = PeakMemory::new();
        let order = MortonOrder::new(input, self.config.morton_bits, &memory);
        let build = Build {
            config: &self.config,
            refs: prim_refs(input, &order.ids, self.config.parallel_min_prims),
            codes: &order.codes,
            parked_depth: usize::from(!order.parked.is_empty()),
            memory: &memory,
        };
        let (tree, slots) = build.run();
        let prim_indices = slots.iter().map(|p| p.id).collect();
        let bvh = assemble(tree, prim_indices, &order.parked, &memory);
        debug_validate(self.name(), &bvh, input);
        (bvh, memory.peak())
    }
}

/// The primitives in Morton order, gathered once (the only pass that reads
/// the input at random), so that clusters are contiguous runs.
fn prim_refs(input: &BuildInput, ids: &[u32], parallel_min: usize) -> Vec<PrimRef> {
    let get = |&id: &u32| PrimRef {
        bounds: BuildBox::from_aabb(input.bounds[id as usize]),
        centroid: input.centroids[id as usize],
        id,
    };
    if ids.len() >= parallel_min {
        ids.par_iter().map(get).collect()
    } else {
        ids.iter().map(get).collect()
    }
}

/// A primitive in a bottom tree.
#[derive(Clone, Copy, Debug)]
struct PrimRef {
    bounds: BuildBox,
    centroid: Vec3,
    id: u32,
}

impl Binned for PrimRef {
    fn bounds(&self) -> BuildBox {
        self.bounds
    }
    fn centroid(&self) -> Vec3 {
        self.centroid
    }
    fn weight(&self) -> usize {
        1
    }
}

/// A run of the Morton order with one code prefix.
#[derive(Clone, Copy, Debug)]
struct Cluster {
    bounds: BuildBox,
    /// Centre of the cluster's centroid box.
    centroid: Vec3,
    /// First position in the Morton order, and primitive count.
    start: u32,
    count: u32,
}

impl Binned for Cluster {
    fn bounds(&self) -> BuildBox {
        self.bounds
    }
    fn centroid(&self) -> Vec3 {
        self.centroid
    }
    fn weight(&self) -> usize {
        self.count as usize
    }
}

/// One build.
struct Build<'a> {
    config: &'a HlbvhConfig,
    /// The placeable primitives in Morton order.
    refs: Vec<PrimRef>,
    /// Their Morton codes.
    codes: &'a [u64],
    /// Depth of the tree's root: 1 when a parking leaf shares the top root.
    parked_depth: usize,
    /// Counts the large buffers (see `PeakMemory`).
    memory: &'a PeakMemory,
}

/// `ceil(log2(n))` for `n >= 1`.
fn ceil_log2(n: usize) -> usize {
    (usize::BITS - (n.max(1) - 1).leading_zeros()) as usize
}

impl Build<'_> {
    /// The tree over the placeable primitives (`None` when there are none)
    /// and the primitives in slot order.
    fn run(&self) -> (Option<Subtree>, Vec<PrimRef>) {
        let mut clusters = self.clusters();
        if clusters.is_empty() {
            return (None, Vec::new());
        }
        // The references, their copy in slot order, the clusters.
        self.memory.alloc_array::<PrimRef>(2 * self.refs.len());
        self.memory.alloc_array::<Cluster>(clusters.len());
        let mut slots = self.refs.clone();
        let info = NodeInfo::of(&clusters);
        let tree = self.top(&mut clusters, &mut slots, 0, info, self.parked_depth);
        (Some(tree), slots)
    }

    /// Step 2: the clusters, in Morton order, with their boxes.
    fn clusters(&self) -> Vec<Cluster> {
        let codes = self.codes;
        let shift = self.config.morton_bits.bits() - self.config.cluster_bits;
        let new_cluster = |i: &usize| *i == 0 || codes[*i] >> shift != codes[*i - 1] >> shift;
        let parallel = codes.len() >= self.config.parallel_min_prims;
        let mut starts: Vec<usize> = if parallel {
            (0..codes.len())
                .into_par_iter()
                .filter(new_cluster)
                .collect()
        } else {
            (0..codes.len()).filter(new_cluster).collect()
        };
        starts.push(codes.len());
        let cluster = |w: &[usize]| self.cluster(w[0], w[1]);
        if parallel {
            starts.par_windows(2).map(cluster).collect()
        } else {
            starts.windows(2).map(cluster).collect()
        }
    }

    fn cluster(&self, start: usize, end: usize) -> Cluster {
        let info = NodeInfo::of(&self.refs[start..end]);
        let centroids = info.centroid_bounds;
        Cluster {
            bounds: info.bounds,
            centroid: ((centroids.min + centroids.max) * 0.5).into(),
            start: start as u32,
            count: (end - start) as u32,
        }
    }

    /// Step 3: the SAH tree over `clusters`, whose primitives go to `slots`
    /// (the slot array from global position `offset`).
    fn top(
        &self,
        clusters: &mut [Cluster],
        slots: &mut [PrimRef],
        offset: usize,
        info: NodeInfo,
        depth: usize,
    ) -> Subtree {
        let sah_allowed = depth + ceil_log2(info.weight) < MAX_DEPTH;
        if clusters.len() == 1 || info.weight <= self.config.max_leaf_size || !sah_allowed {
            return self.bottom_root(clusters, slots, offset, depth);
        }
        let split = if clusters.len() <= SMALL {
            small_split(clusters).0
        } else {
            let mapping = BinMapping::new(&info.centroid_bounds, self.config.bins);
            match best_plane(clusters, &mapping) {
                Some(plane) => partition(clusters, &mapping, &plane),
                None => median_split(clusters, &info),
            }
        };
        let (left_clusters, right_clusters) = clusters.split_at_mut(split.left_len);
        let (left_slots, right_slots) = slots.split_at_mut(split.left.weight);
        let right_offset = offset + split.left.weight;
        let (left, right) = if info.weight >= self.config.parallel_min_prims {
            rayon::join(
                || self.top(left_clusters, left_slots, offset, split.left, depth + 1),
                || {
                    self.top(
                        right_clusters,
                        right_slots,
                        right_offset,
                        split.right,
                        depth + 1,
                    )
                },
            )
        } else {
            (
                self.top(left_clusters, left_slots, offset, split.left, depth + 1),
                self.top(
                    right_clusters,
                    right_slots,
                    right_offset,
                    split.right,
                    depth + 1,
                ),
            )
        };
        Subtree::pair(info.bounds.to_aabb(), left, right)
    }

    /// Step 4 for one top leaf: gathers its clusters' primitives into
    /// `slots` and builds their tree as one fragment.
    fn bottom_root(
        &self,
        clusters: &[Cluster],
        slots: &mut [PrimRef],
        offset: usize,
        depth: usize,
    ) -> Subtree {
        let mut filled = 0;
        for cluster in clusters {
            let (start, count) = (cluster.start as usize, cluster.count as usize);
            slots[filled..filled + count].copy_from_slice(&self.refs[start..start + count]);
            filled += count;
        }
        debug_assert_eq!(filled, slots.len());
        let info = NodeInfo::of(slots);
        let mut body = Vec::with_capacity(2 * slots.len());
        self.memory.alloc_array::<BvhNode>(body.capacity());
        let scratch = &mut SweepScratch::new();
        let root = self.bottom(slots, offset, info, depth, &mut body, scratch);
        Subtree {
            root,
            body: Body::Flat(body),
        }
    }

    /// The bottom tree over `prims` (slots from `offset`): pushes the nodes
    /// below this one into `out` (children as a pair, then their subtrees,
    /// indices relative to `out`) and returns this node.
    fn bottom(
        &self,
        prims: &mut [PrimRef],
        offset: usize,
        info: NodeInfo,
        depth: usize,
        out: &mut Vec<BvhNode>,
        scratch: &mut SweepScratch,
    ) -> BvhNode {
        if prims.len() <= SWEEP_MAX {
            let rules = SahRules {
                min_leaf_size: 1,
                max_leaf_size: self.config.max_leaf_size,
                traversal_cost: self.config.traversal_cost,
                intersection_cost: self.config.intersection_cost,
            };
            return sweep_subtree(prims, scratch, rules, info.bounds, offset, depth, out);
        }
        let Some(split) = self.bottom_split(prims, &info, depth) else {
            return BvhNode::leaf(info.bounds.to_aabb(), offset as u32, prims.len() as u32);
        };
        let pair = out.len();
        out.extend([BvhNode::zeroed(); 2]);
        let (left_prims, right_prims) = prims.split_at_mut(split.left_len);
        let left = self.bottom(left_prims, offset, split.left, depth + 1, out, scratch);
        let right_offset = offset + split.left_len;
        let right = self.bottom(
            right_prims,
            right_offset,
            split.right,
            depth + 1,
            out,
            scratch,
        );
        out[pair] = left;
        out[pair + 1] = right;
        BvhNode::inner(info.bounds.to_aabb(), pair as u32)
    }

    /// Leaf (`None`) or split for a bottom node, by SAH within the depth budget.
    fn bottom_split(&self, prims: &mut [PrimRef], info: &NodeInfo, depth: usize) -> Option<Split> {
        let n = prims.len();
        if n == 1 {
            return None;
        }
        let must_split = n > self.config.max_leaf_size;
        if depth + ceil_log2(n) >= MAX_DEPTH {
            return must_split.then(|| median_split(prims, info));
        }
        let mapping = BinMapping::new(&info.centroid_bounds, self.config.bins);
        match best_plane(prims, &mapping) {
            Some(plane) if must_split || self.split_pays(n, info, plane.weighted_area) => {
                Some(partition(prims, &mapping, &plane))
            }
            Some(_) => None,
            None => must_split.then(|| median_split(prims, info)),
        }
    }

    /// SAH test of a split with `A_L N_L + A_R N_R = weighted_area` against a
    /// leaf, multiplied through by the node's area (no division for flat
    /// or point-like nodes).
    fn split_pays(&self, n: usize, info: &NodeInfo, weighted_area: f32) -> bool {
        let area = info.bounds.half_area();
        let leaf = self.config.intersection_cost * n as f32 * area;
        let split =
            self.config.traversal_cost * area + self.config.intersection_cost * weighted_area;
        split < leaf
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use caustic_geom::{Aabb, Vec3};

    fn point_input(points: &[Vec3]) -> BuildInput {
        BuildInput {
            bounds: points
                .iter()
                .map(|&p| Aabb::new(p - 0.01, p + 0.01))
                .collect(),
            centroids: points.to_vec(),
        }
    }

    fn build(input: &BuildInput, config: HlbvhConfig) -> Bvh2 {
        let bvh = HlbvhBuilder::new(config).build(input);
        bvh.validate(&input.bounds).unwrap();
        bvh
    }

    fn configs() -> [HlbvhConfig; 4] {
        [
            HlbvhConfig::DEFAULT,
            HlbvhConfig::COARSE_CLUSTERS,
            HlbvhConfig::FINE_CLUSTERS,
            HlbvhConfig {
                morton_bits: MortonBits::Bits63,
                cluster_bits: 63,
                max_leaf_size: 1,
                parallel_min_prims: 16,
                ..HlbvhConfig::DEFAULT
            },
        ]
    }

    fn random_points(count: usize, seed: u32) -> Vec<Vec3> {
        let mut state = seed;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state as f32 / u32::MAX as f32
        };
        (0..count)
            .map(|_| Vec3::new(next(), next(), next()) * 50.0)
            .collect()
    }

    #[test]
    fn empty_one_and_two_primitives() {
        for config in configs() {
            assert!(build(&BuildInput::default(), config).is_empty());
            assert_eq!(build(&point_input(&[Vec3::ONE]), config).nodes.len(), 1);
            let two = build(&point_input(&[Vec3::ONE, Vec3::ZERO]), config);
            assert_eq!(two.prim_indices.len(), 2);
        }
    }

    #[test]
    fn clusters_are_the_runs_of_equal_prefix() {
        // Two far-apart groups of points: with 3 prefix bits (one octant
        // level) they form exactly two clusters.
        let mut points = vec![Vec3::ZERO; 5];
        points.extend(vec![Vec3::splat(10.0); 7]);
        let input = point_input(&points);
        let config = HlbvhConfig {
            cluster_bits: 3,
            ..HlbvhConfig::DEFAULT
        };
        let order = MortonOrder::new(&input, config.morton_bits, &PeakMemory::new());
        let build = Build {
            config: &config,
            refs: prim_refs(&input, &order.ids, 1),
            codes: &order.codes,
            parked_depth: 0,
            memory: &PeakMemory::new(),
        };
        let clusters = build.clusters();
        let counts: Vec<u32> = clusters.iter().map(|c| c.count).collect();
        assert_eq!(counts, [5, 7]);
        assert_eq!(clusters[1].start, 5);
    }

    #[test]
    fn coincident_and_duplicated_centroids() {
        let same = point_input(&vec![Vec3::splat(2.0); 3000]);
        for config in configs() {
            let shape = build(&same, config).shape();
            assert!(shape.max_leaf_size <= config.max_leaf_size);
            assert!(shape.max_depth <= MAX_DEPTH);
        }
        let mut points = random_points(500, 4);
        points.extend(std::iter::repeat_n(Vec3::splat(7.0), 2000));
        let input = point_input(&points);
        for config in configs() {
            build(&input, config);
        }
    }

    #[test]
    fn geometric_series_respects_max_depth() {
        let points: Vec<Vec3> = (0..200).map(|k| Vec3::splat(0.75f32.powi(k))).collect();
        let input = point_input(&points);
        for config in configs() {
            assert!(build(&input, config).shape().max_depth <= MAX_DEPTH);
        }
    }

    #[test]
    fn parallel_and_sequential_builds_agree() {
        let input = point_input(&random_points(30_000, 9));
        let parallel = build(
            &input,
            HlbvhConfig {
                parallel_min_prims: 64,
                ..HlbvhConfig::DEFAULT
            },
        );
        let sequential = build(
            &input,
            HlbvhConfig {
                parallel_min_prims: usize::MAX,
                ..HlbvhConfig::DEFAULT
            },
        );
        assert_eq!(parallel, sequential);
    }

    #[test]
    fn non_finite_prims_are_parked() {
        let mut input = point_input(&random_points(100, 2));
        input
            .bounds
            .push(Aabb::new(Vec3::splat(f32::NAN), Vec3::ONE));
        input.centroids.push(Vec3::splat(f32::NAN));
        let bvh = build(&input, HlbvhConfig::DEFAULT);
        let root = bvh.nodes[0];
        assert!(bvh.nodes[root.left_child() + 1].bounds().is_empty());
    }
}
