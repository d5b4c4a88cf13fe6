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
//!
//! By waves ([`PhotonSettings::trace`], [`crate::waves`]): a group of
//! photons (at most [`GROUP_RAYS`]) is emitted, then each bounce of all
//! the group's photons in flight goes to one batched query; every photon
//! keeps its own stream and bounces by the per-photon tracer's own
//! `Tracer::bounce`, and keeps what it stores until the group ends, when
//! the photons' records are appended in index order: the same maps, bit
//! for bit, and the same ray count.

use super::emit::PhotonSources;
use super::record::Photon;
use crate::bsdf::{fresnel_dielectric, reflect, refract};
use crate::direct::face_towards;
use crate::waves::{GROUP_RAYS, TraceMode, trace_walks};
use crate::{RenderScene, SurfaceHit};
use caustic_geom::{Hit, Pcg32, Ray, Rgb, Vec2, Vec3, sampling};
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
    /// On the CPU, one photon at a time or by waves; the maps are the same
    /// bit for bit either way.
    pub trace: TraceMode,
}

impl Default for PhotonSettings {
    fn default() -> Self {
        Self {
            photons: 200_000,
            max_bounces: 32,
            global_rule: GlobalRule::default(),
            roulette: RouletteRule::default(),
            seed: 0,
            trace: TraceMode::Auto,
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
    let batches = if settings.trace.traces_waves(scene) {
        tracer.trace_waves(indices, GROUP_RAYS as u64)
    } else {
        tracer.trace_chunks(indices)
    };
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

impl Batch {
    fn push(&mut self, stored: Stored) {
        if stored.global {
            self.global.push(stored.photon);
        }
        if stored.caustic {
            self.caustic.push(stored.photon);
        }
    }
}

/// A photon stored at a diffuse hit, and the maps it goes to.
#[derive(Clone, Copy)]
struct Stored {
    photon: Photon,
    global: bool,
    caustic: bool,
}

/// A photon in flight.
struct Flight {
    rng: Pcg32,
    /// The ray it travels along next; `None` once it has ended.
    ray: Option<Ray>,
    power: Rgb,
    path: PathSoFar,
    /// Surface interactions it may still have.
    bounces: u32,
}

/// A photon in flight in a wave, with what it has stored so far.
struct InWave {
    flight: Flight,
    stored: Vec<Stored>,
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
    /// Photons `indices` one at a time, in chunks of [`CHUNK`] in
    /// parallel: the chunks' records in index order.
    fn trace_chunks(&self, indices: Range<u64>) -> Vec<Batch> {
        let chunks = (indices.end - indices.start).div_ceil(CHUNK);
        (0..chunks)
            .into_par_iter()
            .map(|c| {
                let mut batch = Batch::default();
                let first = indices.start + c * CHUNK;
                for index in first..(first + CHUNK).min(indices.end) {
                    self.trace(index, &mut batch);
                }
                batch
            })
            .collect()
    }

    /// Photons `indices` by waves, in groups of `group` photons (at least
    /// one): the groups' records in index order.
    fn trace_waves(&self, indices: Range<u64>, group: u64) -> Vec<Batch> {
        let mut batches = Vec::new();
        let mut first = indices.start;
        while first < indices.end {
            let last = (first + group.max(1)).min(indices.end);
            let mut photons: Vec<InWave> = (first..last)
                .into_par_iter()
                .filter_map(|index| self.launch(index))
                .map(|flight| InWave {
                    flight,
                    stored: Vec::new(),
                })
                .collect();
            let rays = trace_walks(
                self.scene,
                &mut photons,
                |p| p.flight.ray,
                || (),
                |_, p, hit| self.bounce(&mut p.flight, hit, &mut |s| p.stored.push(s)),
            );
            let mut batch = Batch {
                rays,
                ..Batch::default()
            };
            for stored in photons.into_iter().flat_map(|p| p.stored) {
                batch.push(stored);
            }
            batches.push(batch);
            first = last;
        }
        batches
    }

    /// Emits and follows photon `index`, storing it into `batch`.
    fn trace(&self, index: u64, batch: &mut Batch) {
        let Some(mut flight) = self.launch(index) else {
            return;
        };
        while let Some(ray) = flight.ray {
            batch.rays += 1;
            let hit = self.scene.intersect(&ray);
            self.bounce(&mut flight, hit, &mut |stored| batch.push(stored));
        }
    }

    /// Photon `index` leaving its light; `None` when it carries no power.
    fn launch(&self, index: u64) -> Option<Flight> {
        let mut rng = photon_rng(self.settings.seed, index);
        let emitted = self.sources.emit(self.scene, &mut rng)?;
        let bounces = self.settings.max_bounces;
        Some(Flight {
            rng,
            ray: (bounces > 0).then_some(emitted.ray),
            power: emitted.power * self.inv_photons,
            path: PathSoFar::Light,
            bounces,
        })
    }

    /// Takes the photon on from `hit`, the hit of its ray: stores it where
    /// the path belongs in a map (`store`), then gives it its next ray or
    /// ends it (a miss, absorption, no power left, no bounce left).
    fn bounce(&self, f: &mut Flight, hit: Option<Hit>, store: &mut impl FnMut(Stored)) {
        let (Some(ray), Some(hit)) = (f.ray.take(), hit) else {
            return;
        };
        let surface = self.scene.surface(&ray, &hit);
        let material = &self.scene.materials[surface.material as usize];
        let front = surface.geometric_normal.dot(ray.dir) < 0.0;
        let next = match material.bsdf {
            Bsdf::Dielectric { ior, tint } => {
                f.power *= tint;
                f.path = f.path.after_specular();
                Some(self.refract_or_reflect(&ray, &surface, ior, &mut f.rng))
            }
            _ if !(front || material.two_sided) => None,
            Bsdf::Mirror { reflectance } => {
                f.power *= reflectance;
                f.path = f.path.after_specular();
                let n = face_towards(surface.shading_normal, -ray.dir);
                Some(self.scene.spawn(&surface, reflect(ray.dir, n)))
            }
            Bsdf::Diffuse { .. } | Bsdf::Glossy { .. } if self.caustic_only => {
                if f.path == PathSoFar::Specular {
                    store_into(self.stored(&ray, &surface, f.power, f.path), store);
                }
                None
            }
            Bsdf::Diffuse { .. } | Bsdf::Glossy { .. } => {
                store_into(self.stored(&ray, &surface, f.power, f.path), store);
                f.path = PathSoFar::Diffuse;
                self.scatter(&ray, &surface, material, &mut f.power, &mut f.rng)
            }
        };
        f.bounces -= 1;
        f.ray = next.filter(|_| f.power.max_element() > 0.0 && f.bounces > 0);
    }

    /// The photon record of a diffuse hit and the maps its path belongs
    /// to; `None` when it belongs to neither.
    fn stored(
        &self,
        ray: &Ray,
        surface: &SurfaceHit,
        power: Rgb,
        path: PathSoFar,
    ) -> Option<Stored> {
        let global = !self.caustic_only
            && match self.settings.global_rule {
                GlobalRule::AfterFirstBounce => path != PathSoFar::Light,
                GlobalRule::IndirectOnly => path == PathSoFar::Diffuse,
                GlobalRule::All => true,
            };
        let caustic = path == PathSoFar::Specular;
        if !(global || caustic) {
            return None;
        }
        let incoming = -ray.dir.normalize();
        let normal = face_towards(surface.geometric_normal, incoming);
        let photon = Photon::new(surface.point, power, incoming, normal);
        Some(Stored {
            photon,
            global,
            caustic,
        })
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

fn store_into(stored: Option<Stored>, store: &mut impl FnMut(Stored)) {
    if let Some(stored) = stored {
        store(stored);
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

#[cfg(test)]
mod tests {
    use super::*;
    use caustic_scene::Scene;

    fn concat(batches: Vec<Batch>) -> (Vec<Photon>, Vec<Photon>, u64) {
        let mut all = (Vec::new(), Vec::new(), 0);
        for b in batches {
            all.0.extend(b.global);
            all.1.extend(b.caustic);
            all.2 += b.rays;
        }
        all
    }

    /// Groups of any size (one photon, a few hundred, more than a chunk)
    /// give the per-photon chunks' records and rays.
    #[test]
    fn wave_groups_of_any_size_give_the_per_photon_records() {
        let scene = Scene::builtin("cornell-caustics").expect("a built-in scene");
        let rs = RenderScene::new(&scene, "bvh-wide").expect("the scene flattens");
        let settings = PhotonSettings {
            photons: 5000,
            ..PhotonSettings::default()
        };
        let sources = PhotonSources::new(&rs);
        for caustic_only in [false, true] {
            let tracer = Tracer {
                scene: &rs,
                settings: &settings,
                sources: &sources,
                inv_photons: 1.0 / 5000.0,
                caustic_only,
            };
            let want = concat(tracer.trace_chunks(300..5000));
            assert!(!want.1.is_empty(), "no caustic photons");
            for group in [1, 333, 4700] {
                let got = concat(tracer.trace_waves(300..5000, group));
                let bytes = |p: &[Photon]| bytemuck::cast_slice::<Photon, u8>(p).to_vec();
                assert!(bytes(&got.0) == bytes(&want.0), "groups of {group}: global");
                assert!(
                    bytes(&got.1) == bytes(&want.1),
                    "groups of {group}: caustic"
                );
                assert_eq!(got.2, want.2, "groups of {group}: rays");
            }
        }
    }
}
