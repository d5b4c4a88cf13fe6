// refit.cu: the GPU twin of refit.rs's Bvh2::refit, for a Bvh2 on the device
// (refit_cuda.rs). The topology is kept; every box is recomputed bottom-up
// from the triangles' new boxes.
//
// The bottom-up pass is Karras 2012 ("Maximizing parallelism in the
// construction of BVHs, octrees, and k-d trees"), §4 (Apetrei 2014 uses the
// same arrival rule): one thread per leaf computes the leaf's box and climbs
// through the parent links; at each inner node an atomic counter tells the
// first child to arrive to stop and the second, which finds both children's
// boxes written, to compute the node's box and go on. Nothing waits, so any
// number of threads and any schedule finish.
//
// The boxes are the CPU's bit for bit: a leaf's box is the union, in slot
// order from the empty box, of its triangles' finite boxes (Triangle::bounds
// is min/max over v0, v1, v2 in that order; a box with an infinite or NaN
// corner adds nothing), and an inner node's is left ∪ right. fminf/fmaxf skip
// NaN as Rust's f32::min/max do, and min/max round nothing, so the same
// operands in the same order give the same floats.
#include "bvh.cuh"

#define REFIT_THREADS 256u
#define REFIT_NO_PARENT 0xffffffffu

// parents[c] = the inner node whose child c is; the root's is REFIT_NO_PARENT.
// The topology does not change under a refit, so this runs once per build.
extern "C" __global__ void __launch_bounds__(REFIT_THREADS)
refit_parents(const BvhNode* nodes, u64 n, u32* parents) {
    for (u64 i = global_thread(); i < n; i += grid_threads()) {
        if (i == 0) parents[0] = REFIT_NO_PARENT;
        const BvhNode node = nodes[i];
        if (node.count == 0u) {
            parents[node.first] = (u32)i;
            parents[node.first + 1u] = (u32)i;
        }
    }
}

// slots[k] = scene[prim_indices[k]]: the scene-order triangles (which carry
// their scene ids) copied into the leaf-slot order the traversal reads.
extern "C" __global__ void __launch_bounds__(REFIT_THREADS)
refit_gather(const Triangle* scene, const u32* prim_indices, u64 n, Triangle* slots) {
    for (u64 k = global_thread(); k < n; k += grid_threads()) {
        slots[k] = scene[prim_indices[k]];
    }
}

__device__ __forceinline__ bool refit_finite(const Aabb& b) {
    return fabsf(b.min.x) < CAUSTIC_INF && fabsf(b.min.y) < CAUSTIC_INF && fabsf(b.min.z) < CAUSTIC_INF &&
           fabsf(b.max.x) < CAUSTIC_INF && fabsf(b.max.y) < CAUSTIC_INF && fabsf(b.max.z) < CAUSTIC_INF;
}

// A node's box as another thread wrote it: read through L2 (ld.global.cg),
// never from a stale L1 line.
__device__ __forceinline__ Aabb refit_load_box(const BvhNode* nodes, u32 i) {
    const float4* words = reinterpret_cast<const float4*>(nodes + i);
    const float4 lo = __ldcg(words);
    const float4 hi = __ldcg(words + 1);
    Aabb box;
    box.min = make_float3(lo.x, lo.y, lo.z);
    box.max = make_float3(hi.x, hi.y, hi.z);
    return box;
}

__device__ __forceinline__ void refit_store_box(BvhNode* nodes, u32 i, const Aabb& box) {
    BvhNode* node = nodes + i;
    node->min[0] = box.min.x;
    node->min[1] = box.min.y;
    node->min[2] = box.min.z;
    node->max[0] = box.max.x;
    node->max[1] = box.max.y;
    node->max[2] = box.max.z;
}

// The bottom-up pass over n nodes: a thread per leaf, arrivals[] zeroed
// before the launch (one counter per node), slots[] the leaf-slot triangles.
extern "C" __global__ void __launch_bounds__(REFIT_THREADS)
refit_bottom_up(BvhNode* nodes, const u32* parents, u32* arrivals, const Triangle* slots, u64 n) {
    for (u64 i = global_thread(); i < n; i += grid_threads()) {
        const BvhNode leaf = nodes[i];
        if (leaf.count == 0u) continue;
        Aabb box = aabb_empty();
        for (u32 k = leaf.first; k < leaf.first + leaf.count; ++k) {
            const Aabb b = triangle_bounds(slots[k]);
            if (refit_finite(b)) box = aabb_union(box, b);
        }
        refit_store_box(nodes, (u32)i, box);
        u32 node = (u32)i;
        for (;;) {
            const u32 parent = parents[node];
            if (parent == REFIT_NO_PARENT) break;
            // Release this subtree's boxes before the arrival is counted; the
            // second child to arrive then reads both (Karras 2012, §4).
            __threadfence();
            if (atomicAdd(&arrivals[parent], 1u) == 0u) break;
            __threadfence();
            const u32 left = __ldcg(&nodes[parent].first);
            const Aabb merged = aabb_union(refit_load_box(nodes, left), refit_load_box(nodes, left + 1u));
            refit_store_box(nodes, parent, merged);
            node = parent;
        }
    }
}
