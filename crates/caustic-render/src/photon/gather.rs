//! Final gather (Jensen 2001 §9.3; Zeidan 2011, §6.1.2.2 and §6.2.4): the
//! indirect irradiance at a point from `N` cosine-distributed hemisphere
//! rays, each looking the radiance up in the **global** photon map where it
//! lands.
//!
//! `E(x) ≈ (π / N) Σ_i L(x ← ω_i)` (cosine sampling cancels the cosine).
//!
//! What a gather ray returns, so that nothing is counted twice:
//! - at a diffuse or glossy hit `y`: the global map's radiance estimate at
//!   `y`, which holds every photon that reached `y` (the map is traced with
//!   [`GlobalRule::All`](super::GlobalRule::All), direct hits included):
//!   paths `x ← D ← …`;
//! - at mirrors and glass: the specular chain is followed (glass picks
//!   reflection or refraction by the Fresnel probability) to its diffuse
//!   end `z`, then the global estimate there: paths `x ← S+ D ← …`, which
//!   neither direct light nor the caustic map hold;
//! - **no emission**, neither at `y` nor at the end of a specular chain:
//!   `x ← L` is the direct light of the shadow rays, and `x ← S+ L` is the
//!   caustic map;
//! - a miss returns the background (no other term samples it), a one-sided
//!   surface seen from behind is black.
//!
//! The rays are stratified on a jittered grid over the unit square (the
//! largest square not above `N`, the rest uniformly random), and every
//! random number is keyed by the gather point's key and the ray's index
//! (`draw`), so a gather does not depend on the thread that runs it.

use super::estimate::{self, EstimateSettings};
use super::map::PhotonMap;
use super::precomputed::IrradianceMap;
use crate::bsdf::{fresnel_dielectric, reflect, refract};
use crate::direct::{brdf, face_towards};
use crate::draw;
use crate::{RenderScene, SurfaceHit};
use caustic_accel::points::Neighbour;
use caustic_geom::{Ray, Rgb, Vec2, Vec3, sampling};
use caustic_scene::Bsdf;
use std::f32::consts::{FRAC_1_PI, PI};

/// Random-number purpose: direction of a gather ray.
const DIRECTION: u64 = 0x6761_7468;
/// Random-number purpose: reflect or refract at glass along a gather ray.
const FRESNEL: u64 = 0x6672_736c;

/// A final gather over one global photon map.
pub struct Gatherer<'a> {
    pub scene: &'a RenderScene,
    pub global: &'a PhotonMap,
    pub estimate: EstimateSettings,
    /// Irradiance precomputed at photons: when present, gather rays look
    /// it up instead of estimating from the global map.
    pub precomputed: Option<&'a IrradianceMap>,
    /// Hemisphere rays per gather.
    pub rays: u32,
    /// Most specular bounces a gather ray follows.
    pub max_depth: u32,
}

/// The result of one gather.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Gathered {
    /// Incident indirect irradiance (W/m²).
    pub irradiance: Rgb,
    /// Harmonic mean of the distances to the rays' first hits (Ward 1988):
    /// small near other surfaces, where irradiance changes fast; infinite
    /// when no ray hit anything.
    pub harmonic_distance: f32,
}

impl Gatherer<'_> {
    /// Gathers at `surface`, seen from the unit direction `wo` (pointing
    /// away from the surface); `key` names the gather for the random
    /// numbers, `rays` counts the rays traced.
    pub fn gather(
        &self,
        surface: &SurfaceHit,
        wo: Vec3,
        key: u64,
        scratch: &mut Vec<Neighbour>,
        rays: &mut u64,
    ) -> Gathered {
        let n = face_towards(surface.shading_normal, wo);
        let ng = face_towards(surface.geometric_normal, wo);
        let origin = surface.point + ng * self.scene.ray_epsilon();
        let count = self.rays.max(1);
        let grid = (count as f32).sqrt() as u32;
        let mut sum = Rgb::ZERO;
        let (mut inverse_distances, mut hits) = (0.0f64, 0u32);
        for i in 0..count {
            let ray_key = draw::mix(key, u64::from(i));
            let u = draw::uniform2(ray_key, DIRECTION);
            let u = if i < grid * grid {
                (Vec2::new((i % grid) as f32, (i / grid) as f32) + u) / grid as f32
            } else {
                u
            };
            let dir = to_world(sampling::cosine_hemisphere(u), n);
            if dir.dot(ng) <= 0.0 {
                continue;
            }
            let (radiance, distance) = self.incoming(Ray::new(origin, dir), ray_key, scratch, rays);
            sum += radiance;
            if let Some(d) = distance.filter(|&d| d > 0.0) {
                inverse_distances += 1.0 / f64::from(d);
                hits += 1;
            }
        }
        let harmonic_distance = if hits > 0 {
            (f64::from(hits) / inverse_distances) as f32
        } else {
            f32::INFINITY
        };
        Gathered {
            irradiance: sum * (PI / count as f32),
            harmonic_distance,
        }
    }

    /// Radiance arriving along `ray` by way of the global map, and the
    /// distance to the first hit (`None` on a miss).
    fn incoming(
        &self,
        mut ray: Ray,
        key: u64,
        scratch: &mut Vec<Neighbour>,
        rays: &mut u64,
    ) -> (Rgb, Option<f32>) {
        let mut throughput = Rgb::ONE;
        let mut first = None;
        for depth in 0..=self.max_depth {
            *rays += 1;
            let Some(hit) = self.scene.intersect(&ray) else {
                return (throughput * self.scene.background, first);
            };
            first = first.or(Some(hit.t * ray.dir.length()));
            let surface = self.scene.surface(&ray, &hit);
            let material = &self.scene.materials[surface.material as usize];
            let front = surface.geometric_normal.dot(ray.dir) < 0.0;
            let last = depth == self.max_depth;
            let dir = match material.bsdf {
                Bsdf::Dielectric { ior, tint } if !last => {
                    throughput *= tint;
                    let u = draw::uniform(draw::mix(key, u64::from(depth)), FRESNEL);
                    dielectric_choice(&ray, &surface, ior, u)
                }
                _ if !(front || material.two_sided) => break,
                Bsdf::Mirror { reflectance } if !last => {
                    throughput *= reflectance;
                    reflect(ray.dir, face_towards(surface.shading_normal, -ray.dir))
                }
                Bsdf::Diffuse { .. } | Bsdf::Glossy { .. } => {
                    let wo = -ray.dir.normalize();
                    let n = face_towards(surface.shading_normal, wo);
                    let ng = face_towards(surface.geometric_normal, wo);
                    let albedo = self.scene.albedo(material, surface.uv);
                    let l = match self.precomputed {
                        Some(map) => {
                            albedo * FRAC_1_PI * map.irradiance(surface.point, ng, scratch)
                        }
                        None => {
                            let f = |wi: Vec3| brdf(material, albedo, n, wo, wi);
                            let (map, settings) = (self.global, &self.estimate);
                            estimate::radiance(map, settings, surface.point, ng, scratch, f)
                        }
                    };
                    return (throughput * l, first);
                }
                _ => break,
            };
            ray = self.scene.spawn(&surface, dir);
        }
        (Rgb::ZERO, first)
    }
}

/// Reflection with the Fresnel probability, refraction otherwise, at a
/// smooth dielectric; `u` is the uniform that decides.
pub(crate) fn dielectric_choice(ray: &Ray, surface: &SurfaceHit, ior: f32, u: f32) -> Vec3 {
    let (n, eta) = surface.interface(ray.dir, ior);
    let d = ray.dir.normalize();
    let reflectance = fresnel_dielectric((-d.dot(n)).max(0.0), eta);
    (u >= reflectance)
        .then(|| refract(d, n, eta))
        .flatten()
        .unwrap_or_else(|| reflect(d, n))
}

/// `local` (z up) in the frame whose z axis is the unit vector `axis`.
pub(crate) fn to_world(local: Vec3, axis: Vec3) -> Vec3 {
    let (t, b) = sampling::onb(axis);
    t * local.x + b * local.y + axis * local.z
}
