//! The compressed wide BVH's benchmark: the binary tree that
//! [`trace_bench_cuda`](crate::bvh::trace_bench_cuda) measures, collapsed on
//! the device and traced with the same protocol rays (primary, AO,
//! diffuse, generated on the device), beside the binary traversal on the
//! same rays in the same run. Every result of every traversal is checked
//! against the binary one before anything is timed; the timing rules are
//! [`caustic_gpu::bench`]'s (device events around the trace launch alone,
//! warm-ups, the median of the repetitions).

use std::time::Instant;

use caustic_geom::{Triangle, protocol};
use caustic_gpu::bench::{Repeats, Timing, time_device};
use caustic_gpu::{DeviceBuffer, Gpu, GpuError};

use crate::TriangleBvh;
use crate::bvh::traverse_cuda::{GpuHit, GpuRay, Tracer};
use crate::bvh::triangle_bvh_cuda::DeviceBvh;
use crate::bvh::wide::compressed_cuda::{CompressStats, CompressedWideBvh};
use crate::bvh::wide::traverse_compressed_cuda::{CompressedTracer, TraversalKernel};
use crate::protocol_cuda::{self as rays, PrimaryCamera, SecondaryRays};

/// The timed traversals, in table order.
pub const TRAVERSALS: [&str; 4] = ["binary", "wide", "wide-eager", "wide-exact"];

/// One ray kind's pass: its ray count and one timing per traversal of
/// [`TRAVERSALS`].
#[derive(Clone, Debug, PartialEq)]
pub struct KindPass {
    pub kind: &'static str,
    pub rays: usize,
    pub timings: [Timing; 4],
}

impl KindPass {
    /// Mrays/s at the median time of traversal `t`.
    pub fn mrays_per_s(&self, t: usize) -> f64 {
        self.timings[t].millions_per_s(self.rays).0
    }
}

/// One scene's measurement.
#[derive(Clone, Debug, PartialEq)]
pub struct WideTraceResult {
    pub triangles: usize,
    /// CPU build of the binary tree (`bvh-binned`), one run.
    pub binary_build_ms: f64,
    /// The median build by total time, of `repeats.repeats` after the warm-ups.
    pub compress: CompressStats,
    /// Binary nodes and bytes (nodes and triangles) on the device.
    pub binary_nodes: usize,
    pub binary_bytes: usize,
    pub passes: Vec<KindPass>,
}

/// Builds `triangles`' binary BVH on the CPU, uploads and compresses it,
/// generates the protocol's rays from `camera` at `width` x `height` and
/// times each ray kind with each traversal.
pub fn trace_scene_wide(
    gpu: &Gpu,
    triangles: &[Triangle],
    camera: &PrimaryCamera,
    (width, height): (u32, u32),
    repeats: Repeats,
) -> Result<WideTraceResult, GpuError> {
    if triangles.is_empty() {
        return Err(GpuError::Invalid {
            what: "scene",
            message: "it has no triangles to trace".into(),
        });
    }
    let start = Instant::now();
    let accel = TriangleBvh::build(triangles);
    let binary_build_ms = start.elapsed().as_secs_f64() * 1e3;
    let bvh = DeviceBvh::upload(gpu, &accel)?;
    let mut builds = Vec::new();
    for run in 0..repeats.warm_up + repeats.repeats {
        let tree = CompressedWideBvh::build(&bvh)?;
        if run >= repeats.warm_up {
            builds.push(*tree.stats());
        }
    }
    builds.sort_by(|a, b| a.build_ms.total_cmp(&b.build_ms));
    let compress = builds[builds.len() / 2];
    let tree = CompressedWideBvh::build(&bvh)?;

    let mut binary = Tracer::new(gpu)?;
    let mut fast = CompressedTracer::with_kernel(gpu, TraversalKernel::Fast)?;
    let mut eager = CompressedTracer::with_kernel(gpu, TraversalKernel::Eager)?;
    let mut exact = CompressedTracer::with_kernel(gpu, TraversalKernel::Exact)?;
    let primary = rays::primary_rays(gpu, camera, width, height)?;
    let mut hits = DeviceBuffer::<GpuHit>::uninit(gpu, "primary hits", primary.len())?;
    binary.intersect_image(&bvh, &primary, width, &mut hits)?;
    let diag = protocol::scene_diagonal(triangles);
    let SecondaryRays { diffuse, ao, .. } = rays::secondary_rays(&bvh, &primary, &hits, diag)?;

    let mut passes = Vec::new();
    for (kind, rays, query) in [
        ("primary", &primary, Query::Image(width)),
        ("AO", &ao, Query::Any),
        ("diffuse", &diffuse, Query::Closest),
    ] {
        let mut out = Output::new(gpu, query, rays.len())?;
        let mut run = |t: usize, out: &mut Output| match t {
            0 => out.binary(&mut binary, &bvh, rays, query),
            1 => out.wide(&mut fast, &tree, rays, query),
            2 => out.wide(&mut eager, &tree, rays, query),
            _ => out.wide(&mut exact, &tree, rays, query),
        };
        run(0, &mut out)?;
        let want = out.words()?;
        for (t, name) in TRAVERSALS.iter().enumerate().skip(1) {
            out.poison()?;
            run(t, &mut out)?;
            let differ = want
                .chunks(out.per_ray())
                .zip(out.words()?.chunks(out.per_ray()))
                .filter(|(a, b)| a != b)
                .count();
            if differ > 0 {
                return Err(caustic_gpu::bench::mismatch(
                    kind,
                    format!(
                        "{differ} of {} {name} results differ from the binary traversal",
                        rays.len()
                    ),
                ));
            }
        }
        let mut time = |t: usize| time_device(gpu, repeats, || Ok(()), || run(t, &mut out));
        let timings = [time(0)?, time(1)?, time(2)?, time(3)?];
        passes.push(KindPass {
            kind,
            rays: rays.len(),
            timings,
        });
    }
    Ok(WideTraceResult {
        triangles: triangles.len(),
        binary_build_ms,
        compress,
        binary_nodes: bvh.nodes().len(),
        binary_bytes: bvh.nodes().bytes() + bvh.triangles().bytes(),
        passes,
    })
}

#[derive(Clone, Copy)]
enum Query {
    Image(u32),
    Closest,
    Any,
}

/// A pass's results on the device: hits or occlusion words.
enum Output {
    Hits(DeviceBuffer<GpuHit>),
    Occluded(DeviceBuffer<u32>),
}

impl Output {
    fn new(gpu: &Gpu, query: Query, n: usize) -> Result<Self, GpuError> {
        Ok(match query {
            Query::Any => Output::Occluded(DeviceBuffer::uninit(gpu, "AO results", n)?),
            _ => Output::Hits(DeviceBuffer::uninit(gpu, "hits", n)?),
        })
    }

    fn per_ray(&self) -> usize {
        match self {
            Output::Hits(_) => 4,
            Output::Occluded(_) => 1,
        }
    }

    fn poison(&mut self) -> Result<(), GpuError> {
        match self {
            Output::Hits(h) => h.poison(),
            Output::Occluded(o) => o.poison(),
        }
    }

    fn words(&self) -> Result<Vec<u32>, GpuError> {
        Ok(match self {
            Output::Hits(h) => bytemuck::cast_slice(&h.download()?).to_vec(),
            Output::Occluded(o) => o.download()?,
        })
    }

    fn binary(
        &mut self,
        t: &mut Tracer,
        bvh: &DeviceBvh,
        rays: &DeviceBuffer<GpuRay>,
        q: Query,
    ) -> Result<(), GpuError> {
        match (self, q) {
            (Output::Hits(h), Query::Image(w)) => t.intersect_image(bvh, rays, w, h),
            (Output::Hits(h), _) => t.intersect(bvh, rays, h),
            (Output::Occluded(o), _) => t.occluded(bvh, rays, o),
        }
    }

    fn wide(
        &mut self,
        t: &mut CompressedTracer,
        tree: &CompressedWideBvh,
        rays: &DeviceBuffer<GpuRay>,
        q: Query,
    ) -> Result<(), GpuError> {
        match (self, q) {
            (Output::Hits(h), Query::Image(w)) => t.intersect_image(tree, rays, w, h),
            (Output::Hits(h), _) => t.intersect(tree, rays, h),
            (Output::Occluded(o), _) => t.occluded(tree, rays, o),
        }
    }
}

/// The markdown rows of `results` (scene name, result): build figures, then
/// Mrays/s per ray kind and traversal with the wide/binary ratio.
pub fn markdown(results: &[(String, WideTraceResult)]) -> String {
    let mut s = String::from(
        "| scene | triangles | wide build ms (collapse) | wide nodes | wide MB | binary MB |\n|---|---:|---:|---:|---:|---:|\n",
    );
    for (name, r) in results {
        let c = &r.compress;
        s += &format!(
            "| {name} | {} | {:.3} ({:.3}) | {} | {:.1} | {:.1} |\n",
            r.triangles,
            c.build_ms,
            c.collapse_ms,
            c.nodes,
            c.bytes as f64 / 1e6,
            r.binary_bytes as f64 / 1e6
        );
    }
    s += "\n| scene | kind | rays | binary Mrays/s | wide | wide-eager | wide-exact | best wide / binary |\n|---|---|---:|---:|---:|---:|---:|---:|\n";
    for (name, r) in results {
        for p in &r.passes {
            let best = (1..4).map(|t| p.mrays_per_s(t)).fold(0.0, f64::max);
            s += &format!(
                "| {name} | {} | {} | {:.0} | {:.0} | {:.0} | {:.0} | **{:.2}** |\n",
                p.kind,
                p.rays,
                p.mrays_per_s(0),
                p.mrays_per_s(1),
                p.mrays_per_s(2),
                p.mrays_per_s(3),
                best / p.mrays_per_s(0)
            );
        }
    }
    s
}
