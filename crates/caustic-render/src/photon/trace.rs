//! Photon tracing: emission, bounces, storage into the global and caustic
//! maps (Jensen 2001; Zeidan 2011, §15.1 and §15.3).
//!
//! At each hit:
//! - **diffuse** (Lambertian, and the Lambertian part of glossy): store the
//!   photon (see the maps below), then continue by **Russian roulette**:
//!   survive with probability `p = max(albedo)` ([`RouletteRule::MaxAlbedo`],
//!   the default) or `mean(albedo)`, scale the power by `albedo / p`, and
//!   leave in a cosine-distributed direction. The max rule never raises a
//!   channel's power (`albedo / max ≤ 1`), so a red wall cannot turn one
//!   photon into a brighter one. The mean rule lets a channel grow by
//!   `albedo / mean` per bounce, and its variance is infinite once
//!   `max(albedo)² > mean(albedo)` (an (0.8, 0.4, 0.2) closed box: the red
//!   total of 10^5 photons came out 5 % low; unbiased, but heavy-tailed);
//! - **glossy**: stored like diffuse; the roulette picks the Lambertian
//!   part with probability `max(albedo)`, the Phong lobe (sampled exactly,
//!   cos^n about the mirror direction) with probability `max(specular)`
//!   (both scaled down if they sum above 1), absorption otherwise. A Phong
//!   bounce is not a perfect specular one, so it does not make caustics;
//! - **mirror**: reflect, power times the reflectance; **dielectric**:
//!   reflect with the exact Fresnel probability, refract otherwise, power
//!   times the tint. No roulette on specular bounces: paths stop at
//!   `max_bounces`;
//! - one-sided surfaces are black from behind, as in the Whitted renderer
//!   and the references: a photon reaching a one-sided diffuse or mirror
//!   surface from its back is absorbed (glass has no back).
//!
//! Maps, by the path from the light to the storing hit (S = perfect
//! specular, D = diffuse or glossy bounce):
//! - **caustic**: `L S+ D`, the first diffuse hit after one or more specular
//!   bounces;
//! - **global** ([`GlobalRule`]): by default every diffuse hit except the
//!   first hit straight from the light (`L D`), because direct light is ray
//!   traced; `IndirectOnly` also leaves out `L S+ D` (the caustic map's
//!   photons), for renderers that add both maps at one point; `All` keeps
//!   `L D` too (a final gather that reads the global map at its hits).
//!
//! Determinism: photon `i` draws all its random numbers from its own PCG32
//! stream ([`photon_rng`]); photons are traced in fixed chunks of
//! consecutive indices and the chunks' results concatenated in index order,
//! so the maps are bit-identical for any thread count.

use super::emit::PhotonSources;
use super::record::Photon;
use crate::bsdf::{fresnel_dielectric, reflect, refract};
use crate::direct::face_towards;
use crate::{RenderScene, SurfaceHit};
use caustic_geom::{Pcg32, Ray, Rgb, Vec2, Vec3, sampling};
use caustic_scene::{Bsdf, Material};
use rayon::prelude::*;
use std::f32::consts::PI;
use std::ops::Range;
use std::time::Instant;

/// Photons per rayon task: the unit of work and of result order.
const CHUNK: u64 = 4096;

/// Which diffuse hits the global map keeps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GlobalRule {
    /// Every diffuse hit except `L D` (direct light is ray traced).
    #[default]
    AfterFirstBounce,
    /// Only hits with an earlier diffuse bounce: `L (S|D)* D (S|D)* D`.
    IndirectOnly,
    /// Every diffuse hit.
    All,
}

/// Survival probability of the diffuse Russian roulette.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RouletteRule {
    /// `max(albedo)`: powers never grow.
    #[default]
    MaxAlbedo,
    /// `mean(albedo)`.
    MeanAlbedo,
}

/// What to trace.
#[derive(Clone, Debug, PartialEq)]
pub struct PhotonSettings {
    /// Photons emitted (the normalisation count `N`).
    pub photons: u64,
    /// Most surface interactions per photon.
    pub max_bounces: u32,
    pub global_rule: GlobalRule,
    pub roulette: RouletteRule,
    pub seed: u64,
}

impl Default for PhotonSettings {
    fn default() -> Self {
        Self {
            photons: 200_000,
            max_bounces: 32,
            global_rule: GlobalRule::default(),
            roulette: RouletteRule::default(),
            seed: 0,
        }
    }
}

impl PhotonSettings {
    /// Zeidan's (2011) setting: 200 K photons, 5 bounces.
    pub fn zeidan() -> Self {
        Self {
            max_bounces: 5,
            ..Self::default()
        }
    }
}

/// What a photon pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PhotonStats {
    pub emitted: u64,
    pub global: usize,
    pub caustic: usize,
    /// Rays traced (one per photon segment).
    pub rays: u64,
    pub seconds: f64,
}

/// The two photon maps of one pass, powers already divided by `emitted`.
#[derive(Clone, Debug, Default)]
pub struct PhotonMaps {
    pub global: Vec<Photon>,
    pub caustic: Vec<Photon>,
    pub emitted: u64,
    /// Total power the lights emit (watts per channel).
    pub light_power: Rgb,
    pub stats: PhotonStats,
}

/// The random stream of photon `index`: its own PCG32 stream (the index is
/// the stream selector) from a state scrambled by SplitMix64, so that
/// neighbouring photons are not correlated.
pub fn photon_rng(seed: u64, index: u64) -> Pcg32 {
    Pcg32::new(splitmix64(seed ^ splitmix64(index)), index)
}

fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Traces `settings.photons` photons through `scene` on the current rayon
/// pool.
pub fn trace_photons(scene: &RenderScene, settings: &PhotonSettings) -> PhotonMaps {
    trace_with(scene, settings, 0..settings.photons, false)
}

/// Traces photons `indices` of the `settings.photons` a pass emits (powers
/// divided by the whole pass's count): a team member's share. The shares'
/// maps concatenated in index order are [`trace_photons`]'s maps.
pub fn trace_photon_range(
    scene: &RenderScene,
    settings: &PhotonSettings,
    indices: Range<u64>,
    caustic_only: bool,
) -> PhotonMaps {
    trace_with(scene, settings, indices, caustic_only)
}

/// Traces `settings.photons` photons for the caustic map alone: a photon
/// stops at its first diffuse hit (nothing after it can be a caustic), so a
/// caustic map of many more photons than the global map costs about one
/// ray per photon. The global map of the result is empty.
pub fn trace_caustic_photons(scene: &RenderScene, settings: &PhotonSettings) -> PhotonMaps {
    trace_with(scene, settings, 0..settings.photons, true)
}

fn trace_with(
    scene: &RenderScene,
    settings: &PhotonSettings,
    indices: Range<u64>,
    caustic_only: bool,
) -> PhotonMaps {
    let start = Instant::now();
    let sources = PhotonSources::new(scene);
    let tracer = Tracer {
        scene,
        settings,
        sources: &sources,
        inv_photons: 1.0 / settings.photons.max(1) as f32,
        caustic_only,
    };
    let indices = indices.start.min(settings.photons)..indices.end.min(settings.photons);
    let chunks = (indices.end - indices.start).div_ceil(CHUNK);
    let batches: Vec<Batch> = (0..chunks)
        .into_par_iter()
        .map(|c| {
            let mut batch = Batch::default();
            let first = indices.start + c * CHUNK;
            for index in first..(first + CHUNK).min(indices.end) {
                tracer.trace(index, &mut batch);
            }
            batch
        })
        .collect();
    let mut maps = PhotonMaps {
        emitted: settings.photons,
        light_power: sources.total_power(),
        ..Default::default()
    };
    for batch in batches {
        maps.global.extend_from_slice(&batch.global);
        maps.caustic.extend_from_slice(&batch.caustic);
        maps.stats.rays += batch.rays;
    }
    maps.stats.emitted = settings.photons;
    maps.stats.global = maps.global.len();
    maps.stats.caustic = maps.caustic.len();
    maps.stats.seconds = start.elapsed().as_secs_f64();
    maps
}

/// One chunk's photons, in index order.
#[derive(Default)]
struct Batch {
    global: Vec<Photon>,
    caustic: Vec<Photon>,
    rays: u64,
}

/// The kinds of bounce a photon has made since it left the light.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PathSoFar {
    /// Straight from the light.
    Light,
    /// Only perfect specular bounces: the next diffuse hit is a caustic.
    Specular,
    /// At least one diffuse or glossy bounce.
    Diffuse,
}

impl PathSoFar {
    fn after_specular(self) -> Self {
        match self {
            Self::Light | Self::Specular => Self::Specular,
            Self::Diffuse => Self::Diffuse,
        }
    }
}

struct Tracer<'a> {
    scene: &'a RenderScene,
    settings: &'a PhotonSettings,
    sources: &'a PhotonSources,
    inv_photons: f32,
    /// Store caustic photons only and stop at the first diffuse hit.
    caustic_only: bool,
}

impl Tracer<'_> {
    /// Emits and follows photon `index`, storing it into `batch`.
    fn trace(&self, index: u64, batch: &mut Batch) {
        let mut rng = photon_rng(self.settings.seed, index);
        let Some(emitted) = self.sources.emit(self.scene, &mut rng) else {
            return;
        };
        let mut ray = emitted.ray;
        let mut power = emitted.power * self.inv_photons;
        let mut path = PathSoFar::Light;
        for _ in 0..self.settings.max_bounces {
            batch.rays += 1;
            let Some(hit) = self.scene.intersect(&ray) else {
                return;
            };
            let surface = self.scene.surface(&ray, &hit);
            let material = &self.scene.materials[surface.material as usize];
            let front = surface.geometric_normal.dot(ray.dir) < 0.0;
            let next = match material.bsdf {
                Bsdf::Dielectric { ior, tint } => {
                    power *= tint;
                    path = path.after_specular();
                    Some(self.refract_or_reflect(&ray, &surface, ior, &mut rng))
                }
                _ if !(front || material.two_sided) => None,
                Bsdf::Mirror { reflectance } => {
                    power *= reflectance;
                    path = path.after_specular();
                    let n = face_towards(surface.shading_normal, -ray.dir);
                    Some(self.scene.spawn(&surface, reflect(ray.dir, n)))
                }
                Bsdf::Diffuse { .. } | Bsdf::Glossy { .. } if self.caustic_only => {
                    if path == PathSoFar::Specular {
                        self.store(&ray, &surface, power, path, batch);
                    }
                    None
                }
                Bsdf::Diffuse { .. } | Bsdf::Glossy { .. } => {
                    self.store(&ray, &surface, power, path, batch);
                    path = PathSoFar::Diffuse;
                    self.scatter(&ray, &surface, material, &mut power, &mut rng)
                }
            };
            match next {
                Some(r) if power.max_element() > 0.0 => ray = r,
                _ => return,
            }
        }
    }

    /// Adds the photon to the maps its path belongs to.
    fn store(
        &self,
        ray: &Ray,
        surface: &SurfaceHit,
        power: Rgb,
        path: PathSoFar,
        batch: &mut Batch,
    ) {
        let global = !self.caustic_only
            && match self.settings.global_rule {
                GlobalRule::AfterFirstBounce => path != PathSoFar::Light,
                GlobalRule::IndirectOnly => path == PathSoFar::Diffuse,
                GlobalRule::All => true,
            };
        let caustic = path == PathSoFar::Specular;
        if !(global || caustic) {
            return;
        }
        let incoming = -ray.dir.normalize();
        let normal = face_towards(surface.geometric_normal, incoming);
        let photon = Photon::new(surface.point, power, incoming, normal);
        if global {
            batch.global.push(photon);
        }
        if caustic {
            batch.caustic.push(photon);
        }
    }

    /// Fresnel choice at a smooth dielectric: reflect with probability `F`,
    /// refract otherwise (the power is unchanged: `F / F`).
    fn refract_or_reflect(
        &self,
        ray: &Ray,
        surface: &SurfaceHit,
        ior: f32,
        rng: &mut Pcg32,
    ) -> Ray {
        let (n, eta) = surface.interface(ray.dir, ior);
        let cos_i = (-ray.dir.dot(n)).max(0.0);
        let reflectance = fresnel_dielectric(cos_i, eta);
        let refracted = (rng.next_f32() >= reflectance)
            .then(|| refract(ray.dir, n, eta))
            .flatten();
        let dir = refracted.unwrap_or_else(|| reflect(ray.dir, n));
        self.scene.spawn(surface, dir)
    }

    /// Russian roulette and a new direction at a diffuse or glossy hit;
    /// `None` when the photon is absorbed.
    fn scatter(
        &self,
        ray: &Ray,
        surface: &SurfaceHit,
        material: &Material,
        power: &mut Rgb,
        rng: &mut Pcg32,
    ) -> Option<Ray> {
        let wo = -ray.dir.normalize();
        let n = face_towards(surface.shading_normal, wo);
        let ng = face_towards(surface.geometric_normal, wo);
        let albedo = self.scene.albedo(material, surface.uv);
        let (specular, exponent) = match material.bsdf {
            Bsdf::Glossy {
                specular, exponent, ..
            } => (specular, exponent),
            _ => (Rgb::ZERO, 0.0),
        };
        let mut p_diffuse = self.survival(albedo);
        let mut p_glossy = self.survival(specular);
        let sum = p_diffuse + p_glossy;
        if sum > 1.0 {
            p_diffuse /= sum;
            p_glossy /= sum;
        }
        let u = rng.next_f32();
        let dir = if u < p_diffuse {
            *power *= albedo / p_diffuse;
            to_world(sampling::cosine_hemisphere(uniform2(rng)), n)
        } else if u < p_diffuse + p_glossy {
            let dir = phong_lobe(reflect(-wo, n), exponent, uniform2(rng));
            let cos = dir.dot(n);
            *power *= specular * ((exponent + 2.0) / (exponent + 1.0) * cos.max(0.0) / p_glossy);
            dir
        } else {
            return None;
        };
        // A shading normal may send the photon under the surface: absorbed.
        (dir.dot(ng) > 0.0 && dir.dot(n) > 0.0).then(|| self.scene.spawn(surface, dir))
    }

    fn survival(&self, reflectance: Rgb) -> f32 {
        let p = match self.settings.roulette {
            RouletteRule::MaxAlbedo => reflectance.max_element(),
            RouletteRule::MeanAlbedo => reflectance.element_sum() / 3.0,
        };
        p.clamp(0.0, 1.0)
    }
}

fn uniform2(rng: &mut Pcg32) -> Vec2 {
    Vec2::new(rng.next_f32(), rng.next_f32())
}

/// `local` (z up) in the frame whose z axis is the unit vector `axis`.
fn to_world(local: Vec3, axis: Vec3) -> Vec3 {
    let (t, b) = sampling::onb(axis);
    t * local.x + b * local.y + axis * local.z
}

/// A direction about the unit mirror direction `r` with density
/// `(n + 1) / (2π) · cos^n α`.
fn phong_lobe(r: Vec3, exponent: f32, u: Vec2) -> Vec3 {
    let cos_alpha = u.x.powf(1.0 / (exponent + 1.0));
    let sin_alpha = (1.0 - cos_alpha * cos_alpha).max(0.0).sqrt();
    let phi = 2.0 * PI * u.y;
    to_world(
        Vec3::new(sin_alpha * phi.cos(), sin_alpha * phi.sin(), cos_alpha),
        r,
    )
}
