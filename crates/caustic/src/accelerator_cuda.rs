//! The GPU half of [`crate::Accelerator`]: the structure built on the
//! device by the GPU builder of the same name where there is one (`lbvh`,
//! `hlbvh`, `ploc`, `bvh-binned`, `bvh-binned-staged`; `bvh-wide` collapses
//! that binary tree to the compressed 8-wide layout of Ylitie, Karras and
//! Laine 2017; `kdtree` and `grid` are built and traced on the device too),
//! the CPU builder's tree uploaded otherwise (`bvh-sweep`,
//! whose device twin bins the nodes above 64 triangles and so does not
//! give the CPU's full-sweep tree), traced by the kernels of
//! `caustic_accel::bvh::device_accel_cuda`, whose hits equal the CPU
//! traversal's bit for bit.

use crate::accel::{AccelKind, AccelStats, BinaryBvh};
use crate::error::Result;
use caustic_accel::bvh::device_accel_cuda::{AccelTracer, DeviceAccel, GpuAccelSpec};
use caustic_accel::bvh::traverse_cuda::{GpuHit, GpuRay};
use caustic_geom::{Hit, Ray, Triangle};
use caustic_gpu::{DeviceBuffer, Gpu};
use std::sync::Mutex;

/// The GPU structure that stands for `kind`: its device build, or its
/// CPU-built tree uploaded; `None` for brute force.
/// A typed parameter out of its range is the registry's error (the same
/// the CPU build would give), not a panic.
pub(crate) fn gpu_spec(kind: &AccelKind) -> Result<Option<GpuAccelSpec>> {
    let binary = |tree: BinaryBvh| -> Result<GpuAccelSpec> {
        let spec = tree.to_string();
        Ok(match tree {
            BinaryBvh::Lbvh(_)
            | BinaryBvh::Hlbvh(_)
            | BinaryBvh::Ploc(_)
            | BinaryBvh::BvhBinned(_)
            | BinaryBvh::BvhBinnedStaged(_)
            | BinaryBvh::BvhTaskPool(_) => spec.parse()?,
            _ => GpuAccelSpec::Uploaded(spec),
        })
    };
    Ok(Some(match *kind {
        AccelKind::BvhWide(p) => GpuAccelSpec::Wide(Box::new(binary(p.from)?)),
        AccelKind::Grid(_) | AccelKind::KdTree(_) => kind.to_string().parse()?,
        _ => match kind.gpu_tree() {
            Some(tree) => binary(tree)?,
            None => return Ok(None),
        },
    }))
}

/// A structure resident on the device with its tracer.
pub(crate) struct GpuAccel {
    accel: DeviceAccel,
    /// The tracer keeps the launch shape and a ray counter between calls;
    /// the lock lets queries take `&self` like the CPU's.
    tracer: Mutex<AccelTracer>,
    stats: AccelStats,
}

impl GpuAccel {
    /// Builds the structure `spec` names over `triangles` on `gpu`.
    pub(crate) fn build(gpu: &Gpu, triangles: &[Triangle], spec: &GpuAccelSpec) -> Result<Self> {
        let accel = DeviceAccel::build(gpu, triangles, spec)?;
        let s = accel.stats();
        let stats = AccelStats {
            name: gpu_name(spec),
            build_ms: s.wall_ms,
            sah_cost: s.sah_cost,
            nodes: s.nodes,
            bytes: s.bytes,
            prims: s.prims,
            peak_build_bytes: s.peak_device_bytes.unwrap_or(0),
            ..AccelStats::default()
        };
        Ok(Self {
            tracer: Mutex::new(accel.tracer()?),
            accel,
            stats,
        })
    }

    pub(crate) fn intersect(&self, rays: &[Ray]) -> Result<Vec<Option<Hit>>> {
        if rays.is_empty() {
            return Ok(Vec::new());
        }
        let (gpu, rays) = self.upload(rays)?;
        let mut hits = DeviceBuffer::<GpuHit>::zeroed(&gpu, "query hits", rays.len())?;
        self.tracer().intersect(&self.accel, &rays, &mut hits)?;
        Ok(hits.download()?.iter().map(GpuHit::to_hit).collect())
    }

    pub(crate) fn occluded(&self, rays: &[Ray]) -> Result<Vec<bool>> {
        if rays.is_empty() {
            return Ok(Vec::new());
        }
        let (gpu, rays) = self.upload(rays)?;
        let mut flags = DeviceBuffer::<u32>::zeroed(&gpu, "query occlusion", rays.len())?;
        self.tracer().occluded(&self.accel, &rays, &mut flags)?;
        Ok(flags.download()?.iter().map(|&f| f != 0).collect())
    }

    pub(crate) fn stats(&self) -> &AccelStats {
        &self.stats
    }

    fn upload(&self, rays: &[Ray]) -> Result<(Gpu, DeviceBuffer<GpuRay>)> {
        let gpu = self.accel.gpu().clone();
        let rays: Vec<GpuRay> = rays.iter().map(GpuRay::from).collect();
        let buffer = DeviceBuffer::from_slice(&gpu, "query rays", &rays)?;
        Ok((gpu, buffer))
    }

    /// The tracer; a panic elsewhere while it was held leaves nothing
    /// half-done in it (each call resets its counter), so a poisoned lock
    /// is taken as is.
    fn tracer(&self) -> std::sync::MutexGuard<'_, AccelTracer> {
        self.tracer.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The registry name of the structure a spec builds.
fn gpu_name(spec: &GpuAccelSpec) -> &'static str {
    match spec {
        GpuAccelSpec::Device(config) => config.name(),
        GpuAccelSpec::Uploaded(_) => "cpu-built BVH",
        GpuAccelSpec::Wide(_) => "bvh-wide",
        GpuAccelSpec::KdTree(_) => "kdtree",
        GpuAccelSpec::Grid(_) => "grid",
        GpuAccelSpec::Dacrt(_) => "dacrt",
    }
}
