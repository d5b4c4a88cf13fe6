// radix_sort.cu: stable LSD radix sort of u32 or u64 keys with u32 values,
// 8-bit digits, one pass over the data per digit.
//
// The design is Onesweep (Adinets & Merrill, "Onesweep: A Faster Least
// Significant Digit Radix Sort for GPUs", 2022):
//  1. radix_sort_histogram_* reads the keys once and counts every digit
//     position at the same time; radix_sort_scan_histograms turns each
//     256-bin count into the global start of each digit.
//  2. Per digit, radix_sort_onesweep_* ranks a tile of keys in shared
//     memory and finds, per digit, how many keys of earlier tiles come
//     before this tile's by a decoupled look-back over 256 per-digit
//     counters (Merrill & Garland 2016), so each key is read and written once
//     per digit.
// Ranking inside a warp matches equal digits with eight ballots (one per
// digit bit; pair sorts) or a shared atomic OR (keys only) instead of
// match.any, and keeps per-warp counters in shared memory; warps then
// combine in warp order, so the sort is stable. Keys-only sorts run their
// own kernels (radix_sort_onesweep_keys_*), compiled without values.
//
// Launch rules: the histogram kernel takes any grid; the scan takes one block
// of SORT_RADIX threads per digit pass; onesweep takes one block of
// SORT_THREADS threads per tile of SORT_THREADS * SORT_ITEMS_U32 (or _U64)
// keys (the u32 keys-only pass: SORT_KEYS_THREADS_U32 threads per tile of
// SORT_KEYS_THREADS_U32 * SORT_KEYS_ITEMS_U32 keys), with its tile counter
// and its status array (SORT_RADIX u32 per tile) zeroed. n < 2^30 (the
// status word keeps counts in 30 bits).
#include "block.cuh"

#define SORT_THREADS 256u
#define SORT_WARPS (SORT_THREADS / 32u)
// Keys per thread; a tile is SORT_THREADS * SORT_ITEMS_* keys. Fewer for
// u64 keys, so that keys and values fit the 48 KB of static shared memory.
#define SORT_ITEMS_U32 16u
#define SORT_ITEMS_U64 12u
// The u32 keys-only pass: 384 threads of 20 keys (7680 keys a tile, no value
// stage), two blocks per SM (80 registers). Against 256 x 16 at four blocks
// the sort measured 1.84 -> 1.74 ms on an H100: fewer tiles, so fewer
// look-backs per key (CUB's tiles are 384 x 19; notes: sort v4).
#define SORT_KEYS_THREADS_U32 384u
#define SORT_KEYS_ITEMS_U32 20u
#define SORT_KEYS_MIN_BLOCKS_U32 2
#define SORT_RADIX 256u
#define SORT_DIGIT_BITS 8u
#define SORT_MAX_PASSES 8u

// Per-digit tile status: bits 30..31 say what bits 0..29 count.
#define DIGIT_INVALID 0u
#define DIGIT_AGGREGATE 1u
#define DIGIT_PREFIX 2u
#define DIGIT_COUNT_MASK 0x3fffffffu

// The digit of `key` at `shift`, `mask` selecting its width (8 bits, fewer
// in a last pass that ends the caller's bit range early).
template <typename K>
__device__ __forceinline__ u32 digit_of(K key, u32 shift, u32 mask) {
    return (u32)(key >> shift) & mask;
}

// Digits of pass p cover bits [begin + 8p, min(begin + 8p + 8, end)).
__device__ __forceinline__ u32 pass_mask(u32 pass, u32 begin_bit, u32 end_bit) {
    const u32 width = min(SORT_DIGIT_BITS, end_bit - begin_bit - pass * SORT_DIGIT_BITS);
    return (1u << width) - 1u;
}

// ------------------------------------------------------------ histograms

// Keys each thread loads before it counts any: several loads in flight per
// thread, where one load, its counts and the loop's branch per key left the
// kernel latency-bound (half the copy bandwidth; notes: sort v3).
#define HISTOGRAM_BATCH 4u
// The host launches 8 blocks per SM (2048 threads): the kernels are bounded
// to 32 registers so that all 8 are resident.

template <typename K>
__device__ __forceinline__ void count_digits(u32* counts, K key, const u32 (&shift)[SORT_MAX_PASSES],
                                             const u32 (&mask)[SORT_MAX_PASSES], u32 passes) {
#pragma unroll
    for (u32 p = 0; p < SORT_MAX_PASSES; ++p)
        if (p < passes) atomicAdd(&counts[p * SORT_RADIX + digit_of(key, shift[p], mask[p])], 1u);
}

// Grid-stride over the keys, HISTOGRAM_BATCH loads in flight per thread.
template <typename K, class Count>
__device__ __forceinline__ void histogram_loop(const K* keys, u64 n, Count count) {
    const u64 stride = grid_threads();
    u64 j = global_thread();
    for (; j + (HISTOGRAM_BATCH - 1) * stride < n; j += HISTOGRAM_BATCH * stride) {
        K batch[HISTOGRAM_BATCH];
#pragma unroll
        for (u32 b = 0; b < HISTOGRAM_BATCH; ++b) batch[b] = keys[j + b * stride];
#pragma unroll
        for (u32 b = 0; b < HISTOGRAM_BATCH; ++b) count(batch[b]);
    }
    for (; j < n; j += stride) count(keys[j]);
}

template <typename K>
__device__ __forceinline__ void histogram(const K* keys, u64 n, u32* hist, u32 begin_bit,
                                          u32 end_bit, u32 passes) {
    __shared__ u32 counts[SORT_MAX_PASSES * SORT_RADIX];
    for (u32 i = threadIdx.x; i < passes * SORT_RADIX; i += blockDim.x) counts[i] = 0u;
    // Shifts and masks once per thread, in registers (the loops unroll).
    u32 shift[SORT_MAX_PASSES], mask[SORT_MAX_PASSES];
#pragma unroll
    for (u32 p = 0; p < SORT_MAX_PASSES; ++p) {
        shift[p] = p < passes ? begin_bit + p * SORT_DIGIT_BITS : 0u;
        mask[p] = p < passes ? pass_mask(p, begin_bit, end_bit) : 0u;
    }
    __syncthreads();
    if (begin_bit == 0u && end_bit == 8u * sizeof(K)) {
        // Every bit of the key, the common case: digit p is byte p, so the
        // shifts and bin offsets are constants.
        histogram_loop(keys, n, [&](K key) {
#pragma unroll
            for (u32 p = 0; p < sizeof(K); ++p)
                atomicAdd(&counts[p * SORT_RADIX + (u32)((key >> (8u * p)) & 0xffu)], 1u);
        });
    } else {
        histogram_loop(keys, n, [&](K key) { count_digits(counts, key, shift, mask, passes); });
    }
    __syncthreads();
    for (u32 i = threadIdx.x; i < passes * SORT_RADIX; i += blockDim.x)
        if (counts[i]) atomicAdd(&hist[i], counts[i]);
}

extern "C" __global__ void __launch_bounds__(SORT_THREADS, 8)
radix_sort_histogram_u32(const u32* keys, u64 n, u32* hist, u32 begin_bit, u32 end_bit,
                         u32 passes) {
    histogram<u32>(keys, n, hist, begin_bit, end_bit, passes);
}

extern "C" __global__ void __launch_bounds__(SORT_THREADS, 8)
radix_sort_histogram_u64(const u64* keys, u64 n, u32* hist, u32 begin_bit, u32 end_bit,
                         u32 passes) {
    histogram<u64>(keys, n, hist, begin_bit, end_bit, passes);
}

// Block p turns pass p's digit counts into exclusive digit starts, in place.
extern "C" __global__ void __launch_bounds__(SORT_RADIX) radix_sort_scan_histograms(u32* hist) {
    __shared__ u32 warp_totals[SORT_RADIX / 32u];
    u32* h = hist + blockIdx.x * SORT_RADIX;
    u32 total;
    h[threadIdx.x] = block_exclusive_scan<SumU32, SORT_RADIX>(h[threadIdx.x], warp_totals, total);
}

// ------------------------------------------------------------- one sweep

// Rank of each of the thread's keys among equal digits of its warp, in
// (item, lane) order. Leaves each digit's count per warp in warp_counts.
//
// Lanes with equal digits find each other either by eight ballots (one per
// digit bit) or, with ATOMIC_OR, by each lane OR-ing its bit into a per-warp
// word of its digit in shared memory and reading the word back (CUB's
// RADIX_RANK_MATCH_EARLY_COUNTS_ATOMIC_OR): one shared atomic instead of
// about 24 ALU instructions per key. ncu found the keys-only pass ALU-bound,
// and there the atomic made it 19 % faster (298 M -> 173 M instructions);
// with values it was 3-5 % slower, so the pair sorts keep the ballots
// (notes: sort v3). `match` is SORT_RADIX zeroed words per warp and is left
// zeroed.
template <typename K, u32 ITEMS, bool ATOMIC_OR>
__device__ __forceinline__ void rank_in_warp(const K (&key)[ITEMS], u32 shift, u32 mask,
                                             u32* warp_counts, u32* match, u32 (&rank)[ITEMS]) {
#pragma unroll
    for (u32 k = 0; k < ITEMS; ++k) {
        const u32 d = digit_of(key[k], shift, mask);
        u32 peers = CAUSTIC_FULL_MASK;
        if constexpr (ATOMIC_OR) {
            atomicOr(&match[d], 1u << lane_id());
            __syncwarp();
            peers = match[d];
        } else {
#pragma unroll
            for (u32 b = 0; b < SORT_DIGIT_BITS; ++b) {
                const u32 bit = (d >> b) & 1u;
                const u32 vote = __ballot_sync(CAUSTIC_FULL_MASK, bit);
                peers &= bit ? vote : ~vote;
            }
        }
        const u32 before = __popc(peers & lanemask_lt());
        const u32 count = warp_counts[d];
        __syncwarp();
        // The lowest peer advances the counter once for the whole group
        // (and clears the digit's match word for the next key).
        if (before == 0) {
            warp_counts[d] = count + __popc(peers);
            if constexpr (ATOMIC_OR) match[d] = 0u;
        }
        __syncwarp();
        rank[k] = count + before;
    }
}

// Count of this thread's digit in all tiles before `tile`, by walking back
// over their published per-digit status. Each step reads LOOKBACK_WINDOW
// predecessors at once: one thread walks per digit, and a walk of one tile
// per memory round trip would cap how fast prefixes advance through the
// tiles of a pass.
#define LOOKBACK_WINDOW 8u
__device__ __forceinline__ u32 digit_lookback(const u32* status, u32 tile, u32 digit) {
    const volatile u32* st = (const volatile u32*)status;
    u32 exclusive = 0u;
    long long nearest = (long long)tile - 1;
    while (true) {
        u32 word[LOOKBACK_WINDOW];
#pragma unroll
        for (u32 w = 0; w < LOOKBACK_WINDOW; ++w) {
            const long long at = nearest - (long long)w;
            // Before tile 0 there is nothing: an empty prefix.
            word[w] = at >= 0 ? st[(u64)at * SORT_RADIX + digit] : DIGIT_PREFIX << 30;
        }
        // Sum from the nearest tile back to the first prefix; stop early at
        // a tile that has published nothing yet and read again from there.
        u32 used = 0u;
#pragma unroll
        for (u32 w = 0; w < LOOKBACK_WINDOW; ++w) {
            const u32 flag = word[w] >> 30;
            if (flag == DIGIT_INVALID) break;
            exclusive += word[w] & DIGIT_COUNT_MASK;
            if (flag == DIGIT_PREFIX) return exclusive;
            used = w + 1u;
        }
        // The nearest tile has published nothing yet: wait before asking again.
        if (used == 0u) spin_pause();
        nearest -= used;
    }
}

__device__ __forceinline__ void publish_digit(u32* status, u32 tile, u32 digit, u32 flag,
                                              u32 count) {
    ((volatile u32*)status)[(u64)tile * SORT_RADIX + digit] = (flag << 30) | count;
}

// THREADS >= SORT_RADIX: thread t < SORT_RADIX owns digit t for the
// look-back. Without STAGE_VALUES the kernel has no value stage and moves
// no values.
template <typename K, u32 THREADS, u32 ITEMS, bool HAS_VALUES, bool STAGE_VALUES = true>
__device__ __forceinline__ void onesweep(const K* keys_in, K* keys_out, const u32* values_in,
                                         u32* values_out, u64 n, u32 shift, u32 mask,
                                         const u32* digit_offsets, u32* status,
                                         u32* tile_counter) {
    static_assert(THREADS >= SORT_RADIX && THREADS % 32u == 0u, "a thread per digit");
    constexpr u32 WARPS = THREADS / 32u;
    constexpr u32 TILE = THREADS * ITEMS;
    // Keys and values wait here in sorted tile order, so both leave in runs.
    __shared__ K stage_keys[TILE];
    __shared__ u32 stage_values[STAGE_VALUES ? TILE : 1u];
    // Per warp and digit: first the warp's count, then the count in earlier warps.
    __shared__ u32 warp_counts[WARPS][SORT_RADIX];
    __shared__ u32 digit_start[SORT_RADIX]; // first tile-local slot of each digit
    __shared__ u32 digit_base[SORT_RADIX];  // global slot of tile-local slot 0, per digit
    __shared__ u32 warp_totals[WARPS];
    __shared__ u32 tile_sh;

    const u32 t = threadIdx.x;
    const bool owns_digit = THREADS == SORT_RADIX || t < SORT_RADIX;
    // The ranking's match words live in stage_keys, which is free until the
    // scatter (WARPS * SORT_RADIX words fit in every tile's stage).
    u32* const match_words = reinterpret_cast<u32*>(stage_keys);
    static_assert(sizeof(K) * TILE >= sizeof(u32) * WARPS * SORT_RADIX, "match words fit");
    for (u32 i = t; i < WARPS * SORT_RADIX; i += THREADS) {
        (&warp_counts[0][0])[i] = 0u;
        if constexpr (!HAS_VALUES) match_words[i] = 0u;
    }
    const u32 tile = next_tile(tile_counter, &tile_sh);
    const u64 base = (u64)tile * TILE;
    // Each warp loads a contiguous run, striped across lanes: coalesced, and
    // (warp, item, lane) order is input order.
    const u64 warp_base = base + (u64)warp_id() * (32u * ITEMS);
    // HAS_VALUES picks the ranking; whether values move stays a run-time
    // test: compiled as a constant, the pair kernels came out with spills
    // (u32) and 79 instead of 64 registers (u64, one block per SM less).
    const bool has_values = values_in != nullptr;

    // Past the end, all-ones keys (the largest digit in every pass) rank
    // after every real key, so real keys fill tile-local slots [0, valid).
    // Values load with the keys and wait in shared memory, in input order,
    // so that no register holds them through ranking and look-back.
    K key[ITEMS];
    const u32 warp_first = warp_id() * (32u * ITEMS);
#pragma unroll
    for (u32 k = 0; k < ITEMS; ++k) {
        const u64 j = warp_base + k * 32u + lane_id();
        key[k] = j < n ? keys_in[j] : ~(K)0;
        if (STAGE_VALUES && has_values && j < n)
            stage_values[warp_first + k * 32u + lane_id()] = values_in[j];
    }
    u32 slot[ITEMS];
    rank_in_warp<K, ITEMS, !HAS_VALUES>(key, shift, mask, warp_counts[warp_id()],
                           match_words + warp_id() * SORT_RADIX, slot);
    __syncthreads();

    // Thread t owns digit t from here to the look-back.
    u32 digit_count = 0u;
    if (owns_digit) {
#pragma unroll
        for (u32 w = 0; w < WARPS; ++w) {
            const u32 c = warp_counts[w][t];
            warp_counts[w][t] = digit_count;
            digit_count += c;
        }
        publish_digit(status, tile, t, tile == 0 ? DIGIT_PREFIX : DIGIT_AGGREGATE, digit_count);
    }
    u32 tile_keys;
    const u32 start = block_exclusive_scan<SumU32, THREADS>(digit_count, warp_totals, tile_keys);
    if (owns_digit) {
        digit_start[t] = start;
        u32 before_tile = 0u;
        if (tile > 0) {
            before_tile = digit_lookback(status, tile, t);
            publish_digit(status, tile, t, DIGIT_PREFIX, before_tile + digit_count);
        }
        digit_base[t] = digit_offsets[t] + before_tile - start;
    }
    __syncthreads();

    u32 value[ITEMS];
    if (STAGE_VALUES && has_values) {
#pragma unroll
        for (u32 k = 0; k < ITEMS; ++k) value[k] = stage_values[warp_first + k * 32u + lane_id()];
        __syncthreads();
    }
#pragma unroll
    for (u32 k = 0; k < ITEMS; ++k) {
        const u32 d = digit_of(key[k], shift, mask);
        const u32 s = slot[k] + digit_start[d] + warp_counts[warp_id()][d];
        stage_keys[s] = key[k];
        if (STAGE_VALUES && has_values) stage_values[s] = value[k];
    }
    __syncthreads();

    // Read back in slot order: runs of one digit go to consecutive addresses.
    const u32 valid = (u32)min((u64)TILE, n - base);
#pragma unroll
    for (u32 k = 0; k < ITEMS; ++k) {
        const u32 i = k * THREADS + t;
        if (i < valid) {
            const K sorted = stage_keys[i];
            const u32 destination = digit_base[digit_of(sorted, shift, mask)] + i;
            keys_out[destination] = sorted;
            if (STAGE_VALUES && has_values) values_out[destination] = stage_values[i];
        }
    }
}

// Three resident blocks per SM: 80 registers is the least that holds 16
// keys, slots and values without spilling. (The u64 kernel's smaller tiles
// come out at 64 registers, four blocks, unasked.) The keys-only kernels
// take null value pointers, which they never touch; the u32 one has its own
// shape (SORT_KEYS_*_U32 above).
extern "C" __global__ void __launch_bounds__(SORT_THREADS, 3)
radix_sort_onesweep_u32(const u32* keys_in, u32* keys_out, const u32* values_in, u32* values_out,
                        u64 n, u32 shift, u32 mask, const u32* digit_offsets, u32* status,
                        u32* tile_counter) {
    onesweep<u32, SORT_THREADS, SORT_ITEMS_U32, true>(keys_in, keys_out, values_in, values_out, n,
                                                      shift, mask, digit_offsets, status,
                                                      tile_counter);
}

extern "C" __global__ void __launch_bounds__(SORT_KEYS_THREADS_U32, SORT_KEYS_MIN_BLOCKS_U32)
radix_sort_onesweep_keys_u32(const u32* keys_in, u32* keys_out, const u32* values_in,
                             u32* values_out, u64 n, u32 shift, u32 mask,
                             const u32* digit_offsets, u32* status, u32* tile_counter) {
    onesweep<u32, SORT_KEYS_THREADS_U32, SORT_KEYS_ITEMS_U32, false, false>(
        keys_in, keys_out, values_in, values_out, n, shift, mask, digit_offsets, status,
        tile_counter);
}

extern "C" __global__ void __launch_bounds__(SORT_THREADS)
radix_sort_onesweep_u64(const u64* keys_in, u64* keys_out, const u32* values_in, u32* values_out,
                        u64 n, u32 shift, u32 mask, const u32* digit_offsets, u32* status,
                        u32* tile_counter) {
    onesweep<u64, SORT_THREADS, SORT_ITEMS_U64, true>(keys_in, keys_out, values_in, values_out, n,
                                                      shift, mask, digit_offsets, status,
                                                      tile_counter);
}

extern "C" __global__ void __launch_bounds__(SORT_THREADS)
radix_sort_onesweep_keys_u64(const u64* keys_in, u64* keys_out, const u32* values_in,
                             u32* values_out, u64 n, u32 shift, u32 mask,
                             const u32* digit_offsets, u32* status, u32* tile_counter) {
    onesweep<u64, SORT_THREADS, SORT_ITEMS_U64, false>(keys_in, keys_out, values_in, values_out,
                                                       n, shift, mask, digit_offsets, status,
                                                       tile_counter);
}

