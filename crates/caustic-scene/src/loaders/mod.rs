//! File loaders, one per format, behind [`load`].

mod aff;
mod gltf;
mod guard;
mod input;
mod mitsuba;
mod obj;
mod ply;
mod polygon;
mod sequence;

use crate::error::collapse_warnings;
use crate::{ErrorKind, Scene, SceneError};
use std::path::Path;

/// The extensions [`load`] knows, as error messages list them.
const EXTENSIONS: &str = ".obj, .ply, .gltf, .glb, .xml or .aff";

pub(crate) fn is_sequence_pattern(path: &Path) -> bool {
    sequence::pattern(path).is_some()
}

pub(crate) fn load(path: &Path) -> Result<Scene, SceneError> {
    if !path.exists() && sequence::pattern(path).is_some() {
        let mut scene = sequence::load(path)?;
        finish(path, &mut scene)?;
        return Ok(scene);
    }
    if !path.exists() {
        return Err(SceneError::new(ErrorKind::Io, path, "no such file"));
    }
    let not_a_scene = |why: String| {
        Err(SceneError::new(
            ErrorKind::UnsupportedFormat,
            path,
            format!("not a scene file: {why} (scene files end in {EXTENSIONS})"),
        ))
    };
    if path.is_dir() {
        return not_a_scene("it is a directory".into());
    }
    let Some(ext) = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
    else {
        return not_a_scene("the name has no extension".into());
    };
    let mut scene = match ext.as_str() {
        "obj" => obj::load(path)?,
        "ply" => ply::load(path)?,
        "gltf" | "glb" => gltf::load(path)?,
        "xml" => mitsuba::load(path)?,
        "aff" => aff::load(path)?,
        _ => return not_a_scene(format!("unknown extension '.{ext}'")),
    };
    if let Err(e) = finish(path, &mut scene) {
        return Err(e.with_warnings(std::mem::take(&mut scene.warnings)));
    }
    Ok(scene)
}

/// Checks shared by every loader: sanitises meshes, drops empty ones with a
/// warning, guarantees a material list, and rejects scenes with no triangles.
/// Leaves the warnings collapsed (identical ones merged with a count), in
/// `scene.warnings` whether or not it fails.
pub(crate) fn finish(path: &Path, scene: &mut Scene) -> Result<(), SceneError> {
    if scene.materials.is_empty() {
        scene.materials.push(crate::Material::default_grey());
    }
    let mut warnings = std::mem::take(&mut scene.warnings);
    let result = sanitize_meshes(path, scene, &mut warnings);
    scene.warnings = collapse_warnings(warnings);
    result?;
    if scene.triangle_count() == 0 {
        return Err(SceneError::new(
            ErrorKind::Empty,
            path,
            "the scene contains no triangles",
        ));
    }
    if let Some(cam) = scene.camera.filter(|c| !c.is_valid()) {
        return Err(SceneError::new(
            ErrorKind::InvalidValue,
            path,
            format!(
                "camera is degenerate (eye {:?}, target {:?}, up {:?}, fov {}°)",
                cam.eye, cam.target, cam.up, cam.fov_deg
            ),
        ));
    }
    Ok(())
}

/// Checks material ids, drops bad triangles and then empty meshes.
fn sanitize_meshes(
    path: &Path,
    scene: &mut Scene,
    warnings: &mut Vec<crate::Warning>,
) -> Result<(), SceneError> {
    let material_count = scene.materials.len() as u32;
    // Moving meshes keep every triangle: one degenerate now may open up
    // later, and the triangle numbering must not change between poses.
    let moving = scene
        .animation
        .as_ref()
        .map(|a| a.moving_meshes())
        .unwrap_or_default();
    for (i, mesh) in scene.meshes.iter_mut().enumerate() {
        if let Some(bad) = mesh.material_ids.iter().find(|&&m| m >= material_count) {
            return Err(SceneError::new(
                ErrorKind::IndexOutOfRange,
                path,
                format!("mesh '{}': material index {bad} out of range", mesh.name),
            ));
        }
        if moving.binary_search(&i).is_ok() {
            mesh.check(path)?;
        } else {
            scene.skipped_triangles += mesh.sanitize(path, warnings)?;
        }
    }
    let mut kept = Vec::with_capacity(scene.meshes.len());
    for mesh in std::mem::take(&mut scene.meshes) {
        if mesh.indices.is_empty() {
            warnings.push(crate::Warning::new(
                path,
                format!("mesh '{}' has no triangles; skipped", mesh.name),
            ));
            kept.push(None);
        } else {
            kept.push(Some(scene.meshes.len()));
            scene.meshes.push(mesh);
        }
    }
    if let (true, Some(animation)) = (kept.iter().any(Option::is_none), &mut scene.animation) {
        std::sync::Arc::make_mut(animation).renumber_meshes(&kept);
    }
    Ok(())
}
