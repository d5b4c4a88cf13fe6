//! The built-in scenes are the reference scenes of `refs/`: the same
//! triangles in the same order, materials, light, camera and film as loading
//! the reference XML files (compared when `refs/` is present), and spheres
//! that are exact level-5 icospheres.

use caustic_geom::{Rgb, Vec3};
use caustic_scene::{BUILTIN_SCENES, Bsdf, FilmSize, Material, Scene};

const SPHERE_RADIUS: f32 = 0.33;
const MIRROR_CENTER: Vec3 = Vec3::new(-0.42, -0.67, -0.35);
const GLASS_CENTER: Vec3 = Vec3::new(0.45, -0.67, 0.40);

fn builtin(name: &str) -> Scene {
    Scene::builtin(name).unwrap_or_else(|| panic!("no built-in scene '{name}'"))
}

/// The material of every triangle, in scene triangle order.
fn triangle_materials(scene: &Scene) -> Vec<&Material> {
    scene
        .meshes
        .iter()
        .flat_map(|m| m.material_ids.iter())
        .map(|&id| &scene.materials[id as usize])
        .collect()
}

/// Same triangles (to 1e-6), same material on each (names aside), same
/// camera, film, lights and background.
fn assert_same_scene(built: &Scene, loaded: &Scene) {
    assert_eq!(built.triangle_count(), loaded.triangle_count());
    for (i, (a, b)) in built.triangles().iter().zip(loaded.triangles()).enumerate() {
        for (p, q) in [(a.v0, b.v0), (a.v1, b.v1), (a.v2, b.v2)] {
            assert!(
                (p - q).abs().max_element() <= 1e-6,
                "triangle {i}: {a:?} vs {b:?}"
            );
        }
    }
    for (i, (a, b)) in triangle_materials(built)
        .into_iter()
        .zip(triangle_materials(loaded))
        .enumerate()
    {
        assert_eq!(
            (a.bsdf, a.emission, a.two_sided),
            (b.bsdf, b.emission, b.two_sided),
            "triangle {i}: {} vs {}",
            a.name,
            b.name
        );
    }
    assert_eq!(built.camera, loaded.camera);
    assert_eq!(built.film, loaded.film);
    assert_eq!(built.lights, loaded.lights);
    assert_eq!(built.background, loaded.background);
}

#[test]
fn every_listed_scene_builds_and_unknown_names_do_not() {
    assert!(BUILTIN_SCENES.len() >= 2);
    for (name, description) in BUILTIN_SCENES {
        assert!(!description.is_empty());
        let scene = builtin(name);
        assert!(scene.triangle_count() > 0);
        assert!(scene.camera.is_some_and(|c| c.is_valid()), "{name}");
        let materials = scene.materials.len() as u32;
        for mesh in &scene.meshes {
            assert_eq!(mesh.material_ids.len(), mesh.indices.len());
            assert!(mesh.material_ids.iter().all(|&m| m < materials), "{name}");
            for i in 0..mesh.indices.len() {
                assert!(mesh.triangle(i).area() > 0.0, "{name}/{}", mesh.name);
            }
        }
    }
    assert!(Scene::builtin("no-such-scene").is_none());
}

#[test]
fn cornell_box_matches_the_reference_xml() {
    let Some(path) = caustic_scene::data_dirs::ref_file("cornell-box/cornell-box.xml") else {
        return;
    };
    assert_same_scene(&builtin("cornell-box"), &Scene::load(path).unwrap());
}

#[test]
fn cornell_caustics_matches_the_reference_xml() {
    let Some(path) = caustic_scene::data_dirs::ref_file("cornell-caustics/cornell-caustics.xml")
    else {
        return;
    };
    assert_same_scene(&builtin("cornell-caustics"), &Scene::load(path).unwrap());
}

#[test]
fn cornell_box_has_the_readme_numbers() {
    let scene = builtin("cornell-box");
    assert_eq!(scene.triangle_count(), 36);
    assert_eq!(
        scene.film,
        Some(FilmSize {
            width: 512,
            height: 512
        })
    );
    let emissive: Vec<&Material> = scene
        .emissive_materials()
        .map(|i| &scene.materials[i])
        .collect();
    assert_eq!(emissive.len(), 1);
    assert_eq!(emissive[0].emission, Rgb::new(18.387, 13.9873, 6.75357));
    assert!(scene.materials.iter().all(|m| !m.two_sided));
    // Total light power pi * A * L of the README: (10.0972, 7.6811, 3.7087).
    let light = scene.meshes.iter().find(|m| m.name == "light").unwrap();
    let area: f32 = (0..2).map(|i| light.triangle(i).area()).sum();
    let power = std::f32::consts::PI * area * emissive[0].emission;
    assert!(
        (power - Rgb::new(10.0972, 7.6811, 3.7087))
            .abs()
            .max_element()
            < 1e-3
    );
}

#[test]
fn cornell_caustics_spheres_are_level_5_icospheres_on_the_sphere() {
    let scene = builtin("cornell-caustics");
    // Five room quads and the light quad, then two 20480-triangle spheres.
    assert_eq!(scene.triangle_count(), 6 * 2 + 2 * 20480);
    for (name, center, bsdf) in [
        (
            "mirror_sphere",
            MIRROR_CENTER,
            Bsdf::Mirror {
                reflectance: Rgb::ONE,
            },
        ),
        (
            "glass_sphere",
            GLASS_CENTER,
            Bsdf::Dielectric {
                ior: 1.5,
                tint: Rgb::ONE,
            },
        ),
    ] {
        let sphere = scene.meshes.iter().find(|m| m.name == name).unwrap();
        assert_eq!(sphere.indices.len(), 20480);
        assert_eq!(sphere.positions.len(), 10242);
        for p in &sphere.positions {
            let r = (*p - center).length();
            assert!((r - SPHERE_RADIUS).abs() < 1e-6, "{name}: |p - c| = {r}");
        }
        for i in 0..sphere.indices.len() {
            let tri = sphere.triangle(i);
            assert!(tri.cross().dot(tri.centroid() - center) > 0.0, "{name} {i}");
        }
        // The south pole touches the floor.
        let lowest = sphere
            .positions
            .iter()
            .map(|p| p.y)
            .fold(f32::MAX, f32::min);
        assert!((lowest + 1.0).abs() < 1e-6);
        assert_eq!(scene.materials[sphere.material_ids[0] as usize].bsdf, bsdf);
    }
}

/// The moving Cornell box: frame 0 is `cornell-caustics`; the glass sphere
/// hops to x = -0.45 at the middle and back, never into the floor, the
/// walls or the mirror sphere.
#[test]
fn cornell_caustics_moving_hops_across_the_box() {
    let still = builtin("cornell-caustics");
    let scene = builtin("cornell-caustics-moving");
    let clock = scene.timeline().expect("animated");
    assert_eq!((clock.start, clock.end, clock.frames), (0.0, 4.0, 121));
    assert_eq!(clock.fps(), Some(30.0));
    assert_eq!(scene.meshes, still.meshes);
    let animation = scene.animation.as_ref().unwrap();
    let glass = scene.meshes.len() - 1;
    assert_eq!(animation.moving_meshes(), [glass]);
    assert!(animation.fixed_topology());
    let center = |s: &Scene| s.meshes[glass].bounds().center();
    let mid = scene.at_time(2.0);
    assert!((center(&mid) - caustic_geom::Vec3::new(-0.45, -0.67, 0.40)).length() < 1e-3);
    assert!(center(&scene.at_time(1.0)).y > -0.3);
    let mirror = scene.meshes[glass - 1].bounds().center();
    for frame in 0..clock.frames {
        let posed = scene.at_frame(frame);
        let b = posed.meshes[glass].bounds();
        assert!(
            b.min.y >= -1.0 - 1e-3 && b.min.x > -1.0 && b.max.x < 1.0,
            "frame {frame}: {b:?}"
        );
        assert!(center(&posed).distance(mirror) > 0.66, "frame {frame}");
        assert_eq!(posed.triangle_count(), scene.triangle_count());
    }
    assert!(!still.is_animated());
}
