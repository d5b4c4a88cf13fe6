//! `--device auto|cpu|cuda|cuda:N`: which backend runs, and the one line
//! that says so.
//!
//! `auto` uses CUDA when a driver, NVRTC and a device are present and falls
//! back to the CPU otherwise; a missing driver is never a crash. Asking for
//! `cuda` explicitly makes its absence an error.

use std::str::FromStr;

use crate::context::Gpu;
use crate::error::GpuError;

/// The backend the user asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Device {
    /// CUDA device 0 when usable, else the CPU.
    #[default]
    Auto,
    /// The CPU, even when a GPU is present.
    Cpu,
    /// CUDA device N (`cuda` means `cuda:0`); an error when unusable.
    Cuda(usize),
}

impl Device {
    /// Parses `auto`, `cpu`, `cuda` or `cuda:N` (case-insensitive).
    pub fn parse(text: &str) -> Result<Device, GpuError> {
        let lower = text.trim().to_ascii_lowercase();
        match lower.as_str() {
            "auto" => Ok(Device::Auto),
            "cpu" => Ok(Device::Cpu),
            "cuda" | "gpu" => Ok(Device::Cuda(0)),
            _ => lower
                .strip_prefix("cuda:")
                .and_then(|n| n.parse().ok())
                .map(Device::Cuda)
                .ok_or_else(|| GpuError::BadDeviceChoice(text.to_owned())),
        }
    }
}

impl FromStr for Device {
    type Err = GpuError;

    fn from_str(text: &str) -> Result<Device, GpuError> {
        Device::parse(text)
    }
}

impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Device::Auto => f.write_str("auto"),
            Device::Cpu => f.write_str("cpu"),
            Device::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

/// The outcome of [`select`]: a GPU, or `None` for the CPU, and one line
/// for the user saying which and why.
#[derive(Debug)]
pub struct Selection {
    pub gpu: Option<Gpu>,
    pub message: String,
}

/// Opens the backend `choice` names. Only an explicit `cuda` request can fail.
pub fn select(choice: Device) -> Result<Selection, GpuError> {
    match choice {
        Device::Cpu => Ok(Selection {
            gpu: None,
            message: "device: CPU (--device cpu)".into(),
        }),
        Device::Cuda(ordinal) => {
            let gpu = Gpu::open(ordinal)?;
            let message = format!("device: {}", gpu.info());
            Ok(Selection {
                gpu: Some(gpu),
                message,
            })
        }
        Device::Auto => Ok(match Gpu::open(0) {
            Ok(gpu) => Selection {
                message: format!("device: {} (auto)", gpu.info()),
                gpu: Some(gpu),
            },
            Err(why) => Selection {
                gpu: None,
                message: format!("device: CPU (auto; CUDA unavailable: {})", first_line(&why)),
            },
        }),
    }
}

fn first_line(error: &GpuError) -> String {
    error
        .to_string()
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_spelling() {
        assert_eq!(Device::parse("auto").unwrap(), Device::Auto);
        assert_eq!(Device::parse("CPU").unwrap(), Device::Cpu);
        assert_eq!(Device::parse("cuda").unwrap(), Device::Cuda(0));
        assert_eq!(Device::parse("cuda:3").unwrap(), Device::Cuda(3));
        assert_eq!(" cuda:0 ".parse::<Device>().unwrap(), Device::Cuda(0));
        for bad in ["", "cuda:", "cuda:x", "cuda:-1", "opencl", "cuda0"] {
            assert!(
                matches!(Device::parse(bad), Err(GpuError::BadDeviceChoice(_))),
                "{bad:?} should not parse"
            );
        }
    }

    #[test]
    fn display_round_trips() {
        for d in [Device::Auto, Device::Cpu, Device::Cuda(0), Device::Cuda(7)] {
            assert_eq!(Device::parse(&d.to_string()).unwrap(), d);
        }
    }

    #[test]
    fn cpu_needs_nothing() {
        let selection = select(Device::Cpu).unwrap();
        assert!(selection.gpu.is_none());
        assert!(!selection.message.contains('\n'));
    }

    /// On a machine without a driver (CI), auto falls back to the CPU with a
    /// one-line reason and an explicit request is an error; never a panic.
    #[test]
    fn auto_falls_back_and_explicit_cuda_errs_without_a_gpu() {
        let auto = select(Device::Auto).unwrap();
        assert!(!auto.message.contains('\n'), "{}", auto.message);
        if auto.gpu.is_none() {
            assert!(
                auto.message
                    .starts_with("device: CPU (auto; CUDA unavailable: ")
            );
            assert!(select(Device::Cuda(0)).is_err());
        }
        assert!(matches!(
            select(Device::Cuda(1 << 20)),
            Err(GpuError::NoDriver { .. } | GpuError::NoDevice { .. } | GpuError::NoNvrtc { .. })
        ));
    }
}
