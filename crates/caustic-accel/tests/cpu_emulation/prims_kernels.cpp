// prims_kernels.cpp: caustic-gpu's forward scans (src/ops/scan.cu) and
// radix sorts (src/ops/radix_sort.cu) run on the host: the kernels compiled
// unchanged over cuda_fibers.h, every CUDA thread a fiber, driven by the
// same launch sequence as scan.rs and radix_sort.rs. For
// tests/prims_kernels_on_cpu.rs.
//
//   prims_kernels INPUT OUTPUT
//
// INPUT: u32 operation (0 exclusive scan, 1 inclusive scan, 2 u32 keys-only
// sort, 3 u32 pair sort), u32 blocks (the scans' grid; 0: one per tile),
// u32 n, n u32 keys, then for pair sorts n u32 values. OUTPUT: n u32
// results (scans) or keys, then for scans the total and for pair sorts the
// values. Outputs start poisoned, so an unwritten element shows.
#include "cuda_fibers.h"
#include "scan.cu"
#include "radix_sort.cu"

#include <vector>

#define LAUNCH(kernel, blocks, threads, ...) \
    do { \
        if ((blocks) > 0) emu::launch(#kernel, (blocks), (threads), kernel, __VA_ARGS__); \
    } while (0)

static unsigned blocks_for(size_t n, size_t per) { return (unsigned)((n + per - 1) / per); }

static void read_exact(FILE* f, void* p, size_t bytes) {
    if (bytes && fread(p, 1, bytes, f) != bytes) {
        std::fprintf(stderr, "short input\n");
        std::exit(2);
    }
}

int main(int argc, char** argv) {
    if (argc != 3) return 2;
    FILE* in = std::fopen(argv[1], "rb");
    if (!in) return 2;
    u32 op = 0, grid = 0, n = 0;
    read_exact(in, &op, 4);
    read_exact(in, &grid, 4);
    read_exact(in, &n, 4);
    std::vector<u32> keys(n), values(op == 3 ? n : 0);
    read_exact(in, keys.data(), 4ull * n);
    read_exact(in, values.data(), 4ull * values.size());
    std::fclose(in);
    std::vector<u32> out;
    u32 total = 0xA5A5A5A5u;

    if (op <= 1) {
        // scan.rs: status per tile and the counter zeroed, any grid.
        const size_t tile = SCAN_PIPE_THREADS * SCAN_PIPE_ITEMS;
        const unsigned tiles = blocks_for(n, tile);
        std::vector<u64> status(tiles + 1, 0ull);
        u32* counter = reinterpret_cast<u32*>(&status[tiles]);
        out.assign(n, 0xA5A5A5A5u);
        const unsigned blocks = grid ? grid : tiles;
        if (op == 0)
            LAUNCH(scan_exclusive_u32, blocks, SCAN_PIPE_THREADS, keys.data(), out.data(), &total,
                   (u64)n, status.data(), counter);
        else
            LAUNCH(scan_inclusive_u32, blocks, SCAN_PIPE_THREADS, keys.data(), out.data(), &total,
                   (u64)n, status.data(), counter);
    } else {
        // radix_sort.rs: histograms and their scan, then one pass per digit.
        const bool pairs = op == 3;
        std::vector<u32> hist(4 * SORT_RADIX, 0u);
        LAUNCH(radix_sort_histogram_u32, std::min(blocks_for(n, SORT_THREADS * 32), 8u),
               SORT_THREADS, keys.data(), (u64)n, hist.data(), 0u, 32u, 4u);
        LAUNCH(radix_sort_scan_histograms, 4u, SORT_RADIX, hist.data());
        const size_t tile = pairs ? SORT_THREADS * SORT_ITEMS_U32
                                  : SORT_KEYS_THREADS_U32 * SORT_KEYS_ITEMS_U32;
        const unsigned threads = pairs ? SORT_THREADS : SORT_KEYS_THREADS_U32;
        const unsigned tiles = blocks_for(n, tile);
        std::vector<u32> alt_keys(n, 0xA5A5A5A5u), alt_values(values.size(), 0xA5A5A5A5u);
        for (u32 pass = 0; pass < 4; ++pass) {
            std::vector<u32> status(tiles * SORT_RADIX + 1, 0u);
            u32* counter = &status[tiles * SORT_RADIX];
            const bool even = pass % 2 == 0;
            u32* kin = even ? keys.data() : alt_keys.data();
            u32* kout = even ? alt_keys.data() : keys.data();
            u32* vin = pairs ? (even ? values.data() : alt_values.data()) : nullptr;
            u32* vout = pairs ? (even ? alt_values.data() : values.data()) : nullptr;
            if (pairs)
                LAUNCH(radix_sort_onesweep_u32, tiles, threads, kin, kout, vin, vout, (u64)n,
                       8u * pass, 0xffu, hist.data() + pass * SORT_RADIX, status.data(), counter);
            else
                LAUNCH(radix_sort_onesweep_keys_u32, tiles, threads, kin, kout, vin, vout, (u64)n,
                       8u * pass, 0xffu, hist.data() + pass * SORT_RADIX, status.data(), counter);
        }
        out = keys; // four passes: the result is back in the caller's buffers
    }

    FILE* o = std::fopen(argv[2], "wb");
    if (!o) return 2;
    std::fwrite(out.data(), 4, out.size(), o);
    if (op <= 1) std::fwrite(&total, 4, 1, o);
    if (op == 3) std::fwrite(values.data(), 4, values.size(), o);
    std::fclose(o);
    return 0;
}
