//! The CUDA modules and their kernels.
//!
//! `build.rs` scans `kernels/*.cu` and generates, for every file, a
//! [`ModuleId`] variant and a submodule of [`Kernel`] constants, one per
//! `extern "C" __global__` function (`kernels::scan::SCAN_EXCLUSIVE_U32`).
//! The `.cuh` files become NVRTC headers ([`HEADERS`]) that modules include
//! by name. Host code can only name a kernel that exists in the source.

/// One `extern "C"` kernel of a module.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Kernel {
    module: ModuleId,
    index: usize,
    name: &'static str,
}

impl Kernel {
    /// The module that defines the kernel.
    pub const fn module(self) -> ModuleId {
        self.module
    }

    /// Position in `self.module().kernels()`.
    pub const fn index(self) -> usize {
        self.index
    }

    /// The kernel's symbol name in the compiled module.
    pub const fn name(self) -> &'static str {
        self.name
    }
}

include!(concat!(env!("OUT_DIR"), "/kernels.rs"));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kernel_knows_its_module_and_index() {
        for module in ModuleId::ALL {
            for (index, kernel) in module.kernels().iter().enumerate() {
                assert_eq!(kernel.module(), module);
                assert_eq!(kernel.index(), index);
                assert!(module.source().contains(kernel.name()));
            }
        }
    }

    #[test]
    fn generated_names_follow_the_family_scheme() {
        assert_eq!(scan::SCAN_EXCLUSIVE_U32.name(), "scan_exclusive_u32");
        for module in ModuleId::ALL {
            let family = module.file_name().trim_end_matches(".cu");
            assert!(!module.kernels().is_empty(), "{family} has no kernels");
            for kernel in module.kernels() {
                assert!(
                    kernel.name().starts_with(family),
                    "{} should start with {family}_",
                    kernel.name()
                );
            }
        }
    }
}
