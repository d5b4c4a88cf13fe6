//! [`AccelKind`] as a spec string and back, in the registry's language:
//! `NAME` then `:key=value` per parameter, `from=` last (it takes the rest
//! of the string, a whole spec of its own).
//!
//! Display writes only the parameters that differ from the structure's
//! defaults, so every value has one canonical spelling. Parsing lets the
//! registry check the string first, so a bad spec gets the registry's own
//! message (the same the command line prints), then reads the typed
//! values.

use super::params::{
    BinnedSah, Grid, Hlbvh, KdTree, Lbvh, Ploc, SpatialSah, SweepSah, TaskPoolBvh, WideBvh,
};
use super::{AccelKind, BinSchedule, BinaryBvh, MortonBits};
use crate::error::Error;
use caustic_accel::{ACCEL_PARAMS, AccelSpecError, registry};
use std::fmt::{self, Display, Write};
use std::str::FromStr;

impl Display for AccelKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = Spec(self.name().to_owned());
        match self {
            AccelKind::BvhBinned(p) => p.write(&BinnedSah::DEFAULT, &mut out),
            AccelKind::BvhBinnedStaged(p) => p.write(&BinnedSah::STAGED, &mut out),
            AccelKind::BvhSweep(p) => p.write(&mut out),
            AccelKind::BvhSpatial(p) => p.write(&mut out),
            AccelKind::BvhTaskPool(p) => p.write(&mut out),
            AccelKind::BvhWide(p) => p.write(&mut out),
            AccelKind::Lbvh(p) => p.write(&mut out),
            AccelKind::Hlbvh(p) => p.write(&mut out),
            AccelKind::Ploc(p) => p.write(&mut out),
            AccelKind::KdTree(p) => p.write(&mut out),
            AccelKind::Grid(p) => p.write(&mut out),
            AccelKind::Brute => {}
        }
        f.write_str(&out.0)
    }
}

impl Display for BinaryBvh {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        AccelKind::from(*self).fmt(f)
    }
}

impl FromStr for AccelKind {
    type Err = Error;

    /// Parses a registry spec; every mistake is the registry's
    /// [`AccelSpecError`], naming the parameter and what it accepts.
    fn from_str(spec: &str) -> Result<Self, Error> {
        registry::check_spec(spec)?;
        Ok(parse(spec)?)
    }
}

impl FromStr for BinaryBvh {
    type Err = Error;

    fn from_str(spec: &str) -> Result<Self, Error> {
        let kind: AccelKind = spec.parse()?;
        Ok(binary(kind)?)
    }
}

/// A spec being written: the name, then `:key=value` per parameter.
struct Spec(String);

impl Spec {
    /// Adds `key=value` when `value` is not the default.
    fn param<T: PartialEq + Display>(&mut self, key: &str, value: T, default: T) {
        if value != default {
            // Writing to a String cannot fail.
            let _ = write!(self.0, ":{key}={value}");
        }
    }
}

impl BinnedSah {
    fn write(&self, default: &Self, out: &mut Spec) {
        out.param("bins", self.bins, default.bins);
        out.param(
            "schedule",
            schedule_text(&self.schedule),
            schedule_text(&default.schedule),
        );
        out.param("sweep", self.sweep, default.sweep);
        out.param("leaf", self.max_leaf, default.max_leaf);
    }
}

impl SpatialSah {
    fn write(&self, out: &mut Spec) {
        let d = Self::default();
        self.binned.write(&d.binned, out);
        out.param("sbins", self.spatial_bins, d.spatial_bins);
        out.param("alpha", self.alpha, d.alpha);
        out.param("dup", self.duplication, d.duplication);
        out.param("saxes", self.spatial_axes, d.spatial_axes);
    }

    fn set(&mut self, key: &str, value: &str) -> Result<(), Unset> {
        match key {
            "sbins" => read(value).map(|v| self.spatial_bins = v),
            "alpha" => read(value).map(|v| self.alpha = v),
            "dup" => read(value).map(|v| self.duplication = v),
            "saxes" => read(value).map(|v| self.spatial_axes = v),
            _ => self.binned.set(key, value),
        }
    }
}

impl SweepSah {
    fn write(&self, out: &mut Spec) {
        out.param("leaf", self.max_leaf, Self::default().max_leaf);
    }
}

impl TaskPoolBvh {
    fn write(&self, out: &mut Spec) {
        out.param("leaf", self.max_leaf, Self::default().max_leaf);
    }
}

impl Lbvh {
    fn write(&self, out: &mut Spec) {
        let d = Self::default();
        out.param("bits", bits_text(self.bits), bits_text(d.bits));
        out.param("leaf", self.max_leaf, d.max_leaf);
    }
}

impl Hlbvh {
    fn write(&self, out: &mut Spec) {
        let d = Self::default();
        out.param("bits", bits_text(self.bits), bits_text(d.bits));
        out.param("k", self.cluster_bits, d.cluster_bits);
        out.param("bins", self.bins, d.bins);
        out.param("leaf", self.max_leaf, d.max_leaf);
    }
}

impl Ploc {
    fn write(&self, out: &mut Spec) {
        let d = Self::default();
        out.param("r", self.radius, d.radius);
        out.param("bits", bits_text(self.bits), bits_text(d.bits));
        out.param("leaf", self.max_leaf, d.max_leaf);
    }
}

impl WideBvh {
    fn write(&self, out: &mut Spec) {
        let d = Self::default();
        out.param("width", self.width, d.width);
        // `from=` must come last: the registry reads the rest as its spec.
        out.param("from", self.from.to_string(), d.from.to_string());
    }
}

impl KdTree {
    fn write(&self, out: &mut Spec) {
        let d = Self::default();
        out.param("small", self.small, d.small);
        out.param("empty", self.empty, d.empty);
        out.param("ct", self.cost_ratio, d.cost_ratio);
    }
}

impl Grid {
    fn write(&self, out: &mut Spec) {
        let d = Self::default();
        out.param("k", self.density, d.density);
        out.param("exact", self.exact_overlap as u8, d.exact_overlap as u8);
        out.param("macro", self.macro_size, d.macro_size);
    }
}

/// `MIN@BINS/MIN@BINS/...`, as `BinSchedule::parse` reads it.
fn schedule_text(schedule: &BinSchedule) -> String {
    let stages: Vec<String> = schedule
        .iter()
        .map(|s| format!("{}@{}", s.min_prims, s.bins))
        .collect();
    stages.join("/")
}

fn bits_text(bits: MortonBits) -> &'static str {
    match bits {
        MortonBits::Bits30 => "30",
        MortonBits::Bits63 => "63",
    }
}

/// Reads a spec the registry has accepted into typed values. The checks
/// here only guard against the registry and this file disagreeing; the
/// unit tests make sure they never fire for a registered spec.
fn parse(spec: &str) -> Result<AccelKind, AccelSpecError> {
    let (head, from) = match spec.find(":from=") {
        Some(at) => (&spec[..at], Some(&spec[at + ":from=".len()..])),
        None => (spec, None),
    };
    let mut parts = head.trim().split(':');
    let name = parts.next().unwrap_or_default().trim();
    let mut kind = defaults(name).ok_or_else(|| AccelSpecError::UnknownName {
        name: name.to_owned(),
    })?;
    for part in parts {
        let (key, value) = part.split_once('=').unwrap_or((part, ""));
        set(&mut kind, key.trim(), value.trim())?;
    }
    if let Some(from) = from {
        set(&mut kind, "from", from.trim())?;
    }
    Ok(kind)
}

/// The structure `name` with its default parameters.
fn defaults(name: &str) -> Option<AccelKind> {
    Some(match name {
        "bvh-binned" => AccelKind::BvhBinned(BinnedSah::DEFAULT),
        "bvh-binned-staged" => AccelKind::BvhBinnedStaged(BinnedSah::STAGED),
        "bvh-sweep" => AccelKind::BvhSweep(SweepSah::default()),
        "bvh-spatial" => AccelKind::BvhSpatial(SpatialSah::default()),
        "bvh-taskpool" => AccelKind::BvhTaskPool(TaskPoolBvh::default()),
        "bvh-wide" => AccelKind::BvhWide(WideBvh::default()),
        "lbvh" => AccelKind::Lbvh(Lbvh::default()),
        "hlbvh" => AccelKind::Hlbvh(Hlbvh::default()),
        "ploc" => AccelKind::Ploc(Ploc::default()),
        "kdtree" => AccelKind::KdTree(KdTree::default()),
        "grid" => AccelKind::Grid(Grid::default()),
        "brute" => AccelKind::Brute,
        _ => return None,
    })
}

/// Why one `key=value` could not be set.
enum Unset {
    /// The structure has no such key.
    Key,
    /// The value does not read as the key's type.
    Value(String),
}

/// Sets one parameter of `kind`.
fn set(kind: &mut AccelKind, key: &str, value: &str) -> Result<(), AccelSpecError> {
    let name = kind.name();
    let result = match kind {
        AccelKind::BvhBinned(p) | AccelKind::BvhBinnedStaged(p) => p.set(key, value),
        AccelKind::BvhSweep(p) => match key {
            "leaf" => read(value).map(|v| p.max_leaf = v),
            _ => Err(Unset::Key),
        },
        AccelKind::BvhTaskPool(p) => match key {
            "leaf" => read(value).map(|v| p.max_leaf = v),
            _ => Err(Unset::Key),
        },
        AccelKind::BvhSpatial(p) => p.set(key, value),
        AccelKind::BvhWide(p) => p.set(key, value),
        AccelKind::Lbvh(p) => match key {
            "bits" => read_bits(value).map(|v| p.bits = v),
            "leaf" => read(value).map(|v| p.max_leaf = v),
            _ => Err(Unset::Key),
        },
        AccelKind::Hlbvh(p) => p.set(key, value),
        AccelKind::Ploc(p) => p.set(key, value),
        AccelKind::KdTree(p) => p.set(key, value),
        AccelKind::Grid(p) => p.set(key, value),
        AccelKind::Brute => Err(Unset::Key),
    };
    result.map_err(|unset| match unset {
        Unset::Key => AccelSpecError::UnknownParam {
            accel: name.to_owned(),
            param: key.to_owned(),
            valid: ACCEL_PARAMS
                .iter()
                .find(|(n, _)| *n == name)
                .map_or("none", |(_, valid)| valid),
        },
        Unset::Value(message) => AccelSpecError::BadValue {
            accel: name.to_owned(),
            param: key.to_owned(),
            message,
        },
    })
}

impl BinnedSah {
    fn set(&mut self, key: &str, value: &str) -> Result<(), Unset> {
        match key {
            "bins" => read(value).map(|v| self.bins = v),
            "schedule" => BinSchedule::parse(value)
                .map(|v| self.schedule = v)
                .map_err(Unset::Value),
            "sweep" => read(value).map(|v| self.sweep = v),
            "leaf" => read(value).map(|v| self.max_leaf = v),
            _ => Err(Unset::Key),
        }
    }
}

impl WideBvh {
    fn set(&mut self, key: &str, value: &str) -> Result<(), Unset> {
        match key {
            "width" => read(value).map(|v| self.width = v),
            "from" => parse(value)
                .and_then(binary)
                .map(|v| self.from = v)
                .map_err(|e| Unset::Value(e.to_string())),
            _ => Err(Unset::Key),
        }
    }
}

impl Hlbvh {
    fn set(&mut self, key: &str, value: &str) -> Result<(), Unset> {
        match key {
            "bits" => read_bits(value).map(|v| self.bits = v),
            "k" => read(value).map(|v| self.cluster_bits = v),
            "bins" => read(value).map(|v| self.bins = v),
            "leaf" => read(value).map(|v| self.max_leaf = v),
            _ => Err(Unset::Key),
        }
    }
}

impl Ploc {
    fn set(&mut self, key: &str, value: &str) -> Result<(), Unset> {
        match key {
            "r" => read(value).map(|v| self.radius = v),
            "bits" => read_bits(value).map(|v| self.bits = v),
            "leaf" => read(value).map(|v| self.max_leaf = v),
            _ => Err(Unset::Key),
        }
    }
}

impl KdTree {
    fn set(&mut self, key: &str, value: &str) -> Result<(), Unset> {
        match key {
            "small" => read(value).map(|v| self.small = v),
            "empty" => read(value).map(|v| self.empty = v),
            "ct" => read(value).map(|v| self.cost_ratio = v),
            _ => Err(Unset::Key),
        }
    }
}

impl Grid {
    fn set(&mut self, key: &str, value: &str) -> Result<(), Unset> {
        match key {
            "k" => read(value).map(|v| self.density = v),
            "exact" => read::<u8>(value).map(|v| self.exact_overlap = v == 1),
            "macro" => read(value).map(|v| self.macro_size = v),
            _ => Err(Unset::Key),
        }
    }
}

fn read<T: FromStr>(value: &str) -> Result<T, Unset> {
    value
        .parse()
        .map_err(|_| Unset::Value(format!("`{value}` is not a valid value")))
}

fn read_bits(value: &str) -> Result<MortonBits, Unset> {
    match value {
        "30" => Ok(MortonBits::Bits30),
        "63" => Ok(MortonBits::Bits63),
        _ => Err(Unset::Value(format!(
            "`{value}`: Morton codes have 30 or 63 bits"
        ))),
    }
}

/// `kind` as a binary BVH, or the registry's error for `bvh-wide:from=`.
fn binary(kind: AccelKind) -> Result<BinaryBvh, AccelSpecError> {
    Ok(match kind {
        AccelKind::BvhBinned(p) => BinaryBvh::BvhBinned(p),
        AccelKind::BvhBinnedStaged(p) => BinaryBvh::BvhBinnedStaged(p),
        AccelKind::BvhSweep(p) => BinaryBvh::BvhSweep(p),
        AccelKind::BvhSpatial(p) => BinaryBvh::BvhSpatial(p),
        AccelKind::BvhTaskPool(p) => BinaryBvh::BvhTaskPool(p),
        AccelKind::Lbvh(p) => BinaryBvh::Lbvh(p),
        AccelKind::Hlbvh(p) => BinaryBvh::Hlbvh(p),
        AccelKind::Ploc(p) => BinaryBvh::Ploc(p),
        other => {
            return Err(AccelSpecError::BadValue {
                accel: "bvh-wide".into(),
                param: "from".into(),
                message: format!("`{}` is not a binary BVH builder", other.name()),
            });
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use caustic_accel::ACCEL_NAMES;

    /// Specs with every parameter of every structure, in canonical order.
    const SPECS: &[&str] = &[
        "bvh-binned",
        "bvh-binned:bins=8",
        "bvh-binned:schedule=1024@32/64@16/0@4:sweep=0:leaf=4",
        "bvh-binned-staged",
        "bvh-binned-staged:schedule=",
        "bvh-binned-staged:bins=16:sweep=8",
        "bvh-sweep:leaf=2",
        "bvh-spatial",
        "bvh-spatial:bins=16:sweep=8:sbins=32:alpha=0.001:dup=2:saxes=3",
        "bvh-wide",
        "bvh-wide:from=bvh-spatial:dup=1.5",
        "bvh-wide:width=4",
        "bvh-wide:width=4:from=ploc:r=8:bits=63",
        "bvh-wide:from=bvh-binned:schedule=64@8/0@4",
        "lbvh:bits=63:leaf=1",
        "hlbvh:bits=63:k=12:bins=8:leaf=4",
        "ploc:r=4:bits=63:leaf=2",
        "kdtree:small=16:empty=0.5:ct=0.5",
        "grid:k=2.5:exact=1:macro=2",
        "brute",
    ];

    #[test]
    fn canonical_specs_round_trip() {
        for &spec in SPECS {
            let kind: AccelKind = spec.parse().unwrap_or_else(|e| panic!("{spec}: {e}"));
            assert_eq!(kind.to_string(), spec);
            assert_eq!(kind.to_string().parse::<AccelKind>().unwrap(), kind);
        }
    }

    /// A structure added to the registry must be added here too: this
    /// fails until it is.
    #[test]
    fn every_registered_name_has_a_variant() {
        for &name in ACCEL_NAMES {
            let kind: AccelKind = name.parse().unwrap();
            assert_eq!(kind.name(), name);
            assert_eq!(kind.to_string(), name);
        }
    }

    #[test]
    fn defaults_print_as_the_bare_name() {
        assert_eq!(AccelKind::default().to_string(), "bvh-wide");
        assert_eq!(
            AccelKind::BvhBinned(BinnedSah::default()).to_string(),
            "bvh-binned"
        );
        assert_eq!(AccelKind::Ploc(Ploc::default()).to_string(), "ploc");
        assert_eq!(AccelKind::KdTree(KdTree::default()).to_string(), "kdtree");
    }

    #[test]
    fn non_canonical_spellings_parse_to_the_same_value() {
        let parse = |s: &str| s.parse::<AccelKind>().unwrap();
        assert_eq!(parse("ploc:r=16"), parse("ploc"));
        assert_eq!(parse(" ploc : r = 8 "), parse("ploc:r=8"));
        assert_eq!(parse("grid:exact=0"), parse("grid"));
        assert_eq!(parse("bvh-wide:width=8:from=bvh-binned"), parse("bvh-wide"));
        assert_eq!(parse("kdtree:ct=0.50").to_string(), "kdtree:ct=0.5");
    }

    #[test]
    fn bad_specs_get_the_registry_messages() {
        let message = |s: &str| s.parse::<AccelKind>().unwrap_err().to_string();
        assert!(message("octree").contains("unknown accel `octree`"));
        assert!(message("lbvh:bits=31").contains("30 or 63"));
        assert!(message("lbvh:radius=3").contains("no parameter `radius`"));
        assert!(message("ploc:r=0").contains("1..=256"));
        assert!(message("bvh-wide:width=6").contains("4 or 8"));
        assert!(message("bvh-wide:from=kdtree").contains("not a binary BVH builder"));
        assert!(message("grid:k=nan").contains("not a number"));
        assert!("ploc".parse::<BinaryBvh>().is_ok());
        assert!("grid".parse::<BinaryBvh>().is_err());
    }

    #[test]
    fn typed_values_out_of_range_fail_at_the_registry() {
        let tris = [caustic_geom::Triangle::new(
            caustic_geom::Vec3::ZERO,
            caustic_geom::Vec3::X,
            caustic_geom::Vec3::Y,
        )];
        let kind = AccelKind::Ploc(Ploc {
            radius: 0,
            ..Ploc::default()
        });
        let err = kind.build(&tris).err().map(|e| e.to_string());
        assert!(err.unwrap().contains("1..=256"));
        let wide = AccelKind::BvhWide(WideBvh {
            width: 6,
            ..WideBvh::default()
        });
        assert!(wide.build(&tris).is_err());
    }

    #[test]
    fn typed_and_string_builds_are_the_same_structure() {
        let tris: Vec<_> = (0..50)
            .map(|i| {
                let o = caustic_geom::Vec3::new(i as f32 * 0.3, (i % 7) as f32, (i % 5) as f32);
                caustic_geom::Triangle::new(o, o + caustic_geom::Vec3::X, o + caustic_geom::Vec3::Y)
            })
            .collect();
        for &spec in SPECS {
            let kind: AccelKind = spec.parse().unwrap();
            let typed = kind.build(&tris).unwrap();
            let named = caustic_accel::build_accel(spec, &tris).unwrap();
            let (mut a, mut b) = (typed.stats().clone(), named.stats().clone());
            (a.build_ms, b.build_ms) = (0.0, 0.0);
            assert_eq!(a, b, "{spec}");
        }
    }
}
