//! The anchor ray protocol (`anchors/PROTOCOL.md`, version 1): the camera
//! rays, the AO/diffuse secondary rays and the checksums that caustic's
//! benchmarks share with the Embree and obvhs harnesses, bit for bit.
//!
//! Rays are computed in `f64` and stored as `f32`, exactly as section 3 and
//! 4 prescribe, so two conforming tracers see identical rays.

use crate::sampling::onb_f64;
use crate::{DVec3, Hit, Pcg32, Ray, Triangle, Vec3};

/// The protocol's camera: eye, look-at, up and a vertical fov in degrees.
#[derive(Clone, Copy, Debug)]
pub struct ProtocolCamera {
    pub eye: DVec3,
    pub look_at: DVec3,
    pub up: DVec3,
    pub fov_deg: f64,
}

impl ProtocolCamera {
    /// The camera of `f32` scene values (a scene camera's eye, target, up
    /// and vertical fov), widened to `f64` as the protocol computes.
    pub fn from_f32(eye: Vec3, look_at: Vec3, up: Vec3, fov_deg: f32) -> Self {
        Self {
            eye: eye.as_dvec3(),
            look_at: look_at.as_dvec3(),
            up: up.as_dvec3(),
            fov_deg: fov_deg as f64,
        }
    }
}

fn normalize(v: DVec3) -> DVec3 {
    // One division per component by the length, as the protocol specifies.
    let len = v.dot(v).sqrt();
    DVec3::new(v.x / len, v.y / len, v.z / len)
}

/// Primary rays in pixel order (section 3).
pub fn primary_rays(camera: &ProtocolCamera, width: u32, height: u32) -> Vec<Ray> {
    let f = normalize(camera.look_at - camera.eye);
    let r = normalize(f.cross(camera.up));
    let u = r.cross(f);
    let h = (camera.fov_deg * std::f64::consts::PI / 360.0).tan();
    let a = width as f64 / height as f64;
    let eye = camera.eye.as_vec3();
    let mut rays = Vec::with_capacity(width as usize * height as usize);
    for y in 0..height {
        for x in 0..width {
            let sx = (2.0 * (x as f64 + 0.5) / width as f64 - 1.0) * h * a;
            let sy = (1.0 - 2.0 * (y as f64 + 0.5) / height as f64) * h;
            let dir = normalize(f + sx * r + sy * u);
            rays.push(Ray::new(eye, dir.as_vec3()));
        }
    }
    rays
}

/// Diagonal of the vertex bounds in `f64` (section 1.2).
pub fn scene_diagonal(triangles: &[Triangle]) -> f64 {
    let mut lo = DVec3::splat(f64::INFINITY);
    let mut hi = DVec3::splat(f64::NEG_INFINITY);
    for t in triangles {
        for v in [t.v0, t.v1, t.v2] {
            lo = lo.min(v.as_dvec3());
            hi = hi.max(v.as_dvec3());
        }
    }
    if lo.x > hi.x { 0.0 } else { (hi - lo).length() }
}

/// The four secondary rays per primary hit, ordered by pixel then `k`
/// (section 4). `tmax` is left at infinity; the AO pass sets its own.
pub fn secondary_rays(
    primary: &[Ray],
    hits: &[Option<Hit>],
    triangles: &[Triangle],
    diag: f64,
) -> Vec<Ray> {
    let mut rays = Vec::new();
    for (i, (ray, hit)) in primary.iter().zip(hits).enumerate() {
        let Some(hit) = hit else { continue };
        let dir = ray.dir.as_dvec3();
        let p = ray.origin.as_dvec3() + hit.t as f64 * dir;
        let tri = &triangles[hit.prim as usize];
        let (v0, v1, v2) = (tri.v0.as_dvec3(), tri.v1.as_dvec3(), tri.v2.as_dvec3());
        let mut n = normalize((v1 - v0).cross(v2 - v0));
        if n.dot(dir) > 0.0 {
            n = -n;
        }
        if !n.is_finite() {
            n = -dir;
        }
        let origin = (p + n * (1e-4 * diag)).as_vec3();
        let mut rng = Pcg32::new(i as u64, 54);
        let (t, b) = onb_f64(n);
        for _ in 0..4 {
            let u1 = rng.next_f64_24();
            let u2 = rng.next_f64_24();
            let rr = u1.sqrt();
            let phi = 2.0 * std::f64::consts::PI * u2;
            let (lx, ly, lz) = (rr * phi.cos(), rr * phi.sin(), (1.0 - u1).max(0.0).sqrt());
            let d = normalize(lx * t + ly * b + lz * n);
            rays.push(Ray::new(origin, d.as_vec3()));
        }
    }
    rays
}

/// `(hits, t_sum)` over closest-hit results, summed in order in `f64`.
pub fn hit_checksum(hits: &[Option<Hit>]) -> (u64, f64) {
    hits.iter()
        .flatten()
        .fold((0, 0.0), |(n, s), h| (n + 1, s + h.t as f64))
}

/// The AO ray length: `0.1 * diag` as `f32`.
pub fn ao_tmax(diag: f64) -> f32 {
    (0.1 * diag) as f32
}

/// `copies` copies of `mesh` on a square grid in the xy plane (the largest
/// square not above `copies`), each moved by 1.1 times the mesh's extent per
/// step: how the GPU anchor (`anchors/gpu/optix_anchor.py`) makes a scene of
/// millions of triangles from one scanned model (16 dragons: 14 M).
pub fn replicate_grid(mesh: &[Triangle], copies: usize) -> Vec<Triangle> {
    let (lo, hi) = vertex_bounds(mesh);
    let extent = hi - lo;
    let side = (copies as f64).sqrt() as usize;
    let mut out = Vec::with_capacity(side * side * mesh.len());
    for i in 0..side {
        for j in 0..side {
            let shift = Vec3::new(i as f32, j as f32, 0.0) * extent * 1.1;
            out.extend(
                mesh.iter()
                    .map(|t| Triangle::new(t.v0 + shift, t.v1 + shift, t.v2 + shift)),
            );
        }
    }
    out
}

/// The GPU anchor's framing camera for a replicated scene: looking at the
/// centre of the vertex bounds from the direction (0.9, 0.6, 1.6), far
/// enough that the bounding sphere fills the vertical `fov_deg`.
pub fn framing_camera(triangles: &[Triangle], fov_deg: f64) -> ProtocolCamera {
    let (lo, hi) = vertex_bounds(triangles);
    let at = ((hi + lo) / 2.0).as_dvec3();
    let radius = ((hi - lo).length() / 2.0) as f64;
    let eye =
        at + DVec3::new(0.9, 0.6, 1.6).normalize() * radius / (fov_deg.to_radians() / 2.0).sin();
    ProtocolCamera {
        eye,
        look_at: at,
        up: DVec3::Y,
        fov_deg,
    }
}

/// Bounds of the vertices in `f32`, as the anchor computes them.
fn vertex_bounds(triangles: &[Triangle]) -> (Vec3, Vec3) {
    triangles.iter().fold(
        (Vec3::splat(f32::INFINITY), Vec3::splat(f32::NEG_INFINITY)),
        |(lo, hi), t| {
            (
                lo.min(t.v0).min(t.v1).min(t.v2),
                hi.max(t.v0).max(t.v1).max(t.v2),
            )
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replicate_grid_tiles_copies_in_the_xy_plane() {
        let tri = Triangle::new(
            Vec3::ZERO,
            Vec3::new(1.0, 0.0, 0.0),
            Vec3::new(0.0, 2.0, 0.0),
        );
        // 5 copies round down to the 2x2 square.
        let grid = replicate_grid(&[tri], 5);
        assert_eq!(grid.len(), 4);
        let shifts: Vec<Vec3> = grid.iter().map(|t| t.v0).collect();
        assert!(shifts.contains(&Vec3::new(1.1, 2.2, 0.0)));
        assert!(shifts.iter().all(|s| s.z == 0.0));
    }

    #[test]
    fn framing_camera_sees_the_whole_scene() {
        let tri = Triangle::new(
            Vec3::new(-1.0, -1.0, -1.0),
            Vec3::new(1.0, 1.0, 1.0),
            Vec3::new(1.0, -1.0, 1.0),
        );
        let camera = framing_camera(&[tri], 40.0);
        assert_eq!(camera.look_at, DVec3::ZERO);
        // The bounding sphere (radius sqrt(3)) fills the field of view.
        let distance = camera.eye.length();
        let expected = 3f64.sqrt() / (20f64.to_radians()).sin();
        assert!((distance - expected).abs() < 1e-6 * expected); // bounds are f32
    }
}
