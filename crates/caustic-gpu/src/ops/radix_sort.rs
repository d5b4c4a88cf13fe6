//! Stable LSD radix sort of u32 or u64 keys, optionally carrying u32 values
//! (`kernels/radix_sort.cu`), after Onesweep (Adinets & Merrill 2022): one
//! histogram pass over the keys for all digits, then one pass per 8-bit digit
//! that ranks a tile in shared memory and resolves each digit's global offset
//! by decoupled look-back. Semantics: [`super::cpu::sort_pairs`] (ascending
//! unsigned keys; equal keys keep their input order).

use std::ops::Range;

use bytemuck::Pod;

use super::{LookbackScratch, blocks_for, check_len, check_same_len};
use crate::buffer::DeviceBuffer;
use crate::error::GpuError;
use crate::kernel::{DevicePtr, DevicePtrMut, Kernel, Ptr, PtrMut};
use crate::kernels::ops_radix_sort as k;

/// `(keys, n, histograms, begin_bit, end_bit, passes)`.
type Histogram<K> = (Ptr<K>, u64, PtrMut<u32>, u32, u32, u32);
/// `(keys_in, keys_out, values_in, values_out, n, shift, mask,
/// digit_offsets, status, tile_counter)`.
type Onesweep<K> = (
    Ptr<K>,
    PtrMut<K>,
    Ptr<u32>,
    PtrMut<u32>,
    u64,
    u32,
    u32,
    Ptr<u32>,
    PtrMut<u32>,
    PtrMut<u32>,
);

/// Threads per block (`SORT_THREADS`).
pub(crate) const SORT_THREADS: u32 = 256;
/// Digits per pass (`SORT_RADIX`).
pub(crate) const RADIX: usize = 256;
/// Most digit passes one histogram launch counts (`SORT_MAX_PASSES`).
pub(crate) const MAX_PASSES: usize = 8;
const DIGIT_BITS: u32 = 8;
/// Keys each histogram thread reads before another block is worth starting.
const HISTOGRAM_KEYS_PER_THREAD: usize = 32;

/// The longest input: the look-back keeps per-digit counts in 30 bits.
pub const MAX_SORT_LEN: usize = (1 << 30) - 1;

/// A key type the radix sort handles: unsigned integers, ordered ascending.
pub trait RadixKey: Pod + sealed::Sealed {
    /// Bits in the key; the default bit range is `0..BITS`.
    const BITS: u32;
    /// Keys per tile of a digit pass (`SORT_THREADS * SORT_ITEMS_U32` or `_U64`).
    #[doc(hidden)]
    const TILE: usize;
    #[doc(hidden)]
    const HISTOGRAM: Kernel<Histogram<Self>>;
    #[doc(hidden)]
    const ONESWEEP: Kernel<Onesweep<Self>>;
    /// The keys-only pass (ranks by shared atomic OR; see radix_sort.cu).
    #[doc(hidden)]
    const ONESWEEP_KEYS: Kernel<Onesweep<Self>>;
    /// Keys per tile and threads per block of the keys-only pass.
    #[doc(hidden)]
    const KEYS_TILE: usize;
    #[doc(hidden)]
    const KEYS_THREADS: u32;
}

impl RadixKey for u32 {
    const BITS: u32 = 32;
    const TILE: usize = 4096;
    const HISTOGRAM: Kernel<Histogram<u32>> = k::RADIX_SORT_HISTOGRAM_U32;
    const ONESWEEP: Kernel<Onesweep<u32>> = k::RADIX_SORT_ONESWEEP_U32;
    const ONESWEEP_KEYS: Kernel<Onesweep<u32>> = k::RADIX_SORT_ONESWEEP_KEYS_U32;
    const KEYS_TILE: usize = 384 * 20;
    const KEYS_THREADS: u32 = 384;
}

impl RadixKey for u64 {
    const BITS: u32 = 64;
    const TILE: usize = 3072;
    const HISTOGRAM: Kernel<Histogram<u64>> = k::RADIX_SORT_HISTOGRAM_U64;
    const ONESWEEP: Kernel<Onesweep<u64>> = k::RADIX_SORT_ONESWEEP_U64;
    const ONESWEEP_KEYS: Kernel<Onesweep<u64>> = k::RADIX_SORT_ONESWEEP_KEYS_U64;
    const KEYS_TILE: usize = 3072;
    const KEYS_THREADS: u32 = SORT_THREADS;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for u32 {}
    impl Sealed for u64 {}
}

/// Sorts `keys` ascending and applies the same permutation to `values`.
pub fn sort_pairs<K: RadixKey>(
    keys: &mut DeviceBuffer<K>,
    values: &mut DeviceBuffer<u32>,
) -> Result<(), GpuError> {
    sort(keys, Some(values), 0..K::BITS)
}

/// Sorts `keys` ascending.
pub fn sort_keys<K: RadixKey>(keys: &mut DeviceBuffer<K>) -> Result<(), GpuError> {
    sort(keys, None, 0..K::BITS)
}

/// Sorts by the key bits in `bits` only (e.g. `0..30` for 30-bit Morton
/// codes); other bits are ignored, so keys equal in `bits` keep their order.
pub fn sort_pairs_bits<K: RadixKey>(
    keys: &mut DeviceBuffer<K>,
    values: &mut DeviceBuffer<u32>,
    bits: Range<u32>,
) -> Result<(), GpuError> {
    sort(keys, Some(values), bits)
}

fn sort<K: RadixKey>(
    keys: &mut DeviceBuffer<K>,
    values: Option<&mut DeviceBuffer<u32>>,
    bits: Range<u32>,
) -> Result<(), GpuError> {
    let pass = if values.is_some() {
        (K::ONESWEEP, K::TILE, SORT_THREADS)
    } else {
        (K::ONESWEEP_KEYS, K::KEYS_TILE, K::KEYS_THREADS)
    };
    sort_with(keys, values, bits, pass)
}

/// The sort with one digit-pass kernel, its tile and its block size.
fn sort_with<K: RadixKey>(
    keys: &mut DeviceBuffer<K>,
    mut values: Option<&mut DeviceBuffer<u32>>,
    bits: Range<u32>,
    (onesweep, tile, threads): (Kernel<Onesweep<K>>, usize, u32),
) -> Result<(), GpuError> {
    let n = keys.len();
    let operation = K::ONESWEEP.name();
    check_len(operation, n, MAX_SORT_LEN)?;
    if let Some(values) = values.as_deref() {
        check_same_len(operation, "values", n, values.len())?;
    }
    assert!(
        bits.start < bits.end && bits.end <= K::BITS,
        "bit range {bits:?} outside 0..{}",
        K::BITS
    );
    if n < 2 {
        return Ok(());
    }
    let passes = (bits.end - bits.start).div_ceil(DIGIT_BITS) as usize;
    debug_assert!(
        passes <= MAX_PASSES,
        "the histogram kernel counts at most MAX_PASSES digits"
    );
    let digit_offsets = digit_offsets(keys, bits.clone(), passes)?;

    let gpu = keys.gpu().clone();
    let mut alternate_keys = DeviceBuffer::<K>::uninit(&gpu, "radix sort keys (alternate)", n)?;
    let mut alternate_values = match values {
        Some(_) => Some(DeviceBuffer::<u32>::uninit(
            &gpu,
            "radix sort values (alternate)",
            n,
        )?),
        None => None,
    };
    let tiles = n.div_ceil(tile);
    // One u32 of status per tile and digit: tiles * RADIX / 2 u64 words.
    let mut scratch = LookbackScratch::new(&gpu, "radix sort digit status", tiles * RADIX / 2)?;

    for pass in 0..passes {
        if pass > 0 {
            scratch.reset()?;
        }
        // Even passes read the caller's buffers, odd passes the alternates.
        let even = pass.is_multiple_of(2);
        let (keys_in, keys_out) = if even {
            (keys.ptr(), alternate_keys.ptr_mut())
        } else {
            (alternate_keys.ptr(), keys.ptr_mut())
        };
        let (values_in, values_out) = match (values.as_deref_mut(), alternate_values.as_mut()) {
            (Some(v), Some(alt)) if even => (v.ptr(), alt.ptr_mut()),
            (Some(v), Some(alt)) => (alt.ptr(), v.ptr_mut()),
            _ => (DevicePtr::null(), DevicePtrMut::null()),
        };
        let shift = bits.start + DIGIT_BITS * pass as u32;
        // The last pass may be narrower than a digit when the range ends early.
        let mask = (1u32 << DIGIT_BITS.min(bits.end - shift)) - 1;
        let offsets = digit_offsets.ptr_at(pass * RADIX);
        let (status, counter) = scratch.pointers();
        gpu.launch(
            onesweep,
            blocks_for(n, tile),
            threads,
            (
                keys_in,
                keys_out,
                values_in,
                values_out,
                n as u64,
                shift,
                mask,
                offsets,
                status.cast(),
                counter,
            ),
        )?;
    }
    if passes % 2 == 1 {
        keys.swap_storage(&mut alternate_keys);
        if let (Some(v), Some(alt)) = (values, alternate_values.as_mut()) {
            v.swap_storage(alt);
        }
    }
    Ok(())
}

/// For each pass, the exclusive prefix sum of its 256 digit counts: where
/// each digit's keys start in that pass's output.
fn digit_offsets<K: RadixKey>(
    keys: &DeviceBuffer<K>,
    bits: Range<u32>,
    passes: usize,
) -> Result<DeviceBuffer<u32>, GpuError> {
    let gpu = keys.gpu();
    let n = keys.len();
    let mut histograms = DeviceBuffer::<u32>::zeroed(gpu, "radix sort histograms", passes * RADIX)?;
    // Enough 256-thread blocks to fill every SM (2048 threads each).
    let most_blocks = 8 * gpu.info().multiprocessors.max(1);
    let blocks = blocks_for(n, SORT_THREADS as usize * HISTOGRAM_KEYS_PER_THREAD).min(most_blocks);
    gpu.launch(
        K::HISTOGRAM,
        blocks,
        SORT_THREADS,
        (
            keys.ptr(),
            n as u64,
            histograms.ptr_mut(),
            bits.start,
            bits.end,
            passes as u32,
        ),
    )?;
    gpu.launch(
        k::RADIX_SORT_SCAN_HISTOGRAMS,
        passes as u32,
        RADIX as u32,
        (histograms.ptr_mut(),),
    )?;
    Ok(histograms)
}
