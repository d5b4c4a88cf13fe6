//! The binned SAH builder's settings: the bin count, the multi-stage bin
//! schedule of Zeidan 2011 (§4.3: coarse bins for the large nodes near the
//! root, finer ones further down) and the leaf and sweep limits.

use super::small::SWEEP_MAX;
use crate::bvh::build::sorted_sweep::SahRules;

/// Upper bound of the bin counts (bins live on the stack).
pub const MAX_BINS: usize = 64;

/// One stage of a bin schedule: nodes of at least `min_prims` primitives
/// (and fewer than the previous stage's bound) use `bins` bins per axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BinStage {
    pub min_prims: usize,
    pub bins: usize,
}

/// Most stages a [`BinSchedule`] holds.
pub const MAX_STAGES: usize = 8;

/// A multi-stage bin schedule: up to [`MAX_STAGES`] stages by decreasing
/// `min_prims`, kept inline so configurations stay `Copy` and `const`.
/// Dereferences to the slice of its stages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BinSchedule {
    stages: [BinStage; MAX_STAGES],
    len: usize,
}

impl BinSchedule {
    /// No stages: one bin count for every node.
    pub const EMPTY: Self = Self::from_slice(&[]);

    /// The schedule of `stages` (at most [`MAX_STAGES`]; more is a
    /// compile-time error in a `const`, a panic otherwise: use
    /// [`BinSchedule::parse`] for input).
    pub const fn from_slice(stages: &[BinStage]) -> Self {
        assert!(stages.len() <= MAX_STAGES, "too many bin stages");
        let mut out = [BinStage {
            min_prims: 0,
            bins: 0,
        }; MAX_STAGES];
        let mut i = 0;
        while i < stages.len() {
            out[i] = stages[i];
            i += 1;
        }
        Self {
            stages: out,
            len: stages.len(),
        }
    }

    /// Parses `MIN@BINS/MIN@BINS/...` (e.g. `65536@64/4096@32/0@8`): nodes
    /// of at least `MIN` primitives use `BINS` bins. Stages must be listed
    /// by decreasing `MIN`, bins must be in `2..=MAX_BINS`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut stages = Vec::new();
        for part in text.split('/').filter(|p| !p.is_empty()) {
            let (min, bins) = part
                .split_once('@')
                .ok_or_else(|| format!("stage `{part}` is not MIN@BINS"))?;
            let min_prims = min
                .trim()
                .parse::<usize>()
                .map_err(|_| format!("stage `{part}`: `{min}` is not a primitive count"))?;
            let bins = bins
                .trim()
                .parse::<usize>()
                .map_err(|_| format!("stage `{part}`: `{bins}` is not a bin count"))?;
            stages.push(BinStage { min_prims, bins });
        }
        if stages.len() > MAX_STAGES {
            return Err(format!("at most {MAX_STAGES} stages, got {}", stages.len()));
        }
        let schedule = Self::from_slice(&stages);
        validate_stages(&schedule)?;
        Ok(schedule)
    }
}

impl std::ops::Deref for BinSchedule {
    type Target = [BinStage];

    fn deref(&self) -> &[BinStage] {
        &self.stages[..self.len]
    }
}

impl Default for BinSchedule {
    fn default() -> Self {
        Self::EMPTY
    }
}

fn validate_stages(stages: &[BinStage]) -> Result<(), String> {
    if let Some(bad) = stages.iter().find(|s| !(2..=MAX_BINS).contains(&s.bins)) {
        return Err(format!("{} bins: bins must be in 2..={MAX_BINS}", bad.bins));
    }
    if !stages.windows(2).all(|w| w[0].min_prims > w[1].min_prims) {
        return Err("stages must be listed by decreasing primitive count".into());
    }
    Ok(())
}

/// The five-stage schedule of [`BinnedSahConfig::STAGED`]. Zeidan 2011 uses
/// five stages but gives neither their bounds nor their bin counts; these
/// are ours: 64 bins from 2^16 primitives, 32 from 2^12, 16 from 2^8, 8
/// down to the exact-sweep size, and the exact sweep below it as the fifth
/// stage (`sweep_max_prims`). Fewer bins as nodes shrink keep the binning
/// work per primitive about proportional to what a plane can still gain.
///
/// Measured against the single 32-bin stage (one thread, least CPU time of
/// a build; both with the exact-sweep stage): Sibenik 16.2 -> 15.6 ms at SAH
/// 46.95 -> 47.11, dragon 312 -> 296 ms at 48.78 -> 49.16. Without the
/// exact-sweep stage (binning all the way down) the schedule matters more:
/// Sibenik 37.7 -> 21.9 ms, dragon 568 -> 367 ms, for +0.6 and +0.9 % SAH.
pub const FIVE_STAGES: BinSchedule = BinSchedule::from_slice(&[
    BinStage {
        min_prims: 1 << 16,
        bins: 64,
    },
    BinStage {
        min_prims: 1 << 12,
        bins: 32,
    },
    BinStage {
        min_prims: 1 << 8,
        bins: 16,
    },
    BinStage {
        min_prims: 0,
        bins: 8,
    },
]);

/// Tuning of `BinnedSahBuilder`. The presets are the supported points;
/// other values work as long as every bin count is in `2..=MAX_BINS`,
/// stages are listed by decreasing `min_prims`, `sweep_max_prims <= 64` and
/// `1 <= min_leaf_size <= max_leaf_size`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BinnedSahConfig {
    /// Bins per axis when `stages` is empty (Wald 2007 found 16 to 32
    /// enough to match a full sweep).
    pub bins: usize,
    /// Multi-stage schedule: a node uses the first stage whose `min_prims`
    /// it reaches, else `bins`. Empty: one stage of `bins`.
    pub stages: BinSchedule,
    /// Subtrees of at most this many primitives are built by the exact
    /// sweep instead of binning (0 bins everywhere); at most 64.
    pub sweep_max_prims: usize,
    /// Nodes with at most this many primitives are always leaves.
    pub min_leaf_size: usize,
    /// Nodes with more primitives are always split: a hard leaf-size bound.
    pub max_leaf_size: usize,
    /// Cost of visiting an inner node, in the SAH that drives the splits.
    pub traversal_cost: f32,
    /// Cost of one primitive test, in the SAH that drives the splits.
    pub intersection_cost: f32,
    /// Subtrees with at least this many primitives build their two children
    /// in parallel; `usize::MAX` builds on one thread.
    pub parallel_min_prims: usize,
    /// Nodes with at least this many primitives bin in parallel.
    pub parallel_binning_min_prims: usize,
}

impl BinnedSahConfig {
    /// 32 bins, exact sweep for subtrees of up to 64 primitives, leaves of
    /// 1 to 8 primitives, unit costs: the `bvh-binned` default.
    pub const DEFAULT: Self = Self {
        bins: 32,
        stages: BinSchedule::EMPTY,
        sweep_max_prims: SWEEP_MAX,
        min_leaf_size: 1,
        max_leaf_size: 8,
        traversal_cost: 1.0,
        intersection_cost: 1.0,
        parallel_min_prims: 4096,
        parallel_binning_min_prims: 64 * 1024,
    };

    /// 8 bins: quicker builds for dynamic scenes, slightly worse trees.
    pub const FAST: Self = Self {
        bins: 8,
        ..Self::DEFAULT
    };

    /// 64 bins: the best trees this builder makes, at about twice the binning work.
    pub const HIGH_QUALITY: Self = Self {
        bins: 64,
        ..Self::DEFAULT
    };

    /// The five-stage schedule [`FIVE_STAGES`]: `bvh-binned-staged`.
    pub const STAGED: Self = Self {
        stages: FIVE_STAGES,
        ..Self::DEFAULT
    };

    /// The same settings on one thread (for timing or reproducing).
    #[must_use]
    pub const fn sequential(self) -> Self {
        Self {
            parallel_min_prims: usize::MAX,
            parallel_binning_min_prims: usize::MAX,
            ..self
        }
    }

    /// Bins per axis for a node of `n` primitives.
    pub fn bins_for(&self, n: usize) -> usize {
        self.stages
            .iter()
            .find(|stage| n >= stage.min_prims)
            .map_or(self.bins, |stage| stage.bins)
    }

    /// Checks the documented bounds: bin counts in `2..=MAX_BINS`, stages
    /// by decreasing `min_prims`, `sweep_max_prims <= 64`,
    /// `1 <= min_leaf_size <= max_leaf_size`.
    pub fn validate(&self) -> Result<(), String> {
        if !(2..=MAX_BINS).contains(&self.bins) {
            return Err(format!(
                "{} bins: bins must be in 2..={MAX_BINS}",
                self.bins
            ));
        }
        validate_stages(&self.stages)?;
        if self.sweep_max_prims > SWEEP_MAX {
            return Err(format!("sweep_max_prims must be at most {SWEEP_MAX}"));
        }
        if !(1 <= self.min_leaf_size && self.min_leaf_size <= self.max_leaf_size) {
            return Err("need 1 <= min_leaf_size <= max_leaf_size".into());
        }
        Ok(())
    }

    pub(super) fn rules(&self) -> SahRules {
        SahRules {
            min_leaf_size: self.min_leaf_size,
            max_leaf_size: self.max_leaf_size,
            traversal_cost: self.traversal_cost,
            intersection_cost: self.intersection_cost,
        }
    }
}

impl Default for BinnedSahConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}
