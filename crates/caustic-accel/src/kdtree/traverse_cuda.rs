//! Ray queries on a [`GpuKdTree`] (`traverse.cu`): closest hit and any hit
//! for every ray of a device buffer, one ray per thread, by the stack-based
//! front-to-back traversal of Zhou et al. 2008 (§4) under the CPU kd-tree's
//! exact culling rules ([`super::traverse`]: subtrees culled only by the
//! depth slab of the box of their whole triangles, split planes `delta`
//! thick, hits never limited to a cell's interval).
//!
//! Results follow the `Accel` contract bit for bit, as the BVH
//! [`Tracer`]'s do: the smallest `t` in `(tmin, tmax)` of the watertight
//! triangle test, ties to the lowest scene id, the same `u` and `v`; rays
//! the CPU would not trace miss. The kernel is the CPU walk in the CPU's
//! arithmetic, so it visits the same leaves in the same order; the GPU tests
//! compare every hit with [`super::TriangleKdTree`]'s and the BVH's.
//!
//! [`Tracer`]: crate::bvh::traverse_cuda::Tracer

use caustic_gpu::ops::{blocks_for, check_len, check_same_len};
use caustic_gpu::{DeviceBuffer, DevicePtrMut, Gpu, GpuError, Kernel, Ptr, PtrMut};

use super::build_cuda::GpuKdTree;
use crate::bvh::traverse_cuda::{GpuHit, GpuRay, MAX_RAYS, tile_order_width};
use crate::bvh::triangle_bvh_cuda::GpuTriangle;
use crate::kernels::kdtree_traverse as k;

/// Threads per block (`KD_TRACE_THREADS` in traverse.cu).
pub(crate) const KD_TRACE_THREADS: u32 = 128;

/// The two kernels' parameters: `(nodes, culling boxes, references,
/// triangles, root cell, scale, node count, rays, ray_count, image_width,
/// out)`, `out` being the hits or the occlusion flags.
type TraceKernel<O> = Kernel<(
    Ptr<u32>,
    Ptr<f32>,
    Ptr<u32>,
    Ptr<GpuTriangle>,
    Ptr<f32>,
    f32,
    u32,
    Ptr<GpuRay>,
    u32,
    u32,
    PtrMut<O>,
)>;

/// Traces ray buffers against [`GpuKdTree`]s.
pub struct KdTracer {
    gpu: Gpu,
}

impl KdTracer {
    /// Compiles and loads the kernels (once per process and device).
    pub fn new(gpu: &Gpu) -> Result<Self, GpuError> {
        gpu.load(&k::MODULE)?;
        Ok(Self { gpu: gpu.clone() })
    }

    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// The closest hit of every ray into `hits` (same length), without waiting.
    pub fn intersect(
        &self,
        tree: &GpuKdTree,
        rays: &DeviceBuffer<GpuRay>,
        hits: &mut DeviceBuffer<GpuHit>,
    ) -> Result<(), GpuError> {
        let kernel = k::KD_TRACE_CLOSEST;
        check_same_len(kernel.name(), "hits", rays.len(), hits.len())?;
        self.launch(kernel, tree, rays, 0, hits.ptr_mut())
    }

    /// [`KdTracer::intersect`] for the rays of an image `width` pixels
    /// wide, in pixel order: the same results, the rays handed out in
    /// 8x4-pixel tiles so that each warp walks a compact block of pixels
    /// (buffer order when the image does not split into whole tiles).
    pub fn intersect_image(
        &self,
        tree: &GpuKdTree,
        rays: &DeviceBuffer<GpuRay>,
        width: u32,
        hits: &mut DeviceBuffer<GpuHit>,
    ) -> Result<(), GpuError> {
        let kernel = k::KD_TRACE_CLOSEST;
        check_same_len(kernel.name(), "hits", rays.len(), hits.len())?;
        let order = tile_order_width(rays.len(), width);
        self.launch(kernel, tree, rays, order, hits.ptr_mut())
    }

    /// 1 for every ray with a hit in `(tmin, tmax)`, else 0, into
    /// `occluded` (same length), without waiting.
    pub fn occluded(
        &self,
        tree: &GpuKdTree,
        rays: &DeviceBuffer<GpuRay>,
        occluded: &mut DeviceBuffer<u32>,
    ) -> Result<(), GpuError> {
        let kernel = k::KD_TRACE_ANY;
        check_same_len(kernel.name(), "occluded", rays.len(), occluded.len())?;
        self.launch(kernel, tree, rays, 0, occluded.ptr_mut())
    }

    fn launch<O: bytemuck::Pod>(
        &self,
        kernel: TraceKernel<O>,
        tree: &GpuKdTree,
        rays: &DeviceBuffer<GpuRay>,
        image_width: u32,
        out: DevicePtrMut<'_, O>,
    ) -> Result<(), GpuError> {
        let n = rays.len();
        if n == 0 {
            return Ok(());
        }
        check_len(kernel.name(), n, MAX_RAYS)?;
        let parts = tree.parts();
        // The build keeps the node count within a KdNode index (30 bits).
        let node_count = parts.nodes.len() as u32;
        self.gpu.launch(
            kernel,
            blocks_for(n, KD_TRACE_THREADS as usize),
            KD_TRACE_THREADS,
            (
                parts.nodes.ptr().cast(),
                parts.ref_bounds.ptr().cast(),
                parts.prims.ptr(),
                parts.triangles.ptr(),
                parts.bounds.ptr(),
                parts.scale,
                node_count,
                rays.ptr(),
                n as u32,
                image_width,
                out,
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::{kdtree_build, kdtree_traverse};

    #[test]
    fn kernel_constants_match_the_host_and_the_cpu_tree() {
        assert_eq!(
            kdtree_traverse::MODULE.define("KD_TRACE_THREADS"),
            KD_TRACE_THREADS as usize
        );
        assert_eq!(
            kdtree_traverse::MODULE.define("KD_STACK"),
            super::super::MAX_DEPTH
        );
        assert_eq!(kdtree_build::MODULE.define("KD_SMALL_MAX"), 64);
        assert_eq!(
            kdtree_build::MODULE.define("KD_BUILD_THREADS"),
            caustic_gpu::ops::ELEMENT_THREADS as usize
        );
        assert!(
            kdtree_build::MODULE.define("KD_SMALL_STACK") >= super::super::MAX_DEPTH + 2,
            "a small root's walk holds a pending child per level plus the root"
        );
        // The ray thickness, as the CPU has it (slab_ray.rs's tests hold
        // slab_ray.cuh to it).
        assert!(
            kdtree_traverse::MODULE
                .source
                .contains("#include \"slab_ray.cuh\"")
        );
    }
}
