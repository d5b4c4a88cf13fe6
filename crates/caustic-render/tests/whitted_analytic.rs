//! Whitted renderer against closed-form answers on tiny scenes.

use caustic_geom::{Rgb, Vec3};
use caustic_render::RenderScene;
use caustic_render::whitted::{self, WhittedSettings};
use caustic_scene::{Bsdf, Camera, Light, Material, Mesh, Scene};
use std::f32::consts::PI;

/// A square `[-s, s]²` in the plane y = `height`, facing `normal_sign * y`.
fn quad(s: f32, height: f32, normal_up: bool, material: u32) -> Mesh {
    let positions = vec![
        Vec3::new(-s, height, -s),
        Vec3::new(s, height, -s),
        Vec3::new(s, height, s),
        Vec3::new(-s, height, s),
    ];
    // Counter-clockwise seen from +y gives a +y normal.
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

fn looking_down(fov: f32) -> Camera {
    Camera::look_at(Vec3::new(0.0, 1.0, 0.0), Vec3::ZERO, Vec3::Z, fov)
}

fn render_centre(scene: &Scene, camera: &Camera, settings: &WhittedSettings) -> Rgb {
    let rs = RenderScene::new(scene, "bvh-binned").unwrap();
    let (film, _) = whitted::render(&rs, camera, settings, &|_| {});
    film.get(settings.width / 2, settings.height / 2)
}

#[test]
fn point_light_on_lambertian_plane() {
    let albedo = Rgb::new(0.8, 0.5, 0.2);
    let intensity = Rgb::new(3.0, 2.0, 1.0);
    let scene = Scene {
        meshes: vec![quad(10.0, 0.0, true, 0)],
        materials: vec![Material::diffuse("plane", albedo)],
        lights: vec![Light::Point {
            position: Vec3::new(0.0, 2.0, 0.0),
            intensity,
        }],
        ..Default::default()
    };
    let settings = WhittedSettings {
        width: 9,
        height: 9,
        spp: 1,
        ..Default::default()
    };
    // Centre pixel sees the origin: L = albedo / pi * I / d^2 * cos(0), d = 2.
    let got = render_centre(&scene, &looking_down(10.0), &settings);
    let want = albedo / PI * intensity / 4.0;
    assert!((got - want).abs().max_element() < 1e-4, "{got} vs {want}");
}

#[test]
fn square_area_light_matches_the_form_factor() {
    // A one-sided emitting square [-1,1]² at height 1 facing down over a
    // Lambertian floor. The point-to-parallel-rectangle form factor from
    // below its centre is 4 x (2 X/sqrt(1+X²) atan(X/sqrt(1+X²))) / (2 pi)
    // with X = 1, so the floor's radiance there is albedo * L * 4 * F'.
    let albedo = Rgb::splat(0.5);
    let emission = Rgb::new(2.0, 1.0, 0.5);
    let mut light = Material::diffuse("light", Rgb::ZERO);
    light.emission = emission;
    light.two_sided = false;
    let scene = Scene {
        meshes: vec![quad(10.0, 0.0, true, 0), quad(1.0, 1.0, false, 1)],
        materials: vec![Material::diffuse("floor", albedo), light],
        ..Default::default()
    };
    let camera = Camera::look_at(Vec3::new(0.0, 0.5, 0.0), Vec3::ZERO, Vec3::Z, 1.0);
    let settings = WhittedSettings {
        width: 3,
        height: 3,
        spp: 64,
        light_samples: 64,
        ..Default::default()
    };
    let got = render_centre(&scene, &camera, &settings);
    let x = 1.0f32;
    let corner = 2.0 * x / (1.0 + x * x).sqrt() * (x / (1.0 + x * x).sqrt()).atan() / (2.0 * PI);
    let want = albedo * emission * 4.0 * corner;
    let rel = ((got - want) / want).abs().max_element();
    assert!(rel < 0.01, "{got} vs {want}");
}

#[test]
fn mirror_shows_the_emitter_and_one_sided_back_is_black() {
    let emission = Rgb::new(5.0, 4.0, 3.0);
    let mut light = Material::diffuse("light", Rgb::ZERO);
    light.emission = emission;
    light.two_sided = false;
    let mirror = Material::with_bsdf(
        "mirror",
        Bsdf::Mirror {
            reflectance: Rgb::splat(0.5),
        },
    );
    // The camera looks down at a mirror floor; above the camera an emitter
    // faces down. The mirror reflects it: radiance 0.5 * emission.
    let scene = Scene {
        meshes: vec![quad(100.0, 0.0, true, 0), quad(100.0, 2.0, false, 1)],
        materials: vec![mirror, light.clone()],
        ..Default::default()
    };
    let settings = WhittedSettings {
        width: 5,
        height: 5,
        spp: 1,
        ..Default::default()
    };
    let got = render_centre(&scene, &looking_down(10.0), &settings);
    assert!((got - 0.5 * emission).abs().max_element() < 1e-5, "{got}");

    // Flip the emitter to face up: its back faces the mirror, so it is black.
    let flipped = Scene {
        meshes: vec![quad(100.0, 0.0, true, 0), quad(100.0, 2.0, true, 1)],
        ..scene
    };
    let got = render_centre(&flipped, &looking_down(10.0), &settings);
    assert_eq!(got, Rgb::ZERO);
}

#[test]
fn glass_slab_transmits_by_fresnel() {
    // At normal incidence through a glass slab (two interfaces), straight
    // transmission carries (1 - 0.04)^2 of the emitter's radiance plus the
    // inter-reflections 0.04^2 (1 - 0.04)^2 ...: (1-R)^2 / (1 - R^2).
    let emission = Rgb::splat(1.0);
    let mut light = Material::diffuse("light", Rgb::ZERO);
    light.emission = emission;
    light.two_sided = false;
    let glass = Material::with_bsdf(
        "glass",
        Bsdf::Dielectric {
            ior: 1.5,
            tint: Rgb::ONE,
        },
    );
    let scene = Scene {
        meshes: vec![
            quad(100.0, -1.0, true, 1),  // emitter below, facing up
            quad(100.0, 0.0, true, 0),   // slab top, normal up (outside)
            quad(100.0, -0.1, false, 0), // slab bottom, normal down (outside)
        ],
        materials: vec![glass, light],
        ..Default::default()
    };
    let settings = WhittedSettings {
        width: 3,
        height: 3,
        spp: 1,
        max_depth: 20,
        ..Default::default()
    };
    let got = render_centre(&scene, &looking_down(1.0), &settings);
    let r = 0.04f32;
    let want = (1.0 - r) * (1.0 - r) / (1.0 - r * r);
    // Russian roulette on weak branches adds a little noise at one sample.
    assert!((got.x - want).abs() < 0.02, "{got} vs {want}");
}
