//! The SAH kd-tree over triangles built on the device ([`GpuKdTree`],
//! `kdtree` on the GPU), after Zhou, Hou, Wang and Guo, "Real-Time KD-Tree
//! Construction on Graphics Hardware" (SIGGRAPH Asia 2008, §3), with the
//! CPU builder's rules ([`super::build_sah`]) and parameters
//! ([`KdTreeConfig`]), so that it takes the CPU's planes (`build.cu`):
//!
//! 1. **Bounds**: each triangle's box and whether it is finite; the finite
//!    ones' ids by compaction ([`select_indices`]) become the root's
//!    references, their union ([`union_aabb`]) the root's cell.
//! 2. **Large-node stage** (Zhou §3.1), a level of nodes at a time, each
//!    kernel parallel over every reference of the level: the nodes' tight
//!    boxes by a segmented min / max reduction; the host plans each node's
//!    empty-space cuts and spatial-median split with the CPU's own
//!    functions (`large_nodes.rs`); every reference is classified, a
//!    straddler clipped to each child's cell on the device
//!    (Sutherland–Hodgman in `f64`, as `clip.rs`); two flag scans
//!    ([`exclusive_u32`]) give each child its references in order; the host
//!    reads the per-node counts back, retries the next axis for a node whose
//!    split separates nothing (as the CPU does) and lays out the children;
//!    a scatter moves every reference to the next level (large children) or
//!    to the small pool (small roots, and large nodes that stay leaves).
//!    Two reads per level: the boxes and the counts.
//! 3. **Small-node stage** (Zhou §3.2): one warp per small root (≤ 64
//!    references) builds its subtree by the exact SAH over its references'
//!    box faces with `u64` masks, as `small_nodes.rs` does, twice: to count
//!    each root's nodes and references, then, after the host placed them
//!    (a scan over the roots), to write nodes, leaf references and the
//!    culling boxes of its subtree.
//! 4. **Culling boxes** of the large-stage nodes (a few per small root), on
//!    the host from the roots' boxes, bottom up, and uploaded.
//!
//! The layout is the CPU [`KdTree`]'s (`KdNode`s with children at `left`
//! and `left + 1`, the culling boxes, the references): the large-stage
//! nodes first in the order the host laid them out, then each small root's
//! subtree in one run. Zhou's depth-first output stage is not done: the
//! subtrees below the small roots, where rays spend most steps, are
//! already contiguous.
//!
//! Each stage is timed with device events ([`KdBuildStats`]; the large
//! stage's time includes its per-level reads). An allocation that fails is
//! [`GpuError::OutOfMemory`] naming the buffer; more references or nodes
//! than a [`KdNode`] indexes are [`GpuError::TooLarge`].
//! [`GpuKdTree::download`] returns the plain [`KdTree`], which
//! [`KdTree::validate`] checks and the CPU traverses.

use std::time::Instant;

use bytemuck::{Pod, Zeroable};
use caustic_geom::Aabb;
use caustic_gpu::ops::compact::select_indices;
use caustic_gpu::ops::launch_per_element;
use caustic_gpu::ops::reduce::union_aabb;
use caustic_gpu::ops::scan::exclusive_u32;
use caustic_gpu::{DeviceBuffer, DevicePtr, DevicePtrMut, Gpu, GpuError};

use super::build_sah::large_nodes::{Cut, axes_longest_first, empty_space_cuts, median};
use super::{KdNode, KdTree, KdTreeConfig, MAX_DEPTH, MAX_INDEX, split_cell};
use crate::bvh::triangle_bvh_cuda::GpuTriangle;
use crate::kernels::kdtree_build as k;

/// Most triangles: ids and references are [`KdNode`] indices.
pub const MAX_TRIANGLES: usize = MAX_INDEX;

/// `KdPlan::kind`: split the node.
const PLAN_SPLIT: u32 = 0;
/// `KdPlan::kind`: the node stays a leaf of all its references.
const PLAN_LEAF: u32 = 1;
/// Where a side's references go: the next level, the small pool, nowhere.
const DEST_NEXT: u32 = 0;
const DEST_SMALL: u32 = 1;
const DEST_NONE: u32 = 2;
/// Threads of the small-stage kernel's blocks: one warp per small root.
const SMALL_THREADS: u32 = 32;

/// What the host planned for one large node of a level (`KdPlan` in
/// `triangle_kdtree.cuh`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct KdPlan {
    pub below_min: [f32; 3],
    pub axis: u32,
    pub below_max: [f32; 3],
    pub split: f32,
    pub above_min: [f32; 3],
    pub kind: u32,
    pub above_max: [f32; 3],
    /// The node's references: `start .. start + count` of the level.
    pub start: u32,
    pub count: u32,
    pub left_dest: u32,
    pub left_base: u32,
    pub right_dest: u32,
    pub right_base: u32,
    pub pad: [u32; 3],
}

const _: () = assert!(size_of::<KdPlan>() == 96);

/// A small root as `kd_small` reads it (`KdSmallRoot` in
/// `triangle_kdtree.cuh`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct KdSmallRoot {
    pub lo: [f32; 3],
    /// References `start .. start + count` of the small pool.
    pub start: u32,
    pub hi: [f32; 3],
    pub count: u32,
    /// The node slot the root fills.
    pub slot: u32,
    pub depth: u32,
    /// 1: a leaf of all its references (a large node at the depth limit or
    /// that no split separates).
    pub leaf: u32,
    pub pad: u32,
}

const _: () = assert!(size_of::<KdSmallRoot>() == 48);

/// Device time of each build stage (events around each), and the tree's
/// figures.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct KdBuildStats {
    /// Triangle boxes, the hittable ones, the root's cell.
    pub bounds_ms: f64,
    /// The large-node stage, its per-level reads included.
    pub large_ms: f64,
    /// The small-node stage: both passes and the host's placement.
    pub small_ms: f64,
    /// The large-stage nodes' culling boxes.
    pub culling_ms: f64,
    /// Host wall time of the whole build.
    pub total_ms: f64,
    /// Levels of the large-node stage.
    pub levels: usize,
    pub small_roots: usize,
    pub nodes: usize,
    pub leaves: usize,
    /// Leaf references (a clipped triangle counts once per leaf).
    pub references: usize,
    /// Depth of the deepest leaf (root at 0).
    pub max_depth: usize,
    /// [`KdTree::sah_cost`] of the tree, summed on the device.
    pub sah_cost: f32,
    /// Device bytes the tree holds (its triangle copy included).
    pub bytes: usize,
    /// Device bytes the build held at once at its peak.
    pub peak_bytes: usize,
}

impl KdBuildStats {
    /// The stages' device times added up.
    pub fn stages_ms(&self) -> f64 {
        self.bounds_ms + self.large_ms + self.small_ms + self.culling_ms
    }
}

/// A kd-tree over triangles on the device, ready to trace with
/// [`super::traverse_cuda::KdTracer`]; holds a copy of its triangles in
/// scene order.
pub struct GpuKdTree {
    config: KdTreeConfig,
    nodes: DeviceBuffer<KdNode>,
    ref_bounds: DeviceBuffer<Aabb>,
    prims: DeviceBuffer<u32>,
    triangles: DeviceBuffer<GpuTriangle>,
    /// The root's cell, `[min x, y, z, max x, y, z]`, as the kernels read it.
    device_bounds: DeviceBuffer<f32>,
    bounds: Aabb,
    stats: KdBuildStats,
}

/// A node of the large-node stage waiting for its level.
#[derive(Clone, Copy, Debug)]
struct LevelNode {
    slot: u32,
    start: u32,
    count: u32,
    cell: Aabb,
    depth: usize,
}

/// What the host decided for a large node (the CPU's `split_large`).
#[derive(Clone, Debug)]
enum HostPlan {
    Leaf,
    Split {
        cuts: Vec<Cut>,
        /// The cell after the cuts.
        rest: Aabb,
        axes: [usize; 3],
        /// Index into `axes` of the axis being tried.
        tried: usize,
        split: f32,
    },
}

impl HostPlan {
    /// The CPU's plan for a node of `cell` whose references' tight box is
    /// `tight`: cuts, then the median of the longest axis that has one.
    fn new(node: &LevelNode, tight: &Aabb, config: &KdTreeConfig) -> Self {
        let (cuts, rest) = empty_space_cuts(&node.cell, tight, config.empty_space_ratio);
        if node.depth + cuts.len() + 1 > config.max_depth {
            return Self::Leaf;
        }
        let axes = axes_longest_first(&rest);
        Self::try_from(cuts, rest, axes, 0)
    }

    /// The first axis from `axes[from]` on with a median inside the cell.
    fn try_from(cuts: Vec<Cut>, rest: Aabb, axes: [usize; 3], from: usize) -> Self {
        (from..3)
            .find_map(|tried| median(&rest, axes[tried]).map(|split| (tried, split)))
            .map_or(Self::Leaf, |(tried, split)| Self::Split {
                cuts,
                rest,
                axes,
                tried,
                split,
            })
    }

    /// The next axis after one that separated nothing.
    fn retry(self) -> Self {
        match self {
            Self::Leaf => Self::Leaf,
            Self::Split {
                cuts,
                rest,
                axes,
                tried,
                ..
            } => Self::try_from(cuts, rest, axes, tried + 1),
        }
    }

    fn device(&self, node: &LevelNode) -> KdPlan {
        let mut plan = KdPlan {
            start: node.start,
            count: node.count,
            kind: PLAN_LEAF,
            left_dest: DEST_NONE,
            right_dest: DEST_NONE,
            ..KdPlan::default()
        };
        if let Self::Split {
            rest,
            axes,
            tried,
            split,
            ..
        } = self
        {
            let axis = axes[*tried];
            let (below, above) = split_cell(rest, axis, *split);
            plan.kind = PLAN_SPLIT;
            plan.axis = axis as u32;
            plan.split = *split;
            plan.below_min = below.min.to_array();
            plan.below_max = below.max.to_array();
            plan.above_min = above.min.to_array();
            plan.above_max = above.max.to_array();
        }
        plan
    }
}

/// The host's side of the layout: the large-stage nodes, the small roots,
/// and the figures gathered on the way.
#[derive(Default)]
struct Layout {
    nodes: Vec<KdNode>,
    small: Vec<KdSmallRoot>,
    /// Per large-stage node, its cell's area weighted as in the SAH cost
    /// (inner nodes 1, empty leaves 0; small roots are the kernel's).
    area_weight: f64,
    weight: f64,
    leaves: usize,
    deepest: usize,
    /// References in the small pool so far.
    pool_len: usize,
}

impl Layout {
    fn reserve_pair(&mut self) -> u32 {
        let first = self.nodes.len() as u32;
        self.nodes.extend([KdNode::leaf(0, 0); 2]);
        first
    }

    fn empty_leaf(&mut self, slot: u32, depth: usize) {
        self.nodes[slot as usize] = KdNode::leaf(0, 0);
        self.leaves += 1;
        self.deepest = self.deepest.max(depth);
    }

    fn inner(&mut self, slot: u32, axis: usize, plane: f32, left: u32, cell: &Aabb) {
        self.nodes[slot as usize] = KdNode::inner(axis, plane, left as usize);
        self.area_weight += area_f64(cell);
        self.weight += 1.0;
    }

    /// A small root over `count` references from the pool's `start` on.
    fn small_root(
        &mut self,
        slot: u32,
        start: usize,
        count: u32,
        cell: &Aabb,
        depth: usize,
        leaf: bool,
    ) {
        self.small.push(KdSmallRoot {
            lo: cell.min.to_array(),
            start: start as u32,
            hi: cell.max.to_array(),
            count,
            slot,
            depth: depth as u32,
            leaf: u32::from(leaf),
            pad: 0,
        });
    }
}

/// Sizes of a level's outputs, filled in while its plans get destinations.
#[derive(Default)]
struct LevelOut {
    next: Vec<LevelNode>,
    next_len: usize,
    small_len: usize,
}

impl LevelOut {
    /// Sends a child of `count` references to its place; returns the
    /// destination and base for the scatter.
    fn route(
        &mut self,
        layout: &mut Layout,
        config: &KdTreeConfig,
        slot: u32,
        count: u32,
        cell: Aabb,
        depth: usize,
    ) -> (u32, u32) {
        if count == 0 {
            layout.empty_leaf(slot, depth);
            (DEST_NONE, 0)
        } else if count as usize <= config.small_node_max {
            let base = self.small_len;
            layout.small_root(slot, layout.pool_len + base, count, &cell, depth, false);
            self.small_len += count as usize;
            (DEST_SMALL, base as u32)
        } else {
            let base = self.next_len;
            self.next.push(LevelNode {
                slot,
                start: base as u32,
                count,
                cell,
                depth,
            });
            self.next_len += count as usize;
            (DEST_NEXT, base as u32)
        }
    }
}

/// A level's references: triangle ids and the boxes of their parts.
struct Refs {
    prims: DeviceBuffer<u32>,
    boxes: DeviceBuffer<Aabb>,
}

/// A level's classification: per reference and side, whether it goes
/// there, its box there, and the flags' exclusive scans.
struct Sides {
    left: DeviceBuffer<u32>,
    right: DeviceBuffer<u32>,
    left_boxes: DeviceBuffer<Aabb>,
    right_boxes: DeviceBuffer<Aabb>,
    left_offsets: DeviceBuffer<u32>,
    right_offsets: DeviceBuffer<u32>,
}

impl GpuKdTree {
    /// Builds the tree over `scene_triangles` (triangle `i` is scene id `i`;
    /// its `prim` word is not read) with the CPU builder's `config`, and
    /// keeps a copy of the triangles. The tree is the one
    /// [`super::KdTreeBuilder`] builds, node for node, up to layout.
    pub fn build(
        gpu: &Gpu,
        scene_triangles: &DeviceBuffer<GpuTriangle>,
        config: &KdTreeConfig,
    ) -> Result<Self, GpuError> {
        let n = scene_triangles.len();
        caustic_gpu::ops::check_len("kd-tree build", n, MAX_TRIANGLES)?;
        let mut triangles = DeviceBuffer::<GpuTriangle>::uninit(gpu, "kd-tree triangles", n)?;
        triangles.copy_from(scene_triangles)?;
        Self::build_owned(triangles, config)
    }

    /// [`GpuKdTree::build`] over triangles it takes and keeps, without the
    /// copy (how `DeviceAccel` builds it over the scene's upload).
    pub fn build_owned(
        triangles: DeviceBuffer<GpuTriangle>,
        config: &KdTreeConfig,
    ) -> Result<Self, GpuError> {
        let start = Instant::now();
        let gpu = &triangles.gpu().clone();
        check_config(config)?;
        let n = triangles.len();
        caustic_gpu::ops::check_len("kd-tree build", n, MAX_TRIANGLES)?;
        let in_use = pool_in_use(gpu)?;
        gpu.reset_peak_memory()?;
        let mut stats = KdBuildStats::default();

        // 1. Bounds: the hittable triangles and the root's cell.
        let mut root = None;
        let mut bounds = Aabb::EMPTY;
        stats.bounds_ms = timed(gpu, || {
            let mut boxes = DeviceBuffer::<Aabb>::uninit(gpu, "kd-tree triangle boxes", n)?;
            let mut finite = DeviceBuffer::<u32>::uninit(gpu, "kd-tree finite flags", n)?;
            let args = (triangles.ptr(), n as u32, boxes.ptr_mut(), finite.ptr_mut());
            launch_per_element(gpu, k::KD_TRIANGLE_BOXES, n, args)?;
            let ids = select_indices(&finite)?;
            drop(finite);
            let m = ids.len();
            let mut root_boxes = DeviceBuffer::<Aabb>::uninit(gpu, "kd-tree references", m)?;
            let args = (ids.ptr(), boxes.ptr(), m as u32, root_boxes.ptr_mut());
            launch_per_element(gpu, k::KD_GATHER_BOXES, m, args)?;
            bounds = union_aabb(&boxes)?;
            root = Some(Refs {
                prims: ids,
                boxes: root_boxes,
            });
            Ok(())
        })?;
        let root = root.expect("the bounds stage ran");
        let mut tree = Self {
            config: *config,
            nodes: DeviceBuffer::uninit(gpu, "kd-tree nodes", 0)?,
            ref_bounds: DeviceBuffer::uninit(gpu, "kd-tree culling boxes", 0)?,
            prims: DeviceBuffer::uninit(gpu, "kd-tree leaf references", 0)?,
            device_bounds: DeviceBuffer::from_slice(
                gpu,
                "kd-tree root cell",
                &[
                    bounds.min.x,
                    bounds.min.y,
                    bounds.min.z,
                    bounds.max.x,
                    bounds.max.y,
                    bounds.max.z,
                ],
            )?,
            triangles,
            bounds,
            stats,
        };
        if root.prims.is_empty() {
            tree.bounds = Aabb::EMPTY;
        } else {
            tree.build_nodes(root)?;
        }
        tree.stats.nodes = tree.nodes.len();
        tree.stats.references = tree.prims.len();
        tree.stats.bytes = tree.bytes();
        let peak = pool_in_use(gpu)?.map(|(_, peak)| peak);
        tree.stats.peak_bytes = match (peak, in_use) {
            (Some(peak), Some((before, _))) => peak.saturating_sub(before),
            _ => tree.stats.bytes,
        };
        gpu.synchronize()?;
        tree.stats.total_ms = start.elapsed().as_secs_f64() * 1e3;
        Ok(tree)
    }

    /// Stages 2 to 4 over the root's references (not empty).
    fn build_nodes(&mut self, root: Refs) -> Result<(), GpuError> {
        let gpu = self.gpu().clone();
        let config = self.config;
        let mut layout = Layout::default();
        layout.nodes.push(KdNode::leaf(0, 0));
        let mut pool: Vec<Refs> = Vec::new();
        let m = root.prims.len() as u32;
        let root_node = LevelNode {
            slot: 0,
            start: 0,
            count: m,
            cell: self.bounds,
            depth: 0,
        };

        // 2. The large-node stage.
        let mut levels = 0;
        self.stats.large_ms = timed(&gpu, || {
            if m as usize <= config.small_node_max {
                layout.small_root(0, 0, m, &self.bounds, 0, false);
                layout.pool_len = m as usize;
                pool.push(root);
                return Ok(());
            }
            let mut level = vec![root_node];
            let mut refs = root;
            while !level.is_empty() {
                levels += 1;
                let (next, next_refs, small) = self.large_level(&level, &refs, &mut layout)?;
                layout.pool_len += small.prims.len();
                pool.push(small);
                level = next;
                refs = next_refs;
            }
            Ok(())
        })?;
        self.stats.levels = levels;
        self.stats.small_roots = layout.small.len();

        // 3. The small-node stage.
        let mut root_bounds = Vec::new();
        self.stats.small_ms = timed(&gpu, || {
            root_bounds = self.small_stage(&mut layout, pool)?;
            Ok(())
        })?;

        // 4. The large-stage nodes' culling boxes.
        self.stats.culling_ms = timed(&gpu, || self.large_culling_boxes(&layout, &root_bounds))?;
        Ok(())
    }

    /// One level of the large-node stage: returns the next level's nodes
    /// and references, and this level's share of the small pool.
    fn large_level(
        &self,
        level: &[LevelNode],
        refs: &Refs,
        layout: &mut Layout,
    ) -> Result<(Vec<LevelNode>, Refs, Refs), GpuError> {
        let gpu = self.gpu();
        let config = &self.config;
        let tights = self.tight_boxes(level, refs)?;
        let mut plans: Vec<HostPlan> = level
            .iter()
            .zip(&tights)
            .map(|(node, tight)| HostPlan::new(node, tight, config))
            .collect();
        // Classify; retry the next axis where a split separates nothing.
        let (sides, counts) = loop {
            let device: Vec<KdPlan> = level.iter().zip(&plans).map(|(n, p)| p.device(n)).collect();
            let device = DeviceBuffer::from_slice(gpu, "kd-tree level plans", &device)?;
            let sides = self.classify(&device, refs)?;
            let counts = self.side_counts(&device, &sides)?;
            let mut again = false;
            for (i, node) in level.iter().enumerate() {
                let separates = counts[2 * i] < node.count || counts[2 * i + 1] < node.count;
                if matches!(plans[i], HostPlan::Split { .. }) && !separates {
                    plans[i] = std::mem::replace(&mut plans[i], HostPlan::Leaf).retry();
                    again = true;
                }
            }
            if !again {
                break (sides, counts);
            }
        };
        // Lay the level out and give every side its destination.
        let mut out = LevelOut::default();
        let mut device = Vec::with_capacity(level.len());
        for (i, (node, plan)) in level.iter().zip(&plans).enumerate() {
            let mut d = plan.device(node);
            match plan {
                HostPlan::Leaf => {
                    let base = out.small_len;
                    layout.small_root(
                        node.slot,
                        layout.pool_len + base,
                        node.count,
                        &node.cell,
                        node.depth,
                        true,
                    );
                    out.small_len += node.count as usize;
                    (d.left_dest, d.left_base) = (DEST_SMALL, base as u32);
                }
                HostPlan::Split {
                    cuts,
                    rest,
                    axes,
                    tried,
                    split,
                } => {
                    let mut slot = node.slot;
                    let mut cell = node.cell;
                    let mut depth = node.depth;
                    for cut in cuts {
                        let pair = layout.reserve_pair();
                        layout.inner(slot, cut.axis, cut.plane, pair, &cell);
                        let (below, above) = split_cell(&cell, cut.axis, cut.plane);
                        let (empty, kept, kept_cell) = if cut.empty_below {
                            (pair, pair + 1, above)
                        } else {
                            (pair + 1, pair, below)
                        };
                        layout.empty_leaf(empty, depth + 1);
                        (slot, cell, depth) = (kept, kept_cell, depth + 1);
                    }
                    debug_assert_eq!(cell, *rest);
                    let axis = axes[*tried];
                    let pair = layout.reserve_pair();
                    layout.inner(slot, axis, *split, pair, rest);
                    let (below, above) = split_cell(rest, axis, *split);
                    let (lc, rc) = (counts[2 * i], counts[2 * i + 1]);
                    (d.left_dest, d.left_base) =
                        out.route(layout, config, pair, lc, below, depth + 1);
                    (d.right_dest, d.right_base) =
                        out.route(layout, config, pair + 1, rc, above, depth + 1);
                }
            }
            device.push(d);
        }
        check_index("kd-tree nodes", layout.nodes.len())?;
        check_index("kd-tree references", out.next_len)?;
        check_index("kd-tree references", layout.pool_len + out.small_len)?;
        let plans = DeviceBuffer::from_slice(gpu, "kd-tree level plans", &device)?;
        let next = Refs {
            prims: DeviceBuffer::uninit(gpu, "kd-tree next level references", out.next_len)?,
            boxes: DeviceBuffer::uninit(gpu, "kd-tree next level boxes", out.next_len)?,
        };
        let small = Refs {
            prims: DeviceBuffer::uninit(gpu, "kd-tree small-root references", out.small_len)?,
            boxes: DeviceBuffer::uninit(gpu, "kd-tree small-root boxes", out.small_len)?,
        };
        let mut next = next;
        let mut small = small;
        let m = refs.prims.len();
        let args = (
            plans.ptr(),
            level.len() as u32,
            refs.prims.ptr(),
            m as u32,
            sides.left.ptr(),
            sides.right.ptr(),
            sides.left_offsets.ptr(),
            sides.right_offsets.ptr(),
            sides.left_boxes.ptr(),
            sides.right_boxes.ptr(),
            or_null(&mut next.prims),
            or_null(&mut next.boxes),
            or_null(&mut small.prims),
            or_null(&mut small.boxes),
        );
        launch_per_element(gpu, k::KD_SCATTER, m, args)?;
        Ok((out.next, next, small))
    }

    /// The tight box of each node's references (one read).
    fn tight_boxes(&self, level: &[LevelNode], refs: &Refs) -> Result<Vec<Aabb>, GpuError> {
        let gpu = self.gpu();
        let starts: Vec<KdPlan> = level
            .iter()
            .map(|n| KdPlan {
                start: n.start,
                count: n.count,
                ..KdPlan::default()
            })
            .collect();
        let starts = DeviceBuffer::from_slice(gpu, "kd-tree level nodes", &starts)?;
        let identities: Vec<i32> = (0..level.len())
            .flat_map(|_| {
                [f32::INFINITY; 3]
                    .into_iter()
                    .chain([f32::NEG_INFINITY; 3])
                    .map(ordered)
            })
            .collect();
        let mut boxes = DeviceBuffer::from_slice(gpu, "kd-tree tight boxes", &identities)?;
        let m = refs.prims.len();
        let args = (
            starts.ptr(),
            level.len() as u32,
            refs.boxes.ptr(),
            m as u32,
            boxes.ptr_mut(),
        );
        launch_per_element(gpu, k::KD_NODE_BOXES, m, args)?;
        let words = boxes.download()?;
        Ok(words
            .chunks_exact(6)
            .map(|w| {
                let f = |i: usize| f32::from_bits(ordered(f32::from_bits(w[i] as u32)) as u32);
                Aabb::new(
                    caustic_geom::Vec3::new(f(0), f(1), f(2)),
                    caustic_geom::Vec3::new(f(3), f(4), f(5)),
                )
            })
            .collect())
    }

    /// Sides of every reference under `plans`, with the flags' scans.
    fn classify(&self, plans: &DeviceBuffer<KdPlan>, refs: &Refs) -> Result<Sides, GpuError> {
        let gpu = self.gpu();
        let m = refs.prims.len();
        let mut sides = Sides {
            left: DeviceBuffer::uninit(gpu, "kd-tree left flags", m + 1)?,
            right: DeviceBuffer::uninit(gpu, "kd-tree right flags", m + 1)?,
            left_boxes: DeviceBuffer::uninit(gpu, "kd-tree left boxes", m)?,
            right_boxes: DeviceBuffer::uninit(gpu, "kd-tree right boxes", m)?,
            left_offsets: DeviceBuffer::uninit(gpu, "kd-tree left offsets", m + 1)?,
            right_offsets: DeviceBuffer::uninit(gpu, "kd-tree right offsets", m + 1)?,
        };
        let args = (
            plans.ptr(),
            plans.len() as u32,
            refs.prims.ptr(),
            refs.boxes.ptr(),
            m as u32,
            self.triangles.ptr(),
            sides.left.ptr_mut(),
            sides.right.ptr_mut(),
            sides.left_boxes.ptr_mut(),
            sides.right_boxes.ptr_mut(),
        );
        launch_per_element(gpu, k::KD_CLASSIFY, m + 1, args)?;
        exclusive_u32(&sides.left, &mut sides.left_offsets)?;
        exclusive_u32(&sides.right, &mut sides.right_offsets)?;
        Ok(sides)
    }

    /// Per node, its left and right reference counts (one read).
    fn side_counts(
        &self,
        plans: &DeviceBuffer<KdPlan>,
        sides: &Sides,
    ) -> Result<Vec<u32>, GpuError> {
        let gpu = self.gpu();
        let nodes = plans.len();
        let mut counts = DeviceBuffer::<u32>::uninit(gpu, "kd-tree side counts", 2 * nodes)?;
        let args = (
            plans.ptr(),
            nodes as u32,
            sides.left_offsets.ptr(),
            sides.right_offsets.ptr(),
            counts.ptr_mut(),
        );
        launch_per_element(gpu, k::KD_SIDE_COUNTS, nodes, args)?;
        counts.download()
    }

    /// Both passes of `kd_small` over the small roots; allocates and fills
    /// the tree's arrays. Returns each root's culling box.
    fn small_stage(&mut self, layout: &mut Layout, pool: Vec<Refs>) -> Result<Vec<Aabb>, GpuError> {
        let gpu = self.gpu().clone();
        let pool = concatenate(&gpu, pool, layout.pool_len)?;
        let roots = DeviceBuffer::from_slice(&gpu, "kd-tree small roots", &layout.small)?;
        let count = layout.small.len();
        let mut stats = DeviceBuffer::<u32>::zeroed(&gpu, "kd-tree small-root figures", 4 * count)?;
        let mut costs = DeviceBuffer::<u64>::zeroed(&gpu, "kd-tree small-root costs", 2 * count)?;
        self.launch_small(&roots, &pool, SmallPass::Count(&mut stats, &mut costs))?;
        let stats = stats.download()?;
        let costs = costs.download()?;
        // Places: each root's nodes after its first behind the large stage's.
        let mut tails = Vec::with_capacity(count);
        let mut prim_bases = Vec::with_capacity(count);
        let (mut node_end, mut prim_end) = (layout.nodes.len(), 0usize);
        for s in stats.chunks_exact(4) {
            tails.push(node_end as u32);
            prim_bases.push(prim_end as u32);
            node_end += s[0].max(1) as usize - 1;
            prim_end += s[1] as usize;
            layout.leaves += s[2] as usize;
            layout.deepest = layout.deepest.max(s[3] as usize);
            check_index("kd-tree nodes", node_end)?;
            check_index("kd-tree references", prim_end)?;
        }
        for c in costs.chunks_exact(2) {
            layout.area_weight += f64::from_bits(c[0]);
            layout.weight += f64::from_bits(c[1]);
        }
        let root_area = area_f64(&self.bounds);
        self.stats.sah_cost = if root_area > 0.0 {
            (layout.area_weight / root_area) as f32
        } else {
            layout.weight as f32
        };
        self.stats.leaves = layout.leaves;
        self.stats.max_depth = layout.deepest;
        // The large stage's nodes first; the kernel fills the roots' slots.
        let large = DeviceBuffer::from_slice(&gpu, "kd-tree large-stage nodes", &layout.nodes)?;
        self.nodes = DeviceBuffer::uninit(&gpu, "kd-tree nodes", node_end)?;
        self.nodes.copy_from_at(&large, 0)?;
        drop(large);
        self.ref_bounds = DeviceBuffer::uninit(&gpu, "kd-tree culling boxes", node_end)?;
        self.prims = DeviceBuffer::uninit(&gpu, "kd-tree leaf references", prim_end)?;
        let tails = DeviceBuffer::from_slice(&gpu, "kd-tree small-root tails", &tails)?;
        let prim_bases =
            DeviceBuffer::from_slice(&gpu, "kd-tree small-root references", &prim_bases)?;
        let mut root_bounds =
            DeviceBuffer::<Aabb>::uninit(&gpu, "kd-tree small-root boxes", count)?;
        self.launch_small(
            &roots,
            &pool,
            SmallPass::Write(&tails, &prim_bases, &mut root_bounds),
        )?;
        root_bounds.download()
    }

    fn launch_small(
        &mut self,
        roots: &DeviceBuffer<KdSmallRoot>,
        pool: &Refs,
        pass: SmallPass,
    ) -> Result<(), GpuError> {
        let gpu = self.gpu().clone();
        let count = roots.len() as u32;
        let config = self.config;
        let common = |tails, bases, nodes, prims, ref_bounds, root_bounds, stats, costs| {
            (
                roots.ptr(),
                count,
                pool.prims.ptr(),
                pool.boxes.ptr(),
                self.triangles.ptr(),
                config.traversal_cost,
                config.intersection_cost,
                config.max_depth as u32,
                tails,
                bases,
                nodes,
                prims,
                ref_bounds,
                root_bounds,
                stats,
                costs,
            )
        };
        let args = match pass {
            SmallPass::Count(stats, costs) => common(
                DevicePtr::null(),
                DevicePtr::null(),
                DevicePtrMut::null(),
                DevicePtrMut::null(),
                DevicePtrMut::null(),
                DevicePtrMut::null(),
                stats.ptr_mut(),
                costs.ptr_mut(),
            ),
            SmallPass::Write(tails, bases, root_bounds) => common(
                tails.ptr(),
                bases.ptr(),
                self.nodes.ptr_mut().cast(),
                self.prims.ptr_mut(),
                self.ref_bounds.ptr_mut(),
                root_bounds.ptr_mut(),
                DevicePtrMut::null(),
                DevicePtrMut::null(),
            ),
        };
        gpu.launch(k::KD_SMALL, count, SMALL_THREADS, args)
    }

    /// Culling boxes of the large stage's nodes (slots before the first
    /// small subtree's tail), bottom up from the small roots' boxes.
    fn large_culling_boxes(
        &mut self,
        layout: &Layout,
        root_bounds: &[Aabb],
    ) -> Result<(), GpuError> {
        let mut boxes = vec![Aabb::EMPTY; layout.nodes.len()];
        for (root, b) in layout.small.iter().zip(root_bounds) {
            boxes[root.slot as usize] = *b;
        }
        // A small root's slot holds a leaf here (its subtree is the
        // kernel's), so only the large stage's inner nodes are unions.
        for (index, node) in layout.nodes.iter().enumerate().rev() {
            if !node.is_leaf() {
                let left = node.left_child();
                boxes[index] = boxes[left].union(boxes[left + 1]);
            }
        }
        let gpu = self.gpu().clone();
        let large = DeviceBuffer::from_slice(&gpu, "kd-tree large-stage culling boxes", &boxes)?;
        self.ref_bounds.copy_from_at(&large, 0)
    }

    pub fn gpu(&self) -> &Gpu {
        self.triangles.gpu()
    }

    pub fn config(&self) -> &KdTreeConfig {
        &self.config
    }

    pub fn stats(&self) -> &KdBuildStats {
        &self.stats
    }

    /// No triangle can be hit: the tree has no nodes.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The root's cell (the box of every hittable triangle).
    pub fn bounds(&self) -> Aabb {
        self.bounds
    }

    /// Device bytes held: nodes, culling boxes, references, triangles.
    pub fn bytes(&self) -> usize {
        self.nodes.bytes()
            + self.ref_bounds.bytes()
            + self.prims.bytes()
            + self.triangles.bytes()
            + self.device_bounds.bytes()
    }

    /// The triangles, scene order.
    pub fn triangles(&self) -> &DeviceBuffer<GpuTriangle> {
        &self.triangles
    }

    /// The device buffers the traversal reads (traverse_cuda.rs).
    pub(crate) fn parts(&self) -> KdParts<'_> {
        KdParts {
            nodes: &self.nodes,
            ref_bounds: &self.ref_bounds,
            prims: &self.prims,
            triangles: &self.triangles,
            bounds: &self.device_bounds,
            scale: if self.is_empty() {
                0.0
            } else {
                // TriangleKdTree's scale, with glam's operations.
                self.bounds
                    .min
                    .abs()
                    .max(self.bounds.max.abs())
                    .max_element()
            },
        }
    }

    /// Copies the tree back as the CPU's plain [`KdTree`].
    pub fn download(&self) -> Result<KdTree, GpuError> {
        if self.is_empty() {
            return Ok(KdTree::empty());
        }
        Ok(KdTree {
            nodes: self.nodes.download()?,
            ref_bounds: self.ref_bounds.download()?,
            prims: self.prims.download()?,
            bounds: self.bounds,
        })
    }
}

/// The buffers the traversal kernels take.
pub(crate) struct KdParts<'a> {
    pub nodes: &'a DeviceBuffer<KdNode>,
    pub ref_bounds: &'a DeviceBuffer<Aabb>,
    pub prims: &'a DeviceBuffer<u32>,
    pub triangles: &'a DeviceBuffer<GpuTriangle>,
    pub bounds: &'a DeviceBuffer<f32>,
    pub scale: f32,
}

/// A pass of `kd_small`: counting (figures and SAH terms per root) or
/// writing (behind the tails and reference bases, with each root's box).
enum SmallPass<'a> {
    Count(&'a mut DeviceBuffer<u32>, &'a mut DeviceBuffer<u64>),
    Write(
        &'a DeviceBuffer<u32>,
        &'a DeviceBuffer<u32>,
        &'a mut DeviceBuffer<Aabb>,
    ),
}

/// The CPU builder's limits ([`super::KdTreeBuilder::new`] asserts them;
/// here they are an error).
fn check_config(config: &KdTreeConfig) -> Result<(), GpuError> {
    let problem = if !(1..=64).contains(&config.small_node_max) {
        Some(format!(
            "small_node_max {} outside 1..=64 (u64 masks)",
            config.small_node_max
        ))
    } else if config.max_depth > MAX_DEPTH {
        Some(format!("max_depth {} above {MAX_DEPTH}", config.max_depth))
    } else {
        None
    };
    problem.map_or(Ok(()), |message| {
        Err(GpuError::Invalid {
            what: "kd-tree configuration",
            message,
        })
    })
}

fn check_index(what: &'static str, len: usize) -> Result<(), GpuError> {
    caustic_gpu::ops::check_len(what, len, MAX_INDEX)
}

/// The small pool's per-level pieces in one pair of arrays.
fn concatenate(gpu: &Gpu, pieces: Vec<Refs>, len: usize) -> Result<Refs, GpuError> {
    if pieces.len() == 1 {
        return Ok(pieces.into_iter().next().expect("one piece"));
    }
    let mut out = Refs {
        prims: DeviceBuffer::uninit(gpu, "kd-tree small pool references", len)?,
        boxes: DeviceBuffer::uninit(gpu, "kd-tree small pool boxes", len)?,
    };
    let mut at = 0;
    for piece in pieces {
        out.prims.copy_from_at(&piece.prims, at)?;
        out.boxes.copy_from_at(&piece.boxes, at)?;
        at += piece.prims.len();
    }
    Ok(out)
}

/// A buffer's pointer, or null for an empty one (a kernel never writes it).
fn or_null<T: Pod>(buffer: &mut DeviceBuffer<T>) -> DevicePtrMut<'_, T> {
    if buffer.is_empty() {
        DevicePtrMut::null()
    } else {
        buffer.ptr_mut()
    }
}

/// `(in use, peak)` of the device's memory pool, when it has one.
fn pool_in_use(gpu: &Gpu) -> Result<Option<(usize, usize)>, GpuError> {
    gpu.memory_in_use()
}

/// Runs `f` between two device events; its milliseconds.
fn timed(gpu: &Gpu, f: impl FnOnce() -> Result<(), GpuError>) -> Result<f64, GpuError> {
    gpu.time_ms(f).map(f64::from)
}

/// `f32` as an `i32` that compares in the same order (`kd_ordered`); its
/// own inverse on the bits.
fn ordered(x: f32) -> i32 {
    let i = x.to_bits() as i32;
    if i >= 0 { i } else { i ^ 0x7fff_ffff }
}

/// Surface area in `f64` as [`KdTree::sah_cost`] takes it; 0 for an empty
/// or non-finite box.
fn area_f64(b: &Aabb) -> f64 {
    let e: [f64; 3] = std::array::from_fn(|k| b.max[k] as f64 - b.min[k] as f64);
    if !e.iter().all(|&x| x.is_finite() && x >= 0.0) {
        return 0.0;
    }
    2.0 * (e[0] * e[1] + e[1] * e[2] + e[2] * e[0])
}

#[cfg(test)]
mod tests {
    use super::*;
    use caustic_geom::Vec3;

    #[test]
    fn ordered_floats_sort_as_floats_and_invert() {
        let values = [
            f32::NEG_INFINITY,
            -2.5,
            -0.0,
            0.0,
            1e-30,
            3.0,
            f32::INFINITY,
        ];
        for w in values.windows(2) {
            assert!(ordered(w[0]) <= ordered(w[1]), "{w:?}");
        }
        for v in values {
            let back = f32::from_bits(ordered(f32::from_bits(ordered(v) as u32)) as u32);
            assert_eq!(back.to_bits(), v.to_bits());
        }
    }

    #[test]
    fn plans_follow_the_cpu_rules() {
        let config = KdTreeConfig::DEFAULT;
        let node = LevelNode {
            slot: 0,
            start: 0,
            count: 100,
            cell: Aabb::new(Vec3::ZERO, Vec3::new(10.0, 4.0, 2.0)),
            depth: 0,
        };
        // References only in x in [5, 10]: the lower half is cut off, then
        // the rest (5 x 4 x 2) split at x = 7.5.
        let tight = Aabb::new(Vec3::new(5.0, 0.0, 0.0), Vec3::new(10.0, 4.0, 2.0));
        let plan = HostPlan::new(&node, &tight, &config);
        let device = plan.device(&node);
        assert_eq!(
            (device.kind, device.axis, device.split),
            (PLAN_SPLIT, 0, 7.5)
        );
        assert_eq!(device.below_min, [5.0, 0.0, 0.0]);
        assert_eq!(device.above_max, [10.0, 4.0, 2.0]);
        // Retrying goes to y, then z, then gives up.
        let plan = plan.retry();
        assert_eq!(plan.device(&node).axis, 1);
        let plan = plan.retry().retry();
        assert!(matches!(plan, HostPlan::Leaf));
        // At the depth limit, a leaf.
        let deep = LevelNode { depth: 64, ..node };
        assert!(matches!(
            HostPlan::new(&deep, &tight, &config),
            HostPlan::Leaf
        ));
    }

    #[test]
    fn bad_configurations_are_errors() {
        let wide = KdTreeConfig {
            small_node_max: 65,
            ..KdTreeConfig::DEFAULT
        };
        assert!(check_config(&wide).is_err());
        let deep = KdTreeConfig {
            max_depth: MAX_DEPTH + 1,
            ..KdTreeConfig::DEFAULT
        };
        assert!(check_config(&deep).is_err());
        assert!(check_config(&KdTreeConfig::DEFAULT).is_ok());
    }
}
