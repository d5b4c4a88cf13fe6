//! The compressed 8-wide BVH built on the device ([`CompressedWideBvh`],
//! `bvh-wide` on the GPU): any binary BVH resident on the device
//! ([`DeviceBvh`], whether uploaded from the CPU or built by a GPU builder)
//! collapsed into the 80-byte nodes of Ylitie, Karras and Laine (HPG 2017;
//! layout and quantisation in [`super::compressed`]), with its own copy of
//! the triangles in wide-leaf order. Nothing comes back to the host but a
//! few counters.
//!
//! Kernels (`compress.cu`), one thread per wide node, one launch per level:
//! - **Collapse, greedy by surface area** (as the CPU's `super::collapse`
//!   and Embree's BVH8: Wald et al., SIGGRAPH 2014): a node starts from one
//!   binary subtree and keeps opening the child of largest area until it has
//!   eight. Ylitie et al.'s SAH-optimal conversion (their section on wide
//!   BVH construction) solves the same assignment by dynamic programming
//!   over the binary tree's cost tables, bottom-up; the greedy rule needs no
//!   tables, no bottom-up pass and no second pass to lay the result out,
//!   and is what this build does. A subtree of at most three triangles is a
//!   leaf child (the paper's leaves, whose triangle count the meta byte
//!   holds in unary); a binary leaf of more is opened into runs of whole
//!   groups of three, their boxes computed from the triangles. Slots left
//!   free then split the largest leaf children (the traversal tests all
//!   eight boxes of a node anyway, and smaller leaves spare triangle
//!   tests: 3 to 10 % fewer on sponza, sibenik and conference).
//! - **Child order**: each child takes the slot of its octant around the
//!   node centre (greedy assignment of the best (child, slot) pairs), so the
//!   traversal's fixed order `slot ^ octant` visits them roughly front to
//!   back (the paper's octant-aware ordering, by a greedy assignment instead
//!   of its auction).
//! - **Quantisation**: conservative, see [`super::compressed`].
//! - **Emission**: inner children take consecutive node indices and the
//!   leaf children's triangles a contiguous block, each by one atomic add;
//!   the inner children's subtrees are the next level's work.
//!
//! The host launches [`LEVELS_PER_CHECK`] levels at a time (a level whose
//! queue is empty costs an empty launch) and reads the counters once per
//! batch. Node storage is reserved for an estimate (a quarter of the
//! triangles; the trees of the tests need a sixth to a tenth); a build that runs out
//! says so in a flag and runs again with room for the worst case, one node
//! per triangle (every inner node has at least two children and every leaf
//! child at least one triangle). The nodes are then copied to an exact-size
//! buffer.

use std::time::Instant;

use crate::BvhNode;
use crate::bvh::triangle_bvh_cuda::{DeviceBvh, GpuTriangle};
use crate::bvh::wide::compressed::{CompressedBvh, CompressedNode};
use crate::kernels::bvh_wide_compress as k;
use caustic_gpu::{DeviceBuffer, Gpu, GpuError};

/// Threads per block (`COMPRESS_THREADS` in compress.cu).
const COMPRESS_THREADS: u32 = 128;
/// Levels launched between two reads of the counters.
pub const LEVELS_PER_CHECK: u32 = 8;
/// The deepest wide tree the traversal's stack takes (`CW_STACK -
/// CW_STACK_POSTPONE` in traverse_compressed.cu); the root is at depth 0.
pub const MAX_WIDE_DEPTH: usize = 48;
/// Levels after which the build gives up: more than any valid binary tree
/// of [`crate::bvh::MAX_DEPTH`] levels can need, even with long leaves
/// opened into runs, so only a corrupt tree (a cycle) gets here.
const MAX_LEVELS: u32 = 512;

/// The build's counters (`CURSOR_*` in compress.cu).
mod cursor {
    pub const BEGIN: usize = 0;
    pub const END: usize = 1;
    pub const NODES: usize = 2;
    pub const TRIANGLES: usize = 3;
    pub const LEVELS: usize = 4;
    pub const LEAVES: usize = 5;
    pub const OVERFLOW: usize = 6;
    pub const WORDS: usize = 8;
}

/// What a build did and cost.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CompressStats {
    /// Wall time of the whole build: allocations, every attempt, the copy.
    pub build_ms: f64,
    /// Device time of the queue's initialisation.
    pub setup_ms: f64,
    /// Device time of the level launches (collapse, child order,
    /// quantisation and emission, fused), the counter reads included.
    pub collapse_ms: f64,
    /// Device time of copying the nodes to their exact-size buffer.
    pub compact_ms: f64,
    /// Levels of wide nodes: the depth plus one (0 for an empty tree).
    pub levels: u32,
    pub nodes: usize,
    /// Leaf children.
    pub leaves: usize,
    pub triangles: usize,
    /// Nodes and triangles held.
    pub bytes: usize,
    /// Builds run: 2 when the first ran out of node storage.
    pub attempts: u32,
}

/// A compressed 8-wide BVH resident on the device; see the module docs.
pub struct CompressedWideBvh {
    nodes: DeviceBuffer<CompressedNode>,
    /// Triangles in wide-leaf order, with their scene ids.
    triangles: DeviceBuffer<GpuTriangle>,
    stats: CompressStats,
}

/// One attempt's buffers and counters.
struct Attempt {
    nodes: DeviceBuffer<CompressedNode>,
    triangles: DeviceBuffer<GpuTriangle>,
    counters: Vec<u32>,
    setup_ms: f64,
    collapse_ms: f64,
}

impl CompressedWideBvh {
    /// Collapses `bvh` on its device. Errors: running out of device memory
    /// (naming the allocation), and a binary tree whose leaves do not cover
    /// its triangles or that is too deep for the traversal.
    pub fn build(bvh: &DeviceBvh) -> Result<Self, GpuError> {
        let start = Instant::now();
        let gpu = bvh.gpu();
        gpu.load(&k::MODULE)?;
        let n = bvh.prims();
        caustic_gpu::ops::check_len("CompressedWideBvh::build", n, (u32::MAX / 2) as usize)?;
        if bvh.nodes().is_empty() {
            return Ok(Self {
                nodes: DeviceBuffer::uninit(gpu, "compressed BVH nodes", 0)?,
                triangles: DeviceBuffer::uninit(gpu, "compressed BVH triangles", 0)?,
                stats: CompressStats::default(),
            });
        }
        let worst = n + 1;
        let mut capacity = (n / 4 + 64).min(worst);
        let mut attempts = 1;
        let attempt = loop {
            if let Some(attempt) = Self::attempt(bvh, capacity)? {
                break attempt;
            }
            if capacity == worst {
                return Err(invalid("ran out of node storage sized for the worst case"));
            }
            capacity = worst;
            attempts += 1;
        };
        let counters = &attempt.counters;
        if counters[cursor::TRIANGLES] as usize != n {
            return Err(invalid(&format!(
                "the binary tree's leaves hold {} of its {n} triangles",
                counters[cursor::TRIANGLES]
            )));
        }
        let levels = counters[cursor::LEVELS];
        if levels as usize > MAX_WIDE_DEPTH + 1 {
            return Err(invalid(&format!(
                "the wide tree has {levels} levels; the traversal takes {}",
                MAX_WIDE_DEPTH + 1
            )));
        }
        let count = counters[cursor::NODES] as usize;
        let mut nodes = attempt.nodes;
        nodes.truncate(count);
        let mut exact = DeviceBuffer::uninit(gpu, "compressed BVH nodes", count)?;
        let compact_ms = f64::from(gpu.time_ms(|| exact.copy_from(&nodes))?);
        drop(nodes);
        let bytes = exact.bytes() + attempt.triangles.bytes();
        Ok(Self {
            nodes: exact,
            triangles: attempt.triangles,
            stats: CompressStats {
                build_ms: start.elapsed().as_secs_f64() * 1e3,
                setup_ms: attempt.setup_ms,
                collapse_ms: attempt.collapse_ms,
                compact_ms,
                levels,
                nodes: count,
                leaves: counters[cursor::LEAVES] as usize,
                triangles: n,
                bytes,
                attempts,
            },
        })
    }

    /// One build with room for `capacity` nodes; `None` when that was too few.
    fn attempt(bvh: &DeviceBvh, capacity: usize) -> Result<Option<Attempt>, GpuError> {
        let gpu = bvh.gpu();
        let capacity_u32 = capacity as u32;
        let mut counters = DeviceBuffer::<u32>::zeroed(gpu, "compress counters", cursor::WORDS)?;
        let mut pending = DeviceBuffer::<BvhNode>::uninit(gpu, "compress work queue", capacity)?;
        let mut nodes =
            DeviceBuffer::<CompressedNode>::uninit(gpu, "compressed BVH nodes", capacity)?;
        let mut triangles =
            DeviceBuffer::<GpuTriangle>::uninit(gpu, "compressed BVH triangles", bvh.prims())?;
        let setup_ms = gpu.time_ms(|| {
            gpu.launch(
                k::COMPRESS_INIT,
                1,
                32,
                (bvh.nodes().ptr(), pending.ptr_mut(), counters.ptr_mut()),
            )
        })?;
        let blocks = level_blocks(gpu)?;
        let mut host = vec![0u32; cursor::WORDS];
        let mut launched = 0;
        let collapse_ms = gpu.time_ms(|| {
            loop {
                for _ in 0..LEVELS_PER_CHECK {
                    gpu.launch(
                        k::COMPRESS_LEVEL,
                        blocks,
                        COMPRESS_THREADS,
                        (
                            bvh.nodes().ptr(),
                            bvh.triangles().ptr(),
                            pending.ptr_mut(),
                            nodes.ptr_mut(),
                            triangles.ptr_mut(),
                            counters.ptr_mut(),
                            capacity_u32,
                        ),
                    )?;
                    gpu.launch(
                        k::COMPRESS_NEXT_LEVEL,
                        1,
                        32,
                        (counters.ptr_mut(), capacity_u32),
                    )?;
                }
                launched += LEVELS_PER_CHECK;
                counters.download_into(&mut host)?;
                let done = host[cursor::BEGIN] == host[cursor::END];
                if done || host[cursor::OVERFLOW] != 0 {
                    return Ok(());
                }
                if launched >= MAX_LEVELS {
                    return Err(invalid(&format!(
                        "still building after {MAX_LEVELS} levels: the binary tree has a cycle"
                    )));
                }
            }
        })?;
        if host[cursor::OVERFLOW] != 0 {
            return Ok(None);
        }
        Ok(Some(Attempt {
            nodes,
            triangles,
            counters: host,
            setup_ms: f64::from(setup_ms),
            collapse_ms: f64::from(collapse_ms),
        }))
    }

    pub fn gpu(&self) -> &Gpu {
        self.nodes.gpu()
    }

    /// The nodes; node 0 is the root (none for an empty tree).
    pub fn nodes(&self) -> &DeviceBuffer<CompressedNode> {
        &self.nodes
    }

    /// Triangles in wide-leaf order, each with its scene id.
    pub fn triangles(&self) -> &DeviceBuffer<GpuTriangle> {
        &self.triangles
    }

    pub fn stats(&self) -> &CompressStats {
        &self.stats
    }

    /// Copies the tree to the host, for [`CompressedBvh::validate`] or the CPU.
    pub fn download(&self) -> Result<CompressedBvh, GpuError> {
        let triangles = self.triangles.download()?;
        Ok(CompressedBvh {
            nodes: self.nodes.download()?,
            prims: triangles.iter().map(|t| t.prim).collect(),
            triangles: triangles.iter().map(GpuTriangle::triangle).collect(),
        })
    }
}

/// Blocks of a level launch: as many as are resident at once; the kernel
/// loops over the level's nodes.
fn level_blocks(gpu: &Gpu) -> Result<u32, GpuError> {
    let per_sm = gpu.resident_blocks(k::COMPRESS_LEVEL, COMPRESS_THREADS)?;
    Ok(per_sm * gpu.info().multiprocessors.max(1))
}

fn invalid(message: &str) -> GpuError {
    GpuError::Invalid {
        what: "compressed wide BVH build",
        message: message.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bvh::wide::compressed::{LEAF_MAX, NODE_TRIANGLES, WIDTH};
    use crate::kernels::{HEADERS, bvh_wide_compress, bvh_wide_traverse_compressed};

    #[test]
    fn kernel_constants_match_the_host() {
        let build = &bvh_wide_compress::MODULE;
        assert_eq!(build.define("COMPRESS_THREADS"), COMPRESS_THREADS as usize);
        for (name, value) in [
            ("CURSOR_BEGIN", cursor::BEGIN),
            ("CURSOR_END", cursor::END),
            ("CURSOR_NODES", cursor::NODES),
            ("CURSOR_TRIANGLES", cursor::TRIANGLES),
            ("CURSOR_LEVELS", cursor::LEVELS),
            ("CURSOR_LEAVES", cursor::LEAVES),
            ("CURSOR_OVERFLOW", cursor::OVERFLOW),
            ("CURSOR_WORDS", cursor::WORDS),
        ] {
            assert_eq!(build.define(name), value, "{name}");
        }
        let trace = &bvh_wide_traverse_compressed::MODULE;
        assert_eq!(
            trace.define("CW_STACK") - trace.define("CW_STACK_POSTPONE"),
            MAX_WIDE_DEPTH
        );
        let header = HEADERS
            .files
            .iter()
            .find(|(f, _)| *f == "compressed.cuh")
            .unwrap()
            .1;
        for line in [
            format!("#define CW_WIDTH {WIDTH}u"),
            format!("#define CW_LEAF_MAX {LEAF_MAX}u"),
            format!("#define CW_NODE_TRIANGLES {NODE_TRIANGLES}u"),
        ] {
            assert!(header.lines().any(|l| l == line), "missing `{line}`");
        }
    }
}
