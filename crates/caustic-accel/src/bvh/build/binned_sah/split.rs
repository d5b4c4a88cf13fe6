//! Finding and applying one node's split for the binned SAH builder:
//! binning on three axes, the prefix/suffix sweep over bin planes, the
//! sorted equivalent for small nodes, the in-place partition, and the
//! object-median fallback.

use super::{NodeInfo, PrimRef};
use crate::bvh::build::build_box::BuildBox;
use caustic_geom::Vec3;
use rayon::prelude::*;

/// Nodes with at most this many primitives find their binned plane by
/// sorting rather than by filling and sweeping bins, which would cost more
/// than the primitives themselves. Both give the same plane. At most 32
/// (sort keys pack the index in 5 bits).
pub(super) const SMALL_NODE: usize = 24;
const _: () = assert!(SMALL_NODE <= 32 && super::MAX_BINS <= 64);

/// Primitives per rayon task when binning in parallel.
const BIN_CHUNK: usize = 16 * 1024;

/// A node split into `left_count` primitives (the front of its slice) and the rest.
pub(super) struct Split {
    pub left_count: usize,
    pub left: NodeInfo,
    pub right: NodeInfo,
}

/// The cheapest binned plane of a node.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct BinSplit {
    pub axis: usize,
    /// First bin of the right side.
    pub bin: usize,
    /// `A_L N_L + A_R N_R` with half areas.
    pub weighted_area: f32,
    pub left_count: usize,
    pub left_bounds: BuildBox,
    pub right_bounds: BuildBox,
}

/// Maps centroids to bin indices; shared by binning and partitioning so both
/// classify every primitive identically.
#[derive(Clone, Copy, Debug)]
pub(super) struct BinMapping {
    origin: Vec3,
    scale: Vec3,
    bins: usize,
}

impl BinMapping {
    pub fn new(centroid_bounds: &BuildBox, bins: usize) -> Self {
        let extent = centroid_bounds.extent();
        let scale = Vec3::select(
            extent.cmpgt(Vec3::ZERO),
            Vec3::splat(bins as f32) / extent,
            Vec3::ZERO,
        );
        Self {
            origin: centroid_bounds.min.into(),
            scale,
            bins,
        }
    }

    /// Axes along which the centroids are spread (others cannot split).
    fn axes(&self) -> impl Iterator<Item = usize> + '_ {
        (0..3).filter(|&axis| self.scale[axis] > 0.0)
    }

    /// Bin of `c` on `axis`. The float-to-int cast saturates (NaN gives 0,
    /// overflow the top bin), so a degenerate scale cannot index out of range.
    #[inline(always)]
    pub fn bin(&self, c: Vec3, axis: usize) -> usize {
        (((c[axis] - self.origin[axis]) * self.scale[axis]) as usize).min(self.bins - 1)
    }
}

/// Bins of all three axes; `B` is the array size, at least the bin count.
#[derive(Clone, Copy)]
struct Bins<const B: usize> {
    bounds: [[BuildBox; B]; 3],
    counts: [[u32; B]; 3],
}

impl<const B: usize> Bins<B> {
    const EMPTY: Self = Self {
        bounds: [[BuildBox::EMPTY; B]; 3],
        counts: [[0; B]; 3],
    };

    fn add(&mut self, prims: &[PrimRef], mapping: &BinMapping) {
        for prim in prims {
            for axis in 0..3 {
                let bin = mapping.bin(prim.centroid, axis);
                self.bounds[axis][bin] = self.bounds[axis][bin].union(prim.bounds);
                self.counts[axis][bin] += 1;
            }
        }
    }

    fn merge(mut self, other: Self) -> Self {
        for axis in 0..3 {
            for bin in 0..B {
                self.bounds[axis][bin] = self.bounds[axis][bin].union(other.bounds[axis][bin]);
                self.counts[axis][bin] += other.counts[axis][bin];
            }
        }
        self
    }
}

/// The cheapest binned plane with primitives on both sides over all three
/// axes (the first axis wins ties), or `None` when all centroids share a bin
/// on every axis. For nodes above [`SMALL_NODE`] primitives; smaller ones use
/// [`best_sorted_plane`].
pub(super) fn best_binned_plane(
    prims: &[PrimRef],
    mapping: &BinMapping,
    parallel: bool,
) -> Option<BinSplit> {
    // Arrays sized to the bin count, so small configs touch less memory.
    match mapping.bins {
        0..=8 => binned_plane::<8>(prims, mapping, parallel),
        9..=16 => binned_plane::<16>(prims, mapping, parallel),
        17..=32 => binned_plane::<32>(prims, mapping, parallel),
        _ => binned_plane::<{ super::MAX_BINS }>(prims, mapping, parallel),
    }
}

/// Bins `prims` on all three axes (over rayon tasks when `parallel`), then sweeps.
#[inline(never)]
fn binned_plane<const B: usize>(
    prims: &[PrimRef],
    mapping: &BinMapping,
    parallel: bool,
) -> Option<BinSplit> {
    let bins = if parallel {
        prims
            .par_chunks(BIN_CHUNK)
            .map(|chunk| {
                let mut bins = Bins::<B>::EMPTY;
                bins.add(chunk, mapping);
                bins
            })
            .reduce(|| Bins::EMPTY, Bins::merge)
    } else {
        let mut bins = Bins::<B>::EMPTY;
        bins.add(prims, mapping);
        bins
    };
    let used = mapping.bins;
    let mut best = Best::default();
    for axis in mapping.axes() {
        sweep_bins::<B>(
            &bins.bounds[axis][..used],
            &bins.counts[axis][..used],
            axis,
            &mut best,
        );
    }
    best.0
}

/// Offers every plane between bins of one axis: a suffix sweep for the
/// right sides, then a prefix sweep for the left sides.
fn sweep_bins<const B: usize>(bounds: &[BuildBox], counts: &[u32], axis: usize, best: &mut Best) {
    let mut right_bounds = [BuildBox::EMPTY; B];
    let mut right_counts = [0usize; B];
    let (mut acc, mut count) = (BuildBox::EMPTY, 0);
    for i in (1..bounds.len()).rev() {
        acc = acc.union(bounds[i]);
        count += counts[i] as usize;
        right_bounds[i] = acc;
        right_counts[i] = count;
    }
    let (mut left_bounds, mut left_count) = (BuildBox::EMPTY, 0);
    for i in 1..bounds.len() {
        left_bounds = left_bounds.union(bounds[i - 1]);
        left_count += counts[i - 1] as usize;
        if left_count > 0 && right_counts[i] > 0 {
            best.offer(
                axis,
                i,
                (left_count, left_bounds),
                (right_counts[i], right_bounds[i]),
            );
        }
    }
}

/// A small node's primitives sorted by bin along the chosen axis: sort keys
/// `bin << 5 | index` (16 bits hold 64 bins and 32 primitives).
pub(super) type SortedOrder = [u16; SMALL_NODE];

/// The binned plane of a small node, found by sorting its primitives by bin
/// instead of filling bins, with the winning axis's order. A plane between
/// two occupied bins `a < b` splits like every plane in `a + 1 ..= b`, and
/// the bin sweep keeps the leftmost of equal costs, so offering `a + 1`
/// finds exactly the plane [`best_binned_plane`] finds.
pub(super) fn best_sorted_plane(
    prims: &[PrimRef],
    mapping: &BinMapping,
) -> Option<(BinSplit, SortedOrder)> {
    let n = prims.len();
    debug_assert!(n <= SMALL_NODE);
    let mut best = Best::default();
    let mut best_keys = [0u16; SMALL_NODE];
    for axis in mapping.axes() {
        let mut keys = [0u16; SMALL_NODE];
        for (key, (i, prim)) in keys.iter_mut().zip(prims.iter().enumerate()) {
            *key = ((mapping.bin(prim.centroid, axis) << 5) | i) as u16;
        }
        keys[..n].sort_unstable();
        let bin_of = |k: usize| usize::from(keys[k] >> 5);
        let bounds = |k: usize| prims[usize::from(keys[k] & 31)].bounds;
        // Right sides as costs only; the winner's box is rebuilt at the end.
        let mut right_costs = [0.0f32; SMALL_NODE];
        let mut acc = BuildBox::EMPTY;
        for k in (1..n).rev() {
            acc = acc.union(bounds(k));
            right_costs[k] = acc.half_area() * (n - k) as f32;
        }
        let mut left_bounds = BuildBox::EMPTY;
        let mut improved = false;
        for (k, &right_cost) in right_costs.iter().enumerate().take(n).skip(1) {
            left_bounds = left_bounds.union(bounds(k - 1));
            if bin_of(k - 1) != bin_of(k) {
                let bin = bin_of(k - 1) + 1;
                let left = (k, left_bounds);
                improved |= best.offer_cost(axis, bin, left, right_cost, BuildBox::EMPTY);
            }
        }
        if improved {
            best_keys = keys;
        }
    }
    let mut plan = best.0?;
    plan.right_bounds = best_keys[plan.left_count..n]
        .iter()
        .fold(BuildBox::EMPTY, |b, &key| {
            b.union(prims[usize::from(key & 31)].bounds)
        });
    Some((plan, best_keys))
}

/// Applies a small node's plane by permuting its primitives into the sorted
/// order of the plane's axis (no comparisons, so no mispredicted branches),
/// which puts the left side first.
pub(super) fn reorder(prims: &mut [PrimRef], order: &SortedOrder, plan: &BinSplit) -> Split {
    let n = prims.len();
    let mut copy = [prims[0]; SMALL_NODE];
    copy[..n].copy_from_slice(prims);
    for (prim, key) in prims.iter_mut().zip(order) {
        *prim = copy[usize::from(key & 31)];
    }
    let (left, right) = prims.split_at(plan.left_count);
    Split {
        left_count: plan.left_count,
        left: NodeInfo {
            bounds: plan.left_bounds,
            centroid_bounds: centroid_bounds(left),
        },
        right: NodeInfo {
            bounds: plan.right_bounds,
            centroid_bounds: centroid_bounds(right),
        },
    }
}

/// The cheapest plane offered so far. Offers come in axis order, then plane
/// order, and only a strictly cheaper one replaces the best, so the first
/// axis and the leftmost plane win ties; NaN costs (overflowing areas) never
/// win.
#[derive(Default)]
struct Best(Option<BinSplit>);

impl Best {
    /// Offers a plane given both sides; returns whether it became the best.
    #[inline(always)]
    fn offer(
        &mut self,
        axis: usize,
        bin: usize,
        left: (usize, BuildBox),
        right: (usize, BuildBox),
    ) -> bool {
        let right_cost = right.1.half_area() * right.0 as f32;
        self.offer_cost(axis, bin, left, right_cost, right.1)
    }

    /// Offers a plane whose right side's `A_R N_R` is already known (its box
    /// may be filled in later); returns whether it became the best.
    #[inline(always)]
    fn offer_cost(
        &mut self,
        axis: usize,
        bin: usize,
        left: (usize, BuildBox),
        right_cost: f32,
        right_bounds: BuildBox,
    ) -> bool {
        let weighted_area = left.1.half_area() * left.0 as f32 + right_cost;
        let better = match &self.0 {
            None => !weighted_area.is_nan(),
            Some(best) => weighted_area < best.weighted_area,
        };
        if better {
            self.0 = Some(BinSplit {
                axis,
                bin,
                weighted_area,
                left_count: left.0,
                left_bounds: left.1,
                right_bounds,
            });
        }
        better
    }
}

/// Moves the primitives left of the plane to the front of `prims`, in
/// place. Lomuto style with an unconditional swap, so the loop has no
/// data-dependent branch to mispredict; the sides' centroid boxes are
/// gathered afterwards in two streaming passes.
pub(super) fn partition(prims: &mut [PrimRef], mapping: &BinMapping, plan: &BinSplit) -> Split {
    let mut left_count = 0;
    for j in 0..prims.len() {
        let goes_left = mapping.bin(prims[j].centroid, plan.axis) < plan.bin;
        prims.swap(left_count, j);
        left_count += usize::from(goes_left);
    }
    debug_assert_eq!(
        left_count, plan.left_count,
        "partition disagrees with the bins"
    );
    let (left, right) = prims.split_at(left_count);
    Split {
        left_count,
        left: NodeInfo {
            bounds: plan.left_bounds,
            centroid_bounds: centroid_bounds(left),
        },
        right: NodeInfo {
            bounds: plan.right_bounds,
            centroid_bounds: centroid_bounds(right),
        },
    }
}

/// Box of the primitives' centroids.
fn centroid_bounds(prims: &[PrimRef]) -> BuildBox {
    prims.iter().fold(BuildBox::EMPTY, |mut b, p| {
        b.grow(p.centroid);
        b
    })
}

/// Object-median split on the widest centroid axis: the fallback when
/// binning cannot separate the primitives, and the depth-bounding split.
pub(super) fn median_split(prims: &mut [PrimRef], info: &NodeInfo, parallel: bool) -> Split {
    let axis = info.centroid_bounds.largest_axis();
    let mid = prims.len() / 2;
    prims.select_nth_unstable_by(mid, |a, b| a.centroid[axis].total_cmp(&b.centroid[axis]));
    Split {
        left_count: mid,
        left: NodeInfo::of(&prims[..mid], parallel),
        right: NodeInfo::of(&prims[mid..], parallel),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use caustic_geom::{Aabb, Pcg32};

    fn random_prims(n: usize, rng: &mut Pcg32) -> Vec<PrimRef> {
        (0..n)
            .map(|id| {
                // Coarse coordinates so several centroids share bins.
                let mut coord = || (rng.next_u32() % 16) as f32;
                let c = Vec3::new(coord(), coord(), coord());
                let r = Vec3::new(coord(), coord(), coord()) * 0.1;
                PrimRef {
                    bounds: BuildBox::from_aabb(Aabb::new(c - r, c + r)),
                    centroid: c,
                    id: id as u32,
                }
            })
            .collect()
    }

    #[test]
    fn sorted_and_binned_sweeps_choose_the_same_plane() {
        let mut rng = Pcg32::new(3, 4);
        for trial in 0..500 {
            let n = 2 + trial % (SMALL_NODE - 1);
            let prims = random_prims(n, &mut rng);
            let info = NodeInfo::of(&prims, false);
            for bins in [2, 5, 8, 13, 32, 64] {
                let mapping = BinMapping::new(&info.centroid_bounds, bins);
                let sorted = best_sorted_plane(&prims, &mapping).map(|(plan, _)| plan);
                let binned = binned_plane::<64>(&prims, &mapping, false);
                assert_eq!(sorted, binned, "{n} prims, {bins} bins");
            }
        }
    }

    #[test]
    fn parallel_binning_matches_sequential() {
        let prims = random_prims(3 * BIN_CHUNK + 17, &mut Pcg32::new(5, 6));
        let info = NodeInfo::of(&prims, true);
        let mapping = BinMapping::new(&info.centroid_bounds, 32);
        assert_eq!(
            binned_plane::<32>(&prims, &mapping, true),
            binned_plane::<32>(&prims, &mapping, false)
        );
    }

    #[test]
    fn partition_agrees_with_the_plane() {
        let mut prims = random_prims(200, &mut Pcg32::new(7, 8));
        let info = NodeInfo::of(&prims, false);
        let mapping = BinMapping::new(&info.centroid_bounds, 16);
        let plan = best_binned_plane(&prims, &mapping, false).unwrap();
        let split = partition(&mut prims, &mapping, &plan);
        check_split(&prims, &split, &mapping, &plan);
    }

    #[test]
    fn reorder_agrees_with_the_plane() {
        let mut rng = Pcg32::new(11, 12);
        for n in 2..=SMALL_NODE {
            let mut prims = random_prims(n, &mut rng);
            let info = NodeInfo::of(&prims, false);
            let mapping = BinMapping::new(&info.centroid_bounds, 32);
            if let Some((plan, order)) = best_sorted_plane(&prims, &mapping) {
                let split = reorder(&mut prims, &order, &plan);
                check_split(&prims, &split, &mapping, &plan);
            }
        }
    }

    fn check_split(prims: &[PrimRef], split: &Split, mapping: &BinMapping, plan: &BinSplit) {
        let (left, right) = prims.split_at(split.left_count);
        assert!(
            left.iter()
                .all(|p| mapping.bin(p.centroid, plan.axis) < plan.bin)
        );
        assert!(
            right
                .iter()
                .all(|p| mapping.bin(p.centroid, plan.axis) >= plan.bin)
        );
        assert_eq!(NodeInfo::of(left, false).bounds, split.left.bounds);
        assert_eq!(NodeInfo::of(right, false).bounds, split.right.bounds);
        assert_eq!(
            NodeInfo::of(left, false).centroid_bounds,
            split.left.centroid_bounds
        );
        assert_eq!(
            NodeInfo::of(right, false).centroid_bounds,
            split.right.centroid_bounds
        );
    }

    #[test]
    fn median_split_halves() {
        let mut prims = random_prims(101, &mut Pcg32::new(9, 10));
        let info = NodeInfo::of(&prims, false);
        let split = median_split(&mut prims, &info, false);
        assert_eq!(split.left_count, 50);
    }
}
