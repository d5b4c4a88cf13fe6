//! The GPU scene every CUDA renderer shares (Whitted, photon mapping,
//! SPPM): the device records of materials, shading attributes, lights and
//! textures, the eye path and the per-frame parameters, whose CUDA twins in
//! `scene.cuh` are checked against these structs through
//! `render_layout.cuh`; and [`DeviceScene`], a [`RenderScene`] flattened
//! into those records on the device with its BVH.

use bytemuck::{Pod, Zeroable};
use caustic_accel::bvh::device_accel_cuda::{DeviceAccel, GpuAccelSpec, fill_ranges};
use caustic_geom::Rgb;
use caustic_gpu::{DeviceBuffer, Gpu, GpuError, PinnedBuffer, upload_ranges};
use caustic_scene::{Bsdf, Light, Material};

use crate::RenderScene;
use std::ops::Range;
use std::time::Instant;

/// One live ray of the specular tree: its random key, the product of the
/// BSDF weights from the eye, its pixel and its depth. 16-byte aligned, as
/// its CUDA twin (scene.cuh: the kernels move it in two 16-byte accesses),
/// like the photon mapper's 32-byte and eye-vertex records.
#[repr(C, align(16))]
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
    /// What `lights` and the area-light arrays hold, to upload them again
    /// only when a frame changes them.
    host_lights: Vec<GpuLight>,
    host_area: AreaArrays,
    /// Page-locked host memory the moved shading records travel through.
    shading_upload: Option<PinnedBuffer<GpuShading>>,
}

/// The area lights, their triangles and cdfs, as uploaded.
type AreaArrays = (Vec<GpuAreaLight>, Vec<u32>, Vec<f32>);

/// What [`DeviceScene::upload_moved`] sent to the device for one frame.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MovedUpload {
    /// Bytes copied from the host: moved triangles, their shading records
    /// (where they carry normals), and lights that changed.
    pub bytes: usize,
    /// Triangles rewritten.
    pub triangles: usize,
    /// Host wall time of the copies (the driver stages pageable memory
    /// before a copy returns).
    pub ms: f64,
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
        let host_area = area_lights(scene);
        let (area_lights, light_tris, light_cdf) = &host_area;
        let (textures, texels) = textures(scene);
        let host_lights = lights(scene);
        Ok(Self {
            ray_epsilon: scene.ray_epsilon(),
            background: scene.background,
            light_count: scene.lights.len(),
            area_count: scene.area_lights.len(),
            accel,
            shading: DeviceBuffer::from_slice(gpu, "scene shading", &shading(scene))?,
            materials: DeviceBuffer::from_slice(gpu, "scene materials", &materials(scene))?,
            lights: DeviceBuffer::from_slice(gpu, "scene lights", &host_lights)?,
            area_lights: DeviceBuffer::from_slice(gpu, "scene area lights", area_lights)?,
            light_tris: DeviceBuffer::from_slice(gpu, "scene light triangles", light_tris)?,
            light_cdf: DeviceBuffer::from_slice(gpu, "scene light cdf", light_cdf)?,
            textures: DeviceBuffer::from_slice(gpu, "scene textures", &textures)?,
            texels: DeviceBuffer::from_slice(gpu, "scene texels", &texels)?,
            host_lights,
            host_area,
            shading_upload: None,
        })
    }

    /// Follows `scene` reposed ([`RenderScene::repose`], which returned
    /// `moved`): writes the moved triangles into the device's scene-order
    /// triangles and their shading records (where they carry normals) in
    /// place, and the lights and area lights where they changed; materials,
    /// textures, uvs and every still triangle stay as they are. The
    /// structure is stale until `accel.rebuild` or `accel.refit`.
    pub fn upload_moved(
        &mut self,
        scene: &RenderScene,
        moved: &[Range<usize>],
    ) -> Result<MovedUpload, GpuError> {
        let start = Instant::now();
        let mut bytes = self.accel.move_triangles(&scene.triangles, moved)?;
        // Shading records change only where the corner normals move with
        // the triangles; materials and uvs stay.
        let with_normals: Vec<Range<usize>> = moved
            .iter()
            .filter(|&r| {
                r.clone()
                    .any(|prim| scene.corner_attributes(prim).0.is_some())
            })
            .cloned()
            .collect();
        bytes += upload_ranges(
            &mut self.shading_upload,
            &mut self.shading,
            &with_normals,
            |packed| fill_ranges(packed, &with_normals, |prim| shading_of(scene, prim)),
        )?;
        let lights = lights(scene);
        if lights != self.host_lights {
            if lights.len() == self.lights.len() {
                self.lights.upload(&lights)?;
            } else {
                self.lights = DeviceBuffer::from_slice(self.accel.gpu(), "scene lights", &lights)?;
                self.light_count = lights.len();
            }
            bytes += std::mem::size_of_val(lights.as_slice());
            self.host_lights = lights;
        }
        let area = area_lights(scene);
        if area != self.host_area {
            let gpu = self.gpu().clone();
            let (lights, tris, cdf) = &area;
            self.area_lights = DeviceBuffer::from_slice(&gpu, "scene area lights", lights)?;
            self.light_tris = DeviceBuffer::from_slice(&gpu, "scene light triangles", tris)?;
            self.light_cdf = DeviceBuffer::from_slice(&gpu, "scene light cdf", cdf)?;
            bytes += std::mem::size_of_val(lights.as_slice())
                + std::mem::size_of_val(tris.as_slice())
                + std::mem::size_of_val(cdf.as_slice());
            self.area_count = lights.len();
            self.host_area = area;
        }
        self.ray_epsilon = scene.ray_epsilon();
        self.background = scene.background;
        Ok(MovedUpload {
            bytes,
            triangles: moved.iter().map(|r| r.len()).sum(),
            ms: start.elapsed().as_secs_f64() * 1e3,
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
        .map(|prim| shading_of(scene, prim))
        .collect()
}

fn shading_of(scene: &RenderScene, prim: usize) -> GpuShading {
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
