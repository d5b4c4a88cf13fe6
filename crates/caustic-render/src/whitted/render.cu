// whitted/render.cu: the wavefront Whitted renderer's kernels (Zeidan's
// thesis, chapter 5). The host (whitted/render_cuda.rs) runs, per bounce:
// trace (traverse_bvh2), whitted_shade, then compacts the child and shadow
// slots (compact.cu) and gathers them (compact_gather_wave,
// whitted_gather_shadows), traces the shadow rays any-hit and adds the
// unoccluded ones (whitted_shadow_add). Every step mirrors whitted/render.rs
// operation for operation, and draws the same counter-based random numbers
// (crate::draw), so the image equals the CPU's up to float rounding.
#include "scene.cuh"

#define WHITTED_THREADS 256u

// ------------------------------------------------------------ primary rays

// Slots from tile `first_tile` on (a team member's band of tile rows, as
// sppm_primary's): the slots of tiles first_tile.. are those a whole
// image's launch gives them, so the bands' waves are the image's wave cut
// in rank order.
extern "C" __global__ void __launch_bounds__(WHITTED_THREADS)
whitted_primary(const FrameParams* params, u32 first_tile, Ray* rays, Path* paths, u32 n) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const FrameParams& p = *params;
    u32 sample = i % p.spp, q = i / p.spp;
    u32 tiles_x = (p.width + 7u) / 8u;
    u32 tile = first_tile + q / 64u, m = q % 64u;
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
        store_ray(rays, i, empty_ray());
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
    store_ray(rays, i, make_ray(load3(p.eye), dir, 0.0f, CAUSTIC_INF));
    paths[i] = path;
}

// ------------------------------------------------------------ shading

// Whitted::branch: a child of weight `w` along `dir`, Russian roulette
// below the split threshold, written to child slot `slot` (0 or 1).
__device__ void emit_child(const FrameParams& p, const Surface& s, const Path& path, float3 tint,
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
    store_ray(out.child_rays, 2 * i + slot, make_ray(s.point + n * p.ray_epsilon, dir, 0.0f, CAUSTIC_INF));
    out.child_paths[2 * i + slot] = child;
    out.child_flags[2 * i + slot] = 1;
}

// Whitted::dielectric: the Fresnel split.
__device__ void shade_dielectric(const FrameParams& p, const Material& m, const Surface& s,
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

// Whitted::radiance for one wave of rays: emission and background into the
// framebuffer, specular children and shadow rays into their slots.
extern "C" __global__ void __launch_bounds__(WHITTED_THREADS)
whitted_shade(const FrameParams* params, const Ray* rays, const Hit* hits, const Path* paths,
              u32 n, u32 shadow_slots, Ray* child_rays, Path* child_paths, u32* child_flags,
              Ray* shadow_rays, float4* shadow_values, u32* shadow_flags) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const FrameParams& p = *params;
    ShadeOut out = {child_rays, child_paths, child_flags, shadow_rays, shadow_values, shadow_flags};
    child_flags[2 * i] = 0;
    child_flags[2 * i + 1] = 0;
    for (u32 k = 0; k < shadow_slots; ++k) shadow_flags[i * shadow_slots + k] = 0;
    const Path path = paths[i];
    if (path.pixel == NO_PIXEL) return;
    const Ray ray = load_ray(rays, i);
    const Hit hit = load_hit(hits, i);
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

// The kept shadow slots to the front.
extern "C" __global__ void __launch_bounds__(WHITTED_THREADS)
whitted_gather_shadows(const Ray* rays, const float4* values, const u32* indices, u32 n,
                       Ray* out_rays, float4* out_values) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    u32 from = indices[i];
    store_ray(out_rays, i, load_ray(rays, from));
    out_values[i] = values[from];
}

// Adds the contributions of the shadow rays that reached their light.
extern "C" __global__ void __launch_bounds__(WHITTED_THREADS)
whitted_shadow_add(const FrameParams* params, const u32* occluded, const float4* values, u32 n) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || occluded[i]) return;
    float4 v = values[i];
    splat(*params, __float_as_uint(v.w), make_float3(v.x, v.y, v.z));
}

// ------------------------------------------------------------ display

// The framebuffer as 8-bit sRGB, three bytes a pixel (image_io::srgb_bytes
// on the film download_film would give): each of the `values` sums
// averaged over `spp` samples, a non-finite average black, else scaled
// by `scale` (2^exposure) and encoded as the number of the 255 `steps`
// (image_io::srgb_step_table: the least linear value of each byte from 1
// on) at or below it. The same IEEE operations in the same order as the
// host's, so the bytes are the host's to the bit; a third of the f32
// frame's bytes cross the bus, and no host pass converts them.
extern "C" __global__ void __launch_bounds__(WHITTED_THREADS)
whitted_display_srgb(const float* sums, u32 values, float spp, float scale, const float* steps,
                     u8* out) {
    __shared__ float table[255];
    for (u32 t = threadIdx.x; t < 255u; t += blockDim.x) table[t] = steps[t];
    __syncthreads();
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= values) return;
    const float v = __fdiv_rn(sums[i], spp);
    u32 byte = 0;
    if (isfinite(v)) {
        // Steps ascend: the first one above the value is its count of
        // steps at or below (Rust's partition_point).
        const float x = __fmul_rn(v, scale);
        u32 lo = 0, hi = 255u;
        while (lo < hi) {
            const u32 mid = (lo + hi) / 2u;
            if (table[mid] <= x) {
                lo = mid + 1u;
            } else {
                hi = mid;
            }
        }
        byte = lo;
    }
    out[i] = (u8)byte;
}
