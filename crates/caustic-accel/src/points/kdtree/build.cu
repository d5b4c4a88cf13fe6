// points/kdtree/build.cu: a photon kd-tree built on the GPU after Zhou,
// Hou, Wang and Guo 2008 (data-parallel large-node stage, per-node
// small-node stage); the twin of build.rs, driven by build_cuda.rs. The
// finite points' indices form the permutation `perm`, one contiguous range
// per node.
// - Large nodes, level by level: point_kdtree_bounds (one block per node)
//   finds each node's tight box; the host plans the empty-space cuts and
//   the spatial-median split with the CPU's own code (plan_large_split);
//   then point_kdtree_flag (one block per node) flags the points right of
//   the median plane and counts the left ones, point_kdtree_heads marks
//   every node's range as a segment, and the segmented split (split.cu)
//   moves each node's left points before its right ones, stably.
// - Small roots (at most 64 points), point_kdtree_small: one warp per root
//   builds its subtree by the VVH over u64 point masks, as small.rs does,
//   first to count its nodes, then (after the host scans the counts) to
//   write them and its leaf order of points.
#include "kdtree.cuh"

// flags[i] = 1 for a finite point: the build leaves the others out.
extern "C" __global__ void __launch_bounds__(KD_THREADS)
point_kdtree_finite(const float* points, u64 n, u32* flags) {
    for (u64 i = global_thread(); i < n; i += grid_threads()) {
        const float3 p = load_point(points, i);
        flags[i] = finite3(p.x, p.y, p.z) ? 1u : 0u;
    }
}

// Block-wide min (or max) of one float per thread.
__device__ float block_reduce(float v, bool take_max, float* scratch) {
    for (int d = 16; d > 0; d >>= 1) {
        const float o = __shfl_xor_sync(CAUSTIC_FULL_MASK, v, d);
        v = take_max ? fmaxf(v, o) : fminf(v, o);
    }
    if (lane_id() == 0) scratch[threadIdx.x / 32] = v;
    __syncthreads();
    if (threadIdx.x < 32) {
        v = threadIdx.x < blockDim.x / 32 ? scratch[threadIdx.x] : (take_max ? -CAUSTIC_INF : CAUSTIC_INF);
        for (int d = 16; d > 0; d >>= 1) {
            const float o = __shfl_xor_sync(CAUSTIC_FULL_MASK, v, d);
            v = take_max ? fmaxf(v, o) : fminf(v, o);
        }
        if (threadIdx.x == 0) scratch[0] = v;
    }
    __syncthreads();
    const float out = scratch[0];
    __syncthreads();
    return out;
}

// One block per node: ranges[2j], ranges[2j + 1] = start, count in `perm`.
// Writes the tight box of the node's points to bounds[6j ..] (min x, y, z,
// then max x, y, z). Min and max are exact, so the host's plan is the one
// the CPU makes from the same points.
extern "C" __global__ void __launch_bounds__(KD_THREADS)
point_kdtree_bounds(const float* points, const u32* perm, const u32* ranges, float* bounds) {
    __shared__ float scratch[KD_THREADS / 32];
    const u32 node = blockIdx.x;
    const u32 start = ranges[2 * node], count = ranges[2 * node + 1];
    float lo[3] = {CAUSTIC_INF, CAUSTIC_INF, CAUSTIC_INF};
    float hi[3] = {-CAUSTIC_INF, -CAUSTIC_INF, -CAUSTIC_INF};
    for (u32 j = threadIdx.x; j < count; j += blockDim.x) {
        const float3 p = load_point(points, perm[start + j]);
        lo[0] = fminf(lo[0], p.x); lo[1] = fminf(lo[1], p.y); lo[2] = fminf(lo[2], p.z);
        hi[0] = fmaxf(hi[0], p.x); hi[1] = fmaxf(hi[1], p.y); hi[2] = fmaxf(hi[2], p.z);
    }
    for (int a = 0; a < 3; ++a) {
        lo[a] = block_reduce(lo[a], false, scratch);
        hi[a] = block_reduce(hi[a], true, scratch);
    }
    if (threadIdx.x == 0) {
        for (int a = 0; a < 3; ++a) {
            bounds[6 * node + a] = lo[a];
            bounds[6 * node + 3 + a] = hi[a];
        }
    }
}

// One block per node: splits the node's range at plane (axis[j], split[j]):
// flags[perm position] = 1 for points at or above the plane (they go
// right), left[j] = the number below it.
extern "C" __global__ void __launch_bounds__(KD_THREADS)
point_kdtree_flag(const float* points, const u32* perm, const u32* ranges, const u32* axes,
                  const float* splits, u32* flags, u32* out_left) {
    __shared__ u32 left_total;
    const u32 node = blockIdx.x;
    const u32 start = ranges[2 * node], count = ranges[2 * node + 1];
    const u32 axis = axes[node];
    const float split = splits[node];
    if (threadIdx.x == 0) left_total = 0;
    __syncthreads();
    u32 left = 0;
    for (u32 j = threadIdx.x; j < count; j += blockDim.x) {
        const float3 p = load_point(points, perm[start + j]);
        const bool right = coord(p, axis) >= split;
        flags[start + j] = right ? 1u : 0u;
        left += right ? 0u : 1u;
    }
    for (int d = 16; d > 0; d >>= 1) left += __shfl_xor_sync(CAUSTIC_FULL_MASK, left, d);
    if (lane_id() == 0) atomicAdd(&left_total, left);
    __syncthreads();
    if (threadIdx.x == 0) out_left[node] = left_total;
}

// heads[start] = heads[start + count] = 1 for every node of the level:
// each node's range is a segment of its own for the segmented split.
extern "C" __global__ void __launch_bounds__(KD_THREADS)
point_kdtree_heads(const u32* ranges, u32 nodes, u32 n, u32* heads) {
    for (u64 j = global_thread(); j < nodes; j += grid_threads()) {
        const u32 start = ranges[2 * j], count = ranges[2 * j + 1];
        heads[start] = 1;
        if (start + count < n) heads[start + count] = 1;
    }
}

// A node of a small root's walk: its points (mask over the root), cell,
// depth, and the local index of its parent and which child it is.
struct SmallTask {
    u64 mask;
    float lo[3];
    float hi[3];
    u32 depth;
    u32 parent;
    u32 side;
};

struct SmallShared {
    float pos[KD_SMALL][3];
    // left[j][axis]: the root's points strictly below point j on axis.
    u64 left[KD_SMALL][3];
    u32 ids[KD_SMALL];
    SmallTask stack[KD_SMALL_STACK];
};

// Vol(B (+) R) of small.rs's inflated_volume, in its order of operations
// (no contraction into FMA, so the costs equal the CPU's bit for bit).
__device__ __forceinline__ float inflated_volume(const float* lo, const float* hi, float two_r) {
    const float x = __fadd_rn(__fsub_rn(hi[0], lo[0]), two_r);
    const float y = __fadd_rn(__fsub_rn(hi[1], lo[1]), two_r);
    const float z = __fadd_rn(__fsub_rn(hi[2], lo[2]), two_r);
    return __fmul_rn(__fmul_rn(x, y), z);
}

// small.rs's best_split, over the warp: every lane scans its candidates
// (key = 3 * point + axis, in key order) keeping strict improvements below
// the leaf cost, then the warp takes the lowest (cost, key): the CPU's
// first candidate of lowest cost. KD_NONE when no split beats the leaf.
__device__ u32 small_best_split(const SmallShared& sh, u32 n, const SmallTask& t, float two_r,
                                float traversal_cost) {
    const u32 count = __popcll(t.mask);
    const float volume = inflated_volume(t.lo, t.hi, two_r);
    float best_cost = (float)count;
    u32 best_key = KD_NONE;
    for (u32 key = lane_id(); key < 3 * n; key += 32) {
        const u32 j = key / 3, axis = key - 3 * j;
        const float pos = sh.pos[j][axis];
        if (!((t.mask >> j) & 1ull) || !(t.lo[axis] < pos && pos < t.hi[axis])) continue;
        const float c_left = (float)__popcll(t.mask & sh.left[j][axis]);
        const float c_right = __fsub_rn((float)count, c_left);
        float left_hi[3] = {t.hi[0], t.hi[1], t.hi[2]};
        float right_lo[3] = {t.lo[0], t.lo[1], t.lo[2]};
        left_hi[axis] = pos;
        right_lo[axis] = pos;
        const float weighted = __fadd_rn(__fmul_rn(c_left, inflated_volume(t.lo, left_hi, two_r)),
                                         __fmul_rn(c_right, inflated_volume(right_lo, t.hi, two_r)));
        const float cost = __fadd_rn(traversal_cost, __fdiv_rn(weighted, volume));
        if (cost < best_cost) {
            best_cost = cost;
            best_key = key;
        }
    }
    for (int d = 16; d > 0; d >>= 1) {
        const float other_cost = __shfl_xor_sync(CAUSTIC_FULL_MASK, best_cost, d);
        const u32 other_key = __shfl_xor_sync(CAUSTIC_FULL_MASK, best_key, d);
        if (other_cost < best_cost || (other_cost == best_cost && other_key < best_key)) {
            best_cost = other_cost;
            best_key = other_key;
        }
    }
    return best_key;
}

// Loads a small root's points and their left sets into shared memory.
__device__ void small_load(SmallShared& sh, const float* points, const u32* perm,
                           const SmallRoot& root) {
    for (u32 i = lane_id(); i < root.count; i += 32) {
        const u32 id = perm[root.start + i];
        const float3 p = load_point(points, id);
        sh.ids[i] = id;
        sh.pos[i][0] = p.x;
        sh.pos[i][1] = p.y;
        sh.pos[i][2] = p.z;
    }
    __syncwarp();
    for (u32 i = lane_id(); i < root.count; i += 32) {
        for (u32 axis = 0; axis < 3; ++axis) {
            const float c = sh.pos[i][axis];
            u64 below = 0;
            for (u32 j = 0; j < root.count; ++j) below |= (u64)(sh.pos[j][axis] < c) << j;
            sh.left[i][axis] = below;
        }
    }
    __syncwarp();
}

// One warp per small root (blocks of KD_SMALL_THREADS): builds its
// subtree depth first in pre-order, exactly as small.rs. Count pass
// (nodes == nullptr): stats[3r ..] = node count, leaf count, deepest leaf
// depth. Write pass: local node 0 goes to nodes[root.slot], local node
// l > 0 to nodes[tails[r] + l - 1], and each leaf's points to
// perm[root.start ..] in leaf order (bit order within a leaf).
extern "C" __global__ void __launch_bounds__(KD_SMALL_THREADS)
point_kdtree_small(const float* points, u32* perm, const SmallRoot* roots, u32 root_count,
                   float two_r, float traversal_cost, u32 max_depth, const u32* tails,
                   KdNode* nodes, u32* stats) {
    __shared__ SmallShared sh;
    const u32 r = blockIdx.x;
    if (r >= root_count) return;
    const SmallRoot root = roots[r];
    small_load(sh, points, perm, root);
    const bool write = nodes != nullptr;
    const u32 tail = write ? tails[r] : 0u;
    const bool lead = lane_id() == 0;
    if (lead) {
        SmallTask& t = sh.stack[0];
        t.mask = root.count == 64 ? ~0ull : (1ull << root.count) - 1ull;
        for (int a = 0; a < 3; ++a) {
            t.lo[a] = root.lo[a];
            t.hi[a] = root.hi[a];
        }
        t.depth = root.depth;
        t.parent = KD_NONE;
        t.side = 0;
    }
    __syncwarp();
    u32 top = 1, produced = 0, leaves = 0, deepest = 0, placed = 0;
    while (top > 0) {
        const SmallTask t = sh.stack[--top];
        __syncwarp();  // every lane has read the entry before it is reused
        const u32 here = write ? (produced == 0 ? root.slot : tail + produced - 1) : 0u;
        ++produced;
        if (write && lead && t.parent != KD_NONE) {
            if (t.side == 0) nodes[t.parent].a = here;
            else nodes[t.parent].b = here;
        }
        const u32 count = __popcll(t.mask);
        const u32 key = count > 1 && t.depth < max_depth
                            ? small_best_split(sh, root.count, t, two_r, traversal_cost)
                            : KD_NONE;
        if (key == KD_NONE) {
            if (write) {
                for (u32 i = lane_id(); i < root.count; i += 32) {
                    if ((t.mask >> i) & 1ull) {
                        const u32 rank = __popcll(t.mask & ((1ull << i) - 1ull));
                        perm[root.start + placed + rank] = sh.ids[i];
                    }
                }
                if (lead) nodes[here] = KdNode{0.0f, KD_LEAF_AXIS, root.start + placed, count};
            }
            placed += count;
            ++leaves;
            deepest = max(deepest, t.depth);
            continue;
        }
        const u32 j = key / 3, axis = key - 3 * j;
        const float pos = sh.pos[j][axis];
        const u64 left = sh.left[j][axis];
        if (write && lead) nodes[here] = KdNode{pos, axis, 0u, 0u};
        if (lead) {
            // Right child below the left one: the left subtree is walked first.
            SmallTask& right = sh.stack[top];
            SmallTask& below = sh.stack[top + 1];
            right = t;
            below = t;
            right.mask = t.mask & ~left;
            right.lo[axis] = pos;
            below.mask = t.mask & left;
            below.hi[axis] = pos;
            right.depth = below.depth = t.depth + 1;
            right.parent = below.parent = here;
            right.side = 1;
            below.side = 0;
        }
        top += 2;
        __syncwarp();
    }
    if (!write && lead) {
        stats[3 * r] = produced;
        stats[3 * r + 1] = leaves;
        stats[3 * r + 2] = deepest;
    }
}
