//! A photon kd-tree built on the GPU (`build.cu`) after Zhou, Hou, Wang and
//! Guo 2008 (§3–4 and §8.1), node for node the tree of [`super`] (the CPU
//! build, `build.rs`) for the same points and configuration:
//!
//! - **large-node stage**, level by level (nodes of more than
//!   [`PointKdTreeConfig::small_root_limit`] points): one block per node
//!   finds its points' tight box; the host plans each node's empty-space
//!   cuts (`C_e`, at most 6) and spatial-median split with the CPU's own
//!   [`plan_large_split`], so both trees take the same planes; one block
//!   per node flags and counts its sides, and the segmented split
//!   (`ops::split::segmented_partition_u32`) reorders every node's points
//!   at once, stably, as the CPU's partition does. A cut is an inner node
//!   with an empty leaf child.
//! - **small-node stage**: one warp per small root builds its subtree by
//!   the VVH over `u64` point masks (candidates: the points' coordinates;
//!   ties to the first candidate in (point, axis) order; the CPU's float
//!   operations in the CPU's order). It runs twice: once to count each
//!   root's nodes, then, after the host scans the counts into places, to
//!   write the nodes and the leaf order of the points. Building twice is
//!   cheaper than reserving the worst case (a root of `n` points can make
//!   `6n + 1` nodes: VVH splits may cut off empty space too).
//!
//! Not done: Zhou's chunked reductions (a block walks a whole large node,
//! so the top levels run on few blocks) and the device-side layout (the
//! host reads each large level's boxes and left counts back: two round
//! trips per level). Queries: [`super::query_cuda`]; the downloaded tree
//! and its validation: [`super::validate_cuda`].

use crate::points::kdtree::{
    LargeSplit, MAX_DEPTH, PointKdTreeConfig, plan_large_split, vvh_radius,
};
use bytemuck::{Pod, Zeroable};
use caustic_geom::{Aabb, Vec3};

use super::validate_cuda::HostKdTree;
use crate::kernels::{points_hash_grid as pk, points_kdtree_build as k};
use crate::points::hash_grid_cuda::MAX_POINTS;
use caustic_gpu::GpuError;
use caustic_gpu::ops::compact::select_indices;
use caustic_gpu::ops::split::segmented_partition_u32;
use caustic_gpu::ops::{check_len, launch_grid_stride as launch};
use caustic_gpu::{DeviceBuffer, DevicePtr, DevicePtrMut};

/// `GpuKdNode::axis` of a leaf.
pub const LEAF_AXIS: u32 = 3;
/// Threads of the large-stage kernels' blocks (`KD_THREADS`).
const LARGE_THREADS: u32 = 256;
/// Threads of the small-stage kernel's blocks: one warp per small root.
const SMALL_THREADS: u32 = 32;
/// The small-stage kernel's walk stack (`KD_SMALL_STACK`): it holds the
/// pending right children of one root-to-leaf path plus two.
const SMALL_STACK: usize = 66;
const _: () = assert!(MAX_DEPTH + 2 <= SMALL_STACK);

/// A node: inner nodes split `axis` at `split` (children `a` below, `b` at
/// or above); leaves (`axis == 3`) hold sorted points `a .. a + b` (empty
/// leaves, `b == 0`, are the empty sides of cuts).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct GpuKdNode {
    pub split: f32,
    pub axis: u32,
    pub a: u32,
    pub b: u32,
}

impl GpuKdNode {
    fn leaf(first: u32, count: u32) -> Self {
        Self {
            split: 0.0,
            axis: LEAF_AXIS,
            a: first,
            b: count,
        }
    }

    fn inner(axis: usize, split: f32, below: u32, above: u32) -> Self {
        Self {
            split,
            axis: axis as u32,
            a: below,
            b: above,
        }
    }

    pub fn is_leaf(&self) -> bool {
        self.axis == LEAF_AXIS
    }
}

/// A small root as `point_kdtree_small` reads it (`SmallRoot` in the
/// kernel): points `perm[start .. start + count]`, depth, the node slot
/// its parent links to, and its cell.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct SmallRoot {
    start: u32,
    count: u32,
    depth: u32,
    slot: u32,
    lo: [f32; 3],
    hi: [f32; 3],
}

/// A kd-tree over points on the device.
pub struct GpuPointKdTree {
    pub(super) nodes: DeviceBuffer<GpuKdNode>,
    /// Finite points in leaf order; `w` holds the input index's bits.
    pub(super) sorted: DeviceBuffer<[f32; 4]>,
    len: usize,
    depth: usize,
    leaves: usize,
}

impl GpuPointKdTree {
    /// Builds the tree over `points` (x, y, z each, on the device) with
    /// the CPU tree's default configuration (VVH radius from the points'
    /// density); points with a non-finite coordinate are left out (never
    /// returned).
    pub fn build(points: &DeviceBuffer<[f32; 3]>) -> Result<Self, GpuError> {
        Self::build_with(points, &PointKdTreeConfig::default())
    }

    /// Builds the tree as `caustic_accel::points::PointKdTree::build`
    /// would with `config` (threshold, `C_e`, VVH radius and `C_ts`; the
    /// kNN method and parallelism settings are the CPU's own).
    pub fn build_with(
        points: &DeviceBuffer<[f32; 3]>,
        config: &PointKdTreeConfig,
    ) -> Result<Self, GpuError> {
        let gpu = points.gpu();
        let n = points.len();
        check_len(k::POINT_KDTREE_FINITE.name(), n, MAX_POINTS)?;
        let mut finite = DeviceBuffer::<u32>::uninit(gpu, "kd-tree finite flags", n)?;
        launch(
            gpu,
            k::POINT_KDTREE_FINITE,
            n,
            (points.ptr().cast(), n as u64, finite.ptr_mut()),
        )?;
        let mut perm = select_indices(&finite)?;
        finite.truncate(0);
        let m = perm.len();
        let (nodes, leaves, deepest) = if m == 0 {
            let empty = DeviceBuffer::from_slice(gpu, "kd-tree nodes", &[GpuKdNode::leaf(0, 0)])?;
            (empty, 1, 0)
        } else {
            build_nodes(points, &mut perm, config)?
        };
        let mut sorted = DeviceBuffer::<[f32; 4]>::uninit(gpu, "kd-tree points", m)?;
        launch(
            gpu,
            pk::POINTS_GATHER,
            m,
            (points.ptr().cast(), perm.ptr(), m as u64, sorted.ptr_mut()),
        )?;
        Ok(Self {
            nodes,
            sorted,
            len: n,
            depth: deepest + 1,
            leaves,
        })
    }

    /// Copies the tree to the host (for checks and statistics).
    pub fn download(&self) -> Result<HostKdTree, GpuError> {
        let sorted = self.sorted.download()?;
        Ok(HostKdTree {
            nodes: self.nodes.download()?,
            points: sorted.iter().map(|s| Vec3::new(s[0], s[1], s[2])).collect(),
            ids: sorted.iter().map(|s| s[3].to_bits()).collect(),
        })
    }

    /// Number of input points (non-finite ones included, never returned).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Nodes, leaves and the deepest level (1 for a single leaf).
    pub fn shape(&self) -> (usize, usize, usize) {
        (self.nodes.len(), self.leaves, self.depth)
    }

    /// Device bytes the tree holds.
    pub fn bytes(&self) -> usize {
        self.nodes.bytes() + self.sorted.bytes()
    }
}

/// Builds the nodes over the finite points `perm` (not empty): the large
/// stage level by level, then the small roots. Leaves `perm` in leaf order;
/// returns the nodes, the leaf count and the deepest leaf's depth.
fn build_nodes(
    points: &DeviceBuffer<[f32; 3]>,
    perm: &mut DeviceBuffer<u32>,
    config: &PointKdTreeConfig,
) -> Result<(DeviceBuffer<GpuKdNode>, usize, usize), GpuError> {
    let m = perm.len() as u32;
    let bounds = tight_boxes(points, perm, &[(0, m)])?[0];
    let mut layout = Layout::new(config.small_root_limit());
    let mut level = Vec::new();
    let root = layout.reserve();
    layout.file(root, 0, m, bounds, 0, &mut level);
    while !level.is_empty() {
        let ranges: Vec<(u32, u32)> = level.iter().map(|n| (n.start, n.count)).collect();
        let tights = tight_boxes(points, perm, &ranges)?;
        let plans: Vec<Option<LargeSplit>> = level
            .iter()
            .zip(&tights)
            .map(|(node, &tight)| {
                plan_large_split(node.cell, tight, node.depth, config.empty_space_ratio)
            })
            .collect();
        let lefts = split_level(points, perm, &level, &plans)?;
        level = layout.emit_level(&level, &plans, &lefts);
    }
    let radius = vvh_radius(config.query_radius, bounds, m as usize);
    let small = SmallStage {
        two_r: 2.0 * radius,
        traversal_cost: config.traversal_cost,
    };
    small.run(points, perm, layout)
}

/// A node of the large stage waiting for its level: its points
/// `perm[start .. start + count]`, cell and depth, and the node slot its
/// parent links to.
#[derive(Clone, Copy, Debug, PartialEq)]
struct LargeNode {
    slot: u32,
    start: u32,
    count: u32,
    cell: Aabb,
    depth: usize,
}

/// The host's side of the layout: the large stage's nodes (small roots
/// hold a slot their subtree's first node fills), the small roots, and
/// leaf statistics so far.
#[derive(Debug)]
struct Layout {
    limit: u32,
    nodes: Vec<GpuKdNode>,
    small: Vec<SmallRoot>,
    leaves: usize,
    deepest: usize,
}

impl Layout {
    fn new(limit: usize) -> Self {
        Self {
            limit: limit as u32,
            nodes: Vec::new(),
            small: Vec::new(),
            leaves: 0,
            deepest: 0,
        }
    }

    /// A new node slot, filled later.
    fn reserve(&mut self) -> u32 {
        self.nodes.push(GpuKdNode::default());
        self.nodes.len() as u32 - 1
    }

    fn leaf(&mut self, slot: u32, first: u32, count: u32, depth: usize) {
        self.nodes[slot as usize] = GpuKdNode::leaf(first, count);
        self.leaves += 1;
        self.deepest = self.deepest.max(depth);
    }

    /// Files the node at `slot` as a small root or a large node of `next`.
    fn file(
        &mut self,
        slot: u32,
        start: u32,
        count: u32,
        cell: Aabb,
        depth: usize,
        next: &mut Vec<LargeNode>,
    ) {
        if count <= self.limit {
            self.small.push(SmallRoot {
                start,
                count,
                depth: depth as u32,
                slot,
                lo: cell.min.to_array(),
                hi: cell.max.to_array(),
            });
        } else {
            next.push(LargeNode {
                slot,
                start,
                count,
                cell,
                depth,
            });
        }
    }

    /// Writes one level's nodes from their plans (`None`: a leaf of all
    /// its points, as the CPU makes) and their split's left counts (in
    /// `lefts`, one per planned node, in order); returns the next level.
    fn emit_level(
        &mut self,
        level: &[LargeNode],
        plans: &[Option<LargeSplit>],
        lefts: &[u32],
    ) -> Vec<LargeNode> {
        let mut next = Vec::new();
        let mut lefts = lefts.iter();
        for (node, plan) in level.iter().zip(plans) {
            match plan {
                Some(plan) => {
                    let left = *lefts.next().expect("a left count per planned split");
                    self.emit_split(node, plan, left, &mut next);
                }
                None => self.leaf(node.slot, node.start, node.count, node.depth),
            }
        }
        next
    }

    /// The cut chain (each cut an inner node whose empty side is a leaf,
    /// its first point where the CPU's is), then the median split and its
    /// two children.
    fn emit_split(
        &mut self,
        node: &LargeNode,
        plan: &LargeSplit,
        left: u32,
        next: &mut Vec<LargeNode>,
    ) {
        debug_assert!(
            0 < left && left < node.count,
            "the median splits the points"
        );
        let (start, count) = (node.start, node.count);
        let mut slot = node.slot;
        let mut depth = node.depth;
        for cut in &plan.cuts {
            let empty = self.reserve();
            let rest = self.reserve();
            let first = if cut.empty_left { start } else { start + count };
            self.leaf(empty, first, 0, depth + 1);
            let (below, above) = if cut.empty_left {
                (empty, rest)
            } else {
                (rest, empty)
            };
            self.nodes[slot as usize] = GpuKdNode::inner(cut.axis, cut.pos, below, above);
            slot = rest;
            depth += 1;
        }
        let (mut left_cell, mut right_cell) = (plan.cell, plan.cell);
        left_cell.max[plan.axis] = plan.split;
        right_cell.min[plan.axis] = plan.split;
        let below = self.reserve();
        let above = self.reserve();
        self.nodes[slot as usize] = GpuKdNode::inner(plan.axis, plan.split, below, above);
        self.file(below, start, left, left_cell, depth + 1, next);
        self.file(
            above,
            start + left,
            count - left,
            right_cell,
            depth + 1,
            next,
        );
    }
}

/// Where each small root's nodes after its first go: `tails[r]` for root
/// `r`, packed behind `base` nodes in root order (a root of `c` nodes puts
/// its first in its slot and `c - 1` in the tail). Returns the tails and
/// the total node count.
fn tail_offsets(base: usize, node_counts: impl IntoIterator<Item = u32>) -> (Vec<u32>, usize) {
    let mut end = base;
    let tails = node_counts
        .into_iter()
        .map(|c| {
            let tail = end as u32;
            end += c.max(1) as usize - 1;
            tail
        })
        .collect();
    (tails, end)
}

/// A pass of the small stage: counting (per-root node count, leaf count,
/// deepest leaf into the stats) or writing (nodes behind the tails).
enum SmallPass<'a> {
    Count(&'a mut DeviceBuffer<[u32; 3]>),
    Write(&'a DeviceBuffer<u32>, &'a mut DeviceBuffer<GpuKdNode>),
}

/// The VVH's constants for `point_kdtree_small`.
struct SmallStage {
    /// `2R`, as the CPU's `inflated_volume` computes it.
    two_r: f32,
    traversal_cost: f32,
}

impl SmallStage {
    /// Builds every small root's subtree (count pass, host scan, write
    /// pass) behind the large stage's nodes; returns the finished nodes,
    /// leaf count and deepest leaf.
    fn run(
        &self,
        points: &DeviceBuffer<[f32; 3]>,
        perm: &mut DeviceBuffer<u32>,
        layout: Layout,
    ) -> Result<(DeviceBuffer<GpuKdNode>, usize, usize), GpuError> {
        let gpu = points.gpu();
        let Layout {
            mut nodes,
            small,
            mut leaves,
            mut deepest,
            ..
        } = layout;
        if small.is_empty() {
            let nodes = DeviceBuffer::from_slice(gpu, "kd-tree nodes", &nodes)?;
            return Ok((nodes, leaves, deepest));
        }
        let roots = DeviceBuffer::from_slice(gpu, "kd-tree small roots", &small)?;
        let mut stats = DeviceBuffer::<[u32; 3]>::zeroed(gpu, "kd-tree small stats", small.len())?;
        self.launch(points, perm, &roots, SmallPass::Count(&mut stats))?;
        let stats = stats.download()?;
        for s in &stats {
            leaves += s[1] as usize;
            deepest = deepest.max(s[2] as usize);
        }
        let (tails, total) = tail_offsets(nodes.len(), stats.iter().map(|s| s[0]));
        nodes.resize(total, GpuKdNode::default());
        let mut device_nodes = DeviceBuffer::from_slice(gpu, "kd-tree nodes", &nodes)?;
        let tails = DeviceBuffer::from_slice(gpu, "kd-tree small tails", &tails)?;
        self.launch(
            points,
            perm,
            &roots,
            SmallPass::Write(&tails, &mut device_nodes),
        )?;
        Ok((device_nodes, leaves, deepest))
    }

    /// One pass of `point_kdtree_small` (the kernel tells them apart by a
    /// null node pointer).
    fn launch(
        &self,
        points: &DeviceBuffer<[f32; 3]>,
        perm: &mut DeviceBuffer<u32>,
        roots: &DeviceBuffer<SmallRoot>,
        pass: SmallPass,
    ) -> Result<(), GpuError> {
        let (tails, nodes, stats) = match pass {
            SmallPass::Count(stats) => (DevicePtr::null(), DevicePtrMut::null(), stats.ptr_mut()),
            SmallPass::Write(tails, nodes) => (tails.ptr(), nodes.ptr_mut(), DevicePtrMut::null()),
        };
        let count = roots.len() as u32;
        points.gpu().launch(
            k::POINT_KDTREE_SMALL,
            count,
            SMALL_THREADS,
            (
                points.ptr().cast(),
                perm.ptr_mut(),
                roots.ptr(),
                count,
                self.two_r,
                self.traversal_cost,
                MAX_DEPTH as u32,
                tails,
                nodes,
                stats.cast(),
            ),
        )
    }
}

/// Uploads node ranges as `(start, count)` pairs.
fn upload_ranges(
    gpu: &caustic_gpu::Gpu,
    ranges: impl Iterator<Item = (u32, u32)>,
) -> Result<DeviceBuffer<u32>, GpuError> {
    let flat: Vec<u32> = ranges.flat_map(|(a, b)| [a, b]).collect();
    DeviceBuffer::from_slice(gpu, "kd-tree node ranges", &flat)
}

/// The tight box of each range's points (one block per range).
fn tight_boxes(
    points: &DeviceBuffer<[f32; 3]>,
    perm: &DeviceBuffer<u32>,
    ranges: &[(u32, u32)],
) -> Result<Vec<Aabb>, GpuError> {
    let gpu = points.gpu();
    let device_ranges = upload_ranges(gpu, ranges.iter().copied())?;
    let mut boxes = DeviceBuffer::<[f32; 6]>::uninit(gpu, "kd-tree tight boxes", ranges.len())?;
    gpu.launch(
        k::POINT_KDTREE_BOUNDS,
        ranges.len() as u32,
        LARGE_THREADS,
        (
            points.ptr().cast(),
            perm.ptr(),
            device_ranges.ptr(),
            boxes.ptr_mut().cast(),
        ),
    )?;
    Ok(boxes
        .download()?
        .iter()
        .map(|b| Aabb {
            min: Vec3::new(b[0], b[1], b[2]),
            max: Vec3::new(b[3], b[4], b[5]),
        })
        .collect())
}

/// Splits the planned nodes of `level` at their median planes: reorders
/// `perm` (each node's left points first, both sides in order) and returns
/// the left counts, one per planned node.
fn split_level(
    points: &DeviceBuffer<[f32; 3]>,
    perm: &mut DeviceBuffer<u32>,
    level: &[LargeNode],
    plans: &[Option<LargeSplit>],
) -> Result<Vec<u32>, GpuError> {
    let gpu = points.gpu();
    let planned: Vec<(&LargeNode, &LargeSplit)> = level
        .iter()
        .zip(plans)
        .filter_map(|(node, plan)| plan.as_ref().map(|p| (node, p)))
        .collect();
    if planned.is_empty() {
        return Ok(Vec::new());
    }
    let n = perm.len();
    let count = planned.len();
    let ranges = upload_ranges(
        gpu,
        planned.iter().map(|(node, _)| (node.start, node.count)),
    )?;
    let axes: Vec<u32> = planned.iter().map(|(_, p)| p.axis as u32).collect();
    let splits: Vec<f32> = planned.iter().map(|(_, p)| p.split).collect();
    let axes = DeviceBuffer::from_slice(gpu, "kd-tree split axes", &axes)?;
    let splits = DeviceBuffer::from_slice(gpu, "kd-tree split planes", &splits)?;
    let mut flags = DeviceBuffer::<u32>::zeroed(gpu, "kd-tree split flags", n)?;
    let mut left = DeviceBuffer::<u32>::uninit(gpu, "kd-tree left counts", count)?;
    gpu.launch(
        k::POINT_KDTREE_FLAG,
        count as u32,
        LARGE_THREADS,
        (
            points.ptr().cast(),
            perm.ptr(),
            ranges.ptr(),
            axes.ptr(),
            splits.ptr(),
            flags.ptr_mut(),
            left.ptr_mut(),
        ),
    )?;
    let mut heads = DeviceBuffer::<u32>::zeroed(gpu, "kd-tree segment heads", n)?;
    launch(
        gpu,
        k::POINT_KDTREE_HEADS,
        count,
        (ranges.ptr(), count as u32, n as u32, heads.ptr_mut()),
    )?;
    *perm = segmented_partition_u32(perm, &flags, &heads)?;
    left.download()
}

#[cfg(test)]
#[path = "build_cuda_tests.rs"]
mod tests;
