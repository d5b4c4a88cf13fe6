//! The checks of a device-built grid: [`GpuGrid::validate`] downloads it,
//! runs the CPU grid's structural validator on it
//! ([`UniformGrid::validate`]: every reference overlaps its cell, every
//! triangle is in every cell its grown box — or with exact overlap, it —
//! overlaps, the macro boxes hold their triangles), and compares it with the
//! CPU's build from the same triangles and config ([`first_difference`]):
//! the same frame to the bit, the same triangles in every cell in the same
//! order, the same culling data. Equality with the CPU grid is the strongest
//! check there is: the CPU grid is held to brute force by its own tests.
//!
//! The culling data are compared as values (`==`), not bits: a union over
//! boxes that meet at zero may keep `-0.0` on one side and `0.0` on the
//! other (glam's `min` keeps the later operand on ties, and the device
//! reduces in another order), which no comparison of the DDA can tell
//! apart.

use caustic_geom::Triangle;
use caustic_gpu::GpuError;

use super::build_cuda::GpuGrid;
use super::{GridConfig, UniformGrid};

impl GpuGrid {
    /// Downloads the grid, validates it and compares it with the CPU
    /// grid built from `triangles` (the triangles this grid was built from,
    /// scene order) with the same config. `Ok(Err(problem))` names the first
    /// difference; `Err` is a failure of the device.
    pub fn validate(&self, triangles: &[Triangle]) -> Result<Result<(), String>, GpuError> {
        let grid = self.download()?;
        let config = *self.config();
        Ok(grid.validate(triangles, &config).and_then(|()| {
            let cpu = UniformGrid::build_with(triangles, &config);
            first_difference(&grid, &cpu, &config)
        }))
    }
}

/// The first way in which grid `a` differs from grid `b` (both built with
/// `config`), or `Ok` when they are the same grid: frame (bitwise), cell
/// ranges, references, triangles (bitwise) and culling data (by value).
pub fn first_difference(
    a: &UniformGrid,
    b: &UniformGrid,
    config: &GridConfig,
) -> Result<(), String> {
    let bits3 = |v: caustic_geom::Vec3| v.to_array().map(f32::to_bits);
    let frame = |g: &UniformGrid| {
        (
            bits3(g.bounds.min),
            bits3(g.bounds.max),
            g.res,
            bits3(g.cell_size),
            bits3(g.inv_cell_size),
            g.tolerance.to_bits(),
            g.macro_size,
            g.macro_res,
        )
    };
    if frame(a) != frame(b) {
        return Err(format!(
            "frames differ: box {:?} res {:?} cell {:?} tolerance {} vs box {:?} res {:?} cell {:?} tolerance {}",
            a.bounds, a.res, a.cell_size, a.tolerance, b.bounds, b.res, b.cell_size, b.tolerance
        ));
    }
    if a.triangles.len() != b.triangles.len() {
        return Err(format!(
            "{} triangles vs {}",
            a.triangles.len(),
            b.triangles.len()
        ));
    }
    let tri_bits = |t: &Triangle| [t.v0, t.v1, t.v2].map(bits3);
    if let Some(i) =
        (0..a.triangles.len()).find(|&i| tri_bits(&a.triangles[i]) != tri_bits(&b.triangles[i]))
    {
        return Err(format!("triangle {i} differs"));
    }
    if a.cell_start.len() != b.cell_start.len() {
        return Err(format!(
            "{} cell starts vs {}",
            a.cell_start.len(),
            b.cell_start.len()
        ));
    }
    if a.cell_start != b.cell_start || a.prims != b.prims {
        let cell = (0..a.cell_start.len().saturating_sub(1))
            .find(|&c| a.prims[a.cell_refs(c)] != b.prims[b.cell_refs(c)]);
        return Err(match cell {
            Some(c) => format!(
                "cell {c} ({}overlap) lists {:?}, expected {:?}",
                if config.exact_overlap {
                    "exact "
                } else {
                    "box "
                },
                &a.prims[a.cell_refs(c)],
                &b.prims[b.cell_refs(c)]
            ),
            None => format!("{} references vs {}", a.prims.len(), b.prims.len()),
        });
    }
    if a.macro_bounds != b.macro_bounds {
        let m = (0..a.macro_bounds.len().min(b.macro_bounds.len()))
            .find(|&m| a.macro_bounds[m] != b.macro_bounds[m]);
        return Err(format!(
            "macro-cell boxes differ (first at {m:?} of {} vs {})",
            a.macro_bounds.len(),
            b.macro_bounds.len()
        ));
    }
    if let Some(axis) = (0..3).find(|&k| a.slab_bounds[k] != b.slab_bounds[k]) {
        return Err(format!(
            "slab bounds on axis {axis} differ: {:?} vs {:?}",
            a.slab_bounds[axis], b.slab_bounds[axis]
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use caustic_geom::{Aabb, Pcg32, Vec3};

    fn soup(count: usize, seed: u64) -> Vec<Triangle> {
        let mut rng = Pcg32::new(seed, 3);
        let mut coord = |scale: f32| (rng.next_f32() - 0.5) * scale;
        (0..count)
            .map(|_| {
                let p = Vec3::new(coord(8.0), coord(8.0), coord(8.0));
                let mut q = || p + Vec3::new(coord(1.0), coord(1.0), coord(1.0));
                Triangle::new(p, q(), q())
            })
            .collect()
    }

    #[test]
    fn a_grid_equals_itself_and_each_change_is_named() {
        let tris = soup(400, 1);
        for exact in [false, true] {
            let config = GridConfig {
                exact_overlap: exact,
                ..GridConfig::DEFAULT
            };
            let grid = UniformGrid::build_with(&tris, &config);
            assert_eq!(first_difference(&grid, &grid.clone(), &config), Ok(()));

            let mut moved = grid.clone();
            let c = (0..moved.cell_count())
                .find(|&c| moved.cell_refs(c).len() > 1)
                .unwrap();
            let r = moved.cell_refs(c);
            moved.prims.swap(r.start, r.start + 1);
            let message = first_difference(&moved, &grid, &config).unwrap_err();
            assert!(message.starts_with(&format!("cell {c} ")), "{message}");

            let mut shifted = grid.clone();
            shifted.tolerance *= 2.0;
            assert!(
                first_difference(&shifted, &grid, &config)
                    .unwrap_err()
                    .starts_with("frames differ")
            );

            let mut culled = grid.clone();
            culled.macro_bounds[0] = Aabb::EMPTY;
            let differs = grid.macro_bounds[0] != Aabb::EMPTY;
            assert_eq!(first_difference(&culled, &grid, &config).is_err(), differs);

            let mut slabs = grid.clone();
            slabs.slab_bounds[2][0].0 -= 1.0;
            assert!(
                first_difference(&slabs, &grid, &config)
                    .unwrap_err()
                    .starts_with("slab bounds on axis 2")
            );
        }
    }

    #[test]
    fn signed_zeros_in_the_culling_data_are_equal() {
        let tris = soup(100, 2);
        let config = GridConfig::DEFAULT;
        let grid = UniformGrid::build_with(&tris, &config);
        let mut zeros = grid.clone();
        let mut flipped = grid.clone();
        zeros.macro_bounds[0].min.x = 0.0;
        flipped.macro_bounds[0].min.x = -0.0;
        assert_eq!(first_difference(&zeros, &flipped, &config), Ok(()));
    }
}
