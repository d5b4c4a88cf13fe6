//! `kdtree`: the photon kd-tree of Zhou, Hou, Wang and Guo, "Real-Time
//! KD-Tree Construction on Graphics Hardware" (SIGGRAPH Asia 2008, §8), in
//! the form Zeidan (2011, §15.4) and Fleisz (2009, §2.4) describe for
//! photons.
//!
//! Build (`build`, `small`):
//! - **large-node stage** (more than `small_node_threshold` points):
//!   repeatedly cut off empty space on any side where the gap between the
//!   node's cell and its points' tight box exceeds `C_e` (25 %) of the
//!   cell's extent, then split at the **spatial median of the longest
//!   axis**. Points are never clipped or duplicated;
//! - **small-node stage** (at most 64 points, one `u64` bit mask): split
//!   candidates are the points' own coordinates, each with its left set as
//!   a bit mask over the small root; the split minimising the **voxel
//!   volume heuristic** (Wald et al. 2004; Zeidan 2011, §15.4)
//!   `VVH = C_ts + (C_L·Vol(V_L ⊕ R) + C_R·Vol(V_R ⊕ R)) / Vol(V ⊕ R)` is
//!   taken while it beats the leaf cost (the point count); `R` is the
//!   maximum query radius, so leaves end up about the size of a query;
//! - **pre-order output**: a node's left child is the next node, its right
//!   child index is stored (Zhou §3.3 / Algorithm 5). Zhou builds level by
//!   level and lays nodes out afterwards with an up and a down pass; on a
//!   CPU the build is fork-join recursion (rayon `join` above
//!   `parallel_min_points`), which emits pre-order directly: a parent
//!   writes itself, then its left subtree, then patches its right index.
//!   Subtrees built in parallel are appended with their indices shifted;
//! - points are stored reordered by leaf, so a leaf is a contiguous run
//!   `first..first + count` of positions and input indices.
//!
//! Split rule (every query depends on it): a point goes **left when its
//! coordinate is strictly less than the split**, right otherwise.
//! [`PointKdTree::validate`] checks it for every point and every ancestor.
//!
//! Queries (`query`): a stack traversal, nearest child first, far child
//! skipped when the splitting plane is farther than the current bound. kNN
//! by a bounded **priority queue** (max-heap; the CPU default, see
//! [`KdKnnMethod`]) or by Zhou's **iterative histogram radius search**
//! (Algorithm 6: bracket the k-th distance with a histogram of distances
//! over a range search, shrink, repeat, then one final range search).
//!
//! Depth is capped at [`MAX_DEPTH`] (Zhou's GPU traversal stack held 50
//! entries); a node at the cap becomes a leaf whatever its size, which only
//! happens for pathological clouds (coordinates spread over many orders of
//! magnitude) and costs speed, never exactness.

mod build;
#[cfg(feature = "cuda")]
pub mod build_cuda;
mod query;
#[cfg(feature = "cuda")]
pub mod query_cuda;
mod small;
#[cfg(feature = "cuda")]
pub mod validate_cuda;

pub use build::{EmptyCut, LargeSplit, plan_large_split, vvh_radius};

use super::{Neighbour, PointStats, PointStructure, query_is_valid};
use bytemuck::{Pod, Zeroable};
use caustic_geom::{Aabb, Vec3};
use std::time::Instant;

/// Deepest leaf the builder creates; also the traversal stack's size.
pub const MAX_DEPTH: usize = 64;

/// Bit mask of the 30-bit field of a node's header.
const FIELD_MASK: u32 = (1 << 30) - 1;
/// The "axis" value that marks a leaf.
const LEAF_TAG: u32 = 3;

/// One node, 8 bytes, the layout of Zeidan's (2011) final photon tree (§17):
/// `header` bits 31–30 hold the split axis (0, 1, 2) or 3 for a leaf; bits
/// 29–0 the right child's index (inner node; the left child is the next
/// node) or the point count (leaf). `payload` is the split position's bits
/// (inner) or the leaf's first point in the reordered arrays.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct PointKdNode {
    header: u32,
    payload: u32,
}

const _: () = assert!(std::mem::size_of::<PointKdNode>() == 8);
const _: () = assert!(std::mem::align_of::<PointKdNode>() == 4);

impl PointKdNode {
    pub fn inner(axis: usize, split: f32, right: u32) -> Self {
        debug_assert!(axis < 3 && right <= FIELD_MASK);
        Self {
            header: ((axis as u32) << 30) | right,
            payload: split.to_bits(),
        }
    }

    pub fn leaf(first: u32, count: u32) -> Self {
        debug_assert!(count <= FIELD_MASK);
        Self {
            header: (LEAF_TAG << 30) | count,
            payload: first,
        }
    }

    #[inline(always)]
    pub fn is_leaf(&self) -> bool {
        self.header >> 30 == LEAF_TAG
    }

    /// Split axis of an inner node.
    #[inline(always)]
    pub fn axis(&self) -> usize {
        (self.header >> 30) as usize
    }

    #[inline(always)]
    pub fn split(&self) -> f32 {
        f32::from_bits(self.payload)
    }

    /// Index of an inner node's right child.
    #[inline(always)]
    pub fn right(&self) -> u32 {
        self.header & FIELD_MASK
    }

    /// First point of a leaf.
    #[inline(always)]
    pub fn first(&self) -> u32 {
        self.payload
    }

    /// Points in a leaf.
    #[inline(always)]
    pub fn count(&self) -> u32 {
        self.header & FIELD_MASK
    }

    /// Moves an inner node's right-child index by `offset` (appending a
    /// subtree built on its own behind others).
    fn shifted(self, offset: u32) -> Self {
        if self.is_leaf() {
            self
        } else {
            Self::inner(self.axis(), self.split(), self.right() + offset)
        }
    }
}

/// How the kd-tree answers kNN queries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KdKnnMethod {
    /// Nearest-first traversal with a bounded max-heap of the best `k`:
    /// one traversal per query, the CPU default (faster on the CPU: see
    /// the `photon_knn_timings` report in `caustic-render/tests`).
    PriorityQueue,
    /// Zhou et al.'s Algorithm 6: `iterations` range searches that bracket
    /// the k-th distance with a `bins`-bin histogram (at most 64), then one
    /// final range search; no per-query heap, the GPU-friendly form.
    Histogram { iterations: u32, bins: u32 },
}

/// How to build a [`PointKdTree`].
#[derive(Clone, Debug, PartialEq)]
pub struct PointKdTreeConfig {
    /// Nodes with more points go through the large-node stage; at most 64
    /// (the small stage's bit masks are `u64`).
    pub small_node_threshold: usize,
    /// `C_e`: cut off empty space wider than this fraction of the cell.
    pub empty_space_ratio: f32,
    /// `R` of the VVH: the largest query radius. Non-finite or non-positive
    /// values choose `diagonal / cbrt(n)`.
    pub query_radius: f32,
    /// `C_ts` of the VVH, relative to one point test.
    pub traversal_cost: f32,
    pub knn: KdKnnMethod,
    /// Subtrees with at least this many points are built in parallel.
    pub parallel_min_points: usize,
}

impl PointKdTreeConfig {
    /// The default: threshold 64, `C_e` = 25 % (Zhou), priority-queue kNN.
    pub fn with_radius(max_radius: f32) -> Self {
        Self {
            small_node_threshold: 64,
            empty_space_ratio: 0.25,
            query_radius: max_radius,
            traversal_cost: 1.0,
            knn: KdKnnMethod::PriorityQueue,
            parallel_min_points: 8 * 1024,
        }
    }

    /// The photon settings of seeds 000/003 (threshold 32) with Zhou's
    /// histogram kNN, 2 iterations of 32 bins (MNRT's defaults; the papers
    /// give none).
    pub fn zhou_photons(max_radius: f32) -> Self {
        Self {
            small_node_threshold: 32,
            knn: KdKnnMethod::Histogram {
                iterations: 2,
                bins: 32,
            },
            ..Self::with_radius(max_radius)
        }
    }
}

impl PointKdTreeConfig {
    /// The largest small root the build makes: `small_node_threshold`
    /// clamped to `1..=64` (one `u64` mask bit per point).
    pub fn small_root_limit(&self) -> usize {
        self.small_node_threshold.clamp(1, 64)
    }
}

impl Default for PointKdTreeConfig {
    fn default() -> Self {
        Self::with_radius(f32::INFINITY)
    }
}

/// The photon kd-tree.
pub struct PointKdTree {
    nodes: Vec<PointKdNode>,
    /// Positions in leaf order.
    points: Vec<Vec3>,
    /// Input index of each entry of `points`.
    ids: Vec<u32>,
    /// Tight bounds of the finite points: the root's cell.
    bounds: Aabb,
    len: usize,
    knn_method: KdKnnMethod,
    stats: PointStats,
}

impl PointKdTree {
    pub fn build(points: &[Vec3], config: &PointKdTreeConfig) -> Self {
        let start = Instant::now();
        let built = build::build(points, config);
        let tree = Self {
            points: built.items.iter().map(|item| item.p).collect(),
            ids: built.items.iter().map(|item| item.id).collect(),
            nodes: built.nodes,
            bounds: built.bounds,
            len: points.len(),
            knn_method: config.knn,
            stats: PointStats::default(),
        };
        let stats = PointStats {
            name: "kdtree",
            build_ms: start.elapsed().as_secs_f64() * 1e3,
            points: points.len(),
            bytes: tree.nodes.len() * 8 + tree.points.len() * 12 + tree.ids.len() * 4,
            nodes: tree.nodes.len(),
            leaves: built.info.leaves,
            max_depth: built.info.max_depth,
            max_leaf_size: built.info.max_leaf,
            detail: match config.knn {
                KdKnnMethod::PriorityQueue => "priority-queue kNN".into(),
                KdKnnMethod::Histogram { iterations, bins } => {
                    format!("histogram kNN ({iterations} x {bins} bins)")
                }
            },
        };
        let tree = Self { stats, ..tree };
        if cfg!(debug_assertions) {
            tree.validate()
                .unwrap_or_else(|problem| panic!("kdtree built an invalid tree: {problem}"));
        }
        tree
    }

    pub fn nodes(&self) -> &[PointKdNode] {
        &self.nodes
    }

    /// Input index of every stored point, in leaf order (leaves refer to
    /// ranges of it).
    pub fn ids(&self) -> &[u32] {
        &self.ids
    }

    /// Checks the invariants: pre-order links in range (left child next,
    /// right child after it), leaves cover `points` in order without gaps,
    /// every point obeys the split rule of every ancestor, and the input
    /// indices are distinct.
    pub fn validate(&self) -> Result<(), String> {
        if self.nodes.is_empty() {
            return if self.points.is_empty() {
                Ok(())
            } else {
                Err("points but no nodes".into())
            };
        }
        let mut next_point = 0u32;
        let unbounded = ([f32::NEG_INFINITY; 3], [f32::INFINITY; 3]);
        let end = self.validate_node(0, unbounded.0, unbounded.1, 0, &mut next_point)?;
        if end != self.nodes.len() {
            return Err(format!("tree ends at node {end} of {}", self.nodes.len()));
        }
        if next_point as usize != self.points.len() {
            return Err(format!(
                "leaves hold {next_point} of {} points",
                self.points.len()
            ));
        }
        let mut seen = vec![false; self.len];
        for &i in &self.ids {
            if std::mem::replace(&mut seen[i as usize], true) {
                return Err(format!("point {i} is stored twice"));
            }
        }
        Ok(())
    }

    /// Validates the subtree at `node` whose points satisfy
    /// `lower <= p < upper`; returns the index one past the subtree.
    fn validate_node(
        &self,
        node: usize,
        lower: [f32; 3],
        upper: [f32; 3],
        depth: usize,
        next_point: &mut u32,
    ) -> Result<usize, String> {
        let n = self
            .nodes
            .get(node)
            .ok_or(format!("node {node} out of range"))?;
        if depth > MAX_DEPTH {
            return Err(format!("node {node} is deeper than {MAX_DEPTH}"));
        }
        if n.is_leaf() {
            if n.first() != *next_point {
                return Err(format!(
                    "leaf {node} starts at {}, expected {next_point}",
                    n.first()
                ));
            }
            for j in n.first()..n.first() + n.count() {
                let p = self
                    .points
                    .get(j as usize)
                    .ok_or(format!("leaf {node} overruns"))?;
                if (0..3).any(|a| p[a] < lower[a] || p[a] >= upper[a]) {
                    return Err(format!(
                        "point {} breaks a split above leaf {node}",
                        self.ids[j as usize]
                    ));
                }
            }
            *next_point += n.count();
            return Ok(node + 1);
        }
        let (axis, split) = (n.axis(), n.split());
        let mut left_upper = upper;
        left_upper[axis] = left_upper[axis].min(split);
        let left_end = self.validate_node(node + 1, lower, left_upper, depth + 1, next_point)?;
        if left_end != n.right() as usize {
            return Err(format!(
                "node {node}: right child {} but left subtree ends at {left_end}",
                n.right()
            ));
        }
        let mut right_lower = lower;
        right_lower[axis] = right_lower[axis].max(split);
        self.validate_node(left_end, right_lower, upper, depth + 1, next_point)
    }
}

impl PointStructure for PointKdTree {
    fn name(&self) -> &'static str {
        "kdtree"
    }

    fn len(&self) -> usize {
        self.len
    }

    fn knn(&self, query: Vec3, k: usize, max_radius: f32, out: &mut Vec<Neighbour>) {
        out.clear();
        if k == 0 || !query_is_valid(query, max_radius) || self.nodes.is_empty() {
            return;
        }
        match self.knn_method {
            KdKnnMethod::PriorityQueue => self.knn_heap(query, k, max_radius, out),
            KdKnnMethod::Histogram { iterations, bins } => {
                self.knn_histogram(query, k, max_radius, iterations, bins, out)
            }
        }
    }

    fn for_each_in_radius(&self, query: Vec3, radius: f32, visit: &mut dyn FnMut(Neighbour)) {
        if !query_is_valid(query, radius) || self.nodes.is_empty() {
            return;
        }
        self.range(query, radius * radius, |slot, d2| {
            visit(Neighbour::new(self.ids[slot], d2));
        });
    }

    fn stats(&self) -> &PointStats {
        &self.stats
    }
}
