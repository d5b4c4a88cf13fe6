// lbvh.cu: Karras's linear BVH on the device (Karras, "Maximizing
// Parallelism in the Construction of BVHs, Octrees, and k-d Trees", HPG
// 2012), the twin of lbvh.rs, driven by lbvh_cuda.rs.
//
// - lbvh_splits_30 / _63: one thread per inner node i of the binary radix
//   tree over the sorted codes (§4, Figure 4): the direction of its range
//   from the neighbours' common-prefix lengths, the other end by an
//   exponential then a binary search, the split by a second binary search.
//   Equal codes are told apart by position (the prefix of two equal keys is
//   64 + clz(i ^ j)), exactly as lbvh.rs does, so the hierarchy is the
//   CPU's. Each node records its children and is recorded as their parent.
// - lbvh_summaries: bottom-up (§4, "bounding boxes"): one thread per
//   primitive climbs from its leaf; at each inner node an atomic counter
//   lets the second child to arrive go on, after merging the two children's
//   summaries with the CPU's Summary::merge (linked_tree.cuh), so boxes and
//   leaf-collapse decisions equal the CPU's bit for bit. The first child to
//   arrive stops: its subtree's summary is already in memory, ordered before
//   the counter by a fence.
//
// - lbvh_karras_30 / _63: with one primitive per leaf (nothing collapses)
//   and every primitive placed, the whole tree in one bottom-up launch
//   after Apetrei, "Fast and Simple Agglomerative LBVH Construction" (CGVC
//   2014): a thread climbs from its primitive; a node over [lo, hi] finds
//   its parent's split on the side of the more similar neighbour (the
//   larger of the common prefixes at hi and lo - 1, the same prefixes as
//   Karras's, so the same tree), leaves its box at the split's slot, and
//   the second child to arrive merges and goes on. Knowing its range, the
//   merging thread knows the node's place in Karras's numbering (hi for a
//   left child, lo for a right one, 0 for the root) and writes its two
//   children's records at 2k + 1 and 2k + 2 (lbvh.rs, karras_layout): the
//   layout comes with the boxes, without splits, parents or a layout pass.
//   Each climb starts from its triangle copied into its leaf slot (it reads
//   the triangle for its box anyway; a warp copies its 32 consecutive
//   slots' triangles together, coalesced), so the build needs no gather of
//   the sorted boxes and no pass over the triangles after the tree.
#include "linked_tree.cuh"
#include "bvh.cuh"

#define LBVH_THREADS 256u

// Karras's delta: the common prefix of the keys (code, position) at i and
// j, or -1 when j is outside [0, n).
template <typename Code>
__device__ __forceinline__ int common_prefix(const Code* codes, u32 n, i32 i, long long j) {
    if (j < 0 || j >= (long long)n) return -1;
    const u64 a = (u64)codes[i], b = (u64)codes[(u32)j];
    const u64 x = a ^ b;
    if (x != 0ull) return __clzll((long long)x);
    return 64 + __clz((int)((u32)i ^ (u32)j));
}

// lbvh.rs's split_of, line for line, plus the range [lo, hi] it finds.
template <typename Code>
__device__ void karras_node(const Code* codes, u32 n, u32 node, u32* lo_out, u32* hi_out,
                            u32* split_out) {
    const i32 i = (i32)node;
    const i32 d = common_prefix(codes, n, i, (long long)i + 1) >
                          common_prefix(codes, n, i, (long long)i - 1)
                      ? 1
                      : -1;
    const int prefix_min = common_prefix(codes, n, i, (long long)i - d);
    long long max_len = 2;
    while (common_prefix(codes, n, i, (long long)i + max_len * d) > prefix_min) max_len *= 2;
    long long len = 0;
    for (long long step = max_len / 2; step >= 1; step /= 2) {
        if (common_prefix(codes, n, i, (long long)i + (len + step) * d) > prefix_min) len += step;
    }
    const int node_prefix = common_prefix(codes, n, i, (long long)i + len * d);
    long long split = 0;
    long long step = len;
    while (true) {
        step = (step + 1) / 2;
        if (common_prefix(codes, n, i, (long long)i + (split + step) * d) > node_prefix) {
            split += step;
        }
        if (step == 1) break;
    }
    const long long j = (long long)i + len * d;
    *lo_out = (u32)min((long long)i, j);
    *hi_out = (u32)max((long long)i, j);
    *split_out = (u32)((long long)i + split * d + (d < 0 ? -1 : 0));
}

template <typename Code>
__device__ void splits(const Code* codes, u32 n, LinkedNode* nodes, u32* node_parent,
                       u32* item_parent, u32* counters) {
    for (u64 t = global_thread(); t + 1 < n; t += grid_threads()) {
        const u32 k = (u32)t;
        u32 lo, hi, gamma;
        karras_node(codes, n, k, &lo, &hi, &gamma);
        const u32 left = gamma == lo ? (gamma | LT_ITEM_BIT) : gamma;
        const u32 right = gamma + 1u == hi ? ((gamma + 1u) | LT_ITEM_BIT) : gamma + 1u;
        nodes[k].children[0] = left;
        nodes[k].children[1] = right;
        set_parent(left, k, node_parent, item_parent);
        set_parent(right, k, node_parent, item_parent);
        counters[k] = 0u;
        if (k == 0u) node_parent[0] = LT_NONE;
    }
}

extern "C" __global__ void __launch_bounds__(LBVH_THREADS)
lbvh_splits_30(const u32* codes, u32 n, LinkedNode* nodes, u32* node_parent, u32* item_parent,
               u32* counters) {
    splits(codes, n, nodes, node_parent, item_parent, counters);
}

extern "C" __global__ void __launch_bounds__(LBVH_THREADS)
lbvh_splits_63(const u64* codes, u32 n, LinkedNode* nodes, u32* node_parent, u32* item_parent,
               u32* counters) {
    splits(codes, n, nodes, node_parent, item_parent, counters);
}

// Bottom-up summaries over the n - 1 inner nodes (n >= 2 primitives).
extern "C" __global__ void __launch_bounds__(LBVH_THREADS)
lbvh_summaries(const Aabb* item_bounds, u32 n, const u32* node_parent, const u32* item_parent,
               LinkedNode* nodes, u32* counters, u32 max_leaf_size, float traversal_cost,
               float intersection_cost) {
    Collapse c;
    c.max_leaf_size = max_leaf_size;
    c.traversal_cost = traversal_cost;
    c.intersection_cost = intersection_cost;
    for (u64 t = global_thread(); t < n; t += grid_threads()) {
        u32 node = item_parent[t];
        while (node != LT_NONE) {
            // Publish this thread's subtree before telling the parent.
            __threadfence();
            if (atomicAdd(&counters[node], 1u) == 0u) break;
            __threadfence();
            const u32 left = __ldcg(&nodes[node].children[0]);
            const u32 right = __ldcg(&nodes[node].children[1]);
            const Summary s = summary_merge(ref_summary_cg(left, nodes, item_bounds, c),
                                            ref_summary_cg(right, nodes, item_bounds, c), c);
            store_node(nodes, node, left, right, s);
            node = __ldcg(&node_parent[node]);
        }
    }
}

// A BvhNode as two 16-byte words.
__device__ __forceinline__ void store_bvh_node(BvhNode* out, u64 at, const Aabb& b, u32 first,
                                               u32 count) {
    uint4* words = reinterpret_cast<uint4*>(out + at);
    words[0] = make_uint4(__float_as_uint(b.min.x), __float_as_uint(b.min.y),
                          __float_as_uint(b.min.z), first);
    words[1] = make_uint4(__float_as_uint(b.max.x), __float_as_uint(b.max.y),
                          __float_as_uint(b.max.z), count);
}

// The record of the child over [lo, hi] with box b: a primitive's leaf
// over its Morton slot, or an inner node of Karras index k (children at
// 2k + 1).
__device__ __forceinline__ void store_karras_child(BvhNode* out, u64 at, u32 lo, u32 hi, u32 k,
                                                   const Aabb& b) {
    if (lo == hi) {
        store_bvh_node(out, at, b, lo, 1u);
    } else {
        store_bvh_node(out, at, b, 2u * k + 1u, 0u);
    }
}

// A subtree a thread carries up the tree: its primitives' range [lo, hi]
// in Morton order, its box, its height (levels below its root), and
// Karras's delta at each end of the range: d_lo = delta(lo - 1, lo) and
// d_hi = delta(hi, hi + 1) (-1 outside the primitives). A node is its
// parent's left child when d_hi > d_lo (Apetrei 2014), and a parent's
// deltas are its left child's d_lo and its right child's d_hi, so the
// codes are read only where a climb starts.
struct Climb {
    u32 lo, hi, height;
    int d_lo, d_hi;
    Aabb box;
};

// Whether the node of `c` (not the root) is its parent's left child: the
// side of the more similar neighbour.
__device__ __forceinline__ bool is_left_child(const Climb& c, u32 n) {
    if (c.lo == 0u) return true;
    if (c.hi == n - 1u) return false;
    return c.d_hi > c.d_lo;
}

// Karras's index of the node of `c`: its right end for a left child, its
// left end for a right child, 0 for the root.
__device__ __forceinline__ u32 karras_index(const Climb& c, u32 n) {
    if (c.lo == 0u && c.hi == n - 1u) return 0u;
    return is_left_child(c, n) ? c.hi : c.lo;
}

// A subtree's two parked words: (box min, the far end of its range from
// the split), (box max, its height in the low byte and its delta at the
// far end, plus one, in the next).
__device__ __forceinline__ uint4 parked_low(const Climb& c, bool left) {
    return make_uint4(__float_as_uint(c.box.min.x), __float_as_uint(c.box.min.y),
                      __float_as_uint(c.box.min.z), left ? c.lo : c.hi);
}
__device__ __forceinline__ uint4 parked_high(const Climb& c, bool left) {
    const u32 far_delta = (u32)((left ? c.d_lo : c.d_hi) + 1);
    return make_uint4(__float_as_uint(c.box.max.x), __float_as_uint(c.box.max.y),
                      __float_as_uint(c.box.max.z), c.height | (far_delta << 8));
}

// The merge at `split` of `c` (its left child when `left`) and its sibling
// as parked (`a`, `b`): writes both children's records and makes `c` the
// parent. At the root, writes its record and the tree's height and returns
// false (the climb ends); else true.
__device__ __forceinline__ bool merge(u32 n, u32 split, bool left, uint4 a, uint4 b, BvhNode* out,
                                      u32* height_out, Climb& c) {
    Aabb other;
    other.min = make_float3(__uint_as_float(a.x), __uint_as_float(a.y), __uint_as_float(a.z));
    other.max = make_float3(__uint_as_float(b.x), __uint_as_float(b.y), __uint_as_float(b.z));
    const u32 other_height = b.w & 0xffu;
    const int other_delta = (int)(b.w >> 8) - 1;
    // Both children: [l0, split] and [split + 1, r1].
    const u32 l0 = left ? c.lo : a.w, r1 = left ? a.w : c.hi;
    const Aabb lbox = left ? c.box : other;
    const Aabb rbox = left ? other : c.box;
    c.d_lo = left ? c.d_lo : other_delta;
    c.d_hi = left ? other_delta : c.d_hi;
    c.lo = l0;
    c.hi = r1;
    const u32 node = karras_index(c, n);
    store_karras_child(out, 2 * (u64)node + 1, l0, split, split, lbox);
    store_karras_child(out, 2 * (u64)node + 2, split + 1u, r1, split + 1u, rbox);
    c.box = sse_union(lbox, rbox);
    c.height = 1u + max(c.height, other_height);
    if (c.lo == 0u && c.hi == n - 1u) {
        store_bvh_node(out, 0, c.box, 1u, 0u);
        height_out[0] = c.height;
        return false;
    }
    return true;
}

// One step of a climb through device memory: leaves `c` at its parent's
// split and, when its sibling got there first, merges the two (true, `c`
// the parent); false when the climb ends here (the sibling's thread goes
// on) or at the root.
__device__ __forceinline__ bool climb_step(u32 n, u32* waiting, uint4* parked, BvhNode* out,
                                           u32* height_out, Climb& c) {
    const bool left = is_left_child(c, n);
    const u32 split = left ? c.hi : c.lo - 1u;
    // Leave this subtree at the split (the left child's words, then the
    // right one's), then see who came first.
    uint4* slot = parked + 4 * (u64)split + (left ? 0u : 2u);
    __stcg(slot, parked_low(c, left));
    __stcg(slot + 1, parked_high(c, left));
    __threadfence();
    if (atomicAdd(&waiting[split], 1u) == 0u) return false;
    __threadfence();
    const uint4* sibling = parked + 4 * (u64)split + (left ? 2u : 0u);
    return merge(n, split, left, __ldcg(sibling), __ldcg(sibling + 1), out, height_out, c);
}

// Leaf slot k's climb, started from its triangle `t`: its box and the
// deltas to its neighbours' codes.
template <typename Code>
__device__ __forceinline__ Climb leaf_climb(const Code* codes, u32 n, u32 k, const Triangle& t) {
    Climb c;
    c.lo = c.hi = k;
    c.height = 0u;
    c.d_lo = k > 0u ? common_prefix(codes, n, (i32)k - 1, (long long)k) : -1;
    c.d_hi = common_prefix(codes, n, (i32)k, (long long)k + 1);
    c.box = triangle_bounds(t);
    return c;
}

// The warp's leaf slots [base, base + 32) (those below n) get their
// triangles, in copy_leaf_triangle's record (leaf_word), and each lane's
// triangle comes back for its box. The slots are consecutive, so the warp's
// triangles are one run of 96 16-byte words: lane l moves words l, l + 32
// and l + 64, each store one coalesced 512-byte row, where a lane moving
// its own triangle stores words 48 bytes apart (three times the memory
// requests, in a kernel bound by requests). The words reach their lanes
// through `staging` (96 words of shared memory per warp; a lane reads its
// three at a 48-byte stride, which spreads a quarter warp over all 32
// banks).
__device__ __forceinline__ Triangle copy_warp_leaves(const Triangle* scene, const u32* ids, u32 n,
                                                     u64 base, Triangle* out, u32* slots,
                                                     float4* staging) {
    const u32 lane = lane_id();
    const bool mine = base + lane < n;
    const u32 id = mine ? ids[base + lane] : 0u;
    if (mine) slots[id] = (u32)(base + lane);
    float4* run = reinterpret_cast<float4*>(out + base);
    for (u32 r = 0; r < 3u; ++r) {
        const u32 word = lane + 32u * r;
        const u32 owner = word / 3u, part = word - 3u * owner;
        const u32 owner_id = __shfl_sync(CAUSTIC_FULL_MASK, id, owner);
        if (base + owner < n) {
            const float4 v =
                leaf_word(__ldg(reinterpret_cast<const float4*>(scene + owner_id) + part), part, owner_id);
            run[word] = v;
            staging[word] = v;
        }
    }
    __syncwarp();
    const float4 v0 = staging[3u * lane], v1 = staging[3u * lane + 1u],
                 v2 = staging[3u * lane + 2u];
    // The next round's words must not land before every lane has read.
    __syncwarp();
    return leaf_triangle(v0, v1, v2);
}

// n >= 2 placed primitives in Morton order: ids[k] is the scene triangle
// at slot k. waiting[0 .. n - 1] counts the arrivals at each split, zeroed;
// parked[4s .. 4s + 4] is what the split's left and right children left
// there (two words each: the box, the far end of the range, the height).
// out gets 2n - 1 records, leaf_triangles and slots the leaf slots'
// triangles (as copy_leaf_triangle writes them for lt_gather_triangles;
// done where the climbs start, which read the triangles for their boxes
// anyway), height[0] the root's height (levels below it). A thread per
// primitive, in whole warps (copy_warp_leaves).
template <typename Code>
__device__ void karras_tree(const Code* codes, const u32* ids, const Triangle* scene, u32 n,
                            u32* waiting, uint4* parked, BvhNode* out, Triangle* leaf_triangles,
                            u32* slots, u32* height_out) {
    __shared__ float4 staging[LBVH_THREADS * 3u];
    float4* mine = staging + 96u * warp_id();
    // A warp's slots are consecutive (the copy above), and the whole warp
    // runs each round, lanes past n included, so the copy's shuffles see
    // every lane.
    for (u64 base = global_thread() - lane_id(); base < n; base += grid_threads()) {
        const Triangle t = copy_warp_leaves(scene, ids, n, base, leaf_triangles, slots, mine);
        if (base + lane_id() >= n) continue;
        Climb c = leaf_climb(codes, n, (u32)(base + lane_id()), t);
        while (climb_step(n, waiting, parked, out, height_out, c)) {
        }
    }
}

extern "C" __global__ void __launch_bounds__(LBVH_THREADS)
lbvh_karras_30(const u32* codes, const u32* ids, const Triangle* scene, u32 n, u32* waiting,
               float4* parked, BvhNode* out, Triangle* leaf_triangles, u32* slots, u32* height) {
    karras_tree(codes, ids, scene, n, waiting, reinterpret_cast<uint4*>(parked), out,
                       leaf_triangles, slots, height);
}

extern "C" __global__ void __launch_bounds__(LBVH_THREADS)
lbvh_karras_63(const u64* codes, const u32* ids, const Triangle* scene, u32 n, u32* waiting,
               float4* parked, BvhNode* out, Triangle* leaf_triangles, u32* slots, u32* height) {
    karras_tree(codes, ids, scene, n, waiting, reinterpret_cast<uint4*>(parked), out,
                       leaf_triangles, slots, height);
}
