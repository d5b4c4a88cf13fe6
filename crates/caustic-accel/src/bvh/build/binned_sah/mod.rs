//! `bvh-binned`: top-down SAH BVH construction with binning, after Wald,
//! "On fast Construction of SAH-based Bounding Volume Hierarchies" (IEEE
//! Symposium on Interactive Ray Tracing, 2007), with the multi-stage bin
//! schedule of Zeidan's thesis (2011, §4.6) as an option.
//!
//! Each large node projects its primitives' split points into `bins` equal
//! bins over the box of those points on each of the three axes (all three
//! bin indices computed at once in SIMD lanes), sweeps the bin boundaries
//! with prefix and suffix boxes (again one SIMD lane per axis), and takes
//! the cheapest plane by the surface area heuristic
//!
//! `C_trav + C_isect * (A_L N_L + A_R N_R) / A`
//!
//! against the leaf cost `C_isect * N`. A node becomes a leaf when that is no
//! worse or when it holds at most `min_leaf_size` primitives; it is split
//! anyway when it holds more than `max_leaf_size`, so that bound is hard.
//! When binning finds no plane with primitives on both sides (all split
//! points in one bin: coincident, or too close for `f32` bins) the node
//! falls back to an object-median split on the widest axis. The partition
//! that applies a plane also gathers both children's split-point boxes, so a
//! level costs two passes over its primitives (bin, partition).
//!
//! Split points are box centers, not the input's centroids: Embree does the
//! same, a reference is then just a box and an id (36 bytes instead of 48,
//! less to stream per level), and on the test scenes the trees are better
//! (SAH cost with vertex-average centroids -> box centers: Sibenik 48.5 ->
//! 46.9, Sponza 77.8 -> 69.5, Conference 40.5 -> 37.6, dragon 49.7 -> 48.8;
//! with vertex averages this builder was 6 to 14 % worse than the full
//! sweep on Sponza and Conference, with box centers 2 to 4 %).
//!
//! Small subtrees: those of at most `sweep_max_prims` primitives (most
//! nodes of a tree, since leaves hold one or two primitives) skip binning:
//! they are sorted once on each axis and built with the exact SAH sweep of
//! [`small`], whose planes are at least as good as binned ones; filling and
//! sweeping `3 * bins` bins would cost more than such a node's primitives.
//!
//! Stages: with a schedule ([`BinnedSahConfig::stages`]) the bin count
//! depends on the node's size: many bins where a plane decides the most,
//! few where binning would cost more than it finds. The named presets are
//! [`BinnedSahConfig::DEFAULT`] (`bvh-binned`: 32 bins) and
//! [`BinnedSahConfig::STAGED`] (`bvh-binned-staged`: [`FIVE_STAGES`]).
//!
//! Planes: `bvh-taskpool`'s CPU twin (`super::taskpool`) replaces the bins
//! with that GPU builder's 32 candidate planes (`split::Planes::TaskPool`);
//! the sweep, the partition and the rest are the same.
//!
//! Depth bound: a node at depth `d` with `n` primitives keeps
//! `d + ceil(log2 n) <= MAX_DEPTH` by switching to median splits when the
//! budget runs out, which halves `n` per level. So no leaf is deeper than
//! `MAX_DEPTH`, whatever the input, and the traversal's fixed stack cannot
//! overflow.
//!
//! Spatial splits (`bvh-spatial`, [`spatial`]) run through this same
//! build: a node's references then sit at the front of a run of slots
//! that also holds its share of spare slots for cut parts (see [`Build`]).
//!
//! Parallelism: subtrees of at least `parallel_min_prims` primitives are
//! built with `rayon::join`; the first levels, where one node holds most of
//! the input, also bin in parallel (`par_chunks` then a reduction of the bin
//! arrays). References are partitioned in place, and parallel subtrees own
//! disjoint slices of them. Below the parallel size a subtree is built by
//! plain recursion into one fragment ([`super::fragment`]), copied once into
//! the final depth-first node array. No allocation happens per node. The
//! tree depends on the input and the config, never on the thread count.
//!
//! Memory (counted for `peak_build_bytes`): a 32-byte box and a 4-byte id
//! per primitive (the ids end up as the output's index array), the
//! fragments (room for two nodes per primitive of their subtree), and the
//! output nodes; bins and small-node scratch live on the stack.
//! Non-finite primitives (see [`BuildInput::is_placeable`]) are never hit,
//! so they are kept out of the binning and parked in one leaf with the
//! empty box, a child of the root; that leaf alone may exceed
//! `max_leaf_size`.

mod chop;
mod config;
mod small;
mod spatial;
mod split;

pub use config::{BinSchedule, BinStage, BinnedSahConfig, FIVE_STAGES, MAX_BINS, MAX_STAGES};
pub use spatial::{MAX_SPATIAL_BINS, SpatialSahBuilder, SpatialSahConfig};

use super::build_box::BuildBox;
use super::fragment::{Body, Subtree, assemble, unplaceable_ids};
use super::memory::PeakMemory;
use super::sorted_sweep::SahRules;
use super::{Bvh2Builder, debug_validate};
use crate::BuildInput;
use crate::bvh::{Bvh2, BvhNode};
use bytemuck::Zeroable;
use rayon::prelude::*;
use small::{SmallScratch, small_subtree};
use spatial::{SpatialSplits, close_gaps};
use split::{BinMapping, Planes, Split, best_binned_plane, median_split, partition};

/// The binned SAH builder (`bvh-binned`, `bvh-binned-staged`); see the module docs.
#[derive(Clone, Debug, Default)]
pub struct BinnedSahBuilder {
    pub config: BinnedSahConfig,
    /// Where the candidate planes lie: the bins' boundaries, or the GPU
    /// task-pool builder's planes (its CPU twin, `super::taskpool`).
    planes: Planes,
}

impl BinnedSahBuilder {
    /// The builder with `config`; panics on a configuration
    /// [`BinnedSahConfig::validate`] rejects (use that first for input).
    pub fn new(config: BinnedSahConfig) -> Self {
        if let Err(message) = config.validate() {
            panic!("invalid binned SAH configuration: {message}");
        }
        Self {
            config,
            planes: Planes::Bins,
        }
    }

    /// The builder with `config` whose nodes above `sweep_max_prims` price
    /// `bvh-taskpool`'s 32 planes ([`Planes::TaskPool`]) instead of bins.
    pub(crate) fn with_task_pool_planes(config: BinnedSahConfig) -> Self {
        Self {
            planes: Planes::TaskPool,
            ..Self::new(config)
        }
    }
}

impl Bvh2Builder for BinnedSahBuilder {
    fn name(&self) -> &'static str {
        if self.config.stages.is_empty() {
            "bvh-binned"
        } else {
            "bvh-binned-staged"
        }
    }

    fn build(&self, input: &BuildInput) -> Bvh2 {
        self.build_with_peak(input).0
    }

    fn build_with_peak(&self, input: &BuildInput) -> (Bvh2, usize) {
        let memory = PeakMemory::new();
        let build = Build {
            config: &self.config,
            planes: self.planes,
            rules: self.config.rules(),
            memory: &memory,
            spatial: None,
        };
        let bvh = build.run(input);
        debug_validate(self.name(), &bvh, input);
        (bvh, memory.peak())
    }
}

/// The primitive references of a node, as two parallel arrays moved
/// together: the boxes, which binning streams through (32 bytes each), and
/// the primitive ids, which only ride along. The split point of a primitive
/// is the center of its box (see the module docs).
struct Refs<'a> {
    boxes: &'a mut [BuildBox],
    ids: &'a mut [u32],
}

impl<'a> Refs<'a> {
    fn len(&self) -> usize {
        self.ids.len()
    }

    fn split_at(self, k: usize) -> (Refs<'a>, Refs<'a>) {
        let (left_boxes, right_boxes) = self.boxes.split_at_mut(k);
        let (left_ids, right_ids) = self.ids.split_at_mut(k);
        (
            Refs {
                boxes: left_boxes,
                ids: left_ids,
            },
            Refs {
                boxes: right_boxes,
                ids: right_ids,
            },
        )
    }

    /// The first `n` references, borrowed again.
    fn front(&mut self, n: usize) -> Refs<'_> {
        Refs {
            boxes: &mut self.boxes[..n],
            ids: &mut self.ids[..n],
        }
    }

    #[inline(always)]
    fn swap(&mut self, i: usize, j: usize) {
        self.boxes.swap(i, j);
        self.ids.swap(i, j);
    }
}

/// Box of a node's primitives and box of their split points (doubled box
/// centers, [`BuildBox::center2`]).
#[derive(Clone, Copy, Debug)]
struct NodeInfo {
    bounds: BuildBox,
    centers: BuildBox,
}

impl NodeInfo {
    const EMPTY: Self = Self {
        bounds: BuildBox::EMPTY,
        centers: BuildBox::EMPTY,
    };

    #[inline(always)]
    fn add(mut self, b: &BuildBox) -> Self {
        self.bounds = self.bounds.union(*b);
        self.centers.grow_a(b.center2());
        self
    }

    fn merge(self, other: Self) -> Self {
        Self {
            bounds: self.bounds.union(other.bounds),
            centers: self.centers.union(other.centers),
        }
    }

    fn of(boxes: &[BuildBox], parallel: bool) -> Self {
        if parallel {
            boxes
                .par_iter()
                .fold(|| Self::EMPTY, Self::add)
                .reduce(|| Self::EMPTY, Self::merge)
        } else {
            boxes.iter().fold(Self::EMPTY, Self::add)
        }
    }
}

/// How a node was split: its children's reference counts and infos, and
/// where the right child's run starts in the node's run (right after the
/// left child's references, or after the left child's share of spare slots
/// in a build with spatial splits).
struct Children {
    left_count: usize,
    left: NodeInfo,
    right_start: usize,
    right_count: usize,
    right: NodeInfo,
}

impl Children {
    /// The children of an object split of the run's first `n` references
    /// (left ones first): the right ones move up to leave the left child
    /// its share of the run's spare slots, if it has any.
    fn of_object(run: &mut Refs, n: usize, split: Split) -> Self {
        let (left_count, right_count) = (split.left_count, n - split.left_count);
        let spare = run.len() - n;
        let right_start = left_count + share(spare, left_count, right_count);
        if right_start > left_count {
            run.boxes.copy_within(left_count..n, right_start);
            run.ids.copy_within(left_count..n, right_start);
        }
        Self {
            left_count,
            left: split.left,
            right_start,
            right_count,
            right: split.right,
        }
    }
}

/// The left child's share of `spare` slots, in proportion to the children's sizes.
fn share(spare: usize, left: usize, right: usize) -> usize {
    (spare as u128 * left as u128 / (left + right).max(1) as u128) as usize
}

/// One build: the config plus the recursive steps.
///
/// A node works on a run of the reference arrays: its `n` references at
/// the front, then its share of the spare slots that spatial splits may
/// fill with cut references (`bvh-spatial`, [`spatial`]); without spatial
/// splits a run is exactly its references.
struct Build<'a> {
    config: &'a BinnedSahConfig,
    planes: Planes,
    rules: SahRules,
    memory: &'a PeakMemory,
    /// The spatial splits of `bvh-spatial`; `None`: object splits only.
    spatial: Option<SpatialSplits<'a>>,
}

impl Build<'_> {
    fn run(mut self, input: &BuildInput) -> Bvh2 {
        let n = input.len();
        assert!(n <= u32::MAX as usize, "at most 2^32 - 1 primitives");
        let parallel = n >= self.config.parallel_binning_min_prims;
        let (mut boxes, mut ids, info) = prim_refs(input, parallel);
        let placed = ids.len();
        let spare = self
            .spatial
            .as_mut()
            .map_or(0, |s| s.start(placed, &info.bounds));
        boxes.resize(placed + spare, BuildBox::EMPTY);
        ids.resize(placed + spare, u32::MAX);
        self.memory.alloc_array::<BuildBox>(n + spare);
        self.memory.alloc_array::<u32>(n + spare);
        let parked = if placed == n {
            Vec::new()
        } else {
            unplaceable_ids(input)
        };
        // With parked primitives the placed tree hangs one level lower.
        let depth = usize::from(!parked.is_empty());
        let tree = (placed > 0).then(|| {
            let run = Refs {
                boxes: &mut boxes,
                ids: &mut ids,
            };
            self.subtree(run, placed, 0, info, depth)
        });
        drop(boxes);
        self.memory.free_array::<BuildBox>(n + spare);
        // The ids are now in leaf order: they are the prim index array
        // (with gaps where spare slots went unused).
        let mut bvh = assemble(tree, ids, &parked, self.memory);
        if spare > 0 {
            close_gaps(&mut bvh);
        }
        bvh
    }

    /// Builds the subtree over the first `n` references of `run` (slots
    /// `offset ..` of the final prim index array), in parallel while it is
    /// large enough.
    fn subtree(
        &self,
        mut run: Refs,
        n: usize,
        offset: usize,
        info: NodeInfo,
        depth: usize,
    ) -> Subtree {
        if n < self.config.parallel_min_prims || n <= self.config.sweep_max_prims {
            let room = 2 * run.len();
            self.memory.alloc_array::<BvhNode>(room);
            let mut body = Vec::with_capacity(room);
            let scratch = &mut SmallScratch::new();
            let root = self.sequential(run, n, offset, info, depth, &mut body, scratch);
            return Subtree {
                root,
                body: Body::Flat(body),
            };
        }
        let Some(children) = self.split(&mut run, n, &info, depth) else {
            return Subtree::leaf(info.bounds.to_aabb(), offset, n);
        };
        let (left_run, right_run) = run.split_at(children.right_start);
        let right_offset = offset + children.right_start;
        let (left, right) = rayon::join(
            || {
                self.subtree(
                    left_run,
                    children.left_count,
                    offset,
                    children.left,
                    depth + 1,
                )
            },
            || {
                let (count, info) = (children.right_count, children.right);
                self.subtree(right_run, count, right_offset, info, depth + 1)
            },
        );
        Subtree::pair(info.bounds.to_aabb(), left, right)
    }

    /// Single-threaded recursion: pushes the nodes below this one into `out`
    /// (children as a pair, then their subtrees) and returns this node.
    #[allow(clippy::too_many_arguments)]
    fn sequential(
        &self,
        mut run: Refs,
        n: usize,
        offset: usize,
        info: NodeInfo,
        depth: usize,
        out: &mut Vec<BvhNode>,
        scratch: &mut SmallScratch,
    ) -> BvhNode {
        if n <= self.config.sweep_max_prims {
            let refs = run.split_at(n).0;
            let bounds = info.bounds;
            return small_subtree(refs, scratch, self.rules, bounds, offset, depth, out);
        }
        let Some(children) = self.split(&mut run, n, &info, depth) else {
            return BvhNode::leaf(info.bounds.to_aabb(), offset as u32, n as u32);
        };
        let pair = out.len();
        out.extend([BvhNode::zeroed(); 2]);
        let (left_run, right_run) = run.split_at(children.right_start);
        let (count, child) = (children.left_count, children.left);
        let left = self.sequential(left_run, count, offset, child, depth + 1, out, scratch);
        let right_offset = offset + children.right_start;
        let (count, child) = (children.right_count, children.right);
        let right = self.sequential(
            right_run,
            count,
            right_offset,
            child,
            depth + 1,
            out,
            scratch,
        );
        out[pair] = left;
        out[pair + 1] = right;
        BvhNode::inner(info.bounds.to_aabb(), pair as u32)
    }

    /// Decides leaf or split for the node of `run`'s first `n` references
    /// and, for a split, arranges the run for its children. A leaf's ids
    /// are put in increasing order, so that leaves do not depend on how
    /// partitions ordered them (its boxes are not read again).
    fn split(&self, run: &mut Refs, n: usize, info: &NodeInfo, depth: usize) -> Option<Children> {
        let children = self.find_split(run, n, info, depth);
        if children.is_none() {
            run.ids[..n].sort_unstable();
        }
        children
    }

    fn find_split(
        &self,
        run: &mut Refs,
        n: usize,
        info: &NodeInfo,
        depth: usize,
    ) -> Option<Children> {
        if n <= self.rules.min_leaf_size {
            return None;
        }
        let must_split = n > self.rules.max_leaf_size;
        let parallel = n >= self.config.parallel_binning_min_prims;
        if SahRules::sah_allowed(n, depth) {
            let mapping = match self.planes {
                Planes::Bins => BinMapping::new(&info.centers, self.config.bins_for(n)),
                Planes::TaskPool => BinMapping::task_pool(&info.centers),
            };
            let object = best_binned_plane(&run.boxes[..n], &mapping, parallel);
            // A spatial split is a candidate only where it beats the object split.
            let spatial = self.spatial.as_ref().and_then(|spatial| {
                let plan = spatial.candidate(run, n, info, object.as_ref(), parallel)?;
                Some((spatial, plan))
            });
            let weighted_area = match (&spatial, &object) {
                (Some((_, plan)), _) => Some(plan.weighted_area),
                (None, Some(plan)) => Some(plan.weighted_area),
                (None, None) => None,
            };
            if let Some(weighted_area) = weighted_area {
                let half_area = info.bounds.half_area();
                if !must_split && self.rules.leaf_is_cheaper(n, half_area, weighted_area) {
                    return None;
                }
                if let Some((spatial, plan)) = spatial {
                    return Some(spatial.apply(run, n, &plan));
                }
                let plan = object.expect("an object plane when no spatial one won");
                let split = partition(&mut run.front(n), &mapping, &plan);
                return Some(Children::of_object(run, n, split));
            }
        }
        must_split.then(|| {
            let split = median_split(&mut run.front(n), info, parallel);
            Children::of_object(run, n, split)
        })
    }
}

/// Primitives per rayon task when the references are made in parallel.
const REF_CHUNK: usize = 4 * 1024;

/// The placeable primitives' boxes and ids, in id order, and their
/// [`NodeInfo`], in one pass over the input.
fn prim_refs(input: &BuildInput, parallel: bool) -> (Vec<BuildBox>, Vec<u32>, NodeInfo) {
    // Zeroed memory comes straight from the allocator, so the pass below
    // is the only one over it.
    let mut boxes: Vec<BuildBox> = bytemuck::zeroed_vec(input.len());
    let mut ids: Vec<u32> = bytemuck::zeroed_vec(input.len());
    let fill = |first: usize, boxes: &mut [BuildBox], ids: &mut [u32]| {
        let mut info = NodeInfo::EMPTY;
        let mut all_placeable = true;
        for (offset, (b, id)) in boxes.iter_mut().zip(ids.iter_mut()).enumerate() {
            let i = first + offset;
            *b = BuildBox::from_aabb(input.bounds[i]);
            *id = i as u32;
            if input.is_placeable(i) {
                info = info.add(b);
            } else {
                all_placeable = false;
            }
        }
        (info, all_placeable)
    };
    let merge = |(a, x): (NodeInfo, bool), (b, y): (NodeInfo, bool)| (a.merge(b), x && y);
    let (info, all_placeable) = if parallel {
        boxes
            .par_chunks_mut(REF_CHUNK)
            .zip(ids.par_chunks_mut(REF_CHUNK))
            .enumerate()
            .map(|(c, (boxes, ids))| fill(c * REF_CHUNK, boxes, ids))
            .reduce(|| (NodeInfo::EMPTY, true), merge)
    } else {
        fill(0, &mut boxes, &mut ids)
    };
    if !all_placeable {
        let placeable = |&id: &u32| input.is_placeable(id as usize);
        boxes = ids
            .iter()
            .filter(|id| placeable(id))
            .map(|&id| boxes[id as usize])
            .collect();
        ids.retain(placeable);
    }
    (boxes, ids, info)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bvh::MAX_DEPTH;
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

    fn build(input: &BuildInput, config: BinnedSahConfig) -> Bvh2 {
        let bvh = BinnedSahBuilder::new(config).build(input);
        bvh.validate(&input.bounds).unwrap();
        bvh
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

    #[test]
    fn the_schedule_picks_bins_by_node_size() {
        let staged = BinnedSahConfig::STAGED;
        let got: Vec<usize> = [1 << 20, 1 << 16, 65_535, 4096, 300, 255, 40]
            .map(|n| staged.bins_for(n))
            .to_vec();
        assert_eq!(got, [64, 64, 32, 32, 16, 8, 8]);
        assert_eq!(BinnedSahConfig::DEFAULT.bins_for(1 << 20), 32);
    }

    #[test]
    fn every_small_node_path_setting_builds_valid_trees() {
        let mut state = 99u32;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            (state % 64) as f32
        };
        let points: Vec<Vec3> = (0..3000)
            .map(|_| Vec3::new(next(), next(), next()))
            .collect();
        let input = point_input(&points);
        for sweep_max_prims in [0, 1, 2, 9, 32, small::SWEEP_MAX] {
            for stages in [BinSchedule::EMPTY, FIVE_STAGES] {
                let config = BinnedSahConfig {
                    sweep_max_prims,
                    stages,
                    parallel_min_prims: 256,
                    parallel_binning_min_prims: 1024,
                    ..BinnedSahConfig::DEFAULT
                };
                let parallel = build(&input, config);
                assert_eq!(parallel, build(&input, config.sequential()));
                assert!(parallel.shape().max_leaf_size <= 8);
            }
        }
    }

    #[test]
    fn peak_memory_covers_the_references_and_the_output() {
        let points: Vec<Vec3> = (0..2000).map(|i| Vec3::new(i as f32, 0.0, 0.0)).collect();
        let input = point_input(&points);
        let (bvh, peak) = BinnedSahBuilder::default().build_with_peak(&input);
        let output = bvh.nodes.len() * 32 + bvh.prim_indices.len() * 4;
        assert!(peak >= output + 48 * 2000, "{peak}");
    }
}
