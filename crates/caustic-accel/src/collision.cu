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

// The segments of one frame, agent by agent: paths[2 a] = (first position,
// step), paths[2 a + 1] = (last position, unused); `progress` is
// Agents::progress(frame). The origin is Agents::position's
// a + (b - a) * progress.
extern "C" __global__ void __launch_bounds__(COLLISION_THREADS)
collision_rays(const float4* paths, u32 agents, u32 rays_per_agent, float progress, u64 seed,
               u32 frame, Ray* out) {
    const u64 n = (u64)agents * rays_per_agent;
    for (u64 i = global_thread(); i < n; i += grid_threads()) {
        const u32 agent = (u32)(i / rays_per_agent);
        const u32 ray = (u32)(i - (u64)agent * rays_per_agent);
        const float4 a = paths[2 * (u64)agent];
        const float4 b = paths[2 * (u64)agent + 1];
        const float3 d = segment_direction(seed, agent, frame, ray);
        Ray r;
        r.origin[0] = __fadd_rn(a.x, __fmul_rn(__fsub_rn(b.x, a.x), progress));
        r.origin[1] = __fadd_rn(a.y, __fmul_rn(__fsub_rn(b.y, a.y), progress));
        r.origin[2] = __fadd_rn(a.z, __fmul_rn(__fsub_rn(b.z, a.z), progress));
        r.tmin = 0.0f;
        r.dir[0] = d.x;
        r.dir[1] = d.y;
        r.dir[2] = d.z;
        r.tmax = a.w;
        out[i] = r;
    }
}

// collision::nearest_key: the distance's bits made monotonic above the
// triangle id; a miss is the largest key.
__device__ __forceinline__ u64 nearest_key(const Hit& h) {
    if (h.prim == NO_HIT) return ~0ull;
    const u32 bits = __float_as_uint(h.t);
    const u32 ordered = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
    return ((u64)ordered << 32) | (u64)h.prim;
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
