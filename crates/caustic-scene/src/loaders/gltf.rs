//! glTF 2.0 loader (`.gltf` and `.glb`).

use crate::{Scene, SceneError};
use std::path::Path;

pub(crate) fn load(path: &Path) -> Result<Scene, SceneError> {
    Err(SceneError::new(
        crate::ErrorKind::Unsupported,
        path,
        "glTF loader not written yet",
    ))
}
