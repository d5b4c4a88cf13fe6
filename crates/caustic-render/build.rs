//! Generates `$OUT_DIR/cuda_kernels.rs` from the renderers' CUDA sources
//! (`src/**/*.cu`, `src/**/*.cuh`): typed kernel handles, included by
//! `src/kernels.rs` when the `cuda` feature is on.

fn main() {
    let accel = "::caustic_accel::bvh";
    caustic_gpu_build::Kernels::new()
        .headers_from("::caustic_accel::kernels::HEADERS")
        .generated_header("render_layout.cuh", "crate::layout_cuda::header")
        .ty("u8", "u8")
        .ty("BvhNode", "::caustic_accel::BvhNode")
        .ty(
            "Triangle",
            &format!("{accel}::triangle_bvh_cuda::GpuTriangle"),
        )
        .ty("Ray", &format!("{accel}::traverse_cuda::GpuRay"))
        .ty("Hit", &format!("{accel}::traverse_cuda::GpuHit"))
        .ty("Path", "crate::scene_cuda::GpuPath")
        .ty("FrameParams", "crate::scene_cuda::FrameParams")
        .ty("Photon", "crate::photon::records_cuda::GpuPhoton")
        .ty(
            "ShadedPhoton",
            "crate::photon::records_cuda::GpuShadedPhoton",
        )
        .ty("PhotonPath", "crate::photon::records_cuda::GpuPhotonPath")
        .ty("PhotonParams", "crate::photon::records_cuda::PhotonParams")
        .ty("GridView", "crate::photon::records_cuda::GridView")
        .ty(
            "PhotonMapView",
            "crate::photon::records_cuda::PhotonMapView",
        )
        .ty("EyeVertex", "crate::photon::records_cuda::GpuEyeVertex")
        .ty("GatherPath", "crate::photon::records_cuda::GpuGatherPath")
        .ty("Fixed3", "[u64; 4]")
        .ty("ChildSums", "[u64; 8]")
        .ty("SppmPath", "crate::sppm::kernels_cuda::GpuSppmPath")
        .ty("VisiblePoint", "crate::sppm::kernels_cuda::GpuVisiblePoint")
        .ty("SppmPixel", "crate::sppm::kernels_cuda::GpuSppmPixel")
        .generate();
}
