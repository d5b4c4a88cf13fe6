// bvh.cuh: the structs that the BVH kernels share with Rust, checked field by
// field against the Rust definitions, and the ray/box test of the traversal.
//
// accel_layout.cuh is generated at run time from the Rust structs
// (caustic-accel's layout_cuda.rs); every struct below static_asserts its
// size, alignment and field offsets against it (layout_check.cuh), so the two
// sides cannot drift apart unnoticed.
#pragma once
#include "common.cuh"
#include "layout_check.cuh"
#include "accel_layout.cuh"

// caustic_accel::BvhNode. count == 0: inner node, children at first and
// first + 1; count > 0: leaf over the slots first .. first + count. Node i is
// the two float4 words 2i (min, first) and 2i + 1 (max, count).
struct BvhNode {
    float min[3];
    u32 first;
    float max[3];
    u32 count;
};
CAUSTIC_CHECK_SIZE(BvhNode);
CAUSTIC_CHECK_FIELD(BvhNode, min);
CAUSTIC_CHECK_FIELD(BvhNode, first);
CAUSTIC_CHECK_FIELD(BvhNode, max);
CAUSTIC_CHECK_FIELD(BvhNode, count);

// caustic_accel::bvh::triangle_bvh_cuda::GpuTriangle: a leaf slot's triangle as three float4
// words, the fourth lane of the first holding the triangle's scene id.
struct Triangle {
    float v0[3];
    u32 prim;
    float v1[3];
    u32 pad1;
    float v2[3];
    u32 pad2;
};
CAUSTIC_CHECK_SIZE(Triangle);
CAUSTIC_CHECK_FIELD(Triangle, v0);
CAUSTIC_CHECK_FIELD(Triangle, prim);
CAUSTIC_CHECK_FIELD(Triangle, v1);
CAUSTIC_CHECK_FIELD(Triangle, pad1);
CAUSTIC_CHECK_FIELD(Triangle, v2);
CAUSTIC_CHECK_FIELD(Triangle, pad2);

// Triangle::bounds: v0.min(v1).min(v2), v0.max(v1).max(v2) (fminf/fmaxf
// skip a NaN operand, as Rust's min/max do).
__device__ __forceinline__ Aabb triangle_bounds(const Triangle& t) {
    const float3 a = make_float3(t.v0[0], t.v0[1], t.v0[2]);
    const float3 b = make_float3(t.v1[0], t.v1[1], t.v1[2]);
    const float3 c = make_float3(t.v2[0], t.v2[1], t.v2[2]);
    Aabb box;
    box.min = min3(min3(a, b), c);
    box.max = max3(max3(a, b), c);
    return box;
}

// Word `part` (0, 1, 2) of a leaf slot's record of scene triangle `id`,
// from the scene triangle's word `v`: the id in the first word's fourth
// lane, the padding zeroed.
__device__ __forceinline__ float4 leaf_word(float4 v, u32 part, u32 id) {
    v.w = part == 0u ? __uint_as_float(id) : 0.0f;
    return v;
}

// The triangle a leaf slot's three record words hold.
__device__ __forceinline__ Triangle leaf_triangle(float4 v0, float4 v1, float4 v2) {
    Triangle t;
    t.v0[0] = v0.x, t.v0[1] = v0.y, t.v0[2] = v0.z, t.prim = __float_as_uint(v0.w);
    t.v1[0] = v1.x, t.v1[1] = v1.y, t.v1[2] = v1.z, t.pad1 = __float_as_uint(v1.w);
    t.v2[0] = v2.x, t.v2[1] = v2.y, t.v2[2] = v2.z, t.pad2 = __float_as_uint(v2.w);
    return t;
}

// Leaf slot s of a built BVH: scene triangle `id` as `leaf_word` records
// it, and slots[id] = s (where the refit finds it). Returns the triangle.
__device__ __forceinline__ Triangle copy_leaf_triangle(const Triangle* scene, u32 id, u64 s,
                                                      Triangle* out, u32* slots) {
    const float4* from = reinterpret_cast<const float4*>(scene + id);
    const float4 v0 = leaf_word(__ldg(from), 0u, id), v1 = leaf_word(__ldg(from + 1), 1u, id),
                 v2 = leaf_word(__ldg(from + 2), 2u, id);
    float4* to = reinterpret_cast<float4*>(out + s);
    to[0] = v0;
    to[1] = v1;
    to[2] = v2;
    slots[id] = (u32)s;
    return leaf_triangle(v0, v1, v2);
}

// caustic_accel::bvh::traverse_cuda::GpuRay: two float4 words (origin, tmin), (dir, tmax).
struct Ray {
    float origin[3];
    float tmin;
    float dir[3];
    float tmax;
};
CAUSTIC_CHECK_SIZE(Ray);
CAUSTIC_CHECK_FIELD(Ray, origin);
CAUSTIC_CHECK_FIELD(Ray, tmin);
CAUSTIC_CHECK_FIELD(Ray, dir);
CAUSTIC_CHECK_FIELD(Ray, tmax);

// caustic_accel::bvh::traverse_cuda::GpuHit: one float4 word; a miss is (+inf, NO_HIT, 0, 0).
struct Hit {
    float t;
    u32 prim;
    float u;
    float v;
};
CAUSTIC_CHECK_SIZE(Hit);
CAUSTIC_CHECK_FIELD(Hit, t);
CAUSTIC_CHECK_FIELD(Hit, prim);
CAUSTIC_CHECK_FIELD(Hit, u);
CAUSTIC_CHECK_FIELD(Hit, v);

#define NO_HIT 0xffffffffu

__device__ __forceinline__ float3 xyz(float4 v) { return make_float3(v.x, v.y, v.z); }

// The records as the 16-byte words they are (Ray: (origin, tmin) and
// (dir, tmax); Hit: (t, prim, u, v)), for kernels that copy them between
// wave buffers. Both are 4-byte aligned (the CPU emulation reads packed word
// buffers), so a plain copy is eight or four 4-byte accesses, each its own
// L2 request where the slots are strided (the Whitted shade's four shadow
// slots of a path lie 128 bytes apart; ncu found that launch L2-bound on an
// H200: docs/BENCHMARKS.md, photon frame, session 25). The same bytes in a
// quarter of the requests; buffers come from the allocator and slots are
// whole records apart, so the words are aligned.
__device__ __forceinline__ void store_ray(Ray* rays, u64 i, const Ray& r) {
    float4* words = reinterpret_cast<float4*>(rays) + 2 * i;
    words[0] = make_float4(r.origin[0], r.origin[1], r.origin[2], r.tmin);
    words[1] = make_float4(r.dir[0], r.dir[1], r.dir[2], r.tmax);
}
__device__ __forceinline__ Ray load_ray(const Ray* rays, u64 i) {
    const float4* words = reinterpret_cast<const float4*>(rays) + 2 * i;
    const float4 a = words[0], b = words[1];
    Ray r;
    r.origin[0] = a.x;
    r.origin[1] = a.y;
    r.origin[2] = a.z;
    r.tmin = a.w;
    r.dir[0] = b.x;
    r.dir[1] = b.y;
    r.dir[2] = b.z;
    r.tmax = b.w;
    return r;
}
__device__ __forceinline__ Hit load_hit(const Hit* hits, u64 i) {
    const float4 w = reinterpret_cast<const float4*>(hits)[i];
    Hit h;
    h.t = w.x;
    h.prim = __float_as_uint(w.y);
    h.u = w.z;
    h.v = w.w;
    return h;
}

// ------------------------------------------------------------ ray/box test

// caustic_accel::bvh::traverse::SLACK (2^-19), checked by a host test.
#define BVH_SLACK (1.0f / 524288.0f)

// Per-ray constants of the slab test of caustic_accel's traverse.rs, whose
// module docs give the rule: a box is kept when the ray crosses all three
// slabs and the slab of the depth axis overlaps [t_min, cutoff], both
// widened by SLACK times the depth slab's larger distance. It reproduces the
// CPU test operation for operation (the same roundings, the same NaN rules),
// so the GPU culls exactly the boxes the CPU culls and never one that holds
// the hit the CPU reports.
struct RayBoxTest {
    float3 origin;
    float3 inv_dir;
    // Whether the ray enters each slab through the max plane (a negative
    // reciprocal, -0 directions included).
    bool neg_x, neg_y, neg_z;
    // The depth axis, chosen as the triangle test chooses it.
    u32 depth;
};

__device__ __forceinline__ RayBoxTest ray_box_test_new(float3 origin, float3 dir) {
    RayBoxTest r;
    r.origin = origin;
    r.inv_dir = make_float3(__frcp_rn(dir.x), __frcp_rn(dir.y), __frcp_rn(dir.z));
    r.neg_x = __float_as_uint(r.inv_dir.x) >> 31;
    r.neg_y = __float_as_uint(r.inv_dir.y) >> 31;
    r.neg_z = __float_as_uint(r.inv_dir.z) >> 31;
    r.depth = dominant_axis(dir);
    return r;
}

// max(candidate, acc), keeping acc when candidate is NaN (the CPU's max_skip_nan).
__device__ __forceinline__ float max_skip_nan(float candidate, float acc) {
    return candidate > acc ? candidate : acc;
}
__device__ __forceinline__ float min_skip_nan(float candidate, float acc) {
    return candidate < acc ? candidate : acc;
}

// Tests the box (lo.xyz, hi.xyz) over [t_min, cutoff]. On a hit, `bound` is
// the smallest t a hit inside may have (the cull key) and `order` where the
// ray enters the box (the key that picks the nearer child).
__device__ __forceinline__ bool box_entry(const RayBoxTest& r, float4 lo, float4 hi, float t_min,
                                          float cutoff, float& bound, float& order) {
    // (plane - origin) * inv: a difference times a factor, which no
    // contraction can fuse, rounded as the CPU rounds it.
    const float lx = (lo.x - r.origin.x) * r.inv_dir.x, hx = (hi.x - r.origin.x) * r.inv_dir.x;
    const float ly = (lo.y - r.origin.y) * r.inv_dir.y, hy = (hi.y - r.origin.y) * r.inv_dir.y;
    const float lz = (lo.z - r.origin.z) * r.inv_dir.z, hz = (hi.z - r.origin.z) * r.inv_dir.z;
    const float nx = r.neg_x ? hx : lx, fx = r.neg_x ? lx : hx;
    const float ny = r.neg_y ? hy : ly, fy = r.neg_y ? ly : hy;
    const float nz = r.neg_z ? hz : lz, fz = r.neg_z ? lz : hz;
    // NaN slabs (a ray in a slab's boundary plane: 0 * inf) impose no limit:
    // the CPU takes the largest non-NaN entry (-inf if there is none) and the
    // smallest non-NaN exit, and fmaxf / fminf skip NaN the same way, in one
    // instruction each. The order of the folds changes at most the sign of a
    // zero, which no comparison below can see.
    const float near = fmaxf(fmaxf(nx, ny), fmaxf(nz, -CAUSTIC_INF));
    const float far = fminf(fminf(fx, fy), fminf(fz, CAUSTIC_INF));
    const float near_d = r.depth == 0 ? nx : (r.depth == 1 ? ny : nz);
    const float far_d = r.depth == 0 ? fx : (r.depth == 1 ? fy : fz);
    const float margin = __fmul_rn(max_skip_nan(fabsf(near_d), fabsf(far_d)), BVH_SLACK);
    const bool crosses = __fsub_rn(near, margin) <= __fadd_rn(far, margin);
    // A NaN depth bound (inf - inf: the empty box) stays and fails lo <= hi.
    const float lo_t = max_skip_nan(t_min, __fsub_rn(near_d, margin));
    const float hi_t = min_skip_nan(cutoff, __fadd_rn(far_d, margin));
    bound = lo_t;
    order = near;
    return crosses && lo_t <= hi_t;
}

// ------------------------------------------------- shared by the traversals

// The smallest float above x (the CPU's next_up): leaves accept t == closest.
__device__ __forceinline__ float next_up(float x) {
    if (!(x < CAUSTIC_INF)) return x;
    if (x == 0.0f) return __uint_as_float(1u);
    const u32 bits = __float_as_uint(x);
    return __uint_as_float(x > 0.0f ? bits + 1u : bits - 1u);
}

// A hit's order as one integer (caustic_accel::collision::nearest_key): the
// distance's bits made monotonic above the triangle id, so the smallest key
// is the nearest hit and, at equal distances, the lowest triangle.
__device__ __forceinline__ u64 hit_key(float t, u32 prim) {
    const u32 bits = __float_as_uint(t);
    const u32 ordered = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
    return ((u64)ordered << 32) | (u64)prim;
}

// The distance of a hit_key (not of the miss key ~0).
__device__ __forceinline__ float key_distance(u64 key) {
    const u32 ordered = (u32)(key >> 32);
    return __uint_as_float((ordered & 0x80000000u) ? (ordered & 0x7fffffffu) : ~ordered);
}

// Whether the CPU would trace the ray at all (caustic_accel::is_traceable).
__device__ __forceinline__ bool is_traceable(float4 o, float4 d) {
    const bool finite = fabsf(o.x) < CAUSTIC_INF && fabsf(o.y) < CAUSTIC_INF &&
                        fabsf(o.z) < CAUSTIC_INF && fabsf(d.x) < CAUSTIC_INF &&
                        fabsf(d.y) < CAUSTIC_INF && fabsf(d.z) < CAUSTIC_INF;
    const bool nonzero = d.x != 0.0f || d.y != 0.0f || d.z != 0.0f;
    return finite && nonzero && o.w < d.w;
}

// The ray of work item `w`. With image_width = 0 that is ray w. Otherwise the
// rays are an image of that width in pixel order (width a multiple of 8,
// height of 4: the host checks) and consecutive work items walk it in 8x4
// tiles, so the 32 rays a warp takes at once are a compact block of pixels
// rather than a sliver of one row: more coherent primary rays.
__device__ __forceinline__ u32 ray_of_work(u32 w, u32 image_width) {
    if (image_width == 0) return w;
    const u32 tile = w / 32, within = w % 32, tiles_x = image_width / 8;
    const u32 x = (tile % tiles_x) * 8 + within % 8;
    const u32 y = (tile / tiles_x) * 4 + within / 8;
    return y * image_width + x;
}
