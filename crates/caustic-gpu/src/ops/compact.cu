// compact.cu: stable stream compaction (select by flag) in one pass.
//
// The exclusive scan of the 0/1 flags gives every kept element its output
// slot (Zeidan 2011, section 3.3; Merrill & Garland 2016 for the single-pass
// scan in tile_scan.cuh). A flag is true when it is non-zero. The last tile
// writes the number of kept elements to `count`. Launch and scratch rules are
// scan.cu's.
#include "tile_scan.cuh"

struct SelectIo {
    static constexpr bool STAGED = false;
    const u32* values; // null: emit the element's index instead
    const u32* flags;
    u32* out;
    u32* count;

    __device__ __forceinline__ u32 load(u64 j) const { return flags[j] != 0u; }
    __device__ __forceinline__ void emit(u64 j, u32 kept_before, u32 keep) const {
        if (keep) out[kept_before] = values ? values[j] : (u32)j;
    }
    __device__ __forceinline__ void finish(u32 kept) const { *count = kept; }
};

extern "C" __global__ void __launch_bounds__(SCAN_THREADS)
compact_select_u32(const u32* values, const u32* flags, u32* out, u32* count, u64 n, u64* status,
                   u32* tile_counter) {
    SelectIo io{values, flags, out, count};
    scan_tile<SumU32>(io, n, status, tile_counter);
}

extern "C" __global__ void __launch_bounds__(SCAN_THREADS)
compact_select_indices(const u32* flags, u32* out, u32* count, u64 n, u64* status,
                       u32* tile_counter) {
    SelectIo io{nullptr, flags, out, count};
    scan_tile<SumU32>(io, n, status, tile_counter);
}

// A wave of rays with their 32-byte path records, gathered by the indices
// compact_select_indices kept: every renderer's path record (Whitted's,
// the photons', the gather rays', SPPM's) is 32 bytes, so one kernel moves
// them all. out[i] = in[indices[i]], i < n.
struct Ray32 {
    float4 a, b;
};
struct Record32 {
    ulonglong2 a, b;
};

extern "C" __global__ void __launch_bounds__(256)
compact_gather_wave(const Ray32* rays, const Record32* records, const u32* indices, u32 n,
                    Ray32* out_rays, Record32* out_records) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    u32 from = indices[i];
    out_rays[i] = rays[from];
    out_records[i] = records[from];
}
