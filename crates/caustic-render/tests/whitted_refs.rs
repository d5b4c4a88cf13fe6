//! Whitted renders of the Mitsuba reference scenes against the independent
//! references in `shared/refs` (linear RMSE). Skips, saying so, when the
//! references are absent.
//!
//! The bounds come from measurements (docs/BENCHMARKS.md, "Image checks"):
//! the RMSE falls with the sample count towards the reference's own noise,
//! and each bound sits 25 % above the value measured at the budget
//! used here, so a real error (a wrong camera, a missing light term, a
//! wrong Fresnel factor) fails the test while sampling noise does not.

use caustic_render::whitted::{self, WhittedSettings};
use caustic_render::{Film, RenderScene, image_io};
use caustic_scene::Scene;
use caustic_scene::data_dirs::ref_file;

fn render_xml(xml: &std::path::Path, spp: u32, light_samples: u32) -> Film {
    let scene = Scene::load(xml).expect("reference scene loads");
    let camera = scene.camera.expect("reference scene has a camera");
    let film_size = scene.film.expect("reference scene has a film");
    let rs = RenderScene::new(&scene, "bvh-binned").unwrap();
    let settings = WhittedSettings {
        width: film_size.width,
        height: film_size.height,
        spp,
        light_samples,
        max_depth: 64,
        ..Default::default()
    };
    whitted::render(&rs, &camera, &settings, &|_| {}).0
}

fn check(scene: &str, rmse_bound: f64) {
    let (Some(xml), Some(reference)) = (
        ref_file(&format!("{scene}/{scene}.xml")),
        ref_file(&format!("{scene}/{scene}_whitted.exr")),
    ) else {
        return;
    };
    let film = render_xml(&xml, SPP, LIGHT_SAMPLES);
    let reference = image_io::read_exr(&reference).unwrap();
    let rmse = image_io::rmse(&film, &reference).unwrap();
    let (mean, ref_mean) = (film.mean(), reference.mean());
    eprintln!(
        "{scene}: {SPP} spp x {LIGHT_SAMPLES} light samples: RMSE {rmse:.5}, mean {mean} vs {ref_mean}"
    );
    assert!(rmse < rmse_bound, "{scene}: RMSE {rmse} >= {rmse_bound}");
    // The image mean averages the noise away: it checks the estimator's
    // expectation (camera, light units, cosines, Fresnel) to a fraction of
    // a percent.
    let relative = ((mean - ref_mean) / ref_mean).abs().max_element();
    assert!(
        relative < 0.005,
        "{scene}: mean {mean} vs reference {ref_mean}"
    );
}

/// The test budget: primary rays per pixel and shadow rays per area light.
const SPP: u32 = 4;
const LIGHT_SAMPLES: u32 = 4;

#[test]
fn cornell_box_matches_mitsuba_whitted() {
    check("cornell-box", CORNELL_BOX_BOUND);
}

#[test]
fn cornell_caustics_matches_mitsuba_whitted() {
    check("cornell-caustics", CORNELL_CAUSTICS_BOUND);
}

/// Measured RMSE at 4 spp x 4 light samples with the counter-based random
/// numbers of `draw` (0.0601 and 0.0640; the render is
/// deterministic for a seed) with 25 % headroom for floating-point
/// differences between machines. With the earlier per-pixel streams the
/// same budget measured 0.0555 and 0.0609, and 16 and 64 spp measured
/// 0.0197 / 0.0084 and 0.0209 / 0.0089: the error falls as 1/sqrt(spp)
/// towards the references' own noise (0.0004 and 0.0007).
const CORNELL_BOX_BOUND: f64 = 0.075;
const CORNELL_CAUSTICS_BOUND: f64 = 0.080;
