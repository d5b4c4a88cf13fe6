//! The binary bounding volume hierarchy, [`Bvh2`]: plain data (a node array
//! and a primitive index array) that every BVH builder produces and every BVH
//! traversal and converter consumes.
//!
//! Invariants, checked by [`Bvh2::validate`] after every build in debug builds:
//! node 0 is the root; an inner node's children sit at `first` and
//! `first + 1` (see [`BvhNode`]); every node is reachable exactly once; the
//! leaves' ranges tile `prim_indices` and every primitive appears exactly
//! once; child boxes lie inside their parent's box and leaf boxes contain
//! their primitives' boxes; depth is at most [`MAX_DEPTH`], which bounds the
//! traversal stack; and `nodes.len() == 2 * leaves - 1`. An empty hierarchy
//! (no primitives) has no nodes at all.

pub mod build;
#[cfg(feature = "cuda")]
pub mod device_accel_cuda;
mod node;
pub mod refit;
#[cfg(feature = "cuda")]
pub mod refit_cuda;
#[cfg(feature = "cuda")]
pub mod trace_bench_cuda;
pub mod traverse;
#[cfg(feature = "cuda")]
pub mod traverse_cuda;
mod triangle_bvh;
#[cfg(feature = "cuda")]
pub mod triangle_bvh_cuda;
pub mod wide;

pub use node::BvhNode;
pub use refit::{UpdateAction, UpdatePolicy, UpdateTracker};
pub use triangle_bvh::TriangleBvh;

use crate::BuildInput;
use caustic_geom::Aabb;

/// The deepest a leaf may sit (root at depth 0). Builders guarantee it (the
/// binned builder switches to median splits near the limit); the traversal
/// stack has this many entries because it never holds more than one node per
/// level of the current path.
pub const MAX_DEPTH: usize = 64;

/// A binary BVH as plain data.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Bvh2 {
    /// Node 0 is the root; empty when there are no primitives.
    pub nodes: Vec<BvhNode>,
    /// Leaf slots: `prim_indices[k]` is the input index of the primitive in
    /// slot `k`. Leaves reference contiguous runs of slots.
    pub prim_indices: Vec<u32>,
}

/// Shape figures of a [`Bvh2`], gathered in one walk.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TreeShape {
    pub nodes: usize,
    pub leaves: usize,
    /// Depth of the deepest leaf; the root is at depth 0.
    pub max_depth: usize,
    pub max_leaf_size: usize,
    pub prims: usize,
}

impl Bvh2 {
    /// The hierarchy over no primitives.
    pub fn empty() -> Self {
        Self::default()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Box of the whole hierarchy (empty when there are no primitives).
    pub fn bounds(&self) -> Aabb {
        self.nodes.first().map_or(Aabb::EMPTY, BvhNode::bounds)
    }

    /// Walks the tree depth first, calling `visit(node, depth)` once per node.
    /// Does not assume the tree is valid: it stops descending at out-of-range
    /// children and past [`MAX_DEPTH`] levels beyond the limit, so it is safe
    /// on corrupt input (use [`Bvh2::validate`] to find out what is wrong).
    pub fn walk(&self, mut visit: impl FnMut(usize, usize)) {
        if self.nodes.is_empty() {
            return;
        }
        let mut stack = vec![(0usize, 0usize)];
        while let Some((index, depth)) = stack.pop() {
            visit(index, depth);
            let node = &self.nodes[index];
            let left = node.first as usize;
            if !node.is_leaf() && left + 1 < self.nodes.len() && depth < 2 * MAX_DEPTH {
                stack.push((left + 1, depth + 1));
                stack.push((left, depth + 1));
            }
        }
    }

    /// Node, leaf and depth figures.
    pub fn shape(&self) -> TreeShape {
        let mut shape = TreeShape {
            nodes: self.nodes.len(),
            prims: self.prim_indices.len(),
            ..TreeShape::default()
        };
        self.walk(|index, depth| {
            let node = &self.nodes[index];
            if node.is_leaf() {
                shape.leaves += 1;
                shape.max_depth = shape.max_depth.max(depth);
                shape.max_leaf_size = shape.max_leaf_size.max(node.count as usize);
            }
        });
        shape
    }

    /// Checks every invariant of the module docs against the primitive boxes
    /// the tree was built from; returns the first violation found.
    ///
    /// A leaf with the empty box is a parking leaf for primitives that can
    /// never be hit (non-finite coordinates; see `BuildInput::is_placeable`):
    /// its primitives are exempt from the containment check.
    pub fn validate(&self, prim_bounds: &[Aabb]) -> Result<(), String> {
        self.check(prim_bounds, References::Unique)
    }

    /// [`Bvh2::validate`] for trees built with spatial splits (`bvh-spatial`),
    /// which cut a triangle into parts held by different leaves: every
    /// primitive appears in at least one leaf (`prim_indices` may be longer
    /// than the input), and a leaf's box need only *meet* each of its
    /// primitives' boxes, since it bounds the part inside. That the parts
    /// cover each triangle is the builder's contract (tested against brute
    /// force, not checkable from boxes); every other invariant is the same.
    pub fn validate_split(&self, prim_bounds: &[Aabb]) -> Result<(), String> {
        self.check(prim_bounds, References::Split)
    }

    /// [`Bvh2::validate_split`] where the tree holds more references than
    /// primitives, [`Bvh2::validate`] otherwise: for trees from elsewhere.
    pub fn validate_any(&self, prim_bounds: &[Aabb]) -> Result<(), String> {
        if self.prim_indices.len() > prim_bounds.len() {
            self.validate_split(prim_bounds)
        } else {
            self.validate(prim_bounds)
        }
    }

    fn check(&self, prim_bounds: &[Aabb], references: References) -> Result<(), String> {
        let n = prim_bounds.len();
        let slots = self.prim_indices.len();
        let slots_fit = match references {
            References::Unique => slots == n,
            References::Split => slots >= n,
        };
        if !slots_fit {
            return Err(format!("{slots} prim slots for {n} primitives"));
        }
        if self.nodes.is_empty() {
            return if n == 0 {
                Ok(())
            } else {
                Err(format!("no nodes for {n} primitives"))
            };
        }
        let mut checker = Checker::new(self, prim_bounds, references);
        checker.run()?;
        checker.finish()
    }
}

/// Whether a tree may reference a primitive from several leaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum References {
    /// Each primitive in exactly one leaf, whose box contains it.
    Unique,
    /// Each primitive in at least one leaf, whose box meets it.
    Split,
}

impl Bvh2 {
    /// Checks what [`Bvh2::validate`] leaves to tolerance or does not ask,
    /// for trees built from `input` by another builder (a GPU one, say):
    /// every box is exactly tight (an inner node's box is the union of its
    /// children's, a leaf's the union of its primitives' boxes), leaves hold
    /// at most `max_leaf_size` primitives, and only unplaceable primitives
    /// (see [`BuildInput::is_placeable`]) sit in the parking leaf, a leaf
    /// with the empty box, which may hold any number. Run it after
    /// [`Bvh2::validate`], which guarantees the walk terminates.
    pub fn validate_tight(&self, input: &BuildInput, max_leaf_size: usize) -> Result<(), String> {
        let mut problem = None;
        self.walk(|index, _| {
            if problem.is_some() {
                return;
            }
            problem = self.check_tight(index, input, max_leaf_size).err();
        });
        problem.map_or(Ok(()), Err)
    }

    fn check_tight(&self, index: usize, input: &BuildInput, max_leaf: usize) -> Result<(), String> {
        let node = &self.nodes[index];
        let bounds = node.bounds();
        if !node.is_leaf() {
            let left = node.left_child();
            let union = self.nodes[left]
                .bounds()
                .union(self.nodes[left + 1].bounds());
            return if union == bounds {
                Ok(())
            } else {
                Err(format!(
                    "node {index}'s box {bounds:?} is not its children's union {union:?}"
                ))
            };
        }
        let prims = &self.prim_indices[node.prim_range()];
        let placeable = |&p: &u32| input.is_placeable(p as usize);
        if bounds.is_empty() {
            return match prims.iter().find(|p| placeable(p)) {
                Some(p) => Err(format!("prim {p} is placeable but parked in leaf {index}")),
                None => Ok(()),
            };
        }
        if prims.len() > max_leaf {
            return Err(format!(
                "leaf {index} holds {} prims > {max_leaf}",
                prims.len()
            ));
        }
        if let Some(p) = prims.iter().find(|p| !placeable(p)) {
            return Err(format!("leaf {index} holds unplaceable prim {p}"));
        }
        let union = prims
            .iter()
            .fold(Aabb::EMPTY, |b, &p| b.union(input.bounds[p as usize]));
        if union == bounds {
            Ok(())
        } else {
            Err(format!(
                "leaf {index}'s box {bounds:?} is not its prims' union {union:?}"
            ))
        }
    }
}

/// State of one [`Bvh2::validate`] run.
struct Checker<'a> {
    bvh: &'a Bvh2,
    prim_bounds: &'a [Aabb],
    references: References,
    node_seen: Vec<bool>,
    slot_seen: Vec<bool>,
    prim_seen: Vec<bool>,
    leaves: usize,
}

impl<'a> Checker<'a> {
    fn new(bvh: &'a Bvh2, prim_bounds: &'a [Aabb], references: References) -> Self {
        Self {
            bvh,
            prim_bounds,
            references,
            node_seen: vec![false; bvh.nodes.len()],
            slot_seen: vec![false; bvh.prim_indices.len()],
            prim_seen: vec![false; prim_bounds.len()],
            leaves: 0,
        }
    }

    fn run(&mut self) -> Result<(), String> {
        let nodes = &self.bvh.nodes;
        let mut stack = vec![(0usize, 0usize)];
        while let Some((index, depth)) = stack.pop() {
            if std::mem::replace(&mut self.node_seen[index], true) {
                return Err(format!("node {index} is reachable twice"));
            }
            if depth > MAX_DEPTH {
                return Err(format!("node {index} at depth {depth} > {MAX_DEPTH}"));
            }
            let node = &nodes[index];
            if node.is_leaf() {
                self.check_leaf(index, node)?;
                continue;
            }
            let left = node.first as usize;
            if left == 0 || left + 1 >= nodes.len() {
                return Err(format!(
                    "node {index}: children {left}, {} out of range",
                    left + 1
                ));
            }
            for child in [left, left + 1] {
                let (outer, inner) = (node.bounds(), nodes[child].bounds());
                if !contains_with_tolerance(&outer, &inner) {
                    return Err(format!(
                        "node {child}'s box {inner:?} sticks out of its parent {index}'s box {outer:?}"
                    ));
                }
                stack.push((child, depth + 1));
            }
        }
        Ok(())
    }

    fn check_leaf(&mut self, index: usize, node: &BvhNode) -> Result<(), String> {
        self.leaves += 1;
        let range = node.prim_range();
        if range.end > self.slot_seen.len() {
            return Err(format!("leaf {index}: slots {range:?} past the end"));
        }
        for slot in range {
            if std::mem::replace(&mut self.slot_seen[slot], true) {
                return Err(format!("slot {slot} is in two leaves"));
            }
            let prim = self.bvh.prim_indices[slot] as usize;
            if prim >= self.prim_seen.len() {
                return Err(format!("slot {slot} holds prim {prim}, out of range"));
            }
            let seen = std::mem::replace(&mut self.prim_seen[prim], true);
            if seen && self.references == References::Unique {
                return Err(format!("prim {prim} is referenced twice"));
            }
            let prim_box = self.prim_bounds[prim];
            let parking = node.bounds().is_empty();
            if parking {
                continue;
            }
            match self.references {
                References::Unique if !contains_with_tolerance(&node.bounds(), &prim_box) => {
                    return Err(format!("leaf {index} does not contain prim {prim}'s box"));
                }
                References::Split if !meets_with_tolerance(&node.bounds(), &prim_box) => {
                    return Err(format!("leaf {index} does not meet prim {prim}'s box"));
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn finish(self) -> Result<(), String> {
        if let Some(index) = self.node_seen.iter().position(|seen| !seen) {
            return Err(format!("node {index} is unreachable"));
        }
        if let Some(slot) = self.slot_seen.iter().position(|seen| !seen) {
            return Err(format!("slot {slot} is in no leaf"));
        }
        if let Some(prim) = self.prim_seen.iter().position(|seen| !seen) {
            return Err(format!("prim {prim} is in no leaf"));
        }
        if self.bvh.nodes.len() != 2 * self.leaves - 1 {
            return Err(format!(
                "{} nodes for {} leaves (expected 2 * leaves - 1)",
                self.bvh.nodes.len(),
                self.leaves
            ));
        }
        Ok(())
    }
}

/// Box containment up to a relative tolerance, for trees whose boxes were
/// rounded by another builder (a GPU one, say). An empty `inner` always fits.
pub(crate) fn contains_with_tolerance(outer: &Aabb, inner: &Aabb) -> bool {
    if inner.is_empty() {
        return true;
    }
    let tol = tolerance(outer);
    inner.min.cmpge(outer.min - tol).all() && inner.max.cmple(outer.max + tol).all()
}

/// Whether two boxes share a point, up to the tolerance of
/// [`contains_with_tolerance`]; an empty `inner` always does (it is
/// unplaceable, and validated as such elsewhere).
pub(crate) fn meets_with_tolerance(outer: &Aabb, inner: &Aabb) -> bool {
    if inner.is_empty() {
        return true;
    }
    let tol = tolerance(outer);
    inner.max.cmpge(outer.min - tol).all() && inner.min.cmple(outer.max + tol).all()
}

/// The box checks' tolerance: 1e-6 of `outer`'s largest coordinate (at least 1).
fn tolerance(outer: &Aabb) -> f32 {
    1e-6 * outer.min.abs().max(outer.max.abs()).max_element().max(1.0)
}

/// The SAH cost of a hierarchy as caustic reports it everywhere: the expected
/// cost of a random ray with `C_trav = 1` and `C_isect = 1`, normalised by the
/// root's surface area,
///
/// `sum_inner SA(n) / SA(root) + sum_leaves SA(l) / SA(root) * count(l)`.
///
/// Areas are summed in `f64` so huge scenes do not overflow. A root of zero
/// area (all primitives on a line or a point) counts every node as if it had
/// the root's area. The empty hierarchy costs 0.
pub fn sah_cost(bvh: &Bvh2) -> f32 {
    let Some(root) = bvh.nodes.first() else {
        return 0.0;
    };
    let root_area = surface_area_f64(root);
    let mut total = 0.0f64;
    for node in &bvh.nodes {
        let ratio = if root_area > 0.0 {
            surface_area_f64(node) / root_area
        } else {
            1.0
        };
        let weight = if node.is_leaf() {
            node.count as f64
        } else {
            1.0
        };
        total += ratio * weight;
    }
    total as f32
}

/// Surface area of a node's box in `f64`; 0 for an empty box.
fn surface_area_f64(node: &BvhNode) -> f64 {
    let e: [f64; 3] = std::array::from_fn(|k| node.max[k] as f64 - node.min[k] as f64);
    if !e.iter().all(|&x| x.is_finite() && x >= 0.0) {
        return 0.0;
    }
    2.0 * (e[0] * e[1] + e[1] * e[2] + e[2] * e[0])
}

#[cfg(test)]
mod tests {
    use super::*;
    use caustic_geom::Vec3;

    fn unit_box(x: f32) -> Aabb {
        Aabb::new(Vec3::new(x, 0.0, 0.0), Vec3::new(x + 1.0, 1.0, 1.0))
    }

    /// Root over two single-prim leaves: prims at x = 0 and x = 2.
    fn two_leaf_tree() -> (Bvh2, Vec<Aabb>) {
        let prims = vec![unit_box(0.0), unit_box(2.0)];
        let bvh = Bvh2 {
            nodes: vec![
                BvhNode::inner(prims[0].union(prims[1]), 1),
                BvhNode::leaf(prims[0], 0, 1),
                BvhNode::leaf(prims[1], 1, 1),
            ],
            prim_indices: vec![0, 1],
        };
        (bvh, prims)
    }

    #[test]
    fn valid_tree_passes_and_has_the_expected_shape() {
        let (bvh, prims) = two_leaf_tree();
        bvh.validate(&prims).unwrap();
        let shape = bvh.shape();
        assert_eq!((shape.nodes, shape.leaves, shape.max_depth), (3, 2, 1));
        assert_eq!(shape.max_leaf_size, 1);
    }

    #[test]
    fn validate_reports_each_kind_of_corruption() {
        let (good, prims) = two_leaf_tree();
        let mut bad = good.clone();
        bad.prim_indices = vec![1, 1];
        assert!(bad.validate(&prims).unwrap_err().contains("twice"));
        let mut bad = good.clone();
        bad.nodes[1].max[0] = 10.0;
        assert!(bad.validate(&prims).unwrap_err().contains("sticks out"));
        let mut bad = good.clone();
        bad.nodes[0].first = 2;
        assert!(bad.validate(&prims).is_err());
        let mut bad = good.clone();
        bad.nodes[2] = BvhNode::leaf(prims[0], 0, 1);
        assert!(bad.validate(&prims).is_err());
        let mut bad = good.clone();
        bad.nodes.push(BvhNode::leaf(prims[0], 0, 1));
        assert!(bad.validate(&prims).unwrap_err().contains("unreachable"));
        assert!(good.validate(&prims[..1]).is_err());
        assert!(Bvh2::empty().validate(&[]).is_ok());
        assert!(Bvh2::empty().validate(&prims).is_err());
    }

    #[test]
    fn validate_tight_finds_loose_boxes_big_leaves_and_wrong_parking() {
        let (good, prims) = two_leaf_tree();
        let input = BuildInput {
            centroids: prims.iter().map(Aabb::center).collect(),
            bounds: prims.clone(),
        };
        good.validate_tight(&input, 1).unwrap();
        let mut loose = good.clone();
        loose.nodes[0].max[1] = 2.0;
        assert!(
            loose
                .validate_tight(&input, 1)
                .unwrap_err()
                .contains("children's union")
        );
        let mut loose_leaf = good.clone();
        loose_leaf.nodes[1].min[0] = -1.0;
        loose_leaf.nodes[0].min[0] = -1.0;
        assert!(
            loose_leaf
                .validate_tight(&input, 1)
                .unwrap_err()
                .contains("prims' union")
        );
        let one_leaf = Bvh2 {
            nodes: vec![BvhNode::leaf(prims[0].union(prims[1]), 0, 2)],
            prim_indices: vec![0, 1],
        };
        one_leaf.validate_tight(&input, 2).unwrap();
        assert!(
            one_leaf
                .validate_tight(&input, 1)
                .unwrap_err()
                .contains("> 1")
        );
        let parked = Bvh2 {
            nodes: vec![BvhNode::leaf(Aabb::EMPTY, 0, 2)],
            prim_indices: vec![0, 1],
        };
        assert!(
            parked
                .validate_tight(&input, 8)
                .unwrap_err()
                .contains("parked")
        );
        let mut nan = input.clone();
        nan.bounds = vec![Aabb::new(Vec3::splat(f32::NAN), Vec3::ONE); 2];
        nan.centroids = vec![Vec3::splat(f32::NAN); 2];
        parked.validate_tight(&nan, 1).unwrap();
    }

    #[test]
    fn sah_cost_of_a_hand_built_tree() {
        let (bvh, _) = two_leaf_tree();
        // Root 1x1x3: area 14; leaves unit cubes: area 6 each, one prim each.
        let expected = 1.0 + 2.0 * 6.0 / 14.0;
        assert!((sah_cost(&bvh) - expected).abs() < 1e-6);
        assert_eq!(sah_cost(&Bvh2::empty()), 0.0);
    }

    #[test]
    fn sah_cost_of_a_point_sized_root_is_finite() {
        let point = Aabb::from_point(Vec3::ONE);
        let bvh = Bvh2 {
            nodes: vec![BvhNode::leaf(point, 0, 3)],
            prim_indices: vec![0, 1, 2],
        };
        assert_eq!(sah_cost(&bvh), 3.0);
    }
}
