//! Device records and kernel launches of the GPU photon mapper
//! (`photon.cu`): photons as a wavefront (emission, one kernel per
//! bounce, stream compaction of the stored and the surviving photons) and
//! the radiance estimate of hash-grid photon maps at the diffuse ends of
//! eye paths. The passes themselves (which light is which source, the
//! bounce loop, the frame) are `caustic_render::photon::trace_cuda` and
//! `render_cuda`; the CUDA twins of these structs (`photon.cuh`)
//! are checked against them through `render_layout.cuh`.

use bytemuck::{Pod, Zeroable};

use caustic_gpu::{DeviceBuffer, DevicePtrMut};

use crate::kernels::photon_photon as k;
use crate::scene_cuda::{FrameParams, GpuPath};
use caustic_accel::bvh::traverse_cuda::{GpuHit, GpuRay};
use caustic_accel::points::hash_grid_cuda::{GpuHashGrid, GpuNeighbours};
use caustic_gpu::GpuError;
use caustic_gpu::ops::launch_per_element as launch;

/// A stored photon: `caustic_render::photon::Photon` byte for byte
/// (position, power divided by the emitted count, octahedral incoming
/// direction and normal).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct GpuPhoton {
    pub position: [f32; 3],
    pub power: [f32; 3],
    pub incoming: u32,
    pub normal: u32,
}

/// `GpuPhotonSource::kind` values.
pub mod source_kind {
    pub const AREA: u32 = 0;
    pub const POINT: u32 = 1;
    pub const SPOT: u32 = 2;
    pub const DIRECTIONAL: u32 = 3;
}

/// One light as a photon source, with its selection probability.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct GpuPhotonSource {
    /// Position (point, spot) or unit direction (directional).
    pub a: [f32; 3],
    pub kind: u32,
    /// Unit spot axis, or the centre of a directional light's disc.
    pub b: [f32; 3],
    /// Index of the area light.
    pub area: u32,
    /// Emitted power (area, point, directional) or intensity (spot).
    pub power: [f32; 3],
    pub cos_start: f32,
    pub cos_width: f32,
    /// Radius of a directional light's disc.
    pub radius: f32,
    pub pick: f32,
    /// Running sum of `pick`, ending at 1.
    pub cdf: f32,
}

/// `GpuPhotonPath::kind` values: the bounces since the light.
pub mod path_kind {
    pub const LIGHT: u32 = 0;
    pub const SPECULAR: u32 = 1;
    pub const DIFFUSE: u32 = 2;
}

/// A photon in flight: its PCG32 state, power and path kind.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct GpuPhotonPath {
    pub state: u64,
    pub inc: u64,
    pub power: [f32; 3],
    pub kind: u32,
}

/// `PhotonParams::global_rule` values (`caustic_render`'s `GlobalRule`).
pub mod global_rule {
    pub const AFTER_FIRST_BOUNCE: u32 = 0;
    pub const INDIRECT_ONLY: u32 = 1;
    pub const ALL: u32 = 2;
}

/// One photon pass.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct PhotonParams {
    /// Device address of `source_count` [`GpuPhotonSource`]s.
    pub sources: u64,
    /// Index of the first photon of the emitted wave.
    pub first_photon: u64,
    pub seed: u64,
    pub source_count: u32,
    pub max_bounces: u32,
    /// `1 / photons emitted`.
    pub inv_photons: f32,
    pub global_rule: u32,
    /// 1: survival by mean albedo, 0: by max albedo.
    pub mean_roulette: u32,
    /// 1: caustic photons only, stopping at the first diffuse hit.
    pub caustic_only: u32,
}

/// One hash grid as kernels read it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct GridView {
    pub start: u64,
    pub end: u64,
    pub sorted: u64,
    pub origin: [f32; 3],
    pub inv_cell: f32,
    pub dims: [u32; 3],
    pub table_bits: u32,
}

impl GridView {
    pub fn new(grid: &GpuHashGrid) -> Self {
        let g = grid.geometry();
        let (start, end, sorted) = grid.device_arrays();
        Self {
            start,
            end,
            sorted,
            origin: g.origin,
            inv_cell: 1.0 / g.cell,
            dims: g.dims,
            table_bits: g.table_bits,
        }
    }
}

/// A photon map as the estimate kernel reads it: the photons in two hash
/// grids over their positions, and the estimate's settings. The `coarse`
/// grid has cells of at least `max_radius` and answers exactly from the 27
/// cells around a query; the `fine` one has cells about the k-th
/// neighbour's distance where the map is dense, and is searched in growing
/// shells of cells until the k nearest are certain (exact for any radius).
/// A query takes the coarse grid when its 27 cells hold at most
/// `coarse_limit` photons, else the fine one: both give the same answer,
/// at the cost of a few hundred candidates instead of thousands. A limit
/// of 0 skips counting and always tries the fine cells first (lookups of
/// a few points in an evenly dense map); `u32::MAX` means coarse only.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct PhotonMapView {
    pub coarse: GridView,
    pub fine: GridView,
    pub photons: u64,
    /// Photons per estimate (the k-th sets the radius), 2..=128.
    pub k: u32,
    pub max_radius: f32,
    /// 1: cone filter.
    pub cone: u32,
    /// Photons in the map; 0 estimates nothing.
    pub count: u32,
    pub coarse_limit: u32,
    pub pad: u32,
}

impl PhotonMapView {
    /// The view of `photons` indexed by `coarse` (cells of at least
    /// `max_radius`) and `fine` (any cell), both built over their positions.
    pub fn new(
        coarse: &GpuHashGrid,
        fine: &GpuHashGrid,
        photons: &DeviceBuffer<GpuPhoton>,
        k: u32,
        max_radius: f32,
        cone: bool,
    ) -> Result<Self, GpuError> {
        if !(max_radius.is_finite()
            && max_radius > 0.0
            && max_radius <= coarse.geometry().max_radius)
        {
            return Err(GpuError::Invalid {
                what: "photon estimate radius",
                message: format!(
                    "{max_radius} is not in (0, {}], the coarse grid's radius",
                    coarse.geometry().max_radius
                ),
            });
        }
        if !(2..=caustic_accel::points::hash_grid_cuda::MAX_K as u32).contains(&k) {
            return Err(GpuError::Invalid {
                what: "photon estimate k",
                message: format!(
                    "k = {k}; the estimate takes 2..={}",
                    caustic_accel::points::hash_grid_cuda::MAX_K
                ),
            });
        }
        Ok(Self {
            coarse: GridView::new(coarse),
            fine: GridView::new(fine),
            photons: photons.device_ptr(),
            k,
            max_radius,
            cone: u32::from(cone),
            count: photons.len() as u32,
            // A shell of 27 fine cells holds about 9 · 1.44 / π · k ≈ 4k.
            coarse_limit: 8 * k,
            pad: 0,
        })
    }
}

/// The search of [`estimate`] on its own: the `k` nearest photons of the
/// map `view` (one element) within its radius for every query, as the
/// point-search kernels report them.
pub fn map_knn(
    view: &DeviceBuffer<PhotonMapView>,
    queries: &DeviceBuffer<[f32; 3]>,
) -> Result<GpuNeighbours, GpuError> {
    let m = queries.len();
    let per_query = view.download()?.first().map_or(0, |v| v.k as usize);
    let mut out = GpuNeighbours::new(view.gpu(), m, per_query)?;
    launch(
        view.gpu(),
        k::PHOTON_MAP_KNN,
        m,
        (
            view.ptr(),
            queries.ptr().cast(),
            m as u32,
            out.index.ptr_mut(),
            out.dist2.ptr_mut(),
            out.count.ptr_mut(),
        ),
    )?;
    Ok(out)
}

/// The photon-weighted mean number of points per non-empty cell of `grid`
/// (`Σ n² / Σ n` over its buckets); 0 for an empty grid.
pub fn mean_occupancy(grid: &GpuHashGrid) -> Result<f64, GpuError> {
    let (start, end) = grid.bucket_bounds();
    let buckets = grid.geometry().buckets;
    let mut sums = DeviceBuffer::<u64>::zeroed(grid.gpu(), "grid occupancy", 2)?;
    launch(
        grid.gpu(),
        k::PHOTON_OCCUPANCY,
        buckets.min(1 << 20),
        (start.ptr(), end.ptr(), buckets as u32, sums.ptr_mut()),
    )?;
    let sums = sums.download()?;
    Ok(if sums[1] == 0 {
        0.0
    } else {
        sums[0] as f64 / sums[1] as f64
    })
}

/// Emits photons `first_photon .. first_photon + rays.len()`: their first
/// rays and states, `live[i] = 0` where a photon carries no power.
pub fn emit(
    scene: &DeviceBuffer<FrameParams>,
    params: &DeviceBuffer<PhotonParams>,
    rays: &mut DeviceBuffer<GpuRay>,
    paths: &mut DeviceBuffer<GpuPhotonPath>,
    live: &mut DeviceBuffer<u32>,
) -> Result<(), GpuError> {
    let n = rays.len();
    launch(
        scene.gpu(),
        k::PHOTON_EMIT,
        n,
        (
            scene.ptr(),
            params.ptr(),
            n as u32,
            rays.ptr_mut(),
            paths.ptr_mut(),
            live.ptr_mut(),
        ),
    )
}

/// Where [`bounce`] writes, one slot per photon of the wave: its next ray
/// and state (`live`), and the photon it stored with its map flags.
pub struct BounceTargets<'a> {
    pub rays: &'a mut DeviceBuffer<GpuRay>,
    pub paths: &'a mut DeviceBuffer<GpuPhotonPath>,
    pub live: &'a mut DeviceBuffer<u32>,
    pub stored: &'a mut DeviceBuffer<GpuPhoton>,
    pub global: &'a mut DeviceBuffer<u32>,
    pub caustic: &'a mut DeviceBuffer<u32>,
}

/// One bounce of the wave `rays`/`paths` with their `hits`.
pub fn bounce(
    scene: &DeviceBuffer<FrameParams>,
    params: &DeviceBuffer<PhotonParams>,
    rays: &DeviceBuffer<GpuRay>,
    hits: &DeviceBuffer<GpuHit>,
    paths: &DeviceBuffer<GpuPhotonPath>,
    out: BounceTargets<'_>,
) -> Result<(), GpuError> {
    let n = rays.len();
    launch(
        scene.gpu(),
        k::PHOTON_BOUNCE,
        n,
        (
            scene.ptr(),
            params.ptr(),
            rays.ptr(),
            hits.ptr(),
            paths.ptr(),
            n as u32,
            out.rays.ptr_mut(),
            out.paths.ptr_mut(),
            out.live.ptr_mut(),
            out.stored.ptr_mut(),
            out.global.ptr_mut(),
            out.caustic.ptr_mut(),
        ),
    )
}

/// `map[offset + i] = stored[indices[i]]`.
pub fn gather_stored(
    stored: &DeviceBuffer<GpuPhoton>,
    indices: &DeviceBuffer<u32>,
    map: &mut DeviceBuffer<GpuPhoton>,
    offset: usize,
) -> Result<(), GpuError> {
    let n = indices.len();
    if offset + n > map.len() {
        return Err(GpuError::Invalid {
            what: "photon map append",
            message: format!("{n} photons at {offset} overflow a map of {}", map.len()),
        });
    }
    launch(
        stored.gpu(),
        k::PHOTON_GATHER_STORED,
        n,
        (
            stored.ptr(),
            indices.ptr(),
            n as u32,
            map.ptr_mut(),
            offset as u64,
        ),
    )
}

/// The photons' positions, the input of a hash grid.
pub fn positions(photons: &DeviceBuffer<GpuPhoton>) -> Result<DeviceBuffer<[f32; 3]>, GpuError> {
    let n = photons.len();
    let mut out = DeviceBuffer::<[f32; 3]>::uninit(photons.gpu(), "photon positions", n)?;
    launch(
        photons.gpu(),
        k::PHOTON_POSITIONS,
        n,
        (photons.ptr(), n as u32, out.ptr_mut().cast()),
    )?;
    Ok(out)
}

/// A diffuse end of an eye path, where the radiance estimates are added.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct GpuEyeVertex {
    pub point: [f32; 3],
    pub pixel: u32,
    /// The path's throughput.
    pub weight: [f32; 3],
    pub material: u32,
    /// Shading normal towards the viewer.
    pub n: [f32; 3],
    pub pad0: u32,
    /// Geometric normal towards the viewer.
    pub ng: [f32; 3],
    pub pad1: u32,
    /// Unit direction towards the viewer.
    pub wo: [f32; 3],
    pub pad2: u32,
    pub albedo: [f32; 3],
    pub pad3: u32,
    /// The path's random key (`draw`), which keys its gather rays.
    pub key: u64,
    pub pad4: u64,
}

/// One final-gather ray in flight.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct GpuGatherPath {
    pub key: u64,
    pub throughput: [f32; 3],
    /// Result slot: vertex (in the chunk) × rays per vertex + ray.
    pub slot: u32,
    pub depth: u32,
    pub pad: u32,
}

/// The diffuse ends among the first `n` eye paths of one Whitted wave
/// (rays, hits, paths): their vertices and compaction flags, slot for slot.
pub fn collect(
    scene: &DeviceBuffer<FrameParams>,
    rays: &DeviceBuffer<GpuRay>,
    hits: &DeviceBuffer<GpuHit>,
    paths: &DeviceBuffer<GpuPath>,
    n: usize,
    vertices: &mut DeviceBuffer<GpuEyeVertex>,
    flags: &mut DeviceBuffer<u32>,
) -> Result<(), GpuError> {
    launch(
        scene.gpu(),
        k::PHOTON_COLLECT,
        n,
        (
            scene.ptr(),
            rays.ptr(),
            hits.ptr(),
            paths.ptr(),
            n as u32,
            vertices.ptr_mut(),
            flags.ptr_mut(),
        ),
    )
}

/// `out[offset + i] = vertices[indices[i]]`.
pub fn gather_vertices(
    vertices: &DeviceBuffer<GpuEyeVertex>,
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
    launch(
        vertices.gpu(),
        k::PHOTON_GATHER_VERTICES,
        n,
        (
            vertices.ptr(),
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
fn morton_sorted(
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

/// Adds the radiance estimates of `maps` at `vertices` (taken in `order`),
/// times each path's throughput, to the framebuffer `scene` names.
pub fn estimate(
    scene: &DeviceBuffer<FrameParams>,
    maps: &DeviceBuffer<PhotonMapView>,
    vertices: &DeviceBuffer<GpuEyeVertex>,
    order: &DeviceBuffer<u32>,
) -> Result<(), GpuError> {
    let n = order.len();
    launch(
        scene.gpu(),
        k::PHOTON_ESTIMATE,
        n,
        (
            scene.ptr(),
            maps.ptr(),
            maps.len() as u32,
            vertices.ptr(),
            order.ptr(),
            n as u32,
        ),
    )
}

/// Irradiance precomputed at every `stride`-th photon of the map `global`
/// (one view), Christensen's speed-up of the final gather: the records keep
/// the photons' positions and normals, their power fields hold the
/// irradiance. The photons are estimated in Morton order of their
/// positions in the box `lo .. hi` (the map's photons lie in tracing
/// order, which scatters neighbouring threads over the scene).
pub fn precompute(
    global: &DeviceBuffer<PhotonMapView>,
    photons: usize,
    stride: usize,
    bounds: ([f32; 3], [f32; 3]),
) -> Result<DeviceBuffer<GpuPhoton>, GpuError> {
    let gpu = global.gpu();
    let stride = stride.max(1);
    let n = photons.div_ceil(stride);
    let order = morton_sorted(gpu, n, bounds, |[lx, ly, lz], [ix, iy, iz], keys, order| {
        launch(
            gpu,
            k::PHOTON_PRECOMPUTE_KEYS,
            n,
            (
                global.ptr(),
                stride as u32,
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
    })?;
    let mut out = DeviceBuffer::uninit(gpu, "precomputed irradiance", n)?;
    launch(
        gpu,
        k::PHOTON_PRECOMPUTE,
        n,
        (
            global.ptr(),
            stride as u32,
            order.ptr(),
            n as u32,
            out.ptr_mut(),
        ),
    )?;
    Ok(out)
}

/// Key salt of the gathers at shading points no sample covers (render.rs's
/// `POINT_GATHER`).
pub const POINT_GATHER: u64 = 0x706f_696e;
/// Key salt of the gathers at irradiance samples (render.rs's
/// `SAMPLE_GATHER`).
pub const SAMPLE_GATHER: u64 = 0x7361_6d70;

/// Which eye vertices a final-gather chunk covers: `order[first ..
/// first + count]`, `rays_per` gather rays each keyed with `salt`
/// ([`POINT_GATHER`] or [`SAMPLE_GATHER`]).
#[derive(Clone, Copy, Debug)]
pub struct GatherChunk<'a> {
    pub vertices: &'a DeviceBuffer<GpuEyeVertex>,
    pub order: &'a DeviceBuffer<u32>,
    pub first: usize,
    pub count: usize,
    pub rays_per: u32,
    pub salt: u64,
}

/// The chunk's gather rays, `rays_per` consecutive slots per vertex.
pub fn gather_emit(
    scene: &DeviceBuffer<FrameParams>,
    chunk: GatherChunk<'_>,
    rays: &mut DeviceBuffer<GpuRay>,
    paths: &mut DeviceBuffer<GpuGatherPath>,
) -> Result<(), GpuError> {
    let n = chunk.count * chunk.rays_per as usize;
    launch(
        scene.gpu(),
        k::PHOTON_GATHER_EMIT,
        n,
        (
            scene.ptr(),
            chunk.vertices.ptr(),
            chunk.order.ptr(),
            chunk.first as u32,
            chunk.count as u32,
            chunk.rays_per,
            chunk.salt,
            rays.ptr_mut(),
            paths.ptr_mut(),
        ),
    )
}

/// Where [`gather_step`] writes: results by slot (3 floats each), the
/// first rays' hit distances by slot when wanted (irradiance samples), and
/// each ray's continuation with its live flag.
pub struct GatherTargets<'a> {
    pub results: &'a mut DeviceBuffer<f32>,
    pub distances: Option<&'a mut DeviceBuffer<f32>>,
    pub rays: &'a mut DeviceBuffer<GpuRay>,
    pub paths: &'a mut DeviceBuffer<GpuGatherPath>,
    pub live: &'a mut DeviceBuffer<u32>,
}

/// One wave of gather rays with their hits, against the precomputed
/// irradiance map `irradiance` (one view).
pub fn gather_step(
    scene: &DeviceBuffer<FrameParams>,
    irradiance: &DeviceBuffer<PhotonMapView>,
    rays: &DeviceBuffer<GpuRay>,
    hits: &DeviceBuffer<GpuHit>,
    paths: &DeviceBuffer<GpuGatherPath>,
    out: GatherTargets<'_>,
) -> Result<(), GpuError> {
    let n = rays.len();
    launch(
        scene.gpu(),
        k::PHOTON_GATHER_STEP,
        n,
        (
            scene.ptr(),
            irradiance.ptr(),
            rays.ptr(),
            hits.ptr(),
            paths.ptr(),
            n as u32,
            out.results.ptr_mut(),
            out.distances.map_or(DevicePtrMut::null(), |d| d.ptr_mut()),
            out.rays.ptr_mut(),
            out.paths.ptr_mut(),
            out.live.ptr_mut(),
        ),
    )
}

/// The chunk's indirect light from its ray results, into the framebuffer.
pub fn gather_finish(
    scene: &DeviceBuffer<FrameParams>,
    chunk: GatherChunk<'_>,
    results: &DeviceBuffer<f32>,
) -> Result<(), GpuError> {
    launch(
        scene.gpu(),
        k::PHOTON_GATHER_FINISH,
        chunk.count,
        (
            scene.ptr(),
            chunk.vertices.ptr(),
            chunk.order.ptr(),
            chunk.first as u32,
            chunk.count as u32,
            chunk.rays_per,
            results.ptr(),
        ),
    )
}

/// The seeding input of eye vertices (see [`crate::irradiance`]).
pub struct VertexSeeds {
    pub positions: DeviceBuffer<[f32; 3]>,
    /// Shading normals towards the viewer.
    pub normals: DeviceBuffer<[f32; 3]>,
    /// Pixels as `x | y << 16`.
    pub pixels: DeviceBuffer<u32>,
}

impl VertexSeeds {
    pub fn points(&self) -> crate::photon::irradiance_samples_cuda::SeedPoints<'_> {
        crate::photon::irradiance_samples_cuda::SeedPoints {
            positions: &self.positions,
            normals: &self.normals,
            pixels: &self.pixels,
        }
    }
}

/// The seeding input of every vertex.
pub fn seed_points(
    scene: &DeviceBuffer<FrameParams>,
    vertices: &DeviceBuffer<GpuEyeVertex>,
) -> Result<VertexSeeds, GpuError> {
    let gpu = vertices.gpu();
    let n = vertices.len();
    let mut seeds = VertexSeeds {
        positions: DeviceBuffer::uninit(gpu, "seed positions", n)?,
        normals: DeviceBuffer::uninit(gpu, "seed normals", n)?,
        pixels: DeviceBuffer::uninit(gpu, "seed pixels", n)?,
    };
    launch(
        gpu,
        k::PHOTON_SEED_POINTS,
        n,
        (
            scene.ptr(),
            vertices.ptr(),
            n as u32,
            seeds.positions.ptr_mut().cast(),
            seeds.normals.ptr_mut().cast(),
            seeds.pixels.ptr_mut(),
        ),
    )?;
    Ok(seeds)
}

/// Positions of `vertices[order[j]]`, in that order.
pub fn vertex_positions(
    vertices: &DeviceBuffer<GpuEyeVertex>,
    order: &DeviceBuffer<u32>,
) -> Result<DeviceBuffer<[f32; 3]>, GpuError> {
    let n = order.len();
    let mut out = DeviceBuffer::<[f32; 3]>::uninit(vertices.gpu(), "vertex positions", n)?;
    launch(
        vertices.gpu(),
        k::PHOTON_VERTEX_POSITIONS,
        n,
        (vertices.ptr(), order.ptr(), n as u32, out.ptr_mut().cast()),
    )?;
    Ok(out)
}

/// Irradiance and harmonic distance of the chunk's samples from their ray
/// results and first-hit distances, into `irradiance[first ..]` (rgb, H).
pub fn sample_finish(
    chunk: GatherChunk<'_>,
    results: &DeviceBuffer<f32>,
    distances: &DeviceBuffer<f32>,
    irradiance: &mut DeviceBuffer<[f32; 4]>,
) -> Result<(), GpuError> {
    launch(
        results.gpu(),
        k::PHOTON_SAMPLE_FINISH,
        chunk.count,
        (
            chunk.first as u32,
            chunk.count as u32,
            chunk.rays_per,
            results.ptr(),
            distances.ptr(),
            irradiance.ptr_mut(),
        ),
    )
}

/// The gathered irradiance samples: positions (for a point structure),
/// frames (normal, validity radius) and irradiance (rgb, harmonic mean
/// distance of the gather rays).
pub struct GpuIrradianceSamples {
    pub positions: DeviceBuffer<[f32; 3]>,
    pub frames: DeviceBuffer<[f32; 4]>,
    pub irradiance: DeviceBuffer<[f32; 4]>,
    /// Largest finite validity radius (the interpolation's search radius).
    pub largest_radius: f32,
}

/// Completes the samples at `vertices[chosen[j]]` from their gathered
/// `irradiance`: positions, normals, and validity radii `min(ward · H, 2 ·
/// spacing)`, the spacing being the distance to the farthest of each
/// sample's `near` neighbours among the samples (itself included).
pub fn sample_frames(
    vertices: &DeviceBuffer<GpuEyeVertex>,
    chosen: &DeviceBuffer<u32>,
    irradiance: DeviceBuffer<[f32; 4]>,
    near: &GpuNeighbours,
    ward: f32,
    positions: DeviceBuffer<[f32; 3]>,
) -> Result<GpuIrradianceSamples, GpuError> {
    let gpu = vertices.gpu();
    let m = chosen.len();
    let mut frames = DeviceBuffer::uninit(gpu, "irradiance sample frames", m)?;
    let mut finite = DeviceBuffer::<f32>::uninit(gpu, "irradiance sample radii", m)?;
    launch(
        gpu,
        k::PHOTON_SAMPLE_FRAMES,
        m,
        (
            vertices.ptr(),
            chosen.ptr(),
            m as u32,
            irradiance.ptr(),
            near.dist2.ptr(),
            near.count.ptr(),
            near.k as u32,
            ward,
            frames.ptr_mut(),
            finite.ptr_mut(),
        ),
    )?;
    let largest_radius = if m > 0 {
        caustic_gpu::ops::reduce::max_f32(&finite)?
    } else {
        0.0
    };
    Ok(GpuIrradianceSamples {
        positions,
        frames,
        irradiance,
        largest_radius,
    })
}

/// Interpolates the samples at `vertices[order[j]]` from each one's
/// nearest samples `near` (kNN over the samples' positions, queries in
/// `order`): covered vertices get their indirect light in the framebuffer;
/// returns the flags of the vertices no sample covers.
pub fn interpolate(
    scene: &DeviceBuffer<FrameParams>,
    vertices: &DeviceBuffer<GpuEyeVertex>,
    order: &DeviceBuffer<u32>,
    near: &GpuNeighbours,
    samples: &GpuIrradianceSamples,
    normal_cos: f32,
) -> Result<DeviceBuffer<u32>, GpuError> {
    let n = order.len();
    let mut uncovered = DeviceBuffer::uninit(vertices.gpu(), "uncovered vertex flags", n)?;
    launch(
        scene.gpu(),
        k::PHOTON_INTERPOLATE,
        n,
        (
            scene.ptr(),
            vertices.ptr(),
            order.ptr(),
            n as u32,
            near.index.ptr(),
            near.dist2.ptr(),
            near.count.ptr(),
            near.k as u32,
            samples.frames.ptr(),
            samples.irradiance.ptr(),
            normal_cos,
            uncovered.ptr_mut(),
        ),
    )?;
    Ok(uncovered)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_have_the_kernel_sizes() {
        assert_eq!(size_of::<GpuPhoton>(), 32);
        assert_eq!(size_of::<GpuPhotonSource>(), 64);
        assert_eq!(size_of::<GpuPhotonPath>(), 32);
        assert_eq!(size_of::<PhotonParams>(), 48);
        assert_eq!(size_of::<GridView>(), 56);
        assert_eq!(size_of::<GpuEyeVertex>(), 112);
        assert_eq!(size_of::<GpuGatherPath>(), 32);
        assert_eq!(size_of::<PhotonMapView>(), 144);
    }
}
