// gather.cu: the final gather on the GPU, the twin of photon/gather.rs,
// photon/precomputed.rs and the interpolation of photon/irradiance_samples.rs
// (Zeidan 2011, §6.2.3; Christensen 1999 for the precomputed irradiance):
// irradiance precomputed at every stride-th global photon, gather rays from
// eye vertices or irradiance samples traced as a wavefront
// (photon_gather_emit / step / finish), and the samples' irradiance
// interpolated at every eye vertex (photon_interpolate).
#include "photon_device.cuh"

// ------------------------------------------------------------ final gather

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

// precomputed.rs: irradiance estimated at photons stride * j of the global
// map `maps[0]`, with each photon's own normal; out[j] keeps the photon's
// position and normal, its power field holds the irradiance.
// Threads take the photons in `order` (Morton order of their positions),
// so neighbouring threads search neighbouring photons: the positions
// first .. first + count of it, each written to out[j], or to
// out[t - first] when `by_position` (a team member's share, merged in
// position order and placed by photon_place).
extern "C" __global__ void __launch_bounds__(PHOTON_THREADS)
photon_precompute(const PhotonMapView* maps, u32 stride, const u32* order, u32 first, u32 count,
                  u32 by_position, Photon* out) {
    u32 t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= count) return;
    const u32 j = order[first + t];
    const PhotonMapView& map = *maps;
    Photon ph = ((const Photon*)map.photons)[(u64)j * stride];
    float3 zero = make_float3(0.0f, 0.0f, 0.0f);
    float3 normal = octahedral_decode(ph.normal);
    store3(ph.power, density_estimate(map, nullptr, zero, zero, normal, zero, load3(ph.position)));
    out[by_position ? t : j] = ph;
}

// out[order[t]] = by_position[t]: precomputed points in Morton position
// order put back at their photons' indices.
extern "C" __global__ void __launch_bounds__(PHOTON_THREADS)
photon_place(const u32* order, const Photon* by_position, u32 n, Photon* out) {
    u32 t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    out[order[t]] = by_position[t];
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
        store_ray(rays, s, empty_ray());
    } else {
        store_ray(rays, s, make_ray(load3(v.point) + ng * scene->ray_epsilon, dir, 0.0f, CAUSTIC_INF));
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
    const Hit hit = load_hit(hits, i);
    float* result = results + 3ull * path.slot;
    if (hit.prim == NO_HIT) {
        store3(result, throughput * load3(p.background));
        return;
    }
    if (distances != nullptr && path.depth == 0) distances[path.slot] = hit.t;
    const Ray ray = load_ray(rays, i);
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
    store_ray(out_rays, i, make_ray(s.point + offset, dir, 0.0f, CAUSTIC_INF));
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
