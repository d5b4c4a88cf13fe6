//! [`TriangleBvh`]: a [`Bvh2`] over triangles, ready to trace. It copies the
//! triangles into leaf order so a leaf reads one contiguous run, keeps the
//! leaf-slot-to-scene-id map (`Bvh2::prim_indices`) to report scene ids, and
//! intersects with the watertight test of Woop, Benthin and Wald (JCGT 2013)
//! from `caustic-geom`, the same arithmetic as [`crate::BruteForce`].
//!
//! Hits are deterministic: the smallest `t` in `(tmin, tmax)`, and among
//! equal `t` the lowest scene id, whatever the tree's shape. Leaves therefore
//! accept hits at exactly the current closest distance and keep the one with
//! the lower id.

use super::build::{BinnedSahBuilder, Bvh2Builder};
use super::traverse::{RayBoxTest, traverse};
use super::{Bvh2, MAX_DEPTH, sah_cost};
use crate::slab_ray::next_up;
use crate::{Accel, AccelStats, BuildInput, is_traceable};
use caustic_geom::{Hit, Ray, RayTriangleTest, Triangle};
use rayon::prelude::*;
use std::time::Instant;

/// A binary BVH over triangles with its triangles in leaf order.
#[derive(Clone, Debug)]
pub struct TriangleBvh {
    bvh: Bvh2,
    /// `triangles[k]` is the scene triangle `bvh.prim_indices[k]`.
    triangles: Vec<Triangle>,
    /// Triangles in the scene (fewer than slots where spatial splits put a
    /// triangle in several leaves).
    scene_len: usize,
    stats: AccelStats,
}

impl TriangleBvh {
    /// Builds with the default `bvh-binned` builder.
    pub fn build(triangles: &[Triangle]) -> Self {
        Self::build_with(triangles, &BinnedSahBuilder::default())
    }

    /// Builds with `builder`; `stats().build_ms` covers the boxes, the
    /// build and the reordering of the triangles. `stats().peak_build_bytes`
    /// is the [`BuildInput`] plus the larger of the builder's own peak and
    /// the output (tree and triangle copies), or 0 when the builder does
    /// not count its memory.
    pub fn build_with(triangles: &[Triangle], builder: &dyn Bvh2Builder) -> Self {
        let start = Instant::now();
        let input = BuildInput::from_triangles(triangles);
        let (bvh, builder_peak) = builder.build_triangles(&input, triangles);
        let leaf_triangles = in_leaf_order(&bvh, triangles);
        let build_ms = start.elapsed().as_secs_f64() * 1e3;
        let mut accel = Self::assemble(
            bvh,
            leaf_triangles,
            triangles.len(),
            builder.name(),
            build_ms,
        );
        if builder_peak > 0 {
            let input_bytes = std::mem::size_of_val(input.bounds.as_slice())
                + std::mem::size_of_val(input.centroids.as_slice());
            accel.stats.peak_build_bytes = input_bytes + builder_peak.max(accel.stats.bytes);
        }
        accel
    }

    /// Moves the triangles to `triangles` (the same triangles in the same
    /// order, at new positions) and refits the boxes to them, keeping the
    /// topology ([`Bvh2::refit`]); `stats().sah_cost` is the refitted
    /// tree's and `stats().build_ms` the refit's wall time (what it took to
    /// make the tree traceable again). A tree with spatial splits
    /// (`bvh-spatial`) refits its leaves to whole triangles: exact hits
    /// still, but the cut parts' tight boxes are gone until a rebuild.
    ///
    /// # Errors
    /// When `triangles` has another length than the tree was built over.
    pub fn refit(&mut self, triangles: &[Triangle]) -> Result<(), String> {
        if triangles.len() != self.scene_len {
            return Err(format!(
                "refit: {} triangles for a tree over {}",
                triangles.len(),
                self.scene_len
            ));
        }
        let start = Instant::now();
        let input = BuildInput::from_triangles(triangles);
        self.bvh.refit(&input.bounds)?;
        self.triangles = in_leaf_order(&self.bvh, triangles);
        self.stats.sah_cost = sah_cost(&self.bvh);
        self.stats.build_ms = start.elapsed().as_secs_f64() * 1e3;
        Ok(())
    }

    /// Wraps a hierarchy built elsewhere (another builder, a GPU, a file)
    /// after checking it against `triangles`.
    pub fn from_bvh(bvh: Bvh2, triangles: &[Triangle], name: &'static str) -> Result<Self, String> {
        bvh.validate_any(&BuildInput::from_triangles(triangles).bounds)?;
        let leaf_triangles = in_leaf_order(&bvh, triangles);
        Ok(Self::assemble(
            bvh,
            leaf_triangles,
            triangles.len(),
            name,
            0.0,
        ))
    }

    fn assemble(
        bvh: Bvh2,
        triangles: Vec<Triangle>,
        scene_len: usize,
        name: &'static str,
        build_ms: f64,
    ) -> Self {
        let shape = bvh.shape();
        assert!(shape.max_depth <= MAX_DEPTH, "BVH deeper than MAX_DEPTH");
        let bytes = std::mem::size_of_val(bvh.nodes.as_slice())
            + std::mem::size_of_val(bvh.prim_indices.as_slice())
            + std::mem::size_of_val(triangles.as_slice());
        let stats = AccelStats {
            name,
            build_ms,
            sah_cost: sah_cost(&bvh),
            nodes: shape.nodes,
            leaves: shape.leaves,
            max_depth: shape.max_depth,
            max_leaf_size: shape.max_leaf_size,
            avg_leaf_size: if shape.leaves == 0 {
                0.0
            } else {
                shape.prims as f32 / shape.leaves as f32
            },
            bytes,
            // Scene triangles; slots (`shape.prims`) may count a cut one twice.
            prims: scene_len,
            peak_build_bytes: 0,
        };
        Self {
            bvh,
            triangles,
            scene_len,
            stats,
        }
    }

    /// The hierarchy.
    pub fn bvh(&self) -> &Bvh2 {
        &self.bvh
    }

    /// Triangles in leaf-slot order.
    pub fn leaf_triangles(&self) -> &[Triangle] {
        &self.triangles
    }
}

/// `triangles` permuted into the order of the leaf slots.
fn in_leaf_order(bvh: &Bvh2, triangles: &[Triangle]) -> Vec<Triangle> {
    let gather = |&id: &u32| triangles[id as usize];
    if bvh.prim_indices.len() >= 16 * 1024 {
        bvh.prim_indices.par_iter().map(gather).collect()
    } else {
        bvh.prim_indices.iter().map(gather).collect()
    }
}

impl Accel for TriangleBvh {
    fn intersect(&self, ray: &Ray) -> Option<Hit> {
        if !is_traceable(ray) {
            return None;
        }
        let boxes = RayBoxTest::new(ray.origin, ray.dir);
        let test = RayTriangleTest::new(ray.origin, ray.dir);
        let mut best: Option<Hit> = None;
        let mut closest = ray.tmax;
        traverse::<false>(&self.bvh.nodes, &boxes, ray.tmin, ray.tmax, |slots| {
            let mut improved = false;
            // Accept `t == closest` too, so equal distances go to the lower id.
            let mut limit = next_up(closest);
            for slot in slots {
                let Some(h) = test.intersect(&self.triangles[slot], ray.tmin, limit) else {
                    continue;
                };
                let prim = self.bvh.prim_indices[slot];
                if h.t < closest || best.is_some_and(|b| prim < b.prim) {
                    closest = h.t;
                    limit = next_up(closest);
                    best = Some(Hit {
                        t: h.t,
                        prim,
                        u: h.u,
                        v: h.v,
                    });
                    improved = true;
                }
            }
            improved.then_some(closest)
        });
        best
    }

    fn occluded(&self, ray: &Ray) -> bool {
        if !is_traceable(ray) {
            return false;
        }
        let boxes = RayBoxTest::new(ray.origin, ray.dir);
        let test = RayTriangleTest::new(ray.origin, ray.dir);
        traverse::<true>(&self.bvh.nodes, &boxes, ray.tmin, ray.tmax, |slots| {
            self.triangles[slots]
                .iter()
                .find_map(|tri| test.intersect(tri, ray.tmin, ray.tmax))
                .map(|h| h.t)
        })
    }

    fn stats(&self) -> &AccelStats {
        &self.stats
    }

    fn name(&self) -> &'static str {
        self.stats.name
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use caustic_geom::Vec3;

    #[test]
    fn next_up_steps_one_ulp() {
        assert_eq!(next_up(1.0), 1.0 + f32::EPSILON);
        assert_eq!(next_up(0.0), f32::from_bits(1));
        assert_eq!(next_up(-0.0), f32::from_bits(1));
        assert!(next_up(-1.0) > -1.0);
        assert_eq!(next_up(f32::INFINITY), f32::INFINITY);
        assert_eq!(next_up(f32::NEG_INFINITY), f32::MIN);
    }

    fn quad_tris(z: f32) -> [Triangle; 2] {
        let (a, b, c, d) = (
            Vec3::new(0.0, 0.0, z),
            Vec3::new(1.0, 0.0, z),
            Vec3::new(1.0, 1.0, z),
            Vec3::new(0.0, 1.0, z),
        );
        [Triangle::new(a, b, c), Triangle::new(a, c, d)]
    }

    #[test]
    fn hits_report_scene_ids_and_prefer_lower_ids_on_ties() {
        let mut tris: Vec<Triangle> = (0..50).flat_map(|i| quad_tris(i as f32)).collect();
        // Same quad again at z = 10: the copies tie with ids 20 and 21.
        tris.extend(quad_tris(10.0));
        let bvh = TriangleBvh::build(&tris);
        let ray = Ray::new(Vec3::new(0.7, 0.2, 9.5), Vec3::Z);
        let hit = bvh.intersect(&ray).unwrap();
        assert_eq!((hit.prim, hit.t), (20, 0.5));
        let ray = Ray::new(Vec3::new(0.2, 0.7, 10.5), -Vec3::Z);
        assert_eq!(bvh.intersect(&ray).unwrap().prim, 21);
        assert!(bvh.occluded(&ray));
        assert!(!bvh.occluded(&Ray::segment(ray.origin, ray.dir, 0.0, 0.5)));
    }

    #[test]
    fn empty_scene_always_misses() {
        let bvh = TriangleBvh::build(&[]);
        let ray = Ray::new(Vec3::ZERO, Vec3::X);
        assert_eq!(bvh.intersect(&ray), None);
        assert!(!bvh.occluded(&ray));
        assert_eq!(bvh.stats().nodes, 0);
        assert_eq!(bvh.stats().sah_cost, 0.0);
    }

    #[test]
    fn invalid_rays_miss_without_panicking() {
        let bvh = TriangleBvh::build(&quad_tris(1.0));
        let o = Vec3::new(0.5, 0.2, 0.0);
        for ray in [
            Ray::new(Vec3::splat(f32::NAN), Vec3::Z),
            Ray::new(o, Vec3::new(f32::NAN, 0.0, 1.0)),
            Ray::new(o, Vec3::ZERO),
            Ray::new(o, Vec3::new(0.0, 0.0, f32::INFINITY)),
            Ray::new(Vec3::new(0.5, 0.2, f32::NEG_INFINITY), Vec3::Z),
            Ray::segment(o, Vec3::Z, 2.0, 1.0),
            Ray::segment(o, Vec3::Z, 1.0, 1.0),
            Ray::segment(o, Vec3::Z, f32::NAN, 5.0),
            Ray::segment(o, Vec3::Z, 0.0, f32::NAN),
        ] {
            assert_eq!(bvh.intersect(&ray), None, "{ray:?}");
            assert!(!bvh.occluded(&ray), "{ray:?}");
        }
        assert!(bvh.intersect(&Ray::new(o, Vec3::Z)).is_some());
    }

    #[test]
    fn from_bvh_rejects_a_tree_of_other_triangles() {
        let tris = quad_tris(0.0);
        let built = TriangleBvh::build(&tris);
        let moved = quad_tris(5.0);
        assert!(TriangleBvh::from_bvh(built.bvh().clone(), &moved, "x").is_err());
        let again = TriangleBvh::from_bvh(built.bvh().clone(), &tris, "x").unwrap();
        assert_eq!(again.stats().nodes, built.stats().nodes);
    }
}
