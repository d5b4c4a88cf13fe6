//! Frame time of the CUDA wavefront Whitted renderer against the CPU
//! renderer at 1920x1080, depth 5, 1 spp, 4 samples per area light, with
//! the agreement of the two images. The GPU frame (every bounce and the
//! image's download into pinned memory) is the median of 21 after three
//! warm-up frames. Then the frame a display needs (`render_display`: the
//! same frame as 8-bit sRGB converted on the device into a kept pinned
//! buffer, a third of the f32 image's bytes), median of 21, its bytes
//! against the host's sRGB of the first f32 frame.
//!
//! `cargo run --release -p caustic-render --example whitted_gpu_bench [cornell-caustics|sponza]...`
//! (default: both; sponza needs the standard scenes).

#[path = "../tests/common/mod.rs"]
mod common;

use caustic_render::RenderScene;
use caustic_render::whitted::render_cuda::GpuScene;
use caustic_render::whitted::{self, WhittedSettings};
use caustic_scene::Scene;
use common::{Agreement, display_byte_differences, sponza_with_point_light};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let gpu = caustic_gpu::Gpu::probe()?;
    let settings = WhittedSettings {
        width: 1920,
        height: 1080,
        spp: 1,
        max_depth: 5,
        light_samples: 4,
        ..Default::default()
    };
    let names: Vec<String> = std::env::args().skip(1).collect();
    let names = if names.is_empty() {
        vec!["cornell-caustics".to_owned(), "sponza".to_owned()]
    } else {
        names
    };
    println!("device: {}", gpu.info().name);
    for name in names {
        let scene = match name.as_str() {
            "sponza" => sponza_with_point_light(),
            other => Scene::builtin(other),
        };
        let Some(scene) = scene else {
            println!("{name}: skipped (scene not available)");
            continue;
        };
        bench(&gpu, &name, &scene, &settings)?;
    }
    Ok(())
}

/// Timed frames per scene, after three untimed ones.
const FRAMES: usize = 21;

fn bench(
    gpu: &caustic_gpu::Gpu,
    name: &str,
    scene: &Scene,
    settings: &WhittedSettings,
) -> Result<(), Box<dyn std::error::Error>> {
    let camera = scene.camera.ok_or("the scene has no camera")?;
    let rs = RenderScene::new(scene, "bvh-binned")?;
    let upload = std::time::Instant::now();
    let device = GpuScene::upload(gpu, &rs)?;
    let upload = upload.elapsed().as_secs_f64();
    // The first frames compile and load the kernels and grow the memory
    // pool; time the later ones (METHOD: warm up, repeat, median).
    for _ in 0..3 {
        device.render(&camera, settings)?;
    }
    let frames: Vec<_> = (0..FRAMES)
        .map(|_| device.render(&camera, settings))
        .collect::<Result<_, _>>()?;
    let mut seconds: Vec<f64> = frames.iter().map(|(_, stats)| stats.seconds).collect();
    seconds.sort_by(f64::total_cmp);
    let (best, median) = (seconds[0], seconds[FRAMES / 2]);
    let mut download: Vec<f64> = frames.iter().map(|(_, s)| s.download_ms).collect();
    download.sort_by(f64::total_cmp);
    let (gpu_film, gpu_stats) = &frames[0];
    let (cpu_film, cpu_stats) = whitted::render(&rs, &camera, settings, &|_| {});
    let agreement = Agreement::measure(&cpu_film, gpu_film);
    println!(
        "WHITTED {name} {}x{} depth {}: GPU median {:.2} ms/frame ({:.1} fps; best {:.2} ms, {FRAMES} frames, download median {:.2} ms; {:.0} Mrays/s), CPU {:.2} ms ({} threads, {:.1} Mrays/s), speed-up {:.1}x; BVH build + upload {:.0} ms; {agreement}",
        settings.width,
        settings.height,
        settings.max_depth,
        median * 1e3,
        1.0 / median,
        best * 1e3,
        download[FRAMES / 2],
        gpu_stats.rays as f64 / median / 1e6,
        cpu_stats.seconds * 1e3,
        rayon::current_num_threads(),
        cpu_stats.mrays_per_second(),
        cpu_stats.seconds / median,
        upload * 1e3,
    );
    bench_display(gpu, name, &device, &camera, settings, gpu_film)
}

/// The display frame's median time, and its bytes against the host's
/// conversion of `film` (the same frame: the renderer is deterministic).
fn bench_display(
    gpu: &caustic_gpu::Gpu,
    name: &str,
    device: &GpuScene,
    camera: &caustic_scene::Camera,
    settings: &WhittedSettings,
    film: &caustic_render::Film,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut display = caustic_gpu::PinnedBuffer::<u8>::zeroed(gpu, 3 * film.pixels.len())?;
    for _ in 0..3 {
        device.render_display(camera, settings, &mut (), 0.0, &mut display)?;
    }
    let mut seconds = (0..FRAMES)
        .map(|_| {
            let stats = device.render_display(camera, settings, &mut (), 0.0, &mut display)?;
            Ok(stats.seconds)
        })
        .collect::<Result<Vec<f64>, caustic_gpu::GpuError>>()?;
    seconds.sort_by(f64::total_cmp);
    let host_bytes = caustic_render::image_io::srgb_bytes(film, 0.0);
    let (differing, largest) = display_byte_differences(&host_bytes, display.as_slice());
    println!(
        "WHITTED-DISPLAY {name} same frame as 8-bit sRGB converted on the device (pinned, {} MB): median {:.2} ms/frame ({:.1} fps), best {:.2} ms; bytes against the host's sRGB of the f32 frame: {differing} of {} differ, by at most {largest}",
        display.len() / 1_000_000,
        seconds[FRAMES / 2] * 1e3,
        1.0 / seconds[FRAMES / 2],
        seconds[0] * 1e3,
        host_bytes.len(),
    );
    Ok(())
}
