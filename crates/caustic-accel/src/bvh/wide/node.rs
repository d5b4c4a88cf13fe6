//! The two records of the wide BVH, both structure-of-arrays so that one
//! SIMD register holds one coordinate of all `N` children (or triangles):
//!
//! - [`WideNode`]: the boxes of up to `N` children and where each child lives;
//! - [`TriangleGroup`]: up to `N` triangles of one leaf, with their scene ids.
//!
//! Byte layout of `WideNode<N>` (little endian, 64-byte aligned, `32 * N`
//! bytes: 128 for `N = 4`, 256 for `N = 8`):
//!
//! ```text
//! offset  0 * 4N: bounds[0] = min_x[N]   f32 per child
//! offset  1 * 4N: bounds[1] = min_y[N]
//! offset  2 * 4N: bounds[2] = min_z[N]
//! offset  3 * 4N: bounds[3] = max_x[N]
//! offset  4 * 4N: bounds[4] = max_y[N]
//! offset  5 * 4N: bounds[5] = max_z[N]
//! offset  6 * 4N: child[N]              u32: inner child: node index; leaf: first group
//! offset  7 * 4N: groups[N]             u32: 0 for an inner child or an empty slot,
//!                                            else the leaf's number of groups
//! ```
//!
//! So row `axis` holds the lower planes and row `3 + axis` the upper ones; a
//! ray picks its entry row per axis from the sign of its direction
//! (`axis + 3 * negative`) once, and every node test is six aligned loads.
//! Empty slots carry the empty box (`min = +inf`, `max = -inf`), which the
//! slab test never hits, so the traversal needs no occupancy mask.
//!
//! Byte layout of `TriangleGroup<N>` (`40 * N` bytes, 64-byte aligned):
//!
//! ```text
//! offset 0 * 4N .. 9 * 4N: vertex[v * 3 + axis][N]   f32: v0.x, v0.y, v0.z, v1.x, ... v2.z
//! offset 9 * 4N:           id[N]                     u32 scene id; u32::MAX in padding lanes
//! ```
//!
//! Padding lanes hold NaN vertices: every edge function and the determinant
//! come out NaN, which the watertight test rejects, so a group is always
//! tested whole.

use bytemuck::{Pod, Zeroable};
use caustic_geom::{Aabb, Triangle, Vec3};

/// Marks a padding lane of a [`TriangleGroup`].
pub const NO_PRIM: u32 = u32::MAX;

/// One node of a [`super::WideBvh`]: the boxes of its `N` child slots and
/// what each slot points to. See the module docs for the layout.
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WideNode<const N: usize> {
    /// Rows `0..3`: lower corner per axis; rows `3..6`: upper corner.
    pub bounds: [[f32; N]; 6],
    /// Inner child: index of its node; leaf: index of its first group.
    pub child: [u32; N],
    /// Leaf: number of consecutive groups (at least 1); inner child or
    /// empty slot: 0.
    pub groups: [u32; N],
}

const _: () = assert!(std::mem::size_of::<WideNode<4>>() == 128);
const _: () = assert!(std::mem::size_of::<WideNode<8>>() == 256);
const _: () = assert!(std::mem::align_of::<WideNode<8>>() == 64);

// SAFETY: for N = 4 and N = 8 the struct is 8 rows of N four-byte words with
// no padding (checked above), every bit pattern is valid, and it is `Copy`.
unsafe impl Zeroable for WideNode<4> {}
unsafe impl Pod for WideNode<4> {}
unsafe impl Zeroable for WideNode<8> {}
unsafe impl Pod for WideNode<8> {}

/// Where a child slot (or the root) leads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChildRef {
    /// Nothing: the slot is unused (or the tree is empty).
    Empty,
    /// An inner node, by index.
    Node(u32),
    /// A leaf: `count` groups starting at `first`.
    Leaf { first: u32, count: u32 },
}

impl<const N: usize> WideNode<N> {
    /// A node with every slot empty.
    pub fn empty() -> Self {
        Self {
            bounds: [
                [f32::INFINITY; N],
                [f32::INFINITY; N],
                [f32::INFINITY; N],
                [f32::NEG_INFINITY; N],
                [f32::NEG_INFINITY; N],
                [f32::NEG_INFINITY; N],
            ],
            child: [0; N],
            groups: [0; N],
        }
    }

    /// Fills slot `slot` with `bounds` and `target` (`Empty` clears it).
    pub fn set(&mut self, slot: usize, bounds: Aabb, target: ChildRef) {
        let (bounds, child, groups) = match target {
            ChildRef::Empty => (Aabb::EMPTY, 0, 0),
            ChildRef::Node(index) => (bounds, index, 0),
            ChildRef::Leaf { first, count } => {
                assert!(count > 0, "a leaf has at least one group");
                (bounds, first, count)
            }
        };
        for axis in 0..3 {
            self.bounds[axis][slot] = bounds.min[axis];
            self.bounds[3 + axis][slot] = bounds.max[axis];
        }
        self.child[slot] = child;
        self.groups[slot] = groups;
    }

    /// The box of slot `slot`.
    #[inline]
    pub fn slot_bounds(&self, slot: usize) -> Aabb {
        let corner =
            |base: usize| Vec3::from_array([0, 1, 2].map(|axis| self.bounds[base + axis][slot]));
        Aabb::new(corner(0), corner(3))
    }

    /// Where slot `slot` leads. An inner child and an empty slot both have
    /// `groups == 0`; the empty one is told apart by its empty box.
    #[inline]
    pub fn slot(&self, slot: usize) -> ChildRef {
        match self.groups[slot] {
            0 if self.slot_bounds(slot).is_empty() => ChildRef::Empty,
            0 => ChildRef::Node(self.child[slot]),
            count => ChildRef::Leaf {
                first: self.child[slot],
                count,
            },
        }
    }
}

/// Up to `N` triangles of one leaf, coordinates in structure-of-arrays
/// form. See the module docs for the layout.
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug)]
pub struct TriangleGroup<const N: usize> {
    /// Row `3 * v + axis` holds coordinate `axis` of vertex `v` per lane.
    pub vertex: [[f32; N]; 9],
    /// Scene id per lane; [`NO_PRIM`] in padding lanes.
    pub id: [u32; N],
}

const _: () = assert!(std::mem::size_of::<TriangleGroup<4>>() == 192);
const _: () = assert!(std::mem::size_of::<TriangleGroup<8>>() == 320);

impl<const N: usize> TriangleGroup<N> {
    /// A group of padding lanes only.
    pub fn padding() -> Self {
        Self {
            vertex: [[f32::NAN; N]; 9],
            id: [NO_PRIM; N],
        }
    }

    /// Puts triangle `tri` with scene id `id` in lane `lane`.
    pub fn set(&mut self, lane: usize, tri: &Triangle, id: u32) {
        for (v, p) in [tri.v0, tri.v1, tri.v2].into_iter().enumerate() {
            for axis in 0..3 {
                self.vertex[3 * v + axis][lane] = p[axis];
            }
        }
        self.id[lane] = id;
    }

    /// The triangle in lane `lane`, bit for bit as it was stored.
    #[inline]
    pub fn triangle(&self, lane: usize) -> Triangle {
        let vertex =
            |v: usize| Vec3::from_array([0, 1, 2].map(|axis| self.vertex[3 * v + axis][lane]));
        Triangle::new(vertex(0), vertex(1), vertex(2))
    }

    /// Lanes holding a triangle (the others are padding).
    pub fn lanes(&self) -> impl Iterator<Item = usize> + '_ {
        (0..N).filter(|&lane| self.id[lane] != NO_PRIM)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_layout_matches_the_documented_offsets() {
        let mut node = WideNode::<8>::empty();
        let b = Aabb::new(Vec3::new(1.0, 2.0, 3.0), Vec3::new(4.0, 5.0, 6.0));
        node.set(2, b, ChildRef::Leaf { first: 7, count: 3 });
        let words: [u32; 64] = bytemuck::cast(node);
        let word = |row: usize, slot: usize| words[row * 8 + slot];
        assert_eq!(f32::from_bits(word(0, 2)), 1.0);
        assert_eq!(f32::from_bits(word(2, 2)), 3.0);
        assert_eq!(f32::from_bits(word(5, 2)), 6.0);
        assert_eq!((word(6, 2), word(7, 2)), (7, 3));
        assert_eq!(f32::from_bits(word(0, 3)), f32::INFINITY);
        assert_eq!(node.slot(2), ChildRef::Leaf { first: 7, count: 3 });
        assert_eq!(node.slot_bounds(2), b);
    }

    #[test]
    fn slots_round_trip() {
        let mut node = WideNode::<4>::empty();
        let b = Aabb::new(Vec3::ZERO, Vec3::ONE);
        node.set(0, b, ChildRef::Node(0));
        node.set(1, b, ChildRef::Node(9));
        assert_eq!(node.slot(0), ChildRef::Node(0));
        assert_eq!(node.slot(1), ChildRef::Node(9));
        assert_eq!(node.slot(3), ChildRef::Empty);
        node.set(1, b, ChildRef::Empty);
        assert_eq!(node.slot(1), ChildRef::Empty);
    }

    #[test]
    fn groups_store_triangles_exactly_and_pad_with_nan() {
        let tri = Triangle::new(
            Vec3::new(0.1, 0.2, 0.3),
            Vec3::X,
            Vec3::new(-0.0, 5.0, 1e30),
        );
        let mut group = TriangleGroup::<4>::padding();
        group.set(1, &tri, 42);
        assert_eq!(group.triangle(1), tri);
        assert_eq!(group.lanes().collect::<Vec<_>>(), vec![1]);
        assert!(group.vertex[4][0].is_nan());
        assert_eq!(group.id[1], 42);
    }
}
