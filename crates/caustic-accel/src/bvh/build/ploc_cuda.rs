//! `ploc` on the GPU: Meister and Bittner, "Parallel Locally-Ordered
//! Clustering for Bounding Volume Hierarchy Construction" (IEEE TVCG
//! 24(3), 2018), node for node the CPU's [`PlocBuilder`](super::PlocBuilder)
//! for the same triangles and [`PlocConfig`].
//!
//! The clusters start as the primitives in Morton order
//! ([`DeviceMortonOrder`]); each iteration (§4.2–4.4, `ploc.cu`) finds
//! every cluster's nearest neighbour within `radius` positions (half area
//! of the union, ties to the lower index), merges mutual pairs into new
//! nodes with the CPU's `Summary::merge`, and compacts the survivors, the
//! nodes numbered and the survivors ordered by two prefix sums exactly as
//! `ploc.rs` numbers and orders them. So the tree is the CPU's, and so is
//! its layout ([`to_device_bvh`](super::linked_tree_cuda::to_device_bvh)).
//!
//! The host reads one number per iteration (how many pairs merged), which
//! sizes the next iteration's launches; the paper's implementation does
//! the same. Iterations run until one cluster is left, or, with segments
//! (the GPU `hlbvh`'s Morton-prefix clusters, see [`Clustering::new`]),
//! until every segment is one cluster.

use super::PlocConfig;
use super::linked_tree::Collapse;
use super::linked_tree_cuda::{DeviceLinkedTree, collapse_args};
use super::morton_cuda::DeviceMortonOrder;
use crate::kernels::bvh_build_linked_tree as lt;
use crate::kernels::bvh_build_ploc as k;
use caustic_geom::Aabb;
use caustic_gpu::ops::scan::{Direction, ScanKind, scan_u32};
use caustic_gpu::ops::{blocks_for, launch_grid_stride};
use caustic_gpu::{DeviceBuffer, DevicePtr, DevicePtrMut, Gpu, GpuError};

/// The largest search radius the kernel's shared window holds
/// (`PLOC_MAX_RADIUS`; the registry's `r=` range ends there too).
pub const MAX_RADIUS: usize = 256;
/// Positions per block of `ploc_nearest` (`PLOC_THREADS`).
pub(crate) const NEAREST_THREADS: u32 = 256;

/// The collapsing SAH of a `ploc` configuration.
pub(crate) fn ploc_collapse(config: &PlocConfig) -> Collapse {
    Collapse {
        max_leaf_size: config.max_leaf_size.max(1),
        traversal_cost: config.traversal_cost,
        intersection_cost: config.intersection_cost,
    }
}

/// The clustering of the placed primitives of `order` into one tree;
/// returns it with the number of iterations.
pub(crate) fn clustering(
    gpu: &Gpu,
    order: &DeviceMortonOrder,
    config: &PlocConfig,
) -> Result<(DeviceLinkedTree, usize), GpuError> {
    let collapse = ploc_collapse(config);
    let mut tree = DeviceLinkedTree::new(gpu, order.placed, collapse)?;
    let mut run = Clustering::new(gpu, order, config.radius, collapse, None)?;
    let iterations = run.run(&mut tree, 1)?;
    if order.placed > 0 {
        // The last cluster's subtree is the root.
        launch_grid_stride(
            gpu,
            lt::LT_COPY_U32,
            1,
            (run.refs[0].ptr(), 1, tree.root.ptr_mut()),
        )?;
    }
    Ok((tree, iterations))
}

/// The clusters of one run: boxes, subtree references and segment ids in
/// two generations (read one, write the other), with the scratch of an
/// iteration.
pub(crate) struct Clustering<'o> {
    gpu: Gpu,
    order: &'o DeviceMortonOrder,
    radius: u32,
    collapse: Collapse,
    /// Clusters alive now.
    pub len: usize,
    /// Nodes made so far.
    pub built: usize,
    pub boxes: [DeviceBuffer<Aabb>; 2],
    pub refs: [DeviceBuffer<u32>; 2],
    pub segments: Option<[DeviceBuffer<u32>; 2]>,
    neighbours: DeviceBuffer<u32>,
    merges: DeviceBuffer<u32>,
    keeps: DeviceBuffer<u32>,
    merge_offsets: DeviceBuffer<u32>,
    keep_offsets: DeviceBuffer<u32>,
}

impl<'o> Clustering<'o> {
    /// One cluster per placed primitive of `order`; with `segments`
    /// (per primitive), clusters only merge within their segment.
    pub fn new(
        gpu: &Gpu,
        order: &'o DeviceMortonOrder,
        radius: usize,
        collapse: Collapse,
        segments: Option<DeviceBuffer<u32>>,
    ) -> Result<Self, GpuError> {
        if !(1..=MAX_RADIUS).contains(&radius) {
            return Err(GpuError::Invalid {
                what: "PLOC search radius",
                message: format!("{radius} is outside 1..={MAX_RADIUS}"),
            });
        }
        let n = order.placed;
        let buffer = |what| DeviceBuffer::<u32>::uninit(gpu, what, n);
        let mut boxes = [
            DeviceBuffer::uninit(gpu, "PLOC cluster boxes", n)?,
            DeviceBuffer::uninit(gpu, "PLOC cluster boxes", n)?,
        ];
        let mut refs = [
            buffer("PLOC cluster subtrees")?,
            buffer("PLOC cluster subtrees")?,
        ];
        launch_grid_stride(
            gpu,
            k::PLOC_INIT,
            n,
            (
                order.item_bounds.ptr(),
                n as u64,
                boxes[0].ptr_mut(),
                refs[0].ptr_mut(),
            ),
        )?;
        let segments = match segments {
            Some(first) => Some([first, buffer("PLOC cluster segments")?]),
            None => None,
        };
        Ok(Self {
            gpu: gpu.clone(),
            order,
            radius: radius as u32,
            collapse,
            len: n,
            built: 0,
            boxes,
            refs,
            segments,
            neighbours: buffer("PLOC neighbours")?,
            merges: buffer("PLOC merge flags")?,
            keeps: buffer("PLOC survivor flags")?,
            merge_offsets: buffer("PLOC node offsets")?,
            keep_offsets: buffer("PLOC survivor offsets")?,
        })
    }

    /// Iterates until at most `target` clusters are left or none merged
    /// (every segment done); the live clusters are generation 0 after.
    /// Returns the iterations run.
    pub fn run(&mut self, tree: &mut DeviceLinkedTree, target: usize) -> Result<usize, GpuError> {
        let mut iterations = 0;
        let mut total = DeviceBuffer::<u32>::uninit(&self.gpu, "PLOC merge count", 1)?;
        while self.len > target.max(1) {
            let merged = self.iterate(tree, &mut total)?;
            iterations += 1;
            if merged == 0 {
                break;
            }
        }
        Ok(iterations)
    }

    /// One iteration; returns the number of pairs merged.
    fn iterate(
        &mut self,
        tree: &mut DeviceLinkedTree,
        total: &mut DeviceBuffer<u32>,
    ) -> Result<usize, GpuError> {
        let gpu = self.gpu.clone();
        let m = self.len;
        let segments = self.segments.as_ref().map(|s| &s[0]);
        let segment_ptr = segments.map_or(DevicePtr::null(), |s| s.ptr());
        gpu.launch(
            k::PLOC_NEAREST,
            blocks_for(m, NEAREST_THREADS as usize),
            NEAREST_THREADS,
            (
                self.boxes[0].ptr(),
                segment_ptr,
                m as u32,
                self.radius,
                self.neighbours.ptr_mut(),
            ),
        )?;
        for flags in [
            &mut self.merges,
            &mut self.keeps,
            &mut self.merge_offsets,
            &mut self.keep_offsets,
        ] {
            flags.truncate(m);
        }
        launch_grid_stride(
            &gpu,
            k::PLOC_FLAGS,
            m,
            (
                self.neighbours.ptr(),
                m as u32,
                self.merges.ptr_mut(),
                self.keeps.ptr_mut(),
            ),
        )?;
        let exclusive = (ScanKind::Exclusive, Direction::Forward);
        scan_u32(
            &self.keeps,
            &mut self.keep_offsets,
            exclusive.0,
            exclusive.1,
            None,
        )?;
        scan_u32(
            &self.merges,
            &mut self.merge_offsets,
            exclusive.0,
            exclusive.1,
            Some(total),
        )?;
        let merged = total.download()?[0] as usize;
        if merged == 0 {
            return Ok(0);
        }
        let (max_leaf, traversal, intersection) = collapse_args(&self.collapse);
        let [boxes_now, boxes_next] = &mut self.boxes;
        let [refs_now, refs_next] = &mut self.refs;
        let (segments_now, segments_next) = match self.segments.as_mut() {
            Some([now, next]) => (now.ptr(), next.ptr_mut()),
            None => (DevicePtr::null(), DevicePtrMut::null()),
        };
        launch_grid_stride(
            &gpu,
            k::PLOC_MERGE,
            m,
            (
                boxes_now.ptr(),
                refs_now.ptr(),
                segments_now,
                self.neighbours.ptr(),
                self.merge_offsets.ptr(),
                self.keep_offsets.ptr(),
                m as u32,
                self.built as u32,
                self.order.item_bounds.ptr(),
                tree.nodes.ptr_mut(),
                tree.node_parent.ptr_mut(),
                tree.item_parent.ptr_mut(),
                boxes_next.ptr_mut(),
                refs_next.ptr_mut(),
                segments_next,
                max_leaf,
                traversal,
                intersection,
            ),
        )?;
        self.boxes.swap(0, 1);
        self.refs.swap(0, 1);
        if let Some(segments) = self.segments.as_mut() {
            segments.swap(0, 1);
        }
        self.len = m - merged;
        self.built += merged;
        Ok(merged)
    }
}
