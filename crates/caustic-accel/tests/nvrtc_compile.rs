//! Every kernel module of caustic-accel compiles with NVRTC for sm_90, with
//! no warning, and defines every kernel that its generated constants name
//! (the headers of the runtime included). Needs
//! only the NVRTC library, no GPU; fails under CI without it.

use caustic_gpu::compile::{self, ComputeCapability};

#[test]
fn every_module_compiles_for_sm_90_without_warnings() {
    if !compile::nvrtc_for_tests() {
        return;
    }
    let modules = &caustic_accel::kernels::MODULES;
    let failures = compile::check_modules(modules, ComputeCapability::SM_90);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
