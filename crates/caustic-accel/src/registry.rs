//! The one list of accel names. The CLI's `--accel`, the tests and the
//! benchmarks all loop over [`ACCEL_NAMES`] and build through
//! [`build_accel`], so a new structure is registered here once.

mod gpu_builders;

use crate::bvh::build::Bvh2Builder;
use crate::{Accel, BruteForce, TriangleBvh};
use caustic_geom::Triangle;
use std::fmt;

pub use gpu_builders::{
    DeviceBuilderConfig, GPU_ACCEL_NAMES, MortonBuilderConfig, SahBuilderConfig,
};
use gpu_builders::{binned_params, morton_config, sah_config, taskpool_config};

/// Every accel name [`build_accel`] knows, in the order reports list them.
pub const ACCEL_NAMES: &[&str] = &[
    "bvh-binned",
    "bvh-binned-staged",
    "bvh-sweep",
    "bvh-spatial",
    "bvh-wide",
    "lbvh",
    "hlbvh",
    "ploc",
    "bvh-taskpool",
    "kdtree",
    "grid",
    "brute",
];

/// Why an accel spec could not be built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AccelSpecError {
    /// The name before the first `:` is not in [`ACCEL_NAMES`].
    UnknownName { name: String },
    /// A parameter the named structure does not take.
    UnknownParam {
        accel: String,
        param: String,
        valid: &'static str,
    },
    /// A registered structure that the GPU does not build.
    NotOnGpu { name: String },
    /// A structure where a binary BVH builder is needed (`cpu:SPEC` on the GPU).
    NotBinary { name: String },
    /// A parameter given twice, without `=`, or with a value out of range.
    BadValue {
        accel: String,
        param: String,
        message: String,
    },
}

/// The old name of [`AccelSpecError`], kept for callers.
pub type UnknownAccel = AccelSpecError;

impl fmt::Display for AccelSpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownName { name } => write!(
                f,
                "unknown accel `{name}`; valid names: {}",
                ACCEL_NAMES.join(", ")
            ),
            Self::UnknownParam {
                accel,
                param,
                valid,
            } => write!(
                f,
                "accel `{accel}` has no parameter `{param}`; it takes: {valid}"
            ),
            Self::NotOnGpu { name } => write!(
                f,
                "accel `{name}` has no GPU builder; the GPU builds {}, bvh-wide[:from=SPEC] \
                 (the compressed 8-wide BVH of one of them), {}, or cpu:SPEC (a binary BVH \
                 built on the CPU and uploaded, e.g. cpu:bvh-binned), or traces by \
                 dacrt[:split=median|rdh] (no structure: divide-and-conquer ray tracing)",
                GPU_ACCEL_NAMES.join(", "),
                GPU_SPATIAL_STRUCTURES.join(", ")
            ),
            Self::BadValue {
                accel,
                param,
                message,
            } => write!(f, "accel `{accel}`, parameter `{param}`: {message}"),
            Self::NotBinary { name } => write!(
                f,
                "`{name}` is not a binary BVH builder (bvh-binned, bvh-binned-staged, bvh-sweep, bvh-spatial, lbvh, hlbvh, ploc, bvh-taskpool)"
            ),
        }
    }
}

impl std::error::Error for AccelSpecError {}

/// The parameters each structure takes, as `--help` and errors list them.
pub const ACCEL_PARAMS: &[(&str, &str)] = &[
    (
        "bvh-binned",
        "bins=2..64, schedule=MIN@BINS/MIN@BINS/... (multi-stage), sweep=0..64 (exact-sweep subtree size), leaf=N (max leaf size)",
    ),
    (
        "bvh-binned-staged",
        "the bvh-binned parameters; its default schedule is 65536@64/4096@32/256@16/0@8",
    ),
    ("bvh-sweep", "leaf=N (max leaf size)"),
    (
        "bvh-spatial",
        "the bvh-binned parameters, sbins=2..64 (spatial bins), alpha=0..1 (overlap that tries spatial splits, of the root's area), dup=1..16 (most references per triangle), saxes=1|3 (spatial splits binned on the longest axis or all three)",
    ),
    (
        "bvh-wide",
        "width=4|8, fold=0..64 (subtrees of at most this many triangles may become one leaf; 0 keeps the binary leaves), leafcost=0..64 (a leaf group test's cost in binary node steps, in the SAH that decides which subtrees are folded; 0 folds every one that fits; default 6), from=NAME (binary builder: bvh-binned, bvh-binned-staged, bvh-sweep, bvh-spatial, lbvh, hlbvh, ploc, bvh-taskpool)",
    ),
    (
        "lbvh",
        "bits=30|63 (Morton code width), leaf=N (max leaf size)",
    ),
    (
        "hlbvh",
        "bits=30|63, k=3..30 (Morton prefix bits of a cluster), bins=2..32, leaf=N",
    ),
    ("ploc", "r=1..256 (search radius), bits=30|63, leaf=N"),
    (
        "bvh-taskpool",
        "leaf=1..16 (max leaf size; on the CPU, the binned twin of the GPU task-pool build), grab=1..14 (the GPU pool's minimum claim of 32-item chunks, Eq. 1's K)",
    ),
    (
        "kdtree",
        "small=1..64 (small-node threshold), empty=0..1 (empty-space cut-off), ct=COST (traversal/intersection cost ratio)",
    ),
    (
        "grid",
        "k=DENSITY (cells per triangle), exact=0|1 (exact triangle/cell overlap), macro=1..16",
    ),
    ("brute", "none"),
];

/// Builds the accel described by `spec` over `triangles`; its
/// `stats().build_ms` is the build's wall time.
///
/// A spec is a registered name, optionally followed by `:key=value`
/// parameters ([`ACCEL_PARAMS`]), e.g. `lbvh:bits=63`, `ploc:r=32`,
/// `bvh-binned:schedule=65536@64/4096@32/0@8`, `bvh-wide:width=4:from=ploc`.
pub fn build_accel(spec: &str, triangles: &[Triangle]) -> Result<Box<dyn Accel>, AccelSpecError> {
    let mut params = Params::parse(spec)?;
    let accel: Box<dyn Accel> = match params.accel.as_str() {
        "bvh-wide" => {
            let mut width = match params.take_usize("width", 4..=8)? {
                None | Some(8) => crate::bvh::wide::WideBvhConfig::EIGHT,
                Some(4) => crate::bvh::wide::WideBvhConfig::FOUR,
                Some(_) => return Err(params.bad("width", "the width is 4 or 8")),
            };
            if let Some(fold) = params.take_usize("fold", 0..=64)? {
                width.collapse.max_leaf_prims = fold;
            }
            if let Some(cost) = params.take_usize("leafcost", 0..=64)? {
                width.collapse.leaf_cost = cost as u32;
            }
            let from = params.take("from").unwrap_or_else(|| "bvh-binned".into());
            let builder = binary_builder(&mut Params::parse(&from)?)?;
            params.finish()?;
            Box::new(crate::bvh::wide::WideTriangleBvh::build_with(
                triangles,
                builder.as_ref(),
                &width,
            ))
        }
        "kdtree" => {
            let config = kdtree_config(&mut params)?;
            params.finish()?;
            Box::new(crate::kdtree::TriangleKdTree::build_with(triangles, config))
        }
        "grid" => {
            let config = grid_config(&mut params)?;
            params.finish()?;
            Box::new(crate::grid::UniformGrid::build_with(triangles, &config))
        }
        "brute" => {
            params.finish()?;
            Box::new(BruteForce::new(triangles))
        }
        _ => {
            let builder = binary_builder(&mut params)?;
            Box::new(TriangleBvh::build_with(triangles, builder.as_ref()))
        }
    };
    Ok(accel)
}

/// Checks `spec` exactly as [`build_accel`] would (name, keys, value
/// ranges), without triangles to build over: how a typed or command-line
/// spec is rejected before any work starts.
pub fn check_spec(spec: &str) -> Result<(), AccelSpecError> {
    // Every parameter is checked before the build starts, and a build over
    // no triangles costs nothing, so this is the same check as a real build.
    build_accel(spec, &[]).map(|_| ())
}

/// The binary BVH that `spec` names (`bvh-binned`, `bvh-binned-staged`,
/// `bvh-sweep`, `lbvh`, `hlbvh`, `ploc`, with their parameters) over
/// `triangles`, as a [`TriangleBvh`]: the tree the CUDA traversal uploads.
/// Other structures are an error.
pub fn build_triangle_bvh(
    spec: &str,
    triangles: &[Triangle],
) -> Result<TriangleBvh, AccelSpecError> {
    const BINARY: [&str; 8] = [
        "bvh-binned",
        "bvh-binned-staged",
        "bvh-sweep",
        "bvh-spatial",
        "lbvh",
        "hlbvh",
        "ploc",
        "bvh-taskpool",
    ];
    let mut params = Params::parse(spec)?;
    if !BINARY.contains(&params.accel.as_str()) {
        return Err(AccelSpecError::NotBinary { name: params.accel });
    }
    let builder = binary_builder(&mut params)?;
    Ok(TriangleBvh::build_with(triangles, builder.as_ref()))
}

/// The binary BVH builder a spec names, its parameters consumed.
fn binary_builder(params: &mut Params) -> Result<Box<dyn Bvh2Builder>, AccelSpecError> {
    let builder: Box<dyn Bvh2Builder> = match params.accel.as_str() {
        "bvh-binned" | "bvh-binned-staged" | "bvh-sweep" => sah_config(params)?.cpu_builder(),
        "bvh-spatial" => Box::new(crate::bvh::build::SpatialSahBuilder::new(spatial_config(
            params,
        )?)),
        "lbvh" | "hlbvh" | "ploc" => morton_config(params)?.cpu_builder(),
        "bvh-taskpool" => Box::new(crate::bvh::build::TaskPoolBvhBuilder::new(taskpool_config(
            params,
        )?)),
        other => {
            // Only `bvh-wide:from=` reaches here with another structure.
            return Err(AccelSpecError::BadValue {
                accel: "bvh-wide".into(),
                param: "from".into(),
                message: format!(
                    "`{other}` is not a binary BVH builder (bvh-binned, bvh-binned-staged, bvh-sweep, bvh-spatial, lbvh, hlbvh, ploc, bvh-taskpool)"
                ),
            });
        }
    };
    params.finish()?;
    Ok(builder)
}

/// Every structure the GPU builds and traces, as `--accel` names them with
/// `--device cuda` (`cpu:SPEC` uploads a CPU-built binary tree); the
/// builds themselves are `bvh::device_accel_cuda` (feature `cuda`).
pub const GPU_STRUCTURES: &[&str] = &[
    "ploc",
    "lbvh",
    "hlbvh",
    "bvh-binned",
    "bvh-binned-staged",
    "bvh-sweep",
    "bvh-taskpool",
    "bvh-wide",
    "kdtree",
    "grid",
    "dacrt",
    "cpu:SPEC",
];

/// The structures other than BVHs that the GPU builds and traces, with
/// their CPU parameters: the SAH kd-tree (Zhou et al. 2008's large- and
/// small-node stages on the device; traced with a stack) and the uniform
/// grid (Ivson et al., count, scan, write, sort, cell ranges on the
/// device; traced by a 3D-DDA).
pub const GPU_SPATIAL_STRUCTURES: &[&str] = &["kdtree", "grid"];

/// The kd-tree configuration a `kdtree[:small=..:empty=..:ct=..]` spec
/// names, the same the CPU build of that spec uses.
pub fn kdtree_config_of(spec: &str) -> Result<crate::kdtree::KdTreeConfig, AccelSpecError> {
    config_of(spec, "kdtree", "not a kd-tree spec", kdtree_config)
}

/// The grid configuration a `grid[:k=..:exact=..:macro=..]` spec names,
/// the same the CPU build of that spec uses.
pub fn grid_config_of(spec: &str) -> Result<crate::grid::GridConfig, AccelSpecError> {
    config_of(spec, "grid", "not a grid spec", grid_config)
}

/// The configuration `read` takes from a spec of structure `name`, every
/// parameter consumed.
fn config_of<C>(
    spec: &str,
    name: &str,
    wrong_name: &str,
    read: impl FnOnce(&mut Params) -> Result<C, AccelSpecError>,
) -> Result<C, AccelSpecError> {
    let mut params = Params::parse(spec)?;
    if params.accel != name {
        return Err(AccelSpecError::BadValue {
            accel: params.accel,
            param: "name".into(),
            message: wrong_name.into(),
        });
    }
    let config = read(&mut params)?;
    params.finish()?;
    Ok(config)
}

/// The spec `--device cuda` builds when none is given: the GPU binned SAH
/// BVH, whose build plus one 1080p frame of primary, AO and diffuse rays
/// summed over the standard scenes is the lowest on an H100 (44.6 ms
/// against 49.7 for `ploc`, 57.1 for `bvh-wide`; `docs/BENCHMARKS.md`,
/// "GPU-built trees"). For a scene that changes every frame and is traced
/// little, `ploc` builds in 60 % of its time.
pub const DEFAULT_GPU_SPEC: &str = "bvh-binned";

/// The configuration of `bvh-spatial` from its parameters: the binned
/// builder's plus `sbins`, `alpha`, `dup` and `saxes`.
fn spatial_config(
    params: &mut Params,
) -> Result<crate::bvh::build::SpatialSahConfig, AccelSpecError> {
    use crate::bvh::build::{MAX_SPATIAL_BINS, SpatialSahConfig};
    let mut config = SpatialSahConfig::DEFAULT;
    config.base = binned_params(params, config.base)?;
    if let Some(bins) = params.take_usize("sbins", 2..=MAX_SPATIAL_BINS)? {
        config.spatial_bins = bins;
    }
    if let Some(alpha) = params.take_f32("alpha", 0.0..=1.0)? {
        config.overlap_alpha = alpha;
    }
    if let Some(dup) = params.take_f32("dup", 1.0..=16.0)? {
        config.duplication = dup;
    }
    if let Some(axes) = params.take_usize("saxes", 1..=3)? {
        if axes == 2 {
            return Err(params.bad("saxes", "1 (the longest axis) or 3 (every axis)"));
        }
        config.spatial_axes = axes;
    }
    config.validate().map_err(|m| params.bad("dup", &m))?;
    Ok(config)
}

fn kdtree_config(params: &mut Params) -> Result<crate::kdtree::KdTreeConfig, AccelSpecError> {
    let mut config = crate::kdtree::KdTreeConfig::default();
    if let Some(small) = params.take_usize("small", 1..=64)? {
        config.small_node_max = small;
    }
    if let Some(empty) = params.take_f32("empty", 0.0..=1.0)? {
        config.empty_space_ratio = empty;
    }
    if let Some(ratio) = params.take_f32("ct", 1e-3..=1e3)? {
        config.traversal_cost = ratio * config.intersection_cost;
    }
    Ok(config)
}

fn grid_config(params: &mut Params) -> Result<crate::grid::GridConfig, AccelSpecError> {
    let mut config = crate::grid::GridConfig::default();
    if let Some(k) = params.take_f32("k", 1e-3..=1e3)? {
        config.density = k;
    }
    if let Some(exact) = params.take_usize("exact", 0..=1)? {
        config.exact_overlap = exact == 1;
    }
    if let Some(size) = params.take_usize("macro", 1..=16)? {
        config.macro_size = size;
    }
    Ok(config)
}

/// A parsed spec: the accel name and its not yet consumed `key=value`
/// parameters. Builders take what they know; [`Params::finish`] rejects
/// the rest, so a typo is an error rather than silently ignored.
struct Params {
    accel: String,
    values: Vec<(String, String)>,
}

impl Params {
    fn parse(spec: &str) -> Result<Self, AccelSpecError> {
        // `from=` (bvh-wide) holds a whole spec of its own, colons
        // included: it takes everything after it.
        let (head, from) = match spec.find(":from=") {
            Some(at) => (&spec[..at], Some(&spec[at + ":from=".len()..])),
            None => (spec, None),
        };
        let mut parts = head.trim().split(':');
        let accel = parts.next().unwrap_or_default().trim().to_owned();
        if !ACCEL_NAMES.contains(&accel.as_str()) {
            return Err(AccelSpecError::UnknownName { name: accel });
        }
        let mut params = Self {
            accel,
            values: Vec::new(),
        };
        for part in parts {
            let Some((key, value)) = part.split_once('=') else {
                return Err(params.bad(part, "expected key=value"));
            };
            params.push(key.trim(), value.trim())?;
        }
        if let Some(from) = from {
            params.push("from", from.trim())?;
        }
        Ok(params)
    }

    fn push(&mut self, key: &str, value: &str) -> Result<(), AccelSpecError> {
        if self.values.iter().any(|(k, _)| k == key) {
            return Err(self.bad(key, "given twice"));
        }
        self.values.push((key.to_owned(), value.to_owned()));
        Ok(())
    }

    fn take(&mut self, key: &str) -> Option<String> {
        let at = self.values.iter().position(|(k, _)| k == key)?;
        Some(self.values.remove(at).1)
    }

    fn bad(&self, param: &str, message: &str) -> AccelSpecError {
        AccelSpecError::BadValue {
            accel: self.accel.clone(),
            param: param.to_owned(),
            message: message.to_owned(),
        }
    }

    fn take_usize(
        &mut self,
        key: &str,
        range: std::ops::RangeInclusive<usize>,
    ) -> Result<Option<usize>, AccelSpecError> {
        let Some(text) = self.take(key) else {
            return Ok(None);
        };
        match text.parse::<usize>() {
            Ok(v) if range.contains(&v) => Ok(Some(v)),
            _ => Err(self.bad(
                key,
                &format!(
                    "`{text}` is not an integer in {}..={}",
                    range.start(),
                    range.end()
                ),
            )),
        }
    }

    fn take_f32(
        &mut self,
        key: &str,
        range: std::ops::RangeInclusive<f32>,
    ) -> Result<Option<f32>, AccelSpecError> {
        let Some(text) = self.take(key) else {
            return Ok(None);
        };
        match text.parse::<f32>() {
            Ok(v) if range.contains(&v) => Ok(Some(v)),
            _ => Err(self.bad(
                key,
                &format!(
                    "`{text}` is not a number in {}..={}",
                    range.start(),
                    range.end()
                ),
            )),
        }
    }

    fn take_bits(&mut self) -> Result<Option<crate::bvh::build::MortonBits>, AccelSpecError> {
        use crate::bvh::build::MortonBits;
        match self.take("bits").as_deref() {
            None => Ok(None),
            Some("30") => Ok(Some(MortonBits::Bits30)),
            Some("63") => Ok(Some(MortonBits::Bits63)),
            Some(other) => Err(self.bad(
                "bits",
                &format!("`{other}`: Morton codes have 30 or 63 bits"),
            )),
        }
    }

    /// Rejects parameters nobody took.
    fn finish(&self) -> Result<(), AccelSpecError> {
        match self.values.first() {
            None => Ok(()),
            Some((param, _)) => Err(AccelSpecError::UnknownParam {
                accel: self.accel.clone(),
                param: param.clone(),
                valid: ACCEL_PARAMS
                    .iter()
                    .find(|(name, _)| *name == self.accel)
                    .map_or("none", |(_, valid)| valid),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use caustic_geom::Vec3;

    #[test]
    fn every_registered_name_builds_and_reports_it() {
        let tris = [Triangle::new(Vec3::ZERO, Vec3::X, Vec3::Y)];
        for &name in ACCEL_NAMES {
            let accel = build_accel(name, &tris).unwrap();
            assert_eq!(accel.name(), name);
            assert_eq!(accel.stats().name, name);
            assert_eq!(accel.stats().prims, 1);
            assert!(accel.stats().build_ms >= 0.0);
        }
    }

    #[test]
    fn unknown_name_lists_the_valid_ones() {
        let err = build_accel("octree", &[]).err().unwrap();
        let message = err.to_string();
        assert!(message.contains("octree"));
        for name in ACCEL_NAMES {
            assert!(message.contains(name));
        }
    }

    fn soup() -> Vec<Triangle> {
        let mut state = 0x2545_f491_u32;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            (state % 1000) as f32 / 100.0
        };
        (0..300)
            .map(|_| {
                let a = Vec3::new(next(), next(), next());
                let d = Vec3::new(next(), next(), next()) * 0.1;
                Triangle::new(
                    a,
                    a + Vec3::new(d.x, 0.0, d.z),
                    a + Vec3::new(0.0, d.y, d.z),
                )
            })
            .collect()
    }

    #[test]
    fn parameterised_specs_build_and_trace_like_brute_force() {
        let tris = soup();
        let brute = BruteForce::new(&tris);
        let specs = [
            "bvh-binned:bins=8",
            "bvh-binned:schedule=1024@32/64@16/0@4:leaf=4",
            "bvh-binned-staged:sweep=0",
            "bvh-sweep:leaf=2",
            "lbvh:bits=63:leaf=1",
            "hlbvh:k=12:bins=8:bits=63",
            "ploc:r=4:bits=63",
            "bvh-wide:width=4:from=ploc:r=8",
            "bvh-wide:from=bvh-binned:schedule=64@8/0@4",
            "bvh-wide:fold=0",
            "bvh-wide:width=4:fold=16",
            "bvh-wide:fold=16:leafcost=0",
            "bvh-wide:leafcost=64",
            "kdtree:small=16:empty=0.5:ct=0.5",
            "grid:k=2:exact=1:macro=2",
        ];
        for spec in specs {
            let accel = build_accel(spec, &tris).unwrap_or_else(|e| panic!("{spec}: {e}"));
            assert_eq!(accel.stats().prims, tris.len());
            for i in 0..500 {
                let origin = Vec3::new(-1.0, (i % 23) as f32 * 0.45, (i / 23) as f32 * 0.45);
                let ray = caustic_geom::Ray::new(origin, Vec3::new(1.0, 0.013, -0.007));
                assert_eq!(accel.intersect(&ray), brute.intersect(&ray), "{spec}");
            }
        }
    }

    #[test]
    fn fold_sets_which_subtrees_become_leaves() {
        // Folding no subtree keeps the binary tree's leaves: more of them.
        let tris = soup();
        let leaves = |spec: &str| build_accel(spec, &tris).unwrap().stats().leaves;
        assert!(leaves("bvh-wide:fold=0") > leaves("bvh-wide"));
        assert_eq!(leaves("bvh-wide:fold=8"), leaves("bvh-wide"));
        // The SAH keeps some subtrees that fit split; folding regardless of
        // cost (`leafcost=0`) makes fewer leaves, dearer leaves more.
        let folded_all = leaves("bvh-wide:leafcost=0");
        assert!(folded_all < leaves("bvh-wide"));
        assert!(leaves("bvh-wide:leafcost=64") > leaves("bvh-wide"));
        assert!(leaves("bvh-wide:leafcost=64") <= leaves("bvh-wide:fold=0"));
    }

    #[test]
    fn check_spec_agrees_with_the_build() {
        for &name in ACCEL_NAMES {
            assert_eq!(check_spec(name), Ok(()), "{name}");
        }
        for spec in [
            "ploc:r=0",
            "lbvh:radius=3",
            "octree",
            "bvh-wide:from=kdtree",
        ] {
            let tris = soup();
            let built = build_accel(spec, &tris).err();
            assert_eq!(check_spec(spec).err(), built, "{spec}");
        }
    }

    #[test]
    fn triangle_bvh_from_a_binary_spec() {
        let tris = soup();
        let bvh = build_triangle_bvh("ploc:r=4", &tris).unwrap();
        assert_eq!(bvh.stats().name, "ploc");
        assert_eq!(bvh.stats().prims, tris.len());
        assert!(build_triangle_bvh("kdtree", &tris).is_err());
        assert!(build_triangle_bvh("lbvh:bits=31", &tris).is_err());
    }

    #[test]
    fn morton_specs_configure_the_cpu_and_gpu_builders_alike() {
        use crate::bvh::build::MortonBits;
        let MortonBuilderConfig::Lbvh(lbvh) =
            MortonBuilderConfig::parse("lbvh:bits=63:leaf=4").unwrap()
        else {
            panic!("not lbvh");
        };
        assert_eq!(
            (lbvh.morton_bits, lbvh.max_leaf_size),
            (MortonBits::Bits63, 4)
        );
        let MortonBuilderConfig::Ploc(ploc) = MortonBuilderConfig::parse("ploc:r=32").unwrap()
        else {
            panic!("not ploc");
        };
        assert_eq!((ploc.radius, ploc.morton_bits), (32, MortonBits::Bits30));
        let MortonBuilderConfig::Hlbvh(hlbvh) =
            MortonBuilderConfig::parse("hlbvh:k=12:bins=8").unwrap()
        else {
            panic!("not hlbvh");
        };
        assert_eq!((hlbvh.cluster_bits, hlbvh.bins), (12, 8));
        let config = MortonBuilderConfig::parse("ploc").unwrap();
        assert_eq!(
            (config.name(), config.cpu_builder().name()),
            ("ploc", "ploc")
        );
        for spec in ["grid", "bvh-wide:from=lbvh", "brute"] {
            let message = MortonBuilderConfig::parse(spec).unwrap_err().to_string();
            assert!(message.contains("no GPU builder"), "{message}");
            assert!(message.contains("lbvh, hlbvh, ploc"), "{message}");
        }
        let message = |spec| MortonBuilderConfig::parse(spec).unwrap_err().to_string();
        assert!(message("lbvh:k=3").contains("no parameter `k`"));
        assert!(message("ploc:r=0").contains("1..=256"));
        assert!(message("octree").contains("unknown accel"));
    }

    #[test]
    fn bad_specs_say_what_is_wrong() {
        let tris = soup();
        let message = |spec: &str| build_accel(spec, &tris).err().unwrap().to_string();
        assert!(message("lbvh:bits=31").contains("30 or 63"));
        assert!(message("lbvh:radius=3").contains("no parameter `radius`"));
        assert!(message("lbvh:radius=3").contains("bits=30|63"));
        assert!(message("bvh-binned:schedule=8@4/16@8").contains("decreasing"));
        assert!(message("bvh-binned:schedule=16@99").contains("2..=64"));
        assert!(message("bvh-binned:schedule=16x8").contains("MIN@BINS"));
        assert!(message("bvh-binned:bins=99").contains("2..=64"));
        assert!(message("lbvh:bits").contains("key=value"));
        assert!(message("lbvh:bits=30:bits=63").contains("twice"));
        assert!(message("bvh-wide:width=6").contains("4 or 8"));
        assert!(message("bvh-wide:fold=65").contains("0..=64"));
        assert!(message("bvh-wide:leafcost=65").contains("0..=64"));
        assert!(message("bvh-spatial:saxes=2").contains("longest"));
        assert!(message("bvh-wide:from=octree").contains("unknown accel `octree`"));
        assert!(message("bvh-wide:from=kdtree").contains("not a binary BVH builder"));
        assert!(message("grid:k=-1").contains("not a number"));
        assert!(message("brute:x=1").contains("no parameter"));
    }
}
