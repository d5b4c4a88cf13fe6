//! The anchor ray protocol's rays (`shared/anchors/PROTOCOL.md`, sections 3
//! and 4) generated on the device (`kernels/rays.cu`), so a benchmark or a
//! renderer never ships rays across the bus.
//!
//! Both generators compute in `f64` and store `f32`, operation for operation
//! as `caustic_geom::protocol` does on the CPU, so they give the same bits
//! (the GPU tests compare them): primary rays from a pinhole camera in pixel
//! order, and four cosine-distributed secondary rays per primary hit, from
//! the hit offset along the facing geometric normal, with the pixel's PCG32
//! stream and Duff et al.'s orthonormal basis.

use bytemuck::{Pod, Zeroable};
use caustic_geom::DVec3;

use crate::bvh::traverse_cuda::{GpuHit, GpuRay};
use crate::bvh::triangle_bvh_cuda::{DeviceBvh, GpuTriangle};
use crate::kernels::protocol as k;
use caustic_gpu::DeviceBuffer;
use caustic_gpu::DevicePtr;
use caustic_gpu::Gpu;
use caustic_gpu::GpuError;
use caustic_gpu::ops::{check_same_len, compact};

/// Threads per block (`RAYS_THREADS` in rays.cu).
const THREADS: u32 = 256;
/// Blocks of a grid-stride launch: enough to fill any current GPU.
const MAX_BLOCKS: usize = 4096;

/// The protocol's camera: eye, look-at point, up vector and the vertical
/// field of view in degrees, in `f64` as the protocol computes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PrimaryCamera {
    pub eye: DVec3,
    pub look_at: DVec3,
    pub up: DVec3,
    pub fov_deg: f64,
}

/// The camera basis the primary kernel reads, computed here in `f64`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct PrimaryFrame {
    pub(crate) forward: [f64; 3],
    pub(crate) right: [f64; 3],
    pub(crate) up: [f64; 3],
    /// `tan(fov / 2)`: half the image plane's height at distance 1.
    pub(crate) half_height: f64,
    /// width / height.
    pub(crate) aspect: f64,
    /// The eye as the rays store it.
    pub(crate) eye: [f32; 3],
    pub(crate) pad: u32,
}

/// The protocol's `normalize`: one division per component by the length
/// (glam's multiplies by the reciprocal, which rounds differently).
fn normalize(v: DVec3) -> DVec3 {
    let len = v.dot(v).sqrt();
    DVec3::new(v.x / len, v.y / len, v.z / len)
}

impl PrimaryFrame {
    fn new(camera: &PrimaryCamera, width: u32, height: u32) -> Self {
        let forward = normalize(camera.look_at - camera.eye);
        let right = normalize(forward.cross(camera.up));
        let up = right.cross(forward);
        Self {
            forward: forward.to_array(),
            right: right.to_array(),
            up: up.to_array(),
            half_height: (camera.fov_deg * std::f64::consts::PI / 360.0).tan(),
            aspect: width as f64 / height as f64,
            eye: camera.eye.as_vec3().to_array(),
            pad: 0,
        }
    }
}

/// Blocks for a grid-stride loop over `n` items.
fn blocks(n: usize) -> u32 {
    n.div_ceil(THREADS as usize).clamp(1, MAX_BLOCKS) as u32
}

/// The `width × height` primary rays, ray `y * width + x` through the centre
/// of pixel `(x, y)` (row 0 at the top), `tmin = 0`, `tmax = inf`.
pub fn primary_rays(
    gpu: &Gpu,
    camera: &PrimaryCamera,
    width: u32,
    height: u32,
) -> Result<DeviceBuffer<GpuRay>, GpuError> {
    let n = width as usize * height as usize;
    let mut rays = DeviceBuffer::uninit(gpu, "primary rays", n)?;
    if n == 0 {
        return Ok(rays);
    }
    let frame = DeviceBuffer::from_slice(
        gpu,
        "camera frame",
        &[PrimaryFrame::new(camera, width, height)],
    )?;
    gpu.launch(
        k::RAYS_PRIMARY,
        blocks(n),
        THREADS,
        (frame.ptr(), width, height, rays.ptr_mut()),
    )?;
    // `frame` is freed in stream order, after the kernel has read it.
    Ok(rays)
}

/// The secondary rays of the protocol: 4 per primary hit, ordered by pixel
/// then by sample; the two buffers differ only in `tmax`.
pub struct SecondaryRays {
    /// `tmax = inf`, for the closest-hit diffuse pass.
    pub diffuse: DeviceBuffer<GpuRay>,
    /// `tmax = ao_tmax`, for the any-hit ambient-occlusion pass.
    pub ao: DeviceBuffer<GpuRay>,
    /// `(0.1 * diag) as f32`.
    pub ao_tmax: f32,
}

/// Generates the secondary rays from the primary rays and their closest
/// hits on `bvh`; `diag` is the scene's diagonal (protocol section 1.2),
/// which scales the origin offset and the AO length. Waits for the GPU once,
/// to learn how many primary rays hit.
pub fn secondary_rays(
    bvh: &DeviceBvh,
    primary: &DeviceBuffer<GpuRay>,
    hits: &DeviceBuffer<GpuHit>,
    diag: f64,
) -> Result<SecondaryRays, GpuError> {
    let triangles = HitTriangles {
        triangles: bvh.triangles(),
        slots: bvh.slots().ptr(),
    };
    generate_secondary(triangles, primary, hits, diag)
}

/// [`secondary_rays`] for hits on any structure, given the scene's
/// triangles in scene order (`DeviceAccel::scene_triangles`): the same rays.
pub fn secondary_rays_scene_order(
    scene_triangles: &DeviceBuffer<GpuTriangle>,
    primary: &DeviceBuffer<GpuRay>,
    hits: &DeviceBuffer<GpuHit>,
    diag: f64,
) -> Result<SecondaryRays, GpuError> {
    let triangles = HitTriangles {
        triangles: scene_triangles,
        slots: DevicePtr::null(),
    };
    generate_secondary(triangles, primary, hits, diag)
}

/// Where a hit's triangle is: `triangles[slots[prim]]`, or
/// `triangles[prim]` when `slots` is null (scene order).
struct HitTriangles<'a> {
    triangles: &'a DeviceBuffer<GpuTriangle>,
    slots: DevicePtr<'a, u32>,
}

fn generate_secondary(
    source: HitTriangles<'_>,
    primary: &DeviceBuffer<GpuRay>,
    hits: &DeviceBuffer<GpuHit>,
    diag: f64,
) -> Result<SecondaryRays, GpuError> {
    let gpu = source.triangles.gpu();
    let n = primary.len();
    check_same_len(k::RAYS_SECONDARY.name(), "hits", n, hits.len())?;
    caustic_gpu::ops::check_len(
        k::RAYS_SECONDARY.name(),
        n,
        caustic_gpu::ops::MAX_SCAN_LEN / 4,
    )?;
    let mut flags = DeviceBuffer::<u32>::uninit(gpu, "primary hit flags", n)?;
    if n > 0 {
        gpu.launch(
            k::RAYS_HIT_FLAGS,
            blocks(n),
            THREADS,
            (hits.ptr(), n as u32, flags.ptr_mut()),
        )?;
    }
    let pixels = compact::select_indices(&flags)?;
    let count = pixels.len();
    let ao_tmax = (0.1 * diag) as f32;
    let mut out = SecondaryRays {
        diffuse: DeviceBuffer::uninit(gpu, "diffuse rays", 4 * count)?,
        ao: DeviceBuffer::uninit(gpu, "AO rays", 4 * count)?,
        ao_tmax,
    };
    if count > 0 {
        gpu.launch(
            k::RAYS_SECONDARY,
            blocks(count),
            THREADS,
            (
                primary.ptr(),
                hits.ptr(),
                pixels.ptr(),
                count as u32,
                source.triangles.ptr(),
                source.slots,
                (1e-4 * diag),
                ao_tmax,
                out.diffuse.ptr_mut(),
                out.ao.ptr_mut(),
            ),
        )?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_is_orthonormal_and_follows_the_protocol() {
        let camera = PrimaryCamera {
            eye: DVec3::new(0.0, 0.0, 5.0),
            look_at: DVec3::ZERO,
            up: DVec3::Y,
            fov_deg: 90.0,
        };
        let frame = PrimaryFrame::new(&camera, 200, 100);
        assert_eq!(frame.forward, [0.0, 0.0, -1.0]);
        assert_eq!(frame.right, [1.0, 0.0, 0.0]);
        assert_eq!(frame.up, [0.0, 1.0, 0.0]);
        assert!((frame.half_height - 1.0).abs() < 1e-15);
        assert_eq!(frame.aspect, 2.0);
        assert_eq!(frame.eye, [0.0, 0.0, 5.0]);
    }

    #[test]
    fn threads_match_the_kernels() {
        let module = &crate::kernels::protocol::MODULE;
        assert_eq!(module.define("RAYS_THREADS"), THREADS as usize);
    }

    #[test]
    fn launch_shape_covers_small_and_large_inputs() {
        assert_eq!(blocks(0), 1);
        assert_eq!(blocks(257), 2);
        assert_eq!(blocks(usize::MAX / 2), MAX_BLOCKS as u32);
    }
}
