//! Where work runs: the [`Device`] a caller asks for and the [`Backend`] it
//! resolves to.
//!
//! `auto` uses CUDA when a driver, NVRTC and a device are present and the
//! CPU otherwise, and says which in one line ([`Backend::note`]) that the
//! caller prints or drops. A missing driver is never a crash: `auto` falls
//! back, an explicit `cuda` is an [`Error`]. Without the `cuda` feature
//! there is no GPU backend at all, and `cuda` is an error naming the
//! feature.

use crate::error::{Error, Result};
use std::fmt;
use std::str::FromStr;

/// The device a caller asks for; parses from and prints as
/// `auto | cpu | cuda | cuda:N`.
///
/// ```
/// use caustic::Device;
///
/// assert_eq!("cuda:1".parse::<Device>()?, Device::Cuda(1));
/// assert_eq!("cuda".parse::<Device>()?, Device::Cuda(0));
/// assert_eq!(Device::Auto.to_string(), "auto");
/// assert!("opencl".parse::<Device>().is_err());
/// # Ok::<(), caustic::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Device {
    /// CUDA device 0 when usable, else the CPU.
    #[default]
    Auto,
    /// The CPU (rayon's global pool), even when a GPU is present.
    Cpu,
    /// CUDA device N; an error when it cannot be used.
    Cuda(usize),
}

impl FromStr for Device {
    type Err = Error;

    /// Case-insensitive; `gpu` is accepted for `cuda`.
    fn from_str(text: &str) -> Result<Device> {
        let lower = text.trim().to_ascii_lowercase();
        match lower.as_str() {
            "auto" => Ok(Device::Auto),
            "cpu" => Ok(Device::Cpu),
            "cuda" | "gpu" => Ok(Device::Cuda(0)),
            _ => lower
                .strip_prefix("cuda:")
                .and_then(|n| n.parse().ok())
                .map(Device::Cuda)
                .ok_or_else(|| Error::BadDevice(text.to_owned())),
        }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Auto => f.write_str("auto"),
            Device::Cpu => f.write_str("cpu"),
            Device::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

impl Device {
    /// Opens the backend this choice names. Only an explicit `cuda` can
    /// fail; `auto` without a usable GPU is the CPU, with the reason in
    /// [`Backend::note`].
    ///
    /// ```
    /// let backend = caustic::Device::Cpu.resolve()?;
    /// assert!(!backend.is_gpu());
    /// assert_eq!(backend.note(), "device: CPU");
    /// # Ok::<(), caustic::Error>(())
    /// ```
    pub fn resolve(self) -> Result<Backend> {
        match self {
            Device::Cpu => Ok(Backend::cpu("device: CPU".into())),
            _ => open(self),
        }
    }

    /// `auto` as the CPU, with `why` in the note; an explicit `cuda` as the
    /// error [`Error::CpuOnly`]: for work that has no GPU version.
    pub(crate) fn cpu_only(self, what: &str, hint: &str) -> Result<Backend> {
        match self {
            Device::Cpu => Device::Cpu.resolve(),
            Device::Auto => Ok(Backend::cpu(format!(
                "device: CPU (auto; {what} runs on the CPU only)"
            ))),
            Device::Cuda(_) => Err(Error::CpuOnly {
                what: what.to_owned(),
                hint: hint.to_owned(),
            }),
        }
    }
}

/// The open CUDA device; without the `cuda` feature a type with no
/// values, so the CPU is the only backend there is.
#[cfg(feature = "cuda")]
type Gpu = caustic_gpu::Gpu;
#[cfg(not(feature = "cuda"))]
type Gpu = std::convert::Infallible;

/// A resolved device: the CPU, or an open CUDA device; with one line that
/// says which and, for `auto`, why.
#[derive(Clone, Debug)]
pub struct Backend {
    gpu: Option<Gpu>,
    note: String,
}

impl Backend {
    pub(crate) fn cpu(note: String) -> Self {
        Self { gpu: None, note }
    }

    /// Whether work runs on a GPU.
    pub fn is_gpu(&self) -> bool {
        self.gpu.is_some()
    }

    /// One line for the user: `device: CPU`, `device: NVIDIA H100 ... (auto)`
    /// or `device: CPU (auto; CUDA unavailable: no CUDA driver: ...)`.
    pub fn note(&self) -> &str {
        &self.note
    }

    /// What the work runs on, for a report: the GPU's name, or the number
    /// of CPU threads.
    pub fn name(&self) -> String {
        match &self.gpu {
            Some(gpu) => gpu_name(gpu),
            None => format!("{} CPU threads", rayon::current_num_threads()),
        }
    }

    /// The CUDA device, when work runs on one.
    #[cfg(feature = "cuda")]
    pub fn gpu(&self) -> Option<&caustic_gpu::Gpu> {
        self.gpu.as_ref()
    }
}

#[cfg(feature = "cuda")]
fn gpu_name(gpu: &Gpu) -> String {
    gpu.info().name.clone()
}

#[cfg(not(feature = "cuda"))]
fn gpu_name(gpu: &Gpu) -> String {
    match *gpu {}
}

/// `auto` or `cuda:N` through the runtime's safe probe, which turns a
/// missing driver or NVRTC into an error value before cudarc can panic.
#[cfg(feature = "cuda")]
fn open(device: Device) -> Result<Backend> {
    let choice = match device {
        Device::Auto => caustic_gpu::Device::Auto,
        Device::Cpu => caustic_gpu::Device::Cpu,
        Device::Cuda(n) => caustic_gpu::Device::Cuda(n),
    };
    let selection = caustic_gpu::select(choice)?;
    Ok(Backend {
        gpu: selection.gpu,
        note: selection.message,
    })
}

#[cfg(not(feature = "cuda"))]
fn open(device: Device) -> Result<Backend> {
    match device {
        Device::Cuda(_) => Err(Error::NoCudaFeature {
            device: device.to_string(),
        }),
        _ => Ok(Backend::cpu(
            "device: CPU (auto; CUDA unavailable: built without the `cuda` feature)".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_spelling() {
        let parse = |s: &str| s.parse::<Device>().unwrap();
        assert_eq!(parse("auto"), Device::Auto);
        assert_eq!(parse("CPU"), Device::Cpu);
        assert_eq!(parse("cuda"), Device::Cuda(0));
        assert_eq!(parse("gpu"), Device::Cuda(0));
        assert_eq!(parse(" cuda:3 "), Device::Cuda(3));
        for bad in ["", "cuda:", "cuda:x", "cuda:-1", "opencl", "cuda0"] {
            let err = bad.parse::<Device>().unwrap_err();
            assert!(matches!(err, Error::BadDevice(_)), "{bad:?}");
            assert!(err.to_string().contains("auto, cpu, cuda or cuda:N"));
        }
    }

    #[test]
    fn display_round_trips() {
        for d in [Device::Auto, Device::Cpu, Device::Cuda(0), Device::Cuda(7)] {
            assert_eq!(d.to_string().parse::<Device>().unwrap(), d);
        }
    }

    /// On a machine without a GPU (CI, the development machines) `auto` is
    /// the CPU with a one-line reason and an explicit `cuda` an error;
    /// never a panic.
    #[test]
    fn auto_falls_back_and_cuda_errs_without_a_gpu() {
        let auto = Device::Auto.resolve().unwrap();
        assert!(!auto.note().contains('\n'), "{}", auto.note());
        if !auto.is_gpu() {
            assert!(auto.note().starts_with("device: CPU (auto; "));
            assert!(auto.name().ends_with("CPU threads"));
            assert!(Device::Cuda(0).resolve().is_err());
        }
        let message = Device::Cuda(1 << 20).resolve().unwrap_err().to_string();
        assert!(!message.is_empty());
    }

    /// Without the `cuda` feature, `auto` is the CPU in the words a
    /// missing driver gets, and `cuda` an error that says how to get it.
    #[cfg(not(feature = "cuda"))]
    #[test]
    fn a_cpu_only_build_says_how_to_get_cuda() {
        let auto = Device::Auto.resolve().unwrap();
        assert_eq!(
            auto.note(),
            "device: CPU (auto; CUDA unavailable: built without the `cuda` feature)"
        );
        let err = Device::Cuda(0).resolve().unwrap_err().to_string();
        assert!(
            err.contains("built without CUDA support; rebuild with the default `cuda` feature"),
            "{err}"
        );
    }

    #[test]
    fn cpu_only_work_says_so() {
        let auto = Device::Auto.cpu_only("kdtree", "use bvh-binned").unwrap();
        assert!(!auto.is_gpu());
        assert!(auto.note().contains("kdtree runs on the CPU only"));
        let err = Device::Cuda(0).cpu_only("kdtree", "use bvh-binned");
        assert!(matches!(err, Err(Error::CpuOnly { .. })));
    }
}
