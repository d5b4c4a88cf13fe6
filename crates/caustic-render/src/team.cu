// team.cu: a team's merges in one launch (team_cuda.rs's copy_pieces) and
// its whole-image partial sums added into a member's band (add_band_sums). The photon mapper's team on several GPUs
// shares its estimates and gathers round-robin over all of the frame's eye
// vertices, each member splatting into a whole-image buffer of its own;
// each member then adds every member's pixels of its band, one member
// after another in rank order, to the band's framebuffer.
#include "scene.cuh"

// frame->framebuffer's floats from pixel `first_pixel` on, plus `sums`
// (n floats, three a pixel).
extern "C" __global__ void __launch_bounds__(256)
team_add_band(const FrameParams* frame, u32 first_pixel, const float* sums, u32 n) {
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float* band = (float*)frame->framebuffer + 3ull * first_pixel;
    band[i] += sums[i];
}

// A merge's pieces in one launch, where one copy call per piece would pay
// the driver's overhead hundreds of times a pass: piece p is pieces[3p + 2]
// bytes from address pieces[3p] (this device's memory or a peer's, read
// over NVLink) to pieces[3p + 1]. The host cuts pieces to at most a chunk,
// so the blocks share the bytes evenly.
extern "C" __global__ void __launch_bounds__(256)
team_copy_pieces(const unsigned long long* pieces, u32 count) {
    for (u32 p = blockIdx.x; p < count; p += gridDim.x) {
        const unsigned long long from = pieces[3 * p], to = pieces[3 * p + 1];
        const unsigned long long bytes = pieces[3 * p + 2];
        if (((from | to | bytes) & 15ull) == 0) {
            const uint4* src = (const uint4*)from;
            uint4* dst = (uint4*)to;
            for (unsigned long long i = threadIdx.x; i < bytes / 16; i += blockDim.x) dst[i] = src[i];
        } else {
            const unsigned char* src = (const unsigned char*)from;
            unsigned char* dst = (unsigned char*)to;
            for (unsigned long long i = threadIdx.x; i < bytes; i += blockDim.x) dst[i] = src[i];
        }
    }
}
