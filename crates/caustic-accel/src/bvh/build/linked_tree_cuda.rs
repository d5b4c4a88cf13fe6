//! The device twin of [`LinkedTree`](super::linked_tree::LinkedTree): the
//! binary tree that the bottom-up GPU builders (`lbvh`, `ploc`, and the
//! cluster subtrees of `hlbvh`) make over the Morton order, and its layout
//! as a [`DeviceBvh`] (`linked_tree.cu`).
//!
//! Nodes are [`GpuLinkedNode`]s: two children (a node index, or a position
//! in the Morton order with the top bit set, as `NodeRef`) and the summary
//! of the subtree after leaf collapsing, merged on the device with the
//! CPU's arithmetic (`linked_tree.cuh`). Each node and primitive also
//! records its parent, which the layout's in-order walks follow.
//!
//! The layout is `LinkedTree::to_bvh` breadth first: one launch per level
//! of the output, at most [`MAX_DEPTH`] + 1, each node placed where the
//! CPU's depth-first recursion places it (its room follows from its
//! parent's: leaf counts after collapsing give the node offsets, primitive
//! counts the slot offsets), the depth bound enforced the CPU's way (see
//! `linked_tree.cu`). So for the same tree the nodes and slots are the
//! CPU's bit for bit. Then the triangles are gathered in slot order with
//! their scene ids, with the inverse map, into a [`DeviceBvh`].
//!
//! The host reads one record (the root's shape) to size the output; the
//! levels run without waiting for it.

use super::linked_tree::{Collapse, LinkedNode, NodeRef, Summary, Target};
use super::morton_cuda::DeviceMortonOrder;
use crate::BvhNode;
use crate::bvh::MAX_DEPTH;
use crate::bvh::triangle_bvh_cuda::{DeviceBvh, GpuTriangle};
use crate::kernels::bvh_build_linked_tree as k;
use bytemuck::{Pod, Zeroable};
use caustic_geom::Aabb;
use caustic_gpu::ops::{GRID_STRIDE_THREADS, blocks_for, launch_grid_stride};
use caustic_gpu::{DeviceBuffer, Gpu, GpuError};

/// A node of the device tree (`LinkedNode` in `linked_tree.cuh`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct GpuLinkedNode {
    /// `NodeRef`s: an inner node's index, or `ITEM_BIT | position`.
    pub children: [u32; 2],
    pub min: [f32; 3],
    pub max: [f32; 3],
    pub prims: u32,
    pub leaves: u32,
    pub height: u32,
    pub cost: f32,
}

const _: () = assert!(size_of::<GpuLinkedNode>() == 48);

impl GpuLinkedNode {
    pub(crate) fn from_linked(node: &LinkedNode) -> Self {
        let child = |r: NodeRef| match r.target() {
            Target::Node(i) => i as u32,
            Target::Item(i) => i as u32 | ITEM_BIT,
        };
        let s = &node.summary;
        Self {
            children: node.children.map(child),
            min: s.bounds.min.to_array(),
            max: s.bounds.max.to_array(),
            prims: s.prims,
            leaves: s.leaves,
            height: s.height,
            cost: s.cost,
        }
    }

    pub(crate) fn summary(&self) -> Summary {
        Summary {
            bounds: Aabb::new(self.min.into(), self.max.into()),
            prims: self.prims,
            leaves: self.leaves,
            height: self.height,
            cost: self.cost,
        }
    }
}

/// One node of the output for the layout kernel to write (`LayoutTask` in
/// `linked_tree.cu`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct LayoutTask {
    pub target: u32,
    pub slot: u32,
    pub node_base: u32,
    pub prim_base: u32,
    pub depth: u32,
    pub k0: u32,
    pub k1: u32,
    pub kind: u32,
}

/// The top bit of a child reference: a primitive (`LT_ITEM_BIT`).
pub(crate) const ITEM_BIT: u32 = 1 << 31;

/// The reference of a [`NodeRef`] on the device.
pub(crate) fn device_ref(r: NodeRef) -> u32 {
    match r.target() {
        Target::Node(i) => i as u32,
        Target::Item(i) => i as u32 | ITEM_BIT,
    }
}

/// The [`NodeRef`] of a device reference.
pub(crate) fn host_ref(r: u32) -> NodeRef {
    if r & ITEM_BIT != 0 {
        NodeRef::item((r & !ITEM_BIT) as usize)
    } else {
        NodeRef::node(r as usize)
    }
}

/// The collapsing SAH's constants as the kernels take them.
pub(crate) fn collapse_args(c: &Collapse) -> (u32, f32, f32) {
    (c.max_leaf_size, c.traversal_cost, c.intersection_cost)
}

/// A tree over `placed` primitives (the first of the Morton order), built
/// on the device.
pub(crate) struct DeviceLinkedTree {
    /// `placed - 1` inner nodes (none for fewer than two primitives).
    pub nodes: DeviceBuffer<GpuLinkedNode>,
    pub node_parent: DeviceBuffer<u32>,
    pub item_parent: DeviceBuffer<u32>,
    /// The root's reference, on the device (the builder writes it).
    pub root: DeviceBuffer<u32>,
    /// The collapsing SAH its summaries were merged with.
    pub collapse: Collapse,
}

impl DeviceLinkedTree {
    /// Room for a tree over `placed` primitives; the root is primitive 0
    /// until the builder says otherwise.
    pub fn new(gpu: &Gpu, placed: usize, collapse: Collapse) -> Result<Self, GpuError> {
        let inner = placed.saturating_sub(1);
        let mut node_parent = DeviceBuffer::uninit(gpu, "BVH build: node parents", inner)?;
        node_parent.fill_bytes(0xff)?;
        Ok(Self {
            nodes: DeviceBuffer::uninit(gpu, "BVH build: linked nodes", inner)?,
            node_parent,
            item_parent: DeviceBuffer::uninit(gpu, "BVH build: primitive parents", placed)?,
            root: DeviceBuffer::from_slice(gpu, "BVH build: root", &[ITEM_BIT])?,
            collapse,
        })
    }
}

/// What the layout found out about the tree.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct LayoutShape {
    pub nodes: usize,
    pub leaves: usize,
    /// Levels below the root after collapsing, before the depth bound.
    pub height: usize,
}

/// Lays `tree` out over `order` and gathers `triangles` (scene order) into
/// slot order. Marks the stages "layout" and "triangles" on `clock`.
pub(crate) fn to_device_bvh(
    gpu: &Gpu,
    tree: &DeviceLinkedTree,
    order: &DeviceMortonOrder,
    triangles: &DeviceBuffer<GpuTriangle>,
    clock: &mut caustic_gpu::StageClock,
) -> Result<(DeviceBvh, LayoutShape), GpuError> {
    let n = triangles.len();
    let placed = order.placed;
    let parked = n - placed;
    let mut prim_indices = DeviceBuffer::uninit(gpu, "BVH prim indices", n)?;
    let (nodes, shape) = if placed == 0 {
        // Nothing placeable: one parking leaf with the empty box, or nothing.
        let nodes: Vec<BvhNode> = if n == 0 {
            Vec::new()
        } else {
            vec![BvhNode::leaf(Aabb::EMPTY, 0, n as u32)]
        };
        let shape = LayoutShape {
            nodes: nodes.len(),
            leaves: nodes.len(),
            height: 0,
        };
        (DeviceBuffer::from_slice(gpu, "BVH nodes", &nodes)?, shape)
    } else {
        lay_out(gpu, tree, order, &mut prim_indices)?
    };
    launch_grid_stride(
        gpu,
        k::LT_COPY_U32,
        parked,
        (
            order.ids.ptr_at(placed),
            parked as u64,
            prim_indices.ptr_mut_at(placed),
        ),
    )?;
    clock.mark("layout")?;
    let (leaf_triangles, slots) = gather_triangles(gpu, triangles, &prim_indices)?;
    clock.mark("triangles")?;
    let bvh = DeviceBvh::from_device_parts(nodes, leaf_triangles, prim_indices, slots);
    Ok((bvh, shape))
}

/// `triangles` (scene order) gathered into slot order with their scene ids,
/// and the inverse map (scene id to slot).
pub(crate) fn gather_triangles(
    gpu: &Gpu,
    triangles: &DeviceBuffer<GpuTriangle>,
    prim_indices: &DeviceBuffer<u32>,
) -> Result<(DeviceBuffer<GpuTriangle>, DeviceBuffer<u32>), GpuError> {
    let n = triangles.len();
    let mut leaf_triangles = DeviceBuffer::uninit(gpu, "BVH leaf triangles", n)?;
    let mut slots = DeviceBuffer::uninit(gpu, "BVH slots", n)?;
    launch_grid_stride(
        gpu,
        k::LT_GATHER_TRIANGLES,
        n,
        (
            triangles.ptr(),
            prim_indices.ptr(),
            n as u64,
            leaf_triangles.ptr_mut(),
            slots.ptr_mut(),
        ),
    )?;
    Ok((leaf_triangles, slots))
}

/// The layout proper, for at least one placed primitive.
fn lay_out(
    gpu: &Gpu,
    tree: &DeviceLinkedTree,
    order: &DeviceMortonOrder,
    prim_indices: &mut DeviceBuffer<u32>,
) -> Result<(DeviceBuffer<BvhNode>, LayoutShape), GpuError> {
    let n = order.ids.len();
    let placed = order.placed;
    let parked = n - placed;
    let info = ref_summaries(gpu, tree, order, &tree.root)?;
    let root = info.download()?[0];
    if root.prims as usize != placed || root.leaves == 0 {
        return Err(GpuError::Invalid {
            what: "device BVH build",
            message: format!(
                "the root covers {} of {placed} primitives in {} leaves",
                root.prims, root.leaves
            ),
        });
    }
    let leaves = root.leaves as usize;
    let start_depth = usize::from(parked > 0);
    let node_count = 2 * leaves - 1 + 2 * usize::from(parked > 0);
    let mut nodes = DeviceBuffer::uninit(gpu, "BVH nodes", node_count)?;
    let deepest = (start_depth + root.height as usize).min(MAX_DEPTH);
    let levels = deepest - start_depth + 1;
    // The balanced fallback only runs where the tree could be too deep.
    let fallback = start_depth + root.height as usize > MAX_DEPTH;
    let mut leaf_list = DeviceBuffer::<u32>::uninit(
        gpu,
        "BVH build: fallback leaf list",
        if fallback { leaves } else { 1 },
    )?;
    let mut leaf_top = DeviceBuffer::<u32>::zeroed(gpu, "BVH build: fallback counter", 1)?;
    let mut counts = DeviceBuffer::<u32>::zeroed(gpu, "BVH build: level sizes", levels + 1)?;
    let mut tasks = [
        DeviceBuffer::<LayoutTask>::uninit(gpu, "BVH build: layout tasks", leaves)?,
        DeviceBuffer::<LayoutTask>::uninit(gpu, "BVH build: layout tasks", leaves)?,
    ];
    gpu.launch(
        k::LT_LAYOUT_START,
        1,
        32,
        (
            info.ptr(),
            placed as u32,
            parked as u32,
            tasks[0].ptr_mut(),
            counts.ptr_mut(),
            nodes.ptr_mut(),
        ),
    )?;
    for level in 0..levels {
        // A level holds at most 2^level nodes, and never more than the leaves.
        let bound = if level < 40 {
            (1usize << level).min(leaves)
        } else {
            leaves
        };
        let blocks = blocks_for(bound, GRID_STRIDE_THREADS as usize).min(1 << 16);
        let (read, write) = tasks.split_at_mut(1);
        let (tasks_in, tasks_out) = if level % 2 == 0 {
            (&read[0], &mut write[0])
        } else {
            (&write[0], &mut read[0])
        };
        let (count_in, count_out) = counts.ptr_mut_at(level).split_at(1);
        gpu.launch(
            k::LT_LAYOUT_LEVEL,
            blocks,
            GRID_STRIDE_THREADS,
            (
                tree.nodes.ptr(),
                tree.node_parent.ptr(),
                tree.item_parent.ptr(),
                order.item_bounds.ptr(),
                order.ids.ptr(),
                tasks_in.ptr(),
                count_in.as_const(),
                tasks_out.ptr_mut(),
                count_out,
                leaf_list.ptr_mut(),
                leaf_top.ptr_mut(),
                nodes.ptr_mut(),
                prim_indices.ptr_mut(),
            ),
        )?;
    }
    let shape = LayoutShape {
        nodes: node_count,
        leaves: leaves + usize::from(parked > 0),
        height: root.height as usize,
    };
    Ok((nodes, shape))
}

/// The summaries of the subtrees `refs` (each reference in `children[0]`),
/// on the device.
pub(crate) fn ref_summaries(
    gpu: &Gpu,
    tree: &DeviceLinkedTree,
    order: &DeviceMortonOrder,
    refs: &DeviceBuffer<u32>,
) -> Result<DeviceBuffer<GpuLinkedNode>, GpuError> {
    let mut summaries = DeviceBuffer::uninit(gpu, "BVH build: subtree summaries", refs.len())?;
    let (max_leaf, traversal, intersection) = collapse_args(&tree.collapse);
    launch_grid_stride(
        gpu,
        k::LT_REF_SUMMARIES,
        refs.len(),
        (
            tree.nodes.ptr(),
            order.item_bounds.ptr(),
            refs.ptr(),
            refs.len() as u64,
            max_leaf,
            traversal,
            intersection,
            summaries.ptr_mut(),
        ),
    )?;
    Ok(summaries)
}

/// The SAH cost of device nodes as [`crate::sah_cost`] defines it, summed
/// on the device in `f64` (the order of the sums differs from the CPU's,
/// which changes the result by rounding only).
pub(crate) fn device_sah_cost(gpu: &Gpu, nodes: &DeviceBuffer<BvhNode>) -> Result<f32, GpuError> {
    if nodes.is_empty() {
        return Ok(0.0);
    }
    let blocks = blocks_for(nodes.len(), GRID_STRIDE_THREADS as usize).min(256);
    let mut partials =
        DeviceBuffer::<f64>::uninit(gpu, "SAH partial sums", 2 * blocks as usize + 1)?;
    gpu.launch(
        k::LT_SAH_PARTIALS,
        blocks,
        GRID_STRIDE_THREADS,
        (nodes.ptr(), nodes.len() as u64, partials.ptr_mut()),
    )?;
    let sums = partials.download()?;
    let root_area = sums[2 * blocks as usize];
    let (weighted, weights) = sums[..2 * blocks as usize]
        .chunks(2)
        .fold((0.0, 0.0), |(a, b), p| (a + p[0], b + p[1]));
    Ok(if root_area > 0.0 {
        (weighted / root_area) as f32
    } else {
        weights as f32
    })
}

/// Sets the parents of the children of host-built nodes (the GPU hlbvh's
/// top): `pairs` holds (child reference, parent index).
pub(crate) fn set_parents(
    gpu: &Gpu,
    tree: &mut DeviceLinkedTree,
    pairs: &[[u32; 2]],
) -> Result<(), GpuError> {
    if pairs.is_empty() {
        return Ok(());
    }
    let flat: Vec<u32> = pairs.iter().flatten().copied().collect();
    let pairs_buffer = DeviceBuffer::from_slice(gpu, "BVH build: top parents", &flat)?;
    launch_grid_stride(
        gpu,
        k::LT_SET_PARENTS,
        pairs.len(),
        (
            pairs_buffer.ptr(),
            pairs.len() as u64,
            tree.node_parent.ptr_mut(),
            tree.item_parent.ptr_mut(),
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use caustic_geom::Vec3;

    #[test]
    fn references_round_trip() {
        for r in [
            NodeRef::node(0),
            NodeRef::node(77),
            NodeRef::item(0),
            NodeRef::item(5),
        ] {
            assert_eq!(host_ref(device_ref(r)), r);
        }
        assert_eq!(device_ref(NodeRef::item(3)), 3 | ITEM_BIT);
    }

    /// The kernels' constants are the host's.
    #[test]
    fn host_constants_match_the_kernels() {
        use crate::kernels::{bvh_build_linked_tree, bvh_build_ploc};
        assert_eq!(
            bvh_build_linked_tree::MODULE.define("LT_MAX_DEPTH"),
            MAX_DEPTH
        );
        let ploc = &bvh_build_ploc::MODULE;
        assert_eq!(
            ploc.define("PLOC_MAX_RADIUS"),
            super::super::ploc_cuda::MAX_RADIUS
        );
        assert_eq!(
            ploc.define("PLOC_THREADS"),
            super::super::ploc_cuda::NEAREST_THREADS as usize
        );
    }

    #[test]
    fn nodes_keep_their_summaries() {
        let summary = Summary {
            bounds: Aabb::new(Vec3::new(-1.0, 0.0, 2.0), Vec3::new(3.0, 4.0, 5.0)),
            prims: 9,
            leaves: 3,
            height: 2,
            cost: 17.5,
        };
        let node = LinkedNode {
            children: [NodeRef::item(4), NodeRef::node(2)],
            summary,
        };
        let gpu = GpuLinkedNode::from_linked(&node);
        assert_eq!(gpu.children, [4 | ITEM_BIT, 2]);
        assert_eq!(gpu.summary(), summary);
    }
}
