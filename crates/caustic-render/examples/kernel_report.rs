//! Registers, spills and shared memory of every kernel of the runtime,
//! the acceleration structures and the renderers, from ptxas, with no GPU:
//! only the NVRTC library is needed (see caustic-gpu's tests/nvrtc_compile.rs).
//!
//!     cargo run -p caustic-render --example kernel_report [-- sm_XY]

use caustic_gpu::compile::{self, ComputeCapability};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let capability = match std::env::args().nth(1) {
        Some(arch) => {
            let digits = arch.trim_start_matches("sm_");
            let (major, minor) = digits.split_at(digits.len() - 1);
            ComputeCapability {
                major: major.parse()?,
                minor: minor.parse()?,
            }
        }
        None => ComputeCapability::SM_90,
    };
    let modules = caustic_gpu::kernels::MODULES
        .iter()
        .chain(&caustic_accel::kernels::MODULES)
        .chain(&caustic_render::kernels::MODULES);
    for &module in modules {
        let compiled = compile::compile_with(module, capability, &["--ptxas-options=-v"])?;
        let mut kernel = String::new();
        for line in compiled.log.lines() {
            if let Some(rest) = line.split("Compiling entry function '").nth(1) {
                kernel = rest.split('\'').next().unwrap_or_default().to_owned();
            } else if line.contains("spill stores") {
                print!(
                    "{kernel:36} {}",
                    line.trim_start_matches("ptxas")
                        .trim_start_matches([' ', '.'])
                        .trim()
                );
            } else if line.contains("Used ") {
                println!(
                    " | {}",
                    line.split("info    : ").nth(1).unwrap_or(line).trim()
                );
            }
        }
    }
    Ok(())
}
