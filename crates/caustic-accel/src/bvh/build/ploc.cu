// ploc.cu: Parallel Locally-Ordered Clustering on the device (Meister &
// Bittner, "Parallel Locally-Ordered Clustering for Bounding Volume
// Hierarchy Construction", IEEE TVCG 24(3), 2018, §4), the twin of
// ploc.rs, driven by ploc_cuda.rs. One iteration over the m clusters:
//
// - ploc_nearest (§4.2): every cluster's nearest neighbour among the
//   `radius` clusters on either side, the distance being the half area of
//   the union of the two boxes; a block stages its clusters' boxes and the
//   window around them in shared memory. Keys (area bits, index) are
//   compared as one integer, so ties go to the lower index and the choice
//   is ploc.rs's exactly (a pair's union is taken lower index first, as
//   the CPU takes it).
// - ploc_flags: mutual pairs (§4.3); the lower end merges, the upper end
//   disappears. Two exclusive scans (ops::scan) turn the flags into each
//   merge's node index and each survivor's position (§4.4).
// - ploc_merge: the merged nodes, in the CPU's numbering (this iteration's
//   first node plus the merges before), with the CPU's Summary::merge, and
//   the compacted clusters in order, as ploc.rs's merge writes them.
//
// With segment ids (the GPU hlbvh), neighbours are searched only within a
// cluster's own segment: each Morton-prefix cluster is clustered apart, and
// a segment's last cluster, having no neighbour, stays as it is.
#include "linked_tree.cuh"

#define PLOC_THREADS 256u
// The largest search radius (ploc's `r=`): the window staged per block.
#define PLOC_MAX_RADIUS 256u
#define PLOC_WINDOW (PLOC_THREADS + 2u * PLOC_MAX_RADIUS)

extern "C" __global__ void __launch_bounds__(PLOC_THREADS)
ploc_init(const Aabb* item_bounds, u64 n, Aabb* boxes, u32* refs) {
    for (u64 i = global_thread(); i < n; i += grid_threads()) {
        boxes[i] = item_bounds[i];
        refs[i] = (u32)i | LT_ITEM_BIT;
    }
}

// neighbours[i] = the nearest cluster to i within `radius` (and within its
// segment when `segments` is not null), LT_NONE when there is none.
extern "C" __global__ void __launch_bounds__(PLOC_THREADS)
ploc_nearest(const Aabb* boxes, const u32* segments, u32 m, u32 radius, u32* neighbours) {
    __shared__ Aabb window[PLOC_WINDOW];
    __shared__ u32 window_segments[PLOC_WINDOW];
    const long long base = (long long)blockIdx.x * PLOC_THREADS;
    const long long lo = base - (long long)radius;
    const u32 span = PLOC_THREADS + 2u * radius;
    for (u32 w = threadIdx.x; w < span; w += PLOC_THREADS) {
        const long long j = lo + w;
        if (j >= 0 && j < (long long)m) {
            window[w] = boxes[j];
            window_segments[w] = segments != nullptr ? segments[j] : 0u;
        }
    }
    __syncthreads();
    const long long i = base + threadIdx.x;
    if (i >= (long long)m) return;
    const u32 own = (u32)(i - lo);
    const Aabb a = window[own];
    const u32 segment = window_segments[own];
    u64 best = ~0ull;
    const long long first = max(i - (long long)radius, 0ll);
    const long long last = min(i + (long long)radius, (long long)m - 1);
    for (long long j = first; j <= last; ++j) {
        const u32 w = (u32)(j - lo);
        if (j == i || window_segments[w] != segment) continue;
        const Aabb u = j < i ? sse_union(window[w], a) : sse_union(a, window[w]);
        const u64 key = ((u64)__float_as_uint(build_half_area(u)) << 32) | (u64)j;
        best = min(best, key);
    }
    neighbours[i] = best == ~0ull ? LT_NONE : (u32)best;
}

__device__ __forceinline__ bool mutual(const u32* neighbours, u32 i, u32 j) {
    return j != LT_NONE && neighbours[j] == i;
}

// merges[i] = 1 where i is the lower end of a mutual pair; keeps[i] = 1
// where i survives (it is not the upper end of one).
extern "C" __global__ void __launch_bounds__(PLOC_THREADS)
ploc_flags(const u32* neighbours, u32 m, u32* merges, u32* keeps) {
    for (u64 t = global_thread(); t < m; t += grid_threads()) {
        const u32 i = (u32)t;
        const u32 j = neighbours[i];
        const bool paired = mutual(neighbours, i, j);
        merges[i] = paired && i < j ? 1u : 0u;
        keeps[i] = paired && j < i ? 0u : 1u;
    }
}

// The merged nodes (from index `built` on) and the next iteration's clusters.
extern "C" __global__ void __launch_bounds__(PLOC_THREADS)
ploc_merge(const Aabb* boxes, const u32* refs, const u32* segments, const u32* neighbours,
           const u32* merge_offsets, const u32* keep_offsets, u32 m, u32 built,
           const Aabb* item_bounds, LinkedNode* nodes, u32* node_parent, u32* item_parent,
           Aabb* next_boxes, u32* next_refs, u32* next_segments, u32 max_leaf_size,
           float traversal_cost, float intersection_cost) {
    Collapse c;
    c.max_leaf_size = max_leaf_size;
    c.traversal_cost = traversal_cost;
    c.intersection_cost = intersection_cost;
    for (u64 t = global_thread(); t < m; t += grid_threads()) {
        const u32 i = (u32)t;
        const u32 j = neighbours[i];
        const bool paired = mutual(neighbours, i, j);
        if (paired && j < i) continue;
        const u32 at = keep_offsets[i];
        if (segments != nullptr) next_segments[at] = segments[i];
        if (!paired) {
            next_boxes[at] = boxes[i];
            next_refs[at] = refs[i];
            continue;
        }
        const u32 k = built + merge_offsets[i];
        const u32 left = refs[i], right = refs[j];
        const Summary s = summary_merge(ref_summary(left, nodes, item_bounds, c),
                                        ref_summary(right, nodes, item_bounds, c), c);
        store_node(nodes, k, left, right, s);
        set_parent(left, k, node_parent, item_parent);
        set_parent(right, k, node_parent, item_parent);
        next_boxes[at] = sse_union(boxes[i], boxes[j]);
        next_refs[at] = k;
    }
}
