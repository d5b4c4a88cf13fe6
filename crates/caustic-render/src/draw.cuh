// draw.cuh: the counter-based random numbers every renderer's kernels draw
// from, operation for operation caustic-render's `draw` module (src/draw.rs):
// SplitMix64 keys from pixel, sample and branch path seed PCG32 generators,
// one stream per purpose, so the GPU draws the CPU's numbers.
#pragma once
#include "common.cuh"

// draw's purposes and branch names.
#define DRAW_CAMERA 1ull
#define DRAW_ROULETTE 2ull
#define DRAW_LIGHT 3ull
#define DRAW_SEQUENCE 4ull
#define BRANCH_REFLECT 0ull
#define BRANCH_REFRACT 1ull

// draw::fmix and draw::mix.
__device__ __forceinline__ u64 fmix64(u64 z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
__device__ __forceinline__ u64 mix_key(u64 key, u64 value) {
    return fmix64(key ^ fmix64(value + 0x9e3779b97f4a7c15ull));
}

struct Pcg {
    u64 state;
    u64 inc;
};
__device__ __forceinline__ u32 pcg_next(Pcg& g) {
    u64 old = g.state;
    g.state = old * 6364136223846793005ull + g.inc;
    u32 xorshifted = (u32)(((old >> 18) ^ old) >> 27);
    u32 rot = (u32)(old >> 59);
    return (xorshifted >> rot) | (xorshifted << ((32u - rot) & 31u));
}
__device__ __forceinline__ Pcg pcg_new(u64 initstate, u64 initseq) {
    Pcg g;
    g.state = 0;
    g.inc = (initseq << 1) | 1ull;
    pcg_next(g);
    g.state += initstate;
    pcg_next(g);
    return g;
}
__device__ __forceinline__ float pcg_f32(Pcg& g) {
    return (float)(pcg_next(g) >> 8) * (1.0f / 16777216.0f);
}

// draw::sobol2 and draw::pass_jitter: point `pass` of the first two Sobol
// dimensions, XORed with the pixel's own random shift.
__device__ __forceinline__ float2 pass_jitter(u64 seed, u64 pixel, u32 pass) {
    Pcg g = pcg_new(mix_key(seed, pixel), DRAW_SEQUENCE);
    u32 sx = pcg_next(g);
    u32 sy = pcg_next(g);
    u32 y = 0u, v = 1u << 31, bits = pass;
    while (bits != 0u) {
        if (bits & 1u) y ^= v;
        bits >>= 1;
        v ^= v >> 1;
    }
    u32 x = __brev(pass);
    return make_float2((float)((x ^ sx) >> 8) * (1.0f / 16777216.0f),
                       (float)((y ^ sy) >> 8) * (1.0f / 16777216.0f));
}
