//! The byte layout of every struct that Rust and CUDA share, written out
//! for the compiler: `layout.cuh`, a header generated at run time from the
//! Rust definitions (`size_of`, `align_of`, `offset_of!`) and handed to NVRTC
//! with every module.
//!
//! `kernels/bvh.cuh` declares the CUDA twin of each struct and
//! `static_assert`s its size, alignment and every field offset against these
//! numbers, so a field added, moved or retyped on one side only is a compile
//! error of every kernel module: in CI (the NVRTC compile test), not a wrong
//! result on the GPU machine. Nothing is kept in step by hand.

use std::fmt::Write as _;
use std::mem::{align_of, offset_of, size_of};
use std::sync::OnceLock;

use caustic_accel::BvhNode;

use crate::bvh::GpuTriangle;
use crate::photon::{
    GpuEyeVertex, GpuGatherPath, GpuPhoton, GpuPhotonPath, GpuPhotonSource, GridView,
    PhotonMapView, PhotonParams,
};
use crate::rays::PrimaryFrame;
use crate::sppm::{GpuSppmPath, GpuSppmPixel, GpuVisiblePoint};
use crate::trace::{GpuHit, GpuRay};
use crate::whitted::{
    GpuAreaLight, GpuLight, GpuMaterial, GpuPath, GpuShading, GpuTexture, WhittedParams,
};

/// The include name of the generated header.
pub const HEADER_NAME: &str = "layout.cuh";

/// `RUST_SIZEOF_T`, `RUST_ALIGNOF_T` and `RUST_OFFSETOF_T_field` for one struct.
macro_rules! describe {
    ($out:expr, $ty:ty, $name:literal, [$($field:ident),+ $(,)?]) => {{
        let out: &mut String = $out;
        writeln!(out, "#define RUST_SIZEOF_{} {}", $name, size_of::<$ty>()).unwrap();
        writeln!(out, "#define RUST_ALIGNOF_{} {}", $name, align_of::<$ty>()).unwrap();
        $(
            writeln!(
                out,
                "#define RUST_OFFSETOF_{}_{} {}",
                $name,
                stringify!($field),
                offset_of!($ty, $field)
            )
            .unwrap();
        )+
    }};
}

/// The text of `layout.cuh`, generated once per process.
pub fn header() -> &'static str {
    static HEADER: OnceLock<String> = OnceLock::new();
    HEADER.get_or_init(|| {
        let mut s = String::from(
            "// layout.cuh: generated at run time by caustic-gpu's layout.rs from the\n\
             // Rust definitions; bvh.cuh checks its structs against these numbers.\n\
             #pragma once\n",
        );
        describe!(&mut s, BvhNode, "BvhNode", [min, first, max, count]);
        describe!(
            &mut s,
            GpuTriangle,
            "Triangle",
            [v0, prim, v1, pad1, v2, pad2]
        );
        describe!(&mut s, GpuRay, "Ray", [origin, tmin, dir, tmax]);
        describe!(&mut s, GpuHit, "Hit", [t, prim, u, v]);
        describe!(
            &mut s,
            PrimaryFrame,
            "PrimaryFrame",
            [forward, right, up, half_height, aspect, eye, pad]
        );
        describe_whitted(&mut s);
        describe_photon(&mut s);
        describe_sppm(&mut s);
        s
    })
}

/// The records of the Whitted renderer (`kernels/whitted.cuh`).
fn describe_whitted(s: &mut String) {
    describe!(s, GpuPath, "Path", [key, weight, pixel, depth]);
    describe!(
        s,
        GpuMaterial,
        "Material",
        [
            emission, kind, color, two_sided, specular, exponent, ior, texture
        ]
    );
    describe!(s, GpuShading, "Shading", [normals, uvs, material, flags]);
    describe!(
        s,
        GpuLight,
        "Light",
        [position, kind, direction, cos_start, intensity, cos_width]
    );
    describe!(
        s,
        GpuAreaLight,
        "AreaLight",
        [emission, two_sided, first, count, total_area]
    );
    describe!(s, GpuTexture, "Texture", [offset, width, height]);
    describe!(
        s,
        WhittedParams,
        "WhittedParams",
        [
            triangles,
            framebuffer,
            seed,
            eye,
            ray_epsilon,
            width,
            height,
            spp,
            background,
            max_depth,
            light_samples,
            light_count,
            area_count,
            schlick
        ]
    );
}

/// The records of the photon mapper (`kernels/photon.cuh`).
fn describe_photon(s: &mut String) {
    describe!(s, GpuPhoton, "Photon", [position, power, incoming, normal]);
    describe!(
        s,
        GpuPhotonSource,
        "PhotonSource",
        [
            a, kind, b, area, power, cos_start, cos_width, radius, pick, cdf
        ]
    );
    describe!(s, GpuPhotonPath, "PhotonPath", [state, inc, power, kind]);
    describe!(
        s,
        PhotonParams,
        "PhotonParams",
        [
            sources,
            first_photon,
            seed,
            source_count,
            max_bounces,
            inv_photons,
            global_rule,
            mean_roulette,
            caustic_only
        ]
    );
    describe!(
        s,
        GridView,
        "GridView",
        [start, end, sorted, origin, inv_cell, dims, table_bits]
    );
    describe!(
        s,
        PhotonMapView,
        "PhotonMapView",
        [
            coarse,
            fine,
            photons,
            k,
            max_radius,
            cone,
            count,
            coarse_limit
        ]
    );
    describe!(
        s,
        GpuEyeVertex,
        "EyeVertex",
        [point, pixel, weight, material, n, ng, wo, albedo, key]
    );
    describe!(
        s,
        GpuGatherPath,
        "GatherPath",
        [key, throughput, slot, depth]
    );
}

/// The records of GPU SPPM (`kernels/sppm.cuh`).
fn describe_sppm(s: &mut String) {
    describe!(s, GpuSppmPath, "SppmPath", [key, weight, pixel, length]);
    describe!(
        s,
        GpuVisiblePoint,
        "VisiblePoint",
        [
            position,
            valid,
            normal,
            material,
            shading_normal,
            footprint,
            wo,
            weight,
            albedo
        ]
    );
    describe!(
        s,
        GpuSppmPixel,
        "SppmPixel",
        [photons, radius, flux, traced]
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_describes_the_node_as_documented() {
        let h = header();
        for line in [
            "#define RUST_SIZEOF_BvhNode 32",
            "#define RUST_OFFSETOF_BvhNode_first 12",
            "#define RUST_OFFSETOF_BvhNode_count 28",
            "#define RUST_SIZEOF_Ray 32",
            "#define RUST_SIZEOF_Hit 16",
            "#define RUST_SIZEOF_Triangle 48",
        ] {
            assert!(h.lines().any(|l| l == line), "missing `{line}` in\n{h}");
        }
    }
}
