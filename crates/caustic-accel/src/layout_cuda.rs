//! `accel_layout.cuh`: the byte layout of the structs this crate shares
//! with its kernels, from the Rust definitions; `bvh.cuh` and
//! `protocol.cu` check their CUDA twins against it (see `caustic_gpu::layout`).

use crate::BvhNode;
use crate::bvh::build::linked_tree_cuda::{GpuLinkedNode, LayoutTask};
use crate::bvh::build::sah_records_cuda::{
    PrimRef, SahChunk, SahParams, SahPlan, SahSmallRoot, SahTask, SplitSides,
};
use crate::bvh::traverse_cuda::{GpuHit, GpuRay};
use crate::bvh::triangle_bvh_cuda::GpuTriangle;
use crate::bvh::wide::compressed::CompressedNode;
use crate::grid::build_cuda::GridFrame;
use crate::kdtree::build_cuda::{KdPlan, KdSmallRoot};
use crate::protocol_cuda::PrimaryFrame;

/// The text of `accel_layout.cuh`.
pub fn header() -> &'static str {
    caustic_gpu::layout_header!(
        "accel_layout.cuh",
        [
            BvhNode as "BvhNode" { min, first, max, count },
            GpuTriangle as "Triangle" { v0, prim, v1, pad1, v2, pad2 },
            GpuRay as "Ray" { origin, tmin, dir, tmax },
            GpuHit as "Hit" { t, prim, u, v },
            PrimaryFrame as "PrimaryFrame" { forward, right, up, half_height, aspect, eye, pad },
            GridFrame as "GridFrame" {
                bounds_min,
                tolerance,
                bounds_max,
                scale,
                cell_size,
                macro_size,
                inv_cell_size,
                exact,
                res,
                cells,
                macro_res,
                macros
            },
            KdPlan as "KdPlan" {
                below_min,
                axis,
                below_max,
                split,
                above_min,
                kind,
                above_max,
                start,
                count,
                left_dest,
                left_base,
                right_dest,
                right_base,
                pad
            },
            KdSmallRoot as "KdSmallRoot" { lo, start, hi, count, slot, depth, leaf, pad },
            CompressedNode as "CompressedNode" {
                origin,
                exponents,
                inner_mask,
                child_base,
                triangle_base,
                meta,
                lo_x,
                lo_y,
                lo_z,
                hi_x,
                hi_y,
                hi_z
            },
            GpuLinkedNode as "LinkedNode" { children, min, max, prims, leaves, height, cost },
            LayoutTask as "LayoutTask" { target, slot, node_base, prim_base, depth, k0, k1, kind },
            PrimRef as "PrimRef" { lo, id, hi, pad },
            SahTask as "SahTask" { lo, start, hi, count, clo, slot, chi, depth },
            SahPlan as "SahPlan" { kind, axis, bin, left, origin, scale, top, pivot_hi, pivot_lo, pad },
            SplitSides as "SplitSides" { left, right, left_centers, right_centers },
            SahChunk as "SahChunk" { node, start, count, left_offset },
            SahSmallRoot as "SahSmallRoot" { lo, start, hi, count, slot, depth, parity, pad },
            SahParams as "SahParams" {
                stage_min,
                stage_bins,
                stages,
                bins,
                sweep_max,
                min_leaf,
                max_leaf,
                traversal_cost,
                intersection_cost,
                pad
            },
        ]
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn header_describes_the_node_as_documented() {
        let h = super::header();
        for line in [
            "#define RUST_SIZEOF_BvhNode 32",
            "#define RUST_OFFSETOF_BvhNode_first 12",
            "#define RUST_OFFSETOF_BvhNode_count 28",
            "#define RUST_SIZEOF_Ray 32",
            "#define RUST_SIZEOF_Hit 16",
            "#define RUST_SIZEOF_Triangle 48",
            "#define RUST_SIZEOF_CompressedNode 80",
            "#define RUST_OFFSETOF_CompressedNode_meta 24",
            "#define RUST_SIZEOF_GridFrame 96",
            "#define RUST_OFFSETOF_GridFrame_macros 92",
        ] {
            assert!(h.lines().any(|l| l == line), "missing `{line}` in\n{h}");
        }
    }
}
