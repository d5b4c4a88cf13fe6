//! The standard scenes (`shared/scenes`, unpacked) and the reference
//! scenes' parts (`shared/refs`), when present: triangle counts, materials.

mod common;

use caustic_geom::Rgb;
use caustic_scene::{Bsdf, Scene, data_dirs};
use common::*;

// --------------------------------------------------------- real scenes --

fn load_real(relative: &str) -> Option<Scene> {
    let path = data_dirs::scene_file(relative)?;
    let start = std::time::Instant::now();
    let scene = Scene::load(&path).unwrap_or_else(|e| panic!("{e}"));
    eprintln!(
        "{relative}: {} triangles, {} materials, {} textures in {:.3} s",
        scene.triangle_count(),
        scene.materials.len(),
        scene.textures.len(),
        start.elapsed().as_secs_f64()
    );
    for w in &scene.warnings {
        eprintln!("  warning: {w}");
    }
    Some(scene)
}

/// Triangles the loader read, counting the zero-area ones it then dropped
/// (from its "skipped N ... triangle(s)" warnings): the file's face count.
fn triangles_in_file(scene: &Scene) -> usize {
    let dropped: usize = scene
        .warnings
        .iter()
        .filter(|w| w.message.ends_with("triangle(s)"))
        .filter_map(|w| {
            w.message
                .split("skipped ")
                .nth(1)?
                .split(' ')
                .next()?
                .parse::<usize>()
                .ok()
                // Identical warnings of same-named meshes are collapsed.
                .map(|n| n * w.count)
        })
        .sum();
    scene.triangle_count() + dropped
}

#[test]
fn real_bunny() {
    let Some(scene) = load_real("bunny/bun_zipper.ply") else {
        return;
    };
    assert_eq!(triangles_in_file(&scene), 69451);
}

#[test]
fn real_dragon() {
    let Some(scene) = load_real("dragon/dragon_vrip.ply") else {
        return;
    };
    assert_eq!(triangles_in_file(&scene), 871414);
}

#[test]
fn real_sponza() {
    let Some(scene) = load_real("sponza-dabrovic/sponza.obj") else {
        return;
    };
    assert_eq!(triangles_in_file(&scene), 66450);
    assert!(!scene.textures.is_empty());
}

#[test]
fn real_sibenik() {
    let Some(scene) = load_real("sibenik/sibenik.obj") else {
        return;
    };
    assert_eq!(triangles_in_file(&scene), 73564);
    assert!(
        scene
            .materials
            .iter()
            .any(|m| matches!(m.bsdf, Bsdf::Dielectric { .. }))
    );
}

#[test]
fn real_conference() {
    let Some(scene) = load_real("conference-69k/conference.obj") else {
        return;
    };
    assert_eq!(triangles_in_file(&scene), 69047);
}

#[test]
fn real_cornell_box_original() {
    let Some(scene) = load_real("cornell-box/mcguire/CornellBox-Original.obj") else {
        return;
    };
    assert_eq!(scene.triangle_count(), 36);
    let light = scene.materials.iter().find(|m| m.name == "light").unwrap();
    assert_eq!(light.emission, Rgb::new(17.0, 12.0, 4.0));
    assert_eq!(scene.emissive_materials().count(), 1);
    assert!(scene.warnings.is_empty(), "{}", warnings_text(&scene));
}

#[test]
fn real_cornell_box_variants() {
    for (name, triangles) in [("Mirror", 36), ("Sphere", 2188), ("Water", 7088)] {
        let Some(scene) = load_real(&format!("cornell-box/mcguire/CornellBox-{name}.obj")) else {
            return;
        };
        assert_eq!(triangles_in_file(&scene), triangles, "{name}");
        assert!(scene.materials.iter().any(|m| m.is_specular()), "{name}");
    }
}

#[test]
fn refs_cornell_box_parts() {
    for part in [
        "back",
        "ceiling",
        "floor",
        "green_wall",
        "large_box",
        "light",
        "red_wall",
        "small_box",
    ] {
        let Some(path) = data_dirs::ref_file(&format!("cornell-box/{part}.obj")) else {
            continue;
        };
        let scene = Scene::load(&path).unwrap_or_else(|e| panic!("{e}"));
        let expected = if part.ends_with("box") { 12 } else { 2 };
        assert_eq!(scene.triangle_count(), expected, "{part}");
    }
}
