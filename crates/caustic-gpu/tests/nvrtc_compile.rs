//! Every kernel module of the runtime compiles with NVRTC for sm_90, with
//! no warning, and defines every kernel that its generated constants name.
//!
//! Needs only the NVRTC library, no GPU: CI installs the `nvidia-cuda-nvrtc`
//! wheel and puts its lib folder on LD_LIBRARY_PATH. Without the library the
//! test fails when `CI` is set and is skipped, saying so, otherwise.

use caustic_gpu::compile::{self, ComputeCapability};

#[test]
fn every_module_compiles_for_sm_90_without_warnings() {
    if !compile::nvrtc_for_tests() {
        return;
    }
    let (major, minor) = compile::nvrtc_version().expect("NVRTC reports its version");
    eprintln!("NVRTC {major}.{minor}");
    let failures = compile::check_modules(&caustic_gpu::kernels::MODULES, ComputeCapability::SM_90);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// A module compiled through the disk cache is stored, and the next
/// compile (another process, in real use) loads the same cubin from disk;
/// a damaged file is a miss that NVRTC's compile replaces.
#[test]
fn the_disk_cache_returns_what_nvrtc_compiled() {
    if !compile::nvrtc_for_tests() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("caustic-kernel-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let module = caustic_gpu::kernels::MODULES[0];
    let sm90 = ComputeCapability::SM_90;
    let first = compile::compile_through(Some(&dir), module, sm90).expect("compiles");
    assert!(!first.from_disk_cache, "an empty cache cannot hit");
    let files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "one file per module: {files:?}");
    let second = compile::compile_through(Some(&dir), module, sm90).expect("loads");
    assert!(second.from_disk_cache, "the second compile reads the file");
    assert_eq!(second.cubin, first.cubin);
    // Another architecture is another key.
    let sm80 = ComputeCapability { major: 8, minor: 0 };
    assert!(
        !compile::compile_through(Some(&dir), module, sm80)
            .unwrap()
            .from_disk_cache
    );
    // Truncated: a miss, recompiled and stored again.
    let bytes = std::fs::read(&files[0]).unwrap();
    std::fs::write(&files[0], &bytes[..bytes.len() / 2]).unwrap();
    let third = compile::compile_through(Some(&dir), module, sm90).unwrap();
    assert!(!third.from_disk_cache, "half a file is not a hit");
    assert_eq!(third.cubin, first.cubin);
    assert!(
        compile::compile_through(Some(&dir), module, sm90)
            .unwrap()
            .from_disk_cache
    );
    let _ = std::fs::remove_dir_all(&dir);
}
