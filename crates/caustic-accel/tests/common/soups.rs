//! Random triangle soups and rays with every awkward case mixed in, shared
//! by the GPU traversal tests (`gpu_trace.rs`, `gpu_wide.rs`, `gpu_grid.rs`)
//! and the grid kernels' host emulation (`grid_kernels_on_cpu.rs`).

#![allow(dead_code)] // each includer uses its own part

use caustic_geom::{Pcg32, Ray, Triangle, Vec3};

/// True with probability `p`.
fn chance(rng: &mut Pcg32, p: f32) -> bool {
    rng.next_f32() < p
}

fn uniform(rng: &mut Pcg32, lo: f32, hi: f32) -> f32 {
    lo + (hi - lo) * rng.next_f32()
}

fn point(rng: &mut Pcg32, lo: f32, hi: f32) -> Vec3 {
    Vec3::new(
        uniform(rng, lo, hi),
        uniform(rng, lo, hi),
        uniform(rng, lo, hi),
    )
}

fn unit_vector(rng: &mut Pcg32) -> Vec3 {
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

/// Rays from origins far outside the triangles (100 to 2 10^4 times the
/// unit soup's size away), aimed at finite ones: the spatial structures'
/// exact slow path for origins beyond their rounding tolerance.
pub fn far_rays(rng: &mut Pcg32, tris: &[Triangle], n: usize) -> Vec<Ray> {
    let finite: Vec<&Triangle> = tris.iter().filter(|t| t.is_finite()).collect();
    (0..n)
        .map(|i| {
            let target = finite[rng.next_u32() as usize % finite.len()].point_at(0.25, 0.25);
            let dir = unit_vector(rng);
            let distance = [100.0, 1e3, 1e4][i % 3] * (1.0 + rng.next_f32());
            Ray::new(target - dir * distance, dir)
        })
        .collect()
}

/// `rays` cut to segments of `length` past their `tmin` (from 0 at the
/// least): collision rays.
pub fn segments(rays: &[Ray], length: f32) -> Vec<Ray> {
    rays.iter()
        .map(|r| Ray::segment(r.origin, r.dir, r.tmin, r.tmin.max(0.0) + length))
        .collect()
}
