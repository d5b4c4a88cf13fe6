//! Standard scenes and rays for the accel tests that run on `shared/scenes`.
#![allow(dead_code)] // each test file takes a part

use caustic_accel::Accel;
use caustic_geom::{Aabb, Pcg32, Ray, Triangle, Vec3};
use rayon::prelude::*;

/// The triangles of a standard scene, or `None` when it is not unpacked
/// (the test skips, saying so; under CI it fails: see `data_dirs`).
pub fn load(relative: &str) -> Option<Vec<Triangle>> {
    let path = caustic_scene::data_dirs::scene_file(relative)?;
    Some(
        caustic_scene::Scene::load(&path)
            .expect("scene loads")
            .triangles(),
    )
}

/// Rays from a sphere around the scene towards points inside it, and from
/// points inside it in random directions (as secondary rays start), on the
/// generator stream `stream`.
pub fn rays(tris: &[Triangle], count: usize, seed: u64, stream: u64) -> Vec<Ray> {
    let bounds = tris.iter().fold(Aabb::EMPTY, |b, t| b.union(t.bounds()));
    let mut rng = Pcg32::new(seed, stream);
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
pub fn disagreements(accel: &dyn Accel, reference: &dyn Accel, rays: &[Ray]) -> Vec<String> {
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
