// photon.cu: photon mapping on the GPU (seed 000, Zeidan 2011, §15; the
// maps of seed 003). Photons travel as a wavefront, as the eye rays of
// whitted.cu do: the host (caustic-render's photon/trace_cuda.rs through
// photon/kernels_cuda.rs) emits one wave of photons (photon_emit), then per
// bounce traces it (traverse_bvh2), runs photon_bounce, and compacts
// (compact.cu) the stored photons into the maps (photon_gather_stored) and
// the surviving photons into the next wave (compact_gather_wave). The maps
// are hash grids (points.cu); photon_estimate adds the radiance estimates of
// both maps at the diffuse ends of the Whitted renderer's eye paths.
//
// Every step mirrors caustic-render's photon/emit.rs and photon/trace.rs
// operation for operation, and photon i draws its random numbers from the
// same PCG32 stream as on the CPU (photon_rng), so the GPU maps hold the
// CPU's photons up to float rounding (sin/cos/pow and FMA contraction can
// move a rare Russian-roulette or Fresnel decision).
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

// ------------------------------------------------------------ emission

__device__ __forceinline__ Ray empty_ray() {
    return make_ray(make_float3(0.0f, 0.0f, 0.0f), make_float3(0.0f, 0.0f, 1.0f), 1.0f, 0.0f);
}

// PhotonSources::emit: a source by power, then a point and a direction.
// False when the sample carries no power.
__device__ bool emit(const FrameParams& p, const PhotonParams& pp, Pcg& g, Ray& ray,
                     float3& power) {
    const PhotonSource* sources = (const PhotonSource*)pp.sources;
    float u = pcg_f32(g);
    u32 lo = 0, hi = pp.source_count;
    while (lo < hi) {
        u32 mid = (lo + hi) / 2;
        if (sources[mid].cdf <= u) lo = mid + 1;
        else hi = mid;
    }
    const PhotonSource& s = sources[min(lo, pp.source_count - 1)];
    float scale = 1.0f / s.pick;
    float3 origin, dir;
    power = load3(s.power);
    if (s.kind == SOURCE_AREA) {
        const AreaLight& l = ((const AreaLight*)p.area_lights)[s.area];
        float ux = pcg_f32(g);
        float uy = pcg_f32(g);
        float3 point, normal;
        area_sample(p, l, ux, uy, point, normal);
        if (l.two_sided && pcg_f32(g) < 0.5f) normal = neg(normal);
        float vx = pcg_f32(g);
        float vy = pcg_f32(g);
        dir = to_world(cosine_hemisphere(vx, vy), normal);
        origin = point + normal * p.ray_epsilon;
    } else if (s.kind == SOURCE_POINT) {
        float ux = pcg_f32(g);
        float uy = pcg_f32(g);
        origin = load3(s.a);
        dir = uniform_cone(ux, uy, -1.0f);
    } else if (s.kind == SOURCE_SPOT) {
        float ux = pcg_f32(g);
        float uy = pcg_f32(g);
        float3 local = uniform_cone(ux, uy, s.cos_width);
        float falloff = spot_falloff(local.z, s.cos_start, s.cos_width);
        origin = load3(s.a);
        dir = to_world(local, load3(s.b));
        power = power * (falloff * (2.0f * PI_F * (1.0f - s.cos_width)));
    } else {
        float ux = pcg_f32(g);
        float uy = pcg_f32(g);
        float r = sqrtf(ux);
        float phi = 2.0f * PI_F * uy;
        float dx = r * cosf(phi) * s.radius, dy = r * sinf(phi) * s.radius;
        dir = load3(s.a);
        float3 t = to_world(make_float3(1.0f, 0.0f, 0.0f), dir);
        float3 b = to_world(make_float3(0.0f, 1.0f, 0.0f), dir);
        origin = load3(s.b) - dir * (s.radius * 1.01f) + t * dx + b * dy;
    }
    power = power * scale;
    ray = make_ray(origin, dir, 0.0f, CAUSTIC_INF);
    return max_element(power) > 0.0f;
}

// Photons first_photon .. first_photon + n: their first ray and state;
// live[i] = 0 for a photon that carries nothing.
extern "C" __global__ void __launch_bounds__(PHOTON_THREADS)
photon_emit(const FrameParams* scene, const PhotonParams* params, u32 n, Ray* rays,
            PhotonPath* paths, u32* live) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const PhotonParams& pp = *params;
    Pcg g = photon_rng(pp.seed, pp.first_photon + i);
    Ray ray = empty_ray();
    float3 power = make_float3(0.0f, 0.0f, 0.0f);
    bool ok = pp.source_count > 0 && emit(*scene, pp, g, ray, power);
    PhotonPath path;
    path.state = g.state;
    path.inc = g.inc;
    store3(path.power, power * pp.inv_photons);
    path.kind = PATH_LIGHT;
    rays[i] = ray;
    paths[i] = path;
    live[i] = ok ? 1u : 0u;
}

// ------------------------------------------------------------ bounces

struct BounceOut {
    Ray* rays;
    PhotonPath* paths;
    u32* live;
    Photon* stored;
    u32* global;
    u32* caustic;
};

__device__ __forceinline__ u32 after_specular(u32 kind) {
    return kind == PATH_DIFFUSE ? PATH_DIFFUSE : PATH_SPECULAR;
}

// Tracer::store: the photon into slot i, flagged for the maps its path
// belongs to.
__device__ void store(const PhotonParams& pp, const Surface& s, float3 d, float3 power, u32 kind,
                      u32 i, BounceOut& out) {
    bool global = false;
    if (!pp.caustic_only) {
        if (pp.global_rule == GLOBAL_AFTER_FIRST_BOUNCE) global = kind != PATH_LIGHT;
        else if (pp.global_rule == GLOBAL_INDIRECT_ONLY) global = kind == PATH_DIFFUSE;
        else global = true;
    }
    bool caustic = kind == PATH_SPECULAR;
    if (!(global || caustic)) return;
    float3 incoming = neg(normalize(d));
    Photon ph;
    store3(ph.position, s.point);
    store3(ph.power, power);
    ph.incoming = octahedral_encode(incoming);
    ph.normal = octahedral_encode(face_towards(s.geometric_normal, incoming));
    out.stored[i] = ph;
    out.global[i] = global ? 1u : 0u;
    out.caustic[i] = caustic ? 1u : 0u;
}

__device__ __forceinline__ float survival(const PhotonParams& pp, float3 r) {
    float p = pp.mean_roulette ? (r.x + r.y + r.z) / 3.0f : max_element(r);
    return fminf(fmaxf(p, 0.0f), 1.0f);
}

// Tracer::scatter: Russian roulette and a new direction at a diffuse or
// glossy hit; false when the photon is absorbed.
__device__ bool scatter(const FrameParams& p, const PhotonParams& pp, const Material& m,
                        const Surface& s, float3 d, float3& power, Pcg& g, float3& dir) {
    float3 wo = neg(normalize(d));
    float3 n = face_towards(s.shading_normal, wo);
    float3 ng = face_towards(s.geometric_normal, wo);
    float3 albedo = albedo_at(p, m, s);
    bool glossy = m.kind == MAT_GLOSSY;
    float3 specular = glossy ? load3(m.specular) : make_float3(0.0f, 0.0f, 0.0f);
    float exponent = glossy ? m.exponent : 0.0f;
    float p_diffuse = survival(pp, albedo);
    float p_glossy = survival(pp, specular);
    float sum = p_diffuse + p_glossy;
    if (sum > 1.0f) {
        p_diffuse /= sum;
        p_glossy /= sum;
    }
    float u = pcg_f32(g);
    if (u < p_diffuse) {
        power = power * div3(albedo, p_diffuse);
        float ux = pcg_f32(g);
        float uy = pcg_f32(g);
        dir = to_world(cosine_hemisphere(ux, uy), n);
    } else if (u < p_diffuse + p_glossy) {
        float ux = pcg_f32(g);
        float uy = pcg_f32(g);
        dir = phong_lobe(reflect(neg(wo), n), exponent, ux, uy);
        float c = dot(dir, n);
        power = power * (specular * ((exponent + 2.0f) / (exponent + 1.0f) * fmaxf(c, 0.0f) / p_glossy));
    } else {
        return false;
    }
    // A shading normal may send the photon under the surface: absorbed.
    return dot(dir, ng) > 0.0f && dot(dir, n) > 0.0f;
}

// Tracer::trace's loop body for one wave: store at diffuse hits, then the
// photon's next ray (live flag) or its end.
extern "C" __global__ void __launch_bounds__(PHOTON_THREADS)
photon_bounce(const FrameParams* scene, const PhotonParams* params, const Ray* rays,
              const Hit* hits, const PhotonPath* paths, u32 n, Ray* out_rays,
              PhotonPath* out_paths, u32* live, Photon* stored, u32* global, u32* caustic) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const FrameParams& p = *scene;
    const PhotonParams& pp = *params;
    BounceOut out = {out_rays, out_paths, live, stored, global, caustic};
    live[i] = 0;
    global[i] = 0;
    caustic[i] = 0;
    const Hit hit = hits[i];
    if (hit.prim == NO_HIT) return;
    const Ray ray = rays[i];
    PhotonPath path = paths[i];
    float3 power = load3(path.power);
    u32 kind = path.kind;
    Pcg g;
    g.state = path.state;
    g.inc = path.inc;
    Surface s = surface_at(p, ray, hit);
    const Material& m = ((const Material*)p.materials)[s.material];
    float3 d = load3(ray.dir);
    bool front = dot(s.geometric_normal, d) < 0.0f;
    float3 dir;
    if (m.kind == MAT_DIELECTRIC) {
        power = power * load3(m.color);
        kind = after_specular(kind);
        float3 nrm = front ? s.shading_normal : neg(s.shading_normal);
        float eta = front ? 1.0f / m.ior : m.ior;
        float reflectance = fresnel_dielectric(fmaxf(-dot(d, nrm), 0.0f), eta);
        bool refracted = pcg_f32(g) >= reflectance && refract(d, nrm, eta, dir);
        if (!refracted) dir = reflect(d, nrm);
    } else if (!(front || m.two_sided)) {
        return;
    } else if (m.kind == MAT_MIRROR) {
        power = power * load3(m.color);
        kind = after_specular(kind);
        dir = reflect(d, face_towards(s.shading_normal, neg(d)));
    } else if (pp.caustic_only) {
        if (kind == PATH_SPECULAR) store(pp, s, d, power, kind, i, out);
        return;
    } else {
        store(pp, s, d, power, kind, i, out);
        kind = PATH_DIFFUSE;
        if (!scatter(p, pp, m, s, d, power, g, dir)) return;
    }
    if (!(max_element(power) > 0.0f)) return;
    // RenderScene::spawn.
    float3 offset = face_towards(s.geometric_normal, dir) * p.ray_epsilon;
    out_rays[i] = make_ray(s.point + offset, dir, 0.0f, CAUSTIC_INF);
    path.state = g.state;
    path.inc = g.inc;
    store3(path.power, power);
    path.kind = kind;
    out_paths[i] = path;
    live[i] = 1;
}

// ------------------------------------------------------------ compaction

// The flagged stored photons to map[offset ..].
extern "C" __global__ void __launch_bounds__(PHOTON_THREADS)
photon_gather_stored(const Photon* stored, const u32* indices, u32 n, Photon* map, u64 offset) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    map[offset + i] = stored[indices[i]];
}

// A map's positions, the input of its hash grid.
extern "C" __global__ void __launch_bounds__(PHOTON_THREADS)
photon_positions(const Photon* photons, u32 n, float* positions) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const Photon& ph = photons[i];
    positions[3 * i] = ph.position[0];
    positions[3 * i + 1] = ph.position[1];
    positions[3 * i + 2] = ph.position[2];
}

// ------------------------------------------------------------ estimate

__device__ __forceinline__ Grid grid_of(const GridView& v) {
    return make_grid(v.origin[0], v.origin[1], v.origin[2], v.inv_cell, v.dims[0], v.dims[1],
                     v.dims[2], v.table_bits);
}

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

// estimate::density: the k nearest photons within the map's radius on the
// side of `ng`, over the disc to the k-th photon (which only sets the
// radius), each photon's power weighted by the BRDF for its direction
// (estimate::radiance), or not when `m` is null (estimate::irradiance).
__device__ float3 density_estimate(const PhotonMapView& map, const Material* m, float3 albedo,
                                   float3 n, float3 ng, float3 wo, float3 point) {
    float3 zero = make_float3(0.0f, 0.0f, 0.0f);
    if (map.count == 0) return zero;
    u32 k = max(min(map.k, POINTS_MAX_K), 2u);
    Best best;
    best.init(k, __fmul_rn(map.max_radius, map.max_radius));
    map_knn(map, point, best);
    // A full heap's root is the k-th photon: it fixes the radius only.
    bool full = best.size == k;
    float r2 = full ? __uint_as_float((u32)(best.heap[0] >> 32)) : map.max_radius * map.max_radius;
    if (!(r2 > 0.0f) || !isfinite(r2)) return zero;
    float kr = CONE_KAPPA * sqrtf(r2);
    const Photon* photons = (const Photon*)map.photons;
    float3 sum = zero;
    for (u32 j = full ? 1u : 0u; j < best.size; ++j) {
        const Photon& ph = photons[(u32)best.heap[j]];
        if (dot(octahedral_decode(ph.normal), ng) <= 0.0f) continue;
        float w = 1.0f;
        if (map.cone) w = fmaxf(1.0f - sqrtf(__uint_as_float((u32)(best.heap[j] >> 32))) / kr, 0.0f);
        float3 power = load3(ph.power) * w;
        sum = sum + (m ? brdf(*m, albedo, n, wo, octahedral_decode(ph.incoming)) * power : power);
    }
    float norm = map.cone ? 1.0f - 2.0f / (3.0f * CONE_KAPPA) : 1.0f;
    return div3(sum, norm * PI_F * r2);
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

// 30-bit Morton code of p in the box lo .. lo + 1 / inv (per axis).
__device__ __forceinline__ u32 box_morton(float3 p, float lx, float ly, float lz, float ix,
                                          float iy, float iz) {
    return morton3_30(make_float3((p.x - lx) * ix, (p.y - ly) * iy, (p.z - lz) * iz));
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

// photon_vertex_keys for the photons j * stride (j < n) of the map
// `maps[0]`: the order in which photon_precompute takes them.
extern "C" __global__ void __launch_bounds__(PHOTON_THREADS)
photon_precompute_keys(const PhotonMapView* maps, u32 stride, u32 n, float lx, float ly, float lz,
                       float ix, float iy, float iz, u32* keys, u32* values) {
    u32 j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n) return;
    const Photon& ph = ((const Photon*)maps->photons)[(u64)j * stride];
    keys[j] = box_morton(load3(ph.position), lx, ly, lz, ix, iy, iz);
    values[j] = j;
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

// ------------------------------------------------------------ final gather

// precomputed.rs: irradiance estimated at photons stride * j of the global
// map `maps[0]`, with each photon's own normal; out[j] keeps the photon's
// position and normal, its power field holds the irradiance.
// Threads take the photons in `order` (Morton order of their positions),
// so neighbouring threads search neighbouring photons.
extern "C" __global__ void __launch_bounds__(PHOTON_THREADS)
photon_precompute(const PhotonMapView* maps, u32 stride, const u32* order, u32 n, Photon* out) {
    u32 t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    const u32 j = order[t];
    const PhotonMapView& map = *maps;
    Photon ph = ((const Photon*)map.photons)[(u64)j * stride];
    float3 zero = make_float3(0.0f, 0.0f, 0.0f);
    float3 normal = octahedral_decode(ph.normal);
    store3(ph.power, density_estimate(map, nullptr, zero, zero, normal, zero, load3(ph.position)));
    out[j] = ph;
}

// Random-number purposes of gather.rs.
#define GATHER_DIRECTION 0x67617468ull
#define GATHER_FRESNEL 0x6672736cull
// precomputed.rs: candidates per lookup, and the normal agreement needed.
#define PRECOMPUTED_NORMAL_COS 0.9f

// Gatherer::gather's rays for eye vertices first .. first + count (in
// `order`), rays_per slots each, keyed by the vertex's key and `salt`
// (photon.rs's POINT_GATHER or SAMPLE_GATHER): a jittered grid over the largest square
// count, the rest uniform; slots whose direction is under the geometric
// normal carry an empty ray.
extern "C" __global__ void __launch_bounds__(PHOTON_THREADS)
photon_gather_emit(const FrameParams* scene, const EyeVertex* vertices, const u32* order,
                   u32 first, u32 count, u32 rays_per, u64 salt, Ray* rays, GatherPath* paths) {
    u32 s = blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= count * rays_per) return;
    const EyeVertex& v = vertices[order[first + s / rays_per]];
    u32 i = s % rays_per;
    u64 key = mix_key(mix_key(v.key, salt), (u64)i);
    Pcg g = pcg_new(key, GATHER_DIRECTION);
    float ux = pcg_f32(g);
    float uy = pcg_f32(g);
    u32 grid = (u32)sqrtf((float)rays_per);
    if (i < grid * grid) {
        ux = ((float)(i % grid) + ux) / (float)grid;
        uy = ((float)(i / grid) + uy) / (float)grid;
    }
    float3 n = load3(v.n), ng = load3(v.ng);
    float3 dir = to_world(cosine_hemisphere(ux, uy), n);
    GatherPath path;
    path.key = key;
    store3(path.throughput, make_float3(1.0f, 1.0f, 1.0f));
    path.slot = s;
    path.depth = 0;
    path.pad = 0;
    if (dot(dir, ng) <= 0.0f) {
        store3(path.throughput, make_float3(0.0f, 0.0f, 0.0f));
        rays[s] = empty_ray();
    } else {
        rays[s] = make_ray(load3(v.point) + ng * scene->ray_epsilon, dir, 0.0f, CAUSTIC_INF);
    }
    paths[s] = path;
}

// IrradianceMap::irradiance: the nearest of the PRECOMPUTED candidates
// whose normal agrees with `ng`.
__device__ float3 precomputed_irradiance(const PhotonMapView& map, float3 point, float3 ng) {
    float3 zero = make_float3(0.0f, 0.0f, 0.0f);
    if (map.count == 0) return zero;
    Best best;
    best.init(map.k, __fmul_rn(map.max_radius, map.max_radius));
    map_knn(map, point, best);
    // The heap is unordered: the nearest agreeing candidate is the one of
    // smallest key among those that agree.
    u64 chosen = ~0ull;
    const Photon* photons = (const Photon*)map.photons;
    for (u32 j = 0; j < best.size; ++j) {
        const Photon& ph = photons[(u32)best.heap[j]];
        if (dot(octahedral_decode(ph.normal), ng) >= PRECOMPUTED_NORMAL_COS && best.heap[j] < chosen)
            chosen = best.heap[j];
    }
    return chosen == ~0ull ? zero : load3(photons[(u32)chosen].power);
}

// Gatherer::incoming for one wave of gather rays: at a diffuse or glossy
// hit the precomputed irradiance times albedo / pi (and the throughput)
// into results[slot]; mirrors and glass (Fresnel choice) continue the ray
// (live flag); a miss adds the background; no emission anywhere. With
// `distances`, a first ray's hit distance goes to distances[slot] (left 0
// on a miss): Ward's harmonic mean at irradiance samples.
extern "C" __global__ void __launch_bounds__(PHOTON_THREADS)
photon_gather_step(const FrameParams* scene, const PhotonMapView* irradiance, const Ray* rays,
                   const Hit* hits, const GatherPath* paths, u32 n, float* results,
                   float* distances, Ray* out_rays, GatherPath* out_paths, u32* live) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    live[i] = 0;
    const FrameParams& p = *scene;
    GatherPath path = paths[i];
    float3 throughput = load3(path.throughput);
    if (is_black(throughput)) return;
    const Hit hit = hits[i];
    float* result = results + 3ull * path.slot;
    if (hit.prim == NO_HIT) {
        store3(result, throughput * load3(p.background));
        return;
    }
    if (distances != nullptr && path.depth == 0) distances[path.slot] = hit.t;
    const Ray ray = rays[i];
    Surface s = surface_at(p, ray, hit);
    const Material& m = ((const Material*)p.materials)[s.material];
    float3 d = load3(ray.dir);
    bool front = dot(s.geometric_normal, d) < 0.0f;
    bool last = path.depth == p.max_depth;
    float3 dir;
    if (m.kind == MAT_DIELECTRIC && !last) {
        throughput = throughput * load3(m.color);
        Pcg g = pcg_new(mix_key(path.key, (u64)path.depth), GATHER_FRESNEL);
        float u = pcg_f32(g);
        // gather::dielectric_choice.
        float3 dn = normalize(d);
        float3 nrm = front ? s.shading_normal : neg(s.shading_normal);
        float eta = front ? 1.0f / m.ior : m.ior;
        float reflectance = fresnel_dielectric(fmaxf(-dot(dn, nrm), 0.0f), eta);
        bool refracted = u >= reflectance && refract(dn, nrm, eta, dir);
        if (!refracted) dir = reflect(dn, nrm);
    } else if (!(front || m.two_sided)) {
        return;
    } else if (m.kind == MAT_MIRROR && !last) {
        throughput = throughput * load3(m.color);
        dir = reflect(d, face_towards(s.shading_normal, neg(d)));
    } else if (m.kind == MAT_DIFFUSE || m.kind == MAT_GLOSSY) {
        float3 wo = neg(normalize(d));
        float3 ng = face_towards(s.geometric_normal, wo);
        float3 e = precomputed_irradiance(*irradiance, s.point, ng);
        store3(result, throughput * albedo_at(p, m, s) * (FRAC_1_PI_F) * e);
        return;
    } else {
        return;
    }
    float3 offset = face_towards(s.geometric_normal, dir) * p.ray_epsilon;
    out_rays[i] = make_ray(s.point + offset, dir, 0.0f, CAUSTIC_INF);
    store3(path.throughput, throughput);
    path.depth += 1;
    out_paths[i] = path;
    live[i] = 1;
}

// The indirect light at eye vertices first .. first + count (in `order`):
// E = pi / rays_per * (sum of the vertex's ray results, in ray order),
// reflected by albedo / pi, times the path's throughput, into the
// framebuffer.
extern "C" __global__ void __launch_bounds__(PHOTON_THREADS)
photon_gather_finish(const FrameParams* scene, const EyeVertex* vertices, const u32* order,
                     u32 first, u32 count, u32 rays_per, const float* results) {
    u32 j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= count) return;
    const EyeVertex& v = vertices[order[first + j]];
    float3 sum = make_float3(0.0f, 0.0f, 0.0f);
    for (u32 i = 0; i < rays_per; ++i) sum = sum + load3(results + 3ull * ((u64)j * rays_per + i));
    float3 e = sum * (PI_F / (float)rays_per);
    splat(*scene, v.pixel, load3(v.weight) * (load3(v.albedo) * FRAC_1_PI_F * e));
}

// ------------------------------------------------------ irradiance samples
//
// The final gather between adaptively placed samples (render.rs with
// irradiance samples on; caustic_render::photon::irradiance_samples_cuda chooses them).

// The seeding input of every eye vertex: position, normal towards the
// viewer and pixel (x | y << 16).
extern "C" __global__ void __launch_bounds__(PHOTON_THREADS)
photon_seed_points(const FrameParams* scene, const EyeVertex* vertices, u32 n, float* positions,
                   float* normals, u32* pixels) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const EyeVertex& v = vertices[i];
    store3(positions + 3ull * i, load3(v.point));
    store3(normals + 3ull * i, load3(v.n));
    const u32 width = scene->width;
    pixels[i] = (v.pixel % width) | ((v.pixel / width) << 16);
}

// Positions of vertices[order[j]], j < n (kNN queries in that order).
extern "C" __global__ void __launch_bounds__(PHOTON_THREADS)
photon_vertex_positions(const EyeVertex* vertices, const u32* order, u32 n, float* out) {
    u32 j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n) return;
    store3(out + 3ull * j, load3(vertices[order[j]].point));
}

// Gatherer::gather's result at samples first .. first + count: irradiance
// pi / rays_per * sum, and the harmonic mean of the first hits' distances
// (+inf without hits), into irradiance[first + j].
extern "C" __global__ void __launch_bounds__(PHOTON_THREADS)
photon_sample_finish(u32 first, u32 count, u32 rays_per, const float* results,
                     const float* distances, float4* irradiance) {
    u32 j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= count) return;
    float3 sum = make_float3(0.0f, 0.0f, 0.0f);
    double inverse = 0.0;
    u32 hits = 0;
    for (u32 i = 0; i < rays_per; ++i) {
        const u64 slot = (u64)j * rays_per + i;
        sum = sum + load3(results + 3 * slot);
        const float d = distances[slot];
        if (d > 0.0f) {
            inverse += 1.0 / (double)d;
            ++hits;
        }
    }
    const float3 e = sum * (PI_F / (float)rays_per);
    const float harmonic = hits > 0 ? (float)((double)hits / inverse) : CAUSTIC_INF;
    irradiance[first + j] = make_float4(e.x, e.y, e.z, harmonic);
}

// IrradianceCache::build per sample: its normal (from its vertex) and its
// validity radius min(ward * H, 2 * distance to the farthest of its
// `spacing_k` nearest fellow samples, itself included).
extern "C" __global__ void __launch_bounds__(PHOTON_THREADS)
photon_sample_frames(const EyeVertex* vertices, const u32* chosen, u32 m,
                     const float4* irradiance, const float* near_d2, const u32* near_count,
                     u32 spacing_k, float ward, float4* frames, float* finite_radius) {
    u32 j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= m) return;
    const EyeVertex& v = vertices[chosen[j]];
    const u32 found = near_count[j];
    const float spacing = found > 0 ? sqrtf(near_d2[(u64)j * spacing_k + found - 1]) : CAUSTIC_INF;
    const float radius = fminf(ward * irradiance[j].w, 2.0f * spacing);
    const float3 n = load3(v.n);
    frames[j] = make_float4(n.x, n.y, n.z, radius);
    finite_radius[j] = isfinite(radius) ? radius : 0.0f;
}

// IrradianceCache::interpolate at vertices[order[j]] from its `k` nearest
// samples: where some sample is valid, the weighted irradiance times
// albedo / pi and the path's throughput into the framebuffer, flag 0;
// elsewhere flag 1 (the caller gathers there).
extern "C" __global__ void __launch_bounds__(PHOTON_THREADS)
photon_interpolate(const FrameParams* scene, const EyeVertex* vertices, const u32* order, u32 n,
                   const u32* near_index, const float* near_d2, const u32* near_count, u32 k,
                   const float4* frames, const float4* irradiance, float normal_cos, u32* uncovered) {
    u32 j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n) return;
    const EyeVertex& v = vertices[order[j]];
    const float3 normal = load3(v.n);
    float3 sum = make_float3(0.0f, 0.0f, 0.0f);
    float weights = 0.0f;
    for (u32 i = 0; i < near_count[j]; ++i) {
        const u64 slot = (u64)j * k + i;
        const u32 s = near_index[slot];
        const float4 f = frames[s];
        const float agreement = (f.x * normal.x + f.y * normal.y + f.z * normal.z - normal_cos) /
                                (1.0f - normal_cos);
        const float closeness = 1.0f - sqrtf(near_d2[slot]) / f.w;
        if (agreement > 0.0f && closeness > 0.0f) {
            const float w = fminf(agreement, 1.0f) * closeness;
            const float4 e = irradiance[s];
            sum = sum + make_float3(e.x, e.y, e.z) * w;
            weights += w;
        }
    }
    if (weights > 1e-3f) {
        const float3 e = div3(sum, weights);
        splat(*scene, v.pixel, load3(v.weight) * (load3(v.albedo) * FRAC_1_PI_F * e));
        uncovered[j] = 0;
    } else {
        uncovered[j] = 1;
    }
}
