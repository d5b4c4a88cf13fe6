// block.cuh: warp- and block-wide scans and the decoupled look-back.
//
// The look-back is the one of Merrill & Garland, "Single-pass Parallel Prefix
// Scan with Decoupled Look-back" (NVIDIA NVR-2016-002): every tile publishes
// its aggregate as soon as it is known, then walks back over its
// predecessors' published values until it meets an inclusive prefix, so a
// scan reads and writes the input once.
//
// Tiles take their ids from an atomic counter in the order blocks start, so
// every tile a block waits on belongs to a block that is already running:
// the spin cannot deadlock. (Taking tile = blockIdx.x, as CUB's DeviceScan
// does, relies on in-order block dispatch and measured within noise of the
// counter for the scan: notes, scan v3.)
//
// Spins back off with __nanosleep: a waiting warp then leaves its issue
// slots to the warps that do the work (the sort's look-back is issue-bound,
// see radix_sort.cu).
//
// A scan operator is a struct with
//   T                      the element type,
//   identity()             the identity element,
//   combine(older, newer)  the associative operator (need not commute),
//   pack(T) / unpack(u64)  a T in the low 62 bits of a tile-status word,
//   shfl_up / shfl_down / shfl  warp shuffles of a T.
#pragma once
#include "common.cuh"

// Tile-status word: bits 62..63 say which value bits 0..61 hold.
#define STATUS_INVALID 0ull   // nothing published yet
#define STATUS_AGGREGATE 1ull // the tile's own reduction
#define STATUS_PREFIX 2ull    // the reduction of this tile and all before it
#define STATUS_VALUE_MASK ((1ull << 62) - 1ull)

// ------------------------------------------------------------------ operators

struct SumU32 {
    typedef u32 T;
    static __device__ __forceinline__ T identity() { return 0u; }
    static __device__ __forceinline__ T combine(T older, T newer) { return older + newer; }
    static __device__ __forceinline__ u64 pack(T v) { return v; }
    static __device__ __forceinline__ T unpack(u64 w) { return (u32)w; }
    static __device__ __forceinline__ T shfl_up(T v, u32 d) {
        return __shfl_up_sync(CAUSTIC_FULL_MASK, v, d);
    }
    static __device__ __forceinline__ T shfl_down(T v, u32 d) {
        return __shfl_down_sync(CAUSTIC_FULL_MASK, v, d);
    }
    static __device__ __forceinline__ T shfl(T v, u32 lane) {
        return __shfl_sync(CAUSTIC_FULL_MASK, v, lane);
    }
};

// Sum that restarts at every segment head: (head, value) pairs under
// (h1, v1) + (h2, v2) = (h1 | h2, h2 ? v2 : v1 + v2), which is associative
// (Schwartz 1980; Sengupta et al. 2007).
struct SegmentedSumU32 {
    struct T {
        u32 value;
        u32 head;
    };
    static __device__ __forceinline__ T make(u32 value, u32 head) {
        T t;
        t.value = value;
        t.head = head;
        return t;
    }
    static __device__ __forceinline__ T identity() { return make(0u, 0u); }
    static __device__ __forceinline__ T combine(T older, T newer) {
        return make(newer.head ? newer.value : older.value + newer.value, older.head | newer.head);
    }
    static __device__ __forceinline__ u64 pack(T v) { return ((u64)(v.head & 1u) << 32) | v.value; }
    static __device__ __forceinline__ T unpack(u64 w) { return make((u32)w, (u32)(w >> 32) & 1u); }
    static __device__ __forceinline__ T shfl_up(T v, u32 d) {
        return make(__shfl_up_sync(CAUSTIC_FULL_MASK, v.value, d),
                    __shfl_up_sync(CAUSTIC_FULL_MASK, v.head, d));
    }
    static __device__ __forceinline__ T shfl_down(T v, u32 d) {
        return make(__shfl_down_sync(CAUSTIC_FULL_MASK, v.value, d),
                    __shfl_down_sync(CAUSTIC_FULL_MASK, v.head, d));
    }
    static __device__ __forceinline__ T shfl(T v, u32 lane) {
        return make(__shfl_sync(CAUSTIC_FULL_MASK, v.value, lane),
                    __shfl_sync(CAUSTIC_FULL_MASK, v.head, lane));
    }
};

// ------------------------------------------------------------ warp and block

// Inclusive scan over the 32 lanes of a full warp (Hillis & Steele steps).
template <class Op>
__device__ __forceinline__ typename Op::T warp_inclusive_scan(typename Op::T v) {
    for (u32 d = 1; d < 32; d <<= 1) {
        typename Op::T other = Op::shfl_up(v, d);
        if (lane_id() >= d) v = Op::combine(other, v);
    }
    return v;
}

// Exclusive scan over the block's threads in thread order; `total` receives
// the whole block's reduction. `warp_totals` is shared memory of THREADS/32
// elements; the caller syncs the block before reusing it.
template <class Op, u32 THREADS>
__device__ __forceinline__ typename Op::T block_exclusive_scan(typename Op::T v,
                                                               typename Op::T* warp_totals,
                                                               typename Op::T& total) {
    typedef typename Op::T T;
    const T inclusive = warp_inclusive_scan<Op>(v);
    if (lane_id() == 31) warp_totals[warp_id()] = inclusive;
    __syncthreads();
    T warp_prefix = Op::identity();
    total = Op::identity();
#pragma unroll
    for (u32 w = 0; w < THREADS / 32; ++w) {
        const T t = warp_totals[w];
        if (w < warp_id()) warp_prefix = Op::combine(warp_prefix, t);
        total = Op::combine(total, t);
    }
    T exclusive = Op::shfl_up(inclusive, 1);
    if (lane_id() == 0) exclusive = Op::identity();
    return Op::combine(warp_prefix, exclusive);
}

// Sum over the lanes of a full warp; every lane gets the result.
__device__ __forceinline__ u32 warp_sum(u32 v) {
    for (u32 d = 16; d > 0; d >>= 1) v += __shfl_xor_sync(CAUSTIC_FULL_MASK, v, d);
    return v;
}

// ------------------------------------------------------------ look-back

// A short sleep inside a spin-wait (LOOKBACK_PAUSE_NS; 0 spins flat out).
// 100 ns made the keys-only sort 2 % faster and left the scan unchanged
// (notes: sort v3).
#ifndef LOOKBACK_PAUSE_NS
#define LOOKBACK_PAUSE_NS 100
#endif
__device__ __forceinline__ void spin_pause() {
#if LOOKBACK_PAUSE_NS > 0
    __nanosleep(LOOKBACK_PAUSE_NS);
#endif
}


template <class Op>
__device__ __forceinline__ void publish_status(u64* status, u32 tile, u64 flag,
                                               typename Op::T value) {
    // One 64-bit store carries flag and value together, so a reader never
    // sees the flag without its value.
    ((volatile u64*)status)[tile] = (flag << 62) | Op::pack(value);
}

// The reduction of every tile before `tile`. Called by all lanes of one warp;
// each round reads the status of 32 predecessors at once and stops at the
// nearest one that holds an inclusive prefix.
template <class Op>
__device__ typename Op::T lookback_exclusive_prefix(const u64* status, u32 tile) {
    typedef typename Op::T T;
    const volatile u64* st = (const volatile u64*)status;
    T exclusive = Op::identity();
    long long nearest = (long long)tile - 1;
    while (true) {
        const long long at = nearest - (long long)lane_id();
        u64 word = (STATUS_PREFIX << 62) | Op::pack(Op::identity());
        if (at >= 0) {
            while (true) {
                word = st[at];
                if ((word >> 62) != STATUS_INVALID) break;
                spin_pause();
            }
        }
        const u32 prefix_lanes = __ballot_sync(CAUSTIC_FULL_MASK, (word >> 62) == STATUS_PREFIX);
        // Lanes 0..stop are summed: up to and including the nearest prefix.
        const u32 stop = prefix_lanes ? (u32)(__ffs(prefix_lanes) - 1) : 31u;
        T v = lane_id() <= stop ? Op::unpack(word & STATUS_VALUE_MASK) : Op::identity();
        // Ordered reduction: higher lanes hold older tiles, so they combine on the left.
        for (u32 d = 1; d < 32; d <<= 1) {
            const T other = Op::shfl_down(v, d);
            if (lane_id() + d < 32) v = Op::combine(other, v);
        }
        exclusive = Op::combine(Op::shfl(v, 0), exclusive);
        if (prefix_lanes) return exclusive;
        nearest -= 32;
    }
}

// Takes the next tile id in block-start order (see the header comment).
__device__ __forceinline__ u32 next_tile(u32* tile_counter, u32* tile_shared) {
    if (threadIdx.x == 0) *tile_shared = atomicAdd(tile_counter, 1u);
    __syncthreads();
    return *tile_shared;
}
