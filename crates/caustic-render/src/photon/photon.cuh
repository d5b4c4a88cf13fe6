// photon.cuh: the records of the GPU photon mapper (photon.cu), each
// checked field by field against its Rust twin in photon/kernels_cuda.rs
// through the generated render_layout.cuh.
#pragma once
#include "scene.cuh"

// caustic_render::photon::kernels_cuda::GpuPhoton, caustic_render::photon::Photon's twin:
// position, power (already divided by the emitted count), octahedral
// incoming direction and normal, 32 bytes, 16-byte aligned (as scene.cuh's
// Path: copied in two 16-byte accesses).
struct alignas(16) Photon {
    float position[3];
    float power[3];
    u32 incoming;
    u32 normal;
};
CAUSTIC_CHECK_SIZE(Photon);
CAUSTIC_CHECK_FIELD(Photon, position);
CAUSTIC_CHECK_FIELD(Photon, power);
CAUSTIC_CHECK_FIELD(Photon, incoming);
CAUSTIC_CHECK_FIELD(Photon, normal);

// caustic_render::photon::records_cuda::GpuShadedPhoton: a photon as the
// radiance estimate reads it (photon_shaded writes it).
struct ShadedPhoton {
    float power[3];
    u32 incoming;
    float normal[3];
    u32 pad;
};
CAUSTIC_CHECK_SIZE(ShadedPhoton);
CAUSTIC_CHECK_FIELD(ShadedPhoton, power);
CAUSTIC_CHECK_FIELD(ShadedPhoton, incoming);
CAUSTIC_CHECK_FIELD(ShadedPhoton, normal);

#define SOURCE_AREA 0u
#define SOURCE_POINT 1u
#define SOURCE_SPOT 2u
#define SOURCE_DIRECTIONAL 3u

// caustic_render::photon::kernels_cuda::GpuPhotonSource: one light as a photon source
// (caustic_render::photon::emit's Source with its power and probability).
struct PhotonSource {
    float a[3];     // position (point, spot), direction (directional)
    u32 kind;       // SOURCE_*
    float b[3];     // spot axis, disc centre (directional)
    u32 area;       // index into the area lights (area)
    float power[3]; // power (area, point, directional), intensity (spot)
    float cos_start;
    float cos_width;
    float radius;   // disc radius (directional)
    float pick;     // probability of choosing this source
    float cdf;      // running sum of the probabilities
};
CAUSTIC_CHECK_SIZE(PhotonSource);
CAUSTIC_CHECK_FIELD(PhotonSource, a);
CAUSTIC_CHECK_FIELD(PhotonSource, kind);
CAUSTIC_CHECK_FIELD(PhotonSource, b);
CAUSTIC_CHECK_FIELD(PhotonSource, area);
CAUSTIC_CHECK_FIELD(PhotonSource, power);
CAUSTIC_CHECK_FIELD(PhotonSource, cos_start);
CAUSTIC_CHECK_FIELD(PhotonSource, cos_width);
CAUSTIC_CHECK_FIELD(PhotonSource, radius);
CAUSTIC_CHECK_FIELD(PhotonSource, pick);
CAUSTIC_CHECK_FIELD(PhotonSource, cdf);

#define PATH_LIGHT 0u
#define PATH_SPECULAR 1u
#define PATH_DIFFUSE 2u

// caustic_render::photon::kernels_cuda::GpuPhotonPath: one photon in flight: its PCG32
// stream, its power and the kinds of bounce it has made (PATH_*).
struct alignas(16) PhotonPath {
    u64 state;
    u64 inc;
    float power[3];
    u32 kind;
};
CAUSTIC_CHECK_SIZE(PhotonPath);
CAUSTIC_CHECK_FIELD(PhotonPath, state);
CAUSTIC_CHECK_FIELD(PhotonPath, inc);
CAUSTIC_CHECK_FIELD(PhotonPath, power);
CAUSTIC_CHECK_FIELD(PhotonPath, kind);

#define GLOBAL_AFTER_FIRST_BOUNCE 0u
#define GLOBAL_INDIRECT_ONLY 1u
#define GLOBAL_ALL 2u

// caustic_render::photon::kernels_cuda::PhotonParams: one photon pass.
struct PhotonParams {
    u64 sources;      // PhotonSource[source_count]
    u64 first_photon; // index of the wave's first photon
    u64 seed;
    u32 source_count;
    u32 max_bounces;
    float inv_photons; // 1 / photons emitted
    u32 global_rule;   // GLOBAL_*
    u32 mean_roulette; // 1: mean albedo, 0: max albedo
    u32 caustic_only;  // store caustic photons only, stop at the first diffuse hit
};
CAUSTIC_CHECK_SIZE(PhotonParams);
CAUSTIC_CHECK_FIELD(PhotonParams, sources);
CAUSTIC_CHECK_FIELD(PhotonParams, first_photon);
CAUSTIC_CHECK_FIELD(PhotonParams, seed);
CAUSTIC_CHECK_FIELD(PhotonParams, source_count);
CAUSTIC_CHECK_FIELD(PhotonParams, max_bounces);
CAUSTIC_CHECK_FIELD(PhotonParams, inv_photons);
CAUSTIC_CHECK_FIELD(PhotonParams, global_rule);
CAUSTIC_CHECK_FIELD(PhotonParams, mean_roulette);
CAUSTIC_CHECK_FIELD(PhotonParams, caustic_only);

// caustic_render::photon::kernels_cuda::GridView: one hash grid (caustic_accel::points::hash_grid_cuda::GpuHashGrid).
struct GridView {
    u64 start;  // u32[buckets]
    u64 end;    // u32[buckets]
    u64 sorted; // float4[count]: positions in bucket order, w = photon index bits
    float origin[3];
    float inv_cell;
    u32 dims[3];
    u32 table_bits;
};
CAUSTIC_CHECK_SIZE(GridView);
CAUSTIC_CHECK_FIELD(GridView, start);
CAUSTIC_CHECK_FIELD(GridView, end);
CAUSTIC_CHECK_FIELD(GridView, sorted);
CAUSTIC_CHECK_FIELD(GridView, origin);
CAUSTIC_CHECK_FIELD(GridView, inv_cell);
CAUSTIC_CHECK_FIELD(GridView, dims);
CAUSTIC_CHECK_FIELD(GridView, table_bits);

// caustic_render::photon::kernels_cuda::PhotonMapView: a photon map in two hash grids, one
// with cells of the largest search radius (`coarse`), one with cells about
// the k-th neighbour's distance in its dense parts (`fine`), and the
// estimate's settings.
struct PhotonMapView {
    GridView coarse;
    GridView fine;
    u64 photons; // Photon[count], input order
    u64 shaded;  // ShadedPhoton[count], the same order
    u32 k;
    float max_radius;
    u32 cone;
    u32 count;
    u32 coarse_limit; // the coarse grid answers queries with at most this many candidates
    u32 pad;
};
CAUSTIC_CHECK_SIZE(PhotonMapView);
CAUSTIC_CHECK_FIELD(PhotonMapView, coarse);
CAUSTIC_CHECK_FIELD(PhotonMapView, fine);
CAUSTIC_CHECK_FIELD(PhotonMapView, photons);
CAUSTIC_CHECK_FIELD(PhotonMapView, shaded);
CAUSTIC_CHECK_FIELD(PhotonMapView, k);
CAUSTIC_CHECK_FIELD(PhotonMapView, max_radius);
CAUSTIC_CHECK_FIELD(PhotonMapView, cone);
CAUSTIC_CHECK_FIELD(PhotonMapView, count);
CAUSTIC_CHECK_FIELD(PhotonMapView, coarse_limit);

// caustic_render::photon::kernels_cuda::GpuEyeVertex: a diffuse end of an eye path, where
// the photon maps' radiance estimates are added.
struct alignas(16) EyeVertex {
    float point[3];
    u32 pixel;
    float weight[3]; // the path's throughput
    u32 material;
    float n[3];      // shading normal towards the viewer
    u32 pad0;
    float ng[3];     // geometric normal towards the viewer
    u32 pad1;
    float wo[3];     // unit direction towards the viewer
    u32 pad2;
    float albedo[3];
    u32 pad3;
    u64 key; // the path's random key (crate::draw)
    u64 pad4;
};
CAUSTIC_CHECK_SIZE(EyeVertex);
CAUSTIC_CHECK_FIELD(EyeVertex, key);
CAUSTIC_CHECK_FIELD(EyeVertex, point);
CAUSTIC_CHECK_FIELD(EyeVertex, pixel);
CAUSTIC_CHECK_FIELD(EyeVertex, weight);
CAUSTIC_CHECK_FIELD(EyeVertex, material);
CAUSTIC_CHECK_FIELD(EyeVertex, n);
CAUSTIC_CHECK_FIELD(EyeVertex, ng);
CAUSTIC_CHECK_FIELD(EyeVertex, wo);
CAUSTIC_CHECK_FIELD(EyeVertex, albedo);

// caustic_render::photon::kernels_cuda::GpuGatherPath: one final-gather ray in flight.
struct alignas(16) GatherPath {
    u64 key;           // the ray's random key
    float throughput[3];
    u32 slot;          // its result slot: vertex * rays per vertex + ray
    u32 depth;         // specular bounces so far
    u32 pad;
};
CAUSTIC_CHECK_SIZE(GatherPath);
CAUSTIC_CHECK_FIELD(GatherPath, key);
CAUSTIC_CHECK_FIELD(GatherPath, throughput);
CAUSTIC_CHECK_FIELD(GatherPath, slot);
CAUSTIC_CHECK_FIELD(GatherPath, depth);

// ------------------------------------------------------------ octahedral

__device__ __forceinline__ float sign_not_zero(float x) { return x >= 0.0f ? 1.0f : -1.0f; }

// record::octahedral_encode: unit vector to 2 x 16 bits (x low).
__device__ u32 octahedral_encode(float3 v) {
    float l1 = fabsf(v.x) + fabsf(v.y) + fabsf(v.z);
    if (!isfinite(l1) || l1 <= 0.0f) v = make_float3(0.0f, 0.0f, 1.0f), l1 = 1.0f;
    float px = v.x / l1, py = v.y / l1;
    if (v.z < 0.0f) {
        float fx = (1.0f - fabsf(py)) * sign_not_zero(px);
        float fy = (1.0f - fabsf(px)) * sign_not_zero(py);
        px = fx;
        py = fy;
    }
    float qx = roundf((fminf(fmaxf(px, -1.0f), 1.0f) * 0.5f + 0.5f) * 65535.0f);
    float qy = roundf((fminf(fmaxf(py, -1.0f), 1.0f) * 0.5f + 0.5f) * 65535.0f);
    return (u32)qx | ((u32)qy << 16);
}

// record::octahedral_decode.
__device__ float3 octahedral_decode(u32 bits) {
    float px = (float)(bits & 0xffffu) / 65535.0f * 2.0f - 1.0f;
    float py = (float)(bits >> 16) / 65535.0f * 2.0f - 1.0f;
    float z = 1.0f - fabsf(px) - fabsf(py);
    if (z < 0.0f) {
        float fx = (1.0f - fabsf(py)) * sign_not_zero(px);
        float fy = (1.0f - fabsf(px)) * sign_not_zero(py);
        px = fx;
        py = fy;
    }
    return normalize(make_float3(px, py, z));
}

