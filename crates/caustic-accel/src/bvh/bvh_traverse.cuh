// bvh_traverse.cuh: the pieces of the binary BVH's traversal
// (traverse.cu's persistent kernels, after Aila and Laine 2009/2012), and
// `trace_one`: one ray traced by one thread on its own, for kernels that
// follow a few paths through many bounces in one launch (the renderers'
// wavefront tails). Both give the CPU's results bit for bit: the same
// triangle and box tests, the same tie rule.
#pragma once
#include "common.cuh"
#include "bvh.cuh"

// Stack entries: one per level of the current path, and builders bound the
// depth by caustic_accel::bvh::MAX_DEPTH (= 64, checked by a host test).
#define TRACE_STACK 64u
// A warp with fewer active lanes than this goes back to fetch rays.
#define TRACE_FETCH_THRESHOLD 20u
// NodeRef::count of "no node".
#define NODE_NONE 0xffffffffu

// A node to visit, as its parent stores it: count == 0 is an inner node whose
// children sit at first and first + 1; otherwise a leaf over the slots
// first .. first + count.
struct NodeRef {
    u32 first;
    u32 count;
};

__device__ __forceinline__ NodeRef node_ref(u32 first, u32 count) {
    NodeRef n;
    n.first = first;
    n.count = count;
    return n;
}
__device__ __forceinline__ bool is_leaf(NodeRef n) { return n.count != 0 && n.count != NODE_NONE; }

// One lane's traversal stack, in local memory; `bounds` is unused by any-hit.
template <bool ANY_HIT>
struct Stack {
    uint2 nodes[TRACE_STACK];
    float bounds[ANY_HIT ? 1 : TRACE_STACK];
    u32 size;

    __device__ __forceinline__ void push(NodeRef n, float bound) {
        // Only an invalid (too deep) tree can overflow; stop the kernel
        // rather than write past the stack.
        if (size == TRACE_STACK) __trap();
        nodes[size] = make_uint2(n.first, n.count);
        if (!ANY_HIT) bounds[size] = bound;
        ++size;
    }

    // The next node whose box may still hold a hit not beyond `cutoff`.
    __device__ __forceinline__ NodeRef pop(float cutoff) {
        while (size > 0) {
            --size;
            if (ANY_HIT || bounds[size] <= cutoff) return node_ref(nodes[size].x, nodes[size].y);
        }
        return node_ref(0, NODE_NONE);
    }
};

// What one lane knows about its ray.
struct RayState {
    RayBoxTest box;
    TriangleTest tri;
    float tmin;
    // The closest hit so far (tmax until there is one): the culling cutoff.
    float closest;
    u32 prim;
    float u, v;
};

// Loads a node's two float4 words.
__device__ __forceinline__ void load_node(const BvhNode* nodes, u32 index, float4& lo, float4& hi) {
    const float4* words = reinterpret_cast<const float4*>(nodes) + 2 * (u64)index;
    lo = __ldg(words);
    hi = __ldg(words + 1);
}

// Sets up the ray `(o, d)` (origin and tmin, direction and tmax) and tests
// the root; false when the ray misses outright. On success `node` / `leaf`
// hold where the traversal starts.
__device__ __forceinline__ bool start_ray_words(float4 o, float4 d, const BvhNode* nodes,
                                                u32 node_count, RayState& s, NodeRef& node,
                                                NodeRef& leaf) {
    s.tmin = o.w;
    s.closest = d.w;
    s.prim = NO_HIT;
    s.u = 0.0f;
    s.v = 0.0f;
    if (node_count == 0 || !is_traceable(o, d)) return false;
    s.box = ray_box_test_new(xyz(o), xyz(d));
    s.tri = triangle_test_new(xyz(o), xyz(d));
    float4 lo, hi;
    load_node(nodes, 0, lo, hi);
    float bound, order;
    if (!box_entry(s.box, lo, hi, s.tmin, s.closest, bound, order)) return false;
    const NodeRef root = node_ref(__float_as_uint(lo.w), __float_as_uint(hi.w));
    // A root leaf goes straight to the leaf slot: the inner loop never sees it.
    node = is_leaf(root) ? node_ref(0, NODE_NONE) : root;
    leaf = is_leaf(root) ? root : node_ref(0, 0);
    return true;
}

// start_ray_words for ray `index` of a buffer.
__device__ __forceinline__ bool start_ray(const Ray* rays, u32 index, const BvhNode* nodes,
                                          u32 node_count, RayState& s, NodeRef& node,
                                          NodeRef& leaf) {
    const float4* words = reinterpret_cast<const float4*>(rays) + 2 * (u64)index;
    return start_ray_words(__ldg(words), __ldg(words + 1), nodes, node_count, s, node, leaf);
}

// Visits one inner node: tests both children, descends into the nearer hit
// one and pushes the farther, or pops when neither is hit.
template <bool ANY_HIT>
__device__ __forceinline__ NodeRef step_inner(const BvhNode* nodes, NodeRef node,
                                              const RayState& s, Stack<ANY_HIT>& stack) {
    float4 l_lo, l_hi, r_lo, r_hi;
    load_node(nodes, node.first, l_lo, l_hi);
    load_node(nodes, node.first + 1, r_lo, r_hi);
    float l_bound, l_order, r_bound, r_order;
    const bool hit_l = box_entry(s.box, l_lo, l_hi, s.tmin, s.closest, l_bound, l_order);
    const bool hit_r = box_entry(s.box, r_lo, r_hi, s.tmin, s.closest, r_bound, r_order);
    const NodeRef left = node_ref(__float_as_uint(l_lo.w), __float_as_uint(l_hi.w));
    const NodeRef right = node_ref(__float_as_uint(r_lo.w), __float_as_uint(r_hi.w));
    if (hit_l && hit_r) {
        const bool right_first = r_order < l_order;
        stack.push(right_first ? left : right, right_first ? l_bound : r_bound);
        return right_first ? right : left;
    }
    if (hit_l) return left;
    if (hit_r) return right;
    return stack.pop(s.closest);
}

// Tests a leaf's triangles. Closest-hit keeps the smallest t (and on equal t
// the lowest id); any-hit returns true at the first hit.
template <bool ANY_HIT>
__device__ __forceinline__ bool test_leaf(const Triangle* tris, NodeRef leaf, RayState& s) {
    const float4* words = reinterpret_cast<const float4*>(tris) + 3 * (u64)leaf.first;
    for (u32 k = 0; k < leaf.count; ++k, words += 3) {
        const float4 a = __ldg(words), b = __ldg(words + 1), c = __ldg(words + 2);
        const float limit = ANY_HIT ? s.closest : next_up(s.closest);
        float t, u, v;
        if (!triangle_intersect(s.tri, xyz(a), xyz(b), xyz(c), s.tmin, limit, t, u, v)) continue;
        if (ANY_HIT) return true;
        const u32 prim = __float_as_uint(a.w);
        if (t < s.closest || (s.prim != NO_HIT && prim < s.prim)) {
            s.closest = t;
            s.prim = prim;
            s.u = u;
            s.v = v;
        }
    }
    return false;
}

// Rays in groups that want only their group's nearest hit (the collision
// experiment's agents: each agent's segments share an origin, and only the
// nearest of their hits is the answer). `group_key` holds the group's
// smallest hit_key so far. A lane publishes its closest hit when it beats
// the group's, and otherwise takes the group's distance as its own cutoff:
// a hit beyond it cannot be the group's nearest. The cutoff is the next
// float above the group's distance, so a hit at exactly that distance with
// a lower triangle id still counts; the lane's own hit is then forgotten
// (it lies beyond the cutoff). Every published key is a real hit, and the
// ray holding the group's true nearest hit always keeps a cutoff above it,
// so the group's final key is the minimum of its rays' closest-hit keys,
// whatever the order in which lanes run.
__device__ __forceinline__ void share_group_nearest(u64* group_key, RayState& s) {
    const u64 group = __ldcg(group_key);
    if (s.prim != NO_HIT) {
        const u64 mine = hit_key(s.closest, s.prim);
        if (mine < group) {
            atomicMin(reinterpret_cast<unsigned long long*>(group_key),
                      (unsigned long long)mine);
            return;
        }
    }
    if (group == ~0ull) return;
    const float cutoff = next_up(key_distance(group));
    if (cutoff < s.closest) {
        s.closest = cutoff;
        s.prim = NO_HIT;
    }
}

// One launch's share of rays in groups of `size` (traverse.cu's grouped
// kernel): phase 0 takes each group's probes, its rays 0, stride,
// 2 stride, ..., which spread over the group's directions (an agent's
// segments come ordered by octant); phase 1 takes the others, in order,
// and starts them with the cutoff the probes found. Work item w of a phase
// is ray `ray_of_work(w)`; a phase has `groups * count()` items.
struct GroupPhase {
    u32 size;
    u32 stride;
    u32 phase;

    __device__ __forceinline__ u32 probes() const { return (size + stride - 1) / stride; }
    __device__ __forceinline__ u32 count() const {
        return phase == 0 ? probes() : size - probes();
    }
    __device__ __forceinline__ u32 ray_of_work(u32 work) const {
        const u32 n = count();
        const u32 group = work / n, j = work - group * n;
        const u32 ray =
            phase == 0 ? j * stride : (j / (stride - 1)) * stride + 1 + j % (stride - 1);
        return group * size + ray;
    }
};

// Traverses until the ray is done or the warp wants to refill idle lanes.
// Returns whether an any-hit ray found a hit. With GROUPED, the ray's
// group's nearest hit lives at `group_key` (share_group_nearest), read and
// published after every leaf.
template <bool ANY_HIT, bool GROUPED = false>
__device__ __forceinline__ bool traverse(const BvhNode* nodes, const Triangle* tris, RayState& s,
                                         NodeRef& node, NodeRef& leaf, Stack<ANY_HIT>& stack,
                                         u64* group_key = nullptr) {
    while (node.count != NODE_NONE || leaf.count != 0) {
        // Inner nodes, until every active lane holds a postponed leaf.
        while (node.count == 0) {
            node = step_inner<ANY_HIT>(nodes, node, s, stack);
            if (is_leaf(node) && leaf.count == 0) {
                leaf = node;
                node = stack.pop(s.closest);
            }
            if (!__any_sync(__activemask(), leaf.count == 0)) break;
        }
        // Leaves: the postponed one, then any leaf the traversal stopped on.
        while (leaf.count != 0) {
            if (test_leaf<ANY_HIT>(tris, leaf, s)) {
                node = node_ref(0, NODE_NONE);
                leaf = node_ref(0, 0);
                return true;
            }
            if (GROUPED) share_group_nearest(group_key, s);
            if (is_leaf(node)) {
                leaf = node;
                node = stack.pop(s.closest);
            } else {
                leaf = node_ref(0, 0);
            }
        }
        if (__popc(__activemask()) < TRACE_FETCH_THRESHOLD) break;
    }
    return false;
}

// One ray traced by the calling thread alone: the closest hit in (tmin,
// tmax) (`hit.prim == NO_HIT` for none), or, with ANY_HIT, whether there is
// one. The kernels' traversal without their warp-wide ray fetching; the
// results are theirs.
template <bool ANY_HIT>
__device__ bool trace_one(const BvhNode* nodes, u32 node_count, const Triangle* tris, float4 o,
                          float4 d, Hit& hit) {
    Stack<ANY_HIT> stack;
    stack.size = 0;
    RayState s;
    NodeRef node = node_ref(0, NODE_NONE), leaf = node_ref(0, 0);
    bool found = false;
    if (start_ray_words(o, d, nodes, node_count, s, node, leaf)) {
        while (!found && (node.count != NODE_NONE || leaf.count != 0)) {
            found = traverse<ANY_HIT>(nodes, tris, s, node, leaf, stack);
        }
    }
    const bool closest = s.prim != NO_HIT;
    hit.t = closest ? s.closest : CAUSTIC_INF;
    hit.prim = s.prim;
    hit.u = s.u;
    hit.v = s.v;
    return ANY_HIT ? found : closest;
}

// trace_one for a Ray record.
template <bool ANY_HIT>
__device__ __forceinline__ bool trace_one(const BvhNode* nodes, u32 node_count,
                                          const Triangle* tris, const Ray& ray, Hit& hit) {
    const float4 o = make_float4(ray.origin[0], ray.origin[1], ray.origin[2], ray.tmin);
    const float4 d = make_float4(ray.dir[0], ray.dir[1], ray.dir[2], ray.tmax);
    return trace_one<ANY_HIT>(nodes, node_count, tris, o, d, hit);
}
