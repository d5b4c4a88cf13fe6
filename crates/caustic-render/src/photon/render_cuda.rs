//! The photon-mapping integrator on a CUDA GPU, the twin of
//! `super::render` (global map read directly, or the final gather at
//! irradiance samples or at every shading point): every stage of a frame
//! on the device.
//!
//! 1. Photon passes ([`super::trace_cuda`], the CPU's `PassPlan`):
//!    photons as a wavefront, stored by stream compaction.
//! 2. Both maps indexed by hash grids ([`GpuHashGrid`], Fleisz 2009): one
//!    with cells of the maximum search radius (Fleisz's 27-cell query) for
//!    sparse surroundings, one with cells about the k-th neighbour's
//!    distance in the map's dense parts, searched in growing shells of
//!    cells until the k nearest are certain ([`PhotonMapView`]). Both give
//!    the exact k nearest within the maximum radius.
//! 3. The eye pass is the wavefront Whitted renderer
//!    ([`GpuScene::render_with`]): specular chains, emission, direct light
//!    by shadow rays, exactly as the CPU photon renderer's walk; every
//!    wave's diffuse ends of chains are collected (compaction) as eye
//!    vertices (their selection read with the wave's own counts, one wait
//!    a bounce), and after the last wave one kernel adds the radiance
//!    estimates of the caustic and the global map at all of them, in Morton
//!    order (k nearest photons, the k-th fixing the disc, with the CPU
//!    estimate's rules). Where the photon pass runs beside the eye waves
//!    and there is no final gather, the primary wave's vertices are
//!    estimated on a third stream as soon as the maps are there, beside
//!    the later waves (`EarlyEstimates`), and the last launch takes the
//!    later waves' vertices; where the maps come only after the last
//!    wave, one launch takes them all.
//!
//! An owned renderer on one GPU runs steps 1–2 (and the final gather's
//! precompute) on a second stream of the device, beside the eye waves of
//! step 3, which wait for the maps only at their estimates
//! ([`GpuPhotonRenderer::new`]).
//!
//! With `gather_rays > 0` the global map is traced with every diffuse hit
//! and read by the **final gather**: irradiance precomputed at every
//! `precompute`-th global photon (Christensen); gather rays,
//! cosine-distributed, as a wavefront (mirrors and glass followed, Fresnel
//! choice keyed as on the CPU) read the nearest precomputed irradiance
//! whose normal agrees; the per-ray results are summed per gathering point
//! in ray order, so no atomics decide the sum. Where it gathers:
//! - **irradiance samples** (the default, `spacing > 0`): placed adaptively
//!   in screen space among the frame's eye vertices by
//!   `irradiance_samples_cuda.rs` (the CPU's quadtree budget by Zeidan's (2011)
//!   error metric, level by level), gathered, given Ward's validity radius
//!   (the gather's harmonic distance against the 4th nearest fellow sample,
//!   kNN on a GPU kd-tree of the samples), then interpolated at every eye
//!   vertex from its 8 nearest samples; the vertices no sample covers get
//!   their own gather, as on the CPU. The CPU seeds from its pixel centres'
//!   shading points, the GPU from the shading points of the frame itself,
//!   which saves a second eye pass;
//! - **every eye vertex** (`spacing == 0`, the CPU's `--sample-spacing 0`).
//!
//! The GPU traces the CPU's photons (same streams) and shades with the
//! CPU's random numbers, so its image equals the CPU photon renderer's up
//! to float rounding and the rare photon whose path a rounding flips.

use std::ops::Range;
use std::sync::mpsc;
use std::time::Instant;

use crate::photon::estimate_cuda;
use crate::photon::gather_cuda::{
    self, GatherChunk, GatherTargets, GpuIrradianceSamples, POINT_GATHER, SAMPLE_GATHER,
};
use crate::photon::irradiance_samples_cuda::SeedSettings;
use crate::photon::records_cuda::{GpuEyeVertex, GpuPhoton, GpuShadedPhoton, PhotonMapView};
use crate::scene_cuda::FrameParams;
use caustic_accel::points::hash_grid_cuda::{GpuHashGrid, point_bounds};
use caustic_accel::points::kdtree::build_cuda::GpuPointKdTree;
use caustic_gpu::ops::compact::{gather_wave, select_indices, select_indices_at};
use caustic_gpu::ops::segment::gather_u32;
use caustic_gpu::{DeviceBuffer, GpuError, PinnedBuffer, StreamPriority};
use caustic_scene::Camera;

use super::emit::PhotonSources;
use super::irradiance_samples::SampleSettings;
use super::render::{PassPlan, PhotonRenderError, PhotonRenderSettings, PhotonRenderStats};
use super::trace_cuda::{self, GpuPhotonMaps};
use crate::team::{Solo, Team, TeamError, TileBand, band_film_to_root, own_pieces, share, sum_u64};
use crate::team_cuda::{GpuTeamError, add_band_sums, gather_device_runs};
use crate::whitted::render_cuda::{
    GpuScene, ShadedWave, WaveCount, WaveSteps, check_display_bytes,
};
use crate::{Film, FresnelMode, RenderScene, WhittedSettings};

/// A GPU photon-render error: a setting the GPU path does not support, or
/// a device failure.
#[derive(Debug, thiserror::Error)]
pub enum GpuPhotonError {
    #[error(transparent)]
    Settings(#[from] PhotonRenderError),
    #[error(transparent)]
    Gpu(#[from] GpuError),
    #[error("team exchange failed: {0}")]
    Team(#[from] TeamError),
}

impl From<GpuTeamError> for GpuPhotonError {
    fn from(error: GpuTeamError) -> Self {
        match error {
            GpuTeamError::Gpu(e) => e.into(),
            GpuTeamError::Team(e) => e.into(),
        }
    }
}

/// The uploaded scene a [`GpuPhotonRenderer`] renders: its own, or one
/// the caller keeps (and reuses for other integrators).
enum SceneRef<'s> {
    Owned(Box<GpuScene>),
    Borrowed(&'s GpuScene),
}

impl std::ops::Deref for SceneRef<'_> {
    type Target = GpuScene;
    fn deref(&self) -> &GpuScene {
        match self {
            SceneRef::Owned(scene) => scene,
            SceneRef::Borrowed(scene) => scene,
        }
    }
}

/// The photon stream's priority against the eye waves' stream where the
/// photon pass runs beside them. Above: the eye waves reach the estimates
/// when the maps are ready instead of waiting on photon blocks queued
/// behind their own (H100, 2026-11-28, `photon_gpu_bench 1000000
/// 1920x1080 --no-cpu`, three runs of each alternating: display frame
/// 17.71-17.89 ms above, 18.03-19.04 same, 18.09-18.46 below, 18.15-18.23
/// before the priorities; the photon wait 0.02-0.24 ms above against
/// 0.43-0.69 ms same; with the final gather all four within noise).
pub const PHOTON_STREAM_PRIORITY: StreamPriority = StreamPriority::Above;

/// A scene uploaded for photon-mapped frames.
pub struct GpuPhotonRenderer<'s> {
    scene: SceneRef<'s>,
    /// The scene uploaded again on a stream of its own, where the photon
    /// pass runs beside the eye waves (`None`: the photon pass runs
    /// first, on the frame's stream).
    photon_scene: Option<GpuScene>,
    sources: PhotonSources,
    diagonal: f32,
    /// The scene's bounds (lo, hi), for the Morton order of eye vertices.
    bounds: ([f32; 3], [f32; 3]),
    /// A third stream of the device, below the eye waves', where the
    /// estimates at the primary wave's vertices run beside the later waves
    /// ([`EarlyEstimates`]); `None` where the photon pass runs first.
    estimate_gpu: Option<caustic_gpu::Gpu>,
    /// Whether a frame with the estimate stream uses it (for measuring).
    early_estimates: bool,
    /// Whether the eye pass waits for the maps after the primary wave, so
    /// that its estimates always take the early launch (for testing).
    early_waits: bool,
}

impl GpuPhotonRenderer<'static> {
    /// Uploads `scene` to the device of `gpu`, with the default GPU
    /// structure built there; and again on a second stream of the device,
    /// where the photon pass of a one-GPU frame runs beside the eye waves
    /// (twice the scene's device memory).
    pub fn new(gpu: &caustic_gpu::Gpu, scene: &RenderScene) -> Result<Self, GpuError> {
        Self::from_scene(GpuScene::upload(gpu, scene)?, scene)
    }

    /// The renderer of `scene`, already uploaded as `uploaded` (with the
    /// structure of the caller's choice), uploaded again with that
    /// structure on a second stream, as [`Self::new`].
    pub fn from_scene(uploaded: GpuScene, scene: &RenderScene) -> Result<Self, GpuError> {
        Self::from_scene_at(uploaded, scene, PHOTON_STREAM_PRIORITY)
    }

    /// [`Self::from_scene`] with the photon stream at `priority` against
    /// the eye waves' stream (for measuring; the default is
    /// [`PHOTON_STREAM_PRIORITY`]).
    pub fn from_scene_at(
        uploaded: GpuScene,
        scene: &RenderScene,
        priority: StreamPriority,
    ) -> Result<Self, GpuError> {
        let photon_stream = uploaded.gpu().with_own_stream_at(priority)?;
        let photon_scene = GpuScene::upload_with(&photon_stream, scene, uploaded.accel().spec())?;
        let estimate_gpu = uploaded.gpu().with_own_stream_at(StreamPriority::Below)?;
        let mut renderer = Self::from_parts(SceneRef::Owned(Box::new(uploaded)), scene);
        renderer.photon_scene = Some(photon_scene);
        renderer.estimate_gpu = Some(estimate_gpu);
        Ok(renderer)
    }
}

impl<'s> GpuPhotonRenderer<'s> {
    /// The renderer of `scene` on an upload the caller keeps: with no
    /// second upload, its photon pass runs before the eye pass.
    pub fn on(uploaded: &'s GpuScene, scene: &RenderScene) -> Self {
        Self::from_parts(SceneRef::Borrowed(uploaded), scene)
    }

    fn from_parts(uploaded: SceneRef<'s>, scene: &RenderScene) -> Self {
        Self {
            scene: uploaded,
            photon_scene: None,
            sources: PhotonSources::new(scene),
            diagonal: scene.scene_diagonal,
            bounds: bounds(scene),
            estimate_gpu: None,
            early_estimates: true,
            early_waits: false,
        }
    }

    /// Whether frames estimate at the primary wave's vertices beside the
    /// later waves, where the renderer has the stream for it (on by
    /// default; off for measuring).
    pub fn set_early_estimates(&mut self, on: bool) {
        self.early_estimates = on;
    }

    /// Whether frames with the early estimates wait for the maps after
    /// the primary wave, so that its estimates always take the early
    /// launch beside the later waves, wherever the photon pass ends (off
    /// by default, where they take it when the maps come before the last
    /// wave: a frame's timing decides which path runs; on, tests check
    /// that path's frame).
    pub fn set_early_estimates_wait_for_maps(&mut self, on: bool) {
        self.early_waits = on;
    }

    /// The uploaded scene (its structure's build stats among others).
    pub fn scene(&self) -> &GpuScene {
        &self.scene
    }

    /// One frame from scratch: photon passes, map builds, the eye pass.
    pub fn render(
        &self,
        camera: &Camera,
        settings: &PhotonRenderSettings,
    ) -> Result<(Film, PhotonRenderStats), GpuPhotonError> {
        let (film, stats) = self.render_in_team(camera, settings, &Solo)?;
        Ok((Solo::image(film), stats))
    }

    /// Renders like [`Self::render`] as one member of `team` (one GPU
    /// each, or one MPI rank each; see [`crate::team`]), every member on
    /// its own upload of the scene:
    ///
    /// - the global pass's photons split by index (contiguous shares); the
    ///   GPU tracer stores a wave's photons bounce by bounce, and the
    ///   members' maps merged run by run (bounce by bounce, wave by wave,
    ///   members in rank order: [`GpuPhotonMaps::global_runs`]) are the
    ///   single GPU's maps, photon for photon and in its order; every
    ///   member builds the same maps and the same precomputed irradiance
    ///   from them (a caustic-only pass is traced whole by every member);
    /// - the eye pass by bands of 8-pixel tile rows ([`TileBand`]); the
    ///   members' eye vertices are merged wave by wave in rank order
    ///   ([`gather_device_runs`]), which is the single GPU's vertex array,
    ///   so every member places the same irradiance samples;
    /// - the samples' gathers by contiguous index shares, their irradiance
    ///   exchanged (16 bytes a sample); the estimates, interpolations and
    ///   point gathers for the member's own vertices.
    ///
    /// Every pixel's contributions are then the single GPU's, computed by
    /// the member that owns its row, and the bands go to the root in rank
    /// order ([`band_film_to_root`]; the other members return `None`): the
    /// image equals the single GPU's up to the order of the framebuffer's
    /// atomic additions (which may differ between two runs on one GPU too;
    /// about n·ε relative for n non-negative contributions to a pixel).
    /// Statistics count the whole team's rays.
    pub fn render_in_team(
        &self,
        camera: &Camera,
        settings: &PhotonRenderSettings,
        team: &dyn Team,
    ) -> Result<(Option<Film>, PhotonRenderStats), GpuPhotonError> {
        self.frame(settings, team, &mut |scene, whitted, band, steps| {
            let (mine, eye) = scene.render_band(camera, whitted, band, steps)?;
            let size = (settings.width, settings.height);
            Ok((band_film_to_root(team, size, mine)?, eye))
        })
    }

    /// One frame for a display, on one GPU: [`Self::render`]'s image as
    /// 8-bit sRGB at `exposure` into `out` (three bytes a pixel, the bytes
    /// [`crate::image_io::srgb_bytes`] gives for the film), converted on
    /// the device ([`GpuScene::render_display`]): what a viewer that shows
    /// each frame as it comes needs, with no f32 image on the host.
    pub fn render_display(
        &self,
        camera: &Camera,
        settings: &PhotonRenderSettings,
        exposure: f32,
        out: &mut PinnedBuffer<u8>,
    ) -> Result<PhotonRenderStats, GpuPhotonError> {
        // Refused before the photons are traced, not after.
        check_display_bytes((settings.width, settings.height), out)?;
        let (_, stats) = self.frame(settings, &Solo, &mut |scene, whitted, _, steps| {
            Ok((
                (),
                scene.render_display(camera, whitted, steps, exposure, out)?,
            ))
        })?;
        Ok(stats)
    }

    /// The frame's stages with `eye_pass` running the eye pass (the
    /// Whitted waves with `steps`, the estimates and gathers at their
    /// end) over this member's band and returning its image. With a
    /// photon stream (an owned upload, one GPU), the photon pass runs on it
    /// beside the eye waves ([`Self::overlapped`]); otherwise before them.
    fn frame<T>(
        &self,
        settings: &PhotonRenderSettings,
        team: &dyn Team,
        eye_pass: EyePass<'_, T>,
    ) -> Result<(T, PhotonRenderStats), GpuPhotonError> {
        check(settings)?;
        let start = Instant::now();
        let (image, mut stats) = match &self.photon_scene {
            Some(photon_scene) if team.size() == 1 => {
                self.overlapped(photon_scene, settings, team, eye_pass)?
            }
            _ => {
                let mut stats = PhotonRenderStats::default();
                let image = self.photon_side(
                    &self.scene,
                    settings,
                    team,
                    &mut stats,
                    &mut |_| {},
                    |views, irradiance, stats| {
                        let maps = Pending::Ready(views);
                        let irradiance = Pending::Ready((irradiance, None));
                        self.eye_side(settings, team, maps, irradiance, eye_pass, stats)
                    },
                )?;
                (image, stats)
            }
        };
        let sums = sum_u64(team, &[stats.rays, stats.point_gathers])?;
        (stats.rays, stats.point_gathers) = (sums[0], sums[1]);
        stats.seconds = start.elapsed().as_secs_f64();
        Ok((image, stats))
    }

    /// The frame on two streams of one device: the photon pass (tracing,
    /// map builds, precomputed irradiance) on the photon stream, driven by
    /// a thread of its own, beside the eye waves and their collection on
    /// the frame's stream. The estimates wait for the maps; the final
    /// gather's rays wait for the precomputed irradiance, computed beside
    /// the estimates and the samples' placement
    /// ([`EstimateSteps::finish`]). Neither pass reads the other's results
    /// before that point, and both are latency-bound wavefronts (a launch
    /// per bounce, few rays or photons at late bounces), so each can use
    /// the device where the other leaves it idle (at 10^6 photons and
    /// 1080p about 1.9 ms of the photons' and maps' 4.5 ms hide: the
    /// passes slow each other down too). The photon buffers stay
    /// alive on their thread until the frame's stream is done with them.
    fn overlapped<T>(
        &self,
        photon_scene: &GpuScene,
        settings: &PhotonRenderSettings,
        team: &dyn Team,
        eye_pass: EyePass<'_, T>,
    ) -> Result<(T, PhotonRenderStats), GpuPhotonError> {
        let (send_maps, maps) = mpsc::channel();
        let (send_irradiance, irradiance) = mpsc::channel();
        let (release, released) = mpsc::channel::<()>();
        let frame_gpu = self.scene.gpu();
        std::thread::scope(|scope| {
            scope.spawn(move || {
                let mut stats = PhotonRenderStats::default();
                let mut maps_sent = false;
                // A frame that failed before it waits for the maps or the
                // irradiance no longer listens: the sends may go nowhere.
                let outcome = self.photon_side(
                    photon_scene,
                    settings,
                    &Solo,
                    &mut stats,
                    &mut |views| {
                        maps_sent = true;
                        let _ = send_maps.send(Ok(views.to_vec()));
                    },
                    |_, irradiance, stats| {
                        let _ = send_irradiance.send(Ok((irradiance, Some(stats.clone()))));
                        // Released (or the frame gone): the frame's stream
                        // may still read the maps until it is idle.
                        let _ = released.recv();
                        Ok(frame_gpu.synchronize()?)
                    },
                );
                if let Err(error) = outcome {
                    if maps_sent {
                        let _ = send_irradiance.send(Err(error));
                    } else {
                        let _ = send_maps.send(Err(error));
                    }
                }
            });
            let mut stats = PhotonRenderStats::default();
            let (maps, irradiance) = (Pending::Sent(maps), Pending::Sent(irradiance));
            let image = self.eye_side(settings, team, maps, irradiance, eye_pass, &mut stats);
            drop(release);
            image.map(|image| (image, stats))
        })
    }

    /// The photon pass on `scene`'s stream: both maps traced and indexed
    /// (`built` gets the views the estimates read as soon as they are,
    /// the stream idle), then with the final gather the irradiance
    /// precomputed at the global map's photons and indexed; `then` runs
    /// with the views and the irradiance's while the buffers live (the
    /// stream idle).
    fn photon_side<R>(
        &self,
        scene: &GpuScene,
        settings: &PhotonRenderSettings,
        team: &dyn Team,
        stats: &mut PhotonRenderStats,
        built: &mut dyn FnMut(&[PhotonMapView]),
        then: impl FnOnce(
            Vec<PhotonMapView>,
            Option<PhotonMapView>,
            &mut PhotonRenderStats,
        ) -> Result<R, GpuPhotonError>,
    ) -> Result<R, GpuPhotonError> {
        let maps = self.trace(scene, settings, team, stats)?;
        let build_start = Instant::now();
        let global_radius = settings.max_radius * self.diagonal;
        let caustic_radius = settings.caustic_max_radius * self.diagonal;
        let mut indexed = IndexedPhotons::build_all(
            &[
                (&maps.global, global_radius, settings.k),
                (&maps.caustic, caustic_radius, settings.caustic_k),
            ],
            TILE_FINE_CELL_KTH,
        )?;
        let caustic = indexed.pop().expect("two maps in, two out");
        let global = indexed.pop().expect("two maps in, two out");
        let global_view = global.view(settings.k, global_radius, false)?;
        let caustic_view =
            caustic.caustic_view(settings.caustic_k, caustic_radius, settings.cone_filter)?;
        let gpu = scene.gpu();
        // With the final gather the global map is read by the gather rays
        // (through irradiance precomputed at its photons), not at the eye.
        let gathering = settings.gather_rays > 0;
        let views = if gathering {
            vec![caustic_view]
        } else {
            vec![global_view, caustic_view]
        };
        gpu.synchronize()?;
        stats.build_ms = build_start.elapsed().as_secs_f64() * 1e3;
        built(&views);
        let precompute_start = Instant::now();
        let precomputed = if gathering {
            let view = DeviceBuffer::from_slice(gpu, "global map view", &[global_view])?;
            let stride = settings.precompute;
            let points = self.precompute(&view, maps.global.len(), stride, team)?;
            stats.precomputed = points.len();
            Some(points)
        } else {
            None
        };
        let indexed = match &precomputed {
            Some(points) => Some(IndexedPhotons::build(
                points,
                global_radius,
                PRECOMPUTED_CANDIDATES,
                SHELL_FINE_CELL_KTH,
            )?),
            None => None,
        };
        let irradiance = match &indexed {
            Some(indexed) => {
                let mut view = indexed.view(PRECOMPUTED_CANDIDATES, global_radius, false)?;
                // Gather rays land anywhere, one lookup each: the fine cells
                // answer almost every one, so do not count the coarse cells.
                if view.coarse_limit != u32::MAX {
                    view.coarse_limit = 0;
                }
                Some(view)
            }
            None => None,
        };
        gpu.synchronize()?;
        stats.precompute_ms = precompute_start.elapsed().as_secs_f64() * 1e3;
        then(views, irradiance, stats)
    }

    /// The eye pass with the estimates from `maps` (ready, or sent by the
    /// photon stream's thread when its maps are built).
    fn eye_side<T>(
        &self,
        settings: &PhotonRenderSettings,
        team: &dyn Team,
        maps: Pending<Vec<PhotonMapView>>,
        irradiance: Pending<IrradianceView>,
        eye_pass: EyePass<'_, T>,
        stats: &mut PhotonRenderStats,
    ) -> Result<T, GpuPhotonError> {
        let render_start = Instant::now();
        let whitted = WhittedSettings {
            width: settings.width,
            height: settings.height,
            spp: settings.spp,
            max_depth: settings.max_depth,
            light_samples: settings.light_samples,
            fresnel: FresnelMode::Exact,
            seed: settings.seed,
            trace: Default::default(),
        };
        let band = TileBand::of(team, settings.width, settings.height);
        let mut steps = EstimateSteps {
            maps,
            irradiance,
            team,
            band: band.clone(),
            waves: settings.max_depth as usize + 1,
            runs: Vec::new(),
            appended: None,
            wave_lengths: Vec::new(),
            selected: None,
            early: self.early(settings, team),
            bounds: self.bounds,
            gather: (settings.gather_rays > 0).then(|| FinalGather {
                scene: &self.scene,
                rays_per: settings.gather_rays,
                max_depth: settings.max_depth,
                samples: (settings.samples.spacing > 0.0).then(|| SamplePlan {
                    settings: settings.samples,
                    seeding: SeedSettings {
                        count: sample_count(settings),
                        alpha: settings.samples.position_weight / self.diagonal.max(1e-12),
                        seed: settings.seed,
                        bounds: self.bounds,
                    },
                }),
            }),
            gathered: 0,
            gather_rays: 0,
            samples: 0,
            gather_ms: 0.0,
            stages: Vec::new(),
            eye_start: Instant::now(),
        };
        let (image, eye) = eye_pass(&self.scene, &whitted, &band, &mut steps)?;
        if let Pending::Ready((_, Some(photons))) = &mut steps.irradiance {
            // The photon stream's own stats: its photons, builds and rays.
            *stats = std::mem::take(photons);
        }
        stats.render_ms = render_start.elapsed().as_secs_f64() * 1e3;
        stats.rays += eye.rays + steps.gather_rays;
        stats.point_gathers = steps.gathered;
        stats.samples = steps.samples;
        stats.sample_ms = steps.gather_ms;
        stats.stage_ms = steps.stages;
        stats.stage_ms.push(("download", eye.download_ms));
        Ok(image)
    }

    /// The early estimates' state of a frame, where it has them: one GPU
    /// with the estimate stream, and no final gather (whose samples are
    /// placed among all vertices at once).
    fn early(&self, settings: &PhotonRenderSettings, team: &dyn Team) -> Option<EarlyEstimates> {
        let gpu = self.estimate_gpu.as_ref()?;
        let on = self.early_estimates && team.size() == 1 && settings.gather_rays == 0;
        on.then(|| EarlyEstimates {
            gpu: gpu.clone(),
            vertices: None,
            launched: None,
            waits: self.early_waits,
        })
    }

    /// The irradiance precomputed at every `stride`-th photon of the
    /// global map ([`gather_cuda::precompute`]); the members of a team in
    /// one process each take a share of the points (in Morton order) and
    /// exchange them device to device. A team of processes repeats the
    /// whole precompute on every member: through the host the exchange
    /// would cost more than the estimates.
    fn precompute(
        &self,
        view: &DeviceBuffer<PhotonMapView>,
        photons: usize,
        stride: usize,
        team: &dyn Team,
    ) -> Result<DeviceBuffer<GpuPhoton>, GpuPhotonError> {
        if team.size() == 1 || !team.shares_memory() {
            return Ok(gather_cuda::precompute(view, photons, stride, self.bounds)?);
        }
        let order = gather_cuda::precompute_order(view, photons, stride, self.bounds)?;
        let mine = share(team, order.len() as u64);
        let mine = mine.start as usize..mine.end as usize;
        let part = gather_cuda::precompute_share(view, stride, &order, mine.clone())?;
        let (by_position, _) = gather_device_runs(team, part, 0, &[mine.len() as u64])?;
        Ok(gather_cuda::place_precomputed(&order, &by_position)?)
    }

    /// The photon passes of the plan, on the device; a team member traces
    /// its share of the global pass's photons and receives the others'.
    fn trace(
        &self,
        scene: &GpuScene,
        settings: &PhotonRenderSettings,
        team: &dyn Team,
        stats: &mut PhotonRenderStats,
    ) -> Result<GpuPhotonMaps, GpuPhotonError> {
        let plan = PassPlan::new(settings);
        let start = Instant::now();
        let photons = plan.global.photons;
        let range = share(team, photons);
        let mut maps = trace_cuda::trace_photon_range(scene, &self.sources, &plan.global, range)?;
        stats.rays += maps.stats.rays;
        stats.photons_traced = maps.emitted;
        let global = std::mem::replace(
            &mut maps.global,
            DeviceBuffer::uninit(scene.gpu(), "global photon map", 0)?,
        );
        maps.global = gather_device_runs(team, global, 0, &maps.global_runs)?.0;
        if let Some(pass) = &plan.caustic {
            // A caustic-only pass splits like the global one, by index.
            let range = share(team, pass.photons);
            let caustic = trace_cuda::trace_caustic_range(scene, &self.sources, pass, range)?;
            stats.rays += caustic.stats.rays;
            stats.photons_traced += caustic.emitted;
            maps.caustic = gather_device_runs(team, caustic.caustic, 0, &caustic.caustic_runs)?.0;
        } else {
            let caustic = std::mem::replace(
                &mut maps.caustic,
                DeviceBuffer::uninit(scene.gpu(), "caustic photon map", 0)?,
            );
            maps.caustic = gather_device_runs(team, caustic, 0, &maps.caustic_runs)?.0;
        }
        stats.photon_ms = start.elapsed().as_secs_f64() * 1e3;
        stats.global_stored = maps.global.len();
        stats.caustic_stored = maps.caustic.len();
        Ok(maps)
    }
}

/// A frame's eye pass ([`GpuPhotonRenderer::frame`]): the scene, its
/// Whitted settings, the member's band and the estimate steps in, the
/// image and the eye pass's stats out.
type EyePass<'e, T> = &'e mut dyn FnMut(
    &GpuScene,
    &WhittedSettings,
    &TileBand,
    &mut dyn WaveSteps,
) -> Result<(T, crate::RenderStats), GpuPhotonError>;

/// Something of the photon pass the eye pass's steps read after the last
/// wave: there already (the photon pass ran first, on the frame's stream),
/// or sent by the photon stream's thread when ready (that stream idle).
/// Views are plain device addresses: the buffers stay with the photon
/// pass.
enum Pending<T> {
    Ready(T),
    Sent(mpsc::Receiver<Result<T, GpuPhotonError>>),
}

/// The precomputed irradiance's view (with the final gather), and, from
/// the photon stream's thread, its stats (photons, builds, rays).
type IrradianceView = (Option<PhotonMapView>, Option<PhotonRenderStats>);

impl<T> Pending<T> {
    /// The value, waiting for the photon stream's thread if it has not
    /// sent it yet.
    fn wait(&mut self) -> Result<&mut T, GpuError> {
        if let Pending::Sent(sent) = self {
            *self = Pending::Ready(received(sent.recv())?);
        }
        match self {
            Pending::Ready(value) => Ok(value),
            Pending::Sent(_) => unreachable!("received above"),
        }
    }

    /// The value if the photon stream's thread has sent it, without
    /// waiting.
    fn ready(&mut self) -> Result<Option<&mut T>, GpuError> {
        if let Pending::Sent(sent) = self {
            let value = match sent.try_recv() {
                Err(mpsc::TryRecvError::Empty) => return Ok(None),
                Err(mpsc::TryRecvError::Disconnected) => received(Err(mpsc::RecvError))?,
                Ok(value) => received(Ok(value))?,
            };
            *self = Pending::Ready(value);
        }
        match self {
            Pending::Ready(value) => Ok(Some(value)),
            Pending::Sent(_) => unreachable!("received above"),
        }
    }

    fn is_sent(&self) -> bool {
        matches!(self, Pending::Sent(_))
    }
}

/// What the photon stream's thread sent, or why nothing came.
fn received<T>(message: Result<Result<T, GpuPhotonError>, mpsc::RecvError>) -> Result<T, GpuError> {
    match message {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(GpuPhotonError::Gpu(error))) => Err(error),
        Ok(Err(error)) => Err(photon_stream_failed(error.to_string())),
        Err(_) => Err(photon_stream_failed("its thread ended".into())),
    }
}

/// The estimates at the primary wave's vertices, on a stream of their own
/// below the eye waves': the primary wave holds most of a frame's eye
/// vertices, and once they are collected and the maps are ready their
/// estimates (which fill the device) need nothing of the later waves
/// (mirror and glass paths, few and latency-bound), so they run beside
/// them; the later waves' vertices get a second, small launch after the
/// last wave. Each vertex's estimate is its own (the same exact search
/// wherever its tile falls): only the order of the framebuffer's atomic
/// additions changes.
struct EarlyEstimates {
    /// The estimate stream's handle.
    gpu: caustic_gpu::Gpu,
    /// The primary wave's vertices: allocated and written on the frame's
    /// stream, read by an early launch on the estimate stream after it
    /// waited for the frame's; freed on the frame's stream, which waits
    /// for an early launch before the framebuffer's download (`finish`).
    vertices: Option<DeviceBuffer<GpuEyeVertex>>,
    /// What the launched estimates read, kept until the frame's stream
    /// has waited for them.
    launched: Option<EarlyLaunch>,
    /// Whether the primary wave waits for the maps (for testing).
    waits: bool,
}

/// The primary wave's vertices are collected with room for 1/3 as many
/// more after them, where the later waves' join them without a copy of
/// the primary's (cornell-caustics at 1080p, eye depth 5: 1.77·10^6
/// primary, 0.50·10^6 later); a frame with more later vertices copies
/// both into a new array, as before.
const PRIMARY_ROOM_DIVISOR: usize = 3;

/// The buffers an early launch reads (on the estimate stream).
struct EarlyLaunch {
    _params: DeviceBuffer<FrameParams>,
    _views: DeviceBuffer<PhotonMapView>,
    _vertices: DeviceBuffer<GpuEyeVertex>,
    _order: DeviceBuffer<u32>,
    _tiles: DeviceBuffer<u32>,
}

impl EarlyEstimates {
    /// Writes the primary wave's vertices of `slots` (selected by
    /// `indices`) into a buffer of the frame's stream, with room after
    /// them for the later waves' vertices: where no early launch takes
    /// them, the later waves' join them there
    /// ([`EstimateSteps::merge_primary`]) instead of both being copied
    /// into a new array (0.2 GB at 1080p) while the frame waits.
    fn collect(&mut self, wave: &ShadedWave, indices: &DeviceBuffer<u32>) -> Result<(), GpuError> {
        let n = indices.len();
        let room = n + n / PRIMARY_ROOM_DIVISOR;
        let mut vertices = DeviceBuffer::uninit(wave.params.gpu(), "primary eye vertices", room)?;
        vertices.truncate(n);
        let slots = (wave.rays, wave.hits, wave.paths);
        estimate_cuda::collect_at(wave.params, slots, indices, &mut vertices, 0)?;
        self.vertices = Some(vertices);
        Ok(())
    }

    /// Queues the estimates at the collected primary vertices from the
    /// maps `views` on the estimate stream, after the frame's stream's
    /// work so far (the collection, the frame's parameters); once.
    fn launch(
        &mut self,
        params: &DeviceBuffer<FrameParams>,
        views: &[PhotonMapView],
        bounds: ([f32; 3], [f32; 3]),
    ) -> Result<(), GpuError> {
        let Some(vertices) = &self.vertices else {
            return Ok(());
        };
        if self.launched.is_some() {
            return Ok(());
        }
        let gpu = &self.gpu;
        gpu.wait_for(params.gpu())?;
        let mut own_params = DeviceBuffer::uninit(gpu, "early estimate frame", 1)?;
        own_params.copy_from_at(params, 0)?;
        let views = DeviceBuffer::from_slice(gpu, "photon map views", views)?;
        // The vertices are the frame stream's buffer (with room for the
        // later waves'), and a buffer's handle names the stream its
        // kernels run on: a copy of the estimate stream's own keeps the
        // order, the tiles and the estimates on that stream (with the
        // frame's buffer the order and tiles ran on the frame's stream
        // while the estimates read them on this one: a race, H200
        // 2026-11-29, PSNR 25.7 dB against the frame after the waves).
        let mut own_vertices = DeviceBuffer::uninit(gpu, "early eye vertices", vertices.len())?;
        own_vertices.copy_from_at(vertices, 0)?;
        let order = estimate_cuda::morton_order(&own_vertices, bounds.0, bounds.1)?;
        let tiles = estimate_cuda::tile_order(&views, &own_vertices, &order)?;
        estimate_cuda::estimate(&own_params, &views, &own_vertices, &order, &tiles)?;
        self.launched = Some(EarlyLaunch {
            _params: own_params,
            _views: views,
            _vertices: own_vertices,
            _order: order,
            _tiles: tiles,
        });
        Ok(())
    }
}

/// The eye pass's extra steps: every wave's diffuse ends collected as eye
/// vertices; after the last wave, all of them sorted into Morton order and
/// the radiance estimates added in one launch. One launch over spatially
/// sorted points keeps neighbouring threads on neighbouring photons and
/// spreads the rare costly query over the whole machine, where a launch per
/// wave waited on its slowest queries once per bounce. On one GPU with a
/// photon stream and no final gather the primary wave's vertices (most of
/// them) get a launch of their own instead, on a third stream as soon as
/// the maps are there ([`EarlyEstimates`]), and the last step's launch
/// takes the later waves' vertices; if the maps come only after the last
/// wave, the primary vertices rejoin the frame's array for one launch
/// ([`EstimateSteps::merge_primary`]).
struct EstimateSteps<'a> {
    /// The views of the photon pass's maps, read by the estimates after
    /// the last wave.
    maps: Pending<Vec<PhotonMapView>>,
    /// The view of the precomputed irradiance, read by the final gather.
    irradiance: Pending<IrradianceView>,
    /// The team whose members render bands of the image (`Solo` alone).
    team: &'a dyn Team,
    /// This member's band: where a team's whole-image sums are added.
    band: TileBand,
    /// Most waves of a frame (`max_depth + 1`): every member names as many
    /// when the vertices are merged.
    waves: usize,
    /// Compacted eye vertices by bounce, one run per wave that collected
    /// any (a frame in chunks has a wave per chunk and bounce): bounce by
    /// bounce, in chunk order, they are the vertices of the frame traced
    /// at once, in its order, whatever the chunks.
    runs: Vec<Vec<DeviceBuffer<GpuEyeVertex>>>,
    /// A frame of one chunk: its waves come bounce by bounce, so their
    /// vertices appended here are the frame's array as it is, with no
    /// copy of the runs at the end (the allocation grows by half again
    /// when full).
    appended: Option<DeviceBuffer<GpuEyeVertex>>,
    /// Vertices collected at each bounce so far.
    wave_lengths: Vec<u64>,
    /// The wave's selected slots between [`WaveSteps::select`] and
    /// [`WaveSteps::wave`] (their count not yet read).
    selected: Option<DeviceBuffer<u32>>,
    /// The estimates at the primary wave's vertices beside the later
    /// waves, where the frame has them.
    early: Option<EarlyEstimates>,
    bounds: ([f32; 3], [f32; 3]),
    gather: Option<FinalGather<'a>>,
    /// Eye vertices gathered at, and gather rays traced.
    gathered: u64,
    gather_rays: u64,
    /// Irradiance samples placed.
    samples: usize,
    /// Wall time of the final gather (samples, interpolation, gathers).
    gather_ms: f64,
    /// The stages' times, in order (`PhotonRenderStats::stage_ms`).
    stages: Vec<(&'static str, f64)>,
    /// The eye pass's start: the Whitted waves and the collection of
    /// their vertices (which waits with the waves' own counts, no clock of
    /// its own) run until [`WaveSteps::finish`].
    eye_start: Instant,
}

/// The final gather (`gather.rs`): `rays_per` cosine-distributed rays per
/// gathering point, each following mirrors and glass to a diffuse hit and
/// reading the irradiance precomputed there; at every eye vertex, or at
/// adaptively placed irradiance samples interpolated in between.
struct FinalGather<'a> {
    scene: &'a GpuScene,
    rays_per: u32,
    /// Most specular bounces of a gather ray.
    max_depth: u32,
    /// `None`: gather at every eye vertex (`--sample-spacing 0`).
    samples: Option<SamplePlan>,
}

/// Where the irradiance samples go and how many (render.rs's
/// `irradiance_samples` settings).
struct SamplePlan {
    settings: SampleSettings,
    seeding: SeedSettings,
}

/// The CPU's sample budget: one sample per `spacing²` pixels.
fn sample_count(settings: &PhotonRenderSettings) -> usize {
    let pixels = f64::from(settings.width) * f64::from(settings.height);
    let spacing = f64::from(settings.samples.spacing);
    (pixels / (spacing * spacing)).ceil() as usize
}

/// The positions of `order` whose vertices are this member's (`own`:
/// `(offset, length)` ranges of the merged vertex array), in `order`'s
/// order; `None` for a team of one (every vertex is its own).
fn own_order(
    order: &DeviceBuffer<u32>,
    own: &[(u64, u64)],
    team: &dyn Team,
) -> Result<Option<DeviceBuffer<u32>>, GpuError> {
    if team.size() == 1 {
        return Ok(None);
    }
    let runs = own
        .iter()
        .map(|&(at, len)| at as usize..(at + len) as usize);
    let flags = range_flags(order, runs)?;
    let flags_in_order = gather_u32(&flags, order)?;
    Ok(Some(gather_u32(order, &select_indices(&flags_in_order)?)?))
}

/// Flags over `order`'s length, non-zero (what `select_indices` selects)
/// on `ranges` alone: set on the device, a memset a range.
fn range_flags(
    order: &DeviceBuffer<u32>,
    ranges: impl Iterator<Item = Range<usize>>,
) -> Result<DeviceBuffer<u32>, GpuError> {
    let mut flags = DeviceBuffer::<u32>::zeroed(order.gpu(), "vertex flags", order.len())?;
    for range in ranges {
        flags.fill_bytes_in(range, 1)?;
    }
    Ok(flags)
}

/// What a gather's ray results become: indirect light in the framebuffer
/// (eye vertices), or irradiance and Ward's harmonic distance per sample.
enum GatherSink<'s> {
    Film,
    Samples(&'s mut DeviceBuffer<[f32; 4]>),
}

/// What a final gather did: points gathered at, samples placed, rays, and
/// the stage times with samples.
#[derive(Default)]
struct GatherCounts {
    points: u64,
    samples: usize,
    rays: u64,
    stages: Vec<(&'static str, f64)>,
}

/// Wall time between synchronised points of the device's work.
struct StageClock<'g> {
    gpu: &'g caustic_gpu::Gpu,
    last: Instant,
}

impl<'g> StageClock<'g> {
    fn new(gpu: &'g caustic_gpu::Gpu) -> Result<Self, GpuError> {
        gpu.synchronize()?;
        Ok(Self {
            gpu,
            last: Instant::now(),
        })
    }

    /// Milliseconds since the last lap, once the device is idle.
    fn lap(&mut self) -> Result<f64, GpuError> {
        self.gpu.synchronize()?;
        let now = Instant::now();
        let ms = (now - self.last).as_secs_f64() * 1e3;
        self.last = now;
        Ok(ms)
    }
}

/// Gather rays per chunk of eye vertices: bounds the chunk's buffers
/// (about 170 bytes per ray, 2.8 GB at this size) while keeping the
/// per-bounce launches and host reads few (each chunk runs `max_depth + 1`
/// bounces however few rays survive).
const GATHER_CHUNK_RAYS: usize = 1 << 24;
/// `precomputed.rs`'s candidates per irradiance lookup.
const PRECOMPUTED_CANDIDATES: usize = 8;
/// irradiance_samples.rs: samples looked at per interpolation, and the
/// nearest fellow sample (itself counted) that measures the spacing.
const INTERPOLATION_NEIGHBOURS: usize = 8;
const SPACING_NEIGHBOURS: usize = 5;

impl FinalGather<'_> {
    /// The irradiance samples' places among the frame's eye vertices
    /// (`None`: gathers at every vertex), chosen before the irradiance
    /// they read is there.
    fn seed(
        &self,
        params: &DeviceBuffer<FrameParams>,
        vertices: &DeviceBuffer<GpuEyeVertex>,
    ) -> Result<Option<DeviceBuffer<u32>>, GpuError> {
        let Some(plan) = &self.samples else {
            return Ok(None);
        };
        let seeds = gather_cuda::seed_points(params, vertices)?;
        let chosen = crate::photon::irradiance_samples_cuda::seed(&seeds.points(), &plan.seeding)?;
        Ok(Some(chosen))
    }

    /// Indirect light at every vertex of `own` (Morton order), from
    /// gathers or from the irradiance samples `chosen` ([`Self::seed`])
    /// reading the precomputed irradiance through `irradiance`.
    /// `vertices` are all of the frame's (a team's merged array), `own`
    /// this member's in Morton order: the samples are placed among all
    /// vertices, gathered by contiguous shares of the team and exchanged;
    /// the light goes to the member's own vertices alone.
    fn light(
        &self,
        irradiance: &DeviceBuffer<PhotonMapView>,
        params: &DeviceBuffer<FrameParams>,
        vertices: &DeviceBuffer<GpuEyeVertex>,
        own: &DeviceBuffer<u32>,
        chosen: Option<DeviceBuffer<u32>>,
        team: &dyn Team,
    ) -> Result<GatherCounts, GpuError> {
        let (Some(plan), Some(chosen)) = (&self.samples, chosen) else {
            let rays = self.run(
                irradiance,
                params,
                vertices,
                own,
                0..own.len(),
                GatherSink::Film,
            )?;
            let points = own.len() as u64;
            return Ok(GatherCounts {
                points,
                rays,
                ..Default::default()
            });
        };
        let mut clock = StageClock::new(params.gpu())?;
        let gpu = params.gpu();
        let mut gathered = DeviceBuffer::zeroed(gpu, "sample irradiance", chosen.len())?;
        let sink = GatherSink::Samples(&mut gathered);
        let mine = share(team, chosen.len() as u64);
        let mine = mine.start as usize..mine.end as usize;
        let mut rays = self.run(irradiance, params, vertices, &chosen, mine.clone(), sink)?;
        let runs = [mine.len() as u64];
        let (gathered, _) = gather_device_runs(team, gathered, mine.start, &runs)?;
        let sample_gathers = clock.lap()?;
        let (samples, tree) = sample_cache(vertices, &chosen, gathered, &plan.settings)?;
        let radii = clock.lap()?;
        let uncovered = interpolate(params, vertices, own, &samples, &tree, &plan.settings)?;
        let interpolation = clock.lap()?;
        let all = 0..uncovered.len();
        rays += self.run(
            irradiance,
            params,
            vertices,
            &uncovered,
            all,
            GatherSink::Film,
        )?;
        let point_gathers = clock.lap()?;
        Ok(GatherCounts {
            points: uncovered.len() as u64,
            samples: chosen.len(),
            rays,
            stages: vec![
                ("sample gathers", sample_gathers),
                ("sample radii", radii),
                ("interpolation", interpolation),
                ("point gathers", point_gathers),
            ],
        })
    }

    /// Gathers at the vertices `order[range]`, chunk by chunk, into
    /// `sink` (a sample's irradiance at its index in `order`); returns the
    /// rays traced.
    fn run(
        &self,
        irradiance: &DeviceBuffer<PhotonMapView>,
        params: &DeviceBuffer<FrameParams>,
        vertices: &DeviceBuffer<GpuEyeVertex>,
        order: &DeviceBuffer<u32>,
        range: std::ops::Range<usize>,
        mut sink: GatherSink<'_>,
    ) -> Result<u64, GpuError> {
        let gpu = params.gpu();
        let mut tracer = self.scene.accel().tracer()?;
        let per_chunk = (GATHER_CHUNK_RAYS / self.rays_per as usize).max(1);
        let salt = match sink {
            GatherSink::Film => POINT_GATHER,
            GatherSink::Samples(_) => SAMPLE_GATHER,
        };
        let mut traced = 0;
        let mut first = range.start;
        while first < range.end {
            let chunk = GatherChunk {
                vertices,
                order,
                first,
                count: per_chunk.min(range.end - first),
                rays_per: self.rays_per,
                salt,
            };
            let slots = chunk.count * self.rays_per as usize;
            let mut results = DeviceBuffer::<f32>::zeroed(gpu, "gather results", 3 * slots)?;
            let mut distances = match sink {
                GatherSink::Film => None,
                GatherSink::Samples(_) => {
                    Some(DeviceBuffer::<f32>::zeroed(gpu, "gather distances", slots)?)
                }
            };
            let mut rays = DeviceBuffer::uninit(gpu, "gather rays", slots)?;
            let mut paths = DeviceBuffer::uninit(gpu, "gather paths", slots)?;
            gather_cuda::gather_emit(params, chunk, &mut rays, &mut paths)?;
            for _ in 0..=self.max_depth {
                if rays.is_empty() {
                    break;
                }
                let n = rays.len();
                let mut hits = DeviceBuffer::uninit(gpu, "gather hits", n)?;
                tracer.intersect(self.scene.accel(), &rays, &mut hits)?;
                traced += n as u64;
                let mut next_rays = DeviceBuffer::uninit(gpu, "gather next rays", n)?;
                let mut next_paths = DeviceBuffer::uninit(gpu, "gather next paths", n)?;
                let mut live = DeviceBuffer::uninit(gpu, "gather live flags", n)?;
                let targets = GatherTargets {
                    results: &mut results,
                    distances: distances.as_mut(),
                    rays: &mut next_rays,
                    paths: &mut next_paths,
                    live: &mut live,
                };
                gather_cuda::gather_step(params, irradiance, &rays, &hits, &paths, targets)?;
                let indices = select_indices(&live)?;
                rays = DeviceBuffer::uninit(gpu, "gather rays", indices.len())?;
                paths = DeviceBuffer::uninit(gpu, "gather paths", indices.len())?;
                gather_wave(&next_rays, &next_paths, &indices, &mut rays, &mut paths)?;
            }
            match (&mut sink, &distances) {
                (GatherSink::Samples(out), Some(distances)) => {
                    gather_cuda::sample_finish(chunk, &results, distances, out)?
                }
                _ => gather_cuda::gather_finish(params, chunk, &results)?,
            }
            first += chunk.count;
        }
        Ok(traced)
    }
}

/// IrradianceCache::build on the device: the samples at
/// `vertices[chosen[j]]` with their gathered irradiance, validity radii
/// from their nearest fellow samples, and the kd-tree over them.
fn sample_cache(
    vertices: &DeviceBuffer<GpuEyeVertex>,
    chosen: &DeviceBuffer<u32>,
    gathered: DeviceBuffer<[f32; 4]>,
    settings: &SampleSettings,
) -> Result<(GpuIrradianceSamples, GpuPointKdTree), GpuError> {
    let positions = gather_cuda::vertex_positions(vertices, chosen)?;
    let tree = GpuPointKdTree::build(&positions)?;
    let near = tree.knn(&positions, SPACING_NEIGHBOURS, f32::INFINITY)?;
    let ward = settings.ward_scale;
    let samples = gather_cuda::sample_frames(vertices, chosen, gathered, &near, ward, positions)?;
    Ok((samples, tree))
}

/// IrradianceCache::interpolate at every vertex of `order` (indirect light
/// into the framebuffer where samples cover it); returns the vertices no
/// sample covers, in `order`'s order.
fn interpolate(
    params: &DeviceBuffer<FrameParams>,
    vertices: &DeviceBuffer<GpuEyeVertex>,
    order: &DeviceBuffer<u32>,
    samples: &GpuIrradianceSamples,
    tree: &GpuPointKdTree,
    settings: &SampleSettings,
) -> Result<DeviceBuffer<u32>, GpuError> {
    let queries = gather_cuda::vertex_positions(vertices, order)?;
    let near = tree.knn(&queries, INTERPOLATION_NEIGHBOURS, samples.largest_radius)?;
    drop(queries);
    let cos = settings.normal_cos;
    let uncovered = gather_cuda::interpolate(params, vertices, order, &near, samples, cos)?;
    drop(near);
    gather_u32(order, &select_indices(&uncovered)?)
}

impl EstimateSteps<'_> {
    /// The Whitted waves' time with their collection, since the eye
    /// pass's start (the device synchronised just before).
    fn add_waves_time(&mut self) {
        let ms = self.eye_start.elapsed().as_secs_f64() * 1e3;
        self.add_stage("eye waves", ms);
    }

    /// Makes room for `n` more vertices at the end of
    /// [`Self::appended`]; returns where they go.
    fn append(&mut self, gpu: &caustic_gpu::Gpu, n: usize) -> Result<usize, GpuError> {
        let at = self.appended.as_ref().map_or(0, DeviceBuffer::len);
        let need = at + n;
        match &mut self.appended {
            Some(all) if all.capacity() >= need => all.set_len(need)?,
            slot => {
                let mut grown = DeviceBuffer::uninit(gpu, "eye vertices", need + need / 2)?;
                grown.truncate(at);
                if let Some(old) = slot.take() {
                    grown.copy_from_at(&old, 0)?;
                }
                grown.set_len(need)?;
                *slot = Some(grown);
            }
        }
        Ok(at)
    }

    /// Where no early launch took the primary wave's vertices by the last
    /// wave (the maps came later), puts them at the front of the frame's
    /// array, ahead of the later waves' (bounce by bounce, as a frame
    /// without early estimates has them): one launch over all vertices,
    /// its tiles costly first across the whole frame, ends sooner than the
    /// primary wave's launch beside the later waves', where each orders
    /// only its own tiles and the estimate stream, below the frame's,
    /// gets the multiprocessors as the other launch leaves them (H200,
    /// 2026-11-28: 7.7 ms for the two launches, 7.25 ms for one). The copy
    /// runs while the frame waits for the maps.
    fn merge_primary(&mut self, gpu: &caustic_gpu::Gpu) -> Result<(), GpuError> {
        let Some(early) = self.early.as_mut().filter(|e| e.launched.is_none()) else {
            return Ok(());
        };
        let Some(primary) = early.vertices.take() else {
            return Ok(());
        };
        let later = self.appended.take();
        let later_len = later.as_ref().map_or(0, DeviceBuffer::len);
        let primary_len = primary.len();
        let total = primary_len + later_len;
        let mut all = if primary.capacity() >= total {
            // The later waves' vertices into the room left after the
            // primary wave's: a copy of those alone.
            let mut all = primary.renamed("eye vertices");
            all.set_len(total)?;
            all
        } else {
            let mut all = DeviceBuffer::uninit(gpu, "eye vertices", total)?;
            all.copy_from_at(&primary, 0)?;
            all
        };
        if let Some(later) = &later {
            all.copy_from_at(later, primary_len)?;
        }
        if self.wave_lengths.is_empty() {
            self.wave_lengths.push(0);
        }
        self.wave_lengths[0] += primary_len as u64;
        self.appended = Some(all);
        Ok(())
    }

    /// Adds `ms` to the stage `name` (appended when new).
    fn add_stage(&mut self, name: &'static str, ms: f64) {
        match self.stages.iter_mut().find(|(n, _)| *n == name) {
            Some(stage) => stage.1 += ms,
            None => self.stages.push((name, ms)),
        }
    }
}

impl WaveSteps for EstimateSteps<'_> {
    /// The wave's diffuse ends flagged and selected, their count read with
    /// the wave's own: no wait of the collection's own.
    fn select(&mut self, wave: &ShadedWave, count: WaveCount<'_>) -> Result<(), GpuError> {
        let gpu = wave.params.gpu();
        let mut flags = DeviceBuffer::uninit(gpu, "eye vertex flags", wave.len)?;
        estimate_cuda::collect_flags(
            wave.params,
            wave.rays,
            wave.hits,
            wave.paths,
            wave.len,
            &mut flags,
        )?;
        let mut indices = DeviceBuffer::uninit(gpu, "eye vertex indices", wave.len)?;
        let slot = (count.counts, count.slot);
        select_indices_at(&flags, &mut indices, slot, count.scratch)?;
        self.selected = Some(indices);
        Ok(())
    }

    fn wave(&mut self, wave: &ShadedWave, count: u32) -> Result<(), GpuError> {
        let gpu = wave.params.gpu();
        let mut indices = self.selected.take().ok_or(GpuError::Invalid {
            what: "eye vertex collection",
            message: "a wave came without its selection".into(),
        })?;
        indices.truncate(count as usize);
        let slots = (wave.rays, wave.hits, wave.paths);
        if self.wave_lengths.len() <= wave.depth {
            self.wave_lengths.resize(wave.depth + 1, 0);
            self.runs.resize_with(wave.depth + 1, Vec::new);
        }
        let early = self
            .early
            .as_mut()
            .filter(|_| wave.depth == 0 && wave.chunks == 1);
        if let Some(early) = early.filter(|_| !indices.is_empty()) {
            // Not in the frame's array: estimated on their own.
            early.collect(wave, &indices)?;
        } else if !indices.is_empty() && wave.chunks == 1 {
            self.wave_lengths[wave.depth] += indices.len() as u64;
            let at = self.append(gpu, indices.len())?;
            let all = self.appended.as_mut().expect("append allocates");
            estimate_cuda::collect_at(wave.params, slots, &indices, all, at)?;
        } else if !indices.is_empty() {
            self.wave_lengths[wave.depth] += indices.len() as u64;
            let mut run = DeviceBuffer::uninit(gpu, "eye vertex run", indices.len())?;
            estimate_cuda::collect_at(wave.params, slots, &indices, &mut run, 0)?;
            self.runs[wave.depth].push(run);
        }
        // The maps may have come since the last wave: the estimates at the
        // primary wave's vertices start then, without waiting for them
        // (a wave's end that waited instead, 2026-11-28: 19.1-20.3 ms a
        // frame against 17.6-17.7, the later waves' shadow rays then
        // sharing the device with the estimates).
        if let Some(early) = &mut self.early {
            let sent = self.maps.is_sent();
            let views = if early.waits && early.vertices.is_some() {
                Some(self.maps.wait()?)
            } else {
                self.maps.ready()?
            };
            let came = sent && views.is_some();
            if let Some(views) = views {
                early.launch(wave.params, views, self.bounds)?;
            }
            if came {
                // Recorded as the last step records its wait: here none.
                self.add_stage("photon wait", 0.0);
            }
        }
        Ok(())
    }

    fn finish(&mut self, params: &DeviceBuffer<FrameParams>) -> Result<(), GpuError> {
        let gpu = params.gpu();
        let mut clock = StageClock::new(gpu)?;
        self.add_waves_time();
        self.merge_primary(gpu)?;
        let vertices = match self.appended.take() {
            Some(vertices) => vertices,
            None => {
                let total = self.runs.iter().flatten().map(DeviceBuffer::len).sum();
                let mut vertices = DeviceBuffer::uninit(gpu, "eye vertices", total)?;
                let mut offset = 0;
                for run in self.runs.iter().flatten() {
                    vertices.copy_from_at(run, offset)?;
                    offset += run.len();
                }
                vertices
            }
        };
        self.runs.clear();
        // A team's members hold their bands' vertices: merged wave by wave
        // in rank order, they are the single GPU's array on every member.
        let mut lengths = std::mem::take(&mut self.wave_lengths);
        lengths.resize(self.waves.max(lengths.len()), 0);
        let (vertices, pieces) = gather_device_runs(self.team, vertices, 0, &lengths)?;
        if self.team.size() > 1 {
            self.add_stage("vertex exchange", clock.lap()?);
        }
        let order = estimate_cuda::morton_order(&vertices, self.bounds.0, self.bounds.1)?;
        // Members of one process share the estimates and gathers by chunks
        // of all vertices, each into a whole image of its own; members of
        // separate processes take their own vertices.
        let whole = if self.team.size() > 1 && self.team.shares_memory() {
            Some(WholeFrame::new(params)?)
        } else {
            None
        };
        let own = match whole {
            Some(_) => Some(chunk_share(&order, self.team)?),
            None => own_order(&order, &own_pieces(&pieces, self.team.rank()), self.team)?,
        };
        let own = own.as_ref().unwrap_or(&order);
        let params_used = whole.as_ref().map_or(params, |w| &w.params);
        self.add_stage("vertex order", clock.lap()?);
        let sent = self.maps.is_sent();
        let maps = self.maps.wait()?;
        if let Some(early) = &mut self.early {
            early.launch(params, maps, self.bounds)?;
        }
        let views = DeviceBuffer::from_slice(gpu, "photon map views", maps)?;
        if sent {
            self.add_stage("photon wait", clock.lap()?);
        }
        let tiles = estimate_cuda::tile_order(&views, &vertices, own)?;
        self.add_stage("tile order", clock.lap()?);
        estimate_cuda::estimate(params_used, &views, &vertices, own, &tiles)?;
        drop(tiles);
        self.add_stage("estimates", clock.lap()?);
        if let Some(early) = self.early.as_ref().filter(|e| e.launched.is_some()) {
            // The framebuffer is read after this step: the early
            // estimates' additions first.
            gpu.wait_for(&early.gpu)?;
            self.add_stage("early estimates", clock.lap()?);
        }
        let sent = self.irradiance.is_sent();
        if let Some(gather) = self.gather.take() {
            // The samples' placement reads the eye vertices alone: it runs
            // before the wait for the precomputed irradiance.
            let chosen = gather.seed(params_used, &vertices)?;
            let mut ms = 0.0;
            if chosen.is_some() {
                ms = clock.lap()?;
                self.add_stage("seeding", ms);
            }
            let view = self.irradiance.wait()?.0.ok_or(GpuError::Invalid {
                what: "the final gather",
                message: "the photon pass precomputed no irradiance".into(),
            })?;
            let irradiance = DeviceBuffer::from_slice(gpu, "irradiance view", &[view])?;
            if sent {
                self.add_stage("irradiance wait", clock.lap()?);
            }
            let counts =
                gather.light(&irradiance, params_used, &vertices, own, chosen, self.team)?;
            ms += clock.lap()?;
            self.gather_ms += ms;
            self.gather_rays += counts.rays;
            self.gathered += counts.points;
            self.samples += counts.samples;
            if counts.stages.is_empty() {
                self.add_stage("final gather", ms);
            }
            for (name, ms) in counts.stages {
                self.add_stage(name, ms);
            }
        }
        // Without the final gather, for the photon stream's stats.
        self.irradiance.wait()?;
        if let Some(whole) = &whole {
            add_band_sums(self.team, params, &whole.sums, &self.band)?;
            self.add_stage("band sums", clock.lap()?);
        }
        Ok(())
    }
}

/// The photon stream's failure, as the eye pass's steps report it.
fn photon_stream_failed(message: String) -> GpuError {
    GpuError::Invalid {
        what: "the photon pass on its own stream",
        message,
    }
}

/// A team member's whole image: the frame's parameters with their
/// framebuffer moved to `sums` (three floats a pixel of the whole image),
/// for the work the members share by chunks rather than by bands.
struct WholeFrame {
    sums: DeviceBuffer<f32>,
    params: DeviceBuffer<FrameParams>,
}

impl WholeFrame {
    fn new(params: &DeviceBuffer<FrameParams>) -> Result<Self, GpuError> {
        let gpu = params.gpu();
        let mut frame = params
            .download()?
            .first()
            .copied()
            .ok_or(GpuError::LengthMismatch {
                operation: "whole-image sums",
                what: "frame parameters",
                expected: 1,
                actual: 0,
            })?;
        let pixels = frame.width as usize * frame.height as usize;
        let sums = DeviceBuffer::zeroed(gpu, "whole-image sums", 3 * pixels)?;
        frame.framebuffer = sums.device_ptr();
        let params = DeviceBuffer::from_slice(gpu, "whole-image frame", &[frame])?;
        Ok(Self { sums, params })
    }
}

/// Chunks of the Morton order per member, at least: enough that a costly
/// region (a caustic, seen by one band) spreads over every member.
const CHUNKS_PER_MEMBER: usize = 64;
/// Most vertices in a chunk: a chunk's memset per member stays cheap.
const MAX_CHUNK: usize = 1 << 16;

/// This member's vertices when a team shares them round-robin by chunks
/// of `order` (Morton order): chunk `c` goes to member `c mod size`. A
/// chunk is whole warps of 32 Morton neighbours, as the estimate's tiles
/// are on one GPU.
fn chunk_share(order: &DeviceBuffer<u32>, team: &dyn Team) -> Result<DeviceBuffer<u32>, GpuError> {
    let chunks = member_chunks(order.len(), team.size(), team.rank());
    gather_u32(order, &select_indices(&range_flags(order, chunks)?)?)
}

/// Member `rank`'s chunks of `0..n` among `members` ([`chunk_share`]).
fn member_chunks(n: usize, members: usize, rank: usize) -> impl Iterator<Item = Range<usize>> {
    let chunk = (n / (members.max(1) * CHUNKS_PER_MEMBER))
        .next_multiple_of(32)
        .clamp(32, MAX_CHUNK);
    (rank * chunk..n)
        .step_by(members.max(1) * chunk)
        .map(move |start| start..(start + chunk).min(n))
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

/// Renders one frame of `scene`, uploaded as `device` (with the structure
/// of the caller's choice), as one member of `team`: see
/// [`GpuPhotonRenderer::render_in_team`]. The root returns the whole
/// image, the other members `None`.
pub fn render_cuda_in_team(
    device: &GpuScene,
    scene: &RenderScene,
    camera: &Camera,
    settings: &PhotonRenderSettings,
    team: &dyn Team,
) -> Result<(Option<Film>, PhotonRenderStats), GpuPhotonError> {
    GpuPhotonRenderer::on(device, scene).render_in_team(camera, settings, team)
}

/// The settings the GPU path supports: the CPU's checks, plus precomputed
/// irradiance for the final gather, hash-grid maps and k within the GPU
/// heap's size.
pub fn check(settings: &PhotonRenderSettings) -> Result<(), PhotonRenderError> {
    settings.validate()?;
    let fail = |m: &str| Err(PhotonRenderError::Invalid(m.to_owned()));
    if settings.gather_rays > 0 && settings.precompute == 0 {
        return fail(
            "the GPU final gather reads irradiance precomputed at photons: set --precompute to 1 or more",
        );
    }
    if settings.points != "hashgrid" {
        return fail(
            "the GPU photon renderer indexes its maps with the hash grid: use --points hashgrid",
        );
    }
    let max_k = caustic_accel::points::hash_grid_cuda::MAX_K;
    if settings.k > max_k || settings.caustic_k > max_k {
        return fail(&format!(
            "the GPU estimate takes at most k = {max_k} photons"
        ));
    }
    Ok(())
}

/// The fine cell, in k-th neighbour distances at the map's
/// photon-weighted mean density ([`IndexedPhotons::build`]), of the maps
/// the estimates search by tiles (`tile_map_knn`: blocks of the tile's
/// cells and a margin of `TILE_FINE_MARGIN` cells).
pub const TILE_FINE_CELL_KTH: f64 = 1.2;

/// The fine cell, in k-th neighbour distances, of maps searched query by
/// query in shells of cells (the final gather's irradiance lookups): one
/// shell of 27 cells ends most searches.
pub const SHELL_FINE_CELL_KTH: f64 = 1.2;

/// The coarse limit of a caustic map's view ([`IndexedPhotons::caustic_view`]):
/// half of `points.cuh`'s `TILE_MAX_POINTS` (8192), so that a tile whose
/// coarse block holds at most 8192 photons streams that block
/// (`tile_map_knn` takes it up to twice the limit) instead of the default
/// 8 k. A caustic map is dense at its focus and sparse around it; its fine
/// cells, sized by the photon-weighted density (the focus), are too small
/// for the halo, whose tiles then stream fine blocks with margins 1 to 3
/// and fall back to the coarse block after all. Measured on the H200
/// (2026-11-28, `photon_gpu_bench 1000000 1920x1080 --no-cpu
/// --early-estimates off`, the estimates as one launch): 8.09-8.12 ms at
/// 8 k = 512 (k = 64), 7.25-7.28 ms at 4096; 128: 8.29, 256: 8.10, 1024:
/// 8.12, 2048: 8.09 ms (the halo's coarse blocks hold 4096-8192 photons);
/// the global map's limit at 256 or 1024 changed nothing.
pub const CAUSTIC_COARSE_LIMIT: u32 = 4096;

/// A photon map on the device with its two hash grids (see
/// [`PhotonMapView`]).
pub struct IndexedPhotons<'a> {
    photons: &'a DeviceBuffer<GpuPhoton>,
    /// The photons as the estimate reads them.
    shaded: DeviceBuffer<GpuShadedPhoton>,
    coarse: GpuHashGrid,
    /// `None`: the coarse cells are already about the k-th distance.
    fine: Option<GpuHashGrid>,
}

impl<'a> IndexedPhotons<'a> {
    /// Grids for kNN queries of `k` photons within `max_radius`. The fine
    /// cell is the k-th neighbour's distance, times `fine_cell_kth`
    /// ([`TILE_FINE_CELL_KTH`] or [`SHELL_FINE_CELL_KTH`]), at the density
    /// the photon-weighted mean occupancy of the coarse cells gives: a
    /// coarse cell of edge `c` cut by a surface holds about `σ c²` photons,
    /// and `π r² σ = k` at the k-th neighbour. So the dense parts of the
    /// map, where most photons and most costly queries are, get cells
    /// about the k-th distance: small blocks for the tiles, one shell of
    /// 27 cells for most searches query by query.
    pub fn build(
        photons: &'a DeviceBuffer<GpuPhoton>,
        max_radius: f32,
        k: usize,
        fine_cell_kth: f64,
    ) -> Result<Self, GpuError> {
        let mut one = Self::build_all(&[(photons, max_radius, k)], fine_cell_kth)?;
        Ok(one.pop().expect("one map in, one out"))
    }

    /// [`Self::build`] for each `(photons, max_radius, k)` of `maps` (all
    /// on one stream), step by step across the maps: the bounds of all,
    /// then the coarse grids and their occupancy, then the fine grids, so
    /// that the maps share the build's two waits for the device (bounds,
    /// occupancy) instead of each map waiting twice for its own: each
    /// wait leaves the stream idle while the host reads and queues the
    /// next step, on the photon side's way to the estimates.
    pub fn build_all(
        maps: &[(&'a DeviceBuffer<GpuPhoton>, f32, usize)],
        fine_cell_kth: f64,
    ) -> Result<Vec<Self>, GpuError> {
        let Some(&(first, _, _)) = maps.first() else {
            return Ok(Vec::new());
        };
        let gpu = first.gpu();
        let positions = maps
            .iter()
            .map(|&(photons, _, _)| trace_cuda::positions(photons))
            .collect::<Result<Vec<_>, _>>()?;
        let sets = positions.iter().collect::<Vec<_>>();
        let bounds = point_bounds(gpu, &sets)?;
        let coarse = maps
            .iter()
            .zip(&positions)
            .zip(&bounds)
            .map(|((&(_, max_radius, _), points), bounds)| {
                GpuHashGrid::build_within(points, max_radius, bounds)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let grids = coarse.iter().collect::<Vec<_>>();
        let occupancy = estimate_cuda::mean_occupancies(gpu, &grids)?;
        let mut built = Vec::with_capacity(maps.len());
        for (((&(photons, max_radius, k), points), coarse), occupancy) in
            maps.iter().zip(&positions).zip(coarse).zip(occupancy)
        {
            let cell = coarse.geometry().cell as f64;
            let density = occupancy / (cell * cell);
            let kth = (k as f64 / (std::f64::consts::PI * density.max(1e-30))).sqrt();
            let fine_cell = (fine_cell_kth * kth) as f32;
            let fine = if fine_cell < 0.7 * max_radius {
                let fine_cell = fine_cell.max(max_radius / 64.0);
                Some(coarse.with_radius(points, fine_cell)?)
            } else {
                None
            };
            built.push(Self {
                photons,
                shaded: estimate_cuda::shaded(photons)?,
                coarse,
                fine,
            });
        }
        Ok(built)
    }

    /// [`Self::view`] for a caustic map: the estimates' tiles take the
    /// coarse block (the cells of the radius around the tile's cells)
    /// whenever its photons fit one tile's stream, the fine blocks only
    /// beyond ([`CAUSTIC_COARSE_LIMIT`]). Same photons found.
    pub fn caustic_view(
        &self,
        k: usize,
        radius: f32,
        cone: bool,
    ) -> Result<PhotonMapView, GpuError> {
        let mut view = self.view(k, radius, cone)?;
        view.coarse_limit = view.coarse_limit.max(CAUSTIC_COARSE_LIMIT);
        Ok(view)
    }

    /// What the estimate kernel reads: `k` photons within `radius` (at most
    /// the build's radius), cone filter or not.
    pub fn view(&self, k: usize, radius: f32, cone: bool) -> Result<PhotonMapView, GpuError> {
        let fine = self.fine.as_ref().unwrap_or(&self.coarse);
        let mut view = PhotonMapView::new(
            &self.coarse,
            fine,
            self.photons,
            &self.shaded,
            k as u32,
            radius,
            cone,
        )?;
        if self.fine.is_none() {
            view.coarse_limit = u32::MAX;
        }
        Ok(view)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_chunks_cover_the_vertices_once_in_whole_warps() {
        for n in [0, 1, 31, 32, 1000, 70_001, 9_000_000] {
            for members in 1..=5 {
                let mut owner = vec![usize::MAX; n];
                for rank in 0..members {
                    for chunk in member_chunks(n, members, rank) {
                        assert!(chunk.start % 32 == 0, "a chunk starts mid-warp");
                        for i in chunk {
                            assert_eq!(owner[i], usize::MAX, "vertex {i} shared twice");
                            owner[i] = rank;
                        }
                    }
                }
                assert!(owner.iter().all(|&o| o < members), "a vertex left out");
                // Large frames spread over every member.
                if n >= members * CHUNKS_PER_MEMBER * 32 {
                    for rank in 0..members {
                        let mine = owner.iter().filter(|&&o| o == rank).count();
                        assert!(mine * members * 2 > n, "member {rank} got {mine} of {n}");
                    }
                }
            }
        }
    }
}
