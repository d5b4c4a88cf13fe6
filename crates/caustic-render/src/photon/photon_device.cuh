// photon_device.cuh: the device code the photon mapper's kernels share
// (trace.cu, estimate.cu, gather.cu): the photon random streams and
// sampling of photon/trace.rs, and the map search and radiance estimate of
// photon/estimate.rs over two hash grids (PhotonMapView).
#pragma once
#include "scene.cuh"
#include "points.cuh"
#include "photon.cuh"

#define PHOTON_THREADS 256u
#define GOLDEN_GAMMA 0x9e3779b97f4a7c15ull
// Shells of fine cells an estimate searches before it falls back to the
// coarse cells (7^3 = 343 cells).
#define FINE_SHELLS 3
// estimate::CONE_KAPPA.
#define CONE_KAPPA 1.1f

// ------------------------------------------------------------ sampling

// trace::photon_rng: PCG32 stream `index`, state scrambled by SplitMix64.
__device__ __forceinline__ Pcg photon_rng(u64 seed, u64 index) {
    return pcg_new(fmix64((seed ^ fmix64(index + GOLDEN_GAMMA)) + GOLDEN_GAMMA), index);
}

// sampling::onb and to_world: `local` (z up) in the frame of unit `axis`.
__device__ float3 to_world(float3 local, float3 n) {
    float s = copysignf(1.0f, n.z);
    float a = -1.0f / (s + n.z);
    float b = n.x * n.y * a;
    float3 t = make_float3(1.0f + s * n.x * n.x * a, s * b, -s * n.x);
    float3 bt = make_float3(b, s + n.y * n.y * a, -n.y);
    return t * local.x + bt * local.y + n * local.z;
}

// sampling::cosine_hemisphere.
__device__ float3 cosine_hemisphere(float ux, float uy) {
    float r = sqrtf(ux);
    float phi = 2.0f * PI_F * uy;
    return make_float3(r * cosf(phi), r * sinf(phi), sqrtf(fmaxf(1.0f - ux, 0.0f)));
}

// sampling::uniform_cone about +z.
__device__ float3 uniform_cone(float ux, float uy, float cos_max) {
    float cos_theta = (1.0f - ux) + ux * cos_max;
    float sin_theta = sqrtf(fmaxf(1.0f - cos_theta * cos_theta, 0.0f));
    float phi = 2.0f * PI_F * uy;
    return make_float3(sin_theta * cosf(phi), sin_theta * sinf(phi), cos_theta);
}

// trace::phong_lobe: density (n + 1) / (2 pi) cos^n about unit `r`.
__device__ float3 phong_lobe(float3 r, float exponent, float ux, float uy) {
    float cos_alpha = powf(ux, 1.0f / (exponent + 1.0f));
    float sin_alpha = sqrtf(fmaxf(1.0f - cos_alpha * cos_alpha, 0.0f));
    float phi = 2.0f * PI_F * uy;
    return to_world(make_float3(sin_alpha * cosf(phi), sin_alpha * sinf(phi), cos_alpha), r);
}

__device__ __forceinline__ float max_element(float3 v) { return fmaxf(fmaxf(v.x, v.y), v.z); }

// ------------------------------------------------------------ estimate

__device__ __forceinline__ Grid grid_of(const GridView& v) {
    return make_grid(v.origin[0], v.origin[1], v.origin[2], v.inv_cell, v.dims[0], v.dims[1],
                     v.dims[2], v.table_bits);
}

// The k nearest photons of `map` within its radius, into `best` (which the
// caller initialised for k and the radius).
__device__ void map_knn(const PhotonMapView& map, float3 point, Best& best) {
    // Sparse surroundings: the 27 coarse cells hold few photons and answer
    // exactly. Dense ones: shells of fine cells, which end after a few
    // hundred candidates where the coarse cells hold thousands; where the
    // fine cells prove too small (a sparse spot beside a dense one), the
    // coarse cells answer after all, from a fresh list.
    const Grid coarse = grid_of(map.coarse);
    const u32* cs = (const u32*)map.coarse.start;
    const u32* ce = (const u32*)map.coarse.end;
    // A limit of 0 skips the count: the fine cells first, always.
    if ((map.coarse_limit == 0 || grid_candidate_count(coarse, cs, ce, point) > map.coarse_limit) &&
        grid_knn_rings(grid_of(map.fine), (const u32*)map.fine.start, (const u32*)map.fine.end,
                       (const float4*)map.fine.sorted, point, map.max_radius, FINE_SHELLS, best)) {
        return;
    }
    best.init(best.k, __fmul_rn(map.max_radius, map.max_radius));
    grid_for_each_candidate(coarse, cs, ce, (const float4*)map.coarse.sorted, point,
                            [&](float3 s, u32 index) { best.offer(dist2(point, s), index); });
}

// The margin of fine cells a tile's first block takes around its
// queries' cells (warp_tile_block); lanes left uncertain retry with
// margins up to FINE_SHELLS.
#ifndef TILE_FINE_MARGIN
#define TILE_FINE_MARGIN 1
#endif

// map_knn for a warp's 32 neighbouring queries at once (warp_tile_knn).
// Where the coarse block (cells of the radius around the tile's cells)
// holds few photons it answers every lane exactly; else blocks of fine
// cells with margins of TILE_FINE_MARGIN .. FINE_SHELLS cells, each for
// the lanes the ones before left uncertain (as the shells of
// grid_knn_rings), then the coarse block for the rest. True where the
// lane's answer is in `best` (initialised empty by the caller); false
// where the caller must search itself (map_knn, after a fresh init).
__device__ bool tile_map_knn(const PhotonMapView& map, float3 point, bool active, Best& best,
                             float4* buf, u32* hist) {
    const Grid coarse = grid_of(map.coarse);
    const u32* cs = (const u32*)map.coarse.start;
    const u32* ce = (const u32*)map.coarse.end;
    const float4* coarse_points = (const float4*)map.coarse.sorted;
    int lo[3], hi[3];
    u32 cells;
    if (!warp_tile_block(coarse, point, active, 1, lo, hi, cells)) return false;
    u32 n = cells <= TILE_MAX_CELLS ? warp_tile_count(coarse, cs, ce, lo, hi, cells) : 0xffffffffu;
    // coarse_limit u32::MAX: the fine grid is the coarse one; 0: fine first.
    if (map.coarse_limit == 0xffffffffu ||
        (map.coarse_limit != 0 && n <= 2u * min(map.coarse_limit, TILE_MAX_POINTS))) {
        return n <= TILE_MAX_POINTS &&
               warp_tile_knn(coarse, cs, ce, coarse_points, point, active, map.max_radius, true,
                             lo, hi, cells, n, buf, hist, best);
    }
    const Grid fine = grid_of(map.fine);
    const u32* fs = (const u32*)map.fine.start;
    const u32* fe = (const u32*)map.fine.end;
    bool done = false, pending = active;
    for (int margin = TILE_FINE_MARGIN; margin <= FINE_SHELLS; ++margin) {
        if (!warp_tile_block(fine, point, pending, margin, lo, hi, cells)) return done;
        if (cells > TILE_MAX_CELLS) break;
        n = warp_tile_count(fine, fs, fe, lo, hi, cells);
        if (n > TILE_MAX_POINTS) break;
        if (warp_tile_knn(fine, fs, fe, (const float4*)map.fine.sorted, point, pending,
                          map.max_radius, false, lo, hi, cells, n, buf, hist, best)) {
            done = true;
            pending = false;
        }
    }
    if (!warp_tile_block(coarse, point, pending, 1, lo, hi, cells)) return done;
    if (cells > TILE_MAX_CELLS) return done;
    n = warp_tile_count(coarse, cs, ce, lo, hi, cells);
    if (n > TILE_MAX_POINTS) return done;
    return warp_tile_knn(coarse, cs, ce, coarse_points, point, pending, map.max_radius, true, lo, hi,
                         cells, n, buf, hist, best) ||
           done;
}

// Largest cost tile_map_cost reports (a tile whose lanes search alone
// where its block's size is unknown).
#define TILE_COST_MAX 0xffffffffu

// What tile_map_knn will cost the warp, the same in every lane, in point
// visits per lane (a lane's distance and bin or key for one point): the
// first block tile_map_knn takes, streamed twice (its two passes), where
// the block fits a tile; where it does not, the lanes search alone
// (map_knn), weighed as 8 visits per point of the coarse block, or
// TILE_COST_MAX where the coarse block is too large to count. A guess
// from the counts only: lanes a tile leaves uncertain (a k-th's bin too
// full, a fine block too small) are not foreseen. The same decisions as
// tile_map_knn, in the same order.
__device__ u32 tile_map_cost(const PhotonMapView& map, float3 point, bool active) {
    const Grid coarse = grid_of(map.coarse);
    const u32* cs = (const u32*)map.coarse.start;
    const u32* ce = (const u32*)map.coarse.end;
    int lo[3], hi[3];
    u32 cells;
    if (!warp_tile_block(coarse, point, active, 1, lo, hi, cells)) return 0;
    const u32 n = cells <= TILE_MAX_CELLS ? warp_tile_count(coarse, cs, ce, lo, hi, cells) : 0xffffffffu;
    const u32 coarse_cost = n <= TILE_MAX_POINTS ? 2u * n
                            : n == 0xffffffffu   ? TILE_COST_MAX
                                                 : (u32)min(8ull * n, (u64)TILE_COST_MAX);
    if (map.coarse_limit == 0xffffffffu ||
        (map.coarse_limit != 0 && n <= 2u * min(map.coarse_limit, TILE_MAX_POINTS))) {
        return coarse_cost;
    }
    const Grid fine = grid_of(map.fine);
    if (!warp_tile_block(fine, point, active, TILE_FINE_MARGIN, lo, hi, cells)) return 0;
    if (cells <= TILE_MAX_CELLS) {
        const u32 nf = warp_tile_count(fine, (const u32*)map.fine.start, (const u32*)map.fine.end,
                                       lo, hi, cells);
        if (nf <= TILE_MAX_POINTS) return 2u * nf;
    }
    // The fine block is too large: the coarse block answers, or the lanes alone.
    return coarse_cost;
}

// Photons density_of loads before it sums them (their loads overlap).
#define DENSITY_BATCH 4u

// estimate::density over the k nearest photons `best` holds (the k-th at
// heap[0] when full, as map_knn's heap and warp_tile_knn leave it): within
// the map's radius on the side of `ng`, over the disc to the k-th photon
// (which only sets the radius), each photon's power weighted by the BRDF
// for its direction (estimate::radiance), or not when `m` is null
// (estimate::irradiance). The photons are the map's shaded records (the
// normal decoded once per photon, not once per query), summed in heap
// order, DENSITY_BATCH loaded at a time.
__device__ float3 density_of(const PhotonMapView& map, const Material* m, float3 albedo,
                             float3 n, float3 ng, float3 wo, const Best& best) {
    float3 zero = make_float3(0.0f, 0.0f, 0.0f);
    // A full heap's root is the k-th photon: it fixes the radius only.
    bool full = best.size == best.k;
    float r2 = full ? __uint_as_float((u32)(best.heap[0] >> 32)) : map.max_radius * map.max_radius;
    if (!(r2 > 0.0f) || !isfinite(r2)) return zero;
    float kr = CONE_KAPPA * sqrtf(r2);
    // Read once: `map` lives in global memory, and the compiler loaded the
    // flag again for every photon, a load the photon's sum then waited on
    // (2.5 % of the estimate's stall samples, ncu on the H200).
    const bool cone = map.cone != 0;
    // A ShadedPhoton is two 16-byte words: (power, incoming), (normal, pad).
    const float4* words = (const float4*)map.shaded;
    // brdf reads the photon's direction for glossy materials only.
    const bool glossy = m && m->kind == MAT_GLOSSY;
    float3 sum = zero;
    for (u32 j = full ? 1u : 0u; j < best.size; j += DENSITY_BATCH) {
        float d2[DENSITY_BATCH];
        float4 power[DENSITY_BATCH], normal[DENSITY_BATCH];
#pragma unroll
        for (u32 u = 0; u < DENSITY_BATCH; ++u) {
            // Past the list: photon 0 (the list is not empty), unused.
            const u64 key = j + u < best.size ? best.heap[j + u] : 0ull;
            const u64 i = (u32)key;
            d2[u] = __uint_as_float((u32)(key >> 32));
            power[u] = __ldg(words + 2 * i);
            normal[u] = __ldg(words + 2 * i + 1);
        }
#pragma unroll
        for (u32 u = 0; u < DENSITY_BATCH; ++u) {
            if (j + u >= best.size) break;
            if (dot(make_float3(normal[u].x, normal[u].y, normal[u].z), ng) <= 0.0f) continue;
            float w = 1.0f;
            if (cone) w = fmaxf(1.0f - sqrtf(d2[u]) / kr, 0.0f);
            const float3 p = make_float3(power[u].x, power[u].y, power[u].z) * w;
            if (m) {
                const float3 wi = glossy ? octahedral_decode(__float_as_uint(power[u].w)) : zero;
                sum = sum + brdf(*m, albedo, n, wo, wi) * p;
            } else {
                sum = sum + p;
            }
        }
    }
    float norm = cone ? 1.0f - 2.0f / (3.0f * CONE_KAPPA) : 1.0f;
    return div3(sum, norm * PI_F * r2);
}

// The estimate k of a map (estimate::density's clamp).
__device__ __forceinline__ u32 estimate_k(const PhotonMapView& map) {
    return max(min(map.k, POINTS_MAX_K), 2u);
}

// estimate::density at one point: map_knn, then density_of.
__device__ float3 density_estimate(const PhotonMapView& map, const Material* m, float3 albedo,
                                   float3 n, float3 ng, float3 wo, float3 point) {
    if (map.count == 0) return make_float3(0.0f, 0.0f, 0.0f);
    Best best;
    best.init(estimate_k(map), __fmul_rn(map.max_radius, map.max_radius));
    map_knn(map, point, best);
    return density_of(map, m, albedo, n, ng, wo, best);
}

// 30-bit Morton code of p in the box lo .. lo + 1 / inv (per axis).
__device__ __forceinline__ u32 box_morton(float3 p, float lx, float ly, float lz, float ix,
                                          float iy, float iz) {
    return morton3_30(make_float3((p.x - lx) * ix, (p.y - ly) * iy, (p.z - lz) * iz));
}

