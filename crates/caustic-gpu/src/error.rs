//! Errors of the CUDA backend. Each variant says what failed and why, in
//! words a user can act on: which library is missing, which kernel failed to
//! compile or launch, which allocation ran out of memory.

use cudarc::driver::DriverError;

/// Everything that can go wrong on the GPU path.
#[derive(Clone, Debug, thiserror::Error)]
pub enum GpuError {
    /// The CUDA driver library (libcuda) cannot be loaded.
    #[error(
        "no CUDA driver: {library} could not be loaded (install the NVIDIA driver, or put its folder on LD_LIBRARY_PATH)"
    )]
    NoDriver { library: &'static str },

    /// The NVRTC runtime compiler library cannot be loaded.
    #[error(
        "no NVRTC: {library} could not be loaded (install the CUDA toolkit or `pip install nvidia-cuda-nvrtc`, and put the folder holding libnvrtc.so on LD_LIBRARY_PATH)"
    )]
    NoNvrtc { library: &'static str },

    /// The driver loaded but has no usable device with that ordinal.
    #[error("no CUDA device {ordinal}: the driver reports {available} device(s)")]
    NoDevice { ordinal: usize, available: usize },

    /// A `--device` string that is none of `auto`, `cpu`, `cuda`, `cuda:N`.
    #[error("unknown device `{0}`: expected auto, cpu, cuda or cuda:N")]
    BadDeviceChoice(String),

    /// NVRTC rejected a kernel module; `log` is the compiler's output.
    #[error("NVRTC could not compile {module} for {arch}:\n{log}")]
    Compile {
        module: &'static str,
        arch: String,
        log: String,
    },

    /// The driver could not load a compiled module or find a kernel in it.
    #[error("could not load {module}: {message}")]
    Load {
        module: &'static str,
        message: String,
    },

    /// A kernel launch was refused, or the kernel faulted while running
    /// (reported at the next synchronisation, or at once when
    /// `CAUSTIC_GPU_SYNC=1`).
    #[error("kernel {kernel} failed: {message}")]
    Launch {
        kernel: &'static str,
        message: String,
    },

    /// A device allocation failed for lack of memory.
    #[error(
        "out of GPU memory allocating {what}: {} requested, {} free of {}",
        human_bytes(*bytes),
        human_bytes(*free),
        human_bytes(*total)
    )]
    OutOfMemory {
        what: &'static str,
        bytes: usize,
        free: usize,
        total: usize,
    },

    /// An input longer than the operation supports.
    #[error("{operation} supports at most {max} elements, got {len}")]
    TooLarge {
        operation: &'static str,
        len: usize,
        max: usize,
    },

    /// Two buffers that must have equal lengths do not.
    #[error("{operation}: {what} has {actual} elements, expected {expected}")]
    LengthMismatch {
        operation: &'static str,
        what: &'static str,
        expected: usize,
        actual: usize,
    },

    /// An input that breaks an operation's rules (a BVH too deep for the
    /// traversal stack, say).
    #[error("invalid {what}: {message}")]
    Invalid { what: &'static str, message: String },

    /// A GPU result differs from the CPU's (a benchmark checks every result
    /// before it times it, so a wrong kernel never yields a number).
    #[error("{what}: the GPU result is wrong: {message}")]
    Mismatch { what: &'static str, message: String },

    /// A task-pool kernel (`taskpool`) stopped itself: its pool had no
    /// free slot, it made no progress within its watchdog, or the
    /// application reported a broken invariant.
    #[error("task pool of {kernel} stopped: {message}")]
    TaskPool {
        kernel: &'static str,
        message: String,
    },

    /// The CUDA libraries loaded but a call into them panicked (a symbol
    /// missing from an older driver, say).
    #[error("the CUDA libraries are unusable ({during}): {message}")]
    Unusable {
        during: &'static str,
        message: String,
    },

    /// Any other driver call that failed.
    #[error("CUDA driver call failed while {during}: {}", describe(.source))]
    Driver {
        during: &'static str,
        source: DriverError,
    },
}

impl GpuError {
    /// Wraps a driver error with what was being done.
    pub(crate) fn driver(during: &'static str) -> impl Fn(DriverError) -> GpuError + Copy {
        move |source| GpuError::Driver { during, source }
    }

    /// Wraps a driver error from, or surfaced after, a kernel launch.
    pub(crate) fn launch(kernel: &'static str) -> impl Fn(DriverError) -> GpuError + Copy {
        move |source| GpuError::Launch {
            kernel,
            message: describe(&source),
        }
    }
}

/// `CUDA_ERROR_NAME: description`, read from the driver.
pub(crate) fn describe(error: &DriverError) -> String {
    let name = error
        .error_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|_| format!("{:?}", error.0));
    let text = error
        .error_string()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!("{name}: {text}")
}

/// Bytes with a binary unit, for messages.
pub(crate) fn human_bytes(bytes: usize) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_memory_names_the_allocation() {
        let e = GpuError::OutOfMemory {
            what: "radix sort keys",
            bytes: 3 << 30,
            free: 1 << 30,
            total: 80 << 30,
        };
        assert_eq!(
            e.to_string(),
            "out of GPU memory allocating radix sort keys: 3.0 GiB requested, 1.0 GiB free of 80.0 GiB"
        );
    }

    #[test]
    fn human_bytes_picks_a_unit() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
    }
}
