// points_kernels.cpp: the hash grid's kNN (src/points/hash_grid.cu, one
// warp per query over points.cuh's WarpBest) run on the host: the kernels
// compiled unchanged over cuda_fibers.h, every CUDA thread a fiber. The
// grid is built by the build kernels (the host sorts the (bucket, index)
// pairs stably, as the radix sort does); then points_knn_hashgrid answers
// the queries (in the order given, or in the order `order` lists), and a
// test kernel runs grid_knn_rings (the photon estimates' shells) over the
// same grid, and another the tiled search (warp_tile_knn, 32 consecutive
// queries a tile). For tests/points_kernels_on_cpu.rs.
//
//   points_kernels INPUT OUTPUT
//
// INPUT: u32 n (points), m (queries), k, dims[3], table_bits, max_shells,
// with_order, whole, margin; f32 origin[3], inv_cell, max_radius; n points
// (3 f32), m queries (3 f32), m order entries when with_order. OUTPUT: the
// kNN rows (m*k u32 indices, m*k f32 dist2, m u32 counts), then the same
// for the shell search, then m u32 flags (1 where the shells answered),
// then the tiles' rows and flags the same way.
#include "cuda_fibers.h"
#include "emulation_io.h"
#include "hash_grid.cu"

#include <algorithm>
#include <numeric>

#define LAUNCH(kernel, blocks, threads, ...) \
    emu::launch(#kernel, (blocks), (threads), kernel, __VA_ARGS__)

// grid_knn_rings (the photon estimates' shell search) for every query,
// one thread each.
__global__ void rings_knn(const float* queries, u64 m, u32 k, float max_radius, float ox, float oy,
                          float oz, float inv_cell, u32 dx, u32 dy, u32 dz, u32 table_bits,
                          int max_shells, const u32* start, const u32* end, const float4* sorted,
                          u32* out_index, float* out_d2, u32* out_count, u32* answered) {
    const Grid g = make_grid(ox, oy, oz, inv_cell, dx, dy, dz, table_bits);
    for (u64 q = global_thread(); q < m; q += grid_threads()) {
        const float3 p = load_point(queries, q);
        Best best;
        best.init(k, __fmul_rn(max_radius, max_radius));
        answered[q] = !query_ok(p, max_radius) ||
                      grid_knn_rings(g, start, end, sorted, p, max_radius, max_shells, best);
        best.write(q, k, out_index, out_d2, out_count);
    }
}

// warp_tile_knn for every query, 32 consecutive queries a tile (a warp),
// over the block of their cells and `margin` more (`whole`: the block
// holds every query's points within max_radius); answered[q] 0 where the
// tile left the query to its caller (its row then partial or empty).
__global__ void tile_knn(const float* queries, u64 m, u32 k, float max_radius, float ox,
                         float oy, float oz, float inv_cell, u32 dx, u32 dy, u32 dz,
                         u32 table_bits, u32 whole, int margin, const u32* start, const u32* end,
                         const float4* sorted, u32* out_index, float* out_d2, u32* out_count,
                         u32* answered) {
    __shared__ float4 buf[POINTS_THREADS / 32][TILE_CAP];
    __shared__ u32 hist[POINTS_THREADS / 32][TILE_HIST_WORDS];
    const Grid g = make_grid(ox, oy, oz, inv_cell, dx, dy, dz, table_bits);
    const u32 warp = threadIdx.x / 32;
    const float r2 = __fmul_rn(max_radius, max_radius);
    for (u64 base = (u64)blockIdx.x * blockDim.x; base < m; base += grid_threads()) {
        const u64 q = base + threadIdx.x;
        float3 p = make_float3(0.0f, 0.0f, 0.0f);
        if (q < m) p = load_point(queries, q);
        const bool ok = q < m && query_ok(p, max_radius);
        Best best;
        best.init(k, r2);
        int lo[3], hi[3];
        u32 cells = 0;
        bool done = false;
        if (warp_tile_block(g, p, ok, margin, lo, hi, cells) && cells <= TILE_MAX_CELLS) {
            const u32 points = warp_tile_count(g, start, end, lo, hi, cells);
            if (points <= TILE_MAX_POINTS) {
                done = warp_tile_knn(g, start, end, sorted, p, ok, max_radius, whole != 0, lo,
                                     hi, cells, points, buf[warp], hist[warp], best);
            }
        }
        if (q >= m) continue;
        if (!ok) {
            best.init(k, r2);
            done = true;
        }
        answered[q] = done;
        best.heapify();
        best.write(q, k, out_index, out_d2, out_count);
    }
}

int main(int argc, char** argv) {
    const EmulationFiles files = open_files(argc, argv, "points_kernels");
    const std::vector<u32> h = read_array<u32>(files.in, 11);
    const u32 n = h[0], m = h[1], k = h[2], bits = h[6];
    const u32 dims[3] = {h[3], h[4], h[5]};
    const int max_shells = (int)h[7];
    const std::vector<float> f = read_array<float>(files.in, 5);
    const std::vector<float> points = read_array<float>(files.in, 3ull * n);
    const std::vector<float> queries = read_array<float>(files.in, 3ull * m);
    const std::vector<u32> order = read_array<u32>(files.in, h[8] ? m : 0);

    const u32 buckets = bits ? 1u << bits : dims[0] * dims[1] * dims[2];
    std::vector<u32> keys(n), values(n);
    LAUNCH(points_hash, 2, POINTS_THREADS, points.data(), (u64)n, f[0], f[1], f[2], f[3], dims[0],
           dims[1], dims[2], bits, buckets, keys.data(), values.data());
    std::vector<u32> perm(n);
    std::iota(perm.begin(), perm.end(), 0u);
    std::stable_sort(perm.begin(), perm.end(), [&](u32 a, u32 b) { return keys[a] < keys[b]; });
    std::vector<u32> start(buckets + 1, 0u), end(buckets + 1, 0u), sorted_order(n);
    for (u32 j = 0; j < n; ++j) {
        sorted_order[j] = values[perm[j]];
        const u32 v = keys[perm[j]];
        if (j == 0 || keys[perm[j - 1]] != v) start[v] = j;
        if (j + 1 == n || keys[perm[j + 1]] != v) end[v] = j + 1;
    }
    std::vector<float4> sorted(n);
    LAUNCH(points_gather, 2, POINTS_THREADS, points.data(), sorted_order.data(), (u64)n,
           sorted.data());

    std::vector<u32> index(1ull * m * k, 0xA5A5A5A5u), count(m, 0xA5A5A5A5u), answered(m, 7u);
    std::vector<float> d2(1ull * m * k, -1.0f);
    LAUNCH(points_knn_hashgrid, 2, POINTS_THREADS, queries.data(),
           order.empty() ? nullptr : order.data(), (u64)m, k, f[4], f[0], f[1], f[2], f[3],
           dims[0], dims[1], dims[2], bits, start.data(), end.data(), sorted.data(), index.data(),
           d2.data(), count.data());
    write_array(files.out, index);
    write_array(files.out, d2);
    write_array(files.out, count);
    std::fill(index.begin(), index.end(), 0xA5A5A5A5u);
    std::fill(d2.begin(), d2.end(), -1.0f);
    std::fill(count.begin(), count.end(), 0xA5A5A5A5u);
    LAUNCH(rings_knn, 2, POINTS_THREADS, queries.data(), (u64)m, k, f[4], f[0], f[1], f[2], f[3],
           dims[0], dims[1], dims[2], bits, max_shells, start.data(), end.data(), sorted.data(),
           index.data(), d2.data(), count.data(), answered.data());
    write_array(files.out, index);
    write_array(files.out, d2);
    write_array(files.out, count);
    write_array(files.out, answered);
    std::fill(index.begin(), index.end(), 0xA5A5A5A5u);
    std::fill(d2.begin(), d2.end(), -1.0f);
    std::fill(count.begin(), count.end(), 0xA5A5A5A5u);
    std::fill(answered.begin(), answered.end(), 7u);
    LAUNCH(tile_knn, 2, POINTS_THREADS, queries.data(), (u64)m, k, f[4], f[0], f[1], f[2], f[3],
           dims[0], dims[1], dims[2], bits, h[9], (int)h[10], start.data(), end.data(),
           sorted.data(), index.data(), d2.data(), count.data(), answered.data());
    write_array(files.out, index);
    write_array(files.out, d2);
    write_array(files.out, count);
    write_array(files.out, answered);
    return fclose(files.out) == 0 ? 0 : 1;
}
