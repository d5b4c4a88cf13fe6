//! The radiance estimates of the photon maps on the GPU (kernels in
//! `estimate.cu`), the twin of [`super::estimate`]: eye vertices collected
//! from the Whitted waves, Morton-ordered, and both maps' estimates added
//! to the framebuffer, a warp's 32 vertices searching their photons as
//! one tile; the map search alone for the tests.

use caustic_accel::bvh::traverse_cuda::{GpuHit, GpuRay};
use caustic_accel::points::hash_grid_cuda::{GpuHashGrid, GpuNeighbours};
use caustic_gpu::ops::{launch_per_element as launch, launch_per_element_in};
use caustic_gpu::{DeviceBuffer, DevicePtrMut, Gpu, GpuError};

use super::records_cuda::{GpuEyeVertex, GpuPhoton, GpuShadedPhoton, PhotonMapView};
use crate::kernels::photon_estimate as k;
use crate::scene_cuda::{FrameParams, GpuPath};

/// Threads of the estimate kernels' blocks (`ESTIMATE_THREADS` in
/// `estimate.cu`): four warps, each a tile of 32 queries.
const ESTIMATE_THREADS: u32 = 128;

/// The search of [`estimate`] on its own: the `k` nearest photons of the
/// map `view` (one element) within its radius for every query, as the
/// point-search kernels report them; by tiles of 32 consecutive queries
/// as [`estimate`] searches when `tiled`, else query by query.
pub fn map_knn(
    view: &DeviceBuffer<PhotonMapView>,
    queries: &DeviceBuffer<[f32; 3]>,
    tiled: bool,
) -> Result<GpuNeighbours, GpuError> {
    let m = queries.len();
    let per_query = view.download()?.first().map_or(0, |v| v.k as usize);
    let mut out = GpuNeighbours::new(view.gpu(), m, per_query)?;
    launch_per_element_in(
        view.gpu(),
        k::PHOTON_MAP_KNN,
        m,
        ESTIMATE_THREADS,
        (
            view.ptr(),
            queries.ptr().cast(),
            m as u32,
            u32::from(tiled),
            out.index.ptr_mut(),
            out.dist2.ptr_mut(),
            out.count.ptr_mut(),
        ),
    )?;
    Ok(out)
}

/// Each photon as the estimates read it (its normal decoded once), in the
/// same order: what [`PhotonMapView::shaded`] points to.
pub fn shaded(
    photons: &DeviceBuffer<GpuPhoton>,
) -> Result<DeviceBuffer<GpuShadedPhoton>, GpuError> {
    let n = photons.len();
    let mut out = DeviceBuffer::<GpuShadedPhoton>::uninit(photons.gpu(), "shaded photons", n)?;
    launch(
        photons.gpu(),
        k::PHOTON_SHADED,
        n,
        (photons.ptr(), n as u32, out.ptr_mut()),
    )?;
    Ok(out)
}

/// The photon-weighted mean number of points per non-empty cell of `grid`
/// (`Σ n² / Σ n` over its buckets); 0 for an empty grid.
pub fn mean_occupancy(grid: &GpuHashGrid) -> Result<f64, GpuError> {
    Ok(mean_occupancies(grid.gpu(), &[grid])?[0])
}

/// [`mean_occupancy`] of each of `grids`, queued on `gpu`'s stream (the
/// grids built on it), read back with one wait.
pub fn mean_occupancies(gpu: &Gpu, grids: &[&GpuHashGrid]) -> Result<Vec<f64>, GpuError> {
    let mut sums = DeviceBuffer::<u64>::zeroed(gpu, "grid occupancy", 2 * grids.len())?;
    for (i, grid) in grids.iter().enumerate() {
        let (start, end) = grid.bucket_bounds();
        let buckets = grid.geometry().buckets;
        let (_, pair) = sums.ptr_mut().split_at(2 * i);
        launch(
            gpu,
            k::PHOTON_OCCUPANCY,
            buckets.min(1 << 20),
            (start.ptr(), end.ptr(), buckets as u32, pair),
        )?;
    }
    let sums = sums.download()?;
    Ok(sums
        .chunks_exact(2)
        .map(|s| {
            if s[1] == 0 {
                0.0
            } else {
                s[0] as f64 / s[1] as f64
            }
        })
        .collect())
}

/// Flags the slots among the first `n` eye paths of one Whitted wave
/// (rays, hits, paths) that end at an eye vertex (a diffuse end), for
/// compaction; [`collect_at`] then writes the flagged slots' vertices.
pub fn collect_flags(
    scene: &DeviceBuffer<FrameParams>,
    rays: &DeviceBuffer<GpuRay>,
    hits: &DeviceBuffer<GpuHit>,
    paths: &DeviceBuffer<GpuPath>,
    n: usize,
    flags: &mut DeviceBuffer<u32>,
) -> Result<(), GpuError> {
    launch(
        scene.gpu(),
        k::PHOTON_COLLECT_FLAGS,
        n,
        (
            scene.ptr(),
            rays.ptr(),
            hits.ptr(),
            paths.ptr(),
            n as u32,
            flags.ptr_mut(),
        ),
    )
}

/// `out[offset + i]` = the eye vertex of the wave's slot `indices[i]`
/// (slots [`collect_flags`] flagged).
pub fn collect_at(
    scene: &DeviceBuffer<FrameParams>,
    wave: (
        &DeviceBuffer<GpuRay>,
        &DeviceBuffer<GpuHit>,
        &DeviceBuffer<GpuPath>,
    ),
    indices: &DeviceBuffer<u32>,
    out: &mut DeviceBuffer<GpuEyeVertex>,
    offset: usize,
) -> Result<(), GpuError> {
    let n = indices.len();
    if offset + n > out.len() {
        return Err(GpuError::Invalid {
            what: "eye vertex append",
            message: format!("{n} vertices at {offset} overflow {}", out.len()),
        });
    }
    let (rays, hits, paths) = wave;
    launch(
        scene.gpu(),
        k::PHOTON_COLLECT_AT,
        n,
        (
            scene.ptr(),
            rays.ptr(),
            hits.ptr(),
            paths.ptr(),
            indices.ptr(),
            n as u32,
            out.ptr_mut(),
            offset as u64,
        ),
    )
}

/// The vertices' indices in Morton order of their positions inside the box
/// `lo .. hi`, so that neighbouring threads estimate at neighbouring points.
pub fn morton_order(
    vertices: &DeviceBuffer<GpuEyeVertex>,
    lo: [f32; 3],
    hi: [f32; 3],
) -> Result<DeviceBuffer<u32>, GpuError> {
    let n = vertices.len();
    morton_sorted(
        vertices.gpu(),
        n,
        (lo, hi),
        |[lx, ly, lz], [ix, iy, iz], keys, order| {
            launch(
                vertices.gpu(),
                k::PHOTON_VERTEX_KEYS,
                n,
                (
                    vertices.ptr(),
                    n as u32,
                    lx,
                    ly,
                    lz,
                    ix,
                    iy,
                    iz,
                    keys,
                    order,
                ),
            )
        },
    )
}

/// Runs a Morton-key kernel over `n` items (`keys_kernel(low corner,
/// inverse extents, keys, values)` launches it with the box) and sorts the
/// item indices by key: neighbouring items come together.
pub(crate) fn morton_sorted(
    gpu: &caustic_gpu::Gpu,
    n: usize,
    (lo, hi): ([f32; 3], [f32; 3]),
    keys_kernel: impl FnOnce(
        [f32; 3],
        [f32; 3],
        DevicePtrMut<'_, u32>,
        DevicePtrMut<'_, u32>,
    ) -> Result<(), GpuError>,
) -> Result<DeviceBuffer<u32>, GpuError> {
    let mut keys = DeviceBuffer::<u32>::uninit(gpu, "Morton keys", n)?;
    let mut order = DeviceBuffer::<u32>::uninit(gpu, "Morton order", n)?;
    let inv = |a: usize| 1.0 / (hi[a] - lo[a]).max(f32::MIN_POSITIVE);
    keys_kernel(
        lo,
        [inv(0), inv(1), inv(2)],
        keys.ptr_mut(),
        order.ptr_mut(),
    )?;
    if n > 1 {
        caustic_gpu::ops::radix_sort::sort_pairs_bits(&mut keys, &mut order, 0..30)?;
    }
    Ok(order)
}

/// Adds the radiance estimates of `maps` at `vertices` (taken in `order`,
/// Morton order: a warp's 32 vertices share their photons as one tile),
/// times each path's throughput, to the framebuffer `scene` names. The
/// tiles run in the order `tiles` gives ([`tile_order`]: costly first).
pub fn estimate(
    scene: &DeviceBuffer<FrameParams>,
    maps: &DeviceBuffer<PhotonMapView>,
    vertices: &DeviceBuffer<GpuEyeVertex>,
    order: &DeviceBuffer<u32>,
    tiles: &DeviceBuffer<u32>,
) -> Result<(), GpuError> {
    let n = order.len();
    if tiles.len() != n.div_ceil(32) {
        return Err(GpuError::LengthMismatch {
            operation: "photon estimates",
            what: "tile order",
            expected: n.div_ceil(32),
            actual: tiles.len(),
        });
    }
    launch_per_element_in(
        scene.gpu(),
        k::PHOTON_ESTIMATE,
        n,
        ESTIMATE_THREADS,
        (
            scene.ptr(),
            maps.ptr(),
            maps.len() as u32,
            vertices.ptr(),
            order.ptr(),
            n as u32,
            tiles.ptr(),
            tiles.len() as u32,
        ),
    )
}

/// The estimates' tiles (tile `t`: the vertices `order[32 t .. 32 t +
/// 32]`) in the order [`estimate`] runs them: by the cost
/// `photon_tile_cost` foresees from the photon counts of the blocks each
/// tile's search will take, costly first, in Morton order among tiles of
/// about one cost. Started last, as their Morton place had them, a few
/// long tiles outlasted the rest of the launch.
pub fn tile_order(
    maps: &DeviceBuffer<PhotonMapView>,
    vertices: &DeviceBuffer<GpuEyeVertex>,
    order: &DeviceBuffer<u32>,
) -> Result<DeviceBuffer<u32>, GpuError> {
    let n = order.len();
    let tiles = n.div_ceil(32);
    let gpu = order.gpu();
    let mut keys = DeviceBuffer::<u32>::uninit(gpu, "estimate tile costs", tiles)?;
    let mut tile_order = DeviceBuffer::<u32>::uninit(gpu, "estimate tile order", tiles)?;
    launch_per_element_in(
        gpu,
        k::PHOTON_TILE_COST,
        tiles * 32,
        ESTIMATE_THREADS,
        (
            maps.ptr(),
            maps.len() as u32,
            vertices.ptr(),
            order.ptr(),
            n as u32,
            tiles as u32,
            keys.ptr_mut(),
            tile_order.ptr_mut(),
        ),
    )?;
    if tiles > 1 {
        // The keys are 8-bit cost levels, costly lowest.
        caustic_gpu::ops::radix_sort::sort_pairs_bits(&mut keys, &mut tile_order, 0..8)?;
    }
    Ok(tile_order)
}
