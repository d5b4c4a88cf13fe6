//! What the GPU tests of traversal and of device builds share: running the
//! GPU and CPU traversals on the same rays, comparing their answers (hits
//! as bits, exact ties apart), and the random triangle soups and rays with
//! every kind of awkward case.

#![allow(dead_code)] // each includer uses its own part

use caustic_accel::bvh::traverse_cuda::{GpuHit, GpuRay, Tracer};
use caustic_accel::bvh::triangle_bvh_cuda::DeviceBvh;
use caustic_accel::{Accel, TriangleBvh};
use caustic_geom::{Hit, Pcg32, Ray, Triangle, Vec3};
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

// ------------------------------------------------------------ random soups

/// True with probability `p`.
pub fn chance(rng: &mut Pcg32, p: f32) -> bool {
    rng.next_f32() < p
}

pub fn uniform(rng: &mut Pcg32, lo: f32, hi: f32) -> f32 {
    lo + (hi - lo) * rng.next_f32()
}

pub fn point(rng: &mut Pcg32, lo: f32, hi: f32) -> Vec3 {
    Vec3::new(
        uniform(rng, lo, hi),
        uniform(rng, lo, hi),
        uniform(rng, lo, hi),
    )
}

pub fn unit_vector(rng: &mut Pcg32) -> Vec3 {
    loop {
        let v = point(rng, -1.0, 1.0);
        let len = v.length();
        if len > 1e-3 && len <= 1.0 {
            return v / len;
        }
    }
}

/// Small triangles in the unit cube, with every kind of awkward triangle
/// mixed in: huge ones, zero-area ones (collinear, repeated vertex),
/// axis-aligned flat ones on shared planes, exact duplicates, and a few
/// with non-finite vertices.
pub fn awkward_soup(rng: &mut Pcg32, n: usize) -> Vec<Triangle> {
    let mut tris = Vec::with_capacity(n);
    while tris.len() < n {
        let c = point(rng, 0.0, 1.0);
        let small = |rng: &mut Pcg32| c + point(rng, -0.03, 0.03);
        let tri = match rng.next_u32() % 16 {
            0 => Triangle::new(
                point(rng, -5.0, 6.0),
                point(rng, -5.0, 6.0),
                point(rng, -5.0, 6.0),
            ),
            1 => {
                let (a, b) = (small(rng), small(rng));
                Triangle::new(a, b, a + 2.0 * (b - a))
            }
            2 => {
                let a = small(rng);
                Triangle::new(a, a, small(rng))
            }
            3 => {
                let z = (rng.next_u32() % 4) as f32 * 0.25;
                let p =
                    |rng: &mut Pcg32| Vec3::new(uniform(rng, 0.0, 1.0), uniform(rng, 0.0, 1.0), z);
                Triangle::new(p(rng), p(rng), p(rng))
            }
            4 if !tris.is_empty() => tris[rng.next_u32() as usize % tris.len()],
            5 if chance(rng, 1.0 / 8.0) => {
                let bad = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY][rng.next_u32() as usize % 3];
                Triangle::new(small(rng), Vec3::new(bad, 0.5, 0.5), small(rng))
            }
            _ => Triangle::new(small(rng), small(rng), small(rng)),
        };
        tris.push(tri);
    }
    tris
}

/// A height field over the unit square: every inner edge shared by two
/// triangles, so rays through edges and vertices test watertightness.
pub fn grid_soup(rng: &mut Pcg32, cells: usize) -> Vec<Triangle> {
    let heights: Vec<f32> = (0..(cells + 1) * (cells + 1))
        .map(|_| uniform(rng, 0.0, 0.1))
        .collect();
    let vertex = |i: usize, j: usize| {
        Vec3::new(
            i as f32 / cells as f32,
            j as f32 / cells as f32,
            heights[j * (cells + 1) + i],
        )
    };
    let mut tris = Vec::with_capacity(2 * cells * cells);
    for j in 0..cells {
        for i in 0..cells {
            let (a, b, c, d) = (
                vertex(i, j),
                vertex(i + 1, j),
                vertex(i + 1, j + 1),
                vertex(i, j + 1),
            );
            tris.push(Triangle::new(a, b, c));
            tris.push(Triangle::new(a, c, d));
        }
    }
    tris
}

/// Rays of every kind: random, axis-aligned with signed zeros, aimed at
/// vertices and edge midpoints, with random intervals, starting on
/// surfaces, and untraceable ones (NaN, zero direction, empty interval).
pub fn awkward_rays(rng: &mut Pcg32, tris: &[Triangle], n: usize) -> Vec<Ray> {
    let mut rays = Vec::with_capacity(n);
    while rays.len() < n {
        let origin = point(rng, -0.5, 1.5);
        let tri = tris[rng.next_u32() as usize % tris.len()];
        let ray = match rng.next_u32() % 10 {
            0 => {
                let axis = rng.next_u32() as usize % 3;
                let mut dir = Vec3::new(
                    if chance(rng, 0.5) { 0.0 } else { -0.0 },
                    if chance(rng, 0.5) { 0.0 } else { -0.0 },
                    if chance(rng, 0.5) { 0.0 } else { -0.0 },
                );
                dir[axis] = if chance(rng, 0.5) { 1.0 } else { -1.0 };
                Ray::new(origin, dir)
            }
            1 => Ray::new(origin, tri.v0 - origin),
            2 => Ray::new(origin, (tri.v1 + tri.v2) * 0.5 - origin),
            3 => {
                let (a, b) = (uniform(rng, 0.0, 2.0), uniform(rng, 0.0, 2.0));
                Ray::segment(origin, unit_vector(rng), a.min(b), a.max(b))
            }
            4 => {
                let on = tri.point_at(0.3, 0.3);
                Ray::segment(on, unit_vector(rng), 0.0, f32::INFINITY)
            }
            5 if chance(rng, 1.0 / 16.0) => match rng.next_u32() % 4 {
                0 => Ray::new(Vec3::new(f32::NAN, 0.5, 0.5), unit_vector(rng)),
                1 => Ray::new(origin, Vec3::ZERO),
                2 => Ray::segment(origin, unit_vector(rng), 1.0, 1.0),
                _ => Ray::segment(origin, unit_vector(rng), 0.0, f32::NAN),
            },
            6 => Ray::new(origin, unit_vector(rng) * uniform(rng, 1e-3, 1e3)),
            _ => Ray::new(origin, unit_vector(rng)),
        };
        rays.push(ray);
    }
    rays
}
