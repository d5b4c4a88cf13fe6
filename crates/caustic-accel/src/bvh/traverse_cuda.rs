//! Ray queries on a [`DeviceBvh`] (`kernels/traverse_bvh2.cu`): closest hit
//! and any hit for every ray of a device buffer, by the persistent
//! while-while traversal of Aila and Laine, "Understanding the Efficiency of
//! Ray Traversal on GPUs" (HPG 2009, and its 2012 Kepler addendum for the
//! dynamic ray fetch).
//!
//! Results follow `caustic_accel`'s `Accel` contract bit for bit: the
//! smallest `t` in `(tmin, tmax)` of the watertight triangle test, ties to
//! the lowest scene id, the same `u` and `v`; rays the CPU would not trace
//! (non-finite, zero direction, empty interval) miss. The GPU tests compare
//! every hit with `TriangleBvh` on the same tree.

use bytemuck::{Pod, Zeroable};
use caustic_geom::{Hit, Ray, Vec3};

use crate::BvhNode;
use crate::bvh::triangle_bvh_cuda::DeviceBvh;
use crate::bvh::triangle_bvh_cuda::GpuTriangle;
use crate::kernels::bvh_traverse as k;
use caustic_gpu::DeviceBuffer;
use caustic_gpu::Gpu;
use caustic_gpu::GpuError;
use caustic_gpu::{DevicePtrMut, Kernel, Ptr, PtrMut};

/// The two traversal kernels' parameters: `(nodes, node_count, triangles,
/// rays, ray_count, image_width, out, counter)`, `out` being the hits or
/// the occlusion flags.
type TraverseKernel<O> = Kernel<(
    Ptr<BvhNode>,
    u32,
    Ptr<GpuTriangle>,
    Ptr<GpuRay>,
    u32,
    u32,
    PtrMut<O>,
    PtrMut<u32>,
)>;
use caustic_gpu::ops::check_same_len;

/// Threads per block (`TRACE_THREADS` in traverse_bvh2.cu).
pub(crate) const TRACE_THREADS: u32 = 128;
/// The most rays one call takes: the fetch counter is a u32 that may run a
/// few thousand past the end.
pub const MAX_RAYS: usize = 1 << 31;

/// A ray on the device: two 16-byte words, `(origin, tmin)` and `(dir, tmax)`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct GpuRay {
    pub origin: [f32; 3],
    pub tmin: f32,
    pub dir: [f32; 3],
    pub tmax: f32,
}

const _: () = assert!(size_of::<GpuRay>() == 32);

impl GpuRay {
    /// A ray every tracer skips (its interval is empty, `tmin > tmax`): the
    /// padding of a wave whose length only the device knows.
    pub const UNTRACEABLE: GpuRay = GpuRay {
        origin: [0.0; 3],
        tmin: 1.0,
        dir: [0.0, 0.0, 1.0],
        tmax: 0.0,
    };
}

impl From<&Ray> for GpuRay {
    fn from(ray: &Ray) -> Self {
        Self {
            origin: ray.origin.to_array(),
            tmin: ray.tmin,
            dir: ray.dir.to_array(),
            tmax: ray.tmax,
        }
    }
}

impl GpuRay {
    pub fn to_ray(&self) -> Ray {
        Ray::segment(
            Vec3::from_array(self.origin),
            Vec3::from_array(self.dir),
            self.tmin,
            self.tmax,
        )
    }
}

/// A closest-hit result on the device: one 16-byte word. A miss is
/// [`GpuHit::MISS`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct GpuHit {
    pub t: f32,
    /// Scene id of the hit triangle; [`GpuHit::NO_HIT`] for a miss.
    pub prim: u32,
    pub u: f32,
    pub v: f32,
}

const _: () = assert!(size_of::<GpuHit>() == 16);

impl GpuHit {
    /// `prim` of a miss (`NO_HIT` in bvh.cuh).
    pub const NO_HIT: u32 = u32::MAX;
    pub const MISS: GpuHit = GpuHit {
        t: f32::INFINITY,
        prim: Self::NO_HIT,
        u: 0.0,
        v: 0.0,
    };

    pub fn to_hit(&self) -> Option<Hit> {
        (self.prim != Self::NO_HIT).then_some(Hit {
            t: self.t,
            prim: self.prim,
            u: self.u,
            v: self.v,
        })
    }

    pub fn from_hit(hit: Option<Hit>) -> Self {
        hit.map_or(Self::MISS, |h| GpuHit {
            t: h.t,
            prim: h.prim,
            u: h.u,
            v: h.v,
        })
    }
}

/// Traces ray buffers against [`DeviceBvh`]s. Holds the launch shape and the
/// ray counter of the persistent kernels, so calls allocate nothing.
pub struct Tracer {
    gpu: Gpu,
    counter: DeviceBuffer<u32>,
    closest_blocks: u32,
    any_blocks: u32,
    group_blocks: u32,
}

impl Tracer {
    /// Loads the kernels and sizes the persistent grid: as many blocks as
    /// can be resident on the device at once, so no block waits for another
    /// to finish.
    pub fn new(gpu: &Gpu) -> Result<Self, GpuError> {
        let per_sm = |blocks: u32| blocks * gpu.info().multiprocessors.max(1);
        Ok(Self {
            gpu: gpu.clone(),
            counter: DeviceBuffer::zeroed(gpu, "ray fetch counter", 1)?,
            closest_blocks: per_sm(gpu.resident_blocks(k::TRAVERSE_BVH2_CLOSEST, TRACE_THREADS)?),
            any_blocks: per_sm(gpu.resident_blocks(k::TRAVERSE_BVH2_ANY, TRACE_THREADS)?),
            group_blocks: per_sm(
                gpu.resident_blocks(k::TRAVERSE_BVH2_GROUP_NEAREST, TRACE_THREADS)?,
            ),
        })
    }

    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// The closest hit of every ray into `hits` (same length), without waiting.
    pub fn intersect(
        &mut self,
        bvh: &DeviceBvh,
        rays: &DeviceBuffer<GpuRay>,
        hits: &mut DeviceBuffer<GpuHit>,
    ) -> Result<(), GpuError> {
        let kernel = k::TRAVERSE_BVH2_CLOSEST;
        check_same_len(kernel.name(), "hits", rays.len(), hits.len())?;
        self.launch(kernel, self.closest_blocks, bvh, rays, 0, hits.ptr_mut())
    }

    /// [`Tracer::intersect`] for the rays of an image `width` pixels wide,
    /// in pixel order (primary rays): the same results, but the rays are
    /// handed out in 8x4-pixel tiles, so each warp traces a compact block of
    /// pixels. Falls back to buffer order when the image does not split into
    /// whole tiles.
    pub fn intersect_image(
        &mut self,
        bvh: &DeviceBvh,
        rays: &DeviceBuffer<GpuRay>,
        width: u32,
        hits: &mut DeviceBuffer<GpuHit>,
    ) -> Result<(), GpuError> {
        let kernel = k::TRAVERSE_BVH2_CLOSEST;
        check_same_len(kernel.name(), "hits", rays.len(), hits.len())?;
        let order = tile_order_width(rays.len(), width);
        self.launch(
            kernel,
            self.closest_blocks,
            bvh,
            rays,
            order,
            hits.ptr_mut(),
        )
    }

    /// 1 for every ray with a hit in `(tmin, tmax)`, else 0, into `occluded`
    /// (same length), without waiting.
    pub fn occluded(
        &mut self,
        bvh: &DeviceBvh,
        rays: &DeviceBuffer<GpuRay>,
        occluded: &mut DeviceBuffer<u32>,
    ) -> Result<(), GpuError> {
        let kernel = k::TRAVERSE_BVH2_ANY;
        check_same_len(kernel.name(), "occluded", rays.len(), occluded.len())?;
        self.launch(kernel, self.any_blocks, bvh, rays, 0, occluded.ptr_mut())
    }

    /// The nearest hit of each group of `group_size` consecutive rays, as
    /// `collision::nearest_key`s min-ed into `group_keys` (one per group,
    /// whole or not), without waiting. The keys are set to the miss key
    /// first, and come out as the minimum of the group's closest-hit keys,
    /// the same as [`Tracer::intersect`] followed by a per-group minimum;
    /// but rays share their group's nearest hit as a cutoff while they run,
    /// so a ray's entry in `hits` is its closest hit, or a miss when its
    /// group held a nearer one. When every group is whole, two launches:
    /// first every [`PROBE_STRIDE`]-th ray of each group (the probes), then
    /// the others, which start with the cutoff the probes found instead of
    /// finding it while they run.
    pub fn intersect_group_nearest(
        &mut self,
        bvh: &DeviceBvh,
        rays: &DeviceBuffer<GpuRay>,
        group_size: usize,
        hits: &mut DeviceBuffer<GpuHit>,
        group_keys: &mut DeviceBuffer<u64>,
    ) -> Result<(), GpuError> {
        let kernel = k::TRAVERSE_BVH2_GROUP_NEAREST;
        check_same_len(kernel.name(), "hits", rays.len(), hits.len())?;
        if group_size == 0 || group_size > u32::MAX as usize {
            return Err(GpuError::Invalid {
                what: "group size",
                message: format!("{group_size} rays a group (1 ..= {})", u32::MAX),
            });
        }
        let groups = rays.len().div_ceil(group_size);
        check_same_len(kernel.name(), "group keys", groups, group_keys.len())?;
        group_keys.fill_bytes(0xff)?;
        let Some(n) = self.ready(kernel.name(), rays)? else {
            return Ok(());
        };
        // A last group that is not whole would need its own phase counts.
        let stride = if rays.len().is_multiple_of(group_size) {
            probe_stride().min(group_size)
        } else {
            1
        };
        let probes = group_size.div_ceil(stride);
        for (phase, per_group) in [probes, group_size - probes].into_iter().enumerate() {
            // Groups are whole here unless the stride is 1 (one phase, over
            // every ray).
            let work = if stride == 1 && phase == 0 {
                n as usize
            } else {
                groups * per_group
            };
            if work == 0 {
                continue;
            }
            if phase > 0 {
                self.counter.fill_zero()?;
            }
            self.gpu.launch(
                kernel,
                self.group_blocks,
                TRACE_THREADS,
                (
                    bvh.nodes().ptr(),
                    node_count(kernel.name(), bvh)?,
                    bvh.triangles().ptr(),
                    rays.ptr(),
                    work as u32,
                    group_size as u32,
                    stride as u32,
                    phase as u32,
                    hits.ptr_mut(),
                    group_keys.ptr_mut(),
                    self.counter.ptr_mut(),
                ),
            )?;
        }
        Ok(())
    }

    /// The ray count of a launch over `rays`, checked, with the fetch
    /// counter reset; `None` when there is nothing to trace.
    fn ready(
        &mut self,
        operation: &'static str,
        rays: &DeviceBuffer<GpuRay>,
    ) -> Result<Option<u32>, GpuError> {
        let n = rays.len();
        if n == 0 {
            return Ok(None);
        }
        caustic_gpu::ops::check_len(operation, n, MAX_RAYS)?;
        self.counter.fill_zero()?;
        Ok(Some(n as u32))
    }

    /// Launches the persistent grid; `image_width` is the kernel's tile-order
    /// switch (0: buffer order).
    fn launch<O: bytemuck::Pod>(
        &mut self,
        kernel: TraverseKernel<O>,
        blocks: u32,
        bvh: &DeviceBvh,
        rays: &DeviceBuffer<GpuRay>,
        image_width: u32,
        out: DevicePtrMut<'_, O>,
    ) -> Result<(), GpuError> {
        let Some(n) = self.ready(kernel.name(), rays)? else {
            return Ok(());
        };
        self.gpu.launch(
            kernel,
            blocks,
            TRACE_THREADS,
            (
                bvh.nodes().ptr(),
                node_count(kernel.name(), bvh)?,
                bvh.triangles().ptr(),
                rays.ptr(),
                n,
                image_width,
                out,
                self.counter.ptr_mut(),
            ),
        )
    }
}

/// Every how many rays of a group [`Tracer::intersect_group_nearest`]
/// traces one first, as a probe.
pub const PROBE_STRIDE: usize = 4;

/// [`PROBE_STRIDE`], or `CAUSTIC_GROUP_PROBE_STRIDE` (1: no probes) for
/// measuring other strides; read once per process.
fn probe_stride() -> usize {
    static STRIDE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *STRIDE.get_or_init(|| {
        std::env::var("CAUSTIC_GROUP_PROBE_STRIDE")
            .ok()
            .and_then(|s| s.parse().ok())
            .filter(|&s: &usize| s >= 1)
            .unwrap_or(PROBE_STRIDE)
    })
}

/// The node count of `bvh` as the kernels take it.
fn node_count(operation: &'static str, bvh: &DeviceBvh) -> Result<u32, GpuError> {
    u32::try_from(bvh.nodes().len()).map_err(|_| GpuError::TooLarge {
        operation,
        len: bvh.nodes().len(),
        max: u32::MAX as usize,
    })
}

/// The kernel's `image_width` for `len` rays of an image `width` wide: the
/// width when the image splits into whole 8x4 tiles, else 0 (buffer order).
pub(crate) fn tile_order_width(len: usize, width: u32) -> u32 {
    let tiles = width > 0 && width.is_multiple_of(8) && len.is_multiple_of(width as usize);
    if tiles && (len / width as usize).is_multiple_of(4) {
        width
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::{HEADERS, bvh_traverse};

    #[test]
    fn kernel_constants_match_the_host_and_the_cpu_traversal() {
        let module = &bvh_traverse::MODULE;
        assert_eq!(module.define("TRACE_THREADS"), TRACE_THREADS as usize);
        // One stack entry per level: the builders' depth limit.
        assert_eq!(module.define("TRACE_STACK"), crate::bvh::MAX_DEPTH);
        let slack = "#define BVH_SLACK (1.0f / 524288.0f)";
        let bvh_cuh = HEADERS
            .files
            .iter()
            .find(|(f, _)| *f == "bvh.cuh")
            .unwrap()
            .1;
        assert!(bvh_cuh.lines().any(|l| l == slack));
        assert_eq!(
            1.0 / 524_288.0f32,
            crate::bvh::traverse::SLACK,
            "BVH_SLACK in bvh.cuh must follow the CPU's SLACK"
        );
    }

    #[test]
    fn tile_order_needs_whole_tiles() {
        assert_eq!(tile_order_width(1920 * 1080, 1920), 1920);
        assert_eq!(tile_order_width(1921 * 1080, 1921), 0);
        assert_eq!(tile_order_width(1920 * 1081, 1920), 0);
        assert_eq!(tile_order_width(1920 * 1080 + 1, 1920), 0);
        assert_eq!(tile_order_width(0, 0), 0);
    }

    #[test]
    fn hits_convert_both_ways() {
        assert_eq!(GpuHit::MISS.to_hit(), None);
        assert_eq!(GpuHit::from_hit(None), GpuHit::MISS);
        let hit = Hit {
            t: 2.5,
            prim: 7,
            u: 0.25,
            v: 0.5,
        };
        assert_eq!(GpuHit::from_hit(Some(hit)).to_hit(), Some(hit));
    }

    #[test]
    fn rays_convert_both_ways() {
        let ray = Ray::segment(
            Vec3::new(1.0, 2.0, 3.0),
            Vec3::new(0.0, -0.0, 1.0),
            0.5,
            9.0,
        );
        let back = GpuRay::from(&ray).to_ray();
        assert_eq!(back.origin, ray.origin);
        assert_eq!(back.dir.y.to_bits(), ray.dir.y.to_bits());
        assert_eq!((back.tmin, back.tmax), (ray.tmin, ray.tmax));
    }
}
