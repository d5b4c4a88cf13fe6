//! `bvh-binned`: top-down SAH BVH construction with binning, after Wald,
//! "On fast Construction of SAH-based Bounding Volume Hierarchies" (IEEE
//! Symposium on Interactive Ray Tracing, 2007).
//!
//! Each node projects its primitives' centroids into `bins` equal bins over
//! the centroid box on each of the three axes, sweeps the bin boundaries
//! with prefix and suffix boxes, and takes the cheapest plane by the surface
//! area heuristic
//!
//! `C_trav + C_isect * (A_L N_L + A_R N_R) / A`
//!
//! against the leaf cost `C_isect * N`. A node becomes a leaf when that is no
//! worse or when it holds at most `min_leaf_size` primitives; it is split
//! anyway when it holds more than `max_leaf_size`, so that bound is hard.
//! When binning finds no plane with primitives on both sides (all centroids
//! in one bin: coincident, or too close for `f32` bins) the node falls back
//! to an object-median split on the widest centroid axis.
//!
//! Depth bound: a node at depth `d` with `n` primitives keeps
//! `d + ceil(log2 n) <= MAX_DEPTH` by switching to median splits when the
//! budget runs out, which halves `n` per level. So no leaf is deeper than
//! [`MAX_DEPTH`], whatever the input (a geometric series of sizes would
//! otherwise peel a few primitives per level), and the traversal's fixed
//! stack cannot overflow.
//!
//! Cost: nodes of at most 24 primitives (most nodes) sort their
//! primitives by bin instead of filling bins, which finds the same plane
//! (proved by a test) without touching `3 * bins` bins per node, and apply
//! it by permuting into that order. Larger nodes bin and then partition in
//! place without data-dependent branches. The working boxes are `Vec3A`
//! (`BuildBox`), so growing a box is one SIMD min and max. The optional
//! per-size bin schedule of the multi-stage variant is not here yet; it
//! would slot into `BinMapping::new`.
//!
//! Parallelism: subtrees of at least `parallel_min_prims` primitives are
//! built with `rayon::join`; the first levels, where one node holds most of
//! the input, also bin in parallel (`par_chunks` then a reduction of the bin
//! arrays). Primitive references are partitioned in place, and parallel
//! subtrees own disjoint slices of them. Below the parallel size a subtree is
//! built by plain recursion into one `Vec` (a fragment); fragments are copied
//! once, in parallel, into the final depth-first node array, with child
//! indices relocated. No allocation happens per node.
//!
//! Non-finite primitives (see [`BuildInput::is_placeable`]) are never hit, so
//! they are kept out of the binning and parked in one leaf with the empty
//! box, a child of the root; that leaf alone may exceed `max_leaf_size`.

mod split;

use super::build_box::BuildBox;
use super::{Bvh2Builder, debug_validate};
use crate::BuildInput;
use crate::bvh::{Bvh2, BvhNode, MAX_DEPTH};
use bytemuck::Zeroable;
use caustic_geom::{Aabb, Vec3};
use rayon::prelude::*;
use split::{
    BinMapping, BinSplit, SMALL_NODE, Split, best_binned_plane, best_sorted_plane, median_split,
    partition, reorder,
};

/// Upper bound of [`BinnedSahConfig::bins`] (bins live on the stack).
pub const MAX_BINS: usize = 64;

/// Tuning of [`BinnedSahBuilder`]. The presets are the supported points;
/// other values work as long as `2 <= bins <= MAX_BINS` and
/// `1 <= min_leaf_size <= max_leaf_size`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BinnedSahConfig {
    /// Bins per axis (Wald 2007 found 16 to 32 enough to match a full sweep).
    pub bins: usize,
    /// Nodes with at most this many primitives are always leaves.
    pub min_leaf_size: usize,
    /// Nodes with more primitives are always split: a hard leaf-size bound.
    pub max_leaf_size: usize,
    /// Cost of visiting an inner node, in the SAH that drives the splits.
    pub traversal_cost: f32,
    /// Cost of one primitive test, in the SAH that drives the splits.
    pub intersection_cost: f32,
    /// Subtrees with at least this many primitives build their two children
    /// in parallel; `usize::MAX` builds on one thread.
    pub parallel_min_prims: usize,
    /// Nodes with at least this many primitives bin in parallel.
    pub parallel_binning_min_prims: usize,
}

impl BinnedSahConfig {
    /// 32 bins, leaves of 1 to 8 primitives, unit costs: the `bvh-binned` default.
    pub const DEFAULT: Self = Self {
        bins: 32,
        min_leaf_size: 1,
        max_leaf_size: 8,
        traversal_cost: 1.0,
        intersection_cost: 1.0,
        parallel_min_prims: 4096,
        parallel_binning_min_prims: 64 * 1024,
    };

    /// 8 bins: quicker builds for dynamic scenes, slightly worse trees.
    pub const FAST: Self = Self {
        bins: 8,
        ..Self::DEFAULT
    };

    /// 64 bins: the best trees this builder makes, at about twice the binning work.
    pub const HIGH_QUALITY: Self = Self {
        bins: 64,
        ..Self::DEFAULT
    };

    /// The same settings on one thread (for timing or reproducing).
    #[must_use]
    pub const fn sequential(self) -> Self {
        Self {
            parallel_min_prims: usize::MAX,
            parallel_binning_min_prims: usize::MAX,
            ..self
        }
    }
}

impl Default for BinnedSahConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// The binned SAH builder (`bvh-binned`); see the module docs.
#[derive(Clone, Debug, Default)]
pub struct BinnedSahBuilder {
    pub config: BinnedSahConfig,
}

impl BinnedSahBuilder {
    pub fn new(config: BinnedSahConfig) -> Self {
        assert!(
            (2..=MAX_BINS).contains(&config.bins),
            "bins must be in 2..={MAX_BINS}"
        );
        assert!(
            1 <= config.min_leaf_size && config.min_leaf_size <= config.max_leaf_size,
            "need 1 <= min_leaf_size <= max_leaf_size"
        );
        Self { config }
    }
}

impl Bvh2Builder for BinnedSahBuilder {
    fn name(&self) -> &'static str {
        "bvh-binned"
    }

    fn build(&self, input: &BuildInput) -> Bvh2 {
        let bvh = Build {
            config: &self.config,
        }
        .run(input);
        debug_validate(self.name(), &bvh, input);
        bvh
    }
}

/// A primitive as the builder moves it around: 48 bytes, partitioned in
/// place, so binning streams through memory instead of gathering.
#[derive(Clone, Copy, Debug)]
struct PrimRef {
    bounds: BuildBox,
    centroid: Vec3,
    id: u32,
}

/// Box and centroid box of a node's primitives.
#[derive(Clone, Copy, Debug)]
struct NodeInfo {
    bounds: BuildBox,
    centroid_bounds: BuildBox,
}

impl NodeInfo {
    const EMPTY: Self = Self {
        bounds: BuildBox::EMPTY,
        centroid_bounds: BuildBox::EMPTY,
    };

    fn add(mut self, prim: &PrimRef) -> Self {
        self.bounds = self.bounds.union(prim.bounds);
        self.centroid_bounds.grow(prim.centroid);
        self
    }

    fn merge(self, other: Self) -> Self {
        Self {
            bounds: self.bounds.union(other.bounds),
            centroid_bounds: self.centroid_bounds.union(other.centroid_bounds),
        }
    }

    fn of(prims: &[PrimRef], parallel: bool) -> Self {
        if parallel {
            prims
                .par_iter()
                .fold(|| Self::EMPTY, Self::add)
                .reduce(|| Self::EMPTY, Self::merge)
        } else {
            prims.iter().fold(Self::EMPTY, Self::add)
        }
    }
}

/// One build: the config plus the recursive steps.
struct Build<'a> {
    config: &'a BinnedSahConfig,
}

/// A built subtree whose node indices are relative to the start of its body:
/// the root record (stored by the parent, next to its sibling) and the nodes
/// below it.
struct Subtree {
    root: BvhNode,
    body: Body,
}

/// Nodes below a subtree's root, laid out as: both children, the left
/// child's body, the right child's body.
enum Body {
    /// Built by one thread; inner nodes' `first` is relative to the vector start.
    Flat(Vec<BvhNode>),
    /// Built by two parallel tasks; `len` counts every node below.
    Pair {
        len: usize,
        children: Box<[Subtree; 2]>,
    },
}

impl Body {
    fn len(&self) -> usize {
        match self {
            Body::Flat(nodes) => nodes.len(),
            Body::Pair { len, .. } => *len,
        }
    }

    /// Copies the body into `out`, which starts at global index `base`,
    /// turning relative child indices into global ones.
    fn write(&self, out: &mut [BvhNode], base: u32) {
        match self {
            Body::Flat(nodes) => {
                for (slot, node) in out.iter_mut().zip(nodes) {
                    *slot = relocate(*node, base);
                }
            }
            Body::Pair { children, .. } => {
                let [left, right] = &**children;
                let left_base = base + 2;
                let right_base = left_base + left.body.len() as u32;
                out[0] = relocate(left.root, left_base);
                out[1] = relocate(right.root, right_base);
                let (left_out, right_out) = out[2..].split_at_mut(left.body.len());
                rayon::join(
                    || left.body.write(left_out, left_base),
                    || right.body.write(right_out, right_base),
                );
            }
        }
    }
}

/// Moves an inner node's child index by `base`; leaves are unchanged.
#[inline]
fn relocate(mut node: BvhNode, base: u32) -> BvhNode {
    if !node.is_leaf() {
        node.first += base;
    }
    node
}

/// `ceil(log2(n))` for `n >= 1`: the depth a median-split subtree of `n`
/// single-primitive leaves needs.
fn ceil_log2(n: usize) -> usize {
    (usize::BITS - (n.max(1) - 1).leading_zeros()) as usize
}

impl Build<'_> {
    fn run(&self, input: &BuildInput) -> Bvh2 {
        let n = input.len();
        assert!(n <= u32::MAX as usize, "at most 2^32 - 1 primitives");
        if n == 0 {
            return Bvh2::empty();
        }
        let parallel = n >= self.config.parallel_binning_min_prims;
        let (mut refs, parked) = prim_refs(input, parallel);
        if refs.is_empty() {
            return parked_only(parked);
        }
        let info = NodeInfo::of(&refs, parallel);
        // With parked primitives the finite tree hangs one level lower.
        let depth = usize::from(!parked.is_empty());
        let tree = self.subtree(&mut refs, 0, info, depth);
        let mut prim_indices: Vec<u32> = refs.iter().map(|r| r.id).collect();
        let finite_count = prim_indices.len() as u32;
        prim_indices.extend_from_slice(&parked);
        let nodes = if parked.is_empty() {
            flatten(tree, &[])
        } else {
            let park = BvhNode::leaf(Aabb::EMPTY, finite_count, parked.len() as u32);
            flatten(tree, &[park])
        };
        Bvh2 {
            nodes,
            prim_indices,
        }
    }

    /// Builds the subtree over `refs` (slots `offset ..` of the final prim
    /// index array), in parallel while it is large enough.
    fn subtree(
        &self,
        refs: &mut [PrimRef],
        offset: usize,
        info: NodeInfo,
        depth: usize,
    ) -> Subtree {
        if refs.len() < self.config.parallel_min_prims {
            let mut body = Vec::with_capacity(2 * refs.len());
            let root = self.sequential(refs, offset, info, depth, &mut body);
            return Subtree {
                root,
                body: Body::Flat(body),
            };
        }
        let Some(split) = self.split(refs, &info, depth) else {
            return Subtree {
                root: BvhNode::leaf(info.bounds.to_aabb(), offset as u32, refs.len() as u32),
                body: Body::Flat(Vec::new()),
            };
        };
        let (left_refs, right_refs) = refs.split_at_mut(split.left_count);
        let right_offset = offset + split.left_count;
        let (left, right) = rayon::join(
            || self.subtree(left_refs, offset, split.left, depth + 1),
            || self.subtree(right_refs, right_offset, split.right, depth + 1),
        );
        Subtree {
            root: BvhNode::inner(info.bounds.to_aabb(), 0),
            body: Body::Pair {
                len: 2 + left.body.len() + right.body.len(),
                children: Box::new([left, right]),
            },
        }
    }

    /// Single-threaded recursion: pushes the nodes below this one into `out`
    /// (children as a pair, then their subtrees) and returns this node.
    fn sequential(
        &self,
        refs: &mut [PrimRef],
        offset: usize,
        info: NodeInfo,
        depth: usize,
        out: &mut Vec<BvhNode>,
    ) -> BvhNode {
        let Some(split) = self.split(refs, &info, depth) else {
            return BvhNode::leaf(info.bounds.to_aabb(), offset as u32, refs.len() as u32);
        };
        let pair = out.len();
        out.extend([BvhNode::zeroed(); 2]);
        let (left_refs, right_refs) = refs.split_at_mut(split.left_count);
        let left = self.sequential(left_refs, offset, split.left, depth + 1, out);
        let right_offset = offset + split.left_count;
        let right = self.sequential(right_refs, right_offset, split.right, depth + 1, out);
        out[pair] = left;
        out[pair + 1] = right;
        BvhNode::inner(info.bounds.to_aabb(), pair as u32)
    }

    /// Decides leaf or split for a node and, for a split, partitions `refs`.
    fn split(&self, refs: &mut [PrimRef], info: &NodeInfo, depth: usize) -> Option<Split> {
        let n = refs.len();
        if n <= self.config.min_leaf_size {
            return None;
        }
        let must_split = n > self.config.max_leaf_size;
        let sah_allowed = depth + ceil_log2(n) < MAX_DEPTH;
        let parallel = n >= self.config.parallel_binning_min_prims;
        if sah_allowed {
            let mapping = BinMapping::new(&info.centroid_bounds, self.config.bins);
            if n <= SMALL_NODE {
                if let Some((plan, order)) = best_sorted_plane(refs, &mapping) {
                    if !must_split && self.leaf_is_cheaper(n, info, &plan) {
                        return None;
                    }
                    return Some(reorder(refs, &order, &plan));
                }
            } else if let Some(plan) = best_binned_plane(refs, &mapping, parallel) {
                if !must_split && self.leaf_is_cheaper(n, info, &plan) {
                    return None;
                }
                return Some(partition(refs, &mapping, &plan));
            }
        }
        must_split.then(|| median_split(refs, info, parallel))
    }

    /// SAH leaf test, multiplied through by the node's area so that flat or
    /// point-like nodes (area 0) need no division.
    fn leaf_is_cheaper(&self, n: usize, info: &NodeInfo, plan: &BinSplit) -> bool {
        let area = info.bounds.half_area();
        let leaf = self.config.intersection_cost * n as f32 * area;
        let split =
            self.config.traversal_cost * area + self.config.intersection_cost * plan.weighted_area;
        leaf <= split
    }
}

/// Splits the input into placeable primitive references and the ids of the
/// non-finite primitives to park.
fn prim_refs(input: &BuildInput, parallel: bool) -> (Vec<PrimRef>, Vec<u32>) {
    let make = |i: usize| {
        input.is_placeable(i).then(|| PrimRef {
            bounds: BuildBox::from_aabb(input.bounds[i]),
            centroid: input.centroids[i],
            id: i as u32,
        })
    };
    let refs: Vec<PrimRef> = if parallel {
        (0..input.len()).into_par_iter().filter_map(make).collect()
    } else {
        (0..input.len()).filter_map(make).collect()
    };
    let parked = if refs.len() == input.len() {
        Vec::new()
    } else {
        (0..input.len())
            .filter(|&i| !input.is_placeable(i))
            .map(|i| i as u32)
            .collect()
    };
    (refs, parked)
}

/// The hierarchy when no primitive is placeable: one leaf with the empty box.
fn parked_only(parked: Vec<u32>) -> Bvh2 {
    Bvh2 {
        nodes: vec![BvhNode::leaf(Aabb::EMPTY, 0, parked.len() as u32)],
        prim_indices: parked,
    }
}

/// Lays the built tree out as one node array, root first. With `extra` (the
/// parked leaf), a new root holds the tree and that leaf as its children.
fn flatten(tree: Subtree, extra: &[BvhNode]) -> Vec<BvhNode> {
    let (root, body) = match extra {
        [] => (tree.root, tree.body),
        [park] => {
            let bounds = tree.root.bounds();
            let len = 2 + tree.body.len();
            let park = Subtree {
                root: *park,
                body: Body::Flat(Vec::new()),
            };
            let body = Body::Pair {
                len,
                children: Box::new([tree, park]),
            };
            (BvhNode::inner(bounds, 0), body)
        }
        _ => unreachable!("at most one extra leaf"),
    };
    let mut nodes = bytemuck::zeroed_vec(1 + body.len());
    nodes[0] = relocate(root, 1);
    body.write(&mut nodes[1..], 1);
    nodes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point_input(points: &[Vec3]) -> BuildInput {
        BuildInput {
            bounds: points
                .iter()
                .map(|&p| Aabb::new(p - 0.01, p + 0.01))
                .collect(),
            centroids: points.to_vec(),
        }
    }

    fn build(input: &BuildInput, config: BinnedSahConfig) -> Bvh2 {
        let bvh = BinnedSahBuilder::new(config).build(input);
        bvh.validate(&input.bounds).unwrap();
        bvh
    }

    #[test]
    fn ceil_log2_values() {
        let got: Vec<usize> = [1, 2, 3, 4, 5, 8, 9]
            .iter()
            .map(|&n| ceil_log2(n))
            .collect();
        assert_eq!(got, [0, 1, 2, 2, 3, 3, 4]);
    }

    #[test]
    fn empty_and_single_inputs() {
        assert!(build(&BuildInput::default(), BinnedSahConfig::DEFAULT).is_empty());
        let bvh = build(&point_input(&[Vec3::ONE]), BinnedSahConfig::DEFAULT);
        assert_eq!(bvh.nodes.len(), 1);
        assert_eq!(bvh.prim_indices, [0]);
    }

    #[test]
    fn coincident_centroids_split_by_median_down_to_the_leaf_bound() {
        let input = point_input(&vec![Vec3::splat(3.0); 100]);
        let bvh = build(&input, BinnedSahConfig::DEFAULT);
        let shape = bvh.shape();
        assert!(shape.max_leaf_size <= 8);
        assert!(shape.max_depth <= 5, "median splits keep it balanced");
    }

    #[test]
    fn geometric_series_stays_within_max_depth() {
        // Centroids at 2^-k: binning peels a handful per level, so only the
        // depth budget keeps the tree shallow.
        let points: Vec<Vec3> = (0..120).map(|k| Vec3::splat(0.5f32.powi(k))).collect();
        let input = BuildInput {
            bounds: points.iter().map(|&p| Aabb::from_point(p)).collect(),
            centroids: points,
        };
        let config = BinnedSahConfig {
            max_leaf_size: 1,
            ..BinnedSahConfig::DEFAULT
        };
        let bvh = build(&input, config);
        let shape = bvh.shape();
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
        input
            .bounds
            .push(Aabb::new(Vec3::ZERO, Vec3::splat(f32::INFINITY)));
        input.centroids.push(Vec3::splat(f32::INFINITY));
        let bvh = build(&input, BinnedSahConfig::DEFAULT);
        let root = bvh.nodes[0];
        assert!(!root.is_leaf());
        let park = bvh.nodes[root.left_child() + 1];
        assert!(park.is_leaf() && park.bounds().is_empty());
        let parked: Vec<u32> = park.prim_range().map(|s| bvh.prim_indices[s]).collect();
        assert_eq!(parked, [3, 4]);
        assert!(bvh.bounds().is_finite());

        let only_bad = BuildInput {
            bounds: vec![Aabb::new(Vec3::splat(f32::NAN), Vec3::ONE)],
            centroids: vec![Vec3::splat(f32::NAN)],
        };
        let bvh = build(&only_bad, BinnedSahConfig::DEFAULT);
        assert_eq!(bvh.nodes.len(), 1);
    }

    #[test]
    fn huge_coordinates_do_not_break_binning() {
        let points = [
            Vec3::splat(-3e38),
            Vec3::splat(3e38),
            Vec3::ZERO,
            Vec3::new(1e-30, 0.0, 0.0),
            Vec3::new(2e-45, 0.0, 0.0),
        ];
        let input = BuildInput {
            bounds: points.iter().map(|&p| Aabb::from_point(p)).collect(),
            centroids: points.to_vec(),
        };
        let config = BinnedSahConfig {
            max_leaf_size: 1,
            ..BinnedSahConfig::DEFAULT
        };
        assert_eq!(build(&input, config).shape().leaves, 5);
    }

    #[test]
    fn parallel_and_sequential_builds_agree() {
        let mut state = 12345u32;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state as f32 / u32::MAX as f32
        };
        let points: Vec<Vec3> = (0..20_000)
            .map(|_| Vec3::new(next(), next(), next()) * 100.0)
            .collect();
        let input = point_input(&points);
        let small_tasks = BinnedSahConfig {
            parallel_min_prims: 64,
            parallel_binning_min_prims: 1024,
            ..BinnedSahConfig::DEFAULT
        };
        let parallel = build(&input, small_tasks);
        let sequential = build(&input, BinnedSahConfig::DEFAULT.sequential());
        assert_eq!(parallel, sequential);
    }

    #[test]
    fn leaves_respect_the_size_bounds() {
        let points: Vec<Vec3> = (0..1000).map(|i| Vec3::new(i as f32, 0.0, 0.0)).collect();
        for max_leaf_size in [1, 2, 4, 8, 16] {
            let config = BinnedSahConfig {
                max_leaf_size,
                ..BinnedSahConfig::DEFAULT
            };
            let shape = build(&point_input(&points), config).shape();
            assert!(shape.max_leaf_size <= max_leaf_size);
        }
    }
}
