//! Device records and kernel launches of GPU stochastic progressive photon
//! mapping (`kernels/sppm.cu`); the pass loop is
//! `caustic_render::sppm::renderer_cuda`. The CUDA twins of these structs
//! (`kernels/sppm.cuh`) are checked against them by [`crate::layout`].

use bytemuck::{Pod, Zeroable};

use crate::buffer::DeviceBuffer;
use crate::error::GpuError;
use crate::kernels::sppm as k;
use crate::ops::launch_per_element as launch;
use crate::photon::{GpuPhoton, GridView};
use crate::trace::{GpuHit, GpuRay};
use crate::whitted::WhittedParams;

/// A pixel's eye path of one pass.
#[repr(C)]
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

/// A pixel's visible point of one pass (`valid == 0`: none).
#[repr(C)]
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

/// Pass `pass`'s primary rays, one per pixel in 8×8 Morton tiles (as
/// many slots as `crate::whitted::primary_slots` at 1 spp).
pub fn primary(
    params: &DeviceBuffer<WhittedParams>,
    pass: u32,
    rays: &mut DeviceBuffer<GpuRay>,
    paths: &mut DeviceBuffer<GpuSppmPath>,
) -> Result<(), GpuError> {
    let n = rays.len();
    let args = [
        params.arg(),
        pass.into(),
        rays.arg(),
        paths.arg(),
        (n as u32).into(),
    ];
    launch(params.gpu(), k::SPPM_PRIMARY, n, &args)
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
    params: &DeviceBuffer<WhittedParams>,
    rays: &DeviceBuffer<GpuRay>,
    hits: &DeviceBuffer<GpuHit>,
    paths: &DeviceBuffer<GpuSppmPath>,
    step: EyeStep,
    out: EyeTargets<'_>,
) -> Result<(), GpuError> {
    let n = rays.len();
    let args = [
        params.arg(),
        rays.arg(),
        hits.arg(),
        paths.arg(),
        (n as u32).into(),
        step.depth.into(),
        step.slots.into(),
        step.pixel_angle.into(),
        out.child_rays.arg(),
        out.child_paths.arg(),
        out.child_flags.arg(),
        out.shadow_rays.arg(),
        out.shadow_values.arg(),
        out.shadow_flags.arg(),
        out.radiance.arg(),
        out.points.arg(),
    ];
    launch(params.gpu(), k::SPPM_EYE_STEP, n, &args)
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
    let args = [
        paths.arg(),
        (n as u32).into(),
        slots.into(),
        occluded.arg(),
        values.arg(),
        flags.arg(),
        radiance.arg(),
    ];
    launch(paths.gpu(), k::SPPM_SHADOW_ADD, n, &args)
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
    let args = [
        pixels.arg(),
        points.arg(),
        (n as u32).into(),
        fixed.into(),
        footprints.into(),
    ];
    launch(pixels.gpu(), k::SPPM_INIT_RADII, n, &args)
}

/// The mean radius of the pixels with a visible point (0 when none).
pub fn mean_radius(
    pixels: &DeviceBuffer<GpuSppmPixel>,
    points: &DeviceBuffer<GpuVisiblePoint>,
) -> Result<f64, GpuError> {
    let n = pixels.len();
    let sums = DeviceBuffer::<f64>::zeroed(pixels.gpu(), "sppm radius sums", 2)?;
    let args = [pixels.arg(), points.arg(), (n as u32).into(), sums.arg()];
    launch(pixels.gpu(), k::SPPM_RADIUS_SUM, n, &args)?;
    let sums = sums.download()?;
    Ok(if sums[1] > 0.0 {
        sums[0] / sums[1]
    } else {
        0.0
    })
}

/// The pass's photons within each pixel's radius and the progressive
/// update with `alpha`; the pass's radiance is added to the traced sums.
/// Returns the photon–pixel pairs found.
pub fn gather_update(
    params: &DeviceBuffer<WhittedParams>,
    grid: &DeviceBuffer<GridView>,
    photons: &DeviceBuffer<GpuPhoton>,
    points: &DeviceBuffer<GpuVisiblePoint>,
    pixels: &mut DeviceBuffer<GpuSppmPixel>,
    radiance: &DeviceBuffer<f32>,
    alpha: f64,
) -> Result<u64, GpuError> {
    let n = pixels.len();
    let deposits = DeviceBuffer::<u64>::zeroed(params.gpu(), "sppm deposits", 1)?;
    let args = [
        params.arg(),
        grid.arg(),
        photons.arg(),
        (photons.len() as u32).into(),
        points.arg(),
        pixels.arg(),
        radiance.arg(),
        (n as u32).into(),
        alpha.into(),
        deposits.arg(),
    ];
    launch(params.gpu(), k::SPPM_GATHER_UPDATE, n, &args)?;
    Ok(deposits.download()?[0])
}

/// The image after `passes` passes: 3 floats per pixel.
pub fn film(
    pixels: &DeviceBuffer<GpuSppmPixel>,
    passes: u32,
) -> Result<DeviceBuffer<f32>, GpuError> {
    let n = pixels.len();
    let out = DeviceBuffer::uninit(pixels.gpu(), "sppm image", 3 * n)?;
    let args = [pixels.arg(), (n as u32).into(), passes.into(), out.arg()];
    launch(pixels.gpu(), k::SPPM_FILM, n, &args)?;
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
    }
}
