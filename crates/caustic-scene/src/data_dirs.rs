//! Where the standard test scenes and reference renders live, for tests,
//! benchmarks and examples. One setting each, an environment variable with
//! a default relative to the workspace:
//!
//! - `CAUSTIC_SCENES`: unpacked `shared/scenes` archives, default
//!   `target/scenes` (`.ci/run` unpacks them there);
//! - `CAUSTIC_REFS`: the Mitsuba reference renders, default `../shared/refs`.
//!
//! [`find_scene`] and [`find_ref`] look a file up and say what is missing
//! and how to get it. Tests go through [`scene_file`] and [`ref_file`],
//! which apply one policy to a missing file, so that no test passes for
//! want of its data without anyone seeing it:
//!
//! - where data is required ([`data_required`]: under CI, or with
//!   `CAUSTIC_REQUIRE_DATA=1`) the test fails with that message;
//! - elsewhere it skips, writing the message to the terminal past the test
//!   harness's output capture (which would hide an `eprintln!` of a test
//!   that passes).

use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

/// How to get the standard scenes, for messages.
const SCENES_FIX: &str = "unpack them with `../shared/scenes/unpack target/scenes` \
     from the workspace root (`.ci/run` does), or set CAUSTIC_SCENES to the folder";

/// How to get the reference renders, for messages.
const REFS_FIX: &str = "put `shared/refs` beside the repository as `../shared/refs`, \
     or set CAUSTIC_REFS to the folder";

/// A data file or folder that is not there, and how to get it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Missing {
    /// What is missing, with the path that was looked at.
    pub what: String,
    /// How to get it.
    pub fix: &'static str,
}

impl fmt::Display for Missing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} not found; {}", self.what, self.fix)
    }
}

impl std::error::Error for Missing {}

fn workspace_root() -> PathBuf {
    // crates/caustic-scene -> workspace root
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The folder `var` names, or `default`, whether it exists or not.
fn dir_setting(var: &str, default: &str) -> PathBuf {
    std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(default))
}

fn scenes_setting() -> PathBuf {
    dir_setting("CAUSTIC_SCENES", "target/scenes")
}

fn refs_setting() -> PathBuf {
    dir_setting("CAUSTIC_REFS", "../shared/refs")
}

/// The unpacked standard scenes, if present.
pub fn scenes_dir() -> Option<PathBuf> {
    Some(scenes_setting()).filter(|dir| dir.is_dir())
}

/// The reference renders (`shared/refs`), if present.
pub fn refs_dir() -> Option<PathBuf> {
    Some(refs_setting()).filter(|dir| dir.is_dir())
}

/// `relative` under `dir`, or what is missing: the folder (`kind`) or the file.
fn find_in(dir: &Path, kind: &str, relative: &str, fix: &'static str) -> Result<PathBuf, Missing> {
    if !dir.is_dir() {
        return Err(Missing {
            what: format!("{kind} folder {} (for {relative})", dir.display()),
            fix,
        });
    }
    let path = dir.join(relative);
    if path.is_file() {
        Ok(path)
    } else {
        Err(Missing {
            what: format!("{kind} file {}", path.display()),
            fix,
        })
    }
}

/// A file of the standard scenes, e.g. `bunny/bun_zipper.ply`.
pub fn find_scene(relative: &str) -> Result<PathBuf, Missing> {
    find_in(&scenes_setting(), "standard scenes", relative, SCENES_FIX)
}

/// A file of the reference renders, e.g. `cornell-box/cornell-box.xml`.
pub fn find_ref(relative: &str) -> Result<PathBuf, Missing> {
    find_in(&refs_setting(), "reference renders", relative, REFS_FIX)
}

/// Whether an environment setting is on: set, and neither empty, `0` nor
/// `false` (how CI services set `CI`).
fn setting_on(var: &str) -> bool {
    is_on(std::env::var(var).ok().as_deref())
}

fn is_on(value: Option<&str>) -> bool {
    value.is_some_and(|v| !matches!(v.trim().to_ascii_lowercase().as_str(), "" | "0" | "false"))
}

/// Whether tests must fail rather than skip without their data: under CI
/// (`CI` on) or with `CAUSTIC_REQUIRE_DATA` on.
pub fn data_required() -> bool {
    setting_on("CI") || setting_on("CAUSTIC_REQUIRE_DATA")
}

/// A standard scene file for a test, or `None` after saying that the test
/// skips; panics instead where [`data_required`].
pub fn scene_file(relative: &str) -> Option<PathBuf> {
    present_or_skip(find_scene(relative))
}

/// A reference-render file for a test, or `None` after saying that the
/// test skips; panics instead where [`data_required`].
pub fn ref_file(relative: &str) -> Option<PathBuf> {
    present_or_skip(find_ref(relative))
}

/// The test policy for a looked-up file (see the module docs).
pub fn present_or_skip(found: Result<PathBuf, Missing>) -> Option<PathBuf> {
    let missing = match found {
        Ok(path) => return Some(path),
        Err(missing) => missing,
    };
    match verdict(&missing, data_required()) {
        Ok(skip_line) => {
            say_uncaptured(&skip_line);
            None
        }
        Err(failure) => panic!("{failure}"),
    }
}

/// What a test without its data does: the line saying that it skips, or,
/// where the data is `required`, the message it fails with.
fn verdict(missing: &Missing, required: bool) -> Result<String, String> {
    if required {
        Err(format!(
            "test data missing (required under CI or CAUSTIC_REQUIRE_DATA=1): {missing}"
        ))
    } else {
        Ok(format!("skipping: {missing}"))
    }
}

/// Writes a line to stderr past the test harness's capture, which only
/// redirects the `print!` family of macros: a skip must be seen.
pub fn say_uncaptured(line: &str) {
    // Nothing to do if the terminal is gone.
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_folder_names_itself_and_the_fix() {
        let missing = find_in(
            Path::new("/no/such/folder"),
            "standard scenes",
            "bunny/bun_zipper.ply",
            SCENES_FIX,
        )
        .unwrap_err();
        let text = missing.to_string();
        assert!(text.contains("/no/such/folder"), "{text}");
        assert!(text.contains("bunny/bun_zipper.ply"), "{text}");
        assert!(text.contains("shared/scenes/unpack"), "{text}");
    }

    #[test]
    fn a_missing_file_names_its_path() {
        let dir = std::env::temp_dir();
        let missing = find_in(&dir, "reference renders", "no-such.exr", REFS_FIX).unwrap_err();
        assert_eq!(
            missing.what,
            format!(
                "reference renders file {}",
                dir.join("no-such.exr").display()
            )
        );
        assert!(missing.to_string().contains("CAUSTIC_REFS"));
    }

    #[test]
    fn ci_values_that_turn_the_requirement_on() {
        for on in ["1", "true", "yes", "TRUE"] {
            assert!(is_on(Some(on)), "{on}");
        }
        for off in [None, Some(""), Some("0"), Some("false"), Some("False")] {
            assert!(!is_on(off), "{off:?}");
        }
    }

    #[test]
    fn missing_data_fails_where_required_and_skips_elsewhere() {
        let missing = Missing {
            what: "standard scenes file x.ply".into(),
            fix: SCENES_FIX,
        };
        let failure = verdict(&missing, true).unwrap_err();
        assert!(
            failure.starts_with("test data missing (required under CI"),
            "{failure}"
        );
        assert!(failure.ends_with(&missing.to_string()), "{failure}");
        let skip = verdict(&missing, false).unwrap();
        assert_eq!(skip, format!("skipping: {missing}"));
    }

    #[test]
    fn present_data_is_used_whatever_the_policy() {
        let path = PathBuf::from("x");
        assert_eq!(present_or_skip(Ok(path.clone())), Some(path));
    }

    #[test]
    fn a_present_file_is_found() {
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
        let found = find_in(manifest, "crate", "Cargo.toml", SCENES_FIX);
        assert_eq!(found, Ok(manifest.join("Cargo.toml")));
    }
}
