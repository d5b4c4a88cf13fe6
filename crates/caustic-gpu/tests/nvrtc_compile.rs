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
