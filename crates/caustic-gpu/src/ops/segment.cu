// segment.cu: the thesis's segment utilities (Zeidan 2011, table 4.1 and
// appendix B): segmented reduction by owner, gather (which gives segment
// scan tails), sorted-bounds extraction, and the pieces of CreateChunks.
//
// Every kernel here is one thread per element with a grid-stride loop over
// 64-bit indices, so any grid covers any length.
#include "common.cuh"

#define SEGMENT_THREADS 256u

// --------------------------------------------------------- segmented reduce

struct SegSum {
    static __device__ __forceinline__ u32 combine(u32 a, u32 b) { return a + b; }
    static __device__ __forceinline__ void commit(u32* at, u32 v) { atomicAdd(at, v); }
};
struct SegMin {
    static __device__ __forceinline__ u32 combine(u32 a, u32 b) { return min(a, b); }
    static __device__ __forceinline__ void commit(u32* at, u32 v) { atomicMin(at, v); }
};
struct SegMax {
    static __device__ __forceinline__ u32 combine(u32 a, u32 b) { return max(a, b); }
    static __device__ __forceinline__ void commit(u32* at, u32 v) { atomicMax(at, v); }
};

// out[owner[i]] ⊕= values[i]; `out` starts at the operator's identity.
// Owners need not be sorted, but runs of equal owners in a warp are reduced
// by shuffles first so that each run costs one atomic (sorted owners, the
// usual case, then cost one atomic per warp and segment).
template <class Op>
__device__ __forceinline__ void segment_reduce(const u32* values, const u32* owner, u64 n,
                                               u32* out) {
    // Whole warps step together so the shuffles see a full warp.
    const u64 stride = grid_threads();
    const u64 rounds = (n + stride - 1) / stride;
    for (u64 r = 0; r < rounds; ++r) {
        const u64 i = r * stride + global_thread();
        const bool valid = i < n;
        const u32 o = valid ? owner[i] : 0xffffffffu;
        u32 v = valid ? values[i] : 0u;
        // Inclusive scan within runs of equal consecutive owners: a lane
        // takes a partial from d lanes back only if that lane is in its run.
        const u32 previous_o = __shfl_up_sync(CAUSTIC_FULL_MASK, o, 1);
        const u32 heads = __ballot_sync(CAUSTIC_FULL_MASK, lane_id() == 0 || previous_o != o);
        const u32 run_start = 31u - __clz(heads & (0xffffffffu >> (31u - lane_id())));
        for (u32 d = 1; d < 32; d <<= 1) {
            const u32 other = __shfl_up_sync(CAUSTIC_FULL_MASK, v, d);
            if (lane_id() >= run_start + d) v = Op::combine(other, v);
        }
        const u32 next_o = __shfl_down_sync(CAUSTIC_FULL_MASK, o, 1);
        const bool run_end = lane_id() == 31 || next_o != o || i + 1 >= n;
        if (valid && run_end) Op::commit(&out[o], v);
    }
}

extern "C" __global__ void __launch_bounds__(SEGMENT_THREADS)
segment_reduce_sum_u32(const u32* values, const u32* owner, u64 n, u32* out) {
    segment_reduce<SegSum>(values, owner, n, out);
}

extern "C" __global__ void __launch_bounds__(SEGMENT_THREADS)
segment_reduce_min_u32(const u32* values, const u32* owner, u64 n, u32* out) {
    segment_reduce<SegMin>(values, owner, n, out);
}

extern "C" __global__ void __launch_bounds__(SEGMENT_THREADS)
segment_reduce_max_u32(const u32* values, const u32* owner, u64 n, u32* out) {
    segment_reduce<SegMax>(values, owner, n, out);
}

// ---------------------------------------------------------------- gather

// out[i] = values[indices[i]]. With the last index of each segment and an
// inclusive segmented scan as `values`, this is SegScanTails.
extern "C" __global__ void __launch_bounds__(SEGMENT_THREADS)
segment_gather_u32(const u32* values, const u32* indices, u64 n, u32* out) {
    for (u64 i = global_thread(); i < n; i += grid_threads()) out[i] = values[indices[i]];
}

// ---------------------------------------------------------- sorted bounds

// For sorted keys with values below the bounds' length: start[v] and end[v]
// (one past) delimit the run of value v. Values with no run keep the
// caller's initial bounds (zero in the thesis), since no thread writes them.
extern "C" __global__ void __launch_bounds__(SEGMENT_THREADS)
segment_find_sorted_bounds(const u32* sorted, u64 n, u32* start, u32* end) {
    for (u64 i = global_thread(); i < n; i += grid_threads()) {
        const u32 v = sorted[i];
        if (i == 0 || sorted[i - 1] != v) start[v] = (u32)i;
        if (i + 1 == n || sorted[i + 1] != v) end[v] = (u32)(i + 1);
    }
}

// ------------------------------------------------------------- chunks

// counts[i] = ceil(size[i] / chunk): how many chunks node i splits into.
extern "C" __global__ void __launch_bounds__(SEGMENT_THREADS)
segment_chunk_counts(const u32* node_size, u64 nodes, u32 chunk, u32* counts) {
    for (u64 i = global_thread(); i < nodes; i += grid_threads())
        counts[i] = node_size[i] / chunk + (node_size[i] % chunk != 0u);
}

// Marks where each node's chunks begin (CreateChunks method 2, Zeidan 2011
// appendix B): heads[first[i]] counts the nodes i >= 1 starting there, so
// the inclusive scan of `heads` is each chunk's owner. Empty nodes share
// their successor's first chunk and are counted with it, which still lands
// the owner on the last node starting there: the non-empty one.
extern "C" __global__ void __launch_bounds__(SEGMENT_THREADS)
segment_chunk_heads(const u32* first_chunk, u64 nodes, u32 total_chunks, u32* heads) {
    for (u64 i = global_thread(); i < nodes; i += grid_threads())
        if (i > 0 && first_chunk[i] < total_chunks) atomicAdd(&heads[first_chunk[i]], 1u);
}

// Chunk c of node o covers [start, start + size) with
// start = node_start[o] + (c - first[o]) * chunk (the thesis's listing has
// the difference reversed) and size = min(chunk, node end - start).
extern "C" __global__ void __launch_bounds__(SEGMENT_THREADS)
segment_chunk_fill(const u32* owner, const u32* first_chunk, const u32* node_start,
                   const u32* node_size, u64 chunks, u32 chunk, u32* chunk_start,
                   u32* chunk_size) {
    for (u64 c = global_thread(); c < chunks; c += grid_threads()) {
        const u32 o = owner[c];
        const u32 begin = node_start[o] + ((u32)c - first_chunk[o]) * chunk;
        chunk_start[c] = begin;
        chunk_size[c] = min(chunk, node_start[o] + node_size[o] - begin);
    }
}
