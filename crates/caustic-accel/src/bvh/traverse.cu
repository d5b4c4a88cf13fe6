// traverse_bvh2.cu: closest-hit and any-hit traversal of a caustic_accel::Bvh2
// over a device buffer of rays.
//
// The kernel is the persistent "while-while" traversal of Aila and Laine,
// "Understanding the Efficiency of Ray Traversal on GPUs" (HPG 2009), in the
// form of their Kepler addendum (2012): just enough threads to fill the GPU
// stay resident and fetch rays from a global counter, a warp's idle lanes
// taking consecutive rays together with one atomic (up to 32 at a time); the
// inner loops traverse inner nodes until every lane holds a leaf (the first
// leaf a lane meets is postponed while it goes on to find another), then
// test leaves; and a warp whose active lanes drop below a threshold leaves
// the traversal early to refill the idle ones ("dynamic fetch").
//
// The results are the CPU's, bit for bit (caustic_accel's Accel contract):
// the closest t in (tmin, tmax) of the watertight test, ties to the lowest
// scene id; any-hit is true when such a hit exists. Three things make that
// so: the triangle test and the box test are the CPU's arithmetic (see
// common.cuh and bvh.cuh), leaves accept a hit at exactly the closest
// distance when its id is lower, and a popped node is culled only when its
// box's bound exceeds the closest hit, as on the CPU. The order in which
// nodes are visited differs from the CPU's and does not matter.
#include "bvh_traverse.cuh"

// Threads per block (TRACE_THREADS in trace.rs).
#define TRACE_THREADS 128u
__device__ __forceinline__ void store_result(bool any_hit, u32 index, const RayState& s,
                                             bool occluded_ray, Hit* hits, u32* occluded) {
    if (any_hit) {
        occluded[index] = occluded_ray ? 1u : 0u;
        return;
    }
    const bool hit = s.prim != NO_HIT;
    reinterpret_cast<float4*>(hits)[index] =
        make_float4(hit ? s.closest : CAUSTIC_INF, __uint_as_float(s.prim), s.u, s.v);
}

// The persistent loop shared by both kernels; one of `hits` / `occluded` is
// used. Every lane of the warp runs every round: the round starts with the
// whole warp converged (a full-mask vote), its idle lanes take consecutive
// rays with one atomic, and then the busy lanes traverse together until the
// ray is done or too few remain. Keeping lanes that have run out of rays in
// the loop is what lets the vote name all 32 lanes; a lane that left early
// would make the warp's later rounds start diverged.
//
// With GROUPED, rays come in groups of `groups.size` consecutive rays that
// want only their group's nearest hit, kept in group_keys (see
// share_group_nearest); a ray's own hit is then its closest hit or, when
// its group holds a nearer one, possibly a miss. `ray_count` then counts
// the rays of the launch's phase (GroupPhase).
template <bool ANY_HIT, bool GROUPED = false>
__device__ __forceinline__ void trace(const BvhNode* __restrict__ nodes, u32 node_count,
                                      const Triangle* __restrict__ tris,
                                      const Ray* __restrict__ rays, u32 ray_count,
                                      u32 image_width, Hit* __restrict__ hits,
                                      u32* __restrict__ occluded, u32* counter,
                                      GroupPhase groups = GroupPhase{1, 1, 0},
                                      u64* group_keys = nullptr) {
    Stack<ANY_HIT> stack;
    RayState s;
    NodeRef node = node_ref(0, NODE_NONE), leaf = node_ref(0, 0);
    u32 index = 0;
    bool busy = false, exhausted = false;
    while (true) {
        const bool wants = !busy && !exhausted;
        const u32 idle = __ballot_sync(CAUSTIC_FULL_MASK, wants);
        if (idle != 0) {
            u32 base = 0;
            if (lane_id() == 0) base = atomicAdd(counter, (u32)__popc(idle));
            base = __shfl_sync(CAUSTIC_FULL_MASK, base, 0);
            if (wants) {
                const u32 work = base + __popc(idle & lanemask_lt());
                exhausted = work >= ray_count;
                if (!exhausted) {
                    index = GROUPED ? groups.ray_of_work(work) : ray_of_work(work, image_width);
                    stack.size = 0;
                    busy = start_ray(rays, index, nodes, node_count, s, node, leaf);
                    if (GROUPED && busy) share_group_nearest(group_keys + index / groups.size, s);
                    // A ray that misses the root (or cannot be traced) is done.
                    if (!busy) store_result(ANY_HIT, index, s, false, hits, occluded);
                }
            }
        }
        if (__all_sync(CAUSTIC_FULL_MASK, exhausted)) break;
        if (busy) {
            u64* group_key = GROUPED ? group_keys + index / groups.size : nullptr;
            const bool found =
                traverse<ANY_HIT, GROUPED>(nodes, tris, s, node, leaf, stack, group_key);
            if (node.count == NODE_NONE && leaf.count == 0) {
                store_result(ANY_HIT, index, s, found, hits, occluded);
                busy = false;
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(TRACE_THREADS)
    traverse_bvh2_closest(const BvhNode* nodes, u32 node_count, const Triangle* tris,
                          const Ray* rays, u32 ray_count, u32 image_width, Hit* hits,
                          u32* counter) {
    trace<false>(nodes, node_count, tris, rays, ray_count, image_width, hits, nullptr, counter);
}

extern "C" __global__ void __launch_bounds__(TRACE_THREADS)
    traverse_bvh2_any(const BvhNode* nodes, u32 node_count, const Triangle* tris,
                      const Ray* rays, u32 ray_count, u32 image_width, u32* occluded,
                      u32* counter) {
    trace<true>(nodes, node_count, tris, rays, ray_count, image_width, nullptr, occluded, counter);
}

// Closest hits of one phase of rays in groups of `group_size` consecutive
// rays (GroupPhase: phase 0 the probes, every `probe_stride`-th ray of a
// group, phase 1 the others; `work_count` rays in all), each group's
// nearest hit (hit_key) min-ed into group_keys[group], which start at ~0
// (a miss). Over both phases the group keys equal the minimum of the rays'
// own closest hits' keys; a ray's entry in `hits` is its closest hit, or a
// miss when its group already held a nearer hit (share_group_nearest).
extern "C" __global__ void __launch_bounds__(TRACE_THREADS)
    traverse_bvh2_group_nearest(const BvhNode* nodes, u32 node_count, const Triangle* tris,
                                const Ray* rays, u32 work_count, u32 group_size,
                                u32 probe_stride, u32 phase, Hit* hits, u64* group_keys,
                                u32* counter) {
    trace<false, true>(nodes, node_count, tris, rays, work_count, 0, hits, nullptr, counter,
                       GroupPhase{group_size, probe_stride, phase}, group_keys);
}
