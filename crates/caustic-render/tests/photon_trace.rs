//! Photon tracing against closed-form power balances, on the Cornell
//! scenes, and across thread counts.
//!
//! In a closed box every emitted photon hits a wall, so the photons stored
//! at first hits carry exactly the lights' power; with albedo `ρ` the
//! `b`-th bounce carries `ρ^b` of it on average, so all stored photons
//! together carry `Φ / (1 − ρ)`. These check the emission weights, the
//! normalisation by the emitted count and the Russian roulette at once.

use caustic_geom::{DVec3, Rgb, Vec3};
use caustic_render::RenderScene;
use caustic_render::photon::{
    GlobalRule, Photon, PhotonMaps, PhotonSettings, RouletteRule, trace_photons,
};
use caustic_scene::{Bsdf, Light, Material, Mesh, Scene};
use std::f32::consts::PI;

/// An axis-aligned quad `[-s, s]²` at `y = height` (normal up or down).
fn quad_y(s: f32, height: f32, normal_up: bool, material: u32) -> Mesh {
    let positions = vec![
        Vec3::new(-s, height, -s),
        Vec3::new(s, height, -s),
        Vec3::new(s, height, s),
        Vec3::new(-s, height, s),
    ];
    let indices = if normal_up {
        vec![[0, 3, 2], [0, 2, 1]]
    } else {
        vec![[0, 1, 2], [0, 2, 3]]
    };
    Mesh {
        name: "quad".into(),
        positions,
        indices,
        material_ids: vec![material; 2],
        ..Default::default()
    }
}

/// The closed cube `[-1, 1]³`, normals inwards, material 0.
fn closed_cube() -> Mesh {
    let positions: Vec<Vec3> = (0..8)
        .map(|i| {
            Vec3::new((i & 1) as f32, ((i >> 1) & 1) as f32, ((i >> 2) & 1) as f32) * 2.0 - 1.0
        })
        .collect();
    // Each face wound so that its normal points into the cube.
    let faces = [
        [0, 1, 3, 2], // z = -1
        [4, 6, 7, 5], // z = +1
        [0, 4, 5, 1], // y = -1
        [2, 3, 7, 6], // y = +1
        [0, 2, 6, 4], // x = -1
        [1, 5, 7, 3], // x = +1
    ];
    let indices = faces
        .iter()
        .flat_map(|f| [[f[0], f[1], f[2]], [f[0], f[2], f[3]]])
        .collect();
    Mesh {
        name: "cube".into(),
        positions,
        indices,
        material_ids: vec![0; 12],
        ..Default::default()
    }
}

/// Sum of the photons' powers, accumulated in f64 (an f32 sum of 10^5
/// equal powers is off by about 0.1 %).
fn total_power(photons: &[Photon]) -> Rgb {
    let sum: DVec3 = photons.iter().map(|p| p.power().as_dvec3()).sum();
    sum.as_vec3()
}

fn trace(scene: &Scene, settings: &PhotonSettings) -> PhotonMaps {
    let rs = RenderScene::new(scene, "bvh-binned").unwrap();
    trace_photons(&rs, settings)
}

fn assert_close(got: Rgb, want: Rgb, tolerance: f32, what: &str) {
    let err = ((got - want) / want).abs().max_element();
    assert!(
        err < tolerance,
        "{what}: got {got}, want {want} (relative error {err:.4})"
    );
}

fn cube_with_point_light(albedo: Rgb, intensity: Rgb) -> Scene {
    Scene {
        meshes: vec![closed_cube()],
        materials: vec![Material::diffuse("walls", albedo)],
        lights: vec![Light::Point {
            position: Vec3::new(0.1, 0.2, -0.3),
            intensity,
        }],
        ..Default::default()
    }
}

#[test]
fn closed_box_power_balance_with_both_roulette_rules() {
    let intensity = Rgb::new(1.0, 2.0, 3.0);
    let phi = 4.0 * PI * intensity;
    // The mean rule scales a channel by albedo / mean(albedo) per bounce:
    // its variance is finite only while max(albedo)² < mean(albedo), so it
    // gets a tamer colour (with (0.8, 0.4, 0.2) its red sum runs about 5 %
    // low at 10^5 photons: unbiased, but heavy-tailed).
    for (roulette, albedo) in [
        (RouletteRule::MaxAlbedo, Rgb::new(0.8, 0.4, 0.2)),
        (RouletteRule::MeanAlbedo, Rgb::new(0.6, 0.5, 0.4)),
    ] {
        let scene = cube_with_point_light(albedo, intensity);
        let settings = |global_rule| PhotonSettings {
            photons: 100_000,
            global_rule,
            roulette,
            max_bounces: 200,
            seed: 1,
            ..PhotonSettings::default()
        };
        let all = trace(&scene, &settings(GlobalRule::All));
        assert_close(all.light_power, phi, 1e-6, "light power");
        let want = phi / (Rgb::ONE - albedo);
        let what = format!("all bounces, {roulette:?}");
        assert_close(total_power(&all.global), want, 0.02, &what);
        assert!(all.caustic.is_empty(), "no specular surface, no caustics");
        let later = trace(&scene, &settings(GlobalRule::AfterFirstBounce));
        // Same seed, same paths: the difference is exactly the first hits,
        // each of which carries phi / N.
        let first = total_power(&all.global) - total_power(&later.global);
        assert_close(first, phi, 1e-3, "first hits");
        let want = phi * albedo / (Rgb::ONE - albedo);
        assert_close(total_power(&later.global), want, 0.03, "later bounces");
    }
}

#[test]
fn max_albedo_roulette_never_raises_a_channel() {
    let scene = cube_with_point_light(Rgb::new(0.9, 0.1, 0.5), Rgb::ONE);
    let maps = trace(
        &scene,
        &PhotonSettings {
            photons: 20_000,
            global_rule: GlobalRule::All,
            ..Default::default()
        },
    );
    let start = 4.0 * PI / 20_000.0;
    for p in &maps.global {
        assert!(
            p.power().max_element() <= start * (1.0 + 1e-5),
            "{:?}",
            p.power()
        );
    }
}

#[test]
fn area_spot_and_directional_lights_deliver_their_power() {
    let radiance = Rgb::new(5.0, 4.0, 3.0);
    let mut light = Material::diffuse("light", Rgb::splat(0.5));
    light.emission = radiance;
    light.two_sided = false;
    let area = Scene {
        meshes: vec![closed_cube(), quad_y(0.25, 0.9, false, 1)],
        materials: vec![Material::diffuse("walls", Rgb::splat(0.5)), light],
        ..Default::default()
    };
    let intensity = Rgb::new(2.0, 1.0, 0.5);
    let spot = Scene {
        meshes: vec![closed_cube()],
        materials: vec![Material::diffuse("walls", Rgb::splat(0.5))],
        lights: vec![Light::Spot {
            position: Vec3::new(0.0, 0.8, 0.0),
            direction: -Vec3::Y,
            intensity,
            cos_falloff_start: 0.9,
            cos_total_width: 0.7,
        }],
        ..Default::default()
    };
    let irradiance = Rgb::new(3.0, 2.0, 1.0);
    let sun = Scene {
        meshes: vec![quad_y(1.0, 0.0, true, 0)],
        materials: vec![Material::diffuse("floor", Rgb::splat(0.5))],
        lights: vec![Light::Directional {
            direction: -Vec3::Y,
            irradiance,
        }],
        ..Default::default()
    };
    let settings = PhotonSettings {
        photons: 100_000,
        global_rule: GlobalRule::All,
        max_bounces: 1,
        ..Default::default()
    };
    // One bounce: only first hits are stored.
    let area_power = PI * 0.25 * radiance; // pi * A * L with A = 0.5²
    let maps = trace(&area, &settings);
    assert_close(maps.light_power, area_power, 1e-5, "area light power");
    assert_close(
        total_power(&maps.global),
        area_power,
        1e-3,
        "area light first hits",
    );
    let spot_power = 2.0 * PI * ((1.0 - 0.9) + 0.5 * (0.9 - 0.7)) * intensity;
    let maps = trace(&spot, &settings);
    assert_close(maps.light_power, spot_power, 1e-5, "spot power");
    assert_close(
        total_power(&maps.global),
        spot_power,
        0.01,
        "spot first hits",
    );
    // The floor (area 4) intercepts E * 4 of the sun's disc.
    let maps = trace(&sun, &settings);
    assert_close(
        total_power(&maps.global),
        4.0 * irradiance,
        0.02,
        "sun on the floor",
    );
}

#[test]
fn photon_maps_do_not_depend_on_the_thread_count() {
    let scene = Scene::builtin("cornell-caustics").unwrap();
    let rs = RenderScene::new(&scene, "bvh-binned").unwrap();
    let settings = PhotonSettings {
        photons: 30_000,
        seed: 7,
        ..Default::default()
    };
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| trace_photons(&rs, &settings))
    };
    let one = run(1);
    let two = run(2);
    assert!(!one.global.is_empty() && !one.caustic.is_empty());
    assert_eq!(one.global, two.global);
    assert_eq!(one.caustic, two.caustic);
    assert_eq!(one.stats.rays, two.stats.rays);
}

#[test]
fn cornell_maps_hold_the_expected_paths() {
    let settings = PhotonSettings {
        photons: 50_000,
        ..Default::default()
    };
    let boxes = trace(&Scene::builtin("cornell-box").unwrap(), &settings);
    assert!(
        boxes.caustic.is_empty(),
        "cornell-box has no specular surface"
    );
    assert!(
        boxes.global.len() > 50_000,
        "{} global photons",
        boxes.global.len()
    );
    // Light power of refs/README.md: pi * A * L.
    assert_close(
        boxes.light_power,
        Rgb::new(10.0972, 7.6811, 3.7087),
        1e-3,
        "refs light power",
    );

    let caustics = trace(&Scene::builtin("cornell-caustics").unwrap(), &settings);
    assert!(
        caustics.caustic.len() > 1000,
        "{} caustic photons",
        caustics.caustic.len()
    );
    for p in caustics.global.iter().chain(&caustics.caustic) {
        let x = p.position();
        assert!(
            x.abs().max_element() <= 1.0 + 1e-3,
            "photon outside the room at {x}"
        );
        assert!(
            p.normal().dot(p.incoming()) > 0.0,
            "photon stored on the far side"
        );
    }
    // The glass sphere (centre (0.45, -0.67, 0.40), r = 0.33, touching the
    // floor) focuses light onto the floor around its contact point: the
    // floor's densest 0.1 x 0.1 patch of caustic power lies next to it.
    let mut cells = vec![Rgb::ZERO; 400];
    for p in caustics.caustic.iter().filter(|p| p.position().y < -0.99) {
        let x = p.position();
        let i = (((x.x + 1.0) * 10.0) as usize).min(19);
        let j = (((x.z + 1.0) * 10.0) as usize).min(19);
        cells[j * 20 + i] += p.power();
    }
    let densest = (0..400)
        .max_by(|&a, &b| cells[a].element_sum().total_cmp(&cells[b].element_sum()))
        .unwrap();
    let centre = Vec3::new(
        (densest % 20) as f32 * 0.1 - 0.95,
        -1.0,
        (densest / 20) as f32 * 0.1 - 0.95,
    );
    let contact = Vec3::new(0.45, -1.0, 0.40);
    assert!(
        centre.distance(contact) < 0.3,
        "densest caustic at {centre}"
    );
}

#[test]
fn mirror_photons_are_caustics_until_a_diffuse_bounce() {
    // A mirror floor under a point light, a diffuse ceiling: photons reach
    // the ceiling either straight (L D: global only with All) or via the
    // mirror (L S D: caustic).
    let scene = Scene {
        meshes: vec![quad_y(1.0, 0.0, true, 0), quad_y(1.0, 1.0, false, 1)],
        materials: vec![
            Material::with_bsdf(
                "mirror",
                Bsdf::Mirror {
                    reflectance: Rgb::splat(0.5),
                },
            ),
            Material::diffuse("ceiling", Rgb::splat(0.5)),
        ],
        lights: vec![Light::Point {
            position: Vec3::new(0.0, 0.5, 0.0),
            intensity: Rgb::ONE,
        }],
        ..Default::default()
    };
    let maps = trace(
        &scene,
        &PhotonSettings {
            photons: 20_000,
            max_bounces: 2,
            ..Default::default()
        },
    );
    // With two interactions, a global photon needs a bounce before the
    // ceiling, and the only such path is L S D: the two maps coincide.
    assert!(!maps.caustic.is_empty());
    assert_eq!(maps.global, maps.caustic);
    assert!(
        maps.caustic
            .iter()
            .all(|p| (p.position().y - 1.0).abs() < 1e-4)
    );
    let indirect = trace(
        &scene,
        &PhotonSettings {
            photons: 20_000,
            max_bounces: 2,
            global_rule: GlobalRule::IndirectOnly,
            ..Default::default()
        },
    );
    assert!(
        indirect.global.is_empty(),
        "no L .. D .. D path in two interactions"
    );
}
