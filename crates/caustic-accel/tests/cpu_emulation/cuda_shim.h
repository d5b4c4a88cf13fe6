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

#include "cuda_host_common.h"

inline dim3_shim threadIdx, blockIdx, blockDim, gridDim;

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
inline T __shfl_down_sync(unsigned, T, unsigned) {
    no_warps("__shfl_down_sync");
}
template <class T>
inline T __shfl_sync(unsigned, T, int) {
    no_warps("__shfl_sync");
}
// Threads run one at a time: every store is visible to the next.
inline void __threadfence() {}
template <class T>
inline T __ldcg(const T* p) {
    return *p;
}
template <class T>
inline void __stcg(T* p, T v) {
    *p = v;
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
