//! Turning a SCENE argument into a scene: a file path, or the name of a
//! built-in scene. Standard scenes from `shared/scenes` that carry no camera
//! get the camera their README lists.

use anyhow::{Context, Result, bail};
use caustic_geom::{DVec3, Vec3};
use caustic_scene::{BUILTIN_SCENES, Camera, Scene};
use std::path::Path;

/// A loaded scene and a short name for it (file stem or built-in name).
pub struct LoadedScene {
    pub scene: Scene,
    pub name: String,
}

/// Loads `arg` as a file, or makes the built-in scene of that name.
/// Loader warnings are printed, one line each.
pub fn load(arg: &str) -> Result<LoadedScene> {
    let path = Path::new(arg);
    if let Some(scene) = Scene::builtin(arg).filter(|_| !path.exists()) {
        return Ok(LoadedScene {
            scene,
            name: arg.to_string(),
        });
    }
    if !path.exists() {
        let names: Vec<&str> = BUILTIN_SCENES.iter().map(|(n, _)| *n).collect();
        bail!(
            "{arg}: no such file, and not a built-in scene (built-in: {})",
            names.join(", ")
        );
    }
    let mut scene = Scene::load(path).context("cannot load the scene")?;
    for w in &scene.warnings {
        eprintln!("warning: {w}");
    }
    let file_name = path.file_name().and_then(|f| f.to_str()).unwrap_or("");
    if let Some(camera) = standard_camera(file_name).filter(|_| scene.camera.is_none()) {
        eprintln!(
            "note: {file_name} has no camera; using its standard camera from shared/scenes/README.md"
        );
        scene.camera = Some(camera);
    }
    let name = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("scene")
        .to_string();
    Ok(LoadedScene { scene, name })
}

/// The cameras `shared/scenes/README.md` gives for the standard scenes.
fn standard_camera(file_name: &str) -> Option<Camera> {
    let v = |x: f32, y: f32, z: f32| Vec3::new(x, y, z);
    let (eye, at, up, fov) = match file_name {
        "cornell_box.obj" => (v(278.0, 273.0, -800.0), v(278.0, 273.0, 0.0), Vec3::Y, 39.3),
        "CornellBox-Original.obj" | "CornellBox-Mirror.obj" | "CornellBox-Empty-RG.obj" => {
            (v(0.0, 1.0, 3.9), v(0.0, 1.0, 0.0), Vec3::Y, 39.3)
        }
        "CornellBox-Sphere.obj" | "CornellBox-Water.obj" | "CornellBox-Glossy.obj" => {
            (v(0.0, 0.8, 3.4), v(0.0, 0.8, 0.0), Vec3::Y, 39.3)
        }
        "bun_zipper.ply" => (
            v(0.1031, 0.1959, 0.3413),
            v(-0.0168, 0.1102, -0.0015),
            Vec3::Y,
            40.0,
        ),
        f if f.starts_with("dragon_vrip") => (
            v(0.1221, 0.2164, 0.3610),
            v(-0.0059, 0.1250, -0.0046),
            Vec3::Y,
            40.0,
        ),
        "buddha_100k.obj" => (
            v(1.0434, 0.7718, 3.2197),
            v(-0.0544, -0.0124, 0.0831),
            Vec3::Y,
            40.0,
        ),
        "sponza.obj" => (v(-14.0, 0.0, 2.5), v(0.0, 0.0, 4.0), Vec3::Z, 65.0),
        "sibenik.obj" => (v(-17.0, -9.0, 0.0), v(10.0, -11.0, 0.0), Vec3::Y, 65.0),
        "conference.obj" => (
            v(-850.0, -550.0, 480.0),
            v(700.0, 350.0, 100.0),
            Vec3::Z,
            65.0,
        ),
        "MNCardioid.obj" => (v(-7.0, 7.0, 7.0), Vec3::ZERO, Vec3::Y, 45.0),
        "MNRing.obj" => (v(-6.0, 6.0, 6.0), Vec3::ZERO, Vec3::Y, 45.0),
        _ => return None,
    };
    Some(Camera::look_at(eye, at, up, fov))
}

/// Parses `x,y,z` in `f64`: the ray protocol computes its camera in `f64`
/// from the numbers as written.
pub fn parse_vec3(s: &str) -> Result<DVec3, String> {
    let parts: Vec<&str> = s.split(',').map(str::trim).collect();
    if parts.len() != 3 {
        return Err(format!("expected x,y,z but got '{s}'"));
    }
    let mut out = [0.0f64; 3];
    for (o, p) in out.iter_mut().zip(&parts) {
        *o = p
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite())
            .ok_or_else(|| format!("'{p}' is not a finite number"))?;
    }
    Ok(DVec3::from(out))
}

/// `--eye/--at/--up/--fov`: override the scene's camera.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct CameraArgs {
    /// Camera position, x,y,z (with --at, replaces the scene's camera).
    #[arg(long, value_parser = parse_vec3, allow_hyphen_values = true)]
    pub eye: Option<DVec3>,
    /// Point the camera looks at, x,y,z.
    #[arg(long, value_parser = parse_vec3, allow_hyphen_values = true)]
    pub at: Option<DVec3>,
    /// Camera up vector, x,y,z (default 0,1,0).
    #[arg(long, value_parser = parse_vec3, allow_hyphen_values = true)]
    pub up: Option<DVec3>,
    /// Vertical field of view in degrees.
    #[arg(long)]
    pub fov: Option<f64>,
}

impl CameraArgs {
    /// The scene's camera (or a framing one) with the overrides applied.
    pub fn resolve(&self, scene: &Scene) -> Result<Camera> {
        let mut camera = scene.camera_or_default();
        match (self.eye, self.at) {
            (Some(eye), Some(at)) => {
                let up = self.up.map_or(Vec3::Y, |u| u.as_vec3());
                camera = Camera::look_at(eye.as_vec3(), at.as_vec3(), up, camera.fov_deg)
            }
            (None, None) => {
                if let Some(up) = self.up {
                    camera.up = up.as_vec3();
                }
            }
            _ => bail!("--eye and --at go together"),
        }
        if let Some(fov) = self.fov {
            camera.fov_deg = fov as f32;
            camera.fov_axis = caustic_scene::FovAxis::Y;
        }
        if !camera.is_valid() {
            bail!("the camera is degenerate: {camera:?}");
        }
        Ok(camera)
    }
}
