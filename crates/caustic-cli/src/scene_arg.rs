//! Turning a SCENE argument into a scene: a file path, or the name of a
//! built-in scene. The scene is used as its file describes it; cameras for
//! files without one come from `camera.rs`, explicitly.

use anyhow::Result;
use caustic::Scene;
use std::path::{Path, PathBuf};

/// A loaded scene, a short name for it (file stem or built-in name) and
/// the file it came from (`None` for a built-in scene).
pub struct LoadedScene {
    pub scene: Scene,
    pub name: String,
    pub path: Option<PathBuf>,
}

impl LoadedScene {
    /// The scene file's name (`sponza.obj`), for a scene from a file.
    pub fn file_name(&self) -> Option<&str> {
        self.path.as_deref()?.file_name()?.to_str()
    }
}

/// The short name `load` will give `arg`: a built-in scene's name or the
/// file's stem. Known before loading, for default output names.
pub fn short_name(arg: &str) -> String {
    let path = Path::new(arg);
    if Scene::builtin(arg).is_some() && !path.exists() {
        return arg.to_owned();
    }
    path.file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("scene")
        .to_owned()
}

/// Loads `arg` as a file, or makes the built-in scene of that name
/// (through [`caustic::load_scene`]). Loader warnings are printed, one
/// line each.
pub fn load(arg: &str) -> Result<LoadedScene> {
    let scene = caustic::load_scene(arg).map_err(|err| {
        // "no such file, and not a built-in scene" says it all; a file that
        // fails to load gets the context the loader's message lacks.
        let missing = matches!(err, caustic::Error::NoScene { .. });
        let err = anyhow::Error::new(err);
        if missing {
            err
        } else {
            err.context("cannot load the scene")
        }
    })?;
    for w in &scene.warnings {
        crate::notes::warn(w);
    }
    let path = Path::new(arg);
    Ok(LoadedScene {
        scene,
        name: short_name(arg),
        path: path.exists().then(|| path.to_owned()),
    })
}

/// `FILE@N` (N copies of FILE on a square grid, `caustic bench gpu`'s
/// 14 M-triangle `dragon_vrip.ply@16`) as (FILE, N); any other argument,
/// or one that names an existing file, as (it, 1).
pub fn split_copies(arg: &str) -> Result<(&str, usize)> {
    match arg.rsplit_once('@') {
        Some((path, n)) if !Path::new(arg).exists() => {
            let copies = n
                .parse()
                .ok()
                .filter(|c| (1..=1024).contains(c))
                .ok_or_else(|| {
                    anyhow::anyhow!("{arg}: the copies after @ must be a number from 1 to 1024")
                })?;
            Ok((path, copies))
        }
        _ => Ok((arg, 1)),
    }
}

/// The triangles of `arg` (a scene [`load`] takes, or `FILE@N`: N copies
/// of it on a square grid, as `caustic_geom::protocol::replicate_grid`
/// lays them out) and a name for them.
pub fn load_triangles(arg: &str) -> Result<(String, Vec<caustic_geom::Triangle>)> {
    let (path, copies) = split_copies(arg)?;
    Ok(copies_of(&load(path)?, copies))
}

/// The triangles of `copies` copies of `loaded` on a square grid
/// (`caustic_geom::protocol::replicate_grid`) and their name (`NAME xN`).
pub fn copies_of(loaded: &LoadedScene, copies: usize) -> (String, Vec<caustic_geom::Triangle>) {
    let triangles = loaded.scene.triangles();
    if copies > 1 {
        let name = format!("{} x{copies}", loaded.name);
        return (
            name,
            caustic_geom::protocol::replicate_grid(&triangles, copies),
        );
    }
    (loaded.name.clone(), triangles)
}
