//! Frame time of the CUDA wavefront Whitted renderer against the CPU
//! renderer at 1920x1080, depth 5, 1 spp, 4 samples per area light, with
//! the agreement of the two images.
//!
//! `cargo run --release -p caustic-render --example whitted_gpu_bench [cornell-caustics|sponza]...`
//! (default: both; sponza needs the standard scenes).

#[path = "../tests/common/mod.rs"]
mod common;

use caustic_render::RenderScene;
use caustic_render::whitted::render_cuda::GpuScene;
use caustic_render::whitted::{self, WhittedSettings};
use caustic_scene::Scene;
use common::{Agreement, sponza_with_point_light};

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
    // The first frame compiles and loads the kernels; time the later ones.
    device.render(&camera, settings)?;
    let frames: Vec<_> = (0..3)
        .map(|_| device.render(&camera, settings))
        .collect::<Result<_, _>>()?;
    let best = frames
        .iter()
        .map(|(_, stats)| stats.seconds)
        .fold(f64::INFINITY, f64::min);
    let (gpu_film, gpu_stats) = &frames[0];
    let (cpu_film, cpu_stats) = whitted::render(&rs, &camera, settings, &|_| {});
    let agreement = Agreement::measure(&cpu_film, gpu_film);
    println!(
        "WHITTED {name} {}x{} depth {}: GPU {:.2} ms/frame ({:.0} Mrays/s), CPU {:.2} ms ({} threads, {:.1} Mrays/s), speed-up {:.1}x; BVH build + upload {:.0} ms; {agreement}",
        settings.width,
        settings.height,
        settings.max_depth,
        best * 1e3,
        gpu_stats.rays as f64 / best / 1e6,
        cpu_stats.seconds * 1e3,
        rayon::current_num_threads(),
        cpu_stats.mrays_per_second(),
        cpu_stats.seconds / best,
        upload * 1e3,
    );
    Ok(())
}
