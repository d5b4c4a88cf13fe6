// grid.cuh: the uniform grid's frame, shared by its build (build.cu) and its
// 3D-DDA (dda.cu), and the grid arithmetic of caustic_accel::grid on the CPU.
//
// Every expression here is the CPU's, rounding for rounding: a product that
// meets a sum is an _rn intrinsic (NVRTC would otherwise fuse it into one
// FMA, which rounds once where Rust rounds twice), so a triangle lands in the
// cells the CPU puts it in and the DDA crosses the boundaries the CPU
// crosses, bit for bit.
#pragma once
#include "common.cuh"
#include "layout_check.cuh"
#include "accel_layout.cuh"
#include "bvh.cuh"

// caustic_accel::grid::build_cuda::GridFrame: what the host computed of the
// grid (UniformGrid::frame), read by every kernel of the grid.
struct GridFrame {
    float bounds_min[3];
    // Rounding margin in scene units: triangle boxes grow by it.
    float tolerance;
    float bounds_max[3];
    // Largest absolute coordinate of the grid box (the DDA's SlabRay scale).
    float scale;
    float cell_size[3];
    u32 macro_size;
    float inv_cell_size[3];
    // Non-zero: a triangle goes only into the cells it overlaps.
    u32 exact;
    u32 res[3];
    u32 cells;
    u32 macro_res[3];
    u32 macros;
};
CAUSTIC_CHECK_SIZE(GridFrame);
CAUSTIC_CHECK_FIELD(GridFrame, bounds_min);
CAUSTIC_CHECK_FIELD(GridFrame, tolerance);
CAUSTIC_CHECK_FIELD(GridFrame, bounds_max);
CAUSTIC_CHECK_FIELD(GridFrame, scale);
CAUSTIC_CHECK_FIELD(GridFrame, cell_size);
CAUSTIC_CHECK_FIELD(GridFrame, macro_size);
CAUSTIC_CHECK_FIELD(GridFrame, inv_cell_size);
CAUSTIC_CHECK_FIELD(GridFrame, exact);
CAUSTIC_CHECK_FIELD(GridFrame, res);
CAUSTIC_CHECK_FIELD(GridFrame, cells);
CAUSTIC_CHECK_FIELD(GridFrame, macro_res);
CAUSTIC_CHECK_FIELD(GridFrame, macros);

// ------------------------------------------------------------- components

__device__ __forceinline__ int component_i(int3 v, u32 axis) {
    return axis == 0 ? v.x : (axis == 1 ? v.y : v.z);
}
__device__ __forceinline__ void set_component(float3& v, u32 axis, float x) {
    if (axis == 0) v.x = x;
    else if (axis == 1) v.y = x;
    else v.z = x;
}
__device__ __forceinline__ void set_component_i(int3& v, u32 axis, int x) {
    if (axis == 0) v.x = x;
    else if (axis == 1) v.y = x;
    else v.z = x;
}

// Element `axis` of a frame array by selects, not by an index: a run-time
// index into the frame (a kernel's local copy) would put it in local memory.
__device__ __forceinline__ float pick(const float (&a)[3], u32 axis) {
    return axis == 0 ? a[0] : (axis == 1 ? a[1] : a[2]);
}
__device__ __forceinline__ u32 pick(const u32 (&a)[3], u32 axis) {
    return axis == 0 ? a[0] : (axis == 1 ? a[1] : a[2]);
}

// glam's Vec3::min / max per component (`a < b ? a : b`): the CPU's triangle
// boxes and unions.
__device__ __forceinline__ float glam_min(float a, float b) { return a < b ? a : b; }
__device__ __forceinline__ float glam_max(float a, float b) { return a > b ? a : b; }

// ------------------------------------------------------------ triangles

// Triangle i's vertices from its three float4 words (the scene-order copy).
__device__ __forceinline__ void load_triangle(const Triangle* tris, u32 i, float3& a, float3& b,
                                              float3& c) {
    const float4* words = reinterpret_cast<const float4*>(tris) + 3 * (u64)i;
    a = xyz(__ldg(words));
    b = xyz(__ldg(words + 1));
    c = xyz(__ldg(words + 2));
}

__device__ __forceinline__ bool finite3(float3 v) {
    return fabsf(v.x) < CAUSTIC_INF && fabsf(v.y) < CAUSTIC_INF && fabsf(v.z) < CAUSTIC_INF;
}

// Triangle::bounds: v0.min(v1).min(v2) with glam's min.
__device__ __forceinline__ Aabb triangle_bounds(float3 a, float3 b, float3 c) {
    Aabb r;
    r.min = make_float3(glam_min(glam_min(a.x, b.x), c.x), glam_min(glam_min(a.y, b.y), c.y),
                        glam_min(glam_min(a.z, b.z), c.z));
    r.max = make_float3(glam_max(glam_max(a.x, b.x), c.x), glam_max(glam_max(a.y, b.y), c.y),
                        glam_max(glam_max(a.z, b.z), c.z));
    return r;
}

// ------------------------------------------------------------- the lattice

// UniformGrid::boundary: the i-th cell boundary on `axis`, min + i * size
// rounded twice as on the CPU.
__device__ __forceinline__ float grid_boundary(const GridFrame& f, u32 axis, int i) {
    return __fadd_rn(pick(f.bounds_min, axis), __fmul_rn((float)i, pick(f.cell_size, axis)));
}

// UniformGrid::cell_of on one axis: ((x - min) * inv).max(0) as u32, at most
// res - 1. Clamping before the conversion gives the same integer (the bound
// is a whole number) and keeps the conversion defined; NaN goes to 0 as
// Rust's max and `as` send it.
__device__ __forceinline__ u32 grid_cell_of(const GridFrame& f, u32 axis, float x) {
    const float rel = __fmul_rn(__fsub_rn(x, pick(f.bounds_min, axis)), pick(f.inv_cell_size, axis));
    return (u32)fminf(fmaxf(rel, 0.0f), (float)(pick(f.res, axis) - 1));
}

__device__ __forceinline__ u32 grid_linear(const GridFrame& f, u32 x, u32 y, u32 z) {
    return x + f.res[0] * (y + f.res[1] * z);
}

// ------------------------------------------------ exact triangle-box overlap

// grid/overlap.rs, operation for operation with glam's Vec3 arithmetic.
#define GRID_OVERLAP_SLACK 1e-6f

__device__ __forceinline__ float3 glam_cross(float3 a, float3 b) {
    return make_float3(cross_term(a.y, b.z, b.y, a.z), cross_term(a.z, b.x, b.z, a.x),
                       cross_term(a.x, b.y, b.x, a.y));
}
__device__ __forceinline__ float glam_dot(float3 a, float3 b) {
    return __fadd_rn(__fadd_rn(__fmul_rn(a.x, b.x), __fmul_rn(a.y, b.y)), __fmul_rn(a.z, b.z));
}

// Whether direction n separates the triangle v (relative to the box centre)
// from the box of half extents `half`.
__device__ __forceinline__ bool overlap_separates(float3 n, const float3 v[3], float3 half) {
    const float p0 = glam_dot(n, v[0]), p1 = glam_dot(n, v[1]), p2 = glam_dot(n, v[2]);
    // Rust's f32::min / max skip NaN, as fminf / fmaxf do.
    const float lo = fminf(fminf(p0, p1), p2);
    const float hi = fmaxf(fmaxf(p0, p1), p2);
    const float radius = glam_dot(half, make_float3(fabsf(n.x), fabsf(n.y), fabsf(n.z)));
    const float slack =
        __fmul_rn(GRID_OVERLAP_SLACK, __fadd_rn(radius, fmaxf(fabsf(lo), fabsf(hi))));
    return lo > __fadd_rn(radius, slack) || hi < __fsub_rn(-radius, slack);
}

// triangle_overlaps_box for the closed box (bmin, bmax).
__device__ __forceinline__ bool triangle_overlaps_box(float3 a, float3 b, float3 c, float3 bmin,
                                                      float3 bmax) {
    const float3 center = make_float3(__fmul_rn(0.5f, __fadd_rn(bmin.x, bmax.x)),
                                      __fmul_rn(0.5f, __fadd_rn(bmin.y, bmax.y)),
                                      __fmul_rn(0.5f, __fadd_rn(bmin.z, bmax.z)));
    const float3 half = make_float3(__fmul_rn(__fsub_rn(bmax.x, bmin.x), 0.5f),
                                    __fmul_rn(__fsub_rn(bmax.y, bmin.y), 0.5f),
                                    __fmul_rn(__fsub_rn(bmax.z, bmin.z), 0.5f));
    const float3 v[3] = {a - center, b - center, c - center};
    const Aabb tb = triangle_bounds(a, b, c);
    if (tb.min.x > bmax.x || tb.min.y > bmax.y || tb.min.z > bmax.z || tb.max.x < bmin.x ||
        tb.max.y < bmin.y || tb.max.z < bmin.z)
        return false;
    const float3 edges[3] = {v[1] - v[0], v[2] - v[1], v[0] - v[2]};
    const float3 axes[3] = {make_float3(1.0f, 0.0f, 0.0f), make_float3(0.0f, 1.0f, 0.0f),
                            make_float3(0.0f, 0.0f, 1.0f)};
#pragma unroll
    for (int e = 0; e < 3; ++e) {
#pragma unroll
        for (int k = 0; k < 3; ++k) {
            if (overlap_separates(glam_cross(axes[k], edges[e]), v, half)) return false;
        }
    }
    return !overlap_separates(glam_cross(edges[0], edges[1]), v, half);
}
