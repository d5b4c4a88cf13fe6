//! `ploc`: Parallel Locally-Ordered Clustering, after Meister and Bittner,
//! "Parallel Locally-Ordered Clustering for Bounding Volume Hierarchy
//! Construction" (IEEE TVCG 24(3), 2018).
//!
//! Agglomerative clustering made parallel by Morton order: the clusters
//! start as the primitives sorted by Morton code ([`MortonOrder`]), and each
//! iteration
//! 1. finds every cluster's nearest neighbour among the `radius` clusters on
//!    either side in the array, the distance being the surface area of the
//!    two boxes' union;
//! 2. merges every mutual pair (`a` is `b`'s nearest and `b` is `a`'s) into a
//!    new inner node, which takes the lower of the two positions;
//! 3. compacts the array (a prefix sum over chunks gives each chunk its
//!    output range and its range of new node indices),
//!
//! until one cluster, the root, remains. Ties between equal distances go to
//! the lower index, so neighbour choice is a strict order on pairs: the
//! globally closest pair is always mutual, every iteration merges at least
//! once, and the result does not depend on the thread count.
//!
//! Each distance is computed once per pair: a chunk sweeps the pairs
//! `(i, i + 1 ..= i + radius)` that touch it and offers each to both ends.
//! Each pass of step 1 and 3 is a rayon loop over chunks of the array.
//!
//! Leaves start as single primitives (the paper's default); subtrees are
//! then collapsed into leaves of up to `max_leaf_size` by the SAH as they are
//! merged (see `linked_tree`), and the depth bound [`MAX_DEPTH`] is enforced
//! at layout. PLOC trees have no depth guarantee of their own; on real
//! scenes they stay far below it.

use super::build_box::BuildBox;
use super::linked_tree::{Collapse, LinkedNode, LinkedTree, NodeRef, Summary, summary_of};
use super::memory::PeakMemory;
use super::morton_order::{MortonBits, MortonOrder};
use super::{Bvh2Builder, debug_validate};
use crate::BuildInput;
use crate::bvh::Bvh2;
use caustic_geom::Aabb;
use rayon::prelude::*;

#[cfg(doc)]
use crate::bvh::MAX_DEPTH;

/// Tuning of [`PlocBuilder`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PlocConfig {
    /// Width of the Morton codes that order the initial clusters.
    pub morton_bits: MortonBits,
    /// Clusters searched on each side for the nearest neighbour (the paper's
    /// `r`; 16 is its recommended trade-off).
    pub radius: usize,
    /// Largest leaf that SAH collapsing may form; 1 keeps one primitive per leaf.
    pub max_leaf_size: u32,
    /// Cost of visiting an inner node, in the collapsing SAH.
    pub traversal_cost: f32,
    /// Cost of one primitive test, in the collapsing SAH.
    pub intersection_cost: f32,
    /// Iterations over at least this many clusters run in parallel; the
    /// layout splits subtrees of at least this many primitives.
    pub parallel_min: usize,
}

impl PlocConfig {
    /// Radius 16, 30-bit codes, SAH-collapsed leaves of up to 8: the `ploc`
    /// default. (63-bit codes: the same SAH cost within 1% on sibenik and
    /// dragon, slower sorting.)
    pub const DEFAULT: Self = Self {
        morton_bits: MortonBits::Bits30,
        radius: 16,
        max_leaf_size: 8,
        traversal_cost: 1.0,
        intersection_cost: 1.0,
        parallel_min: 4096,
    };

    /// Radius 8: about 30% less build time, SAH cost 4% higher on sibenik.
    pub const FAST: Self = Self {
        radius: 8,
        ..Self::DEFAULT
    };

    /// Radius 32: about 60% more build time, SAH cost 2% lower on sibenik.
    pub const HIGH_QUALITY: Self = Self {
        radius: 32,
        ..Self::DEFAULT
    };
}

impl Default for PlocConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// The PLOC builder (`ploc`); see the module docs.
#[derive(Clone, Debug, Default)]
pub struct PlocBuilder {
    pub config: PlocConfig,
}

impl PlocBuilder {
    pub fn new(config: PlocConfig) -> Self {
        assert!(config.radius >= 1, "the search radius is at least 1");
        assert!(
            config.max_leaf_size >= 1,
            "leaves hold at least one primitive"
        );
        Self { config }
    }
}

impl Bvh2Builder for PlocBuilder {
    fn name(&self) -> &'static str {
        "ploc"
    }

    fn build(&self, input: &BuildInput) -> Bvh2 {
        self.build_with_peak(input).0
    }

    fn build_with_peak(&self, input: &BuildInput) -> (Bvh2, usize) {
        let memory = PeakMemory::new();
        let mut order = MortonOrder::new(input, self.config.morton_bits, &memory);
        let tree = Clustering::new(input, &mut order, &self.config).run(&memory);
        let bvh = tree.to_bvh(&order.parked, &memory);
        debug_validate(self.name(), &bvh, input);
        (bvh, memory.peak())
    }
}

/// A cluster: the box of its primitives and its subtree.
#[derive(Clone, Copy, Debug)]
struct Cluster {
    bounds: BuildBox,
    node: NodeRef,
}

/// Clusters per rayon task in the neighbour search.
const SEARCH_CHUNK: usize = 2048;
/// Clusters per rayon task in the merge and compaction.
const MERGE_CHUNK: usize = 16 * 1024;

/// State of one clustering run.
struct Clustering {
    tree: LinkedTree,
    clusters: Vec<Cluster>,
    radius: usize,
    parallel_min: usize,
}

impl Clustering {
    /// Takes the ids out of `order`.
    fn new(input: &BuildInput, order: &mut MortonOrder, config: &PlocConfig) -> Self {
        let collapse = Collapse {
            max_leaf_size: config.max_leaf_size,
            traversal_cost: config.traversal_cost,
            intersection_cost: config.intersection_cost,
        };
        let item_bounds = order.gather_bounds(input);
        let leaf = |(i, &bounds): (usize, &Aabb)| Cluster {
            bounds: BuildBox::from_aabb(bounds),
            node: NodeRef::item(i),
        };
        let clusters = if order.len() >= config.parallel_min {
            item_bounds.par_iter().enumerate().map(leaf).collect()
        } else {
            item_bounds.iter().enumerate().map(leaf).collect()
        };
        let tree = LinkedTree {
            nodes: Vec::new(),
            items: std::mem::take(&mut order.ids),
            item_bounds,
            root: NodeRef::item(0),
            parallel_min_prims: config.parallel_min,
            collapse,
        };
        Self {
            tree,
            clusters,
            radius: config.radius,
            parallel_min: config.parallel_min,
        }
    }

    /// Merges until one cluster is left; returns the tree rooted at it.
    /// Records the buffers in `memory`.
    fn run(mut self, memory: &PeakMemory) -> LinkedTree {
        let n = self.clusters.len();
        if n < 2 {
            return self.tree;
        }
        // Item boxes and nodes stay with the tree; two cluster arrays and
        // the neighbour indices go when the clustering ends.
        memory.alloc_array::<Aabb>(n);
        memory.alloc_array::<LinkedNode>(n - 1);
        memory.alloc_array::<Cluster>(2 * n);
        memory.alloc_array::<u32>(n);
        self.tree.nodes = vec![LinkedNode::PLACEHOLDER; n - 1];
        let mut neighbours = vec![0u32; n];
        let mut next = Vec::with_capacity(n);
        let mut built = 0;
        while self.clusters.len() > 1 {
            let m = self.clusters.len();
            self.find_neighbours(&mut neighbours[..m]);
            built += self.merge(&neighbours[..m], built, &mut next);
            std::mem::swap(&mut self.clusters, &mut next);
        }
        debug_assert_eq!(built, n - 1);
        memory.free_array::<Cluster>(2 * n);
        memory.free_array::<u32>(n);
        self.tree.root = self.clusters[0].node;
        self.tree
    }

    /// Step 1: `neighbours[i]` = the index of cluster `i`'s nearest neighbour.
    fn find_neighbours(&self, neighbours: &mut [u32]) {
        let search = |(c, out): (usize, &mut [u32])| {
            nearest_in_chunk(&self.clusters, c * SEARCH_CHUNK, self.radius, out);
        };
        if self.clusters.len() >= self.parallel_min {
            neighbours
                .par_chunks_mut(SEARCH_CHUNK)
                .enumerate()
                .for_each(search);
        } else {
            neighbours
                .chunks_mut(SEARCH_CHUNK)
                .enumerate()
                .for_each(search);
        }
    }

    /// Steps 2 and 3: merges mutual pairs into new nodes (from index `built`
    /// on) and writes the surviving clusters, in order, to `next`. Returns
    /// the number of nodes made.
    fn merge(&mut self, neighbours: &[u32], built: usize, next: &mut Vec<Cluster>) -> usize {
        let m = self.clusters.len();
        let chunks: Vec<std::ops::Range<usize>> = (0..m)
            .step_by(MERGE_CHUNK)
            .map(|start| start..(start + MERGE_CHUNK).min(m))
            .collect();
        let parallel = m >= self.parallel_min;
        let count = |range: &std::ops::Range<usize>| count_chunk(neighbours, range.clone());
        let counts: Vec<(usize, usize)> = if parallel {
            chunks.par_iter().map(count).collect()
        } else {
            chunks.iter().map(count).collect()
        };
        let survivors: usize = counts.iter().map(|c| c.0).sum();
        let merges: usize = counts.iter().map(|c| c.1).sum();
        next.clear();
        next.resize(survivors, self.clusters[0]);
        let (done, fresh) = self.tree.nodes.split_at_mut(built);
        let outputs = cut(next, &mut fresh[..merges], &counts);
        let ctx = MergeContext {
            clusters: &self.clusters,
            neighbours,
            done,
            item_bounds: &self.tree.item_bounds,
            collapse: &self.tree.collapse,
        };
        let write = |(range, (out, nodes, base))| ctx.write_chunk(range, out, nodes, built + base);
        if parallel {
            chunks.into_par_iter().zip(outputs).for_each(write);
        } else {
            chunks.into_iter().zip(outputs).for_each(write);
        }
        merges
    }
}

/// Nearest neighbours of the clusters `start .. start + out.len()`.
fn nearest_in_chunk(clusters: &[Cluster], start: usize, radius: usize, out: &mut [u32]) {
    let end = start + out.len();
    let lo = start.saturating_sub(radius);
    let hi = (end + radius).min(clusters.len());
    // Best (distance bits, index) per cluster of the window `lo .. hi`:
    // ordering the key as one integer breaks distance ties to the lower index.
    let mut best = vec![u64::MAX; hi - lo];
    for i in lo..end {
        let a = clusters[i].bounds;
        // Pairs wholly before the chunk belong to the previous chunk.
        let first = (i + 1).max(if i < start { start } else { 0 });
        for j in first..(i + radius + 1).min(clusters.len()) {
            let area = a.union(clusters[j].bounds).half_area();
            let bits = u64::from(area.to_bits()) << 32;
            best[i - lo] = best[i - lo].min(bits | j as u64);
            best[j - lo] = best[j - lo].min(bits | i as u64);
        }
    }
    for (k, slot) in out.iter_mut().enumerate() {
        *slot = best[start - lo + k] as u32;
    }
}

/// Whether cluster `i` and its nearest neighbour chose each other.
#[inline]
fn mutual(neighbours: &[u32], i: usize) -> bool {
    neighbours[neighbours[i] as usize] as usize == i
}

/// (clusters that survive, nodes created) in `range`: the lower end of a
/// mutual pair survives as the merged cluster, the upper end disappears.
fn count_chunk(neighbours: &[u32], range: std::ops::Range<usize>) -> (usize, usize) {
    let (mut survivors, mut merges) = (0, 0);
    for i in range {
        let j = neighbours[i] as usize;
        let paired = mutual(neighbours, i);
        survivors += usize::from(!paired || i < j);
        merges += usize::from(paired && i < j);
    }
    (survivors, merges)
}

/// Per chunk: its run of output clusters, its run of new nodes and the
/// index of its first new node relative to this iteration's first.
type ChunkOutput<'o> = (&'o mut [Cluster], &'o mut [LinkedNode], usize);

/// Cuts the output arrays into consecutive runs, one per chunk, sized by `counts`.
fn cut<'o>(
    mut clusters: &'o mut [Cluster],
    mut nodes: &'o mut [LinkedNode],
    counts: &[(usize, usize)],
) -> Vec<ChunkOutput<'o>> {
    let mut base = 0;
    counts
        .iter()
        .map(|&(survivors, merges)| {
            let (c, rest_c) = std::mem::take(&mut clusters).split_at_mut(survivors);
            let (n, rest_n) = std::mem::take(&mut nodes).split_at_mut(merges);
            clusters = rest_c;
            nodes = rest_n;
            base += merges;
            (c, n, base - merges)
        })
        .collect()
}

/// What a chunk reads while it writes its outputs.
struct MergeContext<'c> {
    clusters: &'c [Cluster],
    neighbours: &'c [u32],
    /// Nodes of earlier iterations (the only ones a cluster can refer to).
    done: &'c [LinkedNode],
    item_bounds: &'c [Aabb],
    collapse: &'c Collapse,
}

impl MergeContext<'_> {
    fn summary(&self, r: NodeRef) -> Summary {
        summary_of(r, self.done, self.item_bounds, self.collapse)
    }

    /// Writes the chunk's surviving clusters and new nodes; `first_node` is
    /// the global index of its first new node.
    fn write_chunk(
        &self,
        range: std::ops::Range<usize>,
        out: &mut [Cluster],
        nodes: &mut [LinkedNode],
        first_node: usize,
    ) {
        let (mut o, mut k) = (0, 0);
        for i in range {
            let j = self.neighbours[i] as usize;
            let paired = mutual(self.neighbours, i);
            if paired && j < i {
                continue;
            }
            let mut cluster = self.clusters[i];
            if paired {
                let other = self.clusters[j];
                let children = [cluster.node, other.node];
                let summary = Summary::merge(
                    &self.summary(children[0]),
                    &self.summary(children[1]),
                    self.collapse,
                );
                nodes[k] = LinkedNode { children, summary };
                cluster = Cluster {
                    bounds: cluster.bounds.union(other.bounds),
                    node: NodeRef::node(first_node + k),
                };
                k += 1;
            }
            out[o] = cluster;
            o += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bvh::MAX_DEPTH;
    use caustic_geom::Vec3;

    fn point_input(points: &[Vec3]) -> BuildInput {
        BuildInput {
            bounds: points
                .iter()
                .map(|&p| Aabb::new(p - 0.01, p + 0.01))
                .collect(),
            centroids: points.to_vec(),
        }
    }

    fn build(input: &BuildInput, config: PlocConfig) -> Bvh2 {
        let bvh = PlocBuilder::new(config).build(input);
        bvh.validate(&input.bounds).unwrap();
        bvh
    }

    fn random_points(count: usize, seed: u32) -> Vec<Vec3> {
        let mut state = seed;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state as f32 / u32::MAX as f32
        };
        (0..count)
            .map(|_| Vec3::new(next(), next(), next()) * 50.0)
            .collect()
    }

    #[test]
    fn nearest_neighbours_match_a_direct_search() {
        let points = random_points(5000, 3);
        let clusters: Vec<Cluster> = points
            .iter()
            .enumerate()
            .map(|(i, &p)| Cluster {
                bounds: BuildBox::from_aabb(Aabb::new(p, p + 0.5)),
                node: NodeRef::item(i),
            })
            .collect();
        for radius in [1, 4, 16] {
            let mut got = vec![0u32; clusters.len()];
            for (c, out) in got.chunks_mut(SEARCH_CHUNK).enumerate() {
                nearest_in_chunk(&clusters, c * SEARCH_CHUNK, radius, out);
            }
            for (i, &nearest) in got.iter().enumerate() {
                let candidates = i.saturating_sub(radius)..(i + radius + 1).min(clusters.len());
                let expected = candidates
                    .filter(|&j| j != i)
                    .min_by(|&a, &b| {
                        let d = |j: usize| clusters[i].bounds.union(clusters[j].bounds).half_area();
                        d(a).total_cmp(&d(b)).then(a.cmp(&b))
                    })
                    .unwrap();
                assert_eq!(nearest as usize, expected, "cluster {i}, radius {radius}");
            }
        }
    }

    #[test]
    fn merges_down_to_a_single_root() {
        for n in [2, 3, 17, 1000] {
            let input = point_input(&random_points(n, 11));
            for config in [
                PlocConfig::DEFAULT,
                PlocConfig {
                    max_leaf_size: 1,
                    radius: 1,
                    ..PlocConfig::DEFAULT
                },
            ] {
                let memory = PeakMemory::new();
                let mut order = MortonOrder::new(&input, config.morton_bits, &memory);
                let tree = Clustering::new(&input, &mut order, &config).run(&memory);
                assert_eq!(tree.nodes.len(), n - 1);
                let root = tree.summary(tree.root);
                assert_eq!(root.prims as usize, n);
                let bvh = tree.to_bvh(&[], &memory);
                bvh.validate(&input.bounds).unwrap();
                if config.max_leaf_size == 1 {
                    assert_eq!(bvh.shape().leaves, n);
                }
            }
        }
    }

    #[test]
    fn empty_one_two_and_coincident_inputs() {
        assert!(build(&BuildInput::default(), PlocConfig::DEFAULT).is_empty());
        assert_eq!(
            build(&point_input(&[Vec3::ONE]), PlocConfig::DEFAULT)
                .nodes
                .len(),
            1
        );
        let two = build(
            &point_input(&[Vec3::ONE, Vec3::ZERO]),
            PlocConfig {
                max_leaf_size: 1,
                ..PlocConfig::DEFAULT
            },
        );
        assert_eq!(two.nodes.len(), 3);
        let same = point_input(&vec![Vec3::splat(2.0); 5000]);
        let shape = build(
            &same,
            PlocConfig {
                max_leaf_size: 1,
                ..PlocConfig::DEFAULT
            },
        )
        .shape();
        assert_eq!(shape.leaves, 5000);
        assert!(shape.max_depth <= MAX_DEPTH);
    }

    #[test]
    fn geometric_series_respects_max_depth() {
        let points: Vec<Vec3> = (0..150).map(|k| Vec3::splat(0.8f32.powi(k))).collect();
        let input = point_input(&points);
        let shape = build(
            &input,
            PlocConfig {
                max_leaf_size: 1,
                ..PlocConfig::DEFAULT
            },
        )
        .shape();
        assert!(shape.max_depth <= MAX_DEPTH);
        assert_eq!(shape.leaves, 150);
    }

    #[test]
    fn parallel_and_sequential_builds_agree() {
        let input = point_input(&random_points(40_000, 5));
        let parallel = build(
            &input,
            PlocConfig {
                parallel_min: 256,
                ..PlocConfig::DEFAULT
            },
        );
        let sequential = build(
            &input,
            PlocConfig {
                parallel_min: usize::MAX,
                ..PlocConfig::DEFAULT
            },
        );
        assert_eq!(parallel, sequential);
    }

    /// PLOC written as plainly as possible: full neighbour scans, merges in
    /// index order; returns the children of every node in creation order.
    fn reference_merges(clusters: &[Cluster], radius: usize) -> Vec<[NodeRef; 2]> {
        let mut clusters = clusters.to_vec();
        let mut made = Vec::new();
        while clusters.len() > 1 {
            let m = clusters.len();
            let distance =
                |i: usize, j: usize| clusters[i].bounds.union(clusters[j].bounds).half_area();
            let nearest: Vec<usize> = (0..m)
                .map(|i| {
                    (i.saturating_sub(radius)..(i + radius + 1).min(m))
                        .filter(|&j| j != i)
                        .min_by(|&a, &b| distance(i, a).total_cmp(&distance(i, b)).then(a.cmp(&b)))
                        .unwrap()
                })
                .collect();
            let mut next = Vec::new();
            for i in 0..m {
                let j = nearest[i];
                if nearest[j] != i {
                    next.push(clusters[i]);
                } else if i < j {
                    made.push([clusters[i].node, clusters[j].node]);
                    next.push(Cluster {
                        bounds: clusters[i].bounds.union(clusters[j].bounds),
                        node: NodeRef::node(made.len() - 1),
                    });
                }
            }
            clusters = next;
        }
        made
    }

    #[test]
    fn matches_a_plain_sequential_ploc() {
        let input = point_input(&random_points(20_000, 8));
        for radius in [1, 5, 16] {
            let config = PlocConfig {
                radius,
                parallel_min: 512,
                ..PlocConfig::DEFAULT
            };
            let memory = PeakMemory::new();
            let mut order = MortonOrder::new(&input, config.morton_bits, &memory);
            let clustering = Clustering::new(&input, &mut order, &config);
            let expected = reference_merges(&clustering.clusters, radius);
            let tree = clustering.run(&memory);
            let got: Vec<[NodeRef; 2]> = tree.nodes.iter().map(|n| n.children).collect();
            assert_eq!(got, expected, "radius {radius}");
        }
    }
}
