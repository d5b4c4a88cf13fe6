// irradiance.cu: irradiance samples placed adaptively in screen space on
// the GPU, the twin of caustic-render's irradiance_samples.rs (Zeidan 2011
// §6.2.3): shading points sorted by the Morton code of their pixel, so
// that every node of the screen-space quadtree is a contiguous run; the
// sample budget goes down the tree level by level, each child getting a
// share proportional to its error
//
//   eta = sum_i alpha |x_i - mean x| + sqrt(2 - 2 n_i . mean n)   (eq. 6.1)
//
// rounded by largest remainder; a node that receives one sample (or is a
// pixel, or has no more points than samples) picks its samples by jittered
// selection along its run.
//
// The CPU recursion becomes a breadth-first loop driven by irradiance.rs:
// per level, every point adds its moments to its child node (counts,
// positions, normals), then its error term against that child's mean, and
// one thread per node splits the budget among its four children. Sums are
// 64-bit fixed point added with integer atomics: exact and independent of
// the order the threads arrive in, so the samples repeat from run to run.
#include "scene.cuh"

#define IRR_THREADS 256u
#define IRR_NONE 0xffffffffu
// Random-number purpose of the jittered selection (irradiance_samples.rs's JITTER).
#define IRR_JITTER 0x6a697474ull
// irradiance_samples.rs's BEND_FLOOR (as the f32 it is there).
#define IRR_BEND_FLOOR ((double)1e-6f)
// Fixed-point units: positions (in [0, 1] of the points' box) and normal
// components (in [-1, 1], shifted by one).
#define IRR_POSITION_ONE 2147483648.0  // 2^31
#define IRR_NORMAL_ONE 1073741824.0    // 2^30

// A position in fixed point (the fourth word pads to 32 bytes).
struct Fixed3 {
    u64 x, y, z, pad;
};

// One child node's sums, 64-bit fixed point: count, position, shifted
// normal, error.
struct ChildSums {
    u64 count;
    u64 position[3];
    u64 normal[3];
    u64 error;
};

// keys[i] = morton2(x, y) of point i's pixel (packed x | y << 16),
// order[i] = i, sides[i] = max(x, y).
extern "C" __global__ void __launch_bounds__(IRR_THREADS)
irradiance_keys(const u32* pixels, u32 n, u32* keys, u32* order, u32* sides) {
    for (u64 i = global_thread(); i < n; i += grid_threads()) {
        const u32 x = pixels[i] & 0xffffu, y = pixels[i] >> 16;
        keys[i] = morton2_32(x, y);
        order[i] = (u32)i;
        sides[i] = x > y ? x : y;
    }
}

// The points in key order, positions in fixed point of the box `lo` ..
// `lo + scale` (w unused) and normals as they are.
extern "C" __global__ void __launch_bounds__(IRR_THREADS)
irradiance_sorted(const float* positions, const float* normals, const u32* order, u32 n,
                  float lo_x, float lo_y, float lo_z, float inv_scale, Fixed3* fixed,
                  float4* sorted_normals) {
    for (u64 s = global_thread(); s < n; s += grid_threads()) {
        const u64 i = order[s];
        const float lo[3] = {lo_x, lo_y, lo_z};
        u64 q[3];
        for (int a = 0; a < 3; ++a) {
            double u = ((double)positions[3 * i + a] - (double)lo[a]) * (double)inv_scale;
            u = fmin(fmax(u, 0.0), 1.0);
            q[a] = (u64)llrint(u * IRR_POSITION_ONE);
        }
        fixed[s] = Fixed3{q[0], q[1], q[2], 0ull};
        sorted_normals[s] = make_float4(normals[3 * i], normals[3 * i + 1], normals[3 * i + 2], 0.0f);
    }
}

// Adds `v` to *target once per group of lanes that share `slot`: a whole
// warp on one slot (the common case, points being sorted) adds once.
__device__ __forceinline__ void warp_add(u64* target, u64 v, u32 slot, u32 peers) {
    if (peers == CAUSTIC_FULL_MASK) {
        for (int d = 16; d > 0; d >>= 1) v += __shfl_xor_sync(CAUSTIC_FULL_MASK, v, d);
        if (lane_id() == 0) atomicAdd((unsigned long long*)target, (unsigned long long)v);
    } else if (slot != IRR_NONE) {
        atomicAdd((unsigned long long*)target, (unsigned long long)v);
    }
}

// The child slot (4 * node + quadrant) of sorted point s at this level.
__device__ __forceinline__ u32 child_slot(const u32* keys, const u32* node_of, u64 s, u64 n,
                                          u32 shift) {
    if (s >= n) return IRR_NONE;
    const u32 node = node_of[s];
    return node == IRR_NONE ? IRR_NONE : 4u * node + ((keys[s] >> shift) & 3u);
}

// Calls visit(s, slot, peers) for every sorted point s that is still in
// play at this level, whole warps at a time (warp_add needs every lane);
// warps without such a point skip.
template <class Visit>
__device__ __forceinline__ void for_each_child_point(const u32* keys, const u32* node_of, u64 n,
                                                     u32 shift, Visit visit) {
    const u64 warps = grid_threads() / 32;
    for (u64 base = global_thread() / 32 * 32; base < n; base += warps * 32) {
        const u64 s = base + lane_id();
        const u32 slot = child_slot(keys, node_of, s, n, shift);
        const u32 peers = __match_any_sync(CAUSTIC_FULL_MASK, slot);
        if (__all_sync(CAUSTIC_FULL_MASK, slot == IRR_NONE)) continue;
        visit(s, slot, peers);
    }
}

// Pass 1 of a level: every active point's count, position and normal into
// its child's sums.
extern "C" __global__ void __launch_bounds__(IRR_THREADS)
irradiance_moments(const u32* keys, const Fixed3* fixed, const float4* normals,
                   const u32* node_of, u64 n, u32 shift, ChildSums* sums) {
    for_each_child_point(keys, node_of, n, shift, [&](u64 s, u32 slot, u32 peers) {
        const bool on = slot != IRR_NONE;
        const Fixed3 q = on ? fixed[s] : Fixed3{0, 0, 0, 0};
        const float4 nrm = on ? normals[s] : make_float4(-1.0f, -1.0f, -1.0f, 0.0f);
        ChildSums* c = sums + (on ? slot : 0);
        warp_add(&c->count, on ? 1ull : 0ull, slot, peers);
        warp_add(&c->position[0], q.x, slot, peers);
        warp_add(&c->position[1], q.y, slot, peers);
        warp_add(&c->position[2], q.z, slot, peers);
        const float comp[3] = {nrm.x, nrm.y, nrm.z};
        for (int a = 0; a < 3; ++a) {
            const double shifted = on ? ((double)comp[a] + 1.0) * IRR_NORMAL_ONE : 0.0;
            warp_add(&c->normal[a], (u64)llrint(fmax(shifted, 0.0)), slot, peers);
        }
    });
}

// Pass 2 of a level: every active point's error term against its child's
// mean position and normal, in fixed point (`error_scale` units per one).
extern "C" __global__ void __launch_bounds__(IRR_THREADS)
irradiance_errors(const u32* keys, const Fixed3* fixed, const float4* normals,
                  const u32* node_of, u64 n, u32 shift, double alpha_scale, double error_scale,
                  ChildSums* sums) {
    for_each_child_point(keys, node_of, n, shift, [&](u64 s, u32 slot, u32 peers) {
        u64 term = 0;
        if (slot != IRR_NONE) {
            const ChildSums& c = sums[slot];
            const double count = (double)c.count;
            const Fixed3 q = fixed[s];
            const double d[3] = {(double)q.x - (double)c.position[0] / count,
                                 (double)q.y - (double)c.position[1] / count,
                                 (double)q.z - (double)c.position[2] / count};
            // alpha_scale = alpha * box scale / 2^31: world distance times alpha.
            const double distance = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]) * alpha_scale;
            double m[3];
            for (int a = 0; a < 3; ++a) m[a] = (double)c.normal[a] - count * IRR_NORMAL_ONE;
            const double len = sqrt(m[0] * m[0] + m[1] * m[1] + m[2] * m[2]);
            const float4 nrm = normals[s];
            const double cosine =
                len > 0.0 ? (nrm.x * m[0] + nrm.y * m[1] + nrm.z * m[2]) / len : 0.0;
            // irradiance_samples.rs's bend: below BEND_FLOOR, no bend.
            const double chord2 = 2.0 - 2.0 * cosine;
            const double bend = chord2 > IRR_BEND_FLOOR ? sqrt(chord2) : 0.0;
            term = (u64)llrint((distance + bend) * error_scale);
        }
        warp_add(&sums[slot == IRR_NONE ? 0 : slot].error, term, slot, peers);
    });
}

// irradiance_samples.rs's largest_remainder: `count` split in proportion
// to `shares`, the leftover going to the largest remainders (ties to the
// lower child), only to children with a positive share.
__device__ void largest_remainder(u32 count, const double shares[4], u32 parts[4]) {
    double exact[4], rem[4];
    u32 sum = 0;
    for (int c = 0; c < 4; ++c) {
        exact[c] = shares[c] * (double)count;
        parts[c] = (u32)floor(exact[c]);
        rem[c] = exact[c] - floor(exact[c]);
        sum += parts[c];
    }
    u32 left = count > sum ? count - sum : 0;
    int by[4] = {0, 1, 2, 3};
    for (int a = 1; a < 4; ++a) {  // insertion sort: remainder down, index up
        int j = a;
        while (j > 0 && rem[by[j]] > rem[by[j - 1]]) {
            const int t = by[j];
            by[j] = by[j - 1];
            by[j - 1] = t;
            --j;
        }
    }
    bool any = false;
    for (int c = 0; c < 4; ++c) any = any || shares[c] > 0.0;
    for (int i = 0; left > 0 && any; i = (i + 1) & 3) {
        if (shares[by[i]] > 0.0) {
            ++parts[by[i]];
            --left;
        }
    }
}

// One thread per active node of the level (runs lo .. lo + len, `budget`
// samples): the four children's runs, budgets and level. A child goes on to the
// next level (`next` = 1) or picks its samples now (`pick` = 1), as
// Quadtree::distribute decides.
extern "C" __global__ void __launch_bounds__(IRR_THREADS)
irradiance_split(const u32* node_lo, const u32* node_len, const u32* node_budget, u32 nodes,
                 const ChildSums* sums, double error_scale, u32 child_level, u32 levels,
                 u32* child_lo, u32* child_len, u32* child_budget, u32* child_levels,
                 u32* next, u32* pick) {
    for (u64 a = global_thread(); a < nodes; a += grid_threads()) {
        double errors[4], total = 0.0;
        u32 lens[4];
        for (int c = 0; c < 4; ++c) {
            lens[c] = (u32)sums[4 * a + c].count;
            errors[c] = (double)sums[4 * a + c].error / error_scale;
            total += errors[c];
        }
        double shares[4];
        for (int c = 0; c < 4; ++c) {
            shares[c] = total > 0.0 ? errors[c] / total
                                    : (double)lens[c] / (double)node_len[a];
        }
        u32 parts[4];
        largest_remainder(node_budget[a], shares, parts);
        u32 lo = node_lo[a];
        for (int c = 0; c < 4; ++c) {
            const u64 slot = 4 * a + c;
            const bool live = parts[c] > 0 && lens[c] > 0;
            const bool now = parts[c] == 1 || child_level >= levels || lens[c] <= parts[c];
            child_lo[slot] = lo;
            child_len[slot] = lens[c];
            child_budget[slot] = parts[c];
            child_levels[slot] = child_level;
            next[slot] = live && !now ? 1u : 0u;
            pick[slot] = live && now ? 1u : 0u;
            lo += lens[c];
        }
    }
}

// index_of[slot] = position of `slot` among the next level's nodes, or
// none: scatters the compaction's selected slots.
extern "C" __global__ void __launch_bounds__(IRR_THREADS)
irradiance_renumber(const u32* selected, u32 count, u32* index_of) {
    for (u64 j = global_thread(); j < count; j += grid_threads()) index_of[selected[j]] = (u32)j;
}

// Every still active point moves to its child's index at the next level
// (none when the child picked its samples or got none).
extern "C" __global__ void __launch_bounds__(IRR_THREADS)
irradiance_descend(const u32* keys, u64 n, u32 shift, const u32* index_of, u32* node_of) {
    for (u64 s = global_thread(); s < n; s += grid_threads()) {
        const u32 slot = child_slot(keys, node_of, s, n, shift);
        if (slot != IRR_NONE) node_of[s] = index_of[slot];
    }
}

// takes[j] = the samples node j yields: its budget, or its points when
// fewer.
extern "C" __global__ void __launch_bounds__(IRR_THREADS)
irradiance_takes(const u32* node_len, const u32* node_budget, u32 nodes, u32* takes) {
    for (u64 j = global_thread(); j < nodes; j += grid_threads())
        takes[j] = node_len[j] < node_budget[j] ? node_len[j] : node_budget[j];
}

// Quadtree::select for each picking node (its run lo .. lo + len at level
// node_level[j], `budget` samples, written from offsets[j]): every point
// when the run is no longer than the budget, else one uniformly chosen
// point in each of `budget` equal strata. Output: indices of the input
// points.
extern "C" __global__ void __launch_bounds__(IRR_THREADS)
irradiance_select(const u32* keys, const u32* order, const u32* node_lo, const u32* node_len,
                  const u32* node_budget, const u32* node_level, const u32* offsets, u32 nodes,
                  u64 seed, u32* chosen) {
    for (u64 j = global_thread(); j < nodes; j += grid_threads()) {
        const u32 lo = node_lo[j], len = node_len[j], count = node_budget[j];
        u32* out = chosen + offsets[j];
        if (len <= count) {
            for (u32 i = 0; i < len; ++i) out[i] = order[lo + i];
            continue;
        }
        const u64 node_key = mix_key(mix_key(seed, (u64)keys[lo]), (u64)node_level[j]);
        for (u32 i = 0; i < count; ++i) {
            Pcg g = pcg_new(mix_key(node_key, (u64)i), IRR_JITTER);
            const float u = pcg_f32(g);
            u64 at = (u64)(((double)i + (double)u) * (double)len / (double)count);
            if (at > len - 1) at = len - 1;
            out[i] = order[lo + at];
        }
    }
}
