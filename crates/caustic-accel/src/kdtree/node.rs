//! The node of the kd-tree ([`super::KdTree`]): one 8-byte `#[repr(C)]`
//! plain-data record, so a cache line holds eight nodes and the descent
//! through the split planes touches little memory.
//!
//! Byte layout (little endian, 4-byte aligned):
//!
//! ```text
//! offset 0: word: u32   inner: the split position (f32 bits); leaf: reference count
//! offset 4: tag:  u32   bits 0..2: split axis 0, 1, 2 (inner) or 3 (leaf);
//!                       bits 2..32: inner: index of the left child;
//!                                   leaf: index of the first reference
//! ```
//!
//! Invariants: an inner node's children sit next to each other at `left`
//! and `left + 1`; the left child holds the half-space `x[axis] <= split`,
//! the right child `x[axis] >= split`. A leaf references the entries
//! `first .. first + count` of the tree's reference arrays; `count == 0` is
//! an empty leaf (the empty-space cut-offs make many). Indices are 30 bits,
//! so a tree holds at most [`MAX_INDEX`] nodes and references.

use bytemuck::{Pod, Zeroable};

/// Largest node or reference index a [`KdNode`] can store.
pub const MAX_INDEX: usize = (1 << 30) - 1;

/// Tag bits that mark a leaf.
const LEAF: u32 = 3;

/// One node of a [`super::KdTree`]; see the module docs for the layout.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct KdNode {
    /// Split position bits (inner) or reference count (leaf).
    word: u32,
    /// Axis or leaf tag in the low two bits, an index above them.
    tag: u32,
}

const _: () = assert!(std::mem::size_of::<KdNode>() == 8);
const _: () = assert!(std::mem::align_of::<KdNode>() == 4);

impl KdNode {
    /// An inner node splitting `axis` at `split`, children at `left` and
    /// `left + 1`.
    #[inline]
    pub fn inner(axis: usize, split: f32, left: usize) -> Self {
        debug_assert!(axis < 3 && left <= MAX_INDEX);
        Self {
            word: split.to_bits(),
            tag: ((left as u32) << 2) | axis as u32,
        }
    }

    /// A leaf over references `first .. first + count`.
    #[inline]
    pub fn leaf(first: usize, count: usize) -> Self {
        debug_assert!(first <= MAX_INDEX && count <= MAX_INDEX);
        Self {
            word: count as u32,
            tag: ((first as u32) << 2) | LEAF,
        }
    }

    #[inline(always)]
    pub fn is_leaf(&self) -> bool {
        self.tag & 3 == LEAF
    }

    /// Split axis of an inner node.
    #[inline(always)]
    pub fn axis(&self) -> usize {
        (self.tag & 3) as usize
    }

    /// Split position of an inner node.
    #[inline(always)]
    pub fn split(&self) -> f32 {
        f32::from_bits(self.word)
    }

    /// Index of an inner node's left child (the right one follows it).
    #[inline(always)]
    pub fn left_child(&self) -> usize {
        (self.tag >> 2) as usize
    }

    /// Reference range of a leaf.
    #[inline(always)]
    pub fn refs(&self) -> std::ops::Range<usize> {
        let first = (self.tag >> 2) as usize;
        first..first + self.word as usize
    }

    /// Number of references of a leaf.
    #[inline(always)]
    pub fn count(&self) -> usize {
        self.word as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inner_and_leaf_round_trip() {
        let inner = KdNode::inner(2, -1.5, 12345);
        assert!(!inner.is_leaf());
        assert_eq!(
            (inner.axis(), inner.split(), inner.left_child()),
            (2, -1.5, 12345)
        );
        let leaf = KdNode::leaf(MAX_INDEX, 7);
        assert!(leaf.is_leaf());
        assert_eq!(leaf.refs(), MAX_INDEX..MAX_INDEX + 7);
        assert_eq!(KdNode::leaf(0, 0).refs(), 0..0);
        // Negative zero and infinities survive the bit store.
        assert!(KdNode::inner(0, -0.0, 1).split().is_sign_negative());
    }
}
