//! The Morton order on the device (`morton.cu`), the first step of every
//! GPU Morton-code builder and the twin of
//! [`MortonOrder`](super::morton_order::MortonOrder): the same boxes,
//! centroids and placeability as `BuildInput::from_triangles`, the same
//! grid over the centroid box and the same codes (Lauterbach et al.,
//! "Fast BVH Construction on GPUs", Eurographics 2009, §3.1, with the
//! quantisation of `morton_order.rs`), sorted by the runtime's stable radix
//! sort (`caustic_gpu::ops::radix_sort`) with the primitive ids as values,
//! which orders (code, id) pairs as the CPU does. Unplaceable primitives
//! (non-finite or empty boxes) get a sentinel code and sort last, by id:
//! the builders park them in one leaf with the empty box.
//!
//! Stages marked on the clock: "morton codes" (centroids, centroid box,
//! codes), "sort", "gather" (the sorted primitives' boxes, made from their
//! triangles, which the first pass reads but does not write boxes of:
//! the one-launch `lbvh` skips the gather, reading each triangle through
//! the ids where its climb starts). The host waits once, to read how many
//! primitives are placed.

use super::morton_order::MortonBits;
use crate::bvh::triangle_bvh_cuda::GpuTriangle;
use crate::kernels::bvh_build_morton as k;
use caustic_geom::Aabb;
use caustic_gpu::ops::radix_sort::sort_pairs_bits;
use caustic_gpu::ops::reduce::union_aabb_into;
use caustic_gpu::ops::{grid_stride_blocks, launch_grid_stride};
use caustic_gpu::{DeviceBuffer, DevicePtrMut, Gpu, GpuError, StageClock};

/// The sorted codes, 30 bits (in `u32`) or 63 bits (in `u64`).
pub(crate) enum SortedCodes {
    Bits30(DeviceBuffer<u32>),
    Bits63(DeviceBuffer<u64>),
}

/// The primitives in Morton order, on the device.
pub(crate) struct DeviceMortonOrder {
    /// All `n` codes, ascending; the last `n - placed` are the sentinel.
    pub codes: SortedCodes,
    /// `ids[k]` is the primitive whose code is `codes[k]`: the placed ones
    /// first, then the parked ones in increasing id order.
    pub ids: DeviceBuffer<u32>,
    /// How many primitives can be placed in a hierarchy.
    pub placed: usize,
    /// Boxes of the placed primitives in Morton order (empty until
    /// [`Self::gather`]).
    pub item_bounds: DeviceBuffer<Aabb>,
    /// Their centroids (`w` unused), when asked for (`hlbvh` bins them).
    pub item_centroids: Option<DeviceBuffer<[f32; 4]>>,
    /// The primitives' centroids in scene order, until [`Self::gather`]
    /// puts them in Morton order.
    ungathered: Option<DeviceBuffer<[f32; 4]>>,
}

/// The most primitives a Morton builder takes, as on the CPU.
pub const MAX_PRIMS: usize = (1 << 31) - 1;

impl DeviceMortonOrder {
    /// Sorts `triangles` (scene order) by the Morton codes of their
    /// centroids, `bits` wide: the codes, ids and placed count. A builder
    /// that reads the primitives through `ids` itself (the one-launch
    /// `lbvh`) needs no more; the others call [`Self::gather`].
    pub fn sorted(
        gpu: &Gpu,
        triangles: &DeviceBuffer<GpuTriangle>,
        bits: MortonBits,
        clock: &mut StageClock,
    ) -> Result<Self, GpuError> {
        let n = triangles.len();
        if n > MAX_PRIMS {
            return Err(GpuError::TooLarge {
                operation: "a Morton-code BVH build",
                len: n,
                max: MAX_PRIMS,
            });
        }
        let mut centroids =
            DeviceBuffer::<[f32; 4]>::uninit(gpu, "BVH build: triangle centroids", n)?;
        let mut grid = DeviceBuffer::<Aabb>::uninit(gpu, "BVH build: centroid box", 1)?;
        if n > 0 {
            let blocks = grid_stride_blocks(n) as usize;
            let mut points =
                DeviceBuffer::<Aabb>::uninit(gpu, "BVH build: centroid boxes of blocks", blocks)?;
            launch_grid_stride(
                gpu,
                k::MORTON_PREPARE,
                n,
                (
                    triangles.ptr(),
                    n as u64,
                    centroids.ptr_mut(),
                    points.ptr_mut(),
                ),
            )?;
            union_aabb_into(&points, &mut grid)?;
        }
        let mut ids = DeviceBuffer::<u32>::uninit(gpu, "BVH build: Morton order", n)?;
        let mut placed = DeviceBuffer::<u32>::zeroed(gpu, "BVH build: placed count", 1)?;
        let codes = match bits {
            MortonBits::Bits30 => {
                let mut keys = DeviceBuffer::<u32>::uninit(gpu, "BVH build: Morton codes", n)?;
                let args = (
                    centroids.ptr(),
                    grid.ptr(),
                    n as u64,
                    keys.ptr_mut(),
                    ids.ptr_mut(),
                );
                launch_grid_stride(gpu, k::MORTON_CODES_30, n, args)?;
                clock.mark("morton codes")?;
                sort_pairs_bits(&mut keys, &mut ids, 0..32)?;
                clock.mark("sort")?;
                let args = (keys.ptr(), n as u64, placed.ptr_mut());
                launch_grid_stride(gpu, k::MORTON_PLACED_30, n, args)?;
                SortedCodes::Bits30(keys)
            }
            MortonBits::Bits63 => {
                let mut keys = DeviceBuffer::<u64>::uninit(gpu, "BVH build: Morton codes", n)?;
                let args = (
                    centroids.ptr(),
                    grid.ptr(),
                    n as u64,
                    keys.ptr_mut(),
                    ids.ptr_mut(),
                );
                launch_grid_stride(gpu, k::MORTON_CODES_63, n, args)?;
                clock.mark("morton codes")?;
                sort_pairs_bits(&mut keys, &mut ids, 0..64)?;
                clock.mark("sort")?;
                let args = (keys.ptr(), n as u64, placed.ptr_mut());
                launch_grid_stride(gpu, k::MORTON_PLACED_63, n, args)?;
                SortedCodes::Bits63(keys)
            }
        };
        let placed = if n == 0 {
            0
        } else {
            placed.download()?[0] as usize
        };
        Ok(Self {
            codes,
            ids,
            placed,
            item_bounds: DeviceBuffer::uninit(gpu, "BVH build: sorted boxes", 0)?,
            item_centroids: None,
            ungathered: Some(centroids),
        })
    }

    /// The placed primitives' boxes (made again from `triangles`, the
    /// scene-order triangles this order was sorted from) and, when
    /// `with_centroids`, centroids in Morton order; marks "gather" on
    /// `clock`. Nothing after the first call.
    pub fn gather(
        &mut self,
        triangles: &DeviceBuffer<GpuTriangle>,
        with_centroids: bool,
        clock: &mut StageClock,
    ) -> Result<(), GpuError> {
        let Some(centroids) = self.ungathered.take() else {
            return Ok(());
        };
        let gpu = centroids.gpu().clone();
        let placed = self.placed;
        let mut item_bounds = DeviceBuffer::uninit(&gpu, "BVH build: sorted boxes", placed)?;
        let mut item_centroids = if with_centroids {
            Some(DeviceBuffer::uninit(
                &gpu,
                "BVH build: sorted centroids",
                placed,
            )?)
        } else {
            None
        };
        let centroids_out = match item_centroids.as_mut() {
            Some(buffer) => buffer.ptr_mut(),
            None => DevicePtrMut::null(),
        };
        launch_grid_stride(
            &gpu,
            k::MORTON_GATHER,
            placed,
            (
                self.ids.ptr(),
                placed as u64,
                triangles.ptr(),
                centroids.ptr(),
                item_bounds.ptr_mut(),
                centroids_out,
            ),
        )?;
        clock.mark("gather")?;
        self.item_bounds = item_bounds;
        self.item_centroids = item_centroids;
        Ok(())
    }
}
