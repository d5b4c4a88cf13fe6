//! The uniform grid built on the device ([`GpuGrid`], `grid` on the GPU):
//! the CPU grid of [`super::build`], cell for cell and reference for
//! reference, by the multi-pass construction of Ivson (his thesis, "Ray
//! Tracing Dynamic Scenes on the GPU", PUC-Rio 2009, chapter 4) in the form
//! of Kalojanov and Slusallek (HPG 2009), all of it on the device but for
//! two small reads (`build.cu`):
//!
//! 1. **Bounds**: each triangle's box (the empty box for a triangle with a
//!    non-finite vertex), their union ([`union_aabb`]) and the number of
//!    finite triangles ([`count_nonzero_u32`]); the host then takes the
//!    CPU's own frame (`UniformGrid::frame`: the grid box grown by the
//!    tolerance, the density formula's resolution, macro cells), so the
//!    cells are the CPU's.
//! 2. **Count**: per triangle, the cells it goes into (its box grown by the
//!    tolerance, or with exact overlap the separating-axis test per cell),
//!    and their 64-bit total, read back to size the pairs.
//! 3. **Scan**: the exclusive prefix sum of the counts, each triangle's run.
//! 4. **Write**: each triangle writes its (cell, triangle) pairs into its
//!    run (Ivson's thesis writes them one output slot per thread, finding
//!    the triangle by binary search over the scan, because GLSL could not
//!    scatter; CUDA can, and a search per slot costs more than it saves).
//! 5. **Sort**: a stable radix sort of the pairs by cell over the cell
//!    index's bits only ([`sort_pairs_bits`]): the pairs were written in
//!    triangle order, so each cell's list comes out in id order, as the
//!    CPU's sort of `(cell, triangle)` keys orders it.
//! 6. **Ranges**: each cell's run from the boundaries of the sorted keys
//!    ([`find_sorted_bounds`]: start and end per cell, `0..0` when empty;
//!    the thesis's per-cell binary search is for scatter-less GLSL).
//! 7. **Culling data**: one warp per macro cell unions the boxes of the
//!    whole triangles its cells reference, and folds them into each axis's
//!    slab extremes with ordered-integer atomics; one warp per axis turns
//!    those into the running bounds the DDA stops and starts by.
//!
//! Each stage is timed with device events ([`GridBuildStats`]). A build
//! whose references exceed what the sort takes is [`GpuError::TooLarge`];
//! an allocation that fails is [`GpuError::OutOfMemory`] naming the buffer.
//! [`GpuGrid::download`] returns the grid as a [`UniformGrid`], which the
//! CPU traces and validates, and which [`super::validate_cuda`] compares
//! with the CPU's build.

use std::time::Instant;

use bytemuck::{Pod, Zeroable};
use caustic_geom::{Aabb, Triangle};
use caustic_gpu::ops::radix_sort::{MAX_SORT_LEN, sort_pairs_bits};
use caustic_gpu::ops::reduce::{count_nonzero_u32, union_aabb};
use caustic_gpu::ops::scan::exclusive_u32;
use caustic_gpu::ops::segment::find_sorted_bounds;
use caustic_gpu::ops::{check_len, launch_grid_stride, launch_per_element};
use caustic_gpu::{DeviceBuffer, Gpu, GpuError};

use super::{GridConfig, UniformGrid};
use crate::bvh::triangle_bvh_cuda::GpuTriangle;
use crate::kernels::grid_build as k;

/// Most triangles: ids are `u32` and the count pass indexes with 32 bits.
pub const MAX_TRIANGLES: usize = u32::MAX as usize;

/// What the host computed of the grid, as every grid kernel reads it
/// (`GridFrame` in grid.cuh): `UniformGrid::frame`'s box, cells and
/// tolerance, and the DDA's scale.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct GridFrame {
    pub bounds_min: [f32; 3],
    pub tolerance: f32,
    pub bounds_max: [f32; 3],
    /// Largest absolute coordinate of the grid box (`SlabRay`'s scale).
    pub scale: f32,
    pub cell_size: [f32; 3],
    pub macro_size: u32,
    pub inv_cell_size: [f32; 3],
    /// 1: exact triangle–cell overlap ([`GridConfig::exact_overlap`]).
    pub exact: u32,
    pub res: [u32; 3],
    pub cells: u32,
    pub macro_res: [u32; 3],
    pub macros: u32,
}

const _: () = assert!(size_of::<GridFrame>() == 96);

impl GridFrame {
    /// The frame of `grid` (its box, cells and tolerance; no references).
    pub fn new(grid: &UniformGrid, exact: bool) -> Self {
        let b = grid.bounds;
        Self {
            bounds_min: b.min.to_array(),
            tolerance: grid.tolerance,
            bounds_max: b.max.to_array(),
            // dda.rs's scale, with glam's operations.
            scale: b.min.abs().max(b.max.abs()).max_element(),
            cell_size: grid.cell_size.to_array(),
            macro_size: grid.macro_size as u32,
            inv_cell_size: grid.inv_cell_size.to_array(),
            exact: u32::from(exact),
            res: grid.res,
            cells: grid.cell_count() as u32,
            macro_res: grid.macro_res,
            macros: grid.macro_count() as u32,
        }
    }

    /// Slabs of macro cells on all three axes.
    pub fn slabs(&self) -> usize {
        self.macro_res.iter().map(|&r| r as usize).sum()
    }
}

/// Device time of each build stage (events around each), and the sizes.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GridBuildStats {
    /// Triangle boxes, their union and count, read back.
    pub bounds_ms: f64,
    /// Cells per triangle and their total, read back.
    pub count_ms: f64,
    pub scan_ms: f64,
    pub write_ms: f64,
    pub sort_ms: f64,
    /// Cell ranges from the sorted keys.
    pub ranges_ms: f64,
    /// Macro-cell boxes and slab bounds.
    pub culling_ms: f64,
    /// Host wall time of the whole build (the stages, the two reads and the
    /// host's share in between).
    pub total_ms: f64,
    pub cells: usize,
    /// (cell, triangle) references.
    pub references: usize,
    /// Device bytes the grid holds (its triangle copy included).
    pub bytes: usize,
    /// Device bytes the build held at once at its peak (the sort's
    /// alternate buffers included; the primitives' small scratch not).
    pub peak_bytes: usize,
}

impl GridBuildStats {
    /// The stages' device times added up.
    pub fn stages_ms(&self) -> f64 {
        self.bounds_ms
            + self.count_ms
            + self.scan_ms
            + self.write_ms
            + self.sort_ms
            + self.ranges_ms
            + self.culling_ms
    }
}

/// A uniform grid on the device, ready to trace with
/// [`super::dda_cuda::GridTracer`]. Holds its triangles in scene order.
pub struct GpuGrid {
    config: GridConfig,
    /// The CPU frame (box, cells, tolerance; no references).
    host_frame: UniformGrid,
    frame: DeviceBuffer<GridFrame>,
    triangles: DeviceBuffer<GpuTriangle>,
    /// Per cell, its references `cell_start[c]..cell_end[c]`.
    cell_start: DeviceBuffer<u32>,
    cell_end: DeviceBuffer<u32>,
    /// Scene id of each reference's triangle, cell by cell.
    prims: DeviceBuffer<u32>,
    macro_bounds: DeviceBuffer<Aabb>,
    /// `(low, high)` per slab of macro cells, axes x, y, z in turn.
    slab_bounds: DeviceBuffer<f32>,
    stats: GridBuildStats,
}

impl GpuGrid {
    /// Uploads `triangles` (scene order) and builds over them.
    pub fn build_from_host(
        gpu: &Gpu,
        triangles: &[Triangle],
        config: &GridConfig,
    ) -> Result<Self, GpuError> {
        check_len("grid build", triangles.len(), MAX_TRIANGLES)?;
        let tris: Vec<GpuTriangle> = triangles
            .iter()
            .enumerate()
            .map(|(i, t)| GpuTriangle::new(t, i as u32))
            .collect();
        Self::build(
            DeviceBuffer::from_slice(gpu, "grid triangles", &tris)?,
            config,
        )
    }

    /// Builds the grid over `triangles`, triangle `i` being scene id `i`
    /// (its `prim` word is not read), and keeps them. Same cells and
    /// references as [`UniformGrid::build_with`] on the same triangles.
    pub fn build(
        triangles: DeviceBuffer<GpuTriangle>,
        config: &GridConfig,
    ) -> Result<Self, GpuError> {
        let start = Instant::now();
        let gpu = triangles.gpu().clone();
        let n = triangles.len();
        check_len("grid build", n, MAX_TRIANGLES)?;
        let mut stats = GridBuildStats::default();
        let mut peak = Peak(triangles.bytes());

        // 1. Bounds: the union of the finite triangles' boxes, and how many.
        let mut scene = Aabb::EMPTY;
        let mut hittable = 0;
        stats.bounds_ms = timed(&gpu, || {
            let mut boxes = DeviceBuffer::<Aabb>::uninit(&gpu, "grid triangle boxes", n)?;
            let mut finite = DeviceBuffer::<u32>::uninit(&gpu, "grid finite flags", n)?;
            peak.note(triangles.bytes() + boxes.bytes() + finite.bytes());
            let args = (triangles.ptr(), n as u64, boxes.ptr_mut(), finite.ptr_mut());
            launch_grid_stride(&gpu, k::GRID_TRIANGLE_BOXES, n, args)?;
            scene = union_aabb(&boxes)?;
            hittable = count_nonzero_u32(&finite)? as usize;
            Ok(())
        })?;
        let host_frame = UniformGrid::frame(scene, hittable, config);
        let frame = GridFrame::new(&host_frame, config.exact_overlap);
        let mut grid = Self {
            config: *config,
            frame: DeviceBuffer::from_slice(&gpu, "grid frame", &[frame])?,
            host_frame,
            triangles,
            cell_start: DeviceBuffer::uninit(&gpu, "grid cell starts", 0)?,
            cell_end: DeviceBuffer::uninit(&gpu, "grid cell ends", 0)?,
            prims: DeviceBuffer::uninit(&gpu, "grid references", 0)?,
            macro_bounds: DeviceBuffer::uninit(&gpu, "grid macro-cell boxes", 0)?,
            slab_bounds: DeviceBuffer::uninit(&gpu, "grid slab bounds", 0)?,
            stats,
        };
        if hittable > 0 {
            grid.build_cells(&mut peak)?;
        }
        grid.stats.cells = if grid.prims.is_empty() {
            0
        } else {
            frame.cells as usize
        };
        grid.stats.references = grid.prims.len();
        grid.stats.bytes = grid.bytes();
        grid.stats.peak_bytes = peak.0.max(grid.stats.bytes);
        gpu.synchronize()?;
        grid.stats.total_ms = start.elapsed().as_secs_f64() * 1e3;
        Ok(grid)
    }

    /// Stages 2 to 7 (see the module docs) over a non-empty frame.
    fn build_cells(&mut self, peak: &mut Peak) -> Result<(), GpuError> {
        let gpu = self.gpu().clone();
        let n = self.triangles.len();
        let tri_bytes = self.triangles.bytes();
        let frame = self.frame_host();
        let cells = frame.cells as usize;

        // 2. Count.
        let mut counts = DeviceBuffer::<u32>::uninit(&gpu, "grid counts per triangle", n)?;
        let mut total = 0u64;
        self.stats.count_ms = timed(&gpu, || {
            let mut sum = DeviceBuffer::<u64>::zeroed(&gpu, "grid reference total", 1)?;
            let args = (
                self.frame.ptr(),
                self.triangles.ptr(),
                n as u32,
                counts.ptr_mut(),
                sum.ptr_mut(),
            );
            launch_per_element(&gpu, k::GRID_COUNT, n, args)?;
            total = sum.download()?[0];
            Ok(())
        })?;
        let references = usize::try_from(total)
            .ok()
            .filter(|&r| r <= MAX_SORT_LEN)
            .ok_or(GpuError::TooLarge {
                operation: "grid references (cell, triangle pairs)",
                len: usize::try_from(total).unwrap_or(usize::MAX),
                max: MAX_SORT_LEN,
            })?;

        // 3. Scan.
        let mut offsets = DeviceBuffer::<u32>::uninit(&gpu, "grid reference offsets", n)?;
        peak.note(tri_bytes + counts.bytes() + offsets.bytes());
        self.stats.scan_ms = timed(&gpu, || exclusive_u32(&counts, &mut offsets))?;
        drop(counts);

        // 4. Write the (cell, triangle) pairs.
        let mut keys = DeviceBuffer::<u32>::uninit(&gpu, "grid reference cells", references)?;
        let mut prims = DeviceBuffer::<u32>::uninit(&gpu, "grid references", references)?;
        peak.note(tri_bytes + offsets.bytes() + keys.bytes() + prims.bytes());
        self.stats.write_ms = timed(&gpu, || {
            let args = (
                self.frame.ptr(),
                self.triangles.ptr(),
                n as u32,
                offsets.ptr(),
                keys.ptr_mut(),
                prims.ptr_mut(),
            );
            launch_per_element(&gpu, k::GRID_WRITE_PAIRS, n, args)
        })?;
        drop(offsets);

        // 5. Sort by cell, over the bits a cell index needs.
        let bits = (u32::BITS - (frame.cells - 1).leading_zeros()).max(1);
        // The sort holds an alternate copy of keys and values.
        peak.note(tri_bytes + 2 * (keys.bytes() + prims.bytes()));
        self.stats.sort_ms = timed(&gpu, || sort_pairs_bits(&mut keys, &mut prims, 0..bits))?;

        // 6. Cell ranges.
        let mut bounds = None;
        self.stats.ranges_ms = timed(&gpu, || {
            bounds = Some(find_sorted_bounds(&keys, cells)?);
            Ok(())
        })?;
        let (cell_start, cell_end) = bounds.expect("the ranges stage ran");
        peak.note(tri_bytes + keys.bytes() + prims.bytes() + 8 * cells);
        drop(keys);
        self.cell_start = cell_start;
        self.cell_end = cell_end;
        self.prims = prims;

        // 7. Culling data.
        self.stats.culling_ms = timed(&gpu, || self.culling_data(&frame))?;
        peak.note(self.bytes() + 8 * frame.slabs());
        Ok(())
    }

    /// Macro-cell boxes and slab bounds (stage 7).
    fn culling_data(&mut self, frame: &GridFrame) -> Result<(), GpuError> {
        let gpu = self.gpu().clone();
        let slabs = frame.slabs();
        // Ordered-integer images of +inf (lows) and -inf (highs): the
        // identities of the atomics.
        let mut init = vec![ordered(f32::INFINITY); slabs];
        init.resize(2 * slabs, ordered(f32::NEG_INFINITY));
        let mut slab_ord = DeviceBuffer::from_slice(&gpu, "grid slab extremes", &init)?;
        self.macro_bounds =
            DeviceBuffer::uninit(&gpu, "grid macro-cell boxes", frame.macros as usize)?;
        self.slab_bounds = DeviceBuffer::uninit(&gpu, "grid slab bounds", 2 * slabs)?;
        let args = (
            self.frame.ptr(),
            self.triangles.ptr(),
            self.cell_start.ptr(),
            self.cell_end.ptr(),
            self.prims.ptr(),
            self.macro_bounds.ptr_mut(),
            slab_ord.ptr_mut(),
        );
        // One warp per macro cell.
        launch_per_element(&gpu, k::GRID_MACRO_BOUNDS, 32 * frame.macros as usize, args)?;
        let args = (self.frame.ptr(), slab_ord.ptr(), self.slab_bounds.ptr_mut());
        gpu.launch(k::GRID_SLAB_RUNNING, 1, 96, args)
    }

    pub fn gpu(&self) -> &Gpu {
        self.triangles.gpu()
    }

    pub fn config(&self) -> &GridConfig {
        &self.config
    }

    /// The frame the kernels read.
    pub fn frame_host(&self) -> GridFrame {
        GridFrame::new(&self.host_frame, self.config.exact_overlap)
    }

    pub fn stats(&self) -> &GridBuildStats {
        &self.stats
    }

    /// No triangle can be hit: the grid has no references.
    pub fn is_empty(&self) -> bool {
        self.prims.is_empty()
    }

    /// Device bytes held: cell ranges, references, triangles, culling data.
    pub fn bytes(&self) -> usize {
        self.cell_start.bytes()
            + self.cell_end.bytes()
            + self.prims.bytes()
            + self.triangles.bytes()
            + self.macro_bounds.bytes()
            + self.slab_bounds.bytes()
            + self.frame.bytes()
    }

    /// The device buffers the traversal reads (dda_cuda.rs).
    pub(crate) fn parts(&self) -> GridParts<'_> {
        GridParts {
            frame: &self.frame,
            cell_start: &self.cell_start,
            cell_end: &self.cell_end,
            prims: &self.prims,
            triangles: &self.triangles,
            macro_bounds: &self.macro_bounds,
            slab_bounds: &self.slab_bounds,
        }
    }

    /// The triangles, scene order.
    pub fn triangles(&self) -> &DeviceBuffer<GpuTriangle> {
        &self.triangles
    }

    /// Gives the triangles back (to rebuild after they moved, say).
    pub fn into_triangles(self) -> DeviceBuffer<GpuTriangle> {
        self.triangles
    }

    /// Copies the grid back as the CPU's [`UniformGrid`] (cell starts from
    /// the ranges, the culling data, the triangles); its `stats()` report
    /// the device build's total time.
    pub fn download(&self) -> Result<UniformGrid, GpuError> {
        let mut grid = self.host_frame.clone();
        let triangles = self.triangles.download()?;
        grid.triangles = triangles.iter().map(GpuTriangle::triangle).collect();
        grid.prims = self.prims.download()?;
        // Built cells (any finite triangle), even should none be referenced.
        if !self.cell_start.is_empty() {
            let start = self.cell_start.download()?;
            let end = self.cell_end.download()?;
            grid.cell_start = cell_starts(&start, &end, grid.prims.len());
            grid.macro_bounds = self.macro_bounds.download()?;
            grid.slab_bounds = split_slabs(&self.slab_bounds.download()?, grid.macro_res);
        }
        grid.peak_build_bytes = self.stats.peak_bytes;
        grid.stats = grid.make_stats(self.stats.total_ms);
        Ok(grid)
    }
}

/// The buffers the traversal kernels take.
pub(crate) struct GridParts<'a> {
    pub frame: &'a DeviceBuffer<GridFrame>,
    pub cell_start: &'a DeviceBuffer<u32>,
    pub cell_end: &'a DeviceBuffer<u32>,
    pub prims: &'a DeviceBuffer<u32>,
    pub triangles: &'a DeviceBuffer<GpuTriangle>,
    pub macro_bounds: &'a DeviceBuffer<Aabb>,
    pub slab_bounds: &'a DeviceBuffer<f32>,
}

/// Device bytes held at once, at most.
struct Peak(usize);

impl Peak {
    fn note(&mut self, bytes: usize) {
        self.0 = self.0.max(bytes);
    }
}

/// Runs `f` between two device events; its milliseconds.
fn timed(gpu: &Gpu, f: impl FnOnce() -> Result<(), GpuError>) -> Result<f64, GpuError> {
    gpu.time_ms(f).map(f64::from)
}

/// `f32` as an `i32` that compares in the same order (`grid_ordered`).
fn ordered(x: f32) -> i32 {
    let i = x.to_bits() as i32;
    if i >= 0 { i } else { i ^ 0x7fff_ffff }
}

/// The CPU's `cell_start` (`cells + 1` entries, cell `c` referencing
/// `cell_start[c]..cell_start[c + 1]`) from per-cell `start..end` runs in
/// which an empty cell is `0..0`: an empty cell starts where the next
/// non-empty one does.
pub fn cell_starts(start: &[u32], end: &[u32], references: usize) -> Vec<u32> {
    let mut out = vec![references as u32; start.len() + 1];
    for c in (0..start.len()).rev() {
        out[c] = if end[c] > start[c] {
            start[c]
        } else {
            out[c + 1]
        };
    }
    out
}

/// The flat `(low, high)` slab list as the CPU keeps it, per axis.
fn split_slabs(flat: &[f32], macro_res: [u32; 3]) -> [Vec<(f32, f32)>; 3] {
    let mut at = 0;
    macro_res.map(|r| {
        let axis = (at..at + r as usize)
            .map(|s| (flat[2 * s], flat[2 * s + 1]))
            .collect();
        at += r as usize;
        axis
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grid::build::resolution;
    use caustic_geom::Vec3;

    #[test]
    fn cell_starts_give_empty_cells_the_next_start() {
        // Cells 0 and 3 empty, 1 holds 0..2, 2 holds 2..3, 4 holds 3..5.
        let start = [0, 0, 2, 0, 3];
        let end = [0, 2, 3, 0, 5];
        assert_eq!(cell_starts(&start, &end, 5), [0, 0, 2, 3, 3, 5]);
        // Trailing empty cells end at the total; no cells, just the total.
        assert_eq!(cell_starts(&[0, 0], &[2, 0], 2), [0, 2, 2]);
        assert_eq!(cell_starts(&[], &[], 0), [0]);
    }

    #[test]
    fn ordered_floats_sort_as_floats() {
        let values = [
            f32::NEG_INFINITY,
            -2.5,
            -0.0,
            0.0,
            1e-30,
            3.0,
            f32::INFINITY,
        ];
        for w in values.windows(2) {
            assert!(ordered(w[0]) <= ordered(w[1]), "{w:?}");
        }
        assert!(ordered(-1.0) < ordered(-0.5));
    }

    #[test]
    fn slabs_split_per_axis() {
        let flat: Vec<f32> = (0..12).map(|i| i as f32).collect();
        let [x, y, z] = split_slabs(&flat, [1, 2, 3]);
        assert_eq!(x, [(0.0, 1.0)]);
        assert_eq!(y, [(2.0, 3.0), (4.0, 5.0)]);
        assert_eq!(z, [(6.0, 7.0), (8.0, 9.0), (10.0, 11.0)]);
    }

    #[test]
    fn frame_is_the_cpu_grids() {
        let tris: Vec<Triangle> = (0..500)
            .map(|i| {
                let p = Vec3::new(
                    (i % 10) as f32,
                    (i / 10 % 10) as f32,
                    (i / 100) as f32 * 0.5,
                );
                Triangle::new(p, p + Vec3::X * 0.7, p + Vec3::Z * 0.3)
            })
            .collect();
        let config = GridConfig::DEFAULT;
        let cpu = UniformGrid::build_with(&tris, &config);
        let scene = tris.iter().fold(Aabb::EMPTY, |b, t| b.union(t.bounds()));
        let frame = GridFrame::new(&UniformGrid::frame(scene, tris.len(), &config), true);
        assert_eq!(frame.res, cpu.res);
        assert_eq!(frame.res, resolution(scene.extent(), 500, config.density));
        assert_eq!(frame.macro_res, cpu.macro_res);
        assert_eq!(frame.bounds_min, cpu.bounds.min.to_array());
        assert_eq!(frame.cell_size, cpu.cell_size.to_array());
        assert_eq!(frame.tolerance.to_bits(), cpu.tolerance.to_bits());
        assert_eq!(frame.cells as usize, cpu.cell_count());
        assert_eq!(
            frame.slabs(),
            cpu.slab_bounds.iter().map(Vec::len).sum::<usize>()
        );
        assert_eq!(frame.exact, 1);
    }
}
