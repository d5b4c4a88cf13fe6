//! The Whitted ray tracer of [`crate::whitted`] on a CUDA GPU, as a
//! wavefront (Zeidan's thesis, chapter 5): the image is a queue of rays, and
//! every bounce runs one kernel per stage over the whole queue.
//!
//! 1. Primary rays, `spp` per pixel, in Morton order inside 8×8 tiles,
//!    traced in chunks of tiles that fit the device's memory (each chunk
//!    to its last bounce), so a frame of any size and sample count renders.
//! 2. Per bounce: closest-hit traversal (`caustic_gpu::Tracer`, the same
//!    persistent kernel and bits as the CPU traversal); one shading kernel
//!    adds emission and background to a device framebuffer and writes, per
//!    ray, two child slots (mirror reflection, or the Fresnel split of a
//!    dielectric, weak branches by Russian roulette) and one shadow slot per
//!    point/spot/directional light and `light_samples` per area light;
//!    stream compaction keeps the flagged slots (the children's, the shadow
//!    rays' and an extra step's selections queued together, their counts
//!    read with one wait a bounce); the shadow rays are traced any-hit and
//!    the unoccluded ones added; the children are the next bounce's queue.
//! 3. The framebuffer stays on the device until the final image is
//!    downloaded once.
//!
//! Every random number comes from [`crate::draw`], keyed by pixel,
//! sample and branch path, so the GPU image equals the CPU image up to
//! floating-point rounding in shading (contraction to FMA, the order of the
//! framebuffer's atomic additions).
//!
//! The scene's own accelerator is a `dyn Accel`, which cannot be uploaded;
//! the renderer builds a structure on the device (`DeviceAccel` by a
//! `GpuAccelSpec`, default `bvh-binned`) over the scene triangles. Hits do
//! not depend on the tree: the traversal returns the closest hit, ties to
//! the lowest triangle id, as every CPU accelerator.

use std::time::Instant;

use caustic_accel::bvh::device_accel_cuda::{AccelTracer, DeviceAccel, GpuAccelSpec};
use caustic_accel::bvh::traverse_cuda::{GpuHit, GpuRay};
use caustic_geom::Rgb;
use caustic_gpu::ops::compact::{SelectScratch, gather_wave, select_indices_at};
use caustic_gpu::ops::launch_per_element as launch;
use caustic_gpu::{DeviceBuffer, Gpu, GpuError, PinnedBuffer};
use caustic_scene::Camera;
use std::sync::Mutex;

use crate::kernels::whitted_render as k;
use crate::scene_cuda::{DeviceScene, FrameParams, GpuPath, MovedUpload};
use crate::team::{Team, TileBand, band_film_to_root, sum_u64};
use crate::team_cuda::GpuTeamError;
use crate::whitted::{FresnelMode, RenderStats, WhittedSettings};
use crate::{Film, RenderScene};

/// Renders `scene` through `camera` on `gpu`; the same image as
/// [`crate::whitted::render`] with the same settings. The time in the stats
/// includes building and uploading the scene; [`GpuScene::render`] renders
/// more frames of an uploaded scene.
pub fn render(
    gpu: &Gpu,
    scene: &RenderScene,
    camera: &Camera,
    settings: &WhittedSettings,
) -> Result<(Film, RenderStats), GpuError> {
    let start = Instant::now();
    let (film, mut stats) = GpuScene::upload(gpu, scene)?.render(camera, settings)?;
    stats.seconds = start.elapsed().as_secs_f64();
    Ok((film, stats))
}

/// Renders like [`GpuScene::render`] as one member of `team` (one GPU
/// each, or one MPI rank each; see [`crate::team`]): each member renders
/// the band of 8-pixel tile rows [`TileBand::of`] gives it
/// ([`GpuScene::render_band`]), and the bands are concatenated in rank
/// order on the root through the host (12 bytes a pixel, small against
/// the work): the root returns the whole image, the other members `None`. A pixel's contributions are the
/// single GPU's, computed by the member that owns its row; only the order
/// of the framebuffer's atomic additions may differ, as it may between
/// two runs on one GPU (a relative difference of at most about n·ε for a
/// pixel's n non-negative contributions). Statistics count the whole
/// team's rays.
pub fn render_cuda_in_team(
    device: &GpuScene,
    camera: &Camera,
    settings: &WhittedSettings,
    team: &dyn Team,
) -> Result<(Option<Film>, RenderStats), GpuTeamError> {
    let start = Instant::now();
    let band = TileBand::of(team, settings.width, settings.height);
    let (mine, mut stats) = device.render_band(camera, settings, &band, &mut ())?;
    let film = band_film_to_root(team, (settings.width, settings.height), mine)?;
    stats.rays = sum_u64(team, &[stats.rays])?[0];
    stats.seconds = start.elapsed().as_secs_f64();
    Ok((film, stats))
}

/// A display frame's buffer must hold three bytes a pixel of the image.
pub(crate) fn check_display_bytes(
    (width, height): (u32, u32),
    out: &PinnedBuffer<u8>,
) -> Result<(), GpuError> {
    let bytes = 3 * width as usize * height as usize;
    if out.len() != bytes {
        return Err(GpuError::LengthMismatch {
            operation: "display frame",
            what: "sRGB bytes",
            expected: bytes,
            actual: out.len(),
        });
    }
    Ok(())
}

/// A scene on the device, ready to render frames from any camera.
pub struct GpuScene {
    device: DeviceScene,
    /// Page-locked host memory the image is downloaded into, kept from
    /// frame to frame (a pageable copy runs at a fraction of the link's
    /// speed: 7 ms against under 1 ms for a 1024x1024 image on an H100).
    staging: Mutex<Option<PinnedBuffer<f32>>>,
    /// [`crate::image_io::srgb_step_table`] on the device, for
    /// [`Self::render_display`] (uploaded at its first frame).
    display_steps: Mutex<Option<DeviceBuffer<f32>>>,
    /// The most primary slots traced at once ([`Self::set_max_primary_slots`]);
    /// `None`: as many as a quarter of the free memory holds.
    max_primary_slots: Option<usize>,
}

/// Device bytes a frame's bounce holds per primary slot, its waves no
/// longer than the primary wave: the wave (rays, paths, hits), two child
/// slots (rays, paths, flags) and the next wave, `shadow_slots` shadow
/// slots (rays, values, flags) with their compacted copies and indices.
fn bytes_per_primary_slot(shadow_slots: u32) -> usize {
    use std::mem::size_of;
    let (ray, path, hit) = (
        size_of::<GpuRay>(),
        size_of::<GpuPath>(),
        size_of::<GpuHit>(),
    );
    let shadow = size_of::<GpuRay>() + size_of::<[f32; 4]>() + size_of::<u32>();
    (ray + path + hit)
        + 2 * (ray + path + 4)
        + (ray + path + 4)
        + shadow_slots as usize * (2 * shadow + 4)
}

impl GpuScene {
    /// Builds the default GPU structure and uploads the scene.
    pub fn upload(gpu: &Gpu, scene: &RenderScene) -> Result<Self, GpuError> {
        Self::upload_with(gpu, scene, &GpuAccelSpec::default())
    }

    /// Builds the structure `spec` names on the device and uploads the scene.
    pub fn upload_with(
        gpu: &Gpu,
        scene: &RenderScene,
        spec: &GpuAccelSpec,
    ) -> Result<Self, GpuError> {
        Ok(Self {
            device: DeviceScene::upload_with(gpu, scene, spec)?,
            staging: Mutex::new(None),
            display_steps: Mutex::new(None),
            max_primary_slots: None,
        })
    }

    /// Caps the primary slots (pixels × samples, in whole 8×8 tiles) a
    /// frame traces at once; `None` (the default) sizes the chunks by the
    /// device's free memory, so a frame of any size and sample count fits.
    /// The image does not depend on it, up to the order of the
    /// framebuffer's additions.
    pub fn set_max_primary_slots(&mut self, slots: Option<usize>) {
        self.max_primary_slots = slots;
    }

    /// Primary slots per chunk of a frame: the cap, else a quarter of the
    /// free memory over [`bytes_per_primary_slot`] (the quarter leaves room
    /// for waves that grow, glass splitting a ray in two).
    fn chunk_slots(&self, shadow_slots: u32) -> Result<usize, GpuError> {
        if let Some(slots) = self.max_primary_slots {
            return Ok(slots.max(1));
        }
        let (free, _) = self.gpu().memory()?;
        Ok(free / 4 / bytes_per_primary_slot(shadow_slots))
    }

    /// One frame: every bounce on the device, one download at the end. The
    /// stats' time is the frame's wall time, download included.
    pub fn render(
        &self,
        camera: &Camera,
        settings: &WhittedSettings,
    ) -> Result<(Film, RenderStats), GpuError> {
        self.render_with(camera, settings, &mut ())
    }

    /// [`Self::render`] with `extra`'s steps run on every traced wave after
    /// its shading and on the framebuffer before its download (the photon
    /// mapper collects its eye vertices, then adds its estimates there).
    pub fn render_with(
        &self,
        camera: &Camera,
        settings: &WhittedSettings,
        extra: &mut dyn WaveSteps,
    ) -> Result<(Film, RenderStats), GpuError> {
        let band = TileBand::whole(settings.width, settings.height);
        let (pixels, stats) = self.render_band(camera, settings, &band, extra)?;
        let film = Film {
            width: settings.width,
            height: settings.height,
            pixels,
        };
        Ok((film, stats))
    }

    /// [`Self::render_with`] for the pixels of `band` alone (a team
    /// member's rows; see [`render_cuda_in_team`]): its primary rays are
    /// the whole image's slots of the band's tiles, and its framebuffer
    /// holds the band's pixels only (the kernels' pixel numbers are the
    /// image's: the framebuffer's address handed to them is moved back by
    /// the band's first pixel, and no kernel writes outside the band).
    /// Returns the band's pixels, row by row.
    pub fn render_band(
        &self,
        camera: &Camera,
        settings: &WhittedSettings,
        band: &TileBand,
        extra: &mut dyn WaveSteps,
    ) -> Result<(Vec<Rgb>, RenderStats), GpuError> {
        let start = Instant::now();
        let (framebuffer, rays) = self.trace_band(camera, settings, band, extra)?;
        let download_start = Instant::now();
        let film = self.download(&framebuffer, settings)?;
        let stats = RenderStats {
            seconds: start.elapsed().as_secs_f64(),
            rays,
            download_ms: download_start.elapsed().as_secs_f64() * 1e3,
        };
        Ok((film, stats))
    }

    /// [`Self::render_with`] for a display: the whole image as 8-bit sRGB
    /// into `out` (three bytes a pixel, row by row, the bytes
    /// [`crate::image_io::srgb_bytes`] gives for the film and `exposure`),
    /// converted on the device so that a third of the f32 frame's bytes
    /// cross the bus and no host pass touches the pixels. `out` is the
    /// caller's page-locked buffer, kept from frame to frame and read in
    /// place. The stats' `download_ms` is the conversion and the copy.
    pub fn render_display(
        &self,
        camera: &Camera,
        settings: &WhittedSettings,
        extra: &mut dyn WaveSteps,
        exposure: f32,
        out: &mut PinnedBuffer<u8>,
    ) -> Result<RenderStats, GpuError> {
        let start = Instant::now();
        check_display_bytes((settings.width, settings.height), out)?;
        let band = TileBand::whole(settings.width, settings.height);
        let (framebuffer, rays) = self.trace_band(camera, settings, &band, extra)?;
        let download_start = Instant::now();
        let mut steps = self.display_steps.lock().unwrap_or_else(|e| e.into_inner());
        let steps = match &mut *steps {
            Some(steps) => steps,
            other => other.insert(srgb_steps_on(self.gpu())?),
        };
        let bytes = srgb_bytes_on_device(&framebuffer, settings.spp, exposure, steps)?;
        out.download_from(&bytes)?;
        Ok(RenderStats {
            seconds: start.elapsed().as_secs_f64(),
            rays,
            download_ms: download_start.elapsed().as_secs_f64() * 1e3,
        })
    }

    /// The band's frame on the device: every chunk's waves, then
    /// `extra`'s last step; returns the framebuffer (three sums a pixel of
    /// the band) once the device is idle, and the rays traced.
    fn trace_band(
        &self,
        camera: &Camera,
        settings: &WhittedSettings,
        band: &TileBand,
        extra: &mut dyn WaveSteps,
    ) -> Result<(DeviceBuffer<f32>, u64), GpuError> {
        let gpu = self.device.gpu();
        let pixels = band.pixel_count();
        let framebuffer = DeviceBuffer::<f32>::zeroed(gpu, "whitted framebuffer", 3 * pixels)?;
        let origin = framebuffer
            .device_ptr()
            .wrapping_sub(12 * u64::from(band.pixels.start));
        let params = self.params(camera, settings, origin);
        let params = DeviceBuffer::from_slice(gpu, "whitted params", &[params])?;
        let mut frame = Frame {
            tracer: self.device.accel.tracer()?,
            accel: &self.device.accel,
            params: &params,
            shadow_slots: self.shadow_slots(settings.light_samples),
            rays: (pixels * settings.spp.max(1) as usize) as u64,
            chunks: 1,
            counts: DeviceBuffer::zeroed(gpu, "whitted wave counts", WAVE_COUNTS)?,
            scratch: None,
        };
        // The band's tiles in chunks whose waves fit the device's memory:
        // each chunk's rays are traced to the last bounce before the next
        // chunk starts, into the same framebuffer.
        let per_tile = 64 * settings.spp.max(1) as usize;
        let chunk_tiles = (self.chunk_slots(frame.shadow_slots)? / per_tile).max(1) as u32;
        frame.chunks = band.tiles.div_ceil(chunk_tiles) as usize;
        let band_end = band.first_tile + band.tiles;
        let mut first_tile = band.first_tile;
        while first_tile < band_end {
            let tiles = chunk_tiles.min(band_end - first_tile);
            let mut wave = frame.primary(first_tile, tiles as usize * per_tile)?;
            for depth in 0..=settings.max_depth as usize {
                if wave.rays.is_empty() {
                    break;
                }
                wave = frame.bounce(&wave, depth, extra)?;
            }
            first_tile += tiles;
        }
        extra.finish(&params)?;
        // The kernels' end: what follows is the frame's download alone.
        gpu.synchronize()?;
        Ok((framebuffer, frame.rays))
    }

    /// Shadow rays a shaded point casts: one per point, spot or directional
    /// light, `light_samples` per area light.
    pub fn shadow_slots(&self, light_samples: u32) -> u32 {
        let d = &self.device;
        (d.light_count + d.area_count * light_samples.max(1) as usize) as u32
    }

    /// The device the scene lives on.
    pub fn gpu(&self) -> &Gpu {
        self.device.gpu()
    }

    /// The structure the scene's rays are traced against, with its build stats.
    pub fn accel(&self) -> &DeviceAccel {
        &self.device.accel
    }

    /// The structure, to rebuild or refit it after
    /// [`GpuScene::upload_moved`].
    pub fn accel_mut(&mut self) -> &mut DeviceAccel {
        &mut self.device.accel
    }

    /// Follows `scene` reposed: see [`DeviceScene::upload_moved`].
    pub fn upload_moved(
        &mut self,
        scene: &RenderScene,
        moved: &[std::ops::Range<usize>],
    ) -> Result<MovedUpload, GpuError> {
        self.device.upload_moved(scene, moved)
    }

    /// The scene arrays' addresses with no camera and no framebuffer: what
    /// kernels that trace from the lights read.
    pub fn scene_params(&self) -> FrameParams {
        self.device.scene_params()
    }

    /// The frame's parameters: the scene's arrays, the camera, `settings`
    /// and the framebuffer's address.
    pub fn params(
        &self,
        camera: &Camera,
        settings: &WhittedSettings,
        framebuffer: u64,
    ) -> FrameParams {
        // PinholeCamera's frame, with the half extents folded in.
        let (forward, right, up) = camera.frame();
        let (tx, ty) = camera.half_extents(settings.width as f32 / settings.height as f32);
        FrameParams {
            framebuffer,
            seed: settings.seed,
            eye: camera.eye.to_array(),
            forward: forward.to_array(),
            width: settings.width,
            right: (right * tx).to_array(),
            height: settings.height,
            up: (up * ty).to_array(),
            spp: settings.spp.max(1),
            max_depth: settings.max_depth,
            light_samples: light_samples(settings) as u32,
            schlick: u32::from(settings.fresnel == FresnelMode::Schlick),
            ..self.scene_params()
        }
    }
}

fn light_samples(settings: &WhittedSettings) -> usize {
    settings.light_samples.max(1) as usize
}

/// The rays of one bounce and their paths, slot for slot.
struct Wave {
    rays: DeviceBuffer<GpuRay>,
    paths: DeviceBuffer<GpuPath>,
}

/// One traced and shaded wave of eye rays, as [`GpuScene::render_with`]
/// hands it to its `extra` step: slots `0..len` of `rays`, `hits`, `paths`.
/// A frame traced in chunks of tiles hands each bounce once per chunk:
/// the waves of one `depth`, in chunk order, are that bounce's wave of the
/// frame traced at once, slot for slot.
pub struct ShadedWave<'a> {
    pub params: &'a DeviceBuffer<FrameParams>,
    pub rays: &'a DeviceBuffer<GpuRay>,
    pub hits: &'a DeviceBuffer<GpuHit>,
    pub paths: &'a DeviceBuffer<GpuPath>,
    pub len: usize,
    /// The bounce: 0 for the primary rays.
    pub depth: usize,
    /// The frame's chunks of tiles: with one, the waves come bounce by
    /// bounce, each bounce once.
    pub chunks: usize,
}

/// Extra steps of a frame ([`GpuScene::render_with`]).
pub trait WaveSteps {
    /// Runs on every wave after its shading, before the frame reads the
    /// wave's counts: queues the step's own selection, if it has one, with
    /// its count into `count`'s slot, without waiting for the device (the
    /// frame reads every count of a bounce with one wait).
    fn select(&mut self, _wave: &ShadedWave, _count: WaveCount<'_>) -> Result<(), GpuError> {
        Ok(())
    }
    /// Runs on every wave after that wait: `count` is what [`Self::select`]
    /// left in its slot (0 if it left nothing).
    fn wave(&mut self, wave: &ShadedWave, count: u32) -> Result<(), GpuError>;
    /// Runs once after the last wave, before the image is downloaded.
    fn finish(&mut self, _params: &DeviceBuffer<FrameParams>) -> Result<(), GpuError> {
        Ok(())
    }
}

/// Where an extra step's selection on a wave ([`WaveSteps::select`])
/// leaves its count: a slot of the bounce's count buffer, with the
/// look-back scratch the bounce's selections share (long enough for the
/// wave's slots).
pub struct WaveCount<'a> {
    pub counts: &'a mut DeviceBuffer<u32>,
    pub slot: usize,
    pub scratch: &'a mut SelectScratch,
}

/// No extra steps.
impl WaveSteps for () {
    fn wave(&mut self, _: &ShadedWave, _: u32) -> Result<(), GpuError> {
        Ok(())
    }
}

/// The slots of a bounce's counts ([`Frame::counts`]): the children kept,
/// the shadow rays kept, and the extra step's selection.
const CHILD_COUNT: usize = 0;
const SHADOW_COUNT: usize = 1;
const EXTRA_COUNT: usize = 2;
const WAVE_COUNTS: usize = 3;

/// What every bounce of one frame shares.
struct Frame<'a> {
    tracer: AccelTracer,
    accel: &'a DeviceAccel,
    params: &'a DeviceBuffer<FrameParams>,
    shadow_slots: u32,
    /// Rays traced so far: primary, specular and shadow.
    rays: u64,
    /// Chunks of tiles the frame is traced in ([`ShadedWave::chunks`]).
    chunks: usize,
    /// A bounce's kept counts ([`CHILD_COUNT`], [`SHADOW_COUNT`],
    /// [`EXTRA_COUNT`]): its selections are queued together and read with
    /// one wait, where each used to wait on its own (five waits a bounce
    /// with the photon mapper's collection and its stage clock, each
    /// draining the device; the late bounces' few rays are all latency).
    counts: DeviceBuffer<u32>,
    /// The selections' look-back scratch and the longest input it takes.
    scratch: Option<(SelectScratch, usize)>,
}

impl Frame<'_> {
    fn gpu(&self) -> &Gpu {
        self.params.gpu()
    }

    /// The primary rays of `n` slots, the tiles from `first_tile` on.
    fn primary(&self, first_tile: u32, n: usize) -> Result<Wave, GpuError> {
        let mut wave = Wave {
            rays: DeviceBuffer::uninit(self.gpu(), "whitted primary rays", n)?,
            paths: DeviceBuffer::uninit(self.gpu(), "whitted primary paths", n)?,
        };
        primary(self.params, first_tile, &mut wave.rays, &mut wave.paths)?;
        Ok(wave)
    }

    /// Traces and shades `wave`, adds its direct light, and returns the
    /// compacted children.
    fn bounce(
        &mut self,
        wave: &Wave,
        depth: usize,
        extra: &mut dyn WaveSteps,
    ) -> Result<Wave, GpuError> {
        let gpu = self.gpu().clone();
        let n = wave.rays.len();
        let mut hits = DeviceBuffer::<GpuHit>::uninit(&gpu, "whitted hits", n)?;
        self.tracer.intersect(self.accel, &wave.rays, &mut hits)?;
        let slots = n * self.shadow_slots as usize;
        let mut children = Wave {
            rays: DeviceBuffer::uninit(&gpu, "whitted child rays", 2 * n)?,
            paths: DeviceBuffer::uninit(&gpu, "whitted child paths", 2 * n)?,
        };
        let mut child_flags = DeviceBuffer::uninit(&gpu, "whitted child flags", 2 * n)?;
        let mut shadow_rays = DeviceBuffer::uninit(&gpu, "whitted shadow rays", slots)?;
        let mut shadow_values = DeviceBuffer::uninit(&gpu, "whitted shadow values", slots)?;
        let mut shadow_flags = DeviceBuffer::uninit(&gpu, "whitted shadow flags", slots)?;
        let targets = ShadeTargets {
            child_rays: &mut children.rays,
            child_paths: &mut children.paths,
            child_flags: &mut child_flags,
            shadow_rays: &mut shadow_rays,
            shadow_values: &mut shadow_values,
            shadow_flags: &mut shadow_flags,
        };
        shade(
            self.params,
            &wave.rays,
            &hits,
            &wave.paths,
            n,
            self.shadow_slots,
            targets,
        )?;
        let shaded = ShadedWave {
            params: self.params,
            rays: &wave.rays,
            hits: &hits,
            paths: &wave.paths,
            len: n,
            depth,
            chunks: self.chunks,
        };
        let mut child_indices = DeviceBuffer::uninit(&gpu, "whitted child indices", 2 * n)?;
        let mut shadow_indices = DeviceBuffer::uninit(&gpu, "whitted shadow indices", slots)?;
        let scratch = match &mut self.scratch {
            Some((scratch, len)) if *len >= slots.max(2 * n) => scratch,
            other => {
                let len = slots.max(2 * n);
                &mut other.insert((SelectScratch::new(&gpu, len)?, len)).0
            }
        };
        let counts = &mut self.counts;
        select_indices_at(
            &child_flags,
            &mut child_indices,
            (counts, CHILD_COUNT),
            scratch,
        )?;
        select_indices_at(
            &shadow_flags,
            &mut shadow_indices,
            (counts, SHADOW_COUNT),
            scratch,
        )?;
        let slot = EXTRA_COUNT;
        extra.select(
            &shaded,
            WaveCount {
                counts,
                slot,
                scratch,
            },
        )?;
        // The bounce's one wait.
        let kept = self.counts.download()?;
        extra.wave(&shaded, kept[EXTRA_COUNT])?;
        drop(hits);
        shadow_indices.truncate(kept[SHADOW_COUNT] as usize);
        if !shadow_indices.is_empty() {
            self.shadows(&shadow_rays, &shadow_values, &shadow_indices)?;
        }
        child_indices.truncate(kept[CHILD_COUNT] as usize);
        self.compact_children(&children, &child_indices)
    }

    /// Traces the kept shadow slots `indices` any-hit and adds the
    /// unoccluded contributions.
    fn shadows(
        &mut self,
        rays: &DeviceBuffer<GpuRay>,
        values: &DeviceBuffer<[f32; 4]>,
        indices: &DeviceBuffer<u32>,
    ) -> Result<(), GpuError> {
        let gpu = self.gpu().clone();
        let n = indices.len();
        let mut live_rays = DeviceBuffer::uninit(&gpu, "whitted live shadow rays", n)?;
        let mut live_values = DeviceBuffer::uninit(&gpu, "whitted live shadow values", n)?;
        gather_shadows(rays, values, indices, n, &mut live_rays, &mut live_values)?;
        let mut occluded = DeviceBuffer::uninit(&gpu, "whitted occlusion", n)?;
        self.tracer
            .occluded(self.accel, &live_rays, &mut occluded)?;
        shadow_add(self.params, &occluded, &live_values, n)?;
        self.rays += n as u64;
        Ok(())
    }

    /// The kept children `indices`, compacted into the next bounce's wave.
    fn compact_children(
        &mut self,
        children: &Wave,
        indices: &DeviceBuffer<u32>,
    ) -> Result<Wave, GpuError> {
        let gpu = self.gpu().clone();
        let n = indices.len();
        let mut next = Wave {
            rays: DeviceBuffer::uninit(&gpu, "whitted rays", n)?,
            paths: DeviceBuffer::uninit(&gpu, "whitted paths", n)?,
        };
        gather_wave(
            &children.rays,
            &children.paths,
            indices,
            &mut next.rays,
            &mut next.paths,
        )?;
        self.rays += n as u64;
        Ok(next)
    }
}

/// The framebuffer's sums over samples, averaged.
impl GpuScene {
    /// The framebuffer's sums as pixels, through the pinned staging
    /// buffer (allocated at the first frame of its size).
    fn download(
        &self,
        framebuffer: &DeviceBuffer<f32>,
        settings: &WhittedSettings,
    ) -> Result<Vec<Rgb>, GpuError> {
        let mut staging = self.staging.lock().unwrap_or_else(|e| e.into_inner());
        let buffer = match &mut *staging {
            Some(buffer) if buffer.len() == framebuffer.len() => buffer,
            other => other.insert(PinnedBuffer::zeroed(self.gpu(), framebuffer.len())?),
        };
        buffer.download_from(framebuffer)?;
        Ok(film_of(buffer.as_slice(), settings))
    }
}

/// [`crate::image_io::srgb_step_table`] on `gpu`, for
/// [`srgb_bytes_on_device`].
pub fn srgb_steps_on(gpu: &Gpu) -> Result<DeviceBuffer<f32>, GpuError> {
    DeviceBuffer::from_slice(gpu, "sRGB steps", crate::image_io::srgb_step_table())
}

/// The 8-bit sRGB bytes of a framebuffer's sums over `spp` samples at
/// `exposure`, on the device: for each value the byte
/// [`crate::image_io::srgb_bytes`] gives for the film [`GpuScene::render`]
/// downloads (the sum over `spp`, non-finite black, scaled by
/// `2^exposure`, the sRGB byte by `steps`, [`srgb_steps_on`]), to the bit.
pub fn srgb_bytes_on_device(
    sums: &DeviceBuffer<f32>,
    spp: u32,
    exposure: f32,
    steps: &DeviceBuffer<f32>,
) -> Result<DeviceBuffer<u8>, GpuError> {
    let values = sums.len();
    if steps.len() != 255 {
        return Err(GpuError::LengthMismatch {
            operation: "sRGB display bytes",
            what: "sRGB steps",
            expected: 255,
            actual: steps.len(),
        });
    }
    let count = u32::try_from(values).map_err(|_| GpuError::TooLarge {
        operation: "sRGB display bytes",
        len: values,
        max: u32::MAX as usize,
    })?;
    let mut bytes = DeviceBuffer::<u8>::uninit(sums.gpu(), "display bytes", values)?;
    launch(
        sums.gpu(),
        k::WHITTED_DISPLAY_SRGB,
        values,
        (
            sums.ptr(),
            count,
            spp.max(1) as f32,
            exposure.exp2(),
            steps.ptr(),
            bytes.ptr_mut(),
        ),
    )?;
    Ok(bytes)
}

/// The pixels of the framebuffer's sums over `settings.spp` samples.
/// One pass over the pixels on all cores, writing each once (a film
/// zeroed first, then filled, costs two passes over 12 MB at 1024x1024).
fn film_of(sums: &[f32], settings: &WhittedSettings) -> Vec<Rgb> {
    use rayon::prelude::*;
    let spp = settings.spp.max(1) as f32;
    sums.par_chunks_exact(3)
        .with_min_len(4096)
        .map(|sum| Rgb::new(sum[0], sum[1], sum[2]) / spp)
        .collect()
}

// ------------------------------------------------------------------ launches

/// The number of primary slots for an image: whole 8x8 tiles, `spp` slots
/// per pixel (padding slots of partial tiles trace nothing).
pub fn primary_slots(width: u32, height: u32, spp: u32) -> usize {
    width.div_ceil(8) as usize * height.div_ceil(8) as usize * 64 * spp as usize
}

/// Primary rays and paths for every slot of `rays` (Morton order inside 8x8
/// tiles, `spp` consecutive slots per pixel), the tiles from `first_tile`
/// on.
pub fn primary(
    params: &DeviceBuffer<FrameParams>,
    first_tile: u32,
    rays: &mut DeviceBuffer<GpuRay>,
    paths: &mut DeviceBuffer<GpuPath>,
) -> Result<(), GpuError> {
    let n = rays.len();
    launch(
        params.gpu(),
        k::WHITTED_PRIMARY,
        n,
        (
            params.ptr(),
            first_tile,
            rays.ptr_mut(),
            paths.ptr_mut(),
            n as u32,
        ),
    )
}

/// Where [`shade`] writes: two child slots and `shadow_slots` shadow slots
/// per shaded path, each with its compaction flag.
pub struct ShadeTargets<'a> {
    pub child_rays: &'a mut DeviceBuffer<GpuRay>,
    pub child_paths: &'a mut DeviceBuffer<GpuPath>,
    pub child_flags: &'a mut DeviceBuffer<u32>,
    pub shadow_rays: &'a mut DeviceBuffer<GpuRay>,
    /// `xyz`: weighted contribution, `w`: the pixel's bits.
    pub shadow_values: &'a mut DeviceBuffer<[f32; 4]>,
    pub shadow_flags: &'a mut DeviceBuffer<u32>,
}

/// Shades the first `n` paths: emission and background into the
/// framebuffer, children and shadow rays into `out`.
pub fn shade(
    params: &DeviceBuffer<FrameParams>,
    rays: &DeviceBuffer<GpuRay>,
    hits: &DeviceBuffer<GpuHit>,
    paths: &DeviceBuffer<GpuPath>,
    n: usize,
    shadow_slots: u32,
    out: ShadeTargets<'_>,
) -> Result<(), GpuError> {
    launch(
        params.gpu(),
        k::WHITTED_SHADE,
        n,
        (
            params.ptr(),
            rays.ptr(),
            hits.ptr(),
            paths.ptr(),
            n as u32,
            shadow_slots,
            out.child_rays.ptr_mut(),
            out.child_paths.ptr_mut(),
            out.child_flags.ptr_mut(),
            out.shadow_rays.ptr_mut(),
            out.shadow_values.ptr_mut(),
            out.shadow_flags.ptr_mut(),
        ),
    )
}

/// `out[i] = input[indices[i]]` for shadow rays and values, `i < n`.
pub fn gather_shadows(
    rays: &DeviceBuffer<GpuRay>,
    values: &DeviceBuffer<[f32; 4]>,
    indices: &DeviceBuffer<u32>,
    n: usize,
    out_rays: &mut DeviceBuffer<GpuRay>,
    out_values: &mut DeviceBuffer<[f32; 4]>,
) -> Result<(), GpuError> {
    launch(
        rays.gpu(),
        k::WHITTED_GATHER_SHADOWS,
        n,
        (
            rays.ptr(),
            values.ptr(),
            indices.ptr(),
            n as u32,
            out_rays.ptr_mut(),
            out_values.ptr_mut(),
        ),
    )
}

/// Adds the first `n` shadow values whose ray was not occluded.
pub fn shadow_add(
    params: &DeviceBuffer<FrameParams>,
    occluded: &DeviceBuffer<u32>,
    values: &DeviceBuffer<[f32; 4]>,
    n: usize,
) -> Result<(), GpuError> {
    launch(
        params.gpu(),
        k::WHITTED_SHADOW_ADD,
        n,
        (params.ptr(), occluded.ptr(), values.ptr(), n as u32),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scene_cuda::{GpuAreaLight, GpuLight, GpuMaterial, GpuShading};

    #[test]
    fn records_have_the_kernel_sizes() {
        assert_eq!(size_of::<GpuPath>(), 32);
        assert_eq!(size_of::<GpuMaterial>(), 64);
        assert_eq!(size_of::<GpuShading>(), 68);
        assert_eq!(size_of::<GpuLight>(), 48);
        assert_eq!(size_of::<GpuAreaLight>(), 32);
        assert_eq!(primary_slots(16, 8, 1), 128);
        assert_eq!(primary_slots(17, 9, 2), 6 * 64 * 2);
    }

    #[test]
    fn threads_match_the_kernels() {
        let module = &crate::kernels::whitted_render::MODULE;
        let threads = caustic_gpu::ops::ELEMENT_THREADS as usize;
        assert_eq!(module.define("WHITTED_THREADS"), threads);
    }
}
