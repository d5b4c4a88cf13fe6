//! Binned SAH splitting for `hlbvh`, generic over what is split: Morton
//! clusters in the top tree (each weighing its primitive count) and single
//! primitives in the bottom trees (weight 1). One node: bin the centroids on
//! the three axes, sweep the bin planes with prefix and suffix boxes, take
//! the plane with the least `A_L W_L + A_R W_R`, partition in place; or, when
//! every centroid falls in one bin, split at the median centroid.
//!
//! Top-tree nodes of at most [`SMALL`] clusters skip the bins: clearing and
//! sweeping `3 x bins` bins would cost more than the items, so they sort
//! their items on each axis and sweep every split position, the exact
//! (weighted) SAH split, which the bins only approximate. (Small bottom
//! nodes go to the shared unweighted sweep instead, see `sweep.rs`.)

use crate::bvh::build::build_box::BuildBox;
use caustic_geom::{Vec3, Vec3A};

/// Upper bound of the bin count (bins live on the stack).
pub const MAX_BINS: usize = 32;

/// Nodes with at most this many items use [`small_split`].
pub const SMALL: usize = 16;

/// Something with a box, a representative point and a weight.
pub(super) trait Binned: Copy {
    fn bounds(&self) -> BuildBox;
    fn centroid(&self) -> Vec3;
    /// Primitives it stands for.
    fn weight(&self) -> usize;
}

/// Box, centroid box and total weight of a node's items.
#[derive(Clone, Copy, Debug)]
pub(super) struct NodeInfo {
    pub bounds: BuildBox,
    pub centroid_bounds: BuildBox,
    pub weight: usize,
}

impl NodeInfo {
    pub const EMPTY: Self = Self {
        bounds: BuildBox::EMPTY,
        centroid_bounds: BuildBox::EMPTY,
        weight: 0,
    };

    pub fn add<T: Binned>(mut self, item: &T) -> Self {
        self.bounds = self.bounds.union(item.bounds());
        self.centroid_bounds.grow(item.centroid());
        self.weight += item.weight();
        self
    }

    pub fn of<T: Binned>(items: &[T]) -> Self {
        items.iter().fold(Self::EMPTY, Self::add)
    }
}

/// A node split in two: the first `left_len` items, then the rest.
pub(super) struct Split {
    pub left_len: usize,
    pub left: NodeInfo,
    pub right: NodeInfo,
}

/// The chosen plane: items whose centroid bin on `axis` is below `bin` go left.
#[derive(Clone, Copy, Debug)]
pub(super) struct Plane {
    axis: usize,
    bin: usize,
    /// `A_L W_L + A_R W_R` with half areas.
    pub weighted_area: f32,
    /// Boxes of the two sides, from the bins.
    left_bounds: BuildBox,
    right_bounds: BuildBox,
}

/// Maps centroids to bins over a node's centroid box.
#[derive(Clone, Copy, Debug)]
pub(super) struct BinMapping {
    origin: Vec3A,
    scale: Vec3A,
    bins: usize,
}

impl BinMapping {
    pub fn new(centroid_bounds: &BuildBox, bins: usize) -> Self {
        let extent = centroid_bounds.max - centroid_bounds.min;
        let usable = extent.cmpgt(Vec3A::ZERO) & extent.cmplt(Vec3A::INFINITY);
        Self {
            origin: centroid_bounds.min,
            scale: Vec3A::select(usable, Vec3A::splat(bins as f32) / extent, Vec3A::ZERO),
            bins,
        }
    }

    /// Bins of `c` on all three axes; the saturating cast keeps NaN and
    /// overflow in range.
    #[inline(always)]
    fn bins_of(&self, c: Vec3) -> [usize; 3] {
        let b = (Vec3A::from(c) - self.origin) * self.scale;
        let top = self.bins - 1;
        [
            (b.x as usize).min(top),
            (b.y as usize).min(top),
            (b.z as usize).min(top),
        ]
    }

    /// Bin of `c` on one axis (the arithmetic of [`Self::bins_of`]).
    #[inline(always)]
    fn bin_on(&self, c: Vec3, axis: usize) -> usize {
        let b = (c[axis] - self.origin[axis]) * self.scale[axis];
        (b as usize).min(self.bins - 1)
    }
}

/// The cheapest plane with weight on both sides, or `None` when all
/// centroids share a bin on every axis. Ties go to the first axis and the
/// leftmost plane.
pub(super) fn best_plane<T: Binned>(items: &[T], mapping: &BinMapping) -> Option<Plane> {
    let mut bounds = [[BuildBox::EMPTY; MAX_BINS]; 3];
    let mut weights = [[0usize; MAX_BINS]; 3];
    for item in items {
        let (b, w) = (item.bounds(), item.weight());
        for (axis, bin) in mapping.bins_of(item.centroid()).into_iter().enumerate() {
            bounds[axis][bin] = bounds[axis][bin].union(b);
            weights[axis][bin] += w;
        }
    }
    let mut best: Option<Plane> = None;
    for axis in (0..3).filter(|&a| mapping.scale[a] > 0.0) {
        sweep(
            &bounds[axis][..mapping.bins],
            &weights[axis][..mapping.bins],
            axis,
            &mut best,
        );
    }
    best
}

/// Offers every plane between the bins of one axis.
fn sweep(bounds: &[BuildBox], weights: &[usize], axis: usize, best: &mut Option<Plane>) {
    let mut right_bounds = [BuildBox::EMPTY; MAX_BINS];
    let mut right_weight = [0usize; MAX_BINS];
    let (mut acc, mut weight) = (BuildBox::EMPTY, 0);
    for i in (1..bounds.len()).rev() {
        acc = acc.union(bounds[i]);
        weight += weights[i];
        right_bounds[i] = acc;
        right_weight[i] = weight;
    }
    let (mut left, mut left_weight) = (BuildBox::EMPTY, 0);
    for bin in 1..bounds.len() {
        left = left.union(bounds[bin - 1]);
        left_weight += weights[bin - 1];
        if left_weight == 0 || right_weight[bin] == 0 {
            continue;
        }
        let weighted_area = left.half_area() * left_weight as f32
            + right_bounds[bin].half_area() * right_weight[bin] as f32;
        // NaN (overflowing areas) never wins.
        if best.is_none_or(|b| weighted_area < b.weighted_area) && !weighted_area.is_nan() {
            *best = Some(Plane {
                axis,
                bin,
                weighted_area,
                left_bounds: left,
                right_bounds: right_bounds[bin],
            });
        }
    }
}

/// Moves the items left of `plane` to the front, in place; the sides'
/// boxes come from the bins, their centroid boxes and weights are gathered
/// on the way.
pub(super) fn partition<T: Binned>(items: &mut [T], mapping: &BinMapping, plane: &Plane) -> Split {
    let mut left = NodeInfo {
        bounds: plane.left_bounds,
        ..NodeInfo::EMPTY
    };
    let mut right = NodeInfo {
        bounds: plane.right_bounds,
        ..NodeInfo::EMPTY
    };
    let (mut i, mut j) = (0, items.len());
    while i < j {
        let item = items[i];
        if mapping.bin_on(item.centroid(), plane.axis) < plane.bin {
            left.centroid_bounds.grow(item.centroid());
            left.weight += item.weight();
            i += 1;
        } else {
            j -= 1;
            items.swap(i, j);
            right.centroid_bounds.grow(item.centroid());
            right.weight += item.weight();
        }
    }
    Split {
        left_len: i,
        left,
        right,
    }
}

/// Splits at the median centroid of the widest centroid axis (ties by
/// position in the slice's current order, which is deterministic).
pub(super) fn median_split<T: Binned>(items: &mut [T], info: &NodeInfo) -> Split {
    let axis = info.centroid_bounds.largest_axis();
    let mid = items.len() / 2;
    items.select_nth_unstable_by(mid, |a, b| {
        a.centroid()[axis].total_cmp(&b.centroid()[axis])
    });
    Split {
        left_len: mid,
        left: NodeInfo::of(&items[..mid]),
        right: NodeInfo::of(&items[mid..]),
    }
}

/// The exact SAH split of a node of 2 to [`SMALL`] items: the cheapest
/// split position among the items sorted by centroid on each axis (ties by
/// current position; the first axis wins equal costs). Reorders `items`
/// into the winning order and returns the split with its weighted area.
pub(super) fn small_split<T: Binned>(items: &mut [T]) -> (Split, f32) {
    let n = items.len();
    debug_assert!((2..=SMALL).contains(&n));
    let cost = if n == 2 {
        // One split whatever the axis.
        let [a, b] = [&items[0], &items[1]];
        a.bounds().half_area() * a.weight() as f32 + b.bounds().half_area() * b.weight() as f32
    } else {
        let on_axis = |axis: usize| {
            // Sort keys `centroid << 8 | position`: one integer sort, ties by position.
            let mut keys = [0u64; SMALL];
            for (k, (key, item)) in keys.iter_mut().zip(items.iter()).enumerate() {
                *key = u64::from(ordered_bits(item.centroid()[axis])) << 8 | k as u64;
            }
            keys[..n].sort_unstable();
            let (position, cost) = sweep_sorted(items, &keys[..n]);
            (cost, axis, position)
        };
        let (cost, axis, position) =
            (1..3).map(on_axis).fold(
                on_axis(0),
                |best, next| if next.0 < best.0 { next } else { best },
            );
        // A stable sort reproduces the (centroid, position) order of the keys.
        items.sort_by(|a, b| a.centroid()[axis].total_cmp(&b.centroid()[axis]));
        return (split_at(items, position), cost);
    };
    (split_at(items, 1), cost)
}

/// The split of `items` after its first `position` items.
fn split_at<T: Binned>(items: &[T], position: usize) -> Split {
    Split {
        left_len: position,
        left: NodeInfo::of(&items[..position]),
        right: NodeInfo::of(&items[position..]),
    }
}

/// `x`'s bits, mapped so that unsigned integer order is `f32::total_cmp` order.
#[inline]
fn ordered_bits(x: f32) -> u32 {
    let bits = x.to_bits();
    if bits >> 31 == 1 {
        !bits
    } else {
        bits | 1 << 31
    }
}

/// The cheapest split position of `items` taken in the order of `keys`
/// (whose low 8 bits are positions), and its `A_L W_L + A_R W_R`.
fn sweep_sorted<T: Binned>(items: &[T], keys: &[u64]) -> (usize, f32) {
    let n = keys.len();
    let item = |i: usize| &items[(keys[i] & 0xff) as usize];
    let mut right_area = [0.0f32; SMALL];
    let mut right_weight = [0usize; SMALL];
    let (mut acc, mut weight) = (BuildBox::EMPTY, 0);
    for i in (1..n).rev() {
        acc = acc.union(item(i).bounds());
        weight += item(i).weight();
        right_area[i] = acc.half_area();
        right_weight[i] = weight;
    }
    let (mut left, mut left_weight) = (BuildBox::EMPTY, 0);
    let mut best = (1, f32::INFINITY);
    for i in 1..n {
        left = left.union(item(i - 1).bounds());
        left_weight += item(i - 1).weight();
        let cost = left.half_area() * left_weight as f32 + right_area[i] * right_weight[i] as f32;
        if cost < best.1 {
            best = (i, cost);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use caustic_geom::Aabb;

    #[derive(Clone, Copy)]
    struct Point(Vec3, usize);

    impl Binned for Point {
        fn bounds(&self) -> BuildBox {
            BuildBox::from_aabb(Aabb::new(self.0, self.0 + 0.5))
        }
        fn centroid(&self) -> Vec3 {
            self.0
        }
        fn weight(&self) -> usize {
            self.1
        }
    }

    #[test]
    fn two_clumps_split_between_them_and_weights_count() {
        let mut items: Vec<Point> = (0..10)
            .map(|i| {
                Point(
                    Vec3::new(if i % 2 == 0 { 0.0 } else { 100.0 }, i as f32 * 0.01, 0.0),
                    1,
                )
            })
            .collect();
        let info = NodeInfo::of(&items);
        assert_eq!(info.weight, 10);
        let mapping = BinMapping::new(&info.centroid_bounds, 16);
        let plane = best_plane(&items, &mapping).unwrap();
        let split = partition(&mut items, &mapping, &plane);
        assert_eq!(split.left_len, 5);
        assert!(items[..5].iter().all(|p| p.0.x == 0.0));
        assert_eq!(split.left.weight + split.right.weight, 10);
    }

    #[test]
    fn small_split_finds_the_exact_sah_split() {
        // Along x: three clumps at 0, 10 and 11; the best cut isolates the
        // clump at 0, whatever the order the items come in.
        let xs = [11.0, 0.0, 10.0, 0.1, 10.1, 0.2, 11.1];
        let mut items: Vec<Point> = xs
            .iter()
            .map(|&x| Point(Vec3::new(x, 0.0, 0.0), 1))
            .collect();
        let (split, cost) = small_split(&mut items);
        assert_eq!(split.left_len, 3);
        assert!(items[..3].iter().all(|p| p.0.x < 1.0));
        assert!(cost.is_finite());
        // Coincident items still split (by position), evenly or not.
        let mut same = vec![Point(Vec3::ONE, 1); 5];
        let (split, _) = small_split(&mut same);
        assert!((1..5).contains(&split.left_len));
    }

    #[test]
    fn coincident_centroids_have_no_plane_and_split_at_the_median() {
        let mut items = vec![Point(Vec3::ONE, 3); 7];
        let info = NodeInfo::of(&items);
        let mapping = BinMapping::new(&info.centroid_bounds, 16);
        assert!(best_plane(&items, &mapping).is_none());
        let split = median_split(&mut items, &info);
        assert_eq!(
            (split.left_len, split.left.weight, split.right.weight),
            (3, 9, 12)
        );
    }
}
