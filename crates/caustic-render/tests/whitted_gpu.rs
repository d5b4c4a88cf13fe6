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
