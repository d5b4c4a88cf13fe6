//! The compressed 8-wide BVH node of Ylitie, Karras and Laine, "Efficient
//! Incoherent Ray Traversal on GPUs Through Compressed Wide BVHs" (HPG
//! 2017, the node format of their section on compressed wide BVHs), its
//! quantisation arithmetic, and a host copy of a whole tree with its
//! validator. The device builds the tree (`compressed_cuda.rs`) and traces
//! it (`traverse_compressed_cuda.rs`); this file is what the host knows of
//! it, so a tree built on the GPU can be downloaded and checked here.
//!
//! Byte layout of [`CompressedNode`] (80 bytes, five 16-byte words):
//!
//! ```text
//! offset  0: origin: [f32; 3]     p: the node's lower corner, the grid origin
//! offset 12: exponents: [u8; 3]   e: grid step 2^(e - 127) per axis (a float's biased exponent)
//! offset 15: inner_mask: u8       bit i: slot i holds an inner child
//! offset 16: child_base: u32      index of the first inner child (they are consecutive, in slot order)
//! offset 20: triangle_base: u32   index of the first triangle of the node's leaf children
//! offset 24: meta: [u8; 8]        per slot, see below
//! offset 32: lo_x, lo_y, lo_z: [u8; 8]   quantised lower planes per slot
//! offset 56: hi_x, hi_y, hi_z: [u8; 8]   quantised upper planes per slot
//! ```
//!
//! Meta byte of a slot: `0` empty; `0b001_11sss` an inner child in slot
//! `sss` (the low five bits are `24 + slot`); `0bnnn_ooooo` a leaf of one,
//! two or three triangles (`nnn` = `001`, `011`, `111`: the count in unary)
//! starting `ooooo` (`0..24`) triangles after `triangle_base`. The traversal
//! shifts the unary count to bit `ooooo` (leaves) or `24 + slot` (inner
//! children) of one hit mask: triangles in bits 0..24, children in 24..32.
//!
//! Quantisation, conservative by construction: a plane decodes as
//! `fma(q, 2^(e - 127), p)` in `f32` (one rounding; `q * 2^k` is exact),
//! which is how both the device and [`decode`] compute it; the encoder picks
//! the smallest exponent whose 255th step reaches the node's upper corner
//! *after* that rounding, then rounds each lower plane down and each upper
//! plane up and corrects by whole steps until the decoded plane lies on the
//! right side. So every decoded child box contains the exact child box, and
//! with it every triangle below the child.

use bytemuck::{Pod, Zeroable};
use caustic_geom::{Aabb, Triangle, Vec3};

/// Children per node.
pub const WIDTH: usize = 8;
/// Triangles of one leaf child (the meta byte's unary count has 3 bits).
pub const LEAF_MAX: usize = 3;
/// Triangle bits of the hit mask: the leaf children of a node own at most
/// this many triangles, at offsets below it.
pub const NODE_TRIANGLES: usize = 24;
/// Quantisation steps per axis: 8-bit planes.
pub const STEPS: u32 = 255;

/// One node of the compressed 8-wide BVH; see the module docs.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct CompressedNode {
    pub origin: [f32; 3],
    pub exponents: [u8; 3],
    pub inner_mask: u8,
    pub child_base: u32,
    pub triangle_base: u32,
    pub meta: [u8; 8],
    pub lo_x: [u8; 8],
    pub lo_y: [u8; 8],
    pub lo_z: [u8; 8],
    pub hi_x: [u8; 8],
    pub hi_y: [u8; 8],
    pub hi_z: [u8; 8],
}

const _: () = assert!(size_of::<CompressedNode>() == 80);
const _: () = assert!(align_of::<CompressedNode>() == 4);

/// What a slot of a [`CompressedNode`] holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    Empty,
    /// An inner child: its node index.
    Inner(u32),
    /// A leaf: `count` triangles from triangle index `first`.
    Leaf {
        first: u32,
        count: u32,
    },
}

/// Meta byte of an inner child in `slot`.
pub const fn meta_inner(slot: usize) -> u8 {
    (1 << 5) | (24 + slot as u8)
}

/// Meta byte of a leaf of `count` (1..=3) triangles at `offset` (< 24).
pub const fn meta_leaf(offset: usize, count: usize) -> u8 {
    ((((1u32 << count) - 1) << 5) as u8) | offset as u8
}

/// The grid step of a biased exponent: `2^(e - 127)`.
pub fn exponent_scale(biased: u8) -> f32 {
    f32::from_bits(u32::from(biased) << 23)
}

/// A quantised plane in world space, rounded once, as the kernels decode it.
pub fn decode(q: u8, scale: f32, origin: f32) -> f32 {
    f32::from(q).mul_add(scale, origin)
}

/// The biased exponent of the grid over `[lo, hi]` (`lo <= hi`, both finite)
/// whose 255th step, decoded from `lo`, reaches `hi`: the smallest power of
/// two not below `(hi - lo) / 255`, raised while rounding keeps the top
/// short. At least 1 (the smallest normal step, for flat boxes).
pub fn axis_exponent(lo: f32, hi: f32) -> u8 {
    let extent = f64::from(hi) - f64::from(lo);
    let mut k: i32 = -126;
    if extent > 0.0 {
        let m = extent / f64::from(STEPS);
        let bits = m.to_bits();
        k = ((bits >> 52) & 0x7ff) as i32 - 1023;
        if bits & ((1 << 52) - 1) != 0 {
            k += 1;
        }
        k = k.max(-126);
    }
    while k < 127 && decode(255, f32::from_bits(((k + 127) as u32) << 23), lo) < hi {
        k += 1;
    }
    (k + 127) as u8
}

/// The largest step whose decoded plane is at most `v` (0 if none is).
pub fn quantize_lo(v: f32, origin: f32, scale: f32) -> u8 {
    let q = ((f64::from(v) - f64::from(origin)) / f64::from(scale)).floor();
    let mut q = q.clamp(0.0, 255.0) as u8;
    while q > 0 && decode(q, scale, origin) > v {
        q -= 1;
    }
    // Rounding can also leave the next step at or below `v`.
    while q < 255 && decode(q + 1, scale, origin) <= v {
        q += 1;
    }
    q
}

/// The smallest step whose decoded plane is at least `v` (255 if none is).
pub fn quantize_hi(v: f32, origin: f32, scale: f32) -> u8 {
    let q = ((f64::from(v) - f64::from(origin)) / f64::from(scale)).ceil();
    let mut q = q.clamp(0.0, 255.0) as u8;
    while q < 255 && decode(q, scale, origin) < v {
        q += 1;
    }
    while q > 0 && decode(q - 1, scale, origin) >= v {
        q -= 1;
    }
    q
}

impl CompressedNode {
    /// The grid step per axis.
    pub fn scale(&self) -> [f32; 3] {
        self.exponents.map(exponent_scale)
    }

    /// What slot `slot` holds, from its meta byte (and, for inner children,
    /// the inner mask); `None` for a meta byte that no valid node has.
    pub fn slot(&self, slot: usize) -> Option<Slot> {
        let meta = self.meta[slot];
        let inner = self.inner_mask & (1 << slot) != 0;
        let (unary, low) = (meta >> 5, usize::from(meta & 31));
        if meta == 0 {
            return (!inner).then_some(Slot::Empty);
        }
        if unary == 1 && low >= 24 {
            let below = (self.inner_mask & ((1u16 << slot) - 1) as u8).count_ones();
            return (inner && low == 24 + slot).then_some(Slot::Inner(self.child_base + below));
        }
        let count = match unary {
            0b001 => 1,
            0b011 => 2,
            0b111 => 3,
            _ => return None,
        };
        (!inner && low + count <= NODE_TRIANGLES).then_some(Slot::Leaf {
            first: self.triangle_base + low as u32,
            count: count as u32,
        })
    }

    /// The decoded box of slot `slot` (inverted for an empty child box).
    pub fn slot_bounds(&self, slot: usize) -> Aabb {
        let scale = self.scale();
        let lo = [self.lo_x[slot], self.lo_y[slot], self.lo_z[slot]];
        let hi = [self.hi_x[slot], self.hi_y[slot], self.hi_z[slot]];
        let plane = |q: [u8; 3], axis: usize| decode(q[axis], scale[axis], self.origin[axis]);
        Aabb::new(
            Vec3::new(plane(lo, 0), plane(lo, 1), plane(lo, 2)),
            Vec3::new(plane(hi, 0), plane(hi, 1), plane(hi, 2)),
        )
    }
}

/// A compressed wide BVH copied to the host: node 0 is the root (no nodes
/// when there are no triangles); `triangles[k]` has the scene id `prims[k]`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CompressedBvh {
    pub nodes: Vec<CompressedNode>,
    pub triangles: Vec<Triangle>,
    pub prims: Vec<u32>,
}

/// Shape figures of a [`CompressedBvh`], gathered by its validation.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CompressedShape {
    pub nodes: usize,
    /// Leaf children.
    pub leaves: usize,
    pub triangles: usize,
    /// Depth of the deepest node; the root is at depth 0.
    pub max_depth: usize,
    /// Used slots per node.
    pub avg_children: f32,
    /// Triangles per leaf child.
    pub avg_leaf_size: f32,
}

impl CompressedBvh {
    /// Checks the tree against the invariants of the module docs: every
    /// node reachable exactly once from the root and every triangle exactly
    /// once from a leaf; meta bytes, inner masks, exponents and origins
    /// well formed; every decoded child box containing the boxes of the
    /// finite triangles below it (triangles with a non-finite vertex can
    /// never be hit and are exempt); depth at most `max_depth`; the scene
    /// ids a permutation of `0..triangles`.
    pub fn validate(&self, max_depth: usize) -> Result<CompressedShape, String> {
        let n = self.triangles.len();
        if self.prims.len() != n {
            return Err(format!("{} scene ids for {n} triangles", self.prims.len()));
        }
        let mut seen_prim = vec![false; n];
        for &prim in &self.prims {
            match seen_prim.get_mut(prim as usize) {
                Some(seen) if !*seen => *seen = true,
                _ => return Err(format!("scene id {prim} out of range or repeated")),
            }
        }
        if self.nodes.is_empty() {
            return if n == 0 {
                Ok(CompressedShape::default())
            } else {
                Err(format!("{n} triangles but no nodes"))
            };
        }
        let mut shape = CompressedShape {
            nodes: self.nodes.len(),
            triangles: n,
            ..CompressedShape::default()
        };
        let mut node_seen = vec![false; self.nodes.len()];
        let mut triangle_seen = vec![false; n];
        // Depth-first order, so that the reverse visits children first.
        let mut order = Vec::with_capacity(self.nodes.len());
        let mut stack = vec![(0u32, 0usize)];
        let mut used_slots = 0usize;
        while let Some((index, depth)) = stack.pop() {
            let seen = node_seen
                .get_mut(index as usize)
                .ok_or_else(|| format!("child node {index} out of range"))?;
            if std::mem::replace(seen, true) {
                return Err(format!("node {index} reached twice"));
            }
            if depth > max_depth {
                return Err(format!("node {index} at depth {depth} > {max_depth}"));
            }
            shape.max_depth = shape.max_depth.max(depth);
            order.push(index);
            let node = &self.nodes[index as usize];
            check_grid(node).map_err(|e| format!("node {index}: {e}"))?;
            for slot in 0..WIDTH {
                match node.slot(slot) {
                    None => return Err(format!("node {index} slot {slot}: bad meta")),
                    Some(Slot::Empty) => {}
                    Some(Slot::Inner(child)) => {
                        used_slots += 1;
                        stack.push((child, depth + 1));
                    }
                    Some(Slot::Leaf { first, count }) => {
                        used_slots += 1;
                        shape.leaves += 1;
                        for t in first..first + count {
                            let seen = triangle_seen.get_mut(t as usize).ok_or_else(|| {
                                format!("node {index} slot {slot}: triangle {t} out of range")
                            })?;
                            if std::mem::replace(seen, true) {
                                return Err(format!("triangle {t} reached twice"));
                            }
                        }
                    }
                }
            }
        }
        if let Some(lost) = node_seen.iter().position(|s| !s) {
            return Err(format!("node {lost} is unreachable"));
        }
        if let Some(lost) = triangle_seen.iter().position(|s| !s) {
            return Err(format!("triangle {lost} is unreachable"));
        }
        self.check_boxes(&order)?;
        shape.avg_children = used_slots as f32 / shape.nodes as f32;
        shape.avg_leaf_size = n as f32 / shape.leaves.max(1) as f32;
        Ok(shape)
    }

    /// Every decoded slot box contains its subtree's finite triangles;
    /// `order` lists the nodes parents first.
    fn check_boxes(&self, order: &[u32]) -> Result<(), String> {
        let mut subtree = vec![Aabb::EMPTY; self.nodes.len()];
        for &index in order.iter().rev() {
            let node = &self.nodes[index as usize];
            let mut all = Aabb::EMPTY;
            for slot in 0..WIDTH {
                let exact = match node.slot(slot) {
                    Some(Slot::Inner(child)) => subtree[child as usize],
                    Some(Slot::Leaf { first, count }) => self.triangles
                        [first as usize..(first + count) as usize]
                        .iter()
                        .filter(|t| t.is_finite())
                        .fold(Aabb::EMPTY, |b, t| b.union(t.bounds())),
                    _ => continue,
                };
                if !exact.is_empty() && !node.slot_bounds(slot).contains(&exact) {
                    return Err(format!(
                        "node {index} slot {slot}: decoded box {:?} does not contain {exact:?}",
                        node.slot_bounds(slot)
                    ));
                }
                all = all.union(exact);
            }
            subtree[index as usize] = all;
        }
        Ok(())
    }
}

/// Origins finite, exponents those of normal steps.
fn check_grid(node: &CompressedNode) -> Result<(), String> {
    if !node.origin.iter().all(|o| o.is_finite()) {
        return Err(format!("non-finite origin {:?}", node.origin));
    }
    if node.exponents.iter().any(|&e| e == 0 || e == 255) {
        return Err(format!("exponent out of range {:?}", node.exponents));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use caustic_geom::Pcg32;

    #[test]
    fn layout_is_the_papers() {
        assert_eq!(std::mem::offset_of!(CompressedNode, exponents), 12);
        assert_eq!(std::mem::offset_of!(CompressedNode, inner_mask), 15);
        assert_eq!(std::mem::offset_of!(CompressedNode, child_base), 16);
        assert_eq!(std::mem::offset_of!(CompressedNode, triangle_base), 20);
        assert_eq!(std::mem::offset_of!(CompressedNode, meta), 24);
        assert_eq!(std::mem::offset_of!(CompressedNode, lo_x), 32);
        assert_eq!(std::mem::offset_of!(CompressedNode, hi_x), 56);
        assert_eq!(std::mem::offset_of!(CompressedNode, hi_z), 72);
    }

    #[test]
    fn meta_bytes_decode() {
        let mut node = CompressedNode {
            inner_mask: 0b0010_0100,
            child_base: 10,
            triangle_base: 100,
            ..CompressedNode::default()
        };
        node.meta[2] = meta_inner(2);
        node.meta[5] = meta_inner(5);
        node.meta[0] = meta_leaf(0, 3);
        node.meta[7] = meta_leaf(21, 3);
        node.meta[1] = meta_leaf(3, 1);
        assert_eq!(node.slot(2), Some(Slot::Inner(10)));
        assert_eq!(node.slot(5), Some(Slot::Inner(11)));
        assert_eq!(
            node.slot(0),
            Some(Slot::Leaf {
                first: 100,
                count: 3
            })
        );
        assert_eq!(
            node.slot(7),
            Some(Slot::Leaf {
                first: 121,
                count: 3
            })
        );
        assert_eq!(
            node.slot(1),
            Some(Slot::Leaf {
                first: 103,
                count: 1
            })
        );
        assert_eq!(node.slot(3), Some(Slot::Empty));
        assert_eq!(meta_inner(3), 0b0011_1011);
        assert_eq!(meta_leaf(4, 2), 0b0110_0100);
        // A leaf running past the 24 triangle bits, a count of 0b010, and
        // an inner meta byte without its mask bit are malformed.
        node.meta[3] = meta_leaf(23, 2);
        assert_eq!(node.slot(3), None);
        node.meta[3] = 0b0100_0001;
        assert_eq!(node.slot(3), None);
        node.meta[3] = meta_inner(3);
        assert_eq!(node.slot(3), None);
    }

    #[test]
    fn exponents_reach_the_upper_corner() {
        let cases = [
            (0.0, 0.0),
            (-0.0, 0.0),
            (1.0, 1.0),
            (0.0, 255.0),
            (0.0, 255.0001),
            (-1e-30, 1e-30),
            (1e6, 1e6 + 0.125),
            (-3.0e38, 3.0e38),
            (f32::MIN, f32::MAX),
            (16_777_216.0, 16_777_218.0),
        ];
        for (lo, hi) in cases {
            let e = axis_exponent(lo, hi);
            assert!((1..=254).contains(&e), "{lo} {hi}: exponent {e}");
            let s = exponent_scale(e);
            assert!(
                decode(255, s, lo) >= hi,
                "{lo} {hi}: top {}",
                decode(255, s, lo)
            );
            // The step is the smallest power of two that works, unless
            // rounding forced one more or the floor of normal steps holds.
            if e > 1 {
                let half = exponent_scale(e - 1);
                let below = f64::from(hi) - f64::from(lo) > 255.0 * f64::from(half)
                    || decode(255, half, lo) < hi;
                assert!(below, "{lo} {hi}: exponent {e} is not the smallest");
            }
        }
    }

    #[test]
    fn quantised_boxes_contain_random_children() {
        let mut rng = Pcg32::new(7, 11);
        let mut f = |lo: f32, hi: f32| lo + (hi - lo) * rng.next_f32();
        for round in 0..20_000 {
            // Node boxes of every magnitude, children inside them.
            let magnitude = 10f32.powi((round % 13) - 6);
            let offset = f(-1e3, 1e3) * magnitude * if round % 3 == 0 { 1e4 } else { 1.0 };
            let (a, b) = (f(0.0, 1.0) * magnitude, f(0.0, 1.0) * magnitude);
            let (node_lo, node_hi) = (offset, offset + a.max(b));
            let (c0, c1) = (f(node_lo, node_hi), f(node_lo, node_hi));
            let (child_lo, child_hi) = (c0.min(c1).max(node_lo), c0.max(c1).min(node_hi));
            let s = exponent_scale(axis_exponent(node_lo, node_hi));
            let (ql, qh) = (
                quantize_lo(child_lo, node_lo, s),
                quantize_hi(child_hi, node_lo, s),
            );
            // Steps finer than the origin's ulp decode alike, so the bytes
            // of a flat child may cross; the decoded planes never do.
            assert!(
                decode(ql, s, node_lo) <= decode(qh, s, node_lo),
                "round {round}"
            );
            assert!(
                decode(ql, s, node_lo) <= child_lo,
                "round {round}: lower plane"
            );
            assert!(
                decode(qh, s, node_lo) >= child_hi,
                "round {round}: upper plane"
            );
            // Tight: one step less would cut the child.
            if ql < 255 {
                assert!(
                    decode(ql + 1, s, node_lo) > child_lo,
                    "round {round}: loose lower"
                );
            }
            if qh > 0 {
                assert!(
                    decode(qh - 1, s, node_lo) < child_hi,
                    "round {round}: loose upper"
                );
            }
        }
    }

    /// A root with a leaf of two triangles and an inner child holding one.
    fn small_tree() -> CompressedBvh {
        let tri = |x: f32| {
            Triangle::new(
                Vec3::new(x, 0.0, 0.0),
                Vec3::new(x + 1.0, 0.0, 0.0),
                Vec3::new(x, 1.0, 0.0),
            )
        };
        let triangles = vec![tri(0.0), tri(2.0), tri(4.0)];
        let mut root = CompressedNode {
            origin: [0.0; 3],
            exponents: [axis_exponent(0.0, 5.0), axis_exponent(0.0, 1.0), 1],
            inner_mask: 0b10,
            child_base: 1,
            ..CompressedNode::default()
        };
        let s = root.scale();
        root.meta[0] = meta_leaf(0, 2);
        root.meta[1] = meta_inner(1);
        for (slot, lo, hi) in [(0, 0.0, 3.0), (1, 4.0, 5.0)] {
            root.lo_x[slot] = quantize_lo(lo, 0.0, s[0]);
            root.hi_x[slot] = quantize_hi(hi, 0.0, s[0]);
            root.hi_y[slot] = quantize_hi(1.0, 0.0, s[1]);
        }
        let mut child = CompressedNode {
            origin: [4.0, 0.0, 0.0],
            exponents: [axis_exponent(4.0, 5.0), axis_exponent(0.0, 1.0), 1],
            triangle_base: 2,
            ..CompressedNode::default()
        };
        child.meta[3] = meta_leaf(0, 1);
        child.hi_x[3] = 255;
        child.hi_y[3] = 255;
        CompressedBvh {
            nodes: vec![root, child],
            triangles,
            prims: vec![2, 0, 1],
        }
    }

    #[test]
    fn validator_accepts_a_good_tree_and_names_each_fault() {
        let good = small_tree();
        let shape = good.validate(64).unwrap();
        assert_eq!((shape.nodes, shape.leaves, shape.max_depth), (2, 2, 1));
        assert_eq!(shape.avg_leaf_size, 1.5);
        let fault = |change: fn(&mut CompressedBvh), words: &str| {
            let mut bad = small_tree();
            change(&mut bad);
            let message = bad.validate(64).unwrap_err();
            assert!(message.contains(words), "expected `{words}` in `{message}`");
        };
        fault(|t| t.nodes[0].hi_x[0] = 2, "does not contain");
        fault(|t| t.nodes[1].triangle_base = 1, "reached twice");
        fault(
            |t| t.nodes[0].meta[0] = meta_leaf(0, 1),
            "triangle 1 is unreachable",
        );
        fault(|t| t.nodes[0].child_base = 0, "reached twice");
        fault(|t| t.nodes[0].inner_mask = 0, "bad meta");
        fault(|t| t.nodes[1].exponents[2] = 0, "exponent");
        fault(|t| t.prims[0] = 0, "repeated");
        fault(|t| t.nodes.push(CompressedNode::default()), "unreachable");
        assert!(small_tree().validate(0).unwrap_err().contains("depth"));
    }
}
