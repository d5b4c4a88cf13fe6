//! The CUDA wavefront Whitted renderer against the CPU renderer: both draw
//! the same counter-based random numbers, so the images must agree up to
//! floating-point differences in shading. Needs a CUDA GPU (and, for the
//! large scene, the standard scenes; skips saying so without them).

mod common;

use caustic_render::whitted::render_cuda as whitted_cuda;
use caustic_render::whitted::{self, WhittedSettings};
use caustic_scene::Scene;
use common::{Agreement, min_psnr, sponza_with_point_light};

fn compare(name: &str, scene: &Scene, settings: &WhittedSettings) {
    let gpu = caustic_gpu::Gpu::probe().expect("a CUDA GPU");
    let camera = scene.camera.expect("the scene has a camera");
    let rs = caustic_render::RenderScene::new(scene, "bvh-binned").unwrap();
    let (cpu, cpu_stats) = whitted::render(&rs, &camera, settings, &|_| {});
    let (gpu_film, gpu_stats) = whitted_cuda::render(&gpu, &rs, &camera, settings).unwrap();
    let agreement = Agreement::measure(&cpu, &gpu_film);
    eprintln!(
        "{name} {}x{} {} spp depth {}: {agreement}; rays CPU {} GPU {}; {:.3} s CPU, {:.3} s GPU",
        settings.width,
        settings.height,
        settings.spp,
        settings.max_depth,
        cpu_stats.rays,
        gpu_stats.rays,
        cpu_stats.seconds,
        gpu_stats.seconds,
    );
    assert!(
        agreement.psnr >= min_psnr::WHITTED,
        "{name}: GPU image differs: {agreement}"
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cornell_caustics_gpu_equals_cpu() {
    let scene = Scene::builtin("cornell-caustics").expect("built-in scene");
    let settings = WhittedSettings {
        width: 256,
        height: 256,
        spp: 4,
        light_samples: 4,
        max_depth: 8,
        ..Default::default()
    };
    compare("cornell-caustics", &scene, &settings);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn sponza_gpu_equals_cpu() {
    let Some(scene) = sponza_with_point_light() else {
        return;
    };
    let settings = WhittedSettings {
        width: 480,
        height: 270,
        spp: 1,
        max_depth: 5,
        ..Default::default()
    };
    compare("sponza", &scene, &settings);
}

/// The frame the team and chunk tests render: 100 × 70 pixels (partial
/// 8 × 8 tiles on both axes), 4 spp, 4 light samples, depth 8.
fn small_frame() -> WhittedSettings {
    WhittedSettings {
        width: 100,
        height: 70,
        spp: 4,
        light_samples: 4,
        max_depth: 8,
        ..Default::default()
    }
}

/// Pixels of `b` whose bits differ from `a`'s.
fn differing_pixels(a: &caustic_render::Film, b: &caustic_render::Film) -> usize {
    let bits = |p: &caustic_geom::Rgb| p.to_array().map(f32::to_bits);
    a.pixels
        .iter()
        .zip(&b.pixels)
        .filter(|(x, y)| bits(x) != bits(y))
        .count()
}

/// Teams of 2 and 3 members on one GPU, each member with its own upload,
/// render bands of tile rows (their count divides evenly by neither) and
/// end with the single GPU's image: every pixel's contributions are the
/// single GPU's, computed by one member; only the order of the
/// framebuffer's atomic additions may differ (as between two runs on one
/// GPU), so every pixel agrees to the rounding of its sum of a few dozen
/// non-negative terms (n·ε ≈ 3·10^-6; bound 10^-5).
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_whitted_team_renders_the_single_gpu_image() {
    use caustic_render::team::{Team, ThreadTeam};
    let gpu = caustic_gpu::Gpu::probe().expect("a CUDA GPU");
    let scene = Scene::builtin("cornell-caustics").expect("built-in scene");
    let camera = scene.camera.unwrap();
    let rs = caustic_render::RenderScene::new(&scene, "bvh-binned").unwrap();
    let settings = small_frame();
    let device = whitted_cuda::GpuScene::upload(&gpu, &rs).unwrap();
    let (single, stats) = device.render(&camera, &settings).unwrap();
    assert!(single.mean().length() > 0.0);
    for size in [2, 3] {
        let members = ThreadTeam::run(size, |team: &dyn Team| {
            let device = whitted_cuda::GpuScene::upload(&gpu, &rs).unwrap();
            whitted_cuda::render_cuda_in_team(&device, &camera, &settings, team).unwrap()
        });
        for (rank, (film, team_stats)) in members.into_iter().enumerate() {
            // Only the root holds the image; the others sent it their bands.
            assert_eq!(film.is_some(), rank == 0, "team of {size}, member {rank}");
            if let Some(film) = film {
                let worst = single.max_relative_difference(&film);
                let differing = differing_pixels(&single, &film);
                eprintln!(
                    "whitted team of {size}: largest relative difference {worst:.2e}, {differing} of {} pixels not bit for bit",
                    film.pixels.len()
                );
                assert!(worst <= 1e-5, "team of {size}: {worst:e}");
            }
            assert_eq!(team_stats.rays, stats.rays, "team of {size}");
        }
    }
}

/// A frame traced in chunks of tiles (a cap of 3 tiles' slots, then 1,
/// over a 100 × 70 image whose partial tiles pad every row) is the frame
/// traced at once: the same rays, every pixel's contributions the same,
/// only the order of the framebuffer's atomic additions free (bound as in
/// the team test above).
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_whitted_frame_in_chunks_is_the_whole_frame() {
    let gpu = caustic_gpu::Gpu::probe().expect("a CUDA GPU");
    let scene = Scene::builtin("cornell-caustics").expect("built-in scene");
    let camera = scene.camera.unwrap();
    let rs = caustic_render::RenderScene::new(&scene, "bvh-binned").unwrap();
    let settings = small_frame();
    let mut device = whitted_cuda::GpuScene::upload(&gpu, &rs).unwrap();
    let (whole, stats) = device.render(&camera, &settings).unwrap();
    assert!(whole.mean().length() > 0.0);
    for tiles in [3, 1] {
        device.set_max_primary_slots(Some(tiles * 64 * settings.spp as usize));
        let (chunked, chunked_stats) = device.render(&camera, &settings).unwrap();
        let worst = whole.max_relative_difference(&chunked);
        eprintln!(
            "whitted in chunks of {tiles} tiles: largest relative difference {worst:.2e}, {} of {} pixels not bit for bit",
            differing_pixels(&whole, &chunked),
            whole.pixels.len()
        );
        assert!(worst <= 1e-5, "chunks of {tiles} tiles: {worst:e}");
        assert_eq!(chunked_stats.rays, stats.rays, "chunks of {tiles} tiles");
    }
}
