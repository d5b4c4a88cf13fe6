//! `render_layout.cuh`: the byte layout of the records the renderers share
//! with their kernels, from the Rust definitions; `scene.cuh`,
//! `photon/photon.cuh` and `sppm/sppm.cuh` check their CUDA twins against
//! it (see `caustic_gpu::layout`).

use crate::photon::records_cuda::{
    GpuEyeVertex, GpuGatherPath, GpuPhoton, GpuPhotonPath, GpuPhotonSource, GpuShadedPhoton,
    GridView, PhotonMapView, PhotonParams,
};
use crate::scene_cuda::{
    FrameParams, GpuAreaLight, GpuLight, GpuMaterial, GpuPath, GpuShading, GpuTexture,
};
use crate::sppm::kernels_cuda::{GpuSppmPath, GpuSppmPixel, GpuVisiblePoint};

/// The text of `render_layout.cuh`.
pub fn header() -> &'static str {
    caustic_gpu::layout_header!(
        "render_layout.cuh",
        [
            GpuPath as "Path" { key, weight, pixel, depth },
            GpuMaterial as "Material" { emission, kind, color, two_sided, specular, exponent, ior, texture },
            GpuShading as "Shading" { normals, uvs, material, flags },
            GpuLight as "Light" { position, kind, direction, cos_start, intensity, cos_width },
            GpuAreaLight as "AreaLight" { emission, two_sided, first, count, total_area },
            GpuTexture as "Texture" { offset, width, height },
            FrameParams as "FrameParams" { triangles, framebuffer, seed, eye, ray_epsilon, width, height, spp, background, max_depth, light_samples, light_count, area_count, schlick },
            GpuPhoton as "Photon" { position, power, incoming, normal },
            GpuShadedPhoton as "ShadedPhoton" { power, incoming, normal },
            GpuPhotonSource as "PhotonSource" { a, kind, b, area, power, cos_start, cos_width, radius, pick, cdf },
            GpuPhotonPath as "PhotonPath" { state, inc, power, kind },
            PhotonParams as "PhotonParams" { sources, first_photon, seed, source_count, max_bounces, inv_photons, global_rule, mean_roulette, caustic_only },
            GridView as "GridView" { start, end, sorted, origin, inv_cell, dims, table_bits },
            PhotonMapView as "PhotonMapView" { coarse, fine, photons, shaded, k, max_radius, cone, count, coarse_limit },
            GpuEyeVertex as "EyeVertex" { point, pixel, weight, material, n, ng, wo, albedo, key },
            GpuGatherPath as "GatherPath" { key, throughput, slot, depth },
            GpuSppmPath as "SppmPath" { key, weight, pixel, length },
            GpuVisiblePoint as "VisiblePoint" { position, valid, normal, material, shading_normal, footprint, wo, weight, albedo },
            GpuSppmPixel as "SppmPixel" { photons, radius, flux, traced },
        ]
    )
}
