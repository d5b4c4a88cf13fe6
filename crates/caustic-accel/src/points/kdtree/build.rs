//! The fork-join driver and the large-node stage of the photon kd-tree
//! (Zhou et al. 2008, §3.1 / Algorithm 2, as adapted to points in Zeidan 2011
//! §15.4): empty-space cut-off, then a spatial-median split of the cell's
//! longest axis. Nodes of at most `small_node_threshold` points go to the
//! small-node stage ([`super::small`]).
//!
//! Nodes are written in pre-order into one vector: a node, its left
//! subtree, then its right subtree, the node's right index patched once the
//! left subtree is written. A subtree large enough to build in parallel is
//! built into its own vector and appended with its right indices shifted.
//!
//! An empty-space cut is an inner node with one empty leaf. The cut plane
//! sits on the points' tight box: at `min` for an empty left side (every
//! point has `coord >= min`, so goes right), and one float above `max` for
//! an empty right side (every point has `coord < next_up(max)`, so goes
//! left), which keeps the split rule `left iff coord < split` exact.

use super::small::build_small;
use super::{MAX_DEPTH, PointKdNode, PointKdTreeConfig};
use crate::slab_ray::next_up;
use caustic_geom::{Aabb, Vec3};
use rayon::prelude::*;

/// A point as the build moves it: its position travels with its input
/// index, so partitions read and write memory sequentially instead of
/// gathering positions through an index list (10× faster on a million
/// photons emitted in random spatial order).
#[derive(Clone, Copy, Debug)]
pub(super) struct Item {
    pub p: Vec3,
    pub id: u32,
}

/// Nodes with at least this many points also split their bounds and
/// partition passes over the thread pool (the top levels, where there are
/// too few subtrees to keep every thread busy).
const DATA_PARALLEL_MIN: usize = 128 * 1024;

/// What the build returns to [`super::PointKdTree::build`].
pub(super) struct Built {
    pub nodes: Vec<PointKdNode>,
    /// The finite points in leaf order.
    pub items: Vec<Item>,
    pub bounds: Aabb,
    pub info: TreeInfo,
}

/// Leaf statistics, merged over subtrees.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct TreeInfo {
    pub leaves: usize,
    pub max_depth: usize,
    pub max_leaf: usize,
}

impl TreeInfo {
    pub fn add_leaf(&mut self, depth: usize, count: usize) {
        self.leaves += 1;
        self.max_depth = self.max_depth.max(depth);
        self.max_leaf = self.max_leaf.max(count);
    }

    fn merge(&mut self, other: TreeInfo) {
        self.leaves += other.leaves;
        self.max_depth = self.max_depth.max(other.max_depth);
        self.max_leaf = self.max_leaf.max(other.max_leaf);
    }
}

/// Everything the recursive build reads.
pub(super) struct Context {
    pub threshold: usize,
    pub empty_ratio: f32,
    /// `R` of the VVH, made finite and positive.
    pub vvh_radius: f32,
    pub traversal_cost: f32,
    pub parallel_min: usize,
}

/// One empty-space cut: a plane and the side that holds no point.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EmptyCut {
    pub axis: usize,
    pub pos: f32,
    pub empty_left: bool,
}

/// The large-node stage's decision for one node: the cut chain, outermost
/// first, then the median split of the cut cell. Public so that the GPU
/// builder (`caustic_gpu::point_kdtree`) plans its splits with this code.
#[derive(Clone, Debug, PartialEq)]
pub struct LargeSplit {
    pub cuts: Vec<EmptyCut>,
    pub axis: usize,
    pub split: f32,
    /// The node's cell after the cuts.
    pub cell: Aabb,
}

pub(super) fn build(points: &[Vec3], config: &PointKdTreeConfig) -> Built {
    let mut items: Vec<Item> = points
        .par_iter()
        .enumerate()
        .filter(|(_, p)| p.is_finite())
        .map(|(i, &p)| Item { p, id: i as u32 })
        .collect();
    let bounds = tight_bounds(&items, true);
    let mut nodes = Vec::new();
    let mut info = TreeInfo::default();
    if !items.is_empty() {
        let ctx = Context {
            threshold: config.small_root_limit(),
            empty_ratio: config.empty_space_ratio,
            vvh_radius: vvh_radius(config.query_radius, bounds, items.len()),
            traversal_cost: config.traversal_cost,
            parallel_min: config.parallel_min_points.max(2),
        };
        nodes.reserve(4 * items.len() / ctx.threshold + 16);
        let root = Task {
            items: &mut items,
            base: 0,
            cell: bounds,
            tight: bounds,
            depth: 0,
        };
        build_node(&ctx, root, &mut nodes, &mut info);
    }
    Built {
        nodes,
        items,
        bounds,
        info,
    }
}

/// The VVH's `R`: the configured radius, or `diagonal / cbrt(n)` when that
/// is not usable, never so small that a flat cloud has zero volume.
pub fn vvh_radius(configured: f32, bounds: Aabb, n: usize) -> f32 {
    let diagonal = bounds.diagonal();
    let radius = if configured.is_finite() && configured > 0.0 {
        configured
    } else {
        diagonal / (n as f32).cbrt()
    };
    radius.max(1e-6 * diagonal).max(f32::MIN_POSITIVE)
}

/// A subtree to build: its points, which start at `base` in the final
/// point order, the cell they lie in, their tight bounds and its depth.
struct Task<'a> {
    items: &'a mut [Item],
    base: u32,
    cell: Aabb,
    tight: Aabb,
    depth: usize,
}

/// Builds the subtree of `task` into `out`, in pre-order.
fn build_node(ctx: &Context, task: Task, out: &mut Vec<PointKdNode>, info: &mut TreeInfo) {
    if task.items.len() <= ctx.threshold {
        build_small(ctx, task.items, task.base, task.cell, task.depth, out, info);
        return;
    }
    match plan_large_split(task.cell, task.tight, task.depth, ctx.empty_ratio) {
        Some(plan) => emit_large(ctx, task, plan, out, info),
        // Coincident points, or the depth cap: one leaf holds them all.
        None => {
            out.push(PointKdNode::leaf(task.base, task.items.len() as u32));
            info.add_leaf(task.depth, task.items.len());
        }
    }
}

/// [`build_node`] into a fresh vector (for a parallel branch).
fn subtree(ctx: &Context, task: Task) -> (Vec<PointKdNode>, TreeInfo) {
    let mut nodes = Vec::with_capacity(4 * task.items.len() / ctx.threshold + 16);
    let mut info = TreeInfo::default();
    build_node(ctx, task, &mut nodes, &mut info);
    (nodes, info)
}

/// Cuts off empty space (Zhou's rule (a), repeated until no side has more
/// than `C_e` of the cell empty) and picks the spatial median of the
/// longest axis (rule (b)). `None` when the node cannot be split: all its
/// points coincide, or it is at the depth cap. `cell` is the node's cell,
/// `tight` its points' bounds, `depth` its depth (the root's is 0).
pub fn plan_large_split(
    cell: Aabb,
    tight: Aabb,
    depth: usize,
    empty_ratio: f32,
) -> Option<LargeSplit> {
    // The median split itself needs one level below the last cut.
    let cut_budget = MAX_DEPTH.checked_sub(depth + 1)?.min(6);
    let mut cell = cell;
    let mut cuts = Vec::new();
    while cuts.len() < cut_budget {
        let Some(cut) = widest_empty_side(&cell, &tight, empty_ratio) else {
            break;
        };
        if cut.empty_left {
            cell.min[cut.axis] = cut.pos;
        } else {
            cell.max[cut.axis] = cut.pos;
        }
        cuts.push(cut);
    }
    let axis = cell.extent().max_position();
    let split = 0.5 * (cell.min[axis] + cell.max[axis]);
    // Both children non-empty: some point below the split, some at or above.
    (tight.min[axis] < split && split <= tight.max[axis]).then_some(LargeSplit {
        cuts,
        axis,
        split,
        cell,
    })
}

/// The side whose empty gap is the largest fraction of the cell's extent,
/// if that fraction exceeds `ratio`.
fn widest_empty_side(cell: &Aabb, tight: &Aabb, ratio: f32) -> Option<EmptyCut> {
    let extent = cell.extent();
    let mut best: Option<(f32, EmptyCut)> = None;
    for axis in 0..3 {
        if extent[axis] <= 0.0 {
            continue;
        }
        let sides = [
            (tight.min[axis] - cell.min[axis], tight.min[axis], true),
            (
                cell.max[axis] - tight.max[axis],
                next_up(tight.max[axis]),
                false,
            ),
        ];
        for (gap, pos, empty_left) in sides {
            let fraction = gap / extent[axis];
            let inside = cell.min[axis] < pos && pos < cell.max[axis];
            if fraction > ratio && inside && best.is_none_or(|(f, _)| fraction > f) {
                best = Some((
                    fraction,
                    EmptyCut {
                        axis,
                        pos,
                        empty_left,
                    },
                ));
            }
        }
    }
    best.map(|(_, cut)| cut)
}

/// Writes the cut chain, the median split and both children.
fn emit_large(
    ctx: &Context,
    task: Task,
    plan: LargeSplit,
    out: &mut Vec<PointKdNode>,
    info: &mut TreeInfo,
) {
    let Task {
        items, base, depth, ..
    } = task;
    let n = items.len() as u32;
    let mut depth = depth;
    // Cuts whose empty leaf is a right child: written after the subtree.
    let mut pending = Vec::new();
    for cut in &plan.cuts {
        if cut.empty_left {
            out.push(PointKdNode::inner(cut.axis, cut.pos, out.len() as u32 + 2));
            out.push(PointKdNode::leaf(base, 0));
            info.add_leaf(depth + 1, 0);
        } else {
            pending.push((out.len(), *cut, depth));
            out.push(PointKdNode::inner(cut.axis, cut.pos, 0));
        }
        depth += 1;
    }
    let (n_left, left_tight, right_tight) = partition(items, plan.axis, plan.split);
    let (left_items, right_items) = items.split_at_mut(n_left);
    let (mut left_cell, mut right_cell) = (plan.cell, plan.cell);
    left_cell.max[plan.axis] = plan.split;
    right_cell.min[plan.axis] = plan.split;
    let left = Task {
        items: left_items,
        base,
        cell: left_cell,
        tight: left_tight,
        depth: depth + 1,
    };
    let right = Task {
        items: right_items,
        base: base + n_left as u32,
        cell: right_cell,
        tight: right_tight,
        depth: depth + 1,
    };
    let here = out.len();
    out.push(PointKdNode::inner(plan.axis, plan.split, 0));
    if n as usize >= ctx.parallel_min {
        let ((left, left_info), (right, right_info)) =
            rayon::join(|| subtree(ctx, left), || subtree(ctx, right));
        append_shifted(out, left);
        out[here] = PointKdNode::inner(plan.axis, plan.split, out.len() as u32);
        append_shifted(out, right);
        info.merge(left_info);
        info.merge(right_info);
    } else {
        build_node(ctx, left, out, info);
        out[here] = PointKdNode::inner(plan.axis, plan.split, out.len() as u32);
        build_node(ctx, right, out, info);
    }
    // Innermost cut first: its empty leaf follows the subtree it wraps.
    for (at, cut, cut_depth) in pending.into_iter().rev() {
        out[at] = PointKdNode::inner(cut.axis, cut.pos, out.len() as u32);
        out.push(PointKdNode::leaf(base + n, 0));
        info.add_leaf(cut_depth + 1, 0);
    }
}

fn append_shifted(out: &mut Vec<PointKdNode>, subtree: Vec<PointKdNode>) {
    let offset = out.len() as u32;
    out.extend(subtree.into_iter().map(|node| node.shifted(offset)));
}

/// Stable partition of `items`: points with `coord < split` first.
/// Returns the size of the left part and both parts' bounds (computed in
/// the same pass, so no level reads its points twice).
fn partition(items: &mut [Item], axis: usize, split: f32) -> (usize, Aabb, Aabb) {
    let goes_left = |item: &Item| item.p[axis] < split;
    if items.len() >= DATA_PARALLEL_MIN {
        let left: Vec<Item> = items.par_iter().copied().filter(goes_left).collect();
        let right: Vec<Item> = items
            .par_iter()
            .copied()
            .filter(|i| !goes_left(i))
            .collect();
        items[..left.len()].copy_from_slice(&left);
        items[left.len()..].copy_from_slice(&right);
        return (
            left.len(),
            tight_bounds(&left, true),
            tight_bounds(&right, true),
        );
    }
    let mut right = Vec::new();
    let mut n_left = 0;
    let (mut left_bounds, mut right_bounds) = (Aabb::EMPTY, Aabb::EMPTY);
    for j in 0..items.len() {
        let item = items[j];
        if goes_left(&item) {
            items[n_left] = item;
            n_left += 1;
            left_bounds.grow(item.p);
        } else {
            right.push(item);
            right_bounds.grow(item.p);
        }
    }
    items[n_left..].copy_from_slice(&right);
    (n_left, left_bounds, right_bounds)
}

/// Bounds of `items`.
fn tight_bounds(items: &[Item], parallel: bool) -> Aabb {
    if parallel {
        items
            .par_iter()
            .fold(|| Aabb::EMPTY, |b, item| b.grown(item.p))
            .reduce(|| Aabb::EMPTY, Aabb::union)
    } else {
        items.iter().fold(Aabb::EMPTY, |b, item| b.grown(item.p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_up_steps_one_float() {
        for x in [0.0f32, -0.0, 1.0, -1.0, 1e-30, -1e-30, 123.456] {
            let y = next_up(x);
            assert!(y > x);
            let mid = 0.5 * (x + y);
            assert!(mid == x || mid == y, "{x}: nothing fits between");
        }
    }
}
