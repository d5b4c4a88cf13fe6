// estimate.cu: the radiance estimates of the photon maps on the GPU, the
// twin of photon/estimate.rs: the diffuse ends of the Whitted renderer's
// eye paths become eye vertices (photon_collect), sorted by Morton code so
// neighbouring threads search neighbouring photons (photon_vertex_keys),
// and photon_estimate adds both maps' estimates (hash grids after Fleisz
// 2009, searched by photon_device.cuh's map_knn) into the framebuffer.
#include "photon_device.cuh"

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

// The search of radiance_estimate on its own, for the tests: query q's k
// nearest photons in ascending (dist2, index) order, as points_knn_* write
// them.
extern "C" __global__ void __launch_bounds__(PHOTON_THREADS)
photon_map_knn(const PhotonMapView* maps, const float* queries, u32 m, u32* out_index,
               float* out_d2, u32* out_count) {
    u32 q = blockIdx.x * blockDim.x + threadIdx.x;
    if (q >= m) return;
    const PhotonMapView& map = *maps;
    const float3 p = make_float3(queries[3 * q], queries[3 * q + 1], queries[3 * q + 2]);
    Best best;
    best.init(map.k, __fmul_rn(map.max_radius, map.max_radius));
    if (query_ok(p, map.max_radius)) map_knn(map, p, best);
    best.write(q, map.k, out_index, out_d2, out_count);
}

// The diffuse ends of one wave of eye paths (the hits whitted_shade gives
// direct light) as eye vertices, flagged for compaction.
extern "C" __global__ void __launch_bounds__(PHOTON_THREADS)
photon_collect(const FrameParams* scene, const Ray* rays, const Hit* hits, const Path* paths,
               u32 count, EyeVertex* vertices, u32* flags) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= count) return;
    flags[i] = 0;
    const FrameParams& p = *scene;
    const Path path = paths[i];
    const Hit hit = hits[i];
    if (path.pixel == NO_PIXEL || hit.prim == NO_HIT) return;
    const Ray ray = rays[i];
    Surface s = surface_at(p, ray, hit);
    const Material& m = ((const Material*)p.materials)[s.material];
    if (m.kind != MAT_DIFFUSE && m.kind != MAT_GLOSSY) return;
    float3 d = load3(ray.dir);
    if (!(dot(s.geometric_normal, d) < 0.0f || m.two_sided)) return;
    float3 wo = neg(normalize(d));
    EyeVertex v;
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
    vertices[i] = v;
    flags[i] = 1;
}

// The flagged eye vertices to out[offset ..].
extern "C" __global__ void __launch_bounds__(PHOTON_THREADS)
photon_gather_vertices(const EyeVertex* vertices, const u32* indices, u32 n, EyeVertex* out,
                       u64 offset) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[offset + i] = vertices[indices[i]];
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

// The radiance estimates of maps[0 .. map_count] at the eye vertices, in
// the order `order` gives, times each path's throughput, into the
// framebuffer.
extern "C" __global__ void __launch_bounds__(PHOTON_THREADS)
photon_estimate(const FrameParams* scene, const PhotonMapView* maps, u32 map_count,
                const EyeVertex* vertices, const u32* order, u32 count) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= count) return;
    const FrameParams& p = *scene;
    const EyeVertex& v = vertices[order[i]];
    const Material& m = ((const Material*)p.materials)[v.material];
    float3 point = load3(v.point), n = load3(v.n), ng = load3(v.ng), wo = load3(v.wo);
    float3 albedo = load3(v.albedo);
    float3 radiance = make_float3(0.0f, 0.0f, 0.0f);
    for (u32 j = 0; j < map_count; ++j) {
        radiance = radiance + density_estimate(maps[j], &m, albedo, n, ng, wo, point);
    }
    splat(p, v.pixel, load3(v.weight) * radiance);
}
