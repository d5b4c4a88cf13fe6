//! The common first step of the Morton-code builders (`lbvh`, `hlbvh`,
//! `ploc`): quantise each primitive's centroid on a `2^b`-per-axis grid over
//! the centroids' bounding box, encode it as a Morton code
//! (`caustic_geom::morton`), and sort the primitives by code.
//!
//! Ties (primitives whose centroids fall in one grid cell) are ordered by
//! id, because the sort orders (code, id) pairs; so the result is a function
//! of the input alone, and the pair (code, position) is a unique key, which
//! is what Karras's index tie-break relies on.
//!
//! Primitives that cannot be placed (non-finite boxes, see
//! [`BuildInput::is_placeable`]) get no code; they are returned apart, for
//! the builders to park in one leaf with the empty box.

use super::build_box::BuildBox;
use super::memory::PeakMemory;
use super::radix_sort::radix_sort;
use crate::BuildInput;
use caustic_geom::{Aabb, Vec3, Vec3A, morton};
use rayon::prelude::*;

/// Width of the Morton codes a builder sorts by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MortonBits {
    /// 10 bits per axis (a 1024^3 grid), sorted as 8-byte keys. Primitives
    /// closer than 1/1024 of the scene's extent share a code and are then
    /// ordered by id only.
    Bits30,
    /// 21 bits per axis (a 2^21 grid), sorted as 16-byte (code, id) pairs.
    Bits63,
}

impl MortonBits {
    /// Total code bits (3 per grid level).
    pub const fn bits(self) -> u32 {
        match self {
            Self::Bits30 => 30,
            Self::Bits63 => 63,
        }
    }

    const fn bits_per_axis(self) -> u32 {
        self.bits() / 3
    }
}

/// Placeable primitives in Morton order.
#[derive(Clone, Debug)]
pub(crate) struct MortonOrder {
    /// Codes in increasing order, right-aligned in the `u64` (a 30-bit code
    /// has 34 leading zeros).
    pub codes: Vec<u64>,
    /// `ids[i]` is the primitive whose code is `codes[i]`.
    pub ids: Vec<u32>,
    /// Ids of the unplaceable primitives, increasing.
    pub parked: Vec<u32>,
}

/// Below this many primitives codes are computed on one thread.
const PARALLEL_MIN: usize = 16 * 1024;

impl MortonOrder {
    /// Codes and the sorted order of the placeable primitives of `input`;
    /// records its buffers in `memory` (the sort keys, the sort's scratch,
    /// the codes and ids).
    pub fn new(input: &BuildInput, bits: MortonBits, memory: &PeakMemory) -> Self {
        assert!(
            input.len() < (1 << 31),
            "Morton builders take at most 2^31 - 1 primitives"
        );
        let parallel = input.len() >= PARALLEL_MIN;
        let grid = Grid::new(input, bits, parallel);
        record_sort_buffers(memory, input.len(), bits);
        let (mut codes, mut ids) = match bits {
            MortonBits::Bits30 => sort_30(&grid, input),
            MortonBits::Bits63 => sort_63(&grid, input),
        };
        // Unplaceable primitives got the sentinel code: they sort last.
        let placed = codes.partition_point(|&code| code != PARKED);
        let parked = ids.split_off(placed);
        codes.truncate(placed);
        Self { codes, ids, parked }
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// The primitives' boxes in Morton order, gathered once so that the
    /// builders read them sequentially afterwards.
    pub fn gather_bounds(&self, input: &BuildInput) -> Vec<Aabb> {
        let get = |&id: &u32| input.bounds[id as usize];
        if self.len() >= PARALLEL_MIN {
            self.ids.par_iter().map(get).collect()
        } else {
            self.ids.iter().map(get).collect()
        }
    }
}

/// Maps centroids to grid cells: `origin` is the centroid box's corner and
/// `scale` cells per unit on each axis (0 on a flat axis).
struct Grid {
    origin: Vec3A,
    scale: Vec3A,
    top: f32,
    bits: MortonBits,
}

impl Grid {
    /// The grid over the centroid box of the placeable primitives.
    fn new(input: &BuildInput, bits: MortonBits, parallel: bool) -> Self {
        let grow = |mut b: BuildBox, i: usize| {
            if input.is_placeable(i) {
                b.grow(input.centroids[i]);
            }
            b
        };
        let bounds = if parallel {
            (0..input.len())
                .into_par_iter()
                .fold(|| BuildBox::EMPTY, grow)
                .reduce(|| BuildBox::EMPTY, BuildBox::union)
        } else {
            (0..input.len()).fold(BuildBox::EMPTY, grow)
        };
        let cells = (1u32 << bits.bits_per_axis()) as f32;
        let extent = bounds.max - bounds.min;
        // A flat axis (or one so wide that its extent overflows) maps to cell 0.
        let usable = extent.cmpgt(Vec3A::ZERO) & extent.cmplt(Vec3A::INFINITY);
        let scale = Vec3A::select(usable, Vec3A::splat(cells) / extent, Vec3A::ZERO);
        Self {
            origin: bounds.min,
            scale,
            top: cells - 1.0,
            bits,
        }
    }

    /// Grid cell of `p`; the float-to-int cast saturates, so rounding at
    /// the box's far side and NaN (`inf * 0`) land in range.
    #[inline]
    fn cell(&self, p: Vec3) -> [u32; 3] {
        let q = ((Vec3A::from(p) - self.origin) * self.scale).min(Vec3A::splat(self.top));
        [q.x as u32, q.y as u32, q.z as u32]
    }

    #[inline]
    fn code(&self, p: Vec3) -> u64 {
        let [x, y, z] = self.cell(p);
        match self.bits {
            MortonBits::Bits30 => u64::from(morton::encode_30(x, y, z)),
            MortonBits::Bits63 => morton::encode_63(x, y, z),
        }
    }
}

/// Records the sort's buffers in `memory` in the order they live: the keys
/// and the radix sort's scratch, then the codes and ids split from the keys.
fn record_sort_buffers(memory: &PeakMemory, n: usize, bits: MortonBits) {
    let key_bytes = match bits {
        MortonBits::Bits30 => std::mem::size_of::<u64>(),
        MortonBits::Bits63 => std::mem::size_of::<(u64, u32)>(),
    };
    memory.alloc(2 * n * key_bytes);
    memory.free(n * key_bytes);
    memory.alloc_array::<u64>(n);
    memory.alloc_array::<u32>(n);
    memory.free(n * key_bytes);
}

/// The code of an unplaceable primitive: above every real code, so such
/// primitives sort last (by id), where [`MortonOrder::new`] cuts them off.
const PARKED: u64 = u64::MAX;

impl Grid {
    /// Primitive `i`'s code, or [`PARKED`].
    #[inline]
    fn code_of(&self, input: &BuildInput, i: usize) -> u64 {
        if input.is_placeable(i) {
            self.code(input.centroids[i])
        } else {
            PARKED
        }
    }
}

/// 30-bit codes travel packed with the id in one `u64` (`code << 32 | id`),
/// half the bytes of a pair; the sentinel becomes bit 31 of the code.
fn sort_30(grid: &Grid, input: &BuildInput) -> (Vec<u64>, Vec<u32>) {
    let pack = |i: usize| grid.code_of(input, i).min(1 << 31) << 32 | i as u64;
    let unpack = |&k: &u64| {
        let code = k >> 32;
        (if code >> 31 == 1 { PARKED } else { code }, k as u32)
    };
    let n = input.len();
    let parallel = n >= PARALLEL_MIN;
    let mut keys: Vec<u64> = if parallel {
        (0..n).into_par_iter().map(pack).collect()
    } else {
        (0..n).map(pack).collect()
    };
    radix_sort(&mut keys, 32, |&k| k >> 32);
    if parallel {
        keys.par_iter().map(unpack).unzip()
    } else {
        keys.iter().map(unpack).unzip()
    }
}

fn sort_63(grid: &Grid, input: &BuildInput) -> (Vec<u64>, Vec<u32>) {
    let pair = |i: usize| (grid.code_of(input, i), i as u32);
    let n = input.len();
    let parallel = n >= PARALLEL_MIN;
    let mut pairs: Vec<(u64, u32)> = if parallel {
        (0..n).into_par_iter().map(pair).collect()
    } else {
        (0..n).map(pair).collect()
    };
    radix_sort(&mut pairs, 64, |&(code, _)| code);
    if parallel {
        pairs.into_par_iter().unzip()
    } else {
        pairs.into_iter().unzip()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn point_input(points: &[Vec3]) -> BuildInput {
        BuildInput {
            bounds: points.iter().map(|&p| Aabb::from_point(p)).collect(),
            centroids: points.to_vec(),
        }
    }

    #[test]
    fn orders_along_the_z_curve_with_ties_by_id() {
        let points = [
            Vec3::new(1.0, 1.0, 1.0),
            Vec3::ZERO,
            Vec3::new(1.0, 0.0, 0.0),
            Vec3::ZERO,
            Vec3::new(0.0, 0.0, 1.0),
        ];
        for bits in [MortonBits::Bits30, MortonBits::Bits63] {
            let order = MortonOrder::new(&point_input(&points), bits, &PeakMemory::new());
            assert_eq!(order.ids, [1, 3, 4, 2, 0], "{bits:?}");
            assert!(order.codes.windows(2).all(|w| w[0] <= w[1]));
            assert_eq!(order.codes[4], (1u64 << bits.bits()) - 1, "far corner");
        }
    }

    #[test]
    fn non_finite_primitives_are_set_apart() {
        let mut input = point_input(&[Vec3::ONE, Vec3::ZERO]);
        input
            .bounds
            .push(Aabb::new(Vec3::splat(f32::NAN), Vec3::ONE));
        input.centroids.push(Vec3::splat(f32::NAN));
        let order = MortonOrder::new(&input, MortonBits::Bits63, &PeakMemory::new());
        assert_eq!(order.ids, [1, 0]);
        assert_eq!(order.parked, [2]);
    }

    #[test]
    fn flat_and_huge_extents_stay_in_range() {
        let points = [
            Vec3::new(-3e38, 0.0, 1.0),
            Vec3::new(3e38, 0.0, 1.0),
            Vec3::ZERO,
        ];
        for bits in [MortonBits::Bits30, MortonBits::Bits63] {
            let order = MortonOrder::new(&point_input(&points), bits, &PeakMemory::new());
            assert_eq!(order.len(), 3);
        }
    }

    #[test]
    fn parallel_sizes_agree_with_a_comparison_sort() {
        let points: Vec<Vec3> = (0..40_000u32)
            .map(|i| {
                let h = i.wrapping_mul(2_654_435_761);
                Vec3::new((h % 1000) as f32, ((h >> 10) % 1000) as f32, (i % 7) as f32)
            })
            .collect();
        let input = point_input(&points);
        for bits in [MortonBits::Bits30, MortonBits::Bits63] {
            let order = MortonOrder::new(&input, bits, &PeakMemory::new());
            let grid = Grid::new(&input, bits, false);
            let mut expected: Vec<(u64, u32)> = (0..points.len() as u32)
                .map(|id| (grid.code(points[id as usize]), id))
                .collect();
            expected.sort();
            let got: Vec<(u64, u32)> = order
                .codes
                .iter()
                .copied()
                .zip(order.ids.iter().copied())
                .collect();
            assert_eq!(got, expected);
        }
    }
}
