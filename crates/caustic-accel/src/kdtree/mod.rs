//! The SAH kd-tree over triangles (`kdtree`), after Zhou, Hou, Wang and Guo,
//! "Real-Time KD-Tree Construction on Graphics Hardware" (SIGGRAPH Asia
//! 2008) and its reimplementation in Zeidan's thesis (Zeidan 2011,
//! §6): a large-node stage of empty-space cut-offs and spatial-median
//! splits with triangle clipping, then a small-node stage of exact SAH over
//! bit-mask triangle sets ([`build_sah`]), traced front to back with a stack
//! ([`traverse`]).
//!
//! [`KdTree`] is plain data: 8-byte [`KdNode`]s, a culling box per node, and
//! the leaves' triangle references. Invariants, checked by
//! [`KdTree::validate`] after every build in debug builds:
//! - node 0 is the root and its cell is [`KdTree::bounds`]; an inner node's
//!   children sit at `left`, `left + 1` and split its cell at a plane inside
//!   it; every node is reachable exactly once, children after their parent;
//!   no leaf is deeper than [`MAX_DEPTH`]; `nodes.len() == 2 * leaves - 1`;
//! - the leaves' reference ranges tile `prims` (each reference in one leaf);
//! - every reference's triangle box meets its leaf's cell (the triangle
//!   itself may not: the small-node stage does not clip), and every point
//!   of a hittable triangle lies in a leaf that references it (sampled at
//!   the vertices, edge midpoints and centroid): clipping drops no part;
//! - `ref_bounds[n]` is the box of the *whole* triangles referenced below
//!   `n` (not of their clipped parts); the traversal culls by it (see
//!   [`traverse`] for why it must be the whole triangles).
//!
//! Triangles with a non-finite coordinate can never be hit (the watertight
//! test rejects them) and are left out; the tree over no hittable triangle
//! has no nodes.

#[cfg(feature = "cuda")]
pub mod build_cuda;
pub mod build_sah;
mod clip;
mod node;
pub mod traverse;
#[cfg(feature = "cuda")]
pub mod traverse_cuda;
mod triangle_kdtree;

pub use build_sah::{KdTreeBuilder, KdTreeConfig};
pub use clip::clipped_bounds;
pub use node::{KdNode, MAX_INDEX};
pub use triangle_kdtree::TriangleKdTree;

use caustic_geom::{Aabb, Triangle, Vec3};

/// The deepest a leaf may sit (root at 0); the traversal stack has this
/// many entries. Builders stop splitting at [`KdTreeConfig::max_depth`],
/// which may not exceed it.
pub const MAX_DEPTH: usize = 64;

/// A kd-tree over triangles as plain data.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KdTree {
    /// Node 0 is the root; empty when no triangle can be hit.
    pub nodes: Vec<KdNode>,
    /// Per node, the box of the whole triangles referenced in its subtree;
    /// the empty box for an empty leaf.
    pub ref_bounds: Vec<Aabb>,
    /// Leaf references: `prims[k]` is the scene index of reference `k`'s
    /// triangle. A triangle that straddles leaves appears once per leaf.
    pub prims: Vec<u32>,
    /// The root's cell: the box of every hittable triangle.
    pub bounds: Aabb,
}

/// Shape figures of a [`KdTree`], gathered in one walk.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct KdShape {
    pub nodes: usize,
    pub leaves: usize,
    /// Leaves that reference no triangle (cut-off empty space).
    pub empty_leaves: usize,
    /// Depth of the deepest leaf; the root is at depth 0.
    pub max_depth: usize,
    /// Most references in one leaf.
    pub max_leaf_size: usize,
    /// Triangle references over all leaves (`prims.len()`).
    pub references: usize,
}

impl KdTree {
    pub fn empty() -> Self {
        Self {
            bounds: Aabb::EMPTY,
            ..Self::default()
        }
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Walks the tree depth first, calling `visit(index, cell, depth)` once
    /// per node with the node's cell. Safe on corrupt trees: it does not
    /// descend into out-of-range children or past `2 * MAX_DEPTH` levels.
    pub fn walk(&self, mut visit: impl FnMut(usize, &Aabb, usize)) {
        if self.nodes.is_empty() {
            return;
        }
        let mut stack = vec![(0usize, self.bounds, 0usize)];
        while let Some((index, cell, depth)) = stack.pop() {
            visit(index, &cell, depth);
            let node = &self.nodes[index];
            let left = node.left_child();
            if !node.is_leaf() && left + 1 < self.nodes.len() && depth < 2 * MAX_DEPTH {
                let (below, above) = split_cell(&cell, node.axis(), node.split());
                stack.push((left + 1, above, depth + 1));
                stack.push((left, below, depth + 1));
            }
        }
    }

    /// Node, leaf, depth and reference figures.
    pub fn shape(&self) -> KdShape {
        let mut shape = KdShape {
            nodes: self.nodes.len(),
            references: self.prims.len(),
            ..KdShape::default()
        };
        self.walk(|index, _, depth| {
            let node = &self.nodes[index];
            if node.is_leaf() {
                shape.leaves += 1;
                shape.empty_leaves += usize::from(node.count() == 0);
                shape.max_depth = shape.max_depth.max(depth);
                shape.max_leaf_size = shape.max_leaf_size.max(node.count());
            }
        });
        shape
    }

    /// The SAH cost as caustic reports it for every structure (DESIGN.md:
    /// `C_trav = C_isect = 1`, normalised by the root's surface area), with
    /// the kd-tree's cells as the node areas:
    ///
    /// `sum_inner SA(cell) / SA(root) + sum_leaves SA(cell) / SA(root) * refs(leaf)`,
    ///
    /// where a straddling triangle counts once in every leaf that
    /// references it. Areas are summed in `f64`; a root cell of zero area
    /// counts every node with the root's area. 0 for the empty tree.
    pub fn sah_cost(&self) -> f32 {
        let root_area = area_f64(&self.bounds);
        let mut total = 0.0f64;
        self.walk(|index, cell, _| {
            let ratio = if root_area > 0.0 {
                area_f64(cell) / root_area
            } else {
                1.0
            };
            let node = &self.nodes[index];
            let weight = if node.is_leaf() {
                node.count() as f64
            } else {
                1.0
            };
            total += ratio * weight;
        });
        total as f32
    }

    /// Bytes held by the tree (nodes, culling boxes, references).
    pub fn bytes(&self) -> usize {
        std::mem::size_of_val(self.nodes.as_slice())
            + std::mem::size_of_val(self.ref_bounds.as_slice())
            + std::mem::size_of_val(self.prims.as_slice())
    }

    /// Checks every invariant of the module docs against the triangles the
    /// tree was built from; returns the first violation found.
    pub fn validate(&self, triangles: &[Triangle]) -> Result<(), String> {
        if self.nodes.is_empty() {
            return match triangles.iter().position(is_hittable) {
                Some(i) => Err(format!("no nodes, but triangle {i} can be hit")),
                None if self.prims.is_empty() => Ok(()),
                None => Err("references without nodes".into()),
            };
        }
        if self.ref_bounds.len() != self.nodes.len() {
            return Err(format!(
                "{} culling boxes for {} nodes",
                self.ref_bounds.len(),
                self.nodes.len()
            ));
        }
        self.check_structure(triangles)?;
        self.check_coverage(triangles)
    }

    /// Reachability, layout, depth, reference tiling and culling boxes.
    fn check_structure(&self, triangles: &[Triangle]) -> Result<(), String> {
        let mut seen = vec![false; self.nodes.len()];
        let mut covered = vec![false; self.prims.len()];
        let mut leaves = 0;
        let mut problem = None;
        self.walk(|index, cell, depth| {
            if problem.is_some() {
                return;
            }
            problem = self.check_node(index, cell, depth, &mut seen, &mut covered, triangles);
            leaves += usize::from(self.nodes[index].is_leaf());
        });
        if let Some(problem) = problem {
            return Err(problem);
        }
        if let Some(index) = seen.iter().position(|s| !s) {
            return Err(format!("node {index} is unreachable"));
        }
        if let Some(slot) = covered.iter().position(|c| !c) {
            return Err(format!("reference {slot} is in no leaf"));
        }
        if self.nodes.len() != 2 * leaves - 1 {
            return Err(format!("{} nodes for {leaves} leaves", self.nodes.len()));
        }
        Ok(())
    }

    fn check_node(
        &self,
        index: usize,
        cell: &Aabb,
        depth: usize,
        seen: &mut [bool],
        covered: &mut [bool],
        triangles: &[Triangle],
    ) -> Option<String> {
        if std::mem::replace(&mut seen[index], true) {
            return Some(format!("node {index} is reachable twice"));
        }
        if depth > MAX_DEPTH {
            return Some(format!("node {index} at depth {depth} > {MAX_DEPTH}"));
        }
        let node = &self.nodes[index];
        let expected = if node.is_leaf() {
            let refs = node.refs();
            if refs.end > self.prims.len() {
                return Some(format!("leaf {index}: references {refs:?} past the end"));
            }
            for slot in refs.clone() {
                if std::mem::replace(&mut covered[slot], true) {
                    return Some(format!("reference {slot} is in two leaves"));
                }
            }
            let mut b = Aabb::EMPTY;
            for &prim in &self.prims[refs] {
                let Some(tri) = triangles.get(prim as usize) else {
                    return Some(format!("leaf {index} references triangle {prim}"));
                };
                // The small-node stage does not clip, so a reference's
                // triangle may miss its cell, but not the triangle's box.
                let cell = grown(cell);
                if !is_hittable(tri) || tri.bounds().intersection(cell).is_empty() {
                    return Some(format!("leaf {index} references {prim}, outside its cell"));
                }
                b = b.union(tri.bounds());
            }
            b
        } else {
            let (left, axis, split) = (node.left_child(), node.axis(), node.split());
            if left <= index || left + 1 >= self.nodes.len() {
                return Some(format!("node {index}: children at {left} out of order"));
            }
            if !(cell.min[axis] <= split && split <= cell.max[axis]) {
                return Some(format!(
                    "node {index}: split {split} outside its cell {cell:?}"
                ));
            }
            self.ref_bounds[left].union(self.ref_bounds[left + 1])
        };
        (self.ref_bounds[index] != expected).then(|| {
            format!(
                "node {index}: culling box {:?}, expected {expected:?}",
                self.ref_bounds[index]
            )
        })
    }

    /// Every sampled point of every hittable triangle lies in a leaf that
    /// references the triangle (points on a split plane may go either way).
    fn check_coverage(&self, triangles: &[Triangle]) -> Result<(), String> {
        for (id, tri) in triangles.iter().enumerate() {
            if !is_hittable(tri) {
                continue;
            }
            let (a, b, c) = (tri.v0, tri.v1, tri.v2);
            let samples = [
                a,
                b,
                c,
                (a + b) * 0.5,
                (b + c) * 0.5,
                (c + a) * 0.5,
                tri.centroid(),
            ];
            for p in samples {
                if !self
                    .leaves_at(p)
                    .iter()
                    .any(|leaf| self.prims[self.nodes[*leaf].refs()].contains(&(id as u32)))
                {
                    return Err(format!("point {p:?} of triangle {id} is in no leaf of it"));
                }
            }
        }
        Ok(())
    }

    /// Leaves whose cells contain `p`, found by descending the splits; a
    /// point within a rounding margin of a plane goes to both sides.
    fn leaves_at(&self, p: Vec3) -> Vec<usize> {
        let margin = grown(&self.bounds).max - self.bounds.max;
        let mut found = Vec::new();
        let mut stack = vec![(0usize, 0usize)];
        while let Some((index, depth)) = stack.pop() {
            let node = &self.nodes[index];
            if node.is_leaf() {
                found.push(index);
                continue;
            }
            let (axis, split, left) = (node.axis(), node.split(), node.left_child());
            if depth > 2 * MAX_DEPTH || left + 1 >= self.nodes.len() {
                continue;
            }
            if p[axis] <= split + margin[axis] {
                stack.push((left, depth + 1));
            }
            if p[axis] >= split - margin[axis] {
                stack.push((left + 1, depth + 1));
            }
        }
        found
    }
}

/// A triangle the watertight test can hit: finite coordinates.
fn is_hittable(tri: &Triangle) -> bool {
    tri.is_finite()
}

/// The two halves of `cell` split at `split` on `axis`.
pub(crate) fn split_cell(cell: &Aabb, axis: usize, split: f32) -> (Aabb, Aabb) {
    let (mut below, mut above) = (*cell, *cell);
    below.max[axis] = split;
    above.min[axis] = split;
    (below, above)
}

/// `cell` grown by a small relative margin, for checks on rounded data.
fn grown(cell: &Aabb) -> Aabb {
    let scale = cell.min.abs().max(cell.max.abs()).max_element().max(1e-30);
    let margin = Vec3::splat(scale * 1e-5);
    Aabb::new(cell.min - margin, cell.max + margin)
}

/// Surface area in `f64`; 0 for an empty or non-finite box.
fn area_f64(b: &Aabb) -> f64 {
    let e: [f64; 3] = std::array::from_fn(|k| b.max[k] as f64 - b.min[k] as f64);
    if !e.iter().all(|&x| x.is_finite() && x >= 0.0) {
        return 0.0;
    }
    2.0 * (e[0] * e[1] + e[1] * e[2] + e[2] * e[0])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two triangles, one on each side of x = 1, under one split.
    fn two_leaf_tree() -> (KdTree, Vec<Triangle>) {
        let left = Triangle::new(Vec3::ZERO, Vec3::new(0.5, 0.0, 0.0), Vec3::Y);
        let right = Triangle::new(
            Vec3::new(1.5, 0.0, 0.0),
            Vec3::new(2.0, 0.0, 0.0),
            Vec3::new(2.0, 1.0, 0.0),
        );
        let tree = KdTree {
            nodes: vec![
                KdNode::inner(0, 1.0, 1),
                KdNode::leaf(0, 1),
                KdNode::leaf(1, 1),
            ],
            ref_bounds: vec![
                left.bounds().union(right.bounds()),
                left.bounds(),
                right.bounds(),
            ],
            prims: vec![0, 1],
            bounds: left.bounds().union(right.bounds()),
        };
        (tree, vec![left, right])
    }

    #[test]
    fn a_valid_tree_passes_with_the_expected_shape_and_cost() {
        let (tree, tris) = two_leaf_tree();
        tree.validate(&tris).unwrap();
        let shape = tree.shape();
        assert_eq!((shape.nodes, shape.leaves, shape.max_depth), (3, 2, 1));
        assert_eq!((shape.references, shape.empty_leaves), (2, 0));
        // Flat 2x1 root (area 4); each leaf is a 1x1 flat cell (area 2).
        assert!((tree.sah_cost() - 2.0).abs() < 1e-6);
        assert_eq!(KdTree::empty().sah_cost(), 0.0);
    }

    #[test]
    fn validate_reports_each_kind_of_corruption() {
        let (good, tris) = two_leaf_tree();
        let mut bad = good.clone();
        bad.prims = vec![1, 0];
        assert!(
            bad.validate(&tris)
                .unwrap_err()
                .contains("outside its cell")
        );
        let mut bad = good.clone();
        bad.nodes[2] = KdNode::leaf(1, 0);
        assert!(bad.validate(&tris).is_err());
        let mut bad = good.clone();
        bad.nodes[0] = KdNode::inner(0, 5.0, 1);
        assert!(
            bad.validate(&tris)
                .unwrap_err()
                .contains("outside its cell")
        );
        let mut bad = good.clone();
        bad.ref_bounds[0] = tris[0].bounds();
        assert!(bad.validate(&tris).unwrap_err().contains("culling box"));
        let mut bad = good.clone();
        bad.nodes.push(KdNode::leaf(2, 0));
        bad.ref_bounds.push(Aabb::EMPTY);
        assert!(bad.validate(&tris).unwrap_err().contains("unreachable"));
        // Dropping the right triangle's reference loses coverage.
        let mut bad = good.clone();
        bad.nodes[2] = KdNode::leaf(1, 0);
        bad.prims.pop();
        bad.ref_bounds[2] = Aabb::EMPTY;
        bad.ref_bounds[0] = tris[0].bounds();
        assert!(bad.validate(&tris).unwrap_err().contains("no leaf"));
        assert!(KdTree::empty().validate(&[]).is_ok());
        assert!(KdTree::empty().validate(&tris).is_err());
    }
}
