// triangle_kdtree.cuh: what the triangle kd-tree's build (build.cu) and
// traversal (traverse.cu) share: the host-planned records of the build
// (their Rust twins in build_cuda.rs, checked field by field against
// accel_layout.cuh), the 8-byte node encoding of kdtree/node.rs, and the
// CPU's float conventions (glam's min / max, products rounded apart from
// sums: NVRTC would fuse them into FMAs, which round once where Rust rounds
// twice).
#pragma once
#include "common.cuh"
#include "layout_check.cuh"
#include "accel_layout.cuh"
#include "bvh.cuh"

// kdtree/node.rs: tag bits 0..2 are the axis (3 = leaf), bits 2..32 an index.
#define KD_LEAF 3u

// What the host planned for one large node of a level
// (caustic_accel::kdtree::build_cuda::KdPlan).
struct KdPlan {
    // The two children's cells (after the empty-space cuts).
    float below_min[3];
    u32 axis;
    float below_max[3];
    float split;
    float above_min[3];
    // KD_PLAN_SPLIT or KD_PLAN_LEAF.
    u32 kind;
    float above_max[3];
    // The node's references: start .. start + count of the level's arrays.
    u32 start;
    u32 count;
    // Where each side's references go (KD_DEST_*) and from which slot on.
    u32 left_dest;
    u32 left_base;
    u32 right_dest;
    u32 right_base;
    u32 pad[3];
};
CAUSTIC_CHECK_SIZE(KdPlan);
CAUSTIC_CHECK_FIELD(KdPlan, below_min);
CAUSTIC_CHECK_FIELD(KdPlan, axis);
CAUSTIC_CHECK_FIELD(KdPlan, below_max);
CAUSTIC_CHECK_FIELD(KdPlan, split);
CAUSTIC_CHECK_FIELD(KdPlan, above_min);
CAUSTIC_CHECK_FIELD(KdPlan, kind);
CAUSTIC_CHECK_FIELD(KdPlan, above_max);
CAUSTIC_CHECK_FIELD(KdPlan, start);
CAUSTIC_CHECK_FIELD(KdPlan, count);
CAUSTIC_CHECK_FIELD(KdPlan, left_dest);
CAUSTIC_CHECK_FIELD(KdPlan, left_base);
CAUSTIC_CHECK_FIELD(KdPlan, right_dest);
CAUSTIC_CHECK_FIELD(KdPlan, right_base);

#define KD_PLAN_SPLIT 0u
// A node that stays a leaf of all its references: they all go "left".
#define KD_PLAN_LEAF 1u

// Destinations of a side's references.
#define KD_DEST_NEXT 0u
#define KD_DEST_SMALL 1u
#define KD_DEST_NONE 2u

// A small root (caustic_accel::kdtree::build_cuda::KdSmallRoot): references
// start .. start + count of the small pool, its cell, depth and node slot.
struct KdSmallRoot {
    float lo[3];
    u32 start;
    float hi[3];
    u32 count;
    u32 slot;
    u32 depth;
    // Non-zero: a leaf of all its references (a large node no split
    // separates, or at the depth limit); count may exceed 64.
    u32 leaf;
    u32 pad;
};
CAUSTIC_CHECK_SIZE(KdSmallRoot);
CAUSTIC_CHECK_FIELD(KdSmallRoot, lo);
CAUSTIC_CHECK_FIELD(KdSmallRoot, start);
CAUSTIC_CHECK_FIELD(KdSmallRoot, hi);
CAUSTIC_CHECK_FIELD(KdSmallRoot, count);
CAUSTIC_CHECK_FIELD(KdSmallRoot, slot);
CAUSTIC_CHECK_FIELD(KdSmallRoot, depth);
CAUSTIC_CHECK_FIELD(KdSmallRoot, leaf);

// ------------------------------------------------------------- float rules

// glam's Vec3::min / max per component, as the CPU's boxes use them.
__device__ __forceinline__ float kd_min(float a, float b) { return a < b ? a : b; }
__device__ __forceinline__ float kd_max(float a, float b) { return a > b ? a : b; }

__device__ __forceinline__ float kd_pick(const float (&a)[3], u32 axis) {
    return axis == 0 ? a[0] : (axis == 1 ? a[1] : a[2]);
}

__device__ __forceinline__ bool kd_box_empty(const Aabb& b) {
    return b.min.x > b.max.x || b.min.y > b.max.y || b.min.z > b.max.z;
}

// Aabb::union with glam's min / max.
__device__ __forceinline__ Aabb kd_union(const Aabb& a, const Aabb& b) {
    Aabb r;
    r.min = make_float3(kd_min(a.min.x, b.min.x), kd_min(a.min.y, b.min.y), kd_min(a.min.z, b.min.z));
    r.max = make_float3(kd_max(a.max.x, b.max.x), kd_max(a.max.y, b.max.y), kd_max(a.max.z, b.max.z));
    return r;
}

// Aabb::intersection.
__device__ __forceinline__ Aabb kd_intersection(const Aabb& a, const Aabb& b) {
    Aabb r;
    r.min = make_float3(kd_max(a.min.x, b.min.x), kd_max(a.min.y, b.min.y), kd_max(a.min.z, b.min.z));
    r.max = make_float3(kd_min(a.max.x, b.max.x), kd_min(a.max.y, b.max.y), kd_min(a.max.z, b.max.z));
    return r;
}

// Triangle i's vertices (its three float4 words, scene order).
__device__ __forceinline__ void kd_load_triangle(const Triangle* tris, u32 i, float3& a, float3& b,
                                                 float3& c) {
    const float4* words = reinterpret_cast<const float4*>(tris) + 3 * (u64)i;
    a = xyz(__ldg(words));
    b = xyz(__ldg(words + 1));
    c = xyz(__ldg(words + 2));
}

// Triangle::bounds.
__device__ __forceinline__ Aabb kd_triangle_bounds(float3 a, float3 b, float3 c) {
    Aabb r;
    r.min = make_float3(kd_min(kd_min(a.x, b.x), c.x), kd_min(kd_min(a.y, b.y), c.y),
                        kd_min(kd_min(a.z, b.z), c.z));
    r.max = make_float3(kd_max(kd_max(a.x, b.x), c.x), kd_max(kd_max(a.y, b.y), c.y),
                        kd_max(kd_max(a.z, b.z), c.z));
    return r;
}

__device__ __forceinline__ bool kd_finite(float3 v) {
    return fabsf(v.x) < CAUSTIC_INF && fabsf(v.y) < CAUSTIC_INF && fabsf(v.z) < CAUSTIC_INF;
}

// KdNode::inner / KdNode::leaf as (word, tag).
__device__ __forceinline__ uint2 kd_inner(u32 axis, float split, u32 left) {
    return make_uint2(__float_as_uint(split), (left << 2) | axis);
}
__device__ __forceinline__ uint2 kd_leaf(u32 first, u32 count) {
    return make_uint2(count, (first << 2) | KD_LEAF);
}
