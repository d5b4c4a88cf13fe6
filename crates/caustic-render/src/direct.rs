//! Direct light at a surface point by shadow rays: the part of the Whitted
//! estimate that the photon-mapping and progressive renderers share.

use crate::bsdf::reflect;
use crate::draw;
use crate::{RenderScene, SurfaceHit};
use caustic_geom::{Ray, Rgb, Vec2, Vec3};
use caustic_scene::{Bsdf, Light, Material};
use rayon::prelude::*;
use std::f32::consts::{FRAC_1_PI, PI};

/// Direct light reflected towards `wo` (unit, pointing away from the
/// surface) at a diffuse or glossy point: one shadow ray per point, spot
/// and directional light, and `light_samples` stratified shadow rays per
/// area light. `key` is the path key the area-light samples are drawn
/// from ([`draw::light_key`]); `rays` counts the shadow rays traced.
#[allow(clippy::too_many_arguments)]
pub fn direct_light(
    scene: &RenderScene,
    wo: Vec3,
    surface: &SurfaceHit,
    material: &Material,
    key: u64,
    light_samples: u32,
    rays: &mut u64,
) -> Rgb {
    direct_light_with(scene, wo, surface, material, key, light_samples, |shadow| {
        *rays += 1;
        scene.occluded(shadow)
    })
}

/// [`direct_light`] with the shadow rays answered by `occluded`, called
/// once per shadow ray in a fixed order (point, spot and directional
/// lights, then each area light's samples) that depends only on the
/// arguments. A batched renderer calls it twice: once to collect the shadow
/// rays (answering anything), then, after one batched query, to sum the
/// answers in that order, so the sum is [`direct_light`]'s bit for bit.
pub fn direct_light_with(
    scene: &RenderScene,
    wo: Vec3,
    surface: &SurfaceHit,
    material: &Material,
    key: u64,
    light_samples: u32,
    mut occluded: impl FnMut(&Ray) -> bool,
) -> Rgb {
    let ng = face_towards(surface.geometric_normal, wo);
    let n = face_towards(surface.shading_normal, wo);
    let albedo = scene.albedo(material, surface.uv);
    let origin = surface.point + ng * scene.ray_epsilon();
    let brdf = |wi: Vec3| brdf(material, albedo, n, wo, wi);
    let mut radiance = Rgb::ZERO;
    for light in &scene.lights {
        if let Some((wi, dist, incident)) = analytic_light(light, surface.point) {
            let cos = n.dot(wi);
            if cos <= 0.0 || ng.dot(wi) <= 0.0 {
                continue;
            }
            let shadow = Ray::segment(origin, wi, 0.0, dist * (1.0 - 1e-4));
            if !occluded(&shadow) {
                radiance += brdf(wi) * incident * cos;
            }
        }
    }
    let samples = light_samples.max(1);
    for (index, light) in scene.area_lights.iter().enumerate() {
        let mut sum = Rgb::ZERO;
        for k in 0..samples {
            let light_key = draw::light_key(key, index as u32, k, samples);
            let u = draw::uniform2(light_key, draw::LIGHT);
            let u = Vec2::new((k as f32 + u.x) / samples as f32, u.y);
            let sample = light.sample(&scene.triangles, u);
            let to_light = sample.point - origin;
            let dist2 = to_light.length_squared();
            let wi = to_light / dist2.sqrt();
            let cos = n.dot(wi);
            let cos_light = sample.normal.dot(-wi).abs();
            let emitted = light.radiance(sample.normal, -wi);
            if cos <= 0.0 || ng.dot(wi) <= 0.0 || emitted == Rgb::ZERO || dist2 == 0.0 {
                continue;
            }
            let shadow = Ray::segment(origin, to_light, 0.0, 1.0 - 1e-4);
            if !occluded(&shadow) {
                sum += brdf(wi) * emitted * (cos * cos_light / (dist2 * sample.pdf_area));
            }
        }
        radiance += sum / samples as f32;
    }
    radiance
}

/// A diffuse or glossy vertex of an eye path, where a renderer adds
/// direct light (and the photon renderers their estimates).
#[derive(Clone, Copy, Debug)]
pub struct PathVertex {
    pub surface: SurfaceHit,
    /// Direction towards the viewer (pointing away from the surface), as
    /// [`direct_light`] takes it.
    pub wo: Vec3,
    /// Path key of the vertex ([`draw`]): its area-light samples' keys
    /// derive from it.
    pub key: u64,
}

/// [`direct_light`] at each of `points`, its shadow rays traced as one
/// batch ([`caustic_accel::Accel::occluded_batch`]): each point's shadow
/// rays are collected by [`direct_light_with`], answered together, and
/// summed by [`direct_light_with`] again in the same order, so each value
/// is [`direct_light`]'s bit for bit. Returns the values and the number
/// of shadow rays.
pub fn direct_light_batch(
    scene: &RenderScene,
    points: &[PathVertex],
    light_samples: u32,
) -> (Vec<Rgb>, u64) {
    let light = |p: &PathVertex, answer: &mut dyn FnMut(&Ray) -> bool| {
        let material = &scene.materials[p.surface.material as usize];
        direct_light_with(
            scene,
            p.wo,
            &p.surface,
            material,
            p.key,
            light_samples,
            answer,
        )
    };
    let per_point: Vec<Vec<Ray>> = points
        .par_iter()
        .map(|p| {
            let mut shadows = Vec::new();
            light(p, &mut |shadow| {
                shadows.push(*shadow);
                true
            });
            shadows
        })
        .collect();
    let mut offsets = Vec::with_capacity(points.len());
    let mut shadows = Vec::with_capacity(per_point.iter().map(Vec::len).sum());
    for rays in per_point {
        offsets.push(shadows.len());
        shadows.extend(rays);
    }
    let mut occluded = vec![false; shadows.len()];
    scene.accel.occluded_batch(&shadows, &mut occluded);
    let values = (points, &offsets)
        .into_par_iter()
        .map(|(p, &offset)| {
            let mut answers = occluded[offset..].iter();
            light(p, &mut |_| answers.next().copied().unwrap_or(true))
        })
        .collect();
    (values, shadows.len() as u64)
}

/// The reflectance of a diffuse or glossy (modified Phong) material for
/// light arriving from `wi` and leaving towards `wo`, both unit and on the
/// side of the shading normal `n`; `albedo` is the diffuse albedo at the
/// point (texture applied).
pub fn brdf(material: &Material, albedo: Rgb, n: Vec3, wo: Vec3, wi: Vec3) -> Rgb {
    let diffuse = albedo * FRAC_1_PI;
    match material.bsdf {
        Bsdf::Glossy {
            specular, exponent, ..
        } => {
            let cos_alpha = reflect(-wi, n).dot(wo).max(0.0);
            diffuse + specular * (exponent + 2.0) / (2.0 * PI) * cos_alpha.powf(exponent)
        }
        _ => diffuse,
    }
}

/// Direction to the light, distance (infinite for directional lights) and
/// the irradiance it delivers on a surface facing it, at `point`.
fn analytic_light(light: &Light, point: Vec3) -> Option<(Vec3, f32, Rgb)> {
    match *light {
        Light::Point {
            position,
            intensity,
        } => {
            let d = position - point;
            let dist2 = d.length_squared();
            (dist2 > 0.0).then(|| (d / dist2.sqrt(), dist2.sqrt(), intensity / dist2))
        }
        Light::Spot {
            position,
            direction,
            intensity,
            cos_falloff_start,
            cos_total_width,
        } => {
            let d = position - point;
            let dist2 = d.length_squared();
            if dist2 == 0.0 {
                return None;
            }
            let wi = d / dist2.sqrt();
            let falloff =
                Light::spot_falloff(direction.dot(-wi), cos_falloff_start, cos_total_width);
            (falloff > 0.0).then(|| (wi, dist2.sqrt(), intensity * falloff / dist2))
        }
        Light::Directional {
            direction,
            irradiance,
        } => Some((-direction, f32::INFINITY, irradiance)),
    }
}

/// `v` flipped, if needed, into the hemisphere of `towards`.
pub fn face_towards(v: Vec3, towards: Vec3) -> Vec3 {
    if v.dot(towards) < 0.0 { -v } else { v }
}
