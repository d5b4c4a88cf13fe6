//! The wide BVH, [`WideBvh`]: a binary BVH ([`Bvh2`](super::Bvh2)) collapsed
//! into a tree of `N`-child nodes (`N` = 4 or 8) whose boxes and triangles
//! are stored structure-of-arrays, so one SIMD instruction tests a ray
//! against all children of a node or all triangles of a group. This is the
//! layout of Embree's BVH4/BVH8 (Wald et al., "Embree: A Kernel Framework
//! for Efficient CPU Ray Tracing", SIGGRAPH 2014) and of Ylitie, Karras and
//! Laine's 8-wide trees ("Efficient Incoherent Ray Traversal on GPUs Through
//! Compressed Wide BVHs", HPG 2017), here uncompressed.
//!
//! - [`node`]: the node and triangle-group records and their byte layout;
//! - [`mod@collapse`]: Bvh2 → wide tree (SAH-greedy child pulling, small
//!   subtrees folded into one leaf);
//! - [`simd`]: the lane vocabulary and its AVX2, SSE and portable backends;
//! - [`traverse`]: the single-ray traversal and its exact box test;
//! - [`leaf`]: the SIMD watertight triangle test, bit-identical to the scalar one;
//! - [`packet`]: packet traversal (64 rays, interval node test) for coherent
//!   batches, with its per-lane leaf stage in `packet_lanes`;
//! - [`stream`]: any-hit ray streams (occlusion of many incoherent rays,
//!   regrouped by direction, each node visited once per stream), with the
//!   per-ray node step of `ray_masks`;
//! - [`accel`]: [`WideTriangleBvh`], the registered accel `bvh-wide`;
//! - [`compressed`]: the GPU's compressed 8-wide node (Ylitie et al.'s
//!   80-byte format with 8-bit quantised child boxes), its quantisation and
//!   the validator of a downloaded tree; with the `cuda` feature,
//!   `compressed_cuda` collapses any device-resident binary BVH into it on
//!   the device and `traverse_compressed_cuda` traces it.
//!
//! Invariants, checked by [`WideBvh::validate`] after every build in debug
//! builds: `root` is an inner node (index 0), a leaf, or empty when there are
//! no triangles; every node is reachable exactly once, and so is every group;
//! a slot's box contains the boxes of its child's slots (inner child) or of
//! its triangles (leaf; non-finite triangles, which no ray can hit, are
//! exempt); unused slots carry the empty box; every inner node has at least
//! two used slots; padding lanes have NaN vertices and the id
//! [`node::NO_PRIM`]; every input triangle sits in exactly one lane, bit for
//! bit; depth is at most [`MAX_DEPTH`], which bounds the
//! traversal stack.

pub mod accel;
pub mod collapse;
pub mod compressed;
#[cfg(feature = "cuda")]
pub mod compressed_cuda;
pub mod leaf;
pub mod node;
pub mod packet;
mod packet_lanes;
mod ray_masks;
pub mod simd;
pub mod stream;
pub mod stream_closest;
#[cfg(feature = "cuda")]
pub mod trace_bench_compressed_cuda;
pub mod traverse;
#[cfg(feature = "cuda")]
pub mod traverse_compressed_cuda;

pub use accel::{StreamStep, WideBvhConfig, WideTriangleBvh, Width};
pub use collapse::{CollapseConfig, collapse};
pub use node::{ChildRef, TriangleGroup, WideNode};

use super::{MAX_DEPTH, contains_with_tolerance, meets_with_tolerance};
use caustic_geom::{Aabb, Triangle};

/// An `N`-wide BVH over triangles, with the triangles in SIMD groups.
#[derive(Clone, Debug)]
pub struct WideBvh<const N: usize> {
    /// Inner nodes; the root is node 0 when `root` is a node.
    pub nodes: Vec<WideNode<N>>,
    /// Leaf triangles, `N` lanes per group; a leaf owns a run of groups.
    pub groups: Vec<TriangleGroup<N>>,
    /// Where traversal starts.
    pub root: ChildRef,
    /// Box of every triangle (finite ones), the root's box.
    pub bounds: Aabb,
    /// Every leaf holds its triangles whole (no triangle in two leaves, as
    /// spatial splits make): then every box that holds a triangle holds
    /// its whole bounding box, and the traversal may cull by the crossing
    /// rule (`traverse::slab_rule`); otherwise it keeps the depth-range
    /// rule.
    pub whole_leaves: bool,
}

/// Shape figures of a [`WideBvh`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct WideShape {
    /// Inner nodes.
    pub inner: usize,
    pub leaves: usize,
    /// Depth of the deepest leaf; a root leaf has depth 0.
    pub max_depth: usize,
    /// Triangles in the largest leaf.
    pub max_leaf_size: usize,
    /// Triangles over all leaves.
    pub prims: usize,
    /// Expected cost with `C_trav = C_isect = 1` over the root's area (the
    /// DESIGN.md definition, applied to wide nodes: each inner node costs
    /// one traversal step, each triangle one test).
    pub sah_cost: f32,
}

/// The node or leaf a [`ChildRef`] leads to, as the traversal's
/// `(child, groups)` pair (`groups == 0` for a node); `None` when empty.
#[inline(always)]
pub(crate) fn root_entry(root: ChildRef) -> Option<(u32, u32)> {
    match root {
        ChildRef::Empty => None,
        ChildRef::Node(index) => Some((index, 0)),
        ChildRef::Leaf { first, count } => Some((first, count)),
    }
}

impl<const N: usize> WideBvh<N> {
    /// The tree over no triangles.
    pub fn empty() -> Self {
        Self {
            nodes: Vec::new(),
            groups: Vec::new(),
            root: ChildRef::Empty,
            bounds: Aabb::EMPTY,
            whole_leaves: true,
        }
    }

    /// Calls `visit(target, bounds, depth)` for the root and every used
    /// slot, depth first. Stops descending at out-of-range nodes and past
    /// `2 * MAX_DEPTH` levels, so it is safe on corrupt trees.
    pub fn walk(&self, mut visit: impl FnMut(ChildRef, Aabb, usize)) {
        let mut stack = vec![(self.root, self.bounds, 0usize)];
        while let Some((target, bounds, depth)) = stack.pop() {
            if target == ChildRef::Empty {
                continue;
            }
            visit(target, bounds, depth);
            let ChildRef::Node(index) = target else {
                continue;
            };
            let Some(node) = self.nodes.get(index as usize) else {
                continue;
            };
            if depth < 2 * MAX_DEPTH {
                for slot in (0..N).rev() {
                    stack.push((node.slot(slot), node.slot_bounds(slot), depth + 1));
                }
            }
        }
    }

    /// Triangles (non-padding lanes) of the leaf `first, count`.
    pub fn leaf_size(&self, first: u32, count: u32) -> usize {
        let range = first as usize..(first + count) as usize;
        self.groups
            .get(range)
            .map_or(0, |groups| groups.iter().map(|g| g.lanes().count()).sum())
    }

    /// Node, leaf, depth and cost figures, gathered in one walk.
    pub fn shape(&self) -> WideShape {
        let mut shape = WideShape::default();
        let root_area = surface_area_f64(&self.bounds);
        let mut cost = 0.0f64;
        self.walk(|target, bounds, depth| {
            let ratio = if root_area > 0.0 {
                surface_area_f64(&bounds) / root_area
            } else {
                1.0
            };
            match target {
                ChildRef::Node(_) => {
                    shape.inner += 1;
                    cost += ratio;
                }
                ChildRef::Leaf { first, count } => {
                    let size = self.leaf_size(first, count);
                    shape.leaves += 1;
                    shape.prims += size;
                    shape.max_depth = shape.max_depth.max(depth);
                    shape.max_leaf_size = shape.max_leaf_size.max(size);
                    cost += ratio * size as f64;
                }
                ChildRef::Empty => {}
            }
        });
        shape.sah_cost = cost as f32;
        shape
    }

    /// Bytes of nodes and groups.
    pub fn bytes(&self) -> usize {
        std::mem::size_of_val(self.nodes.as_slice()) + std::mem::size_of_val(self.groups.as_slice())
    }

    /// Checks every invariant of the module docs against the triangles the
    /// tree was built from; returns the first violation found.
    pub fn validate(&self, triangles: &[Triangle]) -> Result<(), String> {
        let mut node_seen = vec![false; self.nodes.len()];
        let mut group_seen = vec![false; self.groups.len()];
        let mut prim_seen = vec![false; triangles.len()];
        // More stored triangles than the scene has: spatial splits cut some
        // into parts held by several leaves (`Bvh2::validate_split`).
        let stored = self
            .groups
            .iter()
            .flat_map(|g| g.id)
            .filter(|&id| id != node::NO_PRIM);
        let split = stored.count() > triangles.len();
        let mut problem = None;
        let mut fail = |message: String| {
            problem.get_or_insert(message);
        };
        if self.root == ChildRef::Empty && (!triangles.is_empty() || !self.nodes.is_empty()) {
            fail("empty root over a non-empty tree".into());
        }
        if matches!(self.root, ChildRef::Node(index) if index != 0) {
            fail("the root node is not node 0".into());
        }
        self.walk(|target, bounds, depth| {
            if depth > MAX_DEPTH {
                fail(format!("{target:?} at depth {depth} > {MAX_DEPTH}"));
            }
            match target {
                ChildRef::Node(index) => match self.nodes.get(index as usize) {
                    None => fail(format!("node {index} out of range")),
                    Some(_) if std::mem::replace(&mut node_seen[index as usize], true) => {
                        fail(format!("node {index} is reachable twice"))
                    }
                    Some(node) => {
                        if let Err(message) = check_node(node, index, &bounds) {
                            fail(message);
                        }
                    }
                },
                ChildRef::Leaf { first, count } => {
                    let check = check_leaf(
                        self,
                        first,
                        count,
                        &bounds,
                        triangles,
                        &mut group_seen,
                        &mut prim_seen,
                        split,
                    );
                    if let Err(message) = check {
                        fail(message);
                    }
                }
                ChildRef::Empty => {}
            }
        });
        if let Some(message) = problem {
            return Err(message);
        }
        if let Some(index) = node_seen.iter().position(|seen| !seen) {
            return Err(format!("node {index} is unreachable"));
        }
        if let Some(index) = group_seen.iter().position(|seen| !seen) {
            return Err(format!("group {index} is in no leaf"));
        }
        if let Some(prim) = prim_seen.iter().position(|seen| !seen) {
            return Err(format!("triangle {prim} is in no leaf"));
        }
        Ok(())
    }
}

/// Slot boxes inside the parent's box; at least two used slots; empty slots
/// with the empty box.
fn check_node<const N: usize>(node: &WideNode<N>, index: u32, parent: &Aabb) -> Result<(), String> {
    let mut used = 0;
    for slot in 0..N {
        let inner = node.slot_bounds(slot);
        if node.slot(slot) == ChildRef::Empty {
            if !inner.is_empty() || node.child[slot] != 0 {
                return Err(format!("node {index}: unused slot {slot} is not cleared"));
            }
            continue;
        }
        used += 1;
        if !contains_with_tolerance(parent, &inner) {
            return Err(format!(
                "node {index}: slot {slot}'s box {inner:?} sticks out of {parent:?}"
            ));
        }
    }
    if used < 2 {
        return Err(format!("node {index} has {used} used slots"));
    }
    Ok(())
}

/// Groups in range and seen once; lanes hold the input triangles bit for
/// bit inside the leaf's box, padding lanes NaN.
#[allow(clippy::too_many_arguments)]
fn check_leaf<const N: usize>(
    bvh: &WideBvh<N>,
    first: u32,
    count: u32,
    bounds: &Aabb,
    triangles: &[Triangle],
    group_seen: &mut [bool],
    prim_seen: &mut [bool],
    split: bool,
) -> Result<(), String> {
    let range = first as usize..first as usize + count as usize;
    if count == 0 || range.end > bvh.groups.len() {
        return Err(format!("leaf groups {range:?} out of range"));
    }
    for index in range {
        if std::mem::replace(&mut group_seen[index], true) {
            return Err(format!("group {index} is in two leaves"));
        }
        let group = &bvh.groups[index];
        for lane in 0..N {
            let id = group.id[lane];
            let tri = group.triangle(lane);
            if id == node::NO_PRIM {
                if !group.vertex.iter().all(|row| row[lane].is_nan()) {
                    return Err(format!("group {index}: padding lane {lane} is not NaN"));
                }
                continue;
            }
            let Some(expected) = triangles.get(id as usize) else {
                return Err(format!("group {index} lane {lane}: id {id} out of range"));
            };
            if std::mem::replace(&mut prim_seen[id as usize], true) && !split {
                return Err(format!("triangle {id} is stored twice"));
            }
            if bytemuck::bytes_of(&tri) != bytemuck::bytes_of(expected) {
                return Err(format!(
                    "triangle {id} is stored as {tri:?}, not {expected:?}"
                ));
            }
            let placeable = tri.is_finite() && !tri.bounds().is_empty();
            let fits = if split {
                meets_with_tolerance(bounds, &tri.bounds())
            } else {
                contains_with_tolerance(bounds, &tri.bounds())
            };
            if placeable && !fits {
                return Err(format!("leaf box {bounds:?} does not hold triangle {id}"));
            }
        }
    }
    Ok(())
}

/// Surface area in `f64`; 0 for an empty or non-finite box.
fn surface_area_f64(b: &Aabb) -> f64 {
    let e: [f64; 3] = std::array::from_fn(|k| b.max[k] as f64 - b.min[k] as f64);
    if !e.iter().all(|&x| x.is_finite() && x >= 0.0) {
        return 0.0;
    }
    2.0 * (e[0] * e[1] + e[1] * e[2] + e[2] * e[0])
}
