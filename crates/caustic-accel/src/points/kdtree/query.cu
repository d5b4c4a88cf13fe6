// points/kdtree/query.cu: kNN and radius queries of the photon kd-tree on
// the GPU, the twin of query.rs, driven by query_cuda.rs. A query walks
// the tree with a stack, near child first; a far child is skipped only
// when its splitting plane is strictly farther than the visitor's bound
// (points.cuh's Best, RadiusCount, RadiusFill), so the answers are the
// exact ones, ties included.
#include "kdtree.cuh"

// Offers the points of the tree to `v`, nearest subtrees first, skipping a
// far subtree whose plane lies strictly beyond `v.bound()`.
template <class V>
__device__ __forceinline__ void walk_kdtree(const KdNode* nodes, const float4* sorted, float3 p,
                                            V& v) {
    u32 stack[KD_STACK];
    float plane[KD_STACK];
    int top = 0;
    u32 node = 0;
    float d = 0.0f;
    for (;;) {
        if (d <= v.bound()) {
            const KdNode n = nodes[node];
            if (n.axis == KD_LEAF_AXIS) {
                for (u32 j = n.a; j < n.a + n.b; ++j) {
                    const float4 s = sorted[j];
                    v.offer(dist2(p, make_float3(s.x, s.y, s.z)), __float_as_uint(s.w));
                }
            } else {
                const float diff = coord(p, n.axis) - n.split;
                const u32 near = diff < 0.0f ? n.a : n.b;
                const u32 far = diff < 0.0f ? n.b : n.a;
                stack[top] = far;
                plane[top] = diff * diff;
                ++top;
                node = near;
                d = 0.0f;
                continue;
            }
        }
        if (top == 0) return;
        --top;
        node = stack[top];
        d = plane[top];
    }
}

struct KdWalk {
    const KdNode* nodes;
    const float4* sorted;
    float3 p;
    template <class V>
    __device__ __forceinline__ void operator()(V& v) const {
        walk_kdtree(nodes, sorted, p, v);
    }
};

extern "C" __global__ void __launch_bounds__(KD_THREADS)
point_kdtree_knn(const KdNode* nodes, const float4* sorted, u32 point_count, const float* queries,
                 u64 m, u32 k, float max_radius, u32* out_index, float* out_d2, u32* out_count) {
    for (u64 q = global_thread(); q < m; q += grid_threads()) {
        const float3 p = load_point(queries, q);
        Best best;
        best.init(k, __fmul_rn(max_radius, max_radius));
        if (k > 0 && point_count > 0 && query_ok(p, max_radius)) {
            walk_kdtree(nodes, sorted, p, best);
        }
        best.write(q, k, out_index, out_d2, out_count);
    }
}

extern "C" __global__ void __launch_bounds__(KD_THREADS)
point_kdtree_radius(const KdNode* nodes, const float4* sorted, u32 point_count,
                    const float* queries, u64 m, float radius, const u32* offsets, u32* counts,
                    u64* total, u64* keys, u32* out_index, float* out_d2) {
    for (u64 q = global_thread(); q < m; q += grid_threads()) {
        const float3 p = load_point(queries, q);
        const bool ok = point_count > 0 && query_ok(p, radius);
        radius_query(q, ok, radius, offsets, counts, total, keys, out_index, out_d2,
                     KdWalk{nodes, sorted, p});
    }
}
