//! Parallel least-significant-digit radix sort of `(key, value)` pairs, the
//! sorting step of the hash grid (Fleisz 2009 uses the CUDPP radix sort of
//! Satish, Harris and Garland 2009 at this point).
//!
//! A pair is packed as `key << 32 | value` in a `u64`. Each pass sorts by
//! one 8-bit digit of the key, lowest first, and is stable, so after the
//! last pass pairs are ordered by key and, among equal keys, keep their
//! input order. A pass:
//! 1. every chunk counts its digits (in parallel);
//! 2. an exclusive scan over (digit, chunk), digit-major, gives each chunk
//!    one output run per digit; digit-major, chunk-minor order is what makes
//!    the pass stable;
//! 3. every chunk scatters into its own runs (in parallel). The runs are
//!    disjoint, so they are handed out as `&mut` slices cut with
//!    `split_at_mut`: no unsafe code, no atomics.
//!
//! Passes whose digit is the same for every pair are skipped. The output
//! depends only on the input, never on the thread count.

use rayon::prelude::*;

const DIGIT_BITS: u32 = 8;
const BUCKETS: usize = 1 << DIGIT_BITS;
/// Pairs per chunk: one rayon task per chunk and pass.
const CHUNK: usize = 64 * 1024;
/// Below this many pairs one stable comparison sort on one thread is cheaper.
const SEQUENTIAL_MAX: usize = 8 * 1024;

/// Sorts packed `key << 32 | value` pairs by the low `key_bits` bits of the
/// key, stably. Key bits above `key_bits` must be zero.
pub(crate) fn sort_pairs(pairs: &mut Vec<u64>, key_bits: u32) {
    debug_assert!(key_bits <= 32);
    if pairs.len() <= SEQUENTIAL_MAX {
        pairs.sort_by_key(|&p| p >> 32);
        return;
    }
    let mut scratch = vec![0u64; pairs.len()];
    let mut shift = 32;
    while shift < 32 + key_bits {
        if radix_pass(pairs, &mut scratch, shift) {
            std::mem::swap(pairs, &mut scratch);
        }
        shift += DIGIT_BITS;
    }
}

#[inline(always)]
fn digit(pair: u64, shift: u32) -> usize {
    ((pair >> shift) as usize) & (BUCKETS - 1)
}

/// One stable pass by the digit at `shift` from `src` into `dst`; false
/// (and `dst` untouched) when every pair has the same digit.
fn radix_pass(src: &[u64], dst: &mut [u64], shift: u32) -> bool {
    let counts: Vec<[usize; BUCKETS]> = src
        .par_chunks(CHUNK)
        .map(|chunk| {
            let mut c = [0usize; BUCKETS];
            for &p in chunk {
                c[digit(p, shift)] += 1;
            }
            c
        })
        .collect();
    let first = digit(src[0], shift);
    if counts.iter().map(|c| c[first]).sum::<usize>() == src.len() {
        return false;
    }
    let mut runs: Vec<Vec<&mut [u64]>> = (0..counts.len()).map(|_| Vec::new()).collect();
    let mut rest = dst;
    for d in 0..BUCKETS {
        for (chunk, c) in counts.iter().enumerate() {
            let (run, tail) = std::mem::take(&mut rest).split_at_mut(c[d]);
            runs[chunk].push(run);
            rest = tail;
        }
    }
    src.par_chunks(CHUNK)
        .zip(runs.into_par_iter())
        .for_each(|(chunk, mut runs)| {
            let mut cursor = [0usize; BUCKETS];
            for &p in chunk {
                let d = digit(p, shift);
                runs[d][cursor[d]] = p;
                cursor[d] += 1;
            }
        });
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_by_key_and_keeps_input_order_of_equal_keys() {
        let n = 3 * CHUNK + 17;
        let mut state = 12345u64;
        let mut pairs: Vec<u64> = (0..n as u64)
            .map(|i| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let key = (state >> 40) & 0x3ff; // 10 key bits: many duplicates
                (key << 32) | i
            })
            .collect();
        let mut expected = pairs.clone();
        expected.sort_by_key(|p| p >> 32);
        sort_pairs(&mut pairs, 10);
        assert_eq!(pairs, expected);
    }
}
