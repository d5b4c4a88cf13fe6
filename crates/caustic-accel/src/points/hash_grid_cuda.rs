//! Photon-map neighbour search on the GPU (`kernels/points.cu`): the
//! spatial hash grid of Fleisz 2009 and the brute-force
//! baseline. Answers follow `caustic_accel::points`'s query contract bit
//! for bit (same `dist2` expression, same `(dist2, index)` tie rule,
//! non-finite points never returned), so the GPU tests compare them with
//! the CPU reference exactly.
//!
//! Build of [`GpuHashGrid`], all on the device but for one small download:
//! bounds of the finite points (one reduction), the grid chosen on the host
//! from them (cells of the maximum query radius, linear hash when the grid
//! has at most [`LINEAR_CELLS_PER_POINT`] cells per point, else the
//! Teschner hash over a table of about two buckets per point), the
//! (bucket, index) pairs radix sorted, bucket bounds found in the sorted
//! keys, and the points gathered into bucket order.
//!
//! Queries visit the 27 cells around the query's cell, which is exact for
//! radii up to the radius the grid was built for; a larger radius is an
//! error ([`GpuError::Invalid`]), as is a `k` above [`MAX_K`]. A kNN
//! query is one warp's: the warp streams the candidates 32 at a time into
//! a list in shared memory and cuts it to the k nearest by sorting
//! (`points.cuh`'s `WarpBest`); many queries are taken in Morton order.
//!
//! Radius queries ([`GpuHashGrid::radius`], [`radius_brute`], and the
//! kd-tree's) return every point within the radius, exactly, as one
//! compacted list ([`GpuRadiusNeighbours`]): a first pass counts each
//! query's points, a scan turns the counts into offsets, and a second pass
//! writes each query's neighbours into its slice, sorted by
//! `(dist2, index)`. The list is sized by the count pass, so the caller
//! sizes nothing; it costs 8 bytes per neighbour (plus 8 more of scratch
//! during the query) and 4 per query. A total above 2^32 − 1 neighbours is
//! [`GpuError::TooLarge`]: query in batches then (the first pass's
//! [`GpuRadiusNeighbours::total`] tells how many a batch would return).

use crate::kernels::points_hash_grid as k;
use caustic_gpu::Gpu;
use caustic_gpu::GpuError;
use caustic_gpu::ops::radix_sort::sort_pairs_bits;
use caustic_gpu::ops::segment::find_sorted_bounds;
use caustic_gpu::ops::{
    GRID_STRIDE_THREADS, check_len, grid_stride_blocks, launch_grid_stride as launch,
};
use caustic_gpu::{DeviceBuffer, DevicePtr, DevicePtrMut, Kernel, Signature};

/// Largest k of a query (`POINTS_MAX_K`: the per-thread heap).
pub const MAX_K: usize = 128;
/// Index of a neighbour slot left empty (`NO_NEIGHBOUR`).
pub const NO_NEIGHBOUR: u32 = u32::MAX;
/// A linear grid is used while it has at most this many cells per point.
pub const LINEAR_CELLS_PER_POINT: u64 = 4;
/// Cells per axis at most: keeps cell coordinates small enough that the
/// float cell map errs by far less than the cell margin below.
const MAX_AXIS_CELLS: f32 = 1024.0;
/// The cell is this much larger than the radius, so rounding in the cell
/// map can never put two points within the radius two cells apart.
const CELL_MARGIN: f32 = 1e-3;
/// From this many queries on, [`GpuHashGrid::knn`] sorts them into Morton
/// order first (a sort of the 32-bit keys, cheap beside the search).
pub const MORTON_MIN_QUERIES: usize = 1 << 14;
/// Most points (indices are `u32` and one key value marks invalid points).
pub const MAX_POINTS: usize = (u32::MAX - 1) as usize;

/// The k nearest neighbours of every query, on the device: row `q` of
/// `index` and `dist2` (k slots each) holds query `q`'s neighbours in
/// ascending `(dist2, index)` order, `count[q]` of them, the rest
/// [`NO_NEIGHBOUR`] / `+inf`.
pub struct GpuNeighbours {
    pub k: usize,
    pub index: DeviceBuffer<u32>,
    pub dist2: DeviceBuffer<f32>,
    pub count: DeviceBuffer<u32>,
}

impl GpuNeighbours {
    /// Result slots for `queries` queries of `k` neighbours each.
    pub fn new(gpu: &Gpu, queries: usize, k: usize) -> Result<Self, GpuError> {
        let slots = queries.checked_mul(k).ok_or(GpuError::TooLarge {
            operation: "kNN result",
            len: queries,
            max: usize::MAX / k.max(1),
        })?;
        Ok(Self {
            k,
            index: DeviceBuffer::uninit(gpu, "kNN neighbour indices", slots)?,
            dist2: DeviceBuffer::uninit(gpu, "kNN neighbour distances", slots)?,
            count: DeviceBuffer::uninit(gpu, "kNN neighbour counts", queries)?,
        })
    }

    /// Each query's `(index, dist2)` list, downloaded.
    pub fn download(&self) -> Result<Vec<Vec<(u32, f32)>>, GpuError> {
        let index = self.index.download()?;
        let dist2 = self.dist2.download()?;
        let count = self.count.download()?;
        Ok(count
            .iter()
            .enumerate()
            .map(|(q, &c)| {
                let row = q * self.k;
                (row..row + c as usize)
                    .map(|j| (index[j], dist2[j]))
                    .collect()
            })
            .collect())
    }
}

/// Every point within a radius of every query, on the device: query `q`'s
/// neighbours are entries `offsets[q]..offsets[q + 1]` of `index` and
/// `dist2`, in ascending `(dist2, index)` order.
pub struct GpuRadiusNeighbours {
    /// `queries + 1` offsets; the last is the total.
    pub offsets: DeviceBuffer<u32>,
    pub index: DeviceBuffer<u32>,
    pub dist2: DeviceBuffer<f32>,
}

impl GpuRadiusNeighbours {
    /// Number of neighbours of all queries together.
    pub fn total(&self) -> usize {
        self.index.len()
    }

    /// Each query's `(index, dist2)` list, downloaded.
    pub fn download(&self) -> Result<Vec<Vec<(u32, f32)>>, GpuError> {
        let offsets = self.offsets.download()?;
        let index = self.index.download()?;
        let dist2 = self.dist2.download()?;
        Ok(offsets
            .windows(2)
            .map(|w| {
                (w[0] as usize..w[1] as usize)
                    .map(|j| (index[j], dist2[j]))
                    .collect()
            })
            .collect())
    }
}

/// The last six parameters of every radius-query kernel (`radius_query` in
/// points.cuh): null offsets and outputs in the counting pass.
pub(crate) struct RadiusTail<'a> {
    pub offsets: DevicePtr<'a, u32>,
    pub counts: DevicePtrMut<'a, u32>,
    pub total: DevicePtrMut<'a, u64>,
    pub keys: DevicePtrMut<'a, u64>,
    pub index: DevicePtrMut<'a, u32>,
    pub dist2: DevicePtrMut<'a, f32>,
}

/// The two passes of a radius query over `m` queries: `launch(tail)` runs
/// the query kernel with `tail` as its last six arguments (offsets,
/// counts, total, keys, index, dist2); the first pass gets a null offsets
/// pointer and counts, the second fills. Waits for the GPU once, to size
/// the list.
pub(crate) fn radius_two_pass(
    gpu: &Gpu,
    operation: &'static str,
    m: usize,
    launch: impl Fn(RadiusTail<'_>) -> Result<(), GpuError>,
) -> Result<GpuRadiusNeighbours, GpuError> {
    use caustic_gpu::ops::scan::exclusive_u32;
    check_len(operation, m, caustic_gpu::ops::MAX_SCAN_LEN - 1)?;
    // One slot more than queries: its count stays 0 and its offset is the total.
    let mut counts = DeviceBuffer::<u32>::zeroed(gpu, "radius counts", m + 1)?;
    let mut total = DeviceBuffer::<u64>::zeroed(gpu, "radius total", 1)?;
    launch(RadiusTail {
        offsets: DevicePtr::null(),
        counts: counts.ptr_mut(),
        total: total.ptr_mut(),
        keys: DevicePtrMut::null(),
        index: DevicePtrMut::null(),
        dist2: DevicePtrMut::null(),
    })?;
    let found = total.download()?[0];
    let max = caustic_gpu::ops::MAX_SCAN_LEN;
    if found > max as u64 {
        return Err(GpuError::TooLarge {
            operation,
            len: usize::try_from(found).unwrap_or(usize::MAX),
            max,
        });
    }
    let found = found as usize;
    let mut offsets = DeviceBuffer::<u32>::uninit(gpu, "radius offsets", m + 1)?;
    exclusive_u32(&counts, &mut offsets)?;
    let mut keys = DeviceBuffer::<u64>::uninit(gpu, "radius keys", found)?;
    let mut index = DeviceBuffer::<u32>::uninit(gpu, "radius neighbour indices", found)?;
    let mut dist2 = DeviceBuffer::<f32>::uninit(gpu, "radius neighbour distances", found)?;
    if found > 0 {
        launch(RadiusTail {
            offsets: offsets.ptr(),
            counts: counts.ptr_mut(),
            total: total.ptr_mut(),
            keys: keys.ptr_mut(),
            index: index.ptr_mut(),
            dist2: dist2.ptr_mut(),
        })?;
    }
    Ok(GpuRadiusNeighbours {
        offsets,
        index,
        dist2,
    })
}

/// The grid geometry chosen at build time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GridGeometry {
    pub origin: [f32; 3],
    pub cell: f32,
    pub dims: [u32; 3],
    /// 0: linear hash (one bucket per cell); else Teschner over 2^bits buckets.
    pub table_bits: u32,
    pub buckets: usize,
    /// The radius queries may use at most.
    pub max_radius: f32,
}

impl GridGeometry {
    fn new(min: [f32; 3], max: [f32; 3], points: usize, max_radius: f32) -> Self {
        let extent = [0, 1, 2].map(|a| (max[a] - min[a]).max(0.0));
        let largest = extent.iter().fold(0.0f32, |m, &e| m.max(e));
        let cell = (max_radius * (1.0 + CELL_MARGIN))
            .max(largest / (MAX_AXIS_CELLS - 3.0))
            .max(f32::MIN_POSITIVE * 1e6);
        let dims = extent.map(|e| (e / cell).floor() as u32 + 3);
        let cells: u64 = dims.iter().map(|&d| u64::from(d)).product();
        let (table_bits, buckets) = if cells <= (LINEAR_CELLS_PER_POINT * points as u64).max(4096) {
            (0, cells as usize)
        } else {
            let bits = (2 * points.max(8))
                .next_power_of_two()
                .trailing_zeros()
                .min(30);
            (bits, 1usize << bits)
        };
        Self {
            origin: min.map(|m| m - cell),
            cell,
            dims,
            table_bits,
            buckets,
            max_radius: cell / (1.0 + CELL_MARGIN),
        }
    }

    /// The kernels' grid parameters `(ox, oy, oz, inv_cell)` and `(dx, dy,
    /// dz, table_bits)`.
    fn params(&self) -> ([f32; 4], [u32; 4]) {
        let [ox, oy, oz] = self.origin;
        let [dx, dy, dz] = self.dims;
        ([ox, oy, oz, 1.0 / self.cell], [dx, dy, dz, self.table_bits])
    }
}

/// Points sorted into hash buckets on the device.
pub struct GpuHashGrid {
    geometry: GridGeometry,
    /// `start[b]..end[b]` is bucket `b`'s run in `sorted`.
    start: DeviceBuffer<u32>,
    end: DeviceBuffer<u32>,
    /// Points in bucket order; `w` holds the input index's bits.
    sorted: DeviceBuffer<[f32; 4]>,
    len: usize,
    /// The points' bounds, kept for [`GpuHashGrid::with_radius`].
    bounds: PointBounds,
}

/// The bounds of the finite points of one point set on the device (`min >
/// max` on some axis when there is none), as [`point_bounds`] read them:
/// what a hash grid's geometry is chosen from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PointBounds {
    pub min: [f32; 3],
    pub max: [f32; 3],
    /// The set's device address and length: a grid is built only from
    /// the bounds of its own points.
    points: u64,
    len: usize,
}

/// `f32` as an `i32` that compares in the same order (the kernels' `ordered`).
fn ordered(f: f32) -> i32 {
    let i = f.to_bits() as i32;
    if i >= 0 { i } else { i ^ 0x7fff_ffff }
}

fn unordered(i: i32) -> f32 {
    f32::from_bits((if i >= 0 { i } else { i ^ 0x7fff_ffff }) as u32)
}

impl GpuHashGrid {
    /// Builds the grid over `points` (x, y, z per point, on the device) for
    /// queries of radius up to `max_radius` (positive and finite).
    pub fn build(points: &DeviceBuffer<[f32; 3]>, max_radius: f32) -> Result<Self, GpuError> {
        check_len(k::POINTS_HASH.name(), points.len(), MAX_POINTS)?;
        check_radius(max_radius)?;
        let bounds = point_bounds(points.gpu(), &[points])?;
        Self::build_within(points, max_radius, &bounds[0])
    }

    /// [`GpuHashGrid::build`] over `points` whose bounds [`point_bounds`]
    /// read already: several grids' bounds come with one wait for the
    /// device instead of one each (a photon map's build is a chain of
    /// short kernels, where each wait leaves the device idle while the
    /// host reads and queues the next step).
    pub fn build_within(
        points: &DeviceBuffer<[f32; 3]>,
        max_radius: f32,
        bounds: &PointBounds,
    ) -> Result<Self, GpuError> {
        if bounds.points != points.device_ptr() || bounds.len != points.len() {
            return Err(GpuError::Invalid {
                what: "hash grid bounds",
                message: format!(
                    "bounds of {} points at {:#x} given for {} points at {:#x}",
                    bounds.len,
                    bounds.points,
                    points.len(),
                    points.device_ptr()
                ),
            });
        }
        check_len(k::POINTS_HASH.name(), points.len(), MAX_POINTS)?;
        check_radius(max_radius)?;
        let (min, max) = (bounds.min, bounds.max);
        let gpu = points.gpu();
        let n = points.len();
        let geometry = if min[0] <= max[0] {
            GridGeometry::new(min, max, n, max_radius)
        } else {
            // No finite point: a one-cell grid that holds nothing.
            GridGeometry::new([0.0; 3], [0.0; 3], 0, max_radius)
        };
        let invalid = u32::try_from(geometry.buckets).map_err(|_| GpuError::Invalid {
            what: "hash grid",
            message: format!("{} buckets do not fit 32-bit keys", geometry.buckets),
        })?;
        let mut keys = DeviceBuffer::<u32>::uninit(gpu, "hash grid keys", n)?;
        let mut order = DeviceBuffer::<u32>::uninit(gpu, "hash grid order", n)?;
        let ([ox, oy, oz, inv_cell], [dx, dy, dz, bits]) = geometry.params();
        let args = (
            points.ptr().cast(),
            n as u64,
            ox,
            oy,
            oz,
            inv_cell,
            dx,
            dy,
            dz,
            bits,
            invalid,
            keys.ptr_mut(),
            order.ptr_mut(),
        );
        launch(gpu, k::POINTS_HASH, n, args)?;
        let key_bits = 32 - invalid.leading_zeros();
        if n > 1 {
            sort_pairs_bits(&mut keys, &mut order, 0..key_bits.max(1))?;
        }
        let (start, end) = find_sorted_bounds(&keys, geometry.buckets + 1)?;
        let mut sorted = DeviceBuffer::<[f32; 4]>::uninit(gpu, "hash grid points", n)?;
        launch(
            gpu,
            k::POINTS_GATHER,
            n,
            (points.ptr().cast(), order.ptr(), n as u64, sorted.ptr_mut()),
        )?;
        Ok(Self {
            geometry,
            start,
            end,
            sorted,
            len: n,
            bounds: *bounds,
        })
    }

    /// Another grid over the points this one was built over, for queries
    /// of radius up to `max_radius`: the same grid as
    /// [`GpuHashGrid::build`] gives, without its reduction over the points
    /// and the wait to read the bounds back (a photon map's fine grid
    /// after its coarse one: a second reduction over 10^6 photons and a
    /// second wait on the photon pass's way to the estimates).
    pub fn with_radius(
        &self,
        points: &DeviceBuffer<[f32; 3]>,
        max_radius: f32,
    ) -> Result<Self, GpuError> {
        Self::build_within(points, max_radius, &self.bounds)
    }

    pub fn geometry(&self) -> &GridGeometry {
        &self.geometry
    }

    /// Number of input points (non-finite ones included, never returned).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The device the grid lives on.
    pub fn gpu(&self) -> &Gpu {
        self.sorted.gpu()
    }

    /// Device addresses of the bucket starts, ends and the sorted points,
    /// for records that kernels querying the grid themselves read
    /// (`points.cuh`).
    pub fn device_arrays(&self) -> (u64, u64, u64) {
        (
            self.start.device_ptr(),
            self.end.device_ptr(),
            self.sorted.device_ptr(),
        )
    }

    /// The bucket starts and ends: `start[b]..end[b]` is bucket `b`'s run
    /// of the sorted points.
    pub fn bucket_bounds(&self) -> (&DeviceBuffer<u32>, &DeviceBuffer<u32>) {
        (&self.start, &self.end)
    }

    /// Device bytes the grid holds.
    pub fn bytes(&self) -> usize {
        (self.start.len() + self.end.len()) * 4 + self.sorted.len() * 16
    }

    /// The `k` nearest points within `max_radius` of every query. The
    /// queries are searched in Morton order of their positions (sorted on
    /// the device first, from [`MORTON_MIN_QUERIES`] queries on), so that a
    /// warp's neighbours share their cells in the caches; the answers are
    /// the same in any order.
    pub fn knn(
        &self,
        queries: &DeviceBuffer<[f32; 3]>,
        k: usize,
        max_radius: f32,
    ) -> Result<GpuNeighbours, GpuError> {
        if queries.len() < MORTON_MIN_QUERIES {
            return self.knn_as_given(queries, k, max_radius);
        }
        let g = &self.geometry;
        let lo = g.origin;
        let hi = [0, 1, 2].map(|a| lo[a] + g.cell * g.dims[a] as f32);
        let order = morton_order(queries, lo, hi)?;
        self.knn_in_order(queries, Some(&order), k, max_radius)
    }

    /// [`GpuHashGrid::knn`] with the queries searched in the order given:
    /// for queries that come coherent already (pixel order, Morton order).
    pub fn knn_as_given(
        &self,
        queries: &DeviceBuffer<[f32; 3]>,
        k: usize,
        max_radius: f32,
    ) -> Result<GpuNeighbours, GpuError> {
        self.knn_in_order(queries, None, k, max_radius)
    }

    fn knn_in_order(
        &self,
        queries: &DeviceBuffer<[f32; 3]>,
        order: Option<&DeviceBuffer<u32>>,
        k: usize,
        max_radius: f32,
    ) -> Result<GpuNeighbours, GpuError> {
        check_k(k)?;
        if max_radius > self.geometry.max_radius {
            return Err(GpuError::Invalid {
                what: "hash grid query radius",
                message: format!(
                    "{max_radius} exceeds the radius {} the grid was built for",
                    self.geometry.max_radius
                ),
            });
        }
        let gpu = queries.gpu();
        let m = queries.len();
        let mut out = GpuNeighbours::new(gpu, m, k)?;
        let ([ox, oy, oz, inv_cell], [dx, dy, dz, bits]) = self.geometry.params();
        let args = (
            queries.ptr().cast(),
            order.map_or(DevicePtr::null(), DeviceBuffer::ptr),
            m as u64,
            k as u32,
            max_radius,
            ox,
            oy,
            oz,
            inv_cell,
            dx,
            dy,
            dz,
            bits,
            self.start.ptr(),
            self.end.ptr(),
            self.sorted.ptr(),
            out.index.ptr_mut(),
            out.dist2.ptr_mut(),
            out.count.ptr_mut(),
        );
        launch_warps(gpu, k::POINTS_KNN_HASHGRID, m, args)?;
        Ok(out)
    }

    /// Every point within `radius` (at most the grid's radius) of every
    /// query, sorted by `(dist2, index)`.
    pub fn radius(
        &self,
        queries: &DeviceBuffer<[f32; 3]>,
        radius: f32,
    ) -> Result<GpuRadiusNeighbours, GpuError> {
        if radius > self.geometry.max_radius {
            return Err(GpuError::Invalid {
                what: "hash grid query radius",
                message: format!(
                    "{radius} exceeds the radius {} the grid was built for",
                    self.geometry.max_radius
                ),
            });
        }
        let gpu = queries.gpu();
        let m = queries.len();
        let kernel = k::POINTS_RADIUS_HASHGRID;
        let ([ox, oy, oz, inv_cell], [dx, dy, dz, bits]) = self.geometry.params();
        radius_two_pass(gpu, kernel.name(), m, |tail| {
            let args = (
                queries.ptr().cast(),
                m as u64,
                radius,
                ox,
                oy,
                oz,
                inv_cell,
                dx,
                dy,
                dz,
                bits,
                self.start.ptr(),
                self.end.ptr(),
                self.sorted.ptr(),
                tail.offsets,
                tail.counts,
                tail.total,
                tail.keys,
                tail.index,
                tail.dist2,
            );
            launch(gpu, kernel, m, args)
        })
    }
}

/// Every finite point of `points` within `radius` (any, `+inf` included)
/// of every query, sorted by `(dist2, index)`, by testing every point.
pub fn radius_brute(
    points: &DeviceBuffer<[f32; 3]>,
    queries: &DeviceBuffer<[f32; 3]>,
    radius: f32,
) -> Result<GpuRadiusNeighbours, GpuError> {
    let kernel = k::POINTS_RADIUS_BRUTE;
    check_len(kernel.name(), points.len(), MAX_POINTS)?;
    let gpu = queries.gpu();
    let m = queries.len();
    radius_two_pass(gpu, kernel.name(), m, |tail| {
        let args = (
            queries.ptr().cast(),
            m as u64,
            radius,
            points.ptr().cast(),
            points.len() as u64,
            tail.offsets,
            tail.counts,
            tail.total,
            tail.keys,
            tail.index,
            tail.dist2,
        );
        launch(gpu, kernel, m, args)
    })
}

/// The `k` nearest of `points` within `max_radius` (any, `+inf` included)
/// of every query, by testing every point: the baseline.
pub fn knn_brute(
    points: &DeviceBuffer<[f32; 3]>,
    queries: &DeviceBuffer<[f32; 3]>,
    k: usize,
    max_radius: f32,
) -> Result<GpuNeighbours, GpuError> {
    check_k(k)?;
    check_len(k::POINTS_KNN_BRUTE.name(), points.len(), MAX_POINTS)?;
    let gpu = queries.gpu();
    let m = queries.len();
    let mut out = GpuNeighbours::new(gpu, m, k)?;
    launch(
        gpu,
        k::POINTS_KNN_BRUTE,
        m,
        (
            queries.ptr().cast(),
            m as u64,
            k as u32,
            max_radius,
            points.ptr().cast(),
            points.len() as u64,
            out.index.ptr_mut(),
            out.dist2.ptr_mut(),
            out.count.ptr_mut(),
        ),
    )?;
    Ok(out)
}

/// Queues a kernel that loops over warps (grid-stride) with one warp per
/// element over `n` elements: the warp-per-query kNN kernels.
fn launch_warps<S: Signature>(
    gpu: &Gpu,
    kernel: Kernel<S>,
    n: usize,
    args: S::Args<'_>,
) -> Result<(), GpuError> {
    let threads = n.checked_mul(32).ok_or(GpuError::TooLarge {
        operation: kernel.name(),
        len: n,
        max: usize::MAX / 32,
    })?;
    launch(gpu, kernel, threads, args)
}

/// The indices of `queries` sorted by the Morton code of their positions
/// in the box `lo .. hi` (non-finite queries anywhere).
fn morton_order(
    queries: &DeviceBuffer<[f32; 3]>,
    lo: [f32; 3],
    hi: [f32; 3],
) -> Result<DeviceBuffer<u32>, GpuError> {
    let gpu = queries.gpu();
    let m = queries.len();
    check_len(k::POINTS_QUERY_KEYS.name(), m, u32::MAX as usize)?;
    let mut keys = DeviceBuffer::<u32>::uninit(gpu, "query Morton keys", m)?;
    let mut order = DeviceBuffer::<u32>::uninit(gpu, "query Morton order", m)?;
    let inv = |a: usize| 1.0 / (hi[a] - lo[a]).max(f32::MIN_POSITIVE);
    let args = (
        queries.ptr().cast(),
        m as u64,
        lo[0],
        lo[1],
        lo[2],
        inv(0),
        inv(1),
        inv(2),
        keys.ptr_mut(),
        order.ptr_mut(),
    );
    launch(gpu, k::POINTS_QUERY_KEYS, m, args)?;
    if m > 1 {
        sort_pairs_bits(&mut keys, &mut order, 0..30)?;
    }
    Ok(order)
}

fn check_radius(max_radius: f32) -> Result<(), GpuError> {
    if !(max_radius.is_finite() && max_radius > 0.0) {
        return Err(GpuError::Invalid {
            what: "hash grid radius",
            message: format!("{max_radius} is not a positive finite radius"),
        });
    }
    Ok(())
}

pub(crate) fn check_k(k: usize) -> Result<(), GpuError> {
    if k > MAX_K {
        return Err(GpuError::Invalid {
            what: "kNN k",
            message: format!("{k} neighbours asked, the GPU kernels keep at most {MAX_K}"),
        });
    }
    Ok(())
}

/// The bounds of each of `sets`, queued on `gpu`'s stream (each set
/// complete in its order: made on it), read back with one wait.
pub fn point_bounds(
    gpu: &Gpu,
    sets: &[&DeviceBuffer<[f32; 3]>],
) -> Result<Vec<PointBounds>, GpuError> {
    let init = [f32::INFINITY; 3]
        .map(ordered)
        .into_iter()
        .chain([f32::NEG_INFINITY; 3].map(ordered))
        .collect::<Vec<i32>>()
        .repeat(sets.len());
    let mut out = DeviceBuffer::from_slice(gpu, "point bounds", &init)?;
    for (i, points) in sets.iter().enumerate() {
        if points.is_empty() {
            continue;
        }
        // Blocks enough to fill the device a few times over, each thread
        // then looping: every block ends in six atomics on the same six
        // words, so fewer blocks queue fewer of them.
        let blocks = grid_stride_blocks(points.len()).min(gpu.info().multiprocessors.max(1) * 8);
        let (_, words) = out.ptr_mut().split_at(6 * i);
        gpu.launch(
            k::POINTS_BOUNDS,
            blocks,
            GRID_STRIDE_THREADS,
            (points.ptr().cast(), points.len() as u64, words),
        )?;
    }
    let b = out.download()?;
    Ok(sets
        .iter()
        .zip(b.chunks_exact(6))
        .map(|(points, b)| PointBounds {
            min: [unordered(b[0]), unordered(b[1]), unordered(b[2])],
            max: [unordered(b[3]), unordered(b[4]), unordered(b[5])],
            points: points.device_ptr(),
            len: points.len(),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordered_floats_keep_their_order() {
        let values = [
            f32::NEG_INFINITY,
            -3.5,
            -0.0,
            0.0,
            1e-30,
            2.0,
            f32::INFINITY,
        ];
        for w in values.windows(2) {
            assert!(ordered(w[0]) <= ordered(w[1]), "{w:?}");
        }
        for v in values {
            assert_eq!(unordered(ordered(v)).to_bits(), v.to_bits());
        }
    }

    #[test]
    fn geometry_covers_the_points_and_bounds_the_axes() {
        let g = GridGeometry::new([0.0; 3], [10.0, 1.0, 0.0], 1000, 0.5);
        assert!(g.cell >= 0.5 && g.max_radius >= 0.5 - 1e-6);
        assert_eq!(g.table_bits, 0, "a small grid is linear");
        for a in 0..3 {
            assert!(g.origin[a] < 0.0);
            assert!(g.origin[a] + g.cell * g.dims[a] as f32 > [10.0, 1.0, 0.0][a]);
        }
        let huge = GridGeometry::new([0.0; 3], [1e6; 3], 10, 1e-3);
        assert!(huge.dims.iter().all(|&d| d as f32 <= MAX_AXIS_CELLS));
        assert!(huge.table_bits > 0, "too many cells for a linear table");
    }
}
