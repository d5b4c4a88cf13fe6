//! [`TriangleKdTree`]: a [`KdTree`] over triangles, ready to trace
//! (`kdtree`). It keeps one copy of the triangles in scene order and
//! reaches them through the leaf references, and intersects with the
//! watertight test of `caustic-geom`, the same arithmetic as
//! [`crate::BruteForce`]. Unlike the BVH it does not copy triangles into
//! leaf order: references duplicate triangles (2 to 5 times on the test
//! scenes), and on sibenik a copy per reference took 7.5 MB more for the
//! same trace speed.
//!
//! Hits follow the crate contract: the smallest `t` in `(tmin, tmax)`,
//! ties to the lowest scene id. A triangle met again in a later leaf gives
//! the same `t` and id, so it never displaces itself; leaves accept a hit
//! at exactly the current closest distance only for a lower id.

use super::traverse::traverse;
use super::{KdTree, KdTreeBuilder, KdTreeConfig};
use crate::slab_ray::SlabRay;
use crate::slab_ray::next_up;
use crate::{Accel, AccelStats, is_traceable};
use caustic_geom::{Hit, Ray, RayTriangleTest, Triangle};
use std::time::Instant;

/// A kd-tree over triangles with its triangles in reference order.
#[derive(Clone, Debug)]
pub struct TriangleKdTree {
    tree: KdTree,
    /// The scene's triangles, in scene order.
    triangles: Vec<Triangle>,
    /// Largest absolute coordinate of the tree's cell, for the traversal's
    /// plane tolerance.
    scale: f32,
    stats: AccelStats,
}

impl TriangleKdTree {
    /// Builds with [`KdTreeConfig::DEFAULT`].
    pub fn build(triangles: &[Triangle]) -> Self {
        Self::build_with(triangles, KdTreeConfig::DEFAULT)
    }

    /// Builds with `config`; `stats().build_ms` covers the tree and the
    /// copy of the triangles.
    pub fn build_with(triangles: &[Triangle], config: KdTreeConfig) -> Self {
        let start = Instant::now();
        let (tree, peak) = KdTreeBuilder::new(config).build_counted(triangles);
        let copy = triangles.to_vec();
        let build_ms = start.elapsed().as_secs_f64() * 1e3;
        let mut accel = Self::assemble(tree, copy, build_ms);
        accel.stats.peak_build_bytes = peak + std::mem::size_of_val(accel.triangles.as_slice());
        accel
    }

    fn assemble(tree: KdTree, triangles: Vec<Triangle>, build_ms: f64) -> Self {
        let shape = tree.shape();
        let stats = AccelStats {
            name: "kdtree",
            build_ms,
            sah_cost: tree.sah_cost(),
            nodes: shape.nodes,
            leaves: shape.leaves,
            max_depth: shape.max_depth,
            max_leaf_size: shape.max_leaf_size,
            // References (a straddling triangle counts in each of its
            // leaves) per leaf, empty leaves included.
            avg_leaf_size: if shape.leaves == 0 {
                0.0
            } else {
                shape.references as f32 / shape.leaves as f32
            },
            bytes: tree.bytes() + std::mem::size_of_val(triangles.as_slice()),
            prims: triangles.len(),
            ..AccelStats::default()
        };
        let scale = if tree.is_empty() {
            0.0
        } else {
            tree.bounds
                .min
                .abs()
                .max(tree.bounds.max.abs())
                .max_element()
        };
        Self {
            tree,
            triangles,
            scale,
            stats,
        }
    }

    /// The tree.
    pub fn tree(&self) -> &KdTree {
        &self.tree
    }

    /// Triangle references over all leaves; divided by the triangle count,
    /// the duplication factor of clipping.
    pub fn references(&self) -> usize {
        self.tree.prims.len()
    }
}

impl Accel for TriangleKdTree {
    fn intersect(&self, ray: &Ray) -> Option<Hit> {
        if !is_traceable(ray) {
            return None;
        }
        let kd_ray = SlabRay::new(ray.origin, ray.dir, self.scale);
        let test = RayTriangleTest::new(ray.origin, ray.dir);
        let mut best: Option<Hit> = None;
        let mut closest = ray.tmax;
        traverse::<false>(&self.tree, &kd_ray, ray.tmin, ray.tmax, |refs| {
            let mut improved = false;
            // Accept `t == closest` too, so equal distances go to the lower id.
            let mut limit = next_up(closest);
            for &prim in &self.tree.prims[refs] {
                let Some(h) = test.intersect(&self.triangles[prim as usize], ray.tmin, limit)
                else {
                    continue;
                };
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
        let kd_ray = SlabRay::new(ray.origin, ray.dir, self.scale);
        let test = RayTriangleTest::new(ray.origin, ray.dir);
        traverse::<true>(&self.tree, &kd_ray, ray.tmin, ray.tmax, |refs| {
            self.tree.prims[refs]
                .iter()
                .find_map(|&prim| {
                    test.intersect(&self.triangles[prim as usize], ray.tmin, ray.tmax)
                })
                .map(|h| h.t)
        })
    }

    fn stats(&self) -> &AccelStats {
        &self.stats
    }

    fn name(&self) -> &'static str {
        "kdtree"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BruteForce;
    use caustic_geom::Vec3;

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
        let mut tris: Vec<Triangle> = (0..100).flat_map(|i| quad_tris(i as f32)).collect();
        tris.extend(quad_tris(10.0));
        let kd = TriangleKdTree::build(&tris);
        let hit = kd
            .intersect(&Ray::new(Vec3::new(0.7, 0.2, 9.5), Vec3::Z))
            .unwrap();
        assert_eq!((hit.prim, hit.t), (20, 0.5));
        let ray = Ray::new(Vec3::new(0.2, 0.7, 10.5), -Vec3::Z);
        assert_eq!(kd.intersect(&ray).unwrap().prim, 21);
        assert!(kd.occluded(&ray));
        assert!(!kd.occluded(&Ray::segment(ray.origin, ray.dir, 0.0, 0.5)));
        assert!(kd.stats().nodes > 1 && kd.references() >= tris.len());
    }

    #[test]
    fn a_long_sliver_split_across_leaves_matches_brute_force() {
        // A sliver crossing a column of small triangles: it is clipped into
        // many leaves, and its rounded `t` must still win or lose exactly
        // as when every triangle is tested.
        let mut tris: Vec<Triangle> = (0..400)
            .map(|i| {
                let x = (i % 20) as f32 * 0.5;
                let y = (i / 20) as f32 * 0.5;
                let p = Vec3::new(x, y, 0.3 * (i % 7) as f32);
                Triangle::new(
                    p,
                    p + Vec3::new(0.4, 0.0, 0.1),
                    p + Vec3::new(0.0, 0.4, 0.2),
                )
            })
            .collect();
        tris.push(Triangle::new(
            Vec3::new(0.0, 0.0, 1.0),
            Vec3::new(10.0, 10.0, 1.0),
            Vec3::new(10.0, 10.00001, 1.0),
        ));
        let kd = TriangleKdTree::build(&tris);
        let brute = BruteForce::new(&tris);
        let mut rng = caustic_geom::Pcg32::new(3, 4);
        for _ in 0..20_000 {
            let s = rng.next_f32() * 10.0;
            let target = Vec3::new(s, s, 1.0);
            let origin = Vec3::new(
                rng.next_f32() * 20.0 - 5.0,
                rng.next_f32() * 20.0 - 5.0,
                rng.next_f32() * 6.0 - 3.0,
            );
            let ray = Ray::new(origin, target - origin);
            assert_eq!(kd.intersect(&ray), brute.intersect(&ray), "{ray:?}");
            assert_eq!(kd.occluded(&ray), brute.occluded(&ray), "{ray:?}");
        }
    }

    #[test]
    fn empty_and_invalid() {
        let kd = TriangleKdTree::build(&[]);
        assert_eq!(kd.intersect(&Ray::new(Vec3::ZERO, Vec3::X)), None);
        assert_eq!(kd.stats().nodes, 0);
        let kd = TriangleKdTree::build(&quad_tris(1.0));
        let o = Vec3::new(0.5, 0.2, 0.0);
        for ray in [
            Ray::new(Vec3::splat(f32::NAN), Vec3::Z),
            Ray::new(o, Vec3::ZERO),
            Ray::segment(o, Vec3::Z, 2.0, 1.0),
            Ray::segment(o, Vec3::Z, 0.0, f32::NAN),
        ] {
            assert_eq!(kd.intersect(&ray), None);
            assert!(!kd.occluded(&ray));
        }
        assert!(kd.intersect(&Ray::new(o, Vec3::Z)).is_some());
    }
}
