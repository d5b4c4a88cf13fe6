// whitted.cuh: the scene and path records of the wavefront Whitted
// renderer (whitted.cu), each checked field by field against its Rust twin
// in caustic-gpu's whitted.rs through the generated layout.cuh.
#pragma once
#include "bvh.cuh"

// caustic_gpu::whitted::GpuPath: one live ray of the specular tree.
struct Path {
    u64 key;         // counter-based RNG key of this tree vertex
    float weight[3]; // product of the BSDF weights from the eye
    u32 pixel;       // y * width + x, or NO_PIXEL for padding
    u32 depth;       // specular bounces before this ray
    u32 pad;
};
CAUSTIC_CHECK_SIZE(Path);
CAUSTIC_CHECK_FIELD(Path, key);
CAUSTIC_CHECK_FIELD(Path, weight);
CAUSTIC_CHECK_FIELD(Path, pixel);
CAUSTIC_CHECK_FIELD(Path, depth);

// caustic_gpu::whitted::GpuMaterial; `kind` is one of the MAT_* values.
struct Material {
    float emission[3];
    u32 kind;
    float color[3]; // albedo, mirror reflectance or dielectric tint
    u32 two_sided;
    float specular[3];
    float exponent;
    float ior;
    u32 texture; // NO_TEXTURE or an index into the textures
    u32 pad[2];
};
CAUSTIC_CHECK_SIZE(Material);
CAUSTIC_CHECK_FIELD(Material, emission);
CAUSTIC_CHECK_FIELD(Material, kind);
CAUSTIC_CHECK_FIELD(Material, color);
CAUSTIC_CHECK_FIELD(Material, two_sided);
CAUSTIC_CHECK_FIELD(Material, specular);
CAUSTIC_CHECK_FIELD(Material, exponent);
CAUSTIC_CHECK_FIELD(Material, ior);
CAUSTIC_CHECK_FIELD(Material, texture);

#define MAT_DIFFUSE 0u
#define MAT_GLOSSY 1u
#define MAT_MIRROR 2u
#define MAT_DIELECTRIC 3u
#define NO_TEXTURE 0xffffffffu
#define NO_PIXEL 0xffffffffu

// caustic_gpu::whitted::GpuShading: per-triangle shading attributes in
// scene numbering; `flags` bit 0: normals present, bit 1: uvs present.
struct Shading {
    float normals[9];
    float uvs[6];
    u32 material;
    u32 flags;
};
CAUSTIC_CHECK_SIZE(Shading);
CAUSTIC_CHECK_FIELD(Shading, normals);
CAUSTIC_CHECK_FIELD(Shading, uvs);
CAUSTIC_CHECK_FIELD(Shading, material);
CAUSTIC_CHECK_FIELD(Shading, flags);

// caustic_gpu::whitted::GpuLight: a point, spot or directional light.
struct Light {
    float position[3];
    u32 kind; // LIGHT_*
    float direction[3];
    float cos_start;
    float intensity[3]; // intensity, or irradiance for directional lights
    float cos_width;
};
CAUSTIC_CHECK_SIZE(Light);
CAUSTIC_CHECK_FIELD(Light, position);
CAUSTIC_CHECK_FIELD(Light, kind);
CAUSTIC_CHECK_FIELD(Light, direction);
CAUSTIC_CHECK_FIELD(Light, cos_start);
CAUSTIC_CHECK_FIELD(Light, intensity);
CAUSTIC_CHECK_FIELD(Light, cos_width);

#define LIGHT_POINT 0u
#define LIGHT_SPOT 1u
#define LIGHT_DIRECTIONAL 2u

// caustic_gpu::whitted::GpuAreaLight: triangles first .. first + count of
// the light triangle and cdf arrays.
struct AreaLight {
    float emission[3];
    u32 two_sided;
    u32 first;
    u32 count;
    float total_area;
    u32 pad;
};
CAUSTIC_CHECK_SIZE(AreaLight);
CAUSTIC_CHECK_FIELD(AreaLight, emission);
CAUSTIC_CHECK_FIELD(AreaLight, two_sided);
CAUSTIC_CHECK_FIELD(AreaLight, first);
CAUSTIC_CHECK_FIELD(AreaLight, count);
CAUSTIC_CHECK_FIELD(AreaLight, total_area);

// caustic_gpu::whitted::GpuTexture: texels offset .. offset + width * height.
struct Texture {
    u32 offset;
    u32 width;
    u32 height;
    u32 pad;
};
CAUSTIC_CHECK_SIZE(Texture);
CAUSTIC_CHECK_FIELD(Texture, offset);
CAUSTIC_CHECK_FIELD(Texture, width);
CAUSTIC_CHECK_FIELD(Texture, height);

// caustic_gpu::whitted::WhittedParams: the settings, the camera and the
// device addresses of every scene array, in one record.
struct WhittedParams {
    u64 triangles;   // Triangle[], scene numbering
    u64 shading;     // Shading[]
    u64 materials;   // Material[]
    u64 lights;      // Light[]
    u64 area_lights; // AreaLight[]
    u64 light_tris;  // u32[]: scene ids of the area lights' triangles
    u64 light_cdf;   // float[]: their normalised running area
    u64 textures;    // Texture[]
    u64 texels;      // float[3 * texels]
    u64 framebuffer; // float[3 * width * height], sums over samples
    u64 seed;
    float eye[3];
    float ray_epsilon;
    float forward[3];
    u32 width;
    float right[3];
    u32 height;
    float up[3];
    u32 spp;
    float background[3];
    u32 max_depth;
    u32 light_samples;
    u32 light_count;
    u32 area_count;
    u32 schlick;
};
CAUSTIC_CHECK_SIZE(WhittedParams);
CAUSTIC_CHECK_FIELD(WhittedParams, triangles);
CAUSTIC_CHECK_FIELD(WhittedParams, framebuffer);
CAUSTIC_CHECK_FIELD(WhittedParams, seed);
CAUSTIC_CHECK_FIELD(WhittedParams, eye);
CAUSTIC_CHECK_FIELD(WhittedParams, ray_epsilon);
CAUSTIC_CHECK_FIELD(WhittedParams, width);
CAUSTIC_CHECK_FIELD(WhittedParams, height);
CAUSTIC_CHECK_FIELD(WhittedParams, spp);
CAUSTIC_CHECK_FIELD(WhittedParams, background);
CAUSTIC_CHECK_FIELD(WhittedParams, max_depth);
CAUSTIC_CHECK_FIELD(WhittedParams, light_samples);
CAUSTIC_CHECK_FIELD(WhittedParams, light_count);
CAUSTIC_CHECK_FIELD(WhittedParams, area_count);
CAUSTIC_CHECK_FIELD(WhittedParams, schlick);
