//! Building a [`DeviceBvh`] on the GPU, from triangles already on the
//! device, with the builder a registry spec names ([`DeviceBuilderConfig`]):
//! the Morton-code family, `lbvh` (Karras 2012), `ploc` (Meister & Bittner
//! 2018) and `hlbvh` (Pantaleoni & Luebke 2010, Garanzha et al. 2011)
//! (`lbvh:bits=63`, `ploc:r=32`, `hlbvh:k=12`; [`MortonBuilderConfig`]),
//! or the top-down SAH family, `bvh-binned`, `bvh-binned-staged` and
//! `bvh-sweep` (Zeidan 2011, §4.5 and §4.6; `bvh-binned:schedule=...`;
//! [`SahBuilderConfig`](crate::registry::SahBuilderConfig), built by `binned_sah_cuda.rs`).
//!
//! Every Morton build runs the same pipeline: the Morton order
//! ([`DeviceMortonOrder`]), the builder's bottom-up tree
//! ([`DeviceLinkedTree`]), and its layout with SAH leaf collapsing and the
//! depth bound ([`to_device_bvh`]), which also gathers the triangles into
//! leaf-slot order with their scene ids: the result is ready for
//! [`Tracer`](crate::bvh::traverse_cuda::Tracer). `lbvh` and `ploc` give
//! the CPU builders' trees node for node; `hlbvh` differs from its CPU
//! twin below the clusters (see `hlbvh/cuda.rs`).
//!
//! [`DeviceBuildStats`] reports device time per stage (events on the
//! stream, host waits included, since they hold the build up), the SAH
//! cost, the node count, the bytes of the result and the peak of device
//! memory in use during the build beyond what was in use before it. Running
//! out of device memory is [`GpuError::OutOfMemory`] naming the buffer.

use super::binned_sah_cuda::build_sah;
use super::hlbvh::cuda::hlbvh_tree;
use super::lbvh_cuda::{karras_build, radix_tree};
use super::linked_tree_cuda::{LayoutShape, device_sah_cost, to_device_bvh};
use super::morton_cuda::DeviceMortonOrder;
use super::ploc_cuda::clustering;
use super::taskpool_cuda::build_taskpool;
use crate::bvh::triangle_bvh_cuda::{DeviceBvh, GpuTriangle};
use crate::registry::{AccelSpecError, DeviceBuilderConfig, MortonBuilderConfig};
use caustic_geom::Triangle;
use caustic_gpu::{DeviceBuffer, Gpu, GpuError, StageClock};
use std::time::Instant;

/// What a device build reports.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeviceBuildStats {
    /// Registry name of the builder.
    pub name: &'static str,
    /// Triangles built over.
    pub prims: usize,
    /// Device milliseconds per stage, in order: "morton codes", "sort",
    /// "gather" (not in the one-launch `lbvh:leaf=1`, whose "hierarchy"
    /// gathers the triangles too), then the builder's own ("hierarchy" for lbvh,
    /// "clustering" for ploc, "clusters", "top", "group trees", "top
    /// nodes" for hlbvh), then "layout" and "triangles"; the SAH family's
    /// are listed at `binned_sah_cuda::build_sah`.
    pub stages: Vec<(&'static str, f32)>,
    /// Device milliseconds of the whole build (the stages' sum).
    pub build_ms: f32,
    /// Host wall-clock milliseconds of the call, waits included.
    pub wall_ms: f64,
    /// [`crate::sah_cost`] of the tree, summed on the device.
    pub sah_cost: f32,
    pub nodes: usize,
    pub leaves: usize,
    /// Levels below the root after collapsing, before the depth bound (the
    /// deepest leaf's depth for the SAH family).
    pub height: usize,
    /// Device bytes of the result (nodes, triangles, slot maps).
    pub bytes: usize,
    /// Peak device memory the build held beyond what was in use when it
    /// started (its output included); `None` where the device has no
    /// stream-ordered memory pool to ask.
    pub peak_device_bytes: Option<usize>,
    /// Clustering iterations (`ploc`, and `hlbvh`'s cluster subtrees); the
    /// breadth-first levels of the SAH family's level stage.
    pub iterations: usize,
    /// Morton-prefix clusters and the top's groups of them (`hlbvh`).
    pub clusters: usize,
    pub groups: usize,
    /// Subtrees of at most `sweep_max_prims` triangles that the SAH
    /// family's small-node stage built (one warp each).
    pub small_roots: usize,
    /// The task pool's figures (`bvh-taskpool`): warps, tasks, chunks and
    /// the warps' cycles on work, in the pool and idle (the paper's
    /// Table 2 analogue).
    pub pool: Option<caustic_gpu::taskpool::PoolStats>,
}

impl DeviceBuildStats {
    /// Milliseconds of the stage `name` (0 when it did not run).
    pub fn stage_ms(&self, name: &str) -> f32 {
        self.stages
            .iter()
            .filter(|(stage, _)| *stage == name)
            .map(|(_, ms)| ms)
            .sum()
    }
}

/// Why a device build by spec failed.
#[derive(Debug)]
pub enum DeviceBuildError {
    /// The spec names no GPU builder or has bad parameters.
    Spec(AccelSpecError),
    /// The device failed (out of memory, say).
    Gpu(GpuError),
}

impl std::fmt::Display for DeviceBuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Spec(e) => e.fmt(f),
            Self::Gpu(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for DeviceBuildError {}

impl From<AccelSpecError> for DeviceBuildError {
    fn from(e: AccelSpecError) -> Self {
        Self::Spec(e)
    }
}

impl From<GpuError> for DeviceBuildError {
    fn from(e: GpuError) -> Self {
        Self::Gpu(e)
    }
}

impl DeviceBvh {
    /// Builds the structure `spec` names over `triangles` (scene order,
    /// on the device; their `prim` fields are ignored).
    pub fn build(
        gpu: &Gpu,
        triangles: &DeviceBuffer<GpuTriangle>,
        spec: &str,
    ) -> Result<(Self, DeviceBuildStats), DeviceBuildError> {
        let config = DeviceBuilderConfig::parse(spec)?;
        Ok(Self::build_with(gpu, triangles, config)?)
    }

    /// [`DeviceBvh::build`] from host triangles, uploaded first (not timed).
    pub fn build_from_host(
        gpu: &Gpu,
        triangles: &[Triangle],
        spec: &str,
    ) -> Result<(Self, DeviceBuildStats), DeviceBuildError> {
        let config = DeviceBuilderConfig::parse(spec)?;
        let device = upload_triangles(gpu, triangles)?;
        Ok(Self::build_with(gpu, &device, config)?)
    }

    /// Builds with a parsed configuration of either family
    /// ([`MortonBuilderConfig`], [`SahBuilderConfig`](crate::registry::SahBuilderConfig) or
    /// [`DeviceBuilderConfig`], by value or by reference).
    pub fn build_with(
        gpu: &Gpu,
        triangles: &DeviceBuffer<GpuTriangle>,
        config: impl Into<DeviceBuilderConfig>,
    ) -> Result<(Self, DeviceBuildStats), GpuError> {
        match config.into() {
            DeviceBuilderConfig::Morton(config) => Self::build_morton(gpu, triangles, &config),
            // The top-down SAH family runs the binned builder of
            // `binned_sah_cuda.rs` on the configuration's binned form.
            DeviceBuilderConfig::Sah(config) => {
                build_sah(gpu, triangles, config.name(), &config.binned())
            }
            DeviceBuilderConfig::TaskPool(config) => build_taskpool(gpu, triangles, &config),
        }
    }

    fn build_morton(
        gpu: &Gpu,
        triangles: &DeviceBuffer<GpuTriangle>,
        config: &MortonBuilderConfig,
    ) -> Result<(Self, DeviceBuildStats), GpuError> {
        let wall = Instant::now();
        let in_use = gpu.memory_in_use()?;
        gpu.reset_peak_memory()?;
        let mut clock = gpu.stage_clock()?;
        let (bits, centroids) = match config {
            MortonBuilderConfig::Lbvh(c) => (c.morton_bits, false),
            MortonBuilderConfig::Ploc(c) => (c.morton_bits, false),
            MortonBuilderConfig::Hlbvh(c) => (c.morton_bits, true),
        };
        let mut order = DeviceMortonOrder::sorted(gpu, triangles, bits, &mut clock)?;
        let mut stats = DeviceBuildStats {
            name: config.name(),
            prims: triangles.len(),
            ..DeviceBuildStats::default()
        };
        // One primitive per leaf over placeable primitives: Karras's tree
        // in Karras's numbering, in one bottom-up launch that reads the
        // triangles in Morton order itself (no gather).
        if let MortonBuilderConfig::Lbvh(c) = config
            && let Some((bvh, shape)) = karras_build(gpu, &mut order, c, triangles, &mut clock)?
        {
            return Self::finish_morton(gpu, bvh, shape, stats, clock, wall, in_use);
        }
        order.gather(triangles, centroids, &mut clock)?;
        let tree = match config {
            MortonBuilderConfig::Lbvh(c) => {
                let tree = radix_tree(gpu, &order, c)?;
                clock.mark("hierarchy")?;
                tree
            }
            MortonBuilderConfig::Ploc(c) => {
                let (tree, iterations) = clustering(gpu, &order, c)?;
                clock.mark("clustering")?;
                stats.iterations = iterations;
                tree
            }
            MortonBuilderConfig::Hlbvh(c) => {
                let (tree, shape) = hlbvh_tree(gpu, &mut order, c, &mut clock)?;
                stats.iterations = shape.iterations;
                stats.clusters = shape.clusters;
                stats.groups = shape.groups;
                tree
            }
        };
        let (bvh, shape) = to_device_bvh(gpu, &tree, &order, triangles, &mut clock)?;
        drop(tree);
        drop(order);
        Self::finish_morton(gpu, bvh, shape, stats, clock, wall, in_use)
    }

    /// The stats of a finished Morton build.
    fn finish_morton(
        gpu: &Gpu,
        bvh: Self,
        shape: LayoutShape,
        mut stats: DeviceBuildStats,
        clock: StageClock,
        wall: Instant,
        in_use: Option<(usize, usize)>,
    ) -> Result<(Self, DeviceBuildStats), GpuError> {
        stats.stages = clock.finish()?;
        stats.wall_ms = wall.elapsed().as_secs_f64() * 1e3;
        stats.build_ms = stats.stages.iter().map(|(_, ms)| ms).sum();
        stats.peak_device_bytes = match (in_use, gpu.memory_in_use()?) {
            (Some((before, _)), Some((_, peak))) => Some(peak.saturating_sub(before)),
            _ => None,
        };
        stats.sah_cost = device_sah_cost(gpu, bvh.nodes())?;
        stats.nodes = shape.nodes;
        stats.leaves = shape.leaves;
        stats.height = shape.height;
        stats.bytes = bvh.bytes();
        Ok((bvh, stats))
    }
}

/// Triangles in scene order as the device builders take them.
pub fn upload_triangles(
    gpu: &Gpu,
    triangles: &[Triangle],
) -> Result<DeviceBuffer<GpuTriangle>, GpuError> {
    let words: Vec<GpuTriangle> = triangles
        .iter()
        .enumerate()
        .map(|(i, t)| GpuTriangle::new(t, i as u32))
        .collect();
    DeviceBuffer::from_slice(gpu, "scene triangles", &words)
}
