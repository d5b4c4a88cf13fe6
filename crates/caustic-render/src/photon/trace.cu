// trace.cu: photon tracing on the GPU (Zeidan 2011, §15), the twin of
// photon/emit.rs and photon/trace.rs. Photons travel as a wavefront, as the
// eye rays of whitted/render.cu do: the host (photon/trace_cuda.rs) emits
// one wave of photons (photon_emit), then per bounce traces it
// (traverse_bvh2), runs photon_bounce, and compacts (compact.cu) the stored
// photons onto the maps (photon_append_stored) and the surviving photons
// into the next wave (compact_gather_wave_padded), all without the host
// reading a count between bounces.
//
// Every step mirrors emit.rs and trace.rs operation for operation, and
// photon i draws its random numbers from the same PCG32 stream as on the
// CPU (photon_rng), so the GPU maps hold the CPU's photons up to float
// rounding (sin/cos/pow and FMA contraction can move a rare
// Russian-roulette or Fresnel decision).
#include "photon_device.cuh"
#include "bvh_traverse.cuh"

// ------------------------------------------------------------ emission

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
    store_ray(rays, i, ray);
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

// Tracer::trace's loop body for one photon: store at a diffuse hit (the
// photon and its map flags at `at_store`, flags cleared there first), then
// the photon's next ray and state at `at_next` (live flag), or its end.
__device__ void bounce_at(const FrameParams& p, const PhotonParams& pp, const Ray& ray,
                          const Hit& hit, PhotonPath path, u32 at_store, u32 at_next,
                          BounceOut& out) {
    out.live[at_next] = 0;
    out.global[at_store] = 0;
    out.caustic[at_store] = 0;
    if (hit.prim == NO_HIT) return;
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
        if (kind == PATH_SPECULAR) store(pp, s, d, power, kind, at_store, out);
        return;
    } else {
        store(pp, s, d, power, kind, at_store, out);
        kind = PATH_DIFFUSE;
        if (!scatter(p, pp, m, s, d, power, g, dir)) return;
    }
    if (!(max_element(power) > 0.0f)) return;
    // RenderScene::spawn.
    float3 offset = face_towards(s.geometric_normal, dir) * p.ray_epsilon;
    store_ray(out.rays, at_next, make_ray(s.point + offset, dir, 0.0f, CAUSTIC_INF));
    path.state = g.state;
    path.inc = g.inc;
    store3(path.power, power);
    path.kind = kind;
    out.paths[at_next] = path;
    out.live[at_next] = 1;
}

// One bounce of a wave: photon i's body at slot i.
extern "C" __global__ void __launch_bounds__(PHOTON_THREADS)
photon_bounce(const FrameParams* scene, const PhotonParams* params, const Ray* rays,
              const Hit* hits, const PhotonPath* paths, u32 n, Ray* out_rays,
              PhotonPath* out_paths, u32* live, Photon* stored, u32* global, u32* caustic) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    BounceOut out = {out_rays, out_paths, live, stored, global, caustic};
    bounce_at(*scene, *params, load_ray(rays, i), load_hit(hits, i), paths[i], i, i, out);
}

// A wave's tail in one launch (wavefront_cuda.rs): once few photons are
// left, each thread follows one of the counts[live] photons from bounce
// `first_bounce` to its end, tracing its rays itself (bvh_traverse.cuh:
// the binary BVH's traversal, the same hits) and doing each bounce's body.
// What bounce first_bounce + r stores lands at row r (slot r * n + i) of
// `stored` and the flag arrays (cleared by the host), so the rows' flagged
// photons, compacted row by row, are the wavefront's runs in its order.
// counts[live + r] gains the photons traced at each later bounce, and
// counts[kept_global + r] / counts[kept_caustic + r] the photons each bounce
// keeps for each map (the runs' lengths). `next_rays`/`next_paths`/`live`
// are scratch, one slot per photon.
extern "C" __global__ void __launch_bounds__(PHOTON_THREADS)
photon_tail(const FrameParams* scene, const PhotonParams* params, const BvhNode* nodes,
            u32 node_count, const Triangle* tris, const Ray* rays, const PhotonPath* paths,
            u32* counts, u32 live_slot, u32 kept_global, u32 kept_caustic, u32 first_bounce,
            u32 n, Ray* next_rays, PhotonPath* next_paths, u32* live, Photon* stored,
            u32* global, u32* caustic) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || i >= counts[live_slot]) return;
    const FrameParams& p = *scene;
    const PhotonParams& pp = *params;
    BounceOut out = {next_rays, next_paths, live, stored, global, caustic};
    Ray ray = load_ray(rays, i);
    PhotonPath path = paths[i];
    for (u32 b = first_bounce, row = 0; b < pp.max_bounces; ++b, ++row) {
        if (row > 0) atomicAdd(&counts[live_slot + row], 1u);
        Hit hit;
        trace_one<false>(nodes, node_count, tris, ray, hit);
        const u32 at = row * n + i;
        bounce_at(p, pp, ray, hit, path, at, i, out);
        if (global[at]) atomicAdd(&counts[kept_global + row], 1u);
        if (caustic[at]) atomicAdd(&counts[kept_caustic + row], 1u);
        if (!live[i]) break;
        ray = load_ray(next_rays, i);
        path = next_paths[i];
    }
}

// ------------------------------------------------------------ compaction

// A bounce's kept photons appended to a map without the host reading a
// count: stored[indices[i]] for i < counts[kept] go to map[counts[fill] + i],
// and thread 0 sets counts[fill + 1], where the next bounce appends. The
// host keeps the map's capacity above its bound on the fill (at most n per
// bounce); a write past it is dropped, and the host's exact fill then says so.
extern "C" __global__ void __launch_bounds__(PHOTON_THREADS)
photon_append_stored(const Photon* stored, const u32* indices, u32* counts, u32 kept, u32 fill,
                     u32 n, Photon* map, u32 capacity) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    const u32 count = counts[kept], at = counts[fill];
    if (i == 0) counts[fill + 1] = at + count;
    if (i >= n || i >= count || at + i >= capacity) return;
    map[at + i] = stored[indices[i]];
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
