//! The GPU benchmark behind `caustic bench gpu`: a structure built on the
//! device by spec ([`GpuAccelSpec`]: `lbvh`, `hlbvh`, `ploc`, `bvh-wide`,
//! `cpu:SPEC`), its build timed, then traced with the anchor ray
//! protocol's primary, AO and diffuse rays generated on the device, each
//! pass checked against the CPU traversal before it is timed (timing rules:
//! [`caustic_gpu::bench`]).

use caustic_geom::protocol;
use caustic_geom::{Hit, Ray, Triangle};
use caustic_gpu::bench::{Repeats, Timing, time_device};
use caustic_gpu::{DeviceBuffer, Gpu, GpuError};

use crate::bvh::device_accel_cuda::{DeviceAccel, GpuAccelSpec, GpuAccelStats};
use crate::bvh::traverse_cuda::{GpuHit, GpuRay};
use crate::protocol_cuda::{self as rays, PrimaryCamera, SecondaryRays};
use crate::{Accel, TriangleBvh};

/// How [`trace_scene`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceSettings {
    pub width: u32,
    pub height: u32,
    pub repeats: Repeats,
    /// Every `check_every`-th ray of each pass is checked against the CPU
    /// traversal, hit for hit (0: no check). The GPU tests compare them all.
    pub check_every: usize,
}

impl Default for TraceSettings {
    fn default() -> Self {
        Self {
            width: 1920,
            height: 1080,
            repeats: Repeats::default(),
            check_every: 16,
        }
    }
}

/// One traced pass: its ray count and timing.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pass {
    pub rays: usize,
    pub timing: Timing,
}

impl Pass {
    /// Mrays/s at the median and at the best time.
    pub fn mrays_per_s(&self) -> (f64, f64) {
        self.timing.millions_per_s(self.rays)
    }
}

/// One structure on one scene: its build and the protocol's passes.
#[derive(Clone, Debug)]
pub struct TraceResult {
    pub triangles: usize,
    /// Device time of the build (the sum of its stages), over the repeats.
    pub build: Timing,
    /// The last build's stats: stages, SAH cost, nodes, bytes, peak memory.
    pub stats: GpuAccelStats,
    pub diag: f64,
    /// Primary rays handed out in 8x4-pixel tiles.
    pub primary: Pass,
    /// The same rays in buffer (row) order, for comparison.
    pub primary_rows: Pass,
    pub ao: Pass,
    pub diffuse: Pass,
    pub ao_tmax: f32,
    /// The protocol's (hits, t_sum) of the primary pass.
    pub primary_check: (u64, f64),
    pub occluded: u64,
    pub diffuse_check: (u64, f64),
}

impl TraceResult {
    /// Build plus one primary frame (tiles) at the medians: what a frame
    /// costs when the scene changes every frame.
    pub fn frame_ms(&self) -> f64 {
        self.build.median_ms + self.primary.timing.median_ms
    }
}

/// Builds the structure `spec` names over `triangles` on `gpu` (untimed
/// warm-ups, then timed repeats, device events over the build's stages),
/// generates the protocol's rays on the device from `camera` and times the
/// closest-hit primary, any-hit AO and closest-hit diffuse passes. Ray
/// generation stays outside the timings.
pub fn trace_scene(
    gpu: &Gpu,
    triangles: &[Triangle],
    spec: &GpuAccelSpec,
    camera: &PrimaryCamera,
    settings: &TraceSettings,
) -> Result<TraceResult, GpuError> {
    if triangles.is_empty() {
        return Err(GpuError::Invalid {
            what: "scene",
            message: "it has no triangles to trace".into(),
        });
    }
    let (accel, build) = timed_builds(gpu, triangles, spec, settings.repeats)?;
    let (width, height, repeats, every) = (
        settings.width,
        settings.height,
        settings.repeats,
        settings.check_every,
    );
    // The CPU traversal the sampled hits are checked against.
    let reference = (every > 0).then(|| TriangleBvh::build(triangles));
    let mut tracer = accel.tracer()?;
    let primary = rays::primary_rays(gpu, camera, width, height)?;

    let mut hits = DeviceBuffer::<GpuHit>::uninit(gpu, "primary hits", primary.len())?;
    let primary_rays = if every > 0 {
        primary.download()?
    } else {
        Vec::new()
    };
    tracer.intersect(&accel, &primary, &mut hits)?;
    check_closest("primary (rows)", &reference, &primary_rays, &hits, every)?;
    let rows_timing = time_device(
        gpu,
        repeats,
        || Ok(()),
        || tracer.intersect(&accel, &primary, &mut hits),
    )?;
    hits.poison()?;
    tracer.intersect_image(&accel, &primary, width, &mut hits)?;
    check_closest("primary", &reference, &primary_rays, &hits, every)?;
    let primary_timing = time_device(
        gpu,
        repeats,
        || Ok(()),
        || tracer.intersect_image(&accel, &primary, width, &mut hits),
    )?;
    let primary_hits = hits.download()?;

    let diag = protocol::scene_diagonal(triangles);
    let SecondaryRays {
        diffuse,
        ao,
        ao_tmax,
    } = rays::secondary_rays_scene_order(accel.scene_triangles(), &primary, &hits, diag)?;
    let mut occluded = DeviceBuffer::<u32>::uninit(gpu, "AO results", ao.len())?;
    occluded.poison()?;
    tracer.occluded(&accel, &ao, &mut occluded)?;
    let ao_results = occluded.download()?;
    if let Some(reference) = &reference {
        check_occluded(reference, &ao.download()?, &ao_results, every)?;
    }
    let ao_timing = time_device(
        gpu,
        repeats,
        || Ok(()),
        || tracer.occluded(&accel, &ao, &mut occluded),
    )?;

    let mut diffuse_hits = DeviceBuffer::<GpuHit>::uninit(gpu, "diffuse hits", diffuse.len())?;
    diffuse_hits.poison()?;
    tracer.intersect(&accel, &diffuse, &mut diffuse_hits)?;
    let diffuse_rays = if every > 0 {
        diffuse.download()?
    } else {
        Vec::new()
    };
    check_closest("diffuse", &reference, &diffuse_rays, &diffuse_hits, every)?;
    let diffuse_timing = time_device(
        gpu,
        repeats,
        || Ok(()),
        || tracer.intersect(&accel, &diffuse, &mut diffuse_hits),
    )?;
    let diffuse_results = diffuse_hits.download()?;

    Ok(TraceResult {
        triangles: triangles.len(),
        build,
        stats: accel.stats().clone(),
        diag,
        primary: Pass {
            rays: primary.len(),
            timing: primary_timing,
        },
        primary_rows: Pass {
            rays: primary.len(),
            timing: rows_timing,
        },
        ao: Pass {
            rays: ao.len(),
            timing: ao_timing,
        },
        diffuse: Pass {
            rays: diffuse.len(),
            timing: diffuse_timing,
        },
        ao_tmax,
        primary_check: checksum(&primary_hits),
        occluded: ao_results.iter().map(|&o| u64::from(o != 0)).sum(),
        diffuse_check: checksum(&diffuse_results),
    })
}

/// Builds `repeats.warm_up + repeats.repeats` times (each build from the
/// triangles, the previous structure freed first) and times the repeats
/// by their stages' device events; returns the last structure.
fn timed_builds(
    gpu: &Gpu,
    triangles: &[Triangle],
    spec: &GpuAccelSpec,
    repeats: Repeats,
) -> Result<(DeviceAccel, Timing), GpuError> {
    let mut runs = Vec::with_capacity(repeats.repeats);
    let mut last = None;
    for i in 0..repeats.warm_up + repeats.repeats.max(1) {
        drop(last.take());
        let accel = DeviceAccel::build(gpu, triangles, spec)?;
        if i >= repeats.warm_up {
            runs.push(accel.stats().build_ms);
        }
        last = Some(accel);
    }
    let accel = last.expect("at least one build ran");
    Ok((accel, Timing::from_runs(runs)))
}

/// The protocol's (hits, t_sum) checksum.
fn checksum(hits: &[GpuHit]) -> (u64, f64) {
    protocol::hit_checksum(&hits.iter().map(GpuHit::to_hit).collect::<Vec<_>>())
}

fn sample<T: Copy>(items: &[T], every: usize) -> Vec<T> {
    items.iter().step_by(every).copied().collect()
}

/// Every `every`-th closest hit must equal the CPU's, bit for bit.
fn check_closest(
    pass: &'static str,
    reference: &Option<TriangleBvh>,
    rays: &[GpuRay],
    hits: &DeviceBuffer<GpuHit>,
    every: usize,
) -> Result<(), GpuError> {
    let Some(accel) = reference else {
        return Ok(());
    };
    let rays: Vec<Ray> = sample(rays, every).iter().map(GpuRay::to_ray).collect();
    let mut expected: Vec<Option<Hit>> = vec![None; rays.len()];
    accel.intersect_batch(&rays, &mut expected);
    let differ = sample(&hits.download()?, every)
        .iter()
        .zip(&expected)
        .filter(|(g, c)| **g != GpuHit::from_hit(**c))
        .count();
    if differ > 0 {
        return Err(caustic_gpu::bench::mismatch(
            pass,
            format!(
                "{differ} of {} sampled hits differ from the CPU traversal",
                rays.len()
            ),
        ));
    }
    Ok(())
}

fn check_occluded(
    accel: &TriangleBvh,
    rays: &[GpuRay],
    results: &[u32],
    every: usize,
) -> Result<(), GpuError> {
    let rays: Vec<Ray> = sample(rays, every).iter().map(GpuRay::to_ray).collect();
    let mut expected = vec![false; rays.len()];
    accel.occluded_batch(&rays, &mut expected);
    let differ = sample(results, every)
        .iter()
        .zip(&expected)
        .filter(|(g, c)| **g != u32::from(**c))
        .count();
    if differ > 0 {
        return Err(caustic_gpu::bench::mismatch(
            "AO",
            format!(
                "{differ} of {} sampled results differ from the CPU traversal",
                rays.len()
            ),
        ));
    }
    Ok(())
}
