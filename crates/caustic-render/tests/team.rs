//! A render shared by a team (`caustic_render::team`) is the single
//! process's render, bit for bit, for every renderer and team size: the
//! contract the MPI runs of `caustic render` rest on. The members here are
//! threads (`ThreadTeam`); the CLI's MPI tests run the same code as
//! processes. Each team renders one ray at a time and by waves
//! (`TraceMode::Wavefront`, as on DACRT), which give the same image.

use caustic_render::photon::PhotonRenderSettings;
use caustic_render::photon::irradiance_samples::SampleSettings;
use caustic_render::sppm::SppmSettings;
use caustic_render::team::{Team, ThreadTeam};
use caustic_render::{Film, RenderScene, TraceMode, WhittedSettings, photon, sppm, whitted};
use caustic_scene::{Camera, Scene};

/// The caustics Cornell box (glass and mirror spheres: specular chains,
/// caustic photons, final gathers) at an odd size, so that rows, tiles
/// and photons do not divide evenly among the members.
fn scene() -> (Scene, RenderScene, Camera) {
    let scene = Scene::builtin("cornell-caustics").expect("a built-in scene");
    let rs = RenderScene::new(&scene, "bvh-binned").expect("the scene flattens");
    let camera = scene.camera_or_default();
    (scene, rs, camera)
}

const WIDTH: u32 = 37;
const HEIGHT: u32 = 29;

/// Renders with teams of 1, 2 and 3 members and checks the root's image
/// against the single process's (the other members hold none: their
/// share went to the root).
fn check_teams(name: &str, single: &Film, render: impl Fn(&dyn Team) -> Option<Film> + Sync) {
    assert!(
        single.mean().length() > 0.0,
        "{name}: the image is not black"
    );
    for size in 1..=3 {
        for (rank, film) in ThreadTeam::run(size, &render).into_iter().enumerate() {
            assert_eq!(
                film.is_some(),
                rank == 0,
                "{name}: team of {size}, member {rank}"
            );
            let Some(film) = film else { continue };
            let differing = film.pixels_differing_from(single);
            assert_eq!(
                differing, 0,
                "{name}: team of {size}: {differing} pixels differ from the single process's"
            );
        }
    }
}

#[test]
fn whitted_team_renders_the_single_process_image() {
    let (_, rs, camera) = scene();
    let settings = WhittedSettings {
        width: WIDTH,
        height: HEIGHT,
        spp: 4,
        ..WhittedSettings::default()
    };
    let (single, _) = whitted::render(&rs, &camera, &settings, &|_| {});
    for trace in [TraceMode::PerRay, TraceMode::Wavefront] {
        let settings = WhittedSettings {
            trace,
            ..settings.clone()
        };
        check_teams(&format!("whitted, {trace:?}"), &single, |team| {
            whitted::render_in_team(&rs, &camera, &settings, team, &|_| {})
                .expect("the exchange works")
                .0
        });
    }
}

#[test]
fn photon_team_renders_the_single_process_image() {
    let (_, rs, camera) = scene();
    // The final gather with irradiance samples (shared gathers), and
    // separate global and caustic passes (two shared photon traces).
    let settings = PhotonRenderSettings {
        width: WIDTH,
        height: HEIGHT,
        spp: 2,
        global_photons: 20_011,
        caustic_photons: 30_007,
        gather_rays: 16,
        samples: SampleSettings {
            spacing: 4.0,
            ..SampleSettings::default()
        },
        ..PhotonRenderSettings::default()
    };
    let (single, stats) = photon::render(&rs, &camera, &settings, &|_| {}).unwrap();
    assert!(stats.samples > 0, "the irradiance samples are exercised");
    for trace in [TraceMode::PerRay, TraceMode::Wavefront] {
        let settings = PhotonRenderSettings {
            trace,
            ..settings.clone()
        };
        check_teams(&format!("photon, {trace:?}"), &single, |team| {
            let (film, team_stats) =
                photon::render_in_team(&rs, &camera, &settings, team, &|_| {}).unwrap();
            assert_eq!(
                team_stats.rays, stats.rays,
                "the team's rays are the single process's"
            );
            assert_eq!(team_stats.global_stored, stats.global_stored);
            film
        });
    }
}

#[test]
fn sppm_team_renders_the_single_process_image() {
    let (_, rs, camera) = scene();
    let settings = SppmSettings {
        width: WIDTH,
        height: HEIGHT,
        passes: 3,
        photons_per_pass: 10_007,
        ..SppmSettings::default()
    };
    let (single, stats) = sppm::render(&rs, &camera, &settings, &|_| {}).unwrap();
    for trace in [TraceMode::PerRay, TraceMode::Wavefront] {
        let settings = SppmSettings {
            trace,
            ..settings.clone()
        };
        check_teams(&format!("sppm, {trace:?}"), &single, |team| {
            let (film, team_stats) =
                sppm::render_in_team(&rs, &camera, &settings, team, &|_| {}).unwrap();
            assert_eq!(team_stats.deposits, stats.deposits);
            assert_eq!(team_stats.rays, stats.rays);
            film
        });
    }
}
