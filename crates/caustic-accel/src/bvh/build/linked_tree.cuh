// linked_tree.cuh: the device twin of caustic-accel's bvh/build/linked_tree.rs,
// shared by the bottom-up GPU builders (lbvh.cu, ploc.cu) and the layout
// (linked_tree.cu).
//
// A LinkedNode names its two children by NodeRef (an inner node's index, or
// a primitive's position in Morton order with the top bit set) and carries
// the Summary of its subtree. Summaries are merged here in exactly the
// arithmetic of linked_tree.rs's Summary::merge: glam's SSE min and max
// (`a < b ? a : b`, `a > b ? a : b`), every product and sum rounded on its
// own (_rn intrinsics, which NVRTC never contracts into a fused
// multiply-add), so the device makes the CPU's collapse decisions bit for
// bit and the trees come out node for node the same.
#pragma once
#include "common.cuh"
#include "layout_check.cuh"
#include "accel_layout.cuh"

#define LT_ITEM_BIT 0x80000000u
#define LT_NONE 0xffffffffu
// caustic_accel::bvh::MAX_DEPTH, checked by a host test.
#define LT_MAX_DEPTH 64u

// caustic_accel::bvh::build::linked_tree_cuda::GpuLinkedNode.
struct LinkedNode {
    u32 children[2];
    float min[3];
    float max[3];
    u32 prims;
    u32 leaves;
    u32 height;
    float cost;
};
CAUSTIC_CHECK_SIZE(LinkedNode);
CAUSTIC_CHECK_FIELD(LinkedNode, children);
CAUSTIC_CHECK_FIELD(LinkedNode, min);
CAUSTIC_CHECK_FIELD(LinkedNode, max);
CAUSTIC_CHECK_FIELD(LinkedNode, prims);
CAUSTIC_CHECK_FIELD(LinkedNode, leaves);
CAUSTIC_CHECK_FIELD(LinkedNode, height);
CAUSTIC_CHECK_FIELD(LinkedNode, cost);

// The collapsing SAH's constants (linked_tree.rs's Collapse).
struct Collapse {
    u32 max_leaf_size;
    float traversal_cost;
    float intersection_cost;
};

__device__ __forceinline__ bool lt_is_item(u32 ref) { return (ref & LT_ITEM_BIT) != 0u; }
__device__ __forceinline__ u32 lt_index(u32 ref) { return ref & ~LT_ITEM_BIT; }

// glam's Vec3A::min / max on SSE (_mm_min_ps / _mm_max_ps).
__device__ __forceinline__ float sse_min(float a, float b) { return a < b ? a : b; }
__device__ __forceinline__ float sse_max(float a, float b) { return a > b ? a : b; }

__device__ __forceinline__ Aabb sse_union(const Aabb& a, const Aabb& b) {
    Aabb r;
    r.min = make_float3(sse_min(a.min.x, b.min.x), sse_min(a.min.y, b.min.y),
                        sse_min(a.min.z, b.min.z));
    r.max = make_float3(sse_max(a.max.x, b.max.x), sse_max(a.max.y, b.max.y),
                        sse_max(a.max.z, b.max.z));
    return r;
}

// BuildBox::half_area: the extent clamped at 0, then xy + yz + zx with each
// product and sum rounded.
__device__ __forceinline__ float build_half_area(const Aabb& b) {
    const float ex = sse_max(__fsub_rn(b.max.x, b.min.x), 0.0f);
    const float ey = sse_max(__fsub_rn(b.max.y, b.min.y), 0.0f);
    const float ez = sse_max(__fsub_rn(b.max.z, b.min.z), 0.0f);
    return __fadd_rn(__fadd_rn(__fmul_rn(ex, ey), __fmul_rn(ey, ez)), __fmul_rn(ez, ex));
}

struct Summary {
    Aabb bounds;
    u32 prims;
    u32 leaves;
    u32 height;
    float cost;
};

// Summary::prim.
__device__ __forceinline__ Summary summary_prim(const Aabb& b, const Collapse& c) {
    Summary s;
    s.bounds = b;
    s.prims = 1u;
    s.leaves = 1u;
    s.height = 0u;
    s.cost = __fmul_rn(c.intersection_cost, build_half_area(b));
    return s;
}

// Summary::merge: one leaf when allowed and no more expensive than the split.
__device__ __forceinline__ Summary summary_merge(const Summary& l, const Summary& r,
                                                 const Collapse& c) {
    Summary s;
    s.bounds = sse_union(l.bounds, r.bounds);
    const float area = build_half_area(s.bounds);
    s.prims = l.prims + r.prims;
    const float split_cost = __fadd_rn(__fadd_rn(__fmul_rn(c.traversal_cost, area), l.cost), r.cost);
    if (s.prims <= c.max_leaf_size) {
        const float leaf_cost = __fmul_rn(__fmul_rn(c.intersection_cost, __uint2float_rn(s.prims)), area);
        if (leaf_cost <= split_cost) {
            s.leaves = 1u;
            s.height = 0u;
            s.cost = leaf_cost;
            return s;
        }
    }
    s.leaves = l.leaves + r.leaves;
    s.height = 1u + max(l.height, r.height);
    s.cost = split_cost;
    return s;
}

__device__ __forceinline__ Aabb node_bounds(const LinkedNode& n) {
    Aabb b;
    b.min = make_float3(n.min[0], n.min[1], n.min[2]);
    b.max = make_float3(n.max[0], n.max[1], n.max[2]);
    return b;
}

__device__ __forceinline__ Summary node_summary(const LinkedNode& n) {
    Summary s;
    s.bounds = node_bounds(n);
    s.prims = n.prims;
    s.leaves = n.leaves;
    s.height = n.height;
    s.cost = n.cost;
    return s;
}

// Nodes move as three 16-byte words (a node is 48 bytes, and every node
// array starts 256-byte aligned), in the field order the layout check pins.
__device__ __forceinline__ void store_node(LinkedNode* nodes, u32 k, u32 left, u32 right,
                                           const Summary& s) {
    uint4* words = reinterpret_cast<uint4*>(nodes + k);
    words[0] = make_uint4(left, right, __float_as_uint(s.bounds.min.x),
                          __float_as_uint(s.bounds.min.y));
    words[1] = make_uint4(__float_as_uint(s.bounds.min.z), __float_as_uint(s.bounds.max.x),
                          __float_as_uint(s.bounds.max.y), __float_as_uint(s.bounds.max.z));
    words[2] = make_uint4(s.prims, s.leaves, s.height, __float_as_uint(s.cost));
}

__device__ __forceinline__ LinkedNode node_from_words(uint4 a, uint4 b, uint4 c) {
    LinkedNode n;
    n.children[0] = a.x;
    n.children[1] = a.y;
    n.min[0] = __uint_as_float(a.z);
    n.min[1] = __uint_as_float(a.w);
    n.min[2] = __uint_as_float(b.x);
    n.max[0] = __uint_as_float(b.y);
    n.max[1] = __uint_as_float(b.z);
    n.max[2] = __uint_as_float(b.w);
    n.prims = c.x;
    n.leaves = c.y;
    n.height = c.z;
    n.cost = __uint_as_float(c.w);
    return n;
}

// A node written by an earlier launch.
__device__ __forceinline__ LinkedNode load_node(const LinkedNode* nodes, u32 k) {
    const uint4* words = reinterpret_cast<const uint4*>(nodes + k);
    return node_from_words(words[0], words[1], words[2]);
}

// A node written by another block in this launch: read past the
// incoherent L1 (ld.global.cg), after the atomic that ordered the write.
__device__ __forceinline__ LinkedNode load_node_cg(const LinkedNode* nodes, u32 k) {
    const uint4* words = reinterpret_cast<const uint4*>(nodes + k);
    return node_from_words(__ldcg(words), __ldcg(words + 1), __ldcg(words + 2));
}

// The summary of whatever `ref` points at (summary_of in linked_tree.rs).
__device__ __forceinline__ Summary ref_summary(u32 ref, const LinkedNode* nodes,
                                               const Aabb* item_bounds, const Collapse& c) {
    if (lt_is_item(ref)) return summary_prim(item_bounds[lt_index(ref)], c);
    return node_summary(load_node(nodes, ref));
}

__device__ __forceinline__ Summary ref_summary_cg(u32 ref, const LinkedNode* nodes,
                                                  const Aabb* item_bounds, const Collapse& c) {
    if (lt_is_item(ref)) return summary_prim(item_bounds[lt_index(ref)], c);
    return node_summary(load_node_cg(nodes, ref));
}

__device__ __forceinline__ void set_parent(u32 ref, u32 parent, u32* node_parent, u32* item_parent) {
    if (lt_is_item(ref)) {
        item_parent[lt_index(ref)] = parent;
    } else {
        node_parent[ref] = parent;
    }
}
