//! Host-side tests of the GPU kd-tree build: the large stage's planes
//! against the CPU tree, the tail layout, the node record.

use super::*;
use crate::points::kdtree::{PointKdNode, PointKdTree};
use caustic_geom::Pcg32;

#[test]
fn node_is_sixteen_bytes() {
    assert_eq!(size_of::<GpuKdNode>(), 16);
    assert_eq!(size_of::<SmallRoot>(), 40);
}

#[test]
fn tails_pack_each_roots_nodes_after_the_first() {
    let (tails, total) = tail_offsets(10, [1, 5, 3, 1, 7]);
    assert_eq!(tails, [10, 10, 14, 16, 16]);
    assert_eq!(total, 22);
    assert_eq!(tail_offsets(4, []), (vec![], 4));
}

/// Clusters far apart in a big box (so cells have empty space to cut)
/// plus a few duplicates and non-finite points.
fn cloud(n: usize, seed: u64) -> Vec<Vec3> {
    let mut rng = Pcg32::new(seed, 7);
    let mut unit = || rng.next_f32();
    let centres: Vec<Vec3> = (0..5)
        .map(|_| Vec3::new(unit(), unit(), unit()) * 10.0)
        .collect();
    let mut points: Vec<Vec3> = (0..n)
        .map(|i| centres[i % 5] + Vec3::new(unit(), unit() * 0.3, unit()) * 0.2)
        .collect();
    for i in (0..n).step_by(53) {
        points[i] = points[i / 2];
    }
    points[3] = Vec3::new(f32::NAN, 0.0, 0.0);
    points
}

/// The large stage on the host: the device's bounds, flag and stable
/// segmented split done by plain loops around the real [`Layout`].
fn host_large_stage(points: &[Vec3], config: &PointKdTreeConfig) -> (Layout, Vec<u32>) {
    let mut perm: Vec<u32> = (0..points.len() as u32)
        .filter(|&i| points[i as usize].is_finite())
        .collect();
    let tight = |perm: &[u32]| {
        perm.iter()
            .fold(Aabb::EMPTY, |b, &i| b.grown(points[i as usize]))
    };
    let mut layout = Layout::new(config.small_root_limit());
    let mut level = Vec::new();
    let root = layout.reserve();
    layout.file(root, 0, perm.len() as u32, tight(&perm), 0, &mut level);
    while !level.is_empty() {
        let mut plans = Vec::new();
        let mut lefts = Vec::new();
        for node in &level {
            let range = node.start as usize..(node.start + node.count) as usize;
            let plan = plan_large_split(
                node.cell,
                tight(&perm[range.clone()]),
                node.depth,
                config.empty_space_ratio,
            );
            if let Some(plan) = &plan {
                let below = |i: &u32| points[*i as usize][plan.axis] < plan.split;
                let (left, right): (Vec<u32>, Vec<u32>) =
                    perm[range.clone()].iter().copied().partition(below);
                lefts.push(left.len() as u32);
                perm[range].copy_from_slice(&[left, right].concat());
            }
            plans.push(plan);
        }
        level = layout.emit_level(&level, &plans, &lefts);
    }
    (layout, perm)
}

/// The CPU subtree at `node`: its leaves' point range and the index
/// one past it.
fn cpu_subtree(nodes: &[PointKdNode], node: usize) -> (std::ops::Range<u32>, usize) {
    let n = nodes[node];
    if n.is_leaf() {
        return (n.first()..n.first() + n.count(), node + 1);
    }
    let (below, end) = cpu_subtree(nodes, node + 1);
    let (above, end) = cpu_subtree(nodes, end);
    // Empty cut leaves sit at either end of their sibling's range.
    let start = if below.is_empty() {
        above.start
    } else {
        below.start
    };
    (start..start + below.len() as u32 + above.len() as u32, end)
}

/// Walks the host large stage and the CPU tree together: same planes,
/// same leaves, and each small root holds exactly the points (in the
/// same order) of the CPU subtree in its place.
fn compare_large(
    layout: &Layout,
    perm: &[u32],
    cpu: &PointKdTree,
    slot: u32,
    node: usize,
    cuts: &mut usize,
) {
    let cpu_node = cpu.nodes()[node];
    if let Some(root) = layout.small.iter().find(|r| r.slot == slot) {
        let (range, _) = cpu_subtree(cpu.nodes(), node);
        assert_eq!(range.start, root.start, "small root at node {node}");
        let mut want = cpu.ids()[range.start as usize..range.end as usize].to_vec();
        let mut got = perm[root.start as usize..(root.start + root.count) as usize].to_vec();
        want.sort_unstable();
        got.sort_unstable();
        assert_eq!(got, want, "small root at node {node}");
        return;
    }
    let n = layout.nodes[slot as usize];
    if n.is_leaf() {
        assert!(cpu_node.is_leaf(), "leaf at node {node}");
        assert_eq!((n.a, n.b), (cpu_node.first(), cpu_node.count()));
        return;
    }
    assert!(!cpu_node.is_leaf(), "inner node {node}");
    assert_eq!(n.axis as usize, cpu_node.axis(), "axis of node {node}");
    assert_eq!(n.split.to_bits(), cpu_node.split().to_bits(), "node {node}");
    let is_empty = |child: u32| {
        let c = layout.nodes[child as usize];
        c.is_leaf() && c.b == 0 && !layout.small.iter().any(|r| r.slot == child)
    };
    *cuts += usize::from(is_empty(n.a) || is_empty(n.b));
    compare_large(layout, perm, cpu, n.a, node + 1, cuts);
    compare_large(layout, perm, cpu, n.b, cpu_node.right() as usize, cuts);
}

#[test]
fn large_stage_takes_the_cpu_trees_planes() {
    for (n, radius) in [(3_000, 0.05), (20_000, f32::INFINITY), (40, 0.1)] {
        let points = cloud(n, n as u64);
        let config = PointKdTreeConfig::with_radius(radius);
        let cpu = PointKdTree::build(&points, &config);
        let (layout, perm) = host_large_stage(&points, &config);
        let mut cuts = 0;
        compare_large(&layout, &perm, &cpu, 0, 0, &mut cuts);
        assert!(layout.small.iter().all(|r| r.count <= 64 && r.count > 0));
        let held: u32 = layout.small.iter().map(|r| r.count).sum();
        assert!(held as usize <= perm.len());
        if n > 1_000 {
            assert!(cuts > 0, "the clusters leave empty space to cut");
        }
    }
}

fn tree(nodes: Vec<GpuKdNode>, points: &[[f32; 3]]) -> HostKdTree {
    HostKdTree {
        nodes,
        points: points.iter().map(|&p| Vec3::from_array(p)).collect(),
        ids: (0..points.len() as u32).collect(),
    }
}

#[test]
fn validate_accepts_a_cut_and_a_split() {
    // Root cuts x below 0.5 (empty left), then splits y at 0.5.
    let nodes = vec![
        GpuKdNode::inner(0, 0.5, 1, 2),
        GpuKdNode::leaf(0, 0),
        GpuKdNode::inner(1, 0.5, 3, 4),
        GpuKdNode::leaf(0, 1),
        GpuKdNode::leaf(1, 2),
    ];
    let ok = tree(
        nodes.clone(),
        &[[0.6, 0.1, 0.0], [0.7, 0.5, 0.0], [0.9, 0.9, 0.0]],
    );
    assert_eq!(ok.validate(), Ok(()));
    let wrong_side = tree(
        nodes.clone(),
        &[[0.6, 0.5, 0.0], [0.7, 0.5, 0.0], [0.9, 0.9, 0.0]],
    );
    assert!(
        wrong_side
            .validate()
            .unwrap_err()
            .contains("breaks a split")
    );
    let mut gap = nodes.clone();
    gap[4] = GpuKdNode::leaf(2, 1);
    assert!(
        tree(gap, &[[0.6, 0.1, 0.0], [0.7, 0.5, 0.0], [0.9, 0.9, 0.0]])
            .validate()
            .is_err()
    );
    let mut shared = nodes.clone();
    shared[2].b = 3;
    assert!(tree(shared, &[[0.6, 0.1, 0.0]; 3]).validate().is_err());
    let mut hollow = nodes;
    hollow[2] = GpuKdNode::inner(1, 0.5, 3, 1);
    hollow[3] = GpuKdNode::leaf(0, 0);
    assert!(tree(hollow, &[[0.6, 0.1, 0.0]; 3]).validate().is_err());
}
