// sah_kernels.cpp: the GPU top-down SAH builders (`bvh-binned`,
// `bvh-binned-staged`, `bvh-sweep`) run on the host: their kernels
// (src/bvh/build/binned_sah.cu, sweep_sah.cu, sah_device.cu) compiled
// unchanged over cuda_fibers.h, every CUDA thread a fiber, and driven by the
// same steps as the Rust host code (binned_sah_cuda.rs, sah_levels_cuda.rs,
// sweep_sah_cuda.rs), with host loops standing in for the runtime's
// primitives (compaction, exclusive scan, maximum). For
// tests/sah_kernels_on_cpu.rs.
//
//   sah_kernels INPUT OUTPUT
//
// INPUT: SahParams (96 bytes), u32 n, n triangles (48 bytes each, scene
// order). OUTPUT: u32 node count, the nodes, the slot-to-id map (n u32),
// the leaf-slot triangles (n x 48 bytes), the id-to-slot map (n u32), then
// u32 levels, small roots and the deepest leaf's depth.
// Every buffer the GPU code allocates uninitialised starts poisoned here.
#include "cuda_fibers.h"
#include "emulation_io.h"
#include "binned_sah.cu"
#include "sweep_sah.cu"
#include "sah_device.cu"

#include <algorithm>
#include <vector>

template <class T>
static std::vector<T> uninit(size_t n) {
    std::vector<T> v(n);
    if (n > 0) std::memset((void*)v.data(), 0xA5, n * sizeof(T));
    return v;
}

template <class T>
static void grow(std::vector<T>& v, size_t needed) {
    if (needed <= v.size()) return;
    const size_t old = v.size();
    v.resize(std::max(needed, 2 * old));
    std::memset((void*)(v.data() + old), 0xA5, (v.size() - old) * sizeof(T));
}

static unsigned blocks_for(size_t n, size_t per) { return (unsigned)((n + per - 1) / per); }
static unsigned stride_blocks(size_t n) { return std::min(blocks_for(n, 256), 1u << 16); }

static std::vector<u32> select_indices(const std::vector<u32>& flags) {
    std::vector<u32> out;
    for (size_t i = 0; i < flags.size(); ++i)
        if (flags[i]) out.push_back((u32)i);
    return out;
}

static u32 exclusive_scan(const std::vector<u32>& in, std::vector<u32>& out) {
    out.resize(in.size());
    u32 sum = 0;
    for (size_t i = 0; i < in.size(); ++i) out[i] = sum, sum += in[i];
    return sum;
}

#define LAUNCH(kernel, blocks, threads, ...) \
    do { \
        if ((blocks) > 0) emu::launch(#kernel, (blocks), (threads), kernel, __VA_ARGS__); \
    } while (0)

constexpr u32 WARP_MAX = 2048, CHUNK_MIN = 8192, MAX_CHUNKS = 64, CHUNK_THREADS = 1024;

static u32 host_chunk_count(u32 n) {
    u32 size = (n + MAX_CHUNKS - 1) / MAX_CHUNKS;
    size = (size + CHUNK_THREADS - 1) / CHUNK_THREADS * CHUNK_THREADS;
    size = std::max(size, CHUNK_MIN);
    return (n + size - 1) / size;
}

struct Build {
    SahParams params;
    std::vector<Triangle> tris;
    std::vector<PrimRef> refs[2];
    std::vector<u32> prim_indices;
    std::vector<BvhNode> nodes;
    u32 used = 0;
    std::vector<SahSmallRoot> smalls;
    u32 small_count = 0;
    u32 levels = 0, max_depth = 0;

    // sah_levels_cuda.rs, Levels::level.
    u32 level(std::vector<SahTask>& tasks, std::vector<u32>& chunk_counts, bool& chunked, u32 parity) {
        const u32 m = (u32)tasks.size();
        auto plans = uninit<SahPlan>(m);
        std::vector<u32> chunk_first;
        std::vector<SahChunk> chunks;
        const PrimRef* input = refs[parity].data();
        PrimRef* output = refs[parity ^ 1].data();
        if (chunked) {
            const u32 total = exclusive_scan(chunk_counts, chunk_first);
            chunks = uninit<SahChunk>(total);
            LAUNCH(sah_chunk_setup, blocks_for(m, 4), 128, tasks.data(), m, chunk_first.data(), chunks.data());
            auto bins = uninit<int>((size_t)total * SAH_BINS_WORDS);
            LAUNCH(sah_bin_chunks, total, 1024, tasks.data(), chunks.data(), &params, input, bins.data());
            LAUNCH(sah_plan_chunked, total, 256, tasks.data(), chunks.data(), &params, input, bins.data(),
                   plans.data());
        }
        auto sides = uninit<SplitSides>(m);
        LAUNCH(sah_split_warp, blocks_for(m, 4), 128, tasks.data(), m, &params, input, output,
               prim_indices.data(), plans.data(), sides.data());
        std::vector<SplitSides> chunk_sides;
        if (chunked) {
            chunk_sides = uninit<SplitSides>(chunks.size());
            LAUNCH(sah_partition_chunks, (unsigned)chunks.size(), 1024, tasks.data(), chunks.data(), plans.data(),
                   input, output, prim_indices.data(), chunk_sides.data());
        }
        grow(nodes, used + 2 * m);
        grow(smalls, small_count + 2 * m);
        auto next = uninit<SahTask>(2 * m);
        auto next_chunks = uninit<u32>(2 * m);
        std::vector<u32> counters(4, 0);
        const u32 tiles = blocks_for(m, SCAN_TILE);
        std::vector<u64> status(tiles + 1, 0);
        LAUNCH(sah_emit, tiles, 256, tasks.data(), plans.data(), sides.data(),
               chunked ? chunk_sides.data() : nullptr, chunked ? chunk_first.data() : nullptr, (u64)m,
               params.sweep_max, used, small_count, parity ^ 1, nodes.data(), next.data(), next_chunks.data(),
               smalls.data(), counters.data(), status.data(), (u32*)(status.data() + tiles));
        used += counters[0] + counters[1];
        small_count += counters[1];
        next.resize(counters[0]);
        next_chunks.resize(counters[0]);
        tasks = next;
        chunk_counts = next_chunks;
        chunked = counters[2] != 0;
        return counters[0];
    }

    // sweep_sah_cuda.rs, small_stage.
    void small_stage() {
        nodes.resize(used);
        if (small_count == 0) return;
        const u32 count = small_count;
        auto reserved = uninit<BvhNode>(2 * refs[0].size());
        auto below = uninit<u32>(count);
        auto depth = uninit<u32>(count);
        LAUNCH(sah_small_subtrees, blocks_for(count, 4), 128, smalls.data(), count, &params, refs[0].data(),
               refs[1].data(), prim_indices.data(), nodes.data(), reserved.data(), below.data(), depth.data());
        std::vector<u32> offsets;
        const u32 total = exclusive_scan(below, offsets);
        max_depth = std::max(max_depth, *std::max_element(depth.begin(), depth.end()));
        auto packed = uninit<BvhNode>(used + total);
        std::copy(nodes.begin(), nodes.end(), packed.begin());
        LAUNCH(sah_relocate, blocks_for((size_t)count * 32, 256), 256, smalls.data(), count, below.data(),
               offsets.data(), used, reserved.data(), packed.data());
        nodes = packed;
    }

    // binned_sah_cuda.rs, Build::run.
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
        refs[0] = uninit<PrimRef>(count);
        refs[1] = uninit<PrimRef>(count);
        const u32 blocks = std::min(blocks_for(count, 256), 256u);
        auto partials = uninit<float>(12 * blocks);
        LAUNCH(sah_references, blocks, 256, tris.data(), ids.data(), (u64)count, refs[0].data(), partials.data());
        const u32 parked_count = n - count;
        const u32 slot = parked_count > 0 ? 1 : 0, depth = slot;
        std::vector<SahTask> root = uninit<SahTask>(1);
        nodes = uninit<BvhNode>(64);
        LAUNCH(sah_root, 1, 32, partials.data(), blocks, count, slot, depth, parked_count, root.data(), nodes.data());
        used = slot + (parked_count > 0 ? 2 : 1);
        max_depth = depth;
        if (count <= params.sweep_max) {
            smalls = uninit<SahSmallRoot>(1);
            LAUNCH(sah_root_small, 1, 32, root.data(), smalls.data());
            small_count = 1;
        } else {
            smalls = uninit<SahSmallRoot>(64);
            std::vector<u32> chunk_counts = {count > WARP_MAX ? host_chunk_count(count) : 0u};
            bool chunked = count > WARP_MAX;
            u32 parity = 0, m = 1;
            while (m > 0) {
                max_depth = depth + levels;
                m = level(root, chunk_counts, chunked, parity);
                parity ^= 1;
                ++levels;
            }
        }
        small_stage();
    }
};

int main(int argc, char** argv) {
    const EmulationFiles files = open_files(argc, argv, "sah_kernels");
    FILE* in = files.in;
    FILE* out = files.out;
    Build b;
    b.params = read_array<SahParams>(in, 1)[0];
    const u32 n = read_array<u32>(in, 1)[0];
    b.tris = read_array<Triangle>(in, n);
    b.run();

    // binned_sah_cuda.rs, Build::finish.
    auto leaf_tris = uninit<Triangle>(n);
    auto slots = uninit<u32>(n);
    LAUNCH(sah_leaf_triangles, stride_blocks(n), 256, b.tris.data(), b.prim_indices.data(), (u64)n,
           leaf_tris.data(), slots.data());
    const size_t nodes = b.nodes.size();
    const u32 count = (u32)nodes;
    fwrite(&count, 4, 1, out);
    write_array(out, b.nodes);
    write_array(out, b.prim_indices);
    write_array(out, leaf_tris);
    write_array(out, slots);
    const u32 shape[3] = {b.levels, b.small_count, b.max_depth};
    fwrite(shape, 4, 3, out);
    fclose(out);
    return 0;
}
