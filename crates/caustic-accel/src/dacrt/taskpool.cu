// dacrt/taskpool.cu: divide-and-conquer ray tracing (DACRT: Wächter and
// Keller 2009; Mora 2011; Áfra 2012) on the GPU task pool of persistent
// warps, as Vinkler, Bittner, Havran and Hapala (CGF 2013, §5) run it.
// Runtime: caustic-gpu's task_pool.cuh; host: taskpool_cuda.rs; the CPU
// twin and the argument for exact hits: dacrt/mod.rs and task.rs.
//
// A task holds a box, a range of the ray-index array and a range of the
// triangle-index array. Two schedules (params[DACRT_CONCURRENT]):
//
// - concurrent (the default): one arena per kind holds every range. A
//   subdivided task bump-allocates its scratch B (its rays and triangles)
//   and, after Partition1, its output (the live rays and the triangles,
//   [L | S | R]), so it never writes a range it was given: siblings share
//   their parent's output read-only and all seven children start at once,
//   with no dependencies (a deviation from the paper: the chain of tasks
//   is the tree's depth instead of growing like 2^depth to 3^depth). An
//   arena that runs out sets a spill bit; every step then skips its work
//   (the run drains) and the host runs the batch again with more.
// - waves (the paper's, §5.3): both arrays double-buffered, A holds every
//   task's items, B is scratch, and a task leaves its ranges of A a
//   permutation of what it found, because siblings that wait on it use the
//   same ranges as sets.
//
// The passes read and write through the payload's B and output positions,
// so one code serves both. Phases:
//
// - SplitPlane (RDH only; ⌈(√R + √T)/32⌉ chunks): lane j owns candidate j
//   (11 planes on x, 11 on y, 10 on z, at i/(m+1) of the box, §5.2);
//   each warp classifies 32 staged samples (about √n rays and √n
//   triangles, every k-th of the range) against its lane's plane and adds
//   the class counts to the slot's bins with atomics; the last finisher
//   prices the candidates by the pairs of the seven children (Bittner and
//   Havran 2009's ray distribution heuristic on samples), keeps the
//   cheapest (ties: the first) and clears the bins. No valid candidate:
//   the spatial median of the longest axis, as with `split=median`, whose
//   plane is chosen when the task is made (the phase is skipped).
// - Partition1 (⌈R/32⌉ + ⌈T/32⌉ chunks): rays are culled (any-hit rays
//   already done, lines that miss the task's box grown by their thickness,
//   and rays whose closest hit so far lies before the depth slab of the
//   box of the task's whole triangles) and classified left / straddling /
//   right against the plane; live rays go to the front of B (class in the
//   index's top two bits), culled ones to its back, by one atomic per
//   cursor per warp and a warp prefix (§4.3). Triangles are classified by
//   their boxes and copied to B with their class; the boxes of the three
//   classes are merged with atomics on order-preserving integers. A is
//   only read, so the last finisher may still decide: no live ray, done;
//   few enough pairs (the paper's Eq. 2, under 32 rays or 16 triangles),
//   intersect; a plane that separates no triangle, the next axis's median
//   (the CPU's fallback), else intersect.
// - Partition2 (the same chunks): B to the output, live rays into
//   [L | S | R] and triangles into [L | S | R] by three cursors each (in
//   place, culled rays to the tail). The last finisher makes the seven
//   children of Figure 3 from the ranges: concurrent, every present child
//   active at once; waves, by `schedule.rs` (who waits for whom, by the
//   table keyed by which classes are empty), dependants first, and the
//   children that hand on its activation targets take its place in them.
//   Either way its own slot is reused for one child that starts at once.
// - Intersect (⌈R/G⌉·⌈T/(32·32/G)⌉ chunks): a chunk is G rays (G the
//   power of two up to 32 that fits the task's rays) times 32·32/G
//   triangles, 32 tests per lane; the closest hit is a 64-bit key (t's
//   order-preserving bits, then the triangle id) merged per ray with
//   atomicMin, so an equal t goes to the lowest id as in brute force. Any
//   hit stops a ray at its first hit.
//
// The hits are then rebuilt from the keys (dacrt_resolve): the watertight
// test of common.cuh, the one every traversal kernel uses, run again on
// the winning triangle gives t, u and v bit for bit as the CPU's.
#include "binned_sah.cuh"
#include "grid.cuh"
#include "slab_ray.cuh"
#include "task_pool.cuh"

#define DACRT_THREADS 128u

#define DACRT_SPLIT 0u
#define DACRT_PASS1 1u
#define DACRT_PASS2 2u
#define DACRT_DIRECT 3u

// A class (0 left, 1 straddling, 2 right) rides in an index's top two bits
// between the passes: rays and triangles are fewer than 2^30 (the host
// checks).
#define DACRT_CLASS_SHIFT 30u
#define DACRT_ID_MASK 0x3fffffffu
#define DACRT_NO_KEY 0xffffffffffffffffull

// RDH bins of one slot: per candidate, rays L, S, R and triangles L, S, R.
#define DACRT_BIN_WORDS 6u
#define DACRT_SLOT_BIN_WORDS (32u * DACRT_BIN_WORDS)

// schedule.rs's device table: words per mask, successor codes.
#define DACRT_PLAN_WORDS 8u
#define DACRT_TO_PARENT 14u

// Chunks whose loads one warp keeps in flight together in the passes.
#define DACRT_BATCH 4u
#define DACRT_WARPS (DACRT_THREADS / 32u)

// Chunks a direct task may have; beyond, its chunks take more triangles.
#define DACRT_MAX_CHUNKS (1u << 28)

// params[] words (taskpool_cuda.rs's DacrtParams): DacrtConfig's.
#define DACRT_MIN_RAYS 0u
#define DACRT_MIN_TRIS 1u
#define DACRT_MAX_DEPTH 2u
#define DACRT_SPLIT_RDH 3u
#define DACRT_C_INTERS 4u
#define DACRT_C_SORT 5u
#define DACRT_CONCURRENT 6u
// The concurrent schedule's arenas: their sizes in words (the root's
// ranges first: the arena's free words start at its count).
#define DACRT_RAY_ARENA 7u
#define DACRT_TRI_ARENA 8u
// Concurrent: levels (from the root) whose far straddling child waits for
// the near one's subtree (DacrtConfig::near_levels).
#define DACRT_NEAR_LEVELS 9u
#define DACRT_PARAM_WORDS 10u

// Payload words (the ray range is the record's begin .. end).
#define DP_BOUNDS 0u
#define DP_WHOLE 6u
#define DP_TRI_BEGIN 12u
#define DP_TRI_END 13u
#define DP_DEPTH 14u
#define DP_AXIS 15u
#define DP_PLANE 16u
#define DP_TRIED 17u
#define DP_FRONT 18u
#define DP_BACK 19u
#define DP_COUNTS 20u   // rays L S R, triangles L S R
#define DP_CURSORS 26u  // the same, Partition2's write positions
#define DP_BOXES 32u    // 18 order ints: the boxes of triangles L, S, R
#define DP_SOURCE 50u   // Intersect: 0 rays from A (culled per lane), 1 the live rays in B
#define DP_COUNT 51u    // Intersect: its rays
#define DP_GROUP 52u    // Intersect: rays per chunk
#define DP_BLOCK 53u    // Intersect: triangles per chunk
#define DP_RAY_CHUNKS 54u  // the passes: chunks of the ray range; SplitPlane: ray samples
#define DP_RAY_STEP 55u
#define DP_TRI_SAMPLES 56u
#define DP_TRI_STEP 57u
// Where the passes read and write (absolute indices): Partition1's
// scratch (B) for rays and triangles, Partition2's output (the children's
// ranges). In place (waves), B lies in the second array at the task's own
// ranges and the output in the first; concurrent, both are the task's
// own allocations in the arena.
#define DP_B_RAYS 58u
#define DP_B_TRIS 59u
#define DP_OUT_RAYS 60u
#define DP_OUT_TRIS 61u
// Partition1: live straddling rays heading towards + on the plane's axis.
#define DP_FORWARD 62u

// stats[] words (u64).
#define DS_TASKS 0u
#define DS_DIRECT 1u
#define DS_PAIRS 2u
#define DS_DEPTH 3u
#define DS_LOST 4u
// Concurrent: index words asked of the ray and triangle arenas, and bit k
// set when arena k (0 rays, 1 triangles) ran out (the run then drains
// without work and the host runs it again with more).
#define DS_RAY_ARENA 5u
#define DS_TRI_ARENA 6u
#define DS_SPILLED 7u
#define DS_WORDS 8u

// T1..T7 as (ray class, triangle class): schedule.rs's CHILDREN.
__device__ __forceinline__ u32 child_rays(u32 c) { return c < 2u ? 0u : (c < 5u ? 1u : 2u); }
__device__ __forceinline__ u32 child_tris(u32 c) {
    return c == 0u || c == 2u ? 0u : (c == 4u || c == 6u ? 2u : 1u);
}

// ---------------------------------------------------------------- helpers

// The closest-hit key: t's order-preserving bits, then the triangle id; the
// smaller key is the CPU's winner (ties to the lowest id). -0 and +0 are one
// t on the CPU, so they share a key.
__device__ __forceinline__ u64 dacrt_key(float t, u32 prim) {
    return ((u64)coordinate_key(t == 0.0f ? 0.0f : t) << 32) | prim;
}
__device__ __forceinline__ float dacrt_key_t(u64 key) {
    const u32 k = (u32)(key >> 32);
    return __uint_as_float((k >> 31) ? (k & 0x7fffffffu) : ~k);
}

// Word k of a box of six order ints (lo xyz, hi xyz), empty: lo +inf, hi -inf.
__device__ __forceinline__ int empty_box_word(u32 k) {
    return (k % 6u) < 3u ? float_order(CAUSTIC_INF) : float_order(-CAUSTIC_INF);
}

__device__ __forceinline__ float3 with_component(float3 v, u32 axis, float x) {
    if (axis == 0u) v.x = x;
    else if (axis == 1u) v.y = x;
    else v.z = x;
    return v;
}

__device__ __forceinline__ Aabb load_box(const u32* words) {
    const float* f = (const float*)words;
    Aabb b;
    b.min = make_float3(task_pool_load(f), task_pool_load(f + 1), task_pool_load(f + 2));
    b.max = make_float3(task_pool_load(f + 3), task_pool_load(f + 4), task_pool_load(f + 5));
    return b;
}
__device__ __forceinline__ void store_box(u32* words, const Aabb& b) {
    float* f = (float*)words;
    f[0] = b.min.x, f[1] = b.min.y, f[2] = b.min.z, f[3] = b.max.x, f[4] = b.max.y, f[5] = b.max.z;
}
// Aabb::intersection (glam's max and min).
__device__ __forceinline__ Aabb intersection(const Aabb& a, const Aabb& b) {
    Aabb r;
    r.min = make_float3(glam_max(a.min.x, b.min.x), glam_max(a.min.y, b.min.y), glam_max(a.min.z, b.min.z));
    r.max = make_float3(glam_min(a.max.x, b.max.x), glam_min(a.max.y, b.max.y), glam_min(a.max.z, b.max.z));
    return r;
}

// split.rs's median_on: the middle of `b` on `axis`; false when flat there.
__device__ __forceinline__ bool median_on(const Aabb& b, u32 axis, float& plane) {
    const float lo = component(b.min, axis);
    const float extent = __fsub_rn(component(b.max, axis), lo);
    plane = __fadd_rn(lo, __fmul_rn(0.5f, extent));
    return extent > 0.0f && extent < CAUSTIC_INF;
}
// Aabb::largest_axis.
__device__ __forceinline__ u32 largest_axis(const Aabb& b) {
    const float x = b.max.x - b.min.x, y = b.max.y - b.min.y, z = b.max.z - b.min.z;
    return (x >= y && x >= z) ? 0u : (y >= z ? 1u : 2u);
}

// split.rs's candidate j of `b`: 11 planes on x, 11 on y, 10 on z; false
// when the box is flat (or unbounded) on its axis.
__device__ __forceinline__ bool rdh_candidate(const Aabb& b, u32 j, u32& axis, float& plane) {
    const u32 count = j < 22u ? 11u : 10u;
    const u32 i = j < 11u ? j : (j < 22u ? j - 11u : j - 22u);
    axis = j < 11u ? 0u : (j < 22u ? 1u : 2u);
    const float lo = component(b.min, axis);
    const float extent = __fsub_rn(component(b.max, axis), lo);
    plane = __fadd_rn(lo, __fdiv_rn(__fmul_rn(extent, (float)(i + 1u)), (float)(count + 1u)));
    return extent > 0.0f && extent < CAUSTIC_INF;
}

// split.rs's sample_step: the stride that takes about √n of n items.
__device__ __forceinline__ u32 sample_step(u32 n) {
    const u32 root = (u32)ceil(sqrt((double)n));
    return max(n / max(root, 1u), 1u);
}

// task.rs's tri_side, by the triangle's box: 0 left, 1 straddling, 2 right.
__device__ __forceinline__ u32 tri_side(float3 lo, float3 hi, u32 axis, float plane) {
    if (component(hi, axis) <= plane) return 0u;
    if (component(lo, axis) >= plane) return 2u;
    return 1u;
}

// task.rs's ray_side: which halves of `b` split at `plane` the ray's thick
// line meets: 0 left, 1 both, 2 right, 3 neither.
__device__ __forceinline__ u32 ray_side(const SlabRay& r, const Aabb& b, u32 axis, float plane) {
    float lo, hi;
    const bool left = clip_to(r, b.min, with_component(b.max, axis, plane), r.delta, lo, hi);
    const bool right = clip_to(r, with_component(b.min, axis, plane), b.max, r.delta, lo, hi);
    return left ? (right ? 1u : 0u) : (right ? 2u : 3u);
}

__device__ __forceinline__ u32 next_pow2(u32 n) { return n <= 1u ? 1u : 1u << (32u - __clz(n - 1u)); }

// The seven children's pairs (split.rs's `pairs`): all but left with right.
__device__ __forceinline__ u64 rdh_pairs(const u32* c) {
    return (u64)c[0] * (c[3] + c[4]) + (u64)c[1] * (c[3] + c[4] + c[5]) + (u64)c[2] * (c[4] + c[5]);
}

// One task's ranges and boxes, as every warp on it reads them.
struct DacrtTask {
    u32 begin, end, tri_begin, tri_end;
    u32 b_rays, b_tris;
    Aabb bounds, whole;
    u32 axis;
    float plane;
};

struct DacrtRay {
    SlabRay slab;
    float3 dir;
    float tmin, tmax;
};

struct TaskPoolDacrt {
    const Ray* rays;
    const Triangle* tris;
    const float4* boxes;
    u32* ray_ids[2];
    u32* tri_ids[2];
    u64* keys;
    u32* bins;
    const u32* plan;
    const u32* ray_count;
    const u32* tri_count;
    const int* root_box;
    u64* stats;
    float scale;
    float c_inters, c_sort;
    // Per-warp shared memory: a direct task's 32 staged triangles.
    struct Shared {
        float4 v[32][3];
        u32 id[32];
    };
    Shared* shared;
    u32 min_rays, min_tris, max_depth;
    bool rdh, any_hit;
    // Concurrent: the arenas' first free words (after the root's ranges)
    // and their sizes.
    bool concurrent;
    u32 arena_base[2], arena_cap[2];
    u32 near_levels;

    // ------------------------------------------------------------- reading

    __device__ DacrtTask view(const TaskRecord& r) const {
        DacrtTask t;
        t.begin = task_pool_load(&r.begin), t.end = task_pool_load(&r.end);
        t.tri_begin = task_pool_load(&r.payload[DP_TRI_BEGIN]);
        t.tri_end = task_pool_load(&r.payload[DP_TRI_END]);
        t.b_rays = task_pool_load(&r.payload[DP_B_RAYS]);
        t.b_tris = task_pool_load(&r.payload[DP_B_TRIS]);
        t.bounds = load_box(r.payload + DP_BOUNDS);
        t.whole = load_box(r.payload + DP_WHOLE);
        t.axis = task_pool_load(&r.payload[DP_AXIS]);
        t.plane = task_pool_load((const float*)&r.payload[DP_PLANE]);
        return t;
    }

    __device__ DacrtRay load_ray(u32 id) const {
        const float4* w = reinterpret_cast<const float4*>(rays) + 2 * (u64)id;
        const float4 o = __ldg(w), d = __ldg(w + 1);
        DacrtRay r;
        r.slab = slab_ray_new(xyz(o), xyz(d), scale);
        r.dir = xyz(d);
        r.tmin = o.w, r.tmax = d.w;
        return r;
    }

    // Lane k's items of chunks c .. c + n of the range begin .. end of
    // `ids` (item begin + 32 (c + j) + lane for j < DACRT_BATCH), their
    // loads issued together; `valid` says which exist.
    __device__ static void load_batch(const u32* ids, u32 begin, u32 end, u32 c, u32 n, u32* word, bool* valid) {
#pragma unroll
        for (u32 k = 0; k < DACRT_BATCH; ++k) {
            const u32 i = begin + 32u * (c + k) + lane_id();
            valid[k] = k < n && i < end;
            word[k] = valid[k] ? task_pool_load(ids + i) : 0u;
        }
    }

    __device__ void load_tri_box(u32 id, float3& lo, float3& hi) const {
        lo = xyz(__ldg(boxes + 2 * (u64)id));
        hi = xyz(__ldg(boxes + 2 * (u64)id + 1));
    }

    // task.rs's can_hit: the ray may still get a hit from the task's
    // triangles.
    __device__ bool can_hit(const DacrtRay& r, u64 key, const DacrtTask& t) const {
        if (any_hit && key != DACRT_NO_KEY) return false;
        const float closest = key == DACRT_NO_KEY ? r.tmax : dacrt_key_t(key);
        float lo, hi;
        return clip_to(r.slab, t.bounds.min, t.bounds.max, r.slab.delta, lo, hi) &&
               reach(r.slab, t.whole, r.tmin, closest);
    }

    // DacrtConfig::is_direct (Eq. 2 and the minimum sizes).
    __device__ bool is_direct(u32 rays, u32 tris) const {
        const double r = rays, t = tris;
        return rays < min_rays || tris < min_tris || r * t * (double)c_inters < (r + t) * (double)c_sort;
    }

    // ------------------------------------------------------ setting tasks up
    // (lane 0, on a record it owns: being stored, or its own slot)

    // Concurrent: `n` words of arena `kind` (0 rays, 1 triangles), bump
    // allocated; false (and the spill bit set) when the arena is full.
    __device__ bool arena_alloc(u32 kind, u32 n, u32& at) const {
        const u64 old = atomicAdd(stats + DS_RAY_ARENA + kind, (u64)n);
        if ((u64)arena_base[kind] + old + n > (u64)arena_cap[kind]) {
            atomicOr(stats + DS_SPILLED, 1ull << kind);
            return false;
        }
        at = arena_base[kind] + (u32)old;
        return true;
    }

    // Whether a run ran out of arena: its tasks then skip their work.
    __device__ bool spilled() const { return concurrent && task_pool_load(stats + DS_SPILLED) != 0ull; }

    // A new task over the ranges, boxes and depth already in `r`: its
    // first phase; returns that phase's chunks.
    __device__ u32 start(TaskRecord& r) const {
        const u32 rays = r.end - r.begin, tris = r.payload[DP_TRI_END] - r.payload[DP_TRI_BEGIN];
        const u32 depth = r.payload[DP_DEPTH];
        r.step = 0u;
        atomicAdd(stats + DS_TASKS, 1ull);
        atomicMax(stats + DS_DEPTH, (u64)depth);
        if (is_direct(rays, tris) || depth >= max_depth) return start_direct(r, 0u, rays);
        // Partition1's scratch: in place, the second array at the task's
        // ranges; concurrent, fresh arena words (full: drain, see spilled).
        u32 b_rays = r.begin, b_tris = r.payload[DP_TRI_BEGIN];
        if (concurrent && !(arena_alloc(0u, rays, b_rays) && arena_alloc(1u, tris, b_tris))) return start_drain(r);
        r.payload[DP_B_RAYS] = b_rays, r.payload[DP_B_TRIS] = b_tris;
        if (rdh) {
            const u32 ray_step = sample_step(rays), tri_step = sample_step(tris);
            const u32 ray_samples = (rays + ray_step - 1u) / ray_step;
            const u32 tri_samples = (tris + tri_step - 1u) / tri_step;
            r.payload[DP_RAY_CHUNKS] = ray_samples, r.payload[DP_RAY_STEP] = ray_step;
            r.payload[DP_TRI_SAMPLES] = tri_samples, r.payload[DP_TRI_STEP] = tri_step;
            r.phase = DACRT_SPLIT;
            return (ray_samples + tri_samples + 31u) / 32u;
        }
        const Aabb bounds = load_box(r.payload + DP_BOUNDS);
        const u32 axis = largest_axis(bounds);
        float plane;
        if (!median_on(bounds, axis, plane)) return start_direct(r, 0u, rays);
        return start_pass1(r, axis, plane, 1u << axis);
    }

    __device__ u32 start_pass1(TaskRecord& r, u32 axis, float plane, u32 tried) const {
        r.payload[DP_AXIS] = axis;
        ((float*)r.payload)[DP_PLANE] = plane;
        r.payload[DP_TRIED] = tried;
        const u32 b_rays = r.payload[DP_B_RAYS];
        r.payload[DP_FRONT] = b_rays, r.payload[DP_BACK] = b_rays + (r.end - r.begin);
        for (u32 k = 0; k < 6; ++k) r.payload[DP_COUNTS + k] = 0u;
        r.payload[DP_FORWARD] = 0u;
        int* boxes_words = (int*)(r.payload + DP_BOXES);
        for (u32 k = 0; k < 18; ++k) boxes_words[k] = empty_box_word(k);
        const u32 ray_chunks = (r.end - r.begin + 31u) / 32u;
        r.payload[DP_RAY_CHUNKS] = ray_chunks;
        r.phase = DACRT_PASS1;
        return ray_chunks + (r.payload[DP_TRI_END] - r.payload[DP_TRI_BEGIN] + 31u) / 32u;
    }

    // Intersect `rays` rays (source 0: the task's range, culled per lane;
    // 1: the live rays at the front of its scratch B) with the triangles.
    __device__ u32 start_direct(TaskRecord& r, u32 source, u32 rays) const {
        const u32 tris = r.payload[DP_TRI_END] - r.payload[DP_TRI_BEGIN];
        const u32 group = min(32u, next_pow2(rays));
        u32 block = 32u * (32u / group);
        const u32 groups = (rays + group - 1u) / group;
        while ((u64)groups * ((tris + block - 1u) / block) > DACRT_MAX_CHUNKS) block *= 2u;
        r.payload[DP_SOURCE] = source, r.payload[DP_COUNT] = rays;
        r.payload[DP_GROUP] = group, r.payload[DP_BLOCK] = block;
        r.phase = DACRT_DIRECT;
        atomicAdd(stats + DS_DIRECT, 1ull);
        atomicAdd(stats + DS_PAIRS, (u64)rays * tris);
        return groups * ((tris + block - 1u) / block);
    }

    // A task that found its arena full: one chunk of nothing (the run
    // drains, see spilled(); the host runs the batch again).
    __device__ u32 start_drain(TaskRecord& r) const {
        r.payload[DP_SOURCE] = 0u, r.payload[DP_COUNT] = 0u;
        r.payload[DP_GROUP] = 1u, r.payload[DP_BLOCK] = 1024u;
        r.phase = DACRT_DIRECT;
        return 1u;
    }

    // ------------------------------------------------------------- the app

    __device__ void seed(TaskPool& pool) {
        const u32 rays = *ray_count, tris = *tri_count;
        if (rays == 0u || tris == 0u) return;
        const u32 slot = task_pool_store_begin(pool);
        if (slot == TASK_POOL_NONE) return;
        u32 chunks = 0;
        if (lane_id() == 0) {
            TaskRecord& r = pool.records[slot];
            Aabb root;
            root.min = make_float3(order_float(root_box[0]), order_float(root_box[1]), order_float(root_box[2]));
            root.max = make_float3(order_float(root_box[3]), order_float(root_box[4]), order_float(root_box[5]));
            r.begin = 0u, r.end = rays;
            r.payload[DP_TRI_BEGIN] = 0u, r.payload[DP_TRI_END] = tris;
            store_box(r.payload + DP_BOUNDS, root);
            store_box(r.payload + DP_WHOLE, root);
            r.payload[DP_DEPTH] = 0u;
            chunks = start(r);
        }
        chunks = __shfl_sync(CAUSTIC_FULL_MASK, chunks, 0);
        task_pool_store_end(pool, slot, chunks, 0u, TASK_POOL_NONE, TASK_POOL_NONE);
    }

    // The phase of `r`, as lane 0 read it: the warp takes one branch even
    // where lane 0 goes on to change the phase (a finisher's next step).
    __device__ static u32 phase_of(const TaskRecord& r) {
        return __shfl_sync(CAUSTIC_FULL_MASK, task_pool_load(&r.phase), 0);
    }

    __device__ void process(TaskPool& pool, u32 slot, u32 first, u32 count) {
        TaskRecord& r = pool.records[slot];
        // A run out of arena drains: every step finds nothing (no live
        // rays after Partition1), and the host runs the batch again. Lane
        // 0's reading decides for the warp.
        if (__shfl_sync(CAUSTIC_FULL_MASK, spilled() ? 1u : 0u, 0)) return;
        switch (phase_of(r)) {
            case DACRT_SPLIT: split_chunks(r, slot, first, count); break;
            case DACRT_PASS1: pass1_chunks(r, first, count); break;
            case DACRT_PASS2: pass2_chunks(r, first, count); break;
            default: direct_chunks(r, first, count); break;
        }
    }

    __device__ u32 next_step(TaskPool& pool, u32 slot) {
        TaskRecord& r = pool.records[slot];
        switch (phase_of(r)) {
            case DACRT_SPLIT: return choose_plane(r, slot);
            case DACRT_PASS1: return after_pass1(r);
            case DACRT_PASS2: return make_children(pool, r);
            default: return TASK_POOL_DONE;
        }
    }

    // ------------------------------------------------------- SplitPlane

    __device__ void split_chunks(TaskRecord& r, u32 slot, u32 first, u32 count) const {
        const DacrtTask t = view(r);
        const u32 ray_samples = task_pool_load(&r.payload[DP_RAY_CHUNKS]);
        const u32 ray_step = task_pool_load(&r.payload[DP_RAY_STEP]);
        const u32 samples = ray_samples + task_pool_load(&r.payload[DP_TRI_SAMPLES]);
        const u32 tri_step = task_pool_load(&r.payload[DP_TRI_STEP]);
        u32 axis;
        float plane;
        const bool valid = rdh_candidate(t.bounds, lane_id(), axis, plane);
        u32 counts[6] = {0u, 0u, 0u, 0u, 0u, 0u};
        for (u32 c = first; c < first + count; ++c) {
            // Lane k stages sample 32c + k: a ray (its slab constants, and
            // whether it is live here) or a triangle's box.
            const u32 s = 32u * c + lane_id();
            u32 kind = 0u;  // 0 none, 1 live ray, 2 culled ray, 3 triangle
            SlabRay ray = {};
            float3 lo = make_float3(0.f, 0.f, 0.f), hi = lo;
            if (s < ray_samples) {
                const u32 id = task_pool_load(ray_ids[0] + t.begin + s * ray_step);
                const DacrtRay rr = load_ray(id);
                ray = rr.slab;
                kind = can_hit(rr, task_pool_load(keys + id), t) ? 1u : 2u;
            } else if (s < samples) {
                const u32 id = task_pool_load(tri_ids[0] + t.tri_begin + (s - ray_samples) * tri_step);
                load_tri_box(id, lo, hi);
                kind = 3u;
            }
            for (u32 k = 0; k < 32u; ++k) {
                const u32 what = __shfl_sync(CAUSTIC_FULL_MASK, kind, k);
                if (what == 0u) break;
                if (what == 1u) {
                    SlabRay b = {};
                    b.o = make_float3(__shfl_sync(CAUSTIC_FULL_MASK, ray.o.x, k), __shfl_sync(CAUSTIC_FULL_MASK, ray.o.y, k),
                                      __shfl_sync(CAUSTIC_FULL_MASK, ray.o.z, k));
                    b.inv = make_float3(__shfl_sync(CAUSTIC_FULL_MASK, ray.inv.x, k),
                                        __shfl_sync(CAUSTIC_FULL_MASK, ray.inv.y, k),
                                        __shfl_sync(CAUSTIC_FULL_MASK, ray.inv.z, k));
                    b.parallel = __shfl_sync(CAUSTIC_FULL_MASK, ray.parallel, k);
                    b.delta = __shfl_sync(CAUSTIC_FULL_MASK, ray.delta, k);
                    const u32 side = ray_side(b, t.bounds, axis, plane);
                    if (valid && side < 3u) ++counts[side];
                } else if (what == 3u) {
                    const float3 l = make_float3(__shfl_sync(CAUSTIC_FULL_MASK, lo.x, k), __shfl_sync(CAUSTIC_FULL_MASK, lo.y, k),
                                                 __shfl_sync(CAUSTIC_FULL_MASK, lo.z, k));
                    const float3 h = make_float3(__shfl_sync(CAUSTIC_FULL_MASK, hi.x, k), __shfl_sync(CAUSTIC_FULL_MASK, hi.y, k),
                                                 __shfl_sync(CAUSTIC_FULL_MASK, hi.z, k));
                    if (valid) ++counts[3u + tri_side(l, h, axis, plane)];
                }
            }
        }
        u32* bin = bins + (u64)slot * DACRT_SLOT_BIN_WORDS + lane_id() * DACRT_BIN_WORDS;
        for (u32 k = 0; k < 6u; ++k)
            if (counts[k] != 0u) atomicAdd(bin + k, counts[k]);
    }

    // The last finisher of SplitPlane: the cheapest candidate (the median
    // when none is valid), then Partition1; the bins cleared for the
    // slot's next task.
    __device__ u32 choose_plane(TaskRecord& r, u32 slot) const {
        const Aabb bounds = load_box(r.payload + DP_BOUNDS);
        u32* bin = bins + (u64)slot * DACRT_SLOT_BIN_WORDS + lane_id() * DACRT_BIN_WORDS;
        u32 counts[6];
        for (u32 k = 0; k < 6u; ++k) counts[k] = task_pool_load(bin + k), bin[k] = 0u;
        u32 axis;
        float plane;
        u64 cost = rdh_candidate(bounds, lane_id(), axis, plane) ? rdh_pairs(counts) : ~0ull;
        u32 best = lane_id();
        for (u32 d = 16; d > 0; d >>= 1) {
            const u64 other_cost = __shfl_xor_sync(CAUSTIC_FULL_MASK, cost, d);
            const u32 other = __shfl_xor_sync(CAUSTIC_FULL_MASK, best, d);
            if (other_cost < cost || (other_cost == cost && other < best)) cost = other_cost, best = other;
        }
        u32 chunks = 0;
        if (lane_id() == 0) {
            if (cost != ~0ull) {
                rdh_candidate(bounds, best, axis, plane);
                chunks = start_pass1(r, axis, plane, 1u << axis);
            } else {
                axis = largest_axis(bounds);
                chunks = median_on(bounds, axis, plane) ? start_pass1(r, axis, plane, 1u << axis)
                                                        : start_direct(r, 0u, r.end - r.begin);
            }
        }
        return __shfl_sync(CAUSTIC_FULL_MASK, chunks, 0);
    }

    // ------------------------------------------------------- Partition1

    __device__ void pass1_chunks(TaskRecord& r, u32 first, u32 count) const {
        const DacrtTask t = view(r);
        const u32 ray_chunks = task_pool_load(&r.payload[DP_RAY_CHUNKS]);
        u32 counts[6] = {0u, 0u, 0u, 0u, 0u, 0u};
        u32 forward = 0u;
        // Triangle boxes per class (lo xyz, hi xyz), merged at the end.
        float v[18];
        for (u32 k = 0; k < 18; ++k) v[k] = (k % 6u) < 3u ? CAUSTIC_INF : -CAUSTIC_INF;
        bool tris_seen = false;
        const u32 end = first + count;
        for (u32 c = first; c < end;) {
            if (c < ray_chunks) {
                const u32 n = min(DACRT_BATCH, min(end, ray_chunks) - c);
                pass1_rays(r, t, c, n, counts, forward);
                c += n;
                continue;
            }
            tris_seen = true;
            const u32 n = min(DACRT_BATCH, end - c);
            pass1_tris(t, c - ray_chunks, n, counts, v);
            c += n;
        }
        if (lane_id() == 0) {
            for (u32 k = 0; k < 6u; ++k)
                if (counts[k] != 0u) atomicAdd(&r.payload[DP_COUNTS + k], counts[k]);
            if (forward != 0u) atomicAdd(&r.payload[DP_FORWARD], forward);
        }
        if (!tris_seen) return;
        for (u32 k = 0; k < 18; ++k)
            for (u32 d = 16; d > 0; d >>= 1) {
                const float other = __shfl_xor_sync(CAUSTIC_FULL_MASK, v[k], d);
                v[k] = (k % 6u) < 3u ? fminf(v[k], other) : fmaxf(v[k], other);
            }
        float mine = 0.0f;
        for (u32 k = 0; k < 18; ++k)
            if (lane_id() == k) mine = v[k];
        const u32 lane = lane_id();
        if (lane < 18u && counts[3u + lane / 6u] != 0u) {
            int* words = (int*)(r.payload + DP_BOXES);
            if ((lane % 6u) < 3u)
                atomicMin(words + lane, float_order(mine));
            else
                atomicMax(words + lane, float_order(mine));
        }
    }

    // Chunks c .. c + n (n <= DACRT_BATCH) of rays, their loads in flight
    // together: culled, classified, to the front (live) or the back
    // (culled) of the range in B, one atomic per cursor for all of them.
    __device__ void pass1_rays(TaskRecord& r, const DacrtTask& t, u32 c, u32 n, u32* counts, u32& forward) const {
        u32 id[DACRT_BATCH], side[DACRT_BATCH];
        bool valid[DACRT_BATCH], live[DACRT_BATCH], ahead[DACRT_BATCH];
        u64 key[DACRT_BATCH];
        load_batch(ray_ids[0], t.begin, t.end, c, n, id, valid);
#pragma unroll
        for (u32 k = 0; k < DACRT_BATCH; ++k) key[k] = valid[k] ? task_pool_load(keys + id[k]) : DACRT_NO_KEY;
        u32 lives[DACRT_BATCH], culled[DACRT_BATCH], total_live = 0u, total_culled = 0u;
#pragma unroll
        for (u32 k = 0; k < DACRT_BATCH; ++k) {
            live[k] = false, side[k] = 3u, ahead[k] = false;
            if (valid[k]) {
                const DacrtRay ray = load_ray(id[k]);
                ahead[k] = component(ray.dir, t.axis) > 0.0f;
                live[k] = can_hit(ray, key[k], t);
                // A ray the rounding of the halves' tests puts in neither
                // (it met the whole box) counts as both, as on the CPU.
                if (live[k]) {
                    const u32 s = ray_side(ray.slab, t.bounds, t.axis, t.plane);
                    side[k] = s == 3u ? 1u : s;
                }
            }
            lives[k] = __ballot_sync(CAUSTIC_FULL_MASK, live[k]);
            culled[k] = __ballot_sync(CAUSTIC_FULL_MASK, valid[k] && !live[k]);
            total_live += __popc(lives[k]), total_culled += __popc(culled[k]);
            for (u32 s = 0; s < 3u; ++s) counts[s] += __popc(__ballot_sync(CAUSTIC_FULL_MASK, live[k] && side[k] == s));
            forward += __popc(__ballot_sync(CAUSTIC_FULL_MASK, live[k] && side[k] == 1u && ahead[k]));
        }
        u32 front = 0u, back = 0u;
        if (lane_id() == 0) {
            if (total_live) front = atomicAdd(&r.payload[DP_FRONT], total_live);
            if (total_culled) back = atomicSub(&r.payload[DP_BACK], total_culled);
        }
        front = __shfl_sync(CAUSTIC_FULL_MASK, front, 0);
        back = __shfl_sync(CAUSTIC_FULL_MASK, back, 0);
#pragma unroll
        for (u32 k = 0; k < DACRT_BATCH; ++k) {
            if (live[k])
                ray_ids[1][front + __popc(lives[k] & lanemask_lt())] = id[k] | (side[k] << DACRT_CLASS_SHIFT);
            else if (valid[k] && !concurrent)
                ray_ids[1][back - 1u - __popc(culled[k] & lanemask_lt())] = id[k];
            front += __popc(lives[k]), back -= __popc(culled[k]);
        }
    }

    // Chunks c .. c + n of triangles (counted from the range's start):
    // classified by their boxes, copied to B with their class, their boxes
    // merged per class into v.
    __device__ void pass1_tris(const DacrtTask& t, u32 c, u32 n, u32* counts, float* v) const {
        u32 id[DACRT_BATCH];
        bool valid[DACRT_BATCH];
        load_batch(tri_ids[0], t.tri_begin, t.tri_end, c, n, id, valid);
#pragma unroll
        for (u32 k = 0; k < DACRT_BATCH; ++k) {
            u32 side = 3u;
            if (valid[k]) {
                float3 lo, hi;
                load_tri_box(id[k], lo, hi);
                side = tri_side(lo, hi, t.axis, t.plane);
                tri_ids[1][t.b_tris + 32u * (c + k) + lane_id()] = id[k] | (side << DACRT_CLASS_SHIFT);
                const float l[3] = {lo.x, lo.y, lo.z}, h[3] = {hi.x, hi.y, hi.z};
                // A uniform loop over the classes keeps v in registers.
                for (u32 s = 0; s < 3u; ++s) {
                    if (s != side) continue;
                    for (u32 a = 0; a < 3u; ++a)
                        v[6 * s + a] = fminf(v[6 * s + a], l[a]), v[6 * s + 3 + a] = fmaxf(v[6 * s + 3 + a], h[a]);
                }
            }
            for (u32 s = 0; s < 3u; ++s) counts[3u + s] += __popc(__ballot_sync(CAUSTIC_FULL_MASK, side == s));
        }
    }

    // The last finisher of Partition1: done, intersect, another plane, or
    // Partition2.
    __device__ u32 after_pass1(TaskRecord& r) const {
        u32 chunks = 0u;
        if (lane_id() == 0) chunks = decide(r);
        return __shfl_sync(CAUSTIC_FULL_MASK, chunks, 0);
    }

    __device__ u32 decide(TaskRecord& r) const {
        const u32 begin = task_pool_load(&r.begin), end = task_pool_load(&r.end);
        const u32 live = task_pool_load(&r.payload[DP_FRONT]) - task_pool_load(&r.payload[DP_B_RAYS]);
        const u32 tri_begin = task_pool_load(&r.payload[DP_TRI_BEGIN]);
        const u32 tris = task_pool_load(&r.payload[DP_TRI_END]) - tri_begin;
        u32 c[6];
        for (u32 k = 0; k < 6u; ++k) c[k] = task_pool_load(&r.payload[DP_COUNTS + k]);
        if (live == 0u) return TASK_POOL_DONE;
        if (is_direct(live, tris)) return start_direct(r, 1u, live);
        if (c[3] + c[5] == 0u) {
            // Every triangle straddles the plane: the median of another
            // axis that separates some (task.rs's separating_plane).
            const Aabb bounds = load_box(r.payload + DP_BOUNDS);
            const u32 tried = task_pool_load(&r.payload[DP_TRIED]);
            for (u32 axis = 0; axis < 3u; ++axis) {
                float plane;
                if (!((tried >> axis) & 1u) && median_on(bounds, axis, plane))
                    return start_pass1(r, axis, plane, tried | (1u << axis));
            }
            return start_direct(r, 1u, live);
        }
        // The children's ranges: in place over the task's own; concurrent,
        // fresh arena words for the live rays and the triangles.
        u32 out_rays = begin, out_tris = tri_begin;
        if (concurrent && !(arena_alloc(0u, live, out_rays) && arena_alloc(1u, tris, out_tris)))
            return start_drain(r);
        r.payload[DP_OUT_RAYS] = out_rays, r.payload[DP_OUT_TRIS] = out_tris;
        r.payload[DP_CURSORS + 0] = out_rays;
        r.payload[DP_CURSORS + 1] = out_rays + c[0];
        r.payload[DP_CURSORS + 2] = out_rays + c[0] + c[1];
        r.payload[DP_CURSORS + 3] = out_tris;
        r.payload[DP_CURSORS + 4] = out_tris + c[3];
        r.payload[DP_CURSORS + 5] = out_tris + c[3] + c[4];
        r.phase = DACRT_PASS2;
        return (end - begin + 31u) / 32u + (tris + 31u) / 32u;
    }

    // ------------------------------------------------------- Partition2

    __device__ void pass2_chunks(TaskRecord& r, u32 first, u32 count) const {
        const DacrtTask t = view(r);
        const u32 ray_chunks = task_pool_load(&r.payload[DP_RAY_CHUNKS]);
        const u32 live_end = task_pool_load(&r.payload[DP_FRONT]);
        const u32 end = first + count;
        for (u32 c = first; c < end;) {
            const bool rays_chunk = c < ray_chunks;
            const u32 n = min(DACRT_BATCH, (rays_chunk ? min(end, ray_chunks) : end) - c);
            pass2_batch(r, t, rays_chunk, rays_chunk ? c : c - ray_chunks, n, live_end);
            c += n;
        }
    }

    // Chunks c .. c + n of the rays (or the triangles) from B back to A:
    // live items to their class's part by one atomic per class cursor for
    // all of them; culled rays keep their place (the tail of the range).
    __device__ void pass2_batch(TaskRecord& r, const DacrtTask& t, bool rays_chunk, u32 c, u32 n,
                                u32 live_end) const {
        const u32 begin = rays_chunk ? t.b_rays : t.b_tris;
        const u32 stop = begin + (rays_chunk ? t.end - t.begin : t.tri_end - t.tri_begin);
        const u32* src = rays_chunk ? ray_ids[1] : tri_ids[1];
        u32* dst = rays_chunk ? ray_ids[0] : tri_ids[0];
        u32 word[DACRT_BATCH], masks[DACRT_BATCH][3];
        bool valid[DACRT_BATCH], placed[DACRT_BATCH];
        load_batch(src, begin, stop, c, n, word, valid);
        u32 total[3] = {0u, 0u, 0u};
#pragma unroll
        for (u32 k = 0; k < DACRT_BATCH; ++k) {
            const u32 i = begin + 32u * (c + k) + lane_id();
            placed[k] = valid[k] && (!rays_chunk || i < live_end);
            const u32 cls = word[k] >> DACRT_CLASS_SHIFT;
            for (u32 s = 0; s < 3u; ++s) {
                masks[k][s] = __ballot_sync(CAUSTIC_FULL_MASK, placed[k] && cls == s);
                total[s] += __popc(masks[k][s]);
            }
            // In place, culled rays keep their place (the tail of the range,
            // which siblings waiting on this task still read).
            if (valid[k] && !placed[k] && !concurrent) dst[i] = word[k];
        }
        u32 at[3] = {0u, 0u, 0u};
        if (lane_id() == 0)
            for (u32 s = 0; s < 3u; ++s)
                if (total[s]) at[s] = atomicAdd(&r.payload[DP_CURSORS + (rays_chunk ? 0u : 3u) + s], total[s]);
        for (u32 s = 0; s < 3u; ++s) at[s] = __shfl_sync(CAUSTIC_FULL_MASK, at[s], 0);
#pragma unroll
        for (u32 k = 0; k < DACRT_BATCH; ++k) {
            const u32 cls = word[k] >> DACRT_CLASS_SHIFT;
            for (u32 s = 0; s < 3u; ++s) {
                if (placed[k] && cls == s) dst[at[s] + __popc(masks[k][s] & lanemask_lt())] = word[k] & DACRT_ID_MASK;
                at[s] += __popc(masks[k][s]);
            }
        }
    }

    // The last finisher of Partition2: the seven children (see the file's
    // head and schedule.rs).
    __device__ u32 make_children(TaskPool& pool, TaskRecord& r) const {
        DacrtTask t = view(r);
        // The children's ranges start at Partition2's output.
        t.begin = task_pool_load(&r.payload[DP_OUT_RAYS]);
        t.tri_begin = task_pool_load(&r.payload[DP_OUT_TRIS]);
        u32 c[6];
        for (u32 k = 0; k < 6u; ++k) c[k] = task_pool_load(&r.payload[DP_COUNTS + k]);
        float classes[18];
        for (u32 k = 0; k < 18u; ++k) classes[k] = order_float(task_pool_load((const int*)&r.payload[DP_BOXES + k]));
        const u32 depth = task_pool_load(&r.payload[DP_DEPTH]);
        // Every lane has read the record before lane 0 rewrites it (the
        // slot's reuse).
        __syncwarp();
        if (concurrent) return concurrent_children(pool, r, t, c, classes, depth);
        const u32 inherited[2] = {task_pool_load(&r.activate[0]), task_pool_load(&r.activate[1])};
        u32 mask = 0u;
        for (u32 k = 0; k < 6u; ++k) mask |= (c[k] != 0u ? 1u : 0u) << k;
        const u32* table = plan + mask * DACRT_PLAN_WORDS;
        const u32 sinks = table[7];
        // The parent's targets now wait for `sinks` finishers instead of
        // one; they cannot start before this task ends, so this comes
        // before any child can finish.
        if (lane_id() == 0 && sinks > 1u)
            for (u32 k = 0; k < 2u; ++k)
                if (inherited[k] != TASK_POOL_NONE) atomicSub(&pool.records[inherited[k]].pending, (int)(sinks - 1u));
        __syncwarp();
        u32 reuse = 7u;
        for (u32 k = 0; k < 7u; ++k)
            if (reuse == 7u && (table[k] & 1u) && ((table[k] >> 1) & 7u) == 0u) reuse = k;
        if (reuse == 7u) return TASK_POOL_DONE;
        u32 slots[7];
        // Dependants before the tasks that activate them: wave 3, 2, 1.
        const u32 order[7] = {4u, 5u, 1u, 2u, 0u, 3u, 6u};
        for (u32 k = 0; k < 7u; ++k) {
            const u32 child = order[k];
            slots[child] = TASK_POOL_NONE;
            if (!(table[child] & 1u) || child == reuse) continue;
            const u32 slot = task_pool_store_begin(pool);
            if (slot == TASK_POOL_NONE) return TASK_POOL_DONE;
            slots[child] = slot;
            u32 chunks = 0u, targets[2] = {TASK_POOL_NONE, TASK_POOL_NONE};
            if (lane_id() == 0) {
                chunks = write_child(pool.records[slot], child, t, c, classes, depth);
                child_targets(table[child], slots, inherited, targets);
            }
            chunks = __shfl_sync(CAUSTIC_FULL_MASK, chunks, 0);
            targets[0] = __shfl_sync(CAUSTIC_FULL_MASK, targets[0], 0);
            targets[1] = __shfl_sync(CAUSTIC_FULL_MASK, targets[1], 0);
            task_pool_store_end(pool, slot, chunks, (table[child] >> 1) & 7u, targets[0], targets[1]);
        }
        u32 chunks = 0u;
        if (lane_id() == 0) {
            u32 targets[2];
            child_targets(table[reuse], slots, inherited, targets);
            chunks = write_child(r, reuse, t, c, classes, depth);
            r.activate[0] = targets[0], r.activate[1] = targets[1];
        }
        __syncwarp();
        return __shfl_sync(CAUSTIC_FULL_MASK, chunks, 0);
    }

    // Concurrent: every child present (rays and triangles in its classes)
    // starts at once; the first reuses the slot. Near before far: at the
    // top `near_levels` levels the straddling rays' child on the far side
    // (T5 when most of them head towards +, else T3) waits for the near
    // one's subtree, so rays that hit there are culled from it (the
    // waves' T3 → T5 order without their range conflicts). A task's
    // activation targets (set only below such a near child) pass to all
    // its children, whose finishing each counts: the targets' pending
    // counts grow first by one per extra finisher, as in make_children.
    __device__ u32 concurrent_children(TaskPool& pool, TaskRecord& r, const DacrtTask& t, const u32* c,
                                       const float* classes, u32 depth) const {
        const u32 inherited[2] = {task_pool_load(&r.activate[0]), task_pool_load(&r.activate[1])};
        bool present[7];
        u32 count = 0u;
        for (u32 child = 0; child < 7u; ++child) {
            present[child] = c[child_rays(child)] != 0u && c[3u + child_tris(child)] != 0u;
            count += present[child] ? 1u : 0u;
        }
        if (count == 0u) return TASK_POOL_DONE;
        u32 near = 7u, far = 7u;
        if (depth < near_levels && present[2] && present[4]) {
            const bool forward = 2u * task_pool_load(&r.payload[DP_FORWARD]) >= c[1];
            near = forward ? 2u : 4u, far = forward ? 4u : 2u;
        }
        const u32 sinks = count - (near < 7u ? 1u : 0u);
        __syncwarp();
        if (lane_id() == 0 && sinks > 1u)
            for (u32 k = 0; k < 2u; ++k)
                if (inherited[k] != TASK_POOL_NONE) atomicSub(&pool.records[inherited[k]].pending, (int)(sinks - 1u));
        __syncwarp();
        // The far child first: a dependant is stored before its activator.
        u32 far_slot = TASK_POOL_NONE;
        if (far < 7u) {
            far_slot = store_child(pool, far, t, c, classes, depth, 1u, inherited[0], inherited[1]);
            if (far_slot == TASK_POOL_NONE) return TASK_POOL_DONE;
        }
        u32 reuse = 7u;
        for (u32 child = 0; child < 7u; ++child) {
            if (!present[child] || child == far) continue;
            if (reuse == 7u) {
                reuse = child;
                continue;
            }
            const bool to_far = child == near;
            const u32 slot = store_child(pool, child, t, c, classes, depth, 0u, to_far ? far_slot : inherited[0],
                                         to_far ? TASK_POOL_NONE : inherited[1]);
            if (slot == TASK_POOL_NONE) return TASK_POOL_DONE;
        }
        u32 chunks = 0u;
        if (lane_id() == 0) {
            chunks = write_child(r, reuse, t, c, classes, depth);
            r.activate[0] = reuse == near ? far_slot : inherited[0];
            r.activate[1] = reuse == near ? TASK_POOL_NONE : inherited[1];
        }
        __syncwarp();
        return __shfl_sync(CAUSTIC_FULL_MASK, chunks, 0);
    }

    // Child T(child+1) in a new slot, waiting for `waits` tasks and
    // notifying the two targets; the slot, or NONE when the pool failed.
    __device__ u32 store_child(TaskPool& pool, u32 child, const DacrtTask& t, const u32* c, const float* classes,
                               u32 depth, u32 waits, u32 target0, u32 target1) const {
        const u32 slot = task_pool_store_begin(pool);
        if (slot == TASK_POOL_NONE) return TASK_POOL_NONE;
        u32 chunks = 0u;
        if (lane_id() == 0) chunks = write_child(pool.records[slot], child, t, c, classes, depth);
        chunks = __shfl_sync(CAUSTIC_FULL_MASK, chunks, 0);
        task_pool_store_end(pool, slot, chunks, waits, target0, target1);
        return slot;
    }

    // Lane 0: whom a child notifies, from its table word.
    __device__ static void child_targets(u32 word, const u32* slots, const u32* inherited, u32* targets) {
        const u32 first = (word >> 4) & 15u, second = (word >> 8) & 15u;
        if (first == DACRT_TO_PARENT) {
            targets[0] = inherited[0], targets[1] = inherited[1];
            return;
        }
        targets[0] = first < 7u ? slots[first] : TASK_POOL_NONE;
        targets[1] = second < 7u ? slots[second] : TASK_POOL_NONE;
    }

    // Lane 0: child T(c+1) of the task `t` in record `r`; returns its first
    // step's chunks.
    __device__ u32 write_child(TaskRecord& r, u32 child, const DacrtTask& t, const u32* c, const float* classes,
                               u32 depth) const {
        const u32 rc = child_rays(child), tc = child_tris(child);
        const u32 ray_lo[3] = {t.begin, t.begin + c[0], t.begin + c[0] + c[1]};
        const u32 tri_lo[3] = {t.tri_begin, t.tri_begin + c[3], t.tri_begin + c[3] + c[4]};
        r.begin = ray_lo[rc], r.end = ray_lo[rc] + c[rc];
        r.payload[DP_TRI_BEGIN] = tri_lo[tc], r.payload[DP_TRI_END] = tri_lo[tc] + c[3u + tc];
        // T1..T3 take the left half, T5..T7 the right one, T4 the box.
        Aabb side = t.bounds;
        if (rc == 0u || tc == 0u) side.max = with_component(side.max, t.axis, t.plane);
        if (rc == 2u || tc == 2u) side.min = with_component(side.min, t.axis, t.plane);
        Aabb whole;
        whole.min = make_float3(classes[6 * tc], classes[6 * tc + 1], classes[6 * tc + 2]);
        whole.max = make_float3(classes[6 * tc + 3], classes[6 * tc + 4], classes[6 * tc + 5]);
        store_box(r.payload + DP_BOUNDS, intersection(side, whole));
        store_box(r.payload + DP_WHOLE, whole);
        r.payload[DP_DEPTH] = depth + 1u;
        return start(r);
    }

    // ---------------------------------------------------------- Intersect

    __device__ void direct_chunks(TaskRecord& r, u32 first, u32 count) const {
        const DacrtTask t = view(r);
        const u32 source = task_pool_load(&r.payload[DP_SOURCE]);
        const u32 n = task_pool_load(&r.payload[DP_COUNT]);
        const u32 group = task_pool_load(&r.payload[DP_GROUP]);
        const u32 block = task_pool_load(&r.payload[DP_BLOCK]);
        if (n == 0u) return;  // a drained task (start_drain)
        const u32 groups = (n + group - 1u) / group;
        const u32 lanes = 32u / group;
        const u32 slot = lane_id() % group, sub = lane_id() / group;
        for (u32 c = first; c < first + count; ++c) {
            const u32 i = (c % groups) * group + slot;
            const u32 j0 = t.tri_begin + (c / groups) * block;
            const u32 j1 = min(j0 + block, t.tri_end);
            bool valid = i < n;
            u32 id = 0u;
            u64 before = DACRT_NO_KEY;
            DacrtRay ray = {};
            if (valid) {
                const u32 word = task_pool_load(source == 0u ? ray_ids[0] + t.begin + i : ray_ids[1] + t.b_rays + i);
                id = word & DACRT_ID_MASK;
                before = task_pool_load(keys + id);
                ray = load_ray(id);
                // Culled again with the key as it is now: hits found since
                // Partition1 (another task's) may leave this one nothing.
                valid = can_hit(ray, before, t);
                if (any_hit && before != DACRT_NO_KEY) valid = false;
            }
            const TriangleTest test = triangle_test_new(ray.slab.o, ray.dir);
            u64 best = before;
            // Up to and including the closest hit so far: an equal t with a
            // lower id wins the tie.
            float limit = before == DACRT_NO_KEY ? ray.tmax : next_up(dacrt_key_t(before));
            bool done = !valid;
            // The block's triangles, 32 at a time, staged in shared memory
            // by the whole warp (their loads in flight together); lane
            // `sub` of each ray's group tests every lanes-th of them.
            for (u32 base = j0; base < j1; base += 32u) {
                const u32 k = base + lane_id();
                if (k < j1) {
                    const u32 tri = task_pool_load(tri_ids[0] + k);
                    const float4* w = reinterpret_cast<const float4*>(tris) + 3 * (u64)tri;
                    shared->v[lane_id()][0] = __ldg(w);
                    shared->v[lane_id()][1] = __ldg(w + 1);
                    shared->v[lane_id()][2] = __ldg(w + 2);
                    shared->id[lane_id()] = tri;
                }
                __syncwarp();
                const u32 m = min(32u, j1 - base);
                for (u32 q = sub; q < m && !done; q += lanes) {
                    float th, u, v;
                    if (!triangle_intersect(test, xyz(shared->v[q][0]), xyz(shared->v[q][1]), xyz(shared->v[q][2]),
                                            ray.tmin, limit, th, u, v))
                        continue;
                    const u64 key = dacrt_key(th, shared->id[q]);
                    if (key < best) best = key, limit = next_up(th);
                    done = any_hit;
                }
                __syncwarp();
            }
            for (u32 d = group; d < 32u; d <<= 1) {
                const u64 other = __shfl_xor_sync(CAUSTIC_FULL_MASK, best, d);
                best = other < best ? other : best;
            }
            if (sub == 0u && valid && best < before) atomicMin(keys + id, best);
        }
    }
};

// The whole trace in one launch of persistent warps. Inputs: the rays and
// triangles (scene order), the triangles' boxes, both index arrays (A
// holding the traceable rays and the finite triangles, counted in
// ray_count and tri_count), the per-ray keys (DACRT_NO_KEY), the RDH bins
// (zero), schedule.rs's table, the root box (order ints) and the config.
// Six blocks of DACRT_THREADS an SM at least (24 warps, at most 85
// registers a thread): more warps hide the direct tests' latency; on an
// H100 (2026-11-27) Sponza's primary rays traced 5-7 % faster than with the
// compiler's own choice (96 registers, 20 warps an SM), and eight blocks
// (64 registers, more spills) no faster.
extern "C" __global__ void __launch_bounds__(DACRT_THREADS, 6)
dacrt_trace(const Ray* rays, const Triangle* tris, const float4* boxes, u32* ray_ids0, u32* ray_ids1, u32* tri_ids0,
            u32* tri_ids1, u64* keys, u32* bins, const u32* plan, const u32* ray_count, const u32* tri_count,
            const int* root_box, u64* stats, const u32* params, u32 any_hit, u64* headers, u32* records, u32* control,
            u64* counters, u32 capacity, u64 watchdog_ns) {
    __shared__ TaskPoolDacrt::Shared shared[DACRT_WARPS];
    TaskPool pool = task_pool_attach(headers, records, control, counters, capacity, watchdog_ns);
    TaskPoolDacrt app;
    app.shared = &shared[warp_id()];
    app.rays = rays, app.tris = tris, app.boxes = boxes;
    // Concurrent, the second arrays are null: every range (the root's,
    // the scratch, the children's) lies in one arena per kind.
    app.ray_ids[0] = ray_ids0, app.ray_ids[1] = ray_ids1 != nullptr ? ray_ids1 : ray_ids0;
    app.tri_ids[0] = tri_ids0, app.tri_ids[1] = tri_ids1 != nullptr ? tri_ids1 : tri_ids0;
    app.keys = keys, app.bins = bins, app.plan = plan;
    app.ray_count = ray_count, app.tri_count = tri_count, app.root_box = root_box, app.stats = stats;
    // The largest absolute coordinate of the finite triangles: the rays'
    // thickness scale (task.rs's `scale`).
    float scale = 0.0f;
    for (u32 k = 0; k < 6u; ++k) scale = glam_max(scale, fabsf(order_float(__ldg(root_box + k))));
    app.scale = scale;
    app.min_rays = __ldg(params + DACRT_MIN_RAYS), app.min_tris = __ldg(params + DACRT_MIN_TRIS);
    app.max_depth = __ldg(params + DACRT_MAX_DEPTH), app.rdh = __ldg(params + DACRT_SPLIT_RDH) != 0u;
    app.c_inters = __uint_as_float(__ldg(params + DACRT_C_INTERS));
    app.c_sort = __uint_as_float(__ldg(params + DACRT_C_SORT));
    app.any_hit = any_hit != 0u;
    app.concurrent = __ldg(params + DACRT_CONCURRENT) != 0u;
    app.arena_base[0] = __ldg(ray_count), app.arena_cap[0] = __ldg(params + DACRT_RAY_ARENA);
    app.arena_base[1] = __ldg(tri_count), app.arena_cap[1] = __ldg(params + DACRT_TRI_ARENA);
    app.near_levels = __ldg(params + DACRT_NEAR_LEVELS);
    task_pool_run(pool, app);
}

// Traceable flags of the rays (caustic_accel::is_traceable); thread 0 also
// empties the root box and the stats.
extern "C" __global__ void __launch_bounds__(256)
dacrt_prepare_rays(const Ray* rays, u64 n, u32* traceable, int* root_box, u64* stats) {
    if (global_thread() == 0) {
        for (u32 k = 0; k < 6u; ++k) root_box[k] = empty_box_word(k);
        for (u32 k = 0; k < DS_WORDS; ++k) stats[k] = 0ull;
    }
    for (u64 i = global_thread(); i < n; i += grid_threads()) {
        const float4* w = reinterpret_cast<const float4*>(rays) + 2 * i;
        traceable[i] = is_traceable(__ldg(w), __ldg(w + 1)) ? 1u : 0u;
    }
}

// Each triangle's box (two float4 words), whether it is finite, and the
// box of the finite ones (root_box, order ints, merged with atomics).
extern "C" __global__ void __launch_bounds__(256)
dacrt_prepare_triangles(const Triangle* tris, u64 n, float4* boxes, u32* finite, int* root_box) {
    float v[6] = {CAUSTIC_INF, CAUSTIC_INF, CAUSTIC_INF, -CAUSTIC_INF, -CAUSTIC_INF, -CAUSTIC_INF};
    const u64 stride = grid_threads();
    // Whole warps iterate together, so the reduction below has every lane.
    const u64 rounds = (n + stride - 1u) / stride;
    for (u64 round = 0; round < rounds; ++round) {
        const u64 i = round * stride + global_thread();
        bool ok = false;
        if (i < n) {
            float3 a, b, c;
            load_triangle(tris, (u32)i, a, b, c);
            ok = finite3(a) && finite3(b) && finite3(c);
            const Aabb box = triangle_bounds(a, b, c);
            boxes[2 * i] = make_float4(box.min.x, box.min.y, box.min.z, 0.0f);
            boxes[2 * i + 1] = make_float4(box.max.x, box.max.y, box.max.z, 0.0f);
            finite[i] = ok ? 1u : 0u;
            if (ok) {
                v[0] = fminf(v[0], box.min.x), v[1] = fminf(v[1], box.min.y), v[2] = fminf(v[2], box.min.z);
                v[3] = fmaxf(v[3], box.max.x), v[4] = fmaxf(v[4], box.max.y), v[5] = fmaxf(v[5], box.max.z);
            }
        }
    }
    for (u32 k = 0; k < 6u; ++k)
        for (u32 d = 16; d > 0; d >>= 1) {
            const float other = __shfl_xor_sync(CAUSTIC_FULL_MASK, v[k], d);
            v[k] = k < 3u ? fminf(v[k], other) : fmaxf(v[k], other);
        }
    if (lane_id() == 0 && v[0] <= v[3]) {
        for (u32 k = 0; k < 3u; ++k) atomicMin(root_box + k, float_order(v[k]));
        for (u32 k = 3; k < 6u; ++k) atomicMax(root_box + k, float_order(v[k]));
    }
}

// The hits from the keys: the winning triangle's test run again (t, u, v as
// every traversal computes them), or occlusion flags for any-hit. A key
// whose test does not give it back is counted in stats[DS_LOST] (never
// expected; the host reports it).
extern "C" __global__ void __launch_bounds__(256)
dacrt_resolve(const Ray* rays, const Triangle* tris, const u64* keys, u64 n, Hit* hits, u32* occluded, u32 any_hit,
              u64* stats) {
    for (u64 i = global_thread(); i < n; i += grid_threads()) {
        const u64 key = keys[i];
        if (any_hit) {
            occluded[i] = key != DACRT_NO_KEY ? 1u : 0u;
            continue;
        }
        Hit h;
        h.t = CAUSTIC_INF, h.prim = NO_HIT, h.u = 0.0f, h.v = 0.0f;
        if (key != DACRT_NO_KEY) {
            const float4* w = reinterpret_cast<const float4*>(rays) + 2 * i;
            const float4 o = __ldg(w), d = __ldg(w + 1);
            const u32 prim = (u32)key;
            float3 a, b, c;
            load_triangle(tris, prim, a, b, c);
            float t, u, v;
            if (triangle_intersect(triangle_test_new(xyz(o), xyz(d)), a, b, c, o.w, d.w, t, u, v) &&
                dacrt_key(t, prim) == key)
                h.t = t, h.prim = prim, h.u = u, h.v = v;
            else
                atomicAdd(stats + DS_LOST, 1ull);
        }
        hits[i] = h;
    }
}
