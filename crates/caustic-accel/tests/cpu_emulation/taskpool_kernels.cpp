// taskpool_kernels.cpp: `bvh-taskpool` (src/bvh/build/taskpool.cu, on the
// task pool of caustic-gpu's task_pool.cuh, with the references and the
// root from sah_device.cu) run on the host: the kernels compiled unchanged
// over cuda_fibers.h, every CUDA thread a fiber, driven by the same steps
// as taskpool_cuda.rs with host loops standing in for the compaction. The
// persistent kernel runs as one block of four warps (TP_BVH_THREADS), which
// take turns at every barrier: the pool's dependencies, slot reuse and
// phase changes run as on the device, without its timing. For
// tests/taskpool_kernels_on_cpu.rs.
//
//   taskpool_kernels INPUT OUTPUT
//
// INPUT: u32 max_leaf, u32 min_grab, f32 traversal_cost, f32
// intersection_cost, u32 n, n triangles (48 bytes each, scene order).
// OUTPUT: u32 node count, the nodes, the slot-to-id map (n u32), the
// leaf-slot triangles (n x 48 bytes), the id-to-slot map (n u32), then u32
// the deepest leaf's depth, the pool's error word, its live count at the
// end and whether any candidate bin was left uncleared.
#include "cuda_fibers.h"
#include "emulation_io.h"
#include "task_pool.cu"
#include "sah_device.cu"
#include "taskpool.cu"

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

static std::vector<u32> select_indices(const std::vector<u32>& flags) {
    std::vector<u32> out;
    for (size_t i = 0; i < flags.size(); ++i)
        if (flags[i]) out.push_back((u32)i);
    return out;
}

#define LAUNCH(kernel, blocks, threads, ...) \
    do { \
        if ((blocks) > 0) emu::launch(#kernel, (blocks), (threads), kernel, __VA_ARGS__); \
    } while (0)

struct Settings {
    u32 max_leaf, min_grab;
    float traversal_cost, intersection_cost;
};

struct Build {
    Settings settings;
    std::vector<Triangle> tris;
    std::vector<u32> prim_indices;
    std::vector<BvhNode> nodes;
    u32 max_depth = 0, error = 0, live = 0, dirty_bins = 0;

    // taskpool_cuda.rs, Build::run.
    void run() {
        const u32 n = (u32)tris.size();
        prim_indices = uninit<u32>(n);
        if (n == 0) return;
        auto placed = uninit<u32>(n), parked = uninit<u32>(n);
        LAUNCH(sah_placeable, stride_blocks(n), 256, tris.data(), (u64)n, placed.data(), parked.data());
        const std::vector<u32> ids = select_indices(placed);
        const u32 count = (u32)ids.size();
        if (count < n) {
            const std::vector<u32> parked_ids = select_indices(parked);
            std::copy(parked_ids.begin(), parked_ids.end(), prim_indices.begin() + count);
        }
        if (count == 0) {
            const float lo[3] = {CAUSTIC_INF, CAUSTIC_INF, CAUSTIC_INF};
            const float hi[3] = {-CAUSTIC_INF, -CAUSTIC_INF, -CAUSTIC_INF};
            nodes = {make_node(lo, hi, 0, n)};
            return;
        }
        std::vector<PrimRef> refs[2] = {uninit<PrimRef>(count), uninit<PrimRef>(count)};
        const u32 blocks = std::min(blocks_for(count, 256), 256u);
        auto partials = uninit<float>(12 * blocks);
        LAUNCH(sah_references, blocks, 256, tris.data(), ids.data(), (u64)count, refs[0].data(), partials.data());
        const u32 parked_count = n - count;
        const u32 slot = parked_count > 0 ? 1 : 0, depth = slot;
        nodes = uninit<BvhNode>(2 * (size_t)count + 3);
        auto root = uninit<SahTask>(1);
        LAUNCH(sah_root, 1, 32, partials.data(), blocks, count, slot, depth, parked_count, root.data(), nodes.data());

        const u32 capacity = count / 32 + 64, warps = TP_BVH_WARPS;
        auto headers = uninit<u64>(capacity);
        auto records = uninit<u32>((size_t)capacity * TASK_POOL_RECORD_WORDS);
        auto control = uninit<u32>(TASK_POOL_CONTROL_WORDS);
        auto counters = uninit<u64>(warps * TASK_POOL_COUNTER_WORDS);
        LAUNCH(task_pool_reset, stride_blocks(capacity), 256, headers.data(), capacity, control.data(),
               counters.data(), warps * TASK_POOL_COUNTER_WORDS, settings.min_grab);
        const size_t bin_words = (size_t)capacity * TP_SLOT_BIN_WORDS;
        auto bins = uninit<int>(bin_words);
        LAUNCH(bvh_taskpool_clear_bins, stride_blocks(bin_words), 256, bins.data(), (u64)bin_words);
        const std::vector<int> cleared = bins;
        std::vector<u32> build = {parked_count > 0 ? 3u : 1u, 0u};
        // A watchdog of a minute: fibers are slow, not stuck.
        LAUNCH(bvh_taskpool_build, 1, TP_BVH_THREADS, (const SahTask*)root.data(), refs[0].data(), refs[1].data(),
               bins.data(), nodes.data(), prim_indices.data(), build.data(), settings.max_leaf,
               settings.traversal_cost, settings.intersection_cost, headers.data(), records.data(), control.data(),
               counters.data(), capacity, (u64)60000000000ull);
        error = control[TASK_POOL_ERROR];
        live = control[TASK_POOL_LIVE];
        dirty_bins = bins == cleared ? 0u : 1u;
        if (build[0] > nodes.size()) {
            error = 100;  // more nodes than slots
            build[0] = (u32)nodes.size();
        }
        nodes.resize(build[0]);
        max_depth = build[1];
    }
};

int main(int argc, char** argv) {
    const EmulationFiles files = open_files(argc, argv, "taskpool_kernels");
    FILE* in = files.in;
    FILE* out = files.out;
    Build b;
    b.settings = read_array<Settings>(in, 1)[0];
    const u32 n = read_array<u32>(in, 1)[0];
    b.tris = read_array<Triangle>(in, n);
    b.run();

    // taskpool_cuda.rs, Build::finish.
    auto leaf_tris = uninit<Triangle>(n);
    auto slots = uninit<u32>(n);
    LAUNCH(sah_leaf_triangles, stride_blocks(n), 256, b.tris.data(), b.prim_indices.data(), (u64)n,
           leaf_tris.data(), slots.data());
    const u32 count = (u32)b.nodes.size();
    fwrite(&count, 4, 1, out);
    write_array(out, b.nodes);
    write_array(out, b.prim_indices);
    write_array(out, leaf_tris);
    write_array(out, slots);
    const u32 tail[4] = {b.max_depth, b.error, b.live, b.dirty_bins};
    fwrite(tail, 4, 4, out);
    fclose(out);
    return 0;
}
