// collision_kernels.cpp: src/collision.cu's ray generation, compiled
// unchanged by the host compiler over cuda_shim.h and run as one thread
// (its grid-stride loop then makes every segment), for
// tests/collision_kernels_on_cpu.rs.
//
//   collision_kernels INPUT OUTPUT
//
// INPUT: u32 agents, u32 rays per agent, f32 progress, u32 frame, u64 seed,
// then 2 float4 per agent (the paths as collision_cuda.rs uploads them).
// OUTPUT: the segments (32 bytes each).
#include "cuda_shim.h"
#include "collision.cu"

#include <vector>

int main(int argc, char** argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: collision_kernels INPUT OUTPUT\n");
        return 2;
    }
    FILE* in = fopen(argv[1], "rb");
    FILE* out = fopen(argv[2], "wb");
    if (!in || !out) {
        fprintf(stderr, "cannot open the files\n");
        return 2;
    }
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
    gridDim.x = 1;
    blockDim.x = 1;
    blockIdx.x = 0;
    threadIdx.x = 0;
    collision_rays(paths.data(), agents, rays, progress, seed, frame, segments.data());
    fwrite(segments.data(), sizeof(Ray), segments.size(), out);
    fclose(out);
    return 0;
}
