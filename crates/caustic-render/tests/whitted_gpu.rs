//! The CUDA wavefront Whitted renderer against the CPU renderer: both draw
//! the same counter-based random numbers, so the images must agree up to
//! floating-point differences in shading. Needs a CUDA GPU (and, for the
//! large scene, the standard scenes; skips saying so without them).

mod common;

use caustic_render::whitted::render_cuda as whitted_cuda;
use caustic_render::whitted::{self, WhittedSettings};
use caustic_scene::Scene;
use common::{Agreement, display_byte_differences, min_psnr, sponza_with_point_light};

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

/// The GPU, and the caustics Cornell box's camera and flattened scene.
fn cornell_caustics_on_gpu() -> (
    caustic_gpu::Gpu,
    caustic_scene::Camera,
    caustic_render::RenderScene,
) {
    let gpu = caustic_gpu::Gpu::probe().expect("a CUDA GPU");
    let scene = Scene::builtin("cornell-caustics").expect("built-in scene");
    let camera = scene.camera.unwrap();
    let rs = caustic_render::RenderScene::new(&scene, "bvh-binned").unwrap();
    (gpu, camera, rs)
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
    let (gpu, camera, rs) = cornell_caustics_on_gpu();
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
    let (gpu, camera, rs) = cornell_caustics_on_gpu();
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

/// The device's sRGB bytes are the host's to the bit
/// (`image_io::srgb_bytes` of the film the sums average to): every step
/// of the table, the floats on either side of it, zero, negatives,
/// non-finite sums, values past 1 and sums whose average over 3 samples
/// rounds, at two exposures.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_display_bytes_are_the_host_srgb_bytes() {
    use caustic_render::image_io::{srgb_bytes, srgb_step_table};
    let gpu = caustic_gpu::Gpu::probe().expect("a CUDA GPU");
    let spp = 3u32;
    let mut sums = vec![
        0.0f32,
        -0.0,
        -1.0,
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
    ];
    sums.extend([
        1.0,
        3.0,
        3.0001,
        7.5,
        1e30,
        f32::MAX,
        1e-30,
        0.1,
        0.7,
        2.9999,
    ]);
    for &step in srgb_step_table() {
        // The sums whose average is the step, and the floats beside it.
        for bits in [step.to_bits() - 1, step.to_bits(), step.to_bits() + 1] {
            sums.push(f32::from_bits(bits) * spp as f32);
        }
    }
    sums.resize(sums.len().next_multiple_of(3), 0.5);
    let film = caustic_render::Film {
        width: (sums.len() / 3) as u32,
        height: 1,
        pixels: sums
            .chunks_exact(3)
            .map(|c| caustic_geom::Rgb::new(c[0], c[1], c[2]) / spp as f32)
            .collect(),
    };
    let device_sums = caustic_gpu::DeviceBuffer::from_slice(&gpu, "sums", &sums).unwrap();
    let steps = whitted_cuda::srgb_steps_on(&gpu).unwrap();
    for exposure in [0.0f32, -1.5] {
        let bytes = whitted_cuda::srgb_bytes_on_device(&device_sums, spp, exposure, &steps)
            .unwrap()
            .download()
            .unwrap();
        let host = srgb_bytes(&film, exposure);
        let differing: Vec<usize> = (0..host.len()).filter(|&i| host[i] != bytes[i]).collect();
        assert!(
            differing.is_empty(),
            "exposure {exposure}: {} of {} bytes differ, first at sum {} (host {}, device {})",
            differing.len(),
            host.len(),
            sums[differing[0]],
            host[differing[0]],
            bytes[differing[0]]
        );
        // Not all black or all white: the steps span every byte.
        assert_eq!(bytes.iter().copied().max(), Some(255));
        assert!(bytes.iter().filter(|&&b| b > 0 && b < 255).count() > 500);
    }
}

/// A display frame is the frame's sRGB bytes: `render_display` against
/// the host's conversion of `render`'s film (the two frames differ only by
/// the order of the framebuffer's atomic additions, which may move a
/// value across a byte's step now and then), and a buffer of the wrong
/// length is refused.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_display_frame_is_the_films_srgb_bytes() {
    let (gpu, camera, rs) = cornell_caustics_on_gpu();
    let settings = small_frame();
    let device = whitted_cuda::GpuScene::upload(&gpu, &rs).unwrap();
    let (film, stats) = device.render(&camera, &settings).unwrap();
    let exposure = 0.5;
    let host = caustic_render::image_io::srgb_bytes(&film, exposure);
    let mut shown = caustic_gpu::PinnedBuffer::<u8>::zeroed(&gpu, host.len()).unwrap();
    let shown_stats = device
        .render_display(&camera, &settings, &mut (), exposure, &mut shown)
        .unwrap();
    assert_eq!(shown_stats.rays, stats.rays);
    let (differing, largest) = display_byte_differences(&host, shown.as_slice());
    eprintln!(
        "display frame: {differing} of {} bytes differ from the film's, by at most {largest}",
        host.len()
    );
    assert!(
        largest <= 1 && differing * 1000 <= host.len(),
        "{differing} bytes, by up to {largest}"
    );
    assert!(shown.as_slice().iter().any(|&b| b > 0));
    let mut short = caustic_gpu::PinnedBuffer::<u8>::zeroed(&gpu, host.len() - 3).unwrap();
    assert!(
        device
            .render_display(&camera, &settings, &mut (), exposure, &mut short)
            .is_err()
    );
}
