// sah_device.cu: the steps around the levels of the GPU SAH builders
// (binned_sah_cuda.rs): references from triangles, the root task, packing
// the small subtrees after the level part of the node array, and the
// triangles in leaf-slot order.
#include "binned_sah.cuh"

#define SAH_PREP_THREADS 256u

__device__ __forceinline__ float3 triangle_vertex(const Triangle& t, u32 k) {
    const float* v = k == 0 ? t.v0 : (k == 1 ? t.v1 : t.v2);
    return make_float3(v[0], v[1], v[2]);
}

__device__ __forceinline__ bool finite3(float3 v) {
    return fabsf(v.x) < CAUSTIC_INF && fabsf(v.y) < CAUSTIC_INF && fabsf(v.z) < CAUSTIC_INF;
}

// Triangle::bounds (f32::min/max skip NaN, as fminf/fmaxf do).
__device__ __forceinline__ void triangle_box(const Triangle& t, float3& lo, float3& hi) {
    const float3 a = triangle_vertex(t, 0), b = triangle_vertex(t, 1), c = triangle_vertex(t, 2);
    lo = min3(min3(a, b), c);
    hi = max3(max3(a, b), c);
}

// BuildInput::is_placeable of a triangle: finite, non-empty box and a
// finite centroid ((v0 + v1) + v2 overflows where the CPU's does).
// placed[i] = 1 for those, parked[i] = 1 for the others.
extern "C" __global__ void __launch_bounds__(SAH_PREP_THREADS)
sah_placeable(const Triangle* tris, u64 n, u32* placed, u32* parked) {
    for (u64 i = global_thread(); i < n; i += grid_threads()) {
        const Triangle t = tris[i];
        float3 lo, hi;
        triangle_box(t, lo, hi);
        const float3 a = triangle_vertex(t, 0), b = triangle_vertex(t, 1), c = triangle_vertex(t, 2);
        const float3 sum = make_float3(__fadd_rn(__fadd_rn(a.x, b.x), c.x), __fadd_rn(__fadd_rn(a.y, b.y), c.y),
                                       __fadd_rn(__fadd_rn(a.z, b.z), c.z));
        const bool empty = lo.x > hi.x || lo.y > hi.y || lo.z > hi.z;
        const bool ok = finite3(lo) && finite3(hi) && !empty && finite3(sum);
        placed[i] = ok ? 1u : 0u;
        parked[i] = ok ? 0u : 1u;
    }
}

// refs[k] = the box and id of triangle ids[k]; each block writes the box
// and the split-point box of its references to partials[12 * block ..].
// Runs on at most SAH_PREP_THREADS blocks.
extern "C" __global__ void __launch_bounds__(SAH_PREP_THREADS)
sah_references(const Triangle* tris, const u32* ids, u64 n, PrimRef* refs, float* partials) {
    __shared__ float block[SAH_PREP_THREADS / 32][12];
    float v[12];
    for (u32 k = 0; k < 12; ++k) v[k] = (k % 6u) < 3u ? CAUSTIC_INF : -CAUSTIC_INF;
    for (u64 i = global_thread(); i < n; i += grid_threads()) {
        const u32 id = ids[i];
        float3 lo, hi;
        triangle_box(tris[id], lo, hi);
        store_ref(refs, (u32)i, make_float4(lo.x, lo.y, lo.z, __uint_as_float(id)),
                  make_float4(hi.x, hi.y, hi.z, 0.0f));
        const float c[3] = {__fadd_rn(lo.x, hi.x), __fadd_rn(lo.y, hi.y), __fadd_rn(lo.z, hi.z)};
        const float l[3] = {lo.x, lo.y, lo.z}, h[3] = {hi.x, hi.y, hi.z};
        for (u32 k = 0; k < 3; ++k) {
            v[k] = fminf(v[k], l[k]), v[3 + k] = fmaxf(v[3 + k], h[k]);
            v[6 + k] = fminf(v[6 + k], c[k]), v[9 + k] = fmaxf(v[9 + k], c[k]);
        }
    }
    for (u32 k = 0; k < 12; ++k)
        for (u32 d = 16; d > 0; d >>= 1) v[k] = sides_join(k, v[k], __shfl_xor_sync(CAUSTIC_FULL_MASK, v[k], d));
    if (lane_id() == 0)
        for (u32 k = 0; k < 12; ++k) block[warp_id()][k] = v[k];
    __syncthreads();
    if (threadIdx.x < 12) {
        float x = block[0][threadIdx.x];
        for (u32 w = 1; w < SAH_PREP_THREADS / 32; ++w) x = sides_join(threadIdx.x, x, block[w][threadIdx.x]);
        partials[12 * blockIdx.x + threadIdx.x] = x;
    }
}

// One thread: joins the `blocks` partials into the root task over refs
// 0 .. count (slot, depth). With parked triangles (parked > 0) it also
// writes node 0, the root above the placed tree (node 1), and node 2, the
// parking leaf with the empty box over slots count .. count + parked.
extern "C" __global__ void sah_root(const float* partials, u32 blocks, u32 count, u32 slot, u32 depth,
                                    u32 parked, SahTask* task, BvhNode* nodes) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    float v[12];
    for (u32 k = 0; k < 12; ++k) v[k] = partials[k];
    for (u32 b = 1; b < blocks; ++b)
        for (u32 k = 0; k < 12; ++k) v[k] = sides_join(k, v[k], partials[12 * b + k]);
    SahTask t;
    for (u32 k = 0; k < 3; ++k) t.lo[k] = v[k], t.hi[k] = v[3 + k], t.clo[k] = v[6 + k], t.chi[k] = v[9 + k];
    t.start = 0u, t.count = count, t.slot = slot, t.depth = depth;
    *task = t;
    if (parked > 0u) {
        nodes[0] = make_node(t.lo, t.hi, 1u, 0u);
        const float lo[3] = {CAUSTIC_INF, CAUSTIC_INF, CAUSTIC_INF};
        const float hi[3] = {-CAUSTIC_INF, -CAUSTIC_INF, -CAUSTIC_INF};
        nodes[2] = make_node(lo, hi, count, parked);
    }
}

// The root task as a small root (a placed tree of at most sweep_max
// triangles skips the levels).
extern "C" __global__ void sah_root_small(const SahTask* task, SahSmallRoot* root) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    const SahTask t = *task;
    SahSmallRoot s;
    for (u32 k = 0; k < 3; ++k) s.lo[k] = t.lo[k], s.hi[k] = t.hi[k];
    s.start = t.start, s.count = t.count, s.slot = t.slot, s.depth = t.depth, s.parity = 0u, s.pad = 0u;
    *root = s;
}

// One warp per small root: moves its used[r] reserved nodes to
// out[base + offsets[r] ..] and points its root (already copied to
// out[slot] with the level part) and inner nodes at their new places.
extern "C" __global__ void __launch_bounds__(SAH_PREP_THREADS)
sah_relocate(const SahSmallRoot* roots, u32 count, const u32* used, const u32* offsets, u32 level_nodes,
             const BvhNode* reserved, BvhNode* out) {
    const u32 r = (blockIdx.x * SAH_PREP_THREADS + threadIdx.x) / 32u;
    if (r >= count) return;
    const SahSmallRoot root = roots[r];
    const u32 base = level_nodes + offsets[r];
    const BvhNode* from = reserved + 2ull * root.start;
    for (u32 k = lane_id(); k < used[r]; k += 32u) {
        BvhNode node = from[k];
        if (node.count == 0u) node.first += base;
        out[base + k] = node;
    }
    if (lane_id() == 0 && out[root.slot].count == 0u) out[root.slot].first += base;
}

// The triangles in leaf-slot order with their scene ids, and each scene
// id's slot.
extern "C" __global__ void __launch_bounds__(SAH_PREP_THREADS)
sah_leaf_triangles(const Triangle* tris, const u32* prim_indices, u64 n, Triangle* out, u32* slots) {
    for (u64 k = global_thread(); k < n; k += grid_threads()) {
        const u32 id = prim_indices[k];
        Triangle t = tris[id];
        t.prim = id;
        t.pad1 = 0u, t.pad2 = 0u;
        out[k] = t;
        slots[id] = (u32)k;
    }
}
