// reduce.cu: reductions (sum, min, max, box union) in two launches.
//
// Every kernel reduces its input with a grid-stride loop, then a warp-shuffle
// tree per warp and one shared-memory step per block, and writes one value per
// block to out[blockIdx.x]. The host launches it once over the input with up
// to REDUCE_MAX_BLOCKS blocks and once more, with one block, over those
// partial results. All operators here commute, so no order is kept; float
// sums therefore differ from a sequential sum by rounding. With n == 0 the
// block writes the identity.
#include "common.cuh"

#define REDUCE_THREADS 256u

struct SumU32Op {
    typedef u32 T;
    static __device__ __forceinline__ T identity() { return 0u; }
    static __device__ __forceinline__ T combine(T a, T b) { return a + b; }
};
struct CountNonzeroU32Op : SumU32Op {
    static __device__ __forceinline__ T lift(u32 v) { return v != 0u; }
};
struct MinU32Op {
    typedef u32 T;
    static __device__ __forceinline__ T identity() { return 0xffffffffu; }
    static __device__ __forceinline__ T combine(T a, T b) { return min(a, b); }
};
struct MaxU32Op {
    typedef u32 T;
    static __device__ __forceinline__ T identity() { return 0u; }
    static __device__ __forceinline__ T combine(T a, T b) { return max(a, b); }
};
struct SumF32Op {
    typedef float T;
    static __device__ __forceinline__ T identity() { return 0.0f; }
    static __device__ __forceinline__ T combine(T a, T b) { return a + b; }
};
// fminf/fmaxf skip NaN operands, as f32::min/max do on the CPU.
struct MinF32Op {
    typedef float T;
    static __device__ __forceinline__ T identity() { return CAUSTIC_INF; }
    static __device__ __forceinline__ T combine(T a, T b) { return fminf(a, b); }
};
struct MaxF32Op {
    typedef float T;
    static __device__ __forceinline__ T identity() { return -CAUSTIC_INF; }
    static __device__ __forceinline__ T combine(T a, T b) { return fmaxf(a, b); }
};
struct AabbOp {
    typedef Aabb T;
    static __device__ __forceinline__ T identity() { return aabb_empty(); }
    static __device__ __forceinline__ T combine(T a, T b) { return aabb_union(a, b); }
};


// Identity for plain reductions; counting lifts each element to 0 or 1 first.
template <class Op>
__device__ __forceinline__ typename Op::T lift(const typename Op::T& v) { return v; }
template <>
__device__ __forceinline__ u32 lift<CountNonzeroU32Op>(const u32& v) {
    return CountNonzeroU32Op::lift(v);
}

template <class Op>
__device__ __forceinline__ void reduce_blocks(const typename Op::T* in, u64 n,
                                              typename Op::T* out) {
    typedef typename Op::T T;
    __shared__ T warp_results[REDUCE_THREADS / 32];
    T acc = Op::identity();
#pragma unroll 4
    for (u64 j = global_thread(); j < n; j += grid_threads()) acc = Op::combine(acc, lift<Op>(in[j]));
    for (u32 d = 16; d > 0; d >>= 1) acc = Op::combine(acc, shfl_down(acc, d));
    if (lane_id() == 0) warp_results[warp_id()] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        T r = warp_results[0];
        for (u32 w = 1; w < REDUCE_THREADS / 32; ++w) r = Op::combine(r, warp_results[w]);
        out[blockIdx.x] = r;
    }
}

extern "C" __global__ void __launch_bounds__(REDUCE_THREADS)
reduce_sum_u32(const u32* in, u64 n, u32* out) { reduce_blocks<SumU32Op>(in, n, out); }

extern "C" __global__ void __launch_bounds__(REDUCE_THREADS)
reduce_count_nonzero_u32(const u32* in, u64 n, u32* out) {
    reduce_blocks<CountNonzeroU32Op>(in, n, out);
}

extern "C" __global__ void __launch_bounds__(REDUCE_THREADS)
reduce_min_u32(const u32* in, u64 n, u32* out) { reduce_blocks<MinU32Op>(in, n, out); }

extern "C" __global__ void __launch_bounds__(REDUCE_THREADS)
reduce_max_u32(const u32* in, u64 n, u32* out) { reduce_blocks<MaxU32Op>(in, n, out); }

extern "C" __global__ void __launch_bounds__(REDUCE_THREADS)
reduce_sum_f32(const float* in, u64 n, float* out) { reduce_blocks<SumF32Op>(in, n, out); }

extern "C" __global__ void __launch_bounds__(REDUCE_THREADS)
reduce_min_f32(const float* in, u64 n, float* out) { reduce_blocks<MinF32Op>(in, n, out); }

extern "C" __global__ void __launch_bounds__(REDUCE_THREADS)
reduce_max_f32(const float* in, u64 n, float* out) { reduce_blocks<MaxF32Op>(in, n, out); }

extern "C" __global__ void __launch_bounds__(REDUCE_THREADS)
reduce_union_aabb(const Aabb* in, u64 n, Aabb* out) { reduce_blocks<AabbOp>(in, n, out); }
