//! `kdtree` construction after Zhou et al. 2008 (§3) as
//! reimplemented in Zeidan's thesis (2011, §6), breadth first in two
//! stages:
//!
//! 1. **Large-node stage** (`large_nodes`): while nodes hold more than
//!    [`KdTreeConfig::small_node_max`] triangle references, each level of
//!    them is split at once: empty space of at least
//!    [`KdTreeConfig::empty_space_ratio`] of a side is cut off (a chain of
//!    inner nodes with empty leaves), then the rest is split at the spatial
//!    median of its longest axis. Triangles straddling the plane are
//!    clipped to each child (`super::clip`), so children see tight boxes.
//! 2. **Small-node stage** (`small_nodes`): every node of at most
//!    `small_node_max` references (a *small root*) becomes a subtree built
//!    with the exact SAH over the faces of its references' boxes, triangle
//!    sets being `u64` bit masks over the small root's references.
//!
//! Parallelism: as in the papers, breadth first per stage. The large-node
//! stage maps all nodes of a level in parallel, and a node with at least
//! [`KdTreeConfig::parallel_min_refs`] references also bounds and
//! partitions its references in parallel chunks (the top levels hold few,
//! huge nodes); the small-node stage builds all small roots in parallel,
//! each on one thread. Node slots are handed out in a sequential pass per
//! level, so the tree does not depend on the thread count.
//!
//! 3. **Output stage** (Zhou's `PreorderTraversal`): the nodes are rewritten
//!    depth first, each pair of children followed by the left child's
//!    subtree, then the right one's, and the references in leaf order.
//!    Zhou computes the addresses with two parallel passes over the levels;
//!    one sequential pass costs about a millisecond per 250 k nodes here.
//!
//! Last, every node gets its culling box, the box of the whole triangles
//! below it (leaves in parallel, then bottom up; see [`super::traverse`]).

pub(crate) mod large_nodes;
mod small_nodes;

use super::{KdNode, KdTree, MAX_DEPTH, MAX_INDEX};
use caustic_geom::{Aabb, Triangle};
use large_nodes::{LargeNode, LargeOutcome, Ref, split_large};
use rayon::prelude::*;
use small_nodes::{SmallTree, build_small};

/// Settings of the kd-tree builder. Costs are relative: only the ratio of
/// `traversal_cost` to `intersection_cost` changes the tree.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KdTreeConfig {
    /// Nodes with more references than this are large (Zhou's `T`, 64):
    /// split by the spatial median; smaller ones are small roots, built by
    /// the SAH with bit masks, so at most 64.
    pub small_node_max: usize,
    /// Empty space on one side of a large node is cut off when it is at
    /// least this fraction of the node's extent on that axis (Zhou's
    /// `C_e`, 25 %).
    pub empty_space_ratio: f32,
    /// SAH cost of stepping through an inner node (`C_trav`).
    pub traversal_cost: f32,
    /// SAH cost of one ray–triangle test (`C_isect`).
    pub intersection_cost: f32,
    /// Nodes at this depth become leaves; at most [`MAX_DEPTH`].
    pub max_depth: usize,
    /// Large nodes with at least this many references bound and partition
    /// them on several threads.
    pub parallel_min_refs: usize,
}

impl KdTreeConfig {
    /// `kdtree`: Zhou's constants (`T = 64`, `C_e = 25 %`) and
    /// `C_trav = C_isect` (Zhou normalises `C_isect` to 1 and does not give
    /// `C_trav`). Of the ratios `C_trav / C_isect` 1/4, 1/2, 2/3, 1 and 2,
    /// 1 traced as fast as any on sibenik and the bunny and gave the
    /// fewest nodes: lower ratios split down to leaves of one or two
    /// references, duplicating every triangle six times or more, since
    /// the small-node stage does not clip.
    pub const DEFAULT: Self = Self {
        small_node_max: 64,
        empty_space_ratio: 0.25,
        traversal_cost: 1.0,
        intersection_cost: 1.0,
        max_depth: MAX_DEPTH,
        parallel_min_refs: 16 * 1024,
    };

    /// The same settings with every node handled on one thread (the level
    /// and small-root maps still use the caller's rayon pool).
    pub const fn sequential(self) -> Self {
        Self {
            parallel_min_refs: usize::MAX,
            ..self
        }
    }
}

impl Default for KdTreeConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Builds [`KdTree`]s; it sees the triangles themselves because it clips
/// them.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct KdTreeBuilder {
    pub config: KdTreeConfig,
}

/// A node slot waiting for the small-node stage.
struct SmallRoot {
    slot: usize,
    node: LargeNode,
}

/// The node and reference arrays under construction.
struct Output {
    nodes: Vec<KdNode>,
    prims: Vec<u32>,
}

impl KdTreeBuilder {
    pub fn new(config: KdTreeConfig) -> Self {
        assert!(
            (1..=64).contains(&config.small_node_max),
            "small_node_max must be 1..=64 (u64 masks)"
        );
        assert!(config.max_depth <= MAX_DEPTH, "max_depth above MAX_DEPTH");
        Self { config }
    }

    /// The tree over `triangles`; never panics on degenerate input (none,
    /// coincident, flat, huge or non-finite triangles).
    pub fn build(&self, triangles: &[Triangle]) -> KdTree {
        self.build_counted(triangles).0
    }

    /// [`Self::build`], also returning the peak bytes of the build's large
    /// buffers: references (counted per level of the large-node stage,
    /// where a level's parents and children coexist), the small roots'
    /// subtrees and the output arrays, of which the output stage holds two
    /// copies. The triangles themselves are not counted.
    pub fn build_counted(&self, triangles: &[Triangle]) -> (KdTree, usize) {
        let refs = root_refs(triangles);
        if refs.is_empty() {
            return (KdTree::empty(), 0);
        }
        let bounds = refs.iter().fold(Aabb::EMPTY, |b, r| b.union(r.bounds));
        let mut out = Output {
            nodes: vec![KdNode::leaf(0, 0)],
            prims: Vec::new(),
        };
        let root = LargeNode {
            cell: bounds,
            refs,
            depth: 0,
        };
        let (small, mut peak) = self.large_stage(root, triangles, &mut out);
        let subtrees: Vec<SmallTree> = small
            .par_iter()
            .map(|s| build_small(&s.node, &self.config))
            .collect();
        for (root, subtree) in small.iter().zip(subtrees) {
            out.splice(root.slot, subtree);
        }
        peak = peak.max(ref_bytes(&small) + 2 * out.bytes());
        assert!(
            out.nodes.len() <= MAX_INDEX && out.prims.len() <= MAX_INDEX,
            "kd-tree too large for 30-bit indices"
        );
        let out = {
            let relaid = depth_first(&out);
            drop(out);
            relaid
        };
        let ref_bounds = culling_boxes(&out.nodes, &out.prims, triangles);
        let tree = KdTree {
            nodes: out.nodes,
            ref_bounds,
            prims: out.prims,
            bounds,
        };
        debug_validate(&tree, triangles);
        let peak = peak.max(tree.bytes());
        (tree, peak)
    }

    /// Splits large nodes level by level; returns the small roots and the
    /// peak bytes held (see [`Self::build_counted`]).
    fn large_stage(
        &self,
        root: LargeNode,
        triangles: &[Triangle],
        out: &mut Output,
    ) -> (Vec<SmallRoot>, usize) {
        let mut active = Vec::new();
        let mut small = Vec::new();
        let mut peak = 0;
        out.route(0, root, &self.config, &mut active, &mut small);
        while !active.is_empty() {
            let parents = ref_bytes(&active);
            let outcomes: Vec<(usize, LargeOutcome)> = std::mem::take(&mut active)
                .into_par_iter()
                .map(|s| (s.slot, split_large(s.node, triangles, &self.config)))
                .collect();
            for (slot, outcome) in outcomes {
                out.place(slot, outcome, &self.config, &mut active, &mut small);
            }
            peak = peak.max(parents + ref_bytes(&active) + ref_bytes(&small) + out.bytes());
        }
        (small, peak)
    }
}

/// Bytes of the references held by `nodes`.
fn ref_bytes(nodes: &[SmallRoot]) -> usize {
    nodes.iter().map(|n| n.node.refs.len()).sum::<usize>() * std::mem::size_of::<Ref>()
}

impl Output {
    fn bytes(&self) -> usize {
        std::mem::size_of_val(self.nodes.as_slice()) + std::mem::size_of_val(self.prims.as_slice())
    }

    /// Two adjacent fresh slots; returns the first.
    fn alloc_pair(&mut self) -> usize {
        let first = self.nodes.len();
        self.nodes.extend([KdNode::leaf(0, 0); 2]);
        first
    }

    fn leaf(&mut self, slot: usize, refs: &[Ref]) {
        self.nodes[slot] = KdNode::leaf(self.prims.len(), refs.len());
        self.prims.extend(refs.iter().map(|r| r.prim));
    }

    /// Sends a new node to the leaf, small or large list by its size.
    fn route(
        &mut self,
        slot: usize,
        node: LargeNode,
        config: &KdTreeConfig,
        active: &mut Vec<SmallRoot>,
        small: &mut Vec<SmallRoot>,
    ) {
        if node.refs.is_empty() {
            self.leaf(slot, &[]);
        } else if node.refs.len() <= config.small_node_max {
            small.push(SmallRoot { slot, node });
        } else {
            active.push(SmallRoot { slot, node });
        }
    }

    /// Writes a large node's outcome at `slot`: its chain of empty-space
    /// cuts, then the median split, whose children are routed on.
    fn place(
        &mut self,
        slot: usize,
        outcome: LargeOutcome,
        config: &KdTreeConfig,
        active: &mut Vec<SmallRoot>,
        small: &mut Vec<SmallRoot>,
    ) {
        let (cuts, axis, split, children) = match outcome {
            LargeOutcome::Leaf(node) => return self.leaf(slot, &node.refs),
            LargeOutcome::Split {
                cuts,
                axis,
                split,
                children,
            } => (cuts, axis, split, children),
        };
        let mut at = slot;
        for cut in cuts {
            let pair = self.alloc_pair();
            self.nodes[at] = KdNode::inner(cut.axis, cut.plane, pair);
            let (empty, rest) = if cut.empty_below {
                (pair, pair + 1)
            } else {
                (pair + 1, pair)
            };
            self.leaf(empty, &[]);
            at = rest;
        }
        let pair = self.alloc_pair();
        self.nodes[at] = KdNode::inner(axis, split, pair);
        let [below, above] = children;
        self.route(pair, below, config, active, small);
        self.route(pair + 1, above, config, active, small);
    }

    /// Copies a small root's subtree in: its root into `slot`, the rest
    /// appended, indices shifted.
    fn splice(&mut self, slot: usize, subtree: SmallTree) {
        let base = self.nodes.len();
        let first_ref = self.prims.len();
        let global = |local: usize| if local == 0 { slot } else { base + local - 1 };
        for (local, node) in subtree.nodes.iter().enumerate() {
            let node = if node.is_leaf() {
                KdNode::leaf(first_ref + node.refs().start, node.count())
            } else {
                KdNode::inner(node.axis(), node.split(), global(node.left_child()))
            };
            if local == 0 {
                self.nodes[slot] = node;
            } else {
                self.nodes.push(node);
            }
        }
        self.prims.extend(subtree.prims);
    }
}

/// Zhou's output stage: the nodes rewritten depth first (each pair of
/// children, then the left child's subtree, then the right one's) and the
/// references in the order of their leaves, so the traversal's path runs
/// through nearby memory. The breadth-first build leaves the large-node
/// levels spread over the array.
fn depth_first(tree: &Output) -> Output {
    let mut out = Output {
        nodes: Vec::with_capacity(tree.nodes.len()),
        prims: Vec::with_capacity(tree.prims.len()),
    };
    out.nodes.push(KdNode::leaf(0, 0));
    // (old index, new index) of nodes whose content is still to be written.
    let mut stack = vec![(0usize, 0usize)];
    while let Some((old, new)) = stack.pop() {
        let node = tree.nodes[old];
        if node.is_leaf() {
            out.nodes[new] = KdNode::leaf(out.prims.len(), node.count());
            out.prims.extend_from_slice(&tree.prims[node.refs()]);
            continue;
        }
        let pair = out.alloc_pair();
        out.nodes[new] = KdNode::inner(node.axis(), node.split(), pair);
        stack.push((node.left_child() + 1, pair + 1));
        stack.push((node.left_child(), pair));
    }
    out
}

/// One reference per hittable triangle, with its box.
fn root_refs(triangles: &[Triangle]) -> Vec<Ref> {
    triangles
        .par_iter()
        .enumerate()
        .filter(|(_, t)| t.is_finite())
        .map(|(prim, t)| Ref {
            prim: prim as u32,
            bounds: t.bounds(),
        })
        .collect()
}

/// Per node, the box of the whole triangles its subtree references:
/// leaves in parallel, then inner nodes bottom up (children come after
/// their parent).
fn culling_boxes(nodes: &[KdNode], prims: &[u32], triangles: &[Triangle]) -> Vec<Aabb> {
    let mut boxes: Vec<Aabb> = nodes
        .par_iter()
        .map(|node| {
            if !node.is_leaf() {
                return Aabb::EMPTY;
            }
            prims[node.refs()]
                .iter()
                .fold(Aabb::EMPTY, |b, &p| b.union(triangles[p as usize].bounds()))
        })
        .collect();
    for index in (0..nodes.len()).rev() {
        let node = &nodes[index];
        if !node.is_leaf() {
            let left = node.left_child();
            boxes[index] = boxes[left].union(boxes[left + 1]);
        }
    }
    boxes
}

/// Runs [`KdTree::validate`] in debug builds; compiled out of release
/// builds.
fn debug_validate(tree: &KdTree, triangles: &[Triangle]) {
    if cfg!(debug_assertions) {
        tree.validate(triangles)
            .unwrap_or_else(|problem| panic!("kdtree built an invalid tree: {problem}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use caustic_geom::{Pcg32, Vec3};

    fn random_soup(count: usize, seed: u64) -> Vec<Triangle> {
        let mut rng = Pcg32::new(seed, 3);
        let mut coord = |scale: f32| (rng.next_f32() - 0.5) * scale;
        (0..count)
            .map(|_| {
                let p = Vec3::new(coord(20.0), coord(20.0), coord(20.0));
                let mut q = || p + Vec3::new(coord(2.0), coord(2.0), coord(2.0));
                Triangle::new(p, q(), q())
            })
            .collect()
    }

    #[test]
    fn builds_valid_trees_over_random_soups() {
        for (count, seed) in [(1, 1), (10, 2), (100, 3), (3000, 4)] {
            let tris = random_soup(count, seed);
            let tree = KdTreeBuilder::default().build(&tris);
            tree.validate(&tris).unwrap();
            let shape = tree.shape();
            assert!(shape.references >= count, "{shape:?}");
            assert!(tree.sah_cost() > 0.0);
        }
    }

    #[test]
    fn large_stage_cuts_empty_space_and_clips() {
        // Two far-apart clusters: the root's cell is mostly empty between
        // them, so the large stage must cut or split it there.
        let mut tris = random_soup(500, 5);
        let shift = Vec3::new(1000.0, 0.0, 0.0);
        tris.extend(
            random_soup(500, 6)
                .iter()
                .map(|t| Triangle::new(t.v0 + shift, t.v1 + shift, t.v2 + shift)),
        );
        let tree = KdTreeBuilder::default().build(&tris);
        tree.validate(&tris).unwrap();
        let shape = tree.shape();
        assert!(shape.empty_leaves > 0, "{shape:?}");
        // Clipping keeps duplication modest on a random soup.
        assert!(shape.references < 3 * tris.len(), "{shape:?}");
    }

    #[test]
    fn degenerate_inputs() {
        assert!(KdTreeBuilder::default().build(&[]).is_empty());
        let nan = Triangle::new(Vec3::splat(f32::NAN), Vec3::X, Vec3::Y);
        assert!(KdTreeBuilder::default().build(&[nan]).is_empty());
        // Many copies of one triangle: more than a small node holds, and no
        // split separates them; the builder must stop, not recurse forever.
        let same = vec![Triangle::new(Vec3::ZERO, Vec3::X, Vec3::Y); 200];
        let tree = KdTreeBuilder::default().build(&same);
        tree.validate(&same).unwrap();
        assert!(tree.shape().max_leaf_size >= 200);
        // All triangles at one point.
        let point = vec![Triangle::new(Vec3::ONE, Vec3::ONE, Vec3::ONE); 100];
        KdTreeBuilder::default()
            .build(&point)
            .validate(&point)
            .unwrap();
    }

    #[test]
    fn thread_count_does_not_change_the_tree() {
        let tris = random_soup(20_000, 7);
        let parallel = KdTreeBuilder::new(KdTreeConfig {
            parallel_min_refs: 1000,
            ..KdTreeConfig::DEFAULT
        })
        .build(&tris);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        let single = pool.install(|| KdTreeBuilder::default().build(&tris));
        assert_eq!(parallel, single);
    }
}
