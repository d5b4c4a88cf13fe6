//! The large-node stage of Zhou et al. 2008 (§3.1, Algorithm 2):
//! how one node of more than `small_node_max` references is split.
//!
//! The greedy SAH assumes both children become leaves, which is far from
//! true this high up, so Zhou splits large nodes by two cheap rules:
//! 1. **Empty-space cut-off**: for each of the six sides, when the gap
//!    between the node's cell and the tight box of its references is at
//!    least `empty_space_ratio` (25 %) of the cell's extent on that axis,
//!    a plane at the tight box cuts it off: an inner node whose child on
//!    that side is an empty leaf. The cuts chain, one per qualifying side.
//! 2. **Spatial median** of the remaining cell's longest axis.
//!
//! References whose boxes lie on one side of the plane go to that child
//! (a box flat in the plane goes below); references straddling it are
//! clipped to each child's cell ([`clipped_bounds`]: the part of the
//! triangle inside the child, not the part of its box), and dropped from a
//! child the triangle itself does not reach.
//!
//! Termination, which the papers leave implicit: when the median split of
//! the longest axis separates no reference (every child would keep them
//! all, as with a pile of identical triangles), the next longest axes are
//! tried, and when none separates anything, or the depth limit is reached,
//! the node becomes a leaf, however many references it holds.
//!
//! Parallel: a node with at least `parallel_min_refs` references bounds and
//! partitions them in chunks on several threads; chunk results are joined
//! in order, so the children's reference order does not depend on threads.

use super::KdTreeConfig;
use crate::kdtree::{clip::clipped_bounds, split_cell};
use caustic_geom::{Aabb, Triangle};
use rayon::prelude::*;

/// References per parallel chunk.
const CHUNK: usize = 4096;

/// A triangle reference with the box of its part inside the node.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ref {
    pub prim: u32,
    pub bounds: Aabb,
}

/// A node of the large-node stage: its cell, its references (boxes inside
/// the cell) and its depth in the tree.
#[derive(Clone, Debug, PartialEq)]
pub struct LargeNode {
    pub cell: Aabb,
    pub refs: Vec<Ref>,
    pub depth: usize,
}

/// One empty-space cut: a plane whose `empty_below` side is an empty leaf.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cut {
    pub axis: usize,
    pub plane: f32,
    pub empty_below: bool,
}

/// What happens to a large node.
#[derive(Debug)]
pub enum LargeOutcome {
    /// No split separates anything, or the depth limit: a leaf.
    Leaf(LargeNode),
    /// The chain of `cuts`, then the split at `split` on `axis` into
    /// `children` (below, above).
    Split {
        cuts: Vec<Cut>,
        axis: usize,
        split: f32,
        children: [LargeNode; 2],
    },
}

/// Splits one large node (see the module docs).
pub fn split_large(node: LargeNode, triangles: &[Triangle], config: &KdTreeConfig) -> LargeOutcome {
    let tight = tight_bounds(&node.refs, config);
    let (cuts, cell) = empty_space_cuts(&node.cell, &tight, config.empty_space_ratio);
    let depth = node.depth + cuts.len() + 1;
    if depth > config.max_depth {
        return LargeOutcome::Leaf(node);
    }
    let count = node.refs.len();
    for axis in axes_longest_first(&cell) {
        let Some(split) = median(&cell, axis) else {
            continue;
        };
        let (below, above) = split_cell(&cell, axis, split);
        let (left, right) = partition(&node.refs, axis, split, [&below, &above], triangles, config);
        if left.len() == count && right.len() == count {
            continue;
        }
        let child = |cell, refs| LargeNode { cell, refs, depth };
        return LargeOutcome::Split {
            cuts,
            axis,
            split,
            children: [child(below, left), child(above, right)],
        };
    }
    LargeOutcome::Leaf(node)
}

/// The box of all references (Zhou's per-chunk then segmented reduction;
/// here a rayon reduction over chunks).
fn tight_bounds(refs: &[Ref], config: &KdTreeConfig) -> Aabb {
    let fold = |chunk: &[Ref]| chunk.iter().fold(Aabb::EMPTY, |b, r| b.union(r.bounds));
    if refs.len() >= config.parallel_min_refs {
        refs.par_chunks(CHUNK)
            .map(fold)
            .reduce(|| Aabb::EMPTY, Aabb::union)
    } else {
        fold(refs)
    }
}

/// The empty-space cuts of `cell` around `tight` (in axis order, low side
/// first) and the cell that remains after them.
pub fn empty_space_cuts(cell: &Aabb, tight: &Aabb, ratio: f32) -> (Vec<Cut>, Aabb) {
    let extent = cell.extent();
    let mut rest = *cell;
    let mut cuts = Vec::new();
    for axis in 0..3 {
        let limit = ratio * extent[axis];
        let below = tight.min[axis] - cell.min[axis];
        if below > 0.0 && below >= limit {
            cuts.push(Cut {
                axis,
                plane: tight.min[axis],
                empty_below: true,
            });
            rest.min[axis] = tight.min[axis];
        }
        let above = cell.max[axis] - tight.max[axis];
        if above > 0.0 && above >= limit {
            cuts.push(Cut {
                axis,
                plane: tight.max[axis],
                empty_below: false,
            });
            rest.max[axis] = tight.max[axis];
        }
    }
    (cuts, rest)
}

/// Axes by decreasing extent (first axis first on ties).
pub(crate) fn axes_longest_first(cell: &Aabb) -> [usize; 3] {
    let e = cell.extent();
    let mut axes = [0, 1, 2];
    axes.sort_by(|&a, &b| e[b].total_cmp(&e[a]));
    axes
}

/// The midpoint of `cell` on `axis`, when it lies strictly inside.
pub(crate) fn median(cell: &Aabb, axis: usize) -> Option<f32> {
    let (lo, hi) = (cell.min[axis], cell.max[axis]);
    let mid = 0.5 * lo + 0.5 * hi;
    (lo < mid && mid < hi).then_some(mid)
}

/// References of each child of a split at `split` on `axis`; straddling
/// ones clipped to `cells` (below, above).
pub fn partition(
    refs: &[Ref],
    axis: usize,
    split: f32,
    cells: [&Aabb; 2],
    triangles: &[Triangle],
    config: &KdTreeConfig,
) -> (Vec<Ref>, Vec<Ref>) {
    let run = |chunk: &[Ref]| partition_chunk(chunk, axis, split, cells, triangles);
    if refs.len() < config.parallel_min_refs {
        return run(refs);
    }
    let parts: Vec<(Vec<Ref>, Vec<Ref>)> = refs.par_chunks(CHUNK).map(run).collect();
    let mut left = Vec::with_capacity(parts.iter().map(|p| p.0.len()).sum());
    let mut right = Vec::with_capacity(parts.iter().map(|p| p.1.len()).sum());
    for (l, r) in parts {
        left.extend(l);
        right.extend(r);
    }
    (left, right)
}

fn partition_chunk(
    refs: &[Ref],
    axis: usize,
    split: f32,
    cells: [&Aabb; 2],
    triangles: &[Triangle],
) -> (Vec<Ref>, Vec<Ref>) {
    let mut left = Vec::with_capacity(refs.len());
    let mut right = Vec::with_capacity(refs.len() / 2);
    for r in refs {
        let (lo, hi) = (r.bounds.min[axis], r.bounds.max[axis]);
        if hi <= split {
            left.push(*r);
        } else if lo >= split {
            right.push(*r);
        } else {
            let [below, above] = clip_straddler(r, &triangles[r.prim as usize], cells);
            left.extend(below);
            right.extend(above);
        }
    }
    (left, right)
}

/// The references of a straddling triangle in each child: the boxes of its
/// clipped parts, or none where it misses the child. Should rounding lose
/// it from both (it cannot in exact arithmetic), both keep its box clipped
/// to them, so no part is lost.
fn clip_straddler(r: &Ref, tri: &Triangle, cells: [&Aabb; 2]) -> [Option<Ref>; 2] {
    let part = |cell: &Aabb| {
        clipped_bounds(tri, cell)
            .map(|b| b.intersection(r.bounds))
            .filter(|b| !b.is_empty())
            .map(|bounds| Ref {
                prim: r.prim,
                bounds,
            })
    };
    let parts = [part(cells[0]), part(cells[1])];
    if parts.iter().all(Option::is_none) {
        return cells.map(|cell| {
            Some(Ref {
                prim: r.prim,
                bounds: r.bounds.intersection(*cell),
            })
        });
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;
    use caustic_geom::Vec3;

    #[test]
    fn empty_space_is_cut_from_sides_of_at_least_the_ratio() {
        let cell = Aabb::new(Vec3::ZERO, Vec3::splat(10.0));
        // Gaps: x 3 below (30 %), 1 above; y none; z 2.5 above (25 %).
        let tight = Aabb::new(Vec3::new(3.0, 0.0, 0.0), Vec3::new(9.0, 10.0, 7.5));
        let (cuts, rest) = empty_space_cuts(&cell, &tight, 0.25);
        assert_eq!(
            cuts,
            vec![
                Cut {
                    axis: 0,
                    plane: 3.0,
                    empty_below: true
                },
                Cut {
                    axis: 2,
                    plane: 7.5,
                    empty_below: false
                },
            ]
        );
        assert_eq!(
            rest,
            Aabb::new(Vec3::new(3.0, 0.0, 0.0), Vec3::new(10.0, 10.0, 7.5))
        );
        // A flat cell has nothing to cut on its flat axis.
        let flat = Aabb::new(Vec3::ZERO, Vec3::new(1.0, 1.0, 0.0));
        assert!(empty_space_cuts(&flat, &flat, 0.25).0.is_empty());
    }

    #[test]
    fn straddlers_are_clipped_to_tight_child_boxes() {
        // A diagonal triangle over x in [0, 4], y in [0, 4]; split at x = 3.
        let tri = Triangle::new(
            Vec3::ZERO,
            Vec3::new(4.0, 0.0, 0.0),
            Vec3::new(0.0, 4.0, 0.0),
        );
        let cell = Aabb::new(Vec3::ZERO, Vec3::new(4.0, 4.0, 1.0));
        let r = Ref {
            prim: 0,
            bounds: tri.bounds(),
        };
        let (below, above) = split_cell(&cell, 0, 3.0);
        let config = KdTreeConfig::DEFAULT;
        let (left, right) = partition(&[r], 0, 3.0, [&below, &above], &[tri], &config);
        assert_eq!(left.len(), 1);
        assert_eq!(right.len(), 1);
        // The part right of x = 3 reaches only y <= 1 (on x + y = 4).
        let b = right[0].bounds;
        assert_eq!(b.min.x, 3.0);
        assert!(b.max.y >= 1.0 && b.max.y < 1.0 + 1e-6, "{b:?}");
        for part in [left[0].bounds, right[0].bounds] {
            assert!(tri.bounds().contains(&part));
        }
        assert!(below.contains(&left[0].bounds) && above.contains(&right[0].bounds));
    }

    #[test]
    fn a_box_straddler_the_triangle_misses_is_dropped() {
        // Box spans x in [0, 4], but right of x = 3.5 only y in [0, 0.5]
        // holds triangle; the child cell above y = 1 gets nothing.
        let tri = Triangle::new(
            Vec3::ZERO,
            Vec3::new(4.0, 0.0, 0.0),
            Vec3::new(0.0, 4.0, 0.0),
        );
        let r = Ref {
            prim: 0,
            bounds: tri.bounds(),
        };
        let cell = Aabb::new(Vec3::new(0.0, 1.0, 0.0), Vec3::new(4.0, 4.0, 0.0));
        let (below, above) = split_cell(&cell, 0, 3.5);
        let config = KdTreeConfig::DEFAULT;
        let (left, right) = partition(&[r], 0, 3.5, [&below, &above], &[tri], &config);
        assert_eq!((left.len(), right.len()), (1, 0));
    }

    #[test]
    fn identical_triangles_end_in_a_leaf() {
        let tri = Triangle::new(Vec3::ZERO, Vec3::X, Vec3::Y);
        let node = LargeNode {
            cell: tri.bounds(),
            refs: vec![
                Ref {
                    prim: 0,
                    bounds: tri.bounds()
                };
                100
            ],
            depth: 0,
        };
        let tris = vec![tri];
        match split_large(node, &tris, &KdTreeConfig::DEFAULT) {
            LargeOutcome::Leaf(leaf) => assert_eq!(leaf.refs.len(), 100),
            other => panic!("expected a leaf, got {other:?}"),
        }
    }
}
