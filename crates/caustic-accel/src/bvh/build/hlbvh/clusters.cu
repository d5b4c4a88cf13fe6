// clusters.cu: the Morton-prefix clusters of the GPU hlbvh (Pantaleoni &
// Luebke, "HLBVH", HPG 2010, §4; Garanzha, Pantaleoni & McAllister,
// "Simpler and Faster HLBVH with Work Queues", HPG 2011, §3), driven by
// hlbvh/cuda.rs.
//
// - hlbvh_heads_*: a cluster starts where the leading `bits - shift` code
//   bits change (hlbvh/mod.rs's `clusters`).
// - hlbvh_cluster_info: one warp per cluster: its box and the centre of
//   the box of its centroids, what the host's top (cluster_top.rs) bins.
// - hlbvh_reorder: the primitives regrouped in the top's order, each with
//   the id of its top group, for PLOC to build each group's subtree.
#include "linked_tree.cuh"

#define HLBVH_THREADS 256u

template <typename Code>
__device__ void heads(const Code* codes, u64 n, u32 shift, u32* out) {
    for (u64 i = global_thread(); i < n; i += grid_threads()) {
        out[i] = (i == 0 || (codes[i] >> shift) != (codes[i - 1] >> shift)) ? 1u : 0u;
    }
}

extern "C" __global__ void __launch_bounds__(HLBVH_THREADS)
hlbvh_heads_30(const u32* codes, u64 n, u32 shift, u32* out) {
    heads(codes, n, shift, out);
}

extern "C" __global__ void __launch_bounds__(HLBVH_THREADS)
hlbvh_heads_63(const u64* codes, u64 n, u32 shift, u32* out) {
    heads(codes, n, shift, out);
}

// Cluster c's box (the union of its primitives' boxes) and the centre of
// the box of its primitives' centroids, (min + max) * 0.5: hlbvh/mod.rs's
// `cluster` in its arithmetic (SSE min and max, each operation rounded).
extern "C" __global__ void __launch_bounds__(HLBVH_THREADS)
hlbvh_cluster_info(const u32* starts, u32 clusters, u32 placed, const Aabb* item_bounds,
                   const float4* item_centroids, Aabb* bounds, float4* centres) {
    const u64 warps = grid_threads() / 32;
    for (u64 cluster = global_thread() / 32; cluster < clusters; cluster += warps) {
        const u32 start = starts[cluster];
        const u32 end = cluster + 1 < clusters ? starts[cluster + 1] : placed;
        Aabb box = aabb_empty();
        Aabb centroid_box = aabb_empty();
        for (u32 k = start + lane_id(); k < end; k += 32) {
            const float4 p = item_centroids[k];
            Aabb point;
            point.min = make_float3(p.x, p.y, p.z);
            point.max = point.min;
            box = sse_union(box, item_bounds[k]);
            centroid_box = sse_union(centroid_box, point);
        }
        for (int d = 16; d > 0; d >>= 1) {
            Aabb other_box, other_centroids;
            other_box.min = make_float3(__shfl_xor_sync(CAUSTIC_FULL_MASK, box.min.x, d),
                                        __shfl_xor_sync(CAUSTIC_FULL_MASK, box.min.y, d),
                                        __shfl_xor_sync(CAUSTIC_FULL_MASK, box.min.z, d));
            other_box.max = make_float3(__shfl_xor_sync(CAUSTIC_FULL_MASK, box.max.x, d),
                                        __shfl_xor_sync(CAUSTIC_FULL_MASK, box.max.y, d),
                                        __shfl_xor_sync(CAUSTIC_FULL_MASK, box.max.z, d));
            other_centroids.min =
                make_float3(__shfl_xor_sync(CAUSTIC_FULL_MASK, centroid_box.min.x, d),
                            __shfl_xor_sync(CAUSTIC_FULL_MASK, centroid_box.min.y, d),
                            __shfl_xor_sync(CAUSTIC_FULL_MASK, centroid_box.min.z, d));
            other_centroids.max =
                make_float3(__shfl_xor_sync(CAUSTIC_FULL_MASK, centroid_box.max.x, d),
                            __shfl_xor_sync(CAUSTIC_FULL_MASK, centroid_box.max.y, d),
                            __shfl_xor_sync(CAUSTIC_FULL_MASK, centroid_box.max.z, d));
            box = sse_union(box, other_box);
            centroid_box = sse_union(centroid_box, other_centroids);
        }
        if (lane_id() == 0) {
            bounds[cluster] = box;
            centres[cluster] = make_float4(
                __fmul_rn(__fadd_rn(centroid_box.min.x, centroid_box.max.x), 0.5f),
                __fmul_rn(__fadd_rn(centroid_box.min.y, centroid_box.max.y), 0.5f),
                __fmul_rn(__fadd_rn(centroid_box.min.z, centroid_box.max.z), 0.5f), 0.0f);
        }
    }
}

// The primitives in the top's slot order: moves[4c .. 4c + 4] = (old
// start, count, new start, group) of the c-th cluster in that order; each
// primitive's segment is its group, which PLOC then clusters apart.
extern "C" __global__ void __launch_bounds__(HLBVH_THREADS)
hlbvh_reorder(const u32* moves, u32 clusters, const u32* ids, const Aabb* item_bounds,
              u32* ids_out, Aabb* bounds_out, u32* segments) {
    const u64 warps = grid_threads() / 32;
    for (u64 c = global_thread() / 32; c < clusters; c += warps) {
        const u32 from = moves[4 * c], count = moves[4 * c + 1];
        const u32 to = moves[4 * c + 2], group = moves[4 * c + 3];
        for (u32 k = lane_id(); k < count; k += 32) {
            ids_out[to + k] = ids[from + k];
            bounds_out[to + k] = item_bounds[from + k];
            segments[to + k] = group;
        }
    }
}
