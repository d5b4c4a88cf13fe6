//! Ray queries on a [`GpuGrid`] (`dda.cu`): closest hit and any hit for
//! every ray of a device buffer, by the 3D-DDA of Amanatides and Woo
//! (Eurographics 1987), one ray per thread as in Ivson's GPU tracer (his
//! thesis, PUC-Rio 2009), with the CPU grid's exact culling rules
//! ([`super::dda`]: two-level walk over macro cells, hits never limited to
//! a cell's interval, slab bounds to start late and stop early, the slow
//! exact path for far origins).
//!
//! Results follow the `Accel` contract bit for bit, as [`Tracer`]'s do:
//! the smallest `t` in `(tmin, tmax)` of the watertight triangle test, ties
//! to the lowest scene id, the same `u` and `v`; rays the CPU would not
//! trace miss. The kernel is the CPU walk in the CPU's arithmetic, so it
//! visits the same cells in the same order; the GPU tests compare every hit
//! with [`super::UniformGrid`]'s and with the BVH [`Tracer`]'s.
//!
//! [`Tracer`]: crate::bvh::traverse_cuda::Tracer

use caustic_gpu::ops::{blocks_for, check_len, check_same_len};
use caustic_gpu::{DeviceBuffer, DevicePtrMut, Gpu, GpuError, Kernel, Ptr, PtrMut};

use super::build_cuda::{GpuGrid, GridFrame};
use crate::bvh::traverse_cuda::{GpuHit, GpuRay, MAX_RAYS, tile_order_width};
use crate::bvh::triangle_bvh_cuda::GpuTriangle;
use crate::kernels::grid_dda as k;
use caustic_geom::Aabb;

/// Threads per block (`GRID_TRACE_THREADS` in dda.cu).
pub(crate) const GRID_TRACE_THREADS: u32 = 128;

/// The two kernels' parameters: `(frame, cell_start, cell_end, prims,
/// triangles, macro_bounds, slab_bounds, references, rays, ray_count,
/// image_width, out)`, `out` being the hits or the occlusion flags.
type TraceKernel<O> = Kernel<(
    Ptr<GridFrame>,
    Ptr<u32>,
    Ptr<u32>,
    Ptr<u32>,
    Ptr<GpuTriangle>,
    Ptr<Aabb>,
    Ptr<f32>,
    u32,
    Ptr<GpuRay>,
    u32,
    u32,
    PtrMut<O>,
)>;

/// Traces ray buffers against [`GpuGrid`]s.
pub struct GridTracer {
    gpu: Gpu,
}

impl GridTracer {
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
        grid: &GpuGrid,
        rays: &DeviceBuffer<GpuRay>,
        hits: &mut DeviceBuffer<GpuHit>,
    ) -> Result<(), GpuError> {
        let kernel = k::GRID_TRACE_CLOSEST;
        check_same_len(kernel.name(), "hits", rays.len(), hits.len())?;
        self.launch(kernel, grid, rays, 0, hits.ptr_mut())
    }

    /// [`GridTracer::intersect`] for the rays of an image `width` pixels
    /// wide, in pixel order: the same results, the rays handed out in
    /// 8x4-pixel tiles so that each warp walks a compact block of pixels
    /// (buffer order when the image does not split into whole tiles).
    pub fn intersect_image(
        &self,
        grid: &GpuGrid,
        rays: &DeviceBuffer<GpuRay>,
        width: u32,
        hits: &mut DeviceBuffer<GpuHit>,
    ) -> Result<(), GpuError> {
        let kernel = k::GRID_TRACE_CLOSEST;
        check_same_len(kernel.name(), "hits", rays.len(), hits.len())?;
        let order = tile_order_width(rays.len(), width);
        self.launch(kernel, grid, rays, order, hits.ptr_mut())
    }

    /// 1 for every ray with a hit in `(tmin, tmax)`, else 0, into
    /// `occluded` (same length), without waiting.
    pub fn occluded(
        &self,
        grid: &GpuGrid,
        rays: &DeviceBuffer<GpuRay>,
        occluded: &mut DeviceBuffer<u32>,
    ) -> Result<(), GpuError> {
        let kernel = k::GRID_TRACE_ANY;
        check_same_len(kernel.name(), "occluded", rays.len(), occluded.len())?;
        self.launch(kernel, grid, rays, 0, occluded.ptr_mut())
    }

    fn launch<O: bytemuck::Pod>(
        &self,
        kernel: TraceKernel<O>,
        grid: &GpuGrid,
        rays: &DeviceBuffer<GpuRay>,
        image_width: u32,
        out: DevicePtrMut<'_, O>,
    ) -> Result<(), GpuError> {
        let n = rays.len();
        if n == 0 {
            return Ok(());
        }
        check_len(kernel.name(), n, MAX_RAYS)?;
        let parts = grid.parts();
        // The grid's own check keeps the reference count below 2^30.
        let references = parts.prims.len() as u32;
        self.gpu.launch(
            kernel,
            blocks_for(n, GRID_TRACE_THREADS as usize),
            GRID_TRACE_THREADS,
            (
                parts.frame.ptr(),
                parts.cell_start.ptr(),
                parts.cell_end.ptr(),
                parts.prims.ptr(),
                parts.triangles.ptr(),
                parts.macro_bounds.ptr(),
                parts.slab_bounds.ptr(),
                references,
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
    use crate::kernels::{HEADERS, grid_build, grid_dda};

    fn header(name: &str) -> &'static str {
        HEADERS.files.iter().find(|(f, _)| *f == name).unwrap().1
    }

    #[test]
    fn kernel_constants_match_the_host_and_the_cpu_grid() {
        assert_eq!(
            grid_dda::MODULE.define("GRID_TRACE_THREADS"),
            GRID_TRACE_THREADS as usize
        );
        assert_eq!(
            grid_dda::MODULE.define("GRID_MAILBOX"),
            super::super::MAILBOX
        );
        assert_eq!(
            grid_build::MODULE.define("GRID_THREADS"),
            caustic_gpu::ops::ELEMENT_THREADS as usize
        );
        // The ray thickness and the overlap slack, as the CPU has them.
        // (slab_ray.rs's tests hold slab_ray.cuh to the CPU's thickness.)
        let dda = grid_dda::MODULE.source;
        assert!(dda.contains("#include \"slab_ray.cuh\""));
        assert!(
            header("grid.cuh")
                .lines()
                .any(|l| l == "#define GRID_OVERLAP_SLACK 1e-6f")
        );
        assert_eq!(super::super::overlap::SLACK, 1e-6);
    }
}
