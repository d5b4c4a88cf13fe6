//! Device records and kernel launches of GPU stochastic progressive photon
//! mapping (`renderer.cu`); the pass loop is
//! [`super::renderer_cuda`]. The CUDA twins of these structs
//! (`sppm.cuh`) are checked against them through `render_layout.cuh`.

use bytemuck::{Pod, Zeroable};

use super::PassJitter;
use crate::kernels::sppm_renderer as k;
use crate::photon::records_cuda::{GpuPhoton, GridView};
use crate::scene_cuda::FrameParams;
use crate::team::TileRows;
use caustic_accel::bvh::traverse_cuda::{GpuHit, GpuRay};
use caustic_accel::bvh::triangle_bvh_cuda::DeviceBvh;
use caustic_gpu::GpuError;
use caustic_gpu::ops::launch_per_element as launch;
use caustic_gpu::{DeviceBuffer, DevicePtrMut};

/// A pixel's eye path of one pass; 16-byte aligned as its CUDA twin
/// (sppm.cuh: the kernels move it in two 16-byte accesses).
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct GpuSppmPath {
    pub key: u64,
    pub weight: [f32; 3],
    /// `y * width + x`, or `u32::MAX` for tile padding.
    pub pixel: u32,
    /// Path length so far, the scale of the pixel footprint.
    pub length: f32,
    pub pad: u32,
}

/// A pixel's visible point of one pass (`valid == 0`: none); 16-byte
/// aligned as its CUDA twin.
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct GpuVisiblePoint {
    pub position: [f32; 3],
    pub valid: u32,
    pub normal: [f32; 3],
    pub material: u32,
    pub shading_normal: [f32; 3],
    pub footprint: f32,
    pub wo: [f32; 3],
    pub pad0: u32,
    pub weight: [f32; 3],
    pub pad1: u32,
    pub albedo: [f32; 3],
    pub pad2: u32,
}

/// A pixel's running statistics (`sppm::pixels::PixelState`), in doubles.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct GpuSppmPixel {
    pub photons: f64,
    pub radius: f64,
    pub flux: [f64; 3],
    pub traced: [f64; 3],
}

/// Pass `pass`'s primary rays (placed in their pixels by `jitter`), one per
/// pixel in 8×8 Morton tiles over the
/// tile rows `rows` (row by row, each left to right), 64 slots a tile, as
/// many tiles as `rays` has room for. A path's pixel is its place among
/// the rows' pixels ([`TileRows::pixel_rows`] order), where the member
/// keeps that pixel's state.
pub fn primary(
    params: &DeviceBuffer<FrameParams>,
    (pass, jitter): (u32, PassJitter),
    rows: &TileRows,
    rays: &mut DeviceBuffer<GpuRay>,
    paths: &mut DeviceBuffer<GpuSppmPath>,
) -> Result<(), GpuError> {
    let n = rays.len();
    launch(
        params.gpu(),
        k::SPPM_PRIMARY,
        n,
        (
            params.ptr(),
            pass,
            u32::from(jitter == PassJitter::Sequence),
            rows.first,
            rows.stride,
            rays.ptr_mut(),
            paths.ptr_mut(),
            n as u32,
        ),
    )
}

/// Where [`eye_step`] writes: one child slot and `slots` shadow slots per
/// path, the pass's radiance (3 floats per pixel) and the visible points
/// (one per pixel).
pub struct EyeTargets<'a> {
    pub child_rays: &'a mut DeviceBuffer<GpuRay>,
    pub child_paths: &'a mut DeviceBuffer<GpuSppmPath>,
    pub child_flags: &'a mut DeviceBuffer<u32>,
    pub shadow_rays: &'a mut DeviceBuffer<GpuRay>,
    pub shadow_values: &'a mut DeviceBuffer<[f32; 4]>,
    pub shadow_flags: &'a mut DeviceBuffer<u32>,
    pub radiance: &'a mut DeviceBuffer<f32>,
    pub points: &'a mut DeviceBuffer<GpuVisiblePoint>,
}

/// Which step of the eye pass: the depth of the wave, the shadow slots per
/// path, and the angle one pixel subtends (footprint per unit length).
#[derive(Clone, Copy, Debug)]
pub struct EyeStep {
    pub depth: u32,
    pub slots: u32,
    pub pixel_angle: f32,
}

/// One depth of the eye pass over the wave `rays`/`paths` with `hits`.
pub fn eye_step(
    params: &DeviceBuffer<FrameParams>,
    rays: &DeviceBuffer<GpuRay>,
    hits: &DeviceBuffer<GpuHit>,
    paths: &DeviceBuffer<GpuSppmPath>,
    step: EyeStep,
    out: EyeTargets<'_>,
) -> Result<(), GpuError> {
    let n = rays.len();
    launch(
        params.gpu(),
        k::SPPM_EYE_STEP,
        n,
        (
            params.ptr(),
            rays.ptr(),
            hits.ptr(),
            paths.ptr(),
            n as u32,
            step.depth,
            step.slots,
            step.pixel_angle,
            out.child_rays.ptr_mut(),
            out.child_paths.ptr_mut(),
            out.child_flags.ptr_mut(),
            out.shadow_rays.ptr_mut(),
            out.shadow_values.ptr_mut(),
            out.shadow_flags.ptr_mut(),
            out.radiance.ptr_mut(),
            out.points.ptr_mut(),
        ),
    )
}

/// The eye wave's tail in one launch: each of the first `counts[first_depth]`
/// paths of `rays`/`paths` followed by one thread through every remaining
/// depth, its rays traced by the thread on `bvh` (the wavefront's results
/// bit for bit); `counts[d]` gains the paths entering each later depth.
/// `out`'s child and shadow slots are scratch (at least `rays.len()` paths).
pub fn eye_tail(
    params: &DeviceBuffer<FrameParams>,
    bvh: &DeviceBvh,
    (rays, paths): (&DeviceBuffer<GpuRay>, &DeviceBuffer<GpuSppmPath>),
    (counts, first_depth): (&mut DeviceBuffer<u32>, u32),
    step: EyeStep,
    out: EyeTargets<'_>,
) -> Result<(), GpuError> {
    let n = rays.len();
    if (first_depth as usize) >= counts.len() || out.child_flags.len() < n {
        return Err(GpuError::Invalid {
            what: "sppm eye tail",
            message: format!(
                "depth {first_depth} of {} counts, {} child slots for {n} paths",
                counts.len(),
                out.child_flags.len()
            ),
        });
    }
    launch(
        params.gpu(),
        k::SPPM_EYE_TAIL,
        n,
        (
            params.ptr(),
            bvh.nodes().ptr(),
            bvh.nodes().len() as u32,
            bvh.triangles().ptr(),
            rays.ptr(),
            paths.ptr(),
            counts.ptr_mut(),
            first_depth,
            n as u32,
            step.slots,
            step.pixel_angle,
            out.child_rays.ptr_mut(),
            out.child_paths.ptr_mut(),
            out.child_flags.ptr_mut(),
            out.shadow_rays.ptr_mut(),
            out.shadow_values.ptr_mut(),
            out.shadow_flags.ptr_mut(),
            out.radiance.ptr_mut(),
            out.points.ptr_mut(),
        ),
    )
}

/// Adds each path's unoccluded shadow values, in slot order, to its
/// pixel's radiance.
pub fn shadow_add(
    paths: &DeviceBuffer<GpuSppmPath>,
    slots: u32,
    occluded: &DeviceBuffer<u32>,
    values: &DeviceBuffer<[f32; 4]>,
    flags: &DeviceBuffer<u32>,
    radiance: &mut DeviceBuffer<f32>,
) -> Result<(), GpuError> {
    let n = paths.len();
    launch(
        paths.gpu(),
        k::SPPM_SHADOW_ADD,
        n,
        (
            paths.ptr(),
            n as u32,
            slots,
            occluded.ptr(),
            values.ptr(),
            flags.ptr(),
            radiance.ptr_mut(),
        ),
    )
}

/// Sets the radius of every pixel whose first visible point this is:
/// `fixed` when positive, else `footprints` pixel footprints.
pub fn init_radii(
    pixels: &mut DeviceBuffer<GpuSppmPixel>,
    points: &DeviceBuffer<GpuVisiblePoint>,
    fixed: f32,
    footprints: f32,
) -> Result<(), GpuError> {
    let n = pixels.len();
    let gpu = pixels.gpu().clone();
    launch(
        &gpu,
        k::SPPM_INIT_RADII,
        n,
        (pixels.ptr_mut(), points.ptr(), n as u32, fixed, footprints),
    )
}

/// The sum of the radii (in units of `1 / scale`, rounded: a fixed-point
/// sum, exact in any order) and the count of the pixels with a visible
/// point.
pub fn radius_sum(
    pixels: &DeviceBuffer<GpuSppmPixel>,
    points: &DeviceBuffer<GpuVisiblePoint>,
    scale: f64,
) -> Result<[u64; 2], GpuError> {
    let n = pixels.len();
    radius_sums(pixels, |sums| {
        launch(
            pixels.gpu(),
            k::SPPM_RADIUS_SUM,
            n,
            (pixels.ptr(), points.ptr(), n as u32, scale, sums),
        )
    })
}

/// The two sums a radius-sum kernel (launched by `add`, handed the sums'
/// address) adds: fixed-point radii and their count.
fn radius_sums(
    pixels: &DeviceBuffer<GpuSppmPixel>,
    add: impl FnOnce(DevicePtrMut<'_, u64>) -> Result<(), GpuError>,
) -> Result<[u64; 2], GpuError> {
    let mut sums = DeviceBuffer::<u64>::zeroed(pixels.gpu(), "sppm radius sums", 2)?;
    add(sums.ptr_mut())?;
    let sums = sums.download()?;
    Ok([sums[0], sums[1]])
}

/// Sum (fixed point, radius × `scale`) and count of the radii of the
/// pixels that have one: the final mean radius, on the device.
pub fn final_radius_sum(
    pixels: &DeviceBuffer<GpuSppmPixel>,
    scale: f64,
) -> Result<[u64; 2], GpuError> {
    let n = pixels.len();
    radius_sums(pixels, |sums| {
        launch(
            pixels.gpu(),
            k::SPPM_FINAL_RADIUS_SUM,
            n,
            (pixels.ptr(), n as u32, scale, sums),
        )
    })
}

/// The pass's photons within each pixel's radius and the progressive
/// update with `alpha`, for every pixel (of the image, or of a team
/// member's rows); the pass's radiance is added to the traced sums.
/// Returns the photon–pixel pairs found.
pub fn gather_update(
    params: &DeviceBuffer<FrameParams>,
    grid: &DeviceBuffer<GridView>,
    photons: &DeviceBuffer<GpuPhoton>,
    points: &DeviceBuffer<GpuVisiblePoint>,
    pixels: &mut DeviceBuffer<GpuSppmPixel>,
    radiance: &DeviceBuffer<f32>,
    alpha: f64,
) -> Result<u64, GpuError> {
    let n = pixels.len();
    let mut deposits = DeviceBuffer::<u64>::zeroed(params.gpu(), "sppm deposits", 1)?;
    launch(
        params.gpu(),
        k::SPPM_GATHER_UPDATE,
        n,
        (
            params.ptr(),
            grid.ptr(),
            photons.ptr(),
            photons.len() as u32,
            points.ptr(),
            pixels.ptr_mut(),
            radiance.ptr(),
            n as u32,
            alpha,
            deposits.ptr_mut(),
        ),
    )?;
    Ok(deposits.download()?[0])
}

/// The image after `passes` passes: 3 floats per pixel (of the image, or
/// of a team member's rows in their order, [`TileRows::pixel_rows`]).
pub fn film(
    pixels: &DeviceBuffer<GpuSppmPixel>,
    passes: u32,
) -> Result<DeviceBuffer<f32>, GpuError> {
    let n = pixels.len();
    let mut out = DeviceBuffer::uninit(pixels.gpu(), "sppm image", 3 * n)?;
    launch(
        pixels.gpu(),
        k::SPPM_FILM,
        n,
        (pixels.ptr(), n as u32, passes, out.ptr_mut()),
    )?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_have_the_kernel_sizes() {
        assert_eq!(size_of::<GpuSppmPath>(), 32);
        assert_eq!(size_of::<GpuVisiblePoint>(), 96);
        assert_eq!(size_of::<GpuSppmPixel>(), 64);
        // The kernels' 16-byte accesses need the records' alignment.
        assert_eq!(align_of::<GpuSppmPath>(), 16);
        assert_eq!(align_of::<GpuVisiblePoint>(), 16);
    }
}
