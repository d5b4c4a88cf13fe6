// linked_tree.cu: the layout of a device LinkedTree as a Bvh2 (nodes and
// leaf slots), the device twin of linked_tree.rs's LinkedTree::to_bvh,
// driven by linked_tree_cuda.rs.
//
// The CPU lays the tree out by a recursion from the root that hands each
// subtree its room: a node's children sit at `first`, `first + 1`, the left
// child's descendants (2 * leaves - 2 nodes, leaves after collapsing) from
// `first + 2`, the right child's after them; its primitives fill slots from
// `prim_base`, the left child's first. Every quantity a node needs comes
// from its parent, so the device runs the same recursion breadth first:
// one launch per level of the output tree (at most MAX_DEPTH + 1), one
// thread per node of the level, each writing its record and queueing its
// two children for the next launch. The positions are those of the CPU
// whatever order the queue holds, so the output is the CPU's bit for bit.
//
// - A collapsed subtree (its summary says one leaf) becomes one leaf; its
//   primitives are written in order by an in-order walk over parent links
//   (no stack, whatever its shape).
// - The depth bound: where the CPU gives a subtree up to its balanced
//   layout (depth + height > MAX_DEPTH and a child could not be laid out
//   within the bound), the thread lists the subtree's leaves in order (the
//   same walk, stopping at collapsed nodes) and the subtree continues as
//   balanced tasks over ranges of that list, halved as the CPU halves them.
//   This only happens on pathological inputs; a balanced node finds its box
//   and its left half's primitive count by a loop over its range.
#include "linked_tree.cuh"
#include "bvh.cuh"

#define LT_THREADS 256u
#define LT_LINKED 0u
#define LT_BALANCED 1u

// caustic_accel::bvh::build::linked_tree_cuda::LayoutTask: one node of the
// output to write. Linked tasks lay out the subtree of `ref`; balanced
// tasks the balanced tree over the leaves leaf_list[k0 .. k1].
struct LayoutTask {
    u32 target;
    u32 slot;
    u32 node_base;
    u32 prim_base;
    u32 depth;
    u32 k0;
    u32 k1;
    u32 kind;
};
CAUSTIC_CHECK_SIZE(LayoutTask);
CAUSTIC_CHECK_FIELD(LayoutTask, target);
CAUSTIC_CHECK_FIELD(LayoutTask, slot);
CAUSTIC_CHECK_FIELD(LayoutTask, node_base);
CAUSTIC_CHECK_FIELD(LayoutTask, prim_base);
CAUSTIC_CHECK_FIELD(LayoutTask, depth);
CAUSTIC_CHECK_FIELD(LayoutTask, k0);
CAUSTIC_CHECK_FIELD(LayoutTask, k1);
CAUSTIC_CHECK_FIELD(LayoutTask, kind);

__device__ __forceinline__ BvhNode make_node(const Aabb& b, u32 first, u32 count) {
    BvhNode n;
    n.min[0] = b.min.x;
    n.min[1] = b.min.y;
    n.min[2] = b.min.z;
    n.first = first;
    n.max[0] = b.max.x;
    n.max[1] = b.max.y;
    n.max[2] = b.max.z;
    n.count = count;
    return n;
}

__device__ __forceinline__ u32 ceil_log2(u32 n) { return n <= 1u ? 0u : 32u - __clz(n - 1u); }

// The shape the layout needs of a reference; costs are not needed.
__device__ __forceinline__ Summary shape_of(u32 ref, const LinkedNode* nodes, const Aabb* item_bounds) {
    Collapse none;
    none.max_leaf_size = 0u;
    none.traversal_cost = 0.0f;
    none.intersection_cost = 0.0f;
    return ref_summary(ref, nodes, item_bounds, none);
}

struct Tree {
    const LinkedNode* nodes;
    const u32* node_parent;
    const u32* item_parent;
    const Aabb* item_bounds;
    const u32* items;
};

__device__ __forceinline__ u32 parent_of(const Tree& t, u32 ref) {
    return lt_is_item(ref) ? t.item_parent[lt_index(ref)] : t.node_parent[ref];
}

// Leftmost descendant of `ref`: a primitive, or with stop_at_leaves the
// first collapsed node on the way.
__device__ __forceinline__ u32 leftmost(const Tree& t, u32 ref, bool stop_at_leaves) {
    while (!lt_is_item(ref) && !(stop_at_leaves && t.nodes[ref].leaves == 1u)) {
        ref = t.nodes[ref].children[0];
    }
    return ref;
}

// Visits the leaves below the inner node `root` in order (primitives, or
// with stop_at_leaves the leaves after collapsing), writing each to out[c++]
// as an input id (primitives) or a reference (leaves).
__device__ void walk_leaves(const Tree& t, u32 root, bool stop_at_leaves, u32* out) {
    u32 c = 0;
    u32 cur = leftmost(t, root, stop_at_leaves);
    out[c++] = stop_at_leaves ? cur : t.items[lt_index(cur)];
    while (cur != root) {
        const u32 p = parent_of(t, cur);
        if (t.nodes[p].children[0] == cur) {
            cur = leftmost(t, t.nodes[p].children[1], stop_at_leaves);
            out[c++] = stop_at_leaves ? cur : t.items[lt_index(cur)];
        } else {
            cur = p;
        }
    }
}

// Queues two tasks. The threads of a warp that push together take their
// places with one atomic (warp-aggregated): every push of a level goes to
// one counter, which single atomics would serialise.
__device__ __forceinline__ void push_task(LayoutTask* out, u32* count, const LayoutTask& a,
                                          const LayoutTask& b) {
    const u32 mask = __activemask();
    const u32 leader = __ffs(mask) - 1u;
    u32 base = 0u;
    if (lane_id() == leader) base = atomicAdd(count, 2u * __popc(mask));
    base = __shfl_sync(mask, base, leader);
    const u32 at = base + 2u * __popc(mask & lanemask_lt());
    out[at] = a;
    out[at + 1] = b;
}

__device__ __forceinline__ LayoutTask linked_task(u32 ref, u32 slot, u32 node_base, u32 prim_base,
                                                  u32 depth) {
    LayoutTask t;
    t.target = ref;
    t.slot = slot;
    t.node_base = node_base;
    t.prim_base = prim_base;
    t.depth = depth;
    t.k0 = 0u;
    t.k1 = 0u;
    t.kind = LT_LINKED;
    return t;
}

__device__ __forceinline__ LayoutTask balanced_task(u32 k0, u32 k1, u32 slot, u32 node_base,
                                                    u32 prim_base, u32 depth) {
    LayoutTask t = linked_task(LT_NONE, slot, node_base, prim_base, depth);
    t.k0 = k0;
    t.k1 = k1;
    t.kind = LT_BALANCED;
    return t;
}

// A leaf of the output: a primitive, or a collapsed node.
__device__ void write_leaf(const Tree& t, u32 ref, u32 slot, u32 prim_base, BvhNode* out_nodes,
                           u32* out_prims) {
    if (lt_is_item(ref)) {
        const u32 i = lt_index(ref);
        out_nodes[slot] = make_node(t.item_bounds[i], prim_base, 1u);
        out_prims[prim_base] = t.items[i];
        return;
    }
    const LinkedNode n = load_node(t.nodes, ref);
    out_nodes[slot] = make_node(node_bounds(n), prim_base, n.prims);
    walk_leaves(t, ref, false, out_prims + prim_base);
}

// One balanced node over leaf_list[k0 .. k1] (linked_tree.rs's `balanced`).
__device__ void layout_balanced(const Tree& t, const LayoutTask& task, const u32* leaf_list,
                                LayoutTask* tasks_out, u32* count_out, BvhNode* out_nodes,
                                u32* out_prims) {
    const u32 len = task.k1 - task.k0;
    if (len == 1u) {
        write_leaf(t, leaf_list[task.k0], task.slot, task.prim_base, out_nodes, out_prims);
        return;
    }
    const u32 half = (len + 1u) / 2u;
    Aabb bounds = aabb_empty();
    u32 left_prims = 0u;
    for (u32 k = task.k0; k < task.k1; ++k) {
        const Summary s = shape_of(leaf_list[k], t.nodes, t.item_bounds);
        bounds = sse_union(bounds, s.bounds);
        if (k < task.k0 + half) left_prims += s.prims;
    }
    out_nodes[task.slot] = make_node(bounds, task.node_base, 0u);
    const u32 mid = task.k0 + half;
    push_task(tasks_out, count_out,
              balanced_task(task.k0, mid, task.node_base, task.node_base + 2u, task.prim_base,
                            task.depth + 1u),
              balanced_task(mid, task.k1, task.node_base + 1u, task.node_base + 2u * half,
                            task.prim_base + left_prims, task.depth + 1u));
}

// One node of the linked tree (linked_tree.rs's `emit`).
__device__ void layout_linked(const Tree& t, const LayoutTask& task, u32* leaf_list, u32* leaf_top,
                              LayoutTask* tasks_out, u32* count_out, BvhNode* out_nodes,
                              u32* out_prims) {
    const u32 ref = task.target;
    if (lt_is_item(ref) || t.nodes[ref].leaves == 1u) {
        write_leaf(t, ref, task.slot, task.prim_base, out_nodes, out_prims);
        return;
    }
    const LinkedNode n = load_node(t.nodes, ref);
    const Summary left = shape_of(n.children[0], t.nodes, t.item_bounds);
    const Summary right = shape_of(n.children[1], t.nodes, t.item_bounds);
    const bool left_fits = task.depth + 1u + ceil_log2(left.leaves) <= LT_MAX_DEPTH;
    const bool right_fits = task.depth + 1u + ceil_log2(right.leaves) <= LT_MAX_DEPTH;
    if (task.depth + n.height > LT_MAX_DEPTH && !(left_fits && right_fits)) {
        const u32 k0 = atomicAdd(leaf_top, n.leaves);
        walk_leaves(t, ref, true, leaf_list + k0);
        const LayoutTask balanced = balanced_task(k0, k0 + n.leaves, task.slot, task.node_base,
                                                  task.prim_base, task.depth);
        layout_balanced(t, balanced, leaf_list, tasks_out, count_out, out_nodes, out_prims);
        return;
    }
    out_nodes[task.slot] = make_node(node_bounds(n), task.node_base, 0u);
    push_task(tasks_out, count_out,
              linked_task(n.children[0], task.node_base, task.node_base + 2u, task.prim_base,
                          task.depth + 1u),
              linked_task(n.children[1], task.node_base + 1u, task.node_base + 2u * left.leaves,
                          task.prim_base + left.prims, task.depth + 1u));
}

// The summaries of refs[0 .. count] (each reference in children[0]) into
// out:
// the root's, or the GPU hlbvh's group roots'.
extern "C" __global__ void __launch_bounds__(LT_THREADS)
lt_ref_summaries(const LinkedNode* nodes, const Aabb* item_bounds, const u32* refs, u64 count,
                 u32 max_leaf_size, float traversal_cost, float intersection_cost,
                 LinkedNode* out) {
    Collapse c;
    c.max_leaf_size = max_leaf_size;
    c.traversal_cost = traversal_cost;
    c.intersection_cost = intersection_cost;
    for (u64 i = global_thread(); i < count; i += grid_threads()) {
        const u32 ref = refs[i];
        store_node(out, (u32)i, ref, LT_NONE, ref_summary(ref, nodes, item_bounds, c));
    }
}

// The first task (the root) and, with parked primitives, the new root over
// the tree (slot 1) and the parking leaf with the empty box (slot 2).
extern "C" __global__ void lt_layout_start(const LinkedNode* root_info, u32 placed, u32 parked,
                                           LayoutTask* tasks, u32* counts, BvhNode* out_nodes) {
    if (global_thread() != 0) return;
    const LinkedNode r = root_info[0];
    if (parked == 0u) {
        tasks[0] = linked_task(r.children[0], 0u, 1u, 0u, 0u);
    } else {
        tasks[0] = linked_task(r.children[0], 1u, 3u, 0u, 1u);
        out_nodes[0] = make_node(node_bounds(r), 1u, 0u);
        out_nodes[2] = make_node(aabb_empty(), placed, parked);
    }
    counts[0] = 1u;
}

// Lays out one level: tasks_in[0 .. *count_in] write their nodes and queue
// their children in tasks_out.
extern "C" __global__ void __launch_bounds__(LT_THREADS)
lt_layout_level(const LinkedNode* nodes, const u32* node_parent, const u32* item_parent,
                const Aabb* item_bounds, const u32* items, const LayoutTask* tasks_in,
                const u32* count_in, LayoutTask* tasks_out, u32* count_out, u32* leaf_list,
                u32* leaf_top, BvhNode* out_nodes, u32* out_prims) {
    Tree t;
    t.nodes = nodes;
    t.node_parent = node_parent;
    t.item_parent = item_parent;
    t.item_bounds = item_bounds;
    t.items = items;
    const u32 count = *count_in;
    for (u64 i = global_thread(); i < count; i += grid_threads()) {
        const LayoutTask task = tasks_in[i];
        if (task.kind == LT_BALANCED) {
            layout_balanced(t, task, leaf_list, tasks_out, count_out, out_nodes, out_prims);
        } else {
            layout_linked(t, task, leaf_list, leaf_top, tasks_out, count_out, out_nodes, out_prims);
        }
    }
}

// dst[i] = src[i] (the parked primitives' ids into the last slots).
extern "C" __global__ void __launch_bounds__(LT_THREADS)
lt_copy_u32(const u32* src, u64 n, u32* dst) {
    for (u64 i = global_thread(); i < n; i += grid_threads()) dst[i] = src[i];
}

// The triangles in leaf-slot order with their scene ids, and the inverse
// map (scene id to slot) that the secondary rays use. A triangle is three
// 16-byte words (buffers are 256-byte aligned and the stride is 48), moved
// as such: the reads are random, and twelve 4-byte loads per thread kept
// the load units, not DRAM, busy (ncu: 87 % memory pipe, 23 % DRAM on
// 14 M triangles).
extern "C" __global__ void __launch_bounds__(LT_THREADS)
lt_gather_triangles(const Triangle* scene, const u32* prim_indices, u64 n, Triangle* out,
                    u32* slots) {
    for (u64 s = global_thread(); s < n; s += grid_threads()) {
        copy_leaf_triangle(scene, prim_indices[s], s, out, slots);
    }
}

// bvh/mod.rs's surface_area_f64: 0 for an empty or non-finite box.
__device__ __forceinline__ double surface_area_f64(const BvhNode& n) {
    const double ex = (double)n.max[0] - (double)n.min[0];
    const double ey = (double)n.max[1] - (double)n.min[1];
    const double ez = (double)n.max[2] - (double)n.min[2];
    const bool ok = ex >= 0.0 && ey >= 0.0 && ez >= 0.0 && ex < 1e300 && ey < 1e300 && ez < 1e300;
    return ok ? 2.0 * (ex * ey + ey * ez + ez * ex) : 0.0;
}

// Per block: the sums of area * weight and of weight over the nodes
// (weight: a leaf's primitive count, 1 for an inner node), at
// partials[2 * block] and [2 * block + 1]; block 0 also writes the root's
// area at partials[2 * gridDim.x]. The host adds them up in f64 for
// bvh/mod.rs's sah_cost.
extern "C" __global__ void __launch_bounds__(LT_THREADS)
lt_sah_partials(const BvhNode* nodes, u64 n, double* partials) {
    __shared__ double sums[2][LT_THREADS / 32];
    double weighted = 0.0, weights = 0.0;
    for (u64 i = global_thread(); i < n; i += grid_threads()) {
        const BvhNode node = nodes[i];
        const double w = node.count > 0u ? (double)node.count : 1.0;
        weighted += surface_area_f64(node) * w;
        weights += w;
    }
    for (int d = 16; d > 0; d >>= 1) {
        weighted += __shfl_down_sync(CAUSTIC_FULL_MASK, weighted, d);
        weights += __shfl_down_sync(CAUSTIC_FULL_MASK, weights, d);
    }
    if (lane_id() == 0) {
        sums[0][warp_id()] = weighted;
        sums[1][warp_id()] = weights;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        double a = 0.0, b = 0.0;
        for (u32 w = 0; w < blockDim.x / 32; ++w) {
            a += sums[0][w];
            b += sums[1][w];
        }
        partials[2 * blockIdx.x] = a;
        partials[2 * blockIdx.x + 1] = b;
        if (blockIdx.x == 0) partials[2 * gridDim.x] = n > 0 ? surface_area_f64(nodes[0]) : 0.0;
    }
}

// Parent links given as (child reference, parent) pairs: the host-built
// top of the GPU hlbvh.
extern "C" __global__ void __launch_bounds__(LT_THREADS)
lt_set_parents(const u32* pairs, u64 count, u32* node_parent, u32* item_parent) {
    for (u64 i = global_thread(); i < count; i += grid_threads()) {
        set_parent(pairs[2 * i], pairs[2 * i + 1], node_parent, item_parent);
    }
}
