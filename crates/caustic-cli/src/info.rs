//! `caustic info`.

use crate::scene_arg;
use anyhow::Result;
use caustic_scene::{Bsdf, FovAxis, Light};
use clap::Args;

#[derive(Args)]
#[command(
    after_help = "Examples:\n  caustic info cornell-caustics\n  caustic info scene.xml\n  caustic info kitchen.aff\n  caustic info 'frames/frame_####.obj'"
)]
pub struct InfoArgs {
    /// Scene file or built-in scene name.
    scene: String,
}

pub fn run(args: InfoArgs) -> Result<()> {
    let loaded = scene_arg::load(&args.scene)?;
    let s = &loaded.scene;
    let b = s.bounds();
    println!("scene      {}", args.scene);
    println!("meshes     {}", s.meshes.len());
    println!("triangles  {}", s.triangle_count());
    println!(
        "bounds     min ({:.4}, {:.4}, {:.4})  max ({:.4}, {:.4}, {:.4})  diagonal {:.4}",
        b.min.x,
        b.min.y,
        b.min.z,
        b.max.x,
        b.max.y,
        b.max.z,
        b.diagonal()
    );
    println!("materials  {}", s.materials.len());
    for (i, m) in s.materials.iter().enumerate() {
        let kind = match m.bsdf {
            Bsdf::Diffuse { albedo, texture } => format!(
                "diffuse {:.3?}{}",
                albedo.to_array(),
                if texture.is_some() { " + texture" } else { "" }
            ),
            Bsdf::Glossy {
                albedo,
                specular,
                exponent,
                ..
            } => format!(
                "glossy diffuse {:.3?} specular {:.3?} exponent {exponent}",
                albedo.to_array(),
                specular.to_array()
            ),
            Bsdf::Mirror { reflectance } => format!("mirror {:.3?}", reflectance.to_array()),
            Bsdf::Dielectric { ior, .. } => format!("glass ior {ior}"),
        };
        let emit = if m.is_emissive() {
            format!(", emits {:.4?}", m.emission.to_array())
        } else {
            String::new()
        };
        let sides = if m.two_sided {
            "two-sided"
        } else {
            "one-sided"
        };
        println!("  [{i}] {:<20} {kind}{emit} ({sides})", m.name);
    }
    println!("textures   {}", s.textures.len());
    let area_lights = s.emissive_materials().count();
    println!(
        "lights     {} analytic, {} area-light material(s)",
        s.lights.len(),
        area_lights
    );
    for l in &s.lights {
        match l {
            Light::Point {
                position,
                intensity,
            } => {
                println!(
                    "  point at {:.4?} intensity {:.4?}",
                    position.to_array(),
                    intensity.to_array()
                )
            }
            Light::Spot {
                position,
                direction,
                intensity,
                ..
            } => println!(
                "  spot at {:.4?} towards {:.4?} intensity {:.4?}",
                position.to_array(),
                direction.to_array(),
                intensity.to_array()
            ),
            Light::Directional {
                direction,
                irradiance,
            } => println!(
                "  directional along {:.4?} irradiance {:.4?}",
                direction.to_array(),
                irradiance.to_array()
            ),
        }
    }
    match &s.camera {
        Some(c) => println!(
            "camera     eye {:.4?} target {:.4?} up {:.4?} fov {}° ({})",
            c.eye.to_array(),
            c.target.to_array(),
            c.up.to_array(),
            c.fov_deg,
            if c.fov_axis == FovAxis::X {
                "horizontal"
            } else {
                "vertical"
            }
        ),
        None => println!("camera     none (render frames the scene bounds)"),
    }
    if let Some(f) = s.film {
        println!("film       {}x{}", f.width, f.height);
    }
    if let Some(animation) = &s.animation {
        print_animation(animation);
    }
    Ok(())
}

/// The clock and what moves; the scene's other lines show frame 0.
fn print_animation(animation: &caustic_scene::Animation) {
    let clock = animation.timeline();
    let fps = clock
        .fps()
        .map_or_else(|| "still".to_string(), |fps| format!("{fps:.2} fps"));
    println!(
        "animated   yes, {} frames, {} s ({fps}), from {} s to {} s",
        clock.frames,
        clock.duration(),
        clock.start,
        clock.end
    );
    let mut moves = vec![
        format!("{} animated objects", animation.animated_objects()),
        format!("{} moving meshes", animation.moving_meshes().len()),
    ];
    if animation.animates_camera() {
        moves.push("camera animated".into());
    }
    if animation.animated_lights() > 0 {
        moves.push(format!("{} animated lights", animation.animated_lights()));
    }
    if !animation.fixed_topology() {
        moves.push("meshes change from frame to frame".into());
    }
    println!("           {}", moves.join(", "));
}
