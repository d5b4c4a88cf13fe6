//! The GPU half of [`crate::Accelerator`]: a binary BVH on the device,
//! traced by the persistent while-while kernels of Aila and Laine
//! ("Understanding the Efficiency of Ray Traversal on GPUs", HPG 2009),
//! whose hits equal the CPU traversal's bit for bit.
//!
//! [`GpuAccel::build`] is the one place a GPU structure is made. Today it
//! builds the tree on the CPU through the registry and uploads it; GPU
//! builders plug in here.

use crate::accel::{AccelStats, BinaryBvh};
use crate::error::Result;
use caustic_accel::Accel;
use caustic_accel::bvh::traverse_cuda::{GpuHit, GpuRay, Tracer};
use caustic_accel::bvh::triangle_bvh_cuda::DeviceBvh;
use caustic_geom::{Hit, Ray, Triangle};
use caustic_gpu::{DeviceBuffer, Gpu};
use std::sync::Mutex;

/// A BVH resident on the device with its tracer.
pub(crate) struct GpuAccel {
    bvh: DeviceBvh,
    /// The tracer keeps the launch shape and a ray counter between calls;
    /// the lock lets queries take `&self` like the CPU's.
    tracer: Mutex<Tracer>,
    stats: AccelStats,
}

impl GpuAccel {
    /// Builds `tree` over `triangles` and uploads it to `gpu`.
    pub(crate) fn build(gpu: &Gpu, triangles: &[Triangle], tree: BinaryBvh) -> Result<Self> {
        let bvh = caustic_accel::registry::build_triangle_bvh(&tree.to_string(), triangles)?;
        Ok(Self {
            bvh: DeviceBvh::upload(gpu, &bvh)?,
            tracer: Mutex::new(Tracer::new(gpu)?),
            stats: bvh.stats().clone(),
        })
    }

    pub(crate) fn intersect(&self, rays: &[Ray]) -> Result<Vec<Option<Hit>>> {
        if rays.is_empty() {
            return Ok(Vec::new());
        }
        let (gpu, rays) = self.upload(rays)?;
        let mut hits = DeviceBuffer::<GpuHit>::zeroed(&gpu, "query hits", rays.len())?;
        self.tracer().intersect(&self.bvh, &rays, &mut hits)?;
        Ok(hits.download()?.iter().map(GpuHit::to_hit).collect())
    }

    pub(crate) fn occluded(&self, rays: &[Ray]) -> Result<Vec<bool>> {
        if rays.is_empty() {
            return Ok(Vec::new());
        }
        let (gpu, rays) = self.upload(rays)?;
        let mut flags = DeviceBuffer::<u32>::zeroed(&gpu, "query occlusion", rays.len())?;
        self.tracer().occluded(&self.bvh, &rays, &mut flags)?;
        Ok(flags.download()?.iter().map(|&f| f != 0).collect())
    }

    pub(crate) fn stats(&self) -> &AccelStats {
        &self.stats
    }

    fn upload(&self, rays: &[Ray]) -> Result<(Gpu, DeviceBuffer<GpuRay>)> {
        let gpu = self.bvh.gpu().clone();
        let rays: Vec<GpuRay> = rays.iter().map(GpuRay::from).collect();
        let buffer = DeviceBuffer::from_slice(&gpu, "query rays", &rays)?;
        Ok((gpu, buffer))
    }

    /// The tracer; a panic elsewhere while it was held leaves nothing
    /// half-done in it (each call resets its counter), so a poisoned lock
    /// is taken as is.
    fn tracer(&self) -> std::sync::MutexGuard<'_, Tracer> {
        self.tracer.lock().unwrap_or_else(|e| e.into_inner())
    }
}
