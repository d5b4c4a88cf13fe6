//! What `caustic bench photons` measures on: the photon maps of a scene
//! (positions only, traced as the renderer traces them) and the queries
//! a renderer would make, one per pixel at its first diffuse surface.

use super::PhotonBenchArgs;
use anyhow::{Result, bail};
use caustic_geom::{Ray, Vec3};
use caustic_render::bsdf::{reflect, refract};
use caustic_render::direct::face_towards;
use caustic_render::photon::{PhotonSettings, trace_photons};
use caustic_render::{PinholeCamera, RenderScene};
use caustic_scene::{Bsdf, Camera};
use rayon::prelude::*;
use std::time::Instant;

/// The photon positions of one map.
pub(super) struct MapPoints {
    pub(super) name: String,
    pub(super) positions: Vec<Vec3>,
}

/// Traces enough photons for each map's largest requested size (within
/// `--max-emitted`; caustic maps fill slowly): a probe of 10^5 photons
/// gives each map's stored fraction.
pub(super) fn trace_maps(scene: &RenderScene, args: &PhotonBenchArgs) -> Result<Vec<MapPoints>> {
    let largest = args
        .sizes
        .iter()
        .copied()
        .max()
        .unwrap_or(0)
        .max(args.at_size);
    let trace = |photons: usize| {
        trace_photons(
            scene,
            &PhotonSettings {
                photons: photons as u64,
                seed: args.seed,
                ..PhotonSettings::default()
            },
        )
    };
    const PROBE: usize = 100_000;
    let probe = trace(PROBE);
    let mut out = Vec::new();
    for name in &args.maps {
        let pick = |maps: &caustic_render::photon::PhotonMaps| -> Vec<Vec3> {
            let photons = if name == "global" {
                &maps.global
            } else {
                &maps.caustic
            };
            photons.iter().map(|p| p.position()).collect()
        };
        let stored = pick(&probe).len();
        if stored == 0 {
            eprintln!("note: the {name} map stays empty ({PROBE} photons emitted): skipped");
            continue;
        }
        let needed = (largest as f64 * PROBE as f64 / stored as f64 * 1.02).ceil() as usize;
        let emitted = needed.clamp(PROBE, args.max_emitted.max(PROBE));
        let start = Instant::now();
        let positions = pick(&trace(emitted));
        eprintln!(
            "bench photons: {name} map: {} photons stored of {emitted} emitted ({:.0} ms)",
            positions.len(),
            start.elapsed().as_secs_f64() * 1e3
        );
        if positions.len() < largest {
            eprintln!(
                "note: the {name} map reaches {} photons within --max-emitted {}; larger sizes are cut to that",
                positions.len(),
                args.max_emitted
            );
        }
        out.push(MapPoints {
            name: name.clone(),
            positions,
        });
    }
    if out.is_empty() {
        bail!("no photon was stored in the requested maps");
    }
    Ok(out)
}

/// The first diffuse or glossy point along each pixel-centre ray, following
/// mirrors and refracting through glass (total internal reflection
/// reflects) for up to 8 bounces; pixels that see nothing diffuse give
/// none.
pub(super) fn visible_points(
    scene: &RenderScene,
    camera: &Camera,
    width: u32,
    height: u32,
) -> Vec<Vec3> {
    let pinhole = PinholeCamera::new(camera, width, height);
    (0..height)
        .into_par_iter()
        .flat_map_iter(|y| {
            let pinhole = &pinhole;
            (0..width).filter_map(move |x| {
                let ray = pinhole.ray(x as f32 + 0.5, y as f32 + 0.5);
                first_diffuse(scene, ray)
            })
        })
        .collect()
}

fn first_diffuse(scene: &RenderScene, mut ray: Ray) -> Option<Vec3> {
    for _ in 0..8 {
        let hit = scene.intersect(&ray)?;
        let surface = scene.surface(&ray, &hit);
        let material = &scene.materials[surface.material as usize];
        let dir = match material.bsdf {
            Bsdf::Diffuse { .. } | Bsdf::Glossy { .. } => return Some(surface.point),
            Bsdf::Mirror { .. } => reflect(ray.dir, face_towards(surface.shading_normal, -ray.dir)),
            Bsdf::Dielectric { ior, .. } => {
                let (n, eta) = surface.interface(ray.dir, ior);
                refract(ray.dir, n, eta).unwrap_or_else(|| reflect(ray.dir, n))
            }
        };
        ray = scene.spawn(&surface, dir);
    }
    None
}
