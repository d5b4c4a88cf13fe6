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

// compact_gather_wave for a wave whose length the host has not read: the
// kept count is counts[slot] (written there by compact_select_indices), and
// the slots from it up to n (the host's bound on the count) get the pad
// record, one the caller's kernels skip (an untraceable ray, a path with no
// pixel). A wavefront can so run several bounces without waiting for the
// GPU; its kernels trace and skip the few padded slots.
extern "C" __global__ void __launch_bounds__(256)
compact_gather_wave_padded(const Ray32* rays, const Record32* records, const u32* indices,
                           const u32* counts, u32 slot, u32 n, const Ray32* pad_ray,
                           const Record32* pad_record, Ray32* out_rays, Record32* out_records) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    if (i < counts[slot]) {
        u32 from = indices[i];
        out_rays[i] = rays[from];
        out_records[i] = records[from];
    } else {
        out_rays[i] = *pad_ray;
        out_records[i] = *pad_record;
    }
}
