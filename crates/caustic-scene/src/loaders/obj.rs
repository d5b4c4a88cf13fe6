//! Wavefront OBJ + MTL loader (tobj).

use crate::{Mesh, Scene, SceneError, Warning};
use std::path::Path;

/// Loads an OBJ file with its MTL materials as a scene.
pub(crate) fn load(path: &Path) -> Result<Scene, SceneError> {
    let _ = path;
    Err(SceneError::new(
        crate::ErrorKind::Unsupported,
        path,
        "OBJ loader not written yet",
    ))
}

/// Reads only the geometry of an OBJ file as one mesh (all groups merged,
/// MTL ignored, `material_ids` all 0): what Mitsuba's `<shape type="obj">`
/// needs.
pub(crate) fn read_obj_geometry(
    path: &Path,
    warnings: &mut Vec<Warning>,
) -> Result<Mesh, SceneError> {
    let _ = warnings;
    Err(SceneError::new(
        crate::ErrorKind::Unsupported,
        path,
        "OBJ loader not written yet",
    ))
}
