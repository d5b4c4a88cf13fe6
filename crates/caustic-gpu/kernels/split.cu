// split.cu: stable partition by flag, falses first, in one scan pass.
//
// With t(i) the number of true flags before i and F the number of falses,
// a false element goes to i - t(i) and a true one to F + t(i) (Zeidan 2011,
// section 3.3, "Split" with one output array). F must be known before the
// scatter, so the host first counts the trues (reduce_count_nonzero_u32 in
// reduce.cu) into `true_count`; the scan itself is tile_scan.cuh's single
// pass. The last tile writes F, the split point, to `split_point`. Launch
// and scratch rules are scan.cu's.
#include "tile_scan.cuh"

struct SplitIo {
    static constexpr bool STAGED = false;
    const u32* values; // null: move the element's index instead
    const u32* flags;
    u32* out;
    u32* split_point;
    u64 falses;

    __device__ __forceinline__ u32 load(u64 j) const { return flags[j] != 0u; }
    __device__ __forceinline__ void emit(u64 j, u32 trues_before, u32 is_true) const {
        const u64 slot = is_true ? falses + trues_before : j - trues_before;
        out[slot] = values ? values[j] : (u32)j;
    }
    __device__ __forceinline__ void finish(u32) const { *split_point = (u32)falses; }
};

extern "C" __global__ void __launch_bounds__(SCAN_THREADS)
split_partition_u32(const u32* values, const u32* flags, u32* out, u32* split_point,
                    const u32* true_count, u64 n, u64* status, u32* tile_counter) {
    SplitIo io{values, flags, out, split_point, n - *true_count};
    scan_tile<SumU32>(io, n, status, tile_counter);
}

extern "C" __global__ void __launch_bounds__(SCAN_THREADS)
split_partition_indices(const u32* flags, u32* out, u32* split_point, const u32* true_count,
                        u64 n, u64* status, u32* tile_counter) {
    SplitIo io{nullptr, flags, out, split_point, n - *true_count};
    scan_tile<SumU32>(io, n, status, tile_counter);
}
