//! What the GPU tests of traversal and of device builds share: running the
//! GPU and CPU traversals on the same rays and comparing their answers
//! (hits as bits, exact ties apart). The random soups are in `soups.rs`.

#![allow(dead_code)] // each includer uses its own part

use caustic_accel::bvh::traverse_cuda::{GpuHit, GpuRay, Tracer};
use caustic_accel::bvh::triangle_bvh_cuda::DeviceBvh;
use caustic_accel::{Accel, TriangleBvh};
use caustic_geom::{Hit, Ray};
use caustic_gpu::DeviceBuffer;

use super::device::gpu;

// ------------------------------------------------------------ GPU helpers

pub fn upload_rays(rays: &[Ray]) -> DeviceBuffer<GpuRay> {
    let words: Vec<GpuRay> = rays.iter().map(GpuRay::from).collect();
    DeviceBuffer::from_slice(gpu(), "test rays", &words).unwrap()
}

pub fn gpu_closest(
    tracer: &mut Tracer,
    bvh: &DeviceBvh,
    rays: &DeviceBuffer<GpuRay>,
) -> Vec<GpuHit> {
    let mut hits = DeviceBuffer::uninit(gpu(), "test hits", rays.len()).unwrap();
    hits.poison().unwrap();
    tracer.intersect(bvh, rays, &mut hits).unwrap();
    hits.download().unwrap()
}

pub fn gpu_closest_image(
    tracer: &mut Tracer,
    bvh: &DeviceBvh,
    rays: &DeviceBuffer<GpuRay>,
    width: u32,
) -> Vec<GpuHit> {
    let mut hits = DeviceBuffer::uninit(gpu(), "test hits", rays.len()).unwrap();
    hits.poison().unwrap();
    tracer.intersect_image(bvh, rays, width, &mut hits).unwrap();
    hits.download().unwrap()
}

pub fn gpu_occluded(tracer: &mut Tracer, bvh: &DeviceBvh, rays: &DeviceBuffer<GpuRay>) -> Vec<u32> {
    let mut out = DeviceBuffer::uninit(gpu(), "test occlusion", rays.len()).unwrap();
    out.poison().unwrap();
    tracer.occluded(bvh, rays, &mut out).unwrap();
    out.download().unwrap()
}

pub fn cpu_closest(accel: &TriangleBvh, rays: &[Ray]) -> Vec<Option<Hit>> {
    let mut hits = vec![None; rays.len()];
    accel.intersect_batch(rays, &mut hits);
    hits
}

pub fn cpu_occluded(accel: &TriangleBvh, rays: &[Ray]) -> Vec<bool> {
    let mut out = vec![false; rays.len()];
    accel.occluded_batch(rays, &mut out);
    out
}

// ------------------------------------------------------------ comparisons

/// Differences between GPU and CPU answers for one batch of rays.
#[derive(Default)]
pub struct Report {
    pub rays: usize,
    /// Same `t`, another triangle.
    pub ties: usize,
    /// Anything else: a hit on one side only, another `t`, `u` or `v`, or
    /// an unwritten (poisoned) result.
    pub others: usize,
    /// The first few differences, spelled out.
    pub details: Vec<String>,
}

impl Report {
    pub fn note(&mut self, tie: bool, detail: impl FnOnce() -> String) {
        if tie {
            self.ties += 1;
        } else {
            self.others += 1;
        }
        if self.details.len() < 8 {
            self.details.push(detail());
        }
    }

    pub fn identical(&self) -> bool {
        self.ties == 0 && self.others == 0
    }

    /// One line for the log; the details follow on their own lines.
    pub fn summary(&self, what: &str) -> String {
        let mut s = if self.identical() {
            format!("{what}: {} rays, identical", self.rays)
        } else {
            format!(
                "{what}: {} rays, {} differ ({} exact ties, {} others)",
                self.rays,
                self.ties + self.others,
                self.ties,
                self.others
            )
        };
        for d in &self.details {
            s += &format!("\n    {d}");
        }
        s
    }
}

pub fn same_hit(gpu: &GpuHit, cpu: Option<Hit>) -> bool {
    let expected = GpuHit::from_hit(cpu);
    bytemuck::bytes_of(gpu) == bytemuck::bytes_of(&expected)
}

pub fn compare_closest(rays: &[Ray], gpu: &[GpuHit], cpu: &[Option<Hit>]) -> Report {
    let mut report = Report {
        rays: rays.len(),
        ..Report::default()
    };
    for (i, ((ray, g), c)) in rays.iter().zip(gpu).zip(cpu).enumerate() {
        if same_hit(g, *c) {
            continue;
        }
        let tie = c.is_some_and(|c| g.prim != GpuHit::NO_HIT && g.t.to_bits() == c.t.to_bits());
        report.note(tie, || format!("ray {i} {ray:?}: gpu {g:?}, cpu {c:?}"));
    }
    report
}

pub fn compare_occluded(rays: &[Ray], gpu: &[u32], cpu: &[bool]) -> Report {
    let mut report = Report {
        rays: rays.len(),
        ..Report::default()
    };
    for (i, ((ray, &g), &c)) in rays.iter().zip(gpu).zip(cpu).enumerate() {
        if g != u32::from(c) {
            report.note(false, || format!("ray {i} {ray:?}: gpu {g:#x}, cpu {c}"));
        }
    }
    report
}
