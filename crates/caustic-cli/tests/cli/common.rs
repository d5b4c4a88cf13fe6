//! Running the built `caustic` binary and reading what it wrote.

use std::path::{Path, PathBuf};
use std::process::Command;

/// One finished run of the binary.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// Asserts success and returns the run.
    pub fn ok(self) -> Self {
        assert_eq!(self.code, 0, "expected success\n{}", self.stderr);
        self
    }

    /// Asserts exit code `code` and an error containing `text`.
    pub fn fails_with(self, code: i32, text: &str) -> Self {
        assert_eq!(self.code, code, "exit code\n{}", self.stderr);
        assert!(
            self.stderr.contains(text),
            "stderr should contain {text:?}:\n{}",
            self.stderr
        );
        self
    }

    /// The stderr lines that start with `prefix`.
    pub fn lines_starting(&self, prefix: &str) -> Vec<&str> {
        self.stderr
            .lines()
            .filter(|l| l.starts_with(prefix))
            .collect()
    }
}

/// Runs `caustic ARGS` in `dir`; a panic is never an acceptable outcome.
pub fn caustic_in(dir: &Path, args: &[&str]) -> Run {
    let output = Command::new(env!("CARGO_BIN_EXE_caustic"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the caustic binary runs");
    let run = Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    };
    assert!(
        !run.stderr.contains("panicked"),
        "caustic {args:?} panicked:\n{}",
        run.stderr
    );
    run
}

/// Runs `caustic ARGS` in a scratch folder of its own.
pub fn caustic(args: &[&str]) -> Run {
    caustic_in(&scratch("any"), args)
}

/// An empty folder for one test, under cargo's temporary target folder.
pub fn scratch(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("caustic-cli")
        .join(test);
    if test != "any" {
        let _ = std::fs::remove_dir_all(&dir);
    }
    std::fs::create_dir_all(&dir).expect("scratch folder");
    dir
}

/// The path as a `&str` argument.
pub fn arg(path: &Path) -> &str {
    path.to_str().expect("UTF-8 test paths")
}

/// Width and height from a PNG's header, after checking its signature.
pub fn png_size(path: &Path) -> (u32, u32) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(
        &bytes[..8],
        b"\x89PNG\r\n\x1a\n",
        "{} is a PNG",
        path.display()
    );
    let be = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    (be(16), be(20))
}

/// The mean linear radiance `caustic compare` reports for an image
/// (compared with itself).
pub fn mean(image: &Path) -> [f64; 3] {
    let run = caustic(&["compare", arg(image), arg(image)]).ok();
    let line = run
        .stdout
        .lines()
        .find(|l| l.starts_with("mean"))
        .expect("compare prints the mean");
    let inside = &line[line.find('(').unwrap() + 1..line.find(')').unwrap()];
    let values: Vec<f64> = inside
        .split(',')
        .map(|v| v.trim().parse().unwrap())
        .collect();
    [values[0], values[1], values[2]]
}

/// A one-quad OBJ (2 triangles, no materials, no camera, no light) lying
/// flat in the y = 0 plane: seen exactly edge-on from a camera on the z
/// axis.
pub fn flat_quad_obj(dir: &Path) -> PathBuf {
    let path = dir.join("floor.obj");
    std::fs::write(
        &path,
        "v -1 0 -1\nv 1 0 -1\nv 1 0 1\nv -1 0 1\nf 1 3 2\nf 1 4 3\n",
    )
    .unwrap();
    path
}
