//! Output side of the top-down builders (`bvh-binned`, `bvh-sweep`): subtrees
//! built independently by parallel tasks, each as a flat node vector (a
//! fragment) with indices relative to its own start, and their assembly into
//! the one depth-first node array of a [`Bvh2`].
//!
//! Layout invariant of a [`Body`]: both children of its root first, then the
//! left child's body, then the right child's body; applied recursively this
//! is a depth-first order in which every pair of siblings is adjacent, as
//! [`BvhNode`] requires. Assembly copies each fragment once, in parallel,
//! relocating inner nodes' child indices; the result does not depend on how
//! the work was split between threads.
//!
//! Also here: the handling of primitives that can never be hit (non-finite
//! boxes, see [`BuildInput::is_placeable`]), which every top-down builder
//! parks in one leaf with the empty box, a child of the root.

use super::memory::PeakMemory;
use crate::BuildInput;
use crate::bvh::{Bvh2, BvhNode};
use caustic_geom::Aabb;

/// A built subtree whose node indices are relative to the start of its body:
/// the root record (stored by the parent, next to its sibling) and the nodes
/// below it.
pub struct Subtree {
    pub root: BvhNode,
    pub body: Body,
}

/// Nodes below a subtree's root, laid out as: both children, the left
/// child's body, the right child's body.
pub enum Body {
    /// Built by one thread; inner nodes' `first` is relative to the vector start.
    Flat(Vec<BvhNode>),
    /// Built by two parallel tasks; `len` counts every node below.
    Pair {
        len: usize,
        children: Box<[Subtree; 2]>,
    },
}

impl Subtree {
    /// A leaf over the slots `first .. first + count`.
    pub fn leaf(bounds: Aabb, first: usize, count: usize) -> Self {
        Self {
            root: BvhNode::leaf(bounds, first as u32, count as u32),
            body: Body::Flat(Vec::new()),
        }
    }

    /// An inner node over two subtrees built in parallel.
    pub fn pair(bounds: Aabb, left: Subtree, right: Subtree) -> Self {
        Self {
            root: BvhNode::inner(bounds, 0),
            body: Body::Pair {
                len: 2 + left.body.len() + right.body.len(),
                children: Box::new([left, right]),
            },
        }
    }
}

impl Body {
    fn len(&self) -> usize {
        match self {
            Body::Flat(nodes) => nodes.len(),
            Body::Pair { len, .. } => *len,
        }
    }

    /// Bytes reserved by the flat fragments below (their capacity).
    fn fragment_bytes(&self) -> usize {
        match self {
            Body::Flat(nodes) => nodes.capacity() * std::mem::size_of::<BvhNode>(),
            Body::Pair { children, .. } => children
                .iter()
                .map(|child| child.body.fragment_bytes())
                .sum(),
        }
    }

    /// Copies the body into `out`, which starts at global index `base`,
    /// turning relative child indices into global ones.
    fn write(&self, out: &mut [BvhNode], base: u32) {
        match self {
            Body::Flat(nodes) => {
                for (slot, node) in out.iter_mut().zip(nodes) {
                    *slot = relocate(*node, base);
                }
            }
            Body::Pair { children, .. } => {
                let [left, right] = &**children;
                let left_base = base + 2;
                let right_base = left_base + left.body.len() as u32;
                out[0] = relocate(left.root, left_base);
                out[1] = relocate(right.root, right_base);
                let (left_out, right_out) = out[2..].split_at_mut(left.body.len());
                rayon::join(
                    || left.body.write(left_out, left_base),
                    || right.body.write(right_out, right_base),
                );
            }
        }
    }
}

/// Moves an inner node's child index by `base`; leaves are unchanged.
#[inline]
pub fn relocate(mut node: BvhNode, base: u32) -> BvhNode {
    if !node.is_leaf() {
        node.first += base;
    }
    node
}

/// Ids of the primitives that cannot be placed in a hierarchy (see
/// [`BuildInput::is_placeable`]), in increasing order.
pub fn unplaceable_ids(input: &BuildInput) -> Vec<u32> {
    (0..input.len())
        .filter(|&i| !input.is_placeable(i))
        .map(|i| i as u32)
        .collect()
}

/// Assembles a build: `tree` covers the slots of `prim_indices` (the placeable
/// primitives in leaf order); the `parked` ids follow them in one leaf with
/// the empty box, a child of a new root. Records the output arrays in
/// `memory` and frees the fragments there.
pub fn assemble(
    tree: Option<Subtree>,
    mut prim_indices: Vec<u32>,
    parked: &[u32],
    memory: &PeakMemory,
) -> Bvh2 {
    let Some(tree) = tree else {
        let nodes = if parked.is_empty() {
            Vec::new()
        } else {
            vec![BvhNode::leaf(Aabb::EMPTY, 0, parked.len() as u32)]
        };
        return Bvh2 {
            nodes,
            prim_indices: parked.to_vec(),
        };
    };
    let placed = prim_indices.len() as u32;
    prim_indices.extend_from_slice(parked);
    let (root, body) = if parked.is_empty() {
        (tree.root, tree.body)
    } else {
        let park = Subtree::leaf(Aabb::EMPTY, placed as usize, parked.len());
        let top = Subtree::pair(tree.root.bounds(), tree, park);
        (top.root, top.body)
    };
    let fragments = body.fragment_bytes();
    let mut nodes: Vec<BvhNode> = bytemuck::zeroed_vec(1 + body.len());
    memory.alloc_array::<BvhNode>(nodes.len());
    nodes[0] = relocate(root, 1);
    body.write(&mut nodes[1..], 1);
    drop(body);
    memory.free(fragments);
    Bvh2 {
        nodes,
        prim_indices,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use caustic_geom::Vec3;

    fn unit(x: f32) -> Aabb {
        Aabb::new(Vec3::new(x, 0.0, 0.0), Vec3::new(x + 1.0, 1.0, 1.0))
    }

    #[test]
    fn pairs_of_fragments_assemble_depth_first() {
        // Left: a flat fragment with one inner node over two leaves.
        let left = Subtree {
            root: BvhNode::inner(unit(0.0).union(unit(1.0)), 0),
            body: Body::Flat(vec![
                BvhNode::leaf(unit(0.0), 0, 1),
                BvhNode::leaf(unit(1.0), 1, 1),
            ]),
        };
        let right = Subtree::leaf(unit(2.0), 2, 1);
        let tree = Subtree::pair(unit(0.0).union(unit(2.0)), left, right);
        let memory = PeakMemory::new();
        let bvh = assemble(Some(tree), vec![0, 1, 2], &[3], &memory);
        let mut bounds: Vec<Aabb> = (0..3).map(|i| unit(i as f32)).collect();
        bounds.push(Aabb::new(Vec3::splat(f32::NAN), Vec3::ONE));
        bvh.validate(&bounds).unwrap();
        assert_eq!(bvh.prim_indices, [0, 1, 2, 3]);
        assert_eq!(bvh.shape().leaves, 4);
        assert!(memory.peak() >= bvh.nodes.len() * 32);
    }

    #[test]
    fn nothing_placeable() {
        let memory = PeakMemory::new();
        assert!(assemble(None, Vec::new(), &[], &memory).is_empty());
        let parked = assemble(None, Vec::new(), &[0, 1], &memory);
        assert_eq!(parked.nodes.len(), 1);
        assert_eq!(parked.prim_indices, [0, 1]);
    }
}
