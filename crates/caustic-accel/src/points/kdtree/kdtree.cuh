// points/kdtree/kdtree.cuh: the photon kd-tree's records on the device
// (build.cu builds them, query.cu walks them) and their constants.
#pragma once
#include "points.cuh"

#define KD_THREADS 256u
#define KD_STACK 64
#define KD_LEAF_AXIS 3u
// Small roots: at most 64 points (one u64 mask bit each), one warp each.
#define KD_SMALL 64u
#define KD_SMALL_THREADS 32u
// Pending right children of a small root's walk: one per level below the
// root, plus the two children of the deepest split (depth cap 64).
#define KD_SMALL_STACK 66u
#define KD_NONE 0xffffffffu

// caustic_accel::points::kdtree::build_cuda::GpuKdNode: an inner node splits `axis` at
// `split` with children a (below) and b (at or above); a leaf (axis 3)
// holds sorted points a .. a + b.
struct KdNode {
    float split;
    u32 axis;
    u32 a;
    u32 b;
};

// caustic_accel::points::kdtree::build_cuda::SmallRoot: a node of at most 64 points
// perm[start .. start + count], its cell and depth; its own node goes to
// nodes[slot] (the large stage's child link points there).
struct SmallRoot {
    u32 start;
    u32 count;
    u32 depth;
    u32 slot;
    float lo[3];
    float hi[3];
};

__device__ __forceinline__ float coord(float3 p, u32 axis) {
    return axis == 0 ? p.x : (axis == 1 ? p.y : p.z);
}
