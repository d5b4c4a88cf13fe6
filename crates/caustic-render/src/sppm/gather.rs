//! The photon pass of SPPM: photons traced from the lights, each one
//! deposited at every visible point whose gather sphere contains it.
//!
//! Photons come from `photon::trace_photons` with
//! [`GlobalRule::AfterFirstBounce`]: every diffuse hit except the first
//! one straight from a light (`L D`), which the eye pass has already
//! counted by shadow rays. Caustic (`L S+ D`) and indirect photons are all
//! in that one list.
//!
//! A photon at `x` with power `Φ` (already divided by the photons emitted)
//! arriving from `wi` adds `β f(wo, wi) Φ` to visible point `i` when
//! `|x − x_i| < R_i`, the photon arrived on the point's side of the
//! surface (`wi · n_i > 0`, as a BSDF without transmission requires), and
//! its surface is not turned away from the point's by more than 120°
//! (the other side of a thin wall is; a perpendicular wall at a concave
//! corner is kept, which offsets the corner's missing disc area).
//!
//! Deterministic: photons are gathered in fixed chunks of consecutive
//! indices, each chunk lists its deposits in photon order, and the lists
//! are added to the points in chunk order, on one thread. So every point
//! receives its deposits in photon order whatever the thread count.

use super::grid::VisiblePointGrid;
use super::visible::VisiblePoint;
use crate::RenderScene;
use crate::direct::brdf;
use crate::photon::{GlobalRule, Photon, PhotonSettings, trace_photons};
use caustic_geom::Rgb;
use rayon::prelude::*;

/// Photons per gather task: the unit of work and of merge order.
const CHUNK: usize = 4096;

/// Smallest cosine between a photon's surface normal and a visible
/// point's: photons on surfaces turned further away belong to the other
/// side of a thin wall.
const MIN_NORMAL_COS: f32 = -0.5;

/// What one photon pass gave each visible point.
#[derive(Clone, Debug, Default)]
pub struct PhotonPass {
    /// `Σ β f Φ` per visible point (index as in the eye pass).
    pub flux: Vec<Rgb>,
    /// Photons found per visible point (the `M` of the update).
    pub found: Vec<u32>,
    pub emitted: u64,
    pub stored: u64,
    pub deposits: u64,
    pub rays: u64,
    pub trace_seconds: f64,
}

/// Photon settings of pass `pass`: its own seed, `L D` left out.
pub fn photon_settings(photons: u64, max_depth: u32, seed: u64, pass: u32) -> PhotonSettings {
    PhotonSettings {
        photons,
        max_bounces: max_depth.max(1),
        global_rule: GlobalRule::AfterFirstBounce,
        seed: crate::draw::mix(seed, pass as u64),
        ..PhotonSettings::default()
    }
}

/// Traces the pass's photons and deposits them at the visible points.
/// `radii` holds each point's pixel radius.
pub fn photon_pass(
    scene: &RenderScene,
    settings: &PhotonSettings,
    points: &[VisiblePoint],
    radii: &[f32],
    grid: &VisiblePointGrid,
) -> PhotonPass {
    let maps = trace_photons(scene, settings);
    let mut pass = gather(scene, &maps.global, points, radii, grid);
    pass.emitted = maps.emitted;
    pass.stored = maps.global.len() as u64;
    pass.rays = maps.stats.rays;
    pass.trace_seconds = maps.stats.seconds;
    pass
}

/// Deposits `photons` at the visible points (see the module header).
pub fn gather(
    scene: &RenderScene,
    photons: &[Photon],
    points: &[VisiblePoint],
    radii: &[f32],
    grid: &VisiblePointGrid,
) -> PhotonPass {
    let chunks: Vec<Vec<(u32, Rgb)>> = photons
        .par_chunks(CHUNK)
        .map(|chunk| {
            let mut deposits = Vec::new();
            for photon in chunk {
                deposit(scene, photon, points, radii, grid, &mut deposits);
            }
            deposits
        })
        .collect();
    let mut pass = PhotonPass {
        flux: vec![Rgb::ZERO; points.len()],
        found: vec![0; points.len()],
        ..PhotonPass::default()
    };
    for (index, flux) in chunks.into_iter().flatten() {
        pass.flux[index as usize] += flux;
        pass.found[index as usize] += 1;
        pass.deposits += 1;
    }
    pass
}

/// Appends `(point, β f Φ)` for every visible point that `photon` reaches.
fn deposit(
    scene: &RenderScene,
    photon: &Photon,
    points: &[VisiblePoint],
    radii: &[f32],
    grid: &VisiblePointGrid,
    out: &mut Vec<(u32, Rgb)>,
) {
    let x = photon.position();
    let candidates = grid.candidates(x);
    if candidates.is_empty() {
        return;
    }
    let wi = photon.incoming();
    let photon_normal = photon.normal();
    let power = photon.power();
    for &i in candidates {
        let point = &points[i as usize];
        let r = radii[i as usize];
        if point.position.distance_squared(x) >= r * r
            || wi.dot(point.normal) <= 0.0
            || photon_normal.dot(point.normal) < MIN_NORMAL_COS
        {
            continue;
        }
        let material = &scene.materials[point.material as usize];
        let f = brdf(material, point.albedo, point.shading_normal, point.wo, wi);
        out.push((i, point.weight * f * power));
    }
}
