//! Collapsing a binary BVH into an `N`-wide one, [`collapse`].
//!
//! Each wide node starts from the two children of a binary node and keeps
//! *pulling up*: the inner child with the largest surface area is replaced
//! by its two children, until the node has `N` children or only leaves
//! remain. Pulling the largest child first is the greedy choice for the SAH:
//! the expected number of rays reaching a child is proportional to its area,
//! so opening the largest one removes the most expected traversal steps per
//! slot spent (the collapse Wald et al. use for Embree's BVH4/8, SIGGRAPH
//! 2014; Ylitie et al., HPG 2017, solve the same assignment optimally by
//! dynamic programming, at several times the cost).
//!
//! Leaves: a binary subtree holding at most
//! [`CollapseConfig::max_leaf_prims`] triangles may become one wide leaf
//! (a *fold*), since the leaf test costs one SIMD group test for up to `N`
//! triangles however they were split; the binary tree's own leaves stay
//! leaves. Whether it does is decided by the surface area heuristic with
//! one level of look-ahead: as one leaf the subtree costs
//! `leaf_cost * A * ceil(count / N)` (`A` its box's half area), kept split
//! it costs `A` (a binary inner node's step) plus that leaf cost of each of
//! its two children, and it is folded when the leaf is no dearer. A group
//! test costs several inner-node steps (an 8-wide node test stands for
//! about three binary levels): with [`CollapseConfig::leaf_cost`] 6,
//! sponza's subtrees of large, spread-out triangles stay split where their
//! children's boxes are much smaller, while the dragon's compact ones are
//! folded (docs/BENCHMARKS.md, "CPU rays, session 23"); `leaf_cost` 0 folds
//! every subtree that fits. The exact bottom-up SAH (each subtree's best
//! cost, from the pass that gathers the spans) chose trees within 1 % of
//! these in traced instructions, at twice that pass's work per node; the
//! look-ahead reads only the nodes the collapse visits. A leaf's triangles
//! are packed into `ceil(count / N)` groups in the binary leaf order, the
//! last one padded.
//!
//! Two passes: the nodes are laid out first, each wide leaf only reserving
//! its groups (`ceil(count / N)`, from the subtree's triangle count), and
//! the leaves' groups are then packed in parallel (rayon), each leaf into
//! its own reserved run. Packing gathers every triangle from scene order,
//! a cache miss apiece, and was most of a sequential collapse's time.
//!
//! Subtree spans: the binned builder stores each subtree's triangles as one
//! run of `prim_indices`, in depth-first leaf order, and the builders lay
//! children out after their parent. One pass in reverse index order then
//! gives every node's run (first slot and count), and a wide leaf's
//! triangles are that run, read in place; a tree laid out otherwise takes
//! a reverse pre-order walk,
//! and one whose runs are not contiguous has its leaves gathered by a walk
//! (the same triangles in the same order either way). The groups are not
//! filled beforehand: packing writes each reserved group once, padding
//! lanes included, so the pages are first touched by the parallel packing
//! rather than by a sequential fill.
//!
//! Slot boxes are the binary nodes' boxes unchanged, so every containment
//! the binary tree guarantees carries over, and so does the exactness of the
//! traversal. Nodes are laid out depth first (a node's first child follows
//! it), which keeps a descent within few pages.

use super::WideBvh;
use super::node::{ChildRef, TriangleGroup, WideNode};
use crate::bvh::{Bvh2, BvhNode};
use caustic_geom::Triangle;
use rayon::join;
use std::mem::MaybeUninit;

/// Settings of [`collapse`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CollapseConfig {
    /// A binary subtree with at most this many triangles may become one
    /// leaf (0: only the binary leaves are leaves).
    pub max_leaf_prims: usize,
    /// The cost of one group test against one binary inner node's step,
    /// both per unit of area, in the SAH that decides which subtrees are
    /// folded (see the module docs); 0 folds every subtree of at most
    /// `max_leaf_prims` triangles.
    pub leaf_cost: u32,
}

impl CollapseConfig {
    /// The default [`CollapseConfig::leaf_cost`]: measured on the standard
    /// scenes' rays (docs/BENCHMARKS.md, "CPU rays, session 23").
    pub const LEAF_COST: u32 = 6;

    /// Fold subtrees that fit one group of `width` lanes, where the SAH
    /// finds the leaf no dearer.
    pub const fn one_group(width: usize) -> Self {
        Self {
            max_leaf_prims: width,
            leaf_cost: Self::LEAF_COST,
        }
    }

    /// Keep the binary tree's leaves as they are.
    pub const KEEP_LEAVES: Self = Self {
        max_leaf_prims: 0,
        leaf_cost: Self::LEAF_COST,
    };
}

/// The SAH that decides the folds (see the module docs), for `N` lanes.
#[derive(Clone, Copy, Debug)]
struct FoldRule<const N: usize> {
    max_leaf_prims: u32,
    leaf_cost: f32,
}

impl<const N: usize> FoldRule<N> {
    fn new(config: &CollapseConfig) -> Self {
        Self {
            max_leaf_prims: u32::try_from(config.max_leaf_prims).unwrap_or(u32::MAX),
            leaf_cost: config.leaf_cost as f32,
        }
    }

    /// The cost of binary node `node`, holding `count` triangles, as one
    /// leaf.
    #[inline(always)]
    fn as_leaf(&self, node: &BvhNode, count: u32) -> f32 {
        self.leaf_cost * node.bounds().half_area() * count.div_ceil(N as u32) as f32
    }

    /// Whether inner node `node`, holding `count` triangles, is folded into
    /// one leaf; `children` are its two children with their counts.
    #[inline(always)]
    fn folds(&self, node: &BvhNode, count: u32, children: [(&BvhNode, u32); 2]) -> bool {
        // Most inner nodes hold too many triangles to fold: no areas then.
        if count > self.max_leaf_prims {
            return false;
        }
        let [(left, left_count), (right, right_count)] = children;
        let split = node.bounds().half_area()
            + self.as_leaf(left, left_count)
            + self.as_leaf(right, right_count);
        self.as_leaf(node, count) <= split
    }
}

/// Collapses `bvh`, built over `triangles`, into an `N`-wide tree.
pub fn collapse<const N: usize>(
    bvh: &Bvh2,
    triangles: &[Triangle],
    config: &CollapseConfig,
) -> WideBvh<N> {
    assert!((2..=32).contains(&N), "node width {N} not in 2..=32");
    let Some(root) = bvh.nodes.first() else {
        return WideBvh::empty();
    };
    let (spans, contiguous) = subtree_spans(bvh);
    let mut collapser = Collapser {
        bvh,
        spans,
        rule: FoldRule::new(config),
        out: WideBvh {
            nodes: Vec::with_capacity(bvh.nodes.len() / N + 1),
            groups: Vec::new(),
            root: ChildRef::Empty,
            bounds: root.bounds(),
            whole_leaves: no_triangle_twice(&bvh.prim_indices, triangles.len()),
        },
        leaves: Vec::new(),
        group_count: 0,
    };
    collapser.out.root = collapser.emit(0);
    let mut out = collapser.out;
    let packer = Packer {
        bvh,
        triangles,
        spans: contiguous.then_some(&collapser.spans),
    };
    let total = collapser.group_count as usize;
    let mut groups = Vec::with_capacity(total);
    packer.pack(&collapser.leaves, &mut groups.spare_capacity_mut()[..total]);
    // SAFETY: the leaves' reserved runs tile `0..total` (`emit_leaf` hands
    // them out one after another from 0), and `Packer::pack` writes every
    // group of every run (it asserts each leaf fills its run exactly).
    unsafe { groups.set_len(total) };
    out.groups = groups;
    out
}

/// The run of `prim_indices` slots below a binary node (meaningful as a
/// run only when the tree's runs are contiguous, see [`subtree_spans`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Span {
    first: u32,
    count: u32,
}

impl Span {
    fn range(self) -> std::ops::Range<usize> {
        self.first as usize..self.first as usize + self.count as usize
    }
}

/// A wide leaf to pack: the binary node whose triangles it holds, and its
/// first group.
#[derive(Clone, Copy)]
struct LeafToPack {
    node: usize,
    first: u32,
    /// Groups reserved.
    count: u32,
}

/// Leaves packed one after another below this many, halved in parallel
/// above it.
const PACK_SEQUENTIAL: usize = 64;

/// What the second pass reads: the binary tree, the triangles, and the
/// nodes' slot runs when they are contiguous.
struct Packer<'a> {
    bvh: &'a Bvh2,
    triangles: &'a [Triangle],
    spans: Option<&'a Spans>,
}

impl Packer<'_> {
    /// Packs `leaves` (in increasing `first` order) into `groups`, which
    /// starts at the first leaf's first group and holds all of theirs.
    /// Every group of every leaf is written.
    fn pack<const N: usize>(
        &self,
        leaves: &[LeafToPack],
        groups: &mut [MaybeUninit<TriangleGroup<N>>],
    ) {
        if leaves.len() <= PACK_SEQUENTIAL {
            let base = leaves.first().map_or(0, |l| l.first);
            let (mut ids, mut stack) = (Vec::new(), Vec::new());
            for leaf in leaves {
                let ids = match self.spans {
                    Some(spans) => &self.bvh.prim_indices[spans.get(leaf.node).range()],
                    None => {
                        subtree_prim_ids(self.bvh, leaf.node, &mut ids, &mut stack);
                        ids.as_slice()
                    }
                };
                let at = (leaf.first - base) as usize;
                let run = &mut groups[at..at + leaf.count as usize];
                // The run was reserved from the same count.
                assert_eq!(ids.len().div_ceil(N), run.len(), "leaf run mismatch");
                for (group, chunk) in run.iter_mut().zip(ids.chunks(N)) {
                    // Padding first, then the lanes, in place (building the
                    // group aside and copying it cost a third more).
                    let group = group.write(TriangleGroup::padding());
                    for (lane, &id) in chunk.iter().enumerate() {
                        group.set(lane, &self.triangles[id as usize], id);
                    }
                }
            }
            return;
        }
        let (left, right) = leaves.split_at(leaves.len() / 2);
        let split = (right[0].first - left[0].first) as usize;
        let (left_groups, right_groups) = groups.split_at_mut(split);
        join(
            || self.pack(left, left_groups),
            || self.pack(right, right_groups),
        );
    }
}

/// The scene ids of the triangles below binary node `index`, in the binary
/// leaves' order, into `ids` (cleared first); `stack` is scratch.
fn subtree_prim_ids(bvh: &Bvh2, index: usize, ids: &mut Vec<u32>, stack: &mut Vec<usize>) {
    ids.clear();
    stack.clear();
    stack.push(index);
    while let Some(i) = stack.pop() {
        let node = &bvh.nodes[i];
        if node.is_leaf() {
            ids.extend_from_slice(&bvh.prim_indices[node.prim_range()]);
        } else {
            stack.extend([node.left_child() + 1, node.left_child()]);
        }
    }
}

/// The slot run below each node of `bvh` (its `count` is the node's
/// triangle count in any case), and whether the runs are contiguous: every
/// inner node's right run starts where its left one ends, so a subtree's
/// triangles in leaf order are its run of `prim_indices`.
fn subtree_spans(bvh: &Bvh2) -> (Spans, bool) {
    if let Some(found) = spans_by_index(bvh) {
        return found;
    }
    let mut spans = vec![Span::default(); bvh.nodes.len()];
    let mut preorder = Vec::with_capacity(bvh.nodes.len());
    bvh.walk(|index, _| preorder.push(index));
    // Reverse pre-order visits children before their parent.
    let contiguous = fill_spans(bvh, preorder.into_iter().rev(), &mut spans);
    spans.reverse();
    (Spans { reversed: spans }, contiguous)
}

/// The nodes' spans, node `k` at `reversed[len - 1 - k]`: the reverse index
/// pass pushes them in that order, so no pass fills the memory beforehand.
struct Spans {
    reversed: Vec<Span>,
}

impl Spans {
    fn get(&self, index: usize) -> Span {
        self.reversed[self.reversed.len() - 1 - index]
    }
}

/// [`subtree_spans`] in reverse index order, which visits children first
/// when they follow their parent (as every builder lays them out); `None`
/// when some child does not. Leaf or inner is a coin toss from node to
/// node, so both spans are computed and one is picked without a branch.
fn spans_by_index(bvh: &Bvh2) -> Option<(Spans, bool)> {
    let n = bvh.nodes.len();
    let mut reversed: Vec<Span> = Vec::with_capacity(n);
    let mut contiguous = true;
    for (index, node) in bvh.nodes.iter().enumerate().rev() {
        let leaf = node.is_leaf();
        let left = node.first as usize;
        if !leaf & ((left <= index) | (left + 1 >= n)) {
            return None;
        }
        // Node `k` was pushed at `n - 1 - k`; a leaf reads any pushed one.
        let at = if leaf { 0 } else { n - 2 - left };
        let (a, b) = match reversed.get(at..at + 2) {
            Some(&[b, a]) => (a, b),
            _ => (Span::default(), Span::default()),
        };
        contiguous &= leaf | (a.first.checked_add(a.count) == Some(b.first));
        let inner = Span {
            first: a.first,
            count: a.count.wrapping_add(b.count),
        };
        let own = Span {
            first: node.first,
            count: node.count,
        };
        reversed.push(if leaf { own } else { inner });
    }
    Some((Spans { reversed }, contiguous))
}

/// Fills `spans` visiting nodes in `order`, children before parents;
/// returns whether the runs are contiguous.
fn fill_spans(bvh: &Bvh2, order: impl Iterator<Item = usize>, spans: &mut [Span]) -> bool {
    let mut contiguous = true;
    for index in order {
        let node = &bvh.nodes[index];
        spans[index] = if node.is_leaf() {
            Span {
                first: node.first,
                count: node.count,
            }
        } else {
            let left = node.left_child();
            let (a, b) = (spans[left], spans[left + 1]);
            contiguous &= a.first.checked_add(a.count) == Some(b.first);
            Span {
                first: a.first,
                count: a.count + b.count,
            }
        };
    }
    contiguous
}

/// Whether no triangle index appears twice among `prim_indices` (indices
/// into `count` triangles): no spatial split cut a triangle into parts.
fn no_triangle_twice(prim_indices: &[u32], count: usize) -> bool {
    if prim_indices.len() <= 1 {
        return true;
    }
    let mut seen = vec![0u64; count.div_ceil(64)];
    prim_indices.iter().all(|&i| {
        let (word, bit) = (i as usize / 64, 1u64 << (i % 64));
        let Some(slot) = seen.get_mut(word) else {
            return false;
        };
        let first = *slot & bit == 0;
        *slot |= bit;
        first
    })
}

/// State of one [`collapse`]'s first pass.
struct Collapser<'a, const N: usize> {
    bvh: &'a Bvh2,
    /// Slot runs (and triangle counts) below the binary nodes.
    spans: Spans,
    rule: FoldRule<N>,
    /// The nodes; its groups are packed in the second pass.
    out: WideBvh<N>,
    /// The leaves whose groups are reserved, in order.
    leaves: Vec<LeafToPack>,
    /// Groups reserved so far.
    group_count: u32,
}

impl<const N: usize> Collapser<'_, N> {
    fn node(&self, index: usize) -> &BvhNode {
        &self.bvh.nodes[index]
    }

    /// Whether binary node `index` becomes a wide leaf: a binary leaf, or
    /// a subtree the [`FoldRule`] folds.
    #[inline(always)]
    fn is_leaf(&self, index: usize) -> bool {
        let node = self.node(index);
        if node.is_leaf() {
            return true;
        }
        let left = node.left_child();
        let child = |c: usize| (self.node(c), self.spans.get(c).count);
        let count = self.spans.get(index).count;
        self.rule.folds(node, count, [child(left), child(left + 1)])
    }

    /// Emits binary node `index` as a leaf or a wide node.
    fn emit(&mut self, index: usize) -> ChildRef {
        let leaf = self.is_leaf(index);
        self.emit_as(index, leaf)
    }

    /// Emits binary node `index` as a leaf when `leaf` (its
    /// [`Collapser::is_leaf`]), else as a wide node.
    fn emit_as(&mut self, index: usize, leaf: bool) -> ChildRef {
        if leaf {
            self.emit_leaf(index)
        } else {
            ChildRef::Node(self.emit_node(index))
        }
    }

    /// The binary nodes that become the children of the wide node made
    /// from inner node `index`: its children, the largest inner one pulled
    /// up until there are `N` or only leaves; and which of them are
    /// leaves.
    fn children_of(&self, index: usize) -> ([usize; N], [bool; N], usize) {
        let left = self.node(index).left_child();
        let mut children = [0usize; N];
        // Each inner child's half area (`None`: a leaf, never pulled up):
        // the fold rule is asked once per child, not once per pull.
        let mut areas = [None; N];
        let area =
            |child: usize| (!self.is_leaf(child)).then(|| self.node(child).bounds().half_area());
        children[..2].copy_from_slice(&[left, left + 1]);
        areas[..2].copy_from_slice(&[area(left), area(left + 1)]);
        let mut count = 2;
        while count < N {
            let largest = (0..count)
                .filter_map(|k| Some((k, areas[k]?)))
                .max_by(|a, b| a.1.total_cmp(&b.1));
            let Some((k, _)) = largest else { break };
            let pulled = self.node(children[k]).left_child();
            children[k] = pulled;
            children[count] = pulled + 1;
            areas[k] = area(pulled);
            areas[count] = area(pulled + 1);
            count += 1;
        }
        (children, areas.map(|area| area.is_none()), count)
    }

    /// Emits the wide node for inner node `index`, then its subtrees in
    /// slot order; returns its index.
    fn emit_node(&mut self, index: usize) -> u32 {
        let (children, leaves, count) = self.children_of(index);
        let wide = self.out.nodes.len();
        self.out.nodes.push(WideNode::empty());
        for (slot, (&child, &leaf)) in children[..count].iter().zip(&leaves).enumerate() {
            let target = self.emit_as(child, leaf);
            let bounds = self.node(child).bounds();
            self.out.nodes[wide].set(slot, bounds, target);
        }
        wide as u32
    }

    /// Reserves the groups of every triangle below binary node `index`
    /// (packed by [`Packer::pack`]).
    fn emit_leaf(&mut self, index: usize) -> ChildRef {
        let first = self.group_count;
        let count = (self.spans.get(index).count as usize).div_ceil(N) as u32;
        self.leaves.push(LeafToPack {
            node: index,
            first,
            count,
        });
        self.group_count += count;
        ChildRef::Leaf { first, count }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BuildInput;
    use crate::bvh::build::{BinnedSahBuilder, BinnedSahConfig, Bvh2Builder};
    use bytemuck::Zeroable;
    use caustic_geom::{Pcg32, Vec3};

    fn soup(count: usize, seed: u64) -> Vec<Triangle> {
        let mut rng = Pcg32::new(seed, 9);
        let mut point = || Vec3::new(rng.next_f32(), rng.next_f32(), rng.next_f32()) * 10.0;
        (0..count)
            .map(|_| {
                let p = point();
                Triangle::new(p, p + point() * 0.05, p + point() * 0.05)
            })
            .collect()
    }

    fn binary(tris: &[Triangle], max_leaf_size: usize) -> Bvh2 {
        let config = BinnedSahConfig {
            max_leaf_size,
            ..BinnedSahConfig::DEFAULT
        };
        BinnedSahBuilder::new(config).build(&BuildInput::from_triangles(tris))
    }

    #[test]
    fn collapsed_trees_are_valid_for_every_width_and_leaf_rule() {
        for count in [1, 2, 7, 9, 100, 2000] {
            let tris = soup(count, count as u64);
            for max_leaf_size in [1, 4, 8] {
                let bvh = binary(&tris, max_leaf_size);
                for config in [
                    CollapseConfig::KEEP_LEAVES,
                    CollapseConfig::one_group(4),
                    CollapseConfig::one_group(8),
                ] {
                    let four = collapse::<4>(&bvh, &tris, &config);
                    four.validate(&tris).unwrap();
                    let eight = collapse::<8>(&bvh, &tris, &config);
                    eight.validate(&tris).unwrap();
                    assert_eq!(eight.shape().prims, count);
                    assert!(eight.shape().max_depth <= four.shape().max_depth);
                }
            }
        }
    }

    #[test]
    fn leaves_hold_whole_triangles_unless_one_is_in_two() {
        assert!(no_triangle_twice(&[], 0));
        assert!(no_triangle_twice(&[2, 0, 1], 3));
        assert!(!no_triangle_twice(&[2, 0, 2, 1], 3));
        assert!(!no_triangle_twice(&[5, 1, 3, 5], 6));
        // Binned builds hold each triangle once; a spatial-split build of
        // long triangles cuts some, and the tree says so (its traversal
        // keeps the depth-range rule, see `traverse`).
        // Long slivers across the box among small grains (the spatial
        // builder's own test scene).
        let mut tris = soup(600, 3);
        let mut rng = Pcg32::new(5, 7);
        for _ in 0..200 {
            let a = Vec3::new(0.0, rng.next_f32() * 10.0, rng.next_f32() * 10.0);
            let b = Vec3::new(10.0, rng.next_f32() * 10.0, rng.next_f32() * 10.0);
            tris.push(Triangle::new(a, b, a + Vec3::new(0.0, 0.02, 0.0)));
        }
        assert!(
            collapse::<8>(&binary(&tris, 8), &tris, &CollapseConfig::one_group(8)).whole_leaves
        );
        let spatial =
            crate::bvh::build::SpatialSahBuilder::new(crate::bvh::build::SpatialSahConfig {
                base: BinnedSahConfig {
                    sweep_max_prims: 0,
                    max_leaf_size: 2,
                    ..BinnedSahConfig::DEFAULT
                },
                overlap_alpha: 0.0,
                duplication: 4.0,
                ..crate::bvh::build::SpatialSahConfig::DEFAULT
            })
            .build_triangles(&BuildInput::from_triangles(&tris), &tris)
            .0;
        assert!(spatial.prim_indices.len() > tris.len(), "the soup is cut");
        let wide = collapse::<8>(&spatial, &tris, &CollapseConfig::one_group(8));
        assert!(!wide.whole_leaves);
    }

    #[test]
    fn wide_nodes_fill_their_slots() {
        let tris = soup(5000, 1);
        let bvh = binary(&tris, 1);
        let wide = collapse::<8>(&bvh, &tris, &CollapseConfig::KEEP_LEAVES);
        let shape = wide.shape();
        // Nodes run out of inner children to pull near the leaves, so they
        // average fewer than 8 children, but well over 2.
        let children = shape.inner + shape.leaves - 1;
        assert!(children >= 3 * shape.inner, "{shape:?}");
        assert!(shape.max_depth < bvh.shape().max_depth / 2 + 2);
    }

    /// Folding every subtree that fits, whatever the SAH says.
    const FOLD_ALL: CollapseConfig = CollapseConfig {
        max_leaf_prims: 8,
        leaf_cost: 0,
    };

    #[test]
    fn small_trees_become_one_leaf() {
        let tris = soup(6, 2);
        let bvh = binary(&tris, 1);
        let wide = collapse::<8>(&bvh, &tris, &FOLD_ALL);
        assert_eq!(wide.root, ChildRef::Leaf { first: 0, count: 1 });
        assert!(wide.nodes.is_empty());
        wide.validate(&tris).unwrap();
        let empty = collapse::<8>(&Bvh2::empty(), &[], &CollapseConfig::one_group(8));
        assert_eq!(empty.root, ChildRef::Empty);
        empty.validate(&[]).unwrap();
    }

    #[test]
    fn the_sah_folds_compact_subtrees_and_splits_spread_ones() {
        // Eight triangles with one bounding box: a ray that reaches any
        // of them reaches the box of all, so one leaf is cheapest.
        let stacked: Vec<Triangle> = (0..8)
            .map(|k| {
                let x = k as f32 / 7.0;
                Triangle::new(Vec3::ZERO, Vec3::new(1.0, 1.0, 0.0), Vec3::new(x, 0.0, 1.0))
            })
            .collect();
        let wide = collapse::<8>(
            &binary(&stacked, 1),
            &stacked,
            &CollapseConfig::one_group(8),
        );
        assert_eq!(wide.root, ChildRef::Leaf { first: 0, count: 1 });
        // Two tight clusters of four, far apart: one leaf for all eight
        // would be tested by every ray crossing the gap, so the root stays
        // a node over one leaf per cluster (unless everything is folded).
        let cluster = |x: f32| {
            (0..4).map(move |k| {
                let a = Vec3::new(x + k as f32 * 0.01, 0.0, 0.0);
                Triangle::new(
                    a,
                    a + Vec3::new(0.1, 0.1, 0.0),
                    a + Vec3::new(0.0, 0.1, 0.1),
                )
            })
        };
        let spread: Vec<Triangle> = cluster(0.0).chain(cluster(100.0)).collect();
        let bvh = binary(&spread, 1);
        let wide = collapse::<8>(&bvh, &spread, &CollapseConfig::one_group(8));
        wide.validate(&spread).unwrap();
        assert_eq!(wide.root, ChildRef::Node(0));
        assert_eq!(wide.shape().leaves, 2);
        let folded = collapse::<8>(&bvh, &spread, &FOLD_ALL);
        assert_eq!(folded.root, ChildRef::Leaf { first: 0, count: 1 });
    }

    /// `bvh` with its nodes laid out children first (the root, then the
    /// sibling pairs in reverse pre-order of their parents).
    fn children_first(bvh: &Bvh2) -> Bvh2 {
        let mut pairs = Vec::new();
        bvh.walk(|index, _| {
            if !bvh.nodes[index].is_leaf() {
                pairs.push(bvh.nodes[index].left_child());
            }
        });
        let mut new_index = vec![0; bvh.nodes.len()];
        for (k, &left) in pairs.iter().rev().enumerate() {
            new_index[left] = 1 + 2 * k;
            new_index[left + 1] = 2 + 2 * k;
        }
        let mut nodes = vec![BvhNode::zeroed(); bvh.nodes.len()];
        for (old, node) in bvh.nodes.iter().enumerate() {
            let mut node = *node;
            if !node.is_leaf() {
                node.first = new_index[node.left_child()] as u32;
            }
            nodes[new_index[old]] = node;
        }
        Bvh2 {
            nodes,
            prim_indices: bvh.prim_indices.clone(),
        }
    }

    /// `bvh` with its leaves' slot runs stored in reverse leaf order.
    fn reversed_runs(bvh: &Bvh2) -> Bvh2 {
        let mut leaves = Vec::new();
        bvh.walk(|index, _| {
            if bvh.nodes[index].is_leaf() {
                leaves.push(index);
            }
        });
        let mut out = bvh.clone();
        out.prim_indices.clear();
        for &leaf in leaves.iter().rev() {
            out.nodes[leaf].first = out.prim_indices.len() as u32;
            out.prim_indices
                .extend_from_slice(&bvh.prim_indices[bvh.nodes[leaf].prim_range()]);
        }
        out
    }

    fn same_tree<const N: usize>(a: &WideBvh<N>, b: &WideBvh<N>) -> bool {
        let bits = |g: &TriangleGroup<N>| (g.id, g.vertex.map(|row| row.map(f32::to_bits)));
        a.nodes == b.nodes
            && a.root == b.root
            && a.groups.iter().map(bits).eq(b.groups.iter().map(bits))
    }

    #[test]
    fn any_node_layout_and_slot_order_collapse_alike() {
        let tris = soup(3000, 4);
        let bvh = binary(&tris, 4);
        let (_, contiguous) = subtree_spans(&bvh);
        assert!(contiguous, "the binned builder stores subtrees as runs");
        let config = CollapseConfig::one_group(8);
        let expected = collapse::<8>(&bvh, &tris, &config);
        for other in [
            children_first(&bvh),
            reversed_runs(&bvh),
            reversed_runs(&children_first(&bvh)),
        ] {
            other
                .validate(&BuildInput::from_triangles(&tris).bounds)
                .unwrap();
            let wide = collapse::<8>(&other, &tris, &config);
            wide.validate(&tris).unwrap();
            assert!(same_tree(&wide, &expected));
        }
        assert!(spans_by_index(&children_first(&bvh)).is_none());
        // The reverse index pass agrees with the walk, node for node.
        let (by_index, _) = spans_by_index(&bvh).unwrap();
        let mut walked = vec![Span::default(); bvh.nodes.len()];
        let mut preorder = Vec::new();
        bvh.walk(|index, _| preorder.push(index));
        assert!(fill_spans(&bvh, preorder.into_iter().rev(), &mut walked));
        assert!((0..walked.len()).all(|k| by_index.get(k) == walked[k]));
        assert_eq!(by_index.get(0).count as usize, tris.len());
        assert!(!subtree_spans(&reversed_runs(&bvh)).1);
    }

    #[test]
    fn validate_catches_corruption() {
        let tris = soup(300, 3);
        let good = collapse::<4>(&binary(&tris, 4), &tris, &CollapseConfig::KEEP_LEAVES);
        let mut bad = good.clone();
        bad.groups[0].vertex[0][0] += 1.0;
        assert!(bad.validate(&tris).unwrap_err().contains("stored as"));
        let mut bad = good.clone();
        bad.nodes[0].bounds[0][0] += 100.0;
        assert!(bad.validate(&tris).is_err());
        let mut bad = good.clone();
        bad.groups.push(TriangleGroup::padding());
        assert!(bad.validate(&tris).unwrap_err().contains("in no leaf"));
        let mut bad = good.clone();
        bad.groups[1].id[0] = bad.groups[0].id[0];
        assert!(bad.validate(&tris).is_err());
        assert!(good.validate(&tris[1..]).is_err());
    }
}
