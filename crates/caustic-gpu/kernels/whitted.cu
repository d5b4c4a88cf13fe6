// whitted.cu: the wavefront Whitted renderer's kernels (Zeidan's thesis,
// chapter 5). The host (caustic-render's whitted_cuda.rs through caustic-gpu's
// whitted.rs) runs, per bounce: trace (traverse_bvh2), whitted_shade, then
// compacts the child and shadow slots (compact.cu) and gathers them
// (whitted_gather_*), traces the shadow rays any-hit and adds the unoccluded
// ones (whitted_shadow_add). Every step mirrors caustic-render's whitted.rs
// operation for operation, and draws the same counter-based random numbers
// (whitted::draw), so the image equals the CPU's up to float rounding.
#include "whitted.cuh"

#define WHITTED_THREADS 256u
#define SPLIT_THRESHOLD 0.05f
#define PI_F 3.14159265358979323846f
#define FRAC_1_PI_F 0.318309886183790671538f
#define DRAW_CAMERA 1ull
#define DRAW_ROULETTE 2ull
#define DRAW_LIGHT 3ull
#define BRANCH_REFLECT 0ull
#define BRANCH_REFRACT 1ull

// ------------------------------------------------------------ random numbers

// whitted::draw in caustic-render: SplitMix64 keys seeding PCG32.
__device__ __forceinline__ u64 fmix64(u64 z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
__device__ __forceinline__ u64 mix_key(u64 key, u64 value) {
    return fmix64(key ^ fmix64(value + 0x9e3779b97f4a7c15ull));
}

struct Pcg {
    u64 state;
    u64 inc;
};
__device__ __forceinline__ u32 pcg_next(Pcg& g) {
    u64 old = g.state;
    g.state = old * 6364136223846793005ull + g.inc;
    u32 xorshifted = (u32)(((old >> 18) ^ old) >> 27);
    u32 rot = (u32)(old >> 59);
    return (xorshifted >> rot) | (xorshifted << ((32u - rot) & 31u));
}
__device__ __forceinline__ Pcg pcg_new(u64 initstate, u64 initseq) {
    Pcg g;
    g.state = 0;
    g.inc = (initseq << 1) | 1ull;
    pcg_next(g);
    g.state += initstate;
    pcg_next(g);
    return g;
}
__device__ __forceinline__ float pcg_f32(Pcg& g) {
    return (float)(pcg_next(g) >> 8) * (1.0f / 16777216.0f);
}

// ------------------------------------------------------------ vector helpers

__device__ __forceinline__ float3 load3(const float* v) { return make_float3(v[0], v[1], v[2]); }
__device__ __forceinline__ void store3(float* out, float3 v) {
    out[0] = v.x;
    out[1] = v.y;
    out[2] = v.z;
}
__device__ __forceinline__ float3 neg(float3 v) { return make_float3(-v.x, -v.y, -v.z); }
__device__ __forceinline__ float3 div3(float3 v, float s) {
    return make_float3(v.x / s, v.y / s, v.z / s);
}
// glam's normalize: multiply by the reciprocal length.
__device__ __forceinline__ float3 normalize(float3 v) { return v * (1.0f / sqrtf(dot(v, v))); }
__device__ __forceinline__ float3 face_towards(float3 v, float3 towards) {
    return dot(v, towards) < 0.0f ? neg(v) : v;
}
__device__ __forceinline__ float3 reflect(float3 d, float3 n) { return d - n * (2.0f * dot(d, n)); }
__device__ __forceinline__ bool is_black(float3 c) { return c.x == 0.0f && c.y == 0.0f && c.z == 0.0f; }

__device__ __forceinline__ Ray make_ray(float3 origin, float3 dir, float tmin, float tmax) {
    Ray r;
    store3(r.origin, origin);
    store3(r.dir, dir);
    r.tmin = tmin;
    r.tmax = tmax;
    return r;
}

// ------------------------------------------------------------ surfaces

struct Surface {
    float3 point;
    float3 geometric_normal;
    float3 shading_normal;
    float u, v; // texture coordinates
    u32 material;
};

__device__ __forceinline__ float3 tri_vertex(const Triangle& t, int i) {
    return i == 0 ? load3(t.v0) : (i == 1 ? load3(t.v1) : load3(t.v2));
}

// Triangle::normal (try_normalize), Z for a degenerate triangle.
__device__ float3 geometric_normal(const Triangle& t) {
    float3 c = cross(tri_vertex(t, 1) - tri_vertex(t, 0), tri_vertex(t, 2) - tri_vertex(t, 0));
    float rcp = 1.0f / sqrtf(dot(c, c));
    return (isfinite(rcp) && rcp > 0.0f) ? c * rcp : make_float3(0.0f, 0.0f, 1.0f);
}

// RenderScene::surface.
__device__ Surface surface_at(const WhittedParams& p, const Ray& ray, const Hit& hit) {
    const Triangle& tri = ((const Triangle*)p.triangles)[hit.prim];
    const Shading& sh = ((const Shading*)p.shading)[hit.prim];
    Surface s;
    s.geometric_normal = geometric_normal(tri);
    float w = 1.0f - hit.u - hit.v;
    s.shading_normal = s.geometric_normal;
    if (sh.flags & 1u) {
        float3 n = load3(sh.normals) * w + load3(sh.normals + 3) * hit.u + load3(sh.normals + 6) * hit.v;
        float len2 = dot(n, n);
        float rcp = 1.0f / sqrtf(len2);
        n = (isfinite(rcp) && rcp > 0.0f) ? n * rcp : make_float3(0.0f, 0.0f, 0.0f);
        float d = dot(n, s.geometric_normal);
        if (d > 0.0f) s.shading_normal = n;
        else if (d < 0.0f) s.shading_normal = neg(n);
    }
    if (sh.flags & 2u) {
        s.u = w * sh.uvs[0] + hit.u * sh.uvs[2] + hit.v * sh.uvs[4];
        s.v = w * sh.uvs[1] + hit.u * sh.uvs[3] + hit.v * sh.uvs[5];
    } else {
        s.u = hit.u;
        s.v = hit.v;
    }
    s.point = load3(ray.origin) + load3(ray.dir) * hit.t;
    s.material = sh.material;
    return s;
}

// Texture::sample: bilinear with wrapping, v up.
__device__ float3 texture_sample(const WhittedParams& p, u32 index, float u, float v) {
    const Texture& tex = ((const Texture*)p.textures)[index];
    const float* texels = (const float*)p.texels + 3ull * tex.offset;
    if (tex.width == 0 || tex.height == 0) return make_float3(0.0f, 0.0f, 0.0f);
    float x = u * (float)tex.width - 0.5f;
    float y = (1.0f - v) * (float)tex.height - 0.5f;
    if (!isfinite(x) || !isfinite(y)) return load3(texels);
    float x0 = floorf(x), y0 = floorf(y);
    float fx = x - x0, fy = y - y0;
    long long w = tex.width, h = tex.height;
    long long xi = (long long)x0, yi = (long long)y0;
    auto texel = [&](long long a, long long b) {
        long long xa = ((a % w) + w) % w, yb = ((b % h) + h) % h;
        return load3(texels + 3 * (yb * w + xa));
    };
    float3 top = texel(xi, yi) * (1.0f - fx) + texel(xi + 1, yi) * fx;
    float3 bottom = texel(xi, yi + 1) * (1.0f - fx) + texel(xi + 1, yi + 1) * fx;
    return top * (1.0f - fy) + bottom * fy;
}

__device__ float3 albedo_at(const WhittedParams& p, const Material& m, const Surface& s) {
    float3 albedo = load3(m.color);
    if (m.texture == NO_TEXTURE) return albedo;
    return texture_sample(p, m.texture, s.u, s.v) * albedo;
}

// ------------------------------------------------------------ Fresnel

__device__ float fresnel_dielectric(float cos_i, float eta) {
    cos_i = fminf(fmaxf(cos_i, 0.0f), 1.0f);
    float sin2_t = eta * eta * (1.0f - cos_i * cos_i);
    if (sin2_t >= 1.0f) return 1.0f;
    float cos_t = sqrtf(1.0f - sin2_t);
    float r_s = (eta * cos_i - cos_t) / (eta * cos_i + cos_t);
    float r_p = (cos_i - eta * cos_t) / (cos_i + eta * cos_t);
    return 0.5f * (r_s * r_s + r_p * r_p);
}

__device__ float fresnel_schlick(float cos_i, float eta) {
    cos_i = fminf(fmaxf(cos_i, 0.0f), 1.0f);
    float sin2_t = eta * eta * (1.0f - cos_i * cos_i);
    if (sin2_t >= 1.0f) return 1.0f;
    float c = eta > 1.0f ? sqrtf(1.0f - sin2_t) : cos_i;
    float r0 = (eta - 1.0f) / (eta + 1.0f);
    r0 = r0 * r0;
    float m = 1.0f - c;
    return r0 + (1.0f - r0) * (m * m * m * m * m);
}

// bsdf::refract; false on total internal reflection.
__device__ bool refract(float3 d, float3 n, float eta, float3& out) {
    float cos_i = -dot(d, n);
    float sin2_t = eta * eta * fmaxf(1.0f - cos_i * cos_i, 0.0f);
    if (sin2_t >= 1.0f) return false;
    float cos_t = sqrtf(1.0f - sin2_t);
    out = normalize(d * eta + n * (eta * cos_i - cos_t));
    return true;
}

// ------------------------------------------------------------ framebuffer

__device__ __forceinline__ void splat(const WhittedParams& p, u32 pixel, float3 c) {
    if (is_black(c)) return;
    float* fb = (float*)p.framebuffer + 3ull * pixel;
    atomicAdd(fb, c.x);
    atomicAdd(fb + 1, c.y);
    atomicAdd(fb + 2, c.z);
}

// ------------------------------------------------------------ primary rays

// Pixel of primary slot q: 8x8 tiles in row-major order, Morton order
// inside a tile, so neighbouring threads trace neighbouring pixels.
__device__ __forceinline__ u32 compact_bits(u32 v) {
    v &= 0x55555555u;
    v = (v | (v >> 1)) & 0x33333333u;
    v = (v | (v >> 2)) & 0x0f0f0f0fu;
    return v;
}

extern "C" __global__ void __launch_bounds__(WHITTED_THREADS)
whitted_primary(const WhittedParams* params, Ray* rays, Path* paths, u32 n) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const WhittedParams& p = *params;
    u32 sample = i % p.spp, q = i / p.spp;
    u32 tiles_x = (p.width + 7u) / 8u;
    u32 tile = q / 64u, m = q % 64u;
    u32 x = (tile % tiles_x) * 8u + compact_bits(m);
    u32 y = (tile / tiles_x) * 8u + compact_bits(m >> 1);
    Path path;
    path.depth = 0;
    path.pad = 0;
    if (x >= p.width || y >= p.height) {
        // Padding of a partial tile: an empty interval misses, and the
        // shader ignores NO_PIXEL.
        path.pixel = NO_PIXEL;
        path.key = 0;
        store3(path.weight, make_float3(0.0f, 0.0f, 0.0f));
        rays[i] = make_ray(make_float3(0.0f, 0.0f, 0.0f), make_float3(0.0f, 0.0f, 1.0f), 1.0f, 0.0f);
        paths[i] = path;
        return;
    }
    path.pixel = y * p.width + x;
    path.key = mix_key(mix_key(p.seed, (u64)path.pixel), (u64)sample);
    store3(path.weight, make_float3(1.0f, 1.0f, 1.0f));
    u32 grid = (u32)sqrtf((float)p.spp);
    float ox = 0.5f, oy = 0.5f;
    if (p.spp != 1) {
        Pcg g = pcg_new(path.key, DRAW_CAMERA);
        ox = pcg_f32(g);
        oy = pcg_f32(g);
        if (grid * grid == p.spp) {
            ox = ((float)(sample % grid) + ox) / (float)grid;
            oy = ((float)(sample / grid) + oy) / (float)grid;
        }
    }
    // PinholeCamera::ray.
    float sx = 2.0f * ((float)x + ox) / (float)p.width - 1.0f;
    float sy = 1.0f - 2.0f * ((float)y + oy) / (float)p.height;
    float3 dir = normalize(load3(p.forward) + load3(p.right) * sx + load3(p.up) * sy);
    rays[i] = make_ray(load3(p.eye), dir, 0.0f, CAUSTIC_INF);
    paths[i] = path;
}

// ------------------------------------------------------------ shading

// Outputs of one shading thread: two child slots and `shadow_slots`
// shadow slots per path, each with a flag for the compaction.
struct ShadeOut {
    Ray* child_rays;
    Path* child_paths;
    u32* child_flags;
    Ray* shadow_rays;
    float4* shadow_values; // xyz: contribution, w: pixel (bits)
    u32* shadow_flags;
};

// Whitted::branch: a child of weight `w` along `dir`, Russian roulette
// below the split threshold, written to child slot `slot` (0 or 1).
__device__ void emit_child(const WhittedParams& p, const Surface& s, const Path& path, float3 tint,
                           float3 dir, float w, u64 branch, u32 i, u32 slot, ShadeOut& out) {
    u64 key = mix_key(path.key, branch);
    if (w < SPLIT_THRESHOLD) {
        Pcg g = pcg_new(key, DRAW_ROULETTE);
        if (!(pcg_f32(g) * SPLIT_THRESHOLD < w)) return;
        w = SPLIT_THRESHOLD;
    }
    float3 n = face_towards(s.geometric_normal, dir);
    Path child;
    child.key = key;
    store3(child.weight, load3(path.weight) * tint * w);
    child.pixel = path.pixel;
    child.depth = path.depth + 1;
    child.pad = 0;
    out.child_rays[2 * i + slot] = make_ray(s.point + n * p.ray_epsilon, dir, 0.0f, CAUSTIC_INF);
    out.child_paths[2 * i + slot] = child;
    out.child_flags[2 * i + slot] = 1;
}

// Whitted::dielectric: the Fresnel split.
__device__ void shade_dielectric(const WhittedParams& p, const Material& m, const Surface& s,
                                 float3 d, const Path& path, u32 i, ShadeOut& out) {
    if (path.depth >= p.max_depth) return;
    bool entering = dot(s.geometric_normal, d) < 0.0f;
    float3 n = entering ? s.shading_normal : neg(s.shading_normal);
    float eta = entering ? 1.0f / m.ior : m.ior;
    float cos_i = fmaxf(-dot(d, n), 0.0f);
    float r = p.schlick ? fresnel_schlick(cos_i, eta) : fresnel_dielectric(cos_i, eta);
    float3 tint = load3(m.color);
    if (r > 0.0f) emit_child(p, s, path, tint, reflect(d, n), r, BRANCH_REFLECT, i, 0, out);
    float3 t;
    if (r < 1.0f && refract(d, n, eta, t)) {
        emit_child(p, s, path, tint, t, 1.0f - r, BRANCH_REFRACT, i, 1, out);
    }
}

// Whitted::direct_light's BRDF.
__device__ float3 brdf(const Material& m, float3 albedo, float3 n, float3 wo, float3 wi) {
    float3 diffuse = albedo * FRAC_1_PI_F;
    if (m.kind != MAT_GLOSSY) return diffuse;
    float cos_alpha = fmaxf(dot(reflect(neg(wi), n), wo), 0.0f);
    float3 lobe = div3(load3(m.specular) * (m.exponent + 2.0f), 2.0f * PI_F);
    return diffuse + lobe * powf(cos_alpha, m.exponent);
}

// analytic_light: direction, distance and irradiance at `point`.
__device__ bool analytic_light(const Light& l, float3 point, float3& wi, float& dist, float3& incident) {
    float3 intensity = load3(l.intensity);
    if (l.kind == LIGHT_DIRECTIONAL) {
        wi = neg(load3(l.direction));
        dist = CAUSTIC_INF;
        incident = intensity;
        return true;
    }
    float3 d = load3(l.position) - point;
    float dist2 = dot(d, d);
    if (dist2 <= 0.0f) return false;
    dist = sqrtf(dist2);
    wi = div3(d, dist);
    float falloff = 1.0f;
    if (l.kind == LIGHT_SPOT) {
        float c = dot(load3(l.direction), neg(wi));
        if (c >= l.cos_start) falloff = 1.0f;
        else if (c <= l.cos_width) falloff = 0.0f;
        else {
            float x = (c - l.cos_width) / (l.cos_start - l.cos_width);
            falloff = x * x * (3.0f - 2.0f * x);
        }
        if (!(falloff > 0.0f)) return false;
        incident = div3(intensity * falloff, dist2);
    } else {
        incident = div3(intensity, dist2);
    }
    return true;
}

// AreaLight::sample: the triangle by area (first cdf entry above u.x), the
// point uniformly inside it.
__device__ void area_sample(const WhittedParams& p, const AreaLight& l, float ux, float uy,
                            float3& point, float3& normal) {
    const float* cdf = (const float*)p.light_cdf + l.first;
    u32 lo_i = 0, hi_i = l.count;
    while (lo_i < hi_i) {
        u32 mid = (lo_i + hi_i) / 2;
        if (cdf[mid] <= ux) lo_i = mid + 1;
        else hi_i = mid;
    }
    u32 idx = lo_i < l.count - 1 ? lo_i : l.count - 1;
    float lo = idx == 0 ? 0.0f : cdf[idx - 1];
    float hi = cdf[idx];
    float x = 0.5f;
    if (hi > lo) x = fminf(fmaxf((ux - lo) / (hi - lo), 0.0f), 1.0f - 1.1920929e-7f);
    u32 id = ((const u32*)p.light_tris)[l.first + idx];
    const Triangle& tri = ((const Triangle*)p.triangles)[id];
    float su = sqrtf(x);
    float bu = 1.0f - su, bv = uy * su;
    point = tri_vertex(tri, 0) * (1.0f - bu - bv) + tri_vertex(tri, 1) * bu + tri_vertex(tri, 2) * bv;
    normal = geometric_normal(tri);
}

// Whitted::direct_light: one shadow slot per analytic light, then
// `light_samples` per area light; flags mark the slots worth tracing.
__device__ void shade_direct(const WhittedParams& p, const Material& m, const Surface& s, float3 d,
                             const Path& path, u32 i, u32 slots, ShadeOut& out) {
    float3 wo = neg(d);
    float3 ng = face_towards(s.geometric_normal, wo);
    float3 n = face_towards(s.shading_normal, wo);
    float3 albedo = albedo_at(p, m, s);
    float3 origin = s.point + ng * p.ray_epsilon;
    float3 weight = load3(path.weight);
    float pixel = __uint_as_float(path.pixel);
    u32 slot = i * slots;
    for (u32 j = 0; j < p.light_count; ++j, ++slot) {
        float3 wi, incident;
        float dist;
        if (!analytic_light(((const Light*)p.lights)[j], s.point, wi, dist, incident)) continue;
        float c = dot(n, wi);
        if (c <= 0.0f || dot(ng, wi) <= 0.0f) continue;
        float3 value = weight * (brdf(m, albedo, n, wo, wi) * incident * c);
        out.shadow_rays[slot] = make_ray(origin, wi, 0.0f, dist * (1.0f - 1e-4f));
        out.shadow_values[slot] = make_float4(value.x, value.y, value.z, pixel);
        out.shadow_flags[slot] = 1;
    }
    u32 samples = p.light_samples;
    for (u32 a = 0; a < p.area_count; ++a) {
        const AreaLight& l = ((const AreaLight*)p.area_lights)[a];
        for (u32 k = 0; k < samples; ++k, ++slot) {
            Pcg g = pcg_new(mix_key(path.key, (u64)a * samples + k), DRAW_LIGHT);
            float ux = pcg_f32(g);
            float uy = pcg_f32(g);
            ux = ((float)k + ux) / (float)samples;
            float3 lp, ln;
            area_sample(p, l, ux, uy, lp, ln);
            float3 to_light = lp - origin;
            float dist2 = dot(to_light, to_light);
            float3 wi = div3(to_light, sqrtf(dist2));
            float c = dot(n, wi);
            float cos_light = fabsf(dot(ln, neg(wi)));
            bool lit = l.two_sided || dot(ln, neg(wi)) > 0.0f;
            float3 emitted = load3(l.emission);
            if (c <= 0.0f || dot(ng, wi) <= 0.0f || !lit || is_black(emitted) || dist2 == 0.0f) continue;
            float pdf = 1.0f / l.total_area;
            float3 f = brdf(m, albedo, n, wo, wi) * emitted * (c * cos_light / (dist2 * pdf));
            float3 value = weight * div3(f, (float)samples);
            out.shadow_rays[slot] = make_ray(origin, to_light, 0.0f, 1.0f - 1e-4f);
            out.shadow_values[slot] = make_float4(value.x, value.y, value.z, pixel);
            out.shadow_flags[slot] = 1;
        }
    }
}

// Whitted::radiance for one wave of rays: emission and background into the
// framebuffer, specular children and shadow rays into their slots.
extern "C" __global__ void __launch_bounds__(WHITTED_THREADS)
whitted_shade(const WhittedParams* params, const Ray* rays, const Hit* hits, const Path* paths,
              u32 n, u32 shadow_slots, Ray* child_rays, Path* child_paths, u32* child_flags,
              Ray* shadow_rays, float4* shadow_values, u32* shadow_flags) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const WhittedParams& p = *params;
    ShadeOut out = {child_rays, child_paths, child_flags, shadow_rays, shadow_values, shadow_flags};
    child_flags[2 * i] = 0;
    child_flags[2 * i + 1] = 0;
    for (u32 k = 0; k < shadow_slots; ++k) shadow_flags[i * shadow_slots + k] = 0;
    const Path path = paths[i];
    if (path.pixel == NO_PIXEL) return;
    const Ray ray = rays[i];
    const Hit hit = hits[i];
    float3 weight = load3(path.weight);
    if (hit.prim == NO_HIT) {
        splat(p, path.pixel, weight * load3(p.background));
        return;
    }
    Surface s = surface_at(p, ray, hit);
    const Material& m = ((const Material*)p.materials)[s.material];
    float3 d = load3(ray.dir);
    bool front = dot(s.geometric_normal, d) < 0.0f;
    bool visible = front || m.two_sided;
    if (visible) splat(p, path.pixel, weight * load3(m.emission));
    if (m.kind == MAT_DIELECTRIC) {
        shade_dielectric(p, m, s, d, path, i, out);
    } else if (m.kind == MAT_MIRROR) {
        if (visible && path.depth < p.max_depth) {
            float3 n = face_towards(s.shading_normal, neg(d));
            emit_child(p, s, path, load3(m.color), reflect(d, n), 1.0f, BRANCH_REFLECT, i, 0, out);
        }
    } else if (visible) {
        shade_direct(p, m, s, d, path, i, shadow_slots, out);
    }
}

// ------------------------------------------------------------ compaction

// The kept child slots (indices from compact_select_indices) to the front.
extern "C" __global__ void __launch_bounds__(WHITTED_THREADS)
whitted_gather_paths(const Ray* rays, const Path* paths, const u32* indices, u32 n, Ray* out_rays,
                     Path* out_paths) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    u32 from = indices[i];
    out_rays[i] = rays[from];
    out_paths[i] = paths[from];
}

// The kept shadow slots to the front.
extern "C" __global__ void __launch_bounds__(WHITTED_THREADS)
whitted_gather_shadows(const Ray* rays, const float4* values, const u32* indices, u32 n,
                       Ray* out_rays, float4* out_values) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    u32 from = indices[i];
    out_rays[i] = rays[from];
    out_values[i] = values[from];
}

// Adds the contributions of the shadow rays that reached their light.
extern "C" __global__ void __launch_bounds__(WHITTED_THREADS)
whitted_shadow_add(const WhittedParams* params, const u32* occluded, const float4* values, u32 n) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || occluded[i]) return;
    float4 v = values[i];
    splat(*params, __float_as_uint(v.w), make_float3(v.x, v.y, v.z));
}
