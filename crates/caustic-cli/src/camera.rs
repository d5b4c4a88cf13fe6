//! `--camera/--eye/--at/--up/--fov`: which camera a subcommand uses, from
//! explicit flags down to the automatic framing (the order is in
//! [`camera_presets::help`]), and errors that name the flag at fault when
//! the result is degenerate.

use crate::camera_presets;
use crate::notes;
use crate::parse;
use crate::scene_arg::LoadedScene;
use anyhow::{Context, Result, bail};
use caustic_geom::{DVec3, Vec3};
use caustic_scene::{Camera, FovAxis};
use std::path::{Path, PathBuf};

/// The camera flags every rendering and benchmarking subcommand shares.
#[derive(clap::Args, Clone, Debug, Default)]
#[command(next_help_heading = "Camera")]
pub struct CameraArgs {
    /// A preset for a standard test scene, `standard` (each scene's preset
    /// by its file name), or a camera file (presets and format below).
    #[arg(long, value_name = "PRESET|FILE")]
    pub camera: Option<String>,
    /// Camera position, x,y,z (with --at, replaces the camera).
    #[arg(long, value_parser = parse::vec3, allow_hyphen_values = true)]
    pub eye: Option<DVec3>,
    /// Point the camera looks at, x,y,z.
    #[arg(long, value_parser = parse::vec3, allow_hyphen_values = true)]
    pub at: Option<DVec3>,
    /// Camera up vector, x,y,z [default: the camera's; 0,1,0 with --eye/--at].
    #[arg(long, value_parser = parse::vec3, allow_hyphen_values = true)]
    pub up: Option<DVec3>,
    /// Vertical field of view in degrees, strictly between 0 and 180.
    #[arg(long, value_parser = parse::fov_degrees, allow_negative_numbers = true)]
    pub fov: Option<f64>,
}

/// Why a camera has no well-defined frame.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Degenerate {
    SamePoint,
    ZeroUp,
    ParallelUp,
    Fov,
}

impl CameraArgs {
    /// The camera for `loaded`, flags applied, or an error naming the flag
    /// (or the camera's source) that makes it degenerate.
    pub fn resolve(&self, loaded: &LoadedScene) -> Result<Camera> {
        let placed = self.eye.is_some() && self.at.is_some();
        if self.eye.is_some() != self.at.is_some() {
            bail!("--eye and --at go together: give both, or neither");
        }
        let (mut camera, source) = self.base(loaded, placed)?;
        if let (Some(eye), Some(at)) = (self.eye, self.at) {
            camera.eye = eye.as_vec3();
            camera.target = at.as_vec3();
            camera.up = Vec3::Y;
        }
        if let Some(up) = self.up {
            camera.up = up.as_vec3();
        }
        if let Some(fov) = self.fov {
            camera.fov_deg = fov as f32;
            camera.fov_axis = FovAxis::Y;
        }
        match degenerate(&camera) {
            Some(problem) => bail!(self.explain(problem, &camera, &source)),
            None => Ok(camera),
        }
    }

    /// The camera before the flags, and a phrase naming where it came from.
    fn base(&self, loaded: &LoadedScene, placed: bool) -> Result<(Camera, String)> {
        if let Some(spec) = &self.camera
            && let Some(found) = named_camera(spec, loaded)?
        {
            return Ok(found);
        }
        if let Some(path) = sidecar(loaded) {
            notes::note(format!("camera from {}", path.display()));
            let camera = read_camera_file(&path)?;
            return Ok((camera, format!("the camera file {}", path.display())));
        }
        if let Some(camera) = loaded.scene.camera {
            return Ok((camera, "the scene's camera".to_owned()));
        }
        if !placed {
            notes::note(format!(
                "{} has no camera: framing its bounds from above (choose one with --camera or --eye/--at)",
                loaded.name
            ));
        }
        let camera = Camera::framing(loaded.scene.bounds());
        Ok((camera, "the automatic camera".to_owned()))
    }

    /// The error for a degenerate camera: the flags that made it so, or
    /// its source, and what to pass instead.
    fn explain(&self, problem: Degenerate, camera: &Camera, source: &str) -> String {
        let placed = self.eye.is_some() && self.at.is_some();
        let v = |v: Vec3| {
            // Four decimals (and no -0) read better than f32's last bits.
            let r = |x: f32| (x * 1e4).round() / 1e4 + 0.0;
            format!("{},{},{}", r(v.x), r(v.y), r(v.z))
        };
        match problem {
            Degenerate::SamePoint if placed => format!(
                "--eye and --at are the same point ({}), so the camera looks nowhere: move --eye away from --at",
                v(camera.eye)
            ),
            Degenerate::SamePoint => format!(
                "{source} has its eye and target at the same point ({}): place the camera with --eye and --at",
                v(camera.eye)
            ),
            Degenerate::ZeroUp if self.up.is_some() => {
                "--up 0,0,0 has no direction: pass an up vector such as --up 0,1,0".to_owned()
            }
            Degenerate::ZeroUp => {
                format!("{source} has a zero up vector: pass --up, e.g. --up 0,1,0")
            }
            Degenerate::ParallelUp => {
                let view = if placed {
                    "the view direction from --eye to --at".to_owned()
                } else {
                    format!("the view direction of {source}")
                };
                let up = match (self.up.is_some(), placed) {
                    (true, _) => "--up",
                    (false, true) => "the default up",
                    (false, false) => "its up vector",
                };
                let forward = (camera.target - camera.eye).normalize();
                format!(
                    "{view} ({}) is parallel to {up} ({}), so the image has no up: pass an --up across the view, e.g. --up {}",
                    v(forward),
                    v(camera.up),
                    v(suggested_up(forward))
                )
            }
            Degenerate::Fov => format!(
                "{source} has a field of view of {}°, outside (0, 180): pass --fov, e.g. --fov 45",
                camera.fov_deg
            ),
        }
    }
}

/// Whether `camera` has a well-defined frame (what [`CameraArgs::resolve`]
/// insists on): for cameras that come from elsewhere, a viewer's client.
pub fn usable(camera: &Camera) -> bool {
    degenerate(camera).is_none()
}

/// What is wrong with `camera`, if anything. Each test is written as what
/// is fine, so that a NaN anywhere fails it.
fn degenerate(camera: &Camera) -> Option<Degenerate> {
    let view = camera.target - camera.eye;
    let scale = camera
        .eye
        .abs()
        .max(camera.target.abs())
        .max_element()
        .max(1.0);
    let apart = view.length() > 1e-6 * scale;
    let has_up = camera.up.length() > 0.0;
    // Nearly parallel vectors give a frame, but one that spins wildly
    // with the last bits of the input: treat them as parallel.
    let across = view.normalize().cross(camera.up.normalize()).length() > 1e-4;
    let fov_ok = camera.fov_deg > 0.0 && camera.fov_deg < 180.0;
    if !apart {
        Some(Degenerate::SamePoint)
    } else if !has_up {
        Some(Degenerate::ZeroUp)
    } else if !across {
        Some(Degenerate::ParallelUp)
    } else if !fov_ok || !camera.is_valid() {
        Some(Degenerate::Fov)
    } else {
        None
    }
}

/// The coordinate axis most across `forward`: a safe up vector to suggest.
fn suggested_up(forward: Vec3) -> Vec3 {
    [Vec3::Y, Vec3::Z, Vec3::X]
        .into_iter()
        .min_by(|a, b| forward.dot(*a).abs().total_cmp(&forward.dot(*b).abs()))
        .unwrap_or(Vec3::Y)
}

/// `--camera SPEC`: a preset, `standard`, or a camera file. `None` when
/// `standard` has no preset for this scene (the other sources apply).
fn named_camera(spec: &str, loaded: &LoadedScene) -> Result<Option<(Camera, String)>> {
    if spec == "standard" {
        let preset = loaded.file_name().and_then(camera_presets::for_file);
        return Ok(match preset {
            Some(p) => Some((p.camera(), format!("--camera standard ({})", p.name))),
            None => {
                notes::note(format!(
                    "--camera standard: no preset for {}; using the next camera source",
                    loaded.name
                ));
                None
            }
        });
    }
    if let Some(preset) = camera_presets::by_name(spec) {
        return Ok(Some((preset.camera(), format!("--camera {spec}"))));
    }
    let path = Path::new(spec);
    if !path.is_file() {
        bail!(
            "--camera {spec}: not a preset and not a camera file (presets: standard, {})",
            camera_presets::names()
        );
    }
    let camera = read_camera_file(path)?;
    Ok(Some((camera, format!("the camera file {spec}"))))
}

/// `SCENE.camera` next to a scene file, when there is one.
fn sidecar(loaded: &LoadedScene) -> Option<PathBuf> {
    let mut name = loaded.path.as_ref()?.as_os_str().to_owned();
    name.push(".camera");
    let path = PathBuf::from(name);
    path.is_file().then_some(path)
}

/// Reads a camera file: `key = value` lines with keys `eye`, `at`, `up`
/// and `fov`, `#` comments.
pub fn read_camera_file(path: &Path) -> Result<Camera> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the camera file {}", path.display()))?;
    parse_camera(&text).with_context(|| format!("camera file {}", path.display()))
}

fn parse_camera(text: &str) -> Result<Camera> {
    let (mut eye, mut at, mut up, mut fov) = (None, None, Vec3::Y, 45.0f32);
    for (number, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            bail!("line {}: expected `key = value`", number + 1);
        };
        let at_line = |e: String| anyhow::anyhow!("line {}: {e}", number + 1);
        let vector = |value: &str| parse::vec3(value).map(|v| v.as_vec3()).map_err(at_line);
        match key.trim() {
            "eye" => eye = Some(vector(value)?),
            "at" => at = Some(vector(value)?),
            "up" => up = vector(value)?,
            "fov" => fov = parse::fov_degrees(value).map_err(at_line)? as f32,
            other => bail!(
                "line {}: unknown key `{other}` (known: eye, at, up, fov)",
                number + 1
            ),
        }
    }
    match (eye, at) {
        (Some(eye), Some(at)) => Ok(Camera::look_at(eye, at, up, fov)),
        _ => bail!("it needs both `eye` and `at`"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn camera_files_parse_and_refuse_nonsense() {
        let camera = parse_camera(
            "# sponza\neye = -14, 0, 2.5\nat = [0, 0, 4]\nup = 0,0,1\nfov = 65 # deg\n",
        )
        .unwrap();
        assert_eq!(camera.eye, Vec3::new(-14.0, 0.0, 2.5));
        assert_eq!(camera.target, Vec3::new(0.0, 0.0, 4.0));
        assert_eq!(camera.up, Vec3::Z);
        assert_eq!(camera.fov_deg, 65.0);
        let defaults = parse_camera("eye = 0,0,5\nat = 0,0,0").unwrap();
        assert_eq!((defaults.up, defaults.fov_deg), (Vec3::Y, 45.0));
        for (bad, says) in [
            ("eye = 0,0,5", "needs both"),
            ("eye = 0,0,5\nat = 0,0\n", "line 2"),
            ("eye = 0,0,5\nat = 0,0,0\nfov = 180", "line 3"),
            ("eye 0,0,5", "key = value"),
            ("lens = 35", "unknown key `lens`"),
        ] {
            let err = format!("{:#}", parse_camera(bad).unwrap_err());
            assert!(err.contains(says), "{bad:?}: {err}");
        }
    }

    #[test]
    fn degenerate_cameras_are_told_apart() {
        let ok = Camera::look_at(Vec3::Z, Vec3::ZERO, Vec3::Y, 45.0);
        assert_eq!(degenerate(&ok), None);
        let same = Camera::look_at(Vec3::ONE, Vec3::ONE, Vec3::Y, 45.0);
        assert_eq!(degenerate(&same), Some(Degenerate::SamePoint));
        let zero = Camera::look_at(Vec3::Z, Vec3::ZERO, Vec3::ZERO, 45.0);
        assert_eq!(degenerate(&zero), Some(Degenerate::ZeroUp));
        let down = Camera::look_at(Vec3::Y, Vec3::ZERO, Vec3::Y, 45.0);
        assert_eq!(degenerate(&down), Some(Degenerate::ParallelUp));
        let wide = Camera::look_at(Vec3::Z, Vec3::ZERO, Vec3::Y, 180.0);
        assert_eq!(degenerate(&wide), Some(Degenerate::Fov));
        assert_eq!(suggested_up(Vec3::NEG_Y), Vec3::Z);
        assert_eq!(suggested_up(Vec3::NEG_Z), Vec3::Y);
    }
}
