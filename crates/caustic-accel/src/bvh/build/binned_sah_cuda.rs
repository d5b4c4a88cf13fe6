//! `bvh-binned`, `bvh-binned-staged` and `bvh-sweep` built on the GPU: the
//! multi-stage binned SAH BVH of Zeidan's thesis (2011, §4.6: breadth
//! first, every node of a level at once, from data-parallel primitives,
//! with the bin counts of a [`BinSchedule`](super::BinSchedule)) with a
//! full-sweep small-node stage (§4.5), on the CPU builders' configurations
//! ([`SahBuilderConfig::binned`](crate::registry::SahBuilderConfig::binned))
//! and arithmetic. `DeviceBvh::build_with` runs it.
//!
//! Stages (device times in the stats, see [`build_sah`]):
//! 1. **references**: each placeable triangle (the CPU's
//!    `BuildInput::is_placeable`) gets a 32-byte reference (box and id),
//!    compacted in id order; the root's box and split-point box by a
//!    reduction. Others are parked in a leaf with the empty box, a child of
//!    the root, as the CPU does.
//! 2. **levels** ([`super::sah_levels_cuda`]): nodes of more than
//!    `sweep_max_prims` references. Nodes of at most 2048 are binned,
//!    swept and partitioned by one warp each (per-warp bins in shared
//!    memory); larger ones in chunks of 8192 or more references, one block
//!    each, with per-chunk bins joined by a segmented reduction (the
//!    thesis's chunked reduction, without global atomics). One warp per
//!    node sweeps the bins; the decision (leaf at `min_leaf_size`, forced
//!    split past `max_leaf_size`, SAH leaf test, object median when no
//!    plane separates or the depth budget is spent) and every float
//!    operation are the CPU's. Partitions are stable segmented splits
//!    (ballots within a warp or block, chunk offsets from the bins).
//! 3. **small nodes** ([`super::sweep_sah_cuda`]): one warp per small root
//!    builds its subtree with the exact sweep, as the CPU's small path.
//! 4. **layout**: the subtrees are packed after the level part.
//! 5. **triangles**: the triangles in leaf-slot order and the slot maps.
//!
//! Why warps below 2048 references and chunks above: a level near the
//! leaves has up to `n / 65` nodes of 65 to 2048 references, where a block
//! per node would idle most of its threads and chunk bins in global memory
//! would outweigh the references; at the top a few huge nodes must spread
//! over the whole GPU, which chunks do.
//!
//! The tree: SAH planes, leaf decisions and node boxes equal the CPU's for
//! the same schedule except where the two partitions order primitives
//! differently (the CPU's in-place partition is not stable): that changes
//! only which of several equal split points an exact sweep keeps on which
//! side, so SAH costs agree closely (tests require 1 %). The node order is
//! not the CPU's depth-first one: the level part is breadth first (pairs in
//! level order) and each small subtree is breadth first and contiguous; a
//! valid [`crate::Bvh2`] layout all the same (children pairs adjacent,
//! depth at most [`crate::bvh::MAX_DEPTH`]), which the tests check.

use super::binned_sah::BinnedSahConfig;
use super::device_build::DeviceBuildStats;
use super::linked_tree_cuda::device_sah_cost;
use super::sah_levels_cuda::Levels;
use super::sah_records_cuda::{PrimRef, SahParams, SahSmallRoot, SahTask};
use super::sweep_sah_cuda::small_stage;
use crate::BvhNode;
use crate::bvh::triangle_bvh_cuda::{DeviceBvh, GpuTriangle};
use crate::kernels::bvh_build_sah_device as d;
use caustic_gpu::ops::compact::select_indices;
use caustic_gpu::ops::{blocks_for, check_len, launch_grid_stride};
use caustic_gpu::{DeviceBuffer, Gpu, GpuError, StageClock};
use std::time::Instant;

/// The most triangles a build takes (node indices of the reserved small
/// subtrees, `2 n`, stay below 2^32).
pub const MAX_TRIANGLES: usize = 1 << 30;
/// Blocks of the reference pass, whose partial boxes one thread joins
/// (`SAH_PREP_THREADS` threads each).
const PREP_BLOCKS: usize = 256;
const PREP_THREADS: usize = 256;

/// Builds `config`'s tree (registry name `name`) over `triangles` (scene
/// order, on the device; their `prim` fields are ignored); `config` must
/// pass [`BinnedSahConfig::validate`] (an error otherwise). Device memory
/// running out is [`GpuError::OutOfMemory`], naming the buffer.
///
/// The stats' stages are "references", then per level "chunk layout",
/// "chunked binning", "chunked planning" (levels with nodes of more than
/// 2048 references), "warp nodes", "chunked partition", "numbering", then
/// "small nodes", "layout", "triangles"; "host waits" is the device's idle
/// time while the host reads a count back. `height` is the deepest leaf's
/// depth, `iterations` the levels of the level stage, `small_roots` the
/// subtrees the small stage built.
pub(crate) fn build_sah(
    gpu: &Gpu,
    triangles: &DeviceBuffer<GpuTriangle>,
    name: &'static str,
    config: &BinnedSahConfig,
) -> Result<(DeviceBvh, DeviceBuildStats), GpuError> {
    config.validate().map_err(|message| GpuError::Invalid {
        what: "binned SAH configuration",
        message,
    })?;
    check_len(name, triangles.len(), MAX_TRIANGLES)?;
    let wall = Instant::now();
    let in_use = gpu.memory_in_use()?;
    gpu.reset_peak_memory()?;
    let mut clock = gpu.stage_clock()?;
    let (bvh, shape) = Build {
        gpu,
        config,
        triangles,
        clock: &mut clock,
    }
    .run()?;
    let stages = clock.finish()?;
    let peak = gpu.memory_in_use()?;
    let nodes = bvh.nodes().len();
    let stats = DeviceBuildStats {
        name,
        prims: triangles.len(),
        build_ms: stages.iter().map(|(_, ms)| ms).sum(),
        stages,
        wall_ms: wall.elapsed().as_secs_f64() * 1e3,
        sah_cost: device_sah_cost(gpu, bvh.nodes())?,
        nodes,
        leaves: nodes.div_ceil(2),
        height: shape.max_depth,
        iterations: shape.levels,
        small_roots: shape.small_roots,
        bytes: bvh.bytes(),
        peak_device_bytes: match (in_use, peak) {
            (Some((before, _)), Some((_, high))) => Some(high.saturating_sub(before)),
            _ => None,
        },
        ..DeviceBuildStats::default()
    };
    Ok((bvh, stats))
}

/// Shape figures the build gathers on the way.
struct Shape {
    max_depth: usize,
    levels: usize,
    small_roots: usize,
}

/// One build.
struct Build<'a> {
    gpu: &'a Gpu,
    config: &'a BinnedSahConfig,
    triangles: &'a DeviceBuffer<GpuTriangle>,
    clock: &'a mut StageClock,
}

impl Build<'_> {
    fn run(self) -> Result<(DeviceBvh, Shape), GpuError> {
        let gpu = self.gpu;
        let n = self.triangles.len();
        let mut shape = Shape {
            max_depth: 0,
            levels: 0,
            small_roots: 0,
        };
        let mut prim_indices = DeviceBuffer::<u32>::uninit(gpu, "BVH prim indices", n)?;
        if n == 0 {
            let nodes = DeviceBuffer::<BvhNode>::uninit(gpu, "BVH nodes", 0)?;
            return Ok((self.finish(nodes, prim_indices)?, shape));
        }
        let mut placed = DeviceBuffer::<u32>::uninit(gpu, "placeable flags", n)?;
        let mut parked = DeviceBuffer::<u32>::uninit(gpu, "parked flags", n)?;
        launch_grid_stride(
            gpu,
            d::SAH_PLACEABLE,
            n,
            (
                self.triangles.ptr(),
                n as u64,
                placed.ptr_mut(),
                parked.ptr_mut(),
            ),
        )?;
        let ids = select_indices(&placed)?;
        drop(placed);
        let count = ids.len();
        if count < n {
            prim_indices.copy_from_at(&select_indices(&parked)?, count)?;
        }
        drop(parked);
        if count == 0 {
            // Nothing placeable: one leaf with the empty box.
            let leaf = BvhNode::leaf(caustic_geom::Aabb::EMPTY, 0, n as u32);
            let nodes = DeviceBuffer::from_slice(gpu, "BVH nodes", &[leaf])?;
            self.clock.mark("references")?;
            return Ok((self.finish(nodes, prim_indices)?, shape));
        }

        // References, the root task and (with parked triangles) the two
        // nodes above the placed tree.
        let mut refs = [
            DeviceBuffer::<PrimRef>::uninit(gpu, "BVH references", count)?,
            DeviceBuffer::<PrimRef>::uninit(gpu, "BVH references (second)", count)?,
        ];
        let blocks = blocks_for(count, PREP_THREADS).min(PREP_BLOCKS as u32);
        let mut partials =
            DeviceBuffer::<f32>::uninit(gpu, "reference bounds", 12 * blocks as usize)?;
        gpu.launch(
            d::SAH_REFERENCES,
            blocks,
            PREP_THREADS as u32,
            (
                self.triangles.ptr(),
                ids.ptr(),
                count as u64,
                refs[0].ptr_mut(),
                partials.ptr_mut(),
            ),
        )?;
        drop(ids);
        let parked_count = n - count;
        let (slot, depth) = if parked_count > 0 { (1, 1) } else { (0, 0) };
        let mut root = DeviceBuffer::<SahTask>::uninit(gpu, "root task", 1)?;
        let mut nodes = DeviceBuffer::<BvhNode>::uninit(gpu, "BVH nodes (levels)", 64)?;
        gpu.launch(
            d::SAH_ROOT,
            1,
            32,
            (
                partials.ptr(),
                blocks,
                count as u32,
                slot,
                depth,
                parked_count as u32,
                root.ptr_mut(),
                nodes.ptr_mut(),
            ),
        )?;
        self.clock.mark("references")?;

        let params = DeviceBuffer::from_slice(
            gpu,
            "SAH parameters",
            &[SahParams::from_config(self.config)],
        )?;
        let used = slot as usize + if parked_count > 0 { 2 } else { 1 };
        let (nodes, used, smalls, small_count) = if count <= self.config.sweep_max_prims {
            let mut smalls = DeviceBuffer::<SahSmallRoot>::uninit(gpu, "small roots", 1)?;
            gpu.launch(d::SAH_ROOT_SMALL, 1, 32, (root.ptr(), smalls.ptr_mut()))?;
            shape.max_depth = depth as usize;
            (nodes, used, smalls, 1)
        } else {
            let levels = Levels {
                gpu,
                params: &params,
                sweep_max: self.config.sweep_max_prims as u32,
                refs: &mut refs,
                slot_ids: &mut prim_indices,
                clock: &mut *self.clock,
            }
            .run(root, count, depth as usize, nodes, used)?;
            shape.levels = levels.levels;
            shape.max_depth = levels.last_depth;
            (levels.nodes, levels.used, levels.smalls, levels.small_count)
        };
        shape.small_roots = small_count;
        let packed = small_stage(
            gpu,
            &params,
            &refs,
            &smalls,
            small_count,
            nodes,
            used,
            &mut prim_indices,
            &mut *self.clock,
        )?;
        shape.max_depth = shape.max_depth.max(packed.deepest);
        drop(refs);
        Ok((self.finish(packed.nodes, prim_indices)?, shape))
    }

    /// The triangles in leaf-slot order and the scene-id-to-slot map.
    fn finish(
        self,
        nodes: DeviceBuffer<BvhNode>,
        prim_indices: DeviceBuffer<u32>,
    ) -> Result<DeviceBvh, GpuError> {
        let gpu = self.gpu;
        let n = prim_indices.len();
        let mut triangles = DeviceBuffer::<GpuTriangle>::uninit(gpu, "BVH leaf triangles", n)?;
        let mut slots = DeviceBuffer::<u32>::uninit(gpu, "BVH slots", n)?;
        launch_grid_stride(
            gpu,
            d::SAH_LEAF_TRIANGLES,
            n,
            (
                self.triangles.ptr(),
                prim_indices.ptr(),
                n as u64,
                triangles.ptr_mut(),
                slots.ptr_mut(),
            ),
        )?;
        self.clock.mark("triangles")?;
        Ok(DeviceBvh::from_device_parts(
            nodes,
            triangles,
            prim_indices,
            slots,
        ))
    }
}
