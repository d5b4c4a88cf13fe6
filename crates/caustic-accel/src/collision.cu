// collision.cu: the collision experiment's frames on the device (Vinkler,
// Bittner, Havran and Hapala 2013, §6.2; caustic_accel::collision): the
// segments of a frame made from the agents' paths by the counter-based
// generator, and each agent's nearest hit reduced from its segments' hits.
//
// Both repeat collision.rs operation for operation, every f32 operation an
// _rn intrinsic (NVRTC would otherwise fuse a * b + c into one fused
// multiply-add, which rounds once where Rust rounds twice), so the rays and
// the answers are the CPU's bit for bit.
#include "common.cuh"
#include "bvh.cuh"

#define COLLISION_THREADS 256u
// collision::DIRECTION_ATTEMPTS.
#define COLLISION_ATTEMPTS 64u

// collision::mix64: the splitmix64 finaliser.
__device__ __forceinline__ u64 mix64(u64 z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// collision::segment_direction: Marsaglia's point on the sphere from a
// point of the unit disc, drawn by rejection from the hash of
// (seed, agent, frame, ray, attempt).
__device__ __forceinline__ float3 segment_direction(u64 seed, u32 agent, u32 frame, u32 ray) {
    const u64 stream = mix64(seed ^ 0x5eedc011a9e70001ull ^ (((u64)agent << 32) | (u64)frame));
    for (u32 attempt = 0; attempt < COLLISION_ATTEMPTS; ++attempt) {
        const u64 h = mix64(stream ^ (((u64)ray << 32) | (u64)attempt));
        const float scale = 1.0f / 8388608.0f;
        const float x1 = __fsub_rn(__fmul_rn((float)(u32)(h >> 40), scale), 1.0f);
        const float x2 = __fsub_rn(__fmul_rn((float)(u32)((h >> 16) & 0xffffffull), scale), 1.0f);
        const float s = __fadd_rn(__fmul_rn(x1, x1), __fmul_rn(x2, x2));
        if (s < 1.0f && s > 0.0f) {
            const float f = __fmul_rn(2.0f, __fsqrt_rn(__fsub_rn(1.0f, s)));
            return make_float3(__fmul_rn(x1, f), __fmul_rn(x2, f),
                               __fsub_rn(1.0f, __fmul_rn(2.0f, s)));
        }
    }
    return make_float3(0.0f, 0.0f, 1.0f);
}

// collision::direction_class: the octant, the sign of x lowest.
__device__ __forceinline__ u32 direction_class(float3 d) {
    return (d.x < 0.0f ? 1u : 0u) | (d.y < 0.0f ? 2u : 0u) | (d.z < 0.0f ? 4u : 0u);
}

#define DIRECTION_CLASSES 8u

// The class of segment `ray` of an agent, DIRECTION_CLASSES past its end.
__device__ __forceinline__ u32 segment_class(u64 seed, u32 agent, u32 frame, u32 ray, u32 rays) {
    return ray < rays ? direction_class(segment_direction(seed, agent, frame, ray))
                      : DIRECTION_CLASSES;
}

// The segments of one frame, agent by agent: paths[2 a] = (first position,
// step), paths[2 a + 1] = (last position, unused); `progress` is
// Agents::progress(frame). The origin is Agents::position's
// a + (b - a) * progress. An agent's segments are placed as
// Agents::frame_rays places them, ordered by direction class and by number
// within a class: one warp per agent counts its segments' classes (ballots
// over 32 segments at a time), then draws them again and writes each at
// its class's start plus the segments of its class before it.
extern "C" __global__ void __launch_bounds__(COLLISION_THREADS)
collision_rays(const float4* paths, u32 agents, u32 rays_per_agent, float progress, u64 seed,
               u32 frame, Ray* out) {
    const u64 warps = grid_threads() / 32u;
    for (u64 agent64 = global_thread() / 32u; agent64 < agents; agent64 += warps) {
        const u32 agent = (u32)agent64;
        u32 start[DIRECTION_CLASSES];
        for (u32 c = 0; c < DIRECTION_CLASSES; ++c) start[c] = 0u;
        for (u32 base = 0; base < rays_per_agent; base += 32u) {
            const u32 cls = segment_class(seed, agent, frame, base + lane_id(), rays_per_agent);
            for (u32 c = 0; c < DIRECTION_CLASSES; ++c) {
                start[c] += __popc(__ballot_sync(CAUSTIC_FULL_MASK, cls == c));
            }
        }
        // The counts become each class's first slot.
        u32 sum = 0u;
        for (u32 c = 0; c < DIRECTION_CLASSES; ++c) {
            const u32 count = start[c];
            start[c] = sum;
            sum += count;
        }
        const float4 a = paths[2 * agent64];
        const float4 b = paths[2 * agent64 + 1];
        Ray r;
        r.origin[0] = __fadd_rn(a.x, __fmul_rn(__fsub_rn(b.x, a.x), progress));
        r.origin[1] = __fadd_rn(a.y, __fmul_rn(__fsub_rn(b.y, a.y), progress));
        r.origin[2] = __fadd_rn(a.z, __fmul_rn(__fsub_rn(b.z, a.z), progress));
        r.tmin = 0.0f;
        r.tmax = a.w;
        for (u32 base = 0; base < rays_per_agent; base += 32u) {
            const u32 ray = base + lane_id();
            const float3 d = segment_direction(seed, agent, frame, ray);
            const u32 cls = ray < rays_per_agent ? direction_class(d) : DIRECTION_CLASSES;
            u32 slot = 0u;
            for (u32 c = 0; c < DIRECTION_CLASSES; ++c) {
                const u32 mask = __ballot_sync(CAUSTIC_FULL_MASK, cls == c);
                if (cls == c) slot = start[c] + __popc(mask & lanemask_lt());
                start[c] += __popc(mask);
            }
            if (cls == DIRECTION_CLASSES) continue;
            r.dir[0] = d.x;
            r.dir[1] = d.y;
            r.dir[2] = d.z;
            out[agent64 * rays_per_agent + slot] = r;
        }
    }
}

// collision::nearest_key: the distance's bits made monotonic above the
// triangle id; a miss is the largest key.
__device__ __forceinline__ u64 nearest_key(const Hit& h) {
    return h.prim == NO_HIT ? ~0ull : hit_key(h.t, h.prim);
}

// Each agent's smallest key over its rays' hits (Agents::answers): one
// warp per agent, the lanes striding over its rays, then a warp minimum.
extern "C" __global__ void __launch_bounds__(COLLISION_THREADS)
collision_nearest(const Hit* hits, u32 agents, u32 rays_per_agent, u64* keys) {
    const u64 warps = grid_threads() / 32u;
    for (u64 agent = global_thread() / 32u; agent < agents; agent += warps) {
        const Hit* mine = hits + agent * rays_per_agent;
        u64 best = ~0ull;
        for (u32 r = lane_id(); r < rays_per_agent; r += 32u) {
            const u64 key = nearest_key(mine[r]);
            best = key < best ? key : best;
        }
        for (int d = 16; d > 0; d >>= 1) {
            const u64 other = __shfl_xor_sync(CAUSTIC_FULL_MASK, best, d);
            best = other < best ? other : best;
        }
        if (lane_id() == 0) keys[agent] = best;
    }
}
