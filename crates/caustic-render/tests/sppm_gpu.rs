//! GPU SPPM against CPU SPPM: the same eye paths (same random keys), the
//! same photons (same streams), the same statistics; only the order of
//! float sums and the rare photon a rounding moves differ. So the images
//! must agree far below the Monte Carlo noise of either, and against the
//! path-traced references (when present) both must have the same error at
//! equal passes, falling as passes grow. Needs a CUDA GPU.

mod common;

use caustic_render::sppm::{self, PassJitter, SppmSettings, TeamSplit};
use caustic_render::{RenderScene, image_io};
use caustic_scene::Scene;
use caustic_scene::data_dirs::ref_file;
use common::{Agreement, min_psnr};
use std::ops::ControlFlow;

fn gpu() -> caustic_gpu::Gpu {
    caustic_gpu::Gpu::probe().expect("a CUDA GPU")
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_sppm_equals_cpu_sppm_at_equal_passes() {
    let gpu = gpu();
    let jitters = [
        (PassJitter::Independent, min_psnr::SPPM),
        (PassJitter::Sequence, min_psnr::SPPM_SEQUENCE),
    ];
    for ((jitter, bound), name) in jitters
        .into_iter()
        .flat_map(|j| ["cornell-caustics", "cornell-box"].map(|name| (j, name)))
    {
        let scene = Scene::builtin(name).unwrap();
        let camera = scene.camera.unwrap();
        let rs = RenderScene::new(&scene, "bvh-binned").unwrap();
        let settings = SppmSettings {
            width: 128,
            height: 128,
            passes: 8,
            photons_per_pass: 50_000,
            seed: 3,
            jitter,
            ..SppmSettings::default()
        };
        let (cpu, cpu_stats) = sppm::render(&rs, &camera, &settings, &|_| {}).unwrap();
        let (on_gpu, gpu_stats) = sppm::render_cuda(
            &gpu,
            &rs,
            &camera,
            &settings,
            &mut |_: &sppm::GpuPassView| ControlFlow::Continue(()),
        )
        .unwrap();
        let agreement = Agreement::measure(&cpu, &on_gpu);
        let (cm, gm) = (cpu.mean(), on_gpu.mean());
        eprintln!(
            "{name} 128x128, 8 passes x 50k photons, {jitter:?}: {agreement}; means CPU {cm} GPU {gm}; deposits CPU {} GPU {}; stored CPU {} GPU {}; mean radius CPU {:.5} GPU {:.5}",
            cpu_stats.deposits,
            gpu_stats.deposits,
            cpu_stats.photons_stored,
            gpu_stats.photons_stored,
            cpu_stats.mean_radius,
            gpu_stats.mean_radius
        );
        assert!(
            agreement.psnr >= bound,
            "{name}, {jitter:?}: GPU SPPM differs: {agreement}"
        );
        assert!(
            ((cm - gm) / cm).abs().max_element() < 0.002,
            "{name}: means {cm} vs {gm}"
        );
        let deposits = cpu_stats.deposits.abs_diff(gpu_stats.deposits);
        assert!(
            deposits * 1000 <= cpu_stats.deposits,
            "{name}: deposits differ by {deposits}"
        );
    }
}

/// RMSE against the references at 4, 16 and 64 passes of 10^5 photons:
/// the GPU's equals the CPU's at 4 and 16 (the CPU stops there to keep
/// the test short) and keeps falling.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_sppm_error_falls_like_cpu_sppm() {
    let gpu = gpu();
    for name in ["cornell-box", "cornell-caustics"] {
        let (Some(xml), Some(exr)) = (
            ref_file(&format!("{name}/{name}.xml")),
            ref_file(&format!("{name}/{name}_path.exr")),
        ) else {
            eprintln!("{name}: reference not found, skipped");
            continue;
        };
        let reference = image_io::read_exr(&exr).unwrap();
        let scene = Scene::load(&xml).unwrap();
        let camera = scene.camera.unwrap();
        let film = scene.film.unwrap();
        let rs = RenderScene::new(&scene, "bvh-binned").unwrap();
        let mut last = f64::INFINITY;
        for passes in [4, 16, 64] {
            let settings = SppmSettings {
                width: film.width,
                height: film.height,
                passes,
                photons_per_pass: 100_000,
                seed: 1,
                ..SppmSettings::default()
            };
            let (on_gpu, _) = sppm::render_cuda(
                &gpu,
                &rs,
                &camera,
                &settings,
                &mut |_: &sppm::GpuPassView| ControlFlow::Continue(()),
            )
            .unwrap();
            let gpu_rmse = image_io::rmse(&on_gpu, &reference).unwrap();
            let cpu_rmse = (passes <= 16).then(|| {
                let (cpu, _) = sppm::render(&rs, &camera, &settings, &|_| {}).unwrap();
                image_io::rmse(&cpu, &reference).unwrap()
            });
            eprintln!("{name}: {passes} passes: RMSE GPU {gpu_rmse:.5}, CPU {cpu_rmse:.5?}");
            if let Some(cpu_rmse) = cpu_rmse {
                assert!(
                    (gpu_rmse - cpu_rmse).abs() <= 0.02 * cpu_rmse,
                    "{name}, {passes} passes: GPU {gpu_rmse} vs CPU {cpu_rmse}"
                );
            }
            assert!(
                gpu_rmse < 0.85 * last,
                "{name}: {passes} passes: {gpu_rmse} !< {last}"
            );
            last = gpu_rmse;
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_sppm_rejects_bad_settings() {
    let gpu = gpu();
    let scene = Scene::builtin("cornell-box").unwrap();
    let camera = scene.camera.unwrap();
    let rs = RenderScene::new(&scene, "bvh-binned").unwrap();
    let bad = SppmSettings {
        passes: 0,
        ..SppmSettings::default()
    };
    assert!(
        sppm::render_cuda(&gpu, &rs, &camera, &bad, &mut |_: &sppm::GpuPassView| {
            ControlFlow::Continue(())
        })
        .is_err()
    );
    let bad = SppmSettings {
        alpha: 1.5,
        ..SppmSettings::default()
    };
    assert!(
        sppm::render_cuda(&gpu, &rs, &camera, &bad, &mut |_: &sppm::GpuPassView| {
            ControlFlow::Continue(())
        })
        .is_err()
    );
}

/// A team of GPU members (here all on one GPU, each with its own upload of
/// the scene, as separate GPUs or MPI ranks would have) renders the single
/// GPU's image: each member traces its share of every pass's photons and
/// gathers for its own band of tile rows. The same photons reach the same
/// pixels (equal deposits, equal radii), summed in another order, so every
/// pixel agrees to float rounding of its sum.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_sppm_team_renders_the_single_gpu_image() {
    use caustic_render::team::{Team, ThreadTeam};
    use caustic_render::whitted::render_cuda::GpuScene;
    let gpu = gpu();
    let scene = Scene::builtin("cornell-caustics").unwrap();
    let camera = scene.camera.unwrap();
    let rs = RenderScene::new(&scene, "bvh-binned").unwrap();
    // Neither the rows nor the photons divide evenly among the members.
    let settings = SppmSettings {
        width: 100,
        height: 70,
        passes: 4,
        photons_per_pass: 30_011,
        seed: 5,
        ..SppmSettings::default()
    };
    let device = GpuScene::upload(&gpu, &rs).unwrap();
    let (single, stats) = sppm::render_cuda_on(&device, &rs, &camera, &settings, &mut |_| {
        ControlFlow::Continue(())
    })
    .unwrap();
    assert!(single.mean().length() > 0.0);
    // Rows: 2 and 3 members. Passes: 2, 3 (the last pass ends on member
    // 0), and 5 (more members than passes: one renders none).
    let splits = [
        (TeamSplit::Rows, 2),
        (TeamSplit::Rows, 3),
        (TeamSplit::Passes, 2),
        (TeamSplit::Passes, 3),
        (TeamSplit::Passes, 5),
    ];
    for (split, size) in splits {
        let members = ThreadTeam::run(size, |team: &dyn Team| {
            let device = GpuScene::upload(&gpu, &rs).unwrap();
            let parts = (team, split);
            sppm::render_cuda_in_team_split(&device, &rs, &camera, &settings, parts, &|_| {})
                .unwrap()
        });
        for (rank, (film, team_stats)) in members.into_iter().enumerate() {
            let what = format!("{split:?}, team of {size}, member {rank}");
            // Only the root holds the image.
            assert_eq!(film.is_some(), rank == 0, "{what}");
            if let Some(film) = film {
                let worst = single.max_relative_difference(&film);
                eprintln!("{what}: largest relative difference {worst:.2e}");
                // Rows: the members' photons merged run by run are the
                // single GPU's photons in its order. Passes: each pass is
                // the single GPU's pass on the same statistics. Either
                // way every sum is the same arithmetic.
                assert_eq!(worst, 0.0, "{what}: {worst:e}");
                assert_eq!(team_stats.mean_radius, stats.mean_radius, "{what}");
            }
            assert_eq!(team_stats.passes, stats.passes, "{what}");
            assert_eq!(team_stats.deposits, stats.deposits, "{what}");
            assert_eq!(team_stats.rays, stats.rays, "{what}");
            assert_eq!(team_stats.photons_stored, stats.photons_stored, "{what}");
        }
    }
}

/// A team that cannot hand a buffer from one member to another is told
/// so, rather than left waiting.
#[test]
#[ignore = "needs a CUDA GPU"]
fn dealt_passes_need_a_team_that_hands_over() {
    use caustic_render::team::{Gathered, Team, TeamError};
    use caustic_render::whitted::render_cuda::GpuScene;
    /// Two members that only exchange collectively (as MPI ranks do).
    struct Collective;
    impl Team for Collective {
        fn rank(&self) -> usize {
            0
        }
        fn size(&self) -> usize {
            2
        }
        fn all_gather(&self, _: &[u8]) -> Result<Gathered, TeamError> {
            Err(TeamError("not reached".into()))
        }
    }
    let gpu = gpu();
    let scene = Scene::builtin("cornell-caustics").unwrap();
    let rs = RenderScene::new(&scene, "bvh-binned").unwrap();
    let device = GpuScene::upload(&gpu, &rs).unwrap();
    let settings = SppmSettings {
        width: 16,
        height: 16,
        passes: 2,
        photons_per_pass: 1000,
        ..SppmSettings::default()
    };
    let parts = (&Collective as &dyn Team, TeamSplit::Passes);
    let camera = scene.camera.unwrap();
    let Err(error) =
        sppm::render_cuda_in_team_split(&device, &rs, &camera, &settings, parts, &|_| {})
    else {
        panic!("a collective-only team cannot deal passes");
    };
    assert!(error.to_string().contains("one process"), "{error}");
}
