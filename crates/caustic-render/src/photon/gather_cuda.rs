//! The final gather on the GPU (kernels in `gather.cu`), the twin of
//! [`super::gather`], [`super::precomputed`] and the interpolation of
//! [`super::irradiance_samples`]: irradiance precomputed at photons, gather
//! rays as a wavefront from eye vertices or irradiance samples, and the
//! samples interpolated at every eye vertex.

use caustic_accel::bvh::traverse_cuda::{GpuHit, GpuRay};
use caustic_accel::points::hash_grid_cuda::GpuNeighbours;
use caustic_gpu::ops::{check_same_len, launch_per_element as launch};
use caustic_gpu::{DeviceBuffer, DevicePtrMut, GpuError};

use super::estimate_cuda::morton_sorted;
use super::records_cuda::{GpuEyeVertex, GpuGatherPath, GpuPhoton, PhotonMapView};
use crate::kernels::photon_gather as k;
use crate::scene_cuda::FrameParams;

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
    let order = precompute_order(global, photons, stride, bounds)?;
    let mut out = DeviceBuffer::uninit(global.gpu(), "precomputed irradiance", order.len())?;
    precompute_into(global, stride, &order, 0..order.len(), false, &mut out)?;
    Ok(out)
}

/// The order [`precompute`] takes the photons `j * stride` in: their
/// indices `j` sorted by the Morton codes of their positions.
pub fn precompute_order(
    global: &DeviceBuffer<PhotonMapView>,
    photons: usize,
    stride: usize,
    bounds: ([f32; 3], [f32; 3]),
) -> Result<DeviceBuffer<u32>, GpuError> {
    let gpu = global.gpu();
    let stride = stride.max(1);
    let n = photons.div_ceil(stride);
    morton_sorted(gpu, n, bounds, |[lx, ly, lz], [ix, iy, iz], keys, order| {
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
    })
}

/// The points of [`precompute`] at the positions `range` of `order` alone
/// (a team member's share), in position order: [`place_precomputed`]
/// puts the members' shares, merged in rank order, at their indices.
pub fn precompute_share(
    global: &DeviceBuffer<PhotonMapView>,
    stride: usize,
    order: &DeviceBuffer<u32>,
    range: std::ops::Range<usize>,
) -> Result<DeviceBuffer<GpuPhoton>, GpuError> {
    let mut out = DeviceBuffer::uninit(global.gpu(), "precomputed irradiance share", range.len())?;
    precompute_into(global, stride, order, range, true, &mut out)?;
    Ok(out)
}

/// `out[order[t]] = by_position[t]`: [`precompute`]'s array from its
/// points in position order.
pub fn place_precomputed(
    order: &DeviceBuffer<u32>,
    by_position: &DeviceBuffer<GpuPhoton>,
) -> Result<DeviceBuffer<GpuPhoton>, GpuError> {
    check_same_len(
        "place_precomputed",
        "points",
        order.len(),
        by_position.len(),
    )?;
    let n = order.len();
    let mut out = DeviceBuffer::uninit(order.gpu(), "precomputed irradiance", n)?;
    launch(
        order.gpu(),
        k::PHOTON_PLACE,
        n,
        (order.ptr(), by_position.ptr(), n as u32, out.ptr_mut()),
    )?;
    Ok(out)
}

fn precompute_into(
    global: &DeviceBuffer<PhotonMapView>,
    stride: usize,
    order: &DeviceBuffer<u32>,
    range: std::ops::Range<usize>,
    by_position: bool,
    out: &mut DeviceBuffer<GpuPhoton>,
) -> Result<(), GpuError> {
    if range.end > order.len() {
        return Err(GpuError::LengthMismatch {
            operation: "precompute",
            what: "positions",
            expected: order.len(),
            actual: range.end,
        });
    }
    launch(
        global.gpu(),
        k::PHOTON_PRECOMPUTE,
        range.len(),
        (
            global.ptr(),
            stride.max(1) as u32,
            order.ptr(),
            range.start as u32,
            range.len() as u32,
            u32::from(by_position),
            out.ptr_mut(),
        ),
    )
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

/// The seeding input of eye vertices (see `irradiance_samples_cuda.rs`).
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
