//! Output files are checked before the work that fills them: a render or a
//! benchmark that runs for minutes must not fail at the end because its
//! file cannot be written.

use anyhow::{Context, Result, bail};
use std::fs::OpenOptions;
use std::path::Path;

/// The image formats `caustic render` writes.
const IMAGE_EXTENSIONS: [&str; 2] = ["png", "exr"];

/// Checks that `path` names an image caustic can write (`.png` or `.exr`)
/// in a folder that exists and accepts the file.
pub fn check_image_path(path: &Path) -> Result<()> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    if !ext.is_some_and(|e| IMAGE_EXTENSIONS.contains(&e.as_str())) {
        bail!(
            "{}: unknown image format: the output must end in .png (sRGB) or .exr (linear radiance)",
            path.display()
        );
    }
    check_writable(path)
}

/// Checks that `path` can be created or appended to, without changing a
/// file that is already there (a probe file that was not there is removed).
pub fn check_writable(path: &Path) -> Result<()> {
    if path.is_dir() {
        bail!("{}: is a directory, not a file name", path.display());
    }
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !folder.is_dir() {
        bail!(
            "{}: the folder {} does not exist",
            path.display(),
            folder.display()
        );
    }
    let cannot = || format!("{}: cannot write here", path.display());
    if path.exists() {
        OpenOptions::new()
            .append(true)
            .open(path)
            .with_context(cannot)?;
    } else {
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .with_context(cannot)?;
        std::fs::remove_file(path).with_context(cannot)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_paths_are_checked_before_rendering() {
        let dir = std::env::temp_dir().join(format!("caustic-output-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fine = dir.join("a.PNG");
        check_image_path(&fine).unwrap();
        assert!(!fine.exists(), "the probe leaves nothing behind");
        std::fs::write(&fine, b"old").unwrap();
        check_image_path(&fine).unwrap();
        assert_eq!(
            std::fs::read(&fine).unwrap(),
            b"old",
            "an existing file is left as it was"
        );
        let err = |p: &Path| format!("{:#}", check_image_path(p).unwrap_err());
        assert!(err(&dir.join("a.jpg")).contains("unknown image format"));
        assert!(err(&dir.join("a")).contains("unknown image format"));
        assert!(err(&dir.join("missing/a.png")).contains("does not exist"));
        let folder = dir.join("b.exr");
        std::fs::create_dir_all(&folder).unwrap();
        assert!(err(&folder).contains("is a directory"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
