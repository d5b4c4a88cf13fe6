//! The GPU twin of [`refit`](super::refit): a [`DeviceBvh`] (the [`Bvh2`]
//! layout on the device, built there or uploaded) refitted in place to
//! triangles that moved, without leaving the device (`refit.cu`).
//!
//! 1. The scene-order triangles (where a moving scene writes what moved)
//!    are gathered into the tree's leaf-slot order.
//! 2. The bottom-up pass of Karras 2012, §4: one thread per leaf computes
//!    its box and climbs the parent links; an atomic arrival counter per
//!    node stops the first child to arrive and lets the second compute the
//!    parent's box.
//! 3. The SAH cost of the refitted tree ([`crate::sah_cost`]), summed on
//!    the device in `f64` (the builders' `device_sah_cost`: one
//!    grid-stride pass over the nodes, 256 block sums read back), for
//!    [`UpdatePolicy::Auto`](super::UpdatePolicy::Auto)'s bound.
//!
//! The boxes equal [`Bvh2::refit`]'s bit for bit (the same min/max over the
//! same floats in the same order; see `refit.cu`). The parent links depend
//! only on the topology: a [`DeviceRefit`] computes them once per tree and
//! serves every refit of it.
//!
//! [`Bvh2`]: crate::Bvh2
//! [`Bvh2::refit`]: crate::Bvh2::refit

use super::build::linked_tree_cuda::device_sah_cost;
use super::triangle_bvh_cuda::{DeviceBvh, GpuTriangle};
use crate::kernels::bvh_refit as k;
use caustic_gpu::ops::launch_grid_stride;
use caustic_gpu::{DeviceBuffer, GpuError};

/// The parent links and arrival counters of one device tree, kept from
/// refit to refit (the topology does not change).
pub struct DeviceRefit {
    /// Parent of every node (`u32::MAX` for the root).
    parents: DeviceBuffer<u32>,
    /// One arrival counter per node, zeroed before each pass.
    arrivals: DeviceBuffer<u32>,
}

impl DeviceRefit {
    /// The parent links of `bvh`'s nodes, computed on the device.
    pub fn new(bvh: &DeviceBvh) -> Result<Self, GpuError> {
        let gpu = bvh.gpu();
        let n = bvh.nodes().len();
        let mut parents = DeviceBuffer::uninit(gpu, "BVH refit: parents", n)?;
        let arrivals = DeviceBuffer::uninit(gpu, "BVH refit: arrivals", n)?;
        launch_grid_stride(
            gpu,
            k::REFIT_PARENTS,
            n,
            (bvh.nodes().ptr(), n as u64, parents.ptr_mut()),
        )?;
        Ok(Self { parents, arrivals })
    }

    /// Whether these links were made for a tree of `bvh`'s size (a
    /// rebuilt tree needs new ones; see [`DeviceRefit::new`]).
    pub fn fits(&self, bvh: &DeviceBvh) -> bool {
        self.parents.len() == bvh.nodes().len()
    }

    /// Moves `bvh`'s leaf-slot triangles to `scene_triangles` (scene order,
    /// each with its scene id, as `upload_triangles` writes them: the same
    /// triangles at new positions) and refits every box bottom-up, without
    /// waiting. The tree must be the one these links were made for.
    pub fn refit(
        &mut self,
        bvh: &mut DeviceBvh,
        scene_triangles: &DeviceBuffer<GpuTriangle>,
    ) -> Result<(), GpuError> {
        if !self.fits(bvh) {
            return Err(GpuError::LengthMismatch {
                operation: "DeviceRefit::refit",
                what: "tree nodes",
                expected: self.parents.len(),
                actual: bvh.nodes().len(),
            });
        }
        if scene_triangles.len() != bvh.prims() {
            return Err(GpuError::LengthMismatch {
                operation: "DeviceRefit::refit",
                what: "scene triangles",
                expected: bvh.prims(),
                actual: scene_triangles.len(),
            });
        }
        let gpu = bvh.gpu().clone();
        let n = bvh.nodes().len();
        let prims = bvh.prims();
        let (nodes, slots, prim_indices) = bvh.refit_parts();
        launch_grid_stride(
            &gpu,
            k::REFIT_GATHER,
            prims,
            (
                scene_triangles.ptr(),
                prim_indices.ptr(),
                prims as u64,
                slots.ptr_mut(),
            ),
        )?;
        self.arrivals.fill_zero()?;
        launch_grid_stride(
            &gpu,
            k::REFIT_BOTTOM_UP,
            n,
            (
                nodes.ptr_mut(),
                self.parents.ptr(),
                self.arrivals.ptr_mut(),
                slots.ptr(),
                n as u64,
            ),
        )
    }

    /// [`DeviceRefit::refit`], then the refitted tree's SAH cost
    /// ([`crate::sah_cost`]'s definition, summed on the device), which
    /// waits for the device.
    pub fn refit_with_sah(
        &mut self,
        bvh: &mut DeviceBvh,
        scene_triangles: &DeviceBuffer<GpuTriangle>,
    ) -> Result<f32, GpuError> {
        self.refit(bvh, scene_triangles)?;
        device_sah_cost(bvh.gpu(), bvh.nodes())
    }
}
