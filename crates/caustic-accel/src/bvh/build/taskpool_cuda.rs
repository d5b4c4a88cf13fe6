//! `bvh-taskpool` on the GPU: the SAH BVH of Vinkler, Bittner, Havran and
//! Hapala (CGF 2013, §4) built in one launch of persistent warps on
//! caustic-gpu's task pool (`taskpool.cu` for the phases; §3 of the paper
//! for the pool). `DeviceBvh::build_with` runs it.
//!
//! Stages (device times in the stats):
//! 1. **references**: the placeable triangles' 32-byte references (box,
//!    id), the root's box and split-point box, and the parking leaf for the
//!    others: the SAH family's own kernels (`sah_device.cu`).
//! 2. **pool setup**: the pool emptied, the candidate bins cleared.
//! 3. **task pool**: the whole hierarchy: SplitPlane and Partition tasks per
//!    node of 32 or more references, one warp's full SAH below.
//! 4. **triangles**: the triangles in leaf-slot order and the slot maps.
//!
//! The pool's stats ([`PoolStats`]) give the paper's Table 2 analogue: the
//! warps' cycles on chunks against those spent managing the pool and
//! waiting. Device memory running out is [`GpuError::OutOfMemory`] naming
//! the buffer; a pool that stops itself is [`GpuError::TaskPool`].

use super::device_build::DeviceBuildStats;
use super::linked_tree_cuda::device_sah_cost;
use super::sah_records_cuda::{PrimRef, SahTask};
use super::taskpool::TaskPoolBvhConfig;
use crate::BvhNode;
use crate::bvh::triangle_bvh_cuda::{DeviceBvh, GpuTriangle};
use crate::kernels::bvh_build_sah_device as sah;
use crate::kernels::bvh_build_taskpool as d;
use caustic_gpu::ops::compact::select_indices;
use caustic_gpu::ops::{blocks_for, check_len, launch_grid_stride};
use caustic_gpu::taskpool::{PoolStats, TaskPool, TaskPoolConfig};
use caustic_gpu::{DeviceBuffer, Gpu, GpuError, StageClock};
use std::time::Instant;

/// The most triangles a build takes (node and slot indices stay in u32).
pub const MAX_TRIANGLES: usize = 1 << 30;
/// Words of one slot's candidate bins (`TP_SLOT_BIN_WORDS`).
const SLOT_BIN_WORDS: usize = 32 * 14;
const PREP_BLOCKS: usize = 256;
const PREP_THREADS: usize = 256;

/// Builds `config`'s tree over `triangles` (scene order, on the device;
/// their `prim` fields are ignored). Stages: "references", "pool setup",
/// "task pool", "triangles"; `pool` holds the pool's own figures.
pub(crate) fn build_taskpool(
    gpu: &Gpu,
    triangles: &DeviceBuffer<GpuTriangle>,
    config: &TaskPoolBvhConfig,
) -> Result<(DeviceBvh, DeviceBuildStats), GpuError> {
    if !(1..=TaskPoolBvhConfig::MAX_LEAF).contains(&config.max_leaf_size) {
        return Err(GpuError::Invalid {
            what: "bvh-taskpool configuration",
            message: format!(
                "max_leaf_size {} is outside 1..={}",
                config.max_leaf_size,
                TaskPoolBvhConfig::MAX_LEAF
            ),
        });
    }
    check_len("bvh-taskpool", triangles.len(), MAX_TRIANGLES)?;
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
        name: "bvh-taskpool",
        prims: triangles.len(),
        build_ms: stages.iter().map(|(_, ms)| ms).sum(),
        stages,
        wall_ms: wall.elapsed().as_secs_f64() * 1e3,
        sah_cost: device_sah_cost(gpu, bvh.nodes())?,
        nodes,
        leaves: nodes.div_ceil(2),
        height: shape.max_depth,
        bytes: bvh.bytes(),
        peak_device_bytes: match (in_use, peak) {
            (Some((before, _)), Some((_, high))) => Some(high.saturating_sub(before)),
            _ => None,
        },
        pool: shape.pool,
        ..DeviceBuildStats::default()
    };
    Ok((bvh, stats))
}

struct Shape {
    max_depth: usize,
    pool: Option<PoolStats>,
}

struct Build<'a> {
    gpu: &'a Gpu,
    config: &'a TaskPoolBvhConfig,
    triangles: &'a DeviceBuffer<GpuTriangle>,
    clock: &'a mut StageClock,
}

impl Build<'_> {
    fn run(self) -> Result<(DeviceBvh, Shape), GpuError> {
        let gpu = self.gpu;
        let n = self.triangles.len();
        let mut shape = Shape {
            max_depth: 0,
            pool: None,
        };
        let mut prim_indices = DeviceBuffer::<u32>::uninit(gpu, "BVH prim indices", n)?;
        if n == 0 {
            let nodes = DeviceBuffer::<BvhNode>::uninit(gpu, "BVH nodes", 0)?;
            return Ok((self.finish(nodes, prim_indices)?, shape));
        }
        let ids = {
            let mut placed = DeviceBuffer::<u32>::uninit(gpu, "placeable flags", n)?;
            let mut parked = DeviceBuffer::<u32>::uninit(gpu, "parked flags", n)?;
            launch_grid_stride(
                gpu,
                sah::SAH_PLACEABLE,
                n,
                (
                    self.triangles.ptr(),
                    n as u64,
                    placed.ptr_mut(),
                    parked.ptr_mut(),
                ),
            )?;
            let ids = select_indices(&placed)?;
            if ids.len() < n {
                prim_indices.copy_from_at(&select_indices(&parked)?, ids.len())?;
            }
            ids
        };
        let count = ids.len();
        if count == 0 {
            let leaf = BvhNode::leaf(caustic_geom::Aabb::EMPTY, 0, n as u32);
            let nodes = DeviceBuffer::from_slice(gpu, "BVH nodes", &[leaf])?;
            self.clock.mark("references")?;
            return Ok((self.finish(nodes, prim_indices)?, shape));
        }

        let mut refs = [
            DeviceBuffer::<PrimRef>::uninit(gpu, "BVH references", count)?,
            DeviceBuffer::<PrimRef>::uninit(gpu, "BVH references (second)", count)?,
        ];
        let blocks = blocks_for(count, PREP_THREADS).min(PREP_BLOCKS as u32);
        let mut partials =
            DeviceBuffer::<f32>::uninit(gpu, "reference bounds", 12 * blocks as usize)?;
        gpu.launch(
            sah::SAH_REFERENCES,
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
        let parked = n - count;
        // With parked triangles node 0 is the root above the placed tree
        // (node 1) and the parking leaf (node 2).
        let (slot, depth) = if parked > 0 { (1, 1) } else { (0, 0) };
        let mut nodes = DeviceBuffer::<BvhNode>::uninit(gpu, "BVH nodes", 2 * count + 3)?;
        let mut root = DeviceBuffer::<SahTask>::uninit(gpu, "root task", 1)?;
        gpu.launch(
            sah::SAH_ROOT,
            1,
            32,
            (
                partials.ptr(),
                blocks,
                count as u32,
                slot,
                depth,
                parked as u32,
                root.ptr_mut(),
                nodes.ptr_mut(),
            ),
        )?;
        drop(partials);
        self.clock.mark("references")?;

        // Every live task covers 32 or more references of its own, so
        // count / 32 slots (plus the root's) always suffice.
        let capacity = count / 32 + 64;
        let pool_config = TaskPoolConfig {
            min_grab: self.config.min_grab,
            ..TaskPoolConfig::new(capacity)
        };
        let mut pool = TaskPool::new(gpu, d::BVH_TASKPOOL_BUILD, pool_config)?;
        pool.reset()?;
        let mut bins = DeviceBuffer::<i32>::uninit(
            gpu,
            "bvh-taskpool candidate bins",
            capacity * SLOT_BIN_WORDS,
        )?;
        let bin_words = bins.len();
        launch_grid_stride(
            gpu,
            d::BVH_TASKPOOL_CLEAR_BINS,
            bin_words,
            (bins.ptr_mut(), bin_words as u64),
        )?;
        let first_free = if parked > 0 { 3u32 } else { 1 };
        let mut build = DeviceBuffer::from_slice(gpu, "bvh-taskpool counters", &[first_free, 0])?;
        self.clock.mark("pool setup")?;

        let (grid, threads) = pool.launch_shape();
        let [refs0, refs1] = &mut refs;
        let p = pool.args();
        gpu.launch(
            d::BVH_TASKPOOL_BUILD,
            grid,
            threads,
            (
                root.ptr(),
                refs0.ptr_mut(),
                refs1.ptr_mut(),
                bins.ptr_mut(),
                nodes.ptr_mut(),
                prim_indices.ptr_mut(),
                build.ptr_mut(),
                self.config.max_leaf_size as u32,
                self.config.traversal_cost,
                self.config.intersection_cost,
                p.headers,
                p.records,
                p.control,
                p.counters,
                p.capacity,
                p.watchdog_ns,
            ),
        )?;
        self.clock.mark("task pool")?;
        let pool_stats = pool.finish(d::BVH_TASKPOOL_BUILD.name())?;
        drop(bins);
        drop(refs);
        let [used, deepest] = <[u32; 2]>::try_from(build.download()?).expect("two counters");
        if used as usize > nodes.len() {
            return Err(GpuError::Invalid {
                what: "bvh-taskpool tree",
                message: format!("{used} nodes written into {} slots", nodes.len()),
            });
        }
        nodes.truncate(used as usize);
        shape.max_depth = deepest as usize;
        shape.pool = Some(pool_stats);
        Ok((self.finish(nodes, prim_indices)?, shape))
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
            sah::SAH_LEAF_TRIANGLES,
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
