// tile_scan.cuh: one pass of a single-pass scan over tiles of SCAN_TILE elements.
//
// Merrill & Garland 2016 (see block.cuh): each block loads one tile, scans it
// in registers and shared memory, resolves the tile's exclusive prefix by
// decoupled look-back, and hands every element with its prefix to an I/O
// policy. Scan, compaction and split are this one loop with different
// policies, so they share their correctness argument.
//
// An I/O policy `Io` provides
//   T load(u64 j)                     element j of the logical input (j < n),
//   STAGED                            true: results go through shared memory
//                                     and are stored coalesced by store(j, r);
//                                     false: emit(j, exclusive, item) is called
//                                     per element in thread-blocked order,
//   u32 result(T exclusive, T item)   the value stored at j (STAGED only),
//   finish(T total)                   called once, by the last tile, with the
//                                     reduction of the whole input.
#pragma once
#include "block.cuh"

#define SCAN_THREADS 256u
#define SCAN_ITEMS 16u
#define SCAN_TILE (SCAN_THREADS * SCAN_ITEMS)
// One pad word every 32 keeps the thread-blocked reads (thread t reads
// t * SCAN_ITEMS + k) on distinct banks.
#define SCAN_PADDED(i) ((i) + ((i) >> 5))
#define SCAN_SHARED_WORDS SCAN_PADDED(SCAN_TILE)

template <class Op, class Io>
__device__ __forceinline__ void scan_tile(Io& io, u64 n, u64* status, u32* tile_counter) {
    typedef typename Op::T T;
    __shared__ union {
        T items[SCAN_SHARED_WORDS];
        u32 results[SCAN_SHARED_WORDS];
    } sh;
    __shared__ T warp_totals[SCAN_THREADS / 32];
    __shared__ T tile_prefix_sh;
    __shared__ u32 tile_sh;

    const u32 tile = next_tile(tile_counter, &tile_sh);
    const u64 base = (u64)tile * SCAN_TILE;
    const u32 t = threadIdx.x;

    // Striped loads are coalesced; the shared-memory round trip turns them
    // into the thread-blocked order the sequential per-thread scan needs.
#pragma unroll
    for (u32 k = 0; k < SCAN_ITEMS; ++k) {
        const u32 local = k * SCAN_THREADS + t;
        const u64 j = base + local;
        sh.items[SCAN_PADDED(local)] = j < n ? io.load(j) : Op::identity();
    }
    __syncthreads();
    T item[SCAN_ITEMS];
#pragma unroll
    for (u32 k = 0; k < SCAN_ITEMS; ++k) item[k] = sh.items[SCAN_PADDED(t * SCAN_ITEMS + k)];

    T thread_total = item[0];
#pragma unroll
    for (u32 k = 1; k < SCAN_ITEMS; ++k) thread_total = Op::combine(thread_total, item[k]);
    T tile_total;
    const T thread_prefix = block_exclusive_scan<Op, SCAN_THREADS>(thread_total, warp_totals, tile_total);

    if (warp_id() == 0) {
        T tile_prefix = Op::identity();
        if (tile == 0) {
            if (lane_id() == 0) publish_status<Op>(status, tile, STATUS_PREFIX, tile_total);
        } else {
            if (lane_id() == 0) publish_status<Op>(status, tile, STATUS_AGGREGATE, tile_total);
            tile_prefix = lookback_exclusive_prefix<Op>(status, tile);
            if (lane_id() == 0)
                publish_status<Op>(status, tile, STATUS_PREFIX, Op::combine(tile_prefix, tile_total));
        }
        if (lane_id() == 0) {
            tile_prefix_sh = tile_prefix;
            if (tile == gridDim.x - 1) io.finish(Op::combine(tile_prefix, tile_total));
        }
    }
    __syncthreads();

    T running = Op::combine(tile_prefix_sh, thread_prefix);
    if constexpr (Io::STAGED) {
        // sh.items is free: every thread read its items before the block scan's barrier.
#pragma unroll
        for (u32 k = 0; k < SCAN_ITEMS; ++k) {
            sh.results[SCAN_PADDED(t * SCAN_ITEMS + k)] = io.result(running, item[k]);
            running = Op::combine(running, item[k]);
        }
        __syncthreads();
#pragma unroll
        for (u32 k = 0; k < SCAN_ITEMS; ++k) {
            const u32 local = k * SCAN_THREADS + t;
            const u64 j = base + local;
            if (j < n) io.store(j, sh.results[SCAN_PADDED(local)]);
        }
    } else {
#pragma unroll
        for (u32 k = 0; k < SCAN_ITEMS; ++k) {
            const u64 j = base + (u64)t * SCAN_ITEMS + k;
            if (j < n) io.emit(j, running, item[k]);
            running = Op::combine(running, item[k]);
        }
    }
}
