//! CPU twins of the data-parallel primitives. Each function here is the
//! definition of its GPU operation's result, written as plainly as possible,
//! and is the reference the GPU tests compare with. The unit tests check
//! them against the worked examples of Zeidan 2011 (figures 3.3 and 4.2).

use caustic_geom::Aabb;

use super::scan::{Direction, ScanKind};
use super::segment::SegmentOp;

// ------------------------------------------------------------- reductions

/// Sum modulo 2^32.
pub fn sum_u32(input: &[u32]) -> u32 {
    input.iter().fold(0u32, |a, &b| a.wrapping_add(b))
}

/// Number of non-zero elements.
pub fn count_nonzero_u32(input: &[u32]) -> u32 {
    input.iter().filter(|&&v| v != 0).count() as u32
}

/// Smallest element; `u32::MAX` when empty.
pub fn min_u32(input: &[u32]) -> u32 {
    input.iter().copied().min().unwrap_or(u32::MAX)
}

/// Largest element; 0 when empty.
pub fn max_u32(input: &[u32]) -> u32 {
    input.iter().copied().max().unwrap_or(0)
}

/// The exact sum rounded once to f32 (accumulated in f64); the GPU's tree
/// sum is within rounding of it.
pub fn sum_f32(input: &[f32]) -> f32 {
    input.iter().map(|&v| f64::from(v)).sum::<f64>() as f32
}

/// Smallest non-NaN element; +inf when there is none.
pub fn min_f32(input: &[f32]) -> f32 {
    input.iter().fold(f32::INFINITY, |a, &b| a.min(b))
}

/// Largest non-NaN element; -inf when there is none.
pub fn max_f32(input: &[f32]) -> f32 {
    input.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b))
}

/// The union of the boxes; [`Aabb::EMPTY`] when there are none. NaN
/// coordinates are skipped, as `f32::min`/`max` skip them.
pub fn union_aabb(input: &[Aabb]) -> Aabb {
    input.iter().fold(Aabb::EMPTY, |a, b| Aabb {
        min: a.min.min(b.min),
        max: a.max.max(b.max),
    })
}

// ------------------------------------------------------------------ scans

/// Prefix sums modulo 2^32 (see [`ScanKind`] and [`Direction`]); also
/// returns the total, the thesis's ScanTail.
pub fn scan_u32(input: &[u32], kind: ScanKind, direction: Direction) -> (Vec<u32>, u32) {
    let mut out = vec![0u32; input.len()];
    let mut running = 0u32;
    let mut step = |i: usize| {
        let before = running;
        running = running.wrapping_add(input[i]);
        out[i] = match kind {
            ScanKind::Exclusive => before,
            ScanKind::Inclusive => running,
        };
    };
    match direction {
        Direction::Forward => (0..input.len()).for_each(&mut step),
        Direction::Backward => (0..input.len()).rev().for_each(&mut step),
    }
    (out, running)
}

/// Prefix sums that restart at every non-zero head flag (element 0 always
/// starts a segment); an exclusive result is 0 at every head. Also returns
/// the last segment's sum.
pub fn segmented_scan_u32(values: &[u32], heads: &[u32], kind: ScanKind) -> (Vec<u32>, u32) {
    assert_eq!(values.len(), heads.len());
    let mut out = Vec::with_capacity(values.len());
    let mut running = 0u32;
    for (&v, &head) in values.iter().zip(heads) {
        if head != 0 {
            running = 0;
        }
        let before = running;
        running = running.wrapping_add(v);
        out.push(match kind {
            ScanKind::Exclusive => before,
            ScanKind::Inclusive => running,
        });
    }
    (out, running)
}

// ------------------------------------------------------ compaction, split

/// Stable partition by flag inside every segment: segments start at
/// non-zero `heads` (element 0 always starts one); within each, the values
/// with a zero flag first, then the others, both in input order.
pub fn segmented_split_u32(values: &[u32], flags: &[u32], heads: &[u32]) -> Vec<u32> {
    assert!(values.len() == flags.len() && values.len() == heads.len());
    let mut out = Vec::with_capacity(values.len());
    let mut start = 0;
    while start < values.len() {
        let mut end = start + 1;
        while end < values.len() && heads[end] == 0 {
            end += 1;
        }
        let segment = start..end;
        out.extend(
            segment
                .clone()
                .filter(|&i| flags[i] == 0)
                .map(|i| values[i]),
        );
        out.extend(segment.filter(|&i| flags[i] != 0).map(|i| values[i]));
        start = end;
    }
    out
}

/// The values whose flag is non-zero, in input order.
pub fn compact_u32(values: &[u32], flags: &[u32]) -> Vec<u32> {
    assert_eq!(values.len(), flags.len());
    values
        .iter()
        .zip(flags)
        .filter(|&(_, &f)| f != 0)
        .map(|(&v, _)| v)
        .collect()
}

/// The indices of the non-zero flags, ascending.
pub fn select_indices(flags: &[u32]) -> Vec<u32> {
    (0..flags.len() as u32)
        .filter(|&i| flags[i as usize] != 0)
        .collect()
}

/// Values with a zero flag, then values with a non-zero flag, each group in
/// input order; and the split point (the number of zero flags).
pub fn split_u32(values: &[u32], flags: &[u32]) -> (Vec<u32>, usize) {
    assert_eq!(values.len(), flags.len());
    let (falses, trues): (Vec<_>, Vec<_>) = values.iter().zip(flags).partition(|&(_, &f)| f == 0);
    let split = falses.len();
    let out = falses.into_iter().chain(trues).map(|(&v, _)| v).collect();
    (out, split)
}

// ------------------------------------------------------------------- sort

/// Keys ascending with their values; equal keys keep their input order.
pub fn sort_pairs<K: Ord + Copy>(keys: &[K], values: &[u32]) -> (Vec<K>, Vec<u32>) {
    assert_eq!(keys.len(), values.len());
    let mut pairs: Vec<(K, u32)> = keys.iter().copied().zip(values.iter().copied()).collect();
    // sort_by_key is stable.
    pairs.sort_by_key(|&(k, _)| k);
    pairs.into_iter().unzip()
}

/// Checks in O(n) that `sorted` and `permutation` are the stable sort of
/// `original` carried with the values 0..n: the permutation visits every
/// index once, `sorted[i] == original[permutation[i]]`, keys never
/// decrease, and equal keys keep increasing indices. Cheaper than sorting
/// on the CPU, so it checks the largest GPU sorts too.
pub fn verify_stable_sort<K: Ord + Copy + std::fmt::Debug>(
    original: &[K],
    sorted: &[K],
    permutation: &[u32],
) -> Result<(), String> {
    let n = original.len();
    if sorted.len() != n || permutation.len() != n {
        return Err(format!(
            "lengths differ: {n} keys in, {} keys and {} values out",
            sorted.len(),
            permutation.len()
        ));
    }
    let mut seen = vec![false; n];
    for (i, (&key, &from)) in sorted.iter().zip(permutation).enumerate() {
        let from_index = from as usize;
        if from_index >= n || std::mem::replace(&mut seen[from_index], true) {
            return Err(format!("value {from} at {i} is out of range or repeated"));
        }
        if original[from_index] != key {
            return Err(format!(
                "key {key:?} at {i} is not original key {from} ({:?})",
                original[from_index]
            ));
        }
        if i > 0 {
            let (previous_key, previous_from) = (sorted[i - 1], permutation[i - 1]);
            if previous_key > key {
                return Err(format!("keys decrease at {i}: {previous_key:?} > {key:?}"));
            }
            if previous_key == key && previous_from > from {
                return Err(format!(
                    "unstable at {i}: equal keys {key:?} from {previous_from} then {from}"
                ));
            }
        }
    }
    Ok(())
}

// --------------------------------------------------------------- segments

/// `out[s]` = the reduction of the values owned by segment s.
pub fn reduce_by_owner(values: &[u32], owner: &[u32], segments: usize, op: SegmentOp) -> Vec<u32> {
    assert_eq!(values.len(), owner.len());
    let mut out = vec![op.identity(); segments];
    for (&v, &o) in values.iter().zip(owner) {
        let slot = &mut out[o as usize];
        *slot = match op {
            SegmentOp::Sum => slot.wrapping_add(v),
            SegmentOp::Min => (*slot).min(v),
            SegmentOp::Max => (*slot).max(v),
        };
    }
    out
}

/// `values[indices[i]]` for every i.
pub fn gather_u32(values: &[u32], indices: &[u32]) -> Vec<u32> {
    indices.iter().map(|&i| values[i as usize]).collect()
}

/// `(start, end)` with `start[v]..end[v]` the run of v in sorted keys below
/// `values`, and `0..0` for absent values.
pub fn find_sorted_bounds(sorted: &[u32], values: usize) -> (Vec<u32>, Vec<u32>) {
    let mut start = vec![0u32; values];
    let mut end = vec![0u32; values];
    for (i, &v) in sorted.iter().enumerate() {
        if i == 0 || sorted[i - 1] != v {
            start[v as usize] = i as u32;
        }
        end[v as usize] = i as u32 + 1;
    }
    (start, end)
}

/// Chunks of at most `chunk` elements covering each node's range, in node
/// order, as (owner, start, size) arrays.
pub fn create_chunks(
    node_start: &[u32],
    node_size: &[u32],
    chunk: u32,
) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
    assert!(chunk > 0);
    let (mut owner, mut start, mut size) = (Vec::new(), Vec::new(), Vec::new());
    for (node, (&first, &len)) in node_start.iter().zip(node_size).enumerate() {
        for offset in (0..len).step_by(chunk as usize) {
            owner.push(node as u32);
            start.push(first + offset);
            size.push(chunk.min(len - offset));
        }
    }
    (owner, start, size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segmented_split_partitions_each_segment() {
        let values = [10, 11, 12, 13, 14, 15, 16];
        let flags = [1, 0, 1, 0, 1, 1, 0];
        let heads = [0, 0, 0, 1, 0, 1, 0];
        assert_eq!(
            segmented_split_u32(&values, &flags, &heads),
            [11, 10, 12, 13, 14, 16, 15]
        );
        assert!(segmented_split_u32(&[], &[], &[]).is_empty());
    }
    use caustic_geom::Vec3;

    /// Zeidan 2011, figure 3.3: the input and its scans.
    const INPUT: [u32; 8] = [3, 7, 5, 4, 9, 2, 5, 3];
    const HEADS: [u32; 8] = [1, 0, 0, 0, 0, 1, 0, 0];

    #[test]
    fn thesis_scan_vectors() {
        let (exclusive, total) = scan_u32(&INPUT, ScanKind::Exclusive, Direction::Forward);
        assert_eq!(exclusive, [0, 3, 10, 15, 19, 28, 30, 35]);
        // The text says 32; the figure's inclusive scan ends at 38 (errata).
        assert_eq!(total, 38);
        let (inclusive, _) = scan_u32(&INPUT, ScanKind::Inclusive, Direction::Forward);
        assert_eq!(inclusive, [3, 10, 15, 19, 28, 30, 35, 38]);
        assert_eq!(sum_u32(&INPUT), 38);
    }

    #[test]
    fn thesis_segmented_scan_vectors() {
        let (exclusive, _) = segmented_scan_u32(&INPUT, &HEADS, ScanKind::Exclusive);
        assert_eq!(exclusive, [0, 3, 10, 15, 19, 0, 2, 7]);
        let (inclusive, last_segment) = segmented_scan_u32(&INPUT, &HEADS, ScanKind::Inclusive);
        assert_eq!(inclusive, [3, 10, 15, 19, 28, 2, 7, 10]);
        assert_eq!(last_segment, 10);
    }

    #[test]
    fn backward_scan_is_the_reversed_forward_scan() {
        let mut reversed = INPUT;
        reversed.reverse();
        for kind in [ScanKind::Exclusive, ScanKind::Inclusive] {
            let (mut forward, _) = scan_u32(&reversed, kind, Direction::Forward);
            forward.reverse();
            assert_eq!(scan_u32(&INPUT, kind, Direction::Backward).0, forward);
        }
        assert_eq!(
            scan_u32(&INPUT, ScanKind::Exclusive, Direction::Backward).0,
            [35, 28, 23, 19, 10, 8, 3, 0]
        );
    }

    #[test]
    fn scans_wrap_modulo_2_pow_32() {
        let (out, total) = scan_u32(&[u32::MAX, 2], ScanKind::Inclusive, Direction::Forward);
        assert_eq!(out, [u32::MAX, 1]);
        assert_eq!(total, 1);
    }

    /// Thesis section 3.3: compaction writes kept element i to scan(flags)[i];
    /// split puts a flag-0 element at i - scan[i] and a flag-1 one at
    /// scan[i] after the falses (one output array, falses first here).
    #[test]
    fn compaction_and_split_follow_the_flag_scan() {
        let flags = [1, 0, 1, 1, 0, 0, 1, 0];
        assert_eq!(compact_u32(&INPUT, &flags), [3, 5, 4, 5]);
        assert_eq!(select_indices(&flags), [0, 2, 3, 6]);
        let (split, point) = split_u32(&INPUT, &flags);
        assert_eq!(split, [7, 9, 2, 3, 3, 5, 4, 5]);
        assert_eq!(point, 4);
        let (scan, _) = scan_u32(&flags, ScanKind::Exclusive, Direction::Forward);
        let falses = flags.iter().filter(|&&f| f == 0).count() as u32;
        for i in 0..INPUT.len() {
            let slot = if flags[i] == 1 {
                falses + scan[i]
            } else {
                i as u32 - scan[i]
            };
            assert_eq!(split[slot as usize], INPUT[i]);
        }
    }

    #[test]
    fn empty_inputs_give_identities() {
        assert_eq!(sum_u32(&[]), 0);
        assert_eq!(min_u32(&[]), u32::MAX);
        assert_eq!(max_u32(&[]), 0);
        assert_eq!(min_f32(&[]), f32::INFINITY);
        assert_eq!(max_f32(&[]), f32::NEG_INFINITY);
        assert_eq!(union_aabb(&[]), Aabb::EMPTY);
        assert_eq!(split_u32(&[], &[]), (vec![], 0));
    }

    #[test]
    fn float_reductions_skip_nan() {
        let v = [2.0, f32::NAN, -1.0];
        assert_eq!(min_f32(&v), -1.0);
        assert_eq!(max_f32(&v), 2.0);
        let boxes = [
            Aabb::new(Vec3::new(0.0, f32::NAN, 0.0), Vec3::ONE),
            Aabb::new(Vec3::splat(-1.0), Vec3::splat(0.5)),
        ];
        assert_eq!(union_aabb(&boxes), Aabb::new(Vec3::splat(-1.0), Vec3::ONE));
    }

    #[test]
    fn sort_is_stable() {
        let (keys, values) = sort_pairs(&[3u32, 1, 3, 0, 1], &[0, 1, 2, 3, 4]);
        assert_eq!(keys, [0, 1, 1, 3, 3]);
        assert_eq!(values, [3, 1, 4, 0, 2]);
    }

    #[test]
    fn verify_stable_sort_catches_each_fault() {
        let original = [5u32, 1, 5, 0];
        assert!(verify_stable_sort(&original, &[0, 1, 5, 5], &[3, 1, 0, 2]).is_ok());
        assert!(verify_stable_sort(&original, &[0, 1, 5, 5], &[3, 1, 2, 0]).is_err());
        assert!(verify_stable_sort(&original, &[0, 1, 5, 5], &[3, 1, 0, 0]).is_err());
        assert!(verify_stable_sort(&original, &[1, 0, 5, 5], &[1, 3, 0, 2]).is_err());
        assert!(verify_stable_sort(&original, &[0, 1, 5, 4], &[3, 1, 0, 2]).is_err());
    }

    /// Zeidan 2011, figure 4.2 (T = 4).
    #[test]
    fn thesis_chunk_vectors() {
        let (owner, start, size) = create_chunks(&[0, 6, 11], &[6, 5, 3], 4);
        assert_eq!(owner, [0, 0, 1, 1, 2]);
        assert_eq!(start, [0, 4, 6, 10, 11]);
        assert_eq!(size, [4, 2, 4, 1, 3]);
    }

    #[test]
    fn chunks_skip_empty_nodes() {
        let (owner, start, size) = create_chunks(&[0, 2, 2, 9], &[2, 0, 7, 0], 3);
        assert_eq!(owner, [0, 2, 2, 2]);
        assert_eq!(start, [0, 2, 5, 8]);
        assert_eq!(size, [2, 3, 3, 1]);
    }

    #[test]
    fn sorted_bounds_and_tails() {
        let (start, end) = find_sorted_bounds(&[0, 0, 2, 2, 2, 4], 6);
        assert_eq!(start, [0, 0, 2, 0, 5, 0]);
        assert_eq!(end, [2, 0, 5, 0, 6, 0]);
        // Segment tails of the thesis's segmented inclusive scan.
        let (inclusive, _) = segmented_scan_u32(&INPUT, &HEADS, ScanKind::Inclusive);
        assert_eq!(gather_u32(&inclusive, &[4, 7]), [28, 10]);
    }

    #[test]
    fn reduce_by_owner_matches_segments() {
        let owner = [0, 0, 0, 0, 0, 1, 1, 1];
        assert_eq!(
            reduce_by_owner(&INPUT, &owner, 3, SegmentOp::Sum),
            [28, 10, 0]
        );
        assert_eq!(
            reduce_by_owner(&INPUT, &owner, 3, SegmentOp::Min),
            [3, 2, u32::MAX]
        );
        assert_eq!(
            reduce_by_owner(&INPUT, &owner, 3, SegmentOp::Max),
            [9, 5, 0]
        );
    }
}
