//! The photon-mapping integrator on a CUDA GPU, the twin of
//! [`super::render`] in its global-map mode (no final gather): every
//! stage of a frame on the device.
//!
//! 1. Photon passes ([`super::trace_cuda`], the CPU's [`PassPlan`]):
//!    photons as a wavefront, stored by stream compaction.
//! 2. Both maps indexed by hash grids ([`GpuHashGrid`], seed 003) with
//!    cells of the maps' largest search radii.
//! 3. The eye pass is the wavefront Whitted renderer
//!    ([`GpuScene::render_with`]): specular chains, emission, direct light
//!    by shadow rays, exactly as the CPU photon renderer's walk; at every
//!    diffuse end of a chain one more kernel adds the radiance estimates of
//!    the caustic and the global map (k nearest photons, the k-th fixing
//!    the disc), with the CPU estimate's rules.
//!
//! The GPU traces the CPU's photons (same streams) and shades with the
//! CPU's random numbers, so its image equals the CPU photon renderer's up
//! to float rounding and the rare photon whose path a rounding flips.

use std::time::Instant;

use caustic_gpu::photon::{self as kernels, GpuPhoton, PhotonMapView};
use caustic_gpu::points::GpuHashGrid;
use caustic_gpu::{DeviceBuffer, GpuError};
use caustic_scene::Camera;

use super::emit::PhotonSources;
use super::render::{PassPlan, PhotonRenderError, PhotonRenderSettings, PhotonRenderStats};
use super::trace_cuda::{self, GpuPhotonMaps};
use crate::whitted_cuda::GpuScene;
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
}

impl GpuPhotonRenderer {
    /// Uploads `scene` (builds its BVH) to the device of `gpu`.
    pub fn new(gpu: &caustic_gpu::Gpu, scene: &RenderScene) -> Result<Self, GpuError> {
        Ok(Self {
            scene: GpuScene::upload(gpu, scene)?,
            sources: PhotonSources::new(scene),
            diagonal: scene.scene_diagonal,
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
        let global = Indexed::build(&maps.global, global_radius)?;
        let caustic = Indexed::build(&maps.caustic, caustic_radius)?;
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
        let (film, eye) = self.scene.render_with(camera, &whitted, &mut |wave| {
            kernels::estimate(
                wave.params,
                &views,
                wave.rays,
                wave.hits,
                wave.paths,
                wave.len,
            )
        })?;
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

/// A photon map with its hash grid.
struct Indexed<'a> {
    photons: &'a DeviceBuffer<GpuPhoton>,
    grid: GpuHashGrid,
}

impl<'a> Indexed<'a> {
    fn build(photons: &'a DeviceBuffer<GpuPhoton>, radius: f32) -> Result<Self, GpuError> {
        let positions = kernels::positions(photons)?;
        Ok(Self {
            photons,
            grid: GpuHashGrid::build(&positions, radius)?,
        })
    }

    fn view(&self, k: usize, radius: f32, cone: bool) -> Result<PhotonMapView, GpuError> {
        // The grid's radius is the build radius up to its cell margin.
        let radius = radius.min(self.grid.geometry().max_radius);
        PhotonMapView::new(&self.grid, self.photons, k as u32, radius, cone)
    }
}
