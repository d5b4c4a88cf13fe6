//! The small-node stage of Zhou et al. 2008 (§3.2, Algorithms 4
//! and 5): the subtree under a *small root* of at most 64 references, by
//! the exact greedy SAH
//!
//! `C_trav + C_isect * (N_L * A_L + N_R * A_R) / A`   against the leaf cost `C_isect * N`,
//!
//! where `A` are the cells' surface areas and `N` the reference counts.
//!
//! Split candidates are the planes through the faces of the small root's
//! reference boxes (clipped to the small root's cell by the large-node
//! stage), one per distinct face position and axis. A triangle set is a
//! `u64` bit mask over the small root's references, and every candidate
//! carries the masks of the references on its two sides and of the ones
//! that generate it, computed once per small root (from the boxes sorted
//! by each face: prefix ORs). A node evaluates, as in Zhou's Algorithm 4,
//! the candidates strictly inside its cell that one of its own references
//! generates (a binary search finds the cell's range of the sorted
//! candidates), its counts being two `popcount(node & side)` and its
//! children's sets two ANDs, so no reference list is sorted or partitioned
//! below the small root.
//! A box below the plane (or flat in it) is on the left, one above it on
//! the right, one across it on both. As in Zhou's paper, references are not
//! clipped again here: clipping "rarely improves" small nodes, and the
//! precomputed masks rely on fixed boxes.
//!
//! A node becomes a leaf when no candidate strictly inside its cell beats
//! the leaf cost, at the depth limit, or when its cell has no area. Every
//! split strictly lowers the greedy cost, so some child holds fewer
//! references or a smaller cell, and the recursion ends. Each small root is
//! built on one thread, depth first, children after their parent.

use super::KdTreeConfig;
use super::large_nodes::LargeNode;
use crate::kdtree::{KdNode, split_cell};
use caustic_geom::Aabb;

/// A candidate plane on one axis: the references on each side of it and
/// those with a box face in it (its generators).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Candidate {
    plane: f32,
    left: u64,
    right: u64,
    generators: u64,
}

/// A small root's subtree, with local indices: node 0 is the root,
/// leaves index `prims` (scene triangle ids).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SmallTree {
    pub nodes: Vec<KdNode>,
    pub prims: Vec<u32>,
}

/// A node waiting to be built.
struct Work {
    slot: usize,
    set: u64,
    cell: Aabb,
    depth: usize,
}

/// The best split of a node.
struct Split {
    axis: usize,
    plane: f32,
    left: u64,
    right: u64,
}

/// Builds the subtree of a small root (at most 64 references).
pub fn build_small(root: &LargeNode, config: &KdTreeConfig) -> SmallTree {
    let refs = &root.refs;
    debug_assert!(!refs.is_empty() && refs.len() <= 64);
    let boxes: Vec<Aabb> = refs.iter().map(|r| r.bounds).collect();
    let candidates: [Vec<Candidate>; 3] =
        std::array::from_fn(|axis| candidates_on_axis(&boxes, axis));
    let mut tree = SmallTree {
        nodes: vec![KdNode::leaf(0, 0)],
        prims: Vec::with_capacity(refs.len()),
    };
    let mut stack = vec![Work {
        slot: 0,
        set: low_bits(refs.len()),
        cell: root.cell,
        depth: root.depth,
    }];
    while let Some(work) = stack.pop() {
        let Some(split) = best_split(&work, &candidates, config) else {
            tree.nodes[work.slot] = KdNode::leaf(tree.prims.len(), work.set.count_ones() as usize);
            tree.prims.extend(bits(work.set).map(|i| refs[i].prim));
            continue;
        };
        let pair = tree.nodes.len();
        tree.nodes.extend([KdNode::leaf(0, 0); 2]);
        tree.nodes[work.slot] = KdNode::inner(split.axis, split.plane, pair);
        let (below, above) = split_cell(&work.cell, split.axis, split.plane);
        // Push the right child first so the left one is built next.
        for (slot, set, cell) in [
            (pair + 1, work.set & split.right, above),
            (pair, work.set & split.left, below),
        ] {
            stack.push(Work {
                slot,
                set,
                cell,
                depth: work.depth + 1,
            });
        }
    }
    tree
}

/// The candidates through the box faces on `axis`, sorted, one per
/// distinct plane. The left set of a plane `p` is `{min < p} ∪ {max <= p}`,
/// the right set `{max > p}`: prefix ORs over the boxes sorted by each
/// face.
fn candidates_on_axis(boxes: &[Aabb], axis: usize) -> Vec<Candidate> {
    let sorted = |face: fn(&Aabb, usize) -> f32| {
        let mut faces: Vec<(f32, u64)> = boxes
            .iter()
            .enumerate()
            .map(|(i, b)| (face(b, axis), 1u64 << i))
            .collect();
        // Equal faces may come in any order: masks are only read at the
        // boundaries between distinct values.
        faces.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
        let mut acc = 0;
        let mut or = Vec::with_capacity(faces.len() + 1);
        or.push(0u64);
        or.extend(faces.iter().map(|&(_, bit)| {
            acc |= bit;
            acc
        }));
        (faces, or)
    };
    let (mins, min_or) = sorted(|b, k| b.min[k]);
    let (maxs, max_or) = sorted(|b, k| b.max[k]);
    let all = low_bits(boxes.len());
    merged_planes(&mins, &maxs)
        .map(|plane| {
            let below = mins.partition_point(|m| m.0 < plane);
            let through_min = mins.partition_point(|m| m.0 <= plane);
            let at_or_below = maxs.partition_point(|m| m.0 <= plane);
            let below_max = maxs.partition_point(|m| m.0 < plane);
            Candidate {
                plane,
                left: min_or[below] | max_or[at_or_below],
                right: all & !max_or[at_or_below],
                generators: (min_or[through_min] & !min_or[below])
                    | (max_or[at_or_below] & !max_or[below_max]),
            }
        })
        .collect()
}

/// The distinct positions of two sorted face lists, in order.
fn merged_planes<'a>(a: &'a [(f32, u64)], b: &'a [(f32, u64)]) -> impl Iterator<Item = f32> + 'a {
    let (mut i, mut j) = (0, 0);
    let mut last = None;
    std::iter::from_fn(move || {
        loop {
            let next = match (a.get(i), b.get(j)) {
                (Some(x), Some(y)) if x.0 <= y.0 => {
                    i += 1;
                    x.0
                }
                (_, Some(y)) => {
                    j += 1;
                    y.0
                }
                (Some(x), None) => {
                    i += 1;
                    x.0
                }
                (None, None) => return None,
            };
            if last != Some(next) {
                last = Some(next);
                return last;
            }
        }
    })
}

/// The cheapest candidate strictly inside the node's cell that one of its
/// references generates, if it beats the leaf.
fn best_split(
    work: &Work,
    candidates: &[Vec<Candidate>; 3],
    config: &KdTreeConfig,
) -> Option<Split> {
    let count = work.set.count_ones();
    let area = work.cell.half_area();
    if count == 0 || work.depth >= config.max_depth || !(area > 0.0 && area.is_finite()) {
        return None;
    }
    let leaf_cost = config.intersection_cost * count as f32;
    let scale = config.intersection_cost / area;
    let mut best_cost = leaf_cost;
    let mut best = None;
    let extent = work.cell.extent();
    for (axis, on_axis) in candidates.iter().enumerate() {
        let (lo, hi) = (work.cell.min[axis], work.cell.max[axis]);
        let (u, v) = ((axis + 1) % 3, (axis + 2) % 3);
        let cap = extent[u] * extent[v];
        let rim = extent[u] + extent[v];
        let first = on_axis.partition_point(|c| c.plane <= lo);
        let inside = on_axis[first..].iter().take_while(|c| c.plane < hi);
        for c in inside.filter(|c| c.generators & work.set != 0) {
            let n_left = (work.set & c.left).count_ones() as f32;
            let n_right = (work.set & c.right).count_ones() as f32;
            let area_left = cap + (c.plane - lo) * rim;
            let area_right = cap + (hi - c.plane) * rim;
            let cost = config.traversal_cost + scale * (n_left * area_left + n_right * area_right);
            if cost < best_cost {
                best_cost = cost;
                best = Some(Split {
                    axis,
                    plane: c.plane,
                    left: c.left,
                    right: c.right,
                });
            }
        }
    }
    best
}

/// A mask of the `n` lowest bits.
fn low_bits(n: usize) -> u64 {
    if n >= 64 { u64::MAX } else { (1 << n) - 1 }
}

/// Indices of the set bits, lowest first.
fn bits(mut set: u64) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        (set != 0).then(|| {
            let i = set.trailing_zeros() as usize;
            set &= set - 1;
            i
        })
    })
}

#[cfg(test)]
mod tests {
    use super::super::large_nodes::Ref;
    use super::*;
    use caustic_geom::Vec3;

    fn unit_box_at(x: f32) -> Aabb {
        Aabb::new(Vec3::new(x, 0.0, 0.0), Vec3::new(x + 1.0, 1.0, 1.0))
    }

    #[test]
    fn candidate_masks_follow_the_side_rules() {
        // Boxes: 0 = [0, 1], 1 = [2, 3], 2 = [0.5, 2.5], 3 flat at x = 2.
        let boxes = [
            unit_box_at(0.0),
            unit_box_at(2.0),
            Aabb::new(Vec3::new(0.5, 0.0, 0.0), Vec3::new(2.5, 1.0, 1.0)),
            Aabb::new(Vec3::new(2.0, 0.0, 0.0), Vec3::new(2.0, 1.0, 1.0)),
        ];
        let c = candidates_on_axis(&boxes, 0);
        let planes: Vec<f32> = c.iter().map(|c| c.plane).collect();
        assert_eq!(planes, vec![0.0, 0.5, 1.0, 2.0, 2.5, 3.0]);
        let at = |p: f32| *c.iter().find(|c| c.plane == p).unwrap();
        // x = 1: box 0 ends there (left), box 2 straddles, 1 and 3 right.
        assert_eq!(
            (at(1.0).left, at(1.0).right, at(1.0).generators),
            (0b0101, 0b1110, 0b0001)
        );
        // x = 2: box 1 starts there (right only), box 3 is flat in it
        // (left); both generate it.
        assert_eq!(
            (at(2.0).left, at(2.0).right, at(2.0).generators),
            (0b1101, 0b0110, 0b1010)
        );
    }

    #[test]
    fn two_separate_clusters_are_split_apart() {
        let refs: Vec<Ref> = (0..40)
            .map(|i| Ref {
                prim: i,
                bounds: unit_box_at(if i < 20 { 0.0 } else { 10.0 }),
            })
            .collect();
        let root = LargeNode {
            cell: Aabb::new(Vec3::ZERO, Vec3::new(11.0, 1.0, 1.0)),
            refs,
            depth: 0,
        };
        let tree = build_small(&root, &KdTreeConfig::DEFAULT);
        let top = tree.nodes[0];
        assert!(!top.is_leaf());
        assert_eq!(top.axis(), 0);
        assert!((1.0..=10.0).contains(&top.split()));
        // Every reference ends in exactly one leaf: no box straddles.
        let mut prims = tree.prims.clone();
        prims.sort_unstable();
        assert_eq!(prims, (0..40).collect::<Vec<_>>());
    }

    #[test]
    fn a_single_full_box_is_a_leaf_and_bits_iterate_in_order() {
        let root = LargeNode {
            cell: unit_box_at(0.0),
            refs: vec![Ref {
                prim: 7,
                bounds: unit_box_at(0.0),
            }],
            depth: 0,
        };
        let tree = build_small(&root, &KdTreeConfig::DEFAULT);
        assert_eq!(tree.nodes, vec![KdNode::leaf(0, 1)]);
        assert_eq!(tree.prims, vec![7]);
        assert_eq!(bits(0b1010_0001).collect::<Vec<_>>(), vec![0, 5, 7]);
        assert_eq!(low_bits(64), u64::MAX);
        assert_eq!(low_bits(3), 0b111);
    }
}
