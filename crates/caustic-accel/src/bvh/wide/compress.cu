// compress.cu: collapses a binary BVH (caustic_accel::Bvh2 nodes on the
// device, triangles in leaf-slot order) into the compressed 8-wide BVH of
// compressed.cuh, level by level, one thread per wide node.
//
// Work items have BvhNode's layout: count == 0 is a binary inner node (its
// children at first and first + 1), count > 0 a run of triangle slots
// [first, first + count) with a box (a binary leaf, or part of one). A wide
// node starts from its item and keeps opening the child item of largest
// surface area until it has eight or none needs opening (the greedy collapse
// of Wald et al., SIGGRAPH 2014, which compressed_cuda.rs's docs compare
// with Ylitie et al.'s SAH-optimal one). An item needs opening when it holds
// more than CW_LEAF_MAX triangles; one with at most that many becomes a leaf
// child, and slots still free split the largest leaf children. Then the
// children go to slots by octant (so that visiting the slots
// in the order slot ^ octant_inverse meets them roughly front to back), the
// child boxes are quantised conservatively, inner children get consecutive
// node indices (one atomic add) and their items go to the next level's
// queue, and the leaf children's triangles are copied, in slot order, to a
// contiguous block of the output (another atomic add).
#include "common.cuh"
#include "bvh.cuh"
#include "compressed.cuh"

// Threads per block (compressed_cuda::COMPRESS_THREADS).
#define COMPRESS_THREADS 128u
// The build's counters (compressed_cuda::Cursor).
#define CURSOR_BEGIN 0u
#define CURSOR_END 1u
#define CURSOR_NODES 2u
#define CURSOR_TRIANGLES 3u
#define CURSOR_LEVELS 4u
#define CURSOR_LEAVES 5u
#define CURSOR_OVERFLOW 6u
#define CURSOR_WORDS 8u

// ------------------------------------------------------------------ items

__device__ __forceinline__ BvhNode load_item(const BvhNode* items, u32 index) {
    const float4* words = reinterpret_cast<const float4*>(items) + 2 * (u64)index;
    const float4 lo = words[0], hi = words[1];
    BvhNode n;
    n.min[0] = lo.x, n.min[1] = lo.y, n.min[2] = lo.z, n.first = __float_as_uint(lo.w);
    n.max[0] = hi.x, n.max[1] = hi.y, n.max[2] = hi.z, n.count = __float_as_uint(hi.w);
    return n;
}

__device__ __forceinline__ void store_item(BvhNode* items, u32 index, const BvhNode& n) {
    float4* words = reinterpret_cast<float4*>(items) + 2 * (u64)index;
    words[0] = make_float4(n.min[0], n.min[1], n.min[2], __uint_as_float(n.first));
    words[1] = make_float4(n.max[0], n.max[1], n.max[2], __uint_as_float(n.count));
}

__device__ __forceinline__ bool item_empty(const BvhNode& n) {
    return !(n.min[0] <= n.max[0] && n.min[1] <= n.max[1] && n.min[2] <= n.max[2]);
}

// Half the surface area; 0 for an empty box, NaN possible for a box of
// infinite extent (the greedy choice below survives it).
__device__ __forceinline__ float item_area(const BvhNode& n) {
    if (item_empty(n)) return 0.0f;
    const float dx = n.max[0] - n.min[0], dy = n.max[1] - n.min[1], dz = n.max[2] - n.min[2];
    return dx * dy + dy * dz + dz * dx;
}

__device__ __forceinline__ bool triangle_finite(float4 a, float4 b, float4 c) {
    return fabsf(a.x) < CAUSTIC_INF && fabsf(a.y) < CAUSTIC_INF && fabsf(a.z) < CAUSTIC_INF &&
           fabsf(b.x) < CAUSTIC_INF && fabsf(b.y) < CAUSTIC_INF && fabsf(b.z) < CAUSTIC_INF &&
           fabsf(c.x) < CAUSTIC_INF && fabsf(c.y) < CAUSTIC_INF && fabsf(c.z) < CAUSTIC_INF;
}

// The run of slots [first, first + count) as an item: the box of its finite
// triangles, cut to the box of the item it came from. Triangles with a
// non-finite vertex can never be hit and stay out of every box; the cut
// keeps a binary parking leaf (the empty box) empty whatever it holds.
__device__ BvhNode range_item(const Triangle* tris, u32 first, u32 count, const BvhNode& parent) {
    float3 lo = make_float3(CAUSTIC_INF, CAUSTIC_INF, CAUSTIC_INF), hi = lo * -1.0f;
    for (u32 k = first; k < first + count; ++k) {
        const float4* w = reinterpret_cast<const float4*>(tris) + 3 * (u64)k;
        const float4 a = __ldg(w), b = __ldg(w + 1), c = __ldg(w + 2);
        if (!triangle_finite(a, b, c)) continue;
        lo = min3(lo, min3(xyz(a), min3(xyz(b), xyz(c))));
        hi = max3(hi, max3(xyz(a), max3(xyz(b), xyz(c))));
    }
    BvhNode n;
    n.min[0] = fmaxf(lo.x, parent.min[0]), n.min[1] = fmaxf(lo.y, parent.min[1]);
    n.min[2] = fmaxf(lo.z, parent.min[2]);
    n.max[0] = fminf(hi.x, parent.max[0]), n.max[1] = fminf(hi.y, parent.max[1]);
    n.max[2] = fminf(hi.z, parent.max[2]);
    n.first = first;
    n.count = count;
    return n;
}

// Whether the binary subtree under the inner node whose children sit at
// `first` holds at most CW_LEAF_MAX triangles. Such a subtree has at most
// CW_LEAF_MAX leaves, hence at most 2 * CW_LEAF_MAX - 2 nodes below its
// root: the walk gives up past that many.
__device__ bool small_subtree(const BvhNode* bvh, u32 first) {
    u32 stack[2 * CW_LEAF_MAX];
    u32 size = 0, triangles = 0, visited = 0;
    stack[size++] = first;
    stack[size++] = first + 1;
    while (size > 0) {
        const u32 index = stack[--size];
        if (++visited > 2 * CW_LEAF_MAX - 2) return false;
        const uint4 word = __ldg(reinterpret_cast<const uint4*>(bvh) + 2 * (u64)index + 1);
        const u32 count = word.w;
        if (count == 0) {
            const u32 left = __ldg(reinterpret_cast<const u32*>(bvh) + 8 * (u64)index + 3);
            if (size + 2 > 2 * CW_LEAF_MAX) return false;
            stack[size++] = left;
            stack[size++] = left + 1;
        } else if ((triangles += count) > CW_LEAF_MAX) {
            return false;
        }
    }
    return true;
}

// Whether an item must be opened (it cannot be a leaf child).
__device__ __forceinline__ bool must_open(const BvhNode* bvh, const BvhNode& item) {
    return item.count == 0 ? !small_subtree(bvh, item.first) : item.count > CW_LEAF_MAX;
}

// Splits an item in two: a binary inner node into its children, a run of
// slots into two runs (of whole groups of CW_LEAF_MAX if it is longer than
// one group). Needs an inner node or a run of at least two slots.
__device__ void open_item(const BvhNode* bvh, const Triangle* tris, const BvhNode& item,
                          BvhNode& left, BvhNode& right) {
    if (item.count == 0) {
        const BvhNode* children = bvh + item.first;
        const float4* w = reinterpret_cast<const float4*>(children);
        const float4 l0 = __ldg(w), l1 = __ldg(w + 1), r0 = __ldg(w + 2), r1 = __ldg(w + 3);
        left.min[0] = l0.x, left.min[1] = l0.y, left.min[2] = l0.z, left.first = __float_as_uint(l0.w);
        left.max[0] = l1.x, left.max[1] = l1.y, left.max[2] = l1.z, left.count = __float_as_uint(l1.w);
        right.min[0] = r0.x, right.min[1] = r0.y, right.min[2] = r0.z, right.first = __float_as_uint(r0.w);
        right.max[0] = r1.x, right.max[1] = r1.y, right.max[2] = r1.z, right.count = __float_as_uint(r1.w);
        return;
    }
    // A run that must be opened splits at whole groups; a run that fits
    // one leaf (and is split only to fill free slots) splits in half.
    const u32 groups = (item.count + CW_LEAF_MAX - 1) / CW_LEAF_MAX;
    const u32 left_count = item.count > CW_LEAF_MAX ? CW_LEAF_MAX * ((groups + 1) / 2)
                                                     : item.count / 2;
    left = range_item(tris, item.first, left_count, item);
    right = range_item(tris, item.first + left_count, item.count - left_count, item);
}

// The runs of slots a leaf child holds: its own run, or the leaves of a
// small binary subtree in depth-first order; returns how many runs (at most
// CW_LEAF_MAX) and their total in `size`.
__device__ u32 leaf_runs(const BvhNode* bvh, const BvhNode& item, uint2* runs, u32& size) {
    if (item.count > 0) {
        runs[0] = make_uint2(item.first, item.count);
        size = item.count;
        return 1;
    }
    u32 stack[2 * CW_LEAF_MAX];
    u32 depth = 0, n = 0;
    size = 0;
    stack[depth++] = item.first + 1;
    stack[depth++] = item.first;
    while (depth > 0) {
        const uint4* w = reinterpret_cast<const uint4*>(bvh) + 2 * (u64)stack[--depth];
        const u32 first = __ldg(w).w, count = __ldg(w + 1).w;
        if (count == 0) {
            stack[depth++] = first + 1;
            stack[depth++] = first;
        } else {
            runs[n++] = make_uint2(first, count);
            size += count;
        }
    }
    return n;
}

// Copies the triangles of `runs` to out[0..].
__device__ void copy_runs(const Triangle* tris, const uint2* runs, u32 n, Triangle* out) {
    u32 copied = 0;
    for (u32 r = 0; r < n; ++r) {
        for (u32 k = 0; k < runs[r].y; ++k, ++copied) {
            const float4* src = reinterpret_cast<const float4*>(tris) + 3 * (u64)(runs[r].x + k);
            float4* dst = reinterpret_cast<float4*>(out) + 3 * (u64)copied;
            dst[0] = __ldg(src), dst[1] = __ldg(src + 1), dst[2] = __ldg(src + 2);
        }
    }
}

// ------------------------------------------------------------ quantisation

// The biased exponent of the grid over [lo, hi] (compressed::axis_exponent).
__device__ u32 axis_exponent(float lo, float hi) {
    const double extent = (double)hi - (double)lo;
    i32 k = -126;
    if (extent > 0.0) {
        const u64 bits = (u64)__double_as_longlong(extent / 255.0);
        k = (i32)((bits >> 52) & 0x7ffu) - 1023;
        if ((bits & 0xfffffffffffffull) != 0) ++k;
        k = max(k, -126);
    }
    while (k < 127 && cw_decode(255u, cw_exponent_scale((u32)(k + 127)), lo) < hi) ++k;
    return (u32)(k + 127);
}

// compressed::quantize_lo and quantize_hi.
__device__ u32 quantize_lo(float v, float origin, float scale) {
    const double q = floor(((double)v - (double)origin) / (double)scale);
    u32 qi = (u32)fmin(fmax(q, 0.0), 255.0);
    while (qi > 0 && cw_decode(qi, scale, origin) > v) --qi;
    while (qi < 255 && cw_decode(qi + 1, scale, origin) <= v) ++qi;
    return qi;
}
__device__ u32 quantize_hi(float v, float origin, float scale) {
    const double q = ceil(((double)v - (double)origin) / (double)scale);
    u32 qi = (u32)fmin(fmax(q, 0.0), 255.0);
    while (qi < 255 && cw_decode(qi, scale, origin) < v) ++qi;
    while (qi > 0 && cw_decode(qi - 1, scale, origin) >= v) --qi;
    return qi;
}

// ---------------------------------------------------------------- the node

// Puts byte `value` at `slot` of the node's byte array `array` (0: meta,
// 1..3: lo_x..lo_z, 4..6: hi_x..hi_z) in the node's 20 words.
__device__ __forceinline__ void put_byte(u32* words, u32 array, u32 slot, u32 value) {
    words[6 + 2 * array + slot / 4] |= value << (8 * (slot % 4));
}

// Chooses the slot of every child (Ylitie et al.'s octant ordering, by a
// greedy assignment): slot s stands for the octant whose sides are given by
// its bits (4: x, 2: y, 1: z; a set bit is the negative side), and the pair
// (child, slot) whose centre offset points furthest along that octant's
// diagonal is placed first.
__device__ void assign_slots(const BvhNode* items, u32 n, float3 centre, u32* slot_of) {
    u32 placed = 0, used = 0;
    for (u32 round = 0; round < n; ++round) {
        u32 best_child = CW_WIDTH, best_slot = 0;
        float best = -CAUSTIC_INF;
        for (u32 i = 0; i < n; ++i) {
            if (placed & (1u << i)) continue;
            float3 d = make_float3(0.0f, 0.0f, 0.0f);
            if (!item_empty(items[i])) {
                d.x = 0.5f * (items[i].min[0] + items[i].max[0]) - centre.x;
                d.y = 0.5f * (items[i].min[1] + items[i].max[1]) - centre.y;
                d.z = 0.5f * (items[i].min[2] + items[i].max[2]) - centre.z;
            }
            for (u32 s = 0; s < CW_WIDTH; ++s) {
                if (used & (1u << s)) continue;
                const float score = ((s & 4u) ? -d.x : d.x) + ((s & 2u) ? -d.y : d.y) +
                                    ((s & 1u) ? -d.z : d.z);
                if (best_child == CW_WIDTH || score > best) {
                    best = score, best_child = i, best_slot = s;
                }
            }
        }
        slot_of[best_child] = best_slot;
        placed |= 1u << best_child;
        used |= 1u << best_slot;
    }
}

// Builds wide node `index` from its item; see the file's docs.
__device__ void build_node(const BvhNode* bvh, const Triangle* tris_in, BvhNode* pending,
                           CompressedNode* nodes, Triangle* tris_out, u32* cursor, u32 capacity,
                           u32 index) {
    BvhNode items[CW_WIDTH];
    bool open[CW_WIDTH];
    items[0] = load_item(pending, index);
    open[0] = must_open(bvh, items[0]);
    u32 n = 1;
    while (n < CW_WIDTH) {
        // The largest child that must be opened; the first one if areas
        // are NaN, so that an item that must be opened always is (the
        // root's item and every pending item is one).
        u32 best = CW_WIDTH;
        float best_area = 0.0f;
        for (u32 i = 0; i < n; ++i) {
            if (!open[i]) continue;
            const float area = item_area(items[i]);
            if (best == CW_WIDTH || area > best_area) best = i, best_area = area;
        }
        if (best == CW_WIDTH) break;
        BvhNode left, right;
        open_item(bvh, tris_in, items[best], left, right);
        items[best] = left, open[best] = must_open(bvh, left);
        items[n] = right, open[n] = must_open(bvh, right);
        ++n;
    }
    // Slots still free split leaf children, largest first: the traversal
    // tests all eight boxes of a node anyway, and smaller leaves spare
    // triangle tests.
    while (n < CW_WIDTH) {
        u32 best = CW_WIDTH;
        float best_area = 0.0f;
        for (u32 i = 0; i < n; ++i) {
            if (open[i] || (items[i].count == 1)) continue;
            const float area = item_area(items[i]);
            if (best == CW_WIDTH || area > best_area) best = i, best_area = area;
        }
        if (best == CW_WIDTH) break;
        BvhNode left, right;
        open_item(bvh, tris_in, items[best], left, right);
        items[best] = left, open[best] = false;
        items[n] = right, open[n] = false;
        ++n;
    }

    // The node's grid: origin at its lower corner, per axis the smallest
    // step that spans it (a flat or empty axis gets the smallest step).
    float3 lo = make_float3(CAUSTIC_INF, CAUSTIC_INF, CAUSTIC_INF), hi = lo * -1.0f;
    for (u32 i = 0; i < n; ++i) {
        if (item_empty(items[i])) continue;
        lo = min3(lo, make_float3(items[i].min[0], items[i].min[1], items[i].min[2]));
        hi = max3(hi, make_float3(items[i].max[0], items[i].max[1], items[i].max[2]));
    }
    const float lo_a[3] = {lo.x, lo.y, lo.z}, hi_a[3] = {hi.x, hi.y, hi.z};
    float origin[3], scale[3];
    u32 exponent[3];
    for (u32 a = 0; a < 3; ++a) {
        const bool spans = lo_a[a] <= hi_a[a];
        origin[a] = spans ? lo_a[a] : 0.0f;
        exponent[a] = spans ? axis_exponent(lo_a[a], hi_a[a]) : 1u;
        scale[a] = cw_exponent_scale(exponent[a]);
    }
    const float3 centre = make_float3(0.5f * (lo.x + hi.x), 0.5f * (lo.y + hi.y), 0.5f * (lo.z + hi.z));
    u32 slot_of[CW_WIDTH];
    assign_slots(items, n, centre, slot_of);
    u32 child_at[CW_WIDTH];
    for (u32 s = 0; s < CW_WIDTH; ++s) child_at[s] = CW_WIDTH;
    for (u32 i = 0; i < n; ++i) child_at[slot_of[i]] = i;

    // Slots in order: inner children take consecutive node indices (one
    // atomic add), leaf children consecutive triangle offsets (another).
    u32 inner_count = 0, leaves = 0, triangle_count = 0;
    uint2 runs[CW_WIDTH][CW_LEAF_MAX];
    u32 run_count[CW_WIDTH], sizes[CW_WIDTH];
    for (u32 s = 0; s < CW_WIDTH; ++s) {
        const u32 i = child_at[s];
        run_count[s] = 0, sizes[s] = 0;
        if (i == CW_WIDTH) continue;
        if (open[i]) {
            ++inner_count;
        } else {
            ++leaves;
            run_count[s] = leaf_runs(bvh, items[i], runs[s], sizes[s]);
            triangle_count += sizes[s];
        }
    }
    u32 child_base = 0, triangle_base = 0;
    if (inner_count > 0) child_base = atomicAdd(&cursor[CURSOR_NODES], inner_count);
    if (child_base + inner_count > capacity) {
        // The host sees the flag and builds again with room for the worst case.
        atomicOr(&cursor[CURSOR_OVERFLOW], 1u);
        return;
    }
    if (triangle_count > 0) triangle_base = atomicAdd(&cursor[CURSOR_TRIANGLES], triangle_count);

    u32 words[4 * CW_NODE_WORDS];
    for (u32 w = 0; w < 4 * CW_NODE_WORDS; ++w) words[w] = 0;
    u32 inner_mask = 0, offset = 0, inner_rank = 0;
    for (u32 s = 0; s < CW_WIDTH; ++s) {
        const u32 i = child_at[s];
        if (i == CW_WIDTH) continue;
        const BvhNode& c = items[i];
        if (open[i]) {
            inner_mask |= 1u << s;
            put_byte(words, 0, s, cw_meta_inner(s));
            store_item(pending, child_base + inner_rank++, c);
        } else {
            put_byte(words, 0, s, cw_meta_leaf(offset, sizes[s]));
            copy_runs(tris_in, runs[s], run_count[s], tris_out + triangle_base + offset);
            offset += sizes[s];
        }
        const float c_lo[3] = {c.min[0], c.min[1], c.min[2]}, c_hi[3] = {c.max[0], c.max[1], c.max[2]};
        const bool empty = item_empty(c);
        for (u32 a = 0; a < 3; ++a) {
            // An empty box (no hittable triangle) decodes inverted.
            put_byte(words, 1 + a, s, empty ? 255u : quantize_lo(c_lo[a], origin[a], scale[a]));
            put_byte(words, 4 + a, s, empty ? 0u : quantize_hi(c_hi[a], origin[a], scale[a]));
        }
    }
    words[0] = __float_as_uint(origin[0]);
    words[1] = __float_as_uint(origin[1]);
    words[2] = __float_as_uint(origin[2]);
    words[3] = exponent[0] | (exponent[1] << 8) | (exponent[2] << 16) | (inner_mask << 24);
    words[4] = child_base;
    words[5] = triangle_base;
    uint4* out = reinterpret_cast<uint4*>(nodes) + CW_NODE_WORDS * (u64)index;
    for (u32 w = 0; w < CW_NODE_WORDS; ++w) {
        out[w] = make_uint4(words[4 * w], words[4 * w + 1], words[4 * w + 2], words[4 * w + 3]);
    }
    atomicAdd(&cursor[CURSOR_LEAVES], leaves);
}

// ----------------------------------------------------------------- kernels

// Queues the binary root as the item of wide node 0 and resets the counters.
extern "C" __global__ void compress_init(const BvhNode* bvh, BvhNode* pending, u32* cursor) {
    if (global_thread() != 0) return;
    store_item(pending, 0, load_item(bvh, 0));
    for (u32 w = 0; w < CURSOR_WORDS; ++w) cursor[w] = 0;
    cursor[CURSOR_END] = 1;
    cursor[CURSOR_NODES] = 1;
    cursor[CURSOR_LEVELS] = 1;
}

// Builds the nodes of the current level, [cursor[BEGIN], cursor[END]).
extern "C" __global__ void __launch_bounds__(COMPRESS_THREADS)
    compress_level(const BvhNode* bvh, const Triangle* tris_in, BvhNode* pending,
                   CompressedNode* nodes, Triangle* tris_out, u32* cursor, u32 capacity) {
    const u32 begin = cursor[CURSOR_BEGIN], end = cursor[CURSOR_END];
    for (u64 i = begin + global_thread(); i < end; i += grid_threads()) {
        build_node(bvh, tris_in, pending, nodes, tris_out, cursor, capacity, (u32)i);
    }
}

// Makes the nodes allocated by the last level the current level.
extern "C" __global__ void compress_next_level(u32* cursor, u32 capacity) {
    if (global_thread() != 0) return;
    cursor[CURSOR_BEGIN] = cursor[CURSOR_END];
    cursor[CURSOR_END] = min(cursor[CURSOR_NODES], capacity);
    if (cursor[CURSOR_END] > cursor[CURSOR_BEGIN]) cursor[CURSOR_LEVELS] += 1;
}
