//! Device records and kernel launches of the wavefront Whitted renderer
//! (`kernels/whitted.cu`). The renderer itself, which flattens a scene into
//! these records and runs the bounce loop, is `caustic_render::whitted_cuda`;
//! this module is the typed boundary to the kernels, whose CUDA twins
//! (`kernels/whitted.cuh`) are checked against these structs by
//! [`crate::layout`].

use bytemuck::{Pod, Zeroable};

use crate::buffer::DeviceBuffer;
use crate::error::GpuError;
use crate::kernels::whitted as k;
use crate::ops::launch_per_element as launch;
use crate::trace::{GpuHit, GpuRay};

/// One live ray of the specular tree: its random key, the product of the
/// BSDF weights from the eye, its pixel and its depth.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct GpuPath {
    pub key: u64,
    pub weight: [f32; 3],
    /// `y * width + x`, or `u32::MAX` for the padding of a partial tile.
    pub pixel: u32,
    pub depth: u32,
    pub pad: u32,
}

/// `GpuMaterial::kind` values.
pub mod material_kind {
    pub const DIFFUSE: u32 = 0;
    pub const GLOSSY: u32 = 1;
    pub const MIRROR: u32 = 2;
    pub const DIELECTRIC: u32 = 3;
}

/// A material: `color` is the albedo, mirror reflectance or glass tint.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct GpuMaterial {
    pub emission: [f32; 3],
    pub kind: u32,
    pub color: [f32; 3],
    pub two_sided: u32,
    pub specular: [f32; 3],
    pub exponent: f32,
    pub ior: f32,
    /// Index into the textures, or [`GpuMaterial::NO_TEXTURE`].
    pub texture: u32,
    pub pad: [u32; 2],
}

impl GpuMaterial {
    pub const NO_TEXTURE: u32 = u32::MAX;
}

/// Shading attributes of one triangle (scene numbering).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct GpuShading {
    /// Corner normals, when `flags & HAS_NORMALS`.
    pub normals: [f32; 9],
    /// Corner uvs, when `flags & HAS_UVS`.
    pub uvs: [f32; 6],
    pub material: u32,
    pub flags: u32,
}

impl GpuShading {
    pub const HAS_NORMALS: u32 = 1;
    pub const HAS_UVS: u32 = 2;
}

/// `GpuLight::kind` values.
pub mod light_kind {
    pub const POINT: u32 = 0;
    pub const SPOT: u32 = 1;
    pub const DIRECTIONAL: u32 = 2;
}

/// A point, spot or directional light (`intensity` is the irradiance of a
/// directional light).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct GpuLight {
    pub position: [f32; 3],
    pub kind: u32,
    pub direction: [f32; 3],
    pub cos_start: f32,
    pub intensity: [f32; 3],
    pub cos_width: f32,
}

/// An area light: entries `first .. first + count` of the light triangle
/// and cdf arrays.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct GpuAreaLight {
    pub emission: [f32; 3],
    pub two_sided: u32,
    pub first: u32,
    pub count: u32,
    pub total_area: f32,
    pub pad: u32,
}

/// A texture: texels `offset .. offset + width * height` of the texel array.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct GpuTexture {
    pub offset: u32,
    pub width: u32,
    pub height: u32,
    pub pad: u32,
}

/// Settings, camera and the device addresses of the scene arrays.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct WhittedParams {
    pub triangles: u64,
    pub shading: u64,
    pub materials: u64,
    pub lights: u64,
    pub area_lights: u64,
    pub light_tris: u64,
    pub light_cdf: u64,
    pub textures: u64,
    pub texels: u64,
    pub framebuffer: u64,
    pub seed: u64,
    pub eye: [f32; 3],
    pub ray_epsilon: f32,
    pub forward: [f32; 3],
    pub width: u32,
    /// Camera right, scaled by the horizontal half extent.
    pub right: [f32; 3],
    pub height: u32,
    /// Camera up, scaled by the vertical half extent.
    pub up: [f32; 3],
    pub spp: u32,
    pub background: [f32; 3],
    pub max_depth: u32,
    pub light_samples: u32,
    pub light_count: u32,
    pub area_count: u32,
    /// 1: Schlick's Fresnel approximation, 0: exact.
    pub schlick: u32,
}

/// The number of primary slots for an image: whole 8x8 tiles, `spp` slots
/// per pixel (padding slots of partial tiles trace nothing).
pub fn primary_slots(width: u32, height: u32, spp: u32) -> usize {
    width.div_ceil(8) as usize * height.div_ceil(8) as usize * 64 * spp as usize
}

/// Primary rays and paths for every slot of `rays` (Morton order inside 8x8
/// tiles, `spp` consecutive slots per pixel).
pub fn primary(
    params: &DeviceBuffer<WhittedParams>,
    rays: &mut DeviceBuffer<GpuRay>,
    paths: &mut DeviceBuffer<GpuPath>,
) -> Result<(), GpuError> {
    let n = rays.len();
    let args = [params.arg(), rays.arg(), paths.arg(), (n as u32).into()];
    launch(params.gpu(), k::WHITTED_PRIMARY, n, &args)
}

/// Where [`shade`] writes: two child slots and `shadow_slots` shadow slots
/// per shaded path, each with its compaction flag.
pub struct ShadeTargets<'a> {
    pub child_rays: &'a mut DeviceBuffer<GpuRay>,
    pub child_paths: &'a mut DeviceBuffer<GpuPath>,
    pub child_flags: &'a mut DeviceBuffer<u32>,
    pub shadow_rays: &'a mut DeviceBuffer<GpuRay>,
    /// `xyz`: weighted contribution, `w`: the pixel's bits.
    pub shadow_values: &'a mut DeviceBuffer<[f32; 4]>,
    pub shadow_flags: &'a mut DeviceBuffer<u32>,
}

/// Shades the first `n` paths: emission and background into the
/// framebuffer, children and shadow rays into `out`.
pub fn shade(
    params: &DeviceBuffer<WhittedParams>,
    rays: &DeviceBuffer<GpuRay>,
    hits: &DeviceBuffer<GpuHit>,
    paths: &DeviceBuffer<GpuPath>,
    n: usize,
    shadow_slots: u32,
    out: ShadeTargets<'_>,
) -> Result<(), GpuError> {
    let args = [
        params.arg(),
        rays.arg(),
        hits.arg(),
        paths.arg(),
        (n as u32).into(),
        shadow_slots.into(),
        out.child_rays.arg(),
        out.child_paths.arg(),
        out.child_flags.arg(),
        out.shadow_rays.arg(),
        out.shadow_values.arg(),
        out.shadow_flags.arg(),
    ];
    launch(params.gpu(), k::WHITTED_SHADE, n, &args)
}

/// `out[i] = input[indices[i]]` for shadow rays and values, `i < n`.
pub fn gather_shadows(
    rays: &DeviceBuffer<GpuRay>,
    values: &DeviceBuffer<[f32; 4]>,
    indices: &DeviceBuffer<u32>,
    n: usize,
    out_rays: &mut DeviceBuffer<GpuRay>,
    out_values: &mut DeviceBuffer<[f32; 4]>,
) -> Result<(), GpuError> {
    let args = [
        rays.arg(),
        values.arg(),
        indices.arg(),
        (n as u32).into(),
        out_rays.arg(),
        out_values.arg(),
    ];
    launch(rays.gpu(), k::WHITTED_GATHER_SHADOWS, n, &args)
}

/// Adds the first `n` shadow values whose ray was not occluded.
pub fn shadow_add(
    params: &DeviceBuffer<WhittedParams>,
    occluded: &DeviceBuffer<u32>,
    values: &DeviceBuffer<[f32; 4]>,
    n: usize,
) -> Result<(), GpuError> {
    let args = [
        params.arg(),
        occluded.arg(),
        values.arg(),
        (n as u32).into(),
    ];
    launch(params.gpu(), k::WHITTED_SHADOW_ADD, n, &args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_have_the_kernel_sizes() {
        assert_eq!(size_of::<GpuPath>(), 32);
        assert_eq!(size_of::<GpuMaterial>(), 64);
        assert_eq!(size_of::<GpuShading>(), 68);
        assert_eq!(size_of::<GpuLight>(), 48);
        assert_eq!(size_of::<GpuAreaLight>(), 32);
        assert_eq!(primary_slots(16, 8, 1), 128);
        assert_eq!(primary_slots(17, 9, 2), 6 * 64 * 2);
    }
}
