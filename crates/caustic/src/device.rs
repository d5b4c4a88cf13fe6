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
/// `auto | cpu | cuda | cuda:N | cuda:N,M,… | cuda:all`.
///
/// ```
/// use caustic::Device;
///
/// assert_eq!("cuda:1".parse::<Device>()?, Device::Cuda(1));
/// assert_eq!("cuda".parse::<Device>()?, Device::Cuda(0));
/// assert_eq!(Device::Auto.to_string(), "auto");
/// assert_eq!("cuda:0,2".parse::<Device>()?.to_string(), "cuda:0,2");
/// assert_eq!("cuda:all".parse::<Device>()?, Device::Gpus(caustic::GpuSet::ALL));
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
    /// Several CUDA devices of this machine, the work split among them
    /// (every integrator; see `Renderer::render`).
    Gpus(GpuSet),
}

/// A set of CUDA device ordinals (0–63), or every device the machine has.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GpuSet(u64);

impl GpuSet {
    /// Every CUDA device of the machine.
    pub const ALL: GpuSet = GpuSet(0);

    /// The devices numbered in `ordinals`; `None` when one is past 63 or
    /// the list is empty.
    pub fn of(ordinals: &[usize]) -> Option<GpuSet> {
        let mut mask = 0u64;
        for &n in ordinals {
            mask |= 1u64
                .checked_shl(u32::try_from(n).ok()?)
                .filter(|_| n < 64)?;
        }
        (mask != 0).then_some(GpuSet(mask))
    }

    /// The ordinals, in increasing order, of a machine with `available`
    /// devices; `None` when the set names one it does not have.
    pub fn ordinals(self, available: usize) -> Option<Vec<usize>> {
        if self == GpuSet::ALL {
            return Some((0..available).collect());
        }
        let listed: Vec<usize> = (0..64).filter(|n| self.0 >> n & 1 == 1).collect();
        listed.iter().all(|&n| n < available).then_some(listed)
    }
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
            "cuda:all" => Ok(Device::Gpus(GpuSet::ALL)),
            _ => {
                let bad = || Error::BadDevice(text.to_owned());
                let list = lower.strip_prefix("cuda:").ok_or_else(bad)?;
                let ordinals: Vec<usize> = list
                    .split(',')
                    .map(|n| n.trim().parse().map_err(|_| bad()))
                    .collect::<Result<_>>()?;
                match ordinals[..] {
                    [one] => Ok(Device::Cuda(one)),
                    _ => GpuSet::of(&ordinals).map(Device::Gpus).ok_or_else(bad),
                }
            }
        }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Auto => f.write_str("auto"),
            Device::Cpu => f.write_str("cpu"),
            Device::Cuda(n) => write!(f, "cuda:{n}"),
            Device::Gpus(GpuSet::ALL) => f.write_str("cuda:all"),
            Device::Gpus(set) => {
                let ordinals = set.ordinals(64).unwrap_or_default();
                let list: Vec<String> = ordinals.iter().map(|n| n.to_string()).collect();
                write!(f, "cuda:{}", list.join(","))
            }
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
            Device::Cuda(_) | Device::Gpus(_) => Err(Error::CpuOnly {
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
    /// The other devices of a [`Device::Gpus`] set, after `gpu`.
    more_gpus: Vec<Gpu>,
    note: String,
}

impl Backend {
    pub(crate) fn cpu(note: String) -> Self {
        Self {
            gpu: None,
            more_gpus: Vec::new(),
            note,
        }
    }

    /// How many devices the work is split among (1 on the CPU).
    pub fn device_count(&self) -> usize {
        1 + self.more_gpus.len()
    }

    /// Each device as a backend of its own, in order (the CPU as itself):
    /// for work dealt whole to every GPU rather than split within one
    /// render, such as the frames of an animation.
    pub fn each_device(&self) -> Vec<Backend> {
        if self.gpu.is_none() {
            return vec![self.clone()];
        }
        self.gpu
            .iter()
            .chain(&self.more_gpus)
            .map(|gpu| Backend {
                gpu: Some(gpu.clone()),
                more_gpus: Vec::new(),
                note: format!("device: {}", gpu_name(gpu)),
            })
            .collect()
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

    /// The CUDA device, when work runs on one (the first of a set).
    #[cfg(feature = "cuda")]
    pub fn gpu(&self) -> Option<&caustic_gpu::Gpu> {
        self.gpu.as_ref()
    }

    /// Every CUDA device of the backend, the first one first.
    #[cfg(feature = "cuda")]
    pub fn gpus(&self) -> impl Iterator<Item = &caustic_gpu::Gpu> {
        self.gpu.iter().chain(&self.more_gpus)
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
        Device::Gpus(set) => return open_set(set),
    };
    let selection = caustic_gpu::select(choice)?;
    Ok(Backend {
        gpu: selection.gpu,
        more_gpus: Vec::new(),
        note: selection.message,
    })
}

/// Every device of `set`, each through the same safe probe as one.
#[cfg(feature = "cuda")]
fn open_set(set: GpuSet) -> Result<Backend> {
    let available = caustic_gpu::device_count()?;
    let ordinals = set.ordinals(available).ok_or_else(|| {
        Error::BadDevice(format!(
            "{}: this machine has {available} CUDA device(s)",
            Device::Gpus(set)
        ))
    })?;
    let mut gpus = Vec::with_capacity(ordinals.len());
    for &n in &ordinals {
        let selection = caustic_gpu::select(caustic_gpu::Device::Cuda(n))?;
        gpus.extend(selection.gpu);
    }
    let mut gpus = gpus.into_iter();
    let first = gpus
        .next()
        .ok_or_else(|| Error::BadDevice("cuda:all: no CUDA device".into()))?;
    let note = format!(
        "device: {} GPUs ({}): {}",
        ordinals.len(),
        Device::Gpus(set),
        gpu_name(&first)
    );
    Ok(Backend {
        gpu: Some(first),
        more_gpus: gpus.collect(),
        note,
    })
}

#[cfg(not(feature = "cuda"))]
fn open(device: Device) -> Result<Backend> {
    match device {
        Device::Cuda(_) | Device::Gpus(_) => Err(Error::NoCudaFeature {
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
        assert_eq!(
            parse("cuda:1, 0"),
            Device::Gpus(GpuSet::of(&[0, 1]).unwrap())
        );
        assert_eq!(parse("CUDA:ALL"), Device::Gpus(GpuSet::ALL));
        let set = GpuSet::of(&[3, 1]).unwrap();
        assert_eq!(set.ordinals(4), Some(vec![1, 3]));
        assert_eq!(set.ordinals(3), None, "device 3 of 3");
        assert_eq!(GpuSet::ALL.ordinals(2), Some(vec![0, 1]));
        for bad in [
            "",
            "cuda:",
            "cuda:x",
            "cuda:-1",
            "opencl",
            "cuda0",
            "cuda:0,",
            "cuda:1,64",
        ] {
            let err = bad.parse::<Device>().unwrap_err();
            assert!(matches!(err, Error::BadDevice(_)), "{bad:?}");
            assert!(err.to_string().contains("auto, cpu, cuda, cuda:N"), "{err}");
        }
    }

    #[test]
    fn the_cpu_is_its_only_device() {
        let cpu = Device::Cpu.resolve().unwrap();
        let each = cpu.each_device();
        assert_eq!(each.len(), 1);
        assert!(!each[0].is_gpu());
        assert_eq!(each[0].note(), cpu.note());
    }

    #[test]
    fn display_round_trips() {
        let set = GpuSet::of(&[0, 2, 5]).unwrap();
        for d in [
            Device::Auto,
            Device::Cpu,
            Device::Cuda(0),
            Device::Cuda(7),
            Device::Gpus(set),
            Device::Gpus(GpuSet::ALL),
        ] {
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
