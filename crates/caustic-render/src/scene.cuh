// scene.cuh: the GPU scene every renderer's kernels share (whitted/render.cu,
// photon/*.cu, sppm/renderer.cu): its records, each checked field by field
// against its Rust twin in caustic-render's scene_cuda.rs through the
// generated render_layout.cuh; surfaces at a hit (RenderScene::surface),
// textures, Fresnel, refraction, the BRDF, the analytic and area lights'
// sampling, and the framebuffer splat. Each function names the Rust
// function it mirrors operation for operation.
#pragma once
#include "bvh.cuh"
#include "draw.cuh"
#include "render_layout.cuh"

// Whitted's split threshold and constants.
#define SPLIT_THRESHOLD 0.05f
#define PI_F 3.14159265358979323846f
#define FRAC_1_PI_F 0.318309886183790671538f

// ------------------------------------------------------------ records

// caustic_render::scene_cuda::GpuPath: one live ray of the specular tree.
// 16-byte aligned, as the photon mapper's records (photon.cuh): a copy is
// then two 16-byte accesses, not four 8-byte ones, each of which is its
// own L2 request where the slots are strided (whitted_shade's children).
struct alignas(16) Path {
    u64 key;         // counter-based RNG key of this tree vertex
    float weight[3]; // product of the BSDF weights from the eye
    u32 pixel;       // y * width + x, or NO_PIXEL for padding
    u32 depth;       // specular bounces before this ray
    u32 pad;
};
CAUSTIC_CHECK_SIZE(Path);
CAUSTIC_CHECK_FIELD(Path, key);
CAUSTIC_CHECK_FIELD(Path, weight);
CAUSTIC_CHECK_FIELD(Path, pixel);
CAUSTIC_CHECK_FIELD(Path, depth);

// caustic_render::scene_cuda::GpuMaterial; `kind` is one of the MAT_* values.
struct Material {
    float emission[3];
    u32 kind;
    float color[3]; // albedo, mirror reflectance or dielectric tint
    u32 two_sided;
    float specular[3];
    float exponent;
    float ior;
    u32 texture; // NO_TEXTURE or an index into the textures
    u32 pad[2];
};
CAUSTIC_CHECK_SIZE(Material);
CAUSTIC_CHECK_FIELD(Material, emission);
CAUSTIC_CHECK_FIELD(Material, kind);
CAUSTIC_CHECK_FIELD(Material, color);
CAUSTIC_CHECK_FIELD(Material, two_sided);
CAUSTIC_CHECK_FIELD(Material, specular);
CAUSTIC_CHECK_FIELD(Material, exponent);
CAUSTIC_CHECK_FIELD(Material, ior);
CAUSTIC_CHECK_FIELD(Material, texture);

#define MAT_DIFFUSE 0u
#define MAT_GLOSSY 1u
#define MAT_MIRROR 2u
#define MAT_DIELECTRIC 3u
#define NO_TEXTURE 0xffffffffu
#define NO_PIXEL 0xffffffffu

// caustic_render::scene_cuda::GpuShading: per-triangle shading attributes in
// scene numbering; `flags` bit 0: normals present, bit 1: uvs present.
struct Shading {
    float normals[9];
    float uvs[6];
    u32 material;
    u32 flags;
};
CAUSTIC_CHECK_SIZE(Shading);
CAUSTIC_CHECK_FIELD(Shading, normals);
CAUSTIC_CHECK_FIELD(Shading, uvs);
CAUSTIC_CHECK_FIELD(Shading, material);
CAUSTIC_CHECK_FIELD(Shading, flags);

// caustic_render::scene_cuda::GpuLight: a point, spot or directional light.
struct Light {
    float position[3];
    u32 kind; // LIGHT_*
    float direction[3];
    float cos_start;
    float intensity[3]; // intensity, or irradiance for directional lights
    float cos_width;
};
CAUSTIC_CHECK_SIZE(Light);
CAUSTIC_CHECK_FIELD(Light, position);
CAUSTIC_CHECK_FIELD(Light, kind);
CAUSTIC_CHECK_FIELD(Light, direction);
CAUSTIC_CHECK_FIELD(Light, cos_start);
CAUSTIC_CHECK_FIELD(Light, intensity);
CAUSTIC_CHECK_FIELD(Light, cos_width);

#define LIGHT_POINT 0u
#define LIGHT_SPOT 1u
#define LIGHT_DIRECTIONAL 2u

// caustic_render::scene_cuda::GpuAreaLight: triangles first .. first + count of
// the light triangle and cdf arrays.
struct AreaLight {
    float emission[3];
    u32 two_sided;
    u32 first;
    u32 count;
    float total_area;
    u32 pad;
};
CAUSTIC_CHECK_SIZE(AreaLight);
CAUSTIC_CHECK_FIELD(AreaLight, emission);
CAUSTIC_CHECK_FIELD(AreaLight, two_sided);
CAUSTIC_CHECK_FIELD(AreaLight, first);
CAUSTIC_CHECK_FIELD(AreaLight, count);
CAUSTIC_CHECK_FIELD(AreaLight, total_area);

// caustic_render::scene_cuda::GpuTexture: texels offset .. offset + width * height.
struct Texture {
    u32 offset;
    u32 width;
    u32 height;
    u32 pad;
};
CAUSTIC_CHECK_SIZE(Texture);
CAUSTIC_CHECK_FIELD(Texture, offset);
CAUSTIC_CHECK_FIELD(Texture, width);
CAUSTIC_CHECK_FIELD(Texture, height);

// caustic_render::scene_cuda::FrameParams: the settings, the camera and the
// device addresses of every scene array, in one record.
struct FrameParams {
    u64 triangles;   // Triangle[], scene numbering
    u64 shading;     // Shading[]
    u64 materials;   // Material[]
    u64 lights;      // Light[]
    u64 area_lights; // AreaLight[]
    u64 light_tris;  // u32[]: scene ids of the area lights' triangles
    u64 light_cdf;   // float[]: their normalised running area
    u64 textures;    // Texture[]
    u64 texels;      // float[3 * texels]
    u64 framebuffer; // float[3 * width * height], sums over samples
    u64 seed;
    float eye[3];
    float ray_epsilon;
    float forward[3];
    u32 width;
    float right[3];
    u32 height;
    float up[3];
    u32 spp;
    float background[3];
    u32 max_depth;
    u32 light_samples;
    u32 light_count;
    u32 area_count;
    u32 schlick;
};
CAUSTIC_CHECK_SIZE(FrameParams);
CAUSTIC_CHECK_FIELD(FrameParams, triangles);
CAUSTIC_CHECK_FIELD(FrameParams, framebuffer);
CAUSTIC_CHECK_FIELD(FrameParams, seed);
CAUSTIC_CHECK_FIELD(FrameParams, eye);
CAUSTIC_CHECK_FIELD(FrameParams, ray_epsilon);
CAUSTIC_CHECK_FIELD(FrameParams, width);
CAUSTIC_CHECK_FIELD(FrameParams, height);
CAUSTIC_CHECK_FIELD(FrameParams, spp);
CAUSTIC_CHECK_FIELD(FrameParams, background);
CAUSTIC_CHECK_FIELD(FrameParams, max_depth);
CAUSTIC_CHECK_FIELD(FrameParams, light_samples);
CAUSTIC_CHECK_FIELD(FrameParams, light_count);
CAUSTIC_CHECK_FIELD(FrameParams, area_count);
CAUSTIC_CHECK_FIELD(FrameParams, schlick);

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

// A slot's ray that traces nothing (its interval (1, 0) is empty): what a
// wave writes where a path has no ray this step.
__device__ __forceinline__ Ray empty_ray() {
    return make_ray(make_float3(0.0f, 0.0f, 0.0f), make_float3(0.0f, 0.0f, 1.0f), 1.0f, 0.0f);
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
__device__ Surface surface_at(const FrameParams& p, const Ray& ray, const Hit& hit) {
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
__device__ float3 texture_sample(const FrameParams& p, u32 index, float u, float v) {
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

__device__ float3 albedo_at(const FrameParams& p, const Material& m, const Surface& s) {
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

__device__ __forceinline__ void splat(const FrameParams& p, u32 pixel, float3 c) {
    if (is_black(c)) return;
    float* fb = (float*)p.framebuffer + 3ull * pixel;
    atomicAdd(fb, c.x);
    atomicAdd(fb + 1, c.y);
    atomicAdd(fb + 2, c.z);
}

// ------------------------------------------------------------ pixel order

// Pixel of primary slot q: 8x8 tiles in row-major order, Morton order
// inside a tile, so neighbouring threads trace neighbouring pixels.
__device__ __forceinline__ u32 compact_bits(u32 v) {
    v &= 0x55555555u;
    v = (v | (v >> 1)) & 0x33333333u;
    v = (v | (v >> 2)) & 0x0f0f0f0fu;
    return v;
}

// ------------------------------------------------------------ shading

// Whitted::direct_light's BRDF.
__device__ float3 brdf(const Material& m, float3 albedo, float3 n, float3 wo, float3 wi) {
    float3 diffuse = albedo * FRAC_1_PI_F;
    if (m.kind != MAT_GLOSSY) return diffuse;
    float cos_alpha = fmaxf(dot(reflect(neg(wi), n), wo), 0.0f);
    float3 lobe = div3(load3(m.specular) * (m.exponent + 2.0f), 2.0f * PI_F);
    return diffuse + lobe * powf(cos_alpha, m.exponent);
}

// Light::spot_falloff: 1 inside the inner cone, 0 outside the outer one,
// smoothstep between.
__device__ __forceinline__ float spot_falloff(float c, float cos_start, float cos_width) {
    if (c >= cos_start) return 1.0f;
    if (c <= cos_width) return 0.0f;
    float x = (c - cos_width) / (cos_start - cos_width);
    return x * x * (3.0f - 2.0f * x);
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
        falloff = spot_falloff(dot(load3(l.direction), neg(wi)), l.cos_start, l.cos_width);
        if (!(falloff > 0.0f)) return false;
        incident = div3(intensity * falloff, dist2);
    } else {
        incident = div3(intensity, dist2);
    }
    return true;
}

// AreaLight::sample: the triangle by area (first cdf entry above u.x), the
// point uniformly inside it.
__device__ void area_sample(const FrameParams& p, const AreaLight& l, float ux, float uy,
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

// Whitted::direct_light: one shadow slot per analytic light, then
// `light_samples` per area light; flags mark the slots worth tracing.
__device__ void shade_direct(const FrameParams& p, const Material& m, const Surface& s, float3 d,
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
        store_ray(out.shadow_rays, slot, make_ray(origin, wi, 0.0f, dist * (1.0f - 1e-4f)));
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
            store_ray(out.shadow_rays, slot, make_ray(origin, to_light, 0.0f, 1.0f - 1e-4f));
            out.shadow_values[slot] = make_float4(value.x, value.y, value.z, pixel);
            out.shadow_flags[slot] = 1;
        }
    }
}

