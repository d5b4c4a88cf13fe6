//! The GPU scene every CUDA renderer shares (Whitted, photon mapping,
//! SPPM): the device records of materials, shading attributes, lights and
//! textures, the eye path and the per-frame parameters, whose CUDA twins in
//! `scene.cuh` are checked against these structs through
//! `render_layout.cuh`; and [`DeviceScene`], a [`RenderScene`] flattened
//! into those records on the device with its BVH.

use bytemuck::{Pod, Zeroable};
use caustic_accel::bvh::device_accel_cuda::{DeviceAccel, GpuAccelSpec};
use caustic_geom::Rgb;
use caustic_gpu::{DeviceBuffer, Gpu, GpuError};
use caustic_scene::{Bsdf, Light, Material};

use crate::RenderScene;

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
pub struct FrameParams {
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

/// The scene's arrays on the device. `FrameParams` holds their addresses,
/// so this must outlive every launch that reads them.
pub struct DeviceScene {
    pub ray_epsilon: f32,
    pub background: Rgb,
    /// Point, spot and directional lights; area lights.
    pub light_count: usize,
    pub area_count: usize,
    /// The structure the rays are traced against; it also holds the
    /// scene-order triangles that shading reads.
    pub accel: DeviceAccel,
    shading: DeviceBuffer<GpuShading>,
    materials: DeviceBuffer<GpuMaterial>,
    lights: DeviceBuffer<GpuLight>,
    area_lights: DeviceBuffer<GpuAreaLight>,
    light_tris: DeviceBuffer<u32>,
    light_cdf: DeviceBuffer<f32>,
    textures: DeviceBuffer<GpuTexture>,
    texels: DeviceBuffer<f32>,
}

impl DeviceScene {
    /// Builds the default GPU structure ([`GpuAccelSpec::default`]) and
    /// uploads the scene's arrays.
    pub fn upload(gpu: &Gpu, scene: &RenderScene) -> Result<Self, GpuError> {
        Self::upload_with(gpu, scene, &GpuAccelSpec::default())
    }

    /// Builds the structure `spec` names on the device and uploads the
    /// scene's arrays.
    pub fn upload_with(
        gpu: &Gpu,
        scene: &RenderScene,
        spec: &GpuAccelSpec,
    ) -> Result<Self, GpuError> {
        let accel = DeviceAccel::build(gpu, &scene.triangles, spec)?;
        let (area_lights, light_tris, light_cdf) = area_lights(scene);
        let (textures, texels) = textures(scene);
        Ok(Self {
            ray_epsilon: scene.ray_epsilon(),
            background: scene.background,
            light_count: scene.lights.len(),
            area_count: scene.area_lights.len(),
            accel,
            shading: DeviceBuffer::from_slice(gpu, "scene shading", &shading(scene))?,
            materials: DeviceBuffer::from_slice(gpu, "scene materials", &materials(scene))?,
            lights: DeviceBuffer::from_slice(gpu, "scene lights", &lights(scene))?,
            area_lights: DeviceBuffer::from_slice(gpu, "scene area lights", &area_lights)?,
            light_tris: DeviceBuffer::from_slice(gpu, "scene light triangles", &light_tris)?,
            light_cdf: DeviceBuffer::from_slice(gpu, "scene light cdf", &light_cdf)?,
            textures: DeviceBuffer::from_slice(gpu, "scene textures", &textures)?,
            texels: DeviceBuffer::from_slice(gpu, "scene texels", &texels)?,
        })
    }

    /// The device the scene lives on.
    pub fn gpu(&self) -> &Gpu {
        self.accel.gpu()
    }

    /// The scene arrays' addresses with no camera and no framebuffer: what
    /// kernels that trace from the lights read.
    pub fn scene_params(&self) -> FrameParams {
        FrameParams {
            triangles: self.accel.scene_triangles().device_ptr(),
            shading: self.shading.device_ptr(),
            materials: self.materials.device_ptr(),
            lights: self.lights.device_ptr(),
            area_lights: self.area_lights.device_ptr(),
            light_tris: self.light_tris.device_ptr(),
            light_cdf: self.light_cdf.device_ptr(),
            textures: self.textures.device_ptr(),
            texels: self.texels.device_ptr(),
            ray_epsilon: self.ray_epsilon,
            background: self.background.to_array(),
            light_count: self.light_count as u32,
            area_count: self.area_count as u32,
            ..Default::default()
        }
    }
}

fn shading(scene: &RenderScene) -> Vec<GpuShading> {
    (0..scene.triangles.len())
        .map(|prim| {
            let (normals, uvs) = scene.corner_attributes(prim);
            let mut s = GpuShading {
                material: scene.triangle_material[prim],
                ..Default::default()
            };
            if let Some(n) = normals {
                s.normals = bytemuck::cast(n.map(|v| v.to_array()));
                s.flags |= GpuShading::HAS_NORMALS;
            }
            if let Some(t) = uvs {
                s.uvs = bytemuck::cast(t.map(|v| v.to_array()));
                s.flags |= GpuShading::HAS_UVS;
            }
            s
        })
        .collect()
}

fn materials(scene: &RenderScene) -> Vec<GpuMaterial> {
    scene.materials.iter().map(material).collect()
}

fn material(m: &Material) -> GpuMaterial {
    let texture = |t: Option<u32>| t.unwrap_or(GpuMaterial::NO_TEXTURE);
    let mut g = GpuMaterial {
        emission: m.emission.to_array(),
        two_sided: u32::from(m.two_sided),
        texture: GpuMaterial::NO_TEXTURE,
        ..Default::default()
    };
    match m.bsdf {
        Bsdf::Diffuse { albedo, texture: t } => {
            (g.kind, g.color, g.texture) = (material_kind::DIFFUSE, albedo.to_array(), texture(t));
        }
        Bsdf::Glossy {
            albedo,
            texture: t,
            specular,
            exponent,
        } => {
            (g.kind, g.color, g.texture) = (material_kind::GLOSSY, albedo.to_array(), texture(t));
            (g.specular, g.exponent) = (specular.to_array(), exponent);
        }
        Bsdf::Mirror { reflectance } => {
            (g.kind, g.color) = (material_kind::MIRROR, reflectance.to_array());
        }
        Bsdf::Dielectric { ior, tint } => {
            (g.kind, g.color, g.ior) = (material_kind::DIELECTRIC, tint.to_array(), ior);
        }
    }
    g
}

fn lights(scene: &RenderScene) -> Vec<GpuLight> {
    scene
        .lights
        .iter()
        .map(|light| match *light {
            Light::Point {
                position,
                intensity,
            } => GpuLight {
                kind: light_kind::POINT,
                position: position.to_array(),
                intensity: intensity.to_array(),
                ..Default::default()
            },
            Light::Spot {
                position,
                direction,
                intensity,
                cos_falloff_start,
                cos_total_width,
            } => GpuLight {
                kind: light_kind::SPOT,
                position: position.to_array(),
                direction: direction.to_array(),
                intensity: intensity.to_array(),
                cos_start: cos_falloff_start,
                cos_width: cos_total_width,
            },
            Light::Directional {
                direction,
                irradiance,
            } => GpuLight {
                kind: light_kind::DIRECTIONAL,
                direction: direction.to_array(),
                intensity: irradiance.to_array(),
                ..Default::default()
            },
        })
        .collect()
}

/// The area lights with their triangles and cdfs concatenated.
fn area_lights(scene: &RenderScene) -> (Vec<GpuAreaLight>, Vec<u32>, Vec<f32>) {
    let mut tris = Vec::new();
    let mut cdf = Vec::new();
    let lights = scene
        .area_lights
        .iter()
        .map(|light| {
            let first = tris.len() as u32;
            tris.extend_from_slice(&light.triangles);
            cdf.extend_from_slice(light.cdf());
            GpuAreaLight {
                emission: light.emission.to_array(),
                two_sided: u32::from(light.two_sided),
                first,
                count: light.triangles.len() as u32,
                total_area: light.total_area,
                pad: 0,
            }
        })
        .collect();
    (lights, tris, cdf)
}

/// The textures' headers and their texels concatenated, three floats each.
fn textures(scene: &RenderScene) -> (Vec<GpuTexture>, Vec<f32>) {
    let mut texels = Vec::new();
    let headers = scene
        .textures
        .iter()
        .map(|t| {
            let offset = (texels.len() / 3) as u32;
            texels.extend(t.texels.iter().flat_map(|c| c.to_array()));
            GpuTexture {
                offset,
                width: t.width,
                height: t.height,
                pad: 0,
            }
        })
        .collect();
    (headers, texels)
}
