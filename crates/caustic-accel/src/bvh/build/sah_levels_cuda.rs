//! The level stage of the GPU SAH builders (`binned_sah.cu`): the nodes of
//! more than `sweep_max_prims` references, split breadth first, every node
//! of a level at once (Zeidan 2011, §4.6), until none is left; the small
//! nodes they leave go to [`super::sweep_sah_cuda`].
//!
//! Per level: nodes of more than [`WARP_MAX`] references are cut into
//! chunks (a scan of their chunk counts and one wait for the total), binned
//! chunk by chunk and planned one block per node; every other node is
//! binned, planned and partitioned by one warp; then the chunks are
//! partitioned, and one scan numbers the children, writes the level's
//! nodes and the next level's tasks and small roots. The host waits once
//! per level, for the number of next-level tasks (a kernel grid is sized
//! by it), and once more on levels with chunked nodes.
//!
//! The references of a node are one range of a buffer; a level reads one
//! of two buffers and writes the other. Ranges of finished nodes are never
//! written again, so a small root records which buffer holds its range,
//! and a leaf's ids go straight to their slots.
//!
//! Node layout: breadth first by level, children pairs of one level in the
//! order of their parents; the node array and the small-root list grow as
//! needed (doubling), since a level adds at most two of each per node.

use super::sah_records_cuda::{
    PrimRef, SahChunk, SahParams, SahPlan, SahSmallRoot, SahTask, SplitSides,
};
use crate::BvhNode;
use crate::kernels::bvh_build_binned_sah as k;
use bytemuck::Pod;
use caustic_gpu::ops::blocks_for;
use caustic_gpu::ops::scan::{Direction, ScanKind, scan_u32};
use caustic_gpu::{DeviceBuffer, DevicePtr, Gpu, GpuError, StageClock};

/// Nodes of at most this many references are one warp's (`SAH_WARP_MAX`).
pub const WARP_MAX: usize = 2048;
/// Chunks hold at least this many references (`SAH_CHUNK_MIN`) ...
const CHUNK_MIN: usize = 8192;
/// ... and a node has at most this many (`SAH_MAX_CHUNKS`).
const MAX_CHUNKS: usize = 64;
/// Threads of the blocks that bin and partition a chunk (`SAH_CHUNK_THREADS`).
const CHUNK_THREADS: u32 = 1024;
/// Threads of the blocks that plan a chunked node (`SAH_PLAN_THREADS`).
const PLAN_THREADS: u32 = 256;
/// Warps per block of the one-warp-per-node kernels (`SAH_NODE_WARPS`).
const NODE_WARPS: u32 = 4;
/// Words of one chunk's bins (`SAH_BINS_WORDS`).
const BINS_WORDS: usize = 3 * 7 * 64;
/// Elements per block of the numbering scan (`SCAN_TILE`).
const SCAN_TILE: usize = 4096;

/// References per chunk of a node of `n` (`chunk_size` in `binned_sah.cuh`).
fn chunk_size(n: usize) -> usize {
    n.div_ceil(MAX_CHUNKS)
        .div_ceil(CHUNK_THREADS as usize)
        .saturating_mul(CHUNK_THREADS as usize)
        .max(CHUNK_MIN)
}

/// Chunks of a node of `n` references (`chunk_count` in `binned_sah.cuh`).
fn chunk_count(n: usize) -> usize {
    n.div_ceil(chunk_size(n))
}

/// What the level stage leaves behind.
pub struct LevelOutput {
    /// The level part of the node array: `nodes[..used]` (inner nodes,
    /// leaves, and small roots' slots, which the small stage fills).
    pub nodes: DeviceBuffer<BvhNode>,
    pub used: usize,
    /// The small roots found, `smalls[..small_count]`.
    pub smalls: DeviceBuffer<SahSmallRoot>,
    pub small_count: usize,
    /// Levels run, and the depth of the last one.
    pub levels: usize,
    pub last_depth: usize,
}

/// The state of one level stage.
pub struct Levels<'a> {
    pub gpu: &'a Gpu,
    pub params: &'a DeviceBuffer<SahParams>,
    pub sweep_max: u32,
    /// The two reference buffers; the root's references are in the first.
    pub refs: &'a mut [DeviceBuffer<PrimRef>; 2],
    /// Slot to scene id, filled for leaves here and for small roots later.
    pub slot_ids: &'a mut DeviceBuffer<u32>,
    pub clock: &'a mut StageClock,
}

impl Levels<'_> {
    /// Splits from `root` (one task, `count` references, depth `depth`)
    /// down; `nodes` holds `used` nodes so far (the root's slot among them).
    pub fn run(
        mut self,
        root: DeviceBuffer<SahTask>,
        count: usize,
        depth: usize,
        nodes: DeviceBuffer<BvhNode>,
        used: usize,
    ) -> Result<LevelOutput, GpuError> {
        let gpu = self.gpu;
        let mut out = LevelOutput {
            nodes,
            used,
            smalls: DeviceBuffer::uninit(gpu, "small roots", 64)?,
            small_count: 0,
            levels: 0,
            last_depth: depth,
        };
        let mut tasks = root;
        let first_chunks = if count > WARP_MAX {
            chunk_count(count)
        } else {
            0
        };
        let mut chunk_counts =
            DeviceBuffer::from_slice(gpu, "level chunk counts", &[first_chunks as u32])?;
        let mut chunked = count > WARP_MAX;
        let mut parity = 0usize;
        let mut m = 1usize;
        while m > 0 {
            out.last_depth = depth + out.levels;
            tasks.truncate(m);
            chunk_counts.truncate(m);
            let (next, next_chunks, level) =
                self.level(&tasks, &chunk_counts, chunked, parity, &mut out)?;
            m = level.tasks;
            chunked = level.chunked;
            tasks = next;
            chunk_counts = next_chunks;
            parity ^= 1;
            out.levels += 1;
        }
        Ok(out)
    }

    /// One level over the `m = tasks.len()` tasks read from `refs[parity]`;
    /// returns the next level's tasks and chunk counts.
    fn level(
        &mut self,
        tasks: &DeviceBuffer<SahTask>,
        chunk_counts: &DeviceBuffer<u32>,
        chunked: bool,
        parity: usize,
        out: &mut LevelOutput,
    ) -> Result<(DeviceBuffer<SahTask>, DeviceBuffer<u32>, NextLevel), GpuError> {
        let gpu = self.gpu;
        let m = tasks.len();
        // The chunk planner writes the chunked nodes' plans, the warp
        // kernel the others'.
        let mut plans = DeviceBuffer::<SahPlan>::uninit(gpu, "level plans", m)?;
        let chunks = if chunked {
            Some(self.plan_chunked(tasks, chunk_counts, parity, &mut plans)?)
        } else {
            None
        };
        let [first, second] = &mut *self.refs;
        let (input, output) = if parity == 0 {
            (&*first, second)
        } else {
            (&*second, first)
        };
        let mut sides = DeviceBuffer::<SplitSides>::uninit(gpu, "level sides", m)?;
        gpu.launch(
            k::SAH_SPLIT_WARP,
            blocks_for(m, NODE_WARPS as usize),
            NODE_WARPS * 32,
            (
                tasks.ptr(),
                m as u32,
                self.params.ptr(),
                input.ptr(),
                output.ptr_mut(),
                self.slot_ids.ptr_mut(),
                plans.ptr_mut(),
                sides.ptr_mut(),
            ),
        )?;
        self.clock.mark("warp nodes")?;
        let chunk_sides = match &chunks {
            Some(c) => {
                let total = c.chunks.len();
                let mut chunk_sides =
                    DeviceBuffer::<SplitSides>::uninit(gpu, "chunk sides", total)?;
                gpu.launch(
                    k::SAH_PARTITION_CHUNKS,
                    total as u32,
                    CHUNK_THREADS,
                    (
                        tasks.ptr(),
                        c.chunks.ptr(),
                        plans.ptr(),
                        input.ptr(),
                        output.ptr_mut(),
                        self.slot_ids.ptr_mut(),
                        chunk_sides.ptr_mut(),
                    ),
                )?;
                self.clock.mark("chunked partition")?;
                Some(chunk_sides)
            }
            None => None,
        };

        // Room for every task splitting in two.
        grow(gpu, &mut out.nodes, out.used + 2 * m, "BVH nodes (levels)")?;
        grow(gpu, &mut out.smalls, out.small_count + 2 * m, "small roots")?;
        let mut next = DeviceBuffer::<SahTask>::uninit(gpu, "level tasks", 2 * m)?;
        let mut next_chunks = DeviceBuffer::<u32>::uninit(gpu, "level chunk counts", 2 * m)?;
        let mut counters = DeviceBuffer::<u32>::zeroed(gpu, "level counters", 4)?;
        let tiles = m.div_ceil(SCAN_TILE);
        let mut status = DeviceBuffer::<u64>::zeroed(gpu, "numbering status", tiles + 1)?;
        let (status_words, tile_counter) = status.ptr_mut().split_at(tiles);
        let (chunk_first, chunk_sides_ptr) = match (&chunks, &chunk_sides) {
            (Some(c), Some(s)) => (c.first.ptr(), s.ptr()),
            _ => (DevicePtr::null(), DevicePtr::null()),
        };
        gpu.launch(
            k::SAH_EMIT,
            tiles as u32,
            256,
            (
                tasks.ptr(),
                plans.ptr(),
                sides.ptr(),
                chunk_sides_ptr,
                chunk_first,
                m as u64,
                self.sweep_max,
                out.used as u32,
                out.small_count as u32,
                (parity ^ 1) as u32,
                out.nodes.ptr_mut(),
                next.ptr_mut(),
                next_chunks.ptr_mut(),
                out.smalls.ptr_mut(),
                counters.ptr_mut(),
                status_words,
                tile_counter.cast(),
            ),
        )?;
        self.clock.mark("numbering")?;
        let [tasks_next, smalls_new, chunked_next, _] = download4(&counters)?;
        self.clock.mark("host waits")?;
        out.used += (tasks_next + smalls_new) as usize;
        out.small_count += smalls_new as usize;
        let level = NextLevel {
            tasks: tasks_next as usize,
            chunked: chunked_next != 0,
        };
        Ok((next, next_chunks, level))
    }

    /// The chunk path of a level: lays out the chunks of the chunked nodes,
    /// bins them, and plans those nodes.
    fn plan_chunked(
        &mut self,
        tasks: &DeviceBuffer<SahTask>,
        chunk_counts: &DeviceBuffer<u32>,
        parity: usize,
        plans: &mut DeviceBuffer<SahPlan>,
    ) -> Result<ChunkPlan, GpuError> {
        let gpu = self.gpu;
        let input = &self.refs[parity];
        let m = tasks.len();
        let mut first = DeviceBuffer::<u32>::uninit(gpu, "chunk offsets", m)?;
        let mut total = DeviceBuffer::<u32>::uninit(gpu, "chunk total", 1)?;
        scan_u32(
            chunk_counts,
            &mut first,
            ScanKind::Exclusive,
            Direction::Forward,
            Some(&mut total),
        )?;
        self.clock.mark("chunk layout")?;
        let count = total.download()?[0] as usize;
        self.clock.mark("host waits")?;
        let mut chunks = DeviceBuffer::<SahChunk>::uninit(gpu, "chunks", count)?;
        gpu.launch(
            k::SAH_CHUNK_SETUP,
            blocks_for(m, NODE_WARPS as usize),
            NODE_WARPS * 32,
            (tasks.ptr(), m as u32, first.ptr(), chunks.ptr_mut()),
        )?;
        let mut bins = DeviceBuffer::<i32>::uninit(gpu, "chunk bins", count * BINS_WORDS)?;
        gpu.launch(
            k::SAH_BIN_CHUNKS,
            count as u32,
            CHUNK_THREADS,
            (
                tasks.ptr(),
                chunks.ptr(),
                self.params.ptr(),
                input.ptr(),
                bins.ptr_mut(),
            ),
        )?;
        self.clock.mark("chunked binning")?;
        gpu.launch(
            k::SAH_PLAN_CHUNKED,
            count as u32,
            PLAN_THREADS,
            (
                tasks.ptr(),
                chunks.ptr_mut(),
                self.params.ptr(),
                input.ptr(),
                bins.ptr(),
                plans.ptr_mut(),
            ),
        )?;
        self.clock.mark("chunked planning")?;
        Ok(ChunkPlan { first, chunks })
    }
}

/// The chunks of a level's chunked nodes, and each node's first chunk.
struct ChunkPlan {
    first: DeviceBuffer<u32>,
    chunks: DeviceBuffer<SahChunk>,
}

/// What the numbering of a level reported.
struct NextLevel {
    tasks: usize,
    chunked: bool,
}

fn download4(counters: &DeviceBuffer<u32>) -> Result<[u32; 4], GpuError> {
    let words = counters.download()?;
    Ok([words[0], words[1], words[2], words[3]])
}

/// Makes `buffer` hold at least `needed` elements, keeping its contents
/// (doubling, so a build grows it a logarithmic number of times).
pub fn grow<T: Pod>(
    gpu: &Gpu,
    buffer: &mut DeviceBuffer<T>,
    needed: usize,
    what: &'static str,
) -> Result<(), GpuError> {
    if needed <= buffer.len() {
        return Ok(());
    }
    let mut bigger = DeviceBuffer::<T>::uninit(gpu, what, needed.max(2 * buffer.len()))?;
    bigger.copy_from_at(buffer, 0)?;
    *buffer = bigger;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_nodes_within_the_bounds() {
        for n in [2049, 8192, 8193, 100_000, 1 << 22, 14_000_000, 1 << 30] {
            let (size, count) = (chunk_size(n), chunk_count(n));
            assert!((1..=MAX_CHUNKS).contains(&count), "{n}: {count}");
            assert!(size >= CHUNK_MIN && size % CHUNK_THREADS as usize == 0);
            assert!((count - 1) * size < n && n <= count * size, "{n}");
        }
        assert_eq!((chunk_count(8192), chunk_count(8193)), (1, 2));
    }
}
