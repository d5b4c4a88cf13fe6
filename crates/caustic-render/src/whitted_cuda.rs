//! The Whitted ray tracer of [`crate::whitted`] on a CUDA GPU, as a
//! wavefront (Zeidan's thesis, chapter 5): the image is a queue of rays, and
//! every bounce runs one kernel per stage over the whole queue.
//!
//! 1. Primary rays, `spp` per pixel, in Morton order inside 8×8 tiles.
//! 2. Per bounce: closest-hit traversal (`caustic_gpu::Tracer`, the same
//!    persistent kernel and bits as the CPU traversal); one shading kernel
//!    adds emission and background to a device framebuffer and writes, per
//!    ray, two child slots (mirror reflection, or the Fresnel split of a
//!    dielectric, weak branches by Russian roulette) and one shadow slot per
//!    point/spot/directional light and `light_samples` per area light;
//!    stream compaction keeps the flagged slots; the shadow rays are traced
//!    any-hit and the unoccluded ones added; the children are the next
//!    bounce's queue.
//! 3. The framebuffer stays on the device until the final image is
//!    downloaded once.
//!
//! Every random number comes from [`crate::whitted::draw`], keyed by pixel,
//! sample and branch path, so the GPU image equals the CPU image up to
//! floating-point rounding in shading (contraction to FMA, the order of the
//! framebuffer's atomic additions).
//!
//! The scene's own accelerator is a `dyn Accel`, which cannot be uploaded;
//! the renderer builds a [`TriangleBvh`] (binned SAH) over the scene
//! triangles. Hits do not depend on the tree: the traversal returns the
//! closest hit, ties to the lowest triangle id, as every CPU accelerator.

use std::time::Instant;

use caustic_accel::TriangleBvh;
use caustic_geom::Rgb;
use caustic_gpu::ops::compact::{gather_wave, select_indices};
use caustic_gpu::trace::GpuHit;
use caustic_gpu::whitted::{
    self as kernels, GpuAreaLight, GpuLight, GpuMaterial, GpuPath, GpuShading, GpuTexture,
    ShadeTargets, WhittedParams, light_kind, material_kind,
};
use caustic_gpu::{DeviceBuffer, DeviceBvh, Gpu, GpuError, GpuRay, GpuTriangle, Tracer};
use caustic_scene::{Bsdf, Camera, Light, Material};

use crate::whitted::{FresnelMode, RenderStats, WhittedSettings};
use crate::{Film, RenderScene};

/// Renders `scene` through `camera` on `gpu`; the same image as
/// [`crate::whitted::render`] with the same settings. The time in the stats
/// includes building and uploading the scene; [`GpuScene::render`] renders
/// more frames of an uploaded scene.
pub fn render(
    gpu: &Gpu,
    scene: &RenderScene,
    camera: &Camera,
    settings: &WhittedSettings,
) -> Result<(Film, RenderStats), GpuError> {
    let start = Instant::now();
    let (film, mut stats) = GpuScene::upload(gpu, scene)?.render(camera, settings)?;
    stats.seconds = start.elapsed().as_secs_f64();
    Ok((film, stats))
}

/// A scene on the device, ready to render frames from any camera.
pub struct GpuScene {
    device: DeviceScene,
    ray_epsilon: f32,
    background: Rgb,
    lights: usize,
    area_lights: usize,
}

impl GpuScene {
    /// Builds the BVH and uploads the scene.
    pub fn upload(gpu: &Gpu, scene: &RenderScene) -> Result<Self, GpuError> {
        Ok(Self {
            device: DeviceScene::upload(gpu, scene)?,
            ray_epsilon: scene.ray_epsilon(),
            background: scene.background,
            lights: scene.lights.len(),
            area_lights: scene.area_lights.len(),
        })
    }

    /// One frame: every bounce on the device, one download at the end. The
    /// stats' time is the frame's wall time, download included.
    pub fn render(
        &self,
        camera: &Camera,
        settings: &WhittedSettings,
    ) -> Result<(Film, RenderStats), GpuError> {
        self.render_with(camera, settings, &mut ())
    }

    /// [`Self::render`] with `extra`'s steps run on every traced wave after
    /// its shading and on the framebuffer before its download (the photon
    /// mapper collects its eye vertices, then adds its estimates there).
    pub fn render_with(
        &self,
        camera: &Camera,
        settings: &WhittedSettings,
        extra: &mut dyn WaveSteps,
    ) -> Result<(Film, RenderStats), GpuError> {
        let start = Instant::now();
        let gpu = self.device.bvh.gpu();
        let pixels = settings.width as usize * settings.height as usize;
        let framebuffer = DeviceBuffer::<f32>::zeroed(gpu, "whitted framebuffer", 3 * pixels)?;
        let params = self.params(camera, settings, framebuffer.device_ptr());
        let params = DeviceBuffer::from_slice(gpu, "whitted params", &[params])?;
        let mut frame = Frame {
            tracer: Tracer::new(gpu)?,
            bvh: &self.device.bvh,
            params: &params,
            shadow_slots: self.shadow_slots(settings.light_samples),
            rays: (pixels * settings.spp.max(1) as usize) as u64,
        };
        let mut wave = frame.primary(settings)?;
        for _ in 0..=settings.max_depth {
            if wave.rays.is_empty() {
                break;
            }
            wave = frame.bounce(&wave, extra)?;
        }
        extra.finish(&params)?;
        let film = download(&framebuffer, settings)?;
        let stats = RenderStats {
            seconds: start.elapsed().as_secs_f64(),
            rays: frame.rays,
        };
        Ok((film, stats))
    }

    /// Shadow rays a shaded point casts: one per point, spot or directional
    /// light, `light_samples` per area light.
    pub fn shadow_slots(&self, light_samples: u32) -> u32 {
        (self.lights + self.area_lights * light_samples.max(1) as usize) as u32
    }

    /// The device the scene lives on.
    pub fn gpu(&self) -> &Gpu {
        self.device.bvh.gpu()
    }

    /// The scene's BVH on the device.
    pub fn bvh(&self) -> &DeviceBvh {
        &self.device.bvh
    }

    /// The scene arrays' addresses with no camera and no framebuffer: what
    /// kernels that trace from the lights read.
    pub fn scene_params(&self) -> WhittedParams {
        let d = &self.device;
        WhittedParams {
            triangles: d.triangles.device_ptr(),
            shading: d.shading.device_ptr(),
            materials: d.materials.device_ptr(),
            lights: d.lights.device_ptr(),
            area_lights: d.area_lights.device_ptr(),
            light_tris: d.light_tris.device_ptr(),
            light_cdf: d.light_cdf.device_ptr(),
            textures: d.textures.device_ptr(),
            texels: d.texels.device_ptr(),
            ray_epsilon: self.ray_epsilon,
            background: self.background.to_array(),
            light_count: self.lights as u32,
            area_count: self.area_lights as u32,
            ..Default::default()
        }
    }

    /// The frame's parameters: the scene's arrays, the camera, `settings`
    /// and the framebuffer's address.
    pub fn params(
        &self,
        camera: &Camera,
        settings: &WhittedSettings,
        framebuffer: u64,
    ) -> WhittedParams {
        // PinholeCamera's frame, with the half extents folded in.
        let (forward, right, up) = camera.frame();
        let (tx, ty) = camera.half_extents(settings.width as f32 / settings.height as f32);
        WhittedParams {
            framebuffer,
            seed: settings.seed,
            eye: camera.eye.to_array(),
            forward: forward.to_array(),
            width: settings.width,
            right: (right * tx).to_array(),
            height: settings.height,
            up: (up * ty).to_array(),
            spp: settings.spp.max(1),
            max_depth: settings.max_depth,
            light_samples: light_samples(settings) as u32,
            schlick: u32::from(settings.fresnel == FresnelMode::Schlick),
            ..self.scene_params()
        }
    }
}

fn light_samples(settings: &WhittedSettings) -> usize {
    settings.light_samples.max(1) as usize
}

/// The rays of one bounce and their paths, slot for slot.
struct Wave {
    rays: DeviceBuffer<GpuRay>,
    paths: DeviceBuffer<GpuPath>,
}

/// One traced and shaded wave of eye rays, as [`GpuScene::render_with`]
/// hands it to its `extra` step: slots `0..len` of `rays`, `hits`, `paths`.
pub struct ShadedWave<'a> {
    pub params: &'a DeviceBuffer<WhittedParams>,
    pub rays: &'a DeviceBuffer<GpuRay>,
    pub hits: &'a DeviceBuffer<GpuHit>,
    pub paths: &'a DeviceBuffer<GpuPath>,
    pub len: usize,
}

/// Extra steps of a frame ([`GpuScene::render_with`]).
pub trait WaveSteps {
    /// Runs on every wave, after its shading.
    fn wave(&mut self, wave: &ShadedWave) -> Result<(), GpuError>;
    /// Runs once after the last wave, before the image is downloaded.
    fn finish(&mut self, _params: &DeviceBuffer<WhittedParams>) -> Result<(), GpuError> {
        Ok(())
    }
}

/// No extra steps.
impl WaveSteps for () {
    fn wave(&mut self, _: &ShadedWave) -> Result<(), GpuError> {
        Ok(())
    }
}

/// What every bounce of one frame shares.
struct Frame<'a> {
    tracer: Tracer,
    bvh: &'a DeviceBvh,
    params: &'a DeviceBuffer<WhittedParams>,
    shadow_slots: u32,
    /// Rays traced so far: primary, specular and shadow.
    rays: u64,
}

impl Frame<'_> {
    fn gpu(&self) -> &Gpu {
        self.params.gpu()
    }

    fn primary(&self, settings: &WhittedSettings) -> Result<Wave, GpuError> {
        let spp = settings.spp.max(1);
        let n = kernels::primary_slots(settings.width, settings.height, spp);
        let mut wave = Wave {
            rays: DeviceBuffer::uninit(self.gpu(), "whitted primary rays", n)?,
            paths: DeviceBuffer::uninit(self.gpu(), "whitted primary paths", n)?,
        };
        kernels::primary(self.params, &mut wave.rays, &mut wave.paths)?;
        Ok(wave)
    }

    /// Traces and shades `wave`, adds its direct light, and returns the
    /// compacted children.
    fn bounce(&mut self, wave: &Wave, extra: &mut dyn WaveSteps) -> Result<Wave, GpuError> {
        let gpu = self.gpu().clone();
        let n = wave.rays.len();
        let mut hits = DeviceBuffer::<GpuHit>::uninit(&gpu, "whitted hits", n)?;
        self.tracer.intersect(self.bvh, &wave.rays, &mut hits)?;
        let slots = n * self.shadow_slots as usize;
        let mut children = Wave {
            rays: DeviceBuffer::uninit(&gpu, "whitted child rays", 2 * n)?,
            paths: DeviceBuffer::uninit(&gpu, "whitted child paths", 2 * n)?,
        };
        let mut child_flags = DeviceBuffer::uninit(&gpu, "whitted child flags", 2 * n)?;
        let mut shadow_rays = DeviceBuffer::uninit(&gpu, "whitted shadow rays", slots)?;
        let mut shadow_values = DeviceBuffer::uninit(&gpu, "whitted shadow values", slots)?;
        let mut shadow_flags = DeviceBuffer::uninit(&gpu, "whitted shadow flags", slots)?;
        let targets = ShadeTargets {
            child_rays: &mut children.rays,
            child_paths: &mut children.paths,
            child_flags: &mut child_flags,
            shadow_rays: &mut shadow_rays,
            shadow_values: &mut shadow_values,
            shadow_flags: &mut shadow_flags,
        };
        kernels::shade(
            self.params,
            &wave.rays,
            &hits,
            &wave.paths,
            n,
            self.shadow_slots,
            targets,
        )?;
        extra.wave(&ShadedWave {
            params: self.params,
            rays: &wave.rays,
            hits: &hits,
            paths: &wave.paths,
            len: n,
        })?;
        drop(hits);
        if slots > 0 {
            self.shadows(&shadow_rays, &shadow_values, &shadow_flags)?;
        }
        self.compact_children(&children, &child_flags)
    }

    /// Compacts the flagged shadow slots, traces them any-hit and adds the
    /// unoccluded contributions.
    fn shadows(
        &mut self,
        rays: &DeviceBuffer<GpuRay>,
        values: &DeviceBuffer<[f32; 4]>,
        flags: &DeviceBuffer<u32>,
    ) -> Result<(), GpuError> {
        let gpu = self.gpu().clone();
        let indices = select_indices(flags)?;
        let n = indices.len();
        if n == 0 {
            return Ok(());
        }
        let mut live_rays = DeviceBuffer::uninit(&gpu, "whitted live shadow rays", n)?;
        let mut live_values = DeviceBuffer::uninit(&gpu, "whitted live shadow values", n)?;
        kernels::gather_shadows(rays, values, &indices, n, &mut live_rays, &mut live_values)?;
        let mut occluded = DeviceBuffer::uninit(&gpu, "whitted occlusion", n)?;
        self.tracer.occluded(self.bvh, &live_rays, &mut occluded)?;
        kernels::shadow_add(self.params, &occluded, &live_values, n)?;
        self.rays += n as u64;
        Ok(())
    }

    fn compact_children(
        &mut self,
        children: &Wave,
        flags: &DeviceBuffer<u32>,
    ) -> Result<Wave, GpuError> {
        let gpu = self.gpu().clone();
        let indices = select_indices(flags)?;
        let n = indices.len();
        let mut next = Wave {
            rays: DeviceBuffer::uninit(&gpu, "whitted rays", n)?,
            paths: DeviceBuffer::uninit(&gpu, "whitted paths", n)?,
        };
        gather_wave(
            &children.rays,
            &children.paths,
            &indices,
            &mut next.rays,
            &mut next.paths,
        )?;
        self.rays += n as u64;
        Ok(next)
    }
}

/// The framebuffer's sums over samples, averaged.
fn download(framebuffer: &DeviceBuffer<f32>, settings: &WhittedSettings) -> Result<Film, GpuError> {
    let sums = framebuffer.download()?;
    let spp = settings.spp.max(1) as f32;
    let mut film = Film::new(settings.width, settings.height);
    for (pixel, sum) in film.pixels.iter_mut().zip(sums.chunks_exact(3)) {
        *pixel = Rgb::new(sum[0], sum[1], sum[2]) / spp;
    }
    Ok(film)
}

/// The scene's arrays on the device. `WhittedParams` holds their addresses,
/// so this must outlive every launch that reads them.
struct DeviceScene {
    bvh: DeviceBvh,
    triangles: DeviceBuffer<GpuTriangle>,
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
    fn upload(gpu: &Gpu, scene: &RenderScene) -> Result<Self, GpuError> {
        let bvh = TriangleBvh::build(&scene.triangles);
        let triangles: Vec<GpuTriangle> = (scene.triangles.iter().enumerate())
            .map(|(id, tri)| GpuTriangle::new(tri, id as u32))
            .collect();
        let (area_lights, light_tris, light_cdf) = area_lights(scene);
        let (textures, texels) = textures(scene);
        Ok(Self {
            bvh: DeviceBvh::upload(gpu, &bvh)?,
            triangles: DeviceBuffer::from_slice(gpu, "whitted triangles", &triangles)?,
            shading: DeviceBuffer::from_slice(gpu, "whitted shading", &shading(scene))?,
            materials: DeviceBuffer::from_slice(gpu, "whitted materials", &materials(scene))?,
            lights: DeviceBuffer::from_slice(gpu, "whitted lights", &lights(scene))?,
            area_lights: DeviceBuffer::from_slice(gpu, "whitted area lights", &area_lights)?,
            light_tris: DeviceBuffer::from_slice(gpu, "whitted light triangles", &light_tris)?,
            light_cdf: DeviceBuffer::from_slice(gpu, "whitted light cdf", &light_cdf)?,
            textures: DeviceBuffer::from_slice(gpu, "whitted textures", &textures)?,
            texels: DeviceBuffer::from_slice(gpu, "whitted texels", &texels)?,
        })
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
