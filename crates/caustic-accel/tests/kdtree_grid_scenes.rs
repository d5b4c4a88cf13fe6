//! `kdtree` and `grid` on real scenes: the same closest hits and occlusion
//! answers as `bvh-binned` (itself checked against brute force on the
//! bunny) for rays from around and inside the scene, and as brute force on
//! a subset. Scenes that are not unpacked are skipped, saying so (under CI
//! they fail: see `caustic_scene::data_dirs`).

#[path = "common/scenes.rs"]
mod scenes;

use caustic_accel::{Accel, BruteForce, build_accel};
use scenes::{disagreements, load};

fn agree(accel: &dyn Accel, reference: &dyn Accel, rays: &[caustic_geom::Ray]) {
    let bad = disagreements(accel, reference, rays);
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

fn check(relative: &str) {
    let Some(tris) = load(relative) else { return };
    let rays = scenes::rays(&tris, 50_000, 3, 17);
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
