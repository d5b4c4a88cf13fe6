//! The GPU photon kd-tree downloaded to the host, and the structural checks
//! the tests and benchmarks run on it.

use caustic_geom::Vec3;

use super::MAX_DEPTH;
use super::build_cuda::GpuKdNode;

/// The tree as the host sees it after `GpuPointKdTree::download`.
#[derive(Clone, Debug)]
pub struct HostKdTree {
    pub nodes: Vec<GpuKdNode>,
    /// Finite points in leaf order.
    pub points: Vec<Vec3>,
    /// Input index of each entry of `points`.
    pub ids: Vec<u32>,
}

impl HostKdTree {
    /// Checks the invariants the queries rely on: every node reached once
    /// from the root, depth at most `MAX_DEPTH`, every point obeys the
    /// split rule (`left iff coord < split`) of every ancestor, the
    /// non-empty leaves tile `points` without gaps or overlap, input
    /// indices are distinct, and every inner node holds points (an empty
    /// leaf is only ever the empty side of a node with points).
    pub fn validate(&self) -> Result<(), String> {
        let mut seen = vec![false; self.nodes.len()];
        let mut ranges = Vec::new();
        let unbounded = ([f32::NEG_INFINITY; 3], [f32::INFINITY; 3]);
        let walk = Walk {
            tree: self,
            seen: &mut seen,
            ranges: &mut ranges,
        };
        walk.run(0, unbounded.0, unbounded.1)?;
        if let Some(node) = seen.iter().position(|&s| !s) {
            return Err(format!("node {node} is not reachable"));
        }
        ranges.sort_unstable();
        let mut next = 0;
        for (first, count) in ranges {
            if first != next {
                return Err(format!("leaves skip or overlap at point {next}"));
            }
            next += count;
        }
        if next as usize != self.points.len() {
            return Err(format!(
                "leaves hold {next} of {} points",
                self.points.len()
            ));
        }
        let mut ids = self.ids.clone();
        ids.sort_unstable();
        match ids.windows(2).find(|w| w[0] == w[1]) {
            Some(w) => Err(format!("point {} is stored twice", w[0])),
            None => Ok(()),
        }
    }
}

/// The state of [`HostKdTree::validate`]'s walk.
struct Walk<'a> {
    tree: &'a HostKdTree,
    seen: &'a mut [bool],
    /// `(first, count)` of every non-empty leaf.
    ranges: &'a mut Vec<(u32, u32)>,
}

impl Walk<'_> {
    fn run(mut self, root: u32, lower: [f32; 3], upper: [f32; 3]) -> Result<u32, String> {
        self.node(root, lower, upper, 0)
    }

    /// Checks the subtree at `node`, whose points must satisfy
    /// `lower <= p < upper`; returns how many points it holds.
    fn node(
        &mut self,
        node: u32,
        lower: [f32; 3],
        upper: [f32; 3],
        depth: usize,
    ) -> Result<u32, String> {
        let n = *self
            .tree
            .nodes
            .get(node as usize)
            .ok_or(format!("link to node {node} out of range"))?;
        if std::mem::replace(&mut self.seen[node as usize], true) {
            return Err(format!("node {node} is reached twice"));
        }
        if depth > MAX_DEPTH {
            return Err(format!("node {node} is deeper than {MAX_DEPTH}"));
        }
        if n.is_leaf() {
            return self.leaf(node, n, lower, upper);
        }
        let axis = n.axis as usize;
        if axis > 2 {
            return Err(format!("node {node} has axis {axis}"));
        }
        let (mut below_upper, mut above_lower) = (upper, lower);
        below_upper[axis] = below_upper[axis].min(n.split);
        above_lower[axis] = above_lower[axis].max(n.split);
        let below = self.node(n.a, lower, below_upper, depth + 1)?;
        let above = self.node(n.b, above_lower, upper, depth + 1)?;
        if below + above == 0 {
            return Err(format!("node {node} splits no points"));
        }
        Ok(below + above)
    }

    fn leaf(
        &mut self,
        node: u32,
        n: GpuKdNode,
        lower: [f32; 3],
        upper: [f32; 3],
    ) -> Result<u32, String> {
        if n.b == 0 {
            return Ok(0);
        }
        let end = n.a as usize + n.b as usize;
        let points = self
            .tree
            .points
            .get(n.a as usize..end)
            .ok_or(format!("leaf {node} overruns the points"))?;
        for (j, p) in points.iter().enumerate() {
            if (0..3).any(|a| !(lower[a] <= p[a] && p[a] < upper[a])) {
                let id = self.tree.ids[n.a as usize + j];
                return Err(format!("point {id} breaks a split above leaf {node}"));
            }
        }
        self.ranges.push((n.a, n.b));
        Ok(n.b)
    }
}
