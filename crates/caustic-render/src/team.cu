// team.cu: a team's whole-image partial sums added into a member's band
// (team_cuda.rs's add_band_sums). The photon mapper's team on several GPUs
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
