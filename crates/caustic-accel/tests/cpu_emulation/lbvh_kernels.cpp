// lbvh_kernels.cpp: src/bvh/build/lbvh.cu's one-launch tree in Karras's
// numbering (lbvh_karras_30), compiled unchanged by the host compiler over cuda_fibers.h and launched
// as the GPU launches them (blocks of 256 threads; the fibers of a block
// switch at warp barriers, blocks run one after another: a valid schedule,
// in which each climb's atomics see the ones before), for
// tests/lbvh_kernels_on_cpu.rs.
//
//   lbvh_kernels INPUT OUTPUT
//
// INPUT: u32 n, then n u32 sorted codes, n u32 ids (the scene triangle of
// each slot), n scene triangles (48 bytes each).
// OUTPUT: the 2n - 1 nodes (32 bytes each), the n leaf triangles, the n
// slots, then the root's height (u32).
#include "cuda_fibers.h"
#include "emulation_io.h"
#include "lbvh.cu"

#include <vector>

int main(int argc, char** argv) {
    const EmulationFiles files = open_files(argc, argv, "lbvh_kernels");
    FILE* in = files.in;
    FILE* out = files.out;
    u32 n = 0;
    bool ok = fread(&n, 4, 1, in) == 1 && n >= 2;
    std::vector<u32> codes(n), ids(n);
    std::vector<Triangle> scene(n);
    ok = ok && fread(codes.data(), 4, n, in) == n && fread(ids.data(), 4, n, in) == n &&
         fread(scene.data(), sizeof(Triangle), n, in) == n;
    if (!ok) {
        fprintf(stderr, "bad input\n");
        return 2;
    }
    std::vector<u32> waiting(n - 1, 0u), slots(n, 0u);
    std::vector<float4> parked(4 * (size_t)(n - 1));
    std::vector<BvhNode> nodes(2 * (size_t)n - 1);
    std::vector<Triangle> leaves(n);
    u32 height = 0;
    const unsigned blocks = (n + LBVH_THREADS - 1) / LBVH_THREADS;
    emu::launch("lbvh_karras_30", blocks, LBVH_THREADS, lbvh_karras_30, codes.data(), ids.data(),
                scene.data(), n, waiting.data(), parked.data(), nodes.data(), leaves.data(),
                slots.data(), &height);
    fwrite(nodes.data(), sizeof(BvhNode), nodes.size(), out);
    fwrite(leaves.data(), sizeof(Triangle), leaves.size(), out);
    fwrite(slots.data(), 4, slots.size(), out);
    fwrite(&height, 4, 1, out);
    fclose(out);
    return 0;
}
