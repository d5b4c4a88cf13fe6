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

// ------------------------------------------------------------ segmented split
//
// Stable partition by flag inside every segment (segments start at non-zero
// head flags; element 0 always starts one): within a segment, the falses
// keep their order and come first, then the trues. The host composes it
// from two segmented exclusive scans (scan.cu): `rank0[i]`, the falses
// before i in its segment, and `pos[i]`, i's position in its segment. Then
// the segment's false count is written at its first element by its last
// element, and every element scatters:
//   false: start + rank0[i];   true: start + falses + (pos[i] - rank0[i]).

#define SEGSPLIT_THREADS 256u

// zeros[i] = (flags[i] == 0), ones[i] = 1.
extern "C" __global__ void __launch_bounds__(SEGSPLIT_THREADS)
split_segmented_flags_u32(const u32* flags, u64 n, u32* zeros, u32* ones) {
    for (u64 i = global_thread(); i < n; i += grid_threads()) {
        zeros[i] = flags[i] == 0u;
        ones[i] = 1u;
    }
}

// For the last element of every segment: falses[start] = its segment's false count.
extern "C" __global__ void __launch_bounds__(SEGSPLIT_THREADS)
split_segmented_totals_u32(const u32* zeros, const u32* rank0, const u32* pos, const u32* heads,
                           u64 n, u32* falses) {
    for (u64 i = global_thread(); i < n; i += grid_threads()) {
        const bool last = i + 1 == n || heads[i + 1] != 0u;
        if (last) falses[i - pos[i]] = rank0[i] + zeros[i];
    }
}

extern "C" __global__ void __launch_bounds__(SEGSPLIT_THREADS)
split_segmented_scatter_u32(const u32* values, const u32* flags, const u32* rank0,
                            const u32* pos, const u32* falses, u64 n, u32* out) {
    for (u64 i = global_thread(); i < n; i += grid_threads()) {
        const u64 start = i - pos[i];
        const u64 slot = flags[i] == 0u ? start + rank0[i]
                                        : start + falses[start] + (pos[i] - rank0[i]);
        out[slot] = values[i];
    }
}
