//! `lbvh`: the linear BVH of Karras, "Maximizing Parallelism in the
//! Construction of BVHs, Octrees, and k-d Trees" (HPG 2012), after the
//! Morton-code idea of Lauterbach et al. (Eurographics 2009).
//!
//! 1. Morton codes of the centroids, quantised in the centroid box, sorted
//!    by a parallel radix sort ([`MortonOrder`]; 30 or 63 bits).
//! 2. The binary radix tree over the sorted keys, each of its `n - 1` inner
//!    nodes found independently and in parallel: node `i` learns the
//!    direction of its range from its neighbours' common-prefix lengths,
//!    the other end `j` by an exponential then a binary search, and its split
//!    `gamma` (the last position sharing more than the node's prefix) by a
//!    second binary search. Its children are `gamma` and `gamma + 1`, leaves
//!    when they are the ends of the range. Equal codes are told apart by
//!    their positions: the common prefix of two keys with equal codes is
//!    `64 + clz(i ^ j)`, Karras's index tie-break, so coincident centroids
//!    give a balanced subtree instead of a degenerate one.
//! 3. Boxes and summaries bottom-up, by a parallel recursion from the root
//!    (no atomics): the subtree of a node covering `[lo, hi]` owns exactly
//!    the inner-node indices `[lo, hi - 1]` when the node sits at `lo` (a
//!    right child or the root) and `[lo + 1, hi]` when it sits at `hi` (a
//!    left child), which is how Karras lays the nodes out, so two child
//!    tasks get disjoint halves of the node array by `split_at_mut`. The
//!    recursion is at most 95 levels deep: every level lengthens the common
//!    prefix of the 63-bit code plus 32-bit position.
//! 4. Leaves: Karras's tree has one primitive per leaf; with
//!    `max_leaf_size > 1` the summaries also collapse subtrees into leaves
//!    where the SAH says a leaf is cheaper (an exact bottom-up optimum over
//!    the cuts of this tree, see `linked_tree`), which cuts node count and
//!    SAH cost without moving any split.
//! 5. Layout into [`Bvh2`] with the depth bound [`MAX_DEPTH`] (see
//!    `linked_tree`; it only changes anything on pathological inputs).
//!    With `max_leaf_size == 1` (Karras's own tree: nothing collapses) the
//!    layout is Karras's node numbering itself ([`karras_layout`]): the
//!    children of inner node `k` (split `gamma`: nodes or primitives
//!    `gamma` and `gamma + 1`) sit at `2k + 1` and `2k + 2`, the root at 0,
//!    so each record is written from its parent's index alone, in
//!    parallel, with no depth-first pass over the tree: what makes the GPU
//!    twin's build fast (`lbvh_pairs` in `lbvh.cu`). It applies when every
//!    primitive is placeable and the tree is within [`MAX_DEPTH`];
//!    otherwise the depth-first layout runs, on both devices alike.
//!
//! Leaves cover consecutive runs of the Morton order, so the slot array is
//! the sorted order itself.

use super::linked_tree::{Collapse, LinkedNode, LinkedTree, NodeRef, Summary, Target};
use super::memory::PeakMemory;
use super::morton_order::{MortonBits, MortonOrder};
use super::{Bvh2Builder, debug_validate};
use crate::BuildInput;
use crate::bvh::{Bvh2, BvhNode, MAX_DEPTH};
use caustic_geom::Aabb;
use rayon::prelude::*;

/// Tuning of [`LbvhBuilder`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LbvhConfig {
    /// Width of the Morton codes.
    pub morton_bits: MortonBits,
    /// Largest leaf that SAH collapsing may form; 1 keeps Karras's leaves of
    /// one primitive.
    pub max_leaf_size: u32,
    /// Cost of visiting an inner node, in the collapsing SAH.
    pub traversal_cost: f32,
    /// Cost of one primitive test, in the collapsing SAH.
    pub intersection_cost: f32,
    /// Subtrees with at least this many primitives are summarised and laid
    /// out by two parallel tasks.
    pub parallel_min_prims: usize,
}

impl LbvhConfig {
    /// 30-bit codes, SAH-collapsed leaves of up to 8: the `lbvh` default.
    /// 63-bit codes gave the same SAH cost to four digits on sibenik,
    /// dragon, sponza and conference (the trees differ only inside
    /// 1024^3-grid cells, a negligible area) and sort 16-byte instead of
    /// 8-byte keys, about 10% slower on the dragon.
    pub const DEFAULT: Self = Self {
        morton_bits: MortonBits::Bits30,
        max_leaf_size: 8,
        traversal_cost: 1.0,
        intersection_cost: 1.0,
        parallel_min_prims: 4096,
    };

    /// Karras's tree as published: 30-bit codes, one primitive per leaf.
    pub const KARRAS: Self = Self {
        max_leaf_size: 1,
        ..Self::DEFAULT
    };

    /// 63-bit codes: for scenes whose detail is finer than 1/1024 of their
    /// extent (a small object on a huge ground plane).
    pub const FINE_CODES: Self = Self {
        morton_bits: MortonBits::Bits63,
        ..Self::DEFAULT
    };
}

impl Default for LbvhConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Karras's parallel LBVH builder (`lbvh`); see the module docs.
#[derive(Clone, Debug, Default)]
pub struct LbvhBuilder {
    pub config: LbvhConfig,
}

impl LbvhBuilder {
    pub fn new(config: LbvhConfig) -> Self {
        assert!(
            config.max_leaf_size >= 1,
            "leaves hold at least one primitive"
        );
        Self { config }
    }
}

impl Bvh2Builder for LbvhBuilder {
    fn name(&self) -> &'static str {
        "lbvh"
    }

    fn build(&self, input: &BuildInput) -> Bvh2 {
        self.build_with_peak(input).0
    }

    fn build_with_peak(&self, input: &BuildInput) -> (Bvh2, usize) {
        let memory = PeakMemory::new();
        let mut order = MortonOrder::new(input, self.config.morton_bits, &memory);
        let tree = radix_tree(input, &mut order, &self.config, &memory);
        let bvh = if self.config.max_leaf_size == 1 {
            karras_layout(&tree, &order.parked, &memory)
        } else {
            None
        };
        let bvh = bvh.unwrap_or_else(|| tree.to_bvh(&order.parked, &memory));
        debug_validate(self.name(), &bvh, input);
        (bvh, memory.peak())
    }
}

/// Whether a tree of `placed` primitives (`parked` unplaceable ones) whose
/// root summary has `height` gets [`karras_layout`]; the GPU twin asks the
/// same.
pub(crate) fn karras_layout_applies(placed: usize, parked: usize, height: u32) -> bool {
    placed >= 2 && parked == 0 && height as usize <= MAX_DEPTH
}

/// Karras's numbering as the layout of a tree of one primitive per leaf
/// (see the module docs, step 5): root at 0, the children of inner node `k`
/// at `2k + 1` and `2k + 2`, a primitive's leaf holding its Morton slot.
/// `None` when it does not apply ([`karras_layout_applies`]).
fn karras_layout(tree: &LinkedTree, parked: &[u32], memory: &PeakMemory) -> Option<Bvh2> {
    let n = tree.items.len();
    if n < 2 || tree.root != NodeRef::node(0) {
        return None;
    }
    let root = tree.summary(tree.root);
    if !karras_layout_applies(n, parked.len(), root.height) {
        return None;
    }
    debug_assert_eq!(tree.collapse.max_leaf_size, 1, "nothing collapses");
    memory.alloc_array::<BvhNode>(2 * n - 1);
    memory.alloc_array::<u32>(n);
    let record = |child: NodeRef| match child.target() {
        Target::Item(i) => BvhNode::leaf(tree.item_bounds[i], i as u32, 1),
        Target::Node(c) => BvhNode::inner(tree.nodes[c].summary.bounds, 2 * c as u32 + 1),
    };
    let mut nodes = Vec::with_capacity(2 * n - 1);
    nodes.push(BvhNode::inner(root.bounds, 1));
    nodes.par_extend(
        tree.nodes
            .par_iter()
            .flat_map_iter(|node| node.children.map(record)),
    );
    Some(Bvh2 {
        nodes,
        prim_indices: tree.items.clone(),
    })
}

/// Steps 2 to 4: the radix tree over `order` with its summaries.
/// Takes the ids out of `order`; records its buffers in `memory`.
fn radix_tree(
    input: &BuildInput,
    order: &mut MortonOrder,
    config: &LbvhConfig,
    memory: &PeakMemory,
) -> LinkedTree {
    let collapse = Collapse {
        max_leaf_size: config.max_leaf_size,
        traversal_cost: config.traversal_cost,
        intersection_cost: config.intersection_cost,
    };
    let mut tree = LinkedTree {
        nodes: Vec::new(),
        item_bounds: order.gather_bounds(input),
        items: std::mem::take(&mut order.ids),
        root: NodeRef::item(0),
        parallel_min_prims: config.parallel_min_prims,
        collapse,
    };
    let n = tree.items.len();
    if n < 2 {
        return tree;
    }
    memory.alloc_array::<Aabb>(n);
    memory.alloc_array::<u32>(n - 1);
    memory.alloc_array::<LinkedNode>(n - 1);
    let splits = splits(&order.codes, config.parallel_min_prims);
    let mut nodes = vec![LinkedNode::PLACEHOLDER; n - 1];
    let summarize = Summarize {
        tree: &tree,
        splits: &splits,
    };
    summarize.node(0, 0, n - 1, &mut nodes);
    memory.free_array::<u32>(n - 1);
    tree.nodes = nodes;
    tree.root = NodeRef::node(0);
    tree
}

/// Karras's split position of every inner node, in parallel.
fn splits(codes: &[u64], parallel_min: usize) -> Vec<u32> {
    let inner = codes.len() - 1;
    if codes.len() >= parallel_min {
        (0..inner)
            .into_par_iter()
            .map(|i| split_of(codes, i))
            .collect()
    } else {
        (0..inner).map(|i| split_of(codes, i)).collect()
    }
}

/// Length of the common prefix of the keys (code, position) at `i` and
/// `j`, or -1 when `j` is outside the array (Karras's `delta`).
#[inline]
fn common_prefix(codes: &[u64], i: usize, j: isize) -> i32 {
    let Some(&other) = usize::try_from(j).ok().and_then(|j| codes.get(j)) else {
        return -1;
    };
    let x = codes[i] ^ other;
    if x != 0 {
        x.leading_zeros() as i32
    } else {
        64 + ((i as u32) ^ (j as u32)).leading_zeros() as i32
    }
}

/// The split `gamma` of inner node `i` (Karras 2012, Figure 4): its
/// children cover `[lo, gamma]` and `[gamma + 1, hi]`.
fn split_of(codes: &[u64], i: usize) -> u32 {
    let at = |j: isize| common_prefix(codes, i, j);
    let i_s = i as isize;
    // The range extends towards the neighbour sharing the longer prefix.
    let d: isize = if at(i_s + 1) > at(i_s - 1) { 1 } else { -1 };
    let prefix_min = at(i_s - d);
    // Upper bound of the range's length, then its exact length by bisection.
    let mut max_len: isize = 2;
    while at(i_s + max_len * d) > prefix_min {
        max_len *= 2;
    }
    let mut len: isize = 0;
    let mut step = max_len / 2;
    while step >= 1 {
        if at(i_s + (len + step) * d) > prefix_min {
            len += step;
        }
        step /= 2;
    }
    let node_prefix = at(i_s + len * d);
    // The last position (from `i`) sharing more than the node's prefix.
    let mut split: isize = 0;
    let mut step = len;
    loop {
        step = (step + 1) / 2;
        if at(i_s + (split + step) * d) > node_prefix {
            split += step;
        }
        if step == 1 {
            break;
        }
    }
    (i_s + split * d + d.min(0)) as u32
}

/// Step 3: the bottom-up summaries, by recursion from the root.
struct Summarize<'t> {
    tree: &'t LinkedTree,
    splits: &'t [u32],
}

impl Summarize<'_> {
    /// Summarises inner node `k` over `[lo, hi]` into `nodes`, which holds
    /// exactly its subtree's inner nodes (see the module docs): indices
    /// `lo .. hi` when `k == lo`, `lo + 1 ..= hi` when `k == hi`.
    fn node(&self, k: usize, lo: usize, hi: usize, nodes: &mut [LinkedNode]) -> Summary {
        let gamma = self.splits[k] as usize;
        debug_assert!(lo <= gamma && gamma < hi, "split outside its node's range");
        let (own, below) = if k == lo {
            nodes.split_first_mut()
        } else {
            nodes.split_last_mut()
        }
        .expect("an inner node owns its own slot");
        let (left_nodes, right_nodes) = below.split_at_mut(gamma - lo);
        let children = [
            if gamma == lo {
                NodeRef::item(lo)
            } else {
                NodeRef::node(gamma)
            },
            if gamma + 1 == hi {
                NodeRef::item(hi)
            } else {
                NodeRef::node(gamma + 1)
            },
        ];
        // The left child sits at its range's end, the right one at its start.
        let (left, right) = if hi - lo >= self.tree.parallel_min_prims {
            rayon::join(
                || self.subtree(children[0], gamma, lo, gamma, left_nodes),
                || self.subtree(children[1], gamma + 1, gamma + 1, hi, right_nodes),
            )
        } else {
            (
                self.subtree(children[0], gamma, lo, gamma, left_nodes),
                self.subtree(children[1], gamma + 1, gamma + 1, hi, right_nodes),
            )
        };
        let summary = Summary::merge(&left, &right, &self.tree.collapse);
        *own = LinkedNode { children, summary };
        summary
    }

    /// The summary of child `r` over `[lo, hi]`: a primitive, or inner node `k`.
    fn subtree(
        &self,
        r: NodeRef,
        k: usize,
        lo: usize,
        hi: usize,
        nodes: &mut [LinkedNode],
    ) -> Summary {
        if lo == hi {
            self.tree.summary(r)
        } else {
            self.node(k, lo, hi, nodes)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bvh::MAX_DEPTH;
    use caustic_geom::{Aabb, Vec3};

    fn point_input(points: &[Vec3]) -> BuildInput {
        BuildInput {
            bounds: points
                .iter()
                .map(|&p| Aabb::new(p - 0.01, p + 0.01))
                .collect(),
            centroids: points.to_vec(),
        }
    }

    fn build(input: &BuildInput, config: LbvhConfig) -> Bvh2 {
        let bvh = LbvhBuilder::new(config).build(input);
        bvh.validate(&input.bounds).unwrap();
        bvh
    }

    fn all_configs() -> [LbvhConfig; 3] {
        [
            LbvhConfig::DEFAULT,
            LbvhConfig::KARRAS,
            LbvhConfig::FINE_CODES,
        ]
    }

    /// The subtree below `node` as nested boxes and leaf primitive lists.
    fn shape(bvh: &Bvh2, node: usize) -> String {
        let n = &bvh.nodes[node];
        if n.is_leaf() {
            let prims = &bvh.prim_indices[n.prim_range()];
            return format!("{:?}{prims:?}", n.bounds());
        }
        let left = n.left_child();
        format!(
            "{:?}({} {})",
            n.bounds(),
            shape(bvh, left),
            shape(bvh, left + 1)
        )
    }

    #[test]
    fn one_primitive_leaves_take_karras_numbering_as_the_layout() {
        let mut rng = caustic_geom::Pcg32::new(9, 4);
        let points: Vec<Vec3> = (0..3000)
            .map(|_| Vec3::new(rng.next_f32(), rng.next_f32(), rng.next_f32()))
            .collect();
        let input = point_input(&points);
        let karras = build(&input, LbvhConfig::KARRAS);
        // The children of inner node k at 2k + 1 and 2k + 2.
        assert_eq!(karras.nodes.len(), 2 * points.len() - 1);
        for (index, node) in karras.nodes.iter().enumerate() {
            if !node.is_leaf() {
                assert_eq!(node.left_child() % 2, 1, "node {index}");
            }
        }
        // The same tree as the depth-first layout of the same summaries.
        let order_memory = PeakMemory::new();
        let mut order = MortonOrder::new(&input, MortonBits::Bits30, &order_memory);
        let tree = radix_tree(&input, &mut order, &LbvhConfig::KARRAS, &order_memory);
        let depth_first = tree.to_bvh(&order.parked, &order_memory);
        depth_first.validate(&input.bounds).unwrap();
        assert_ne!(karras.nodes, depth_first.nodes, "a different layout");
        assert_eq!(shape(&karras, 0), shape(&depth_first, 0));
        // Too few primitives, or unplaceable ones, keep the depth-first layout.
        assert!(!karras_layout_applies(1, 0, 0));
        assert!(!karras_layout_applies(10, 1, 4));
        assert!(!karras_layout_applies(10, 0, MAX_DEPTH as u32 + 1));
        assert!(karras_layout_applies(10, 0, MAX_DEPTH as u32));
    }

    #[test]
    fn split_positions_match_a_top_down_radix_tree() {
        // The radix tree splits [lo, hi] where the highest differing key bit
        // flips; compare with the parallel per-node search.
        let codes: Vec<u64> = vec![1, 2, 4, 5, 19, 24, 25, 30];
        let splits = splits(&codes, usize::MAX);
        assert_eq!(
            splits[0], 3,
            "root: prefix 0b00xxx vs 0b1xxxx splits after 5"
        );
        // Node 3 is the root's left child, covering [0, 3]: 1, 2 | 4, 5.
        assert_eq!(splits[3], 1);
        // Node 4 is the right child, covering [4, 7]: 19 | 24, 25, 30.
        assert_eq!(splits[4], 4);
    }

    #[test]
    fn empty_one_and_two_primitives() {
        for config in all_configs() {
            assert!(build(&BuildInput::default(), config).is_empty());
            let one = build(&point_input(&[Vec3::ONE]), config);
            assert_eq!(
                (one.nodes.len(), one.prim_indices.as_slice()),
                (1, &[0][..])
            );
            let two = build(&point_input(&[Vec3::ONE, Vec3::ZERO]), config);
            assert_eq!(two.nodes.len(), 3);
            assert_eq!(two.prim_indices, [1, 0], "Morton order");
        }
    }

    #[test]
    fn all_equal_codes_give_a_balanced_tree() {
        // Every centroid in one grid cell: only the index tie-break splits.
        let input = point_input(&vec![Vec3::splat(3.0); 1000]);
        let bvh = build(&input, LbvhConfig::KARRAS);
        let shape = bvh.shape();
        assert_eq!(shape.leaves, 1000);
        assert_eq!(shape.max_depth, 10, "ceil(log2(1000))");
        let collapsed = build(&input, LbvhConfig::DEFAULT).shape();
        assert!(collapsed.max_leaf_size <= 8 && collapsed.leaves < 1000);
    }

    #[test]
    fn many_duplicates_among_distinct_points() {
        let mut points: Vec<Vec3> = (0..500)
            .map(|i| Vec3::new(i as f32, (i % 7) as f32, 0.0))
            .collect();
        points.extend(std::iter::repeat_n(Vec3::new(10.0, 3.0, 0.0), 3000));
        points.extend(std::iter::repeat_n(Vec3::new(400.0, 0.0, 0.0), 3000));
        let input = point_input(&points);
        for config in all_configs() {
            let shape = build(&input, config).shape();
            assert!(shape.max_depth <= MAX_DEPTH);
        }
    }

    #[test]
    fn geometric_series_respects_max_depth() {
        // Each point halves the distance to the origin: the radix tree is a
        // chain as deep as the code has bits, beyond MAX_DEPTH for 63 bits.
        let points: Vec<Vec3> = (0..100).map(|k| Vec3::splat(0.7f32.powi(k))).collect();
        let input = point_input(&points);
        for config in all_configs() {
            let shape = build(&input, config).shape();
            assert!(shape.max_depth <= MAX_DEPTH);
        }
    }

    #[test]
    fn parallel_and_sequential_builds_agree_on_random_points() {
        let mut state = 99u32;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state as f32 / u32::MAX as f32
        };
        let points: Vec<Vec3> = (0..30_000)
            .map(|_| Vec3::new(next(), next(), next()) * 50.0)
            .collect();
        let input = point_input(&points);
        for config in all_configs() {
            let parallel = build(
                &input,
                LbvhConfig {
                    parallel_min_prims: 64,
                    ..config
                },
            );
            let sequential = build(
                &input,
                LbvhConfig {
                    parallel_min_prims: usize::MAX,
                    ..config
                },
            );
            assert_eq!(parallel, sequential);
        }
    }

    #[test]
    fn collapsing_lowers_the_sah_cost() {
        // Overlapping boxes on a grid: grouping neighbours into leaves pays.
        let points: Vec<Vec3> = (0..4096)
            .map(|i| Vec3::new((i % 16) as f32, ((i / 16) % 16) as f32, (i / 256) as f32))
            .collect();
        let input = BuildInput {
            bounds: points
                .iter()
                .map(|&p| Aabb::new(p - 0.75, p + 0.75))
                .collect(),
            centroids: points,
        };
        let karras = build(&input, LbvhConfig::KARRAS);
        let collapsed = build(&input, LbvhConfig::DEFAULT);
        assert!(collapsed.shape().max_leaf_size > 1);
        assert!(collapsed.nodes.len() < karras.nodes.len());
        let (karras, collapsed) = (crate::sah_cost(&karras), crate::sah_cost(&collapsed));
        assert!(collapsed < karras, "{collapsed} vs {karras}");
    }
}
