//! GPU SPPM on a Mitsuba reference scene: passes per second, and the RMSE
//! against the path-traced reference after 4, 16, 64, ... passes up to
//! PASSES, next to the reference's own noise (its JSON's
//! `est_rmse_final_vs_truth_linear`).
//!
//! `sppm_gpu_bench SCENE.xml REFERENCE.exr [PASSES] [PHOTONS_PER_PASS]`
//! (defaults: 4096 passes of 10^5 photons).

use caustic_render::sppm::{self, SppmSettings};
use caustic_render::{RenderScene, image_io};
use caustic_scene::Scene;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(xml), Some(exr)) = (args.first(), args.get(1)) else {
        return Err("usage: sppm_gpu_bench SCENE.xml REFERENCE.exr [PASSES] [PHOTONS]".into());
    };
    let most: u32 = args.get(2).map_or(Ok(4096), |a| a.parse())?;
    let photons: u64 = args.get(3).map_or(Ok(100_000), |a| a.parse())?;
    let gpu = caustic_gpu::Gpu::probe()?;
    let reference = image_io::read_exr(std::path::Path::new(exr))?;
    let scene = Scene::load(std::path::Path::new(xml))?;
    let camera = scene.camera.ok_or("no camera")?;
    let film = scene.film.ok_or("no film size")?;
    let rs = RenderScene::new(&scene, "bvh-binned")?;
    println!(
        "device: {}; {xml}, {photons} photons per pass",
        gpu.info().name
    );
    let settings = SppmSettings {
        width: film.width,
        height: film.height,
        passes: most,
        photons_per_pass: photons,
        seed: 1,
        ..SppmSettings::default()
    };
    let start = std::time::Instant::now();
    let mut next = 4;
    let mut on_pass = |view: &sppm::GpuPassView| {
        if view.passes != next && view.passes != most {
            return std::ops::ControlFlow::Continue(());
        }
        next *= 4;
        let scored = view
            .film()
            .map_err(|e| e.to_string())
            .and_then(|image| image_io::rmse(&image, &reference).map_err(|e| e.to_string()));
        match scored {
            Ok(rmse) => println!(
                "SPPM-GPU {} passes: RMSE {rmse:.5} after {:.2} s",
                view.passes,
                start.elapsed().as_secs_f64()
            ),
            Err(e) => println!("SPPM-GPU {} passes: cannot score: {e}", view.passes),
        }
        std::ops::ControlFlow::Continue(())
    };
    let (_, stats) = sppm::render_cuda(&gpu, &rs, &camera, &settings, &mut on_pass)?;
    println!(
        "SPPM-GPU {most} passes of {photons} photons in {:.2} s: {:.1} passes/s (eye {:.2} s, photons {:.2} s, grid {:.2} s, gather {:.2} s), {} deposits, mean radius {:.5}",
        stats.seconds,
        most as f64 / stats.seconds,
        stats.eye_seconds,
        stats.photon_seconds,
        stats.grid_seconds,
        stats.gather_seconds,
        stats.deposits,
        stats.mean_radius
    );
    Ok(())
}
