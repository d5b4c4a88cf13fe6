// binned_sah.cu: one level of the GPU binned SAH builder (Zeidan 2011,
// §4.6: every node of a level at once, breadth first), driven by
// sah_levels_cuda.rs. The references of each node are one contiguous range;
// a level reads them from one buffer and writes both children's ranges,
// stably partitioned, to the other.
//
// - Nodes of at most SAH_WARP_MAX primitives: one warp each
//   (sah_split_warp) bins them (shared-memory atomics over per-lane runs),
//   sweeps the bins, decides as the CPU does and partitions them.
// - Larger nodes are cut into chunks (the thesis's CreateChunks, one block
//   per chunk): sah_chunk_setup lays the chunks out, sah_bin_chunks bins
//   each chunk into its own bins in global memory, sah_plan_chunked (one
//   block per node, on its first chunk) reduces its chunks' bins by a
//   segmented reduction, sweeps, decides and turns the chunks' left counts
//   into offsets, and sah_partition_chunks moves each chunk's references.
//   No global atomics: every chunk writes its own bins and offsets.
// - sah_emit (a single-pass scan, Merrill & Garland 2016) numbers the
//   children of all split nodes: node pairs in level order, next-level
//   tasks and small roots, and writes the level's nodes.
#include "binned_sah.cuh"
#include "tile_scan.cuh"

// ------------------------------------------------------------ shared steps

// Decides leaf, binned plane or median for a node whose plane (if any) is
// `best`, as the CPU's find_split: leaves at min_leaf, a split forced past
// max_leaf, SAH only within the depth budget, the median when binning found
// no plane but the node must split.
__device__ __forceinline__ SahPlan decide(const SahParams& p, const SahTask& task, BestPlane best,
                                          bool binned, const BinMap& map) {
    SahPlan plan;
    plan.kind = SAH_PLAN_LEAF;
    plan.axis = 0u, plan.bin = 0u, plan.left = 0u;
    plan.origin = 0.0f, plan.scale = 0.0f, plan.top = 0.0f;
    plan.pivot_hi = 0u, plan.pivot_lo = 0u;
    plan.pad[0] = plan.pad[1] = plan.pad[2] = 0u;
    const u32 n = task.count;
    if (n <= p.min_leaf) return plan;
    const bool must_split = n > p.max_leaf;
    if (binned && best.key != ~0ull) {
        const float weighted = __uint_as_float((u32)(best.key >> 32));
        if (!must_split && leaf_is_cheaper(p, n, box_half_area(task.lo, task.hi), weighted))
            return plan;
        plan.kind = SAH_PLAN_BINNED;
        plan.axis = (u32)(best.key >> 8) & 0xffu;
        plan.bin = (u32)best.key & 0xffu;
        plan.left = best.left;
        const BinAxis m = map.axis(plan.axis);
        plan.origin = m.origin, plan.scale = m.scale, plan.top = m.top;
        return plan;
    }
    if (must_split) {
        plan.kind = SAH_PLAN_MEDIAN;
        plan.axis = largest_axis(task.clo, task.chi);
        plan.left = n / 2u;
    }
    return plan;
}

// ------------------------------------------------------------ warp nodes

// One warp per node of at most SAH_WARP_MAX primitives (larger nodes are
// the chunk kernels'): bins, plans and partitions it from `in` into `out`
// (a leaf's ids go to their slots), and writes both sides' boxes.
extern "C" __global__ void __launch_bounds__(SAH_NODE_WARPS * 32)
sah_split_warp(const SahTask* tasks, u32 m, const SahParams* params, const PrimRef* in,
               PrimRef* out, u32* slot_ids, SahPlan* plans, SplitSides* sides) {
    __shared__ int bins_shared[SAH_NODE_WARPS][SAH_BINS_WORDS];
    const u32 j = blockIdx.x * SAH_NODE_WARPS + warp_id();
    if (j >= m) return;
    const SahTask task = tasks[j];
    if (task.count > SAH_WARP_MAX) return;
    const SahParams& p = *params;
    const u32 lane = lane_id(), n = task.count;
    int* words = bins_shared[warp_id()];

    BestPlane best;
    best.key = ~0ull;
    BinMap map{};
    const bool binned = n > p.min_leaf && sah_allowed(n, task.depth);
    if (binned) {
        const u32 bins = bins_for(p, n);
        map = bin_map(task.clo, task.chi, bins);
        bins_clear(words, bins, lane, 32u);
        __syncwarp();
        const u32 per = (n + 31u) / 32u;
        const u32 first = min(n, lane * per), end = min(n, first + per);
        bin_run(in, task.start + first, task.start + end, map, words);
        __syncwarp();
        best = warp_best_plane(words, bins);
        __syncwarp();
    }
    SahPlan plan = decide(p, task, best, binned, map);
    if (plan.kind == SAH_PLAN_MEDIAN) {
        const u64 pivot = select_key<true>(in, task.start, n, plan.axis, n / 2u, (u32*)words, lane, 32u);
        plan.pivot_hi = (u32)(pivot >> 32), plan.pivot_lo = (u32)pivot;
    }
    if (lane == 0) plans[j] = plan;
    if (plan.kind == SAH_PLAN_LEAF) {
        for (u32 i = lane; i < n; i += 32u) slot_ids[task.start + i] = in[task.start + i].id;
        return;
    }
    // Stable partition, 32 references at a time: ballots rank each side.
    Sides s;
    sides_clear(s);
    u32 run_left = 0u, run_right = 0u;
    const u32 right_base = task.start + plan.left;
    for (u32 base = 0; base < n; base += 32u) {
        const u32 i = base + lane;
        const bool valid = i < n;
        float4 lo = make_float4(0, 0, 0, 0), hi = lo;
        if (valid) load_ref(in, task.start + i, lo, hi);
        const bool left = valid && goes_left(plan, lo, hi);
        const u32 lefts = __ballot_sync(CAUSTIC_FULL_MASK, left);
        const u32 rights = __ballot_sync(CAUSTIC_FULL_MASK, valid && !left);
        if (valid) {
            const u32 at = left ? task.start + run_left + __popc(lefts & lanemask_lt())
                                : right_base + run_right + __popc(rights & lanemask_lt());
            store_ref(out, at, lo, hi);
            sides_add(s, left, lo, hi);
        }
        run_left += __popc(lefts);
        run_right += __popc(rights);
    }
    sides_warp_reduce(s);
    if (lane == 0) sides_store(s, sides + j);
}

// ------------------------------------------------------------ chunked nodes

// One warp per level node: a node of more than SAH_WARP_MAX primitives
// writes its chunks from chunks[chunk_first[j]] on (CreateChunks with the
// chunk size of chunk_size()).
extern "C" __global__ void __launch_bounds__(SAH_NODE_WARPS * 32)
sah_chunk_setup(const SahTask* tasks, u32 m, const u32* chunk_first, SahChunk* chunks) {
    const u32 j = blockIdx.x * SAH_NODE_WARPS + warp_id();
    if (j >= m) return;
    const SahTask task = tasks[j];
    if (task.count <= SAH_WARP_MAX) return;
    const u32 size = chunk_size(task.count), count = chunk_count(task.count);
    for (u32 c = lane_id(); c < count; c += 32u) {
        SahChunk chunk;
        chunk.node = j;
        chunk.start = task.start + c * size;
        chunk.count = min(size, task.count - c * size);
        chunk.left_offset = 0u;
        chunks[chunk_first[j] + c] = chunk;
    }
}

// One block per chunk: bins the chunk's references (each thread one
// contiguous run) into shared bins, then copies them to the chunk's own
// bins in global memory.
extern "C" __global__ void __launch_bounds__(SAH_CHUNK_THREADS)
sah_bin_chunks(const SahTask* tasks, const SahChunk* chunks, const SahParams* params,
               const PrimRef* in, int* chunk_bins) {
    __shared__ int words[SAH_BINS_WORDS];
    const SahChunk chunk = chunks[blockIdx.x];
    const SahTask task = tasks[chunk.node];
    const SahParams& p = *params;
    if (!sah_allowed(task.count, task.depth)) return;
    const u32 bins = bins_for(p, task.count);
    const BinMap map = bin_map(task.clo, task.chi, bins);
    bins_clear(words, bins, threadIdx.x, SAH_CHUNK_THREADS);
    __syncthreads();
    const u32 per = (chunk.count + SAH_CHUNK_THREADS - 1u) / SAH_CHUNK_THREADS;
    const u32 first = min(chunk.count, threadIdx.x * per), end = min(chunk.count, first + per);
    bin_run(in, chunk.start + first, chunk.start + end, map, words);
    __syncthreads();
    int* own = chunk_bins + (u64)blockIdx.x * SAH_BINS_WORDS;
    for (u32 w = threadIdx.x; w < SAH_BINS_WORDS; w += SAH_CHUNK_THREADS)
        if (w % SAH_MAX_BINS < bins) own[w] = words[w];
}

// Left references of chunk c under a plan: the chunk's bins left of the
// plane, or (median) its keys below the pivot.
__device__ u32 chunk_left(const SahPlan& plan, const SahChunk& chunk, const int* own, const PrimRef* in) {
    u32 left = 0u;
    if (plan.kind == SAH_PLAN_BINNED) {
        for (u32 b = 0; b < plan.bin; ++b) left += (u32)own[plan.axis * SAH_AXIS_WORDS + b];
    } else {
        for (u32 i = 0; i < chunk.count; ++i) {
            float4 lo, hi;
            load_ref(in, chunk.start + i, lo, hi);
            left += goes_left(plan, lo, hi) ? 1u : 0u;
        }
    }
    return left;
}

// One block per node, started on every chunk (those that are not their
// node's first return at once): joins the chunks' bins (a segmented
// reduction by owner), sweeps them with one warp, decides, and scans the
// chunks' left counts into their offsets.
extern "C" __global__ void __launch_bounds__(SAH_PLAN_THREADS)
sah_plan_chunked(const SahTask* tasks, SahChunk* chunks, const SahParams* params, const PrimRef* in,
                 const int* chunk_bins, SahPlan* plans) {
    __shared__ int words[SAH_BINS_WORDS];
    __shared__ BestPlane best_shared;
    __shared__ u32 warp_totals[SAH_PLAN_THREADS / 32];
    const u32 first = blockIdx.x;
    const SahChunk head = chunks[first];
    const SahTask task = tasks[head.node];
    if (head.start != task.start) return;
    const SahParams& p = *params;
    const u32 n = task.count, count = chunk_count(n), t = threadIdx.x;

    BestPlane best;
    best.key = ~0ull;
    BinMap map{};
    const bool binned = n > p.min_leaf && sah_allowed(n, task.depth);
    if (binned) {
        const u32 bins = bins_for(p, n);
        map = bin_map(task.clo, task.chi, bins);
        for (u32 w = t; w < SAH_BINS_WORDS; w += SAH_PLAN_THREADS) {
            const u32 field = (w % SAH_AXIS_WORDS) / SAH_MAX_BINS;
            if (w % SAH_MAX_BINS >= bins) continue;
            int acc = field == 0u ? 0 : (field <= 3u ? float_order(CAUSTIC_INF) : float_order(-CAUSTIC_INF));
            // Unrolled, so that several chunks' loads are in flight at once.
#pragma unroll 8
            for (u32 c = first; c < first + count; ++c) {
                const int v = chunk_bins[(u64)c * SAH_BINS_WORDS + w];
                acc = field == 0u ? acc + v : (field <= 3u ? min(acc, v) : max(acc, v));
            }
            words[w] = acc;
        }
        __syncthreads();
        if (warp_id() == 0) {
            const BestPlane b = warp_best_plane(words, bins);
            if (t == 0) best_shared = b;
        }
        __syncthreads();
        best = best_shared;
    }
    SahPlan plan = decide(p, task, best, binned, map);
    if (plan.kind == SAH_PLAN_MEDIAN) {
        // The bins are free now: their first 258 words hold the histogram.
        const u64 pivot = select_key<false>(in, task.start, n, plan.axis, n / 2u, (u32*)words, t,
                                            SAH_PLAN_THREADS);
        plan.pivot_hi = (u32)(pivot >> 32), plan.pivot_lo = (u32)pivot;
    }
    if (t == 0) plans[head.node] = plan;
    if (plan.kind == SAH_PLAN_LEAF) return;
    u32 carry = 0u;
    for (u32 base = 0; base < count; base += SAH_PLAN_THREADS) {
        const u32 c = first + base + t;
        u32 left = 0u;
        if (base + t < count) left = chunk_left(plan, chunks[c], chunk_bins + (u64)c * SAH_BINS_WORDS, in);
        u32 total;
        const u32 before = block_exclusive_scan<SumU32, SAH_PLAN_THREADS>(left, warp_totals, total);
        if (base + t < count) chunks[c].left_offset = carry + before;
        carry += total;
        __syncthreads();
    }
}

// One block per chunk: moves the chunk's references to their sides,
// stably (256 at a time, ranked by warp ballots), and writes the chunk's
// side boxes; a leaf's chunk writes its ids to their slots.
extern "C" __global__ void __launch_bounds__(SAH_CHUNK_THREADS)
sah_partition_chunks(const SahTask* tasks, const SahChunk* chunks, const SahPlan* plans,
                     const PrimRef* in, PrimRef* out, u32* slot_ids, SplitSides* chunk_sides) {
    __shared__ u32 counts[2][SAH_CHUNK_THREADS / 32];
    __shared__ float partial[SAH_CHUNK_THREADS / 32][24];
    const SahChunk chunk = chunks[blockIdx.x];
    const SahTask task = tasks[chunk.node];
    const SahPlan plan = plans[chunk.node];
    const u32 t = threadIdx.x, lane = lane_id(), warp = warp_id();
    if (plan.kind == SAH_PLAN_LEAF) {
        for (u32 i = t; i < chunk.count; i += SAH_CHUNK_THREADS)
            slot_ids[chunk.start + i] = in[chunk.start + i].id;
        return;
    }
    u32 left_at = task.start + chunk.left_offset;
    u32 right_at = task.start + plan.left + (chunk.start - task.start - chunk.left_offset);
    Sides s;
    sides_clear(s);
    for (u32 base = 0; base < chunk.count; base += SAH_CHUNK_THREADS) {
        const u32 i = base + t;
        const bool valid = i < chunk.count;
        float4 lo = make_float4(0, 0, 0, 0), hi = lo;
        if (valid) load_ref(in, chunk.start + i, lo, hi);
        const bool left = valid && goes_left(plan, lo, hi);
        const u32 lefts = __ballot_sync(CAUSTIC_FULL_MASK, left);
        const u32 rights = __ballot_sync(CAUSTIC_FULL_MASK, valid && !left);
        if (lane == 0) counts[0][warp] = __popc(lefts), counts[1][warp] = __popc(rights);
        __syncthreads();
        u32 left_before = 0u, right_before = 0u, left_total = 0u, right_total = 0u;
#pragma unroll
        for (u32 w = 0; w < SAH_CHUNK_THREADS / 32; ++w) {
            if (w < warp) left_before += counts[0][w], right_before += counts[1][w];
            left_total += counts[0][w], right_total += counts[1][w];
        }
        if (valid) {
            const u32 at = left ? left_at + left_before + __popc(lefts & lanemask_lt())
                                : right_at + right_before + __popc(rights & lanemask_lt());
            store_ref(out, at, lo, hi);
            sides_add(s, left, lo, hi);
        }
        left_at += left_total;
        right_at += right_total;
        __syncthreads();
    }
    sides_warp_reduce(s);
    if (lane == 0)
        for (u32 k = 0; k < 24; ++k) partial[warp][k] = s.v[k];
    __syncthreads();
    if (t < 24) {
        float v = partial[0][t];
        for (u32 w = 1; w < SAH_CHUNK_THREADS / 32; ++w) v = sides_join(t, v, partial[w][t]);
        ((float*)(chunk_sides + blockIdx.x))[t] = v;
    }
}

// ------------------------------------------------------------ emit

// Children counted by kind in one scan word: next-level tasks in bits
// 0..30, small roots in bits 31..61 (within the look-back's 62 bits).
#define SAH_COUNT_BITS 31
#define SAH_COUNT_MASK ((1ull << SAH_COUNT_BITS) - 1ull)

struct ChildCounts {
    typedef u64 T;
    static __device__ __forceinline__ T identity() { return 0ull; }
    static __device__ __forceinline__ T combine(T older, T newer) { return older + newer; }
    static __device__ __forceinline__ u64 pack(T v) { return v; }
    static __device__ __forceinline__ T unpack(u64 w) { return w; }
    static __device__ __forceinline__ T shfl_up(T v, u32 d) { return __shfl_up_sync(CAUSTIC_FULL_MASK, v, d); }
    static __device__ __forceinline__ T shfl_down(T v, u32 d) { return __shfl_down_sync(CAUSTIC_FULL_MASK, v, d); }
    static __device__ __forceinline__ T shfl(T v, u32 lane) { return __shfl_sync(CAUSTIC_FULL_MASK, v, lane); }
};

struct EmitIo {
    static constexpr bool STAGED = false;
    const SahTask* tasks;
    const SahPlan* plans;
    const SplitSides* sides;
    const SplitSides* chunk_sides;
    const u32* chunk_first;
    u32 sweep_max;
    BvhNode* nodes;
    SahTask* next;
    u32* next_chunks;
    SahSmallRoot* smalls;
    u32* counters;
    u32 pair_base;
    u32 small_base;
    u32 parity;

    __device__ __forceinline__ u64 load(u64 j) const {
        const SahPlan plan = plans[j];
        if (plan.kind == SAH_PLAN_LEAF) return 0ull;
        const u32 right = tasks[j].count - plan.left;
        const u32 large = (plan.left > sweep_max ? 1u : 0u) + (right > sweep_max ? 1u : 0u);
        return (u64)large | ((u64)(2u - large) << SAH_COUNT_BITS);
    }

    __device__ void emit(u64 j, u64 before, u64) const {
        const SahTask task = tasks[j];
        const SahPlan plan = plans[j];
        if (plan.kind == SAH_PLAN_LEAF) {
            nodes[task.slot] = make_node(task.lo, task.hi, task.start, task.count);
            return;
        }
        u32 large = (u32)(before & SAH_COUNT_MASK), small = (u32)(before >> SAH_COUNT_BITS);
        const u32 pair = pair_base + large + small;
        nodes[task.slot] = make_node(task.lo, task.hi, pair, 0u);
        float v[24];
        if (task.count > SAH_WARP_MAX) {
            // A chunked node: join its chunks' sides.
            const u32 first = chunk_first[j], count = chunk_count(task.count);
            for (u32 k = 0; k < 24; ++k) v[k] = ((const float*)(chunk_sides + first))[k];
            for (u32 c = first + 1; c < first + count; ++c)
                for (u32 k = 0; k < 24; ++k) v[k] = sides_join(k, v[k], ((const float*)(chunk_sides + c))[k]);
        } else {
            for (u32 k = 0; k < 24; ++k) v[k] = ((const float*)(sides + j))[k];
        }
        for (u32 c = 0; c < 2; ++c) {
            const u32 count = c == 0 ? plan.left : task.count - plan.left;
            const u32 start = c == 0 ? task.start : task.start + plan.left;
            const float* box = v + 6u * c;
            const float* centers = v + 12u + 6u * c;
            if (count > sweep_max) {
                SahTask child;
                for (u32 k = 0; k < 3; ++k) {
                    child.lo[k] = box[k], child.hi[k] = box[3 + k];
                    child.clo[k] = centers[k], child.chi[k] = centers[3 + k];
                }
                child.start = start, child.count = count;
                child.slot = pair + c, child.depth = task.depth + 1u;
                next[large] = child;
                const bool chunked = count > SAH_WARP_MAX;
                next_chunks[large] = chunked ? chunk_count(count) : 0u;
                if (chunked) counters[2] = 1u; // any writer writes the same 1
                ++large;
            } else {
                SahSmallRoot root;
                for (u32 k = 0; k < 3; ++k) root.lo[k] = box[k], root.hi[k] = box[3 + k];
                root.start = start, root.count = count;
                root.slot = pair + c, root.depth = task.depth + 1u;
                root.parity = parity, root.pad = 0u;
                smalls[small_base + small] = root;
                ++small;
            }
        }
    }

    __device__ __forceinline__ void finish(u64 total) const {
        counters[0] = (u32)(total & SAH_COUNT_MASK);
        counters[1] = (u32)(total >> SAH_COUNT_BITS);
    }
};

// Numbers the level's children and writes its nodes; counters[0..2] get
// the next level's task count, the new small roots and whether any next
// task is chunked (counters[2] must be 0 before). Runs on
// ceil(m / SCAN_TILE) blocks with zeroed look-back status.
extern "C" __global__ void __launch_bounds__(SCAN_THREADS)
sah_emit(const SahTask* tasks, const SahPlan* plans, const SplitSides* sides,
         const SplitSides* chunk_sides, const u32* chunk_first, u64 m, u32 sweep_max, u32 pair_base,
         u32 small_base, u32 parity, BvhNode* nodes, SahTask* next, u32* next_chunks,
         SahSmallRoot* smalls, u32* counters, u64* status, u32* tile_counter) {
    EmitIo io;
    io.tasks = tasks, io.plans = plans, io.sides = sides, io.chunk_sides = chunk_sides;
    io.chunk_first = chunk_first, io.sweep_max = sweep_max;
    io.nodes = nodes, io.next = next, io.next_chunks = next_chunks, io.smalls = smalls;
    io.counters = counters, io.pair_base = pair_base, io.small_base = small_base, io.parity = parity;
    scan_tile<ChildCounts>(io, m, status, tile_counter);
}
