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
//! Every step is deterministic and uses the CPU's arithmetic, so the
//! result equals the CPU's `Bvh2` exactly, which the GPU tests check.

use super::LbvhConfig;
use super::linked_tree::Collapse;
use super::linked_tree_cuda::{DeviceLinkedTree, collapse_args};
use super::morton_cuda::{DeviceMortonOrder, SortedCodes};
use crate::kernels::bvh_build_lbvh as k;
use caustic_gpu::ops::launch_grid_stride;
use caustic_gpu::{DeviceBuffer, Gpu, GpuError};

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
