// kdtree/traverse.cu: closest-hit and any-hit traversal of a triangle
// kd-tree on the device (traverse_cuda.rs), one ray per thread, stack-based
// and front to back as in Zhou et al. 2008 (§4: near child first, far child
// pushed, early exit), under the exact culling rules of the CPU traversal
// (kdtree/traverse.rs and slab_ray.rs give the argument):
//
// - a subtree is skipped only when the depth slab of its culling box (the
//   box of the *whole* triangles below it) misses [tmin, closest hit]; hits
//   are taken wherever they lie, the closest wins, ties to the lowest id;
// - split planes are delta thick: the left child gets the line where
//   x[axis] <= split + delta, the right one x[axis] >= split - delta, and a
//   ray parallel to a plane visits every child within delta of it.
//
// The arithmetic is the CPU's, rounding for rounding (every product that
// meets a sum is an _rn intrinsic), so the walk visits the CPU's leaves in
// the CPU's order and the watertight test gives the CPU's t, u and v: the
// hits equal TriangleKdTree's, and so brute force's, bit for bit.
#include "triangle_kdtree.cuh"
#include "slab_ray.cuh"

// Threads per block (KD_TRACE_THREADS in traverse_cuda.rs).
#define KD_TRACE_THREADS 128u
// The traversal stack: one far child per level (kdtree::MAX_DEPTH).
#define KD_STACK 64u

// The tree as the kernels read it.
struct KdView {
    const uint2* nodes;
    const float* ref_bounds;
    const u32* prims;
    const Triangle* tris;
};

__device__ __forceinline__ Aabb kd_culling_box(const KdView& t, u32 node) {
    const float* p = t.ref_bounds + 6 * (u64)node;
    Aabb b;
    b.min = make_float3(__ldg(p), __ldg(p + 1), __ldg(p + 2));
    b.max = make_float3(__ldg(p + 3), __ldg(p + 4), __ldg(p + 5));
    return b;
}

// What one ray knows.
struct KdState {
    TriangleTest tri;
    float tmin, tmax;
    float closest;
    u32 prim;
    float u, v;
};

// The leaf's references first .. first + count. Closest hit: true when the
// closest hit improved (s.closest is the new cutoff), accepting t ==
// closest for a lower id. Any hit: true at the first hit in (tmin, tmax).
template <bool ANY_HIT>
__device__ __forceinline__ bool kd_leaf_test(const KdView& t, u32 first, u32 count, KdState& s) {
    bool improved = false;
    float limit = ANY_HIT ? s.tmax : next_up(s.closest);
    for (u32 k = first; k < first + count; ++k) {
        const u32 prim = __ldg(t.prims + k);
        float3 a, b, c;
        kd_load_triangle(t.tris, prim, a, b, c);
        float hit_t, u, v;
        if (!triangle_intersect(s.tri, a, b, c, s.tmin, limit, hit_t, u, v)) continue;
        if (ANY_HIT) return true;
        if (hit_t < s.closest || (s.prim != NO_HIT && prim < s.prim)) {
            s.closest = hit_t;
            limit = next_up(hit_t);
            s.prim = prim;
            s.u = u;
            s.v = v;
            improved = true;
        }
    }
    return improved;
}

// traverse.rs's `children`: the line's intervals in the two children of an
// inner node crossed over [ta, tb], nearer child first (an empty interval,
// lo > hi, where the line misses that child).
__device__ __forceinline__ void kd_children(const SlabRay& r, uint2 node, float ta, float tb,
                                            u32& near, float& near_lo, float& near_hi, u32& far,
                                            float& far_lo, float& far_hi) {
    const u32 axis = node.y & 3u, left = node.y >> 2;
    const float split = __uint_as_float(node.x);
    const float o = component(r.o, axis);
    if (bit(r.parallel, axis)) {
        const float off = __fsub_rn(o, split);
        near = left;
        far = left + 1;
        const bool in_left = off <= r.delta, in_right = off >= -r.delta;
        near_lo = in_left ? ta : CAUSTIC_INF;
        near_hi = in_left ? tb : -CAUSTIC_INF;
        far_lo = in_right ? ta : CAUSTIC_INF;
        far_hi = in_right ? tb : -CAUSTIC_INF;
        return;
    }
    const float inv = component(r.inv, axis);
    const float t_below = __fmul_rn(__fsub_rn(__fadd_rn(split, r.delta), o), inv);
    const float t_above = __fmul_rn(__fsub_rn(__fsub_rn(split, r.delta), o), inv);
    if (bit(r.negative, axis)) {
        near = left + 1;
        near_lo = ta;
        near_hi = fminf(tb, t_above);
        far = left;
        far_lo = fmaxf(ta, t_below);
        far_hi = tb;
    } else {
        near = left;
        near_lo = ta;
        near_hi = fminf(tb, t_below);
        far = left + 1;
        far_lo = fmaxf(ta, t_above);
        far_hi = tb;
    }
}

// traverse.rs's `traverse` for a traceable ray: true when a leaf reported a
// hit (any hit) or improved the closest one (s holds it).
template <bool ANY_HIT>
__device__ __forceinline__ bool kd_traverse(const KdView& t, const Aabb& bounds, float scale,
                                            float3 origin, float3 dir, KdState& s) {
    const SlabRay r = slab_ray_new(origin, dir, scale);
    const float t_min = s.tmin;
    if (!reach(r, kd_culling_box(t, 0), t_min, s.tmax)) return false;
    float ta, tb;
    if (!clip_to(r, bounds.min, bounds.max, r.delta, ta, tb)) return false;
    float cutoff = s.tmax;
    u32 stack_node[KD_STACK];
    float stack_ta[KD_STACK], stack_tb[KD_STACK];
    u32 depth = 0, current = 0;
    bool found = false;
    // May the triangles below `node`, whose cell the line crosses over
    // [lo, hi], still report a hit in [t_min, cutoff]?
#define KD_RELEVANT(node, lo, hi) \
    (((lo) <= cutoff && (hi) >= t_min) || reach(r, kd_culling_box(t, node), t_min, cutoff))
    while (true) {
        const uint2 node = __ldg(t.nodes + current);
        if ((node.y & 3u) == KD_LEAF) {
            if (node.x > 0 && KD_RELEVANT(current, ta, tb) &&
                kd_leaf_test<ANY_HIT>(t, node.y >> 2, node.x, s)) {
                found = true;
                if (ANY_HIT) return true;
                cutoff = s.closest;
            }
        } else {
            u32 near, far;
            float near_lo, near_hi, far_lo, far_hi;
            kd_children(r, node, ta, tb, near, near_lo, near_hi, far, far_lo, far_hi);
            const bool visit_near = near_lo <= near_hi && KD_RELEVANT(near, near_lo, near_hi);
            const bool visit_far = far_lo <= far_hi;
            if (visit_near) {
                if (visit_far) {
                    stack_node[depth] = far;
                    stack_ta[depth] = far_lo;
                    stack_tb[depth] = far_hi;
                    ++depth;
                }
                current = near;
                ta = near_lo;
                tb = near_hi;
                continue;
            }
            if (visit_far && KD_RELEVANT(far, far_lo, far_hi)) {
                current = far;
                ta = far_lo;
                tb = far_hi;
                continue;
            }
        }
        // Pop the next far child whose triangles may still beat the cutoff.
        while (true) {
            if (depth == 0) return found;
            --depth;
            const u32 index = stack_node[depth];
            if (KD_RELEVANT(index, stack_ta[depth], stack_tb[depth])) {
                current = index;
                ta = stack_ta[depth];
                tb = stack_tb[depth];
                break;
            }
        }
    }
#undef KD_RELEVANT
}

// ----------------------------------------------------------------- kernels

template <bool ANY_HIT>
__device__ __forceinline__ void kd_trace(const uint2* nodes, const float* ref_bounds,
                                         const u32* prims, const Triangle* tris,
                                         const float* bounds, float scale, u32 node_count,
                                         const Ray* rays, u32 ray_count, u32 image_width,
                                         Hit* hits, u32* occluded) {
    const u32 work = blockIdx.x * blockDim.x + threadIdx.x;
    if (work >= ray_count) return;
    const u32 index = ray_of_work(work, image_width);
    const float4* words = reinterpret_cast<const float4*>(rays) + 2 * (u64)index;
    const float4 o = __ldg(words), d = __ldg(words + 1);
    KdState s;
    s.tmin = o.w;
    s.tmax = d.w;
    s.closest = d.w;
    s.prim = NO_HIT;
    s.u = 0.0f;
    s.v = 0.0f;
    bool found = false;
    if (node_count != 0 && is_traceable(o, d)) {
        KdView t;
        t.nodes = nodes;
        t.ref_bounds = ref_bounds;
        t.prims = prims;
        t.tris = tris;
        Aabb b;
        b.min = make_float3(bounds[0], bounds[1], bounds[2]);
        b.max = make_float3(bounds[3], bounds[4], bounds[5]);
        s.tri = triangle_test_new(xyz(o), xyz(d));
        found = kd_traverse<ANY_HIT>(t, b, scale, xyz(o), xyz(d), s);
    }
    if (ANY_HIT) {
        occluded[index] = found ? 1u : 0u;
        return;
    }
    const bool hit = s.prim != NO_HIT;
    reinterpret_cast<float4*>(hits)[index] =
        make_float4(hit ? s.closest : CAUSTIC_INF, __uint_as_float(s.prim), s.u, s.v);
}

// The closest hit of every ray; image_width != 0 hands the rays out in 8x4
// pixel tiles of an image that wide (bvh.cuh's ray_of_work). `bounds` is
// the root's cell (min x, y, z, max x, y, z), `scale` its largest absolute
// coordinate.
extern "C" __global__ void __launch_bounds__(KD_TRACE_THREADS)
kd_trace_closest(const u32* nodes, const float* ref_bounds, const u32* prims,
                 const Triangle* tris, const float* bounds, float scale, u32 node_count,
                 const Ray* rays, u32 ray_count, u32 image_width, Hit* hits) {
    kd_trace<false>(reinterpret_cast<const uint2*>(nodes), ref_bounds, prims, tris, bounds, scale,
                    node_count, rays, ray_count, image_width, hits, nullptr);
}

// 1 for every ray with a hit in (tmin, tmax), else 0.
extern "C" __global__ void __launch_bounds__(KD_TRACE_THREADS)
kd_trace_any(const u32* nodes, const float* ref_bounds, const u32* prims, const Triangle* tris,
             const float* bounds, float scale, u32 node_count, const Ray* rays, u32 ray_count,
             u32 image_width, u32* occluded) {
    kd_trace<true>(reinterpret_cast<const uint2*>(nodes), ref_bounds, prims, tris, bounds, scale,
                   node_count, rays, ray_count, image_width, nullptr, occluded);
}
