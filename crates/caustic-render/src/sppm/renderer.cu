// sppm.cu: stochastic progressive photon mapping on the GPU (Hachisuka &
// Jensen 2009), the twin of caustic-render's sppm/. Per pass the host
// (sppm/renderer_cuda.rs through sppm/kernels_cuda.rs) runs:
//
// 1. the eye pass as a wavefront: sppm_primary (one jittered ray per
//    pixel), then per depth the traversal and sppm_eye_step: emission and
//    the background into the pass's radiance, one Fresnel-chosen branch at
//    glass, mirrors, and at the first diffuse or glossy hit the pixel's
//    visible point plus its shadow rays (scene.cuh's shade_direct, the
//    CPU's direct_light); the shadow slots are traced any-hit where they
//    stand and sppm_shadow_add sums each path's slots in order;
// 2. sppm_init_radii: a pixel's first visible point sets its radius;
// 3. the photon pass (photon.cu, the CPU's streams; `L D` left out);
// 4. sppm_gather_update: one thread per pixel (of the pixels `first..n`: a
//    team member's rows) sums the photons within its
//    radius from a hash grid over the pass's photons (shells of cells
//    until the radius is covered, so any cell size is exact) and applies
//    the progressive update in doubles, as sppm/pixels.rs does.
//
// The gather is the CPU's deposit turned around (each pixel reads the
// photons instead of each photon writing the pixels), so no atomics decide
// any sum: the image is deterministic. Sums run in grid order rather than
// photon order, so the last bits differ from the CPU's.
#include "scene.cuh"
#include "points.cuh"
#include "photon.cuh"
#include "sppm.cuh"
#include "bvh_traverse.cuh"

#define SPPM_THREADS 256u
// sppm/gather.rs: photons on surfaces turned further from the visible
// point's are on the other side of a thin wall.
#define MIN_NORMAL_COS -0.5f

// ------------------------------------------------------------ eye pass

// visible::EyeTracer::pixel's first ray (placed by draw::pass_jitter when
// `sequence`, else by the sample key's camera draws), slots in 8x8 Morton tiles, over
// a team member's rows of tiles `first`, `first + stride`, ...
// (team::TileRows: a contiguous band has stride 1, interleaved rows the
// team's size, the whole image first 0, stride 1). The member keeps its
// pixels' state in the order of its rows: a path's `pixel` indexes that
// state (its k-th pixel: row k / width of its rows, column k % width);
// the random key is the image pixel's, so any split traces the same paths.
extern "C" __global__ void __launch_bounds__(SPPM_THREADS)
sppm_primary(const FrameParams* params, u32 pass, u32 sequence, u32 first, u32 stride,
             Ray* rays, SppmPath* paths, u32 n) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const FrameParams& p = *params;
    u32 tiles_x = (p.width + 7u) / 8u;
    u32 tile = i / 64u, m = i % 64u;
    u32 x = (tile % tiles_x) * 8u + compact_bits(m);
    u32 row = (tile / tiles_x) * 8u + compact_bits(m >> 1);
    u32 y = (first + (row >> 3) * stride) * 8u + (row & 7u);
    SppmPath path;
    path.length = 0.0f;
    path.pad = 0;
    store3(path.weight, make_float3(1.0f, 1.0f, 1.0f));
    if (x >= p.width || y >= p.height) {
        path.pixel = NO_PIXEL;
        path.key = 0;
        store_ray(rays, i, empty_ray());
        paths[i] = path;
        return;
    }
    path.pixel = row * p.width + x;
    path.key = mix_key(mix_key(p.seed, (u64)(y * p.width + x)), (u64)pass);
    float2 o;
    if (sequence) {
        o = pass_jitter(p.seed, (u64)(y * p.width + x), pass);
    } else {
        Pcg g = pcg_new(path.key, DRAW_CAMERA);
        o.x = pcg_f32(g);
        o.y = pcg_f32(g);
    }
    float sx = 2.0f * ((float)x + o.x) / (float)p.width - 1.0f;
    float sy = 1.0f - 2.0f * ((float)y + o.y) / (float)p.height;
    float3 dir = normalize(load3(p.forward) + load3(p.right) * sx + load3(p.up) * sy);
    store_ray(rays, i, make_ray(load3(p.eye), dir, 0.0f, CAUSTIC_INF));
    paths[i] = path;
}

__device__ __forceinline__ void add3(float* out, float3 v) {
    out[0] += v.x;
    out[1] += v.y;
    out[2] += v.z;
}

// Where one depth of the eye pass writes: each path's child slot and
// `slots` shadow slots (flagged), the pass's radiance, the visible points.
struct EyeOut {
    Ray* child_rays;
    SppmPath* child_paths;
    u32* child_flags;
    Ray* shadow_rays;
    float4* shadow_values;
    u32* shadow_flags;
    float* radiance;
    VisiblePoint* points;
};

// One depth of the eye pass for slot i: visible::EyeTracer::pixel's loop
// body. Every path owns one child slot and `slots` shadow slots; unused
// shadow slots hold empty rays, so the shadow wave is traced where it
// stands.
__device__ void eye_step_at(const FrameParams& p, u32 i, SppmPath path, const Ray& ray,
                            const Hit& hit, u32 depth, u32 slots, float pixel_angle,
                            const EyeOut& o) {
    o.child_flags[i] = 0;
    for (u32 k = 0; k < slots; ++k) {
        o.shadow_flags[i * slots + k] = 0;
        store_ray(o.shadow_rays, i * slots + k, empty_ray());
    }
    if (path.pixel == NO_PIXEL) return;
    float* pixel_radiance = o.radiance + 3ull * path.pixel;
    float3 weight = load3(path.weight);
    if (hit.prim == NO_HIT) {
        add3(pixel_radiance, weight * load3(p.background));
        return;
    }
    Surface s = surface_at(p, ray, hit);
    const Material& m = ((const Material*)p.materials)[s.material];
    float3 d = load3(ray.dir);
    path.length += hit.t * sqrtf(dot(d, d));
    bool front = dot(s.geometric_normal, d) < 0.0f;
    bool visible = front || m.two_sided;
    if (visible) add3(pixel_radiance, weight * load3(m.emission));
    bool more = depth < p.max_depth;
    float3 dir;
    if (m.kind == MAT_DIELECTRIC && more) {
        weight = weight * load3(m.color);
        float3 nrm = front ? s.shading_normal : neg(s.shading_normal);
        float eta = front ? 1.0f / m.ior : m.ior;
        float reflectance = fresnel_dielectric(fmaxf(-dot(d, nrm), 0.0f), eta);
        Pcg g = pcg_new(path.key, DRAW_ROULETTE);
        bool refracted = pcg_f32(g) >= reflectance && refract(d, nrm, eta, dir);
        if (!refracted) dir = reflect(d, nrm);
        path.key = mix_key(path.key, refracted ? BRANCH_REFRACT : BRANCH_REFLECT);
    } else if (m.kind == MAT_MIRROR && visible && more) {
        weight = weight * load3(m.color);
        path.key = mix_key(path.key, BRANCH_REFLECT);
        dir = reflect(d, face_towards(s.shading_normal, neg(d)));
    } else if ((m.kind == MAT_DIFFUSE || m.kind == MAT_GLOSSY) && visible) {
        ShadeOut out = {o.child_rays, nullptr, o.child_flags,
                        o.shadow_rays, o.shadow_values, o.shadow_flags};
        Path as_path;
        as_path.key = path.key;
        store3(as_path.weight, weight);
        as_path.pixel = path.pixel;
        as_path.depth = depth;
        as_path.pad = 0;
        shade_direct(p, m, s, d, as_path, i, slots, out);
        float3 wo = neg(normalize(d));
        VisiblePoint v;
        store3(v.position, s.point);
        v.valid = 1;
        store3(v.normal, face_towards(s.geometric_normal, wo));
        v.material = s.material;
        store3(v.shading_normal, face_towards(s.shading_normal, wo));
        v.footprint = path.length * pixel_angle;
        store3(v.wo, wo);
        store3(v.weight, weight);
        store3(v.albedo, albedo_at(p, m, s));
        v.pad0 = v.pad1 = v.pad2 = 0;
        o.points[path.pixel] = v;
        return;
    } else {
        return;
    }
    if (!(fmaxf(fmaxf(weight.x, weight.y), weight.z) > 0.0f)) return;
    float3 offset = face_towards(s.geometric_normal, dir) * p.ray_epsilon;
    store_ray(o.child_rays, i, make_ray(s.point + offset, dir, 0.0f, CAUSTIC_INF));
    store3(path.weight, weight);
    o.child_paths[i] = path;
    o.child_flags[i] = 1;
}

extern "C" __global__ void __launch_bounds__(SPPM_THREADS)
sppm_eye_step(const FrameParams* params, const Ray* rays, const Hit* hits,
              const SppmPath* paths, u32 n, u32 depth, u32 slots, float pixel_angle,
              Ray* child_rays, SppmPath* child_paths, u32* child_flags, Ray* shadow_rays,
              float4* shadow_values, u32* shadow_flags, float* radiance,
              VisiblePoint* points) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const EyeOut o = {child_rays,    child_paths,  child_flags, shadow_rays,
                      shadow_values, shadow_flags, radiance,    points};
    eye_step_at(*params, i, paths[i], load_ray(rays, i), load_hit(hits, i), depth, slots, pixel_angle,
                o);
}

// Path i's unoccluded shadow contributions, summed in slot order, into its
// pixel's radiance; `occluded(slot)` says whether a slot's ray is blocked.
template <class Occluded>
__device__ __forceinline__ void add_unoccluded(u32 pixel, u32 i, u32 slots, const float4* values,
                                               const u32* flags, Occluded occluded,
                                               float* radiance) {
    if (pixel == NO_PIXEL) return;
    float3 sum = make_float3(0.0f, 0.0f, 0.0f);
    bool any = false;
    for (u32 k = 0; k < slots; ++k) {
        const u32 slot = i * slots + k;
        if (!flags[slot] || occluded(slot)) continue;
        const float4 v = values[slot];
        sum = sum + make_float3(v.x, v.y, v.z);
        any = true;
    }
    if (any) add3(radiance + 3ull * pixel, sum);
}

// The shadow wave's answers, traced where the slots stand.
struct TracedOcclusion {
    const u32* occluded;
    __device__ __forceinline__ bool operator()(u32 slot) const { return occluded[slot] != 0; }
};

// Each path's unoccluded shadow contributions, summed in slot order, into
// its pixel's radiance.
extern "C" __global__ void __launch_bounds__(SPPM_THREADS)
sppm_shadow_add(const SppmPath* paths, u32 n, u32 slots, const u32* occluded,
                const float4* values, const u32* flags, float* radiance) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    add_unoccluded(paths[i].pixel, i, slots, values, flags, TracedOcclusion{occluded}, radiance);
}

// A shadow slot's ray traced by the calling thread (bvh_traverse.cuh).
struct OwnOcclusion {
    const BvhNode* nodes;
    u32 node_count;
    const Triangle* tris;
    const Ray* rays;
    __device__ __forceinline__ bool operator()(u32 slot) const {
        Hit hit;
        return trace_one<true>(nodes, node_count, tris, load_ray(rays, slot), hit);
    }
};

// The eye wave's tail in one launch (wavefront_cuda.rs): once few paths
// are left, each thread follows one of the counts[first_depth] paths
// through every remaining depth, tracing its rays itself (bvh_traverse.cuh,
// the binary BVH's traversal, the same hits) and doing what the wavefront
// does depth by depth, in its order (the step's emission, then the shadow
// sum), so the pass's radiance and visible points are the wavefront's bit
// for bit. Adds the paths entering each later depth to counts[depth] (the
// pass's ray count). The child and shadow slots are scratch, one per path.
extern "C" __global__ void __launch_bounds__(SPPM_THREADS)
sppm_eye_tail(const FrameParams* params, const BvhNode* nodes, u32 node_count,
              const Triangle* tris, const Ray* rays, const SppmPath* paths, u32* counts,
              u32 first_depth, u32 n, u32 slots, float pixel_angle, Ray* child_rays,
              SppmPath* child_paths, u32* child_flags, Ray* shadow_rays, float4* shadow_values,
              u32* shadow_flags, float* radiance, VisiblePoint* points) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || i >= counts[first_depth]) return;
    const FrameParams& p = *params;
    const EyeOut o = {child_rays,    child_paths,  child_flags, shadow_rays,
                      shadow_values, shadow_flags, radiance,    points};
    const OwnOcclusion occlusion = {nodes, node_count, tris, shadow_rays};
    Ray ray = load_ray(rays, i);
    SppmPath path = paths[i];
    for (u32 depth = first_depth;; ++depth) {
        if (depth > first_depth) atomicAdd(&counts[depth], 1u);
        Hit hit;
        trace_one<false>(nodes, node_count, tris, ray, hit);
        eye_step_at(p, i, path, ray, hit, depth, slots, pixel_angle, o);
        add_unoccluded(path.pixel, i, slots, shadow_values, shadow_flags, occlusion, radiance);
        if (!child_flags[i]) break;
        ray = load_ray(child_rays, i);
        path = child_paths[i];
    }
}

// ------------------------------------------------------------ pixels

// PixelStats::init_radii: a pixel's first visible point sets its radius,
// `fixed` when positive, else `footprints` pixel footprints.
extern "C" __global__ void __launch_bounds__(SPPM_THREADS)
sppm_init_radii(SppmPixel* pixels, const VisiblePoint* points, u32 n, float fixed,
                float footprints) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || !points[i].valid || pixels[i].radius > 0.0) return;
    float r = fixed > 0.0f ? fixed : footprints * points[i].footprint;
    if (isfinite(r) && r > 0.0f) pixels[i].radius = (double)r;
}

// Adds a warp's radii (`radius` where `counts`) to sums[0], in fixed point
// (radius × `scale`, rounded), and their count to sums[1]: integer atomics
// make the sums exact and independent of the order of the additions.
__device__ __forceinline__ void add_radius(bool counts, double radius, double scale,
                                           unsigned long long* sums) {
    unsigned long long r = 0, c = 0;
    if (counts) {
        r = (unsigned long long)llrint(fmin(radius * scale, 9.0e15));
        c = 1;
    }
    for (int d = 16; d > 0; d >>= 1) {
        r += __shfl_xor_sync(CAUSTIC_FULL_MASK, r, d);
        c += __shfl_xor_sync(CAUSTIC_FULL_MASK, c, d);
    }
    if (lane_id() == 0 && c > 0) {
        atomicAdd(&sums[0], r);
        atomicAdd(&sums[1], c);
    }
}

// Sum and count of the radii of the pixels with a visible point this pass
// (the host sizes the photon grid's cells from their mean), in
// add_radius's fixed point: the same cells for any launch, and for a team
// whose members add their own pixels' sums.
extern "C" __global__ void __launch_bounds__(SPPM_THREADS)
sppm_radius_sum(const SppmPixel* pixels, const VisiblePoint* points, u32 n, double scale,
                unsigned long long* sums) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    const bool counts = i < n && points[i].valid && pixels[i].radius > 0.0;
    add_radius(counts, counts ? pixels[i].radius : 0.0, scale, sums);
}

// The final mean radius's sum and count over the n pixels that have a
// radius (a visible point in some pass), as sppm_radius_sum: the device
// adds them, so the statistics never come back to the host (64 bytes a
// pixel).
extern "C" __global__ void __launch_bounds__(SPPM_THREADS)
sppm_final_radius_sum(const SppmPixel* pixels, u32 n, double scale, unsigned long long* sums) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    const bool counts = i < n && pixels[i].radius > 0.0;
    add_radius(counts, counts ? pixels[i].radius : 0.0, scale, sums);
}

// Every photon of `grid` (cells of any size) within `r` of `x`, by shells of
// cells until the block covers the radius; under the Teschner hash only the
// points whose own cell is the visited one count.
template <class F>
__device__ void photons_within(const GridView& v, float3 x, float r, F visit) {
    const Grid g = make_grid(v.origin[0], v.origin[1], v.origin[2], v.inv_cell, v.dims[0],
                             v.dims[1], v.dims[2], v.table_bits);
    const u32* start = (const u32*)v.start;
    const u32* end = (const u32*)v.end;
    const float4* sorted = (const float4*)v.sorted;
    int c[3];
    cell_of(g, x, c);
    const int most = max(max(g.dims[0], g.dims[1]), g.dims[2]);
    for (int s = 0; s <= most; ++s) {
        int lo[3], hi[3];
        for (int a = 0; a < 3; ++a) {
            lo[a] = max(c[a] - s, 0);
            hi[a] = min(c[a] + s, g.dims[a] - 1);
        }
        for (int z = lo[2]; z <= hi[2]; ++z) {
            for (int y = lo[1]; y <= hi[1]; ++y) {
                const bool face = abs(z - c[2]) == s || abs(y - c[1]) == s;
                const int step = face ? 1 : max(2 * s, 1);
                for (int cx = c[0] - s; cx <= c[0] + s; cx += step) {
                    if (cx < 0 || cx >= g.dims[0]) continue;
                    const int cell[3] = {cx, y, z};
                    const u32 b = bucket_of(g, cell);
                    const u32 e = end[b];
                    for (u32 j = start[b]; j < e; ++j) {
                        const float4 q = sorted[j];
                        const float3 pos = make_float3(q.x, q.y, q.z);
                        if (g.table_bits != 0) {
                            int qc[3];
                            cell_of(g, pos, qc);
                            if (qc[0] != cx || qc[1] != y || qc[2] != z) continue;
                        }
                        visit(pos, __float_as_uint(q.w));
                    }
                }
            }
        }
        if (covered_radius(g, x, lo, hi) >= r) return;
    }
}

// sppm/gather.rs's deposits, read from the pixel's side, then
// pixels.rs's update: N' = N + aM, R' = R sqrt(N' / (N + M)),
// tau' = (tau + Phi) (R' / R)^2; and the pass's traced radiance added.
extern "C" __global__ void __launch_bounds__(SPPM_THREADS)
sppm_gather_update(const FrameParams* params, const GridView* grid, const Photon* photons,
                   u32 photon_count, const VisiblePoint* points, SppmPixel* pixels,
                   const float* radiance, u32 n, double alpha, unsigned long long* deposits) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    SppmPixel state = pixels[i];
    for (int a = 0; a < 3; ++a) state.traced[a] += (double)radiance[3ull * i + a];
    const VisiblePoint& v = points[i];
    if (v.valid && state.radius > 0.0 && photon_count > 0) {
        const FrameParams& p = *params;
        const Material& m = ((const Material*)p.materials)[v.material];
        const float r = (float)state.radius;
        const float r2 = r * r;
        const float3 x = load3(v.position), nrm = load3(v.normal);
        const float3 sn = load3(v.shading_normal), wo = load3(v.wo);
        const float3 weight = load3(v.weight), albedo = load3(v.albedo);
        float3 flux = make_float3(0.0f, 0.0f, 0.0f);
        u32 found = 0;
        photons_within(*grid, x, r, [&](float3 pos, u32 index) {
            if (dist2(x, pos) >= r2) return;
            const Photon& ph = photons[index];
            const float3 wi = octahedral_decode(ph.incoming);
            if (dot(wi, nrm) <= 0.0f) return;
            if (dot(octahedral_decode(ph.normal), nrm) < MIN_NORMAL_COS) return;
            flux = flux + weight * brdf(m, albedo, sn, wo, wi) * load3(ph.power);
            ++found;
        });
        if (found > 0) {
            const double kept = state.photons + alpha * (double)found;
            const double shrink2 = kept / (state.photons + (double)found);
            state.flux[0] = (state.flux[0] + (double)flux.x) * shrink2;
            state.flux[1] = (state.flux[1] + (double)flux.y) * shrink2;
            state.flux[2] = (state.flux[2] + (double)flux.z) * shrink2;
            state.radius *= sqrt(shrink2);
            state.photons = kept;
            atomicAdd(deposits, (unsigned long long)found);
        }
    }
    pixels[i] = state;
}

// PixelStats::film: traced / n + tau / (n pi R^2).
extern "C" __global__ void __launch_bounds__(SPPM_THREADS)
sppm_film(const SppmPixel* pixels, u32 n, u32 passes, float* out) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const SppmPixel s = pixels[i];
    const double count = passes > 0 ? (double)passes : 1.0;
    const double pi = 3.14159265358979323846;
    for (int a = 0; a < 3; ++a) {
        double l = s.traced[a] / count;
        if (s.radius > 0.0) l += s.flux[a] / (count * pi * s.radius * s.radius);
        out[3ull * i + a] = (float)l;
    }
}
