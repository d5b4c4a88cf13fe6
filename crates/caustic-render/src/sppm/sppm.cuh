// sppm.cuh: the records of GPU stochastic progressive photon mapping
// (sppm.cu), each checked field by field against its Rust twin in
// caustic-render's sppm/kernels_cuda.rs through the generated render_layout.cuh.
#pragma once
#include "scene.cuh"

// caustic_render::sppm::kernels_cuda::GpuSppmPath: a pixel's eye path of one pass.
// 16-byte aligned, as scene.cuh's Path: copied in two 16-byte accesses.
struct alignas(16) SppmPath {
    u64 key;         // draw key of the current branch
    float weight[3]; // throughput of the specular chain
    u32 pixel;       // y * width + x, or NO_PIXEL
    float length;    // path length so far (the footprint's scale)
    u32 pad;
};
CAUSTIC_CHECK_SIZE(SppmPath);
CAUSTIC_CHECK_FIELD(SppmPath, key);
CAUSTIC_CHECK_FIELD(SppmPath, weight);
CAUSTIC_CHECK_FIELD(SppmPath, pixel);
CAUSTIC_CHECK_FIELD(SppmPath, length);

// caustic_render::sppm::kernels_cuda::GpuVisiblePoint: sppm::visible::VisiblePoint, one slot
// per pixel (`valid` 0 where the pixel has none this pass); 16-byte
// aligned: stored and read in six 16-byte accesses.
struct alignas(16) VisiblePoint {
    float position[3];
    u32 valid;
    float normal[3];         // geometric, towards the viewer
    u32 material;
    float shading_normal[3]; // towards the viewer
    float footprint;
    float wo[3];
    u32 pad0;
    float weight[3];
    u32 pad1;
    float albedo[3];
    u32 pad2;
};
CAUSTIC_CHECK_SIZE(VisiblePoint);
CAUSTIC_CHECK_FIELD(VisiblePoint, position);
CAUSTIC_CHECK_FIELD(VisiblePoint, valid);
CAUSTIC_CHECK_FIELD(VisiblePoint, normal);
CAUSTIC_CHECK_FIELD(VisiblePoint, material);
CAUSTIC_CHECK_FIELD(VisiblePoint, shading_normal);
CAUSTIC_CHECK_FIELD(VisiblePoint, footprint);
CAUSTIC_CHECK_FIELD(VisiblePoint, wo);
CAUSTIC_CHECK_FIELD(VisiblePoint, weight);
CAUSTIC_CHECK_FIELD(VisiblePoint, albedo);

// caustic_render::sppm::kernels_cuda::GpuSppmPixel: sppm::pixels::PixelState in doubles.
struct SppmPixel {
    double photons; // N
    double radius;  // R; 0 until the first visible point sets it
    double flux[3]; // tau
    double traced[3];
};
CAUSTIC_CHECK_SIZE(SppmPixel);
CAUSTIC_CHECK_FIELD(SppmPixel, photons);
CAUSTIC_CHECK_FIELD(SppmPixel, radius);
CAUSTIC_CHECK_FIELD(SppmPixel, flux);
CAUSTIC_CHECK_FIELD(SppmPixel, traced);
