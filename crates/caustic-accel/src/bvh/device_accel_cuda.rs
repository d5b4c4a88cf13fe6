//! The triangle structure a GPU renderer or benchmark traces, chosen by a
//! spec the way `--accel` chooses a CPU structure:
//!
//! - `lbvh`, `hlbvh`, `ploc`, `bvh-binned`, `bvh-binned-staged`,
//!   `bvh-sweep` (with their CPU parameters): a binary BVH built on the
//!   device ([`DeviceBvh::build_with`]: Karras 2012; Garanzha et al. 2011;
//!   Meister and Bittner 2018; the top-down SAH builders of Zeidan 2011,
//!   §4.5 and §4.6), traced by the binary kernel;
//! - `bvh-wide[:from=SPEC]`: that binary tree collapsed on the
//!   device to the compressed 8-wide layout of Ylitie, Karras and Laine
//!   2017 ([`CompressedWideBvh`]), traced by the wide kernel;
//! - `cpu:SPEC`: any binary builder of the CPU (`cpu:bvh-binned`), the tree
//!   uploaded, for comparisons with the device builders;
//! - `kdtree[:small=..:empty=..:ct=..]`: the SAH kd-tree built on the device
//!   ([`GpuKdTree`]: the large-node stage of Zhou et al. 2008 with
//!   empty-space cut-off, spatial medians and clipping, then exact SAH over
//!   bit masks for the small nodes), traced front to back with a stack
//!   ([`KdTracer`]) under the CPU kd-tree's culling rules;
//! - `grid[:k=..:exact=..:macro=..]`: the uniform grid built on the device
//!   ([`GpuGrid`]: Ivson et al.'s count, scan, write, sort and cell-range
//!   passes), traced by the 3D-DDA of Amanatides and Woo 1987
//!   ([`GridTracer`]) with the CPU grid's culling rules;
//! - `dacrt[:split=median|rdh][:sched=concurrent|waves][:sort=C][:rays=N][:tris=N][:near=N]`,
//!   `dacrt-rdh`:
//!   no structure at all: divide-and-conquer ray tracing on the task pool
//!   ([`DacrtTracer`]: Vinkler et al. 2013, §5) traces each batch from the
//!   triangles alone, so its "build" is the upload and takes no time, and
//!   a trace includes everything.
//!
//! Every structure gives the same hits (the watertight test and the tie
//! rule are the CPU's), so a renderer never knows which it traces: it asks
//! [`DeviceAccel::tracer`] for an [`AccelTracer`] and calls `intersect` and
//! `occluded`. The scene's triangles go to the device once, in scene order;
//! the renderers read them from [`DeviceAccel::scene_triangles`].

use std::fmt;
use std::str::FromStr;
use std::time::Instant;

use caustic_geom::Triangle;
use caustic_gpu::taskpool::PoolStats;
use caustic_gpu::{DeviceBuffer, Gpu, GpuError, PinnedBuffer, upload_ranges};

use super::build::upload_triangles;
use super::refit_cuda::DeviceRefit;
use super::traverse_cuda::{GpuHit, GpuRay, Tracer};
use super::triangle_bvh_cuda::{DeviceBvh, GpuTriangle};
use super::wide::compressed_cuda::CompressedWideBvh;
use super::wide::traverse_compressed_cuda::CompressedTracer;
use crate::dacrt::{DacrtConfig, DacrtScheme, DacrtTracer};
use crate::grid::GridConfig;
use crate::grid::build_cuda::GpuGrid;
use crate::grid::dda_cuda::GridTracer;
use crate::kdtree::KdTreeConfig;
use crate::kdtree::build_cuda::GpuKdTree;
use crate::kdtree::traverse_cuda::KdTracer;
use crate::registry::{
    AccelSpecError, DeviceBuilderConfig, build_triangle_bvh, grid_config_of, kdtree_config_of,
};

// Kept in the registry, which every build has, so that a CPU-only build
// can name them in its help and errors.
pub use crate::registry::{DEFAULT_GPU_SPEC, GPU_STRUCTURES};

/// A GPU structure and its parameters; parse one from a spec string.
#[derive(Clone, Debug, PartialEq)]
pub enum GpuAccelSpec {
    /// A binary BVH built on the device.
    Device(DeviceBuilderConfig),
    /// A CPU binary builder's tree (the spec after `cpu:`), uploaded.
    Uploaded(String),
    /// A binary tree (a device build or an upload) collapsed to the
    /// compressed 8-wide layout on the device.
    Wide(Box<GpuAccelSpec>),
    /// The SAH kd-tree, built on the device.
    KdTree(KdTreeConfig),
    /// The uniform grid, built on the device.
    Grid(GridConfig),
    /// No structure: DACRT traces each batch from the triangles.
    Dacrt(DacrtConfig),
}

impl Default for GpuAccelSpec {
    fn default() -> Self {
        DEFAULT_GPU_SPEC
            .parse()
            .expect("the default GPU spec parses")
    }
}

impl FromStr for GpuAccelSpec {
    type Err = AccelSpecError;

    fn from_str(spec: &str) -> Result<Self, AccelSpecError> {
        let spec = spec.trim();
        if let Some(cpu) = spec.strip_prefix("cpu:") {
            // Checks the spec and that it names a binary builder, without
            // building over real triangles.
            build_triangle_bvh(cpu, &[])?;
            return Ok(Self::Uploaded(cpu.to_owned()));
        }
        if let Some(params) = wide_params(spec) {
            return parse_wide(params);
        }
        if spec.starts_with("dacrt") {
            return dacrt_config_of(spec).map(Self::Dacrt);
        }
        if spec == "grid" || spec.starts_with("grid:") {
            return grid_config_of(spec).map(Self::Grid);
        }
        if spec == "kdtree" || spec.starts_with("kdtree:") {
            return kdtree_config_of(spec).map(Self::KdTree);
        }
        DeviceBuilderConfig::parse(spec).map(Self::Device)
    }
}

/// The GPU's reading of a `dacrt` spec: the CPU's parameters, the
/// seven-child scheme only.
fn dacrt_config_of(spec: &str) -> Result<DacrtConfig, AccelSpecError> {
    let bad = |message: String| AccelSpecError::BadValue {
        accel: "dacrt".into(),
        param: "spec".into(),
        message,
    };
    let config = DacrtConfig::parse(spec).map_err(bad)?;
    if config.scheme != DacrtScheme::Seven {
        return Err(bad(
            "the GPU runs the seven-child scheme; scheme=binary is the CPU's".into(),
        ));
    }
    Ok(config)
}

/// The parameters after `bvh-wide` (empty for a bare `bvh-wide`), or
/// `None` for another structure.
fn wide_params(spec: &str) -> Option<&str> {
    match spec.strip_prefix("bvh-wide")? {
        "" => Some(""),
        rest => rest.strip_prefix(':'),
    }
}

/// `width=8` (the only width of the compressed layout) and `from=SPEC`,
/// where SPEC is everything after `from=` (it has parameters of its own).
fn parse_wide(params: &str) -> Result<GpuAccelSpec, AccelSpecError> {
    let bad = |param: &str, message: &str| AccelSpecError::BadValue {
        accel: "bvh-wide".into(),
        param: param.into(),
        message: message.into(),
    };
    let mut rest = params;
    let mut from = DEFAULT_GPU_SPEC.to_owned();
    while !rest.is_empty() {
        if let Some(spec) = rest.strip_prefix("from=") {
            from = spec.to_owned();
            break;
        }
        let (param, tail) = rest.split_once(':').unwrap_or((rest, ""));
        match param {
            "width=8" => {}
            p if p.starts_with("width=") => {
                return Err(bad("width", "the GPU's compressed wide BVH is 8 wide"));
            }
            p => {
                return Err(AccelSpecError::UnknownParam {
                    accel: "bvh-wide".into(),
                    param: p.split('=').next().unwrap_or(p).into(),
                    valid: "width=8, from=lbvh|hlbvh|ploc|bvh-binned|bvh-binned-staged|bvh-sweep|cpu:SPEC (with their parameters)",
                });
            }
        }
        rest = tail;
    }
    let inner: GpuAccelSpec = from.parse()?;
    match inner {
        GpuAccelSpec::Wide(_) => {
            return Err(bad(
                "from",
                "a wide BVH collapses a binary tree, not another wide one",
            ));
        }
        GpuAccelSpec::Grid(_) | GpuAccelSpec::KdTree(_) | GpuAccelSpec::Dacrt(_) => {
            return Err(bad(
                "from",
                "a wide BVH collapses a binary tree, not a grid, a kd-tree or dacrt",
            ));
        }
        _ => {}
    }
    Ok(GpuAccelSpec::Wide(Box::new(inner)))
}

impl fmt::Display for GpuAccelSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Device(config) => write!(f, "{}", config.spec()),
            Self::Uploaded(spec) => write!(f, "cpu:{spec}"),
            Self::Wide(from) => write!(f, "bvh-wide:from={from}"),
            Self::KdTree(config) => write_kdtree_spec(f, config),
            Self::Grid(config) => write_grid_spec(f, config),
            Self::Dacrt(config) => f.write_str(&config.spec()),
        }
    }
}

/// `kdtree` and the parameters of `config` that differ from the default,
/// in the registry's syntax (so the text parses back to `config`).
fn write_kdtree_spec(f: &mut fmt::Formatter<'_>, config: &KdTreeConfig) -> fmt::Result {
    let default = KdTreeConfig::DEFAULT;
    write!(f, "kdtree")?;
    if config.small_node_max != default.small_node_max {
        write!(f, ":small={}", config.small_node_max)?;
    }
    if config.empty_space_ratio != default.empty_space_ratio {
        write!(f, ":empty={}", config.empty_space_ratio)?;
    }
    let ratio = config.traversal_cost / config.intersection_cost;
    if ratio != default.traversal_cost / default.intersection_cost {
        write!(f, ":ct={ratio}")?;
    }
    Ok(())
}

/// `grid` and the parameters of `config` that differ from the default,
/// in the registry's syntax (so the text parses back to `config`).
fn write_grid_spec(f: &mut fmt::Formatter<'_>, config: &GridConfig) -> fmt::Result {
    let default = GridConfig::DEFAULT;
    write!(f, "grid")?;
    if config.density != default.density {
        write!(f, ":k={}", config.density)?;
    }
    if config.exact_overlap != default.exact_overlap {
        write!(f, ":exact={}", u8::from(config.exact_overlap))?;
    }
    if config.macro_size != default.macro_size {
        write!(f, ":macro={}", config.macro_size)?;
    }
    Ok(())
}

/// What building a [`DeviceAccel`] did and cost.
#[derive(Clone, Debug, Default)]
pub struct GpuAccelStats {
    /// The spec, as [`GpuAccelSpec`]'s `Display` writes it.
    pub spec: String,
    pub prims: usize,
    /// `(stage, device ms)` in order; a CPU build is one stage timed on the host.
    pub stages: Vec<(&'static str, f32)>,
    /// The stages' sum: the build's time on its device.
    pub build_ms: f64,
    /// Wall time of the whole build, allocations and host reads included.
    pub wall_ms: f64,
    /// Host time this build spent compiling and loading kernels (first use
    /// in the process; the driver caches its JIT across processes). The
    /// device times above include it: the device idles while a launch
    /// waits for its module.
    pub loading_ms: f64,
    /// SAH cost of the binary tree (C_trav = C_isect = 1, over the root's
    /// area); NaN for the grid, which has no tree (its measures are
    /// `nodes`, its cells, and `references`).
    pub sah_cost: f32,
    /// Nodes of the traced structure (wide nodes for `bvh-wide`, cells for
    /// the grid).
    pub nodes: usize,
    /// Triangle references in the leaves (cell-triangle pairs for the grid).
    pub references: usize,
    /// Device bytes of the traced structure (nodes and leaf triangles).
    pub bytes: usize,
    /// Peak device memory the build allocated beyond what was in use
    /// before it, where the driver's memory pool reports it.
    pub peak_device_bytes: Option<usize>,
    /// The task pool's own figures, for builders that run on it
    /// (`bvh-taskpool`): warps, tasks, and where the warps' cycles went.
    pub pool: Option<PoolStats>,
}

/// A triangle structure on the device, ready to trace; see the module docs.
///
/// It follows a moving scene in place: [`DeviceAccel::move_triangles`]
/// writes the triangles that moved into the device's scene-order copy, then
/// [`DeviceAccel::rebuild`] builds the structure afresh from that copy (no
/// other upload) or [`DeviceAccel::refit`] refits a BVH's boxes
/// (`refit_cuda.rs`).
pub struct DeviceAccel {
    spec: GpuAccelSpec,
    structure: Structure,
    stats: GpuAccelStats,
    /// The scene-order triangles a kd-tree or grid (which own theirs) is
    /// rebuilt from after [`DeviceAccel::move_triangles`].
    staged: Option<DeviceBuffer<GpuTriangle>>,
    /// Page-locked host memory the moved triangles travel through.
    upload: Option<PinnedBuffer<GpuTriangle>>,
}

/// Writes `make(i)` for every `i` of `ranges`, in order, into `packed`
/// (as long as the ranges together), on all cores: how a moving scene's
/// moved elements are packed for [`caustic_gpu::upload_ranges`].
pub fn fill_ranges<T: Send>(
    packed: &mut [T],
    ranges: &[std::ops::Range<usize>],
    make: impl Fn(usize) -> T + Sync,
) {
    use rayon::prelude::*;
    let mut parts = Vec::with_capacity(ranges.len());
    let mut rest = packed;
    for range in ranges {
        let (part, tail) = rest.split_at_mut(range.len());
        parts.push((range.start, part));
        rest = tail;
    }
    parts.into_par_iter().for_each(|(start, part)| {
        part.par_iter_mut()
            .with_min_len(1024)
            .enumerate()
            .for_each(|(k, out)| *out = make(start + k));
    });
}

/// What [`DeviceAccel::refit`] did and cost.
#[derive(Clone, Copy, Debug)]
pub struct GpuRefitStats {
    /// Wall time of the refit (gather, bottom-up pass, SAH sum and, for
    /// `bvh-wide`, the collapse to the wide layout), device work included.
    pub ms: f64,
    /// SAH cost of the refitted binary tree ([`crate::sah_cost`]).
    pub sah_cost: f32,
}

/// What a [`DeviceAccel`] holds, by kind of structure. One lives per
/// structure and is never copied around, so its size does not matter.
#[allow(clippy::large_enum_variant)]
enum Structure {
    Bvh {
        /// Scene-order triangles, `prim` = scene id: what shading reads.
        scene_triangles: DeviceBuffer<GpuTriangle>,
        binary: DeviceBvh,
        wide: Option<CompressedWideBvh>,
        /// The parent links of `binary`, made at its first refit.
        refit: Option<DeviceRefit>,
    },
    /// The kd-tree keeps the scene-order triangles itself.
    KdTree(GpuKdTree),
    /// The grid keeps the scene-order triangles itself.
    Grid(GpuGrid),
    /// DACRT keeps only the triangles.
    Dacrt {
        scene_triangles: DeviceBuffer<GpuTriangle>,
        config: DacrtConfig,
    },
}

impl DeviceAccel {
    /// Uploads `triangles` (scene order) and builds the structure `spec`
    /// names over them on `gpu`.
    pub fn build(gpu: &Gpu, triangles: &[Triangle], spec: &GpuAccelSpec) -> Result<Self, GpuError> {
        let wall = Instant::now();
        let loading_before = gpu.loading_ms();
        let scene_triangles = upload_triangles(gpu, triangles)?;
        let (structure, mut stats) = match spec {
            GpuAccelSpec::Grid(config) => build_grid(scene_triangles, config)?,
            GpuAccelSpec::KdTree(config) => build_kdtree(scene_triangles, config)?,
            GpuAccelSpec::Dacrt(config) => dacrt_triangles(scene_triangles, *config),
            _ => build_bvh(gpu, triangles, scene_triangles, spec)?,
        };
        stats.spec = spec.to_string();
        stats.wall_ms = wall.elapsed().as_secs_f64() * 1e3;
        stats.loading_ms = gpu.loading_ms() - loading_before;
        Ok(Self {
            spec: spec.clone(),
            structure,
            stats,
            staged: None,
            upload: None,
        })
    }

    /// The spec the structure was built from.
    pub fn spec(&self) -> &GpuAccelSpec {
        &self.spec
    }

    /// Writes `triangles[r]` for each range `r` of `moved` (scene order;
    /// `triangles` is the whole posed scene, the same count as the build's)
    /// into the device's scene-order triangles in place, leaving the others
    /// where they are; returns the bytes uploaded. The structure is stale
    /// until [`DeviceAccel::rebuild`] or [`DeviceAccel::refit`].
    pub fn move_triangles(
        &mut self,
        triangles: &[Triangle],
        moved: &[std::ops::Range<usize>],
    ) -> Result<usize, GpuError> {
        let expected = self.scene_triangles().len();
        if triangles.len() != expected {
            return Err(GpuError::LengthMismatch {
                operation: "DeviceAccel::move_triangles",
                what: "posed triangles",
                expected,
                actual: triangles.len(),
            });
        }
        if let Some(bad) = moved
            .iter()
            .find(|r| r.start > r.end || r.end > triangles.len())
        {
            return Err(GpuError::Invalid {
                what: "moved triangles",
                message: format!("range {bad:?} outside 0..{}", triangles.len()),
            });
        }
        let target = match &mut self.structure {
            Structure::Bvh {
                scene_triangles, ..
            }
            | Structure::Dacrt {
                scene_triangles, ..
            } => scene_triangles,
            // A kd-tree and a grid own their triangles (and trace them):
            // the moved ones go into a copy, which the rebuild takes.
            Structure::KdTree(_) | Structure::Grid(_) => {
                if self.staged.is_none() {
                    let own = match &self.structure {
                        Structure::KdTree(tree) => tree.triangles(),
                        Structure::Grid(grid) => grid.triangles(),
                        _ => unreachable!("matched above"),
                    };
                    let mut copy = DeviceBuffer::uninit(own.gpu(), "scene triangles", own.len())?;
                    copy.copy_from(own)?;
                    self.staged = Some(copy);
                }
                self.staged.as_mut().expect("staged above")
            }
        };
        upload_ranges(&mut self.upload, target, moved, |packed| {
            fill_ranges(packed, moved, |i| GpuTriangle::new(&triangles[i], i as u32));
        })
    }

    /// Builds the structure afresh, with its spec, over the device's
    /// scene-order triangles as [`DeviceAccel::move_triangles`] left them
    /// (`triangles`, the same posed scene on the host, serves only the
    /// `cpu:SPEC` builds, which build on the CPU).
    pub fn rebuild(&mut self, triangles: &[Triangle]) -> Result<(), GpuError> {
        let wall = Instant::now();
        let gpu = self.gpu().clone();
        let loading_before = gpu.loading_ms();
        let spec = self.spec.clone();
        let scene_triangles = match self.staged.take() {
            Some(staged) => staged,
            None => {
                // Take the scene-order triangles out of the old structure
                // (a BVH or DACRT's), which the new one replaces.
                let empty = DeviceBuffer::uninit(&gpu, "scene triangles", 0)?;
                match &mut self.structure {
                    Structure::Bvh {
                        scene_triangles, ..
                    }
                    | Structure::Dacrt {
                        scene_triangles, ..
                    } => std::mem::replace(scene_triangles, empty),
                    Structure::KdTree(tree) => {
                        let own = tree.triangles();
                        let mut copy = DeviceBuffer::uninit(&gpu, "scene triangles", own.len())?;
                        copy.copy_from(own)?;
                        copy
                    }
                    Structure::Grid(grid) => {
                        let own = grid.triangles();
                        let mut copy = DeviceBuffer::uninit(&gpu, "scene triangles", own.len())?;
                        copy.copy_from(own)?;
                        copy
                    }
                }
            }
        };
        let (structure, mut stats) = match &spec {
            GpuAccelSpec::Grid(config) => build_grid(scene_triangles, config)?,
            GpuAccelSpec::KdTree(config) => build_kdtree(scene_triangles, config)?,
            GpuAccelSpec::Dacrt(config) => dacrt_triangles(scene_triangles, *config),
            _ => build_bvh(&gpu, triangles, scene_triangles, &spec)?,
        };
        stats.spec = spec.to_string();
        stats.wall_ms = wall.elapsed().as_secs_f64() * 1e3;
        stats.loading_ms = gpu.loading_ms() - loading_before;
        self.structure = structure;
        self.stats = stats;
        Ok(())
    }

    /// Whether [`DeviceAccel::refit`] can follow this structure: a BVH,
    /// binary or collapsed to `bvh-wide` (a kd-tree, a grid and DACRT are
    /// rebuilt).
    pub fn refits(&self) -> bool {
        matches!(self.structure, Structure::Bvh { .. })
    }

    /// Refits the binary BVH to the device's scene-order triangles as
    /// [`DeviceAccel::move_triangles`] left them (`refit_cuda.rs`: the
    /// bottom-up pass of Karras 2012, §4), collapses it again for
    /// `bvh-wide`, and sums its SAH cost on the device; waits for the
    /// device. The build statistics stay the last build's.
    pub fn refit(&mut self) -> Result<GpuRefitStats, GpuError> {
        let start = Instant::now();
        let Structure::Bvh {
            scene_triangles,
            binary,
            wide,
            refit,
        } = &mut self.structure
        else {
            return Err(GpuError::Invalid {
                what: "refit",
                message: format!(
                    "{} is not a BVH: the GPU refits bvh-binned, lbvh, ploc, hlbvh, bvh-sweep, cpu:SPEC and bvh-wide, and rebuilds the others",
                    self.spec
                ),
            });
        };
        if refit.as_ref().is_none_or(|r| !r.fits(binary)) {
            *refit = Some(DeviceRefit::new(binary)?);
        }
        let links = refit.as_mut().expect("made above");
        let sah_cost = links.refit_with_sah(binary, scene_triangles)?;
        if wide.is_some() {
            *wide = Some(CompressedWideBvh::build(binary)?);
        }
        Ok(GpuRefitStats {
            ms: start.elapsed().as_secs_f64() * 1e3,
            sah_cost,
        })
    }

    /// Builds the structure again over the triangles it holds, as a
    /// scene whose triangles stay on the device and whose structure is
    /// rebuilt every frame does (the collision experiment): no upload.
    /// For the device-built BVHs (binary, or collapsed to wide) and DACRT
    /// (which builds nothing); a CPU-built tree, the kd-tree and the grid
    /// are built again by [`DeviceAccel::build`].
    pub fn rebuild_in_place(&mut self) -> Result<(), GpuError> {
        let spec: GpuAccelSpec = self.stats.spec.parse().map_err(|e| GpuError::Invalid {
            what: "accel spec",
            message: format!("{e}"),
        })?;
        let device_built = match &spec {
            GpuAccelSpec::Device(_) => true,
            GpuAccelSpec::Wide(from) => matches!(**from, GpuAccelSpec::Device(_)),
            GpuAccelSpec::Dacrt(_) => return Ok(()),
            _ => false,
        };
        let Structure::Bvh {
            scene_triangles, ..
        } = &self.structure
        else {
            return Err(GpuError::Invalid {
                what: "accel rebuild",
                message: format!("{spec} is rebuilt by DeviceAccel::build"),
            });
        };
        if !device_built {
            return Err(GpuError::Invalid {
                what: "accel rebuild",
                message: format!("{spec} is built on the CPU: rebuild it by DeviceAccel::build"),
            });
        }
        let gpu = scene_triangles.gpu().clone();
        let wall = Instant::now();
        let loading_before = gpu.loading_ms();
        let (binary, mut stats) = build_binary(&gpu, &[], scene_triangles, &spec)?;
        let wide = match spec {
            GpuAccelSpec::Wide(_) => Some(collapse_wide(&binary, &mut stats)?),
            _ => None,
        };
        if let Structure::Bvh {
            binary: old_binary,
            wide: old_wide,
            ..
        } = &mut self.structure
        {
            *old_binary = binary;
            *old_wide = wide;
        }
        stats.spec = spec.to_string();
        stats.wall_ms = wall.elapsed().as_secs_f64() * 1e3;
        stats.loading_ms = gpu.loading_ms() - loading_before;
        self.stats = stats;
        Ok(())
    }

    pub fn gpu(&self) -> &Gpu {
        match &self.structure {
            Structure::Bvh { binary, .. } => binary.gpu(),
            Structure::KdTree(tree) => tree.gpu(),
            Structure::Grid(grid) => grid.gpu(),
            Structure::Dacrt {
                scene_triangles, ..
            } => scene_triangles.gpu(),
        }
    }

    /// The scene's triangles in scene order, each with its scene id.
    pub fn scene_triangles(&self) -> &DeviceBuffer<GpuTriangle> {
        match &self.structure {
            Structure::Bvh {
                scene_triangles, ..
            } => scene_triangles,
            Structure::KdTree(tree) => tree.triangles(),
            Structure::Grid(grid) => grid.triangles(),
            Structure::Dacrt {
                scene_triangles, ..
            } => scene_triangles,
        }
    }

    /// The binary tree (the wide structure's source for `bvh-wide`);
    /// `None` for a kd-tree or a grid.
    pub fn binary(&self) -> Option<&DeviceBvh> {
        match &self.structure {
            Structure::Bvh { binary, .. } => Some(binary),
            _ => None,
        }
    }

    /// The compressed wide tree, for `bvh-wide`.
    pub fn wide(&self) -> Option<&CompressedWideBvh> {
        match &self.structure {
            Structure::Bvh { wide, .. } => wide.as_ref(),
            _ => None,
        }
    }

    /// The kd-tree, for `kdtree`.
    pub fn kdtree(&self) -> Option<&GpuKdTree> {
        match &self.structure {
            Structure::KdTree(tree) => Some(tree),
            _ => None,
        }
    }

    /// The grid, for `grid`.
    pub fn grid(&self) -> Option<&GpuGrid> {
        match &self.structure {
            Structure::Grid(grid) => Some(grid),
            _ => None,
        }
    }

    pub fn stats(&self) -> &GpuAccelStats {
        &self.stats
    }

    /// A tracer for this structure's kind (it may trace any structure of
    /// that kind on the same device).
    pub fn tracer(&self) -> Result<AccelTracer, GpuError> {
        let gpu = self.gpu();
        let kernels = match &self.structure {
            Structure::Bvh { wide: None, .. } => TracerKernels::Binary(Tracer::new(gpu)?),
            Structure::Bvh { wide: Some(_), .. } => {
                TracerKernels::Wide(CompressedTracer::new(gpu)?)
            }
            Structure::KdTree(_) => TracerKernels::KdTree(KdTracer::new(gpu)?),
            Structure::Grid(_) => TracerKernels::Grid(GridTracer::new(gpu)?),
            Structure::Dacrt { config, .. } => {
                TracerKernels::Dacrt(Box::new(DacrtTracer::new(gpu, *config)?))
            }
        };
        Ok(AccelTracer { kernels })
    }
}

/// A BVH (binary, or collapsed to wide) over the uploaded triangles.
fn build_bvh(
    gpu: &Gpu,
    triangles: &[Triangle],
    scene_triangles: DeviceBuffer<GpuTriangle>,
    spec: &GpuAccelSpec,
) -> Result<(Structure, GpuAccelStats), GpuError> {
    let (binary, mut stats) = build_binary(gpu, triangles, &scene_triangles, spec)?;
    let wide = match spec {
        GpuAccelSpec::Wide(_) => Some(collapse_wide(&binary, &mut stats)?),
        _ => None,
    };
    let structure = Structure::Bvh {
        scene_triangles,
        binary,
        wide,
        refit: None,
    };
    Ok((structure, stats))
}

/// `binary` collapsed to the compressed wide layout, its stages and
/// figures added to `stats`.
fn collapse_wide(
    binary: &DeviceBvh,
    stats: &mut GpuAccelStats,
) -> Result<CompressedWideBvh, GpuError> {
    let wide = CompressedWideBvh::build(binary)?;
    let w = wide.stats();
    stats.stages.push(("wide setup", w.setup_ms as f32));
    stats.stages.push(("wide collapse", w.collapse_ms as f32));
    stats.stages.push(("wide compact", w.compact_ms as f32));
    stats.build_ms += w.setup_ms + w.collapse_ms + w.compact_ms;
    stats.nodes = w.nodes;
    stats.bytes = w.bytes;
    Ok(wide)
}

/// The kd-tree over the uploaded triangles, which it keeps.
fn build_kdtree(
    scene_triangles: DeviceBuffer<GpuTriangle>,
    config: &KdTreeConfig,
) -> Result<(Structure, GpuAccelStats), GpuError> {
    let prims = scene_triangles.len();
    let tree = GpuKdTree::build_owned(scene_triangles, config)?;
    let k = *tree.stats();
    let stages = vec![
        ("bounds", k.bounds_ms as f32),
        ("large nodes", k.large_ms as f32),
        ("small nodes", k.small_ms as f32),
        ("culling", k.culling_ms as f32),
    ];
    let stats = GpuAccelStats {
        prims,
        stages,
        build_ms: k.stages_ms(),
        sah_cost: k.sah_cost,
        nodes: k.nodes,
        references: k.references,
        bytes: k.bytes,
        peak_device_bytes: Some(k.peak_bytes),
        ..GpuAccelStats::default()
    };
    Ok((Structure::KdTree(tree), stats))
}

/// DACRT over the uploaded triangles: nothing is built.
fn dacrt_triangles(
    scene_triangles: DeviceBuffer<GpuTriangle>,
    config: DacrtConfig,
) -> (Structure, GpuAccelStats) {
    let stats = GpuAccelStats {
        prims: scene_triangles.len(),
        references: scene_triangles.len(),
        sah_cost: f32::NAN,
        bytes: scene_triangles.bytes(),
        ..GpuAccelStats::default()
    };
    let structure = Structure::Dacrt {
        scene_triangles,
        config,
    };
    (structure, stats)
}

/// The grid over the uploaded triangles, which it keeps.
fn build_grid(
    scene_triangles: DeviceBuffer<GpuTriangle>,
    config: &GridConfig,
) -> Result<(Structure, GpuAccelStats), GpuError> {
    let prims = scene_triangles.len();
    let grid = GpuGrid::build(scene_triangles, config)?;
    let g = *grid.stats();
    let stages = vec![
        ("bounds", g.bounds_ms as f32),
        ("count", g.count_ms as f32),
        ("scan", g.scan_ms as f32),
        ("write", g.write_ms as f32),
        ("sort", g.sort_ms as f32),
        ("ranges", g.ranges_ms as f32),
        ("culling", g.culling_ms as f32),
    ];
    let stats = GpuAccelStats {
        prims,
        stages,
        build_ms: g.stages_ms(),
        sah_cost: f32::NAN,
        nodes: g.cells,
        references: g.references,
        bytes: g.bytes,
        peak_device_bytes: Some(g.peak_bytes),
        ..GpuAccelStats::default()
    };
    Ok((Structure::Grid(grid), stats))
}

/// The binary tree of `spec` (the wide spec's source) and its stats.
fn build_binary(
    gpu: &Gpu,
    triangles: &[Triangle],
    scene_triangles: &DeviceBuffer<GpuTriangle>,
    spec: &GpuAccelSpec,
) -> Result<(DeviceBvh, GpuAccelStats), GpuError> {
    match spec {
        GpuAccelSpec::Wide(from) => build_binary(gpu, triangles, scene_triangles, from),
        GpuAccelSpec::Grid(_) | GpuAccelSpec::KdTree(_) | GpuAccelSpec::Dacrt(_) => {
            Err(GpuError::Invalid {
                what: "accel spec",
                message: "a grid, a kd-tree or dacrt is not a binary BVH".into(),
            })
        }
        GpuAccelSpec::Device(config) => {
            let (bvh, s) = DeviceBvh::build_with(gpu, scene_triangles, config)?;
            let stats = GpuAccelStats {
                prims: s.prims,
                references: s.prims,
                stages: s.stages,
                build_ms: f64::from(s.build_ms),
                sah_cost: s.sah_cost,
                nodes: s.nodes,
                bytes: s.bytes,
                peak_device_bytes: s.peak_device_bytes,
                pool: s.pool,
                ..GpuAccelStats::default()
            };
            Ok((bvh, stats))
        }
        GpuAccelSpec::Uploaded(cpu) => {
            let start = Instant::now();
            let tree = build_triangle_bvh(cpu, triangles).map_err(|e| GpuError::Invalid {
                what: "accel spec",
                message: e.to_string(),
            })?;
            let cpu_ms = start.elapsed().as_secs_f64() * 1e3;
            let bvh = DeviceBvh::upload(gpu, &tree)?;
            let stats = GpuAccelStats {
                prims: triangles.len(),
                references: triangles.len(),
                stages: vec![("cpu build", cpu_ms as f32)],
                build_ms: cpu_ms,
                sah_cost: crate::Accel::stats(&tree).sah_cost,
                nodes: tree.bvh().nodes.len(),
                bytes: bvh.bytes(),
                peak_device_bytes: None,
                ..GpuAccelStats::default()
            };
            Ok((bvh, stats))
        }
    }
}

/// Traces ray buffers against a [`DeviceAccel`] with the kernel of its
/// kind; holds the persistent kernels' launch shapes and ray counters, so
/// calls allocate nothing.
pub struct AccelTracer {
    kernels: TracerKernels,
}

/// The kernels of one kind of structure.
enum TracerKernels {
    Binary(Tracer),
    Wide(CompressedTracer),
    KdTree(KdTracer),
    Grid(GridTracer),
    Dacrt(Box<DacrtTracer>),
}

/// The structure and the tracer of the same kind, or the error that says
/// the tracer was made for another kind.
enum Pair<'a> {
    Binary(&'a mut Tracer, &'a DeviceBvh),
    Wide(&'a mut CompressedTracer, &'a CompressedWideBvh),
    KdTree(&'a KdTracer, &'a GpuKdTree),
    Grid(&'a GridTracer, &'a GpuGrid),
    Dacrt(&'a mut DacrtTracer, &'a DeviceBuffer<GpuTriangle>),
}

impl AccelTracer {
    fn pair<'a>(&'a mut self, accel: &'a DeviceAccel) -> Result<Pair<'a>, GpuError> {
        match (&mut self.kernels, &accel.structure) {
            (
                TracerKernels::Binary(tracer),
                Structure::Bvh {
                    binary, wide: None, ..
                },
            ) => Ok(Pair::Binary(tracer, binary)),
            (
                TracerKernels::Wide(tracer),
                Structure::Bvh {
                    wide: Some(wide), ..
                },
            ) => Ok(Pair::Wide(tracer, wide)),
            (TracerKernels::KdTree(tracer), Structure::KdTree(tree)) => {
                Ok(Pair::KdTree(tracer, tree))
            }
            (TracerKernels::Grid(tracer), Structure::Grid(grid)) => Ok(Pair::Grid(tracer, grid)),
            (
                TracerKernels::Dacrt(tracer),
                Structure::Dacrt {
                    scene_triangles,
                    config,
                },
            ) if tracer.config() == config => Ok(Pair::Dacrt(tracer, scene_triangles)),
            _ => Err(GpuError::Invalid {
                what: "tracer",
                message: "this tracer was made for another kind of structure (ask the structure for its tracer)".into(),
            }),
        }
    }

    /// The closest hit of every ray into `hits` (same length), without waiting.
    pub fn intersect(
        &mut self,
        accel: &DeviceAccel,
        rays: &DeviceBuffer<GpuRay>,
        hits: &mut DeviceBuffer<GpuHit>,
    ) -> Result<(), GpuError> {
        match self.pair(accel)? {
            Pair::Binary(tracer, bvh) => tracer.intersect(bvh, rays, hits),
            Pair::Wide(tracer, wide) => tracer.intersect(wide, rays, hits),
            Pair::KdTree(tracer, tree) => tracer.intersect(tree, rays, hits),
            Pair::Grid(tracer, grid) => tracer.intersect(grid, rays, hits),
            Pair::Dacrt(tracer, triangles) => tracer.intersect(triangles, rays, hits).map(drop),
        }
    }

    /// Each group of `group_size` consecutive rays' nearest hit into
    /// `group_keys` ([`Tracer::intersect_group_nearest`]: the rays share
    /// their group's nearest hit as a cutoff while they run), without
    /// waiting. Returns false, having launched nothing, for a structure
    /// whose traversal has no grouped form (every one but the binary BVH):
    /// the caller then traces with [`Self::intersect`] and reduces.
    pub fn intersect_group_nearest(
        &mut self,
        accel: &DeviceAccel,
        rays: &DeviceBuffer<GpuRay>,
        group_size: usize,
        hits: &mut DeviceBuffer<GpuHit>,
        group_keys: &mut DeviceBuffer<u64>,
    ) -> Result<bool, GpuError> {
        match self.pair(accel)? {
            Pair::Binary(tracer, bvh) => tracer
                .intersect_group_nearest(bvh, rays, group_size, hits, group_keys)
                .map(|()| true),
            _ => Ok(false),
        }
    }

    /// [`Self::intersect`] for the rays of an image `width` pixels wide in
    /// pixel order, handed out in 8x4-pixel tiles (primary rays).
    pub fn intersect_image(
        &mut self,
        accel: &DeviceAccel,
        rays: &DeviceBuffer<GpuRay>,
        width: u32,
        hits: &mut DeviceBuffer<GpuHit>,
    ) -> Result<(), GpuError> {
        match self.pair(accel)? {
            Pair::Binary(tracer, bvh) => tracer.intersect_image(bvh, rays, width, hits),
            Pair::Wide(tracer, wide) => tracer.intersect_image(wide, rays, width, hits),
            Pair::KdTree(tracer, tree) => tracer.intersect_image(tree, rays, width, hits),
            Pair::Grid(tracer, grid) => tracer.intersect_image(grid, rays, width, hits),
            // DACRT sorts the rays itself: their order does not matter.
            Pair::Dacrt(tracer, triangles) => tracer.intersect(triangles, rays, hits).map(drop),
        }
    }

    /// 1 for every ray with a hit in `(tmin, tmax)`, else 0, without waiting.
    pub fn occluded(
        &mut self,
        accel: &DeviceAccel,
        rays: &DeviceBuffer<GpuRay>,
        occluded: &mut DeviceBuffer<u32>,
    ) -> Result<(), GpuError> {
        match self.pair(accel)? {
            Pair::Binary(tracer, bvh) => tracer.occluded(bvh, rays, occluded),
            Pair::Wide(tracer, wide) => tracer.occluded(wide, rays, occluded),
            Pair::KdTree(tracer, tree) => tracer.occluded(tree, rays, occluded),
            Pair::Grid(tracer, grid) => tracer.occluded(grid, rays, occluded),
            Pair::Dacrt(tracer, triangles) => tracer.occluded(triangles, rays, occluded).map(drop),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(spec: &str) -> Result<GpuAccelSpec, String> {
        spec.parse::<GpuAccelSpec>().map_err(|e| e.to_string())
    }

    #[test]
    fn specs_round_trip() {
        for (spec, written) in [
            ("ploc", "ploc"),
            ("lbvh:bits=63", "lbvh:bits=63"),
            ("hlbvh:k=12", "hlbvh:k=12"),
            ("bvh-wide", "bvh-wide:from=bvh-binned"),
            ("bvh-wide:from=lbvh:bits=63", "bvh-wide:from=lbvh:bits=63"),
            (
                "bvh-wide:width=8:from=cpu:bvh-binned",
                "bvh-wide:from=cpu:bvh-binned",
            ),
            ("cpu:bvh-binned:bins=16", "cpu:bvh-binned:bins=16"),
            ("bvh-binned", "bvh-binned"),
            ("bvh-binned:bins=16:leaf=4", "bvh-binned:bins=16:leaf=4"),
            (
                "bvh-binned:schedule=65536@64/4096@32/256@16/0@8",
                "bvh-binned-staged",
            ),
            (
                "bvh-binned-staged:schedule=4096@16/0@4:sweep=16",
                "bvh-binned:schedule=4096@16/0@4:sweep=16",
            ),
            ("bvh-sweep:leaf=2", "bvh-sweep:leaf=2"),
            ("grid", "grid"),
            ("grid:k=5:macro=4", "grid"),
            ("grid:k=2.5:exact=1:macro=2", "grid:k=2.5:exact=1:macro=2"),
            ("kdtree", "kdtree"),
            ("kdtree:small=16:ct=2", "kdtree:small=16:ct=2"),
            ("kdtree:empty=0.5", "kdtree:empty=0.5"),
            (
                "bvh-wide:from=bvh-binned-staged",
                "bvh-wide:from=bvh-binned-staged",
            ),
            ("dacrt", "dacrt"),
            ("dacrt-rdh", "dacrt:split=rdh"),
            ("dacrt:split=rdh:tris=8", "dacrt:split=rdh:tris=8"),
        ] {
            let parsed = parse(spec).unwrap();
            assert_eq!(parsed.to_string(), written, "{spec}");
            assert_eq!(parse(written).unwrap(), parsed, "{written}");
        }
        assert_eq!(GpuAccelSpec::default().to_string(), DEFAULT_GPU_SPEC);
    }

    #[test]
    fn structures_without_a_gpu_version_say_what_the_gpu_builds() {
        {
            let spec = "brute";
            let message = parse(spec).unwrap_err();
            assert!(message.contains("no GPU builder"), "{spec}: {message}");
            assert!(
                message.contains("bvh-wide") && message.contains("cpu:"),
                "{message}"
            );
            for name in GPU_STRUCTURES.iter().filter(|n| !n.starts_with("cpu:")) {
                assert!(message.contains(&name[..]), "{name}: {message}");
            }
        }
        assert!(parse("bvh-binned:bins=99").unwrap_err().contains("2..=64"));
        assert!(
            parse("cpu:grid")
                .unwrap_err()
                .contains("not a binary BVH builder")
        );
        assert!(parse("bvh-wide:width=4").unwrap_err().contains("8 wide"));
        assert!(
            parse("bvh-wide:from=grid")
                .unwrap_err()
                .contains("not a grid")
        );
        assert!(parse("grid:k=-1").unwrap_err().contains("grid"));
        assert!(
            parse("bvh-wide:from=kdtree")
                .unwrap_err()
                .contains("kd-tree")
        );
        assert!(parse("kdtree:small=99").unwrap_err().contains("small"));
        assert!(
            parse("grid:bins=8")
                .unwrap_err()
                .contains("no parameter `bins`")
        );
        assert!(
            parse("bvh-wide:from=bvh-wide")
                .unwrap_err()
                .contains("not another wide")
        );
        assert!(
            parse("bvh-wide:depth=3")
                .unwrap_err()
                .contains("no parameter `depth`")
        );
        assert!(parse("octree").unwrap_err().contains("unknown accel"));
        assert!(
            parse("dacrt:scheme=binary")
                .unwrap_err()
                .contains("seven-child")
        );
        assert!(
            parse("dacrt:split=sah")
                .unwrap_err()
                .contains("median or rdh")
        );
        assert!(parse("bvh-wide:from=dacrt").unwrap_err().contains("dacrt"));
    }
}
