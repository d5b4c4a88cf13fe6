//! `caustic bench dacrt --device cuda`: the crossover of Vinkler et al.
//! 2013 §6.2 on the GPU. DACRT runs on the task pool
//! (`caustic_accel::dacrt::DacrtTracer`, everything in its trace time);
//! the BVH is the device build of `--accel` (device time of its stages)
//! and its traversal. Both sides' times are device events around the call,
//! median of the repeats after one warm-up; each DACRT batch's answers
//! must equal the BVH's. Compiled with the `cuda` feature only.

use crate::bench_dacrt::BatchRow;
use anyhow::{Context, Result, bail};
use caustic_accel::bvh::device_accel_cuda::{AccelTracer, DeviceAccel, GpuAccelSpec};
use caustic_accel::bvh::traverse_cuda::{GpuHit, GpuRay};
use caustic_accel::dacrt::{DacrtConfig, DacrtTracer};
use caustic_geom::{Ray, Triangle};
use caustic_gpu::bench::{Repeats, Timing, time_device};
use caustic_gpu::{DeviceBuffer, Gpu};

/// The BVH built (its median build time kept), and a DACRT tracer per
/// variant, on one scene.
pub(crate) struct GpuBatches {
    gpu: Gpu,
    accel: DeviceAccel,
    tracer: AccelTracer,
    dacrt: Vec<DacrtTracer>,
    build: Timing,
    repeats: Repeats,
}

impl GpuBatches {
    pub(crate) fn new(
        gpu: &Gpu,
        spec: &str,
        configs: &[DacrtConfig],
        triangles: &[Triangle],
        reps: u16,
    ) -> Result<Self> {
        let parsed: GpuAccelSpec = spec.parse().with_context(|| format!("--accel {spec}"))?;
        let repeats = Repeats {
            warm_up: 1,
            repeats: reps.into(),
        };
        let mut runs = Vec::new();
        let mut accel = DeviceAccel::build(gpu, triangles, &parsed)?;
        for _ in 0..repeats.repeats {
            drop(accel);
            accel = DeviceAccel::build(gpu, triangles, &parsed)?;
            runs.push(accel.stats().build_ms);
        }
        let dacrt = configs
            .iter()
            .map(|c| DacrtTracer::new(gpu, *c))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            gpu: gpu.clone(),
            tracer: accel.tracer()?,
            accel,
            dacrt,
            build: Timing::from_runs(runs),
            repeats,
        })
    }

    /// The BVH's median build time (device ms).
    pub(crate) fn build_ms(&self) -> f64 {
        self.build.median_ms
    }

    /// The first 2^k rays for k in `min_log2 ..= max_log2` (capped by the
    /// rays there are), each traced by the BVH and by every DACRT variant.
    pub(crate) fn batches(
        &mut self,
        rays: &[Ray],
        any_hit: bool,
        min_log2: u32,
        max_log2: u32,
    ) -> Result<Vec<BatchRow>> {
        let mut rows: Vec<BatchRow> = Vec::new();
        for log2 in min_log2..=max_log2 {
            let n = (1usize << log2).min(rays.len());
            if rows.last().is_some_and(|r| r.rays == n) {
                break;
            }
            let words: Vec<GpuRay> = rays[..n].iter().map(GpuRay::from).collect();
            let batch = DeviceBuffer::from_slice(&self.gpu, "bench rays", &words)?;
            let (bvh_trace_ms, want) = self.bvh(&batch, any_hit)?;
            let mut dacrt_ms = Vec::new();
            for k in 0..self.dacrt.len() {
                let (ms, got) = self.dacrt(k, &batch, any_hit)?;
                if got != want {
                    bail!(
                        "{} on the GPU disagrees with the BVH on {n} rays",
                        self.dacrt[k].config().spec()
                    );
                }
                dacrt_ms.push(ms);
            }
            rows.push(BatchRow {
                rays: n,
                dacrt_ms,
                bvh_trace_ms,
            });
        }
        Ok(rows)
    }

    /// The BVH's median trace ms and its answers (hits, or occlusion as
    /// hits of prim 0).
    fn bvh(&mut self, rays: &DeviceBuffer<GpuRay>, any_hit: bool) -> Result<(f64, Vec<GpuHit>)> {
        let (accel, tracer) = (&self.accel, &mut self.tracer);
        answers(
            &self.gpu,
            self.repeats,
            rays,
            any_hit,
            |rays, hits, flags| {
                if any_hit {
                    tracer.occluded(accel, rays, flags)
                } else {
                    tracer.intersect(accel, rays, hits)
                }
            },
        )
    }

    fn dacrt(
        &mut self,
        k: usize,
        rays: &DeviceBuffer<GpuRay>,
        any_hit: bool,
    ) -> Result<(f64, Vec<GpuHit>)> {
        let (tris, tracer) = (self.accel.scene_triangles(), &mut self.dacrt[k]);
        answers(
            &self.gpu,
            self.repeats,
            rays,
            any_hit,
            |rays, hits, flags| {
                if any_hit {
                    tracer.occluded(tris, rays, flags).map(drop)
                } else {
                    tracer.intersect(tris, rays, hits).map(drop)
                }
            },
        )
    }
}

/// Times `trace` (device events, median) and returns its answers, an
/// occlusion flag as a hit of prim 0 at t = 0.
fn answers(
    gpu: &Gpu,
    repeats: Repeats,
    rays: &DeviceBuffer<GpuRay>,
    any_hit: bool,
    mut trace: impl FnMut(
        &DeviceBuffer<GpuRay>,
        &mut DeviceBuffer<GpuHit>,
        &mut DeviceBuffer<u32>,
    ) -> Result<(), caustic_gpu::GpuError>,
) -> Result<(f64, Vec<GpuHit>)> {
    let n = rays.len();
    let mut hits = DeviceBuffer::<GpuHit>::uninit(gpu, "bench hits", if any_hit { 0 } else { n })?;
    let mut flags =
        DeviceBuffer::<u32>::uninit(gpu, "bench occlusion", if any_hit { n } else { 0 })?;
    let timing = time_device(
        gpu,
        repeats,
        || Ok(()),
        || trace(rays, &mut hits, &mut flags),
    )?;
    let answers = if any_hit {
        flags
            .download()?
            .iter()
            .map(|&f| GpuHit {
                t: 0.0,
                prim: if f != 0 { 0 } else { GpuHit::NO_HIT },
                u: 0.0,
                v: 0.0,
            })
            .collect()
    } else {
        hits.download()?
    };
    Ok((timing.median_ms, answers))
}
