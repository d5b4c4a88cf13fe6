//! PLY loader: ASCII, binary little endian and binary big endian.

use crate::{Mesh, Scene, SceneError, Warning};
use std::path::Path;

/// Loads a PLY file as a one-mesh scene with the default material.
pub(crate) fn load(path: &Path) -> Result<Scene, SceneError> {
    Err(SceneError::new(
        crate::ErrorKind::Unsupported,
        path,
        "PLY loader not written yet",
    ))
}

/// Reads a PLY file as one mesh (`material_ids` all 0).
pub(crate) fn read_ply_mesh(path: &Path, warnings: &mut Vec<Warning>) -> Result<Mesh, SceneError> {
    let _ = warnings;
    Err(SceneError::new(
        crate::ErrorKind::Unsupported,
        path,
        "PLY loader not written yet",
    ))
}
