// scan.cu: prefix sums of u32 in one pass (Merrill & Garland 2016 decoupled
// look-back, see block.cuh and tile_scan.cuh).
//
// Forward and backward, exclusive and inclusive, and the segmented sum that
// restarts at head flags (Sengupta et al. 2007). Sums wrap modulo 2^32. Every
// kernel runs on exactly ceil(n / SCAN_TILE) blocks of SCAN_THREADS threads,
// with `status` (one u64 per tile) and `tile_counter` zeroed beforehand.
// `total` may be null; otherwise the last tile writes the reduction of the
// whole input there (the thesis's ScanTail).
#include "tile_scan.cuh"

// Plain scans fit 48 registers without spilling, which keeps five blocks
// resident per SM: more tiles in flight to cover the look-back's latency.
// The segmented scans spill under that bound and keep the default.
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

extern "C" __global__ void __launch_bounds__(SCAN_THREADS, SCAN_MIN_BLOCKS)
scan_exclusive_u32(const u32* in, u32* out, u32* total, u64 n, u64* status, u32* tile_counter) {
    scan_u32<false, false>(in, out, total, n, status, tile_counter);
}

extern "C" __global__ void __launch_bounds__(SCAN_THREADS, SCAN_MIN_BLOCKS)
scan_inclusive_u32(const u32* in, u32* out, u32* total, u64 n, u64* status, u32* tile_counter) {
    scan_u32<true, false>(in, out, total, n, status, tile_counter);
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
