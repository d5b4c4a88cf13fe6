//! Uniform grid construction after Kalojanov and Slusallek, "A Parallel
//! Algorithm for Construction of Uniform Grids" (HPG 2009): the
//! resolution from a density formula, then a sort-based build in passes
//! that need no atomics or per-cell lists:
//!
//! 1. **Resolution**: `R_a = ceil(d_a * cbrt(k N / V))` for the scene box's
//!    extents `d`, volume `V`, `N` triangles and density `k` (5 by
//!    default), so the grid has about `k N` roughly cubic cells. Axes on
//!    which the scene is flat (or too thin for one cell) get one cell and
//!    the formula is solved over the others (`sqrt` for a plane).
//! 2. **Count**: per triangle, the cells its box overlaps (grown by the
//!    grid's tolerance, see [`super::UniformGrid`]), optionally only those
//!    the triangle itself overlaps (`super::overlap`).
//! 3. **Scan**: an exclusive prefix sum of the counts gives each triangle
//!    its run of (cell, triangle) pairs.
//! 4. **Write** the pairs, each triangle into its own run, in parallel.
//! 5. **Sort** the pairs by cell. The paper radix-sorts `(cell, triangle)`
//!    key–value pairs; here the pair is one `u64` key (cell in the high
//!    word) and rayon's parallel unstable sort orders it. Keys are unique,
//!    so the result is deterministic and triangles stay in id order within
//!    a cell.
//! 6. **Cell ranges**: each cell's start is a binary search for its first
//!    pair (the paper's per-cell search, one task per cell); cell `c`
//!    holds pairs `start[c] .. start[c + 1]`.
//!
//! Finally each *macro cell* ([`GridConfig::macro_size`]^3 cells) gets the
//! box of the whole triangles referenced in it, and each axis the running
//! bounds of those boxes over slabs of macro cells: the traversal's
//! culling data (see [`super::dda`]).

use super::overlap::triangle_overlaps_box;
use super::{GridConfig, UniformGrid};
use caustic_geom::{Aabb, Triangle, Vec3};
use rayon::prelude::*;

/// Most cells per axis, and in all.
const MAX_RES: u32 = 1 << 12;
const MAX_CELLS: u64 = 1 << 28;

/// Triangles per parallel task in the counting and writing passes.
const CHUNK: usize = 2048;

/// Cell resolution for `count` triangles over a box of `extent` at
/// `density` cells per triangle (see the module docs). Never zero.
pub fn resolution(extent: Vec3, count: usize, density: f32) -> [u32; 3] {
    let target = (density * count as f32).max(1.0) as f64;
    let extent = extent.to_array().map(|e| e.max(0.0) as f64);
    let mut active = extent.map(|e| e > 0.0);
    let mut scale = 0.0;
    // Solve for the cells per unit length over the axes that get more than
    // one cell; an axis that would get less drops out and the rest share
    // the target.
    for _ in 0..3 {
        let dims = active.iter().filter(|&&a| a).count();
        if dims == 0 {
            break;
        }
        let measure: f64 = (0..3).filter(|&k| active[k]).map(|k| extent[k]).product();
        scale = (target / measure).powf(1.0 / dims as f64);
        let thin: Vec<usize> = (0..3)
            .filter(|&k| active[k] && extent[k] * scale < 1.0)
            .collect();
        if thin.is_empty() {
            break;
        }
        for k in thin {
            active[k] = false;
        }
    }
    let mut res = [0, 1, 2].map(|k| {
        if active[k] {
            ((extent[k] * scale).ceil() as u32).clamp(1, MAX_RES)
        } else {
            1
        }
    });
    while res.iter().map(|&r| r as u64).product::<u64>() > MAX_CELLS {
        res = res.map(|r| (r / 2).max(1));
    }
    res
}

/// Inclusive cell index range of a box, clamped to the grid.
fn cell_range(grid: &UniformGrid, b: &Aabb) -> ([u32; 3], [u32; 3]) {
    let lo = grid.cell_of(b.min);
    let hi = grid.cell_of(b.max);
    (lo, hi)
}

/// Builds the grid over `triangles` (see the module docs).
pub fn build(triangles: &[Triangle], config: &GridConfig) -> UniformGrid {
    let boxes: Vec<Option<Aabb>> = triangles
        .par_iter()
        .map(|t| t.is_finite().then(|| t.bounds()))
        .collect();
    let scene = boxes.iter().flatten().fold(Aabb::EMPTY, |a, b| a.union(*b));
    let hittable = boxes.iter().flatten().count();
    let mut grid = UniformGrid::frame(scene, hittable, config);
    grid.triangles = triangles.to_vec();
    if hittable == 0 {
        return grid;
    }
    let margin = Vec3::splat(grid.tolerance);
    let grown: Vec<Option<Aabb>> = boxes
        .par_iter()
        .map(|b| b.map(|b| Aabb::new(b.min - margin, b.max + margin)))
        .collect();
    let cells_of = |i: usize| covered_cells(&grid, &triangles[i], grown[i], config.exact_overlap);
    // Pass 1: count.
    let counts: Vec<u32> = (0..triangles.len())
        .into_par_iter()
        .with_min_len(CHUNK)
        .map(|i| cells_of(i).count() as u32)
        .collect();
    // Pass 2: exclusive scan.
    let mut offsets = Vec::with_capacity(counts.len() + 1);
    let mut total = 0u64;
    for &c in &counts {
        offsets.push(total as usize);
        total += c as u64;
    }
    offsets.push(total as usize);
    assert!(
        total < u32::MAX as u64,
        "grid too large for 32-bit references"
    );
    // Pass 3: write the (cell, triangle) pairs, each chunk of triangles
    // into its own slice of the output.
    let mut keys = vec![0u64; total as usize];
    let mut slices = Vec::with_capacity(triangles.len() / CHUNK + 1);
    let mut rest = keys.as_mut_slice();
    for start in (0..triangles.len()).step_by(CHUNK) {
        let end = (start + CHUNK).min(triangles.len());
        let (head, tail) = rest.split_at_mut(offsets[end] - offsets[start]);
        slices.push((start..end, head));
        rest = tail;
    }
    slices.into_par_iter().for_each(|(range, out)| {
        let mut at = 0;
        for i in range {
            for cell in cells_of(i) {
                out[at] = (cell as u64) << 32 | i as u64;
                at += 1;
            }
        }
    });
    // Pass 4: sort by cell (then triangle id).
    keys.par_sort_unstable();
    // Pass 5: cell ranges by binary search.
    let cells = grid.cell_count();
    grid.cell_start = (0..=cells)
        .into_par_iter()
        .map(|c| keys.partition_point(|&k| ((k >> 32) as usize) < c) as u32)
        .collect();
    grid.prims = keys.par_iter().map(|&k| k as u32).collect();
    grid.peak_build_bytes = std::mem::size_of_val(boxes.as_slice())
        + std::mem::size_of_val(grown.as_slice())
        + std::mem::size_of_val(counts.as_slice())
        + std::mem::size_of_val(offsets.as_slice())
        + std::mem::size_of_val(keys.as_slice())
        + grid.bytes();
    drop(keys);
    grid.macro_bounds = macro_bounds(&grid, triangles);
    grid.slab_bounds = slab_bounds(&grid);
    grid
}

/// Linear indices of the cells a triangle is put in: those its grown box
/// overlaps, or with `exact` those the triangle overlaps (grown cells).
fn covered_cells<'a>(
    grid: &'a UniformGrid,
    tri: &'a Triangle,
    grown: Option<Aabb>,
    exact: bool,
) -> impl Iterator<Item = usize> + 'a {
    let range = grown.map(|b| cell_range(grid, &b));
    let margin = Vec3::splat(grid.tolerance);
    range
        .into_iter()
        .flat_map(|(lo, hi)| {
            (lo[2]..=hi[2]).flat_map(move |z| {
                (lo[1]..=hi[1]).flat_map(move |y| (lo[0]..=hi[0]).map(move |x| [x, y, z]))
            })
        })
        .filter(move |&idx| {
            if !exact {
                return true;
            }
            let cell = grid.cell_box(idx);
            triangle_overlaps_box(tri, &Aabb::new(cell.min - margin, cell.max + margin))
        })
        .map(|idx| grid.linear(idx))
}

/// Per macro cell, the box of the whole triangles referenced in its cells.
fn macro_bounds(grid: &UniformGrid, triangles: &[Triangle]) -> Vec<Aabb> {
    let [mx, my, _] = grid.macro_res.map(|r| r as usize);
    let m = grid.macro_size as u32;
    (0..grid.macro_count())
        .into_par_iter()
        .map(|index| {
            let mi = [index % mx, (index / mx) % my, index / (mx * my)].map(|v| v as u32);
            let mut b = Aabb::EMPTY;
            for z in mi[2] * m..((mi[2] + 1) * m).min(grid.res[2]) {
                for y in mi[1] * m..((mi[1] + 1) * m).min(grid.res[1]) {
                    for x in mi[0] * m..((mi[0] + 1) * m).min(grid.res[0]) {
                        for &p in &grid.prims[grid.cell_refs(grid.linear([x, y, z]))] {
                            b = b.union(triangles[p as usize].bounds());
                        }
                    }
                }
            }
            b
        })
        .collect()
}

/// Per axis, over the slabs of macro cells along it: the smallest lower
/// face of the macro boxes in slabs at or above each slab (suffix minimum)
/// and the largest upper face in slabs at or below it (prefix maximum).
fn slab_bounds(grid: &UniformGrid) -> [Vec<(f32, f32)>; 3] {
    let res = grid.macro_res.map(|r| r as usize);
    std::array::from_fn(|axis| {
        let mut lows = vec![f32::INFINITY; res[axis]];
        let mut highs = vec![f32::NEG_INFINITY; res[axis]];
        for (index, b) in grid.macro_bounds.iter().enumerate() {
            let coords = [
                index % res[0],
                (index / res[0]) % res[1],
                index / (res[0] * res[1]),
            ];
            let slab = coords[axis];
            lows[slab] = lows[slab].min(b.min[axis]);
            highs[slab] = highs[slab].max(b.max[axis]);
        }
        for s in (0..res[axis].saturating_sub(1)).rev() {
            lows[s] = lows[s].min(lows[s + 1]);
        }
        for s in 1..res[axis] {
            highs[s] = highs[s].max(highs[s - 1]);
        }
        lows.into_iter().zip(highs).collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolution_follows_the_density_formula() {
        // 1000 triangles in a 2 x 1 x 1 box at k = 5: cbrt(5000 / 2) =
        // 13.57 cells per unit, so 28 x 14 x 14.
        assert_eq!(
            resolution(Vec3::new(2.0, 1.0, 1.0), 1000, 5.0),
            [28, 14, 14]
        );
        // A flat scene: sqrt(5000 / 2) = 50 per unit over the two axes.
        assert_eq!(
            resolution(Vec3::new(2.0, 1.0, 0.0), 1000, 5.0),
            [100, 50, 1]
        );
        // A thin slab gets one cell through it, the rest share the target.
        assert_eq!(
            resolution(Vec3::new(2.0, 1.0, 1e-4), 1000, 5.0),
            [100, 50, 1]
        );
        // A line, a point, nothing.
        assert_eq!(resolution(Vec3::new(0.0, 3.0, 0.0), 10, 5.0), [1, 50, 1]);
        assert_eq!(resolution(Vec3::ZERO, 10, 5.0), [1, 1, 1]);
        assert_eq!(resolution(Vec3::ONE, 0, 5.0), [1, 1, 1]);
        // Huge counts stay within the cell budget.
        let r = resolution(Vec3::ONE, usize::MAX / 8, 5.0);
        assert!(r.iter().map(|&r| r as u64).product::<u64>() <= MAX_CELLS);
    }

    #[test]
    fn slab_bounds_are_running_extremes() {
        let tris: Vec<Triangle> = (0..40)
            .map(|i| {
                let p = Vec3::new(i as f32, (i % 3) as f32, 0.0);
                Triangle::new(p, p + Vec3::X * 0.5, p + Vec3::Y * 0.5)
            })
            .collect();
        let grid = build(&tris, &GridConfig::DEFAULT);
        let [x, _, _] = &grid.slab_bounds;
        assert!(x.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1));
        assert!(x[0].0 <= 0.0 && x[x.len() - 1].1 >= 39.5);
    }
}
