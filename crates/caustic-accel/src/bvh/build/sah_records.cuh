// sah_records.cuh: the records the GPU top-down SAH builders exchange with
// Rust (binned_sah_cuda.rs and its helpers), each checked field by field
// against its twin in sah_records_cuda.rs through accel_layout.cuh, and the
// limits the records are sized by.
#pragma once
#include "bvh.cuh"

#define SAH_MAX_STAGES 8u

// A primitive reference: its box and scene id, 32 bytes (two float4 loads).
struct PrimRef {
    float lo[3];
    u32 id;
    float hi[3];
    u32 pad;
};
CAUSTIC_CHECK_SIZE(PrimRef);
CAUSTIC_CHECK_FIELD(PrimRef, lo);
CAUSTIC_CHECK_FIELD(PrimRef, id);
CAUSTIC_CHECK_FIELD(PrimRef, hi);
CAUSTIC_CHECK_FIELD(PrimRef, pad);

// A node of the level being split: primitives start .. start + count of the
// reference array, its box (lo, hi), the box of its split points (clo, chi,
// doubled box centres), its node slot and depth.
struct SahTask {
    float lo[3];
    u32 start;
    float hi[3];
    u32 count;
    float clo[3];
    u32 slot;
    float chi[3];
    u32 depth;
};
CAUSTIC_CHECK_SIZE(SahTask);
CAUSTIC_CHECK_FIELD(SahTask, lo);
CAUSTIC_CHECK_FIELD(SahTask, start);
CAUSTIC_CHECK_FIELD(SahTask, hi);
CAUSTIC_CHECK_FIELD(SahTask, count);
CAUSTIC_CHECK_FIELD(SahTask, clo);
CAUSTIC_CHECK_FIELD(SahTask, slot);
CAUSTIC_CHECK_FIELD(SahTask, chi);
CAUSTIC_CHECK_FIELD(SahTask, depth);

// What a level node does: a leaf, a binned plane (axis, first right bin,
// the axis's bin mapping) or an object median (axis, pivot key); `left`
// primitives go to the left child.
struct SahPlan {
    u32 kind;
    u32 axis;
    u32 bin;
    u32 left;
    float origin;
    float scale;
    float top;
    u32 pivot_hi;
    u32 pivot_lo;
    u32 pad[3];
};
CAUSTIC_CHECK_SIZE(SahPlan);
CAUSTIC_CHECK_FIELD(SahPlan, kind);
CAUSTIC_CHECK_FIELD(SahPlan, axis);
CAUSTIC_CHECK_FIELD(SahPlan, bin);
CAUSTIC_CHECK_FIELD(SahPlan, left);
CAUSTIC_CHECK_FIELD(SahPlan, origin);
CAUSTIC_CHECK_FIELD(SahPlan, scale);
CAUSTIC_CHECK_FIELD(SahPlan, top);
CAUSTIC_CHECK_FIELD(SahPlan, pivot_hi);
CAUSTIC_CHECK_FIELD(SahPlan, pivot_lo);
CAUSTIC_CHECK_FIELD(SahPlan, pad);

// Both sides of a partition (of a node, or of one chunk of it): boxes and
// split-point boxes, each min xyz then max xyz.
struct SplitSides {
    float left[6];
    float right[6];
    float left_centers[6];
    float right_centers[6];
};
CAUSTIC_CHECK_SIZE(SplitSides);
CAUSTIC_CHECK_FIELD(SplitSides, left);
CAUSTIC_CHECK_FIELD(SplitSides, right);
CAUSTIC_CHECK_FIELD(SplitSides, left_centers);
CAUSTIC_CHECK_FIELD(SplitSides, right_centers);

// A chunk of a large node (Zeidan 2011, CreateChunks): its node's index in
// the level, its primitives, and (once planned) how many primitives of the
// node's earlier chunks go left.
struct SahChunk {
    u32 node;
    u32 start;
    u32 count;
    u32 left_offset;
};
CAUSTIC_CHECK_SIZE(SahChunk);
CAUSTIC_CHECK_FIELD(SahChunk, node);
CAUSTIC_CHECK_FIELD(SahChunk, start);
CAUSTIC_CHECK_FIELD(SahChunk, count);
CAUSTIC_CHECK_FIELD(SahChunk, left_offset);

// A small root: a node of at most sweep_max primitives, built by one warp
// with the full sweep; `parity` names the reference buffer holding them.
struct SahSmallRoot {
    float lo[3];
    u32 start;
    float hi[3];
    u32 count;
    u32 slot;
    u32 depth;
    u32 parity;
    u32 pad;
};
CAUSTIC_CHECK_SIZE(SahSmallRoot);
CAUSTIC_CHECK_FIELD(SahSmallRoot, lo);
CAUSTIC_CHECK_FIELD(SahSmallRoot, start);
CAUSTIC_CHECK_FIELD(SahSmallRoot, hi);
CAUSTIC_CHECK_FIELD(SahSmallRoot, count);
CAUSTIC_CHECK_FIELD(SahSmallRoot, slot);
CAUSTIC_CHECK_FIELD(SahSmallRoot, depth);
CAUSTIC_CHECK_FIELD(SahSmallRoot, parity);
CAUSTIC_CHECK_FIELD(SahSmallRoot, pad);

// The builder's settings (BinnedSahConfig): bin stages by decreasing
// min prims, then the default bin count, the exact-sweep size and the leaf rules.
struct SahParams {
    u32 stage_min[SAH_MAX_STAGES];
    u32 stage_bins[SAH_MAX_STAGES];
    u32 stages;
    u32 bins;
    u32 sweep_max;
    u32 min_leaf;
    u32 max_leaf;
    float traversal_cost;
    float intersection_cost;
    u32 pad;
};
CAUSTIC_CHECK_SIZE(SahParams);
CAUSTIC_CHECK_FIELD(SahParams, stage_min);
CAUSTIC_CHECK_FIELD(SahParams, stage_bins);
CAUSTIC_CHECK_FIELD(SahParams, stages);
CAUSTIC_CHECK_FIELD(SahParams, bins);
CAUSTIC_CHECK_FIELD(SahParams, sweep_max);
CAUSTIC_CHECK_FIELD(SahParams, min_leaf);
CAUSTIC_CHECK_FIELD(SahParams, max_leaf);
CAUSTIC_CHECK_FIELD(SahParams, traversal_cost);
CAUSTIC_CHECK_FIELD(SahParams, intersection_cost);
CAUSTIC_CHECK_FIELD(SahParams, pad);
