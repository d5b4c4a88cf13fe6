//! Every point structure (`kdtree`, `hashgrid`, `brute`, and the variants
//! of the first two) against the exact reference of
//! `caustic_accel::points::reference` (distance to every point, sort all).
//!
//! Results must be identical, entry by entry: the same indices in the same
//! order with the same squared distances. Ties are not special-cased: the
//! contract orders neighbours by `(dist2, index)`, and every structure
//! follows it (the duplicate-point cloud is full of exact ties).

use caustic_accel::points::{
    BrutePoints, HashFunction, HashGridConfig, KdKnnMethod, Neighbour, POINT_STRUCTURE_NAMES,
    PointHashGrid, PointKdTree, PointKdTreeConfig, PointStructure, build_point_structure,
    reference,
};
use caustic_geom::{Aabb, Pcg32, Vec3};
use proptest::prelude::*;
use rayon::prelude::*;

/// A structure under test, built for a cloud and its largest radius.
struct Variant {
    label: &'static str,
    build: fn(&[Vec3], f32) -> Box<dyn PointStructure>,
}

fn variants() -> Vec<Variant> {
    let mut out: Vec<Variant> = vec![
        Variant {
            label: "kdtree",
            build: |p, r| build_point_structure("kdtree", p, r).unwrap(),
        },
        Variant {
            label: "hashgrid",
            build: |p, r| build_point_structure("hashgrid", p, r).unwrap(),
        },
        Variant {
            label: "brute",
            build: |p, r| build_point_structure("brute", p, r).unwrap(),
        },
        Variant {
            label: "kdtree/histogram",
            build: |p, r| Box::new(PointKdTree::build(p, &PointKdTreeConfig::zhou_photons(r))),
        },
        Variant {
            label: "kdtree/histogram-1x4",
            build: |p, r| {
                let config = PointKdTreeConfig {
                    small_node_threshold: 8,
                    knn: KdKnnMethod::Histogram {
                        iterations: 1,
                        bins: 4,
                    },
                    ..PointKdTreeConfig::with_radius(r)
                };
                Box::new(PointKdTree::build(p, &config))
            },
        },
        Variant {
            label: "hashgrid/teschner",
            build: |p, r| Box::new(PointHashGrid::build(p, &HashGridConfig::teschner(r))),
        },
        Variant {
            label: "hashgrid/teschner-2^4",
            build: |p, r| {
                let config = HashGridConfig {
                    hash: HashFunction::Teschner { table_bits: 4 },
                    ..HashGridConfig::with_radius(r)
                };
                Box::new(PointHashGrid::build(p, &config))
            },
        },
    ];
    // Every registered name is covered.
    for name in POINT_STRUCTURE_NAMES {
        assert!(out.iter().any(|v| v.label == *name), "{name} untested");
    }
    out.shrink_to_fit();
    out
}

fn uniform3(rng: &mut Pcg32) -> Vec3 {
    Vec3::new(rng.next_f32(), rng.next_f32(), rng.next_f32())
}

fn gaussian(rng: &mut Pcg32) -> f32 {
    let u1 = rng.next_f32().max(1e-7);
    let u2 = rng.next_f32();
    (-2.0 * u1.ln()).sqrt() * (std::f32::consts::TAU * u2).cos()
}

/// The test clouds: name and points.
fn clouds() -> Vec<(&'static str, Vec<Vec3>)> {
    let mut rng = Pcg32::new(2024, 5);
    let n = 3000;
    let uniform: Vec<Vec3> = (0..n).map(|_| uniform3(&mut rng)).collect();
    let blobs: Vec<(Vec3, f32)> = (0..12)
        .map(|_| (uniform3(&mut rng), 0.005 + 0.045 * rng.next_f32()))
        .collect();
    let clustered: Vec<Vec3> = (0..n)
        .map(|_| {
            let (c, s) = blobs[(rng.next_u32() % 12) as usize];
            c + s * Vec3::new(gaussian(&mut rng), gaussian(&mut rng), gaussian(&mut rng))
        })
        .collect();
    let planar: Vec<Vec3> = (0..n)
        .map(|_| Vec3::new(rng.next_f32(), rng.next_f32(), 0.0))
        .collect();
    let sites: Vec<Vec3> = (0..40).map(|_| uniform3(&mut rng)).collect();
    let duplicates: Vec<Vec3> = (0..n)
        .map(|_| sites[(rng.next_u32() % 40) as usize])
        .collect();
    let large: Vec<Vec3> = (0..50_000).map(|_| uniform3(&mut rng)).collect();
    vec![
        ("uniform", uniform),
        ("clustered", clustered),
        ("planar", planar),
        ("duplicates", duplicates),
        ("uniform-50k", large),
    ]
}

/// A random point in the cloud's bounds grown by 5 % of their largest
/// extent (a flat cloud gets flat-ish queries, near enough to matter).
fn near_cloud(points: &[Vec3], rng: &mut Pcg32) -> Vec3 {
    let bounds = Aabb::from_points(points.iter().copied());
    let margin = Vec3::splat(0.05 * bounds.extent().max_element());
    bounds.min - margin + uniform3(rng) * (bounds.extent() + 2.0 * margin)
}

/// Query `t` of a cloud: random points around the cloud, data points
/// themselves (zero distances, ties) and data points nudged.
fn query_point(points: &[Vec3], t: usize, rng: &mut Pcg32) -> Vec3 {
    match t % 3 {
        0 => near_cloud(points, rng),
        1 => points[rng.next_u32() as usize % points.len()],
        _ => points[rng.next_u32() as usize % points.len()] + (uniform3(rng) - 0.5) * 1e-3,
    }
}

/// A radius that limits the search for most `k` up to 100: the median
/// distance of random queries to their 30th neighbour.
fn limiting_radius(points: &[Vec3]) -> f32 {
    let mut rng = Pcg32::new(7, 7);
    let mut d: Vec<f32> = (0..64)
        .map(|_| {
            let q = near_cloud(points, &mut rng);
            reference::knn(points, q, 30, f32::INFINITY)[29]
                .dist2
                .sqrt()
        })
        .collect();
    d.sort_by(f32::total_cmp);
    d[32]
}

/// What went wrong, for the first mismatch of a run.
fn describe(
    label: &str,
    cloud: &str,
    q: Vec3,
    k: usize,
    r: f32,
    want: &[Neighbour],
    got: &[Neighbour],
) -> String {
    let first = want.iter().zip(got).position(|(a, b)| a != b);
    format!(
        "{label} on {cloud}: q = {q}, k = {k}, r = {r}: {} results, reference {}; first difference at {first:?}: got {:?}, want {:?}",
        got.len(),
        want.len(),
        first.map(|i| got[i]),
        first.map(|i| want[i]),
    )
}

/// Runs `queries` kNN queries (and every 10th as a radius query) on every
/// variant, the reference computed once per query; returns the number of
/// kNN queries compared per variant.
fn check_cloud(cloud: &str, points: &[Vec3], queries: usize) -> usize {
    let r_limit = limiting_radius(points);
    let r_loose = 2.0 * r_limit;
    let variants = variants();
    let built: Vec<Box<dyn PointStructure>> = variants
        .iter()
        .map(|v| (v.build)(points, r_limit))
        .collect();
    let failures: Vec<String> = (0..queries)
        .into_par_iter()
        .chunks(512)
        .flat_map_iter(|chunk| {
            let mut rng = Pcg32::new(chunk[0] as u64, 99);
            let mut got = Vec::new();
            let mut fails = Vec::new();
            for t in chunk {
                let q = query_point(points, t, &mut rng);
                let k = 1 + t % 100;
                let r = if t % 2 == 0 { r_limit } else { r_loose };
                let want = reference::knn(points, q, k, r);
                let want_all = (t % 10 == 0).then(|| reference::radius(points, q, r));
                for (variant, structure) in variants.iter().zip(&built) {
                    structure.knn(q, k, r, &mut got);
                    if got != want {
                        fails.push(describe(variant.label, cloud, q, k, r, &want, &got));
                    }
                    if let Some(want_all) = &want_all {
                        structure.radius(q, r, &mut got);
                        if got != *want_all {
                            fails.push(describe(variant.label, cloud, q, 0, r, want_all, &got));
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
    queries
}

#[test]
fn all_structures_match_the_reference_on_random_clouds() {
    let mut per_variant = 0;
    for (name, points) in clouds() {
        let queries = if points.len() > 10_000 { 2_500 } else { 25_000 };
        per_variant += check_cloud(name, &points, queries);
    }
    assert!(per_variant >= 100_000, "only {per_variant} queries");
}

#[test]
fn trees_and_grids_validate_on_every_cloud() {
    for (name, points) in clouds() {
        let r = limiting_radius(&points);
        for config in [
            PointKdTreeConfig::with_radius(r),
            PointKdTreeConfig::zhou_photons(r),
        ] {
            let tree = PointKdTree::build(&points, &config);
            tree.validate()
                .unwrap_or_else(|e| panic!("kdtree on {name}: {e}"));
            // Only coincident points can share a leaf beyond a small root.
            let stats = tree.stats();
            if name != "duplicates" {
                assert!(
                    stats.max_leaf_size <= 64,
                    "{name}: leaf of {}",
                    stats.max_leaf_size
                );
            }
        }
        for config in [
            HashGridConfig::with_radius(r),
            HashGridConfig::teschner(r),
            HashGridConfig::fleisz_teschner(r),
        ] {
            let grid = PointHashGrid::build(&points, &config);
            grid.validate()
                .unwrap_or_else(|e| panic!("hashgrid on {name}: {e}"));
        }
    }
}

#[test]
fn builds_do_not_depend_on_the_thread_count() {
    let (_, points) = clouds().pop().unwrap();
    let build = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            let tree = PointKdTree::build(&points, &PointKdTreeConfig::with_radius(0.02));
            let grid = PointHashGrid::build(&points, &HashGridConfig::with_radius(0.02));
            let mut out = Vec::new();
            grid.knn(Vec3::splat(0.5), 20, 0.02, &mut out);
            (tree.nodes().to_vec(), out)
        })
    };
    assert_eq!(build(1), build(2));
}

#[test]
fn tiny_and_degenerate_clouds() {
    let p = Vec3::new(0.25, -1.0, 3.0);
    let q = Vec3::new(0.75, -1.0, 3.0);
    let clouds: Vec<Vec<Vec3>> = vec![
        vec![],
        vec![p],
        vec![p, p],
        vec![p, q],
        vec![q, p, q],
        vec![Vec3::NAN, p, Vec3::INFINITY, q],
        vec![Vec3::splat(f32::NEG_INFINITY)],
    ];
    let queries = [
        p,
        q,
        0.5 * (p + q),
        Vec3::splat(100.0),
        Vec3::NAN,
        Vec3::INFINITY,
    ];
    let radii = [0.0, 1e-6, 0.25, 0.5, 1.0, f32::INFINITY, f32::NAN, -1.0];
    for points in &clouds {
        for build_radius in [0.5, 0.0, f32::INFINITY, f32::NAN] {
            for variant in variants() {
                let s = (variant.build)(points, build_radius);
                assert_eq!(s.len(), points.len());
                let mut got = Vec::new();
                for &query in &queries {
                    for &r in &radii {
                        for k in 0..4 {
                            s.knn(query, k, r, &mut got);
                            let want = reference::knn(points, query, k, r);
                            assert_eq!(
                                got, want,
                                "{} knn {points:?} q {query} k {k} r {r}",
                                variant.label
                            );
                        }
                        s.radius(query, r, &mut got);
                        assert_eq!(
                            got,
                            reference::radius(points, query, r),
                            "{} radius",
                            variant.label
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn coincident_points_beyond_a_leaf_stay_exact() {
    // More coincident points than any leaf or small root holds.
    let mut points = vec![Vec3::splat(0.5); 500];
    points.extend((0..100).map(|i| Vec3::new(i as f32 / 100.0, 0.0, 0.0)));
    let tree = PointKdTree::build(&points, &PointKdTreeConfig::with_radius(0.1));
    tree.validate().unwrap();
    let brute = BrutePoints::build(&points);
    let mut a = Vec::new();
    let mut b = Vec::new();
    for k in [1, 10, 64, 65, 499, 500, 501, 700] {
        tree.knn(Vec3::splat(0.5), k, f32::INFINITY, &mut a);
        brute.knn(Vec3::splat(0.5), k, f32::INFINITY, &mut b);
        assert_eq!(a, b, "k = {k}");
        assert_eq!(
            a,
            reference::knn(&points, Vec3::splat(0.5), k, f32::INFINITY)
        );
    }
}

/// Coordinates on a coarse lattice, so that ties and duplicates are common.
fn lattice_point() -> impl Strategy<Value = Vec3> {
    (0i32..6, 0i32..6, 0i32..3).prop_map(|(x, y, z)| Vec3::new(x as f32, y as f32, z as f32) * 0.25)
}

fn free_point() -> impl Strategy<Value = Vec3> {
    (-2.0f32..2.0, -2.0f32..2.0, -2.0f32..2.0).prop_map(|(x, y, z)| Vec3::new(x, y, z))
}

fn radius_value() -> impl Strategy<Value = f32> {
    prop_oneof![
        Just(f32::INFINITY),
        Just(0.0f32),
        Just(0.25f32),
        Just(0.5f32),
        0.0f32..3.0
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn small_random_clouds_match_the_reference(
        lattice in prop::collection::vec(lattice_point(), 0..70),
        free in prop::collection::vec(free_point(), 0..70),
        queries in prop::collection::vec((free_point(), 0usize..90, radius_value()), 1..12),
        build_radius in radius_value(),
    ) {
        let points: Vec<Vec3> = lattice.into_iter().chain(free).collect();
        let mut got = Vec::new();
        for variant in variants() {
            let s = (variant.build)(&points, build_radius);
            for &(q, k, r) in &queries {
                s.knn(q, k, r, &mut got);
                prop_assert_eq!(&got, &reference::knn(&points, q, k, r), "{} knn", variant.label);
                s.radius(q, r, &mut got);
                prop_assert_eq!(&got, &reference::radius(&points, q, r), "{} radius", variant.label);
            }
        }
    }
}
