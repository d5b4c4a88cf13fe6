// points.cuh: device code shared by the photon-search kernels (points.cu)
// and the kernels that query photon maps (photon.cu): the crate's dist2 bit
// for bit, the hash grid's cell map and hash, the 27-cell candidate walk,
// and the bounded max-heap of (dist2, index) keys.
#pragma once
#include "common.cuh"

// Largest k a query kernel keeps (the heap lives in local memory).
#define POINTS_MAX_K 128u
#define NO_NEIGHBOUR 0xffffffffu

// ------------------------------------------------------------------ shared

__device__ __forceinline__ bool finite3(float x, float y, float z) {
    return isfinite(x) && isfinite(y) && isfinite(z);
}

// The crate's `dist2`, bit for bit.
__device__ __forceinline__ float dist2(float3 a, float3 b) {
    const float dx = __fsub_rn(a.x, b.x);
    const float dy = __fsub_rn(a.y, b.y);
    const float dz = __fsub_rn(a.z, b.z);
    return __fadd_rn(__fadd_rn(__fmul_rn(dx, dx), __fmul_rn(dy, dy)), __fmul_rn(dz, dz));
}

__device__ __forceinline__ float3 load_point(const float* p, u64 i) {
    return make_float3(p[3 * i], p[3 * i + 1], p[3 * i + 2]);
}

// Floats as integers that compare in the same order (for atomicMin/Max).
__device__ __forceinline__ int ordered(float f) {
    const int i = __float_as_int(f);
    return i >= 0 ? i : i ^ 0x7fffffff;
}

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

// ----------------------------------------------------------- bounded lists

// A max-heap of at most k keys; heap[0] is the worst kept candidate.
struct Best {
    u64 heap[POINTS_MAX_K];
    u32 k;
    u32 size;
    u64 bound;  // candidates need key < bound

    __device__ __forceinline__ void init(u32 k_, float max_d2) {
        k = k_;
        size = 0;
        // Keys of points within the radius: dist2 <= r2, any index.
        bound = ((u64)__float_as_uint(max_d2) << 32) | 0xffffffffull;
        bound += 1;  // strictly-below test admits dist2 == r2 with any index
    }

    __device__ __forceinline__ void offer(float d2, u32 index) {
        const u64 key = ((u64)__float_as_uint(d2) << 32) | index;
        if (key >= bound) return;
        if (size < k) {
            u32 i = size++;
            while (i > 0) {
                const u32 parent = (i - 1) / 2;
                if (heap[parent] >= key) break;
                heap[i] = heap[parent];
                i = parent;
            }
            heap[i] = key;
            if (size == k) bound = heap[0];
        } else {
            sift_down(key, size);
            bound = heap[0];
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

__device__ __forceinline__ bool query_ok(float3 q, float r) {
    return finite3(q.x, q.y, q.z) && r >= 0.0f;  // NaN radius fails
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
        for (int z = lo[2]; z <= hi[2]; ++z) {
            for (int y = lo[1]; y <= hi[1]; ++y) {
                const bool face = abs(z - c[2]) == r || abs(y - c[1]) == r;
                // Inside the shell's faces only x = c - r and x = c + r are new.
                const int step = face ? 1 : max(2 * r, 1);
                for (int x = c[0] - r; x <= c[0] + r; x += step) {
                    if (x < 0 || x >= g.dims[0]) continue;
                    const int cell[3] = {x, y, z};
                    offer_cell(g, start, end, sorted, p, cell, best);
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

