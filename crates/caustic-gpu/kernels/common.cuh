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

// Grid-stride loops index with 64 bits: 2^28 elements times a stride
// already overflows 32 bits in a few kernels.
__device__ __forceinline__ u64 global_thread() {
    return (u64)blockIdx.x * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ u64 grid_threads() { return (u64)gridDim.x * blockDim.x; }
