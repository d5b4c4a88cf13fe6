// taskpool.cu: `bvh-taskpool`, the SAH BVH built on the task pool of
// persistent warps (Vinkler, Bittner, Havran and Hapala, CGF 2013, §4;
// runtime: caustic-gpu's task_pool.cuh; host: taskpool_cuda.rs).
//
// One task per node of at least 32 references, over a range of a
// double-buffered reference array (the task records which buffer holds it):
//
// - SplitPlane (⌈n/32⌉ chunks): 32 candidate planes through the node's
//   split-point box (box centres doubled, as every SAH builder here keeps
//   them), 11 on x, 11 on y, 10 on z, at i/(m+1) of the extent, each
//   rounded once per operation (tp_plane) as the CPU twin places them
//   (taskpool.rs, split.rs: BinMapping::task_pool), which then prices the
//   same candidates. Lane j owns candidate j: over its warp's chunks
//   (staged in shared memory) it counts the references whose split point
//   lies below the plane and bounds both sides, then merges into the slot's
//   candidate bins in global memory with atomicAdd and atomicMin/Max on
//   order-preserving integers (§4.2). The last finisher prices the 32
//   candidates with the SAH, keeps the cheapest (ties: the lower lane, i.e.
//   the first axis, then the leftmost plane, as the twin) and clears the
//   bins for the slot's next task.
//   No candidate separating anything (coincident split points), or a depth
//   that a further unbalanced split could push past the traversal's bound:
//   the node is halved by position instead (median mode), so SplitPlane is
//   skipped.
// - Partition (⌈n/32⌉ chunks, §4.3): each warp classifies 32 references,
//   counts each side by ballot and popcount, moves the range's front and
//   back cursors with one atomic each, places its lanes by a warp prefix and
//   writes them to the other buffer; it also bounds both sides' boxes and
//   split-point boxes (merged with atomics), so the children's boxes are
//   exact unions. The last finisher writes the node, takes a pair of node
//   slots from a counter and makes the children: one of at least 32
//   references is stored as a new task, another reuses the parent's slot;
//   a child of fewer than 32 references is built at once by this warp
//   (FullSAH, §4.1): the full SAH sweep in registers and shuffles, ranks per
//   axis, boxes by warp scans, with leaves of at most `max_leaf` references
//   by SAH termination (c_t, c_i), with the twin's leaf test, tie rule and
//   fallback (sorted_sweep.rs: SahRules::leaf_is_cheaper, sweep_axes,
//   median_split).
//
// The output is the shared Bvh2 layout (children pairs adjacent, prim slots
// = positions in the reference range), ready for the binary tracer.
#include "binned_sah.cuh"
#include "task_pool.cuh"

#define TP_BVH_THREADS 128u
#define TP_BVH_WARPS (TP_BVH_THREADS / 32u)
// Candidate bins: counts left and right, left box, right box (order ints).
#define TP_BIN_WORDS 14u
#define TP_SLOT_BIN_WORDS (32u * TP_BIN_WORDS)
// The depth past which nodes are halved by position: the subtree below then
// has ceil(log2 n) levels, which keeps every leaf within MAX_DEPTH (64).
#define TP_DEPTH_BUDGET 58u

#define TP_SPLIT 0u
#define TP_PARTITION 1u

// Payload words.
#define TP_LO 0u
#define TP_HI 3u
#define TP_CLO 6u
#define TP_CHI 9u
#define TP_NODE 12u
#define TP_DEPTH 13u
#define TP_PARITY 14u
#define TP_AXIS 15u
#define TP_PLANE 16u
#define TP_MEDIAN 17u
#define TP_LEFT 18u
#define TP_RIGHT 19u
#define TP_SIDES 20u  // 24 order ints: left box, right box, left and right split-point boxes

// build[] words.
#define TP_NODE_COUNT 0u
#define TP_MAX_DEPTH 1u

__device__ __forceinline__ int tp_empty_word(u32 k) {
    // Word k of a box of six order ints (lo xyz, hi xyz): lo starts at +inf,
    // hi at -inf.
    return (k % 6u) < 3u ? float_order(CAUSTIC_INF) : float_order(-CAUSTIC_INF);
}

__device__ __forceinline__ u32 tp_ceil_log2(u32 n) { return n <= 1u ? 0u : 32u - (u32)__clz(n - 1u); }

// A reference written by other warps during the run: through L2.
__device__ __forceinline__ void tp_load_ref(const PrimRef* refs, u32 i, float4& lo, float4& hi) {
    const float4* words = (const float4*)(refs + i);
    lo = __ldcg(words);
    hi = __ldcg(words + 1);
}

// The candidate plane of lane j: 11 on x, 11 on y, 10 on z, plane i of m
// at lo + (hi - lo) * ((i + 1) / (m + 1)) of the record's split-point box,
// one rounding per operation (no contraction), as split.rs's
// BinMapping::task_pool computes the CPU twin's.
__device__ __forceinline__ float tp_plane(const TaskRecord& r, u32 j, u32& axis) {
    const u32 m = j < 22u ? 11u : 10u;
    const u32 i = j < 11u ? j : (j < 22u ? j - 11u : j - 22u);
    axis = j < 11u ? 0u : (j < 22u ? 1u : 2u);
    const float t = __fdiv_rn((float)(i + 1u), (float)(m + 1u));
    const float lo_c = task_pool_load((const float*)&r.payload[TP_CLO + axis]);
    const float hi_c = task_pool_load((const float*)&r.payload[TP_CHI + axis]);
    return __fadd_rn(lo_c, __fmul_rn(__fsub_rn(hi_c, lo_c), t));
}

struct TaskPoolBvh {
    const SahTask* root;
    PrimRef* refs[2];
    int* bins;
    BvhNode* nodes;
    u32* prim_indices;
    u32* build;
    u32 max_leaf;
    float traversal_cost;
    float intersection_cost;

    // Per-warp shared memory: a staged chunk (SplitPlane), the small
    // builder's items, orders and stack.
    struct Shared {
        float lo[32][3];
        float hi[32][3];
        u32 id[32];
        float tmp_lo[32][3];
        float tmp_hi[32][3];
        u32 tmp_id[32];
        u32 order[3][32];
        u32 stack[32][4];
    };
    Shared* shared;

    // ------------------------------------------------------- node tasks

    // Lane 0: the payload of a node task over begin .. end (buffer parity)
    // with its box and split-point box; returns its first step's chunks.
    __device__ u32 write_node_task(TaskRecord& r, u32 begin, u32 end, const float* box, const float* centres,
                                   u32 node, u32 depth, u32 parity) const {
        const u32 count = end - begin;
        r.begin = begin, r.end = end, r.step = 0u;
        float* p = (float*)r.payload;
        bool point = true;
        for (u32 k = 0; k < 3; ++k) {
            p[TP_LO + k] = box[k], p[TP_HI + k] = box[3 + k];
            p[TP_CLO + k] = centres[k], p[TP_CHI + k] = centres[3 + k];
            point = point && centres[k] >= centres[3 + k];
        }
        r.payload[TP_NODE] = node, r.payload[TP_DEPTH] = depth, r.payload[TP_PARITY] = parity;
        const bool median = point || depth + tp_ceil_log2(count) >= TP_DEPTH_BUDGET;
        r.payload[TP_MEDIAN] = median ? 1u : 0u;
        if (median) {
            start_partition(r);
            r.phase = TP_PARTITION;
        } else {
            r.phase = TP_SPLIT;
        }
        return (count + 31u) / 32u;
    }

    // Lane 0: cursors at the range's ends, empty side boxes.
    __device__ static void start_partition(TaskRecord& r) {
        r.payload[TP_LEFT] = r.begin;
        r.payload[TP_RIGHT] = r.end;
        int* sides = (int*)(r.payload + TP_SIDES);
        for (u32 k = 0; k < 24; ++k) sides[k] = tp_empty_word(k);
    }

    __device__ void seed(TaskPool& pool) {
        const SahTask t = *root;
        float box[6], centres[6];
        for (u32 k = 0; k < 3; ++k)
            box[k] = t.lo[k], box[3 + k] = t.hi[k], centres[k] = t.clo[k], centres[3 + k] = t.chi[k];
        if (t.count < 32u) {
            if (lane_id() == 0) nodes[t.slot] = make_node(box, box + 3, 0u, 0u);
            __syncwarp();
            small_build(0u, 0u, t.count, t.slot, t.depth);
            return;
        }
        const u32 slot = task_pool_store_begin(pool);
        if (slot == TASK_POOL_NONE) return;
        u32 chunks = 0;
        if (lane_id() == 0) chunks = write_node_task(pool.records[slot], 0u, t.count, box, centres, t.slot, t.depth, 0u);
        chunks = __shfl_sync(CAUSTIC_FULL_MASK, chunks, 0);
        task_pool_store_end(pool, slot, chunks, 0u, TASK_POOL_NONE, TASK_POOL_NONE);
    }

    __device__ void process(TaskPool& pool, u32 slot, u32 first, u32 count) {
        TaskRecord& r = pool.records[slot];
        if (task_pool_load(&r.phase) == TP_SPLIT)
            split_chunks(r, slot, first, count);
        else
            partition_chunks(r, first, count);
    }

    __device__ u32 next_step(TaskPool& pool, u32 slot) {
        TaskRecord& r = pool.records[slot];
        if (task_pool_load(&r.phase) == TP_SPLIT) {
            choose_plane(r, slot);
            return (task_pool_load(&r.end) - task_pool_load(&r.begin) + 31u) / 32u;
        }
        return make_children(pool, r);
    }

    // ------------------------------------------------------- SplitPlane

    __device__ void split_chunks(TaskRecord& r, u32 slot, u32 first, u32 count) {
        const u32 begin = task_pool_load(&r.begin), end = task_pool_load(&r.end);
        const PrimRef* src = refs[task_pool_load(&r.payload[TP_PARITY])];
        u32 axis;
        const float plane = tp_plane(r, lane_id(), axis);
        u32 n_left = 0, n_right = 0;
        float left[6], right[6];
        for (u32 k = 0; k < 3; ++k) left[k] = right[k] = CAUSTIC_INF, left[3 + k] = right[3 + k] = -CAUSTIC_INF;
        for (u32 c = first; c < first + count; ++c) {
            const u32 base = begin + 32u * c;
            const u32 items = min(32u, end - base);
            if (lane_id() < items) {
                float4 lo, hi;
                tp_load_ref(src, base + lane_id(), lo, hi);
                shared->lo[lane_id()][0] = lo.x, shared->lo[lane_id()][1] = lo.y, shared->lo[lane_id()][2] = lo.z;
                shared->hi[lane_id()][0] = hi.x, shared->hi[lane_id()][1] = hi.y, shared->hi[lane_id()][2] = hi.z;
            }
            __syncwarp();
            for (u32 s = 0; s < items; ++s) {
                const float* l = shared->lo[s];
                const float* h = shared->hi[s];
                const bool goes_left = __fadd_rn(l[axis], h[axis]) < plane;
                float* side = goes_left ? left : right;
                for (u32 k = 0; k < 3; ++k) side[k] = fminf(side[k], l[k]), side[3 + k] = fmaxf(side[3 + k], h[k]);
                n_left += goes_left ? 1u : 0u;
                n_right += goes_left ? 0u : 1u;
            }
            __syncwarp();
        }
        int* bin = bins + (u64)slot * TP_SLOT_BIN_WORDS + lane_id() * TP_BIN_WORDS;
        if (n_left > 0u) {
            atomicAdd(bin, (int)n_left);
            for (u32 k = 0; k < 3; ++k)
                atomicMin(bin + 2 + k, float_order(left[k])), atomicMax(bin + 5 + k, float_order(left[3 + k]));
        }
        if (n_right > 0u) {
            atomicAdd(bin + 1, (int)n_right);
            for (u32 k = 0; k < 3; ++k)
                atomicMin(bin + 8 + k, float_order(right[k])), atomicMax(bin + 11 + k, float_order(right[3 + k]));
        }
    }

    // The last finisher of SplitPlane: the cheapest candidate, or median
    // mode; the bins cleared for the slot's next task.
    __device__ void choose_plane(TaskRecord& r, u32 slot) const {
        int* bin = bins + (u64)slot * TP_SLOT_BIN_WORDS + lane_id() * TP_BIN_WORDS;
        int w[TP_BIN_WORDS];
        for (u32 k = 0; k < TP_BIN_WORDS; ++k) w[k] = task_pool_load(bin + k);
        for (u32 k = 0; k < 2; ++k) bin[k] = 0;
        for (u32 k = 0; k < 12; ++k) bin[2 + k] = tp_empty_word(k);
        float cost = CAUSTIC_INF;
        if (w[0] > 0 && w[1] > 0) {
            float l[6], h[6];
            for (u32 k = 0; k < 6; ++k) l[k] = order_float(w[2 + k]), h[k] = order_float(w[8 + k]);
            cost = __fadd_rn(__fmul_rn((float)w[0], box_half_area(l, l + 3)),
                             __fmul_rn((float)w[1], box_half_area(h, h + 3)));
            // Overflowing areas (inf * 0 = NaN among them) never win, as in
            // the twin's sweep; a NaN would also break the warp's minimum.
            if (!(cost < CAUSTIC_INF)) cost = CAUSTIC_INF;
        }
        u32 best = lane_id();
        float best_cost = cost;
        for (u32 d = 16; d > 0; d >>= 1) {
            const float other_cost = __shfl_xor_sync(CAUSTIC_FULL_MASK, best_cost, d);
            const u32 other = __shfl_xor_sync(CAUSTIC_FULL_MASK, best, d);
            if (other_cost < best_cost || (other_cost == best_cost && other < best)) best_cost = other_cost, best = other;
        }
        if (lane_id() == 0) {
            if (best_cost < CAUSTIC_INF) {
                u32 axis;
                const float plane = tp_plane(r, best, axis);
                r.payload[TP_AXIS] = axis;
                ((float*)r.payload)[TP_PLANE] = plane;
                r.payload[TP_MEDIAN] = 0u;
            } else {
                r.payload[TP_MEDIAN] = 1u;
            }
            start_partition(r);
            r.phase = TP_PARTITION;
        }
        __syncwarp();
    }

    // -------------------------------------------------------- Partition

    __device__ void partition_chunks(TaskRecord& r, u32 first, u32 count) {
        const u32 begin = task_pool_load(&r.begin), end = task_pool_load(&r.end);
        const u32 parity = task_pool_load(&r.payload[TP_PARITY]);
        const PrimRef* src = refs[parity];
        PrimRef* dst = refs[parity ^ 1u];
        const bool median = task_pool_load(&r.payload[TP_MEDIAN]) != 0u;
        const u32 axis = task_pool_load(&r.payload[TP_AXIS]);
        const float plane = task_pool_load((const float*)&r.payload[TP_PLANE]);
        const u32 middle = begin + (end - begin) / 2u;
        // Left box, right box, left split points, right split points.
        float v[24];
        for (u32 k = 0; k < 24; ++k) v[k] = (k % 6u) < 3u ? CAUSTIC_INF : -CAUSTIC_INF;
        u32 sides_seen = 0;
        for (u32 c = first; c < first + count; ++c) {
            const u32 i = begin + 32u * c + lane_id();
            const bool valid = i < end;
            float4 lo = make_float4(0.f, 0.f, 0.f, 0.f), hi = lo;
            if (valid) tp_load_ref(src, i, lo, hi);
            const float cx = __fadd_rn(lo.x, hi.x), cy = __fadd_rn(lo.y, hi.y), cz = __fadd_rn(lo.z, hi.z);
            const float key = axis == 0u ? cx : (axis == 1u ? cy : cz);
            const bool goes_left = median ? i < middle : key < plane;
            const u32 lefts = __ballot_sync(CAUSTIC_FULL_MASK, valid && goes_left);
            const u32 rights = __ballot_sync(CAUSTIC_FULL_MASK, valid && !goes_left);
            u32 front = 0, back = 0;
            if (lane_id() == 0) {
                if (lefts) front = atomicAdd(&r.payload[TP_LEFT], (u32)__popc(lefts));
                if (rights) back = atomicSub(&r.payload[TP_RIGHT], (u32)__popc(rights));
            }
            front = __shfl_sync(CAUSTIC_FULL_MASK, front, 0);
            back = __shfl_sync(CAUSTIC_FULL_MASK, back, 0);
            sides_seen |= (lefts ? 1u : 0u) | (rights ? 2u : 0u);
            if (!valid) continue;
            const u32 at = goes_left ? front + (u32)__popc(lefts & lanemask_lt())
                                     : back - 1u - (u32)__popc(rights & lanemask_lt());
            store_ref(dst, at, lo, hi);
            const u32 o = goes_left ? 0u : 6u;
            const float l[3] = {lo.x, lo.y, lo.z}, h[3] = {hi.x, hi.y, hi.z}, m[3] = {cx, cy, cz};
            for (u32 k = 0; k < 3; ++k) {
                v[o + k] = fminf(v[o + k], l[k]), v[o + 3 + k] = fmaxf(v[o + 3 + k], h[k]);
                v[12 + o + k] = fminf(v[12 + o + k], m[k]), v[12 + o + 3 + k] = fmaxf(v[12 + o + 3 + k], m[k]);
            }
        }
        for (u32 k = 0; k < 24; ++k)
            for (u32 d = 16; d > 0; d >>= 1) {
                const float other = __shfl_xor_sync(CAUSTIC_FULL_MASK, v[k], d);
                v[k] = (k % 6u) < 3u ? fminf(v[k], other) : fmaxf(v[k], other);
            }
        // Lane k merges word k (its value picked from the register array by
        // a uniform loop, so the array stays in registers).
        float mine = 0.0f;
        for (u32 k = 0; k < 24; ++k)
            if (lane_id() == k) mine = v[k];
        const u32 lane = lane_id();
        const bool right_side = (lane % 12u) >= 6u;
        if (lane < 24u && (sides_seen & (right_side ? 2u : 1u))) {
            int* sides = (int*)(r.payload + TP_SIDES);
            if ((lane % 6u) < 3u)
                atomicMin(sides + lane, float_order(mine));
            else
                atomicMax(sides + lane, float_order(mine));
        }
    }

    // The last finisher of Partition: the node, then its children.
    __device__ u32 make_children(TaskPool& pool, TaskRecord& r) {
        const u32 begin = task_pool_load(&r.begin), end = task_pool_load(&r.end);
        const u32 front = task_pool_load(&r.payload[TP_LEFT]), back = task_pool_load(&r.payload[TP_RIGHT]);
        const u32 node = task_pool_load(&r.payload[TP_NODE]), depth = task_pool_load(&r.payload[TP_DEPTH]);
        const u32 parity = task_pool_load(&r.payload[TP_PARITY]) ^ 1u;
        if (front != back || front == begin || front == end) {
            task_pool_fail(pool, TASK_POOL_ERR_APP, node);
            return TASK_POOL_DONE;
        }
        float box[6], sides[24];
        for (u32 k = 0; k < 6; ++k) box[k] = task_pool_load((const float*)&r.payload[TP_LO + k]);
        for (u32 k = 0; k < 24; ++k) sides[k] = order_float(task_pool_load((const int*)&r.payload[TP_SIDES + k]));
        u32 pair = 0;
        if (lane_id() == 0) {
            pair = atomicAdd(build + TP_NODE_COUNT, 2u);
            nodes[node] = make_node(box, box + 3, pair, 0u);
            atomicMax(build + TP_MAX_DEPTH, depth + 1u);
        }
        pair = __shfl_sync(CAUSTIC_FULL_MASK, pair, 0);
        const u32 lo_range[2] = {begin, front}, hi_range[2] = {front, end};
        // Children of 32 or more become tasks: the second one a new task,
        // the first one this slot; smaller ones are built here.
        const bool big[2] = {front - begin >= 32u, end - front >= 32u};
        if (big[0] && big[1]) {
            const u32 slot = task_pool_store_begin(pool);
            if (slot == TASK_POOL_NONE) return TASK_POOL_DONE;
            u32 chunks = 0;
            if (lane_id() == 0)
                chunks = write_node_task(pool.records[slot], front, end, sides + 6, sides + 18, pair + 1u,
                                         depth + 1u, parity);
            chunks = __shfl_sync(CAUSTIC_FULL_MASK, chunks, 0);
            task_pool_store_end(pool, slot, chunks, 0u, TASK_POOL_NONE, TASK_POOL_NONE);
        }
        for (u32 c = 0; c < 2; ++c) {
            if (big[c]) continue;
            if (lane_id() == 0) nodes[pair + c] = make_node(sides + 6 * c, sides + 6 * c + 3, 0u, 0u);
            __syncwarp();
            small_build(parity, lo_range[c], hi_range[c] - lo_range[c], pair + c, depth + 1u);
        }
        const u32 reuse = big[0] ? 0u : (big[1] ? 1u : 2u);
        if (reuse == 2u) return TASK_POOL_DONE;
        u32 chunks = 0;
        if (lane_id() == 0)
            chunks = write_node_task(r, lo_range[reuse], hi_range[reuse], sides + 6 * reuse, sides + 12 + 6 * reuse,
                                     pair + reuse, depth + 1u, parity);
        chunks = __shfl_sync(CAUSTIC_FULL_MASK, chunks, 0);
        __syncwarp();
        return chunks;
    }

    // ----------------------------------------------------------- FullSAH

    // One warp builds the subtree over refs[parity][begin .. begin + count)
    // (count < 32) under `node`, whose box is already written.
    __device__ void small_build(u32 parity, u32 begin, u32 count, u32 node, u32 depth) {
        const u32 lane = lane_id();
        if (lane < count) {
            float4 lo, hi;
            tp_load_ref(refs[parity], begin + lane, lo, hi);
            shared->lo[lane][0] = lo.x, shared->lo[lane][1] = lo.y, shared->lo[lane][2] = lo.z;
            shared->hi[lane][0] = hi.x, shared->hi[lane][1] = hi.y, shared->hi[lane][2] = hi.z;
            shared->id[lane] = __float_as_uint(lo.w);
        }
        u32 top = 0;
        if (lane == 0) shared->stack[0][0] = 0u, shared->stack[0][1] = count, shared->stack[0][2] = node,
                       shared->stack[0][3] = depth;
        top = 1;
        __syncwarp();
        while (top > 0) {
            --top;
            const u32 s = shared->stack[top][0], n = shared->stack[top][1], at = shared->stack[top][2],
                      d = shared->stack[top][3];
            __syncwarp();
            top = small_node(begin, s, n, at, d, top);
        }
        if (lane < count) prim_indices[begin + lane] = shared->id[lane];
        __syncwarp();
    }

    // One node of the small build: a leaf, or a split whose children go on
    // the stack (returned: the new top).
    __device__ u32 small_node(u32 begin, u32 s, u32 n, u32 at, u32 depth, u32 top) {
        const u32 lane = lane_id();
        if (lane == 0) atomicMax(build + TP_MAX_DEPTH, depth);
        float node_box[6];
        {
            const BvhNode b = nodes[at];
            for (u32 k = 0; k < 3; ++k) node_box[k] = b.min[k], node_box[3 + k] = b.max[k];
        }
        const bool mine = lane < n;
        float lo[3], hi[3];
        for (u32 k = 0; k < 3; ++k) {
            lo[k] = mine ? shared->lo[s + lane][k] : CAUSTIC_INF;
            hi[k] = mine ? shared->hi[s + lane][k] : -CAUSTIC_INF;
        }
        // Ranks per axis by (split point, position): orders in shared memory.
        for (u32 axis = 0; axis < 3; ++axis) {
            const float key = __fadd_rn(lo[axis], hi[axis]);
            u32 rank = 0;
            for (u32 j = 0; j < n; ++j) {
                const float other = __shfl_sync(CAUSTIC_FULL_MASK, key, j);
                rank += (other < key || (other == key && j < lane)) ? 1u : 0u;
            }
            if (mine) shared->order[axis][rank] = lane;
        }
        __syncwarp();
        float best_cost = CAUSTIC_INF;
        u32 best_axis = 0, best_split = 0;
        for (u32 axis = 0; axis < 3; ++axis) {
            const u32 item = mine ? shared->order[axis][lane] : 0u;
            float l[6], rr[6];
            for (u32 k = 0; k < 3; ++k) {
                l[k] = mine ? shared->lo[s + item][k] : CAUSTIC_INF;
                l[3 + k] = mine ? shared->hi[s + item][k] : -CAUSTIC_INF;
                rr[k] = l[k], rr[3 + k] = l[3 + k];
            }
            for (u32 d = 1; d < 32; d <<= 1)
                for (u32 k = 0; k < 6; ++k) {
                    const float up = __shfl_up_sync(CAUSTIC_FULL_MASK, l[k], d);
                    const float down = __shfl_down_sync(CAUSTIC_FULL_MASK, rr[k], d);
                    if (lane >= d) l[k] = k < 3 ? fminf(l[k], up) : fmaxf(l[k], up);
                    if (lane + d < 32u) rr[k] = k < 3 ? fminf(rr[k], down) : fmaxf(rr[k], down);
                }
            // Split after sorted position `lane`: left 0 ..= lane, right lane + 1 ...
            float right[6];
            for (u32 k = 0; k < 6; ++k) right[k] = __shfl_down_sync(CAUSTIC_FULL_MASK, rr[k], 1);
            const u32 k = lane + 1u;  // left count
            float cost = CAUSTIC_INF;
            if (k < n)
                cost = __fadd_rn(__fmul_rn((float)k, box_half_area(l, l + 3)),
                                 __fmul_rn((float)(n - k), box_half_area(right, right + 3)));
            if (!(cost < CAUSTIC_INF)) cost = CAUSTIC_INF;  // overflowing areas never win
            // sorted_sweep::sweep_axes's tie rule: among equal costs the cut
            // nearest the middle from the left wins (the largest k <= n / 2,
            // else the smallest k above): the lowest `rank`.
            u32 rank = 2u * k <= n ? n - k : n + k;
            u32 split = lane;
            for (u32 d = 16; d > 0; d >>= 1) {
                const float other_cost = __shfl_xor_sync(CAUSTIC_FULL_MASK, cost, d);
                const u32 other_rank = __shfl_xor_sync(CAUSTIC_FULL_MASK, rank, d);
                const u32 other = __shfl_xor_sync(CAUSTIC_FULL_MASK, split, d);
                if (other_cost < cost || (other_cost == cost && other_rank < rank))
                    cost = other_cost, rank = other_rank, split = other;
            }
            // finish_split: the first axis wins ties.
            if (cost < best_cost) best_cost = cost, best_axis = axis, best_split = split;
        }
        // SortedSweep::decide: past the depth budget no SAH split; a leaf
        // where the SAH says so (SahRules::leaf_is_cheaper, multiplied
        // through by the node's half area) or where no split is found,
        // within max_leaf; otherwise the split, or without one the median of
        // the node box's largest axis.
        const float area = box_half_area(node_box, node_box + 3);
        const bool found = depth + tp_ceil_log2(n) < TP_DEPTH_BUDGET && best_cost < CAUSTIC_INF;
        const bool cheaper = __fmul_rn(__fmul_rn(intersection_cost, (float)n), area) <=
                             __fadd_rn(__fmul_rn(traversal_cost, area), __fmul_rn(intersection_cost, best_cost));
        const bool leaf = n == 1u || (n <= max_leaf && (!found || cheaper));
        if (leaf) {
            if (lane == 0) nodes[at].first = begin + s, nodes[at].count = n;
            __syncwarp();
            return top;
        }
        if (!found) best_axis = largest_axis(node_box, node_box + 3), best_split = n / 2u - 1u;
        // Reorder the node's items along the chosen axis.
        const u32 item = mine ? shared->order[best_axis][lane] : 0u;
        if (mine) {
            for (u32 k = 0; k < 3; ++k) shared->tmp_lo[lane][k] = shared->lo[s + item][k],
                                        shared->tmp_hi[lane][k] = shared->hi[s + item][k];
            shared->tmp_id[lane] = shared->id[s + item];
        }
        __syncwarp();
        float box[12];
        for (u32 k = 0; k < 3; ++k) box[k] = box[6 + k] = CAUSTIC_INF, box[3 + k] = box[9 + k] = -CAUSTIC_INF;
        if (mine) {
            for (u32 k = 0; k < 3; ++k) shared->lo[s + lane][k] = shared->tmp_lo[lane][k],
                                        shared->hi[s + lane][k] = shared->tmp_hi[lane][k];
            shared->id[s + lane] = shared->tmp_id[lane];
            const u32 o = lane <= best_split ? 0u : 6u;
            for (u32 k = 0; k < 3; ++k)
                box[o + k] = shared->tmp_lo[lane][k], box[o + 3 + k] = shared->tmp_hi[lane][k];
        }
        for (u32 k = 0; k < 12; ++k)
            for (u32 d = 16; d > 0; d >>= 1) {
                const float other = __shfl_xor_sync(CAUSTIC_FULL_MASK, box[k], d);
                box[k] = (k % 6u) < 3u ? fminf(box[k], other) : fmaxf(box[k], other);
            }
        u32 pair = 0;
        if (lane == 0) {
            pair = atomicAdd(build + TP_NODE_COUNT, 2u);
            nodes[at] = make_node(node_box, node_box + 3, pair, 0u);
            nodes[pair] = make_node(box, box + 3, 0u, 0u);
            nodes[pair + 1u] = make_node(box + 6, box + 9, 0u, 0u);
            const u32 left = best_split + 1u;
            shared->stack[top][0] = s + left, shared->stack[top][1] = n - left, shared->stack[top][2] = pair + 1u,
            shared->stack[top][3] = depth + 1u;
            shared->stack[top + 1][0] = s, shared->stack[top + 1][1] = left, shared->stack[top + 1][2] = pair,
            shared->stack[top + 1][3] = depth + 1u;
        }
        __syncwarp();
        return top + 2u;
    }
};

// The whole build in one launch of persistent warps. build[0] holds the
// next free node slot (set by the host past the root and any parking
// nodes), build[1] receives the deepest leaf's depth.
extern "C" __global__ void __launch_bounds__(TP_BVH_THREADS)
bvh_taskpool_build(const SahTask* root, PrimRef* refs0, PrimRef* refs1, int* bins, BvhNode* nodes,
                   u32* prim_indices, u32* build, u32 max_leaf, float traversal_cost, float intersection_cost,
                   u64* headers, u32* records, u32* control, u64* counters, u32 capacity, u64 watchdog_ns) {
    __shared__ TaskPoolBvh::Shared shared[TP_BVH_WARPS];
    TaskPool pool = task_pool_attach(headers, records, control, counters, capacity, watchdog_ns);
    TaskPoolBvh app;
    app.root = root;
    app.refs[0] = refs0, app.refs[1] = refs1;
    app.bins = bins, app.nodes = nodes, app.prim_indices = prim_indices, app.build = build;
    app.max_leaf = max_leaf, app.traversal_cost = traversal_cost, app.intersection_cost = intersection_cost;
    app.shared = &shared[warp_id()];
    task_pool_run(pool, app);
}

// Every slot's candidate bins empty (counts 0, boxes empty).
extern "C" __global__ void __launch_bounds__(256) bvh_taskpool_clear_bins(int* bins, u64 words) {
    for (u64 i = global_thread(); i < words; i += grid_threads()) {
        const u32 k = (u32)(i % TP_BIN_WORDS);
        bins[i] = k < 2u ? 0 : tp_empty_word(k - 2u);
    }
}
