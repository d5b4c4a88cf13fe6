//! The small-node stage of the GPU SAH builders (`sweep_sah.cu`): every
//! small root (at most `sweep_max_prims` <= 64 references) is built by one
//! warp with the full SAH sweep over its sorted split points, as the CPU's
//! `bvh-binned` builds its small subtrees and `bvh-sweep` builds every node
//! (MacDonald and Booth 1990; Wald, Boulos and Shirley 2007), breadth first
//! inside the warp; then the subtrees are packed after the level part of
//! the node array.
//!
//! A root of `n` references has at most `2 (n - 1)` nodes below it; they
//! are written to reserved slots `2 * start ..` of a scratch array (small
//! roots' ranges are disjoint, so no counting pass or atomic is needed),
//! and an exclusive scan of the numbers actually used gives each subtree
//! its place in the final array, where `sah_relocate` moves it and
//! rebases its child indices.

use super::sah_records_cuda::{PrimRef, SahParams, SahSmallRoot};
use crate::BvhNode;
use crate::kernels::{bvh_build_sah_device as d, bvh_build_sweep_sah as k};
use caustic_gpu::ops::blocks_for;
use caustic_gpu::ops::reduce;
use caustic_gpu::ops::scan::{Direction, ScanKind, scan_u32};
use caustic_gpu::{DeviceBuffer, Gpu, GpuError, StageClock};

/// Warps per block of the small-root kernel (`SMALL_WARPS`).
const SMALL_WARPS: u32 = 4;
/// Threads per block of `sah_relocate` (`SAH_PREP_THREADS`).
const RELOCATE_THREADS: u32 = 256;

/// The small stage's result: the final node array (level part, then the
/// packed subtrees) and the deepest leaf below the small roots.
pub struct SmallOutput {
    pub nodes: DeviceBuffer<BvhNode>,
    pub deepest: usize,
}

/// Builds the `count` small roots of `smalls` (references in `refs`) into
/// the subtrees below their slots of `nodes[..used]`, writes their leaf
/// order to `slot_ids`, and returns the packed node array.
#[allow(clippy::too_many_arguments)]
pub fn small_stage(
    gpu: &Gpu,
    params: &DeviceBuffer<SahParams>,
    refs: &[DeviceBuffer<PrimRef>; 2],
    smalls: &DeviceBuffer<SahSmallRoot>,
    count: usize,
    mut nodes: DeviceBuffer<BvhNode>,
    used: usize,
    slot_ids: &mut DeviceBuffer<u32>,
    clock: &mut StageClock,
) -> Result<SmallOutput, GpuError> {
    nodes.truncate(used);
    if count == 0 {
        return Ok(SmallOutput { nodes, deepest: 0 });
    }
    let placed = refs[0].len();
    let mut reserved = DeviceBuffer::<BvhNode>::uninit(gpu, "small subtree nodes", 2 * placed)?;
    let mut below = DeviceBuffer::<u32>::uninit(gpu, "small subtree sizes", count)?;
    let mut depth = DeviceBuffer::<u32>::uninit(gpu, "small subtree depths", count)?;
    gpu.launch(
        k::SAH_SMALL_SUBTREES,
        blocks_for(count, SMALL_WARPS as usize),
        SMALL_WARPS * 32,
        (
            smalls.ptr(),
            count as u32,
            params.ptr(),
            refs[0].ptr(),
            refs[1].ptr(),
            slot_ids.ptr_mut(),
            nodes.ptr_mut(),
            reserved.ptr_mut(),
            below.ptr_mut(),
            depth.ptr_mut(),
        ),
    )?;
    clock.mark("small nodes")?;

    let mut offsets = DeviceBuffer::<u32>::uninit(gpu, "small subtree offsets", count)?;
    let mut total = DeviceBuffer::<u32>::uninit(gpu, "small subtree total", 1)?;
    scan_u32(
        &below,
        &mut offsets,
        ScanKind::Exclusive,
        Direction::Forward,
        Some(&mut total),
    )?;
    let deepest = reduce::max_u32(&depth)? as usize;
    let total = total.download()?[0] as usize;
    clock.mark("host waits")?;
    let mut packed = DeviceBuffer::<BvhNode>::uninit(gpu, "BVH nodes", used + total)?;
    packed.copy_from_at(&nodes, 0)?;
    drop(nodes);
    gpu.launch(
        d::SAH_RELOCATE,
        blocks_for(count * 32, RELOCATE_THREADS as usize),
        RELOCATE_THREADS,
        (
            smalls.ptr(),
            count as u32,
            below.ptr(),
            offsets.ptr(),
            used as u32,
            reserved.ptr(),
            packed.ptr_mut(),
        ),
    )?;
    clock.mark("layout")?;
    Ok(SmallOutput {
        nodes: packed,
        deepest,
    })
}
