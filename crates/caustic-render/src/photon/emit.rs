//! Photon emission: every light of the scene as a photon source, one chosen
//! per photon in proportion to its power, then a starting point and
//! direction from the light's own emission distribution.
//!
//! A photon starts with power `Le · cos / (pdf_light · pdf_point · pdf_dir)`,
//! which for each kind of light is
//!
//! | light | point | direction | photon power |
//! |---|---|---|---|
//! | area (one-sided) | uniform by area | cosine about the emitting normal | `π·A·L / p_light` |
//! | area (two-sided) | uniform by area | either side (½), cosine | `2·π·A·L / p_light` |
//! | point | its position | uniform sphere | `4π·I / p_light` |
//! | spot | its position | uniform in the outer cone | `I·falloff(θ) · 2π(1 − cos θ_max) / p_light` |
//! | directional | uniform on a disc covering the scene | the light's direction | `E·π·R² / p_light` |
//!
//! so that, after the tracer divides by the number of emitted photons `N`,
//! the photons' expected total power is the scene's emitted power and a
//! density estimate is unbiased as `N` grows. With a single light (or
//! lights of one colour) every photon carries exactly `Φ_total / N`.
//! `p_light` is proportional to the mean of the light's RGB power; spot
//! photons are weighted by the falloff rather than rejection-sampled, so
//! their powers vary inside the smooth edge.

use crate::RenderScene;
use caustic_geom::{Aabb, Pcg32, Ray, Rgb, Vec2, Vec3, sampling};
use caustic_scene::Light;
use std::f32::consts::PI;

/// A photon leaving a light, before division by the photon count.
#[derive(Clone, Copy, Debug)]
pub struct EmittedPhoton {
    pub ray: Ray,
    pub power: Rgb,
}

/// One photon source.
#[derive(Clone, Copy, Debug)]
pub(super) enum Source {
    /// `RenderScene::area_lights[index]`.
    Area {
        index: usize,
    },
    Point {
        position: Vec3,
        intensity: Rgb,
    },
    Spot {
        position: Vec3,
        axis: Vec3,
        intensity: Rgb,
        cos_falloff_start: f32,
        cos_total_width: f32,
    },
    /// A disc of radius `radius` centred on `centre`, facing `direction`.
    Directional {
        direction: Vec3,
        irradiance: Rgb,
        centre: Vec3,
        radius: f32,
    },
}

/// The scene's lights with their powers and a sampling table over them.
#[derive(Clone, Debug)]
pub struct PhotonSources {
    pub(super) sources: Vec<Source>,
    pub(super) power: Vec<Rgb>,
    /// Running sum of selection weights, normalised to end at 1.
    pub(super) cdf: Vec<f32>,
    /// Selection probability of each source.
    pub(super) pick: Vec<f32>,
    total_power: Rgb,
}

impl PhotonSources {
    /// Collects every light of `scene` that emits any power.
    pub fn new(scene: &RenderScene) -> Self {
        let bounds = scene_bounds(scene);
        let mut sources = Vec::new();
        let mut power = Vec::new();
        let candidates = (0..scene.area_lights.len())
            .map(|index| Source::Area { index })
            .chain(scene.lights.iter().map(|l| analytic_source(l, &bounds)));
        for source in candidates {
            let p = source_power(&source, scene);
            if p.max_element() > 0.0 && p.is_finite() {
                sources.push(source);
                power.push(p);
            }
        }
        let weights: Vec<f64> = power.iter().map(|p| f64::from(p.element_sum())).collect();
        let total: f64 = weights.iter().sum();
        let mut running = 0.0;
        let cdf = weights
            .iter()
            .map(|w| {
                running += w;
                (running / total) as f32
            })
            .collect();
        let pick = weights.iter().map(|w| (w / total) as f32).collect();
        let total_power = power.iter().copied().sum();
        Self {
            sources,
            power,
            cdf,
            pick,
            total_power,
        }
    }

    /// Total emitted power of the scene (watts per channel).
    pub fn total_power(&self) -> Rgb {
        self.total_power
    }

    pub fn is_empty(&self) -> bool {
        self.sources.is_empty()
    }

    /// Emits one photon with the random numbers of `rng`; `None` when the
    /// scene has no light or the sample carries no power.
    pub fn emit(&self, scene: &RenderScene, rng: &mut Pcg32) -> Option<EmittedPhoton> {
        if self.sources.is_empty() {
            return None;
        }
        let u = rng.next_f32();
        let index = self
            .cdf
            .partition_point(|&c| c <= u)
            .min(self.sources.len() - 1);
        let scale = 1.0 / self.pick[index];
        let photon = match self.sources[index] {
            Source::Area { index: light } => emit_area(scene, light, self.power[index], rng),
            Source::Point { position, .. } => EmittedPhoton {
                ray: Ray::new(position, sampling::uniform_cone(uniform2(rng), -1.0)),
                power: self.power[index],
            },
            Source::Spot {
                position,
                axis,
                intensity,
                cos_falloff_start,
                cos_total_width,
            } => {
                let local = sampling::uniform_cone(uniform2(rng), cos_total_width);
                let falloff = Light::spot_falloff(local.z, cos_falloff_start, cos_total_width);
                EmittedPhoton {
                    ray: Ray::new(position, to_world(local, axis)),
                    power: intensity * falloff * (2.0 * PI * (1.0 - cos_total_width)),
                }
            }
            Source::Directional {
                direction,
                centre,
                radius,
                ..
            } => {
                let disc = uniform_disc(uniform2(rng)) * radius;
                let (t, b) = sampling::onb(direction);
                let origin = centre - direction * (radius * 1.01) + t * disc.x + b * disc.y;
                EmittedPhoton {
                    ray: Ray::new(origin, direction),
                    power: self.power[index],
                }
            }
        };
        let power = photon.power * scale;
        (power.max_element() > 0.0).then_some(EmittedPhoton { power, ..photon })
    }
}

fn uniform2(rng: &mut Pcg32) -> Vec2 {
    Vec2::new(rng.next_f32(), rng.next_f32())
}

/// A point uniformly distributed on the unit disc.
fn uniform_disc(u: Vec2) -> Vec2 {
    let r = u.x.sqrt();
    let phi = 2.0 * PI * u.y;
    Vec2::new(r * phi.cos(), r * phi.sin())
}

/// `local` (z up) in the frame whose z axis is the unit vector `axis`.
fn to_world(local: Vec3, axis: Vec3) -> Vec3 {
    let (t, b) = sampling::onb(axis);
    t * local.x + b * local.y + axis * local.z
}

/// A point uniformly on the area light, a cosine-distributed direction on
/// its emitting side (either side, evenly, when two-sided).
fn emit_area(scene: &RenderScene, light: usize, power: Rgb, rng: &mut Pcg32) -> EmittedPhoton {
    let light = &scene.area_lights[light];
    let sample = light.sample(&scene.triangles, uniform2(rng));
    let mut normal = sample.normal;
    if light.two_sided && rng.next_f32() < 0.5 {
        normal = -normal;
    }
    let dir = to_world(sampling::cosine_hemisphere(uniform2(rng)), normal);
    let origin = sample.point + normal * scene.ray_epsilon();
    EmittedPhoton {
        ray: Ray::new(origin, dir),
        power,
    }
}

fn analytic_source(light: &Light, bounds: &Aabb) -> Source {
    match *light {
        Light::Point {
            position,
            intensity,
        } => Source::Point {
            position,
            intensity,
        },
        Light::Spot {
            position,
            direction,
            intensity,
            cos_falloff_start,
            cos_total_width,
        } => Source::Spot {
            position,
            axis: direction.normalize(),
            intensity,
            cos_falloff_start,
            cos_total_width,
        },
        Light::Directional {
            direction,
            irradiance,
        } => Source::Directional {
            direction: direction.normalize(),
            irradiance,
            centre: bounds.center(),
            radius: 0.5 * bounds.diagonal(),
        },
    }
}

/// Emitted power of a source in watts per channel.
fn source_power(source: &Source, scene: &RenderScene) -> Rgb {
    match *source {
        Source::Area { index } => scene.area_lights[index].power(),
        Source::Point { intensity, .. } => 4.0 * PI * intensity,
        // ∫ falloff dω: 2π (1 − cos_start) inside, plus the smoothstep ring,
        // whose mean over cos θ in [cos_width, cos_start] is ½.
        Source::Spot {
            intensity,
            cos_falloff_start,
            cos_total_width,
            ..
        } => {
            let solid = (1.0 - cos_falloff_start) + 0.5 * (cos_falloff_start - cos_total_width);
            2.0 * PI * solid * intensity
        }
        Source::Directional {
            irradiance, radius, ..
        } => PI * radius * radius * irradiance,
    }
}

/// Bounds of every triangle of the scene.
fn scene_bounds(scene: &RenderScene) -> Aabb {
    scene
        .triangles
        .iter()
        .fold(Aabb::EMPTY, |b, t| b.union(t.bounds()))
}
