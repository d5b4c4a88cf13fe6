//! `hashgrid`: photon search by spatial hashing, after Fleisz, "Photon
//! Mapping on the GPU" (M.Sc. thesis, Edinburgh 2009), who
//! adapted the sort-based neighbour grid of Green's CUDA particles sample.
//!
//! Build (Fleisz §3.3):
//! 1. cell edge = the maximum query radius `r_max`; the grid covers the
//!    points' bounds plus one padding cell per side (origin = min − r_max);
//! 2. every point gets `(hash(cell), index)`, with the **linear** hash
//!    (Green, Eq. 3.2: the cell's linear index, one bucket per cell, no
//!    collisions) or the **Teschner** hash (Teschner et al. 2003, Eq. 3.3:
//!    XOR of the cell coordinates times three large primes, masked to a
//!    power-of-two table; collisions possible);
//! 3. the pairs are radix sorted by hash ([`super::radix_sort`], parallel);
//! 4. the bucket table is found from the sorted hashes. Fleisz stores
//!    `(start, end)` per bucket; here one array `start[b]` of `buckets + 1`
//!    entries, `end[b] = start[b + 1]` (CSR form, half the memory);
//! 5. point positions and input indices are reordered into sorted order so a
//!    bucket's points are contiguous.
//!
//! Query (Fleisz §3.4): visit the 27 cells around the query's cell, the
//! **centre cell first** (his 15 % speed-up: the nearest points arrive
//! first, so the bounded list fills with good candidates early), and keep
//! the k nearest in a bounded sorted list. Points of colliding cells in a
//! bucket are rejected by the distance test. With the Teschner hash two of
//! the 27 cells can map to the same bucket; such **duplicate buckets are
//! skipped**, so no point is offered twice (a gap in the thesis).
//!
//! Beyond the thesis, so that every query is exact:
//! - the cells visited are those overlapping the query's bounding box, cell
//!   coordinates computed by the same monotone float map as at build time,
//!   so a radius larger than the cell (or infinite) visits a larger block;
//!   when that block has at least as many cells as the table has buckets,
//!   the whole point array is scanned once instead;
//! - cell coordinates are clamped to the grid, so queries far outside it
//!   need no special case;
//! - a cell whose box is farther from the query than the current bound
//!   (the radius, or the k-th distance once the list is full) is skipped;
//!   with the centre cell first the list fills early, which matters most
//!   in dense caustic maps (the weak spot Fleisz measured). The box test is
//!   conservative by a few float ulps, so it never drops a point;
//! - a linear grid that would need more than [`HashGridConfig::max_linear_cells_per_point`]
//!   cells per point (tiny radius, huge scene) switches to the Teschner
//!   hash, keeping memory `O(n)`; [`PointStats::detail`] says which was used.

use super::neighbours::SortedList;
use super::radix_sort::sort_pairs;
use super::{Neighbour, PointStats, PointStructure, dist2, query_is_valid};
use caustic_geom::{Aabb, Vec3};
use rayon::prelude::*;
use std::ops::Range;
use std::time::Instant;

/// Teschner et al.'s primes (VMV 2003), which the thesis cites but does not
/// list.
const TESCHNER_PRIMES: [u32; 3] = [73_856_093, 19_349_663, 83_492_791];

/// Grid cells per axis at most, so cell coordinates fit `i32` comfortably.
const MAX_AXIS_CELLS: f32 = (1 << 21) as f32;

/// Relative slack added to the query radius when choosing cells, so that
/// points that pass `dist2 <= r²` only through rounding are still visited.
const RADIUS_SLACK: f32 = 1e-5;

/// The 3×3×3 neighbourhood, the centre cell first (Fleisz §3.1).
const NEIGHBOUR_OFFSETS: [[i32; 3]; 27] = centre_first_offsets();

const fn centre_first_offsets() -> [[i32; 3]; 27] {
    let mut out = [[0; 3]; 27];
    let mut n = 1;
    let mut i: i32 = 0;
    while i < 27 {
        let o = [i % 3 - 1, (i / 3) % 3 - 1, i / 9 - 1];
        if o[0] != 0 || o[1] != 0 || o[2] != 0 {
            out[n] = o;
            n += 1;
        }
        i += 1;
    }
    out
}

/// Which function maps a cell to a bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HashFunction {
    /// The cell's linear index in the grid (Green; Fleisz Eq. 3.2).
    Linear,
    /// `(x·p1 ⊕ y·p2 ⊕ z·p3) mod 2^table_bits` (Teschner et al. 2003;
    /// Fleisz Eq. 3.3). `table_bits = 0` sizes the table to about twice the
    /// point count.
    Teschner { table_bits: u32 },
}

/// How to build a [`PointHashGrid`].
#[derive(Clone, Debug, PartialEq)]
pub struct HashGridConfig {
    /// Cell edge: the largest query radius. Non-finite or non-positive
    /// values choose `diagonal / cbrt(n)` (about one point per cell for a
    /// uniform cloud).
    pub cell_size: f32,
    pub hash: HashFunction,
    /// A linear grid with more cells than this per point uses the Teschner
    /// hash (auto-sized) instead.
    pub max_linear_cells_per_point: usize,
}

impl HashGridConfig {
    /// The default: linear hash, cells of `max_radius`.
    pub fn with_radius(max_radius: f32) -> Self {
        Self {
            cell_size: max_radius,
            hash: HashFunction::Linear,
            max_linear_cells_per_point: 16,
        }
    }

    /// Teschner hash with a table sized to the point count.
    pub fn teschner(max_radius: f32) -> Self {
        Self {
            hash: HashFunction::Teschner { table_bits: 0 },
            ..Self::with_radius(max_radius)
        }
    }

    /// Fleisz's benchmark setting: Teschner hash with 2^14 buckets.
    pub fn fleisz_teschner(max_radius: f32) -> Self {
        Self {
            hash: HashFunction::Teschner { table_bits: 14 },
            ..Self::with_radius(max_radius)
        }
    }
}

impl Default for HashGridConfig {
    fn default() -> Self {
        Self::with_radius(f32::INFINITY)
    }
}

/// The grid's geometry and bucket function, fixed at build time.
#[derive(Clone, Copy, Debug)]
struct Grid {
    origin: Vec3,
    cell: f32,
    inv_cell: f32,
    dims: [i32; 3],
    /// The hash actually used (the linear grid may have fallen back).
    hash: HashFunction,
    buckets: usize,
}

impl Grid {
    fn new(bounds: Aabb, n: usize, config: &HashGridConfig) -> Self {
        let extent = bounds.extent();
        let auto = bounds.diagonal() / (n.max(1) as f32).cbrt();
        let wanted = if config.cell_size.is_finite() && config.cell_size > 0.0 {
            config.cell_size
        } else if auto > 0.0 {
            auto
        } else {
            1.0 // one point, or all coincident: any cell will do
        };
        // A cell that keeps every axis under MAX_AXIS_CELLS and 1/cell
        // finite (so the cell map stays monotone).
        let cell = wanted
            .max(extent.max_element() / (MAX_AXIS_CELLS - 3.0))
            .max(f32::MIN_POSITIVE * 1e6);
        let dims = [0, 1, 2].map(|a| (extent[a] / cell).floor() as i32 + 3);
        let cells: u64 = dims.iter().map(|&d| d as u64).product();
        let budget = (config.max_linear_cells_per_point as u64 * n as u64).max(1 << 12);
        let hash = match config.hash {
            HashFunction::Linear if cells <= budget.min(1 << 31) => HashFunction::Linear,
            HashFunction::Linear => HashFunction::Teschner { table_bits: 0 },
            other => other,
        };
        let hash = match hash {
            HashFunction::Teschner { table_bits: 0 } => HashFunction::Teschner {
                table_bits: (2 * n.max(8)).next_power_of_two().trailing_zeros().min(30),
            },
            HashFunction::Teschner { table_bits } => HashFunction::Teschner {
                table_bits: table_bits.min(30),
            },
            linear => linear,
        };
        let buckets = match hash {
            HashFunction::Linear => cells as usize,
            HashFunction::Teschner { table_bits } => 1 << table_bits,
        };
        Self {
            origin: bounds.min - Vec3::splat(cell),
            cell,
            inv_cell: 1.0 / cell,
            dims,
            hash,
            buckets,
        }
    }

    /// The cell holding `p`, clamped to the grid. Monotone in each
    /// coordinate, which is what makes the box-of-cells query exact.
    #[inline(always)]
    fn cell_of(&self, p: Vec3) -> [i32; 3] {
        let c = ((p - self.origin) * self.inv_cell).floor();
        [0, 1, 2].map(|a| (c[a] as i32).clamp(0, self.dims[a] - 1))
    }

    /// `p` in cell units: the map [`Self::cell_of`] floors.
    #[inline(always)]
    fn scaled(&self, p: Vec3) -> Vec3 {
        (p - self.origin) * self.inv_cell
    }

    /// A lower bound on the squared distance from the query (`u`, in cell
    /// units) to any point stored in cell `c`. Border cells reach to
    /// infinity outwards (clamping puts stray points there), and the gap
    /// shrinks by a few float ulps of the coordinates, so rounding in the
    /// cell map can never make it exceed a stored point's true `dist2`.
    #[inline(always)]
    fn gap2(&self, u: Vec3, c: [i32; 3]) -> f32 {
        let mut sum = 0.0;
        for a in 0..3 {
            let lo = if c[a] == 0 {
                f32::NEG_INFINITY
            } else {
                c[a] as f32
            };
            let hi = if c[a] == self.dims[a] - 1 {
                f32::INFINITY
            } else {
                (c[a] + 1) as f32
            };
            let gap = (lo - u[a]).max(u[a] - hi).max(0.0);
            let slack = 4.0 * f32::EPSILON * (u[a].abs() + c[a] as f32 + 2.0);
            // NaN (an infinite u) becomes 0: never skip on doubt.
            let g = (gap - slack).max(0.0) * self.cell;
            sum += g * g;
        }
        sum * (1.0 - 1e-5)
    }

    #[inline(always)]
    fn bucket(&self, c: [i32; 3]) -> u32 {
        match self.hash {
            HashFunction::Linear => ((c[2] * self.dims[1] + c[1]) * self.dims[0] + c[0]) as u32,
            HashFunction::Teschner { table_bits } => {
                let h = (c[0] as u32).wrapping_mul(TESCHNER_PRIMES[0])
                    ^ (c[1] as u32).wrapping_mul(TESCHNER_PRIMES[1])
                    ^ (c[2] as u32).wrapping_mul(TESCHNER_PRIMES[2]);
                h & ((1u32 << table_bits) - 1)
            }
        }
    }

    fn key_bits(&self) -> u32 {
        usize::BITS - (self.buckets.max(2) - 1).leading_zeros()
    }
}

/// Points sorted into hash buckets.
pub struct PointHashGrid {
    grid: Grid,
    /// `start[b]..start[b + 1]` is bucket `b`'s run in `points`/`ids`.
    start: Vec<u32>,
    /// Positions in bucket order.
    points: Vec<Vec3>,
    /// Input index of each entry of `points`.
    ids: Vec<u32>,
    /// Bounds of the finite points (queries that miss it return at once).
    bounds: Aabb,
    len: usize,
    stats: PointStats,
}

impl PointHashGrid {
    pub fn build(points: &[Vec3], config: &HashGridConfig) -> Self {
        let start_time = Instant::now();
        let bounds = points
            .par_iter()
            .filter(|p| p.is_finite())
            .fold(|| Aabb::EMPTY, |b, &p| b.grown(p))
            .reduce(|| Aabb::EMPTY, Aabb::union);
        // With no finite point the grid is a placeholder that holds nothing.
        let grid = if bounds.is_empty() {
            Grid::new(Aabb::from_point(Vec3::ZERO), 0, config)
        } else {
            Grid::new(bounds, points.len(), config)
        };
        let mut pairs: Vec<u64> = points
            .par_iter()
            .enumerate()
            .filter(|(_, p)| p.is_finite())
            .map(|(i, &p)| (u64::from(grid.bucket(grid.cell_of(p))) << 32) | i as u64)
            .collect();
        sort_pairs(&mut pairs, grid.key_bits());
        let start = bucket_starts(&pairs, grid.buckets);
        let ids: Vec<u32> = pairs.par_iter().map(|&p| p as u32).collect();
        let sorted: Vec<Vec3> = ids.par_iter().map(|&i| points[i as usize]).collect();
        let mut grid_points = Self {
            grid,
            start,
            points: sorted,
            ids,
            bounds,
            len: points.len(),
            stats: PointStats::default(),
        };
        grid_points.stats = grid_points.compute_stats(start_time);
        if cfg!(debug_assertions) {
            grid_points
                .validate()
                .unwrap_or_else(|problem| panic!("hashgrid built an invalid grid: {problem}"));
        }
        grid_points
    }

    fn compute_stats(&self, start_time: Instant) -> PointStats {
        let (leaves, max_leaf) = self
            .start
            .par_windows(2)
            .map(|w| ((w[1] > w[0]) as usize, (w[1] - w[0]) as usize))
            .reduce(|| (0, 0), |a, b| (a.0 + b.0, a.1.max(b.1)));
        let hash = match self.grid.hash {
            HashFunction::Linear => "linear".to_string(),
            HashFunction::Teschner { table_bits } => format!("teschner 2^{table_bits}"),
        };
        PointStats {
            name: "hashgrid",
            build_ms: start_time.elapsed().as_secs_f64() * 1e3,
            points: self.len,
            bytes: self.start.len() * 4 + self.points.len() * 12 + self.ids.len() * 4,
            nodes: self.grid.buckets,
            leaves,
            max_depth: 0,
            max_leaf_size: max_leaf,
            detail: format!("{hash}, cell {:.4e}", 1.0 / self.grid.inv_cell),
        }
    }

    /// Checks the invariants: the bucket table is monotone and covers every
    /// point once, each point sits in the bucket its cell hashes to, and the
    /// indices are distinct.
    pub fn validate(&self) -> Result<(), String> {
        if self.start.len() != self.grid.buckets + 1 || self.start[0] != 0 {
            return Err("bucket table has the wrong size or start".into());
        }
        if self.start.windows(2).any(|w| w[1] < w[0]) {
            return Err("bucket starts are not monotone".into());
        }
        if *self.start.last().unwrap() as usize != self.points.len() {
            return Err("bucket table does not end at the point count".into());
        }
        for b in 0..self.grid.buckets {
            for j in self.bucket_run(b as u32) {
                let cell = self.grid.cell_of(self.points[j]);
                if self.grid.bucket(cell) != b as u32 {
                    return Err(format!("point {} is in bucket {b}", self.ids[j]));
                }
            }
        }
        let mut seen = vec![false; self.len];
        for &i in &self.ids {
            if std::mem::replace(&mut seen[i as usize], true) {
                return Err(format!("point {i} is stored twice"));
            }
        }
        Ok(())
    }

    #[inline(always)]
    fn bucket_run(&self, b: u32) -> Range<usize> {
        self.start[b as usize] as usize..self.start[b as usize + 1] as usize
    }

    /// The positions and input indices of bucket `b`.
    #[inline(always)]
    fn run(&self, b: u32) -> (&[Vec3], &[u32]) {
        let r = self.bucket_run(b);
        (&self.points[r.clone()], &self.ids[r])
    }

    /// Hands `visitor` the run of every bucket that may hold a point within
    /// `radius` of `query`, each bucket once, the centre cell first; cells
    /// farther than the visitor's current bound are skipped.
    fn for_each_run(&self, query: Vec3, radius: f32, visitor: &mut impl RunVisitor) {
        let reach = Vec3::splat(radius + radius * RADIUS_SLACK);
        let lo_p = query - reach;
        let hi_p = query + reach;
        if self.points.is_empty()
            || lo_p.cmpgt(self.bounds.max).any()
            || hi_p.cmplt(self.bounds.min).any()
        {
            return;
        }
        let lo = self.grid.cell_of(lo_p);
        let hi = self.grid.cell_of(hi_p);
        let centre = self.grid.cell_of(query);
        let u = self.grid.scaled(query);
        if (0..3).all(|a| lo[a] >= centre[a] - 1 && hi[a] <= centre[a] + 1) {
            self.for_each_run_27(u, centre, lo, hi, visitor);
            return;
        }
        let cells: u64 = (0..3).map(|a| (hi[a] - lo[a] + 1) as u64).product();
        let teschner = matches!(self.grid.hash, HashFunction::Teschner { .. });
        if teschner && cells >= self.grid.buckets as u64 {
            visitor.visit(&self.points, &self.ids);
            return;
        }
        let mut buckets = Vec::new();
        for_each_cell(lo, hi, |c| {
            if self.grid.gap2(u, c) <= visitor.bound2() {
                if teschner {
                    buckets.push(self.grid.bucket(c));
                } else {
                    // Linear buckets are distinct cells: visit at once.
                    let (points, ids) = self.run(self.grid.bucket(c));
                    visitor.visit(points, ids);
                }
            }
        });
        buckets.sort_unstable();
        buckets.dedup();
        for b in buckets {
            let (points, ids) = self.run(b);
            visitor.visit(points, ids);
        }
    }

    /// The designed case, radius at most one cell: the 27-cell table with
    /// the centre first; cells outside the query's box, cells beyond the
    /// current bound and duplicate buckets are skipped.
    fn for_each_run_27(
        &self,
        u: Vec3,
        centre: [i32; 3],
        lo: [i32; 3],
        hi: [i32; 3],
        visitor: &mut impl RunVisitor,
    ) {
        let dedup = matches!(self.grid.hash, HashFunction::Teschner { .. });
        let mut seen = [0u32; 27];
        let mut n_seen = 0;
        for off in &NEIGHBOUR_OFFSETS {
            let c = [0, 1, 2].map(|a| centre[a] + off[a]);
            if (0..3).any(|a| c[a] < lo[a] || c[a] > hi[a])
                || self.grid.gap2(u, c) > visitor.bound2()
            {
                continue;
            }
            let b = self.grid.bucket(c);
            if dedup {
                if seen[..n_seen].contains(&b) {
                    continue;
                }
                seen[n_seen] = b;
                n_seen += 1;
            }
            let (points, ids) = self.run(b);
            visitor.visit(points, ids);
        }
    }
}

/// Calls `f` for every cell of the inclusive block `lo..=hi`.
fn for_each_cell(lo: [i32; 3], hi: [i32; 3], mut f: impl FnMut([i32; 3])) {
    for z in lo[2]..=hi[2] {
        for y in lo[1]..=hi[1] {
            for x in lo[0]..=hi[0] {
                f([x, y, z]);
            }
        }
    }
}

/// What a query does with the bucket runs it is handed.
trait RunVisitor {
    /// The current squared search radius; cells beyond it are skipped.
    fn bound2(&self) -> f32;
    /// Tests the points of one run.
    fn visit(&mut self, points: &[Vec3], ids: &[u32]);
}

/// kNN: the bounded sorted list of Fleisz §3.4.
struct KnnVisitor<'o> {
    query: Vec3,
    radius2: f32,
    list: SortedList<'o>,
}

impl RunVisitor for KnnVisitor<'_> {
    #[inline(always)]
    fn bound2(&self) -> f32 {
        self.list.bound(self.radius2)
    }

    #[inline(always)]
    fn visit(&mut self, points: &[Vec3], ids: &[u32]) {
        for (&p, &id) in points.iter().zip(ids) {
            let d2 = dist2(p, self.query);
            if d2 <= self.list.bound(self.radius2) {
                self.list.offer(Neighbour::new(id, d2));
            }
        }
    }
}

/// Radius search: every point within a fixed radius.
struct RangeVisitor<F> {
    query: Vec3,
    radius2: f32,
    found: F,
}

impl<F: FnMut(Neighbour)> RunVisitor for RangeVisitor<F> {
    #[inline(always)]
    fn bound2(&self) -> f32 {
        self.radius2
    }

    #[inline(always)]
    fn visit(&mut self, points: &[Vec3], ids: &[u32]) {
        for (&p, &id) in points.iter().zip(ids) {
            let d2 = dist2(p, self.query);
            if d2 <= self.radius2 {
                (self.found)(Neighbour::new(id, d2));
            }
        }
    }
}

/// Buckets per rayon task when finding bucket starts.
const BUCKET_CHUNK: usize = 16 * 1024;

/// `start[b]`: the first sorted pair whose bucket is at least `b`, for
/// `b` in `0..=buckets` (Fleisz's cell start/end, in CSR form). Each task
/// binary-searches its first bucket, then walks the pairs sequentially.
fn bucket_starts(pairs: &[u64], buckets: usize) -> Vec<u32> {
    let bucket_of = |p: u64| (p >> 32) as usize;
    let mut start = vec![0u32; buckets + 1];
    start
        .par_chunks_mut(BUCKET_CHUNK)
        .enumerate()
        .for_each(|(c, chunk)| {
            let first = c * BUCKET_CHUNK;
            let mut pos = pairs.partition_point(|&p| bucket_of(p) < first);
            for (b, s) in (first..).zip(chunk.iter_mut()) {
                while pos < pairs.len() && bucket_of(pairs[pos]) < b {
                    pos += 1;
                }
                *s = pos as u32;
            }
        });
    start
}

impl PointStructure for PointHashGrid {
    fn name(&self) -> &'static str {
        "hashgrid"
    }

    fn len(&self) -> usize {
        self.len
    }

    fn knn(&self, query: Vec3, k: usize, max_radius: f32, out: &mut Vec<Neighbour>) {
        out.clear();
        if k == 0 || !query_is_valid(query, max_radius) {
            return;
        }
        let mut visitor = KnnVisitor {
            query,
            radius2: max_radius * max_radius,
            list: SortedList::new(out, k),
        };
        self.for_each_run(query, max_radius, &mut visitor);
    }

    fn for_each_in_radius(&self, query: Vec3, radius: f32, visit: &mut dyn FnMut(Neighbour)) {
        if !query_is_valid(query, radius) {
            return;
        }
        let mut visitor = RangeVisitor {
            query,
            radius2: radius * radius,
            found: visit,
        };
        self.for_each_run(query, radius, &mut visitor);
    }

    fn stats(&self) -> &PointStats {
        &self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_start_at_the_centre_and_cover_the_block_once() {
        assert_eq!(NEIGHBOUR_OFFSETS[0], [0, 0, 0]);
        let mut sorted = NEIGHBOUR_OFFSETS.to_vec();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), 27);
    }

    #[test]
    fn tiny_teschner_table_visits_each_point_once() {
        // 2^1 buckets: the 27 neighbour cells collide all the time.
        let points: Vec<Vec3> = (0..200)
            .map(|i| Vec3::new((i % 7) as f32, (i % 5) as f32, (i % 3) as f32) * 0.1)
            .collect();
        let config = HashGridConfig {
            hash: HashFunction::Teschner { table_bits: 1 },
            ..HashGridConfig::with_radius(0.1)
        };
        let grid = PointHashGrid::build(&points, &config);
        grid.validate().unwrap();
        let mut count = vec![0; points.len()];
        grid.for_each_in_radius(Vec3::splat(0.2), 0.1, &mut |n| count[n.index as usize] += 1);
        assert!(count.iter().all(|&c| c <= 1));
        assert!(count.contains(&1));
    }
}
