//! The small-node stage of the photon kd-tree (Zhou et al. 2008, §3.2 /
//! Algorithm 4, with the voxel volume heuristic of Wald, Günther and
//! Slusallek 2004 in place of the SAH, as seeds 002 §8.1 and 000 §15.4
//! prescribe for points).
//!
//! A small root holds at most 64 points, so any subset of them is one `u64`
//! mask. The split candidates are the points' own coordinates, three per
//! point; candidate `(j, axis)` precomputes its left set
//! `{i : p_i[axis] < p_j[axis]}` as a mask over the root, so evaluating a
//! candidate in any descendant is two popcounts (`C_L`, `C_R`) and splitting
//! is one AND per child. The cost of a split is
//!
//! `VVH = C_ts + (C_L · Vol(V_L ⊕ R) + C_R · Vol(V_R ⊕ R)) / Vol(V ⊕ R)`,
//!
//! `Vol(B ⊕ R) = Π (extent + 2R)` with `R` the maximum query radius; the
//! leaf cost is the point count. A node splits while the best candidate
//! strictly inside its cell beats its leaf cost. Because a used plane lies
//! on the child cells' boundary afterwards, no candidate is used twice on a
//! path and the recursion ends.

use super::build::{Context, Item, TreeInfo};
use super::{MAX_DEPTH, PointKdNode};
use caustic_geom::{Aabb, Vec3};

/// Largest small root: one bit per point in a `u64`.
const MAX_SMALL: usize = 64;

/// Builds the subtree over the small root `items` (at most 64 points,
/// starting at `base` in the final point order) into `out`, and reorders
/// `items` so that each leaf's points are contiguous.
pub(super) fn build_small(
    ctx: &Context,
    items: &mut [Item],
    base: u32,
    cell: Aabb,
    depth: usize,
    out: &mut Vec<PointKdNode>,
    info: &mut TreeInfo,
) {
    let n = items.len();
    assert!(n <= MAX_SMALL, "small root of {n} points");
    let mut positions = [Vec3::ZERO; MAX_SMALL];
    for (p, item) in positions.iter_mut().zip(items.iter()) {
        *p = item.p;
    }
    let mut small = SmallRoot {
        ctx,
        positions: &positions[..n],
        left_sets: left_sets(&positions[..n]),
        base,
        leaf_order: Vec::with_capacity(n),
        out,
        info,
    };
    let all = if n == MAX_SMALL {
        u64::MAX
    } else {
        (1u64 << n) - 1
    };
    small.split(all, cell, depth);
    let reordered: Vec<Item> = small
        .leaf_order
        .iter()
        .map(|&j| items[j as usize])
        .collect();
    items.copy_from_slice(&reordered);
}

/// `left[j][axis]`: the points strictly below point `j` on `axis`. One
/// sort per axis: walking the points in coordinate order, the left set of
/// a point is the prefix before the first point of equal coordinate.
fn left_sets(positions: &[Vec3]) -> Vec<[u64; 3]> {
    let n = positions.len();
    let mut left = vec![[0u64; 3]; n];
    let mut order: Vec<usize> = (0..n).collect();
    for axis in 0..3 {
        order.sort_unstable_by(|&a, &b| positions[a][axis].total_cmp(&positions[b][axis]));
        let mut prefix = 0u64;
        let mut below = 0u64;
        for m in 0..n {
            let j = order[m];
            if m > 0 && positions[order[m - 1]][axis] < positions[j][axis] {
                below = prefix;
            }
            left[j][axis] = below;
            prefix |= 1 << j;
        }
    }
    left
}

/// A chosen split: the plane and the left child's points.
struct Split {
    axis: usize,
    pos: f32,
    left: u64,
}

/// The working state of one small root.
struct SmallRoot<'a, 'o> {
    ctx: &'a Context,
    positions: &'a [Vec3],
    left_sets: Vec<[u64; 3]>,
    /// First point of the small root in the final order.
    base: u32,
    /// Local point indices in the order the leaves are written.
    leaf_order: Vec<u8>,
    out: &'o mut Vec<PointKdNode>,
    info: &'o mut TreeInfo,
}

impl SmallRoot<'_, '_> {
    fn split(&mut self, mask: u64, cell: Aabb, depth: usize) {
        let best = (mask.count_ones() > 1 && depth < MAX_DEPTH)
            .then(|| self.best_split(mask, &cell))
            .flatten();
        let Some(split) = best else {
            self.leaf(mask, depth);
            return;
        };
        let (mut left_cell, mut right_cell) = (cell, cell);
        left_cell.max[split.axis] = split.pos;
        right_cell.min[split.axis] = split.pos;
        let here = self.out.len();
        self.out.push(PointKdNode::inner(split.axis, split.pos, 0));
        self.split(mask & split.left, left_cell, depth + 1);
        self.out[here] = PointKdNode::inner(split.axis, split.pos, self.out.len() as u32);
        self.split(mask & !split.left, right_cell, depth + 1);
    }

    /// The candidate with the lowest VVH if it beats the leaf cost; ties go
    /// to the first candidate in (point, axis) order, so builds repeat.
    fn best_split(&self, mask: u64, cell: &Aabb) -> Option<Split> {
        let count = mask.count_ones();
        let volume = self.inflated_volume(cell);
        let mut best_cost = count as f32;
        let mut best = None;
        let mut bits = mask;
        while bits != 0 {
            let j = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            for axis in 0..3 {
                let pos = self.positions[j][axis];
                if !(cell.min[axis] < pos && pos < cell.max[axis]) {
                    continue;
                }
                let left = self.left_sets[j][axis];
                let c_left = (mask & left).count_ones() as f32;
                let c_right = count as f32 - c_left;
                let (mut left_cell, mut right_cell) = (*cell, *cell);
                left_cell.max[axis] = pos;
                right_cell.min[axis] = pos;
                let cost = self.ctx.traversal_cost
                    + (c_left * self.inflated_volume(&left_cell)
                        + c_right * self.inflated_volume(&right_cell))
                        / volume;
                if cost < best_cost {
                    best_cost = cost;
                    best = Some(Split { axis, pos, left });
                }
            }
        }
        best
    }

    /// `Vol(B ⊕ R)`: the box grown by the query radius on every side.
    fn inflated_volume(&self, cell: &Aabb) -> f32 {
        let grown = cell.extent() + Vec3::splat(2.0 * self.ctx.vvh_radius);
        grown.x * grown.y * grown.z
    }

    fn leaf(&mut self, mask: u64, depth: usize) {
        let first = self.base + self.leaf_order.len() as u32;
        let mut bits = mask;
        while bits != 0 {
            self.leaf_order.push(bits.trailing_zeros() as u8);
            bits &= bits - 1;
        }
        let count = mask.count_ones();
        self.out.push(PointKdNode::leaf(first, count));
        self.info.add_leaf(depth, count as usize);
    }
}
