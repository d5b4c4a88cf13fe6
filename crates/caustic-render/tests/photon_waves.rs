//! Photon mapping and SPPM on the CPU by waves (`TraceMode::Wavefront`,
//! batched queries; what `Auto` picks for divide-and-conquer ray tracing,
//! DACRT) against one ray at a time: the same photon maps record for
//! record, the same images bit for bit, the same ray counts, on a BVH and
//! on DACRT (median and RDH splits). Small images and photon counts, so
//! that the 2-core CI runs them in seconds.

use caustic_accel::Accel;
use caustic_accel::dacrt::{Dacrt, DacrtConfig};
use caustic_render::photon::irradiance_samples::SampleSettings;
use caustic_render::photon::{
    self, GlobalRule, Photon, PhotonMaps, PhotonRenderSettings, PhotonSettings, trace_photon_range,
};
use caustic_render::sppm::{self, SppmSettings};
use caustic_render::{Film, RenderScene, TraceMode};
use caustic_scene::Scene;

fn builtin(name: &str) -> Scene {
    Scene::builtin(name).expect("a built-in scene")
}

fn bvh(scene: &Scene) -> RenderScene {
    RenderScene::new(scene, "bvh-wide").expect("the scene flattens")
}

fn dacrt(scene: &Scene, config: DacrtConfig) -> RenderScene {
    let accel: Box<dyn Accel> = Box::new(Dacrt::new(&scene.triangles(), config));
    RenderScene::with_accel(scene, accel)
}

fn bytes(photons: &[Photon]) -> &[u8] {
    bytemuck::cast_slice(photons)
}

/// Both maps record for record (every bit), and the counts.
fn assert_same_maps(got: &PhotonMaps, want: &PhotonMaps, how: &str) {
    assert_eq!(got.global.len(), want.global.len(), "{how}: global photons");
    assert_eq!(
        got.caustic.len(),
        want.caustic.len(),
        "{how}: caustic photons"
    );
    assert!(
        bytes(&got.global) == bytes(&want.global),
        "{how}: global records differ"
    );
    assert!(
        bytes(&got.caustic) == bytes(&want.caustic),
        "{how}: caustic records differ"
    );
    assert_eq!(got.stats.rays, want.stats.rays, "{how}: rays traced");
}

/// The wave tracer on a BVH (forced) and on DACRT (`Auto`) against the
/// per-photon tracer, for a full pass, a caustic-only pass, a share of a
/// pass (a team member's) and few bounces with another global rule.
#[test]
fn photon_waves_trace_the_per_photon_maps() {
    let scene = builtin("cornell-caustics");
    let bvh = bvh(&scene);
    let median = dacrt(&scene, DacrtConfig::MEDIAN);
    let passes = [
        (
            "full pass",
            PhotonSettings {
                photons: 6000,
                ..PhotonSettings::default()
            },
            0..6000,
            false,
        ),
        (
            "caustic pass",
            PhotonSettings {
                photons: 6000,
                seed: 3,
                ..PhotonSettings::default()
            },
            0..6000,
            true,
        ),
        (
            "a share",
            PhotonSettings {
                photons: 9000,
                ..PhotonSettings::default()
            },
            2500..7100,
            false,
        ),
        (
            "3 bounces, indirect only",
            PhotonSettings {
                photons: 5000,
                max_bounces: 3,
                global_rule: GlobalRule::IndirectOnly,
                seed: 11,
                ..PhotonSettings::default()
            },
            0..5000,
            false,
        ),
    ];
    for (name, settings, share, caustic_only) in passes {
        let per_photon = PhotonSettings {
            trace: TraceMode::PerRay,
            ..settings.clone()
        };
        let want = trace_photon_range(&bvh, &per_photon, share.clone(), caustic_only);
        assert!(!want.caustic.is_empty(), "{name}: no caustic photons");
        assert!(
            caustic_only || !want.global.is_empty(),
            "{name}: no global photons"
        );
        let waves = PhotonSettings {
            trace: TraceMode::Wavefront,
            ..settings.clone()
        };
        let got = trace_photon_range(&bvh, &waves, share.clone(), caustic_only);
        assert_same_maps(&got, &want, &format!("{name}, bvh-wide by waves"));
        let got = trace_photon_range(&median, &settings, share, caustic_only);
        assert_same_maps(&got, &want, &format!("{name}, dacrt (auto)"));
    }
}

/// Photon-render settings small enough for CI (DACRT answers the few
/// rays left after many bounces by brute force over the triangles, so
/// photons make at most 8 bounces, eye and gather rays 6 specular ones):
/// both maps from passes of their own,
/// and `gather` rays per final gather (0: the global map read directly) at
/// irradiance samples `spacing` pixels apart.
fn photon_settings(size: u32, gather: u32, spacing: f32) -> PhotonRenderSettings {
    PhotonRenderSettings {
        width: size,
        height: size,
        spp: 2,
        max_depth: 6,
        light_samples: 2,
        global_photons: 8000,
        caustic_photons: 12_000,
        photon_bounces: 8,
        gather_rays: gather,
        samples: SampleSettings {
            spacing,
            ..SampleSettings::default()
        },
        ..PhotonRenderSettings::default()
    }
}

fn photon_render(
    rs: &RenderScene,
    scene: &Scene,
    settings: &PhotonRenderSettings,
    trace: TraceMode,
) -> (Film, photon::PhotonRenderStats) {
    let settings = PhotonRenderSettings {
        trace,
        ..settings.clone()
    };
    photon::render(rs, &scene.camera_or_default(), &settings, &|_| {}).expect("the render runs")
}

/// Photon renders by waves on a BVH and on DACRT against the per-ray BVH
/// render: the final gather at irradiance samples (centre rays, sample
/// gathers, point gathers), at every shading point, and the global map
/// read directly.
#[test]
fn photon_renders_by_waves_are_the_per_ray_image() {
    let cases = [
        ("cornell-caustics", photon_settings(32, 16, 4.0), true),
        ("cornell-box", photon_settings(24, 9, 0.0), false),
        ("cornell-caustics", photon_settings(32, 0, 4.0), false),
    ];
    for (name, settings, every_split) in cases {
        let scene = builtin(name);
        let bvh = bvh(&scene);
        let (want, stats) = photon_render(&bvh, &scene, &settings, TraceMode::PerRay);
        assert!(want.mean().max_element() > 0.0, "{name}: black image");
        // Every way of valuing a diffuse end is exercised: samples placed
        // and gathered, points gathered where no sample covers them.
        let gathers = settings.gather_rays > 0;
        let spaced = settings.samples.spacing > 0.0;
        assert_eq!(stats.samples > 0, gathers && spaced, "{name}: samples");
        assert_eq!(stats.point_gathers > 0, gathers, "{name}: point gathers");
        let how = format!(
            "{name}, {} gather rays, spacing {}",
            settings.gather_rays, settings.samples.spacing
        );
        let median = dacrt(&scene, DacrtConfig::MEDIAN);
        let mut renders = vec![
            (
                "bvh-wide by waves",
                photon_render(&bvh, &scene, &settings, TraceMode::Wavefront),
            ),
            (
                "dacrt (auto)",
                photon_render(&median, &scene, &settings, TraceMode::Auto),
            ),
        ];
        if every_split {
            let rdh = dacrt(&scene, DacrtConfig::RDH);
            renders.push((
                "dacrt:split=rdh (auto)",
                photon_render(&rdh, &scene, &settings, TraceMode::Auto),
            ));
        }
        for (tracer, (film, got)) in renders {
            let differing = film.pixels_differing_from(&want);
            assert_eq!(
                differing, 0,
                "{how}, {tracer}: {differing} pixels differ from per ray"
            );
            assert_eq!(
                got.global_stored, stats.global_stored,
                "{how}, {tracer}: global map"
            );
            assert_eq!(
                got.caustic_stored, stats.caustic_stored,
                "{how}, {tracer}: caustic map"
            );
            assert_eq!(
                got.samples, stats.samples,
                "{how}, {tracer}: irradiance samples"
            );
            assert_eq!(
                got.point_gathers, stats.point_gathers,
                "{how}, {tracer}: point gathers"
            );
            assert_eq!(got.rays, stats.rays, "{how}, {tracer}: rays traced");
        }
    }
}

fn sppm_render(
    rs: &RenderScene,
    scene: &Scene,
    settings: &SppmSettings,
    trace: TraceMode,
) -> (Film, sppm::SppmStats) {
    let settings = SppmSettings {
        trace,
        ..settings.clone()
    };
    sppm::render(rs, &scene.camera_or_default(), &settings, &|_| {}).expect("the render runs")
}

/// SPPM by waves (eye passes, their shadow rays, the photon passes) on a
/// BVH and on DACRT against the per-ray BVH render.
#[test]
fn sppm_renders_by_waves_are_the_per_ray_image() {
    for name in ["cornell-caustics", "cornell-box"] {
        let scene = builtin(name);
        let settings = SppmSettings {
            width: 32,
            height: 24,
            passes: 3,
            photons_per_pass: 4000,
            max_depth: 12,
            light_samples: 2,
            seed: 5,
            ..SppmSettings::default()
        };
        let bvh = bvh(&scene);
        let (want, stats) = sppm_render(&bvh, &scene, &settings, TraceMode::PerRay);
        assert!(want.mean().max_element() > 0.0, "{name}: black image");
        let renders = [
            (
                "bvh-wide by waves",
                sppm_render(&bvh, &scene, &settings, TraceMode::Wavefront),
            ),
            (
                "dacrt (auto)",
                sppm_render(
                    &dacrt(&scene, DacrtConfig::MEDIAN),
                    &scene,
                    &settings,
                    TraceMode::Auto,
                ),
            ),
            (
                "dacrt:split=rdh (auto)",
                sppm_render(
                    &dacrt(&scene, DacrtConfig::RDH),
                    &scene,
                    &settings,
                    TraceMode::Auto,
                ),
            ),
        ];
        for (tracer, (film, got)) in renders {
            let differing = film.pixels_differing_from(&want);
            assert_eq!(
                differing, 0,
                "{name}, {tracer}: {differing} pixels differ from per ray"
            );
            assert_eq!(
                got.photons_stored, stats.photons_stored,
                "{name}, {tracer}: photons stored"
            );
            assert_eq!(got.deposits, stats.deposits, "{name}, {tracer}: deposits");
            assert_eq!(got.rays, stats.rays, "{name}, {tracer}: rays traced");
        }
    }
}
