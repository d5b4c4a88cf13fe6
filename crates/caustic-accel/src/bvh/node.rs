//! The node of the binary BVH ([`super::Bvh2`]): one 32-byte `#[repr(C)]`
//! plain-data record, shared by every builder (CPU and GPU) and every
//! traversal, so a tree built anywhere can be validated and traced anywhere.
//!
//! Byte layout (little endian, 4-byte aligned):
//!
//! ```text
//! offset  0: min: [f32; 3]   box lower corner
//! offset 12: first: u32      inner: index of the left child; leaf: first prim slot
//! offset 16: max: [f32; 3]   box upper corner
//! offset 28: count: u32      0 for an inner node, else the number of prims
//! ```
//!
//! Invariants: `count == 0` means inner, with its two children stored next to
//! each other at `first` and `first + 1` (so one fetch brings both boxes that
//! the traversal tests together); `count > 0` means leaf, referencing the slots
//! `first .. first + count` of [`super::Bvh2::prim_indices`]. The root is
//! node 0. A leaf that holds only non-finite primitives carries the empty box
//! (`min = +inf`, `max = -inf`), which the slab test of [`super::traverse`]
//! never hits.

use bytemuck::{Pod, Zeroable};
use caustic_geom::{Aabb, Vec3};

/// One node of a [`super::Bvh2`]; see the module docs for the layout.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BvhNode {
    /// Lower corner of the box that bounds every primitive below this node.
    pub min: [f32; 3],
    /// Inner node: index of the left child (the right child is `first + 1`).
    /// Leaf: index of the first slot in `Bvh2::prim_indices`.
    pub first: u32,
    /// Upper corner of the node's box.
    pub max: [f32; 3],
    /// `0` for an inner node; otherwise the leaf's primitive count.
    pub count: u32,
}

const _: () = assert!(std::mem::size_of::<BvhNode>() == 32);
const _: () = assert!(std::mem::align_of::<BvhNode>() == 4);

impl BvhNode {
    /// An inner node whose children sit at `left` and `left + 1`.
    #[inline]
    pub fn inner(bounds: Aabb, left: u32) -> Self {
        Self {
            min: bounds.min.to_array(),
            first: left,
            max: bounds.max.to_array(),
            count: 0,
        }
    }

    /// A leaf over `prim_indices[first .. first + count]`; `count` must be > 0.
    #[inline]
    pub fn leaf(bounds: Aabb, first: u32, count: u32) -> Self {
        debug_assert!(count > 0, "a leaf holds at least one primitive");
        Self {
            min: bounds.min.to_array(),
            first,
            max: bounds.max.to_array(),
            count,
        }
    }

    #[inline]
    pub fn is_leaf(&self) -> bool {
        self.count > 0
    }

    /// The node's box.
    #[inline]
    pub fn bounds(&self) -> Aabb {
        Aabb::new(Vec3::from_array(self.min), Vec3::from_array(self.max))
    }

    /// Index of the left child of an inner node (the right one is `+ 1`).
    #[inline]
    pub fn left_child(&self) -> usize {
        debug_assert!(!self.is_leaf());
        self.first as usize
    }

    /// Slots of `Bvh2::prim_indices` referenced by a leaf (empty for an inner node).
    #[inline]
    pub fn prim_range(&self) -> std::ops::Range<usize> {
        if self.is_leaf() {
            self.first as usize..self.first as usize + self.count as usize
        } else {
            0..0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_the_documented_offsets() {
        let node = BvhNode::leaf(
            Aabb::new(Vec3::new(1.0, 2.0, 3.0), Vec3::new(4.0, 5.0, 6.0)),
            7,
            8,
        );
        let words: [u32; 8] = bytemuck::cast(node);
        assert_eq!(f32::from_bits(words[0]), 1.0);
        assert_eq!(f32::from_bits(words[2]), 3.0);
        assert_eq!(words[3], 7);
        assert_eq!(f32::from_bits(words[4]), 4.0);
        assert_eq!(f32::from_bits(words[6]), 6.0);
        assert_eq!(words[7], 8);
    }

    #[test]
    fn inner_and_leaf_encoding() {
        let b = Aabb::new(Vec3::ZERO, Vec3::ONE);
        let inner = BvhNode::inner(b, 5);
        assert!(!inner.is_leaf());
        assert_eq!(inner.left_child(), 5);
        assert_eq!(inner.prim_range(), 0..0);
        let leaf = BvhNode::leaf(b, 3, 2);
        assert!(leaf.is_leaf());
        assert_eq!(leaf.prim_range(), 3..5);
        assert_eq!(leaf.bounds(), b);
    }
}
