// compressed.cuh: the compressed 8-wide BVH node (caustic_accel's
// bvh::wide::compressed, whose module docs give the format: Ylitie, Karras
// and Laine, HPG 2017), checked field by field against its Rust twin, and
// the arithmetic that both the build (compress.cu) and the traversal
// (traverse_compressed.cu) must do identically.
#pragma once
#include "common.cuh"
#include "layout_check.cuh"
#include "accel_layout.cuh"

struct CompressedNode {
    float origin[3];
    u8 exponents[3];
    u8 inner_mask;
    u32 child_base;
    u32 triangle_base;
    u8 meta[8];
    u8 lo_x[8];
    u8 lo_y[8];
    u8 lo_z[8];
    u8 hi_x[8];
    u8 hi_y[8];
    u8 hi_z[8];
};
CAUSTIC_CHECK_SIZE(CompressedNode);
CAUSTIC_CHECK_FIELD(CompressedNode, origin);
CAUSTIC_CHECK_FIELD(CompressedNode, exponents);
CAUSTIC_CHECK_FIELD(CompressedNode, inner_mask);
CAUSTIC_CHECK_FIELD(CompressedNode, child_base);
CAUSTIC_CHECK_FIELD(CompressedNode, triangle_base);
CAUSTIC_CHECK_FIELD(CompressedNode, meta);
CAUSTIC_CHECK_FIELD(CompressedNode, lo_x);
CAUSTIC_CHECK_FIELD(CompressedNode, lo_y);
CAUSTIC_CHECK_FIELD(CompressedNode, lo_z);
CAUSTIC_CHECK_FIELD(CompressedNode, hi_x);
CAUSTIC_CHECK_FIELD(CompressedNode, hi_y);
CAUSTIC_CHECK_FIELD(CompressedNode, hi_z);

// Children per node, triangles per leaf child, triangle bits of a node's
// hit mask (compressed::WIDTH, LEAF_MAX, NODE_TRIANGLES; checked by a host test).
#define CW_WIDTH 8u
#define CW_LEAF_MAX 3u
#define CW_NODE_TRIANGLES 24u
// A node is five 16-byte words: (origin, exponents | inner_mask << 24),
// (child_base, triangle_base, meta 0..4, meta 4..8), then the planes: words
// 2..4 hold lo_x, lo_y, lo_z, hi_x, hi_y, hi_z, two 32-bit words each.
#define CW_NODE_WORDS 5u

// Meta bytes: an inner child in `slot`, a leaf of `count` triangles at `offset`.
__device__ __forceinline__ u32 cw_meta_inner(u32 slot) { return 0x20u | (24u + slot); }
__device__ __forceinline__ u32 cw_meta_leaf(u32 offset, u32 count) {
    return (((1u << count) - 1u) << 5) | offset;
}

// The grid step 2^(e - 127) of a biased exponent e in 1..254.
__device__ __forceinline__ float cw_exponent_scale(u32 biased) { return __uint_as_float(biased << 23); }

// A quantised plane in world space: one rounding, as compressed::decode.
__device__ __forceinline__ float cw_decode(u32 q, float scale, float origin) {
    return __fmaf_rn((float)q, scale, origin);
}
