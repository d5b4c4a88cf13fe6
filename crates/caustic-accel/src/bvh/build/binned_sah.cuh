// binned_sah.cuh: what the GPU top-down SAH builders share (binned_sah.cu,
// sweep_sah.cu, sah_device.cu) beside the records of sah_records.cuh: the
// bin mapping and the SAH arithmetic of the CPU builders, one warp's sweep
// over bins, and a radix select for the object-median fallback.
//
// Arithmetic: every product that meets a sum is an _rn intrinsic, so NVRTC
// cannot fuse it into an FMA; divisions are __fdiv_rn. The bin of a split
// point, the plane costs and the leaf test are then the CPU's bit for bit
// (binned_sah/split.rs, sorted_sweep.rs), and a GPU tree differs from the
// CPU's only where the two partitions order primitives differently (ties).
#pragma once
#include "bvh.cuh"
#include "block.cuh"
#include "sah_records.cuh"

#define SAH_MAX_BINS 64u
// A bin is 7 words: its primitive count and its box (min xyz, max xyz) as
// order-preserving ints, so shared and global atomics need no float min.
// Layout per axis: word field * SAH_MAX_BINS + bin (lanes over bins touch
// consecutive words).
#define SAH_BIN_FIELDS 7u
#define SAH_AXIS_WORDS (SAH_BIN_FIELDS * SAH_MAX_BINS)
#define SAH_BINS_WORDS (3u * SAH_AXIS_WORDS)
// Nodes of at most this many primitives are planned and partitioned by one
// warp; larger ones by chunks of SAH_CHUNK_MIN or more primitives, a block
// of SAH_CHUNK_THREADS each, at most SAH_MAX_CHUNKS chunks per node (so
// that one block of SAH_PLAN_THREADS joins a node's chunk bins quickly,
// while big blocks keep enough loads in flight to bin at memory speed).
#define SAH_WARP_MAX 2048u
#define SAH_CHUNK_MIN 8192u
#define SAH_MAX_CHUNKS 64u
#define SAH_CHUNK_THREADS 1024u
#define SAH_PLAN_THREADS 256u
#define SAH_NODE_WARPS 4u
// The traversal stack's depth (bvh::MAX_DEPTH).
#define SAH_MAX_DEPTH 64u

#define SAH_PLAN_LEAF 0u
#define SAH_PLAN_BINNED 1u
#define SAH_PLAN_MEDIAN 2u

// 1.5 * 2^23: adding it to a float in [0, 63] leaves the integer in the low
// mantissa bits (split.rs: ROUNDER).
#define SAH_ROUNDER 12582912.0f

// ------------------------------------------------------------ small helpers

__device__ __forceinline__ void load_ref(const PrimRef* refs, u32 i, float4& lo, float4& hi) {
    const float4* words = (const float4*)(refs + i);
    lo = __ldg(words);
    hi = __ldg(words + 1);
}

__device__ __forceinline__ void store_ref(PrimRef* refs, u32 i, float4 lo, float4 hi) {
    float4* words = (float4*)(refs + i);
    words[0] = lo;
    words[1] = hi;
}

__device__ __forceinline__ float lane3(float4 v, u32 axis) {
    return axis == 0 ? v.x : (axis == 1 ? v.y : v.z);
}

// A float as an int with the same order (atomicMin/Max work on ints); its
// own inverse.
__device__ __forceinline__ int float_order(float f) {
    const int i = __float_as_int(f);
    return i >= 0 ? i : i ^ 0x7fffffff;
}
__device__ __forceinline__ float order_float(int i) {
    return __int_as_float(i >= 0 ? i : i ^ 0x7fffffff);
}

// sorted_sweep::sort_key: the split-point coordinate's order in the high
// word, the primitive id in the low one (ties by id).
__device__ __forceinline__ u32 coordinate_key(float x) {
    const u32 bits = __float_as_uint(x);
    return (bits >> 31) ? ~bits : (bits | 0x80000000u);
}

// BuildBox::half_area: half the surface area, extents clamped at 0.
__device__ __forceinline__ float box_half_area(const float* lo, const float* hi) {
    const float ex = fmaxf(__fsub_rn(hi[0], lo[0]), 0.0f);
    const float ey = fmaxf(__fsub_rn(hi[1], lo[1]), 0.0f);
    const float ez = fmaxf(__fsub_rn(hi[2], lo[2]), 0.0f);
    return __fadd_rn(__fadd_rn(__fmul_rn(ex, ey), __fmul_rn(ey, ez)), __fmul_rn(ez, ex));
}

// sorted_sweep::half_areas for one axis's box: extents not clamped (the
// sweeps only price non-empty sides).
__device__ __forceinline__ float sweep_half_area(float lx, float ly, float lz, float hx, float hy,
                                                 float hz) {
    const float ex = __fsub_rn(hx, lx), ey = __fsub_rn(hy, ly), ez = __fsub_rn(hz, lz);
    return __fadd_rn(__fadd_rn(__fmul_rn(ex, ey), __fmul_rn(ey, ez)), __fmul_rn(ez, ex));
}

// Aabb::largest_axis: the first axis wins ties.
__device__ __forceinline__ u32 largest_axis(const float* lo, const float* hi) {
    const float ex = hi[0] - lo[0], ey = hi[1] - lo[1], ez = hi[2] - lo[2];
    return (ex >= ey && ex >= ez) ? 0u : (ey >= ez ? 1u : 2u);
}

// sorted_sweep::ceil_log2 and SahRules::sah_allowed: a node at `depth`
// may still split by SAH while a median split all the way down would keep
// every leaf within SAH_MAX_DEPTH.
__device__ __forceinline__ u32 ceil_log2(u32 n) { return n <= 1 ? 0u : 32u - __clz(n - 1u); }
__device__ __forceinline__ bool sah_allowed(u32 n, u32 depth) {
    return depth + ceil_log2(n) < SAH_MAX_DEPTH;
}

// SahRules::leaf_is_cheaper, multiplied through by the node's half area.
__device__ __forceinline__ bool leaf_is_cheaper(const SahParams& p, u32 n, float half_area,
                                                float weighted_area) {
    const float leaf = __fmul_rn(__fmul_rn(p.intersection_cost, (float)n), half_area);
    const float split = __fadd_rn(__fmul_rn(p.traversal_cost, half_area),
                                  __fmul_rn(p.intersection_cost, weighted_area));
    return leaf <= split;
}

// BinnedSahConfig::bins_for.
__device__ __forceinline__ u32 bins_for(const SahParams& p, u32 n) {
    for (u32 s = 0; s < p.stages; ++s)
        if (n >= p.stage_min[s]) return p.stage_bins[s];
    return p.bins;
}

// Chunks of a node of n primitives: at least SAH_CHUNK_MIN primitives each
// (a multiple of the block size), at most SAH_MAX_CHUNKS of them.
__device__ __forceinline__ u32 chunk_size(u32 n) {
    const u32 even = (n + SAH_MAX_CHUNKS - 1u) / SAH_MAX_CHUNKS;
    const u32 rounded = (even + SAH_CHUNK_THREADS - 1u) / SAH_CHUNK_THREADS * SAH_CHUNK_THREADS;
    return rounded > SAH_CHUNK_MIN ? rounded : SAH_CHUNK_MIN;
}
__device__ __forceinline__ u32 chunk_count(u32 n) {
    const u32 size = chunk_size(n);
    return (n + size - 1u) / size;
}

// ------------------------------------------------------------ bin mapping

// split.rs BinMapping for one axis: bin k holds the split points with
// (c - min) * bins / extent in [k, k + 1); an axis whose points do not
// spread (or spread too little for a finite scale) maps everything to bin 0.
struct BinAxis {
    float origin;
    float scale;
    float top;
};

__device__ __forceinline__ BinAxis bin_axis(float cmin, float cmax, u32 bins) {
    const float extent = __fsub_rn(cmax, cmin);
    float scale = __fdiv_rn((float)bins, extent);
    const bool usable = extent > 0.0f && fabsf(scale) < CAUSTIC_INF;
    scale = usable ? scale : 0.0f;
    const float half_bin = usable ? __fdiv_rn(0.5f, scale) : 0.0f;
    BinAxis m;
    m.origin = __fadd_rn(cmin, half_bin);
    m.scale = scale;
    m.top = (float)(bins - 1u);
    return m;
}

// The mappings of the three axes (fields, not an array, so that picking
// one by a run-time axis stays in registers).
struct BinMap {
    BinAxis x, y, z;
    __device__ __forceinline__ BinAxis axis(u32 a) const { return a == 0 ? x : (a == 1 ? y : z); }
};

__device__ __forceinline__ BinMap bin_map(const float* clo, const float* chi, u32 bins) {
    BinMap m;
    m.x = bin_axis(clo[0], chi[0], bins);
    m.y = bin_axis(clo[1], chi[1], bins);
    m.z = bin_axis(clo[2], chi[2], bins);
    return m;
}

// AxisMapping::bin: clamp, then round by the ROUNDER add.
__device__ __forceinline__ u32 bin_of(const BinAxis& m, float c) {
    float f = __fmul_rn(__fsub_rn(c, m.origin), m.scale);
    f = fminf(fmaxf(f, 0.0f), m.top);
    return __float_as_uint(__fadd_rn(f, SAH_ROUNDER)) & (SAH_MAX_BINS - 1u);
}

// Sets `bins` bins of each axis empty; called by `threads` threads.
__device__ __forceinline__ void bins_clear(int* words, u32 bins, u32 t, u32 threads) {
    for (u32 w = t; w < 3u * SAH_BIN_FIELDS * bins; w += threads) {
        const u32 axis = w / (SAH_BIN_FIELDS * bins), rest = w % (SAH_BIN_FIELDS * bins);
        const u32 field = rest / bins, bin = rest % bins;
        int v = 0;
        if (field >= 1u && field <= 3u) v = float_order(CAUSTIC_INF);
        if (field >= 4u) v = float_order(-CAUSTIC_INF);
        words[axis * SAH_AXIS_WORDS + field * SAH_MAX_BINS + bin] = v;
    }
}

// One axis's run of primitives in the same bin, merged in registers and
// added to the bins with one atomic per word: neighbouring primitives of a
// mesh mostly share bins, so this takes a few atomics per primitive.
struct BinRun {
    u32 bin;
    u32 count;
    float lx, ly, lz, hx, hy, hz;
};

__device__ __forceinline__ void run_flush(BinRun& r, int* axis_words) {
    if (r.count == 0u) return;
    int* w = axis_words + r.bin;
    atomicAdd((u32*)w, r.count);
    atomicMin(w + 1u * SAH_MAX_BINS, float_order(r.lx));
    atomicMin(w + 2u * SAH_MAX_BINS, float_order(r.ly));
    atomicMin(w + 3u * SAH_MAX_BINS, float_order(r.lz));
    atomicMax(w + 4u * SAH_MAX_BINS, float_order(r.hx));
    atomicMax(w + 5u * SAH_MAX_BINS, float_order(r.hy));
    atomicMax(w + 6u * SAH_MAX_BINS, float_order(r.hz));
    r.count = 0u;
}

__device__ __forceinline__ void run_add(BinRun& r, int* axis_words, u32 bin, float4 lo, float4 hi) {
    if (bin != r.bin) {
        run_flush(r, axis_words);
        r.bin = bin;
        r.lx = lo.x, r.ly = lo.y, r.lz = lo.z;
        r.hx = hi.x, r.hy = hi.y, r.hz = hi.z;
    } else {
        r.lx = fminf(r.lx, lo.x), r.ly = fminf(r.ly, lo.y), r.lz = fminf(r.lz, lo.z);
        r.hx = fmaxf(r.hx, hi.x), r.hy = fmaxf(r.hy, hi.y), r.hz = fmaxf(r.hz, hi.z);
    }
    r.count += 1u;
}

// Bins the primitives first .. end (one thread's contiguous run) into
// `words` on all three axes (three runs in registers).
__device__ __forceinline__ void bin_run(const PrimRef* refs, u32 first, u32 end, const BinMap& map,
                                        int* words) {
    BinRun rx;
    rx.bin = 0xffffffffu; // no bin: the first primitive starts a run
    rx.count = 0u;
    rx.lx = rx.ly = rx.lz = CAUSTIC_INF;
    rx.hx = rx.hy = rx.hz = -CAUSTIC_INF;
    BinRun ry = rx, rz = rx;
    for (u32 i = first; i < end; ++i) {
        float4 lo, hi;
        load_ref(refs, i, lo, hi);
        run_add(rx, words, bin_of(map.x, __fadd_rn(lo.x, hi.x)), lo, hi);
        run_add(ry, words + SAH_AXIS_WORDS, bin_of(map.y, __fadd_rn(lo.y, hi.y)), lo, hi);
        run_add(rz, words + 2u * SAH_AXIS_WORDS, bin_of(map.z, __fadd_rn(lo.z, hi.z)), lo, hi);
    }
    run_flush(rx, words);
    run_flush(ry, words + SAH_AXIS_WORDS);
    run_flush(rz, words + 2u * SAH_AXIS_WORDS);
}

// ------------------------------------------------------------ sweep

// A run of bins: primitive count and box.
struct BinSum {
    u32 count;
    float lo[3];
    float hi[3];
};

__device__ __forceinline__ BinSum binsum_empty() {
    BinSum s;
    s.count = 0u;
    s.lo[0] = s.lo[1] = s.lo[2] = CAUSTIC_INF;
    s.hi[0] = s.hi[1] = s.hi[2] = -CAUSTIC_INF;
    return s;
}

__device__ __forceinline__ BinSum binsum_join(BinSum a, const BinSum& b) {
    a.count += b.count;
#pragma unroll
    for (u32 k = 0; k < 3; ++k) a.lo[k] = fminf(a.lo[k], b.lo[k]), a.hi[k] = fmaxf(a.hi[k], b.hi[k]);
    return a;
}

__device__ __forceinline__ BinSum binsum_load(const int* axis_words, u32 bin, u32 bins) {
    if (bin >= bins) return binsum_empty();
    BinSum s;
    s.count = (u32)axis_words[bin];
#pragma unroll
    for (u32 k = 0; k < 3; ++k) {
        s.lo[k] = order_float(axis_words[(1u + k) * SAH_MAX_BINS + bin]);
        s.hi[k] = order_float(axis_words[(4u + k) * SAH_MAX_BINS + bin]);
    }
    return s;
}

// Shuffles a BinSum by `delta` lanes up (up = true) or down.
__device__ __forceinline__ BinSum binsum_shfl(const BinSum& v, u32 delta, bool up) {
    BinSum r;
    r.count = up ? __shfl_up_sync(CAUSTIC_FULL_MASK, v.count, delta)
                 : __shfl_down_sync(CAUSTIC_FULL_MASK, v.count, delta);
#pragma unroll
    for (u32 k = 0; k < 3; ++k) {
        r.lo[k] = up ? __shfl_up_sync(CAUSTIC_FULL_MASK, v.lo[k], delta)
                     : __shfl_down_sync(CAUSTIC_FULL_MASK, v.lo[k], delta);
        r.hi[k] = up ? __shfl_up_sync(CAUSTIC_FULL_MASK, v.hi[k], delta)
                     : __shfl_down_sync(CAUSTIC_FULL_MASK, v.hi[k], delta);
    }
    return r;
}

// `A_L N_L + A_R N_R` of one plane, exactly as best_plane computes it.
__device__ __forceinline__ float plane_cost(const BinSum& l, const BinSum& r) {
    const float al = sweep_half_area(l.lo[0], l.lo[1], l.lo[2], l.hi[0], l.hi[1], l.hi[2]);
    const float ar = sweep_half_area(r.lo[0], r.lo[1], r.lo[2], r.hi[0], r.hi[1], r.hi[2]);
    return __fadd_rn(__fmul_rn(al, (float)l.count), __fmul_rn(ar, (float)r.count));
}

// A candidate plane as one sortable word: cost, then axis, then plane, so
// the smallest word is best_plane's choice (cheapest; the first axis and
// the leftmost plane win ties). Costs are finite and non-negative here.
__device__ __forceinline__ u64 plane_key(float cost, u32 axis, u32 plane) {
    return ((u64)__float_as_uint(cost) << 32) | (axis << 8) | plane;
}

struct BestPlane {
    u64 key; // ~0 when no plane has primitives on both sides
    u32 left;
};

__device__ __forceinline__ void consider(BestPlane& best, const BinSum& l, const BinSum& r,
                                         u32 axis, u32 plane, u32 bins) {
    if (plane >= bins || l.count == 0u || r.count == 0u) return;
    const float cost = plane_cost(l, r);
    if (!(cost < CAUSTIC_INF)) return;
    const u64 key = plane_key(cost, axis, plane);
    if (key < best.key) best.key = key, best.left = l.count;
}

// best_plane over the bins in `words` (bins per axis), by one full warp:
// lane l holds bins 2l and 2l + 1; prefix and suffix sums over the lanes
// price every plane; the warp agrees on the cheapest. Counts are summed as
// integers (best_plane sums them as f32, which is the same below 2^24).
__device__ BestPlane warp_best_plane(const int* words, u32 bins) {
    const u32 lane = lane_id();
    BestPlane best;
    best.key = ~0ull;
    best.left = 0u;
    for (u32 axis = 0; axis < 3; ++axis) {
        const int* w = words + axis * SAH_AXIS_WORDS;
        const BinSum a = binsum_load(w, 2u * lane, bins), b = binsum_load(w, 2u * lane + 1u, bins);
        const BinSum pair = binsum_join(a, b);
        BinSum up = pair, down = pair;
        for (u32 d = 1; d < 32; d <<= 1) {
            const BinSum from_below = binsum_shfl(up, d, true);
            const BinSum from_above = binsum_shfl(down, d, false);
            if (lane >= d) up = binsum_join(from_below, up);
            if (lane + d < 32) down = binsum_join(down, from_above);
        }
        BinSum before = binsum_shfl(up, 1, true), after = binsum_shfl(down, 1, false);
        if (lane == 0) before = binsum_empty();
        if (lane == 31) after = binsum_empty();
        const BinSum left_a = binsum_join(before, a), left_b = binsum_join(left_a, b);
        const BinSum right_b = binsum_join(b, after), right_a = binsum_join(a, right_b);
        BinSum right_next = binsum_shfl(right_a, 1, false);
        if (lane == 31) right_next = binsum_empty();
        // Plane p lies between bins p - 1 and p.
        consider(best, left_a, right_b, axis, 2u * lane + 1u, bins);
        consider(best, left_b, right_next, axis, 2u * lane + 2u, bins);
    }
    for (u32 d = 16; d > 0; d >>= 1) {
        const u64 key = __shfl_xor_sync(CAUSTIC_FULL_MASK, best.key, d);
        const u32 left = __shfl_xor_sync(CAUSTIC_FULL_MASK, best.left, d);
        if (key < best.key) best.key = key, best.left = left;
    }
    return best;
}

// ------------------------------------------------------------ median

// The key that orders a node's primitives for the object-median split
// (split.rs median_split): split-point coordinate on `axis`, then id.
__device__ __forceinline__ u64 median_key(float4 lo, float4 hi, u32 axis) {
    const float c = __fadd_rn(lane3(lo, axis), lane3(hi, axis));
    return ((u64)coordinate_key(c) << 32) | __float_as_uint(lo.w);
}

// The k-th smallest median key (k from 0) of refs[first .. first + n), by
// a most-significant-digit radix select over eight 8-bit digits, with the
// `threads` threads of a warp (WARP) or block; `hist` is 258 words of
// shared memory. Only the fallback split uses it, so it is simple rather
// than fast: eight passes over the node.
template <bool WARP>
__device__ u64 select_key(const PrimRef* refs, u32 first, u32 n, u32 axis, u32 k, u32* hist, u32 t,
                          u32 threads) {
    u64 prefix = 0ull, mask = 0ull;
    for (int shift = 56; shift >= 0; shift -= 8) {
        for (u32 i = t; i < 256u; i += threads) hist[i] = 0u;
        if (WARP) __syncwarp(); else __syncthreads();
        for (u32 i = t; i < n; i += threads) {
            float4 lo, hi;
            load_ref(refs, first + i, lo, hi);
            const u64 key = median_key(lo, hi, axis);
            if ((key & mask) == prefix) atomicAdd(&hist[(u32)(key >> shift) & 255u], 1u);
        }
        if (WARP) __syncwarp(); else __syncthreads();
        if (t == 0) {
            u32 below = 0u, digit = 0u;
            for (; digit < 255u && below + hist[digit] <= k; ++digit) below += hist[digit];
            hist[256] = digit;
            hist[257] = k - below;
        }
        if (WARP) __syncwarp(); else __syncthreads();
        prefix |= (u64)hist[256] << shift;
        mask |= 255ull << shift;
        k = hist[257];
        if (WARP) __syncwarp(); else __syncthreads();
    }
    return prefix;
}

// Whether a primitive goes to the left child under `plan`.
__device__ __forceinline__ bool goes_left(const SahPlan& plan, float4 lo, float4 hi) {
    if (plan.kind == SAH_PLAN_MEDIAN) {
        const u64 pivot = ((u64)plan.pivot_hi << 32) | plan.pivot_lo;
        return median_key(lo, hi, plan.axis) < pivot;
    }
    BinAxis m;
    m.origin = plan.origin, m.scale = plan.scale, m.top = plan.top;
    return bin_of(m, __fadd_rn(lane3(lo, plan.axis), lane3(hi, plan.axis))) < plan.bin;
}

// ------------------------------------------------------------ sides

// Running boxes of both sides of a partition: 24 floats (box and
// split-point box of each side, min xyz then max xyz).
struct Sides {
    float v[24];
};

__device__ __forceinline__ void sides_clear(Sides& s) {
#pragma unroll
    for (u32 k = 0; k < 24; ++k) s.v[k] = (k % 6u) < 3u ? CAUSTIC_INF : -CAUSTIC_INF;
}

// Adds a primitive to one side: its box at v[BOX ..], its split point at
// v[CENTERS ..] (constant offsets keep the array in registers).
template <u32 BOX, u32 CENTERS>
__device__ __forceinline__ void sides_grow(Sides& s, float4 lo, float4 hi) {
    const float c[3] = {__fadd_rn(lo.x, hi.x), __fadd_rn(lo.y, hi.y), __fadd_rn(lo.z, hi.z)};
    const float l[3] = {lo.x, lo.y, lo.z}, h[3] = {hi.x, hi.y, hi.z};
#pragma unroll
    for (u32 k = 0; k < 3; ++k) {
        s.v[BOX + k] = fminf(s.v[BOX + k], l[k]);
        s.v[BOX + 3 + k] = fmaxf(s.v[BOX + 3 + k], h[k]);
        s.v[CENTERS + k] = fminf(s.v[CENTERS + k], c[k]);
        s.v[CENTERS + 3 + k] = fmaxf(s.v[CENTERS + 3 + k], c[k]);
    }
}

__device__ __forceinline__ void sides_add(Sides& s, bool left, float4 lo, float4 hi) {
    if (left) sides_grow<0, 12>(s, lo, hi);
    else sides_grow<6, 18>(s, lo, hi);
}

__device__ __forceinline__ float sides_join(u32 k, float a, float b) {
    return (k % 6u) < 3u ? fminf(a, b) : fmaxf(a, b);
}

// Joins the lanes' sides; lane 0 ends with the warp's.
__device__ __forceinline__ void sides_warp_reduce(Sides& s) {
#pragma unroll
    for (u32 k = 0; k < 24; ++k)
        for (u32 d = 16; d > 0; d >>= 1)
            s.v[k] = sides_join(k, s.v[k], __shfl_xor_sync(CAUSTIC_FULL_MASK, s.v[k], d));
}

__device__ __forceinline__ void sides_store(const Sides& s, SplitSides* out) {
    float* words = (float*)out;
#pragma unroll
    for (u32 k = 0; k < 24; ++k) words[k] = s.v[k];
}

__device__ __forceinline__ BvhNode make_node(const float* lo, const float* hi, u32 first, u32 count) {
    BvhNode n;
    n.min[0] = lo[0], n.min[1] = lo[1], n.min[2] = lo[2];
    n.max[0] = hi[0], n.max[1] = hi[1], n.max[2] = hi[2];
    n.first = first;
    n.count = count;
    return n;
}
