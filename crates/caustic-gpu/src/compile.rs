//! Run-time compilation of the kernel modules with NVRTC.
//!
//! Each module is compiled for the device's real architecture (`sm_90` on an
//! H100), so the driver loads machine code and never JIT-compiles PTX. The
//! headers of the module's [`HeaderSet`](crate::HeaderSet)s are handed to
//! NVRTC by name, so `#include "common.cuh"` works without an include path
//! or a toolkit on disk; so do the layout headers generated from the Rust
//! structs ([`crate::layout`]). The compiler's log is kept even on success:
//! the compile test fails on any warning.

use std::collections::HashMap;
use std::ffi::{CString, c_char};
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::nvrtc::sys;

use crate::disk_cache;
use crate::error::GpuError;
use crate::kernel::Module;

/// A CUDA compute capability, such as 9.0 for the H100 and H200.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ComputeCapability {
    pub major: u32,
    pub minor: u32,
}

impl ComputeCapability {
    /// Hopper (H100, H200).
    pub const SM_90: ComputeCapability = ComputeCapability { major: 9, minor: 0 };

    /// The real-architecture name NVRTC takes, e.g. `sm_90`.
    pub fn arch(self) -> String {
        format!("sm_{}{}", self.major, self.minor)
    }
}

impl std::fmt::Display for ComputeCapability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// A module compiled to a cubin, with the compiler's log.
#[derive(Debug)]
pub struct CompiledModule {
    pub module: &'static Module,
    pub capability: ComputeCapability,
    /// Machine code for `capability`, loadable with `cuModuleLoadData`.
    pub cubin: Vec<u8>,
    /// NVRTC's log; empty when it had nothing to say.
    pub log: String,
    /// Whether the cubin came from the disk cache ([`crate::disk_cache`])
    /// rather than from NVRTC in this process.
    pub from_disk_cache: bool,
}

/// The name of the NVRTC library that cudarc looks for first.
pub const NVRTC_LIBRARY: &str = "libnvrtc.so";

/// Whether the NVRTC library can be loaded. Never panics.
pub fn nvrtc_available() -> bool {
    // SAFETY: only tries to dlopen the candidate names; loads no symbols.
    unsafe { sys::is_culib_present() }
}

/// NVRTC's (major, minor) version.
pub fn nvrtc_version() -> Result<(i32, i32), GpuError> {
    require_nvrtc()?;
    let (mut major, mut minor) = (0, 0);
    // SAFETY: the library is present; both pointers are valid for writes.
    unsafe { sys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .map_err(|e| GpuError::Load {
            module: "nvrtc",
            message: format!("nvrtcVersion failed: {e:?}"),
        })?;
    Ok((major, minor))
}

fn require_nvrtc() -> Result<(), GpuError> {
    if nvrtc_available() {
        Ok(())
    } else {
        Err(GpuError::NoNvrtc {
            library: NVRTC_LIBRARY,
        })
    }
}

/// The options every module is compiled with.
pub fn compile_options(capability: ComputeCapability) -> Vec<String> {
    vec![
        format!("--gpu-architecture={}", capability.arch()),
        "-std=c++17".into(),
        // Source lines in profiles and sanitizer reports, at no run-time cost.
        "-lineinfo".into(),
    ]
}

/// Compiles one module for `capability`, uncached.
pub fn compile(
    module: &'static Module,
    capability: ComputeCapability,
) -> Result<CompiledModule, GpuError> {
    compile_with(module, capability, &[])
}

/// Compiles one module for `capability` with extra NVRTC options
/// (`--ptxas-options=-v` puts register and spill counts in the log).
pub fn compile_with(
    module: &'static Module,
    capability: ComputeCapability,
    extra_options: &[&str],
) -> Result<CompiledModule, GpuError> {
    require_nvrtc()?;
    let program = Program::create(module)?;
    let options: Vec<CString> = compile_options(capability)
        .into_iter()
        .chain(extra_options.iter().map(|o| o.to_string()))
        .map(|o| CString::new(o).expect("options hold no NUL"))
        .collect();
    let option_ptrs: Vec<*const c_char> = options.iter().map(|o| o.as_ptr()).collect();
    // SAFETY: the program is live; the option strings outlive the call.
    let status = unsafe {
        sys::nvrtcCompileProgram(program.raw, option_ptrs.len() as i32, option_ptrs.as_ptr())
    };
    let log = program.log();
    let arch = capability.arch();
    if status != sys::nvrtcResult::NVRTC_SUCCESS {
        let log = if log.is_empty() {
            format!("{status:?}")
        } else {
            log
        };
        return Err(GpuError::Compile {
            module: module.name,
            arch,
            log,
        });
    }
    let cubin = program.cubin().map_err(|message| GpuError::Compile {
        module: module.name,
        arch,
        log: message,
    })?;
    Ok(CompiledModule {
        module,
        capability,
        cubin,
        log,
        from_disk_cache: false,
    })
}

/// Compiles `module` for `capability` through the disk cache in `dir`:
/// a stored cubin under the module's key if there is one, else NVRTC's,
/// stored for the next run. `None`: no disk cache (as [`compile`]).
pub fn compile_through(
    dir: Option<&std::path::Path>,
    module: &'static Module,
    capability: ComputeCapability,
) -> Result<CompiledModule, GpuError> {
    let Some(dir) = dir else {
        return compile(module, capability);
    };
    let key = disk_cache::key(module, &compile_options(capability), nvrtc_version()?);
    if let Some((cubin, log)) = disk_cache::load(dir, module, &key) {
        return Ok(CompiledModule {
            module,
            capability,
            cubin,
            log,
            from_disk_cache: true,
        });
    }
    let compiled = compile(module, capability)?;
    disk_cache::store(dir, module, &key, &compiled.cubin, &compiled.log);
    Ok(compiled)
}

/// Compiles `module` for `capability` once per process (through the disk
/// cache between processes, [`crate::disk_cache`]); later calls share the
/// result.
pub fn compile_cached(
    module: &'static Module,
    capability: ComputeCapability,
) -> Result<Arc<CompiledModule>, GpuError> {
    type Cache = Mutex<HashMap<(&'static str, ComputeCapability), Arc<CompiledModule>>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(hit) = cache.lock().unwrap().get(&(module.name, capability)) {
        return Ok(hit.clone());
    }
    // Compile outside the lock: modules compile in parallel from several threads.
    let dir = disk_cache::cache_dir();
    let compiled = Arc::new(compile_through(dir.as_deref(), module, capability)?);
    Ok(cache
        .lock()
        .unwrap()
        .entry((module.name, capability))
        .or_insert(compiled)
        .clone())
}

/// An NVRTC program, destroyed on drop. Owns the strings NVRTC points into.
struct Program {
    raw: sys::nvrtcProgram,
    _strings: Vec<CString>,
}

impl Program {
    fn create(module: &'static Module) -> Result<Program, GpuError> {
        let source = CString::new(module.source).expect("kernel sources hold no NUL");
        let name = CString::new(module.file_name()).expect("file names hold no NUL");
        let header_sources: Vec<CString> = module
            .headers()
            .map(|(_, text)| CString::new(text).expect("headers hold no NUL"))
            .collect();
        let header_names: Vec<CString> = module
            .headers()
            .map(|(file, _)| CString::new(file).expect("file names hold no NUL"))
            .collect();
        let source_ptrs: Vec<*const c_char> = header_sources.iter().map(|s| s.as_ptr()).collect();
        let name_ptrs: Vec<*const c_char> = header_names.iter().map(|s| s.as_ptr()).collect();
        let mut raw = std::ptr::null_mut();
        // SAFETY: every pointer is to a NUL-terminated string kept alive in
        // `_strings` for the program's lifetime; both arrays have one entry per header.
        unsafe {
            sys::nvrtcCreateProgram(
                &mut raw,
                source.as_ptr(),
                name.as_ptr(),
                source_ptrs.len() as i32,
                source_ptrs.as_ptr(),
                name_ptrs.as_ptr(),
            )
        }
        .result()
        .map_err(|e| GpuError::Compile {
            module: module.name,
            arch: String::new(),
            log: format!("nvrtcCreateProgram failed: {e:?}"),
        })?;
        let mut strings = vec![source, name];
        strings.extend(header_sources);
        strings.extend(header_names);
        Ok(Program {
            raw,
            _strings: strings,
        })
    }

    fn log(&self) -> String {
        let mut size = 0usize;
        // SAFETY: the program is live; NVRTC writes `size` bytes including the NUL.
        unsafe {
            if sys::nvrtcGetProgramLogSize(self.raw, &mut size) != sys::nvrtcResult::NVRTC_SUCCESS {
                return String::from("(no log: nvrtcGetProgramLogSize failed)");
            }
            let mut buffer = vec![0u8; size.max(1)];
            if sys::nvrtcGetProgramLog(self.raw, buffer.as_mut_ptr().cast())
                != sys::nvrtcResult::NVRTC_SUCCESS
            {
                return String::from("(no log: nvrtcGetProgramLog failed)");
            }
            let text = String::from_utf8_lossy(&buffer);
            text.trim_end_matches('\0').trim().to_owned()
        }
    }

    fn cubin(&self) -> Result<Vec<u8>, String> {
        let mut size = 0usize;
        // SAFETY: the program compiled; NVRTC writes exactly `size` bytes.
        unsafe {
            sys::nvrtcGetCUBINSize(self.raw, &mut size)
                .result()
                .map_err(|e| format!("nvrtcGetCUBINSize failed: {e:?}"))?;
            let mut cubin = vec![0u8; size];
            sys::nvrtcGetCUBIN(self.raw, cubin.as_mut_ptr().cast())
                .result()
                .map_err(|e| format!("nvrtcGetCUBIN failed: {e:?}"))?;
            Ok(cubin)
        }
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: `raw` came from nvrtcCreateProgram and is destroyed once.
        unsafe {
            let _ = sys::nvrtcDestroyProgram(&mut self.raw);
        }
    }
}

/// Compiles every module for `capability` and returns what is wrong: a
/// module that does not compile, a compiler log that is not empty (the
/// compile tests fail on any warning), a kernel its generated constants
/// name that the cubin does not define, a header name offered by two sets.
/// Empty when all is well. Each crate's NVRTC compile test calls this on
/// its `kernels::MODULES`.
pub fn check_modules(modules: &[&'static Module], capability: ComputeCapability) -> Vec<String> {
    let mut failures = Vec::new();
    for &module in modules {
        failures.extend(duplicate_headers(module));
        match compile(module, capability) {
            Err(e) => failures.push(e.to_string()),
            Ok(compiled) => {
                if !compiled.log.is_empty() {
                    failures.push(format!("{}: compiler log:\n{}", module.name, compiled.log));
                }
                for kernel in module.kernels {
                    if !defines_symbol(&compiled.cubin, kernel) {
                        failures.push(format!("{}: no kernel {kernel}", module.name));
                    }
                }
            }
        }
    }
    failures
}

fn duplicate_headers(module: &Module) -> Option<String> {
    let mut names: Vec<&str> = module.headers().map(|(name, _)| name).collect();
    names.sort_unstable();
    let twice: Vec<&str> = names
        .windows(2)
        .filter(|w| w[0] == w[1])
        .map(|w| w[0])
        .collect();
    (!twice.is_empty()).then(|| format!("{}: headers offered twice: {twice:?}", module.name))
}

/// Whether the cubin's string tables hold `name` as a whole symbol.
fn defines_symbol(cubin: &[u8], name: &str) -> bool {
    let mut needle = vec![0u8];
    needle.extend_from_slice(name.as_bytes());
    needle.push(0);
    cubin.windows(needle.len()).any(|w| w == needle.as_slice())
}

/// For the NVRTC compile tests: whether NVRTC can be loaded. Without it the
/// test must fail under CI (`CI` set), so this panics there, and says why
/// it skips elsewhere.
pub fn nvrtc_for_tests() -> bool {
    if nvrtc_available() {
        return true;
    }
    let reason = "libnvrtc not found on LD_LIBRARY_PATH (pip install \"nvidia-cuda-nvrtc==13.0.*\" and add its nvidia/cu13/lib folder)";
    let in_ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false");
    assert!(!in_ci, "{reason}");
    eprintln!("skipped: {reason}");
    false
}
