// points.cuh: what every neighbour-search kernel shares (points.cu, and
// photon.cu / sppm.cu, which query photon maps themselves): the crate's
// `dist2` bit for bit, the (dist2, index) tie rule as one 64-bit key, the
// bounded max-heap of kNN queries, the two passes of exact radius queries,
// the hash grid's cell map and hashes with its 27-cell walk, and the
// shell search that is exact for cells of any size.
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

    // Restores the heap order over keys kept in any order (as
    // warp_tile_knn leaves them), for write().
    __device__ __forceinline__ void heapify();

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

// ------------------------------------------------------------ warp kNN
//
// One warp per query, the kNN without a per-thread heap: the warp streams
// the query's candidates 32 at a time (one coalesced 16-byte load per lane),
// and the lanes whose key passes the warp's limit append it to the warp's
// list in shared memory (ballot and prefix count: the same slots whatever
// the timing). When the list would overflow it is sorted (bitonic, by the
// warp) and cut to the k smallest, whose largest becomes the limit. At the
// end one more sort leaves the k nearest in ascending (dist2, index) order:
// the same answer as Best, which keeps the same k smallest keys.

// Keys a warp's list holds: a power of two, at least POINTS_MAX_K + 32 (a
// cut list of k keys takes one more chunk of 32).
#define WARP_KNN_CAP 256u

// Sorts a[0..n) ascending, n <= WARP_KNN_CAP, by the whole warp (Batcher's
// bitonic network over the next power of two, padded with the largest key).
__device__ __forceinline__ void warp_sort_keys(u64* a, u32 n) {
    const u32 lane = lane_id();
    __syncwarp();
    if (n < 2) return;
    u32 m = 2;
    while (m < n) m <<= 1;
    for (u32 i = n + lane; i < m; i += 32) a[i] = ~0ull;
    __syncwarp();
    for (u32 size = 2; size <= m; size <<= 1) {
        for (u32 stride = size >> 1; stride > 0; stride >>= 1) {
            for (u32 t = lane; t < m / 2; t += 32) {
                const u32 i = 2 * t - (t & (stride - 1));
                const u32 j = i + stride;
                const u64 x = a[i], y = a[j];
                if ((x > y) == ((i & size) == 0)) {
                    a[i] = y;
                    a[j] = x;
                }
            }
            __syncwarp();
        }
    }
}

// The k nearest of one query, kept by a warp (every member warp-uniform).
struct WarpBest {
    u64* list;  // the warp's WARP_KNN_CAP keys in shared memory
    u32 k;
    u32 n;        // keys in the list
    bool sorted;  // list[0..n) ascending and at most k long
    u64 limit;  // candidates need key < limit

    __device__ __forceinline__ void init(u64* list_, u32 k_, float max_d2) {
        list = list_;
        k = k_;
        n = 0;
        sorted = true;
        // As Best::init: any key of a point within the radius passes.
        limit = (((u64)__float_as_uint(max_d2) << 32) | 0xffffffffull) + 1;
    }

    // Each lane offers `key` where `valid`; true when the list was cut
    // first (the limit may have dropped).
    __device__ __forceinline__ bool offer(bool valid, u64 key) {
        bool take = valid && key < limit;
        u32 ballot = __ballot_sync(CAUSTIC_FULL_MASK, take);
        const bool cuts = n + __popc(ballot) > WARP_KNN_CAP;
        if (cuts) {
            cut();
            take = take && key < limit;
            ballot = __ballot_sync(CAUSTIC_FULL_MASK, take);
        }
        if (take) list[n + __popc(ballot & lanemask_lt())] = key;
        if (ballot) sorted = false;
        n += __popc(ballot);
        return cuts;
    }

    // Squared distances above this cannot enter the list.
    __device__ __forceinline__ float bound_d2() const { return __uint_as_float((u32)(limit >> 32)); }

    // Sorts the list and keeps its k smallest; a full list's largest key
    // becomes the limit.
    __device__ __forceinline__ void cut() {
        if (!sorted) warp_sort_keys(list, n);
        __syncwarp();
        sorted = true;
        if (n > k) n = k;
        if (n == k && k > 0) limit = list[k - 1];
    }

    // Writes the kept keys (after cut()) as Best::write does.
    __device__ __forceinline__ void write(u64 q, u32 row, u32* index, float* d2, u32* count) {
        for (u32 j = lane_id(); j < row; j += 32) {
            const bool kept = j < n;
            const u64 key = kept ? list[j] : 0ull;
            index[q * row + j] = kept ? (u32)key : NO_NEIGHBOUR;
            d2[q * row + j] = kept ? __uint_as_float((u32)(key >> 32)) : CAUSTIC_INF;
        }
        if (lane_id() == 0) count[q] = n;
        __syncwarp();  // the list serves the warp's next query
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

__device__ __forceinline__ void Best::heapify() {
    for (u32 i = size / 2; i-- > 0;) key_sift_down(heap, i, size);
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

// ------------------------------------------------------------ hash grid

// The grid, as the host computed it from the bounds.
struct Grid {
    float3 origin;
    float inv_cell;
    int dims[3];
    u32 table_bits;  // 0: linear hash
};

__device__ __forceinline__ Grid make_grid(float ox, float oy, float oz, float inv_cell, u32 dx,
                                          u32 dy, u32 dz, u32 table_bits) {
    Grid g;
    g.origin = make_float3(ox, oy, oz);
    g.inv_cell = inv_cell;
    g.dims[0] = (int)dx;
    g.dims[1] = (int)dy;
    g.dims[2] = (int)dz;
    g.table_bits = table_bits;
    return g;
}

__device__ __forceinline__ int clampi(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

__device__ __forceinline__ void cell_of(const Grid& g, float3 p, int c[3]) {
    const float u[3] = {__fmul_rn(__fsub_rn(p.x, g.origin.x), g.inv_cell),
                        __fmul_rn(__fsub_rn(p.y, g.origin.y), g.inv_cell),
                        __fmul_rn(__fsub_rn(p.z, g.origin.z), g.inv_cell)};
    for (int a = 0; a < 3; ++a) {
        // Clamp in float first: a far query must not overflow the int.
        const float f = fminf(fmaxf(floorf(u[a]), -1.0f), (float)g.dims[a]);
        c[a] = clampi((int)f, 0, g.dims[a] - 1);
    }
}

__device__ __forceinline__ u32 bucket_of(const Grid& g, const int c[3]) {
    if (g.table_bits == 0) {
        return (u32)((c[2] * g.dims[1] + c[1]) * g.dims[0] + c[0]);
    }
    const u32 h = ((u32)c[0] * 73856093u) ^ ((u32)c[1] * 19349663u) ^ ((u32)c[2] * 83492791u);
    return h & ((1u << g.table_bits) - 1u);
}


// Calls visit(bucket) for every bucket of the 3x3x3 cells around p's cell,
// centre first (Fleisz's order); a bucket two cells share under the
// Teschner hash is visited once. Exact for radii up to the cell edge (the
// host checks).
template <class VisitBucket>
__device__ __forceinline__ void grid_for_each_bucket(const Grid& g, float3 p, VisitBucket visit) {
    int c[3];
    cell_of(g, p, c);
    u32 visited[27];
    u32 n_visited = 0;
    for (int o = 0; o < 27; ++o) {
        // Offset 0 is the centre; then the other 26 in a fixed order.
        const int code = o == 0 ? 13 : (o <= 13 ? o - 1 : o);
        const int cx = c[0] + code % 3 - 1;
        const int cy = c[1] + (code / 3) % 3 - 1;
        const int cz = c[2] + code / 9 - 1;
        if (cx < 0 || cy < 0 || cz < 0 || cx >= g.dims[0] || cy >= g.dims[1] || cz >= g.dims[2])
            continue;
        const int cell[3] = {cx, cy, cz};
        const u32 b = bucket_of(g, cell);
        bool seen = false;
        for (u32 v = 0; v < n_visited; ++v) seen |= visited[v] == b;
        if (seen) continue;
        visited[n_visited++] = b;
        visit(b);
    }
}

// Calls visit(sorted point, input index) for every point in the buckets of
// grid_for_each_bucket.
template <class Visit>
__device__ __forceinline__ void grid_for_each_candidate(const Grid& g, const u32* start,
                                                        const u32* end, const float4* sorted,
                                                        float3 p, Visit visit) {
    grid_for_each_bucket(g, p, [&](u32 b) {
        const u32 e = end[b];
        for (u32 j = start[b]; j < e; ++j) {
            const float4 s = sorted[j];
            visit(make_float3(s.x, s.y, s.z), __float_as_uint(s.w));
        }
    });
}

// How many points grid_for_each_candidate would visit.
__device__ __forceinline__ u32 grid_candidate_count(const Grid& g, const u32* start,
                                                    const u32* end, float3 p) {
    u32 count = 0;
    grid_for_each_bucket(g, p, [&](u32 b) { count += end[b] - start[b]; });
    return count;
}

// A lower bound of the squared distance from p to any point whose cell
// (cell_of) is `cell`: the gap to the cell's box per axis, less a margin of
// 1e-3 cells for the rounding of the cell map.
__device__ __forceinline__ float cell_near2(const Grid& g, float3 p, const int cell[3]) {
    const float size = 1.0f / g.inv_cell;
    const float q[3] = {p.x, p.y, p.z};
    const float origin[3] = {g.origin.x, g.origin.y, g.origin.z};
    float near2 = 0.0f;
    for (int a = 0; a < 3; ++a) {
        const float lo = origin[a] + (float)cell[a] * size;
        const float gap = fmaxf(fmaxf(lo - q[a], q[a] - (lo + size)) - 1e-3f * size, 0.0f);
        near2 += gap * gap;
    }
    return near2;
}

// The cells of grid_for_each_bucket for a warp, one per lane, nearest
// first: each lane gets its cell's bucket run first..first + len of the
// sorted points and near2, a lower bound of the squared distance from p to
// any point the cell can hold (less a margin of 1e-3 cells per axis for
// the rounding of the cell map; 0 under the Teschner hash, whose buckets
// hold other cells' points too). Lanes without a cell (past 27, outside
// the grid, or a bucket a lower cell has already) get len 0, near2 +inf.
__device__ __forceinline__ void warp_grid_bucket(const Grid& g, const u32* start, const u32* end,
                                                 float3 p, u32& first, u32& len, float& near2) {
    int c[3];
    cell_of(g, p, c);
    const u32 lane = lane_id();
    const int o = (int)lane;
    const int code = o == 0 ? 13 : (o <= 13 ? o - 1 : o);
    const int cell[3] = {c[0] + code % 3 - 1, c[1] + (code / 3) % 3 - 1, c[2] + code / 9 - 1};
    bool in = o < 27;
    for (int a = 0; a < 3; ++a) in = in && cell[a] >= 0 && cell[a] < g.dims[a];
    u32 b = 0xffffffffu;
    if (in) b = bucket_of(g, cell);
    near2 = 0.0f;
    if (g.table_bits != 0) {
        for (int l = 0; l < 27; ++l) {
            const u32 other = __shfl_sync(CAUSTIC_FULL_MASK, b, l);
            if (l < o && other == b) in = false;
        }
    } else {
        near2 = cell_near2(g, p, cell);
    }
    if (!in) near2 = CAUSTIC_INF;
    first = in ? start[b] : 0u;
    len = in ? end[b] - first : 0u;
    // Nearest first (a bitonic sort of (near2, lane) across the warp): the
    // list's limit drops sooner, and farther cells are skipped.
    u64 key = ((u64)__float_as_uint(near2) << 32) | lane;
    for (u32 size = 2; size <= 32; size <<= 1) {
        for (u32 stride = size >> 1; stride > 0; stride >>= 1) {
            const u64 other = __shfl_xor_sync(CAUSTIC_FULL_MASK, key, stride);
            const bool keep_min = ((lane & stride) == 0) == ((lane & size) == 0);
            key = keep_min ? (other < key ? other : key) : (other > key ? other : key);
        }
    }
    const u32 from = (u32)key & 31u;
    first = __shfl_sync(CAUSTIC_FULL_MASK, first, from);
    len = __shfl_sync(CAUSTIC_FULL_MASK, len, from);
    near2 = __uint_as_float((u32)(key >> 32));
}

// Element v of a warp's stream of runs (lane i's run: `first` on, its
// length ending at the inclusive prefix `incl`, starting at `excl`): the
// lane whose run holds it (the first whose run ends past v) and its index
// in that run's array.
__device__ __forceinline__ void stream_element(u32 incl, u32 excl, u32 first, u32 v, u32* owner,
                                               u32* index) {
    u32 o = 0;
    for (u32 step = 16; step > 0; step >>= 1) {
        if (__shfl_sync(CAUSTIC_FULL_MASK, incl, o + step - 1) <= v) o += step;
    }
    *owner = o;
    *index = __shfl_sync(CAUSTIC_FULL_MASK, first, o) + v - __shfl_sync(CAUSTIC_FULL_MASK, excl, o);
}

// Offers `best` every point of grid_for_each_candidate that can enter it,
// the warp together: the cells' runs, nearest cell first, as one stream
// 32 points at a time (lane i loads the i-th, one 16-byte load). Cells
// whose near2 exceeds the list's bound are skipped; after a cut lowers it,
// the rest of the stream is culled again.
__device__ __forceinline__ void warp_grid_candidates(const Grid& g, const u32* start,
                                                     const u32* end, const float4* sorted,
                                                     float3 p, WarpBest& best) {
    u32 first, len;
    float near2;
    warp_grid_bucket(g, start, end, p, first, len, near2);
    const u32 lane = lane_id();
    for (;;) {
        if (near2 > best.bound_d2()) len = 0;
        const u32 incl = warp_inclusive_sum(len);
        const u32 total = __shfl_sync(CAUSTIC_FULL_MASK, incl, 31);
        const u32 excl = incl - len;
        bool cut = false;
        u32 base = 0;
        for (; base < total && !cut; base += 32) {
            const u32 v = base + lane;
            u32 owner, j;
            stream_element(incl, excl, first, v, &owner, &j);
            u64 key = 0;
            if (v < total) {
                const float4 s = sorted[j];
                key = neighbour_key(dist2(p, make_float3(s.x, s.y, s.z)), __float_as_uint(s.w));
            }
            cut = best.offer(v < total, key);
        }
        if (!cut) return;
        // Elements before `base` are done: the runs continue past them.
        const u32 done = base > excl ? min(base - excl, len) : 0u;
        first += done;
        len -= done;
    }
}

// ------------------------------------------------------------- ring search

// How far from p every point is known to have been offered once the cells
// lo..hi (inclusive, per axis) were visited: the distance to the nearest
// face of that block that has grid cells beyond it (a face at the grid's
// edge has no points beyond), less a rounding margin of 1e-3 cells.
__device__ __forceinline__ float covered_radius(const Grid& g, float3 p, const int lo[3],
                                                const int hi[3]) {
    const float cell = 1.0f / g.inv_cell;
    const float q[3] = {p.x, p.y, p.z};
    const float o[3] = {g.origin.x, g.origin.y, g.origin.z};
    float covered = CAUSTIC_INF;
    for (int a = 0; a < 3; ++a) {
        if (lo[a] > 0) covered = fminf(covered, q[a] - (o[a] + (float)lo[a] * cell));
        if (hi[a] < g.dims[a] - 1) covered = fminf(covered, (o[a] + (float)(hi[a] + 1) * cell) - q[a]);
    }
    return covered - 1e-3f * cell;
}

// Offers best every point of grid cell `cell`. Under the Teschner hash a
// bucket holds the points of several cells: only those whose own cell is
// `cell` are offered, so no point is offered twice however many cells are
// visited.
__device__ __forceinline__ void offer_cell(const Grid& g, const u32* start, const u32* end,
                                           const float4* sorted, float3 p, const int cell[3],
                                           Best& best) {
    const u32 b = bucket_of(g, cell);
    const u32 e = end[b];
    for (u32 j = start[b]; j < e; ++j) {
        const float4 s = sorted[j];
        const float3 q = make_float3(s.x, s.y, s.z);
        if (g.table_bits != 0) {
            int c[3];
            cell_of(g, q, c);
            if (c[0] != cell[0] || c[1] != cell[1] || c[2] != cell[2]) continue;
        }
        best.offer(dist2(p, q), __float_as_uint(s.w));
    }
}

// The k nearest within max_radius for cells of any size: cubes of cells of
// growing Chebyshev radius R around p's cell, one shell at a time. After
// shell R every point within covered_radius of p has been offered, so the
// search ends once the k-th kept distance is below it (nothing unvisited
// can enter the list, ties included) or it reaches max_radius: then best
// holds the exact answer and the function returns true. It gives up after
// shell `max_shells` (false; best then holds a partial answer), so a
// caller can fall back to a coarser grid where the points are too sparse
// for these cells. For cells about the k-th neighbour's distance most
// queries end after the 27 cells of shell 1 however large max_radius is.
__device__ bool grid_knn_rings(const Grid& g, const u32* start, const u32* end,
                               const float4* sorted, float3 p, float max_radius, int max_shells,
                               Best& best) {
    int c[3];
    cell_of(g, p, c);
    const int most = max(max(g.dims[0], g.dims[1]), g.dims[2]);
    for (int r = 0; r <= min(most, max_shells); ++r) {
        int lo[3], hi[3];
        for (int a = 0; a < 3; ++a) {
            lo[a] = max(c[a] - r, 0);
            hi[a] = min(c[a] + r, g.dims[a] - 1);
        }
        // The shell's cells on one face of its cube first, then those on
        // an edge, then the corners (nearer cells first, so the list's
        // bound drops sooner); a cell whose nearest point lies beyond the
        // bound is skipped: none of its points could enter.
        for (int extreme = 1; extreme <= 3; ++extreme) {
            for (int z = lo[2]; z <= hi[2]; ++z) {
                for (int y = lo[1]; y <= hi[1]; ++y) {
                    const bool face = abs(z - c[2]) == r || abs(y - c[1]) == r;
                    // Inside the shell's faces only x = c - r and x = c + r are new.
                    const int step = face ? 1 : max(2 * r, 1);
                    for (int x = c[0] - r; x <= c[0] + r; x += step) {
                        if (x < 0 || x >= g.dims[0]) continue;
                        const int on = (abs(x - c[0]) == r) + (abs(y - c[1]) == r) + (abs(z - c[2]) == r);
                        if (on != extreme) continue;
                        const int cell[3] = {x, y, z};
                        if (cell_near2(g, p, cell) > best.bound()) continue;
                        offer_cell(g, start, end, sorted, p, cell, best);
                    }
                }
            }
        }
        const float covered = covered_radius(g, p, lo, hi);
        if (covered >= max_radius) return true;
        if (best.size == best.k) {
            const float kth = __uint_as_float((u32)(best.heap[0] >> 32));
            if (covered > 0.0f && kth < __fmul_rn(covered, covered)) return true;
        }
    }
    return false;
}

// ------------------------------------------------------------- tiled kNN
//
// Tiled gathering (Mara, McGuire, Nowrouzezahrai and Luebke 2013, "Toward
// practical real-time photon mapping", §4: tiles of neighbouring pixels
// share one photon list): a warp answers 32 neighbouring queries (Morton
// order) at once. It loads the points of the block of cells around the
// tile into shared memory once, TILE_CAP at a time, and every lane reads
// them all as broadcasts, with no per-lane cell walk. Each lane then
// selects its k nearest without a heap: pass 1 counts its in-range points
// in TILE_BINS bins of dist2 (a histogram in shared memory); the bin that
// holds the k-th key follows; pass 2 keeps the keys of the lower bins (all
// selected) and sets aside those of the k-th's bin, of which the k - below
// smallest are chosen. The same k smallest (dist2, index) keys as Best's.

// Points a warp holds in shared memory at a time. A block of at most
// TILE_CAP points is streamed from the grid once: pass 2 reads it again
// from shared memory (warp_tile_knn's `chunks == 1`). The photon
// estimates' first fine blocks hold about 380 points (the 1080p
// cornell-caustics frame, 10^6 photons, k = 64: 26.9 M points in 70 798
// blocks of the global map, device counters, 2026-11-29), so at 256 many
// were streamed twice; 512 (8 KB a warp, 40 KB a block of 4 warps, still
// 4 blocks an SM) streams most once. The estimate launch on the H200:
// 6.66-6.70 ms against 6.87-6.91 at 256 (384: 6.80).
#define TILE_CAP 512u
// Bins of a lane's histogram (two 16-bit counts a word, so each lane's
// words sit in its own bank).
#define TILE_BINS 32u
#define TILE_HIST_WORDS (TILE_BINS / 2u * 32u)
// Keys of the k-th's bin a lane can set aside; more: the caller searches.
#define TILE_SPILL 64u
// Largest block (cells) and point count a tile takes on; beyond, the
// caller searches per query.
#define TILE_MAX_CELLS 512u
#define TILE_MAX_POINTS 8192u

// The block of cells a warp's tile searches: the cells of its active
// queries' points and `margin` more on every side, clamped to the grid.
// False (for the whole warp) when no lane is active.
__device__ __forceinline__ bool warp_tile_block(const Grid& g, float3 p, bool active, int margin,
                                                int lo[3], int hi[3], u32& cells) {
    int c[3];
    cell_of(g, p, c);
    for (int a = 0; a < 3; ++a) {
        lo[a] = active ? c[a] : 0x7fffffff;
        hi[a] = active ? c[a] : -1;
        for (int d = 16; d > 0; d >>= 1) {
            lo[a] = min(lo[a], __shfl_xor_sync(CAUSTIC_FULL_MASK, lo[a], d));
            hi[a] = max(hi[a], __shfl_xor_sync(CAUSTIC_FULL_MASK, hi[a], d));
        }
    }
    if (hi[0] < 0) return false;
    u64 volume = 1;
    for (int a = 0; a < 3; ++a) {
        lo[a] = max(lo[a] - margin, 0);
        hi[a] = min(hi[a] + margin, g.dims[a] - 1);
        volume *= (u64)(hi[a] - lo[a] + 1);
    }
    cells = (u32)min(volume, (u64)0xffffffffu);
    return true;
}

// Cell number c of the block lo..hi, x fastest.
__device__ __forceinline__ void tile_cell(const int lo[3], const int hi[3], u32 c, int cell[3]) {
    const u32 wx = (u32)(hi[0] - lo[0] + 1), wy = (u32)(hi[1] - lo[1] + 1);
    cell[0] = lo[0] + (int)(c % wx);
    cell[1] = lo[1] + (int)((c / wx) % wy);
    cell[2] = lo[2] + (int)(c / (wx * wy));
}

// The sum of the block's bucket lengths (under the Teschner hash a bucket
// two cells share counts twice, and holds other cells' points: an upper
// bound of the points streamed), the same in every lane.
__device__ __forceinline__ u32 warp_tile_count(const Grid& g, const u32* start, const u32* end,
                                               const int lo[3], const int hi[3], u32 cells) {
    u64 n = 0;
    for (u32 c = lane_id(); c < cells; c += 32) {
        int cell[3];
        tile_cell(lo, hi, c, cell);
        const u32 b = bucket_of(g, cell);
        n += end[b] - start[b];
    }
    for (int d = 16; d > 0; d >>= 1) n += __shfl_xor_sync(CAUSTIC_FULL_MASK, n, d);
    return (u32)min(n, (u64)0xffffffffu);
}

// Streams the points of the block's cells (each point once: under the
// Teschner hash only a bucket's points whose own cell is the cell visited)
// into `buf`, a warp's TILE_CAP points in shared memory: the warp calls
// chunk(n) whenever it holds n points (at most TILE_CAP) and once at the
// end. Cells are taken 32 at a time (lane i loads cell i's
// bucket bounds), their runs as one stream, 32 points a step (one 16-byte
// load a lane). Returns the number of chunk calls; `last` is the last n
// (buf still holds those points).
template <class Chunk>
__device__ __forceinline__ u32 warp_tile_stream(const Grid& g, const u32* start, const u32* end,
                                                const float4* sorted, const int lo[3],
                                                const int hi[3], u32 cells, float4* buf,
                                                u32& last, Chunk chunk) {
    const u32 lane = lane_id();
    u32 fill = 0, chunks = 0;
    for (u32 group = 0; group < cells; group += 32) {
        const u32 c = group + lane;
        int cell[3] = {0, 0, 0};
        u32 first = 0, len = 0;
        if (c < cells) {
            tile_cell(lo, hi, c, cell);
            const u32 b = bucket_of(g, cell);
            first = start[b];
            len = end[b] - first;
        }
        const u32 incl = warp_inclusive_sum(len);
        const u32 total = __shfl_sync(CAUSTIC_FULL_MASK, incl, 31);
        const u32 excl = incl - len;
        for (u32 base = 0; base < total; base += 32) {
            if (fill + 32 > TILE_CAP) {
                __syncwarp();
                chunk(fill);
                __syncwarp();
                ++chunks;
                fill = 0;
            }
            const u32 v = base + lane;
            u32 owner, j;
            stream_element(incl, excl, first, v, &owner, &j);
            int own[3];
            for (int a = 0; a < 3; ++a) own[a] = __shfl_sync(CAUSTIC_FULL_MASK, cell[a], owner);
            bool keep = v < total;
            float4 s = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (keep) {
                s = sorted[j];
                if (g.table_bits != 0) {
                    int at[3];
                    cell_of(g, make_float3(s.x, s.y, s.z), at);
                    keep = at[0] == own[0] && at[1] == own[1] && at[2] == own[2];
                }
            }
            const u32 ballot = __ballot_sync(CAUSTIC_FULL_MASK, keep);
            if (keep) buf[fill + __popc(ballot & lanemask_lt())] = s;
            fill += __popc(ballot);
        }
    }
    __syncwarp();
    chunk(fill);
    __syncwarp();
    last = fill;
    return chunks + 1;
}

// The histogram bin of a squared distance (bins of 1 / scale): the
// integer part of d2 * scale, at most TILE_BINS - 1. Taken with the float
// adder rather than a conversion (F2I runs at a quarter of the FP32 rate
// on Hopper, once per point and pass): 2^23 + f rounded down is 2^23 plus
// the integer part of f for 0 <= f < 2^23, so its low mantissa bits are
// the bin, the same one as (u32)f (fminf also sends +inf and NaN to the
// last bin, as the comparison did). Measured on the H200 (2026-11-29):
// the estimate launch 7.22 against 7.30 ms alone, 6.99 with the
// collection's list length in a register. Returned as those bits,
// TILE_BIN_BASE + bin: the bin's low bits are theirs, and bins compare as
// the bits do, so the passes never subtract the base.
#define TILE_BIN_BASE 0x4b000000u
__device__ __forceinline__ u32 tile_bin_bits(float d2, float scale) {
    const float f = __fmul_rn(d2, scale);
    return __float_as_uint(__fadd_rd(fminf(f, (float)(TILE_BINS - 1)), 8388608.0f));
}

// Each lane's k nearest of its query p within max_radius among the points
// of the block lo..hi (warp_tile_block), into `best`, which the caller
// initialised empty for k and max_radius. True where the answer is exact;
// false where the caller must search itself (best is then to be
// initialised again): an inactive lane; with `whole` false, a lane whose
// k-th is not certain (the block covers every point within its
// covered_radius only); a k-th's bin of more than TILE_SPILL keys. With
// `whole`, the block holds every point within max_radius of every query
// (cells of at least the radius and a margin of one: each query's 27
// cells). `hist`: the warp's TILE_HIST_WORDS words of shared memory.
// `points`: warp_tile_count's bound of the points the block streams, at
// most 65 535 (16-bit counts); below k, pass 1 is skipped.
// Leaves best's k-th key (its largest) at heap[0] when full, the others in
// any order: what density_of reads; heapify() before write().
__device__ __forceinline__ bool warp_tile_knn(const Grid& g, const u32* start, const u32* end,
                                              const float4* sorted, float3 p, bool active,
                                              float max_radius, bool whole, const int lo[3],
                                              const int hi[3], u32 cells, u32 points, float4* buf,
                                              u32* hist, Best& best) {
    const u32 lane = lane_id();
    const float r2 = __fmul_rn(max_radius, max_radius);
    // In range: d2 <= r2 where the block covers the radius, else d2 < cov2
    // (every such point is in the block).
    bool all = whole;
    float cov2 = r2;
    if (!whole) {
        const float cov = covered_radius(g, p, lo, hi);
        all = cov >= max_radius;
        cov2 = all ? r2 : (cov > 0.0f ? fminf(__fmul_rn(cov, cov), r2) : 0.0f);
    }
    // In range as one comparison, d2 <= lim, in both passes: d2 < cov2 is
    // d2 <= the float below cov2 (-1 when cov2 is 0: nothing in range).
    // With the bins' bits below, pass 1 took 26 instructions a point
    // instead of 32 and pass 2 25 without branches (SASS, sm_90).
    const float lim = all ? r2
                          : (cov2 > 0.0f ? __uint_as_float(__float_as_uint(cov2) - 1u) : -1.0f);
    // Bins linear in dist2 over the range (about equal counts for points
    // on a surface); any non-decreasing map of dist2 keeps the order.
    const float scale = cov2 > 0.0f ? (float)TILE_BINS / cov2 : 0.0f;
    const u32 k = best.k;
    // A block of fewer than k points (a sparse map) needs no pass 1: no
    // lane has a k-th, every lane takes all its points in range.
    const bool counted = points >= k;
    if (counted) {
        for (u32 w = 0; w < TILE_BINS / 2; ++w) hist[w * 32 + lane] = 0;
    }
    // Bin b's count is the 16-bit half b >> 4 of the lane's word b & 15;
    // from tile_bin_bits' u, whose low five bits are b.
    auto word = [&](u32 u) { return (u & 15u) * 32 + lane; };
    auto one = [&](u32 u, float d2) { return d2 <= lim ? 1u << (u & 16u) : 0u; };
    u32 last = 0;
    const u32 chunks = warp_tile_stream(g, start, end, sorted, lo, hi, cells, buf, last,
                                        [&](u32 n) {
        if (!active || !counted) return;
        u32 j = 0;
        // Two points a step: both counts' loads are in flight together
        // (the two bins may share a word).
        for (; j + 2 <= n; j += 2) {
            const float4 s0 = buf[j], s1 = buf[j + 1];
            const float d0 = dist2(p, make_float3(s0.x, s0.y, s0.z));
            const float d1 = dist2(p, make_float3(s1.x, s1.y, s1.z));
            const u32 u0 = tile_bin_bits(d0, scale), u1 = tile_bin_bits(d1, scale);
            const u32 w0 = word(u0), w1 = word(u1);
            const u32 i0 = one(u0, d0), i1 = one(u1, d1);
            const bool same = w0 == w1;
            const u32 h0 = hist[w0], h1 = hist[w1];
            hist[w0] = h0 + i0 + (same ? i1 : 0u);
            if (!same) hist[w1] = h1 + i1;
        }
        if (j < n) {
            const float4 s = buf[j];
            const float d2 = dist2(p, make_float3(s.x, s.y, s.z));
            const u32 u = tile_bin_bits(d2, scale);
            hist[word(u)] += one(u, d2);
        }
    });
    // The k-th key's bin, and how many of its keys are taken.
    u32 below = 0, kbin = TILE_BINS, need = 0, in_kbin = 0;
    for (u32 b = 0; b < (counted ? TILE_BINS : 0u); ++b) {
        const u32 n = (hist[(b & 15u) * 32 + lane] >> (16 * (b >> 4))) & 0xffffu;
        if (kbin == TILE_BINS) {
            if (below + n >= k) {
                kbin = b;
                need = k - below;
                in_kbin = n;
            } else {
                below += n;
            }
        }
    }
    // Fewer than k in range: the answer only where the block covers the radius.
    bool ok = active && (kbin < TILE_BINS ? in_kbin <= TILE_SPILL : all);
    const u32 kbits = TILE_BIN_BASE + kbin;
    u64 spill[TILE_SPILL];
    u32 spilled = 0;
    // The list's length in a register while pass 2 appends (best lives in
    // local memory: its length there was loaded and stored again for every
    // key taken, the key's store waiting on that load). No branches: each
    // key in range goes to the list (bins below the k-th's) or aside (the
    // k-th's bin) with one predicated store.
    u32 size = best.size;
    auto collect = [&](u32 n) {
        if (!ok) return;
        for (u32 j = 0; j < n; ++j) {
            const float4 s = buf[j];
            const float d2 = dist2(p, make_float3(s.x, s.y, s.z));
            const u32 u = tile_bin_bits(d2, scale);
            const bool in = d2 <= lim;
            const bool take = in && u < kbits;
            const bool aside = in && u == kbits;
            u64* slot = take ? best.heap + size : spill + spilled;
            if (take || aside) *slot = neighbour_key(d2, __float_as_uint(s.w));
            size += take;
            spilled += aside;
        }
    };
    if (chunks == 1) {
        collect(last);
    } else {
        warp_tile_stream(g, start, end, sorted, lo, hi, cells, buf, last, collect);
    }
    best.size = size;
    if (!ok) return false;
    // The `need` smallest of the k-th's bin, in ascending order. The
    // running minimum stays in registers: each key's load is independent
    // of the comparisons before it (spill[at], reloaded after each, put a
    // local-memory load on the chain of every step; about 5 % of the
    // launch's stall samples, ncu on the H200). The estimate launch
    // 6.50-6.56 against 6.61-6.70 ms (2026-11-29).
    for (u32 t = 0; t < need; ++t) {
        u32 at = t;
        u64 key = spill[t];
        for (u32 j = t + 1; j < spilled; ++j) {
            const u64 other = spill[j];
            if (other < key) {
                key = other;
                at = j;
            }
        }
        spill[at] = spill[t];
        best.heap[best.size++] = key;
    }
    // The last key taken is the k-th: to the front, where density_of and
    // bound() read it (the others stay in any order; heapify() orders them).
    if (best.size == k && k > 0) {
        const u64 kth = best.heap[k - 1];
        best.heap[k - 1] = best.heap[0];
        best.heap[0] = kth;
        best.limit = kth;
    }
    return true;
}
