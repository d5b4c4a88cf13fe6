//! Generates `$OUT_DIR/cuda_kernels.rs` from the CUDA sources next to the
//! structures they serve (`src/**/*.cu`, `src/**/*.cuh`): typed kernel
//! handles, included by `src/kernels.rs` when the `cuda` feature is on.

fn main() {
    caustic_gpu_build::Kernels::new()
        .generated_header("accel_layout.cuh", "crate::layout_cuda::header")
        .ty("BvhNode", "crate::BvhNode")
        .ty("Triangle", "crate::bvh::triangle_bvh_cuda::GpuTriangle")
        .ty("Ray", "crate::bvh::traverse_cuda::GpuRay")
        .ty("Hit", "crate::bvh::traverse_cuda::GpuHit")
        .ty(
            "CompressedNode",
            "crate::bvh::wide::compressed::CompressedNode",
        )
        .ty("PrimaryFrame", "crate::protocol_cuda::PrimaryFrame")
        .ty("KdNode", "crate::points::kdtree::build_cuda::GpuKdNode")
        .ty("SmallRoot", "crate::points::kdtree::build_cuda::SmallRoot")
        .ty(
            "LinkedNode",
            "crate::bvh::build::linked_tree_cuda::GpuLinkedNode",
        )
        .ty(
            "LayoutTask",
            "crate::bvh::build::linked_tree_cuda::LayoutTask",
        )
        .ty("GridFrame", "crate::grid::build_cuda::GridFrame")
        .ty("KdPlan", "crate::kdtree::build_cuda::KdPlan")
        .ty("KdSmallRoot", "crate::kdtree::build_cuda::KdSmallRoot")
        .ty("PrimRef", "crate::bvh::build::sah_records_cuda::PrimRef")
        .ty("SahTask", "crate::bvh::build::sah_records_cuda::SahTask")
        .ty("SahPlan", "crate::bvh::build::sah_records_cuda::SahPlan")
        .ty(
            "SplitSides",
            "crate::bvh::build::sah_records_cuda::SplitSides",
        )
        .ty("SahChunk", "crate::bvh::build::sah_records_cuda::SahChunk")
        .ty(
            "SahSmallRoot",
            "crate::bvh::build::sah_records_cuda::SahSmallRoot",
        )
        .ty(
            "SahParams",
            "crate::bvh::build::sah_records_cuda::SahParams",
        )
        .generate();
}
