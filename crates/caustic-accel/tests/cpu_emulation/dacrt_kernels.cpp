// dacrt_kernels.cpp: GPU DACRT (src/dacrt/taskpool.cu, on the task pool of
// caustic-gpu's task_pool.cuh) run on the host: the kernels compiled
// unchanged over cuda_fibers.h, every CUDA thread a fiber, driven by the
// same steps as taskpool_cuda.rs with host loops standing in for the
// compaction. The persistent kernel runs as one block of four warps, which
// take turns at every barrier: the pool's dependencies, slot reuse and
// phase changes run as on the device, without its timing. For
// tests/dacrt_kernels_on_cpu.rs.
//
//   dacrt_kernels INPUT OUTPUT
//
// The concurrent schedule's arenas start at 256 words beyond the batch's
// own and double after every run that runs out, so the spill, the drain
// and the repeated run are exercised on every input large enough to
// subdivide.
//
// INPUT: u32 params[10] (taskpool_cuda.rs's `params`), u32 table words, the
// table (schedule.rs's device_table), u32 n_tris, the triangles (48 bytes
// each), u32 n_rays, the rays (32 bytes each). OUTPUT: the closest hits
// (16 bytes each), the occlusion flags (u32 each), then per trace
// (closest, any) the eight stats words (u64) of its last run, the pool's
// error word (u32) and the number of runs (u32).
#include "cuda_fibers.h"
#include "task_pool.cu"
#include "../../src/dacrt/taskpool.cu"

#include <algorithm>
#include <vector>

template <class T>
static std::vector<T> uninit(size_t n) {
    std::vector<T> v(n);
    if (n > 0) std::memset((void*)v.data(), 0xA5, n * sizeof(T));
    return v;
}

static unsigned blocks_for(size_t n, size_t per) { return (unsigned)((n + per - 1) / per); }
static unsigned stride_blocks(size_t n) { return std::min(blocks_for(n, 256), 1u << 16); }

// select_indices_into: the flagged indices at the front, their number.
static u32 select_into(const std::vector<u32>& flags, std::vector<u32>& out) {
    u32 n = 0;
    for (size_t i = 0; i < flags.size(); ++i)
        if (flags[i]) out[n++] = (u32)i;
    return n;
}

#define LAUNCH(kernel, blocks, threads, ...) \
    do { \
        if ((blocks) > 0) emu::launch(#kernel, (blocks), (threads), kernel, __VA_ARGS__); \
    } while (0)

struct Trace {
    std::vector<u32> params, plan;
    std::vector<Triangle> tris;
    std::vector<Ray> rays;
};

// One trace, as DacrtTracer::trace does it; returns the stats and the
// pool's error word.
static void run(const Trace& in, u32 any_hit, std::vector<Hit>& hits, std::vector<u32>& occluded,
                std::vector<u64>& stats, u32& error, u32& runs) {
    const size_t n = in.rays.size(), t = in.tris.size();
    std::vector<u64> keys(n, DACRT_NO_KEY);
    std::vector<int> root_box = uninit<int>(6);
    stats = uninit<u64>(DS_WORDS);
    std::vector<u32> ray_count(1, 0u), tri_count(1, 0u);
    std::vector<u32> traceable = uninit<u32>(n);
    LAUNCH(dacrt_prepare_rays, stride_blocks(n), 256, in.rays.data(), (u64)n, traceable.data(), root_box.data(),
           stats.data());
    error = 0, runs = 0;
    if (t > 0) {
        const bool concurrent = in.params[DACRT_CONCURRENT] != 0u;
        std::vector<float4> boxes = uninit<float4>(2 * t);
        std::vector<u32> finite = uninit<u32>(t);
        LAUNCH(dacrt_prepare_triangles, stride_blocks(t), 256, in.tris.data(), (u64)t, boxes.data(),
               finite.data(), root_box.data());
        const u32 capacity = (u32)((n + t) / 8 + 4096), warps = 4;
        std::vector<u64> headers = uninit<u64>(capacity);
        std::vector<u32> records = uninit<u32>((size_t)capacity * TASK_POOL_RECORD_WORDS);
        std::vector<u32> control = uninit<u32>(TASK_POOL_CONTROL_WORDS);
        std::vector<u64> counters = uninit<u64>(warps * TASK_POOL_COUNTER_WORDS);
        std::vector<u32> bins((size_t)capacity * DACRT_SLOT_BIN_WORDS, 0u);
        size_t extra[2] = {256, 256};
        for (;;) {
            ++runs;
            // Waves: two arrays per kind; concurrent: one arena per kind.
            std::vector<u32> ray_ids[2] = {uninit<u32>(concurrent ? n + extra[0] : n), uninit<u32>(n)};
            std::vector<u32> tri_ids[2] = {uninit<u32>(concurrent ? t + extra[1] : t), uninit<u32>(t)};
            ray_count[0] = select_into(traceable, ray_ids[0]);
            tri_count[0] = select_into(finite, tri_ids[0]);
            std::vector<u32> params = in.params;
            params[DACRT_RAY_ARENA] = concurrent ? (u32)ray_ids[0].size() : 0u;
            params[DACRT_TRI_ARENA] = concurrent ? (u32)tri_ids[0].size() : 0u;
            // The paper's minimum grab (Eq. 1's K), as TaskPoolConfig's default.
            LAUNCH(task_pool_reset, stride_blocks(capacity), 256, headers.data(), capacity, control.data(),
                   counters.data(), warps * TASK_POOL_COUNTER_WORDS, TASK_POOL_K);
            // A watchdog of a minute: fibers are slow, not stuck.
            LAUNCH(dacrt_trace, 1, 32 * warps, in.rays.data(), in.tris.data(), (const float4*)boxes.data(),
                   ray_ids[0].data(), concurrent ? nullptr : ray_ids[1].data(), tri_ids[0].data(),
                   concurrent ? nullptr : tri_ids[1].data(), keys.data(), bins.data(), in.plan.data(),
                   (const u32*)ray_count.data(), (const u32*)tri_count.data(), (const int*)root_box.data(),
                   stats.data(), params.data(), any_hit, headers.data(), records.data(), control.data(),
                   counters.data(), capacity, (u64)60000000000ull);
            error = control[TASK_POOL_ERROR];
            if (error == 0 && control[TASK_POOL_LIVE] != 0) error = 100;
            for (u32 b : bins)
                if (b != 0) error = 101;  // the bins must be left zero
            const u64 spilled = stats[DS_SPILLED];
            if (error != 0 || spilled == 0) break;
            if (runs > 40) {
                error = 102;  // the arenas never sufficed
                break;
            }
            for (u32 k = 0; k < 2u; ++k)
                if (spilled & (1ull << k)) extra[k] *= 2;
            std::fill(stats.begin(), stats.end(), 0ull);
        }
    }
    LAUNCH(dacrt_resolve, stride_blocks(n), 256, in.rays.data(), in.tris.data(), (const u64*)keys.data(), (u64)n,
           hits.data(), occluded.data(), any_hit, stats.data());
}

template <class T>
static bool read_vec(FILE* f, std::vector<T>& v) {
    u32 n = 0;
    if (std::fread(&n, 4, 1, f) != 1) return false;
    v.resize(n);
    return n == 0 || std::fread(v.data(), sizeof(T), n, f) == n;
}

int main(int argc, char** argv) {
    if (argc != 3) return 2;
    FILE* f = std::fopen(argv[1], "rb");
    if (!f) return 2;
    Trace in;
    in.params.resize(DACRT_PARAM_WORDS);
    if (std::fread(in.params.data(), 4, DACRT_PARAM_WORDS, f) != DACRT_PARAM_WORDS || !read_vec(f, in.plan) ||
        !read_vec(f, in.tris) || !read_vec(f, in.rays))
        return 2;
    std::fclose(f);
    const size_t n = in.rays.size();
    std::vector<Hit> hits = uninit<Hit>(n), unused_hits = uninit<Hit>(n);
    std::vector<u32> occluded = uninit<u32>(n), unused_flags = uninit<u32>(n);
    std::vector<u64> stats[2];
    u32 errors[2], runs[2];
    run(in, 0u, hits, unused_flags, stats[0], errors[0], runs[0]);
    run(in, 1u, unused_hits, occluded, stats[1], errors[1], runs[1]);
    FILE* out = std::fopen(argv[2], "wb");
    if (!out) return 2;
    std::fwrite(hits.data(), sizeof(Hit), n, out);
    std::fwrite(occluded.data(), 4, n, out);
    for (int k = 0; k < 2; ++k) {
        std::fwrite(stats[k].data(), 8, DS_WORDS, out);
        std::fwrite(&errors[k], 4, 1, out);
        std::fwrite(&runs[k], 4, 1, out);
    }
    std::fclose(out);
    return 0;
}
