//! [`BruteForce`]: tests every triangle against every ray. Slow on purpose;
//! it is the reference every other accel is checked against. The closest
//! hit is kept with a strict `<`, so the lowest id wins exact ties, which is
//! the tie rule of the [`Accel`] contract.

use crate::{Accel, AccelStats, is_traceable};
use caustic_geom::{Hit, Ray, RayTriangleTest, Triangle};
use std::time::Instant;

/// All triangles, no hierarchy (`brute`).
#[derive(Clone, Debug)]
pub struct BruteForce {
    triangles: Vec<Triangle>,
    stats: AccelStats,
}

impl BruteForce {
    pub fn new(triangles: &[Triangle]) -> Self {
        let start = Instant::now();
        let triangles = triangles.to_vec();
        let stats = AccelStats {
            name: "brute",
            build_ms: start.elapsed().as_secs_f64() * 1e3,
            bytes: std::mem::size_of_val(triangles.as_slice()),
            prims: triangles.len(),
            ..AccelStats::default()
        };
        Self { triangles, stats }
    }
}

impl Accel for BruteForce {
    fn intersect(&self, ray: &Ray) -> Option<Hit> {
        if !is_traceable(ray) {
            return None;
        }
        let test = RayTriangleTest::new(ray.origin, ray.dir);
        let mut best = None;
        let mut closest = ray.tmax;
        for (prim, tri) in self.triangles.iter().enumerate() {
            if let Some(h) = test.intersect(tri, ray.tmin, closest) {
                closest = h.t;
                best = Some(Hit {
                    t: h.t,
                    prim: prim as u32,
                    u: h.u,
                    v: h.v,
                });
            }
        }
        best
    }

    fn occluded(&self, ray: &Ray) -> bool {
        if !is_traceable(ray) {
            return false;
        }
        let test = RayTriangleTest::new(ray.origin, ray.dir);
        self.triangles
            .iter()
            .any(|tri| test.intersect(tri, ray.tmin, ray.tmax).is_some())
    }

    fn stats(&self) -> &AccelStats {
        &self.stats
    }

    fn name(&self) -> &'static str {
        "brute"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use caustic_geom::Vec3;

    #[test]
    fn closest_hit_and_lowest_id_on_ties() {
        let tri = |z: f32| {
            Triangle::new(
                Vec3::new(-1.0, -1.0, z),
                Vec3::new(3.0, -1.0, z),
                Vec3::new(-1.0, 3.0, z),
            )
        };
        let brute = BruteForce::new(&[tri(5.0), tri(2.0), tri(2.0), tri(-1.0)]);
        let hit = brute.intersect(&Ray::new(Vec3::ZERO, Vec3::Z)).unwrap();
        assert_eq!((hit.prim, hit.t), (1, 2.0));
        let hit = brute.intersect(&Ray::new(Vec3::ZERO, -Vec3::Z)).unwrap();
        assert_eq!(hit.prim, 3);
        assert!(brute.occluded(&Ray::segment(Vec3::ZERO, Vec3::Z, 0.0, 2.5)));
        assert!(!brute.occluded(&Ray::segment(Vec3::ZERO, Vec3::Z, 0.0, 2.0)));
        assert_eq!(brute.stats().prims, 4);
    }
}
