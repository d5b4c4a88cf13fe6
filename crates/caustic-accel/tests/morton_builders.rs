//! The Morton-code builders (`lbvh`, `hlbvh`, `ploc`) in every preset, beyond
//! the registry-wide tests of `bvh_vs_brute.rs` (which build the defaults):
//! each preset's tree validates and answers exactly as brute force on a
//! soup with degenerate, duplicated, clustered and non-finite triangles, and
//! each default builder agrees with `bvh-binned` on the bunny.

use caustic_accel::bvh::build::{
    Bvh2Builder, HlbvhBuilder, HlbvhConfig, LbvhBuilder, LbvhConfig, MortonBits, PlocBuilder,
    PlocConfig,
};
use caustic_accel::{Accel, BruteForce, BuildInput, TriangleBvh, build_accel};
use caustic_geom::{Hit, Pcg32, Ray, Triangle, Vec3};
use rayon::prelude::*;

/// Every preset of the three builders, plus a few extreme settings.
fn builders() -> Vec<Box<dyn Bvh2Builder>> {
    let mut out: Vec<Box<dyn Bvh2Builder>> = Vec::new();
    for config in [
        LbvhConfig::DEFAULT,
        LbvhConfig::KARRAS,
        LbvhConfig::FINE_CODES,
        LbvhConfig {
            max_leaf_size: 32,
            parallel_min_prims: 16,
            ..LbvhConfig::DEFAULT
        },
    ] {
        out.push(Box::new(LbvhBuilder::new(config)));
    }
    for config in [
        HlbvhConfig::DEFAULT,
        HlbvhConfig::COARSE_CLUSTERS,
        HlbvhConfig::FINE_CLUSTERS,
        HlbvhConfig {
            morton_bits: MortonBits::Bits63,
            cluster_bits: 3,
            bins: 2,
            max_leaf_size: 1,
            parallel_min_prims: 16,
            ..HlbvhConfig::DEFAULT
        },
    ] {
        out.push(Box::new(HlbvhBuilder::new(config)));
    }
    for config in [
        PlocConfig::DEFAULT,
        PlocConfig::FAST,
        PlocConfig::HIGH_QUALITY,
        PlocConfig {
            radius: 1,
            max_leaf_size: 1,
            morton_bits: MortonBits::Bits63,
            parallel_min: 16,
            ..PlocConfig::DEFAULT
        },
    ] {
        out.push(Box::new(PlocBuilder::new(config)));
    }
    out
}

struct Rng(Pcg32);

impl Rng {
    fn unit(&mut self) -> f32 {
        self.0.next_f32()
    }
    fn range(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * self.unit()
    }
    fn point(&mut self, half: f32) -> Vec3 {
        Vec3::new(
            self.range(-half, half),
            self.range(-half, half),
            self.range(-half, half),
        )
    }
}

/// Clumps of small triangles (many equal Morton codes), big ones across
/// the scene, degenerate ones, exact duplicates and a few non-finite ones.
fn soup(count: usize, rng: &mut Rng) -> Vec<Triangle> {
    let clumps: Vec<Vec3> = (0..8).map(|_| rng.point(10.0)).collect();
    let mut tris: Vec<Triangle> = Vec::with_capacity(count);
    for i in 0..count {
        let roll = rng.unit();
        let tri = if roll < 0.5 {
            let c = clumps[i % clumps.len()] + rng.point(1e-3);
            Triangle::new(c, c + rng.point(0.05), c + rng.point(0.05))
        } else if roll < 0.6 {
            Triangle::new(rng.point(10.0), rng.point(10.0), rng.point(10.0))
        } else if roll < 0.7 {
            let p = rng.point(10.0);
            Triangle::new(p, p, p + rng.point(0.5))
        } else if roll < 0.8 && !tris.is_empty() {
            tris[(rng.0.next_u32() as usize) % tris.len()]
        } else if roll < 0.81 {
            let p = rng.point(10.0);
            Triangle::new(p, p + Vec3::X, Vec3::new(f32::NAN, p.y, p.z))
        } else {
            let p = rng.point(10.0);
            Triangle::new(p, p + rng.point(0.5), p + rng.point(0.5))
        };
        tris.push(tri);
    }
    tris
}

/// Rays from around the scene towards random points and triangles.
fn rays(tris: &[Triangle], count: usize, rng: &mut Rng) -> Vec<Ray> {
    (0..count)
        .map(|k| {
            let origin = rng.point(14.0);
            let tri = tris[k % tris.len()];
            let target = if tri.is_finite() && k % 2 == 0 {
                tri.point_at(0.25, 0.25)
            } else {
                rng.point(10.0)
            };
            Ray::new(origin, target - origin)
        })
        .collect()
}

/// Panics with the first rays where `accel` and `reference` disagree.
fn assert_same_hits(accel: &dyn Accel, reference: &[Option<Hit>], rays: &[Ray], what: &str) {
    let bad: Vec<String> = rays
        .par_iter()
        .zip(reference)
        .filter_map(|(ray, expected)| {
            let got = accel.intersect(ray);
            let consistent = accel.occluded(ray) == expected.is_some();
            (got != *expected || !consistent)
                .then(|| format!("{ray:?}: got {got:?}, expected {expected:?}"))
        })
        .collect();
    assert!(
        bad.is_empty(),
        "{what}: {} disagreements, first: {}",
        bad.len(),
        bad[0]
    );
}

#[test]
fn every_preset_matches_brute_force_on_a_clumped_soup() {
    let mut rng = Rng(Pcg32::new(31, 7));
    let tris = soup(3000, &mut rng);
    let rays = rays(&tris, 20_000, &mut rng);
    let brute = BruteForce::new(&tris);
    let expected: Vec<Option<Hit>> = rays.par_iter().map(|r| brute.intersect(r)).collect();
    let input = BuildInput::from_triangles(&tris);
    for builder in builders() {
        builder.build(&input).validate(&input.bounds).unwrap();
        let accel = TriangleBvh::build_with(&tris, builder.as_ref());
        assert_eq!(accel.stats().prims, tris.len());
        assert_same_hits(&accel, &expected, &rays, builder.name());
    }
}

#[test]
fn defaults_match_bvh_binned_on_the_bunny() {
    let Some(path) = caustic_scene::data_dirs::scene_file("bunny/bun_zipper.ply") else {
        return;
    };
    let tris = caustic_scene::Scene::load(&path)
        .expect("bunny loads")
        .triangles();
    let binned = build_accel("bvh-binned", &tris).unwrap();
    let mut rng = Rng(Pcg32::new(5, 9));
    let rays = rays(&tris, 50_000, &mut rng);
    let expected: Vec<Option<Hit>> = rays.par_iter().map(|r| binned.intersect(r)).collect();
    assert!(expected.iter().filter(|h| h.is_some()).count() > rays.len() / 4);
    for name in ["lbvh", "hlbvh", "ploc"] {
        let accel = build_accel(name, &tris).unwrap();
        let stats = accel.stats();
        assert!(stats.max_depth <= caustic_accel::bvh::MAX_DEPTH);
        assert!(stats.max_leaf_size <= 8, "{stats:?}");
        assert_same_hits(accel.as_ref(), &expected, &rays, name);
    }
}

#[test]
fn peak_memory_covers_at_least_the_output() {
    let mut rng = Rng(Pcg32::new(2, 3));
    let tris = soup(20_000, &mut rng);
    let input = BuildInput::from_triangles(&tris);
    let defaults: [Box<dyn Bvh2Builder>; 3] = [
        Box::new(LbvhBuilder::default()),
        Box::new(HlbvhBuilder::default()),
        Box::new(PlocBuilder::default()),
    ];
    for builder in defaults {
        let (bvh, peak) = builder.build_with_peak(&input);
        let output = bvh.nodes.len() * 32 + bvh.prim_indices.len() * 4;
        assert!(
            peak >= output,
            "{}: peak {peak} < output {output}",
            builder.name()
        );
        assert!(
            peak < 50 * output,
            "{}: peak {peak} implausible",
            builder.name()
        );
    }
}
