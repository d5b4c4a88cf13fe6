// slab_ray.cuh: slab_ray.rs's SlabRay on the device, the per-ray constants
// of the exact culling rules that the spatial subdivisions share (the grid's
// 3D-DDA, dda.cu; the kd-tree's traversal, kdtree/traverse.cu; DACRT,
// dacrt/taskpool.cu). slab_ray.rs's module docs give the argument: a ray is
// `delta` thick when deciding which cells it crosses, and only the depth
// slab of a box of whole triangles bounds the t they report. The arithmetic
// is the CPU's, rounding for rounding (every product that meets a sum is an
// _rn intrinsic, which NVRTC never fuses).
#pragma once
#include "bvh.cuh"

struct SlabRay {
    float3 o, d, inv;
    // Bit k: the direction has no finite reciprocal on axis k.
    u32 parallel;
    // Bit k: the ray runs towards smaller coordinates on axis k.
    u32 negative;
    float delta;
    u32 depth;
};

__device__ __forceinline__ bool bit(u32 bits, u32 k) { return (bits >> k) & 1u; }

__device__ __forceinline__ SlabRay slab_ray_new(float3 o, float3 d, float scale) {
    SlabRay r;
    r.o = o;
    r.d = d;
    r.inv = make_float3(__frcp_rn(d.x), __frcp_rn(d.y), __frcp_rn(d.z));
    r.parallel = (fabsf(r.inv.x) < CAUSTIC_INF ? 0u : 1u) | (fabsf(r.inv.y) < CAUSTIC_INF ? 0u : 2u) |
                 (fabsf(r.inv.z) < CAUSTIC_INF ? 0u : 4u);
    r.negative = (d.x < 0.0f ? 1u : 0u) | (d.y < 0.0f ? 2u : 0u) | (d.z < 0.0f ? 4u : 0u);
    // TOLERANCE * (scale + origin.abs().max_element()), with glam's max
    // (`a > b ? a : b`).
    const float ax = fabsf(o.x), ay = fabsf(o.y), az = fabsf(o.z);
    const float xy = ax > ay ? ax : ay;
    const float far = xy > az ? xy : az;
    r.delta = __fmul_rn(1.0f / 262144.0f, __fadd_rn(scale, far));
    r.depth = dominant_axis(d);
    return r;
}

// The t at which the ray reaches coordinate x on its depth axis.
__device__ __forceinline__ float depth_t(const SlabRay& r, float x) {
    return __fmul_rn(__fsub_rn(x, component(r.o, r.depth)), component(r.inv, r.depth));
}
__device__ __forceinline__ float t_below(float t) {
    return __fsub_rn(t, __fmul_rn(fabsf(t), BVH_SLACK));
}
__device__ __forceinline__ float t_above(float t) {
    return __fadd_rn(t, __fmul_rn(fabsf(t), BVH_SLACK));
}

// SlabRay::clip_to: the line's interval inside (bmin, bmax) grown by `grow`.
__device__ __forceinline__ bool clip_to(const SlabRay& r, float3 bmin, float3 bmax, float grow,
                                        float& lo, float& hi) {
    lo = -CAUSTIC_INF;
    hi = CAUSTIC_INF;
#pragma unroll
    for (u32 k = 0; k < 3; ++k) {
        const float mn = __fsub_rn(component(bmin, k), grow);
        const float mx = __fadd_rn(component(bmax, k), grow);
        const float o = component(r.o, k);
        if (bit(r.parallel, k)) {
            if (!(mn <= o && o <= mx)) return false;
            continue;
        }
        const float a = __fmul_rn(__fsub_rn(mn, o), component(r.inv, k));
        const float b = __fmul_rn(__fsub_rn(mx, o), component(r.inv, k));
        // f32::min / max: NaN loses.
        lo = fmaxf(lo, fminf(a, b));
        hi = fminf(hi, fmaxf(a, b));
    }
    return lo <= hi;
}

// SlabRay::reach: whether the depth slab of `box` (widened by the rounding
// margin) meets [t_min, cutoff]; false for the empty box (a NaN bound).
__device__ __forceinline__ bool reach(const SlabRay& r, const Aabb& box, float t_min,
                                      float cutoff) {
    const bool neg = bit(r.negative, r.depth);
    const float lo_face = component(box.min, r.depth), hi_face = component(box.max, r.depth);
    const float near = depth_t(r, neg ? hi_face : lo_face);
    const float far = depth_t(r, neg ? lo_face : hi_face);
    const float margin = __fmul_rn(fmaxf(fabsf(near), fabsf(far)), BVH_SLACK);
    return __fsub_rn(near, margin) <= cutoff && __fadd_rn(far, margin) >= t_min;
}
