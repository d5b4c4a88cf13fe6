//! The top of the GPU `hlbvh`, on the host: binned SAH over the
//! Morton-prefix clusters (Pantaleoni & Luebke 2010 §4; Garanzha,
//! Pantaleoni & McAllister 2011 §3 build this top with the SAH too),
//! exactly the CPU `hlbvh`'s top.
//!
//! [`plan_top`] runs the CPU's `Build::top` recursion on the clusters' own
//! figures (box, centre of the centroid box, primitive count; the device
//! computes them with the CPU's arithmetic): the exact sweep for nodes of at
//! most [`SMALL`] clusters, binned SAH weighted by primitive counts above,
//! median splits where every centroid shares a bin, and the CPU's stopping
//! rule, which ends the top at a single cluster, at a group of clusters
//! holding at most `max_leaf_size` primitives, or where the depth budget
//! runs out. So the top's splits and its groups are the CPU's. Each group
//! then gets its own subtree on the device (the CPU builds it by binned
//! SAH; the GPU by PLOC, see `cuda.rs`), and [`link_top`] joins the groups'
//! roots under the planned splits with the collapsing SAH's summaries.
//!
//! The plan has one node per group minus one, at most `2^k - 1` for `k`-bit
//! prefixes (32 767 at the default 15 bits): a few milliseconds of host
//! work on the downloaded cluster figures (40 bytes per cluster).

use super::binning::{
    BinMapping, NodeInfo, SMALL, Split, best_plane, median_split, partition, small_split,
};
use super::{Cluster, HlbvhConfig, ceil_log2};
use crate::bvh::MAX_DEPTH;
use crate::bvh::build::linked_tree::{Collapse, LinkedNode, NodeRef, Summary};

/// A child in the planned top: another top node, or a group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TopChild {
    Node(usize),
    Group(usize),
}

/// The planned top: its inner nodes (children in creation order, children
/// before parents) and its groups, each a run of `clusters`.
#[derive(Clone, Debug, Default)]
pub(crate) struct TopPlan {
    /// The clusters in slot order: each group is a run of them.
    pub clusters: Vec<Cluster>,
    /// `groups[g]` covers `clusters[groups[g].0 .. groups[g].0 + groups[g].1]`.
    pub groups: Vec<(usize, usize)>,
    /// Inner nodes; the last one is the root (none when one group is all).
    pub nodes: Vec<[TopChild; 2]>,
}

impl TopPlan {
    /// The root: the last node, or the single group.
    pub fn root(&self) -> TopChild {
        match self.nodes.len() {
            0 => TopChild::Group(0),
            n => TopChild::Node(n - 1),
        }
    }
}

/// Plans the top over `clusters` (in Morton order; at least one) whose
/// root sits at `depth` (1 when a parking leaf shares the root).
pub(crate) fn plan_top(mut clusters: Vec<Cluster>, config: &HlbvhConfig, depth: usize) -> TopPlan {
    let mut plan = TopPlan::default();
    if clusters.is_empty() {
        return plan;
    }
    let info = NodeInfo::of(&clusters);
    Planner { config }.node(&mut clusters, 0, info, depth, &mut plan);
    plan.clusters = clusters;
    plan
}

struct Planner<'c> {
    config: &'c HlbvhConfig,
}

impl Planner<'_> {
    /// Plans the subtree over `clusters` (which start at `offset` in the
    /// final cluster order) at `depth`.
    fn node(
        &self,
        clusters: &mut [Cluster],
        offset: usize,
        info: NodeInfo,
        depth: usize,
        plan: &mut TopPlan,
    ) -> TopChild {
        let sah_allowed = depth + ceil_log2(info.weight) < MAX_DEPTH;
        if clusters.len() == 1 || info.weight <= self.config.max_leaf_size || !sah_allowed {
            plan.groups.push((offset, clusters.len()));
            return TopChild::Group(plan.groups.len() - 1);
        }
        let split = self.split(clusters, &info);
        let (left, right) = clusters.split_at_mut(split.left_len);
        let l = self.node(left, offset, split.left, depth + 1, plan);
        let r = self.node(right, offset + split.left_len, split.right, depth + 1, plan);
        plan.nodes.push([l, r]);
        TopChild::Node(plan.nodes.len() - 1)
    }

    /// The CPU top's split choice.
    fn split(&self, clusters: &mut [Cluster], info: &NodeInfo) -> Split {
        if clusters.len() <= SMALL {
            return small_split(clusters).0;
        }
        let mapping = BinMapping::new(&info.centroid_bounds, self.config.bins);
        match best_plane(clusters, &mapping) {
            Some(plane) => partition(clusters, &mapping, &plane),
            None => median_split(clusters, info),
        }
    }
}

/// The linked nodes of the planned top over the groups' subtrees
/// (`group_roots[g]`: the root of group `g` and its summary), numbered
/// from `first_index`; returns them with the root.
pub(crate) fn link_top(
    plan: &TopPlan,
    group_roots: &[(NodeRef, Summary)],
    collapse: &Collapse,
    first_index: usize,
) -> (Vec<LinkedNode>, NodeRef) {
    let mut nodes: Vec<LinkedNode> = Vec::with_capacity(plan.nodes.len());
    let resolve = |child: TopChild, nodes: &[LinkedNode]| match child {
        TopChild::Group(g) => group_roots[g],
        TopChild::Node(k) => (NodeRef::node(first_index + k), nodes[k].summary),
    };
    for children in &plan.nodes {
        let (l, ls) = resolve(children[0], &nodes);
        let (r, rs) = resolve(children[1], &nodes);
        nodes.push(LinkedNode {
            children: [l, r],
            summary: Summary::merge(&ls, &rs, collapse),
        });
    }
    let root = resolve(plan.root(), &nodes).0;
    (nodes, root)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BuildInput;
    use crate::bvh::build::build_box::BuildBox;
    use crate::bvh::build::linked_tree::LinkedTree;
    use crate::bvh::build::memory::PeakMemory;
    use caustic_geom::{Aabb, Vec3};

    /// Clusters of `counts[i]` unit boxes each, cluster i at x = 10 i.
    fn clusters(counts: &[u32]) -> (Vec<Cluster>, BuildInput) {
        let mut input = BuildInput::default();
        let mut out = Vec::new();
        for (i, &count) in counts.iter().enumerate() {
            let start = input.len() as u32;
            let x = 10.0 * i as f32;
            let mut bounds = BuildBox::EMPTY;
            for k in 0..count {
                let p = Vec3::new(x + 0.1 * k as f32, (i % 3) as f32, 0.0);
                let b = Aabb::new(p, p + 1.0);
                bounds = bounds.union(BuildBox::from_aabb(b));
                input.bounds.push(b);
                input.centroids.push(b.center());
            }
            out.push(Cluster {
                bounds,
                centroid: ((bounds.min + bounds.max) * 0.5).into(),
                start,
                count,
            });
        }
        (out, input)
    }

    const COLLAPSE: Collapse = Collapse {
        max_leaf_size: 8,
        traversal_cost: 1.0,
        intersection_cost: 1.0,
    };

    #[test]
    fn groups_cover_every_cluster_once_and_link_into_a_valid_tree() {
        let counts = [
            5, 1, 30, 2, 2, 7, 40, 1, 1, 1, 3, 9, 12, 6, 2, 1, 1, 50, 4, 3,
        ];
        let (clusters, input) = clusters(&counts);
        let plan = plan_top(clusters, &HlbvhConfig::DEFAULT, 0);
        assert_eq!(plan.nodes.len() + 1, plan.groups.len());
        let mut next = 0;
        for &(first, count) in &plan.groups {
            assert_eq!(first, next, "groups are consecutive runs");
            let prims: u32 = plan.clusters[first..first + count]
                .iter()
                .map(|c| c.count)
                .sum();
            assert!(count == 1 || prims as usize <= HlbvhConfig::DEFAULT.max_leaf_size);
            next += count;
        }
        assert_eq!(next, counts.len());
        // Each group as one chain of its primitives, in slot order; the top
        // over them must give a valid tree over all the primitives.
        let mut items = Vec::new();
        for c in &plan.clusters {
            items.extend(c.start..c.start + c.count);
        }
        let item_bounds: Vec<Aabb> = items.iter().map(|&i| input.bounds[i as usize]).collect();
        let mut nodes = Vec::new();
        let mut roots = Vec::new();
        let mut slot = 0;
        for &(first, count) in &plan.groups {
            let prims: u32 = plan.clusters[first..first + count]
                .iter()
                .map(|c| c.count)
                .sum();
            let mut root = NodeRef::item(slot);
            let mut summary = Summary::prim(item_bounds[slot], &COLLAPSE);
            let end = slot + prims as usize;
            for (k, &bounds) in item_bounds.iter().enumerate().take(end).skip(slot + 1) {
                let right = Summary::prim(bounds, &COLLAPSE);
                summary = Summary::merge(&summary, &right, &COLLAPSE);
                nodes.push(LinkedNode {
                    children: [root, NodeRef::item(k)],
                    summary,
                });
                root = NodeRef::node(nodes.len() - 1);
            }
            roots.push((root, summary));
            slot += prims as usize;
        }
        let first = nodes.len();
        let (top, root) = link_top(&plan, &roots, &COLLAPSE, first);
        nodes.extend(top);
        let tree = LinkedTree {
            nodes,
            items,
            item_bounds,
            root,
            parallel_min_prims: 64,
            collapse: COLLAPSE,
        };
        let bvh = tree.to_bvh(&[], &PeakMemory::new());
        bvh.validate(&input.bounds).unwrap();
        bvh.validate_tight(&input, 8).unwrap();
    }

    #[test]
    fn one_cluster_or_few_primitives_make_one_group() {
        let (one, _) = clusters(&[100]);
        let plan = plan_top(one, &HlbvhConfig::DEFAULT, 0);
        assert_eq!((plan.groups.len(), plan.root()), (1, TopChild::Group(0)));
        let (few, _) = clusters(&[2, 3, 1]);
        let plan = plan_top(few, &HlbvhConfig::DEFAULT, 0);
        assert_eq!(plan.groups, [(0, 3)]);
        assert!(
            plan_top(Vec::new(), &HlbvhConfig::DEFAULT, 0)
                .groups
                .is_empty()
        );
    }
}
