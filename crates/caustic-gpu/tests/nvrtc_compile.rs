//! Every kernel module compiles with NVRTC for sm_90, with no warning, and
//! defines every kernel that its generated constants name.
//!
//! Needs only the NVRTC library, no GPU: CI installs the `nvidia-cuda-nvrtc`
//! wheel and puts its lib folder on LD_LIBRARY_PATH. Without the library the
//! test fails when `CI` is set and is skipped, saying so, otherwise.

use caustic_gpu::compile::{self, ComputeCapability};
use caustic_gpu::kernels::ModuleId;

#[test]
fn every_module_compiles_for_sm_90_without_warnings() {
    if !compile::nvrtc_available() {
        let reason = "libnvrtc not found on LD_LIBRARY_PATH (pip install \"nvidia-cuda-nvrtc==13.0.*\" and add its nvidia/cu13/lib folder)";
        if std::env::var_os("CI").is_some() {
            panic!("{reason}");
        }
        eprintln!("skipped: {reason}");
        return;
    }
    let (major, minor) = compile::nvrtc_version().expect("NVRTC reports its version");
    eprintln!("NVRTC {major}.{minor}");

    let mut failures = Vec::new();
    for module in ModuleId::ALL {
        match compile::compile(module, ComputeCapability::SM_90) {
            Err(e) => failures.push(e.to_string()),
            Ok(compiled) => {
                if !compiled.log.is_empty() {
                    failures.push(format!(
                        "{}: compiler log:\n{}",
                        module.file_name(),
                        compiled.log
                    ));
                }
                for kernel in module.kernels() {
                    if !defines_symbol(&compiled.cubin, kernel.name()) {
                        failures.push(format!(
                            "{}: no kernel {}",
                            module.file_name(),
                            kernel.name()
                        ));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Whether the cubin's string tables hold `name` as a whole symbol.
fn defines_symbol(cubin: &[u8], name: &str) -> bool {
    let mut needle = vec![0u8];
    needle.extend_from_slice(name.as_bytes());
    needle.push(0);
    cubin.windows(needle.len()).any(|w| w == needle.as_slice())
}
