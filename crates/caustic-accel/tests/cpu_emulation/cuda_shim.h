// cuda_shim.h: just enough of CUDA for a host C++ compiler to compile the
// grid's kernels (src/grid/*.cu) unchanged and run their per-thread code
// serially, for tests/grid_kernels_on_cpu.rs. Built with -ffp-contract=off,
// so every float operation rounds once, as the _rn intrinsics do on the GPU.
// Warp-wide operations have no serial meaning here and abort when reached:
// the harness only calls code that uses none.
#pragma once
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
inline dim3_shim threadIdx, blockIdx, blockDim, gridDim;

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
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float3 make_float3(float x, float y, float z) { return {x, y, z}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline int3 make_int3(int x, int y, int z) { return {x, y, z}; }
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }

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
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __frcp_rn(float a) { return 1.0f / a; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __dsub_rn(double a, double b) { return a - b; }

template <class T>
inline T __ldg(const T* p) {
    return *p;
}

inline int min(int a, int b) { return a < b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }

[[noreturn]] inline void no_warps(const char* what) {
    std::fprintf(stderr, "cuda_shim: %s has no serial meaning\n", what);
    std::abort();
}
template <class T>
inline T __shfl_xor_sync(unsigned, T, int) {
    no_warps("__shfl_xor_sync");
}
template <class T>
inline T __shfl_up_sync(unsigned, T, unsigned) {
    no_warps("__shfl_up_sync");
}
template <class T>
inline T __shfl_sync(unsigned, T, int) {
    no_warps("__shfl_sync");
}
template <class T>
inline T atomicAdd(T* p, T v) {
    T old = *p;
    *p = old + v;
    return old;
}
inline int atomicMin(int* p, int v) {
    int old = *p;
    *p = v < old ? v : old;
    return old;
}
inline int atomicMax(int* p, int v) {
    int old = *p;
    *p = v > old ? v : old;
    return old;
}
