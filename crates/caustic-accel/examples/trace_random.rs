//! Quick build and trace timing, no benchmark harness:
//!
//! `cargo run --release -p caustic-accel --example trace_random [SCENE] [RAYS]`
//!
//! `SCENE` is a path relative to the scenes folder (default
//! `bunny/bun_zipper.ply`). Builds each registered BVH a few times (parallel
//! and on one thread), then traces random rays from a sphere around the
//! model towards points in its box, on one thread and batched over all
//! threads, after checking a sample of hits against brute force.

use caustic_accel::bvh::build::{BinnedSahBuilder, BinnedSahConfig};
use caustic_accel::{Accel, BruteForce, TriangleBvh};
use caustic_geom::{Aabb, Pcg32, Ray, Triangle, Vec3};
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let scene = args.next().unwrap_or_else(|| "bunny/bun_zipper.ply".into());
    let ray_count: usize = args
        .next()
        .map_or(1_000_000, |s| s.parse().expect("ray count"));
    let path = caustic_scene::data_dirs::find_scene(&scene).unwrap_or_else(|missing| {
        eprintln!("{missing}");
        std::process::exit(2);
    });
    let tris = caustic_scene::Scene::load(&path)
        .expect("scene loads")
        .triangles();
    let threads = rayon::current_num_threads();
    println!("{scene}: {} triangles, {threads} threads", tris.len());

    for (label, config) in [
        ("parallel", BinnedSahConfig::DEFAULT),
        ("1 thread", BinnedSahConfig::DEFAULT.sequential()),
    ] {
        let builder = BinnedSahBuilder::new(config);
        let best = (0..5)
            .map(|_| TriangleBvh::build_with(&tris, &builder).stats().build_ms)
            .fold(f64::INFINITY, f64::min);
        println!("build ({label}): {best:.1} ms (best of 5)");
    }
    let bvh = TriangleBvh::build(&tris);
    println!("{:?}", bvh.stats());

    let rays = sphere_rays(&bounds(&tris), ray_count);
    check_sample(&bvh, &tris, &rays[..100.min(rays.len())]);

    let start = Instant::now();
    let hits = rays.iter().filter(|r| bvh.intersect(r).is_some()).count();
    report("closest, 1 thread", rays.len(), start);
    let start = Instant::now();
    let occluded = rays.iter().filter(|r| bvh.occluded(r)).count();
    report("any-hit, 1 thread", rays.len(), start);
    assert_eq!(hits, occluded);

    let mut out = vec![None; rays.len()];
    let start = Instant::now();
    bvh.intersect_batch(&rays, &mut out);
    report(&format!("closest, {threads} threads"), rays.len(), start);
    println!("{hits} of {} rays hit", rays.len());
}

fn report(label: &str, rays: usize, start: Instant) {
    let s = start.elapsed().as_secs_f64();
    println!(
        "{label}: {:.1} ms, {:.2} Mrays/s",
        s * 1e3,
        rays as f64 / s / 1e6
    );
}

fn check_sample(bvh: &TriangleBvh, tris: &[Triangle], rays: &[Ray]) {
    let brute = BruteForce::new(tris);
    for ray in rays {
        assert_eq!(bvh.intersect(ray), brute.intersect(ray), "{ray:?}");
    }
}

fn bounds(tris: &[Triangle]) -> Aabb {
    tris.iter().fold(Aabb::EMPTY, |b, t| b.union(t.bounds()))
}

fn sphere_rays(bounds: &Aabb, count: usize) -> Vec<Ray> {
    let mut rng = Pcg32::new(7, 11);
    let mut unit = || rng.next_f32();
    let radius = bounds.diagonal();
    (0..count)
        .map(|_| {
            let z = 2.0 * unit() - 1.0;
            let phi = std::f32::consts::TAU * unit();
            let r = (1.0 - z * z).max(0.0).sqrt();
            let origin = bounds.center() + radius * Vec3::new(r * phi.cos(), r * phi.sin(), z);
            let target = bounds.min + bounds.extent() * Vec3::new(unit(), unit(), unit());
            Ray::new(origin, target - origin)
        })
        .collect()
}
