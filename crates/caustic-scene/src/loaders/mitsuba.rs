//! Mitsuba 3 XML scene subset.

use crate::{Scene, SceneError};
use std::path::Path;

pub(crate) fn load(path: &Path) -> Result<Scene, SceneError> {
    Err(SceneError::new(
        crate::ErrorKind::Unsupported,
        path,
        "Mitsuba loader not written yet",
    ))
}
