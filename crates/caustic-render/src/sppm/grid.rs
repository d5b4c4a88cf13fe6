//! The hash grid over visible points that photons look up (the reverse of
//! a photon map query: the points carry the radii, the photons ask).
//!
//! After Fleisz's spatial hash (Fleisz 2009, §3.2–3.3) and pbrt-v3's SPPM
//! grid:
//! - a point is entered into **every** cell its sphere overlaps, so a
//!   photon needs to look into its own cell only;
//! - cell edge = twice the radius at the 99th percentile
//!   ([`CELL_QUANTILE`]): 99 % of the spheres overlap at most 2×2×2 cells.
//!   Sizing by the largest radius instead made cells 7× wider on
//!   cornell-caustics (the few pixels seen through the glass sphere have
//!   footprints far above the rest) and a photon tested ~50× more points;
//! - cells are hashed with the Teschner hash (`x·p1 ⊕ y·p2 ⊕ z·p3`) into a
//!   power-of-two table of about twice as many buckets as points, so memory
//!   follows the number of points, not the scene extent;
//! - each point is entered once into every *distinct* bucket its sphere's
//!   cells hash to (two cells of one point may collide; listing it twice
//!   would count a photon twice); colliding cells only add candidates that
//!   the distance test rejects;
//! - the table is in CSR form (`start[b]..start[b + 1]` into `entries`),
//!   filled by a counting sort in point order, so a bucket lists its points
//!   in increasing index: the build is deterministic.

use caustic_geom::Vec3;

/// Large primes of the Teschner hash (Teschner et al. 2003).
const PRIMES: [u32; 3] = [73_856_093, 19_349_663, 83_492_791];

/// The radius quantile that sets the cell edge.
pub const CELL_QUANTILE: f64 = 0.99;

/// Visible points hashed by the cells their spheres overlap.
#[derive(Clone, Debug)]
pub struct VisiblePointGrid {
    origin: Vec3,
    inv_cell: f32,
    mask: u32,
    start: Vec<u32>,
    entries: Vec<u32>,
}

impl VisiblePointGrid {
    /// Hashes the spheres `(positions[i], radii[i])`. Non-finite positions
    /// and radii that are not positive are left out.
    pub fn build(positions: &[Vec3], radii: &[f32]) -> Self {
        let usable = |i: usize| positions[i].is_finite() && radii[i] > 0.0 && radii[i].is_finite();
        let n = positions.len().min(radii.len());
        let mut sizes: Vec<f32> = (0..n).filter(|&i| usable(i)).map(|i| radii[i]).collect();
        let cell_radius = quantile(&mut sizes, CELL_QUANTILE);
        let origin = (0..n)
            .filter(|&i| usable(i))
            .map(|i| positions[i] - radii[i])
            .fold(Vec3::splat(f32::INFINITY), Vec3::min);
        let buckets = (2 * n).next_power_of_two().max(2);
        let mut grid = Self {
            origin: if origin.is_finite() {
                origin
            } else {
                Vec3::ZERO
            },
            inv_cell: if cell_radius > 0.0 {
                0.5 / cell_radius
            } else {
                0.0
            },
            mask: (buckets - 1) as u32,
            start: Vec::new(),
            entries: Vec::new(),
        };
        let spheres: Vec<(Vec3, f32)> = (0..n)
            .filter(|&i| usable(i))
            .map(|i| (positions[i], radii[i]))
            .collect();
        let ids: Vec<u32> = (0..n as u32).filter(|&i| usable(i as usize)).collect();
        grid.fill(&spheres, &ids, buckets);
        grid
    }

    /// Indices of the points whose spheres may contain `p` (a superset:
    /// the caller tests the distance).
    pub fn candidates(&self, p: Vec3) -> &[u32] {
        if !p.is_finite() || self.entries.is_empty() {
            return &[];
        }
        let b = self.bucket(self.cell(p)) as usize;
        &self.entries[self.start[b] as usize..self.start[b + 1] as usize]
    }

    /// Points entered, counting each bucket a point is in.
    pub fn entry_count(&self) -> usize {
        self.entries.len()
    }

    /// Counting sort of the spheres into their buckets, in point order:
    /// one pass counts, one writes (hashing twice is cheaper than storing
    /// every point's bucket list).
    fn fill(&mut self, spheres: &[(Vec3, f32)], ids: &[u32], buckets: usize) {
        let mut start = vec![0u32; buckets + 1];
        let mut list = Vec::new();
        for &(p, r) in spheres {
            self.buckets_of(p, r, &mut list);
            for &b in &list {
                start[b as usize + 1] += 1;
            }
        }
        for b in 0..buckets {
            start[b + 1] += start[b];
        }
        let mut next = start.clone();
        let mut entries = vec![0u32; start[buckets] as usize];
        for (&(p, r), &id) in spheres.iter().zip(ids) {
            self.buckets_of(p, r, &mut list);
            for &b in &list {
                entries[next[b as usize] as usize] = id;
                next[b as usize] += 1;
            }
        }
        self.start = start;
        self.entries = entries;
    }

    /// The distinct buckets of the cells that the sphere overlaps, into
    /// `out` (every bucket when the block has at least as many cells).
    fn buckets_of(&self, p: Vec3, r: f32, out: &mut Vec<u32>) {
        out.clear();
        let lo = self.cell(p - r);
        let hi = self.cell(p + r);
        let span = |a: usize| (hi[a] as i64 - lo[a] as i64 + 1) as u64;
        let cells = span(0).saturating_mul(span(1)).saturating_mul(span(2));
        if cells > self.mask as u64 {
            out.extend(0..=self.mask);
            return;
        }
        for z in lo[2]..=hi[2] {
            for y in lo[1]..=hi[1] {
                for x in lo[0]..=hi[0] {
                    out.push(self.bucket([x, y, z]));
                }
            }
        }
        if out.len() > 1 {
            out.sort_unstable();
            out.dedup();
        }
    }

    /// Integer cell coordinates of `p` (saturating far outside the grid,
    /// where the hash only has to be consistent).
    fn cell(&self, p: Vec3) -> [i32; 3] {
        let c = ((p - self.origin) * self.inv_cell).floor();
        [c.x as i32, c.y as i32, c.z as i32]
    }

    fn bucket(&self, c: [i32; 3]) -> u32 {
        let h = (c[0] as u32).wrapping_mul(PRIMES[0])
            ^ (c[1] as u32).wrapping_mul(PRIMES[1])
            ^ (c[2] as u32).wrapping_mul(PRIMES[2]);
        h & self.mask
    }
}

/// The `q` quantile of `values` (reordered), 0 when empty.
fn quantile(values: &mut [f32], q: f64) -> f32 {
    if values.is_empty() {
        return 0.0;
    }
    let k = ((values.len() - 1) as f64 * q).round() as usize;
    *values.select_nth_unstable_by(k, f32::total_cmp).1
}

#[cfg(test)]
mod tests {
    use super::*;
    use caustic_geom::Pcg32;

    /// Every point whose sphere contains a query is among its candidates,
    /// exactly once.
    #[test]
    fn candidates_cover_every_sphere_once() {
        let mut rng = Pcg32::new(7, 1);
        let mut f = || rng.next_f32();
        let positions: Vec<Vec3> = (0..2000).map(|_| Vec3::new(f(), f(), f())).collect();
        // A few large spheres, as behind glass: they span many cells.
        let radii: Vec<f32> = (0..2000)
            .map(|i| {
                if i % 50 == 0 {
                    0.2 * f()
                } else {
                    0.01 + 0.04 * f()
                }
            })
            .collect();
        let grid = VisiblePointGrid::build(&positions, &radii);
        for _ in 0..2000 {
            let q = Vec3::new(f(), f(), f()) * 1.1 - 0.05;
            let found = grid.candidates(q);
            for (i, (p, r)) in positions.iter().zip(&radii).enumerate() {
                let hits = found.iter().filter(|&&j| j as usize == i).count();
                if p.distance_squared(q) < r * r {
                    assert_eq!(hits, 1, "point {i} missed or doubled for {q}");
                } else {
                    assert!(hits <= 1);
                }
            }
        }
    }

    #[test]
    fn empty_and_degenerate_inputs() {
        let grid = VisiblePointGrid::build(&[], &[]);
        assert!(grid.candidates(Vec3::ZERO).is_empty());
        let grid = VisiblePointGrid::build(&[Vec3::ZERO, Vec3::NAN], &[0.0, 1.0]);
        assert_eq!(grid.entry_count(), 0);
        assert!(grid.candidates(Vec3::NAN).is_empty());
    }
}
