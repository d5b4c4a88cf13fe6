//! The CPU Whitted renderer by wavefronts (`TraceMode::Wavefront`,
//! batched queries) renders the per-ray renderer's image bit for bit, on
//! every structure: a BVH and divide-and-conquer ray tracing (DACRT, which
//! builds nothing and traces whole batches), median and RDH splits. Small
//! images, so that the 2-core CI runs them in a second or two.

use caustic_accel::Accel;
use caustic_accel::dacrt::{Dacrt, DacrtConfig};
use caustic_geom::{Rgb, Vec3};
use caustic_render::{
    Film, FresnelMode, RenderScene, RenderStats, TraceMode, WhittedSettings, whitted,
};
use caustic_scene::{Camera, Light, Scene};

/// The plain Cornell box with a point, a spot and a directional light
/// (through its open front) beside its area light (every kind of shadow ray), and the caustics box
/// (a glass sphere: Fresnel-split branches and Russian roulette; a mirror
/// sphere).
fn scenes() -> Vec<(&'static str, Scene)> {
    let mut lit = Scene::builtin("cornell-box").expect("a built-in scene");
    lit.lights.extend([
        Light::Point {
            position: Vec3::new(0.3, 0.6, 0.2),
            intensity: Rgb::new(0.4, 0.3, 0.2),
        },
        Light::Spot {
            position: Vec3::new(-0.4, 0.8, 0.5),
            direction: Vec3::new(0.2, -1.0, -0.1).normalize(),
            intensity: Rgb::splat(0.5),
            cos_falloff_start: 0.9,
            cos_total_width: 0.7,
        },
        Light::Directional {
            direction: Vec3::new(0.1, -0.3, -1.0).normalize(),
            irradiance: Rgb::splat(0.05),
        },
    ]);
    let caustics = Scene::builtin("cornell-caustics").expect("a built-in scene");
    vec![("cornell-box+lights", lit), ("cornell-caustics", caustics)]
}

fn dacrt(scene: &Scene, config: DacrtConfig) -> RenderScene {
    let accel: Box<dyn Accel> = Box::new(Dacrt::new(&scene.triangles(), config));
    RenderScene::with_accel(scene, accel)
}

fn render(rs: &RenderScene, camera: &Camera, settings: &WhittedSettings) -> (Film, RenderStats) {
    whitted::render(rs, camera, settings, &|_| {})
}

/// Every structure and way of tracing against the per-ray BVH render:
/// the same pixels to the bit, the same number of rays. `every_split`:
/// DACRT's RDH split and the `Auto` choice too, else its median split
/// alone (DACRT is slow over few rays, and CI has two cores).
fn check(name: &str, scene: &Scene, settings: WhittedSettings, every_split: bool) {
    let camera = scene.camera_or_default();
    let bvh = RenderScene::new(scene, "bvh-wide").expect("the scene flattens");
    let per_ray = WhittedSettings {
        trace: TraceMode::PerRay,
        ..settings.clone()
    };
    let wavefront = WhittedSettings {
        trace: TraceMode::Wavefront,
        ..settings.clone()
    };
    let auto = WhittedSettings {
        trace: TraceMode::Auto,
        ..settings
    };
    let (reference, stats) = render(&bvh, &camera, &per_ray);
    assert!(reference.mean().max_element() > 0.0, "{name}: black image");
    let median = dacrt(scene, DacrtConfig::MEDIAN);
    let mut renders = vec![
        ("bvh-wide, wavefront", render(&bvh, &camera, &wavefront)),
        ("dacrt, wavefront", render(&median, &camera, &wavefront)),
    ];
    if every_split {
        let rdh = dacrt(scene, DacrtConfig::RDH);
        renders.push(("dacrt, auto", render(&median, &camera, &auto)));
        renders.push((
            "dacrt:split=rdh, wavefront",
            render(&rdh, &camera, &wavefront),
        ));
    }
    for (how, (film, got)) in renders {
        let differing = film.pixels_differing_from(&reference);
        assert_eq!(
            differing, 0,
            "{name}, {how}: {differing} pixels differ from the per-ray bvh-wide image"
        );
        assert_eq!(got.rays, stats.rays, "{name}, {how}: rays traced");
    }
}

#[test]
fn wavefront_whitted_is_the_per_ray_image_on_every_structure() {
    for (name, scene) in scenes() {
        let settings = WhittedSettings {
            width: 21,
            height: 15,
            spp: 4,
            max_depth: 6,
            light_samples: 3,
            ..WhittedSettings::default()
        };
        check(name, &scene, settings, true);
    }
}

/// Non-square sample counts (plain jitter), Schlick's Fresnel, another
/// seed, and the depth limits: no specular bounce at all, and one.
#[test]
fn wavefront_whitted_matches_at_every_depth_and_setting() {
    let scene = Scene::builtin("cornell-caustics").expect("a built-in scene");
    for max_depth in [0, 1, 12] {
        let settings = WhittedSettings {
            width: 13,
            height: 9,
            spp: 3,
            max_depth,
            light_samples: 2,
            fresnel: FresnelMode::Schlick,
            seed: 7,
            ..WhittedSettings::default()
        };
        check(&format!("max depth {max_depth}"), &scene, settings, false);
    }
}

/// The structure decides the default: DACRT prefers batches, a BVH does
/// not.
#[test]
fn only_dacrt_prefers_batches() {
    let scene = Scene::builtin("cornell-box").expect("a built-in scene");
    assert!(dacrt(&scene, DacrtConfig::RDH).accel.prefers_batches());
    let bvh = RenderScene::new(&scene, "bvh-wide").expect("the scene flattens");
    assert!(!bvh.accel.prefers_batches());
}
