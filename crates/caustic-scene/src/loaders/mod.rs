//! File loaders, one per format, behind [`load`].

mod gltf;
mod mitsuba;
mod obj;
mod ply;

use crate::{ErrorKind, Scene, SceneError};
use std::path::Path;

pub(crate) fn load(path: &Path) -> Result<Scene, SceneError> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(|e| e.to_ascii_lowercase())
        .unwrap_or_default();
    if !path.exists() {
        return Err(SceneError::new(ErrorKind::Io, path, "no such file"));
    }
    let mut scene = match ext.as_str() {
        "obj" => obj::load(path)?,
        "ply" => ply::load(path)?,
        "gltf" | "glb" => gltf::load(path)?,
        "xml" => mitsuba::load(path)?,
        _ => {
            return Err(SceneError::new(
                ErrorKind::UnsupportedFormat,
                path,
                format!("unknown scene format '.{ext}' (expected .obj, .ply, .gltf, .glb or .xml)"),
            ));
        }
    };
    finish(path, &mut scene)?;
    Ok(scene)
}

/// Checks shared by every loader: sanitises meshes, drops empty ones with a
/// warning, guarantees a material list, and rejects scenes with no triangles.
pub(crate) fn finish(path: &Path, scene: &mut Scene) -> Result<(), SceneError> {
    if scene.materials.is_empty() {
        scene.materials.push(crate::Material::default_grey());
    }
    let material_count = scene.materials.len() as u32;
    let mut warnings = std::mem::take(&mut scene.warnings);
    for mesh in &mut scene.meshes {
        if let Some(bad) = mesh.material_ids.iter().find(|&&m| m >= material_count) {
            return Err(SceneError::new(
                ErrorKind::IndexOutOfRange,
                path,
                format!("mesh '{}': material index {bad} out of range", mesh.name),
            ));
        }
        scene.skipped_triangles += mesh.sanitize(path, &mut warnings)?;
    }
    scene.meshes.retain(|m| {
        let empty = m.indices.is_empty();
        if empty {
            warnings.push(crate::Warning::new(
                path,
                format!("mesh '{}' has no triangles; skipped", m.name),
            ));
        }
        !empty
    });
    scene.warnings = warnings;
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
