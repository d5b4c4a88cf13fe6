// grid_kernels.cpp: the grid's CUDA kernels (src/grid/build.cu, dda.cu),
// compiled unchanged by the host compiler over cuda_shim.h and run one
// thread at a time, for tests/grid_kernels_on_cpu.rs. It reads a grid built
// by the CPU (in the device layout) and rays, and writes, per triangle, the
// cells the build kernels put it in (for_each_covered_cell, the body of the
// count and write passes), and per ray the DDA kernels' closest hit and
// any-hit answer.
//
//   grid_kernels INPUT OUTPUT
//
// INPUT: GridFrame, then u32 counts (triangles, cells, references, macro
// cells, slab floats, rays), then the triangles, cell starts, cell ends,
// references, macro-cell boxes, slab floats and rays, little-endian as the
// Rust structs lay them out. OUTPUT: per triangle its cell count and cells,
// then the hits (16 bytes each), then the occlusion words.
#include "cuda_shim.h"
#include "emulation_io.h"
#include "dda.cu"
#include "build.cu"

#include <vector>

int main(int argc, char** argv) {
    const EmulationFiles files = open_files(argc, argv, "grid_kernels");
    FILE* in = files.in;
    FILE* out = files.out;
    const GridFrame frame = read_array<GridFrame>(in, 1)[0];
    const std::vector<u32> n = read_array<u32>(in, 6);
    const auto tris = read_array<Triangle>(in, n[0]);
    const auto cell_start = read_array<u32>(in, n[1]);
    const auto cell_end = read_array<u32>(in, n[1]);
    const auto prims = read_array<u32>(in, n[2]);
    const auto macro_bounds = read_array<Aabb>(in, n[3]);
    const auto slabs = read_array<float>(in, n[4]);
    const auto rays = read_array<Ray>(in, n[5]);

    // The build's cells of every triangle.
    for (u32 i = 0; i < n[0]; ++i) {
        float3 a, b, c;
        load_triangle(tris.data(), i, a, b, c);
        std::vector<u32> cells;
        if (frame.cells > 0)
            for_each_covered_cell(frame, a, b, c, [&](u32 cell) { cells.push_back(cell); });
        const u32 count = (u32)cells.size();
        fwrite(&count, 4, 1, out);
        fwrite(cells.data(), 4, cells.size(), out);
    }

    // The traversal, thread by thread, in blocks of GRID_TRACE_THREADS.
    std::vector<Hit> hits(n[5]);
    std::vector<u32> occluded(n[5]);
    blockDim.x = GRID_TRACE_THREADS;
    for (u32 w = 0; w < n[5]; ++w) {
        blockIdx.x = w / GRID_TRACE_THREADS;
        threadIdx.x = w % GRID_TRACE_THREADS;
        grid_trace_closest(&frame, cell_start.data(), cell_end.data(), prims.data(), tris.data(),
                           macro_bounds.data(), slabs.data(), n[2], rays.data(), n[5], 0,
                           hits.data());
        grid_trace_any(&frame, cell_start.data(), cell_end.data(), prims.data(), tris.data(),
                       macro_bounds.data(), slabs.data(), n[2], rays.data(), n[5], 0,
                       occluded.data());
    }
    fwrite(hits.data(), sizeof(Hit), hits.size(), out);
    fwrite(occluded.data(), 4, occluded.size(), out);
    return fclose(out) == 0 ? 0 : 1;
}
