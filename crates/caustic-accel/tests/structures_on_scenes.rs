//! Every registered structure on every standard scene (`shared/scenes`):
//! the same closest hit (triangle and bit-identical `t`) and the same
//! occlusion answer as brute force. Each structure is compared with
//! `bvh-binned` on 10^5 rays per scene (from a sphere around the scene
//! towards points inside it, and from points inside in random directions,
//! as secondary rays start), and `bvh-binned` with brute force on the first
//! `CAUSTIC_BRUTE_RAYS` of them (default 1000; the closing check of issue 3
//! ran 10^5). Scenes that are not unpacked are skipped, saying so.

use caustic_accel::{ACCEL_NAMES, Accel, BruteForce, build_accel};
use caustic_geom::{Aabb, Pcg32, Ray, Triangle, Vec3};
use rayon::prelude::*;

const SCENES: &[&str] = &[
    "bunny/bun_zipper.ply",
    "dragon/dragon_vrip.ply",
    "buddha-100k/buddha_100k.obj",
    "sponza-dabrovic/sponza.obj",
    "sibenik/sibenik.obj",
    "conference-69k/conference.obj",
    "cornell-box/mcguire/CornellBox-Original.obj",
    "caustics-mnrt/MNRing.obj",
];

const RAYS: usize = 100_000;

fn load(relative: &str) -> Option<Vec<Triangle>> {
    let Some(path) = caustic_scene::data_dirs::scene_file(relative) else {
        eprintln!("{relative}: not unpacked, skipped");
        return None;
    };
    Some(
        caustic_scene::Scene::load(&path)
            .expect("scene loads")
            .triangles(),
    )
}

fn rays(tris: &[Triangle], count: usize, seed: u64) -> Vec<Ray> {
    let bounds = tris.iter().fold(Aabb::EMPTY, |b, t| b.union(t.bounds()));
    let mut rng = Pcg32::new(seed, 29);
    let mut unit = move || rng.next_f32();
    let inside = |unit: &mut dyn FnMut() -> f32| {
        bounds.min + (bounds.max - bounds.min) * Vec3::new(unit(), unit(), unit())
    };
    (0..count)
        .map(|i| {
            let target = inside(&mut unit);
            if i % 2 == 0 {
                let dir = Vec3::new(unit() - 0.5, unit() - 0.5, unit() - 0.5);
                let origin = bounds.center() + dir.normalize_or(Vec3::X) * bounds.diagonal();
                Ray::new(origin, target - origin)
            } else {
                let origin = inside(&mut unit);
                Ray::segment(origin, target - origin, 1e-4, f32::INFINITY)
            }
        })
        .collect()
}

/// Rays on which `accel` and `reference` disagree (closest hit or
/// occlusion), the first few described.
fn disagreements(accel: &dyn Accel, reference: &dyn Accel, rays: &[Ray]) -> Vec<String> {
    rays.par_iter()
        .filter_map(|ray| {
            let (got, want) = (accel.intersect(ray), reference.intersect(ray));
            let occluded = accel.occluded(ray);
            (got != want || occluded != want.is_some()).then(|| {
                format!(
                    "{ray:?}: {} gave {got:?} (occluded {occluded}), reference {want:?}",
                    accel.name()
                )
            })
        })
        .take_any(5)
        .collect()
}

fn brute_rays() -> usize {
    std::env::var("CAUSTIC_BRUTE_RAYS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000)
        .min(RAYS)
}

#[test]
fn every_structure_matches_brute_force_on_every_scene() {
    for &scene in SCENES {
        let Some(tris) = load(scene) else { continue };
        let rays = rays(&tris, RAYS, 7);
        let reference = build_accel("bvh-binned", &tris).unwrap();
        let brute = BruteForce::new(&tris);
        let checked = &rays[..brute_rays()];
        let bad = disagreements(reference.as_ref(), &brute, checked);
        assert!(bad.is_empty(), "{scene}:\n{}", bad.join("\n"));
        for &name in ACCEL_NAMES.iter().filter(|n| **n != "brute") {
            let accel = build_accel(name, &tris).unwrap();
            let bad = disagreements(accel.as_ref(), reference.as_ref(), &rays);
            assert!(bad.is_empty(), "{scene}:\n{}", bad.join("\n"));
        }
        eprintln!(
            "{scene}: {} structures equal bvh-binned on {RAYS} rays, bvh-binned equals brute force on {}",
            ACCEL_NAMES.len() - 1,
            checked.len()
        );
    }
}
