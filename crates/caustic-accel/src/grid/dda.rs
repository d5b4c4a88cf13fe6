//! Grid traversal by the 3D-DDA of Amanatides and Woo, "A Fast Voxel
//! Traversal Algorithm for Ray Tracing" (Eurographics 1987), as Ivson's (2009)
//! tracer uses it, generic over closest-hit and any-hit (`ANY_HIT`) and
//! over the cell test (a closure over a range of references).
//!
//! The walk steps from cell to cell along the axis whose next boundary the
//! ray reaches first; boundary distances are recomputed from the cell
//! index at every step (not accumulated), so they carry one rounding, not
//! one per step. Ivson 2009 accepts a hit only inside the current cell and
//! stops at the first cell with one; the crate's exact contract rules that
//! out (`crate::slab_ray`: the test's `t` for a sliver or a grazing ray can
//! lie cells away from the crossing, so a triangle met later may report a
//! smaller `t`). Instead:
//!
//! - the walk is two-level: it steps over *macro cells*
//!   (`macro_size`^3 cells) and walks the cells of a macro cell only when
//!   the box of the whole triangles referenced there can hold a hit in
//!   `[t_min, closest hit]` (`SlabRay::reach`; as in the kd-tree, the
//!   check is skipped when the macro cell's own interval overlaps that
//!   range). Hits are taken wherever they lie, the closest wins, ties to
//!   the lowest id;
//! - it stops when every macro cell still ahead lies in slabs (along the
//!   ray's depth axis) whose referenced triangles all start beyond the
//!   closest hit: the running bounds `slab_bounds` give that test in one
//!   load. It starts, likewise, at the first slab whose triangles can
//!   reach `t_min`, skipping the part of the line behind the origin;
//! - every triangle is referenced by the cells within the grid's
//!   tolerance of it, which covers the test's sideways rounding for
//!   origins up to 63 times the scene's coordinates away; rays from
//!   farther away test every macro cell the ray (made `delta` thick)
//!   passes, in any order, which is slow and exact.

use super::UniformGrid;
use crate::slab_ray::SlabRay;
use caustic_geom::{Aabb, Ray};
use std::ops::Range;

pub use crate::slab_ray::TOLERANCE;

/// A 3D-DDA walk over an index box of a lattice whose cells are `span`
/// grid cells wide.
#[derive(Clone, Copy, Debug)]
struct Walk {
    idx: [i64; 3],
    step: [i64; 3],
    lo: [i64; 3],
    hi: [i64; 3],
    /// Per axis, the `t` of the next boundary (infinite where the ray is
    /// parallel to the axis).
    next: [f32; 3],
    span: i64,
}

impl Walk {
    /// Starts in the lattice cell holding the ray's point at `t`, clamped
    /// to the index box `lo ..= hi`.
    fn start(
        grid: &UniformGrid,
        ray: &SlabRay,
        span: i64,
        lo: [i64; 3],
        hi: [i64; 3],
        t: f32,
    ) -> Self {
        let mut walk = Self {
            idx: [0; 3],
            step: [0; 3],
            lo,
            hi,
            next: [f32::INFINITY; 3],
            span,
        };
        for k in 0..3 {
            let p = if ray.parallel[k] {
                ray.origin[k]
            } else {
                ray.origin[k] + t * ray.dir[k]
            };
            let cells = (p - grid.bounds.min[k]) * grid.inv_cell_size[k];
            // `as` maps NaN to 0 and saturates; the clamp does the rest.
            walk.idx[k] = ((cells / span as f32).floor() as i64).clamp(lo[k], hi[k]);
            walk.step[k] = match (ray.parallel[k], ray.negative[k]) {
                (true, _) => 0,
                (false, true) => -1,
                (false, false) => 1,
            };
            walk.next[k] = walk.boundary_t(grid, ray, k);
        }
        walk
    }

    /// The `t` at which the ray leaves the current lattice cell on `k`.
    fn boundary_t(&self, grid: &UniformGrid, ray: &SlabRay, k: usize) -> f32 {
        if self.step[k] == 0 {
            return f32::INFINITY;
        }
        let face = self.idx[k] + i64::from(self.step[k] > 0);
        (grid.boundary(k, face * self.span) - ray.origin[k]) * ray.inv_dir[k]
    }

    /// Where the ray leaves the current lattice cell.
    fn exit(&self) -> f32 {
        self.next[0].min(self.next[1]).min(self.next[2])
    }

    /// Steps into the next cell; false when the walk leaves its index box.
    fn advance(&mut self, grid: &UniformGrid, ray: &SlabRay) -> bool {
        let k = if self.next[0] <= self.next[1] && self.next[0] <= self.next[2] {
            0
        } else if self.next[1] <= self.next[2] {
            1
        } else {
            2
        };
        if self.next[k] == f32::INFINITY {
            return false;
        }
        self.idx[k] += self.step[k];
        if self.idx[k] < self.lo[k] || self.idx[k] > self.hi[k] {
            return false;
        }
        self.next[k] = self.boundary_t(grid, ray, k);
        true
    }
}

/// Traverses `grid` for `ray` over `(ray.tmin, ray.tmax)`.
///
/// `cell(refs)` tests the references in that range and returns `Some(t)`
/// when it found a hit that becomes the new closest distance `t` (it keeps
/// the hit itself). With `ANY_HIT` the walk stops at the first such cell;
/// otherwise it goes on, culling by `t`. Returns whether any cell reported
/// a hit. `ray` must be traceable.
pub fn traverse<const ANY_HIT: bool>(
    grid: &UniformGrid,
    ray: &Ray,
    mut cell: impl FnMut(Range<usize>) -> Option<f32>,
) -> bool {
    if grid.is_empty() {
        return false;
    }
    let scale = grid
        .bounds
        .min
        .abs()
        .max(grid.bounds.max.abs())
        .max_element();
    let sr = SlabRay::new(ray.origin, ray.dir, scale);
    // A direction whose depth component has no finite reciprocal cannot
    // produce a finite `t` in the triangle test.
    if sr.parallel[sr.depth] {
        return false;
    }
    let (t_min, mut cutoff) = (ray.tmin, ray.tmax);
    if sr.delta > grid.tolerance {
        return far_origin::<ANY_HIT>(grid, &sr, t_min, cutoff, cell);
    }
    let Some((t_in, t_out)) = sr.clip_to(&grid.bounds, 0.0) else {
        return false;
    };
    let Some(t_start) = first_relevant_t(grid, &sr, t_min, t_in) else {
        return false;
    };
    if t_start > t_out {
        return false;
    }
    let m = grid.macro_size as i64;
    let last_macro = grid.macro_res.map(|r| r as i64 - 1);
    let last_cell = grid.res.map(|r| r as i64 - 1);
    let mut outer = Walk::start(grid, &sr, m, [0; 3], last_macro, t_start);
    let mut t_enter = t_start;
    let mut found = false;
    loop {
        if nothing_ahead(grid, &sr, outer.idx, cutoff) {
            return found;
        }
        let t_exit = outer.exit().min(t_out);
        let b = &grid.macro_bounds[macro_index(grid, outer.idx)];
        let relevant =
            (t_enter <= cutoff && t_exit >= t_min) || sr.reach(b, t_min, cutoff).is_some();
        if !b.is_empty() && relevant {
            let lo = outer.idx.map(|i| i * m);
            let hi = [0, 1, 2].map(|k| (lo[k] + m - 1).min(last_cell[k]));
            let mut inner = Walk::start(grid, &sr, 1, lo, hi, t_enter);
            loop {
                let refs = grid.cell_refs(grid.linear(inner.idx.map(|i| i as u32)));
                let hit = if refs.is_empty() { None } else { cell(refs) };
                if let Some(t) = hit {
                    found = true;
                    if ANY_HIT {
                        return true;
                    }
                    cutoff = t;
                }
                if !inner.advance(grid, &sr) {
                    break;
                }
            }
        }
        if t_exit >= t_out || !outer.advance(grid, &sr) {
            return found;
        }
        t_enter = t_exit;
    }
}

/// Linear index of macro cell `idx`.
fn macro_index(grid: &UniformGrid, idx: [i64; 3]) -> usize {
    let [mx, my, _] = grid.macro_res.map(|r| r as usize);
    idx[0] as usize + mx * (idx[1] as usize + my * idx[2] as usize)
}

/// Whether no triangle in the macro cells from `idx` on (along the ray's
/// depth axis) can report a `t` up to `cutoff`.
fn nothing_ahead(grid: &UniformGrid, ray: &SlabRay, idx: [i64; 3], cutoff: f32) -> bool {
    let k = ray.depth;
    let (lows, highs) = grid.slab_bounds[k][idx[k] as usize];
    // Running down the axis, the cells ahead lie at or below this slab and
    // their triangles' closest face is the highest upper face.
    let face = if ray.negative[k] { highs } else { lows };
    SlabRay::below(ray.depth_t(face)) > cutoff
}

/// Where the walk may start: the line's entry `t_in`, or later where the
/// slabs behind the origin hold only triangles that end before `t_min`.
/// `None` when no triangle can report a `t` from `t_min` on.
fn first_relevant_t(grid: &UniformGrid, ray: &SlabRay, t_min: f32, t_in: f32) -> Option<f32> {
    let k = ray.depth;
    let slabs = &grid.slab_bounds[k];
    let reaches = |face: f32| SlabRay::above(ray.depth_t(face)) >= t_min;
    let m = grid.macro_size as i64;
    let plane = if ray.negative[k] {
        // Slabs above `s` hold triangles whose lowest face is above the
        // suffix minimum of slab `s + 1`.
        let s = (0..slabs.len()).rev().find(|&s| reaches(slabs[s].0))?;
        grid.boundary(k, ((s as i64 + 1) * m).min(grid.res[k] as i64))
    } else {
        let s = (0..slabs.len()).find(|&s| reaches(slabs[s].1))?;
        grid.boundary(k, s as i64 * m)
    };
    Some(t_in.max(ray.depth_t(plane)))
}

/// The slow exact path for rays whose origin is so far away that the
/// triangle test's sideways rounding may exceed the grid's tolerance:
/// every macro cell that the `delta`-thick ray passes and whose triangles
/// can report a `t` up to the closest hit is tested, cell by cell.
fn far_origin<const ANY_HIT: bool>(
    grid: &UniformGrid,
    ray: &SlabRay,
    t_min: f32,
    t_max: f32,
    mut cell: impl FnMut(Range<usize>) -> Option<f32>,
) -> bool {
    let m = grid.macro_size as u32;
    let [mx, my, _] = grid.macro_res.map(|r| r as usize);
    let mut cutoff = t_max;
    let mut found = false;
    for (index, b) in grid.macro_bounds.iter().enumerate() {
        let mi = [index % mx, (index / mx) % my, index / (mx * my)].map(|v| v as u32);
        let lo = mi.map(|v| v * m);
        let hi = [0, 1, 2].map(|k| (lo[k] + m).min(grid.res[k]));
        let region = Aabb::new(grid.cell_box(lo).min, grid.cell_box(hi.map(|h| h - 1)).max);
        if b.is_empty()
            || ray.clip_to(&region, ray.delta).is_none()
            || ray.reach(b, t_min, cutoff).is_none()
        {
            continue;
        }
        for z in lo[2]..hi[2] {
            for y in lo[1]..hi[1] {
                for x in lo[0]..hi[0] {
                    let refs = grid.cell_refs(grid.linear([x, y, z]));
                    if refs.is_empty() {
                        continue;
                    }
                    if let Some(t) = cell(refs) {
                        found = true;
                        if ANY_HIT {
                            return true;
                        }
                        cutoff = t;
                    }
                }
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grid::GridConfig;
    use caustic_geom::{Triangle, Vec3};

    /// A flat grid of 10 x 10 cells of side 0.95 from x = y = 0.25, over
    /// a 10 x 10 array of small triangles, for walking.
    fn plane_grid() -> UniformGrid {
        let tris: Vec<Triangle> = (0..100)
            .map(|i| {
                let p = Vec3::new((i % 10) as f32 + 0.25, (i / 10) as f32 + 0.25, 0.0);
                Triangle::new(p, p + Vec3::X * 0.5, p + Vec3::Y * 0.5)
            })
            .collect();
        let config = GridConfig {
            // sqrt(0.95 * 100) = 9.7 cells per side: 10.
            density: 0.95,
            macro_size: 1,
            ..GridConfig::DEFAULT
        };
        UniformGrid::build_with(&tris, &config)
    }

    #[test]
    fn dda_steps_through_the_cells_a_line_crosses() {
        let grid = plane_grid();
        assert_eq!(grid.res, [10, 10, 1]);
        // From (0.5, 0.5) towards (9.5, 3.5): slope 1/3, so it crosses
        // three horizontal boundaries and nine vertical ones: 13 cells.
        let ray = SlabRay::new(Vec3::new(0.5, 0.5, 0.0), Vec3::new(9.0, 3.0, 0.0), 10.0);
        let mut walk = Walk::start(&grid, &ray, 1, [0; 3], [9, 9, 0], 0.0);
        let mut cells = vec![walk.idx];
        while walk.advance(&grid, &ray) {
            cells.push(walk.idx);
        }
        assert_eq!(cells.first(), Some(&[0, 0, 0]));
        assert_eq!(cells.last(), Some(&[9, 3, 0]));
        assert_eq!(cells.len(), 13);
        // Each step moves one cell along one axis.
        for w in cells.windows(2) {
            let moved: i64 = (0..3).map(|k| (w[1][k] - w[0][k]).abs()).sum();
            assert_eq!(moved, 1);
        }
        // Exit distances grow along the walk.
        let mut walk = Walk::start(&grid, &ray, 1, [0; 3], [9, 9, 0], 0.0);
        let mut last = walk.exit();
        while walk.advance(&grid, &ray) {
            assert!(walk.exit() >= last);
            last = walk.exit();
        }
    }

    #[test]
    fn a_ray_down_an_axis_walks_backwards_and_stays_in_its_row() {
        let grid = plane_grid();
        let ray = SlabRay::new(Vec3::new(9.5, 4.5, 0.0), Vec3::new(-1.0, 0.0, -0.0), 10.0);
        let mut walk = Walk::start(&grid, &ray, 1, [0; 3], [9, 9, 0], 0.0);
        let mut xs = vec![walk.idx[0]];
        while walk.advance(&grid, &ray) {
            assert_eq!((walk.idx[1], walk.idx[2]), (4, 0));
            xs.push(walk.idx[0]);
        }
        assert_eq!(xs, (0..10).rev().collect::<Vec<_>>());
    }

    #[test]
    fn behind_the_origin_is_skipped_and_far_slabs_stop_the_walk() {
        let grid = plane_grid();
        // Depth axis x, origin at x = 6.5 looking +x: slabs below x = 5
        // hold triangles ending before the origin.
        let ray = SlabRay::new(Vec3::new(6.5, 0.5, 0.0), Vec3::X, 10.0);
        let (t_in, _) = ray.clip_to(&grid.bounds, 0.0).unwrap();
        let start = first_relevant_t(&grid, &ray, 0.0, t_in).unwrap();
        assert!(start > -1.5 && start < 0.0, "{start}");
        // With a hit at t = 1 (x = 7.5), the slab of x = 9 holds nothing
        // that can report less.
        assert!(nothing_ahead(&grid, &ray, [9, 0, 0], 1.0));
        assert!(!nothing_ahead(&grid, &ray, [7, 0, 0], 1.0));
    }
}
