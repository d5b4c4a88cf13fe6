//! The eye pass of SPPM: one jittered primary ray per pixel, its specular
//! chain, and the *visible point* where the chain meets the first diffuse
//! or glossy surface.
//!
//! A dielectric is crossed by **one** branch, reflection with the Fresnel
//! probability `F` and refraction otherwise, so the weight `F / F` stays 1
//! and every pixel has at most one visible point per pass (the
//! progressive estimate needs one measurement point per pixel and pass;
//! Whitted's split would need several). Mirrors reflect. Emission met along
//! the chain and ray-traced direct light at the visible point are
//! returned as the pass's *ray-traced radiance*; everything photons carry
//! is added later at the visible point.
//!
//! Random numbers come from `draw` keys: the sample key of
//! `(seed, pixel, pass)`, a child key per bounce (the primary ray's place
//! in its pixel from that key or from the pixel's sequence over passes,
//! [`super::PassJitter`]), so a pixel's eye path
//! does not depend on the thread count, nor on the way it is traced: one
//! ray at a time, row by row, or by waves ([`EyeSettings::trace`],
//! [`crate::waves`]), groups of rows whose paths bounce together, one
//! batched query per bounce, by the same `EyeTracer::step`, and whose
//! visible points' shadow rays go to one batch
//! ([`crate::direct::direct_light_batch`]): the same pass bit for bit.

use super::PassJitter;
use crate::bsdf::{fresnel_dielectric, reflect, refract};
use crate::direct::{PathVertex, direct_light, direct_light_batch, face_towards};
use crate::draw;
use crate::waves::{GROUP_RAYS, TraceMode, row_groups, trace_walks};
use crate::{PinholeCamera, RenderScene, SurfaceHit};
use caustic_geom::{Hit, Ray, Rgb, Vec3};
use caustic_scene::{Bsdf, Camera};
use rayon::prelude::*;
use std::ops::Range;

/// Where a pixel's eye path of one pass met a diffuse or glossy surface.
#[derive(Clone, Copy, Debug)]
pub struct VisiblePoint {
    /// `y * width + x`.
    pub pixel: u32,
    pub position: Vec3,
    /// Unit geometric normal on the side the eye path arrived from.
    pub normal: Vec3,
    /// Unit shading normal on that side.
    pub shading_normal: Vec3,
    /// Unit direction back along the eye path.
    pub wo: Vec3,
    /// Throughput of the specular chain (mirror reflectance, glass tint).
    pub weight: Rgb,
    pub material: u32,
    /// Diffuse albedo at the point (texture applied).
    pub albedo: Rgb,
    /// Width of the pixel's cone at the point, measured along the eye path:
    /// the scale of the automatic initial radius.
    pub footprint: f32,
}

/// One eye pass over the image.
pub struct EyePass {
    /// The pixel `radiance[0]` belongs to (0 unless the pass covered a
    /// team member's rows only).
    pub first_pixel: u32,
    /// Ray-traced radiance per pixel (emission along the chain, direct
    /// light at the visible point), row-major from `first_pixel`.
    pub radiance: Vec<Rgb>,
    /// Visible points in pixel order; pixels whose path left the scene,
    /// died or ended on the back of a one-sided surface have none.
    pub points: Vec<VisiblePoint>,
    pub rays: u64,
}

/// What the eye pass needs to know besides the scene.
#[derive(Clone, Copy, Debug)]
pub struct EyeSettings {
    pub width: u32,
    pub height: u32,
    pub max_depth: u32,
    pub light_samples: u32,
    pub seed: u64,
    /// Where the pass's primary ray falls inside its pixel.
    pub jitter: PassJitter,
    /// One ray at a time or by waves: the same pass either way.
    pub trace: TraceMode,
}

/// Traces eye pass `pass` (it picks the random numbers) for every pixel,
/// rows in parallel.
pub fn eye_pass(scene: &RenderScene, camera: &Camera, eye: &EyeSettings, pass: u32) -> EyePass {
    eye_pass_rows(scene, camera, eye, pass, 0..eye.height)
}

/// Traces eye pass `pass` for the pixels of `rows` alone (a team member's
/// rows): the same paths, pixel for pixel, as [`eye_pass`] traces there.
pub fn eye_pass_rows(
    scene: &RenderScene,
    camera: &Camera,
    eye: &EyeSettings,
    pass: u32,
    rows: Range<u32>,
) -> EyePass {
    let tracer = EyeTracer::new(scene, camera, eye, pass);
    let rows = rows.start..rows.end.min(eye.height);
    if eye.trace.traces_waves(scene) {
        tracer.by_waves(rows, GROUP_RAYS)
    } else {
        let traced = rows.clone().into_par_iter().map(|y| tracer.row(y));
        tracer.pass(rows.start, traced.collect())
    }
}

/// Traced rows: each one's (or each group's) ray-traced radiance, visible
/// points and rays.
type Traced = Vec<(Vec<Rgb>, Vec<VisiblePoint>, u64)>;

/// An eye path in flight.
struct EyePath {
    pixel: u32,
    /// Path key of the vertex its ray leaves.
    key: u64,
    /// The ray it traces next; `None` once it has ended.
    ray: Option<Ray>,
    /// Throughput of the specular chain so far.
    weight: Rgb,
    /// Emission and background met so far, weighted.
    radiance: Rgb,
    path_length: f32,
    /// Specular bounces so far.
    depth: u32,
    /// Where it met a diffuse or glossy surface.
    end: Option<PathVertex>,
}

struct EyeTracer<'a> {
    scene: &'a RenderScene,
    eye: &'a EyeSettings,
    pinhole: PinholeCamera,
    /// Angle subtended by one pixel at the image centre (radians, small
    /// angle): times the path length it gives the pixel footprint.
    pixel_angle: f32,
    pass: u32,
}

impl<'a> EyeTracer<'a> {
    fn new(scene: &'a RenderScene, camera: &Camera, eye: &'a EyeSettings, pass: u32) -> Self {
        let (tx, _) = camera.half_extents(eye.width as f32 / eye.height as f32);
        Self {
            scene,
            eye,
            pinhole: PinholeCamera::new(camera, eye.width, eye.height),
            pixel_angle: 2.0 * tx / eye.width as f32,
            pass,
        }
    }

    /// The pass over the rows from `first_row` on, `traced` in order.
    fn pass(&self, first_row: u32, traced: Traced) -> EyePass {
        let mut out = EyePass {
            first_pixel: first_row * self.eye.width,
            radiance: Vec::new(),
            points: Vec::new(),
            rays: 0,
        };
        for (radiance, points, rays) in traced {
            out.radiance.extend(radiance);
            out.points.extend(points);
            out.rays += rays;
        }
        out
    }

    /// The pass over `rows` by waves, in groups of whole rows of at most
    /// `group_rays` primary rays (at least one row).
    fn by_waves(&self, rows: Range<u32>, group_rays: usize) -> EyePass {
        let traced = row_groups(rows.clone(), self.eye.width, group_rays)
            .map(|group| self.rows_by_waves(group))
            .collect();
        self.pass(rows.start, traced)
    }

    fn row(&self, y: u32) -> (Vec<Rgb>, Vec<VisiblePoint>, u64) {
        let mut radiance = Vec::with_capacity(self.eye.width as usize);
        let mut points = Vec::new();
        let mut rays = 0;
        for x in 0..self.eye.width {
            let (l, point) = self.pixel(x, y, &mut rays);
            radiance.push(l);
            points.extend(point);
        }
        (radiance, points, rays)
    }

    /// The rows `rows` by waves: their ray-traced radiance, visible points
    /// and rays, as `EyeTracer::row` gives them row after row.
    fn rows_by_waves(&self, rows: Range<u32>) -> (Vec<Rgb>, Vec<VisiblePoint>, u64) {
        let width = self.eye.width;
        let mut paths: Vec<EyePath> = rows
            .into_par_iter()
            .flat_map_iter(|y| (0..width).map(move |x| self.start(x, y)))
            .collect();
        let rays = trace_walks(
            self.scene,
            &mut paths,
            |p| p.ray,
            || (),
            |_, p, hit| self.step(p, hit),
        );
        let ends: Vec<PathVertex> = paths.iter().filter_map(|p| p.end).collect();
        let (direct, shadow_rays) = direct_light_batch(self.scene, &ends, self.eye.light_samples);
        let mut direct = direct.into_iter();
        let mut radiance = Vec::with_capacity(paths.len());
        let mut points = Vec::new();
        for path in paths {
            let lit = path.end.map(|_| direct.next().unwrap_or(Rgb::ZERO));
            let (l, point) = self.finish(path, lit);
            radiance.push(l);
            points.extend(point);
        }
        (radiance, points, rays + shadow_rays)
    }

    /// The ray-traced radiance and the visible point of one pixel.
    fn pixel(&self, x: u32, y: u32, rays: &mut u64) -> (Rgb, Option<VisiblePoint>) {
        let mut path = self.start(x, y);
        while let Some(ray) = path.ray {
            *rays += 1;
            let hit = self.scene.intersect(&ray);
            self.step(&mut path, hit);
        }
        let direct = path.end.map(|end| {
            let material = &self.scene.materials[end.surface.material as usize];
            let samples = self.eye.light_samples;
            direct_light(
                self.scene,
                end.wo,
                &end.surface,
                material,
                end.key,
                samples,
                rays,
            )
        });
        self.finish(path, direct)
    }

    /// The eye path of pixel `(x, y)` leaving the camera.
    fn start(&self, x: u32, y: u32) -> EyePath {
        let pixel = y * self.eye.width + x;
        let key = draw::sample_key(self.eye.seed, pixel as u64, self.pass);
        let jitter = match self.eye.jitter {
            PassJitter::Independent => draw::uniform2(key, draw::CAMERA),
            PassJitter::Sequence => draw::pass_jitter(self.eye.seed, pixel as u64, self.pass),
        };
        EyePath {
            pixel,
            key,
            ray: Some(self.pinhole.ray(x as f32 + jitter.x, y as f32 + jitter.y)),
            weight: Rgb::ONE,
            radiance: Rgb::ZERO,
            path_length: 0.0,
            depth: 0,
            end: None,
        }
    }

    /// Takes the path on from `hit`, the hit of its ray: the background on
    /// a miss, emission along the chain, the next specular ray, or its end
    /// at a diffuse or glossy surface.
    fn step(&self, p: &mut EyePath, hit: Option<Hit>) {
        let Some(ray) = p.ray.take() else {
            return;
        };
        let Some(hit) = hit else {
            p.radiance += p.weight * self.scene.background;
            return;
        };
        let surface = self.scene.surface(&ray, &hit);
        let material = &self.scene.materials[surface.material as usize];
        p.path_length += surface.t * ray.dir.length();
        let front = surface.geometric_normal.dot(ray.dir) < 0.0;
        let visible = front || material.two_sided;
        if material.is_emissive() && visible {
            p.radiance += p.weight * material.emission;
        }
        let more = p.depth < self.eye.max_depth;
        let next = match material.bsdf {
            Bsdf::Dielectric { ior, tint } if more => {
                p.weight *= tint;
                Some(self.dielectric(&ray, &surface, ior, &mut p.key))
            }
            Bsdf::Mirror { reflectance } if visible && more => {
                p.weight *= reflectance;
                p.key = draw::child_key(p.key, draw::REFLECT);
                let n = face_towards(surface.shading_normal, -ray.dir);
                Some(self.scene.spawn(&surface, reflect(ray.dir, n)))
            }
            Bsdf::Diffuse { .. } | Bsdf::Glossy { .. } if visible => {
                let wo = -ray.dir.normalize();
                p.end = Some(PathVertex {
                    surface,
                    wo,
                    key: p.key,
                });
                None
            }
            _ => None,
        };
        p.depth += 1;
        p.ray = next.filter(|_| p.weight.max_element() > 0.0);
    }

    /// The pixel's ray-traced radiance and visible point once its path has
    /// ended, `direct` being the direct light at its end.
    fn finish(&self, p: EyePath, direct: Option<Rgb>) -> (Rgb, Option<VisiblePoint>) {
        let mut radiance = p.radiance;
        let (Some(end), Some(direct)) = (p.end, direct) else {
            return (radiance, None);
        };
        radiance += p.weight * direct;
        let footprint = p.path_length * self.pixel_angle;
        let point = self.visible_point(p.pixel, end.wo, &end.surface, p.weight, footprint);
        (radiance, Some(point))
    }

    /// Reflects with the Fresnel probability, refracts otherwise (total
    /// internal reflection reflects), and moves `key` to the branch taken.
    fn dielectric(&self, ray: &Ray, surface: &SurfaceHit, ior: f32, key: &mut u64) -> Ray {
        let (n, eta) = surface.interface(ray.dir, ior);
        let cos_i = (-ray.dir.dot(n)).max(0.0);
        let reflectance = fresnel_dielectric(cos_i, eta);
        let refracted = (draw::uniform(*key, draw::ROULETTE) >= reflectance)
            .then(|| refract(ray.dir, n, eta))
            .flatten();
        let (dir, branch) = match refracted {
            Some(dir) => (dir, draw::REFRACT),
            None => (reflect(ray.dir, n), draw::REFLECT),
        };
        *key = draw::child_key(*key, branch);
        self.scene.spawn(surface, dir)
    }

    fn visible_point(
        &self,
        pixel: u32,
        wo: Vec3,
        surface: &SurfaceHit,
        weight: Rgb,
        footprint: f32,
    ) -> VisiblePoint {
        let material = &self.scene.materials[surface.material as usize];
        VisiblePoint {
            pixel,
            position: surface.point,
            normal: face_towards(surface.geometric_normal, wo),
            shading_normal: face_towards(surface.shading_normal, wo),
            wo,
            weight,
            material: surface.material,
            albedo: self.scene.albedo(material, surface.uv),
            footprint,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use caustic_scene::Scene;

    /// Groups of one row, of two, or all rows by waves give the per-ray
    /// pass: radiance and visible points to the bit, and rays.
    #[test]
    fn wave_groups_of_any_size_give_the_per_ray_pass() {
        let scene = Scene::builtin("cornell-caustics").expect("a built-in scene");
        let rs = RenderScene::new(&scene, "bvh-wide").expect("the scene flattens");
        let camera = scene.camera_or_default();
        let eye = EyeSettings {
            width: 13,
            height: 11,
            max_depth: 8,
            light_samples: 2,
            seed: 3,
            jitter: PassJitter::Sequence,
            trace: TraceMode::PerRay,
        };
        let want = eye_pass_rows(&rs, &camera, &eye, 2, 1..10);
        assert!(!want.points.is_empty());
        let tracer = EyeTracer::new(&rs, &camera, &eye, 2);
        let bits = |v: Vec3| v.to_array().map(f32::to_bits);
        for group_rays in [1, 26, GROUP_RAYS] {
            let got = tracer.by_waves(1..10, group_rays);
            assert_eq!(got.first_pixel, want.first_pixel);
            assert_eq!(got.rays, want.rays, "groups of {group_rays} rays: rays");
            let radiance = |p: &EyePass| p.radiance.iter().map(|&l| bits(l)).collect::<Vec<_>>();
            assert_eq!(
                radiance(&got),
                radiance(&want),
                "groups of {group_rays} rays"
            );
            let point = |p: &VisiblePoint| {
                (
                    p.pixel,
                    bits(p.position),
                    bits(p.weight),
                    p.footprint.to_bits(),
                )
            };
            let points = |p: &EyePass| p.points.iter().map(point).collect::<Vec<_>>();
            assert_eq!(points(&got), points(&want), "groups of {group_rays} rays");
        }
    }
}
