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
use crate::direct::{PathVertex, brdf, face_towards};
use crate::draw;
use crate::waves::{GROUP_RAYS, trace_walks};
use crate::{RenderScene, SurfaceHit};
use caustic_accel::points::Neighbour;
use caustic_geom::{Hit, Ray, Rgb, Vec2, Vec3, sampling};
use caustic_scene::Bsdf;
use rayon::prelude::*;
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

/// A gather ray in flight: its specular chain so far.
struct GatherRay {
    /// The ray it traces next; `None` once it has ended.
    ray: Option<Ray>,
    key: u64,
    throughput: Rgb,
    /// Specular bounces so far.
    depth: u32,
    /// Distance to its first hit.
    first: Option<f32>,
    /// What it brings back once it has ended.
    radiance: Rgb,
}

/// The sums of a gather, ray after ray.
#[derive(Default)]
struct Sums {
    radiance: Rgb,
    inverse_distances: f64,
    hits: u32,
}

impl Sums {
    fn add(&mut self, radiance: Rgb, distance: Option<f32>) {
        self.radiance += radiance;
        if let Some(d) = distance.filter(|&d| d > 0.0) {
            self.inverse_distances += 1.0 / f64::from(d);
            self.hits += 1;
        }
    }

    fn gathered(&self, count: u32) -> Gathered {
        let harmonic_distance = if self.hits > 0 {
            (f64::from(self.hits) / self.inverse_distances) as f32
        } else {
            f32::INFINITY
        };
        Gathered {
            irradiance: self.radiance * (PI / count as f32),
            harmonic_distance,
        }
    }
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
        let mut sums = Sums::default();
        for mut walk in self.rays_of(surface, wo, key) {
            while let Some(ray) = walk.ray {
                *rays += 1;
                let hit = self.scene.intersect(&ray);
                self.step(&mut walk, hit, scratch);
            }
            sums.add(walk.radiance, walk.first);
        }
        sums.gathered(self.rays.max(1))
    }

    /// [`Gatherer::gather`] at each of `points` (the key of each being
    /// its gather's), their rays traced by waves ([`crate::waves`]) in
    /// groups of at most [`GROUP_RAYS`] rays: the same results bit for bit.
    pub fn gather_batch(&self, points: &[PathVertex], rays: &mut u64) -> Vec<Gathered> {
        self.gather_groups(points, rays, GROUP_RAYS)
    }

    /// [`Gatherer::gather_batch`] in groups of at most `group_rays` rays
    /// (at least one gather).
    fn gather_groups(
        &self,
        points: &[PathVertex],
        rays: &mut u64,
        group_rays: usize,
    ) -> Vec<Gathered> {
        let per_group = (group_rays / self.rays.max(1) as usize).max(1);
        let mut out = Vec::with_capacity(points.len());
        for group in points.chunks(per_group) {
            let walks: Vec<Vec<GatherRay>> = group
                .par_iter()
                .map(|p| self.rays_of(&p.surface, p.wo, p.key).collect())
                .collect();
            let counts: Vec<usize> = walks.iter().map(Vec::len).collect();
            let mut walks: Vec<GatherRay> = walks.into_iter().flatten().collect();
            *rays += trace_walks(
                self.scene,
                &mut walks,
                |w| w.ray,
                Vec::new,
                |scratch, w, hit| self.step(w, hit, scratch),
            );
            let mut rest = walks.as_slice();
            for count in counts {
                let (mine, tail) = rest.split_at(count);
                let mut sums = Sums::default();
                for walk in mine {
                    sums.add(walk.radiance, walk.first);
                }
                out.push(sums.gathered(self.rays.max(1)));
                rest = tail;
            }
        }
        out
    }

    /// The gather rays at `surface` seen from `wo`, in order: cosine
    /// directions stratified on the largest square grid of the count, the
    /// rest uniform, those under the geometric surface left out.
    fn rays_of(&self, surface: &SurfaceHit, wo: Vec3, key: u64) -> impl Iterator<Item = GatherRay> {
        let n = face_towards(surface.shading_normal, wo);
        let ng = face_towards(surface.geometric_normal, wo);
        let origin = surface.point + ng * self.scene.ray_epsilon();
        let count = self.rays.max(1);
        let grid = (count as f32).sqrt() as u32;
        (0..count).filter_map(move |i| {
            let ray_key = draw::mix(key, u64::from(i));
            let u = draw::uniform2(ray_key, DIRECTION);
            let u = if i < grid * grid {
                (Vec2::new((i % grid) as f32, (i / grid) as f32) + u) / grid as f32
            } else {
                u
            };
            let dir = to_world(sampling::cosine_hemisphere(u), n);
            (dir.dot(ng) > 0.0).then(|| GatherRay {
                ray: Some(Ray::new(origin, dir)),
                key: ray_key,
                throughput: Rgb::ONE,
                depth: 0,
                first: None,
                radiance: Rgb::ZERO,
            })
        })
    }

    /// Takes the gather ray on from `hit`, the hit of its ray: radiance
    /// arriving by way of the global map at its first diffuse hit, through
    /// mirrors and glass; the background on a miss; nothing from the back
    /// of a one-sided surface or past the largest depth.
    fn step(&self, w: &mut GatherRay, hit: Option<Hit>, scratch: &mut Vec<Neighbour>) {
        let Some(ray) = w.ray.take() else {
            return;
        };
        let Some(hit) = hit else {
            w.radiance = w.throughput * self.scene.background;
            return;
        };
        w.first = w.first.or(Some(hit.t * ray.dir.length()));
        let surface = self.scene.surface(&ray, &hit);
        let material = &self.scene.materials[surface.material as usize];
        let front = surface.geometric_normal.dot(ray.dir) < 0.0;
        let last = w.depth == self.max_depth;
        let dir = match material.bsdf {
            Bsdf::Dielectric { ior, tint } if !last => {
                w.throughput *= tint;
                let u = draw::uniform(draw::mix(w.key, u64::from(w.depth)), FRESNEL);
                dielectric_choice(&ray, &surface, ior, u)
            }
            _ if !(front || material.two_sided) => return,
            Bsdf::Mirror { reflectance } if !last => {
                w.throughput *= reflectance;
                reflect(ray.dir, face_towards(surface.shading_normal, -ray.dir))
            }
            Bsdf::Diffuse { .. } | Bsdf::Glossy { .. } => {
                let wo = -ray.dir.normalize();
                let n = face_towards(surface.shading_normal, wo);
                let ng = face_towards(surface.geometric_normal, wo);
                let albedo = self.scene.albedo(material, surface.uv);
                let l = match self.precomputed {
                    Some(map) => albedo * FRAC_1_PI * map.irradiance(surface.point, ng, scratch),
                    None => {
                        let f = |wi: Vec3| brdf(material, albedo, n, wo, wi);
                        let (map, settings) = (self.global, &self.estimate);
                        estimate::radiance(map, settings, surface.point, ng, scratch, f)
                    }
                };
                w.radiance = w.throughput * l;
                return;
            }
            _ => return,
        };
        w.depth += 1;
        w.ray = Some(self.scene.spawn(&surface, dir));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PinholeCamera;
    use crate::photon::{PhotonSettings, trace_photons};
    use caustic_scene::Scene;

    /// Gathers by waves, in groups of one gather, two, or all, are the
    /// per-ray gathers bit for bit, rays counted alike.
    #[test]
    fn batched_gathers_are_the_per_ray_gathers() {
        let scene = Scene::builtin("cornell-caustics").expect("a built-in scene");
        let rs = RenderScene::new(&scene, "bvh-wide").expect("the scene flattens");
        let settings = PhotonSettings {
            photons: 4000,
            global_rule: crate::photon::GlobalRule::All,
            ..PhotonSettings::default()
        };
        let global = PhotonMap::build(trace_photons(&rs, &settings).global, "kdtree", 0.3)
            .expect("a known structure");
        let gatherer = Gatherer {
            scene: &rs,
            global: &global,
            estimate: EstimateSettings {
                k: 16,
                max_radius: 0.3,
                cone_filter: false,
            },
            precomputed: None,
            rays: 16,
            max_depth: 6,
        };
        let camera = PinholeCamera::new(&scene.camera_or_default(), 12, 12);
        let points: Vec<PathVertex> = (0..144u32)
            .filter_map(|p| {
                let ray = camera.ray((p % 12) as f32 + 0.5, (p / 12) as f32 + 0.5);
                let hit = rs.intersect(&ray)?;
                let wo = -ray.dir.normalize();
                let surface = rs.surface(&ray, &hit);
                Some(PathVertex {
                    surface,
                    wo,
                    key: u64::from(p),
                })
            })
            .collect();
        let mut want_rays = 0;
        let mut scratch = Vec::new();
        let want: Vec<Gathered> = points
            .iter()
            .map(|v| gatherer.gather(&v.surface, v.wo, v.key, &mut scratch, &mut want_rays))
            .collect();
        assert!(want.iter().any(|g| g.irradiance.max_element() > 0.0));
        for group_rays in [1, 40, GROUP_RAYS] {
            let mut rays = 0;
            let got = gatherer.gather_groups(&points, &mut rays, group_rays);
            assert_eq!(rays, want_rays, "groups of {group_rays} rays: rays traced");
            let bits = |g: &Gathered| {
                (
                    g.irradiance.to_array().map(f32::to_bits),
                    g.harmonic_distance.to_bits(),
                )
            };
            let differing = got
                .iter()
                .zip(&want)
                .filter(|(a, b)| bits(a) != bits(b))
                .count();
            assert_eq!(got.len(), want.len());
            assert_eq!(differing, 0, "groups of {group_rays} rays: gathers differ");
        }
    }
}
