//! The builders the GPU runs as well as the CPU, and their configurations
//! as specs name them: the Morton-code family (`lbvh`, `hlbvh`, `ploc`;
//! [`MortonBuilderConfig`]) and the top-down SAH family (`bvh-binned`,
//! `bvh-binned-staged`, `bvh-sweep`; [`SahBuilderConfig`]), together
//! [`DeviceBuilderConfig`]. A spec configures the CPU builder and its GPU
//! twin alike, parsed by the same code as [`super::build_accel`]'s.

use super::{AccelSpecError, Params};
use crate::bvh::build::{
    BinSchedule, BinnedSahBuilder, BinnedSahConfig, Bvh2Builder, FIVE_STAGES, MAX_BINS,
    SweepSahBuilder, SweepSahConfig, TaskPoolBvhBuilder, TaskPoolBvhConfig,
};

/// Every structure the GPU builds as a binary BVH (`DeviceBvh::build`), in
/// the order reports list them.
pub const GPU_ACCEL_NAMES: &[&str] = &[
    "bvh-binned",
    "bvh-binned-staged",
    "bvh-sweep",
    "lbvh",
    "hlbvh",
    "ploc",
    "bvh-taskpool",
];

const MORTON_NAMES: &[&str] = &["lbvh", "hlbvh", "ploc"];
const SAH_NAMES: &[&str] = &["bvh-binned", "bvh-binned-staged", "bvh-sweep"];

/// The error for a registered structure outside the family a parser takes:
/// [`AccelSpecError::NotOnGpu`] when the GPU does not build it at all.
fn not_of_family(params: &Params, family: &str) -> AccelSpecError {
    if GPU_ACCEL_NAMES.contains(&params.accel.as_str()) {
        params.bad("name", &format!("`{}` is not {family}", params.accel))
    } else {
        AccelSpecError::NotOnGpu {
            name: params.accel.clone(),
        }
    }
}

/// The configuration a spec of the Morton-code family names: the same for
/// the CPU builder and its GPU twin.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MortonBuilderConfig {
    Lbvh(crate::bvh::build::LbvhConfig),
    Hlbvh(crate::bvh::build::HlbvhConfig),
    Ploc(crate::bvh::build::PlocConfig),
}

impl MortonBuilderConfig {
    /// Parses `lbvh`, `hlbvh` or `ploc` with their parameters
    /// ([`ACCEL_PARAMS`](super::ACCEL_PARAMS)); any other registered name is an error (one that
    /// lists [`GPU_ACCEL_NAMES`] for a structure the GPU does not build).
    pub fn parse(spec: &str) -> Result<Self, AccelSpecError> {
        let mut params = Params::parse(spec)?;
        if !MORTON_NAMES.contains(&params.accel.as_str()) {
            return Err(not_of_family(
                &params,
                "a Morton-code builder (lbvh, hlbvh, ploc)",
            ));
        }
        let config = morton_config(&mut params)?;
        params.finish()?;
        Ok(config)
    }

    /// The registry name.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Lbvh(_) => "lbvh",
            Self::Hlbvh(_) => "hlbvh",
            Self::Ploc(_) => "ploc",
        }
    }

    /// The spec string of this configuration: the name and every
    /// parameter that differs from its default (parses back to `self`).
    pub fn spec(&self) -> String {
        use crate::bvh::build::{HlbvhConfig, LbvhConfig, MortonBits, PlocConfig};
        let mut spec = self.name().to_owned();
        let mut param = |key: &str, value: String| spec.push_str(&format!(":{key}={value}"));
        let bits = |b: MortonBits| match b {
            MortonBits::Bits30 => "30",
            MortonBits::Bits63 => "63",
        };
        match *self {
            Self::Lbvh(c) => {
                let d = LbvhConfig::default();
                if c.morton_bits != d.morton_bits {
                    param("bits", bits(c.morton_bits).into());
                }
                if c.max_leaf_size != d.max_leaf_size {
                    param("leaf", c.max_leaf_size.to_string());
                }
            }
            Self::Hlbvh(c) => {
                let d = HlbvhConfig::default();
                if c.morton_bits != d.morton_bits {
                    param("bits", bits(c.morton_bits).into());
                }
                if c.cluster_bits != d.cluster_bits {
                    param("k", c.cluster_bits.to_string());
                }
                if c.bins != d.bins {
                    param("bins", c.bins.to_string());
                }
                if c.max_leaf_size != d.max_leaf_size {
                    param("leaf", c.max_leaf_size.to_string());
                }
            }
            Self::Ploc(c) => {
                let d = PlocConfig::default();
                if c.morton_bits != d.morton_bits {
                    param("bits", bits(c.morton_bits).into());
                }
                if c.radius != d.radius {
                    param("r", c.radius.to_string());
                }
                if c.max_leaf_size != d.max_leaf_size {
                    param("leaf", c.max_leaf_size.to_string());
                }
            }
        }
        spec
    }

    /// The CPU builder of this configuration.
    pub fn cpu_builder(&self) -> Box<dyn Bvh2Builder> {
        use crate::bvh::build::{HlbvhBuilder, LbvhBuilder, PlocBuilder};
        match *self {
            Self::Lbvh(config) => Box::new(LbvhBuilder::new(config)),
            Self::Hlbvh(config) => Box::new(HlbvhBuilder::new(config)),
            Self::Ploc(config) => Box::new(PlocBuilder::new(config)),
        }
    }
}

/// The configuration of `lbvh`, `hlbvh` or `ploc` from their parameters.
pub(super) fn morton_config(params: &mut Params) -> Result<MortonBuilderConfig, AccelSpecError> {
    use crate::bvh::build::{HlbvhConfig, LbvhConfig, PlocConfig};
    let bits = params.take_bits()?;
    let leaf = params.take_usize("leaf", 1..=64)?;
    Ok(match params.accel.as_str() {
        "lbvh" => {
            let mut config = LbvhConfig::default();
            config.morton_bits = bits.unwrap_or(config.morton_bits);
            config.max_leaf_size = leaf.map_or(config.max_leaf_size, |l| l as u32);
            MortonBuilderConfig::Lbvh(config)
        }
        "hlbvh" => {
            let mut config = HlbvhConfig::default();
            config.morton_bits = bits.unwrap_or(config.morton_bits);
            config.max_leaf_size = leaf.unwrap_or(config.max_leaf_size);
            if let Some(k) = params.take_usize("k", 3..=30)? {
                config.cluster_bits = k as u32;
            }
            if let Some(bins) = params.take_usize("bins", 2..=32)? {
                config.bins = bins;
            }
            MortonBuilderConfig::Hlbvh(config)
        }
        _ => {
            let mut config = PlocConfig::default();
            config.morton_bits = bits.unwrap_or(config.morton_bits);
            config.max_leaf_size = leaf.map_or(config.max_leaf_size, |l| l as u32);
            if let Some(r) = params.take_usize("r", 1..=256)? {
                config.radius = r;
            }
            MortonBuilderConfig::Ploc(config)
        }
    })
}

/// The configuration a spec of the top-down SAH family names: the CPU
/// builder's, and its GPU twin's (which runs [`SahBuilderConfig::binned`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SahBuilderConfig {
    /// `bvh-binned` or `bvh-binned-staged` (the same builder; the second
    /// name is the default five-stage schedule).
    Binned(BinnedSahConfig),
    /// `bvh-sweep`.
    Sweep(SweepSahConfig),
}

impl SahBuilderConfig {
    /// Parses `bvh-binned`, `bvh-binned-staged` or `bvh-sweep` with their
    /// parameters ([`ACCEL_PARAMS`](super::ACCEL_PARAMS)); any other name is an error.
    pub fn parse(spec: &str) -> Result<Self, AccelSpecError> {
        let mut params = Params::parse(spec)?;
        if !SAH_NAMES.contains(&params.accel.as_str()) {
            return Err(not_of_family(
                &params,
                "a top-down SAH builder (bvh-binned, bvh-binned-staged, bvh-sweep)",
            ));
        }
        let config = sah_config(&mut params)?;
        params.finish()?;
        Ok(config)
    }

    /// The registry name, as the CPU builder reports it (a binned
    /// configuration with a schedule is `bvh-binned-staged`).
    pub fn name(&self) -> &'static str {
        match self {
            Self::Binned(c) if c.stages.is_empty() => "bvh-binned",
            Self::Binned(_) => "bvh-binned-staged",
            Self::Sweep(_) => "bvh-sweep",
        }
    }

    /// The spec string of this configuration: a name and every parameter
    /// that differs from that name's default (parses back to `self`).
    pub fn spec(&self) -> String {
        match *self {
            Self::Sweep(c) => {
                let mut spec = "bvh-sweep".to_owned();
                if c.max_leaf_size != SweepSahConfig::DEFAULT.max_leaf_size {
                    spec += &format!(":leaf={}", c.max_leaf_size);
                }
                spec
            }
            Self::Binned(c) => {
                let (mut spec, base) = if c.stages == FIVE_STAGES {
                    ("bvh-binned-staged".to_owned(), BinnedSahConfig::STAGED)
                } else {
                    ("bvh-binned".to_owned(), BinnedSahConfig::DEFAULT)
                };
                if c.bins != base.bins {
                    spec += &format!(":bins={}", c.bins);
                }
                if c.stages != base.stages {
                    spec += &format!(":schedule={}", schedule_text(&c.stages));
                }
                if c.sweep_max_prims != base.sweep_max_prims {
                    spec += &format!(":sweep={}", c.sweep_max_prims);
                }
                if c.max_leaf_size != base.max_leaf_size {
                    spec += &format!(":leaf={}", c.max_leaf_size);
                }
                spec
            }
        }
    }

    /// The CPU builder of this configuration.
    pub fn cpu_builder(&self) -> Box<dyn Bvh2Builder> {
        match *self {
            Self::Binned(config) => Box::new(BinnedSahBuilder::new(config)),
            Self::Sweep(config) => Box::new(SweepSahBuilder::new(config)),
        }
    }

    /// The binned configuration the GPU builder runs. `bvh-binned` is
    /// itself; the GPU `bvh-sweep` is the SAH BVH of Zeidan's thesis (2011,
    /// §4.5, after Lauterbach et al. 2009): 64 bins (the most there are) on
    /// the nodes of more than 64 primitives and the full sweep over sorted
    /// split points on the smaller ones, with the sweep's leaf rules and
    /// costs. (A full sweep of the large nodes would sort every level.)
    pub fn binned(&self) -> BinnedSahConfig {
        match *self {
            Self::Binned(config) => config,
            Self::Sweep(c) => BinnedSahConfig {
                bins: MAX_BINS,
                min_leaf_size: c.min_leaf_size,
                max_leaf_size: c.max_leaf_size,
                traversal_cost: c.traversal_cost,
                intersection_cost: c.intersection_cost,
                ..BinnedSahConfig::DEFAULT
            },
        }
    }

    /// The largest leaf the configuration allows.
    pub fn max_leaf_size(&self) -> usize {
        match self {
            Self::Binned(c) => c.max_leaf_size,
            Self::Sweep(c) => c.max_leaf_size,
        }
    }
}

/// `MIN@BINS/...`, as [`BinSchedule::parse`] reads it.
fn schedule_text(stages: &BinSchedule) -> String {
    let parts: Vec<String> = stages
        .iter()
        .map(|s| format!("{}@{}", s.min_prims, s.bins))
        .collect();
    parts.join("/")
}

/// The configuration of `bvh-binned`, `bvh-binned-staged` or `bvh-sweep`
/// from their parameters, for the CPU and the GPU builder alike.
pub(super) fn sah_config(params: &mut Params) -> Result<SahBuilderConfig, AccelSpecError> {
    if params.accel == "bvh-sweep" {
        let mut config = SweepSahConfig::default();
        if let Some(leaf) = params.take_usize("leaf", 1..=64)? {
            config.max_leaf_size = leaf;
        }
        return Ok(SahBuilderConfig::Sweep(config));
    }
    let config = if params.accel == "bvh-binned" {
        BinnedSahConfig::DEFAULT
    } else {
        BinnedSahConfig::STAGED
    };
    Ok(SahBuilderConfig::Binned(binned_params(params, config)?))
}

/// `config` with the binned builder's parameters (`bins`, `schedule`,
/// `sweep`, `leaf`) applied; `bvh-spatial` takes them too.
pub(super) fn binned_params(
    params: &mut Params,
    mut config: BinnedSahConfig,
) -> Result<BinnedSahConfig, AccelSpecError> {
    if let Some(bins) = params.take_usize("bins", 2..=MAX_BINS)? {
        config.bins = bins;
    }
    if let Some(text) = params.take("schedule") {
        config.stages = BinSchedule::parse(&text).map_err(|m| params.bad("schedule", &m))?;
    }
    if let Some(sweep) = params.take_usize("sweep", 0..=64)? {
        config.sweep_max_prims = sweep;
    }
    if let Some(leaf) = params.take_usize("leaf", 1..=64)? {
        config.max_leaf_size = leaf;
    }
    config.validate().map_err(|m| params.bad("schedule", &m))?;
    Ok(config)
}

/// The configuration of `bvh-taskpool` from its parameters (`leaf=N`,
/// `grab=K`).
pub(super) fn taskpool_config(params: &mut Params) -> Result<TaskPoolBvhConfig, AccelSpecError> {
    let mut config = TaskPoolBvhConfig::DEFAULT;
    if let Some(leaf) = params.take_usize("leaf", 1..=TaskPoolBvhConfig::MAX_LEAF)? {
        config.max_leaf_size = leaf;
    }
    if let Some(grab) = params.take_usize("grab", 1..=14)? {
        config.min_grab = grab as u32;
    }
    Ok(config)
}

/// Any builder the GPU runs: what `DeviceBvh::build` takes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum DeviceBuilderConfig {
    Morton(MortonBuilderConfig),
    Sah(SahBuilderConfig),
    /// `bvh-taskpool`: the SAH BVH on the GPU task pool (Vinkler et al.
    /// 2013), built by `taskpool_cuda.rs`.
    TaskPool(TaskPoolBvhConfig),
}

impl DeviceBuilderConfig {
    /// Parses any spec of [`GPU_ACCEL_NAMES`] with its parameters; a
    /// registered structure the GPU does not build is
    /// [`AccelSpecError::NotOnGpu`], which lists them.
    pub fn parse(spec: &str) -> Result<Self, AccelSpecError> {
        let mut params = Params::parse(spec)?;
        if params.accel == "bvh-taskpool" {
            let config = taskpool_config(&mut params)?;
            params.finish()?;
            return Ok(Self::TaskPool(config));
        }
        if SAH_NAMES.contains(&params.accel.as_str()) {
            SahBuilderConfig::parse(spec).map(Self::Sah)
        } else {
            MortonBuilderConfig::parse(spec).map(Self::Morton)
        }
    }

    /// The registry name.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Morton(c) => c.name(),
            Self::Sah(c) => c.name(),
            Self::TaskPool(_) => "bvh-taskpool",
        }
    }

    /// The spec string (parses back to `self`).
    pub fn spec(&self) -> String {
        match self {
            Self::Morton(c) => c.spec(),
            Self::Sah(c) => c.spec(),
            Self::TaskPool(c) => c.spec(),
        }
    }

    /// The CPU builder of this configuration.
    pub fn cpu_builder(&self) -> Box<dyn Bvh2Builder> {
        match self {
            Self::Morton(c) => c.cpu_builder(),
            Self::Sah(c) => c.cpu_builder(),
            Self::TaskPool(c) => Box::new(TaskPoolBvhBuilder::new(*c)),
        }
    }

    /// The largest leaf the configuration allows.
    pub fn max_leaf_size(&self) -> usize {
        match self {
            Self::Morton(MortonBuilderConfig::Lbvh(c)) => c.max_leaf_size as usize,
            Self::Morton(MortonBuilderConfig::Ploc(c)) => c.max_leaf_size as usize,
            Self::Morton(MortonBuilderConfig::Hlbvh(c)) => c.max_leaf_size,
            Self::Sah(c) => c.max_leaf_size(),
            Self::TaskPool(c) => c.max_leaf_size,
        }
    }
}

impl From<MortonBuilderConfig> for DeviceBuilderConfig {
    fn from(config: MortonBuilderConfig) -> Self {
        Self::Morton(config)
    }
}

impl From<&MortonBuilderConfig> for DeviceBuilderConfig {
    fn from(config: &MortonBuilderConfig) -> Self {
        Self::Morton(*config)
    }
}

impl From<SahBuilderConfig> for DeviceBuilderConfig {
    fn from(config: SahBuilderConfig) -> Self {
        Self::Sah(config)
    }
}

impl From<&SahBuilderConfig> for DeviceBuilderConfig {
    fn from(config: &SahBuilderConfig) -> Self {
        Self::Sah(*config)
    }
}

impl From<&DeviceBuilderConfig> for DeviceBuilderConfig {
    fn from(config: &DeviceBuilderConfig) -> Self {
        *config
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sah_specs_round_trip_and_configure_both_builders_alike() {
        for (spec, written) in [
            ("bvh-binned", "bvh-binned"),
            ("bvh-binned:bins=8:leaf=4", "bvh-binned:bins=8:leaf=4"),
            (
                "bvh-binned:schedule=65536@64/4096@32/256@16/0@8",
                "bvh-binned-staged",
            ),
            ("bvh-binned-staged:sweep=0", "bvh-binned-staged:sweep=0"),
            (
                "bvh-binned-staged:schedule=1024@32/0@4",
                "bvh-binned:schedule=1024@32/0@4",
            ),
            ("bvh-binned-staged:schedule=", "bvh-binned"),
            ("bvh-sweep", "bvh-sweep"),
            ("bvh-sweep:leaf=2", "bvh-sweep:leaf=2"),
        ] {
            let config = SahBuilderConfig::parse(spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
            assert_eq!(config.spec(), written, "{spec}");
            assert_eq!(
                SahBuilderConfig::parse(written).unwrap(),
                config,
                "{written}"
            );
            assert_eq!(config.cpu_builder().name(), config.name(), "{spec}");
        }
        let SahBuilderConfig::Binned(c) = SahBuilderConfig::parse("bvh-binned:bins=16").unwrap()
        else {
            panic!("not binned");
        };
        assert_eq!(
            c,
            BinnedSahConfig {
                bins: 16,
                ..BinnedSahConfig::DEFAULT
            }
        );
        let sweep = SahBuilderConfig::parse("bvh-sweep:leaf=3")
            .unwrap()
            .binned();
        assert_eq!(
            (sweep.bins, sweep.sweep_max_prims, sweep.max_leaf_size),
            (64, 64, 3)
        );
        assert!(sweep.validate().is_ok());
    }

    #[test]
    fn device_specs_name_their_family() {
        for spec in [
            "bvh-binned:bins=8",
            "bvh-sweep",
            "lbvh:bits=63",
            "ploc:r=4",
            "bvh-taskpool",
            "bvh-taskpool:leaf=2",
            "bvh-taskpool:grab=1",
            "bvh-taskpool:leaf=8:grab=4",
        ] {
            let config = DeviceBuilderConfig::parse(spec).unwrap();
            assert_eq!(config.spec(), spec);
            assert_eq!(config.cpu_builder().name(), config.name());
        }
        assert_eq!(
            DeviceBuilderConfig::parse("bvh-binned:leaf=3")
                .unwrap()
                .max_leaf_size(),
            3
        );
        let message = |spec| DeviceBuilderConfig::parse(spec).unwrap_err().to_string();
        for spec in ["grid", "kdtree", "brute", "bvh-wide"] {
            let m = message(spec);
            assert!(m.contains("no GPU builder"), "{m}");
            assert!(
                m.contains("bvh-binned, bvh-binned-staged, bvh-sweep"),
                "{m}"
            );
        }
        assert!(message("bvh-binned:schedule=16@99").contains("2..=64"));
        assert!(message("bvh-taskpool:leaf=32").contains("1..=16"));
        assert!(message("bvh-taskpool:grab=0").contains("1..=14"));
        assert!(message("bvh-taskpool:grab=15").contains("1..=14"));
        assert!(message("bvh-taskpool:bins=8").contains("no parameter `bins`"));
        assert!(message("bvh-sweep:bins=8").contains("no parameter `bins`"));
        let m = MortonBuilderConfig::parse("bvh-binned")
            .unwrap_err()
            .to_string();
        assert!(m.contains("not a Morton-code builder"), "{m}");
        let m = SahBuilderConfig::parse("ploc").unwrap_err().to_string();
        assert!(m.contains("not a top-down SAH builder"), "{m}");
    }
}
