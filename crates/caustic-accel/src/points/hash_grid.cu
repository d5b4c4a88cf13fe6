// points.cu: photon-map neighbour search on the GPU: the spatial hash of
// Fleisz 2009 and the brute-force baseline (Garcia et al. 2008).
//
// Build: bounds of the finite points (block reduction, then float atomics
// on an order-preserving integer map), then per point its bucket `hash(cell)`
// (invalid points get the key `buckets`, which sorts last), a radix sort of
// (bucket, index) pairs (radix_sort.cu), bucket bounds (segment.cu), and the
// points gathered into bucket order as float4 (w = input index bits), so a
// candidate costs one 16-byte load.
//
// Query: the 27 cells around the query's cell, centre first (Fleisz's
// order); a bucket two cells share under the Teschner hash is visited once.
// kNN: one warp per query (points.cuh's WarpBest: the candidates streamed
// 32 at a time into a list of 64-bit keys, dist2 bits << 32 | index, the
// crate's tie rule as one integer order), the queries taken in Morton order.
// Radius queries and brute force: one thread per query offering its
// candidates to points.cuh's visitors (a max-heap of the same keys, or the
// two passes of an exact radius query: count, then fill and sort). Distances
// are points.cuh's dist2, so the answers equal the CPU reference exactly.
#include "points.cuh"

#define POINTS_THREADS 256u

// ------------------------------------------------------------------ shared

// Floats as integers that compare in the same order (for atomicMin/Max).
__device__ __forceinline__ int ordered(float f) {
    const int i = __float_as_int(f);
    return i >= 0 ? i : i ^ 0x7fffffff;
}

// ------------------------------------------------------------------- build

// bounds[0..3] = ordered min, bounds[3..6] = ordered max (start at +max/-max).
extern "C" __global__ void __launch_bounds__(POINTS_THREADS)
points_bounds(const float* points, u64 n, int* bounds) {
    float lo[3] = {CAUSTIC_INF, CAUSTIC_INF, CAUSTIC_INF};
    float hi[3] = {-CAUSTIC_INF, -CAUSTIC_INF, -CAUSTIC_INF};
    for (u64 i = global_thread(); i < n; i += grid_threads()) {
        const float3 p = load_point(points, i);
        if (!finite3(p.x, p.y, p.z)) continue;
        lo[0] = fminf(lo[0], p.x); lo[1] = fminf(lo[1], p.y); lo[2] = fminf(lo[2], p.z);
        hi[0] = fmaxf(hi[0], p.x); hi[1] = fmaxf(hi[1], p.y); hi[2] = fmaxf(hi[2], p.z);
    }
    for (int a = 0; a < 3; ++a) {
        for (int d = 16; d > 0; d >>= 1) {
            lo[a] = fminf(lo[a], __shfl_xor_sync(CAUSTIC_FULL_MASK, lo[a], d));
            hi[a] = fmaxf(hi[a], __shfl_xor_sync(CAUSTIC_FULL_MASK, hi[a], d));
        }
    }
    // The warps' bounds meet in shared memory and one thread per block
    // takes them to the six words: a warp's atomics on six addresses from
    // every warp of a 10^6-point launch (33 k on each word) queued behind
    // one another at L2, 0.155 ms of an H200's photon map build (the
    // launch timeline, session 21) for 12 MB read.
    __shared__ float warp_lo[POINTS_THREADS / 32][3], warp_hi[POINTS_THREADS / 32][3];
    const u32 warp = threadIdx.x / 32;
    if (lane_id() == 0) {
        for (int a = 0; a < 3; ++a) {
            warp_lo[warp][a] = lo[a];
            warp_hi[warp][a] = hi[a];
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (u32 w = 1; w < blockDim.x / 32; ++w) {
            for (int a = 0; a < 3; ++a) {
                lo[a] = fminf(lo[a], warp_lo[w][a]);
                hi[a] = fmaxf(hi[a], warp_hi[w][a]);
            }
        }
        for (int a = 0; a < 3; ++a) {
            if (lo[a] <= hi[a]) {
                atomicMin(&bounds[a], ordered(lo[a]));
                atomicMax(&bounds[3 + a], ordered(hi[a]));
            }
        }
    }
}

// key[i] = bucket of point i (`invalid_key` for a non-finite point), value[i] = i.
extern "C" __global__ void __launch_bounds__(POINTS_THREADS)
points_hash(const float* points, u64 n, float ox, float oy, float oz, float inv_cell, u32 dx,
            u32 dy, u32 dz, u32 table_bits, u32 invalid_key, u32* keys, u32* values) {
    const Grid g = make_grid(ox, oy, oz, inv_cell, dx, dy, dz, table_bits);
    for (u64 i = global_thread(); i < n; i += grid_threads()) {
        const float3 p = load_point(points, i);
        u32 key = invalid_key;
        if (finite3(p.x, p.y, p.z)) {
            int c[3];
            cell_of(g, p, c);
            key = bucket_of(g, c);
        }
        keys[i] = key;
        values[i] = (u32)i;
    }
}

// sorted[j] = (point order[j], index order[j] as float bits).
extern "C" __global__ void __launch_bounds__(POINTS_THREADS)
points_gather(const float* points, const u32* order, u64 n, float4* sorted) {
    for (u64 j = global_thread(); j < n; j += grid_threads()) {
        const u32 i = order[j];
        const float3 p = load_point(points, i);
        sorted[j] = make_float4(p.x, p.y, p.z, __uint_as_float(i));
    }
}

// ------------------------------------------------------------------ queries

// Offers every point of the 3x3x3 cells around p's cell to `v`, centre
// first; cells outside the grid hold nothing. Exact for radii up to the
// cell edge (the host checks).
template <class V>
__device__ __forceinline__ void walk_hashgrid(const Grid& g, float3 p, const u32* start,
                                              const u32* end, const float4* sorted, V& v) {
    grid_for_each_candidate(g, start, end, sorted, p,
                            [&](float3 s, u32 index) { v.offer(dist2(p, s), index); });
}

// Offers every finite point to `v`.
template <class V>
__device__ __forceinline__ void walk_brute(float3 p, const float* points, u64 n, V& v) {
    for (u64 i = 0; i < n; ++i) {
        const float3 s = load_point(points, i);
        if (!finite3(s.x, s.y, s.z)) continue;
        v.offer(dist2(p, s), (u32)i);
    }
}

// The two walks as callables for radius_query.
struct HashgridWalk {
    const Grid& g;
    float3 p;
    const u32* start;
    const u32* end;
    const float4* sorted;
    template <class V>
    __device__ __forceinline__ void operator()(V& v) const {
        walk_hashgrid(g, p, start, end, sorted, v);
    }
};

struct BruteWalk {
    float3 p;
    const float* points;
    u64 n;
    template <class V>
    __device__ __forceinline__ void operator()(V& v) const {
        walk_brute(p, points, n, v);
    }
};

// kNN over the grid, one warp per query (points.cuh's WarpBest): the
// warp takes queries in the order `order` gives (null: as stored), writes
// each at its own row.
extern "C" __global__ void __launch_bounds__(POINTS_THREADS)
points_knn_hashgrid(const float* queries, const u32* order, u64 m, u32 k, float max_radius,
                    float ox, float oy, float oz, float inv_cell, u32 dx, u32 dy, u32 dz,
                    u32 table_bits, const u32* start, const u32* end, const float4* sorted,
                    u32* out_index, float* out_d2, u32* out_count) {
    __shared__ u64 lists[POINTS_THREADS / 32 * WARP_KNN_CAP];
    const Grid g = make_grid(ox, oy, oz, inv_cell, dx, dy, dz, table_bits);
    WarpBest best;
    for (u64 w = global_thread() / 32; w < m; w += grid_threads() / 32) {
        const u64 q = order ? order[w] : w;
        const float3 p = load_point(queries, q);
        best.init(lists + warp_id() * WARP_KNN_CAP, k, __fmul_rn(max_radius, max_radius));
        if (k > 0 && query_ok(p, max_radius)) warp_grid_candidates(g, start, end, sorted, p, best);
        best.cut();
        best.write(q, k, out_index, out_d2, out_count);
    }
}

// Morton code of each query in the box lo .. lo + 1 / inv (key) and its
// index (value): sorted, a warp's neighbours search neighbouring cells.
extern "C" __global__ void __launch_bounds__(POINTS_THREADS)
points_query_keys(const float* queries, u64 m, float lx, float ly, float lz, float ix, float iy,
                  float iz, u32* keys, u32* values) {
    for (u64 i = global_thread(); i < m; i += grid_threads()) {
        const float3 p = load_point(queries, i);
        keys[i] = morton3_30(make_float3((p.x - lx) * ix, (p.y - ly) * iy, (p.z - lz) * iz));
        values[i] = (u32)i;
    }
}

// Every point for every query: the baseline, and exact for any radius.
extern "C" __global__ void __launch_bounds__(POINTS_THREADS)
points_knn_brute(const float* queries, u64 m, u32 k, float max_radius, const float* points,
                 u64 n, u32* out_index, float* out_d2, u32* out_count) {
    for (u64 q = global_thread(); q < m; q += grid_threads()) {
        const float3 p = load_point(queries, q);
        Best best;
        best.init(k, __fmul_rn(max_radius, max_radius));
        if (k > 0 && query_ok(p, max_radius)) walk_brute(p, points, n, best);
        best.write(q, k, out_index, out_d2, out_count);
    }
}

// Radius queries, pass 1 (offsets null: counts and total) or pass 2 (keys,
// then the sorted index and dist2 lists); see points.cuh.
extern "C" __global__ void __launch_bounds__(POINTS_THREADS)
points_radius_hashgrid(const float* queries, u64 m, float radius, float ox, float oy, float oz,
                       float inv_cell, u32 dx, u32 dy, u32 dz, u32 table_bits, const u32* start,
                       const u32* end, const float4* sorted, const u32* offsets, u32* counts,
                       u64* total, u64* keys, u32* out_index, float* out_d2) {
    const Grid g = make_grid(ox, oy, oz, inv_cell, dx, dy, dz, table_bits);
    for (u64 q = global_thread(); q < m; q += grid_threads()) {
        const float3 p = load_point(queries, q);
        radius_query(q, query_ok(p, radius), radius, offsets, counts, total, keys, out_index,
                     out_d2, HashgridWalk{g, p, start, end, sorted});
    }
}

extern "C" __global__ void __launch_bounds__(POINTS_THREADS)
points_radius_brute(const float* queries, u64 m, float radius, const float* points, u64 n,
                    const u32* offsets, u32* counts, u64* total, u64* keys, u32* out_index,
                    float* out_d2) {
    for (u64 q = global_thread(); q < m; q += grid_threads()) {
        const float3 p = load_point(queries, q);
        radius_query(q, query_ok(p, radius), radius, offsets, counts, total, keys, out_index,
                     out_d2, BruteWalk{p, points, n});
    }
}
