//! The radiance estimate (Jensen 2001, eq. 7.6; Zeidan 2011, §6.1.2.1):
//! reflected radiance at a surface point from the photons nearest to it,
//!
//! `L_r(x, ω) ≈ Σ_p f_r(x, ω_p, ω) ΔΦ_p / (π r²)`,
//!
//! over the `k` nearest photons within a maximum radius, with `r` the
//! distance of the `k`-th.
//!
//! Two details keep the estimate honest:
//! - **the `k`-th photon lies on the disc's edge**: for photons spread
//!   uniformly with density `λ`, the disc to the `k`-th photon has area
//!   `A ~ Gamma(k, λ)` and `E[(k−1)/A] = λ`, while `E[k/A] = λ·k/(k−1)`.
//!   So the sum runs over the `k − 1` photons strictly inside and the
//!   `k`-th only fixes the radius (2 % less bias at `k = 50`). When fewer
//!   than `k` photons lie within the maximum radius, the disc is that fixed
//!   radius and every photon in it counts;
//! - **photons from the other side** of a thin wall (or from a surface that
//!   faces away) are skipped: a photon counts only where its stored normal
//!   agrees with the surface's.
//!
//! The optional **cone filter** (Jensen 2001, §7.2.2) weights a photon at
//! distance `d` by `1 − d/(κ r)` and normalises by `1 − 2/(3κ)`: sharper
//! caustic edges for a little more noise.

use super::map::PhotonMap;
use super::record::Photon;
use caustic_accel::points::Neighbour;
use caustic_geom::{Rgb, Vec3};
use std::f32::consts::PI;

/// The cone filter's constant `κ` (Jensen's suggestion: about 1).
pub const CONE_KAPPA: f32 = 1.1;

/// How a radiance estimate gathers its photons.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EstimateSettings {
    /// Photons per estimate (the `k` of the kNN query), at least 2.
    pub k: usize,
    /// Largest search radius (world units).
    pub max_radius: f32,
    /// Weight photons by the cone filter.
    pub cone_filter: bool,
}

/// The photons around `point` on the side of the unit normal `normal`,
/// each weighted by `weight(photon)`, summed as a flux density:
/// `Σ w_p weight(p) / (π r²)`; zero when no photon is near. `scratch` is
/// reused between calls to avoid an allocation per query.
pub fn density(
    map: &PhotonMap,
    settings: &EstimateSettings,
    point: Vec3,
    normal: Vec3,
    scratch: &mut Vec<Neighbour>,
    weight: impl Fn(&Photon) -> Rgb,
) -> Rgb {
    let k = settings.k.max(2);
    if map.is_empty() {
        return Rgb::ZERO;
    }
    map.knn(point, k, settings.max_radius, scratch);
    let (inside, r2) = if scratch.len() == k {
        (&scratch[..k - 1], scratch[k - 1].dist2)
    } else {
        (&scratch[..], settings.max_radius * settings.max_radius)
    };
    if r2 <= 0.0 || !r2.is_finite() {
        return Rgb::ZERO;
    }
    let cone = settings.cone_filter.then(|| CONE_KAPPA * r2.sqrt());
    let mut sum = Rgb::ZERO;
    for n in inside {
        let photon = &map.photons[n.index as usize];
        if photon.normal().dot(normal) <= 0.0 {
            continue;
        }
        let w = cone.map_or(1.0, |kr| (1.0 - n.dist2.sqrt() / kr).max(0.0));
        sum += weight(photon) * w;
    }
    let norm = if cone.is_some() {
        1.0 - 2.0 / (3.0 * CONE_KAPPA)
    } else {
        1.0
    };
    sum / (norm * PI * r2)
}

/// Irradiance at `point` (on the side of the unit `normal`): the photons'
/// flux per unit area, whatever their direction.
pub fn irradiance(
    map: &PhotonMap,
    settings: &EstimateSettings,
    point: Vec3,
    normal: Vec3,
    scratch: &mut Vec<Neighbour>,
) -> Rgb {
    density(map, settings, point, normal, scratch, Photon::power)
}

/// Radiance reflected towards the viewer at `point`: each photon's power
/// times the BRDF for its incoming direction, `brdf(ω_p)`.
pub fn radiance(
    map: &PhotonMap,
    settings: &EstimateSettings,
    point: Vec3,
    normal: Vec3,
    scratch: &mut Vec<Neighbour>,
    brdf: impl Fn(Vec3) -> Rgb,
) -> Rgb {
    density(map, settings, point, normal, scratch, |p| {
        brdf(p.incoming()) * p.power()
    })
}
