//! The point structures of `caustic_accel::points` on real photon maps:
//! 10^5 photons traced in the built-in `cornell-box` and
//! `cornell-caustics` scenes, global and caustic maps, every structure
//! against the exact reference (identical neighbours, ties by index).
//!
//! `photon_knn_timings` (ignored: it measures, it does not assert) prints
//! build and query times of the three structures for 10^5 and 10^6
//! emitted photons: `cargo test -p caustic-render --release --test
//! photon_knn -- --ignored --nocapture`.

use caustic_accel::points::{
    HashGridConfig, KdKnnMethod, Neighbour, POINT_STRUCTURE_NAMES, PointHashGrid, PointKdTree,
    PointKdTreeConfig, PointStructure, build_point_structure, reference,
};
use caustic_geom::{Pcg32, Vec3};
use caustic_render::RenderScene;
use caustic_render::photon::{PhotonMaps, PhotonSettings, record::positions, trace_photons};
use caustic_scene::Scene;
use rayon::prelude::*;
use std::time::Instant;

fn photon_maps(scene: &str, photons: u64) -> PhotonMaps {
    let scene = Scene::builtin(scene).unwrap();
    let rs = RenderScene::new(&scene, "bvh-binned").unwrap();
    trace_photons(
        &rs,
        &PhotonSettings {
            photons,
            seed: 3,
            ..Default::default()
        },
    )
}

/// Every structure and variant under test, built for `radius`.
fn structures(points: &[Vec3], radius: f32) -> Vec<(String, Box<dyn PointStructure>)> {
    let mut out: Vec<(String, Box<dyn PointStructure>)> = POINT_STRUCTURE_NAMES
        .iter()
        .map(|&name| {
            (
                name.to_string(),
                build_point_structure(name, points, radius).unwrap(),
            )
        })
        .collect();
    out.push((
        "kdtree/histogram".into(),
        Box::new(PointKdTree::build(
            points,
            &PointKdTreeConfig::zhou_photons(radius),
        )),
    ));
    out.push((
        "hashgrid/teschner".into(),
        Box::new(PointHashGrid::build(
            points,
            &HashGridConfig::fleisz_teschner(radius),
        )),
    ));
    out
}

/// Queries where a renderer asks: at photons (surface points), a little off
/// them, and anywhere in the room.
fn query(points: &[Vec3], t: usize, rng: &mut Pcg32) -> Vec3 {
    let jitter = Vec3::new(rng.next_f32(), rng.next_f32(), rng.next_f32()) - 0.5;
    let photon = points[rng.next_u32() as usize % points.len()];
    match t % 3 {
        0 => photon,
        1 => photon + jitter * 0.02,
        _ => jitter * 2.0,
    }
}

/// Median distance to the 50th photon at photon positions: the radius
/// a radiance estimate with k = 50 would use.
fn typical_radius(points: &[Vec3]) -> f32 {
    let mut rng = Pcg32::new(11, 1);
    let mut d: Vec<f32> = (0..32)
        .map(|_| {
            let q = points[rng.next_u32() as usize % points.len()];
            reference::knn(points, q, 50, f32::INFINITY)
                .last()
                .map_or(0.0, |n| n.dist2.sqrt())
        })
        .collect();
    d.sort_by(f32::total_cmp);
    d[16]
}

/// Compares every structure with the reference on `queries` queries; k
/// runs over 1..=100, the radius alternates between limiting and loose.
fn check_map(label: &str, points: &[Vec3], queries: usize) {
    assert!(
        points.len() > 1000,
        "{label}: only {} photons",
        points.len()
    );
    let r = typical_radius(points);
    let built = structures(points, r);
    let failures: Vec<String> = (0..queries)
        .into_par_iter()
        .chunks(256)
        .flat_map_iter(|chunk| {
            let mut rng = Pcg32::new(chunk[0] as u64, 5);
            let mut got: Vec<Neighbour> = Vec::new();
            let mut fails = Vec::new();
            for t in chunk {
                let q = query(points, t, &mut rng);
                let k = 1 + t % 100;
                let radius = if t % 2 == 0 { r } else { 3.0 * r };
                let want = reference::knn(points, q, k, radius);
                for (name, s) in &built {
                    s.knn(q, k, radius, &mut got);
                    if got != want {
                        fails.push(format!(
                            "{label} {name}: q {q} k {k} r {radius}: {} vs {} results",
                            got.len(),
                            want.len()
                        ));
                    }
                }
                if t % 16 == 0 {
                    let want = reference::radius(points, q, radius);
                    for (name, s) in &built {
                        s.radius(q, radius, &mut got);
                        if got != want {
                            fails.push(format!("{label} {name} radius: q {q} r {radius}"));
                        }
                    }
                }
            }
            fails
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} mismatches, first: {}",
        failures.len(),
        failures[0]
    );
}

#[test]
fn structures_match_the_reference_on_cornell_photon_maps() {
    let boxes = photon_maps("cornell-box", 100_000);
    check_map("cornell-box global", &positions(&boxes.global), 3_000);
    let caustics = photon_maps("cornell-caustics", 100_000);
    check_map(
        "cornell-caustics global",
        &positions(&caustics.global),
        3_000,
    );
    check_map(
        "cornell-caustics caustic",
        &positions(&caustics.caustic),
        6_000,
    );
}

/// Milliseconds of `f`.
fn time_ms(f: impl FnOnce()) -> f64 {
    let start = Instant::now();
    f();
    start.elapsed().as_secs_f64() * 1e3
}

/// Builds a structure over points for a query radius.
type Builder = fn(&[Vec3], f32) -> Box<dyn PointStructure>;

/// Build and query time of each structure on one map, as a markdown row.
fn time_map(label: &str, points: &[Vec3], k: usize, queries: usize) {
    let r = typical_radius(points);
    let mut rng = Pcg32::new(1, 2);
    let qs: Vec<Vec3> = (0..queries)
        .map(|t| query(points, 3 * t + 1, &mut rng))
        .collect();
    let mut variants: Vec<(&str, Builder)> = vec![
        ("kdtree (pq)", |p, r| {
            Box::new(PointKdTree::build(p, &PointKdTreeConfig::with_radius(r)))
        }),
        ("kdtree (histogram)", |p, r| {
            let config = PointKdTreeConfig {
                knn: KdKnnMethod::Histogram {
                    iterations: 2,
                    bins: 32,
                },
                ..PointKdTreeConfig::with_radius(r)
            };
            Box::new(PointKdTree::build(p, &config))
        }),
        ("hashgrid (linear)", |p, r| {
            Box::new(PointHashGrid::build(p, &HashGridConfig::with_radius(r)))
        }),
        ("hashgrid (teschner)", |p, r| {
            Box::new(PointHashGrid::build(p, &HashGridConfig::teschner(r)))
        }),
        ("brute", |p, r| {
            build_point_structure("brute", p, r).unwrap()
        }),
    ];
    if points.len() > 300_000 {
        variants.pop(); // brute force: minutes per thousand queries at this size
    }
    for (name, build) in variants {
        let mut s = None;
        let build_ms = time_ms(|| s = Some(build(points, r)));
        let s = s.unwrap();
        let brute = name == "brute";
        let n = if brute { queries.min(2_000) } else { queries };
        let query_ms = time_ms(|| {
            qs[..n].par_chunks(256).for_each(|chunk| {
                let mut out = Vec::new();
                for &q in chunk {
                    s.knn(q, k, r, &mut out);
                }
            })
        });
        println!(
            "| {label} | {} | {name} | {build_ms:.1} | {:.3} | {:.2} | {} |",
            points.len(),
            query_ms * 1e3 / n as f64,
            s.stats().bytes as f64 / 1e6,
            s.stats().detail,
        );
    }
}

#[test]
#[ignore = "timing report, run by hand with --ignored --nocapture"]
fn photon_knn_timings() {
    println!("threads: {}", rayon::current_num_threads());
    println!(
        "| map | photons | structure | build ms | µs per query (k = 50, wall / queries) | MB | detail |"
    );
    println!("|---|---|---|---|---|---|---|");
    for emitted in [100_000, 1_000_000] {
        let maps = photon_maps("cornell-caustics", emitted);
        time_map(
            &format!("global ({emitted} emitted)"),
            &positions(&maps.global),
            50,
            100_000,
        );
        time_map(
            &format!("caustic ({emitted} emitted)"),
            &positions(&maps.caustic),
            50,
            100_000,
        );
    }
}
