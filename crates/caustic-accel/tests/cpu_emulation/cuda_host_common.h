// cuda_host_common.h: what cuda_shim.h (one thread at a time) and
// cuda_fibers.h (threads as fibers, with warps) both give the host C++
// compiler to compile CUDA kernels unchanged: the qualifiers, vector
// types, bit casts, the _rn intrinsics (plain operations under
// -ffp-contract=off round once, as they do), __fadd_rd (the rounding
// mode switched around the addition), __ldg, min/max and the bit counts.
#pragma once
#include <cfenv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#define __device__
#define __host__
#define __global__
#define __forceinline__ inline
#define __restrict__
#define __launch_bounds__(...)

struct dim3_shim {
    unsigned x, y, z;
};
struct float2 {
    float x, y;
};
struct float3 {
    float x, y, z;
};
struct float4 {
    float x, y, z, w;
};
struct int3 {
    int x, y, z;
};
struct uint2 {
    unsigned x, y;
};
struct uint4 {
    unsigned x, y, z, w;
};
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float3 make_float3(float x, float y, float z) { return {x, y, z}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline int3 make_int3(int x, int y, int z) { return {x, y, z}; }
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }

template <class To, class From>
inline To bits_as(From v) {
    static_assert(sizeof(To) == sizeof(From), "same size");
    To out;
    std::memcpy(&out, &v, sizeof out);
    return out;
}
inline float __int_as_float(int i) { return bits_as<float>(i); }
inline int __float_as_int(float f) { return bits_as<int>(f); }
inline float __uint_as_float(unsigned i) { return bits_as<float>(i); }
inline unsigned __float_as_uint(float f) { return bits_as<unsigned>(f); }

inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
// a + b rounded down: the rounding mode set around one volatile addition.
inline float __fadd_rd(float a, float b) {
    std::fesetround(FE_DOWNWARD);
    volatile float va = a;
    volatile float r = va + b;
    std::fesetround(FE_TONEAREST);
    return r;
}
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }
inline float __frcp_rn(float a) { return 1.0f / a; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __dsub_rn(double a, double b) { return a - b; }

template <class T>
inline T __ldg(const T* p) {
    return *p;
}

inline int min(int a, int b) { return a < b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline float __uint2float_rn(unsigned x) { return (float)x; }
inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }

using std::isfinite;

inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(unsigned x) { return x == 0 ? 32 : __builtin_clz(x); }
inline int __clzll(unsigned long long x) { return x == 0 ? 64 : __builtin_clzll(x); }
inline int __ffs(unsigned x) { return __builtin_ffs((int)x); }
