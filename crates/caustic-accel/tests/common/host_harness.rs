//! The host C++ harnesses that run CUDA kernels on the CPU
//! (`tests/cpu_emulation/`): compiled once per test process with the
//! host compiler (`CXX`, else `c++`; float contraction off, so every
//! operation rounds once as the kernels' `_rn` intrinsics do), fed and read
//! through files.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The folders of the kernels' headers, crate-relative: at run time NVRTC
/// finds every header by its bare name, so one list serves every harness
/// (and a header a kernel starts to include is found without touching it).
const KERNEL_FOLDERS: &[&str] = &[
    "tests/cpu_emulation",
    "src",
    "src/bvh",
    "src/bvh/build",
    "src/grid",
    "src/points",
    "../caustic-gpu/src",
    "../caustic-gpu/src/ops",
    "../caustic-gpu/src/taskpool",
];

/// [`compile`] once per test process, `cell` keeping the result.
#[allow(dead_code)] // each includer uses one of the two
pub fn compile_once(
    cell: &'static OnceLock<Option<PathBuf>>,
    name: &str,
    source: &str,
) -> Option<&'static Path> {
    cell.get_or_init(|| compile(name, source)).as_deref()
}

/// [`compile_once`] for a harness over the fiber shim
/// (`cpu_emulation/cuda_fibers.h`), whose switch is x86-64 assembly:
/// `None`, said, on any other host.
#[allow(dead_code)] // each includer uses one of the two
pub fn compile_fibers_once(
    cell: &'static OnceLock<Option<PathBuf>>,
    name: &str,
    source: &str,
) -> Option<&'static Path> {
    if !cfg!(target_arch = "x86_64") {
        caustic_scene::data_dirs::say_uncaptured(&format!(
            "{name}: skipped, the fiber shim is x86-64 only"
        ));
        return None;
    }
    compile_once(cell, name, source)
}

/// Compiles `tests/cpu_emulation/{source}` against the kernels' headers
/// ([`KERNEL_FOLDERS`]) into a temporary executable named after `name`;
/// `None`, said where the harness cannot hide it, when there is no C++
/// compiler.
pub fn compile(name: &str, source: &str) -> Option<PathBuf> {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let exe = std::env::temp_dir().join(format!("caustic-{name}-{}", std::process::id()));
    let compiler = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let status = Command::new(&compiler)
        .args(["-std=c++17", "-O2", "-ffp-contract=off", "-Wall", "-Werror"])
        .arg("-Wno-unknown-pragmas")
        .args(
            KERNEL_FOLDERS
                .iter()
                .map(|p| format!("-I{}", crate_dir.join(p).display())),
        )
        .arg(crate_dir.join("tests/cpu_emulation").join(source))
        .arg("-o")
        .arg(&exe)
        .status();
    match status {
        Ok(s) if s.success() => Some(exe),
        Ok(s) => panic!("{source} does not compile on the host ({s})"),
        Err(e) => {
            caustic_scene::data_dirs::say_uncaptured(&format!(
                "{name}: skipped, no C++ compiler `{compiler}` ({e})"
            ));
            None
        }
    }
}

/// Runs the harness `exe` on `input` and returns what it wrote.
pub fn run(exe: &Path, name: &str, input: &[u8]) -> Vec<u8> {
    let dir = std::env::temp_dir();
    let tag = format!("{}-{:?}", std::process::id(), std::thread::current().id());
    let (in_path, out_path) = (
        dir.join(format!("{name}-in-{tag}")),
        dir.join(format!("{name}-out-{tag}")),
    );
    std::fs::write(&in_path, input).unwrap();
    let status = Command::new(exe)
        .arg(&in_path)
        .arg(&out_path)
        .status()
        .unwrap();
    let output = std::fs::read(&out_path);
    let _ = std::fs::remove_file(&in_path);
    let _ = std::fs::remove_file(&out_path);
    assert!(status.success(), "the {name} harness failed: {status}");
    output.unwrap()
}
