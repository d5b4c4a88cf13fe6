//! Where the standard test scenes and reference renders live, for tests,
//! benchmarks and the CLI. One setting each, an environment variable with a
//! default relative to the workspace:
//!
//! - `CAUSTIC_SCENES`: unpacked `shared/scenes` archives, default `target/scenes`
//!   (`.ci/run` unpacks them there);
//! - `CAUSTIC_REFS`: the Mitsuba reference renders, default `../shared/refs`.
//!
//! Both return `None` when the folder does not exist, so callers can skip
//! with a printed reason.

use std::path::PathBuf;

fn workspace_root() -> PathBuf {
    // crates/caustic-scene -> workspace root
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn dir_from(var: &str, default: PathBuf) -> Option<PathBuf> {
    let dir = std::env::var_os(var).map(PathBuf::from).unwrap_or(default);
    dir.is_dir().then_some(dir)
}

/// The unpacked standard scenes, if present.
pub fn scenes_dir() -> Option<PathBuf> {
    dir_from("CAUSTIC_SCENES", workspace_root().join("target/scenes"))
}

/// The reference renders (`shared/refs`), if present.
pub fn refs_dir() -> Option<PathBuf> {
    dir_from("CAUSTIC_REFS", workspace_root().join("../shared/refs"))
}

/// A file under [`scenes_dir`], if the folder and the file exist; otherwise
/// prints why the caller is skipping and returns `None`.
pub fn scene_file(relative: &str) -> Option<PathBuf> {
    let Some(dir) = scenes_dir() else {
        eprintln!(
            "skipping: scenes not found (set CAUSTIC_SCENES or unpack shared/scenes into target/scenes)"
        );
        return None;
    };
    let path = dir.join(relative);
    if path.is_file() {
        Some(path)
    } else {
        eprintln!("skipping: {} not found", path.display());
        None
    }
}

/// A file under [`refs_dir`], or `None` with a printed reason.
pub fn ref_file(relative: &str) -> Option<PathBuf> {
    let Some(dir) = refs_dir() else {
        eprintln!("skipping: reference renders not found (set CAUSTIC_REFS)");
        return None;
    };
    let path = dir.join(relative);
    if path.is_file() {
        Some(path)
    } else {
        eprintln!("skipping: {} not found", path.display());
        None
    }
}
