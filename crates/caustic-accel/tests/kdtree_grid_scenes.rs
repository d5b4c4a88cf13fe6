//! `kdtree` and `grid` on real scenes: the same closest hits and occlusion
//! answers as `bvh-binned` (itself checked against brute force on the
//! bunny) for rays from around and inside the scene, and as brute force on
//! a subset. Scenes that are not unpacked are skipped, saying so.

use caustic_accel::{Accel, BruteForce, build_accel};
use caustic_geom::{Aabb, Pcg32, Ray, Triangle, Vec3};
use rayon::prelude::*;

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

/// Rays from a sphere around the scene towards points inside it, and from
/// points inside it in random directions (as secondary rays start).
fn rays(tris: &[Triangle], count: usize, seed: u64) -> Vec<Ray> {
    let bounds = tris.iter().fold(Aabb::EMPTY, |b, t| b.union(t.bounds()));
    let mut rng = Pcg32::new(seed, 17);
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

fn agree(accel: &dyn Accel, reference: &dyn Accel, rays: &[Ray]) {
    let bad: Vec<String> = rays
        .par_iter()
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
        .collect();
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

fn check(relative: &str) {
    let Some(tris) = load(relative) else { return };
    let rays = rays(&tris, 50_000, 3);
    let bvh = build_accel("bvh-binned", &tris).unwrap();
    let brute = BruteForce::new(&tris);
    for name in ["kdtree", "grid"] {
        let accel = build_accel(name, &tris).unwrap();
        assert_eq!(accel.stats().prims, tris.len());
        agree(accel.as_ref(), bvh.as_ref(), &rays);
        agree(accel.as_ref(), &brute, &rays[..1000]);
        eprintln!("{relative}: {name} {:?}", accel.stats());
    }
}

#[test]
fn bunny() {
    check("bunny/bun_zipper.ply");
}

#[test]
fn sibenik() {
    check("sibenik/sibenik.obj");
}
