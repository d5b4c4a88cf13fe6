//! The uniform grid over triangles (`grid`), after Kalojanov and Slusallek
//! (Ivson 2009): a density-formula resolution and a multi-pass, sort-based
//! parallel build ([`build`]), traced by a 3D-DDA ([`dda`]).
//!
//! [`UniformGrid`] holds the cells as ranges into one reference array:
//! cell `c` (linear index `x + y R_x + z R_x R_y`) references
//! `prims[cell_start[c] .. cell_start[c + 1]]`, triangles in id order. The
//! triangles are kept once, in scene order: a triangle is referenced by
//! every cell it overlaps (3 to 5 times on the test scenes), and copying
//! it per reference cost sibenik 12.6 MB for no measurable speed. Invariants, checked by
//! [`UniformGrid::validate`] after every build in debug builds:
//! - the grid box is the box of the hittable triangles grown by
//!   `tolerance` on every side, so no axis has zero extent;
//! - `cell_start` is non-decreasing from 0 to `prims.len()`, and every
//!   reference's triangle (its box grown by `tolerance`) overlaps its cell;
//! - every hittable triangle is referenced by every cell that its grown box
//!   overlaps (or, with exact overlap, that the triangle overlaps): the
//!   reference count per triangle is checked against its cell range;
//! - the culling data are the boxes of the whole referenced triangles, per
//!   macro cell, and their running extremes per slab of macro cells.
//!
//! `tolerance` absorbs the rounding of the watertight test, which may
//! report a hit a few ulps beside a triangle, and of the DDA's cell
//! boundaries: a triangle is also referenced by the cells within
//! `tolerance` of it. Rays from origins so far away that the test's
//! rounding exceeds it take a slow path that is exact too (see [`dda`]).

pub mod build;
#[cfg(feature = "cuda")]
pub mod build_cuda;
pub mod dda;
#[cfg(feature = "cuda")]
pub mod dda_cuda;
mod overlap;
#[cfg(feature = "cuda")]
pub mod validate_cuda;

/// Origins up to `FAR_ORIGIN_SCALE - 1` times the scene's largest
/// coordinate away are covered by the tolerance; the references grow by a
/// tolerance of `TOLERANCE * FAR_ORIGIN_SCALE` (2.4e-4) times that
/// coordinate, a small fraction of a cell.
const FAR_ORIGIN_SCALE: f32 = 64.0;

use crate::slab_ray::next_up;
use crate::{Accel, AccelStats, is_traceable};
use caustic_geom::{Aabb, Hit, Ray, RayTriangleTest, Triangle, Vec3};
use std::ops::Range;
use std::time::Instant;

/// Settings of the grid builder.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GridConfig {
    /// Cells per triangle (the density `k` of the resolution formula).
    pub density: f32,
    /// Put a triangle only in the cells it overlaps (exact separating-axis
    /// test), not in every cell its box overlaps.
    pub exact_overlap: bool,
    /// Cells per side of a macro cell, the unit of culling.
    pub macro_size: usize,
}

impl GridConfig {
    /// `grid`: Ivson's (2009) density `k = 5`, box overlap as in the paper,
    /// 4^3-cell macro cells.
    pub const DEFAULT: Self = Self {
        density: 5.0,
        exact_overlap: false,
        macro_size: 4,
    };
}

impl Default for GridConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// A uniform grid over triangles, ready to trace.
#[derive(Clone, Debug, Default)]
pub struct UniformGrid {
    /// The grid box (see the module docs); empty for a grid over nothing.
    pub bounds: Aabb,
    /// Cells per axis.
    pub res: [u32; 3],
    pub cell_size: Vec3,
    /// Reciprocal cell size.
    pub inv_cell_size: Vec3,
    /// Rounding margin in scene units (see the module docs).
    pub tolerance: f32,
    /// `cell_count() + 1` entries; cell `c` references
    /// `cell_start[c] .. cell_start[c + 1]`.
    pub cell_start: Vec<u32>,
    /// Scene index of each reference's triangle.
    pub prims: Vec<u32>,
    /// The scene's triangles, in scene order.
    pub triangles: Vec<Triangle>,
    /// Cells per side of a macro cell.
    pub macro_size: usize,
    /// Macro cells per axis.
    pub macro_res: [u32; 3],
    /// Per macro cell, the box of the whole triangles its cells reference.
    pub macro_bounds: Vec<Aabb>,
    /// Per axis and slab of macro cells: (smallest lower face of the macro
    /// boxes at or above the slab, largest upper face at or below it).
    pub slab_bounds: [Vec<(f32, f32)>; 3],
    /// Working memory of the build (see `build`).
    pub peak_build_bytes: usize,
    stats: AccelStats,
}

impl UniformGrid {
    /// Builds with [`GridConfig::DEFAULT`].
    pub fn build(triangles: &[Triangle]) -> Self {
        Self::build_with(triangles, &GridConfig::DEFAULT)
    }

    /// Builds with `config`; `stats().build_ms` covers all passes.
    pub fn build_with(triangles: &[Triangle], config: &GridConfig) -> Self {
        let start = Instant::now();
        let mut grid = build::build(triangles, config);
        let build_ms = start.elapsed().as_secs_f64() * 1e3;
        if cfg!(debug_assertions) {
            grid.validate(triangles, config)
                .unwrap_or_else(|problem| panic!("grid built an invalid grid: {problem}"));
        }
        grid.stats = grid.make_stats(build_ms);
        grid
    }

    /// The grid's frame (box, resolution, tolerance) with no references.
    fn frame(scene: Aabb, hittable: usize, config: &GridConfig) -> Self {
        let mut grid = Self {
            bounds: Aabb::EMPTY,
            macro_size: config.macro_size.max(1),
            ..Self::default()
        };
        if hittable == 0 {
            return grid;
        }
        let scale = scene.min.abs().max(scene.max.abs()).max_element();
        // Covers the test's rounding for origins up to
        // (FAR_ORIGIN_SCALE - 1) * scale away: a camera a few model sizes
        // from a model centred on the origin (the buddha's, 3.2 units from
        // a 1-unit model) must not take the slow far-origin path, which
        // made its primary rays 200x slower with a factor of 4.
        grid.tolerance = dda::TOLERANCE * FAR_ORIGIN_SCALE * scale.max(f32::MIN_POSITIVE);
        let margin = Vec3::splat(grid.tolerance);
        grid.bounds = Aabb::new(scene.min - margin, scene.max + margin);
        grid.res = build::resolution(scene.extent(), hittable, config.density);
        let res = Vec3::from_array(grid.res.map(|r| r as f32));
        grid.cell_size = grid.bounds.extent() / res;
        grid.inv_cell_size = res / grid.bounds.extent();
        grid.macro_res = grid.res.map(|r| r.div_ceil(grid.macro_size as u32));
        grid
    }

    pub fn is_empty(&self) -> bool {
        self.prims.is_empty()
    }

    pub fn cell_count(&self) -> usize {
        self.res.iter().map(|&r| r as usize).product()
    }

    pub fn macro_count(&self) -> usize {
        self.macro_res.iter().map(|&r| r as usize).product()
    }

    /// Linear index of cell `idx`.
    #[inline(always)]
    pub fn linear(&self, idx: [u32; 3]) -> usize {
        let [rx, ry, _] = self.res.map(|r| r as usize);
        idx[0] as usize + rx * (idx[1] as usize + ry * idx[2] as usize)
    }

    /// The cell holding `p`, clamped to the grid.
    pub fn cell_of(&self, p: Vec3) -> [u32; 3] {
        let rel = (p - self.bounds.min) * self.inv_cell_size;
        [0, 1, 2].map(|k| (rel[k].max(0.0) as u32).min(self.res[k] - 1))
    }

    /// The box of cell `idx`, with the same boundary arithmetic as the DDA.
    pub fn cell_box(&self, idx: [u32; 3]) -> Aabb {
        let lo = [0, 1, 2].map(|k| self.boundary(k, idx[k] as i64));
        let hi = [0, 1, 2].map(|k| self.boundary(k, idx[k] as i64 + 1));
        Aabb::new(Vec3::from_array(lo), Vec3::from_array(hi))
    }

    /// Coordinate of the `i`th cell boundary on `axis`.
    #[inline(always)]
    pub fn boundary(&self, axis: usize, i: i64) -> f32 {
        self.bounds.min[axis] + i as f32 * self.cell_size[axis]
    }

    /// Reference range of the cell with linear index `c`.
    #[inline(always)]
    pub fn cell_refs(&self, c: usize) -> Range<usize> {
        self.cell_start[c] as usize..self.cell_start[c + 1] as usize
    }

    /// Bytes held: cell ranges, references, triangles, culling data.
    pub fn bytes(&self) -> usize {
        std::mem::size_of_val(self.cell_start.as_slice())
            + std::mem::size_of_val(self.prims.as_slice())
            + std::mem::size_of_val(self.triangles.as_slice())
            + std::mem::size_of_val(self.macro_bounds.as_slice())
            + self.slab_bounds.iter().map(|s| 8 * s.len()).sum::<usize>()
    }

    fn make_stats(&self, build_ms: f64) -> AccelStats {
        let cells = if self.is_empty() {
            0
        } else {
            self.cell_count()
        };
        let max_leaf_size = (0..cells).map(|c| self.cell_refs(c).len()).max();
        AccelStats {
            name: "grid",
            build_ms,
            // No hierarchy: the SAH is not defined for a grid.
            sah_cost: 0.0,
            // The cells are reported as leaves; there are no inner nodes.
            nodes: 0,
            leaves: cells,
            max_depth: 0,
            max_leaf_size: max_leaf_size.unwrap_or(0),
            // References per cell, empty cells included.
            avg_leaf_size: if cells == 0 {
                0.0
            } else {
                self.prims.len() as f32 / cells as f32
            },
            bytes: self.bytes(),
            prims: self.triangles.len(),
            peak_build_bytes: self.peak_build_bytes,
        }
    }

    /// Checks the invariants of the module docs against the triangles the
    /// grid was built from and its config; returns the first violation.
    pub fn validate(&self, triangles: &[Triangle], config: &GridConfig) -> Result<(), String> {
        let hittable: Vec<usize> = (0..triangles.len())
            .filter(|&i| triangles[i].is_finite())
            .collect();
        if self.is_empty() {
            return match hittable.first() {
                Some(i) => Err(format!("no references, but triangle {i} can be hit")),
                None => Ok(()),
            };
        }
        self.check_layout()?;
        let margin = Vec3::splat(self.tolerance);
        let mut per_triangle = vec![0usize; triangles.len()];
        for c in 0..self.cell_count() {
            let idx = self.unlinear(c);
            let cell = self.cell_box(idx);
            let grown = Aabb::new(cell.min - margin * 2.0, cell.max + margin * 2.0);
            for slot in self.cell_refs(c) {
                let prim = self.prims[slot] as usize;
                let Some(tri) = triangles.get(prim) else {
                    return Err(format!("cell {idx:?} references triangle {prim}"));
                };
                if !tri.is_finite() || tri.bounds().intersection(grown).is_empty() {
                    return Err(format!("cell {idx:?} references {prim}, outside it"));
                }
                per_triangle[prim] += 1;
            }
        }
        for i in hittable {
            let b = triangles[i].bounds();
            let (lo, hi) = (self.cell_of(b.min - margin), self.cell_of(b.max + margin));
            let boxed: usize = (0..3).map(|k| (hi[k] - lo[k] + 1) as usize).product();
            let ok = if config.exact_overlap {
                (1..=boxed).contains(&per_triangle[i])
            } else {
                per_triangle[i] == boxed
            };
            if !ok {
                return Err(format!(
                    "triangle {i} is in {} cells, its box covers {boxed}",
                    per_triangle[i]
                ));
            }
        }
        self.check_culling_data(triangles)
    }

    /// Cell ranges and array sizes.
    fn check_layout(&self) -> Result<(), String> {
        let cells = self.cell_count();
        if self.cell_start.len() != cells + 1
            || self.cell_start[0] != 0
            || self.cell_start[cells] as usize != self.prims.len()
        {
            return Err("cell ranges do not tile the references".into());
        }
        if self.cell_start.windows(2).any(|w| w[0] > w[1]) {
            return Err("cell starts decrease".into());
        }
        if self.macro_bounds.len() != self.macro_count() {
            return Err("one culling box per macro cell expected".into());
        }
        Ok(())
    }

    /// Every macro box holds the whole triangles of its cells.
    fn check_culling_data(&self, triangles: &[Triangle]) -> Result<(), String> {
        let m = self.macro_size as u32;
        for c in 0..self.cell_count() {
            let idx = self.unlinear(c);
            let mi = idx.map(|v| v / m);
            let [mx, my, _] = self.macro_res;
            let b = self.macro_bounds[(mi[0] + mx * (mi[1] + my * mi[2])) as usize];
            for &p in &self.prims[self.cell_refs(c)] {
                if !b.contains(&triangles[p as usize].bounds()) {
                    return Err(format!("macro cell {mi:?} does not hold triangle {p}"));
                }
            }
        }
        Ok(())
    }

    /// Cell coordinates of linear index `c`.
    fn unlinear(&self, c: usize) -> [u32; 3] {
        let [rx, ry, _] = self.res.map(|r| r as usize);
        [c % rx, (c / rx) % ry, c / (rx * ry)].map(|v| v as u32)
    }
}

/// The last few triangles a ray was tested against: a triangle spanning
/// several cells along the ray is met in each, and testing it again gives
/// the same answer (same `t`, same id, so the tie rule keeps the first), so
/// it is skipped. This "mailbox" (Amanatides and Woo 1987 keep one per
/// triangle; a short per-ray ring needs no shared state) only saves work.
#[derive(Clone, Copy, Debug)]
struct Mailbox {
    ids: [u32; MAILBOX],
    next: usize,
}

/// Triangles a [`Mailbox`] remembers.
const MAILBOX: usize = 8;

impl Default for Mailbox {
    fn default() -> Self {
        Self {
            ids: [u32::MAX; MAILBOX],
            next: 0,
        }
    }
}

impl Mailbox {
    /// Whether `id` was seen recently; remembers it if not.
    #[inline(always)]
    fn seen(&mut self, id: u32) -> bool {
        if self.ids.contains(&id) {
            return true;
        }
        self.ids[self.next % MAILBOX] = id;
        self.next += 1;
        false
    }
}

impl Accel for UniformGrid {
    fn intersect(&self, ray: &Ray) -> Option<Hit> {
        if !is_traceable(ray) {
            return None;
        }
        let test = RayTriangleTest::new(ray.origin, ray.dir);
        let mut best: Option<Hit> = None;
        let mut closest = ray.tmax;
        let mut mailbox = Mailbox::default();
        dda::traverse::<false>(self, ray, |refs| {
            let mut improved = false;
            // Accept `t == closest` too, so equal distances go to the lower id.
            let mut limit = next_up(closest);
            for &prim in &self.prims[refs] {
                if mailbox.seen(prim) {
                    continue;
                }
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
        let test = RayTriangleTest::new(ray.origin, ray.dir);
        let mut mailbox = Mailbox::default();
        dda::traverse::<true>(self, ray, |refs| {
            self.prims[refs]
                .iter()
                .filter(|&&prim| !mailbox.seen(prim))
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
        "grid"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BruteForce;
    use caustic_geom::Pcg32;

    fn soup(count: usize, seed: u64) -> Vec<Triangle> {
        let mut rng = Pcg32::new(seed, 5);
        let mut coord = |scale: f32| (rng.next_f32() - 0.5) * scale;
        (0..count)
            .map(|_| {
                let p = Vec3::new(coord(10.0), coord(10.0), coord(10.0));
                let mut q = || p + Vec3::new(coord(1.5), coord(1.5), coord(1.5));
                Triangle::new(p, q(), q())
            })
            .collect()
    }

    #[test]
    fn builds_valid_grids_with_both_overlap_tests() {
        let tris = soup(2000, 1);
        for exact in [false, true] {
            let config = GridConfig {
                exact_overlap: exact,
                ..GridConfig::DEFAULT
            };
            let grid = UniformGrid::build_with(&tris, &config);
            grid.validate(&tris, &config).unwrap();
            let cells = grid.cell_count() as f32;
            assert!((cells / 10_000.0 - 1.0).abs() < 0.5, "{:?}", grid.res);
            assert_eq!(grid.stats().prims, 2000);
        }
        let boxed = UniformGrid::build(&tris).prims.len();
        let exact = UniformGrid::build_with(
            &tris,
            &GridConfig {
                exact_overlap: true,
                ..GridConfig::DEFAULT
            },
        );
        assert!(exact.prims.len() < boxed);
    }

    #[test]
    fn corrupt_grids_fail_validation() {
        let tris = soup(300, 2);
        let config = GridConfig::DEFAULT;
        let good = UniformGrid::build(&tris);
        let mut bad = good.clone();
        let last = bad.prims.len() - 1;
        bad.prims.swap(0, last);
        assert!(bad.validate(&tris, &config).is_err());
        let mut bad = good.clone();
        let c = (0..bad.cell_count())
            .find(|&c| !bad.cell_refs(c).is_empty())
            .unwrap();
        bad.cell_start[c + 1] -= 1;
        assert!(bad.validate(&tris, &config).is_err());
        let mut bad = good.clone();
        bad.macro_bounds[0] = Aabb::EMPTY;
        let first_macro_used = (0..bad.cell_count())
            .any(|c| bad.unlinear(c).iter().all(|&v| v < 4) && !bad.cell_refs(c).is_empty());
        assert_eq!(bad.validate(&tris, &config).is_err(), first_macro_used);
    }

    #[test]
    fn degenerate_scenes() {
        let brute_check = |tris: &[Triangle]| {
            let grid = UniformGrid::build(tris);
            let brute = BruteForce::new(tris);
            let mut rng = Pcg32::new(4, 4);
            for _ in 0..2000 {
                let mut c = || rng.next_f32() * 4.0 - 2.0;
                let ray = Ray::new(Vec3::new(c(), c(), c()), Vec3::new(c(), c(), c()));
                assert_eq!(grid.intersect(&ray), brute.intersect(&ray), "{ray:?}");
                assert_eq!(grid.occluded(&ray), brute.occluded(&ray), "{ray:?}");
            }
            grid
        };
        assert!(brute_check(&[]).is_empty());
        let nan = Triangle::new(Vec3::splat(f32::NAN), Vec3::X, Vec3::Y);
        assert!(brute_check(&[nan]).is_empty());
        // Flat, a line of triangles, one huge triangle among small ones.
        let flat: Vec<Triangle> = soup(200, 3)
            .into_iter()
            .map(|t| {
                let squash = Vec3::new(0.2, 0.2, 0.0);
                Triangle::new(t.v0 * squash, t.v1 * squash, t.v2 * squash)
            })
            .collect();
        brute_check(&flat);
        let mut mixed = soup(200, 4);
        mixed.push(Triangle::new(
            Vec3::new(-1e5, -1e5, 0.0),
            Vec3::new(1e5, -1e5, 0.1),
            Vec3::new(0.0, 1e5, -0.1),
        ));
        brute_check(&mixed);
        let same = vec![Triangle::new(Vec3::ZERO, Vec3::X, Vec3::Y); 50];
        let grid = brute_check(&same);
        assert_eq!(grid.res[2], 1);
    }
}
