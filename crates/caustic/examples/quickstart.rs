//! caustic in one page: load a scene, build an acceleration structure,
//! trace a few rays, render with photon mapping, save a PNG.
//!
//! ```text
//! cargo run --release -p caustic --example quickstart [SCENE] [OUTPUT.png]
//! ```
//!
//! SCENE is a scene file or a built-in name (default `cornell-caustics`:
//! a Cornell box with a mirror and a glass sphere that focuses a caustic).
//! The device is `auto`: the GPU when one is usable, else the CPU.

use caustic::{
    AccelKind, Accelerator, Device, Integrator, PhotonSettings, PinholeCamera, Renderer,
};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// Small enough for a few seconds on two CPU cores.
const SIZE: u32 = 256;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let scene = args.next().unwrap_or_else(|| "cornell-caustics".into());
    let output = PathBuf::from(args.next().unwrap_or_else(|| "quickstart.png".into()));
    match run(&scene, &output) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}

fn run(name: &str, output: &std::path::Path) -> caustic::Result<()> {
    let start = Instant::now();
    let scene = caustic::load_scene(name)?;
    for warning in &scene.warnings {
        println!("warning: {warning}");
    }
    println!("scene {name}: {} triangles", scene.triangle_count());
    let camera = scene.camera_or_default();

    // Ray queries: a structure over the scene's triangles, five rays
    // across the middle row of the image.
    let kind = AccelKind::default();
    let accel = Accelerator::build(&scene.triangles(), kind, Device::Auto)?;
    let stats = accel.stats();
    println!("{}", accel.note());
    println!(
        "built {kind} in {:.1} ms: {} nodes, {} leaves, SAH cost {:.1}",
        stats.build_ms, stats.nodes, stats.leaves, stats.sah_cost
    );
    let pinhole = PinholeCamera::new(&camera, SIZE, SIZE);
    let rays: Vec<_> = (0..5)
        .map(|i| pinhole.ray((i as f32 + 0.5) * SIZE as f32 / 5.0, SIZE as f32 / 2.0))
        .collect();
    let hits = accel.intersect(&rays)?;
    let blocked = accel.occluded(&rays)?;
    for (i, (hit, blocked)) in hits.iter().zip(&blocked).enumerate() {
        match hit {
            Some(hit) => println!(
                "  ray {i}: triangle {:5} at t = {:.3} (occluded: {blocked})",
                hit.prim, hit.t
            ),
            None => println!("  ray {i}: miss (occluded: {blocked})"),
        }
    }

    // Rendering: photon mapping (direct light, caustic map, final gather
    // into the global map) on the same structure kind and device choice.
    let settings = PhotonSettings {
        width: SIZE,
        height: SIZE,
        spp: 4,
        global_photons: 50_000,
        caustic_photons: 200_000,
        ..PhotonSettings::default()
    };
    let renderer = Renderer::new(&scene).accel(kind).device(Device::Auto);
    let image = renderer.render(&camera, &Integrator::Photon(settings))?;
    println!("{}", image.note);
    println!(
        "rendered {SIZE}x{SIZE} by photon mapping in {:.2} s on {}: {:.1} M rays",
        image.stats.seconds(),
        image.device,
        image.stats.rays() as f64 / 1e6
    );
    caustic::image_io::write_image(&image.film, output, 0.0)?;
    println!(
        "wrote {} ({:.2} s in all)",
        output.display(),
        start.elapsed().as_secs_f64()
    );
    Ok(())
}
