// point_kdtree.cu: a photon kd-tree built on the GPU, level by level
// (after Zhou et al. 2008, seed 002: every level splits all its nodes at
// once with data-parallel primitives), and its kNN and radius queries.
//
// Build, driven by point_kdtree.rs: the finite points' indices form the
// permutation `perm`, one contiguous range per node. Per level, one block
// per node to split (point_kdtree_split) finds the node's tight bounds,
// splits at the spatial median of the longest axis, counts the left side
// and flags the right side's points; point_kdtree_heads marks each split
// node's range as a segment; the segmented split (split.cu) moves every
// node's left points before its right ones, stably. The host turns the
// counts into children. Leaves keep at most LEAF points (or points that no
// plane separates). Zhou's empty-space cut-off and small-node VVH are left
// out: the spatial median alone, which the queries do not depend on.
//
// Queries walk the tree with a stack, near child first; a far child is
// skipped only when its splitting plane is strictly farther than the
// visitor's bound (points.cuh's Best, RadiusCount, RadiusFill), so the
// answers are the exact ones, ties included.
#include "points.cuh"

#define KD_THREADS 256u
#define KD_STACK 64
#define KD_LEAF_AXIS 3u

// caustic_gpu::point_kdtree::GpuKdNode: an inner node splits `axis` at
// `split` with children a (below) and b (at or above); a leaf (axis 3)
// holds sorted points a .. a + b.
struct KdNode {
    float split;
    u32 axis;
    u32 a;
    u32 b;
};

__device__ __forceinline__ float coord(float3 p, u32 axis) {
    return axis == 0 ? p.x : (axis == 1 ? p.y : p.z);
}

// flags[i] = 1 for a finite point: the build leaves the others out.
extern "C" __global__ void __launch_bounds__(KD_THREADS)
point_kdtree_finite(const float* points, u64 n, u32* flags) {
    for (u64 i = global_thread(); i < n; i += grid_threads()) {
        const float3 p = load_point(points, i);
        flags[i] = finite3(p.x, p.y, p.z) ? 1u : 0u;
    }
}

// Block-wide min (or max) of one float per thread.
__device__ float block_reduce(float v, bool take_max, float* scratch) {
    for (int d = 16; d > 0; d >>= 1) {
        const float o = __shfl_xor_sync(CAUSTIC_FULL_MASK, v, d);
        v = take_max ? fmaxf(v, o) : fminf(v, o);
    }
    if (lane_id() == 0) scratch[threadIdx.x / 32] = v;
    __syncthreads();
    if (threadIdx.x < 32) {
        v = threadIdx.x < blockDim.x / 32 ? scratch[threadIdx.x] : (take_max ? -CAUSTIC_INF : CAUSTIC_INF);
        for (int d = 16; d > 0; d >>= 1) {
            const float o = __shfl_xor_sync(CAUSTIC_FULL_MASK, v, d);
            v = take_max ? fmaxf(v, o) : fminf(v, o);
        }
        if (threadIdx.x == 0) scratch[0] = v;
    }
    __syncthreads();
    const float out = scratch[0];
    __syncthreads();
    return out;
}

// One block per node of the level: ranges[2j], ranges[2j + 1] = start,
// count in `perm`. Writes the node's split (axis 3: no plane separates its
// points) and left count, and flags[perm position] = 1 right of the plane.
extern "C" __global__ void __launch_bounds__(KD_THREADS)
point_kdtree_split(const float* points, const u32* perm, const u32* ranges, u32* flags,
                   u32* out_axis, float* out_split, u32* out_left) {
    __shared__ float scratch[KD_THREADS / 32];
    __shared__ u32 left_total;
    const u32 node = blockIdx.x;
    const u32 start = ranges[2 * node], count = ranges[2 * node + 1];
    float lo[3] = {CAUSTIC_INF, CAUSTIC_INF, CAUSTIC_INF};
    float hi[3] = {-CAUSTIC_INF, -CAUSTIC_INF, -CAUSTIC_INF};
    for (u32 j = threadIdx.x; j < count; j += blockDim.x) {
        const float3 p = load_point(points, perm[start + j]);
        lo[0] = fminf(lo[0], p.x); lo[1] = fminf(lo[1], p.y); lo[2] = fminf(lo[2], p.z);
        hi[0] = fmaxf(hi[0], p.x); hi[1] = fmaxf(hi[1], p.y); hi[2] = fmaxf(hi[2], p.z);
    }
    float extent[3];
    for (int a = 0; a < 3; ++a) {
        lo[a] = block_reduce(lo[a], false, scratch);
        hi[a] = block_reduce(hi[a], true, scratch);
        extent[a] = hi[a] - lo[a];
    }
    u32 axis = extent[0] >= extent[1] ? (extent[0] >= extent[2] ? 0u : 2u)
                                      : (extent[1] >= extent[2] ? 1u : 2u);
    const float split = lo[axis] + 0.5f * extent[axis];
    if (threadIdx.x == 0) left_total = 0;
    __syncthreads();
    u32 left = 0;
    for (u32 j = threadIdx.x; j < count; j += blockDim.x) {
        const float3 p = load_point(points, perm[start + j]);
        const bool right = coord(p, axis) >= split;
        flags[start + j] = right ? 1u : 0u;
        left += right ? 0u : 1u;
    }
    for (int d = 16; d > 0; d >>= 1) left += __shfl_xor_sync(CAUSTIC_FULL_MASK, left, d);
    if (lane_id() == 0) atomicAdd(&left_total, left);
    __syncthreads();
    if (threadIdx.x == 0) {
        const bool separates = extent[axis] > 0.0f && left_total > 0 && left_total < count;
        out_axis[node] = separates ? axis : KD_LEAF_AXIS;
        out_split[node] = split;
        out_left[node] = left_total;
    }
}

// heads[start] = heads[start + count] = 1 for every node of the level:
// each node's range is a segment of its own for the segmented split.
extern "C" __global__ void __launch_bounds__(KD_THREADS)
point_kdtree_heads(const u32* ranges, u32 nodes, u32 n, u32* heads) {
    for (u64 j = global_thread(); j < nodes; j += grid_threads()) {
        const u32 start = ranges[2 * j], count = ranges[2 * j + 1];
        heads[start] = 1;
        if (start + count < n) heads[start + count] = 1;
    }
}

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
