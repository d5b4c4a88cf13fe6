// scan.cu: prefix sums of u32 in one pass (Merrill & Garland 2016 decoupled
// look-back, see block.cuh and tile_scan.cuh).
//
// Forward and backward, exclusive and inclusive, and the segmented sum that
// restarts at head flags (Sengupta et al. 2007). Sums wrap modulo 2^32.
// `status` (one u64 per tile) and `tile_counter` are zeroed beforehand.
// `total` may be null; otherwise the last tile writes the reduction of the
// whole input there (the thesis's ScanTail).
//
// Launch rules: the forward plain scans (scan_exclusive_u32,
// scan_inclusive_u32) take tiles of SCAN_PIPE_THREADS * SCAN_PIPE_ITEMS
// words from the counter on any grid of SCAN_PIPE_THREADS threads, with
// 16-byte aligned `in` and `out`; the others run on exactly
// ceil(n / SCAN_TILE) blocks of SCAN_THREADS threads.
#include "tile_scan.cuh"

// The backward scans fit 48 registers without spilling, which keeps five
// blocks resident per SM: more tiles in flight to cover the look-back's
// latency. The segmented scans spill under that bound and keep the default.
#define SCAN_MIN_BLOCKS 5

template <bool INCLUSIVE, bool BACKWARD>
struct ScanIo {
    static constexpr bool STAGED = true;
    const u32* in;
    u32* out;
    u32* total;
    u64 n;

    // A backward scan is the forward scan of the reversed array.
    __device__ __forceinline__ u64 physical(u64 j) const { return BACKWARD ? n - 1 - j : j; }
    __device__ __forceinline__ u32 load(u64 j) const { return in[physical(j)]; }
    __device__ __forceinline__ u32 result(u32 exclusive, u32 item) const {
        return INCLUSIVE ? exclusive + item : exclusive;
    }
    __device__ __forceinline__ void store(u64 j, u32 r) const { out[physical(j)] = r; }
    __device__ __forceinline__ void finish(u32 sum) const {
        if (total) *total = sum;
    }
};

template <bool INCLUSIVE>
struct SegmentedScanIo {
    static constexpr bool STAGED = true;
    typedef SegmentedSumU32::T T;
    const u32* values;
    const u32* heads;
    u32* out;
    u32* total;

    __device__ __forceinline__ T load(u64 j) const {
        return SegmentedSumU32::make(values[j], heads[j] != 0u);
    }
    // The exclusive value at a head is the identity: nothing of its segment precedes it.
    __device__ __forceinline__ u32 result(T exclusive, T item) const {
        if (INCLUSIVE) return SegmentedSumU32::combine(exclusive, item).value;
        return item.head ? 0u : exclusive.value;
    }
    __device__ __forceinline__ void store(u64 j, u32 r) const { out[j] = r; }
    // The reduction's value is the sum of the last segment.
    __device__ __forceinline__ void finish(T sum) const {
        if (total) *total = sum.value;
    }
};

template <bool INCLUSIVE, bool BACKWARD>
__device__ __forceinline__ void scan_u32(const u32* in, u32* out, u32* total, u64 n, u64* status,
                                         u32* tile_counter) {
    ScanIo<INCLUSIVE, BACKWARD> io{in, out, total, n};
    scan_tile<SumU32>(io, n, status, tile_counter);
}

template <bool INCLUSIVE>
__device__ __forceinline__ void scan_segmented_u32(const u32* values, const u32* heads, u32* out,
                                                   u32* total, u64 n, u64* status,
                                                   u32* tile_counter) {
    SegmentedScanIo<INCLUSIVE> io{values, heads, out, total};
    scan_tile<SegmentedSumU32>(io, n, status, tile_counter);
}

// ------------------------------------------------ pipelined forward scans

// The forward plain scans run persistent blocks that take tiles from the
// counter, hold two tiles in shared memory, and resolve a tile's prefix
// only after they have loaded and reduced the next one: while a tile waits
// for its prefix, its block publishes the next tile's aggregate and has the
// tile after that in flight, and by the time it looks back the
// predecessors have had a whole tile's time to publish their inclusive
// prefixes, so the look-back seldom waits.
//
// Measured on an H100 (notes: scan v4, v5): resolving each tile's prefix
// right after its own reduction kept every block waiting on the look-back
// (ncu: 230-247 us against 183 us for the same kernel with no look-back at
// all); deferring it by one tile brought the kernel to 185 us, within 2 %
// of that bound, and the scan from 71-77 % to 90-91 % of the copy's
// bandwidth. Prefetching the next tile without deferring and CUB's fixed
// delay before the first look bought nothing; wider look-back windows (64
// or 128 predecessors a round) lost 6-19 %.
//
// Layout: each warp loads a contiguous run of 32 * ITEMS words as 16-byte
// vectors striped over its lanes (512 coalesced bytes per instruction),
// turns them into lane-contiguous runs through a private shared-memory
// exchange (__syncwarp only), and back on the way out. The exchange keeps
// the tile until its prefix is known, so the items hold no registers then:
// only the next tile's vectors are live.

// One pad vector every 8 keeps both the striped (lane-consecutive) and the
// lane-contiguous (stride ITEMS / 4 vectors) accesses on distinct banks for
// ITEMS = 16 and 32.
#define SCAN_VEC_PADDED(q) ((q) + ((q) >> 3))

// The vector of words j .. j + 3 (zeros past n).
__device__ __forceinline__ uint4 load_vector(const u32* in, u64 j, u64 n) {
    if (j + 4 <= n) return *reinterpret_cast<const uint4*>(in + j);
    uint4 v = make_uint4(0u, 0u, 0u, 0u);
    if (j < n) v.x = in[j];
    if (j + 1 < n) v.y = in[j + 1];
    if (j + 2 < n) v.z = in[j + 2];
    return v;
}

__device__ __forceinline__ void store_vector(u32* out, u64 j, u64 n, uint4 v) {
    if (j + 4 <= n) {
        *reinterpret_cast<uint4*>(out + j) = v;
        return;
    }
    if (j < n) out[j] = v.x;
    if (j + 1 < n) out[j + 1] = v.y;
    if (j + 2 < n) out[j + 2] = v.z;
}

// A tile's results from its items in the exchange (lane-contiguous), then
// stored striped: `running` is the exclusive prefix of this lane's first item.
template <u32 VECS, bool INCLUSIVE>
__device__ __forceinline__ void store_tile(u32* out, u64 n, u64 base, u32 lane_word, uint4* ex,
                                           u32 running) {
    const u32 lane = lane_id();
#pragma unroll
    for (u32 c = 0; c < VECS; ++c) {
        uint4 v = ex[SCAN_VEC_PADDED(lane * VECS + c)];
        uint4 r;
        r.x = INCLUSIVE ? running + v.x : running;
        running += v.x;
        r.y = INCLUSIVE ? running + v.y : running;
        running += v.y;
        r.z = INCLUSIVE ? running + v.z : running;
        running += v.z;
        r.w = INCLUSIVE ? running + v.w : running;
        running += v.w;
        ex[SCAN_VEC_PADDED(lane * VECS + c)] = r;
    }
    __syncwarp();
#pragma unroll
    for (u32 k = 0; k < VECS; ++k)
        store_vector(out, base + lane_word + 128u * k, n, ex[SCAN_VEC_PADDED(k * 32u + lane)]);
    __syncwarp();
}

template <u32 THREADS, u32 ITEMS, bool INCLUSIVE>
__device__ __forceinline__ void scan_pipelined(const u32* in, u32* out, u32* total, u64 n,
                                               u64* status, u32* tile_counter) {
    static_assert(ITEMS % 4u == 0u, "whole vectors per lane");
    constexpr u32 WARPS = THREADS / 32u;
    constexpr u32 VECS = ITEMS / 4u;      // vectors per lane
    constexpr u32 WARP_VECS = 32u * VECS; // vectors per warp and tile
    constexpr u32 TILE = THREADS * ITEMS;
    __shared__ uint4 exchange[2][WARPS][SCAN_VEC_PADDED(WARP_VECS)];
    __shared__ u32 warp_totals[WARPS];
    __shared__ u32 tile_prefix_sh;
    __shared__ u32 first_sh; // not next_sh: thread 0 rewrites that one before all have read it
    __shared__ u32 next_sh;

    const u32 lane = lane_id();
    const u64 tiles = (n + TILE - 1u) / TILE;
    u32 tile = next_tile(tile_counter, &first_sh);
    // Word offset of this lane's k-th striped vector within a tile.
    const u32 lane_word = warp_id() * (32u * ITEMS) + 4u * lane;
    uint4 vec[VECS];
    if (tile < tiles) {
#pragma unroll
        for (u32 k = 0; k < VECS; ++k)
            vec[k] = load_vector(in, (u64)tile * TILE + lane_word + 128u * k, n);
    }
    // The tile reduced last round, waiting for its prefix, with this
    // thread's exclusive prefix within it and its total; `buffer` is the
    // exchange of the tile being reduced (the held one is in the other).
    const u32 none = 0xffffffffu;
    u32 held = none, held_thread_prefix = 0u, held_total = 0u, buffer = 0u;
    while (true) {
        const bool have = tile < tiles; // the same in every thread
        uint4* const ex = exchange[buffer][warp_id()];
        u32 thread_prefix = 0u, tile_total = 0u, next = 0u;
        if (have) {
            // Striped -> lane-contiguous.
#pragma unroll
            for (u32 k = 0; k < VECS; ++k) ex[SCAN_VEC_PADDED(k * 32u + lane)] = vec[k];
            __syncwarp();
            u32 thread_total = 0u;
#pragma unroll
            for (u32 c = 0; c < VECS; ++c) {
                const uint4 v = ex[SCAN_VEC_PADDED(lane * VECS + c)];
                thread_total += v.x + v.y + v.z + v.w;
            }
            if (threadIdx.x == 0) next_sh = atomicAdd(tile_counter, 1u);
            thread_prefix =
                block_exclusive_scan<SumU32, THREADS>(thread_total, warp_totals, tile_total);
            // The block scan's barrier published next_sh.
            next = next_sh;
            if (threadIdx.x == 0)
                publish_status<SumU32>(status, tile, tile == 0 ? STATUS_PREFIX : STATUS_AGGREGATE,
                                       tile_total);
            if (next < tiles) {
#pragma unroll
                for (u32 k = 0; k < VECS; ++k)
                    vec[k] = load_vector(in, (u64)next * TILE + lane_word + 128u * k, n);
            }
        } else {
            // The last round resolves the held tile only: no block scan ran,
            // so wait until every warp has read the last tile_prefix_sh.
            __syncthreads();
        }
        // The held tile's prefix, by the look-back (block.cuh).
        if (held != none && warp_id() == 0) {
            u32 tile_prefix = 0u;
            if (held != 0) {
                tile_prefix = lookback_exclusive_prefix<SumU32>(status, held);
                if (lane == 0)
                    publish_status<SumU32>(status, held, STATUS_PREFIX, tile_prefix + held_total);
            }
            if (lane == 0) {
                tile_prefix_sh = tile_prefix;
                if (held == tiles - 1u && total) *total = tile_prefix + held_total;
            }
        }
        // Always a barrier here: it also keeps warp_totals and next_sh from
        // being rewritten before every warp has read them.
        __syncthreads();
        if (held != none)
            store_tile<VECS, INCLUSIVE>(out, n, (u64)held * TILE, lane_word,
                                        exchange[buffer ^ 1u][warp_id()],
                                        tile_prefix_sh + held_thread_prefix);
        if (!have) break;
        held = tile;
        held_thread_prefix = thread_prefix;
        held_total = tile_total;
        buffer ^= 1u;
        tile = next;
    }
}

// The forward scans' shape: 32 words a lane, 128 threads (4096-word tiles,
// two of them in 37 KB of shared memory), six blocks per SM (78 registers).
// 256 x 16 at six blocks and 128 x 24 at eight measured the same within
// noise (notes: scan v5).
#define SCAN_PIPE_THREADS 128u
#define SCAN_PIPE_ITEMS 32u
#define SCAN_PIPE_MIN_BLOCKS 6

extern "C" __global__ void __launch_bounds__(SCAN_PIPE_THREADS, SCAN_PIPE_MIN_BLOCKS)
scan_exclusive_u32(const u32* in, u32* out, u32* total, u64 n, u64* status, u32* tile_counter) {
    scan_pipelined<SCAN_PIPE_THREADS, SCAN_PIPE_ITEMS, false>(in, out, total, n, status,
                                                              tile_counter);
}

extern "C" __global__ void __launch_bounds__(SCAN_PIPE_THREADS, SCAN_PIPE_MIN_BLOCKS)
scan_inclusive_u32(const u32* in, u32* out, u32* total, u64 n, u64* status, u32* tile_counter) {
    scan_pipelined<SCAN_PIPE_THREADS, SCAN_PIPE_ITEMS, true>(in, out, total, n, status,
                                                             tile_counter);
}

extern "C" __global__ void __launch_bounds__(SCAN_THREADS, SCAN_MIN_BLOCKS)
scan_exclusive_backward_u32(const u32* in, u32* out, u32* total, u64 n, u64* status,
                            u32* tile_counter) {
    scan_u32<false, true>(in, out, total, n, status, tile_counter);
}

extern "C" __global__ void __launch_bounds__(SCAN_THREADS, SCAN_MIN_BLOCKS)
scan_inclusive_backward_u32(const u32* in, u32* out, u32* total, u64 n, u64* status,
                            u32* tile_counter) {
    scan_u32<true, true>(in, out, total, n, status, tile_counter);
}

extern "C" __global__ void __launch_bounds__(SCAN_THREADS)
scan_segmented_exclusive_u32(const u32* values, const u32* heads, u32* out, u32* total, u64 n,
                             u64* status, u32* tile_counter) {
    scan_segmented_u32<false>(values, heads, out, total, n, status, tile_counter);
}

extern "C" __global__ void __launch_bounds__(SCAN_THREADS)
scan_segmented_inclusive_u32(const u32* values, const u32* heads, u32* out, u32* total, u64 n,
                             u64* status, u32* tile_counter) {
    scan_segmented_u32<true>(values, heads, out, total, n, status, tile_counter);
}
