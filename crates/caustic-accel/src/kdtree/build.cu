// kdtree/build.cu: the SAH kd-tree over triangles built on the GPU after
// Zhou, Hou, Wang and Guo 2008 (§3, Algorithms 2 to 5), the twin of
// build_sah/{large_nodes,small_nodes}.rs, driven by build_cuda.rs.
//
// Large-node stage, one level of nodes at a time, each kernel parallel over
// all references of the level (a reference is a triangle id with the box of
// its part inside its node; each node's references are one contiguous run):
// - kd_node_boxes: each node's tight box, a segmented min / max reduction
//   (warps whose lanes all belong to one node reduce by shuffles first,
//   then one set of ordered-integer atomics per warp);
// - the host plans each node's empty-space cuts and median split with the
//   CPU's own functions (so both builds take the same planes);
// - kd_classify: the side(s) of every reference; a straddler is clipped to
//   each child's cell by Sutherland–Hodgman in f64, rounded outwards, as
//   clip.rs does; two flag arrays are scanned (exclusive, ops::scan);
// - kd_side_counts: per node, the references of each side, for the host to
//   check that the split separates something and to lay out the children;
// - kd_scatter: every reference written, stably, to the next level's arrays
//   (large children) or to the small pool (small roots and large leaves).
// Small-node stage, kd_small: one warp per small root (≤ 64 references),
// exact SAH over the planes of the references' box faces, sets as u64
// masks (left / right masks per face, computed once per root in shared
// memory); the warp evaluates a node's candidates in parallel and picks the
// cheapest, ties to the first plane in (axis, position) order, as the CPU's
// loop does. It runs twice: to count each root's nodes and references, then
// (after the host placed them) to write nodes, references and culling
// boxes.
#include "triangle_kdtree.cuh"

// Threads per block of the per-reference kernels (ELEMENT_THREADS).
#define KD_BUILD_THREADS 256u
// Most references of a small root: the width of the masks.
#define KD_SMALL_MAX 64u
// The depth limit the traversal's stack allows (MAX_DEPTH): a small root's
// walk stack holds one pending right child per level, plus the root.
#define KD_SMALL_STACK 66u

// ----------------------------------------------------------- preparation

// Each triangle's box (the empty box when a vertex is not finite) and
// whether it can be hit.
extern "C" __global__ void __launch_bounds__(KD_BUILD_THREADS)
kd_triangle_boxes(const Triangle* tris, u32 n, Aabb* boxes, u32* finite) {
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float3 a, b, c;
    kd_load_triangle(tris, i, a, b, c);
    const bool ok = kd_finite(a) && kd_finite(b) && kd_finite(c);
    boxes[i] = ok ? kd_triangle_bounds(a, b, c) : aabb_empty();
    finite[i] = ok ? 1u : 0u;
}

// The root's references: the boxes of the hittable triangles `ids`.
extern "C" __global__ void __launch_bounds__(KD_BUILD_THREADS)
kd_gather_boxes(const u32* ids, const Aabb* boxes, u32 m, Aabb* out) {
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < m) out[i] = boxes[ids[i]];
}

// ------------------------------------------------------- node of a ref

// The node whose run holds reference i: the last node with start <= i
// (starts ascending, node 0 starting at 0).
__device__ __forceinline__ u32 node_of(const KdPlan* plans, u32 nodes, u32 i) {
    u32 lo = 0, hi = nodes;
    while (hi - lo > 1) {
        const u32 mid = (lo + hi) / 2;
        if (plans[mid].start <= i) lo = mid;
        else hi = mid;
    }
    return lo;
}

// f32 as an i32 that orders as the float does (grid.cuh's grid_ordered).
__device__ __forceinline__ int kd_ordered(float x) {
    const int i = __float_as_int(x);
    return i >= 0 ? i : i ^ 0x7fffffff;
}

// Tight boxes: ordered[6 * node + k] receives min x, y, z, max x, y, z of
// the node's references by atomics (initialised by the host to the
// identities). One thread per reference.
extern "C" __global__ void __launch_bounds__(KD_BUILD_THREADS)
kd_node_boxes(const KdPlan* plans, u32 nodes, const Aabb* boxes, u32 m, int* ordered) {
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    const bool valid = i < m;
    const u32 node = valid ? node_of(plans, nodes, i) : 0xffffffffu;
    const Aabb b = valid ? boxes[i] : aabb_empty();
    float v[6] = {b.min.x, b.min.y, b.min.z, b.max.x, b.max.y, b.max.z};
    // One node for the whole warp (the usual case high up): reduce first.
    const u32 first = __shfl_sync(CAUSTIC_FULL_MASK, node, 0);
    if (__all_sync(CAUSTIC_FULL_MASK, node == first)) {
#pragma unroll
        for (int k = 0; k < 6; ++k) {
            for (int d = 16; d > 0; d >>= 1) {
                const float o = __shfl_xor_sync(CAUSTIC_FULL_MASK, v[k], d);
                v[k] = k < 3 ? fminf(v[k], o) : fmaxf(v[k], o);
            }
        }
        if (lane_id() != 0) return;
    }
    if (!valid) return;
#pragma unroll
    for (int k = 0; k < 6; ++k) {
        int* slot = ordered + 6 * (u64)node + k;
        if (k < 3) atomicMin(slot, kd_ordered(v[k]));
        else atomicMax(slot, kd_ordered(v[k]));
    }
}

// ------------------------------------------------------------- clipping

// clip.rs: the box of triangle ∩ cell by Sutherland–Hodgman in f64.
#define KD_CLIP_VERTICES 9

struct KdPolygon {
    double x[KD_CLIP_VERTICES], y[KD_CLIP_VERTICES], z[KD_CLIP_VERTICES];
    int len;
};

__device__ __forceinline__ double kd_coord(const KdPolygon& p, int i, u32 axis) {
    return axis == 0 ? p.x[i] : (axis == 1 ? p.y[i] : p.z[i]);
}

__device__ __forceinline__ void kd_push(KdPolygon& p, double x, double y, double z) {
    p.x[p.len] = x;
    p.y[p.len] = y;
    p.z[p.len] = z;
    ++p.len;
}

// Where segment a-b crosses the plane, that coordinate set exactly:
// a + (b - a) * s with s = (plane - a[axis]) / (b[axis] - a[axis]).
__device__ __forceinline__ void kd_crossing(const KdPolygon& p, int a, int b, u32 axis,
                                            double plane, KdPolygon& out) {
    const double s = __ddiv_rn(__dsub_rn(plane, kd_coord(p, a, axis)),
                               __dsub_rn(kd_coord(p, b, axis), kd_coord(p, a, axis)));
    double x = __dadd_rn(p.x[a], __dmul_rn(__dsub_rn(p.x[b], p.x[a]), s));
    double y = __dadd_rn(p.y[a], __dmul_rn(__dsub_rn(p.y[b], p.y[a]), s));
    double z = __dadd_rn(p.z[a], __dmul_rn(__dsub_rn(p.z[b], p.z[a]), s));
    if (axis == 0) x = plane;
    else if (axis == 1) y = plane;
    else z = plane;
    kd_push(out, x, y, z);
}

// One Sutherland–Hodgman pass keeping sign * (p[axis] - plane) >= 0.
__device__ void kd_clip_pass(const KdPolygon& in, u32 axis, double plane, bool keep_above,
                             KdPolygon& out) {
    out.len = 0;
    const int n = in.len;
    for (int i = 0; i < n; ++i) {
        const int prev = (i + n - 1) % n;
        const double dc = __dsub_rn(kd_coord(in, i, axis), plane);
        const double dp = __dsub_rn(kd_coord(in, prev, axis), plane);
        const bool in_c = keep_above ? dc >= 0.0 : -dc >= 0.0;
        const bool in_p = keep_above ? dp >= 0.0 : -dp >= 0.0;
        if (in_p && in_c) {
            kd_push(out, in.x[i], in.y[i], in.z[i]);
        } else if (in_p) {
            kd_crossing(in, prev, i, axis, plane, out);
        } else if (in_c) {
            kd_crossing(in, prev, i, axis, plane, out);
            kd_push(out, in.x[i], in.y[i], in.z[i]);
        }
    }
}

// The largest float not above x, the smallest not below (clip.rs).
__device__ __forceinline__ float kd_round_down(double x) {
    const float f = __double2float_rn(x);
    if (!((double)f > x)) return f;
    if (f == 0.0f) return -__uint_as_float(1u);
    const u32 bits = __float_as_uint(f);
    return __uint_as_float(f > 0.0f ? bits - 1u : bits + 1u);
}
__device__ __forceinline__ float kd_round_up(double x) { return -kd_round_down(-x); }

__device__ __forceinline__ double kd_dmin(double a, double b) { return b < a ? b : a; }
__device__ __forceinline__ double kd_dmax(double a, double b) { return b > a ? b : a; }

// clipped_bounds: false when the triangle misses the closed cell.
__device__ bool kd_clipped_bounds(float3 a, float3 b, float3 c, const Aabb& cell, Aabb& out) {
    KdPolygon poly[2];
    poly[0].len = 0;
    kd_push(poly[0], a.x, a.y, a.z);
    kd_push(poly[0], b.x, b.y, b.z);
    kd_push(poly[0], c.x, c.y, c.z);
    int cur = 0;
    const Aabb tb = kd_triangle_bounds(a, b, c);
    for (u32 axis = 0; axis < 3; ++axis) {
        const float cmin = component(cell.min, axis), cmax = component(cell.max, axis);
        if (component(tb.min, axis) < cmin) {
            kd_clip_pass(poly[cur], axis, (double)cmin, true, poly[cur ^ 1]);
            cur ^= 1;
        }
        if (component(tb.max, axis) > cmax) {
            kd_clip_pass(poly[cur], axis, (double)cmax, false, poly[cur ^ 1]);
            cur ^= 1;
        }
        if (poly[cur].len == 0) return false;
    }
    double lo[3] = {CAUSTIC_INF, CAUSTIC_INF, CAUSTIC_INF};
    double hi[3] = {-CAUSTIC_INF, -CAUSTIC_INF, -CAUSTIC_INF};
    const KdPolygon& p = poly[cur];
    for (int i = 0; i < p.len; ++i) {
        lo[0] = kd_dmin(lo[0], p.x[i]);
        lo[1] = kd_dmin(lo[1], p.y[i]);
        lo[2] = kd_dmin(lo[2], p.z[i]);
        hi[0] = kd_dmax(hi[0], p.x[i]);
        hi[1] = kd_dmax(hi[1], p.y[i]);
        hi[2] = kd_dmax(hi[2], p.z[i]);
    }
    Aabb outward;
    outward.min = make_float3(kd_round_down(lo[0]), kd_round_down(lo[1]), kd_round_down(lo[2]));
    outward.max = make_float3(kd_round_up(hi[0]), kd_round_up(hi[1]), kd_round_up(hi[2]));
    out = kd_intersection(kd_intersection(outward, cell), tb);
    return true;
}

// ------------------------------------------------------- classification

__device__ __forceinline__ Aabb kd_cell(const float (&lo)[3], const float (&hi)[3]) {
    Aabb b;
    b.min = make_float3(lo[0], lo[1], lo[2]);
    b.max = make_float3(hi[0], hi[1], hi[2]);
    return b;
}

// large_nodes.rs's partition_chunk and clip_straddler for reference i:
// left[i], right[i] = 1 where it goes to that child, with its box there.
// left and right have m + 1 entries (the last 0), so that their exclusive
// scans end in the totals.
extern "C" __global__ void __launch_bounds__(KD_BUILD_THREADS)
kd_classify(const KdPlan* plans, u32 nodes, const u32* prims, const Aabb* boxes, u32 m,
            const Triangle* tris, u32* left, u32* right, Aabb* left_boxes, Aabb* right_boxes) {
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i == m) {
        left[m] = 0;
        right[m] = 0;
    }
    if (i >= m) return;
    const KdPlan& plan = plans[node_of(plans, nodes, i)];
    const Aabb r = boxes[i];
    u32 l = 0, h = 0;
    Aabb lb = r, hb = r;
    if (plan.kind == KD_PLAN_LEAF) {
        l = 1;
    } else {
        const float lo = component(r.min, plan.axis), hi = component(r.max, plan.axis);
        if (hi <= plan.split) {
            l = 1;
        } else if (lo >= plan.split) {
            h = 1;
        } else {
            const Aabb below = kd_cell(plan.below_min, plan.below_max);
            const Aabb above = kd_cell(plan.above_min, plan.above_max);
            float3 a, b, c;
            kd_load_triangle(tris, prims[i], a, b, c);
            Aabb part;
            if (kd_clipped_bounds(a, b, c, below, part)) {
                lb = kd_intersection(part, r);
                l = kd_box_empty(lb) ? 0u : 1u;
            }
            if (kd_clipped_bounds(a, b, c, above, part)) {
                hb = kd_intersection(part, r);
                h = kd_box_empty(hb) ? 0u : 1u;
            }
            // Rounding lost it from both (impossible exactly): both keep
            // its box clipped to them, so no part is lost.
            if (l == 0 && h == 0) {
                l = h = 1;
                lb = kd_intersection(r, below);
                hb = kd_intersection(r, above);
            }
        }
    }
    left[i] = l;
    right[i] = h;
    left_boxes[i] = lb;
    right_boxes[i] = hb;
}

// counts[2 * node], counts[2 * node + 1]: the node's left and right
// references, from the exclusive scans of the flags (m + 1 entries).
extern "C" __global__ void __launch_bounds__(KD_BUILD_THREADS)
kd_side_counts(const KdPlan* plans, u32 nodes, const u32* left_offsets,
               const u32* right_offsets, u32* counts) {
    const u32 n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= nodes) return;
    const u32 s = plans[n].start, e = s + plans[n].count;
    counts[2 * n] = left_offsets[e] - left_offsets[s];
    counts[2 * n + 1] = right_offsets[e] - right_offsets[s];
}

__device__ __forceinline__ void kd_put(u32 dest, u32 slot, u32 prim, const Aabb& box,
                                       u32* next_prims, Aabb* next_boxes, u32* small_prims,
                                       Aabb* small_boxes) {
    if (dest == KD_DEST_NEXT) {
        next_prims[slot] = prim;
        next_boxes[slot] = box;
    } else if (dest == KD_DEST_SMALL) {
        small_prims[slot] = prim;
        small_boxes[slot] = box;
    }
}

// Moves every reference to its children's places (the host's plan): a
// node's left references keep their order, then its right ones.
extern "C" __global__ void __launch_bounds__(KD_BUILD_THREADS)
kd_scatter(const KdPlan* plans, u32 nodes, const u32* prims, u32 m, const u32* left,
           const u32* right, const u32* left_offsets, const u32* right_offsets,
           const Aabb* left_boxes, const Aabb* right_boxes, u32* next_prims, Aabb* next_boxes,
           u32* small_prims, Aabb* small_boxes) {
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= m) return;
    const KdPlan& plan = plans[node_of(plans, nodes, i)];
    const u32 prim = prims[i];
    if (left[i]) {
        const u32 slot = plan.left_base + left_offsets[i] - left_offsets[plan.start];
        kd_put(plan.left_dest, slot, prim, left_boxes[i], next_prims, next_boxes, small_prims,
               small_boxes);
    }
    if (right[i]) {
        const u32 slot = plan.right_base + right_offsets[i] - right_offsets[plan.start];
        kd_put(plan.right_dest, slot, prim, right_boxes[i], next_prims, next_boxes, small_prims,
               small_boxes);
    }
}

// ------------------------------------------------------ small-node stage

// A node of a small root waiting to be built.
struct KdWork {
    u64 set;
    float lo[3], hi[3];
    u32 depth;
    // Local index: 0 is the root, the rest go behind the root's tail.
    u32 local;
};

// The small stage's cost constants and depth limit.
struct KdSmallScratch {
    float lo[3][KD_SMALL_MAX];
    float hi[3][KD_SMALL_MAX];
    u32 prim[KD_SMALL_MAX];
    // Per axis, per face (2j: box j's min face, 2j + 1: its max face).
    u64 left[3][2 * KD_SMALL_MAX];
    u64 right[3][2 * KD_SMALL_MAX];
    KdWork stack[KD_SMALL_STACK];
};

// The face's plane.
__device__ __forceinline__ float kd_face(const KdSmallScratch& s, u32 axis, u32 face) {
    return (face & 1u) ? s.hi[axis][face >> 1] : s.lo[axis][face >> 1];
}

// The root's representative bits for a plane of value p on `axis`: the CPU
// merges the sorted min faces and max faces (mins first on equal values,
// each sorted by total order, -0 before +0) and keeps the first of equal
// values, so only the sign of a zero can differ.
__device__ float kd_representative(const KdSmallScratch& s, u32 n, u32 axis, float p) {
    if (p != 0.0f) return p;
    bool any_min = false, neg_min = false, neg_max = false;
    for (u32 j = 0; j < n; ++j) {
        const float lo = s.lo[axis][j], hi = s.hi[axis][j];
        if (lo == 0.0f) {
            any_min = true;
            neg_min |= signbit(lo) != 0;
        }
        if (hi == 0.0f) neg_max |= signbit(hi) != 0;
    }
    return (any_min ? neg_min : neg_max) ? -0.0f : 0.0f;
}

// The best candidate seen: cost, then first (axis, plane).
struct KdBest {
    float cost;
    u32 axis;
    float plane;
    u32 face;
};

__device__ __forceinline__ bool kd_better(const KdBest& a, const KdBest& b) {
    if (a.cost != b.cost) return a.cost < b.cost;
    if (a.axis != b.axis) return a.axis < b.axis;
    return a.plane < b.plane;
}

// Aabb::half_area of a cell: 0 for the empty one.
__device__ __forceinline__ float kd_half_area(const float (&lo)[3], const float (&hi)[3]) {
    if (lo[0] > hi[0] || lo[1] > hi[1] || lo[2] > hi[2]) return 0.0f;
    const float ex = __fsub_rn(hi[0], lo[0]), ey = __fsub_rn(hi[1], lo[1]),
                ez = __fsub_rn(hi[2], lo[2]);
    return __fadd_rn(__fadd_rn(__fmul_rn(ex, ey), __fmul_rn(ey, ez)), __fmul_rn(ez, ex));
}

// The cell's surface area in f64 as KdTree::sah_cost takes it: 0 for an
// empty or non-finite cell.
__device__ double kd_area_f64(const float (&lo)[3], const float (&hi)[3]) {
    double e[3];
    for (int k = 0; k < 3; ++k) {
        e[k] = __dsub_rn((double)hi[k], (double)lo[k]);
        if (!(e[k] >= 0.0 && e[k] < (double)CAUSTIC_INF)) return 0.0;
    }
    const double sum = __dadd_rn(__dadd_rn(__dmul_rn(e[0], e[1]), __dmul_rn(e[1], e[2])),
                                 __dmul_rn(e[2], e[0]));
    return __dmul_rn(2.0, sum);
}

// small_nodes.rs's best_split for work item w, evaluated by the whole warp:
// false when no candidate beats the leaf.
__device__ bool kd_best_split(const KdSmallScratch& s, u32 n, const KdWork& w,
                              float traversal_cost, float intersection_cost, u32 max_depth,
                              KdBest& best) {
    const u32 count = __popcll(w.set);
    const float area = kd_half_area(w.lo, w.hi);
    if (count == 0 || w.depth >= max_depth || !(area > 0.0f && area < CAUSTIC_INF)) return false;
    const float leaf_cost = __fmul_rn(intersection_cost, (float)count);
    const float scale = __fdiv_rn(intersection_cost, area);
    KdBest mine = {CAUSTIC_INF, 3u, 0.0f, 0u};
    const u32 faces = 2 * n;
    for (u32 c = lane_id(); c < 3 * faces; c += 32) {
        const u32 axis = c / faces, face = c % faces;
        if (!((w.set >> (face >> 1)) & 1ull)) continue;
        const float plane = kd_face(s, axis, face);
        const float lo = kd_pick(w.lo, axis), hi = kd_pick(w.hi, axis);
        if (!(lo < plane && plane < hi)) continue;
        const u32 u = axis == 2 ? 0u : axis + 1, v = u == 2 ? 0u : u + 1;
        const float eu = __fsub_rn(kd_pick(w.hi, u), kd_pick(w.lo, u));
        const float ev = __fsub_rn(kd_pick(w.hi, v), kd_pick(w.lo, v));
        const float cap = __fmul_rn(eu, ev), rim = __fadd_rn(eu, ev);
        const float n_left = (float)__popcll(w.set & s.left[axis][face]);
        const float n_right = (float)__popcll(w.set & s.right[axis][face]);
        const float area_left = __fadd_rn(cap, __fmul_rn(__fsub_rn(plane, lo), rim));
        const float area_right = __fadd_rn(cap, __fmul_rn(__fsub_rn(hi, plane), rim));
        const float weighted =
            __fadd_rn(__fmul_rn(n_left, area_left), __fmul_rn(n_right, area_right));
        const float cost = __fadd_rn(traversal_cost, __fmul_rn(scale, weighted));
        const KdBest cand = {cost, axis, plane, face};
        if (kd_better(cand, mine)) mine = cand;
    }
    for (int d = 16; d > 0; d >>= 1) {
        KdBest other;
        other.cost = __shfl_xor_sync(CAUSTIC_FULL_MASK, mine.cost, d);
        other.axis = __shfl_xor_sync(CAUSTIC_FULL_MASK, mine.axis, d);
        other.plane = __shfl_xor_sync(CAUSTIC_FULL_MASK, mine.plane, d);
        other.face = __shfl_xor_sync(CAUSTIC_FULL_MASK, mine.face, d);
        if (kd_better(other, mine)) mine = other;
    }
    best = mine;
    return mine.cost < leaf_cost;
}

// Union of the whole triangles of the set's references, over the warp.
__device__ Aabb kd_set_bounds(const KdSmallScratch& s, u64 set, const Triangle* tris) {
    Aabb b = aabb_empty();
    for (u32 j = lane_id(); j < KD_SMALL_MAX; j += 32) {
        if (!((set >> j) & 1ull)) continue;
        float3 p, q, r;
        kd_load_triangle(tris, s.prim[j], p, q, r);
        b = kd_union(b, kd_triangle_bounds(p, q, r));
    }
    float v[6] = {b.min.x, b.min.y, b.min.z, b.max.x, b.max.y, b.max.z};
#pragma unroll
    for (int k = 0; k < 6; ++k) {
        for (int d = 16; d > 0; d >>= 1) {
            const float o = __shfl_xor_sync(CAUSTIC_FULL_MASK, v[k], d);
            v[k] = k < 3 ? kd_min(v[k], o) : kd_max(v[k], o);
        }
    }
    b.min = make_float3(v[0], v[1], v[2]);
    b.max = make_float3(v[3], v[4], v[5]);
    return b;
}

// A large node kept as a leaf of all its references (any number).
__device__ void kd_large_leaf(const KdSmallRoot& root, const u32* pool_prims, const Triangle* tris,
                              u32 prim_base, uint2* nodes, u32* leaf_prims, Aabb* ref_bounds,
                              Aabb* root_bounds, u32 root_index) {
    Aabb b = aabb_empty();
    for (u32 j = lane_id(); j < root.count; j += 32) {
        const u32 prim = pool_prims[root.start + j];
        leaf_prims[prim_base + j] = prim;
        float3 p, q, r;
        kd_load_triangle(tris, prim, p, q, r);
        b = kd_union(b, kd_triangle_bounds(p, q, r));
    }
    float v[6] = {b.min.x, b.min.y, b.min.z, b.max.x, b.max.y, b.max.z};
#pragma unroll
    for (int k = 0; k < 6; ++k) {
        for (int d = 16; d > 0; d >>= 1) {
            const float o = __shfl_xor_sync(CAUSTIC_FULL_MASK, v[k], d);
            v[k] = k < 3 ? kd_min(v[k], o) : kd_max(v[k], o);
        }
    }
    if (lane_id() == 0) {
        b.min = make_float3(v[0], v[1], v[2]);
        b.max = make_float3(v[3], v[4], v[5]);
        nodes[root.slot] = kd_leaf(prim_base, root.count);
        ref_bounds[root.slot] = b;
        root_bounds[root_index] = b;
    }
}

// Loads the root's references and computes every face's side masks: left =
// {min < p} ∪ {max <= p}, right = {max > p} (small_nodes.rs).
__device__ void kd_small_setup(KdSmallScratch& s, const KdSmallRoot& root, const u32* pool_prims,
                               const Aabb* pool_boxes) {
    const u32 n = root.count;
    for (u32 j = lane_id(); j < n; j += 32) {
        const Aabb b = pool_boxes[root.start + j];
        s.prim[j] = pool_prims[root.start + j];
        s.lo[0][j] = b.min.x;
        s.lo[1][j] = b.min.y;
        s.lo[2][j] = b.min.z;
        s.hi[0][j] = b.max.x;
        s.hi[1][j] = b.max.y;
        s.hi[2][j] = b.max.z;
    }
    __syncwarp();
    for (u32 c = lane_id(); c < 6 * n; c += 32) {
        const u32 axis = c / (2 * n), face = c % (2 * n);
        const float p = kd_face(s, axis, face);
        u64 left = 0, right = 0;
        for (u32 j = 0; j < n; ++j) {
            const u64 bit = 1ull << j;
            if (s.lo[axis][j] < p || s.hi[axis][j] <= p) left |= bit;
            if (s.hi[axis][j] > p) right |= bit;
        }
        s.left[axis][face] = left;
        s.right[axis][face] = right;
    }
    __syncwarp();
}

// One warp (block of 32) per small root. Count pass (nodes == null):
// stats[4 * r ..] = nodes, references, leaves, deepest leaf of root r's
// subtree. Write pass: its nodes (the root at its slot, the others from
// tails[r] on), its leaves' references from prim_bases[r] on, every node's
// culling box, and the root's box into root_bounds[r].
extern "C" __global__ void __launch_bounds__(32)
kd_small(const KdSmallRoot* roots, u32 root_count, const u32* pool_prims, const Aabb* pool_boxes,
         const Triangle* tris, float traversal_cost, float intersection_cost, u32 max_depth,
         const u32* tails, const u32* prim_bases, u32* node_words, u32* leaf_prims,
         Aabb* ref_bounds, Aabb* root_bounds, u32* stats, u64* costs) {
    __shared__ KdSmallScratch s;
    uint2* nodes = reinterpret_cast<uint2*>(node_words);
    const u32 r = blockIdx.x;
    if (r >= root_count) return;
    const KdSmallRoot root = roots[r];
    const bool write = nodes != nullptr;
    const u32 prim_base = write ? prim_bases[r] : 0u;
    if (root.leaf) {
        if (write) {
            kd_large_leaf(root, pool_prims, tris, prim_base, nodes, leaf_prims, ref_bounds,
                          root_bounds, r);
        } else if (lane_id() == 0) {
            stats[4 * r] = 1;
            stats[4 * r + 1] = root.count;
            stats[4 * r + 2] = 1;
            stats[4 * r + 3] = root.depth;
            costs[2 * r] = __double_as_longlong(
                __dmul_rn(kd_area_f64(root.lo, root.hi), (double)root.count));
            costs[2 * r + 1] = __double_as_longlong((double)root.count);
        }
        return;
    }
    const u32 n = root.count;
    kd_small_setup(s, root, pool_prims, pool_boxes);
    const u32 tail = write ? tails[r] : 0u;
    // Global index of local node k.
#define KD_GLOBAL(k) ((k) == 0 ? root.slot : tail + (k) - 1)
    u32 node_count = 1, prim_count = 0, leaves = 0, deepest = 0, top = 0;
    // The subtree's terms of KdTree::sah_cost: sum of area x weight, and of
    // the weights (inner nodes 1, leaves their reference count).
    double area_weight = 0.0, weight = 0.0;
    if (lane_id() == 0) {
        KdWork w;
        w.set = n >= 64 ? ~0ull : ((1ull << n) - 1);
        for (int k = 0; k < 3; ++k) {
            w.lo[k] = root.lo[k];
            w.hi[k] = root.hi[k];
        }
        w.depth = root.depth;
        w.local = 0;
        s.stack[0] = w;
    }
    top = 1;
    __syncwarp();
    while (top > 0) {
        const KdWork w = s.stack[top - 1];
        --top;
        __syncwarp();
        KdBest best;
        if (kd_best_split(s, n, w, traversal_cost, intersection_cost, max_depth, best)) {
            const u32 pair = node_count;
            node_count += 2;
            area_weight = __dadd_rn(area_weight, kd_area_f64(w.lo, w.hi));
            weight = __dadd_rn(weight, 1.0);
            const float plane = kd_representative(s, n, best.axis, best.plane);
            if (lane_id() == 0) {
                if (write) nodes[KD_GLOBAL(w.local)] = kd_inner(best.axis, plane, KD_GLOBAL(pair));
                KdWork right = w, left = w;
                right.set = w.set & s.right[best.axis][best.face];
                left.set = w.set & s.left[best.axis][best.face];
                if (best.axis == 0) { left.hi[0] = plane; right.lo[0] = plane; }
                else if (best.axis == 1) { left.hi[1] = plane; right.lo[1] = plane; }
                else { left.hi[2] = plane; right.lo[2] = plane; }
                right.depth = left.depth = w.depth + 1;
                right.local = pair + 1;
                left.local = pair;
                s.stack[top] = right;
                s.stack[top + 1] = left;
            }
            top += 2;
            __syncwarp();
            continue;
        }
        // A leaf of the set's references, in the order of their bits.
        const u32 count = __popcll(w.set);
        if (write) {
            for (u32 j = lane_id(); j < n; j += 32) {
                if ((w.set >> j) & 1ull) {
                    const u32 rank = __popcll(w.set & ((1ull << j) - 1));
                    leaf_prims[prim_base + prim_count + rank] = s.prim[j];
                }
            }
            const Aabb b = kd_set_bounds(s, w.set, tris);
            if (lane_id() == 0) {
                nodes[KD_GLOBAL(w.local)] = kd_leaf(prim_base + prim_count, count);
                ref_bounds[KD_GLOBAL(w.local)] = b;
            }
        }
        prim_count += count;
        area_weight = __dadd_rn(area_weight, __dmul_rn(kd_area_f64(w.lo, w.hi), (double)count));
        weight = __dadd_rn(weight, (double)count);
        ++leaves;
        deepest = max(deepest, w.depth);
    }
    if (!write) {
        if (lane_id() == 0) {
            stats[4 * r] = node_count;
            stats[4 * r + 1] = prim_count;
            stats[4 * r + 2] = leaves;
            stats[4 * r + 3] = deepest;
            costs[2 * r] = __double_as_longlong(area_weight);
            costs[2 * r + 1] = __double_as_longlong(weight);
        }
        return;
    }
    // Culling boxes bottom up: children follow their parent locally.
    __syncwarp();
    __threadfence_block();
    if (lane_id() == 0) {
        for (u32 k = node_count; k-- > 0;) {
            const u32 g = KD_GLOBAL(k);
            const uint2 node = nodes[g];
            if ((node.y & 3u) != KD_LEAF) {
                const u32 left = node.y >> 2;
                ref_bounds[g] = kd_union(ref_bounds[left], ref_bounds[left + 1]);
            }
        }
        root_bounds[r] = ref_bounds[root.slot];
    }
#undef KD_GLOBAL
}
