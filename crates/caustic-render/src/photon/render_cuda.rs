//! The photon-mapping integrator on a CUDA GPU, the twin of
//! [`super::render`] in its global-map mode (no final gather): every
//! stage of a frame on the device.
//!
//! 1. Photon passes ([`super::trace_cuda`], the CPU's [`PassPlan`]):
//!    photons as a wavefront, stored by stream compaction.
//! 2. Both maps indexed by hash grids ([`GpuHashGrid`], seed 003): one
//!    with cells of the maximum search radius (Fleisz's 27-cell query) for
//!    sparse surroundings, one with cells about the k-th neighbour's
//!    distance in the map's dense parts, searched in growing shells of
//!    cells until the k nearest are certain ([`PhotonMapView`]). Both give
//!    the exact k nearest within the maximum radius.
//! 3. The eye pass is the wavefront Whitted renderer
//!    ([`GpuScene::render_with`]): specular chains, emission, direct light
//!    by shadow rays, exactly as the CPU photon renderer's walk; every
//!    wave's diffuse ends of chains are collected (compaction) as eye
//!    vertices, and after the last wave one kernel adds the radiance
//!    estimates of the caustic and the global map at all of them, in Morton
//!    order (k nearest photons, the k-th fixing the disc, with the CPU
//!    estimate's rules).
//!
//! The GPU traces the CPU's photons (same streams) and shades with the
//! CPU's random numbers, so its image equals the CPU photon renderer's up
//! to float rounding and the rare photon whose path a rounding flips.

use std::time::Instant;

use caustic_gpu::ops::compact::select_indices;
use caustic_gpu::photon::{self as kernels, GpuEyeVertex, GpuPhoton, PhotonMapView};
use caustic_gpu::points::GpuHashGrid;
use caustic_gpu::whitted::WhittedParams;
use caustic_gpu::{DeviceBuffer, GpuError};
use caustic_scene::Camera;

use super::emit::PhotonSources;
use super::render::{PassPlan, PhotonRenderError, PhotonRenderSettings, PhotonRenderStats};
use super::trace_cuda::{self, GpuPhotonMaps};
use crate::whitted_cuda::{GpuScene, ShadedWave, WaveSteps};
use crate::{Film, FresnelMode, RenderScene, WhittedSettings};

/// A GPU photon-render error: a setting the GPU path does not support, or
/// a device failure.
#[derive(Debug, thiserror::Error)]
pub enum GpuPhotonError {
    #[error(transparent)]
    Settings(#[from] PhotonRenderError),
    #[error(transparent)]
    Gpu(#[from] GpuError),
}

/// A scene uploaded for photon-mapped frames.
pub struct GpuPhotonRenderer {
    scene: GpuScene,
    sources: PhotonSources,
    diagonal: f32,
    /// The scene's bounds (lo, hi), for the Morton order of eye vertices.
    bounds: ([f32; 3], [f32; 3]),
}

impl GpuPhotonRenderer {
    /// Uploads `scene` (builds its BVH) to the device of `gpu`.
    pub fn new(gpu: &caustic_gpu::Gpu, scene: &RenderScene) -> Result<Self, GpuError> {
        Ok(Self {
            scene: GpuScene::upload(gpu, scene)?,
            sources: PhotonSources::new(scene),
            diagonal: scene.scene_diagonal,
            bounds: bounds(scene),
        })
    }

    /// One frame from scratch: photon passes, map builds, the eye pass.
    pub fn render(
        &self,
        camera: &Camera,
        settings: &PhotonRenderSettings,
    ) -> Result<(Film, PhotonRenderStats), GpuPhotonError> {
        check(settings)?;
        let start = Instant::now();
        let mut stats = PhotonRenderStats::default();
        let maps = self.trace(settings, &mut stats)?;
        let build_start = Instant::now();
        let global_radius = settings.max_radius * self.diagonal;
        let caustic_radius = settings.caustic_max_radius * self.diagonal;
        let global = IndexedPhotons::build(&maps.global, global_radius, settings.k)?;
        let caustic = IndexedPhotons::build(&maps.caustic, caustic_radius, settings.caustic_k)?;
        let views = [
            global.view(settings.k, global_radius, false)?,
            caustic.view(settings.caustic_k, caustic_radius, settings.cone_filter)?,
        ];
        let views = DeviceBuffer::from_slice(self.scene.gpu(), "photon map views", &views)?;
        self.scene.gpu().synchronize()?;
        stats.build_ms = build_start.elapsed().as_secs_f64() * 1e3;
        let render_start = Instant::now();
        let whitted = WhittedSettings {
            width: settings.width,
            height: settings.height,
            spp: settings.spp,
            max_depth: settings.max_depth,
            light_samples: settings.light_samples,
            fresnel: FresnelMode::Exact,
            seed: settings.seed,
        };
        let mut steps = EstimateSteps {
            views: &views,
            runs: Vec::new(),
            bounds: self.bounds,
        };
        let (film, eye) = self.scene.render_with(camera, &whitted, &mut steps)?;
        stats.render_ms = render_start.elapsed().as_secs_f64() * 1e3;
        stats.rays += eye.rays;
        stats.seconds = start.elapsed().as_secs_f64();
        Ok((film, stats))
    }

    /// The photon passes of the plan, on the device.
    fn trace(
        &self,
        settings: &PhotonRenderSettings,
        stats: &mut PhotonRenderStats,
    ) -> Result<GpuPhotonMaps, GpuError> {
        let plan = PassPlan::new(settings);
        let start = Instant::now();
        let mut maps = trace_cuda::trace_photons(&self.scene, &self.sources, &plan.global)?;
        stats.rays += maps.stats.rays;
        stats.photons_traced = maps.emitted;
        if let Some(pass) = &plan.caustic {
            let caustic = trace_cuda::trace_caustic_photons(&self.scene, &self.sources, pass)?;
            stats.rays += caustic.stats.rays;
            stats.photons_traced += caustic.emitted;
            maps.caustic = caustic.caustic;
        }
        stats.photon_ms = start.elapsed().as_secs_f64() * 1e3;
        stats.global_stored = maps.global.len();
        stats.caustic_stored = maps.caustic.len();
        Ok(maps)
    }
}

/// The eye pass's extra steps: every wave's diffuse ends collected as eye
/// vertices; after the last wave, all of them sorted into Morton order and
/// the radiance estimates added in one launch. One launch over spatially
/// sorted points keeps neighbouring threads on neighbouring photons and
/// spreads the rare costly query over the whole machine, where a launch per
/// wave waited on its slowest queries once per bounce.
struct EstimateSteps<'a> {
    views: &'a DeviceBuffer<PhotonMapView>,
    /// Compacted eye vertices, one run per wave.
    runs: Vec<DeviceBuffer<GpuEyeVertex>>,
    bounds: ([f32; 3], [f32; 3]),
}

impl WaveSteps for EstimateSteps<'_> {
    fn wave(&mut self, wave: &ShadedWave) -> Result<(), GpuError> {
        let gpu = wave.params.gpu();
        let mut vertices = DeviceBuffer::uninit(gpu, "eye vertices", wave.len)?;
        let mut flags = DeviceBuffer::uninit(gpu, "eye vertex flags", wave.len)?;
        kernels::collect(
            wave.params,
            wave.rays,
            wave.hits,
            wave.paths,
            wave.len,
            &mut vertices,
            &mut flags,
        )?;
        let indices = select_indices(&flags)?;
        if !indices.is_empty() {
            let mut run = DeviceBuffer::uninit(gpu, "eye vertex run", indices.len())?;
            kernels::gather_vertices(&vertices, &indices, &mut run, 0)?;
            self.runs.push(run);
        }
        Ok(())
    }

    fn finish(&mut self, params: &DeviceBuffer<WhittedParams>) -> Result<(), GpuError> {
        let gpu = params.gpu();
        let total = self.runs.iter().map(DeviceBuffer::len).sum();
        let mut vertices = DeviceBuffer::uninit(gpu, "eye vertices", total)?;
        let mut offset = 0;
        for run in &self.runs {
            vertices.copy_from_at(run, offset)?;
            offset += run.len();
        }
        self.runs.clear();
        let order = kernels::morton_order(&vertices, self.bounds.0, self.bounds.1)?;
        kernels::estimate(params, self.views, &vertices, &order)
    }
}

/// Bounds of the scene's triangles.
fn bounds(scene: &RenderScene) -> ([f32; 3], [f32; 3]) {
    let b = scene
        .triangles
        .iter()
        .filter(|t| t.is_finite())
        .fold(caustic_geom::Aabb::EMPTY, |b, t| b.union(t.bounds()));
    (b.min.to_array(), b.max.to_array())
}

/// Renders one frame of `scene` on `gpu` (upload included in the time).
pub fn render(
    gpu: &caustic_gpu::Gpu,
    scene: &RenderScene,
    camera: &Camera,
    settings: &PhotonRenderSettings,
) -> Result<(Film, PhotonRenderStats), GpuPhotonError> {
    check(settings)?;
    let start = Instant::now();
    let (film, mut stats) = GpuPhotonRenderer::new(gpu, scene)?.render(camera, settings)?;
    stats.seconds = start.elapsed().as_secs_f64();
    Ok((film, stats))
}

/// The settings the GPU path supports: the CPU's checks, plus no final
/// gather (yet) and hash-grid maps.
fn check(settings: &PhotonRenderSettings) -> Result<(), PhotonRenderError> {
    settings.validate()?;
    let fail = |m: &str| Err(PhotonRenderError::Invalid(m.to_owned()));
    if settings.gather_rays > 0 {
        return fail(
            "the GPU photon renderer reads the global map directly: set the gather rays to 0 (--no-final-gather)",
        );
    }
    if settings.points != "hashgrid" {
        return fail(
            "the GPU photon renderer indexes its maps with the hash grid: use --points hashgrid",
        );
    }
    let max_k = caustic_gpu::points::MAX_K;
    if settings.k > max_k || settings.caustic_k > max_k {
        return fail(&format!(
            "the GPU estimate takes at most k = {max_k} photons"
        ));
    }
    Ok(())
}

/// A photon map on the device with its two hash grids (see
/// [`PhotonMapView`]).
pub struct IndexedPhotons<'a> {
    photons: &'a DeviceBuffer<GpuPhoton>,
    coarse: GpuHashGrid,
    /// `None`: the coarse cells are already about the k-th distance.
    fine: Option<GpuHashGrid>,
}

impl<'a> IndexedPhotons<'a> {
    /// Grids for kNN queries of `k` photons within `max_radius`. The fine
    /// cell is the k-th neighbour's distance, times 1.2, at the density the
    /// photon-weighted mean occupancy of the coarse cells gives: a coarse
    /// cell of edge `c` cut by a surface holds about `σ c²` photons, and
    /// `π r² σ = k` at the k-th neighbour. So the dense parts of the map,
    /// where most photons and most costly queries are, get cells that end
    /// most searches after one shell of 27 cells.
    pub fn build(
        photons: &'a DeviceBuffer<GpuPhoton>,
        max_radius: f32,
        k: usize,
    ) -> Result<Self, GpuError> {
        let positions = kernels::positions(photons)?;
        let coarse = GpuHashGrid::build(&positions, max_radius)?;
        let occupancy = kernels::mean_occupancy(&coarse)?;
        let cell = coarse.geometry().cell as f64;
        let density = occupancy / (cell * cell);
        let kth = (k as f64 / (std::f64::consts::PI * density.max(1e-30))).sqrt();
        let fine_cell = (1.2 * kth) as f32;
        let fine = if fine_cell < 0.7 * max_radius {
            let fine_cell = fine_cell.max(max_radius / 64.0);
            Some(GpuHashGrid::build(&positions, fine_cell)?)
        } else {
            None
        };
        Ok(Self {
            photons,
            coarse,
            fine,
        })
    }

    /// What the estimate kernel reads: `k` photons within `radius` (at most
    /// the build's radius), cone filter or not.
    pub fn view(&self, k: usize, radius: f32, cone: bool) -> Result<PhotonMapView, GpuError> {
        let fine = self.fine.as_ref().unwrap_or(&self.coarse);
        let mut view =
            PhotonMapView::new(&self.coarse, fine, self.photons, k as u32, radius, cone)?;
        if self.fine.is_none() {
            view.coarse_limit = u32::MAX;
        }
        Ok(view)
    }
}
