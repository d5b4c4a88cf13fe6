//! `lbvh` on the GPU: Karras, "Maximizing Parallelism in the Construction
//! of BVHs, Octrees, and k-d Trees" (HPG 2012), node for node the tree of
//! the CPU's [`LbvhBuilder`](super::LbvhBuilder) for the same triangles and
//! [`LbvhConfig`].
//!
//! 1. The Morton order ([`DeviceMortonOrder`]): the CPU's codes, sorted as
//!    (code, id) pairs.
//! 2. The binary radix tree (§4, `lbvh_splits_*`): one thread per inner
//!    node finds its range and split from the sorted codes alone, with the
//!    CPU's index tie-break for equal codes, and links its children and
//!    their parent pointers.
//! 3. Boxes and summaries bottom-up with atomic counters (§4,
//!    `lbvh_summaries`): the second child to reach a node merges the two
//!    summaries with the CPU's `Summary::merge`, which also decides, by the
//!    SAH, where subtrees collapse into leaves of up to `max_leaf_size`.
//! 4. The depth-first layout with the CPU's depth bound
//!    ([`to_device_bvh`](super::linked_tree_cuda::to_device_bvh)).
//!
//! With one primitive per leaf (`lbvh:leaf=1`, nothing collapses) and every
//! primitive placeable, steps 2 to 4 are one launch instead
//! ([`karras_build`], `lbvh_karras_*`): Apetrei's bottom-up construction
//! (2014) of the same radix tree, writing each node's record in Karras's
//! numbering as it merges (the CPU's `karras_layout`), so no splits, parent
//! links, summaries or layout pass; the slot order is the Morton order.
//!
//! Every step is deterministic and uses the CPU's arithmetic, so the
//! result equals the CPU's `Bvh2` exactly, which the GPU tests check.

use super::LbvhConfig;
use super::lbvh::karras_layout_applies;
use super::linked_tree::Collapse;
use super::linked_tree_cuda::{DeviceLinkedTree, LayoutShape, collapse_args};
use super::morton_cuda::{DeviceMortonOrder, SortedCodes};
use crate::bvh::triangle_bvh_cuda::{DeviceBvh, GpuTriangle};
use crate::kernels::bvh_build_lbvh as k;
use caustic_gpu::ops::launch_grid_stride;
use caustic_gpu::{DeviceBuffer, Gpu, GpuError, StageClock};

/// The collapsing SAH of an `lbvh` configuration.
pub(crate) fn lbvh_collapse(config: &LbvhConfig) -> Collapse {
    Collapse {
        max_leaf_size: config.max_leaf_size.max(1),
        traversal_cost: config.traversal_cost,
        intersection_cost: config.intersection_cost,
    }
}

/// Steps 2 and 3: the radix tree over `order` with its summaries.
pub(crate) fn radix_tree(
    gpu: &Gpu,
    order: &DeviceMortonOrder,
    config: &LbvhConfig,
) -> Result<DeviceLinkedTree, GpuError> {
    let n = order.placed;
    let collapse = lbvh_collapse(config);
    let mut tree = DeviceLinkedTree::new(gpu, n, collapse)?;
    if n < 2 {
        return Ok(tree);
    }
    let mut counters = DeviceBuffer::<u32>::uninit(gpu, "BVH build: node counters", n - 1)?;
    let inner = n - 1;
    match &order.codes {
        SortedCodes::Bits30(codes) => launch_grid_stride(
            gpu,
            k::LBVH_SPLITS_30,
            inner,
            (
                codes.ptr(),
                n as u32,
                tree.nodes.ptr_mut(),
                tree.node_parent.ptr_mut(),
                tree.item_parent.ptr_mut(),
                counters.ptr_mut(),
            ),
        )?,
        SortedCodes::Bits63(codes) => launch_grid_stride(
            gpu,
            k::LBVH_SPLITS_63,
            inner,
            (
                codes.ptr(),
                n as u32,
                tree.nodes.ptr_mut(),
                tree.node_parent.ptr_mut(),
                tree.item_parent.ptr_mut(),
                counters.ptr_mut(),
            ),
        )?,
    }
    let (max_leaf, traversal, intersection) = collapse_args(&collapse);
    launch_grid_stride(
        gpu,
        k::LBVH_SUMMARIES,
        n,
        (
            order.item_bounds.ptr(),
            n as u32,
            tree.node_parent.ptr(),
            tree.item_parent.ptr(),
            tree.nodes.ptr_mut(),
            counters.ptr_mut(),
            max_leaf,
            traversal,
            intersection,
        ),
    )?;
    // Karras's root is inner node 0.
    tree.root.upload(&[0])?;
    Ok(tree)
}

/// Steps 2 to 4 in one launch for one primitive per leaf over placeable
/// primitives (see the module docs), the triangles gathered in Morton order
/// in the same launch (each climb starts by copying its triangle, whose box
/// it needs). `order` need not be gathered ([`DeviceMortonOrder::sorted`]);
/// a tree that is kept takes its ids (the leaves' primitive indices).
/// Marks "hierarchy" and "layout" (the root's height read back, the slot
/// map) on `clock`. `None` where the CPU lays the tree out depth first
/// ([`karras_layout_applies`]): more than one primitive per leaf,
/// unplaceable primitives, fewer than two, or a tree deeper than the depth
/// bound (then nothing of it is kept).
pub(crate) fn karras_build(
    gpu: &Gpu,
    order: &mut DeviceMortonOrder,
    config: &LbvhConfig,
    triangles: &DeviceBuffer<GpuTriangle>,
    clock: &mut StageClock,
) -> Result<Option<(DeviceBvh, LayoutShape)>, GpuError> {
    let n = triangles.len();
    if config.max_leaf_size != 1 || !karras_layout_applies(order.placed, n - order.placed, 0) {
        return Ok(None);
    }
    let mut nodes = DeviceBuffer::uninit(gpu, "BVH nodes", 2 * n - 1)?;
    let mut leaf_triangles = DeviceBuffer::uninit(gpu, "BVH leaf triangles", n)?;
    let mut slots = DeviceBuffer::uninit(gpu, "BVH slots", n)?;
    let mut height = DeviceBuffer::<u32>::zeroed(gpu, "BVH build: height", 1)?;
    {
        let mut waiting = DeviceBuffer::<u32>::zeroed(gpu, "BVH build: split arrivals", n - 1)?;
        let mut parked =
            DeviceBuffer::<[f32; 4]>::uninit(gpu, "BVH build: children at splits", 4 * (n - 1))?;
        match &order.codes {
            SortedCodes::Bits30(codes) => launch_grid_stride(
                gpu,
                k::LBVH_KARRAS_30,
                n,
                (
                    codes.ptr(),
                    order.ids.ptr(),
                    triangles.ptr(),
                    n as u32,
                    waiting.ptr_mut(),
                    parked.ptr_mut(),
                    nodes.ptr_mut(),
                    leaf_triangles.ptr_mut(),
                    slots.ptr_mut(),
                    height.ptr_mut(),
                ),
            )?,
            SortedCodes::Bits63(codes) => launch_grid_stride(
                gpu,
                k::LBVH_KARRAS_63,
                n,
                (
                    codes.ptr(),
                    order.ids.ptr(),
                    triangles.ptr(),
                    n as u32,
                    waiting.ptr_mut(),
                    parked.ptr_mut(),
                    nodes.ptr_mut(),
                    leaf_triangles.ptr_mut(),
                    slots.ptr_mut(),
                    height.ptr_mut(),
                ),
            )?,
        }
    }
    clock.mark("hierarchy")?;
    let height = height.download()?[0];
    if !karras_layout_applies(n, 0, height) {
        return Ok(None);
    }
    // The slots hold the Morton order: the tree takes its ids as they are.
    let prim_indices = std::mem::replace(
        &mut order.ids,
        DeviceBuffer::uninit(gpu, "BVH build: Morton order", 0)?,
    )
    .renamed("BVH prim indices");
    clock.mark("layout")?;
    let shape = LayoutShape {
        nodes: 2 * n - 1,
        leaves: n,
        height: height as usize,
    };
    let bvh = DeviceBvh::from_device_parts(nodes, leaf_triangles, prim_indices, slots);
    Ok(Some((bvh, shape)))
}
