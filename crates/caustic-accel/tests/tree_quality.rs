//! Tree quality of every CPU structure in the registry, so that a builder
//! that makes a bad tree fails even when its answers are right (the other
//! tests check answers only).
//!
//! Hierarchies (every BVH builder, `bvh-wide`, `kdtree`): the SAH cost as
//! `AccelStats` reports it (`C_trav = C_isect = 1` over the root's area;
//! the kd-tree's over its cells, with a straddling triangle counted in each
//! leaf; the wide tree's with one step per wide node), divided by the cost
//! of `bvh-sweep`'s tree (full-sweep SAH, the best of the builders here)
//! over the same triangles, must stay within [`SLACK`] of the ratio
//! measured when the bound was set. The grid has no hierarchy: its own
//! measures, references per cell (empty cells included) and references per
//! triangle, must stay within [`SLACK`] of theirs. Measured on real scenes
//! (`shared/scenes`, as `.ci/run` unpacks them), the built-in scenes, and
//! generated soups; plus node-count and leaf-size sanity for each.

#[path = "common/scenes.rs"]
mod scenes;

use caustic_accel::{ACCEL_NAMES, AccelStats, build_accel};
use caustic_geom::{Pcg32, Triangle, Vec3};

/// Allowed growth over a measured value: 7 %. The builds are
/// deterministic, so the margin only leaves room for deliberate small
/// changes to a builder; a regression beyond it must update the table
/// below, with the reason.
const SLACK: f32 = 1.07;

/// The reference hierarchy.
const REFERENCE: &str = "bvh-sweep";

/// The structures with a cost ratio to [`REFERENCE`], in the order of
/// [`Measured::ratios`].
const RATIO_ORDER: [&str; 9] = [
    "bvh-binned",
    "bvh-binned-staged",
    "bvh-wide",
    "lbvh",
    "hlbvh",
    "ploc",
    "kdtree",
    "bvh-taskpool",
    "bvh-spatial",
];

/// What the structures measured on one scene when the bounds were set
/// (every bound is the value times [`SLACK`]).
struct Measured {
    scene: &'static str,
    /// `bvh-sweep`'s SAH cost, so that the reference cannot slip either.
    reference_cost: f32,
    /// SAH cost over `bvh-sweep`'s, per structure of [`RATIO_ORDER`].
    /// The wide tree's is below 1 (it counts one step per 8-wide node);
    /// the kd-tree's is mostly above (cells are never smaller than the
    /// boxes of what they hold, and straddling triangles count per leaf).
    ratios: [f32; 9],
    /// Kd-tree leaf references per triangle (straddlers count per leaf).
    kd_refs_per_triangle: f32,
    /// The grid's references per cell, empty cells included.
    grid_refs_per_cell: f32,
    /// The grid's references per triangle.
    grid_refs_per_triangle: f32,
}

/// Measured with the builders' defaults at the commit that added this test
/// (the last two columns when `bvh-taskpool`'s CPU twin and `bvh-spatial`
/// were registered; `bvh-spatial`'s again in session 20, when its spatial
/// splits were binned on the longest axis only).
const MEASURED: &[Measured] = &[
    Measured {
        scene: "bunny/bun_zipper.ply",
        reference_cost: 31.16,
        ratios: [
            1.0044, 1.0096, 0.7081, 1.2803, 1.1044, 1.1360, 2.0544, 1.0139, 1.0025,
        ],
        kd_refs_per_triangle: 5.072,
        grid_refs_per_cell: 0.733,
        grid_refs_per_triangle: 3.757,
    },
    Measured {
        scene: "sponza-dabrovic/sponza.obj",
        reference_cost: 67.98,
        ratios: [
            1.0230, 1.0052, 0.7362, 1.9238, 1.1882, 0.9828, 1.2690, 1.0350, 0.8382,
        ],
        kd_refs_per_triangle: 4.499,
        grid_refs_per_cell: 1.565,
        grid_refs_per_triangle: 7.954,
    },
    Measured {
        scene: "sibenik/sibenik.obj",
        reference_cost: 46.67,
        ratios: [
            1.0061, 1.0096, 0.7422, 1.5778, 1.1334, 1.0628, 1.5458, 1.0418, 0.9393,
        ],
        kd_refs_per_triangle: 3.827,
        grid_refs_per_cell: 1.156,
        grid_refs_per_triangle: 5.940,
    },
    Measured {
        scene: "conference-69k/conference.obj",
        reference_cost: 36.35,
        ratios: [
            1.0378, 1.0498, 0.7454, 1.8932, 1.1992, 0.9613, 1.3670, 1.0554, 0.8298,
        ],
        kd_refs_per_triangle: 6.135,
        grid_refs_per_cell: 1.061,
        grid_refs_per_triangle: 5.409,
    },
    Measured {
        scene: "builtin:cornell-box",
        reference_cost: 12.72,
        ratios: [
            1.0000, 1.0000, 0.9481, 1.8112, 1.1816, 0.9350, 1.5051, 0.9792, 1.0000,
        ],
        kd_refs_per_triangle: 2.861,
        grid_refs_per_cell: 3.111,
        grid_refs_per_triangle: 18.667,
    },
    Measured {
        scene: "builtin:cornell-caustics",
        reference_cost: 16.81,
        ratios: [
            1.0489, 1.0517, 0.8848, 2.2471, 1.3938, 1.0307, 1.8480, 1.0515, 1.0489,
        ],
        kd_refs_per_triangle: 4.140,
        grid_refs_per_cell: 0.597,
        grid_refs_per_triangle: 2.991,
    },
    Measured {
        scene: "soup:uniform",
        reference_cost: 71.20,
        ratios: [
            1.0032, 1.0130, 0.9615, 1.0919, 1.0146, 1.1380, 1.7446, 1.0090, 1.0037,
        ],
        kd_refs_per_triangle: 1.191,
        grid_refs_per_cell: 0.525,
        grid_refs_per_triangle: 2.724,
    },
    Measured {
        scene: "soup:clumps",
        reference_cost: 360.60,
        // The kd-tree's cells cut the large triangles away from the clumps.
        ratios: [
            1.0146, 1.0264, 0.9614, 1.3329, 1.1336, 0.9297, 0.3724, 1.0148, 0.5128,
        ],
        kd_refs_per_triangle: 2.066,
        // Every large triangle crosses the whole grid.
        grid_refs_per_cell: 42.553,
        grid_refs_per_triangle: 220.902,
    },
];

#[test]
fn bunny() {
    check("bunny/bun_zipper.ply");
}

#[test]
fn sponza() {
    check("sponza-dabrovic/sponza.obj");
}

#[test]
fn sibenik() {
    check("sibenik/sibenik.obj");
}

#[test]
fn conference() {
    check("conference-69k/conference.obj");
}

#[test]
fn cornell_box() {
    check("builtin:cornell-box");
}

#[test]
fn cornell_caustics() {
    check("builtin:cornell-caustics");
}

#[test]
fn uniform_soup_of_small_triangles() {
    check("soup:uniform");
}

#[test]
fn clumps_among_large_triangles() {
    check("soup:clumps");
}

/// A structure added to the registry gets a bound here before it ships.
#[test]
fn every_registered_structure_has_bounds() {
    for &name in ACCEL_NAMES {
        let covered = RATIO_ORDER.contains(&name) || [REFERENCE, "grid", "brute"].contains(&name);
        assert!(
            covered,
            "no tree-quality bound for `{name}`: measure it and add it to MEASURED"
        );
    }
}

/// Every structure of the registry on `scene` against its measured bounds.
fn check(scene: &str) {
    let measured = MEASURED
        .iter()
        .find(|m| m.scene == scene)
        .expect("a row of MEASURED");
    let Some(tris) = triangles(scene) else {
        return;
    };
    let base = build_accel(REFERENCE, &tris).unwrap().stats().sah_cost;
    at_most(scene, REFERENCE, "SAH cost", base, measured.reference_cost);
    for &name in ACCEL_NAMES.iter().filter(|&&n| n != "brute") {
        let accel = build_accel(name, &tris).unwrap();
        let stats = accel.stats();
        assert_eq!(stats.prims, tris.len(), "{scene} {name}");
        sane_shape(scene, name, stats);
        for (what, value, then) in measures(name, stats, base, measured) {
            at_most(scene, name, what, value, then);
        }
    }
}

/// The cost measures of structure `name`: what, the value now, the value
/// measured.
fn measures(
    name: &str,
    stats: &AccelStats,
    reference_cost: f32,
    measured: &Measured,
) -> Vec<(&'static str, f32, f32)> {
    let mut out = Vec::new();
    if let Some(k) = RATIO_ORDER.iter().position(|&n| n == name) {
        let ratio = stats.sah_cost / reference_cost;
        out.push(("SAH cost / bvh-sweep's", ratio, measured.ratios[k]));
    }
    let per_triangle = references_per_triangle(stats);
    match name {
        "kdtree" => out.push((
            "references per triangle",
            per_triangle,
            measured.kd_refs_per_triangle,
        )),
        "grid" => out.extend([
            (
                "references per cell",
                stats.avg_leaf_size,
                measured.grid_refs_per_cell,
            ),
            (
                "references per triangle",
                per_triangle,
                measured.grid_refs_per_triangle,
            ),
        ]),
        _ => {}
    }
    out
}

fn at_most(scene: &str, name: &str, what: &str, value: f32, measured: f32) {
    let bound = measured * SLACK;
    eprintln!("{scene} {name}: {what} {value:.4} (measured {measured}, bound {bound:.4})");
    assert!(
        value <= bound,
        "{scene} {name}: {what} {value:.4} above its bound {bound:.4} (measured {measured})"
    );
}

/// Leaf references (a triangle in several leaves or cells counts in each)
/// per triangle.
fn references_per_triangle(stats: &AccelStats) -> f32 {
    stats.avg_leaf_size * stats.leaves as f32 / stats.prims as f32
}

/// Node counts and leaf sizes that each kind of structure must have.
fn sane_shape(scene: &str, name: &str, s: &AccelStats) {
    let what = format!("{scene} {name}: {s:?}");
    let prims = s.prims as f32;
    if name != "grid" {
        assert!(s.sah_cost.is_finite() && s.sah_cost > 0.0, "{what}");
    }
    match name {
        "bvh-wide" => {
            // Each inner node has 2 to 8 children, leaves hold up to 8.
            let inner = s.nodes - s.leaves;
            assert!(inner >= 1 && s.leaves > inner, "{what}");
            assert!(s.nodes - 1 <= 8 * inner, "{what}");
            assert!((1..=8).contains(&s.max_leaf_size), "{what}");
            assert!(s.leaves as f32 * 8.0 >= prims, "{what}");
            assert!(s.max_depth <= caustic_accel::bvh::MAX_DEPTH, "{what}");
        }
        "kdtree" => {
            assert_eq!(s.nodes, 2 * s.leaves - 1, "{what}");
            assert!(s.max_depth <= caustic_accel::kdtree::MAX_DEPTH, "{what}");
        }
        "grid" => {
            // The density formula: about 5 cells per triangle, rounded per axis.
            assert_eq!((s.nodes, s.max_depth), (0, 0), "{what}");
            let cells_per_triangle = s.leaves as f32 / prims;
            assert!((2.5..=10.0).contains(&cells_per_triangle), "{what}");
        }
        "bvh-spatial" => {
            // A full binary tree whose cut triangles sit in several leaves,
            // within the default budget of 1.3 references per triangle.
            assert_eq!(s.nodes, 2 * s.leaves - 1, "{what}");
            assert!((1..=8).contains(&s.max_leaf_size), "{what}");
            assert!(
                (1.0..=1.3 + 1e-3).contains(&references_per_triangle(s)),
                "{what}"
            );
            assert!(s.max_depth <= caustic_accel::bvh::MAX_DEPTH, "{what}");
        }
        _ => {
            // Binary BVHs: a full binary tree, every triangle in one leaf
            // of at most 8 (every builder's default).
            assert_eq!(s.nodes, 2 * s.leaves - 1, "{what}");
            assert!((1..=8).contains(&s.max_leaf_size), "{what}");
            assert!((references_per_triangle(s) - 1.0).abs() < 1e-3, "{what}");
            assert!(s.max_depth <= caustic_accel::bvh::MAX_DEPTH, "{what}");
        }
    }
}

fn triangles(scene: &str) -> Option<Vec<Triangle>> {
    if let Some(name) = scene.strip_prefix("builtin:") {
        let scene = caustic_scene::Scene::builtin(name).expect("a built-in scene");
        return Some(scene.triangles());
    }
    match scene {
        "soup:uniform" => Some(uniform_soup(20_000, 1)),
        "soup:clumps" => Some(clumped_soup(20_000, 2)),
        _ => scenes::load(scene),
    }
}

/// Small triangles spread evenly through a cube: the easy case.
fn uniform_soup(count: usize, seed: u64) -> Vec<Triangle> {
    let mut rng = Pcg32::new(seed, 3);
    let mut point = move |half: f32| {
        Vec3::new(rng.next_f32(), rng.next_f32(), rng.next_f32()) * (2.0 * half) - half
    };
    (0..count)
        .map(|_| {
            let p = point(10.0);
            Triangle::new(p, p + point(0.2), p + point(0.2))
        })
        .collect()
}

/// Dense clumps of tiny triangles in a box of long, thin, large ones: the
/// case where a split placed by object counts or Morton codes alone, not
/// by area, costs the most.
fn clumped_soup(count: usize, seed: u64) -> Vec<Triangle> {
    let mut rng = Pcg32::new(seed, 5);
    let mut point = move |half: f32| {
        Vec3::new(rng.next_f32(), rng.next_f32(), rng.next_f32()) * (2.0 * half) - half
    };
    let clumps: Vec<Vec3> = (0..12).map(|_| point(10.0)).collect();
    (0..count)
        .map(|i| {
            if i % 20 == 0 {
                let (a, b) = (point(10.0), point(10.0));
                Triangle::new(a, b, b + point(0.3))
            } else {
                let p = clumps[i % clumps.len()] + point(0.5);
                Triangle::new(p, p + point(0.02), p + point(0.02))
            }
        })
        .collect()
}
