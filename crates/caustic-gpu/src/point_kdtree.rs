//! A photon kd-tree built on the GPU (`kernels/point_kdtree.cu`), level by
//! level after Zhou et al. 2008 (seed 002): all nodes of a level split at
//! once (one block per node finds its bounds, the spatial median of its
//! longest axis and its left count), and the segmented split primitive
//! (`ops::split::segmented_partition_u32`) reorders every node's points in
//! one pass. Queries (kNN and radius) follow `caustic_accel::points`'s
//! contract bit for bit, as [`crate::points`]'s do.
//!
//! Left out from seed 002, and said so: the empty-space cut-off and the
//! small-node VVH (every node splits at the spatial median); the host reads
//! each level's split results back to lay out the children (a few bytes
//! per node), so a build costs a host round trip per level.

use bytemuck::{Pod, Zeroable};

use crate::buffer::DeviceBuffer;
use crate::error::GpuError;
use crate::kernels::{point_kdtree as k, points as pk};
use crate::ops::compact::select_indices;
use crate::ops::split::segmented_partition_u32;
use crate::ops::{check_len, launch_grid_stride as launch};
use crate::points::{GpuNeighbours, GpuRadiusNeighbours, MAX_K, MAX_POINTS, radius_two_pass};

/// Most points a leaf keeps when a plane can still split them.
pub const LEAF_POINTS: u32 = 16;
/// Most levels: the query kernels' stack holds one far child per level.
const MAX_LEVELS: usize = 63;
/// `GpuKdNode::axis` of a leaf.
const LEAF_AXIS: u32 = 3;

/// A node: inner nodes split `axis` at `split` (children `a` below, `b` at
/// or above); leaves (`axis == 3`) hold sorted points `a .. a + b`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct GpuKdNode {
    pub split: f32,
    pub axis: u32,
    pub a: u32,
    pub b: u32,
}

/// A kd-tree over points on the device.
pub struct GpuPointKdTree {
    nodes: DeviceBuffer<GpuKdNode>,
    /// Finite points in leaf order; `w` holds the input index's bits.
    sorted: DeviceBuffer<[f32; 4]>,
    len: usize,
    depth: usize,
    leaves: usize,
}

impl GpuPointKdTree {
    /// Builds the tree over `points` (x, y, z each, on the device); points
    /// with a non-finite coordinate are left out (never returned).
    pub fn build(points: &DeviceBuffer<[f32; 3]>) -> Result<Self, GpuError> {
        let gpu = points.gpu();
        let n = points.len();
        check_len(k::POINT_KDTREE_FINITE.name(), n, MAX_POINTS)?;
        let mut finite = DeviceBuffer::<u32>::uninit(gpu, "kd-tree finite flags", n)?;
        launch(
            gpu,
            k::POINT_KDTREE_FINITE,
            n,
            &[points.arg(), n.into(), finite.arg()],
        )?;
        let mut perm = select_indices(&finite)?;
        finite.truncate(0);
        let m = perm.len();
        let mut nodes = vec![GpuKdNode {
            axis: LEAF_AXIS,
            a: 0,
            b: m as u32,
            ..Default::default()
        }];
        let mut level: Vec<u32> = if m as u32 > LEAF_POINTS {
            vec![0]
        } else {
            Vec::new()
        };
        let mut depth = 0;
        while !level.is_empty() && depth < MAX_LEVELS {
            perm = split_level(points, perm, &mut nodes, &mut level)?;
            depth += 1;
        }
        let sorted = DeviceBuffer::<[f32; 4]>::uninit(gpu, "kd-tree points", m)?;
        launch(
            gpu,
            pk::POINTS_GATHER,
            m,
            &[points.arg(), perm.arg(), m.into(), sorted.arg()],
        )?;
        let leaves = nodes.iter().filter(|n| n.axis == LEAF_AXIS).count();
        Ok(Self {
            nodes: DeviceBuffer::from_slice(gpu, "kd-tree nodes", &nodes)?,
            sorted,
            len: n,
            depth: depth + 1,
            leaves,
        })
    }

    /// Number of input points (non-finite ones included, never returned).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Nodes, leaves and the deepest level (1 for a single leaf).
    pub fn shape(&self) -> (usize, usize, usize) {
        (self.nodes.len(), self.leaves, self.depth)
    }

    /// Device bytes the tree holds.
    pub fn bytes(&self) -> usize {
        self.nodes.bytes() + self.sorted.bytes()
    }

    /// The `k` nearest points within `max_radius` of every query.
    pub fn knn(
        &self,
        queries: &DeviceBuffer<[f32; 3]>,
        k: usize,
        max_radius: f32,
    ) -> Result<GpuNeighbours, GpuError> {
        if k > MAX_K {
            return Err(GpuError::Invalid {
                what: "kNN k",
                message: format!("{k} neighbours asked, the GPU kernels keep at most {MAX_K}"),
            });
        }
        let gpu = queries.gpu();
        let m = queries.len();
        let out = GpuNeighbours::new(gpu, m, k)?;
        launch(
            gpu,
            k::POINT_KDTREE_KNN,
            m,
            &[
                self.nodes.arg(),
                self.sorted.arg(),
                (self.sorted.len() as u32).into(),
                queries.arg(),
                m.into(),
                (k as u32).into(),
                max_radius.into(),
                out.index.arg(),
                out.dist2.arg(),
                out.count.arg(),
            ],
        )?;
        Ok(out)
    }

    /// Every point within `radius` (any, `+inf` included) of every query,
    /// sorted by `(dist2, index)`.
    pub fn radius(
        &self,
        queries: &DeviceBuffer<[f32; 3]>,
        radius: f32,
    ) -> Result<GpuRadiusNeighbours, GpuError> {
        let gpu = queries.gpu();
        let m = queries.len();
        let kernel = k::POINT_KDTREE_RADIUS;
        radius_two_pass(gpu, kernel.name(), m, |tail| {
            let mut args = vec![
                self.nodes.arg(),
                self.sorted.arg(),
                (self.sorted.len() as u32).into(),
                queries.arg(),
                m.into(),
                radius.into(),
            ];
            args.extend_from_slice(tail);
            launch(gpu, kernel, m, &args)
        })
    }
}

/// Splits the nodes of `level` (indices into `nodes`, each a leaf so far
/// holding more than [`LEAF_POINTS`]): returns the new permutation and
/// leaves the next level's nodes in `level`.
fn split_level(
    points: &DeviceBuffer<[f32; 3]>,
    perm: DeviceBuffer<u32>,
    nodes: &mut Vec<GpuKdNode>,
    level: &mut Vec<u32>,
) -> Result<DeviceBuffer<u32>, GpuError> {
    let gpu = points.gpu();
    let n = perm.len();
    let count = level.len();
    let ranges: Vec<u32> = level
        .iter()
        .flat_map(|&i| [nodes[i as usize].a, nodes[i as usize].b])
        .collect();
    let ranges = DeviceBuffer::from_slice(gpu, "kd-tree level ranges", &ranges)?;
    let flags = DeviceBuffer::<u32>::zeroed(gpu, "kd-tree split flags", n)?;
    let axis = DeviceBuffer::<u32>::uninit(gpu, "kd-tree split axes", count)?;
    let split = DeviceBuffer::<f32>::uninit(gpu, "kd-tree split planes", count)?;
    let left = DeviceBuffer::<u32>::uninit(gpu, "kd-tree left counts", count)?;
    gpu.launch(
        k::POINT_KDTREE_SPLIT,
        count as u32,
        256,
        &[
            points.arg(),
            perm.arg(),
            ranges.arg(),
            flags.arg(),
            axis.arg(),
            split.arg(),
            left.arg(),
        ],
    )?;
    let heads = DeviceBuffer::<u32>::zeroed(gpu, "kd-tree segment heads", n)?;
    launch(
        gpu,
        k::POINT_KDTREE_HEADS,
        count,
        &[
            ranges.arg(),
            (count as u32).into(),
            (n as u32).into(),
            heads.arg(),
        ],
    )?;
    let perm = segmented_partition_u32(&perm, &flags, &heads)?;
    let (axis, split, left) = (axis.download()?, split.download()?, left.download()?);
    let mut next = Vec::new();
    for (j, &i) in level.iter().enumerate() {
        let GpuKdNode {
            a: start, b: size, ..
        } = nodes[i as usize];
        if axis[j] == LEAF_AXIS {
            continue;
        }
        let first = nodes.len() as u32;
        for (a, b) in [(start, left[j]), (start + left[j], size - left[j])] {
            if b > LEAF_POINTS {
                next.push(nodes.len() as u32);
            }
            nodes.push(GpuKdNode {
                split: 0.0,
                axis: LEAF_AXIS,
                a,
                b,
            });
        }
        nodes[i as usize] = GpuKdNode {
            split: split[j],
            axis: axis[j],
            a: first,
            b: first + 1,
        };
    }
    *level = next;
    Ok(perm)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_is_sixteen_bytes() {
        assert_eq!(size_of::<GpuKdNode>(), 16);
    }
}
