//! Parallel most-significant-digit radix sort, the sorting step of the
//! Morton-code builders (`lbvh`, `hlbvh`, `ploc`).
//!
//! One counting-sort pass on the top 8 bits of the key spreads the items
//! over 256 buckets, then the buckets are sorted independently, in parallel,
//! each small enough to stay in cache: by a comparison sort when it holds at
//! most [`BUCKET_SORT_MAX`] items, else by another radix pass on the next 8
//! bits (skewed inputs, such as many primitives in one corner of the scene).
//! The pass itself is parallel too:
//! 1. every chunk of the input counts its digits;
//! 2. an exclusive scan over (digit, chunk) gives each chunk, for each digit,
//!    the run of output positions it owns (digit-major, chunk-minor);
//! 3. every chunk scatters its items into its own runs.
//!
//! The runs are disjoint by construction, so step 3 hands each chunk its
//! runs as separate `&mut` slices cut from the output with `split_at_mut`:
//! no unsafe code and no atomics.
//!
//! The items' own order (`Ord`) decides the result; the key only has to
//! agree with it (a larger key means a larger item), so equal keys are
//! ordered by the rest of the item (the Morton builders sort (code, id)
//! pairs, so ties go to the lower id).
//!
//! Why MSD rather than the textbook LSD sort, and why not rayon's
//! `par_sort_unstable`: measured on 871k random (63-bit code, id) pairs and
//! 871k packed 30-bit keys on this shared 2-core machine (best of 12 runs,
//! ms, 1 / 2 threads): eight LSD passes 138 / 174 and four 39 / 39 (every
//! pass streams all items through memory, and memory is what this machine
//! lacks); this MSD sort 49 / 69 and 32 / 32; `par_sort_unstable` 45 / 87
//! and 39 / 52.

use rayon::prelude::*;

/// Bits per radix pass.
const DIGIT_BITS: u32 = 8;
const BUCKETS: usize = 1 << DIGIT_BITS;

/// Items per chunk of a parallel pass (one rayon task per chunk).
const CHUNK: usize = 32 * 1024;

/// Buckets up to this size are sorted by comparison (they fit in L2).
const BUCKET_SORT_MAX: usize = 16 * 1024;

/// Sorts `items` in parallel on the current rayon pool. `key(item)` must
/// fit in `key_bits` bits and agree with the items' order: `key(a) <
/// key(b)` implies `a < b`.
pub(crate) fn radix_sort<T, K>(items: &mut [T], key_bits: u32, key: K)
where
    T: Ord + Copy + Send + Sync,
    K: Fn(&T) -> u64 + Sync,
{
    if items.len() <= BUCKET_SORT_MAX {
        items.sort_unstable();
        return;
    }
    let mut scratch = items.to_vec();
    sort_by_digit(
        items,
        &mut scratch,
        key_bits.saturating_sub(DIGIT_BITS),
        &key,
    );
}

/// Sorts `items` by the digit at `shift` and then bucket by bucket;
/// `scratch` is working space of the same length.
fn sort_by_digit<T, K>(items: &mut [T], scratch: &mut [T], shift: u32, key: &K)
where
    T: Ord + Copy + Send + Sync,
    K: Fn(&T) -> u64 + Sync,
{
    let digit = |item: &T| ((key(item) >> shift) as usize) & (BUCKETS - 1);
    let counts = scatter(items, scratch, &digit);
    // Cut both arrays along the same bucket boundaries: each bucket is
    // sorted in `scratch`, with the matching part of `items` as its scratch.
    let totals = (0..BUCKETS).map(|d| counts.iter().map(|c| c[d]).sum::<usize>());
    let (mut sorted, mut spare) = (&mut *scratch, &mut *items);
    let mut buckets = Vec::with_capacity(BUCKETS);
    for total in totals.filter(|&t| t > 0) {
        let (bucket, rest) = std::mem::take(&mut sorted).split_at_mut(total);
        let (bucket_spare, spare_rest) = std::mem::take(&mut spare).split_at_mut(total);
        buckets.push((bucket, bucket_spare));
        sorted = rest;
        spare = spare_rest;
    }
    buckets.into_par_iter().for_each(|(bucket, spare)| {
        if bucket.len() <= BUCKET_SORT_MAX {
            bucket.sort_unstable();
        } else if shift > 0 {
            sort_by_digit(bucket, spare, shift.saturating_sub(DIGIT_BITS), key);
        } else {
            // Every key bit is used: the rest of the item decides.
            bucket.par_sort_unstable();
        }
    });
    items
        .par_chunks_mut(CHUNK)
        .zip(scratch.par_chunks(CHUNK))
        .for_each(|(to, from)| to.copy_from_slice(from));
}

/// One stable counting-sort pass from `src` to `dst`; returns the digit
/// counts of every chunk.
fn scatter<T, D>(src: &[T], dst: &mut [T], digit: &D) -> Vec<[usize; BUCKETS]>
where
    T: Copy + Send + Sync,
    D: Fn(&T) -> usize + Sync,
{
    let counts: Vec<[usize; BUCKETS]> = src
        .par_chunks(CHUNK)
        .map(|chunk| {
            let mut count = [0usize; BUCKETS];
            for item in chunk {
                count[digit(item)] += 1;
            }
            count
        })
        .collect();
    let runs = cut_runs(dst, &counts);
    src.par_chunks(CHUNK).zip(runs).for_each(|(chunk, runs)| {
        let mut writers: Vec<std::slice::IterMut<'_, T>> =
            runs.into_iter().map(|run| run.iter_mut()).collect();
        for item in chunk {
            let slot = writers[digit(item)].next().expect("run sized by the count");
            *slot = *item;
        }
    });
    counts
}

/// Cuts `dst` into the output run of every (chunk, digit): digit-major,
/// chunk-minor. Returns, per chunk, its runs indexed by digit.
fn cut_runs<'a, T>(dst: &'a mut [T], counts: &[[usize; BUCKETS]]) -> Vec<Vec<&'a mut [T]>> {
    let mut runs: Vec<Vec<&'a mut [T]>> =
        counts.iter().map(|_| Vec::with_capacity(BUCKETS)).collect();
    let mut rest = dst;
    for d in 0..BUCKETS {
        for (chunk, count) in counts.iter().enumerate() {
            let (run, tail) = std::mem::take(&mut rest).split_at_mut(count[d]);
            runs[chunk].push(run);
            rest = tail;
        }
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn xorshift(seed: u64) -> impl FnMut() -> u64 {
        let mut s = seed;
        move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        }
    }

    #[test]
    fn sorts_like_a_comparison_sort() {
        let mut next = xorshift(7);
        for (len, bits) in [
            (0, 8),
            (10, 8),
            (5000, 30),
            (100_000, 30),
            (70_000, 63),
            (70_000, 5),
        ] {
            let mask = (1u64 << bits) - 1;
            let items: Vec<(u64, u32)> = (0..len).map(|i| (next() & mask, i as u32)).collect();
            let mut radix = items.clone();
            radix_sort(&mut radix, bits, |&(k, _)| k);
            let mut reference = items;
            reference.sort();
            assert_eq!(radix, reference, "{len} items, {bits} bits");
        }
    }

    #[test]
    fn skewed_keys_recurse_into_big_buckets() {
        // All keys share their top 16 bits, and many are equal: the first
        // two passes find one bucket each, the third spreads them.
        let mut next = xorshift(3);
        let mut items: Vec<(u64, u32)> = (0..60_000u32)
            .map(|i| ((0xabcd << 16) | (next() & 0x3ff), i))
            .collect();
        let mut reference = items.clone();
        reference.sort();
        radix_sort(&mut items, 32, |&(k, _)| k);
        assert_eq!(items, reference);
        let mut same = vec![(5u64, 0u32); 40_000];
        same.iter_mut()
            .enumerate()
            .for_each(|(i, x)| x.1 = (40_000 - i) as u32);
        radix_sort(&mut same, 8, |&(k, _)| k);
        assert!(same.windows(2).all(|w| w[0] < w[1]));
    }
}
