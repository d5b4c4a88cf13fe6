//! DACRT (`caustic_accel::dacrt`, both splits) against the exact reference:
//! every closest hit (triangle, `t`, `u`, `v` bit for bit) and every
//! any-hit answer of a batch equal to brute force on random soups with
//! degenerate, huge, thin, duplicated and non-finite triangles, adversarial
//! and far-away rays and short segments; and equal to `bvh-binned` (held to
//! brute force by `structures_on_scenes.rs`) on every standard scene, with
//! rays from outside and inside the scene, long and short. Scenes that are
//! not unpacked are skipped, saying so (under CI they fail).

#[path = "common/scenes.rs"]
mod scenes;
#[path = "common/soups.rs"]
mod soups;

use caustic_accel::dacrt::{Dacrt, DacrtConfig};

/// The paper's two splits, and the binary scheme with CPU constants.
fn configs() -> [DacrtConfig; 3] {
    [
        DacrtConfig::MEDIAN,
        DacrtConfig::RDH,
        DacrtConfig::parse("dacrt:scheme=binary:sort=1:rays=2:tris=2").unwrap(),
    ]
}
use caustic_accel::{Accel, BruteForce, build_accel};
use caustic_geom::{Hit, Pcg32, Ray};
use soups::{awkward_rays, awkward_soup, far_rays, grid_soup, segments};

/// The first few rays whose answers differ, described; empty when all agree.
fn differences(dacrt: &Dacrt, reference: &dyn Accel, rays: &[Ray]) -> Vec<String> {
    let mut got = vec![None; rays.len()];
    dacrt.closest_hits(rays, &mut got);
    let mut got_any = vec![false; rays.len()];
    dacrt.any_hits(rays, &mut got_any);
    let mut want: Vec<Option<Hit>> = vec![None; rays.len()];
    reference.intersect_batch(rays, &mut want);
    (0..rays.len())
        .filter(|&i| got[i] != want[i] || got_any[i] != want[i].is_some())
        .take(5)
        .map(|i| {
            format!(
                "ray {i} {:?}: dacrt {:?} (any {}), reference {:?}",
                rays[i], got[i], got_any[i], want[i]
            )
        })
        .collect()
}

#[test]
fn random_soups_equal_brute_force() {
    for seed in 1..=4u64 {
        let mut rng = Pcg32::new(seed, 3);
        let tris = if seed % 2 == 0 {
            awkward_soup(&mut rng, 2500)
        } else {
            grid_soup(&mut rng, 12)
        };
        let brute = BruteForce::new(&tris);
        let mut rays = awkward_rays(&mut rng, &tris, 3000);
        rays.extend(far_rays(&mut rng, &tris, 500));
        rays.extend(segments(&rays.clone(), 0.3));
        for config in configs() {
            let dacrt = Dacrt::new(&tris, config);
            let bad = differences(&dacrt, &brute, &rays);
            assert!(
                bad.is_empty(),
                "seed {seed}, {}:\n{}",
                config.spec(),
                bad.join("\n")
            );
        }
    }
}

#[test]
fn standard_scenes_equal_the_bvh() {
    let scenes = [
        "bunny/bun_zipper.ply",
        "sponza-dabrovic/sponza.obj",
        "conference-69k/conference.obj",
        "sibenik/sibenik.obj",
        "cornell-box/mcguire/CornellBox-Original.obj",
        "caustics-mnrt/MNRing.obj",
    ];
    for scene in scenes {
        let Some(tris) = scenes::load(scene) else {
            continue;
        };
        let mut rays = scenes::rays(&tris, 20_000, 11, 5);
        let size = scenes_size(&tris);
        rays.extend(segments(&rays.clone(), 0.05 * size));
        let reference = build_accel("bvh-binned", &tris).unwrap();
        for config in configs() {
            let dacrt = Dacrt::new(&tris, config);
            let bad = differences(&dacrt, reference.as_ref(), &rays);
            assert!(
                bad.is_empty(),
                "{scene}, {}:\n{}",
                config.spec(),
                bad.join("\n")
            );
        }
        eprintln!(
            "{scene}: dacrt (median, rdh) equals bvh-binned on {} rays",
            rays.len()
        );
    }
}

fn scenes_size(tris: &[caustic_geom::Triangle]) -> f32 {
    tris.iter()
        .fold(caustic_geom::Aabb::EMPTY, |b, t| b.union(t.bounds()))
        .diagonal()
}
