//! [`LinkedTree`]: the binary tree the bottom-up and Karras-style builders
//! (`lbvh`, `ploc`) produce, whose inner nodes name their children and whose
//! leaves are single primitives, and its conversion to the depth-first,
//! siblings-adjacent layout of [`Bvh2`].
//!
//! Every inner node carries a summary of its subtree ([`Summary`]), filled
//! bottom-up by the builder through [`Summary::merge`]:
//!
//! - **Leaf collapsing.** `merge` decides, by the surface area heuristic,
//!   whether the subtree is cheaper as one leaf over all its primitives
//!   (allowed up to `max_leaf_size` of them) than as an inner node over its
//!   children's best forms: a bottom-up dynamic programme, so the choice is
//!   the optimum over every way of cutting the tree into leaves. Karras's
//!   leaves of one primitive are the case `max_leaf_size = 1`.
//! - **Depth bound.** Morton trees can be deeper than [`MAX_DEPTH`] (a Karras
//!   tree over 63-bit codes with index tie-breaks up to 95 levels; PLOC has no
//!   bound at all). [`LinkedTree::to_bvh`] keeps a node's split while both
//!   children could still be laid out within the bound, and otherwise lays
//!   the node's subtree out as a balanced tree over the same leaves, in the
//!   same order. The invariant `depth + ceil(log2(leaves)) <= MAX_DEPTH`
//!   holds at every node it visits (at the root because leaves < 2^31), so
//!   the balanced fallback always fits; and the node and leaf counts do not
//!   change, so the layout sizes computed bottom-up stay valid.
//!
//! Layout: a node's children sit at `first`, `first + 1`, followed by the
//! left child's descendants, then the right child's. Node counts are known
//! from the summaries (`2 * leaves - 1`), so parallel tasks write straight
//! into disjoint parts of the final array; the primitive slots are written in
//! leaf order on the way.

use super::build_box::BuildBox;
use super::memory::PeakMemory;
use crate::bvh::{Bvh2, BvhNode, MAX_DEPTH};
use caustic_geom::Aabb;

/// A child of a [`LinkedNode`]: another inner node, or one primitive given
/// by its position in [`LinkedTree::items`] (top bit set).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NodeRef(u32);

const ITEM_BIT: u32 = 1 << 31;

/// What a [`NodeRef`] points at.
pub(crate) enum Target {
    Node(usize),
    Item(usize),
}

impl NodeRef {
    pub fn node(index: usize) -> Self {
        debug_assert!(index < ITEM_BIT as usize);
        Self(index as u32)
    }

    pub fn item(index: usize) -> Self {
        debug_assert!(index < ITEM_BIT as usize);
        Self(index as u32 | ITEM_BIT)
    }

    #[inline]
    pub fn target(self) -> Target {
        if self.0 & ITEM_BIT != 0 {
            Target::Item((self.0 & !ITEM_BIT) as usize)
        } else {
            Target::Node(self.0 as usize)
        }
    }
}

/// The surface-area-heuristic constants of leaf collapsing.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Collapse {
    /// Largest leaf a subtree may collapse into; 1 keeps one primitive per leaf.
    pub max_leaf_size: u32,
    pub traversal_cost: f32,
    pub intersection_cost: f32,
}

/// A subtree's box and shape after collapsing, and its SAH cost.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Summary {
    /// Stored as an `Aabb` (24 bytes, not `BuildBox`'s 32) because trees
    /// hold one summary per inner node; merged as `BuildBox`.
    pub bounds: Aabb,
    /// Primitives below.
    pub prims: u32,
    /// Leaves after collapsing: 1 when the whole subtree is one leaf.
    pub leaves: u32,
    /// Levels below the node after collapsing (0 for a leaf).
    pub height: u32,
    /// SAH cost of the best form, in half-area units (not normalised).
    pub cost: f32,
}

impl Summary {
    /// A leaf of one primitive with box `bounds`.
    pub fn prim(bounds: Aabb, collapse: &Collapse) -> Self {
        Self {
            bounds,
            prims: 1,
            leaves: 1,
            height: 0,
            cost: collapse.intersection_cost * BuildBox::from_aabb(bounds).half_area(),
        }
    }

    /// The summary of an inner node over `left` and `right`: collapsed into
    /// one leaf when that is allowed and no more expensive.
    pub fn merge(left: &Self, right: &Self, collapse: &Collapse) -> Self {
        let merged = BuildBox::from_aabb(left.bounds).union(BuildBox::from_aabb(right.bounds));
        let area = merged.half_area();
        let bounds = merged.to_aabb();
        let prims = left.prims + right.prims;
        let split_cost = collapse.traversal_cost * area + left.cost + right.cost;
        if prims <= collapse.max_leaf_size {
            let leaf_cost = collapse.intersection_cost * prims as f32 * area;
            if leaf_cost <= split_cost {
                return Self {
                    bounds,
                    prims,
                    leaves: 1,
                    height: 0,
                    cost: leaf_cost,
                };
            }
        }
        Self {
            bounds,
            prims,
            leaves: left.leaves + right.leaves,
            height: 1 + left.height.max(right.height),
            cost: split_cost,
        }
    }

    /// True when the subtree is laid out as one leaf.
    pub fn is_leaf(&self) -> bool {
        self.leaves == 1
    }
}

/// An inner node: its children and its subtree's summary.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct LinkedNode {
    pub children: [NodeRef; 2],
    pub summary: Summary,
}

impl LinkedNode {
    /// A filler for preallocated node arrays; always overwritten.
    pub const PLACEHOLDER: Self = Self {
        children: [NodeRef(0), NodeRef(0)],
        summary: Summary {
            bounds: Aabb::EMPTY,
            prims: 0,
            leaves: 0,
            height: 0,
            cost: 0.0,
        },
    };
}

/// A tree over the primitives `items` (input ids), rooted at `root`.
pub(crate) struct LinkedTree {
    pub nodes: Vec<LinkedNode>,
    /// Input id of each item.
    pub items: Vec<u32>,
    /// Box of each item (`item_bounds[i]` belongs to `items[i]`).
    pub item_bounds: Vec<Aabb>,
    pub root: NodeRef,
    /// Subtrees with at least this many primitives are laid out by two tasks.
    pub parallel_min_prims: usize,
    pub collapse: Collapse,
}

/// Where a subtree's records go: the slots below its root (`2 * leaves - 2`
/// nodes, the first at global index `node_base`) and its primitive slots
/// (the first at global index `prim_base`).
struct Out<'o> {
    nodes: &'o mut [BvhNode],
    node_base: u32,
    prims: &'o mut [u32],
    prim_base: u32,
}

impl<'o> Out<'o> {
    /// Splits off the room of a left child with `left` as its summary and
    /// returns (pair slots, left room, right room).
    fn split(self, left: &Summary) -> (&'o mut [BvhNode], Out<'o>, Out<'o>) {
        let (pair, rest) = self.nodes.split_at_mut(2);
        let left_len = 2 * left.leaves as usize - 2;
        let (left_nodes, right_nodes) = rest.split_at_mut(left_len);
        let (left_prims, right_prims) = self.prims.split_at_mut(left.prims as usize);
        let left_base = self.node_base + 2;
        let left_out = Out {
            nodes: left_nodes,
            node_base: left_base,
            prims: left_prims,
            prim_base: self.prim_base,
        };
        let right_out = Out {
            nodes: right_nodes,
            node_base: left_base + left_len as u32,
            prims: right_prims,
            prim_base: self.prim_base + left.prims,
        };
        (pair, left_out, right_out)
    }
}

/// The summary of whatever `r` points at, for builders that fill `nodes`
/// while they read it (`ploc`).
pub(crate) fn summary_of(
    r: NodeRef,
    nodes: &[LinkedNode],
    item_bounds: &[Aabb],
    collapse: &Collapse,
) -> Summary {
    match r.target() {
        Target::Node(i) => nodes[i].summary,
        Target::Item(i) => Summary::prim(item_bounds[i], collapse),
    }
}

/// The hierarchy when no primitive is placeable: nothing, or one leaf with
/// the empty box over the parked ones.
fn parked_only(parked: &[u32]) -> Bvh2 {
    let nodes = if parked.is_empty() {
        Vec::new()
    } else {
        vec![BvhNode::leaf(Aabb::EMPTY, 0, parked.len() as u32)]
    };
    Bvh2 {
        nodes,
        prim_indices: parked.to_vec(),
    }
}

/// `ceil(log2(n))` for `n >= 1`.
fn ceil_log2(n: u32) -> u32 {
    u32::BITS - (n.max(1) - 1).leading_zeros()
}

impl LinkedTree {
    /// The summary of whatever `r` points at.
    pub fn summary(&self, r: NodeRef) -> Summary {
        summary_of(r, &self.nodes, &self.item_bounds, &self.collapse)
    }

    /// Lays the tree out as a [`Bvh2`]; the `parked` primitives go to one
    /// leaf with the empty box, beside the tree under a new root. Records
    /// the output arrays in `memory`.
    pub fn to_bvh(&self, parked: &[u32], memory: &PeakMemory) -> Bvh2 {
        if self.items.is_empty() {
            return parked_only(parked);
        }
        let root = self.summary(self.root);
        let placed = root.prims as usize;
        let mut prim_indices = vec![0u32; placed + parked.len()];
        prim_indices[placed..].copy_from_slice(parked);
        let tree_nodes = 2 * root.leaves as usize - 1;
        let mut nodes: Vec<BvhNode> =
            bytemuck::zeroed_vec(tree_nodes + 2 * usize::from(!parked.is_empty()));
        memory.alloc_array::<u32>(prim_indices.len());
        memory.alloc_array::<BvhNode>(nodes.len());
        let (tree_root, start_depth, body_start) = if parked.is_empty() {
            (0, 0, 1)
        } else {
            (1, 1, 3)
        };
        let out = Out {
            nodes: &mut nodes[body_start..body_start + tree_nodes - 1],
            node_base: body_start as u32,
            prims: &mut prim_indices[..placed],
            prim_base: 0,
        };
        let top = self.emit(self.root, start_depth, out);
        nodes[tree_root] = top;
        if !parked.is_empty() {
            nodes[0] = BvhNode::inner(root.bounds, 1);
            nodes[2] = BvhNode::leaf(Aabb::EMPTY, placed as u32, parked.len() as u32);
        }
        Bvh2 {
            nodes,
            prim_indices,
        }
    }

    /// Writes the subtree of `r` (at `depth`) below its root into `out` and
    /// returns the root's record.
    fn emit(&self, r: NodeRef, depth: u32, out: Out<'_>) -> BvhNode {
        let node = match r.target() {
            Target::Item(i) => {
                out.prims[0] = self.items[i];
                return BvhNode::leaf(self.item_bounds[i], out.prim_base, 1);
            }
            Target::Node(i) => &self.nodes[i],
        };
        let summary = &node.summary;
        if summary.is_leaf() {
            let mut cursor = 0;
            self.collect_prims(r, out.prims, &mut cursor);
            return BvhNode::leaf(summary.bounds, out.prim_base, summary.prims);
        }
        let [left, right] = node.children.map(|c| self.summary(c));
        let fits = |child: &Summary| depth + 1 + ceil_log2(child.leaves) <= MAX_DEPTH as u32;
        if depth + summary.height > MAX_DEPTH as u32 && !(fits(&left) && fits(&right)) {
            return self.emit_balanced(r, out);
        }
        let first = out.node_base;
        let bounds = summary.bounds;
        let (pair, left_out, right_out) = out.split(&left);
        let [l, r] = node.children;
        let (left_node, right_node) = if summary.prims as usize >= self.parallel_min_prims {
            rayon::join(
                || self.emit(l, depth + 1, left_out),
                || self.emit(r, depth + 1, right_out),
            )
        } else {
            (
                self.emit(l, depth + 1, left_out),
                self.emit(r, depth + 1, right_out),
            )
        };
        pair[0] = left_node;
        pair[1] = right_node;
        BvhNode::inner(bounds, first)
    }

    /// Appends the primitives below `r` to `prims[*cursor..]` in leaf order.
    fn collect_prims(&self, r: NodeRef, prims: &mut [u32], cursor: &mut usize) {
        match r.target() {
            Target::Item(i) => {
                prims[*cursor] = self.items[i];
                *cursor += 1;
            }
            Target::Node(i) => {
                for child in self.nodes[i].children {
                    self.collect_prims(child, prims, cursor);
                }
            }
        }
    }

    /// The leaves below `r` after collapsing (items and collapsed nodes), in order.
    fn collect_leaves(&self, r: NodeRef, leaves: &mut Vec<NodeRef>) {
        match r.target() {
            Target::Node(i) if !self.nodes[i].summary.is_leaf() => {
                for child in self.nodes[i].children {
                    self.collect_leaves(child, leaves);
                }
            }
            _ => leaves.push(r),
        }
    }

    /// Lays the subtree of `r` out as a balanced tree over its leaves (the
    /// depth-bound fallback; see the module docs). Sequential: it only runs
    /// on pathological inputs.
    fn emit_balanced(&self, r: NodeRef, out: Out<'_>) -> BvhNode {
        let mut leaves = Vec::new();
        self.collect_leaves(r, &mut leaves);
        let summaries: Vec<Summary> = leaves.iter().map(|&l| self.summary(l)).collect();
        self.balanced(&leaves, &summaries, out).0
    }

    /// A balanced subtree over `leaves`; returns its root and summary.
    fn balanced(
        &self,
        leaves: &[NodeRef],
        summaries: &[Summary],
        out: Out<'_>,
    ) -> (BvhNode, Summary) {
        if let [leaf] = leaves {
            return (self.emit(*leaf, 0, out), summaries[0]);
        }
        let half = leaves.len().div_ceil(2);
        let left_summary = summaries[..half]
            .iter()
            .copied()
            .reduce(|a, b| Summary::merge_uncollapsed(&a, &b))
            .expect("non-empty half");
        let first = out.node_base;
        let (pair, left_out, right_out) = out.split(&left_summary);
        let (left, ls) = self.balanced(&leaves[..half], &summaries[..half], left_out);
        let (right, rs) = self.balanced(&leaves[half..], &summaries[half..], right_out);
        pair[0] = left;
        pair[1] = right;
        let summary = Summary::merge_uncollapsed(&ls, &rs);
        (BvhNode::inner(summary.bounds, first), summary)
    }
}

impl Summary {
    /// Box, primitive and leaf counts of two subtrees side by side, never
    /// collapsed (for the balanced fallback, whose leaves are fixed).
    fn merge_uncollapsed(left: &Self, right: &Self) -> Self {
        Self {
            bounds: BuildBox::from_aabb(left.bounds)
                .union(BuildBox::from_aabb(right.bounds))
                .to_aabb(),
            prims: left.prims + right.prims,
            leaves: left.leaves + right.leaves,
            height: 1 + left.height.max(right.height),
            cost: left.cost + right.cost,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BuildInput;
    use caustic_geom::Vec3;

    fn unit_boxes(n: usize) -> BuildInput {
        let bounds: Vec<Aabb> = (0..n)
            .map(|i| {
                Aabb::new(
                    Vec3::new(i as f32, 0.0, 0.0),
                    Vec3::new(i as f32 + 0.5, 1.0, 1.0),
                )
            })
            .collect();
        let centroids = bounds.iter().map(Aabb::center).collect();
        BuildInput { bounds, centroids }
    }

    const NO_COLLAPSE: Collapse = Collapse {
        max_leaf_size: 1,
        traversal_cost: 1.0,
        intersection_cost: 1.0,
    };

    /// A caterpillar over the first `n` inputs: each inner node has one
    /// primitive on the left and the rest of the chain on the right, `n - 1`
    /// levels deep.
    fn chain(input: &BuildInput, n: usize, collapse: Collapse) -> LinkedTree {
        let mut tree = LinkedTree {
            nodes: Vec::new(),
            items: (0..n as u32).collect(),
            item_bounds: input.bounds[..n].to_vec(),
            root: NodeRef::item(n - 1),
            parallel_min_prims: 64,
            collapse,
        };
        for i in (0..n - 1).rev() {
            let children = [NodeRef::item(i), tree.root];
            let summary = Summary::merge(
                &tree.summary(children[0]),
                &tree.summary(children[1]),
                &collapse,
            );
            tree.nodes.push(LinkedNode { children, summary });
            tree.root = NodeRef::node(tree.nodes.len() - 1);
        }
        tree
    }

    #[test]
    fn a_chain_deeper_than_max_depth_is_rebalanced_where_needed() {
        let input = unit_boxes(300);
        let tree = chain(&input, 300, NO_COLLAPSE);
        assert_eq!(tree.summary(tree.root).height, 299);
        let bvh = tree.to_bvh(&[], &PeakMemory::new());
        bvh.validate(&input.bounds).unwrap();
        let shape = bvh.shape();
        assert_eq!(shape.leaves, 300);
        assert!(shape.max_depth <= MAX_DEPTH);
        // Leaf order is kept: slots hold the chain's primitives in order.
        assert_eq!(bvh.prim_indices, (0..300).collect::<Vec<u32>>());
    }

    #[test]
    fn collapsing_makes_leaves_up_to_the_limit_and_parking_works() {
        let mut input = unit_boxes(41);
        input.bounds[40] = Aabb::new(Vec3::splat(f32::NAN), Vec3::ONE);
        let collapse = Collapse {
            max_leaf_size: 4,
            traversal_cost: 1.0,
            intersection_cost: 1.0,
        };
        let bvh = chain(&input, 40, collapse).to_bvh(&[40], &PeakMemory::new());
        bvh.validate(&input.bounds).unwrap();
        let shape = bvh.shape();
        assert!(shape.max_leaf_size <= 4 && shape.max_leaf_size > 1);
        assert!(!bvh.nodes[0].is_leaf());
        assert!(bvh.nodes[2].bounds().is_empty());
        assert_eq!(bvh.prim_indices[40], 40);
    }

    #[test]
    fn merge_prefers_the_cheaper_form() {
        let collapse = Collapse {
            max_leaf_size: 8,
            traversal_cost: 1.0,
            intersection_cost: 1.0,
        };
        let at = |x: f32| Aabb::new(Vec3::splat(x), Vec3::splat(x + 1.0));
        // Two overlapping unit cubes: one leaf is cheaper than a split.
        let a = Summary::prim(at(0.0), &collapse);
        let b = Summary::prim(at(0.1), &collapse);
        assert!(Summary::merge(&a, &b, &collapse).is_leaf());
        // Two far-apart cubes: the split is cheaper.
        let c = Summary::prim(at(100.0), &collapse);
        let merged = Summary::merge(&a, &c, &collapse);
        assert!(!merged.is_leaf());
        assert_eq!((merged.leaves, merged.height, merged.prims), (2, 1, 2));
    }
}
