//! Finding and applying one large node's split for the binned SAH builder:
//! binning on three axes, the prefix/suffix sweep over bin planes, the
//! in-place partition (which also gathers both children's split-point boxes),
//! and the object-median fallback. Small nodes take the exact sweep of
//! [`super::small`] instead.

use super::{NodeInfo, Refs};
use crate::bvh::build::build_box::BuildBox;
use crate::bvh::build::sorted_sweep::{half_areas, sort_key};
use glam::{Vec3A, Vec4};
use rayon::prelude::*;

/// Primitives per rayon task when binning in parallel.
const BIN_CHUNK: usize = 4 * 1024;

/// Runs of at least this many primitives bin into two sets of bins.
const TWO_SETS_MIN: usize = 256;

/// Where a builder's candidate planes lie.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Planes {
    /// The boundaries of `bins` equal bins per axis ([`BinMapping::new`]).
    #[default]
    Bins,
    /// `bvh-taskpool`'s 32 SplitPlane candidates (Vinkler et al. 2013, §4.2:
    /// one per lane of a warp): 11 on x and on y at twelfths of the
    /// split-point extent, 10 on z at elevenths ([`BinMapping::task_pool`]).
    TaskPool,
}

/// Planes per axis of [`Planes::TaskPool`] (x, y, z).
const TASK_POOL_PLANES: [usize; 3] = [11, 11, 10];

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

/// Maps split points (doubled box centers) to bin indices; shared by
/// binning and partitioning so both classify every primitive identically.
///
/// Bin `k` holds the coordinates with `(c - min) * bins / extent` in
/// `[k, k + 1)`. Computed as `f = (c - origin) * scale` with the origin
/// moved half a bin up, so that rounding `f` to the nearest integer is that
/// floor; `f` is clamped to `[0, bins - 1]` and rounded by adding
/// [`ROUNDER`]: the sum lies in `[2^23, 2^24)`, where `f32` holds exactly
/// the integers, so its low mantissa bits are the bin (a coordinate exactly
/// on a boundary may round either way, which only moves the boundary by a
/// tie). This is two clamps, an add and a mask per lane instead of a
/// saturating float-to-int conversion, and the mask keeps any index (even
/// from a NaN) inside the bin arrays.
#[derive(Clone, Copy, Debug)]
pub(super) struct BinMapping {
    /// Split-point box minimum plus half a bin.
    origin: Vec3A,
    /// Bins per unit length; 0 on axes where the split points do not spread
    /// (or spread too little for a finite scale), which cannot split.
    scale: Vec3A,
    /// `bins - 1` in every lane: the upper clamp of `f`.
    top: Vec3A,
    bins: usize,
    /// [`Planes::TaskPool`]'s planes per axis, increasing (unused ones
    /// infinite): a split point's bin is the number of planes at or below
    /// it, so it goes left of plane `k` (bin `k + 1` on) exactly when it
    /// lies below it, as the kernel's `c < plane`.
    planes: Option<[[f32; 11]; 3]>,
}

/// `1.5 * 2^23`: adding it to an `f32` in `[-2^22, 2^22]` rounds it to an
/// integer held in the low mantissa bits; see [`BinMapping`].
const ROUNDER: f32 = 12_582_912.0;

impl BinMapping {
    pub fn new(points: &BuildBox, bins: usize) -> Self {
        debug_assert!((2..=super::MAX_BINS).contains(&bins));
        let extent = points.max - points.min;
        let scale = Vec3A::splat(bins as f32) / extent;
        let usable = extent.cmpgt(Vec3A::ZERO) & scale.is_finite_mask();
        let scale = Vec3A::select(usable, scale, Vec3A::ZERO);
        let half_bin = Vec3A::select(usable, 0.5 / scale, Vec3A::ZERO);
        Self {
            origin: points.min + half_bin,
            scale,
            top: Vec3A::splat((bins - 1) as f32),
            bins,
            planes: None,
        }
    }

    /// [`Planes::TaskPool`]'s planes over `points` with the kernel's `f32`
    /// operations (`taskpool.cu`: `tp_plane`): plane `i` of an axis with
    /// `m` planes lies at `lo + (hi - lo) * ((i + 1) / (m + 1))`. Rounding
    /// keeps them in order, so bins are the gaps between them: 12 on x and
    /// y, 11 on z (its twelfth stays empty).
    pub fn task_pool(points: &BuildBox) -> Self {
        let planes = std::array::from_fn(|axis| {
            let (lo, hi, m) = (points.min[axis], points.max[axis], TASK_POOL_PLANES[axis]);
            std::array::from_fn(|i| {
                if i < m {
                    lo + (hi - lo) * ((i + 1) as f32 / (m + 1) as f32)
                } else {
                    f32::INFINITY
                }
            })
        });
        Self {
            planes: Some(planes),
            ..Self::new(points, 12)
        }
    }

    /// Bins of `c` on the three axes, computed together in SIMD lanes;
    /// `B`, a power of two at least `bins`, is the size of the bin arrays.
    #[inline(always)]
    pub fn bins_of<const B: usize>(&self, c: Vec3A) -> [usize; 3] {
        if let Some(planes) = &self.planes {
            return [0, 1, 2].map(|axis| planes_below(&planes[axis], c[axis]));
        }
        let f = ((c - self.origin) * self.scale)
            .max(Vec3A::ZERO)
            .min(self.top);
        let f = f + Vec3A::splat(ROUNDER);
        let [x, y, z] = f.to_array().map(|v| v.to_bits() as usize & (B - 1));
        [x, y, z]
    }

    /// The mapping of one axis, for [`AxisMapping::bin`].
    pub fn axis(&self, axis: usize) -> AxisMapping {
        AxisMapping {
            origin: self.origin[axis],
            scale: self.scale[axis],
            top: self.top[axis],
            planes: self.planes.map(|planes| planes[axis]),
        }
    }

    /// Bin of the coordinate `x` on `axis`.
    #[cfg(test)]
    fn bin(&self, x: f32, axis: usize) -> usize {
        self.axis(axis).bin(x)
    }
}

/// One axis of a [`BinMapping`], as scalars the partition loop keeps in
/// registers.
#[derive(Clone, Copy, Debug)]
pub(super) struct AxisMapping {
    origin: f32,
    scale: f32,
    top: f32,
    planes: Option<[f32; 11]>,
}

/// The bin of `x` among increasing `planes`: how many lie at or below it.
#[inline(always)]
fn planes_below(planes: &[f32; 11], x: f32) -> usize {
    planes.iter().filter(|&&p| p <= x).count()
}

impl AxisMapping {
    /// Bin of the coordinate `x`: the same `f32` operations as this axis's
    /// lane of [`BinMapping::bins_of`] (the clamps differ only for NaN,
    /// which a usable axis never produces), so binning and partitioning
    /// agree.
    #[inline(always)]
    pub fn bin(&self, x: f32) -> usize {
        if let Some(planes) = &self.planes {
            return planes_below(planes, x);
        }
        let f = ((x - self.origin) * self.scale).max(0.0).min(self.top) + ROUNDER;
        f.to_bits() as usize & (super::MAX_BINS - 1)
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

    #[inline(always)]
    fn add_one(&mut self, prim: &BuildBox, mapping: &BinMapping) {
        let bins = mapping.bins_of::<B>(prim.center2());
        for (axis, &bin) in bins.iter().enumerate() {
            let slot = &mut self.bounds[axis][bin];
            *slot = slot.union(*prim);
            self.counts[axis][bin] += 1;
        }
    }

    /// Bins of `prims`. Large runs alternate between two sets of bins:
    /// neighbouring primitives of a mesh often share a bin, and growing the
    /// same box twice in a row waits for the first store; the sets are
    /// merged at the end.
    fn of(prims: &[BuildBox], mapping: &BinMapping) -> Self {
        let mut bins = Self::EMPTY;
        if prims.len() < TWO_SETS_MIN {
            prims.iter().for_each(|prim| bins.add_one(prim, mapping));
            return bins;
        }
        let mut other = Self::EMPTY;
        let mut pairs = prims.chunks_exact(2);
        for pair in &mut pairs {
            bins.add_one(&pair[0], mapping);
            other.add_one(&pair[1], mapping);
        }
        pairs
            .remainder()
            .iter()
            .for_each(|prim| bins.add_one(prim, mapping));
        bins.merge(&other, mapping.bins);
        bins
    }

    /// Adds `other`'s first `used` bins into these, in place (the arrays
    /// are kilobytes; moving them around by value shows in profiles).
    fn merge(&mut self, other: &Self, used: usize) {
        for axis in 0..3 {
            for bin in 0..used {
                self.bounds[axis][bin] = self.bounds[axis][bin].union(other.bounds[axis][bin]);
                self.counts[axis][bin] += other.counts[axis][bin];
            }
        }
    }
}

/// The cheapest binned plane with primitives on both sides over all three
/// axes (the first axis wins ties), or `None` when all split points share a bin
/// on every axis.
pub(super) fn best_binned_plane(
    prims: &[BuildBox],
    mapping: &BinMapping,
    parallel: bool,
) -> Option<BinSplit> {
    // Arrays sized to the bin count, so small configs touch less memory.
    match mapping.bins {
        0..=4 => binned_plane::<4>(prims, mapping, parallel),
        5..=8 => binned_plane::<8>(prims, mapping, parallel),
        9..=16 => binned_plane::<16>(prims, mapping, parallel),
        17..=32 => binned_plane::<32>(prims, mapping, parallel),
        _ => binned_plane::<{ super::MAX_BINS }>(prims, mapping, parallel),
    }
}

/// Bins `prims` on all three axes (over rayon tasks when `parallel`), then sweeps.
#[inline(never)]
fn binned_plane<const B: usize>(
    prims: &[BuildBox],
    mapping: &BinMapping,
    parallel: bool,
) -> Option<BinSplit> {
    let used = mapping.bins;
    if parallel {
        // The partial bins live on the heap: rayon's reduction holds one
        // per level of its split while it waits, and a worker that waits
        // runs stolen tasks (other subtrees' binning) on top of its stack;
        // kilobytes of bins per level overflowed a worker's 2 MiB on 31 M
        // triangles with 16 threads.
        let bins = prims
            .par_chunks(BIN_CHUNK)
            .map(|chunk| Box::new(Bins::<B>::of(chunk, mapping)))
            .reduce(
                || Box::new(Bins::EMPTY),
                |mut a, b| {
                    a.merge(&b, used);
                    a
                },
            );
        best_plane(&bins, mapping)
    } else {
        best_plane(&Bins::<B>::of(prims, mapping), mapping)
    }
}

/// The cheapest plane between bins with primitives on both sides: the
/// three axes are swept together, one SIMD lane each (suffix costs from the
/// right, then a running minimum from the left with lane masks, so there
/// are no data-dependent branches). The first axis and the leftmost plane
/// win ties; infinite and NaN costs (overflowing areas) never win; axes whose split points
/// do not spread have every primitive in bin 0, so no plane of theirs has
/// both sides filled.
fn best_plane<const B: usize>(bins: &Bins<B>, mapping: &BinMapping) -> Option<BinSplit> {
    let used = mapping.bins;
    let lanes = |i: usize| {
        let [x, y, z] = [0, 1, 2].map(|axis| bins.counts[axis][i] as f32);
        Vec4::new(x, y, z, 0.0)
    };
    let boxes = |i: usize| [0, 1, 2].map(|axis| bins.bounds[axis][i]);
    let mut right_costs = [Vec4::ZERO; B];
    let mut right_counts = [Vec4::ZERO; B];
    let (mut acc, mut count) = ([BuildBox::EMPTY; 3], Vec4::ZERO);
    for i in (1..used).rev() {
        let bin = boxes(i);
        acc = std::array::from_fn(|axis| acc[axis].union(bin[axis]));
        count += lanes(i);
        right_costs[i] = half_areas(&acc) * count;
        right_counts[i] = count;
    }
    let (mut best_cost, mut best_plane) = (Vec4::splat(f32::INFINITY), Vec4::ZERO);
    let (mut acc, mut count) = ([BuildBox::EMPTY; 3], Vec4::ZERO);
    for i in 1..used {
        let bin = boxes(i - 1);
        acc = std::array::from_fn(|axis| acc[axis].union(bin[axis]));
        count += lanes(i - 1);
        let cost = half_areas(&acc) * count + right_costs[i];
        let both_sides = count.cmpgt(Vec4::ZERO) & right_counts[i].cmpgt(Vec4::ZERO);
        let better = both_sides & cost.cmplt(best_cost);
        best_cost = Vec4::select(better, cost, best_cost);
        best_plane = Vec4::select(better, Vec4::splat(i as f32), best_plane);
    }
    let mut winner: Option<(usize, f32)> = None;
    for axis in 0..3 {
        let cost = best_cost[axis];
        if best_plane[axis] > 0.0 && winner.is_none_or(|(_, best)| cost < best) {
            winner = Some((axis, cost));
        }
    }
    let (axis, weighted_area) = winner?;
    let bin = best_plane[axis] as usize;
    let side = |range: std::ops::Range<usize>| {
        range.fold((BuildBox::EMPTY, 0), |(b, n), i| {
            (
                b.union(bins.bounds[axis][i]),
                n + bins.counts[axis][i] as usize,
            )
        })
    };
    let ((left_bounds, left_count), (right_bounds, _)) = (side(0..bin), side(bin..used));
    Some(BinSplit {
        axis,
        bin,
        weighted_area,
        left_count,
        left_bounds,
        right_bounds,
    })
}

/// Moves the primitives left of the plane to the front of `prims`, in
/// place, and gathers both sides' split-point boxes on the way (Hoare style:
/// runs of primitives already on their side are only read, the others are
/// swapped in pairs).
pub(super) fn partition(refs: &mut Refs, mapping: &BinMapping, plan: &BinSplit) -> Split {
    let (axis, on_axis) = (plan.axis, mapping.axis(plan.axis));
    let goes_left = |b: &BuildBox| on_axis.bin(b.min[axis] + b.max[axis]) < plan.bin;
    let (mut left, mut right) = (BuildBox::EMPTY, BuildBox::EMPTY);
    let (mut i, mut j) = (0, refs.len());
    loop {
        while i < j && goes_left(&refs.boxes[i]) {
            left.grow_a(refs.boxes[i].center2());
            i += 1;
        }
        while i < j && !goes_left(&refs.boxes[j - 1]) {
            right.grow_a(refs.boxes[j - 1].center2());
            j -= 1;
        }
        if i == j {
            break;
        }
        // boxes[i] goes right, boxes[j - 1] goes left.
        right.grow_a(refs.boxes[i].center2());
        left.grow_a(refs.boxes[j - 1].center2());
        refs.swap(i, j - 1);
        i += 1;
        j -= 1;
    }
    debug_assert_eq!(i, plan.left_count, "partition disagrees with the bins");
    Split {
        left_count: i,
        left: NodeInfo {
            bounds: plan.left_bounds,
            centers: left,
        },
        right: NodeInfo {
            bounds: plan.right_bounds,
            centers: right,
        },
    }
}

/// Object-median split on the widest axis of the split points (ties by
/// id): the fallback when binning cannot separate the primitives, and the
/// depth-bounding split. Rare, so it sorts a copy of the references.
pub(super) fn median_split(refs: &mut Refs, info: &NodeInfo, parallel: bool) -> Split {
    let axis = info.centers.largest_axis();
    let mid = refs.len() / 2;
    let mut keyed: Vec<(u64, BuildBox, u32)> = refs
        .boxes
        .iter()
        .zip(refs.ids.iter())
        .map(|(b, &id)| (sort_key(b.center2()[axis], id), *b, id))
        .collect();
    keyed.select_nth_unstable_by_key(mid, |entry| entry.0);
    for (k, (_, b, id)) in keyed.into_iter().enumerate() {
        refs.boxes[k] = b;
        refs.ids[k] = id;
    }
    let (left, right) = refs.boxes.split_at(mid);
    Split {
        left_count: mid,
        left: NodeInfo::of(left, parallel),
        right: NodeInfo::of(right, parallel),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use caustic_geom::{Aabb, Pcg32, Vec3};

    /// Boxes around coarse points, so several split points share bins.
    fn random_boxes(n: usize, rng: &mut Pcg32) -> (Vec<BuildBox>, Vec<u32>) {
        let boxes = (0..n)
            .map(|_| {
                let mut coord = || (rng.next_u32() % 16) as f32;
                let c = Vec3::new(coord(), coord(), coord());
                let r = Vec3::new(coord(), coord(), coord()) * 0.1;
                BuildBox::from_aabb(Aabb::new(c - r, c + r))
            })
            .collect();
        (boxes, (0..n as u32).collect())
    }

    #[test]
    fn parallel_binning_matches_sequential() {
        let (boxes, _) = random_boxes(3 * BIN_CHUNK + 17, &mut Pcg32::new(5, 6));
        let info = NodeInfo::of(&boxes, true);
        let mapping = BinMapping::new(&info.centers, 32);
        assert_eq!(
            binned_plane::<32>(&boxes, &mapping, true),
            binned_plane::<32>(&boxes, &mapping, false)
        );
    }

    #[test]
    fn bins_stay_in_range() {
        let b = BuildBox::from_aabb(Aabb::new(Vec3::ZERO, Vec3::new(1.0, 0.0, 1e-44)));
        let mapping = BinMapping::new(&b, 8);
        for c in [
            Vec3A::ZERO,
            Vec3A::ONE,
            Vec3A::splat(0.5),
            Vec3A::splat(2.0),
        ] {
            let [x, y, z] = mapping.bins_of::<8>(c);
            assert!(x < 8 && x == mapping.bin(c.x, 0));
            // No spread (y) or too little for a finite scale (z): one bin.
            assert_eq!((y, z), (0, 0));
        }
        assert_eq!(mapping.bin(1.0, 0), 7);
        assert_eq!(mapping.bin(0.49, 0), 3);
        assert_eq!(mapping.bin(0.0, 0), 0);
        // Every bin is used by the coordinates in its range.
        let got: Vec<usize> = (0..8)
            .map(|k| mapping.bin((k as f32 + 0.5) / 8.0, 0))
            .collect();
        assert_eq!(got, (0..8).collect::<Vec<_>>());
    }

    #[test]
    fn partition_agrees_with_the_plane() {
        let mut rng = Pcg32::new(7, 8);
        for bins in [4, 16, 32, 64] {
            let (mut boxes, mut ids) = random_boxes(200, &mut rng);
            let original = boxes.clone();
            let info = NodeInfo::of(&boxes, false);
            let mapping = BinMapping::new(&info.centers, bins);
            let plan = best_binned_plane(&boxes, &mapping, false).unwrap();
            let mut refs = Refs {
                boxes: &mut boxes,
                ids: &mut ids,
            };
            let split = partition(&mut refs, &mapping, &plan);
            let (left, right) = boxes.split_at(split.left_count);
            let bin = |b: &BuildBox| mapping.bin(b.center2()[plan.axis], plan.axis);
            assert!(left.iter().all(|b| bin(b) < plan.bin));
            assert!(right.iter().all(|b| bin(b) >= plan.bin));
            let (l, r) = (NodeInfo::of(left, false), NodeInfo::of(right, false));
            assert_eq!(
                (l.bounds, r.bounds),
                (split.left.bounds, split.right.bounds)
            );
            assert_eq!(
                (l.centers, r.centers),
                (split.left.centers, split.right.centers)
            );
            // Ids moved with their boxes.
            assert!(
                ids.iter()
                    .zip(&boxes)
                    .all(|(&id, b)| original[id as usize] == *b)
            );
        }
    }

    #[test]
    fn task_pool_planes_bin_by_the_kernels_comparison() {
        let (boxes, _) = random_boxes(300, &mut Pcg32::new(11, 12));
        let info = NodeInfo::of(&boxes, false);
        let mapping = BinMapping::task_pool(&info.centers);
        let (lo, hi) = (info.centers.min, info.centers.max);
        for b in &boxes {
            let c = b.center2();
            let bins = mapping.bins_of::<16>(c);
            for (axis, &m) in TASK_POOL_PLANES.iter().enumerate() {
                // taskpool.cu: the reference goes left of plane i when its
                // split point lies below it (finite here), right otherwise.
                let plane =
                    |i: usize| lo[axis] + (hi[axis] - lo[axis]) * ((i + 1) as f32 / (m + 1) as f32);
                let right_of = (0..m).filter(|&i| plane(i) <= c[axis]).count();
                assert_eq!(bins[axis], right_of);
                assert_eq!(mapping.axis(axis).bin(c[axis]), right_of);
            }
        }
    }

    #[test]
    fn median_split_halves_and_keeps_ids_with_boxes() {
        let (mut boxes, mut ids) = random_boxes(101, &mut Pcg32::new(9, 10));
        let before: Vec<(u32, BuildBox)> = ids.iter().copied().zip(boxes.iter().copied()).collect();
        let info = NodeInfo::of(&boxes, false);
        let mut refs = Refs {
            boxes: &mut boxes,
            ids: &mut ids,
        };
        let split = median_split(&mut refs, &info, false);
        assert_eq!(split.left_count, 50);
        for (id, b) in ids.iter().zip(&boxes) {
            assert_eq!(before[*id as usize].1, *b);
        }
    }
}
