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
    AccelKind, Accelerator, Device, Integrator, PhotonSettings, PinholeCamera, Ray, Renderer,
    Scene, Triangle, Vec3,
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

    // Ray queries: a structure over the scene's triangles; five camera
    // rays across the image at three quarters of its height (through the
    // spheres of the Cornell boxes), then from each hit point a shadow ray
    // to the light.
    let triangles = scene.triangles();
    let kind = AccelKind::default();
    let accel = Accelerator::build(&triangles, kind, Device::Auto)?;
    let stats = accel.stats();
    println!("{}", accel.note());
    println!(
        "built {kind} in {:.1} ms: {} nodes, {} leaves, SAH cost {:.1}",
        stats.build_ms, stats.nodes, stats.leaves, stats.sah_cost
    );
    let pinhole = PinholeCamera::new(&camera, SIZE, SIZE);
    let rays: Vec<Ray> = (0..5)
        .map(|i| pinhole.ray((i as f32 + 0.5) * SIZE as f32 / 5.0, 0.75 * SIZE as f32))
        .collect();
    let hits = accel.intersect(&rays)?;
    let light = light_point(&scene, &triangles);
    let shadow_rays: Vec<Ray> = rays
        .iter()
        .zip(&hits)
        .map(|(ray, hit)| match (hit, light) {
            // Ends short of both surfaces, so neither counts as a blocker.
            (Some(hit), Some(light)) => {
                let point = ray.at(hit.t);
                Ray::segment(point, light - point, 1e-4, 1.0 - 1e-4)
            }
            _ => Ray::segment(Vec3::ZERO, Vec3::X, 0.0, 0.0), // traced as a miss
        })
        .collect();
    let in_shadow = accel.occluded(&shadow_rays)?;
    for (i, (hit, shadowed)) in hits.iter().zip(&in_shadow).enumerate() {
        match hit {
            Some(hit) => println!(
                "  ray {i}: triangle {:5} ({}) at t = {:.3}, {}",
                hit.prim,
                material_name(&scene, hit.prim),
                hit.t,
                if *shadowed {
                    "in shadow"
                } else {
                    "sees the light"
                }
            ),
            None => println!("  ray {i}: miss"),
        }
    }

    // Rendering: photon mapping (direct light, caustic map, final gather
    // into the global map) on the same structure kind and device choice.
    let settings = PhotonSettings {
        width: SIZE,
        height: SIZE,
        spp: 4,
        global_photons: 100_000,
        caustic_photons: 500_000,
        gather_rays: 64,
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

/// The centre of the first emitting triangle, if the scene has one.
fn light_point(scene: &Scene, triangles: &[Triangle]) -> Option<Vec3> {
    let emitting: Vec<usize> = scene.emissive_materials().collect();
    let mut materials = scene.meshes.iter().flat_map(|m| &m.material_ids);
    let prim = materials.position(|id| emitting.contains(&(*id as usize)))?;
    let t = triangles.get(prim)?;
    Some((t.v0 + t.v1 + t.v2) / 3.0)
}

/// The material name of triangle `prim` in scene numbering (mesh order,
/// then triangle order).
fn material_name(scene: &Scene, prim: u32) -> &str {
    let mut materials = scene.meshes.iter().flat_map(|m| &m.material_ids);
    materials
        .nth(prim as usize)
        .and_then(|&id| scene.materials.get(id as usize))
        .map_or("?", |m| m.name.as_str())
}
