// collision_kernels.cpp: src/collision.cu's ray generation, compiled
// unchanged by the host compiler over cuda_fibers.h (the kernel ranks each
// agent's segments by warp ballots) and launched as collision_cuda.rs
// launches it, a warp per agent in blocks of COLLISION_THREADS, for
// tests/collision_kernels_on_cpu.rs.
//
//   collision_kernels INPUT OUTPUT
//
// INPUT: u32 agents, u32 rays per agent, f32 progress, u32 frame, u64 seed,
// then 2 float4 per agent (the paths as collision_cuda.rs uploads them).
// OUTPUT: the segments (32 bytes each).
#include "cuda_fibers.h"
#include "emulation_io.h"
#include "collision.cu"

#include <vector>

int main(int argc, char** argv) {
    const EmulationFiles files = open_files(argc, argv, "collision_kernels");
    FILE* in = files.in;
    FILE* out = files.out;
    u32 agents = 0, rays = 0, frame = 0;
    float progress = 0.0f;
    u64 seed = 0;
    bool ok = fread(&agents, 4, 1, in) == 1 && fread(&rays, 4, 1, in) == 1 &&
              fread(&progress, 4, 1, in) == 1 && fread(&frame, 4, 1, in) == 1 &&
              fread(&seed, 8, 1, in) == 1;
    std::vector<float4> paths(2 * (size_t)agents);
    ok = ok && fread(paths.data(), sizeof(float4), paths.size(), in) == paths.size();
    if (!ok) {
        fprintf(stderr, "short input\n");
        return 2;
    }
    std::vector<Ray> segments((size_t)agents * rays);
    const unsigned blocks = (unsigned)(((u64)agents * 32u + COLLISION_THREADS - 1) / COLLISION_THREADS);
    emu::launch("collision_rays", blocks, COLLISION_THREADS, collision_rays, paths.data(), agents,
                rays, progress, seed, frame, segments.data());
    fwrite(segments.data(), sizeof(Ray), segments.size(), out);
    fclose(out);
    return 0;
}
