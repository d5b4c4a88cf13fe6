// points.cuh: what every neighbour-search kernel shares (points.cu,
// point_kdtree.cu): the crate's `dist2` bit for bit, the (dist2, index)
// tie rule as one 64-bit key, the bounded max-heap of kNN queries, and the
// two passes of exact radius queries.
//
// Every search is a walk that offers candidates to a visitor with
// `bound()` (the squared radius still searched; a walk may skip what lies
// strictly farther) and `offer(d2, index)`:
//   - Best: the k nearest within a radius (kNN);
//   - RadiusCount: counts the points within the radius (radius pass 1);
//   - RadiusFill: writes their keys into the query's slice of the compacted
//     list (radius pass 2), which radius_finish then sorts and splits.
#pragma once
#include "common.cuh"

// Largest k a query kernel keeps (the heap lives in local memory).
#define POINTS_MAX_K 128u
#define NO_NEIGHBOUR 0xffffffffu

__device__ __forceinline__ bool finite3(float x, float y, float z) {
    return isfinite(x) && isfinite(y) && isfinite(z);
}

// The crate's `dist2`, bit for bit: _rn intrinsics in the CPU's order,
// ((dx*dx + dy*dy) + dz*dz), so no FMA contraction changes a bit.
__device__ __forceinline__ float dist2(float3 a, float3 b) {
    const float dx = __fsub_rn(a.x, b.x);
    const float dy = __fsub_rn(a.y, b.y);
    const float dz = __fsub_rn(a.z, b.z);
    return __fadd_rn(__fadd_rn(__fmul_rn(dx, dx), __fmul_rn(dy, dy)), __fmul_rn(dz, dz));
}

__device__ __forceinline__ float3 load_point(const float* p, u64 i) {
    return make_float3(p[3 * i], p[3 * i + 1], p[3 * i + 2]);
}

// The (dist2, index) order as one integer: squared distances are never
// negative, and non-negative float bits order like the floats.
__device__ __forceinline__ u64 neighbour_key(float d2, u32 index) {
    return ((u64)__float_as_uint(d2) << 32) | index;
}

__device__ __forceinline__ bool query_ok(float3 q, float r) {
    return finite3(q.x, q.y, q.z) && r >= 0.0f;  // NaN radius fails
}

// A max-heap of at most k keys; heap[0] is the worst kept candidate.
struct Best {
    u64 heap[POINTS_MAX_K];
    u32 k;
    u32 size;
    float r2;
    u64 limit;  // candidates need key < limit

    __device__ __forceinline__ void init(u32 k_, float max_d2) {
        k = k_;
        size = 0;
        r2 = max_d2;
        // Keys of points within the radius: dist2 <= r2, any index; the
        // strictly-below test admits dist2 == r2 with any index.
        limit = (((u64)__float_as_uint(max_d2) << 32) | 0xffffffffull) + 1;
    }

    // Squared distance beyond which nothing can enter: the radius until
    // the heap is full, then its worst key's distance.
    __device__ __forceinline__ float bound() const {
        return size < k ? r2 : __uint_as_float((u32)(heap[0] >> 32));
    }

    __device__ __forceinline__ void offer(float d2, u32 index) {
        const u64 key = neighbour_key(d2, index);
        if (key >= limit) return;
        if (size < k) {
            u32 i = size++;
            while (i > 0) {
                const u32 parent = (i - 1) / 2;
                if (heap[parent] >= key) break;
                heap[i] = heap[parent];
                i = parent;
            }
            heap[i] = key;
            if (size == k) limit = heap[0];
        } else {
            sift_down(key, size);
            limit = heap[0];
        }
    }

    // Puts `key` at the root of a heap of `n` and restores the order.
    __device__ __forceinline__ void sift_down(u64 key, u32 n) {
        u32 i = 0;
        for (;;) {
            u32 child = 2 * i + 1;
            if (child >= n) break;
            if (child + 1 < n && heap[child + 1] > heap[child]) ++child;
            if (heap[child] <= key) break;
            heap[i] = heap[child];
            i = child;
        }
        heap[i] = key;
    }

    // Writes the kept candidates in ascending key order (heap sort) and
    // pads the row with NO_NEIGHBOUR.
    __device__ __forceinline__ void write(u64 q, u32 row, u32* index, float* d2, u32* count) {
        const u32 found = size;
        for (u32 n = size; n > 1; --n) {
            const u64 top = heap[0];
            const u64 last = heap[n - 1];
            sift_down(last, n - 1);
            heap[n - 1] = top;
        }
        for (u32 j = 0; j < row; ++j) {
            const bool kept = j < found;
            index[q * row + j] = kept ? (u32)heap[j] : NO_NEIGHBOUR;
            d2[q * row + j] = kept ? __uint_as_float((u32)(heap[j] >> 32)) : CAUSTIC_INF;
        }
        count[q] = found;
    }
};

// ------------------------------------------------------------ radius query
//
// Exact and unbounded in two passes over the same walk: pass 1 counts each
// query's points (counts[q], and their sum into a 64-bit total so that the
// host sees an overflow of 32-bit offsets); the host scans the counts into
// offsets; pass 2 writes each query's keys into keys[offsets[q]..] and
// sorts that slice (a heap sort in place: the slice is the thread's own),
// then splits the keys into the index and dist2 lists.

struct RadiusCount {
    float r2;
    u32 n;
    __device__ __forceinline__ float bound() const { return r2; }
    __device__ __forceinline__ void offer(float d2, u32) { n += d2 <= r2; }
};

struct RadiusFill {
    float r2;
    u64* keys;
    u32 n;
    u32 cap;  // pass 1's count: the walk is the same, so it is exact
    __device__ __forceinline__ float bound() const { return r2; }
    __device__ __forceinline__ void offer(float d2, u32 index) {
        if (d2 <= r2 && n < cap) keys[n++] = neighbour_key(d2, index);
    }
};

__device__ __forceinline__ void key_sift_down(u64* a, u32 i, u32 n) {
    const u64 key = a[i];
    for (;;) {
        u32 child = 2 * i + 1;
        if (child >= n) break;
        if (child + 1 < n && a[child + 1] > a[child]) ++child;
        if (a[child] <= key) break;
        a[i] = a[child];
        i = child;
    }
    a[i] = key;
}

// Ascending heap sort of a[0..n).
__device__ __forceinline__ void sort_keys(u64* a, u32 n) {
    if (n < 2) return;
    for (u32 i = n / 2; i-- > 0;) key_sift_down(a, i, n);
    for (u32 end = n - 1; end > 0; --end) {
        const u64 top = a[0];
        a[0] = a[end];
        a[end] = top;
        key_sift_down(a, 0, end);
    }
}

// One query of a radius kernel: `walk(visitor)` offers the candidates.
// Pass 1 when `offsets` is null, else pass 2.
template <class Walk>
__device__ __forceinline__ void radius_query(u64 q, bool ok, float r, const u32* offsets,
                                             u32* counts, u64* total, u64* keys, u32* out_index,
                                             float* out_d2, Walk walk) {
    const float r2 = __fmul_rn(r, r);
    if (offsets == nullptr) {
        RadiusCount c{r2, 0};
        if (ok) walk(c);
        counts[q] = c.n;
        if (c.n) atomicAdd(total, (u64)c.n);
        return;
    }
    const u32 first = offsets[q];
    const u32 cap = offsets[q + 1] - first;
    if (cap == 0) return;
    RadiusFill f{r2, keys + first, 0, cap};
    walk(f);
    sort_keys(keys + first, f.n);
    for (u32 j = 0; j < f.n; ++j) {
        const u64 key = keys[first + j];
        out_index[first + j] = (u32)key;
        out_d2[first + j] = __uint_as_float((u32)(key >> 32));
    }
}
