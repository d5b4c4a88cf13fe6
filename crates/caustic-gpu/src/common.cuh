// common.cuh: device code shared by every caustic kernel.
//
// Plain types, float3 vector math, the axis-aligned box that matches
// `caustic_geom::Aabb` byte for byte (two float3, 24 bytes), and Morton codes.
// NVRTC compiles this without the CUDA toolkit's headers, so nothing here
// includes a system header.
#pragma once

typedef unsigned char u8;
typedef unsigned int u32;
typedef int i32;
typedef unsigned long long u64;

#define CAUSTIC_INF __int_as_float(0x7f800000)
#define CAUSTIC_FULL_MASK 0xffffffffu

// ---------------------------------------------------------------- float3 math

__device__ __forceinline__ float3 operator+(float3 a, float3 b) {
    return make_float3(a.x + b.x, a.y + b.y, a.z + b.z);
}
__device__ __forceinline__ float3 operator-(float3 a, float3 b) {
    return make_float3(a.x - b.x, a.y - b.y, a.z - b.z);
}
__device__ __forceinline__ float3 operator*(float3 a, float s) {
    return make_float3(a.x * s, a.y * s, a.z * s);
}
__device__ __forceinline__ float3 operator*(float3 a, float3 b) {
    return make_float3(a.x * b.x, a.y * b.y, a.z * b.z);
}
__device__ __forceinline__ float dot(float3 a, float3 b) {
    return a.x * b.x + a.y * b.y + a.z * b.z;
}
__device__ __forceinline__ float3 cross(float3 a, float3 b) {
    return make_float3(a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x);
}
// fminf/fmaxf return the other operand when one is NaN, as Rust's f32::min/max do.
__device__ __forceinline__ float3 min3(float3 a, float3 b) {
    return make_float3(fminf(a.x, b.x), fminf(a.y, b.y), fminf(a.z, b.z));
}
__device__ __forceinline__ float3 max3(float3 a, float3 b) {
    return make_float3(fmaxf(a.x, b.x), fmaxf(a.y, b.y), fmaxf(a.z, b.z));
}

// ------------------------------------------------------------------ boxes

// Same layout as caustic_geom::Aabb (#[repr(C)] { min: Vec3, max: Vec3 }).
struct Aabb {
    float3 min;
    float3 max;
};

// The empty box (+inf, -inf) is the identity of the union.
__device__ __forceinline__ Aabb aabb_empty() {
    Aabb b;
    b.min = make_float3(CAUSTIC_INF, CAUSTIC_INF, CAUSTIC_INF);
    b.max = make_float3(-CAUSTIC_INF, -CAUSTIC_INF, -CAUSTIC_INF);
    return b;
}
__device__ __forceinline__ Aabb aabb_union(Aabb a, Aabb b) {
    Aabb r;
    r.min = min3(a.min, b.min);
    r.max = max3(a.max, b.max);
    return r;
}
__device__ __forceinline__ float3 aabb_centroid(Aabb b) {
    return (b.min + b.max) * 0.5f;
}

// Shuffles down a warp (every lane taking part), by type.
__device__ __forceinline__ u32 shfl_down(u32 v, u32 d) {
    return __shfl_down_sync(CAUSTIC_FULL_MASK, v, d);
}
__device__ __forceinline__ float shfl_down(float v, u32 d) {
    return __shfl_down_sync(CAUSTIC_FULL_MASK, v, d);
}
__device__ __forceinline__ float3 shfl_down(float3 v, u32 d) {
    return make_float3(shfl_down(v.x, d), shfl_down(v.y, d), shfl_down(v.z, d));
}
__device__ __forceinline__ Aabb shfl_down(Aabb v, u32 d) {
    Aabb r;
    r.min = shfl_down(v.min, d);
    r.max = shfl_down(v.max, d);
    return r;
}

// ------------------------------------------------------------ Morton codes

// Spreads the low 10 bits of v so that two zero bits follow each one.
__device__ __forceinline__ u32 morton_expand_10(u32 v) {
    v &= 0x3ffu;
    v = (v | (v << 16)) & 0x030000ffu;
    v = (v | (v << 8)) & 0x0300f00fu;
    v = (v | (v << 4)) & 0x030c30c3u;
    v = (v | (v << 2)) & 0x09249249u;
    return v;
}

// Spreads the low 16 bits of v so that a zero bit follows each one.
__device__ __forceinline__ u32 morton_expand_16(u32 v) {
    v &= 0xffffu;
    v = (v | (v << 8)) & 0x00ff00ffu;
    v = (v | (v << 4)) & 0x0f0f0f0fu;
    v = (v | (v << 2)) & 0x33333333u;
    return (v | (v << 1)) & 0x55555555u;
}

// 32-bit 2D Morton code of (x, y), x in the low bit of each pair
// (caustic-render's tiles::morton2).
__device__ __forceinline__ u32 morton2_32(u32 x, u32 y) {
    return morton_expand_16(x) | (morton_expand_16(y) << 1);
}

// Spreads the low 21 bits of v so that two zero bits follow each one.
__device__ __forceinline__ u64 morton_expand_21(u64 v) {
    v &= 0x1fffffull;
    v = (v | (v << 32)) & 0x001f00000000ffffull;
    v = (v | (v << 16)) & 0x001f0000ff0000ffull;
    v = (v | (v << 8)) & 0x100f00f00f00f00full;
    v = (v | (v << 4)) & 0x10c30c30c30c30c3ull;
    v = (v | (v << 2)) & 0x1249249249249249ull;
    return v;
}

// Quantises a coordinate in [0, 1] to an integer in [0, cells - 1].
__device__ __forceinline__ u32 morton_quantize(float unit, float cells) {
    return (u32)fminf(fmaxf(unit * cells, 0.0f), cells - 1.0f);
}

// 30-bit Morton code of a point given in the unit cube (x in the high bit of each triple).
__device__ __forceinline__ u32 morton3_30(float3 unit) {
    return (morton_expand_10(morton_quantize(unit.x, 1024.0f)) << 2)
         | (morton_expand_10(morton_quantize(unit.y, 1024.0f)) << 1)
         | morton_expand_10(morton_quantize(unit.z, 1024.0f));
}

// 63-bit Morton code of a point given in the unit cube.
__device__ __forceinline__ u64 morton3_63(float3 unit) {
    return (morton_expand_21(morton_quantize(unit.x, 2097152.0f)) << 2)
         | (morton_expand_21(morton_quantize(unit.y, 2097152.0f)) << 1)
         | morton_expand_21(morton_quantize(unit.z, 2097152.0f));
}

// ---------------------------------------------------------------- indexing

__device__ __forceinline__ u32 lane_id() { return threadIdx.x & 31u; }
__device__ __forceinline__ u32 warp_id() { return threadIdx.x >> 5; }
__device__ __forceinline__ u32 lanemask_lt() { return (1u << lane_id()) - 1u; }

// The inclusive prefix sum of `v` across a full warp (lane i gets the sum
// of lanes 0..=i), by Hillis-Steele steps of shuffles.
__device__ __forceinline__ u32 warp_inclusive_sum(u32 v) {
    const u32 lane = lane_id();
    for (u32 d = 1; d < 32; d <<= 1) {
        const u32 t = __shfl_up_sync(CAUSTIC_FULL_MASK, v, d);
        if (lane >= d) v += t;
    }
    return v;
}

// Grid-stride loops index with 64 bits: 2^28 elements times a stride
// already overflows 32 bits in a few kernels.
__device__ __forceinline__ u64 global_thread() {
    return (u64)blockIdx.x * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ u64 grid_threads() { return (u64)gridDim.x * blockDim.x; }

// ---------------------------------------------- watertight ray/triangle test

// The test of Woop, Benthin and Wald, "Watertight Ray/Triangle Intersection",
// JCGT 2(1), 2013, in exactly the arithmetic of caustic_geom::RayTriangleTest,
// so that a GPU hit equals the CPU's bit for bit (t, u and v). NVRTC contracts
// a * b + c into one fused multiply-add by default, which rounds once where
// Rust rounds twice; every product here that meets a sum is therefore an
// _rn intrinsic, which the compiler never fuses, and divisions are the
// correctly rounded __fdiv_rn / __frcp_rn whatever the compile flags.

__device__ __forceinline__ float component(float3 v, u32 axis) {
    return axis == 0 ? v.x : (axis == 1 ? v.y : v.z);
}

// The axis of the direction's largest magnitude, first axis winning ties
// (the ray's depth axis: the triangle test measures t along it).
__device__ __forceinline__ u32 dominant_axis(float3 d) {
    const float ax = fabsf(d.x), ay = fabsf(d.y), az = fabsf(d.z);
    return (ax >= ay && ax >= az) ? 0u : (ay >= az ? 1u : 2u);
}

// Per-ray constants: the shear that maps the ray onto +z and the origin in
// the permuted axes (kx, ky, kz).
struct TriangleTest {
    u32 kx, ky, kz;
    float sx, sy, sz;
    float ox, oy, oz;
};

__device__ __forceinline__ TriangleTest triangle_test_new(float3 origin, float3 dir) {
    TriangleTest r;
    r.kz = dominant_axis(dir);
    r.kx = r.kz == 2 ? 0u : r.kz + 1;
    r.ky = r.kx == 2 ? 0u : r.kx + 1;
    const float dz = component(dir, r.kz);
    // Swapping x and y for a negative depth component keeps the winding of
    // the sheared frame, so the edge-function signs mean the same thing.
    if (dz < 0.0f) {
        const u32 k = r.kx;
        r.kx = r.ky;
        r.ky = k;
    }
    r.sx = __fdiv_rn(component(dir, r.kx), dz);
    r.sy = __fdiv_rn(component(dir, r.ky), dz);
    r.sz = __frcp_rn(dz);
    r.ox = component(origin, r.kx);
    r.oy = component(origin, r.ky);
    r.oz = component(origin, r.kz);
    return r;
}

// a * b - c * d, each product rounded, then the difference.
__device__ __forceinline__ float cross_term(float a, float b, float c, float d) {
    return __fsub_rn(__fmul_rn(a, b), __fmul_rn(c, d));
}

// The same in f64 and back to f32: for edge functions that came out exactly
// zero in f32, as the paper prescribes, so neighbouring triangles agree on
// which of them owns the edge.
__device__ __forceinline__ float cross_term_f64(float a, float b, float c, float d) {
    return (float)__dsub_rn(__dmul_rn((double)a, (double)b), __dmul_rn((double)c, (double)d));
}

// Margins of the crossing rule (caustic-geom's CROSSING_SLACK and
// CROSSING_ROUNDING): 1/512 of the triangle box's depth along the ray, plus
// 2^-19 of that depth range's larger distance.
#define CAUSTIC_CROSSING_SLACK (1.0f / 512.0f)
#define CAUSTIC_CROSSING_ROUNDING (1.0f / 524288.0f)

// The triangle's box planes on `axis` relative to the ray's origin there
// (`o`), times `sz`: (lo - o) * sz and (hi - o) * sz.
__device__ __forceinline__ float2 crossing_span(float3 v0, float3 v1, float3 v2, u32 axis, float o,
                                                float sz) {
    const float lo = fminf(fminf(component(v0, axis), component(v1, axis)), component(v2, axis));
    const float hi = fmaxf(fmaxf(component(v0, axis), component(v1, axis)), component(v2, axis));
    return make_float2(__fmul_rn(__fsub_rn(lo, o), sz), __fmul_rn(__fsub_rn(hi, o), sz));
}

// The crossing rule (RayTriangleTest::within_crossing, caustic-geom, which
// says why): the point at t lies in the triangle's bounding box widened by
// the margin; along kz as distances, along kx and ky scaled by sz (the
// ray's offset t * s against the planes, the margin times |s|). A
// comparison with a NaN passes. The same operations in the same order as
// the CPU's, so the same answer.
__device__ __forceinline__ bool within_crossing(const TriangleTest& r, float3 v0, float3 v1, float3 v2,
                                                float t) {
    const float2 z = crossing_span(v0, v1, v2, r.kz, r.oz, r.sz);
    const float near = fminf(z.x, z.y), far = fmaxf(z.x, z.y);
    const float margin = __fadd_rn(__fmul_rn(__fsub_rn(far, near), CAUSTIC_CROSSING_SLACK),
                                   __fmul_rn(fmaxf(fabsf(near), fabsf(far)), CAUSTIC_CROSSING_ROUNDING));
    if (t < __fsub_rn(near, margin) || t > __fadd_rn(far, margin)) return false;
    const u32 axes[2] = {r.kx, r.ky};
    const float origin[2] = {r.ox, r.oy};
    const float shear[2] = {r.sx, r.sy};
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const float2 k = crossing_span(v0, v1, v2, axes[i], origin[i], r.sz);
        const float reach = __fmul_rn(t, shear[i]), slack = __fmul_rn(margin, fabsf(shear[i]));
        if (reach < __fsub_rn(fminf(k.x, k.y), slack) || reach > __fadd_rn(fmaxf(k.x, k.y), slack))
            return false;
    }
    return true;
}

// caustic-geom's CONDITIONED: 2^-10.
#define CAUSTIC_CONDITIONED (1.0f / 1024.0f)

// Whether the hit's edge functions are accurate enough that its t keeps the
// crossing rule without testing it (caustic_geom::conditioned, which says
// why): |det| above CAUSTIC_CONDITIONED times the largest of the six
// products the edge functions subtract. The same operations, so the same
// answer.
__device__ __forceinline__ bool conditioned(float ax, float ay, float bx, float by, float cx, float cy,
                                            float det) {
    const float size = fmaxf(fmaxf(fmaxf(fabsf(__fmul_rn(cx, by)), fabsf(__fmul_rn(cy, bx))),
                                   fmaxf(fabsf(__fmul_rn(ax, cy)), fabsf(__fmul_rn(ay, cx)))),
                             fmaxf(fabsf(__fmul_rn(bx, ay)), fabsf(__fmul_rn(by, ax))));
    return fabsf(det) > __fmul_rn(size, CAUSTIC_CONDITIONED);
}

// Intersects the triangle (v0, v1, v2); true for a hit with tmin < t < tmax
// that the conditioning bound vouches for or that keeps the crossing rule,
// with the barycentrics u of v1 and v of v2.
__device__ __forceinline__ bool triangle_intersect(const TriangleTest& r, float3 v0, float3 v1,
                                                   float3 v2, float tmin, float tmax, float& t,
                                                   float& u_out, float& v_out) {
    const float a_x = component(v0, r.kx) - r.ox, a_y = component(v0, r.ky) - r.oy;
    const float a_z = component(v0, r.kz) - r.oz;
    const float b_x = component(v1, r.kx) - r.ox, b_y = component(v1, r.ky) - r.oy;
    const float b_z = component(v1, r.kz) - r.oz;
    const float c_x = component(v2, r.kx) - r.ox, c_y = component(v2, r.ky) - r.oy;
    const float c_z = component(v2, r.kz) - r.oz;
    const float ax = __fsub_rn(a_x, __fmul_rn(r.sx, a_z)), ay = __fsub_rn(a_y, __fmul_rn(r.sy, a_z));
    const float bx = __fsub_rn(b_x, __fmul_rn(r.sx, b_z)), by = __fsub_rn(b_y, __fmul_rn(r.sy, b_z));
    const float cx = __fsub_rn(c_x, __fmul_rn(r.sx, c_z)), cy = __fsub_rn(c_y, __fmul_rn(r.sy, c_z));
    float u = cross_term(cx, by, cy, bx);
    float v = cross_term(ax, cy, ay, cx);
    float w = cross_term(bx, ay, by, ax);
    if (u == 0.0f || v == 0.0f || w == 0.0f) {
        u = cross_term_f64(cx, by, cy, bx);
        v = cross_term_f64(ax, cy, ay, cx);
        w = cross_term_f64(bx, ay, by, ax);
    }
    if ((u < 0.0f || v < 0.0f || w < 0.0f) && (u > 0.0f || v > 0.0f || w > 0.0f)) return false;
    const float det = u + v + w;
    // fabsf(det) < inf is false for NaN and infinities alike.
    if (det == 0.0f || !(fabsf(det) < CAUSTIC_INF)) return false;
    const float az = r.sz * a_z, bz = r.sz * b_z, cz = r.sz * c_z;
    const float t_scaled = __fadd_rn(__fadd_rn(__fmul_rn(u, az), __fmul_rn(v, bz)), __fmul_rn(w, cz));
    const float inv_det = __frcp_rn(det);
    t = t_scaled * inv_det;
    if (!(t > tmin && t < tmax)) return false;
    if (!conditioned(ax, ay, bx, by, cx, cy, det) && !within_crossing(r, v0, v1, v2, t)) return false;
    u_out = v * inv_det;
    v_out = w * inv_det;
    return true;
}
