// estimate.cu: the radiance estimates of the photon maps on the GPU, the
// twin of photon/estimate.rs: the diffuse ends of the Whitted renderer's
// eye paths become eye vertices (photon_collect_flags, photon_collect_at),
// sorted by Morton code so neighbouring threads search neighbouring
// photons (photon_vertex_keys),
// and photon_estimate adds both maps' estimates (hash grids after Fleisz
// 2009) into the framebuffer: each warp takes 32 Morton-neighbouring
// vertices as one tile (the costly tiles first: photon_tile_cost) and
// searches their photons together
// (photon_device.cuh's tile_map_knn, after Mara et al. 2013); the lanes
// the tile cannot answer search alone (map_knn).
#include "photon_device.cuh"

#define ESTIMATE_WARPS 4u
#define ESTIMATE_THREADS (ESTIMATE_WARPS * 32u)
// Blocks an SM photon_estimate is compiled for: 4 (its shared memory's
// limit too) caps it at 128 registers. Left to itself ptxas chose 134
// (3 blocks an SM) or 96 with spills as small edits moved it (NVRTC 13.0,
// sm_90, 2026-11-29); 4 gave 116-124 and no spills.
#define ESTIMATE_MIN_BLOCKS 4

// The tiles' shared memory: each warp's points and histograms.
struct TileMemory {
    float4 points[ESTIMATE_WARPS][TILE_CAP];
    u32 hist[ESTIMATE_WARPS][TILE_HIST_WORDS];
};

// Sum over buckets of (points in the bucket)^2, and of points: the
// photon-weighted mean occupancy of a grid's cells, which sizes the fine
// grid for the dense parts of a map.
extern "C" __global__ void __launch_bounds__(PHOTON_THREADS)
photon_occupancy(const u32* start, const u32* end, u32 buckets, u64* sums) {
    u64 squares = 0, points = 0;
    for (u32 b = blockIdx.x * blockDim.x + threadIdx.x; b < buckets; b += gridDim.x * blockDim.x) {
        const u64 n = end[b] - start[b];
        squares += n * n;
        points += n;
    }
    for (int d = 16; d > 0; d >>= 1) {
        squares += __shfl_xor_sync(CAUSTIC_FULL_MASK, squares, d);
        points += __shfl_xor_sync(CAUSTIC_FULL_MASK, points, d);
    }
    if (lane_id() == 0) {
        atomicAdd(&sums[0], squares);
        atomicAdd(&sums[1], points);
    }
}

// Each photon as the estimates read it: the power, the incoming direction
// still encoded (glossy surfaces decode it), the normal decoded once here
// (octahedral_decode, the same bits the estimate decoded per query).
extern "C" __global__ void __launch_bounds__(PHOTON_THREADS)
photon_shaded(const Photon* photons, u32 n, ShadedPhoton* out) {
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const Photon ph = photons[i];
    ShadedPhoton s;
    store3(s.power, load3(ph.power));
    s.incoming = ph.incoming;
    store3(s.normal, octahedral_decode(ph.normal));
    s.pad = 0;
    out[i] = s;
}

// The search of the estimates on its own, for the tests: query q's k
// nearest photons in ascending (dist2, index) order, as points_knn_* write
// them; by tiles of 32 queries (photon_estimate's search) when `tiled`,
// else by map_knn alone.
extern "C" __global__ void __launch_bounds__(ESTIMATE_THREADS)
photon_map_knn(const PhotonMapView* maps, const float* queries, u32 m, u32 tiled, u32* out_index,
               float* out_d2, u32* out_count) {
    __shared__ TileMemory tiles;
    const u32 q = blockIdx.x * blockDim.x + threadIdx.x;
    const u32 warp = threadIdx.x / 32;
    const PhotonMapView& map = *maps;
    float3 p = make_float3(0.0f, 0.0f, 0.0f);
    if (q < m) p = make_float3(queries[3 * q], queries[3 * q + 1], queries[3 * q + 2]);
    const bool ok = q < m && query_ok(p, map.max_radius);
    const float r2 = __fmul_rn(map.max_radius, map.max_radius);
    Best best;
    best.init(map.k, r2);
    bool done = false;
    if (tiled) done = tile_map_knn(map, p, ok, best, tiles.points[warp], tiles.hist[warp]);
    if (q >= m) return;
    if (!done) {
        best.init(map.k, r2);
        if (ok) map_knn(map, p, best);
    }
    best.heapify();
    best.write(q, map.k, out_index, out_d2, out_count);
}

// The eye vertex at the hit of slot i of a wave of eye paths, where the
// path ends on a diffuse or glossy surface from its front (or a two-sided
// one): the hits whitted_shade gives direct light. False elsewhere.
__device__ __forceinline__ bool eye_vertex_at(const FrameParams& p, const Ray* rays,
                                              const Hit* hits, const Path* paths, u32 i,
                                              EyeVertex& v) {
    const Path path = paths[i];
    const Hit hit = load_hit(hits, i);
    if (path.pixel == NO_PIXEL || hit.prim == NO_HIT) return false;
    const Ray ray = load_ray(rays, i);
    Surface s = surface_at(p, ray, hit);
    const Material& m = ((const Material*)p.materials)[s.material];
    if (m.kind != MAT_DIFFUSE && m.kind != MAT_GLOSSY) return false;
    float3 d = load3(ray.dir);
    if (!(dot(s.geometric_normal, d) < 0.0f || m.two_sided)) return false;
    float3 wo = neg(normalize(d));
    store3(v.point, s.point);
    v.pixel = path.pixel;
    store3(v.weight, load3(path.weight));
    v.material = s.material;
    store3(v.n, face_towards(s.shading_normal, wo));
    store3(v.ng, face_towards(s.geometric_normal, wo));
    store3(v.wo, wo);
    store3(v.albedo, albedo_at(p, m, s));
    v.pad0 = v.pad1 = v.pad2 = v.pad3 = 0;
    v.key = path.key;
    v.pad4 = 0;
    return true;
}

// Which slots of one wave of eye paths end at an eye vertex (eye_vertex_at),
// flagged for compaction; the vertices themselves are written by
// photon_collect_at for the flagged slots alone, so the wave's vertices
// (112 bytes a slot) are never written and read back whole.
extern "C" __global__ void __launch_bounds__(PHOTON_THREADS)
photon_collect_flags(const FrameParams* scene, const Ray* rays, const Hit* hits,
                     const Path* paths, u32 count, u32* flags) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= count) return;
    EyeVertex v;
    flags[i] = eye_vertex_at(*scene, rays, hits, paths, i, v) ? 1u : 0u;
}

// The eye vertices of the wave's slots indices[0 .. n] (flagged by
// photon_collect_flags) to out[offset ..], in that order.
extern "C" __global__ void __launch_bounds__(PHOTON_THREADS)
photon_collect_at(const FrameParams* scene, const Ray* rays, const Hit* hits, const Path* paths,
                  const u32* indices, u32 n, EyeVertex* out, u64 offset) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    EyeVertex v;
    eye_vertex_at(*scene, rays, hits, paths, indices[i], v);
    out[offset + i] = v;
}

// Morton code of each vertex's position in the box lo .. lo + 1/inv_extent
// (key) and its index (value): sorted, neighbouring threads estimate at
// neighbouring points and share their photons in the caches.
extern "C" __global__ void __launch_bounds__(PHOTON_THREADS)
photon_vertex_keys(const EyeVertex* vertices, u32 n, float lx, float ly, float lz, float ix,
                   float iy, float iz, u32* keys, u32* values) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    keys[i] = box_morton(load3(vertices[i].point), lx, ly, lz, ix, iy, iz);
    values[i] = i;
}

// The first `words` 16-byte words of eye vertex i (records of 112 bytes,
// so 16-byte aligned), loaded to be evicted first (__ldcs): the estimates
// read each vertex once, and the 2.27 M vertices of the 1080p frame (254
// MB) would otherwise push the maps' photons, which every tile gathers
// again, out of L2.
static_assert(sizeof(EyeVertex) % 16 == 0 && CAUSTIC_OFFSETOF(EyeVertex, weight) == 16 &&
                  CAUSTIC_OFFSETOF(EyeVertex, material) == 28 &&
                  CAUSTIC_OFFSETOF(EyeVertex, n) == 32 && CAUSTIC_OFFSETOF(EyeVertex, ng) == 48 &&
                  CAUSTIC_OFFSETOF(EyeVertex, wo) == 64 &&
                  CAUSTIC_OFFSETOF(EyeVertex, albedo) == 80,
              "photon_estimate reads EyeVertex as 16-byte words");
template <u32 words>
__device__ __forceinline__ void load_vertex_words(const EyeVertex* vertices, u32 i, float4* w) {
    const float4* src = (const float4*)(vertices + i);
#pragma unroll
    for (u32 u = 0; u < words; ++u) w[u] = __ldcs(src + u);
}

// Tile t of the estimates: the vertices order[32 t .. 32 t + 32). The
// calling lane's index into `order` (to i), and whether that vertex exists.
__device__ __forceinline__ bool tile_vertex(u32 tile, u32 tile_count, u32 count, u32& i) {
    i = tile * 32u + lane_id();
    return tile < tile_count && i < count;
}

// The order of the estimates' tiles, costly first: each warp takes one
// tile (32 Morton neighbours of `order`), sums tile_map_cost over the maps
// and writes its tile number to tiles[t] and a sort key to keys[t]: 255
// less an eighth-octave level of the cost, so that an ascending stable
// sort of the keys' 8 bits puts the costly tiles first and keeps Morton
// order among tiles of one level. photon_estimate then starts the long
// tiles first instead of whenever their Morton place comes up: the launch
// ends about when its work, spread evenly, would, instead of one late
// tile's time after (list scheduling, longest first: Graham 1969).
extern "C" __global__ void __launch_bounds__(ESTIMATE_THREADS)
photon_tile_cost(const PhotonMapView* maps, u32 map_count, const EyeVertex* vertices,
                 const u32* order, u32 count, u32 tile_count, u32* keys, u32* tiles) {
    const u32 tile = (blockIdx.x * blockDim.x + threadIdx.x) / 32u;
    u32 i = 0;
    const bool valid = tile_vertex(tile, tile_count, count, i);
    if (tile >= tile_count) return;  // whole warps: the tile number is the warp's
    float4 w = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (valid) load_vertex_words<1>(vertices, order[i], &w);
    const float3 point = xyz(w);
    u64 cost = 0;
    for (u32 j = 0; j < map_count; ++j) {
        const PhotonMapView& map = maps[j];
        if (map.count == 0) continue;
        cost += tile_map_cost(map, point, valid && query_ok(point, map.max_radius));
    }
    if (lane_id() == 0) {
        const float level = 8.0f * __log2f((float)cost + 1.0f);
        keys[tile] = 255u - min((u32)level, 255u);
        tiles[tile] = tile;
    }
}

// The radiance estimates of maps[0 .. map_count] at the eye vertices, in
// the order `order` gives, times each path's throughput, into the
// framebuffer. Blocks of ESTIMATE_THREADS: a warp's 32 vertices are a tile,
// warp w of the launch takes tile tiles[w] (photon_tile_cost's order).
extern "C" __global__ void __launch_bounds__(ESTIMATE_THREADS, ESTIMATE_MIN_BLOCKS)
photon_estimate(const FrameParams* scene, const PhotonMapView* maps, u32 map_count,
                const EyeVertex* vertices, const u32* order, u32 count, const u32* tile_order,
                u32 tile_count) {
    __shared__ TileMemory tiles;
    const u32 warp = threadIdx.x / 32;
    const u32 launch_warp = blockIdx.x * ESTIMATE_WARPS + warp;
    u32 i = 0;
    // Every lane stays to the end: the tiles' search is the warp's.
    const bool valid = launch_warp < tile_count &&
                       tile_vertex(tile_order[launch_warp], tile_count, count, i);
    const FrameParams& p = *scene;
    // EyeVertex's words: (point, pixel), (weight, material), (n), (ng),
    // (wo), (albedo); the path's key after them is not read here.
    float4 w[6];
#pragma unroll
    for (u32 u = 0; u < 6; ++u) w[u] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (valid) load_vertex_words<6>(vertices, order[i], w);
    const Material& m = ((const Material*)p.materials)[__float_as_uint(w[1].w)];
    const float3 point = xyz(w[0]), n = xyz(w[2]), ng = xyz(w[3]), wo = xyz(w[4]),
                 albedo = xyz(w[5]);
    float3 radiance = make_float3(0.0f, 0.0f, 0.0f);
    for (u32 j = 0; j < map_count; ++j) {
        const PhotonMapView& map = maps[j];
        if (map.count == 0) continue;
        const float r2 = __fmul_rn(map.max_radius, map.max_radius);
        Best best;
        best.init(estimate_k(map), r2);
        const bool done = tile_map_knn(map, point, valid && query_ok(point, map.max_radius), best,
                                       tiles.points[warp], tiles.hist[warp]);
        if (!valid) continue;
        if (!done) {
            best.init(estimate_k(map), r2);
            map_knn(map, point, best);
        }
        radiance = radiance + density_of(map, &m, albedo, n, ng, wo, best);
    }
    if (valid) splat(p, __float_as_uint(w[0].w), xyz(w[1]) * radiance);
}
