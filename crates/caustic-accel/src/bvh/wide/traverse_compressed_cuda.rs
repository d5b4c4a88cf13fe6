//! Ray queries on a [`CompressedWideBvh`] (`traverse_compressed.cu`):
//! closest hit and any hit for every ray of a device buffer, by the
//! traversal of Ylitie, Karras and Laine (HPG 2017: node and triangle
//! groups on a compressed stack, children in octant order, postponed
//! triangle tests) inside the persistent while-while loop of the binary
//! kernel ([`crate::bvh::traverse_cuda`]).
//!
//! Same rays in ([`GpuRay`]), same results out ([`GpuHit`], `u32`
//! occlusion), and the same results bit for bit as the binary traversal's
//! [`Tracer`](crate::bvh::traverse_cuda::Tracer) and hence the CPU's: the
//! same watertight test and tie rule, and a box test on the quantised boxes
//! that never culls a child the binary box test would keep on the exact box
//! ([`TraversalKernel`] says how; the GPU tests compare every hit).

use crate::bvh::traverse_cuda::{GpuHit, GpuRay, MAX_RAYS, tile_order_width};
use crate::bvh::triangle_bvh_cuda::GpuTriangle;
use crate::bvh::wide::compressed::CompressedNode;
use crate::bvh::wide::compressed_cuda::CompressedWideBvh;
use crate::kernels::bvh_wide_traverse_compressed as k;
use caustic_gpu::ops::check_same_len;
use caustic_gpu::{DeviceBuffer, DevicePtrMut, Gpu, GpuError, Kernel, Ptr, PtrMut};

/// Threads per block (`CW_TRACE_THREADS` in traverse_compressed.cu).
const CW_TRACE_THREADS: u32 = 128;

/// The kernels' parameters: `(nodes, node_count, triangles, rays,
/// ray_count, image_width, out, counter)`.
type TraverseKernel<O> = Kernel<(
    Ptr<CompressedNode>,
    u32,
    Ptr<GpuTriangle>,
    Ptr<GpuRay>,
    u32,
    u32,
    PtrMut<O>,
    PtrMut<u32>,
)>;

/// Which traversal kernel a [`CompressedTracer`] runs: how it tests a ray
/// against a node's eight quantised boxes, and whether it postpones
/// triangle tests. All three give the binary traversal's hits bit for bit
/// (`tests/gpu_wide.rs`).
///
/// Measured on an H100 (`examples/wide_bench.rs`, protocol rays at
/// 1920x1080): `Eager` is the fastest of the three wherever it behaves,
/// 1.03 to 1.30 times the binary kernel on the dragon, the 16 dragons and
/// sponza's diffuse rays, but `Fast` and `Eager` run the secondary rays of
/// sibenik and conference 6 to 17 times slower than `Exact` (the same tree
/// traced on the host with the same kernel code visits as many nodes with
/// either test, so the cause is on the device and not yet found). `Exact`
/// never shows it and is the default until it is understood.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TraversalKernel {
    /// The paper's box test, one fused multiply-add per plane from per-node
    /// terms, rounded outwards and widened by a bound of its rounding error
    /// and of the binary test's margin, so that it keeps every child the
    /// exact test keeps (and a few more: the planes move out by at most
    /// one grid step); triangle tests postponed while few lanes of the warp
    /// have any (Ylitie et al.).
    Fast,
    /// [`TraversalKernel::Fast`] without postponing: a lane tests the
    /// triangles of the leaves it hits right away.
    Eager,
    /// Decodes each plane to world space and runs the binary kernel's own
    /// box test on it: the same decisions as the binary traversal on the
    /// decoded boxes, at three operations per plane; postponing.
    #[default]
    Exact,
}

/// Traces ray buffers against [`CompressedWideBvh`]s; holds the launch
/// shapes and the ray counter of the persistent kernels.
pub struct CompressedTracer {
    gpu: Gpu,
    counter: DeviceBuffer<u32>,
    kernel: TraversalKernel,
    closest: (TraverseKernel<GpuHit>, u32),
    any: (TraverseKernel<u32>, u32),
}

impl CompressedTracer {
    /// The tracer with the default kernel ([`TraversalKernel::Exact`]).
    pub fn new(gpu: &Gpu) -> Result<Self, GpuError> {
        Self::with_kernel(gpu, TraversalKernel::default())
    }

    /// Loads the kernels of `kernel` and sizes the persistent grid: as
    /// many blocks as are resident at once.
    pub fn with_kernel(gpu: &Gpu, kernel: TraversalKernel) -> Result<Self, GpuError> {
        let (closest, any) = match kernel {
            TraversalKernel::Fast => (k::TRAVERSE_CWBVH_CLOSEST, k::TRAVERSE_CWBVH_ANY),
            TraversalKernel::Eager => {
                (k::TRAVERSE_CWBVH_CLOSEST_EAGER, k::TRAVERSE_CWBVH_ANY_EAGER)
            }
            TraversalKernel::Exact => {
                (k::TRAVERSE_CWBVH_CLOSEST_EXACT, k::TRAVERSE_CWBVH_ANY_EXACT)
            }
        };
        let sms = gpu.info().multiprocessors.max(1);
        Ok(Self {
            gpu: gpu.clone(),
            counter: DeviceBuffer::zeroed(gpu, "ray fetch counter", 1)?,
            kernel,
            closest: (
                closest,
                sms * gpu.resident_blocks(closest, CW_TRACE_THREADS)?,
            ),
            any: (any, sms * gpu.resident_blocks(any, CW_TRACE_THREADS)?),
        })
    }

    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    pub fn kernel(&self) -> TraversalKernel {
        self.kernel
    }

    /// The closest hit of every ray into `hits` (same length), without waiting.
    pub fn intersect(
        &mut self,
        bvh: &CompressedWideBvh,
        rays: &DeviceBuffer<GpuRay>,
        hits: &mut DeviceBuffer<GpuHit>,
    ) -> Result<(), GpuError> {
        let (kernel, blocks) = self.closest;
        check_same_len(kernel.name(), "hits", rays.len(), hits.len())?;
        self.launch(kernel, blocks, bvh, rays, 0, hits.ptr_mut())
    }

    /// [`CompressedTracer::intersect`] for the rays of an image `width`
    /// pixels wide in pixel order, handed out in 8x4-pixel tiles as
    /// [`Tracer::intersect_image`](crate::bvh::traverse_cuda::Tracer::intersect_image) does.
    pub fn intersect_image(
        &mut self,
        bvh: &CompressedWideBvh,
        rays: &DeviceBuffer<GpuRay>,
        width: u32,
        hits: &mut DeviceBuffer<GpuHit>,
    ) -> Result<(), GpuError> {
        let (kernel, blocks) = self.closest;
        check_same_len(kernel.name(), "hits", rays.len(), hits.len())?;
        let order = tile_order_width(rays.len(), width);
        self.launch(kernel, blocks, bvh, rays, order, hits.ptr_mut())
    }

    /// 1 for every ray with a hit in `(tmin, tmax)`, else 0, into `occluded`
    /// (same length), without waiting.
    pub fn occluded(
        &mut self,
        bvh: &CompressedWideBvh,
        rays: &DeviceBuffer<GpuRay>,
        occluded: &mut DeviceBuffer<u32>,
    ) -> Result<(), GpuError> {
        let (kernel, blocks) = self.any;
        check_same_len(kernel.name(), "occluded", rays.len(), occluded.len())?;
        self.launch(kernel, blocks, bvh, rays, 0, occluded.ptr_mut())
    }

    fn launch<O: bytemuck::Pod>(
        &mut self,
        kernel: TraverseKernel<O>,
        blocks: u32,
        bvh: &CompressedWideBvh,
        rays: &DeviceBuffer<GpuRay>,
        image_width: u32,
        out: DevicePtrMut<'_, O>,
    ) -> Result<(), GpuError> {
        let n = rays.len();
        if n == 0 {
            return Ok(());
        }
        caustic_gpu::ops::check_len(kernel.name(), n, MAX_RAYS)?;
        caustic_gpu::ops::check_len(kernel.name(), bvh.nodes().len(), u32::MAX as usize)?;
        self.counter.fill_zero()?;
        self.gpu.launch(
            kernel,
            blocks,
            CW_TRACE_THREADS,
            (
                bvh.nodes().ptr(),
                bvh.nodes().len() as u32,
                bvh.triangles().ptr(),
                rays.ptr(),
                n as u32,
                image_width,
                out,
                self.counter.ptr_mut(),
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_constants_match_the_host() {
        let module = &k::MODULE;
        assert_eq!(module.define("CW_TRACE_THREADS"), CW_TRACE_THREADS as usize);
        assert_eq!(module.define("CW_STACK"), 64);
    }
}
