// sweep_sah.cu: the small-node stage of the GPU SAH builders, the full SAH
// sweep over sorted split points (the small-node stage of Zeidan 2011, §4.5,
// after Lauterbach et al. 2009; the sweep of MacDonald and Booth 1990), by
// one warp per small root of at most 64 primitives, driven by
// sweep_sah_cuda.rs.
//
// The warp sorts its primitives once per axis (ranks of the CPU's sort keys,
// local positions breaking ties), then builds the subtree breadth first:
// every node of a depth at once, as segments of the three orders. Each
// (node, axis) pair is swept by one lane with the CPU's sequential float
// operations (sorted_sweep.rs: suffix costs, then the prefix pass and its
// tie rule), so the planes are the CPU's; a split keeps all three orders
// sorted by a stable partition of the two other axes (ballots over the 64
// positions). The subtree's nodes go to the root's slot and to 2 (count - 1)
// reserved slots per root, 2 * start on; sah_relocate packs them later.
#include "binned_sah.cuh"

#define SMALL_MAX 64u
#define SMALL_WARPS 4u

struct SmallWarp {
    float lo[3][SMALL_MAX];
    float hi[3][SMALL_MAX];
    u32 ids[SMALL_MAX];
    u32 keys[SMALL_MAX];
    float suffix[3][SMALL_MAX];
    float cost[3][SMALL_MAX];
    u8 cut[3][SMALL_MAX];
    u8 order[3][SMALL_MAX];
    u8 scratch[SMALL_MAX];
    u8 side[SMALL_MAX];
    u8 owner[SMALL_MAX];
    // Segments (nodes) of the current and the next depth.
    u8 seg_start[2][SMALL_MAX];
    u8 seg_count[2][SMALL_MAX];
    u32 seg_node[2][SMALL_MAX];
    float seg_box[2][SMALL_MAX][6];
    // Per segment: 0 leaf, 1 + axis for a split; left count.
    u8 split_axis[SMALL_MAX];
    u8 split_left[SMALL_MAX];
};

__device__ __forceinline__ float small_half_area(const SmallWarp& w, u32 local) {
    const float lo[3] = {w.lo[0][local], w.lo[1][local], w.lo[2][local]};
    const float hi[3] = {w.hi[0][local], w.hi[1][local], w.hi[2][local]};
    return box_half_area(lo, hi);
}

// The sweep of sorted_sweep::sweep_axes for one axis of one segment:
// (cost, left count) of the best cut, left count 0 when no cost is finite.
__device__ void sweep_axis(SmallWarp& w, u32 axis, u32 start, u32 n, float& best, u32& best_k) {
    const u8* order = w.order[axis] + start;
    float* suffix = w.suffix[axis] + start;
    float lx = CAUSTIC_INF, ly = CAUSTIC_INF, lz = CAUSTIC_INF;
    float hx = -CAUSTIC_INF, hy = -CAUSTIC_INF, hz = -CAUSTIC_INF;
    float count = 0.0f;
    for (u32 k = n - 1u; k >= 1u; --k) {
        const u32 id = order[k];
        lx = fminf(lx, w.lo[0][id]), ly = fminf(ly, w.lo[1][id]), lz = fminf(lz, w.lo[2][id]);
        hx = fmaxf(hx, w.hi[0][id]), hy = fmaxf(hy, w.hi[1][id]), hz = fmaxf(hz, w.hi[2][id]);
        count = __fadd_rn(count, 1.0f);
        suffix[k] = __fmul_rn(sweep_half_area(lx, ly, lz, hx, hy, hz), count);
    }
    best = 3.40282347e38f; // f32::MAX: infinite costs never win
    best_k = 0u;
    lx = ly = lz = CAUSTIC_INF;
    hx = hy = hz = -CAUSTIC_INF;
    count = 0.0f;
    for (u32 k = 1; k < n; ++k) {
        const u32 id = order[k - 1u];
        lx = fminf(lx, w.lo[0][id]), ly = fminf(ly, w.lo[1][id]), lz = fminf(lz, w.lo[2][id]);
        hx = fmaxf(hx, w.hi[0][id]), hy = fmaxf(hy, w.hi[1][id]), hz = fmaxf(hz, w.hi[2][id]);
        count = __fadd_rn(count, 1.0f);
        const float cost = __fadd_rn(__fmul_rn(sweep_half_area(lx, ly, lz, hx, hy, hz), count), suffix[k]);
        // Among equal costs the cut nearest the middle from the left wins.
        const bool better = 2u * k <= n ? cost <= best : cost < best;
        if (better) best = cost, best_k = k;
    }
}

// SortedSweep::decide for segment s (count n >= 1) at `depth`: sets
// split_axis[s] (0: leaf) and split_left[s].
__device__ void small_decide(SmallWarp& w, const SahParams& p, u32 cur, u32 s, u32 depth) {
    const u32 start = w.seg_start[cur][s], n = w.seg_count[cur][s];
    const float* box = w.seg_box[cur][s];
    w.split_axis[s] = 0u;
    w.split_left[s] = 0u;
    if (n <= p.min_leaf) return;
    const bool must_split = n > p.max_leaf;
    const float half_area = box_half_area(box, box + 3);
    if (n == 2u) {
        const float weighted = __fadd_rn(small_half_area(w, w.order[0][start]),
                                         small_half_area(w, w.order[0][start + 1u]));
        if (must_split || !leaf_is_cheaper(p, 2u, half_area, weighted)) w.split_axis[s] = 1u, w.split_left[s] = 1u;
        return;
    }
    if (sah_allowed(n, depth)) {
        int axis = -1;
        float best = 0.0f;
        for (u32 a = 0; a < 3; ++a) {
            if (w.cut[a][s] == 0u) continue;
            if (axis < 0 || w.cost[a][s] < best) axis = (int)a, best = w.cost[a][s];
        }
        if (axis >= 0) {
            if (must_split || !leaf_is_cheaper(p, n, half_area, best))
                w.split_axis[s] = (u8)(1 + axis), w.split_left[s] = w.cut[axis][s];
            return;
        }
    }
    if (must_split) w.split_axis[s] = (u8)(1u + largest_axis(box, box + 3)), w.split_left[s] = (u8)(n / 2u);
}

// Union of the boxes of order[axis][from .. to).
__device__ void small_union(const SmallWarp& w, u32 axis, u32 from, u32 to, float* out) {
    out[0] = out[1] = out[2] = CAUSTIC_INF;
    out[3] = out[4] = out[5] = -CAUSTIC_INF;
    for (u32 i = from; i < to; ++i) {
        const u32 id = w.order[axis][i];
        for (u32 k = 0; k < 3; ++k) out[k] = fminf(out[k], w.lo[k][id]), out[3 + k] = fmaxf(out[3 + k], w.hi[k][id]);
    }
}

__device__ __forceinline__ u64 ballot64(bool low, bool high) {
    return (u64)__ballot_sync(CAUSTIC_FULL_MASK, low) | ((u64)__ballot_sync(CAUSTIC_FULL_MASK, high) << 32);
}

// Bits from .. to - 1 of a 64-bit mask.
__device__ __forceinline__ u64 bit_range(u32 from, u32 to) {
    const u64 below_to = to >= 64u ? ~0ull : (1ull << to) - 1ull;
    return below_to & ~((1ull << from) - 1ull);
}

// One warp per small root: builds its subtree (see the header).
// nodes: the level part (the root's slot); reserved: 2 * start + k for the
// k-th node below the root (children pairs in breadth-first order, inner
// nodes' first relative to 2 * start); used[i], depth[i]: nodes below the
// root and the deepest leaf's depth.
extern "C" __global__ void __launch_bounds__(SMALL_WARPS * 32)
sah_small_subtrees(const SahSmallRoot* roots, u32 count, const SahParams* params, const PrimRef* refs0,
                   const PrimRef* refs1, u32* slot_ids, BvhNode* nodes, BvhNode* reserved, u32* used,
                   u32* depth_out) {
    __shared__ SmallWarp warps[SMALL_WARPS];
    const u32 r = blockIdx.x * SMALL_WARPS + warp_id();
    if (r >= count) return;
    SmallWarp& w = warps[warp_id()];
    const SahSmallRoot root = roots[r];
    const SahParams& p = *params;
    const PrimRef* refs = root.parity ? refs1 : refs0;
    const u32 lane = lane_id(), n = root.count;
    BvhNode* below = reserved + 2ull * root.start;

    for (u32 i = lane; i < n; i += 32u) {
        float4 lo, hi;
        load_ref(refs, root.start + i, lo, hi);
        for (u32 k = 0; k < 3; ++k) w.lo[k][i] = lane3(lo, k), w.hi[k][i] = lane3(hi, k);
        w.ids[i] = __float_as_uint(lo.w);
    }
    __syncwarp();
    // Sort each axis: a primitive's rank among the keys (coordinate, position).
    for (u32 a = 0; a < 3; ++a) {
        for (u32 i = lane; i < n; i += 32u) w.keys[i] = coordinate_key(__fadd_rn(w.lo[a][i], w.hi[a][i]));
        __syncwarp();
        for (u32 i = lane; i < n; i += 32u) {
            const u32 key = w.keys[i];
            u32 rank = 0u;
            for (u32 q = 0; q < n; ++q) {
                const u32 other = w.keys[q];
                rank += (other < key || (other == key && q < i)) ? 1u : 0u;
            }
            w.order[a][rank] = (u8)i;
        }
        __syncwarp();
    }
    if (lane == 0) {
        w.seg_start[0][0] = 0u;
        w.seg_count[0][0] = (u8)n;
        w.seg_node[0][0] = 0xffffffffu; // the root's own slot
        w.seg_box[0][0][0] = root.lo[0], w.seg_box[0][0][1] = root.lo[1], w.seg_box[0][0][2] = root.lo[2];
        w.seg_box[0][0][3] = root.hi[0], w.seg_box[0][0][4] = root.hi[1], w.seg_box[0][0][5] = root.hi[2];
    }
    __syncwarp();

    u32 segments = 1u, cur = 0u, allocated = 0u, depth = root.depth, deepest = root.depth;
    while (segments > 0u) {
        deepest = depth;
        // Positions of finished leaves belong to no segment of this depth.
        for (u32 i = lane; i < n; i += 32u) w.owner[i] = 0xffu;
        // Sweep every (segment, axis) that may split by SAH.
        for (u32 q = lane; q < 3u * segments; q += 32u) {
            const u32 s = q / 3u, a = q % 3u, c = w.seg_count[cur][s];
            w.cut[a][s] = 0u;
            if (c > 2u && c > p.min_leaf && sah_allowed(c, depth)) {
                float cost;
                u32 k;
                sweep_axis(w, a, w.seg_start[cur][s], c, cost, k);
                w.cost[a][s] = cost;
                w.cut[a][s] = (u8)k;
            }
        }
        __syncwarp();
        for (u32 s = lane; s < segments; s += 32u) small_decide(w, p, cur, s, depth);
        __syncwarp();
        // Children pairs in segment order; every segment writes its node.
        u32 splits_before = 0u;
        for (u32 s0 = 0; s0 < segments; s0 += 32u) {
            const u32 s = s0 + lane;
            const bool split = s < segments && w.split_axis[s] != 0u;
            const u32 mask = __ballot_sync(CAUSTIC_FULL_MASK, split);
            if (s < segments) {
                const u32 start = w.seg_start[cur][s], c = w.seg_count[cur][s];
                const float* box = w.seg_box[cur][s];
                const u32 pair = allocated + 2u * (splits_before + __popc(mask & lanemask_lt()));
                const BvhNode node = split ? make_node(box, box + 3, pair, 0u)
                                           : make_node(box, box + 3, root.start + start, c);
                const u32 at = w.seg_node[cur][s];
                if (at == 0xffffffffu) nodes[root.slot] = node; else below[at] = node;
                for (u32 p2 = start; p2 < start + c; ++p2) w.owner[p2] = (u8)s;
                if (split) {
                    const u32 axis = w.split_axis[s] - 1u, k = w.split_left[s];
                    const u32 next = 2u * (splits_before + __popc(mask & lanemask_lt()));
                    for (u32 side = 0; side < 2; ++side) {
                        const u32 from = side == 0 ? start : start + k, to = side == 0 ? start + k : start + c;
                        w.seg_start[cur ^ 1u][next + side] = (u8)from;
                        w.seg_count[cur ^ 1u][next + side] = (u8)(to - from);
                        w.seg_node[cur ^ 1u][next + side] = pair + side;
                        small_union(w, axis, from, to, w.seg_box[cur ^ 1u][next + side]);
                        for (u32 i = from; i < to; ++i) w.side[w.order[axis][i]] = side == 0 ? 1u : 0u;
                    }
                }
            }
            splits_before += __popc(mask);
        }
        allocated += 2u * splits_before;
        __syncwarp();
        // Stable partition of the orders other than each split's axis.
        for (u32 a = 0; a < 3; ++a) {
            bool moves[2] = {false, false}, left[2] = {false, false};
            for (u32 h = 0; h < 2; ++h) {
                const u32 pos = lane + 32u * h;
                if (pos < n && w.owner[pos] != 0xffu) {
                    const u32 s = w.owner[pos];
                    moves[h] = w.split_axis[s] != 0u && w.split_axis[s] - 1u != a;
                    left[h] = w.side[w.order[a][pos]] != 0u;
                }
            }
            const u64 lefts = ballot64(moves[0] && left[0], moves[1] && left[1]);
            for (u32 h = 0; h < 2; ++h) {
                const u32 pos = lane + 32u * h;
                if (!moves[h]) continue;
                const u32 s = w.owner[pos], start = w.seg_start[cur][s], k = w.split_left[s];
                const u32 rank = __popcll(lefts & bit_range(start, pos));
                const u32 to = left[h] ? start + rank : start + k + (pos - start - rank);
                w.scratch[to] = w.order[a][pos];
            }
            __syncwarp();
            for (u32 h = 0; h < 2; ++h)
                if (moves[h]) w.order[a][lane + 32u * h] = w.scratch[lane + 32u * h];
            __syncwarp();
        }
        segments = 2u * splits_before;
        cur ^= 1u;
        ++depth;
    }
    // Leaf order: the x order after all partitions.
    for (u32 i = lane; i < n; i += 32u) slot_ids[root.start + i] = w.ids[w.order[0][i]];
    if (lane == 0) used[r] = allocated, depth_out[r] = deepest;
}
