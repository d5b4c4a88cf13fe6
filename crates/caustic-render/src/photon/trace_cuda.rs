//! Photon tracing on a CUDA GPU, the twin of [`super::trace`]: photons as a
//! wavefront, stored by stream compaction (Zeidan 2011, §15.1 and chapter 5).
//!
//! 1. One kernel emits a wave of photons (at most [`WAVE`]); the photons
//!    that carry power are compacted into the first bounce's queue.
//! 2. Per bounce: closest-hit traversal of the whole queue, one kernel that
//!    stores, bounces or absorbs each photon (writing its stored photon and
//!    map flags, and its next ray, into its own slots), then three
//!    compactions: the global-map photons, the caustic-map photons, and the
//!    surviving photons, which are the next bounce's queue.
//! 3. The maps are the per-bounce compacted runs concatenated.
//!
//! Photon `i` draws from the same PCG32 stream as on the CPU
//! ([`super::trace::photon_rng`]) and every operation mirrors the CPU's, so
//! the GPU maps hold the CPU's photons up to float rounding (a rare
//! Russian-roulette or Fresnel decision can flip where `sin`, `cos`, `pow`
//! or FMA contraction round differently). The order differs: the GPU's is
//! by bounce, then photon index; the CPU's by photon index, then bounce.
//! Both are deterministic.

use std::time::Instant;

use crate::kernels::photon_trace as k;
use crate::photon::records_cuda::{
    GpuPhoton, GpuPhotonPath, GpuPhotonSource, PhotonParams, global_rule, source_kind,
};
use crate::scene_cuda::FrameParams;
use caustic_accel::bvh::device_accel_cuda::AccelTracer;
use caustic_accel::bvh::traverse_cuda::{GpuHit, GpuRay};
use caustic_gpu::ops::compact::{gather_wave, select_indices};
use caustic_gpu::ops::launch_per_element as launch;
use caustic_gpu::{DeviceBuffer, GpuError};

use super::emit::{PhotonSources, Source};
use super::record::Photon;
use super::trace::{GlobalRule, PhotonMaps, PhotonSettings, PhotonStats, RouletteRule};
use crate::whitted::render_cuda::GpuScene;

/// Most photons emitted in one wave: bounds the wave's device memory
/// (about 170 bytes per photon).
pub const WAVE: u64 = 1 << 22;

/// The two maps of one pass, on the device.
pub struct GpuPhotonMaps {
    pub global: DeviceBuffer<GpuPhoton>,
    pub caustic: DeviceBuffer<GpuPhoton>,
    pub emitted: u64,
    pub stats: PhotonStats,
}

impl GpuPhotonMaps {
    /// The maps as CPU photon lists.
    pub fn download(&self, light_power: caustic_geom::Rgb) -> Result<PhotonMaps, GpuError> {
        let to_cpu = |b: &DeviceBuffer<GpuPhoton>| -> Result<Vec<Photon>, GpuError> {
            Ok(bytemuck::cast_slice(&b.download()?).to_vec())
        };
        Ok(PhotonMaps {
            global: to_cpu(&self.global)?,
            caustic: to_cpu(&self.caustic)?,
            emitted: self.emitted,
            light_power,
            stats: self.stats,
        })
    }
}

// The device record is the CPU record's twin: same fields, same order.
const _: () = assert!(size_of::<GpuPhoton>() == size_of::<Photon>());
const _: () = assert!(align_of::<GpuPhoton>() == align_of::<Photon>());

/// Traces `settings.photons` photons through `scene` on its GPU.
pub fn trace_photons(
    scene: &GpuScene,
    sources: &PhotonSources,
    settings: &PhotonSettings,
) -> Result<GpuPhotonMaps, GpuError> {
    trace_range(scene, sources, settings, 0..settings.photons, false)
}

/// Traces `settings.photons` photons for the caustic map alone (each stops
/// at its first diffuse hit), as [`super::trace_caustic_photons`].
pub fn trace_caustic_photons(
    scene: &GpuScene,
    sources: &PhotonSources,
    settings: &PhotonSettings,
) -> Result<GpuPhotonMaps, GpuError> {
    trace_range(scene, sources, settings, 0..settings.photons, true)
}

/// Traces photons `indices` of the `settings.photons` a pass emits, as
/// [`super::trace_photon_range`]: a team member's share, powers divided by
/// the whole pass's count, maps in index order.
pub fn trace_photon_range(
    scene: &GpuScene,
    sources: &PhotonSources,
    settings: &PhotonSettings,
    indices: std::ops::Range<u64>,
) -> Result<GpuPhotonMaps, GpuError> {
    trace_range(scene, sources, settings, indices, false)
}

fn trace_range(
    scene: &GpuScene,
    sources: &PhotonSources,
    settings: &PhotonSettings,
    indices: std::ops::Range<u64>,
    caustic_only: bool,
) -> Result<GpuPhotonMaps, GpuError> {
    let start = Instant::now();
    let gpu = scene.gpu().clone();
    let records = source_records(sources);
    let source_buffer = DeviceBuffer::from_slice(&gpu, "photon sources", &records)?;
    let scene_params = DeviceBuffer::from_slice(&gpu, "photon scene", &[scene.scene_params()])?;
    let mut pass = Pass {
        scene,
        scene_params: &scene_params,
        tracer: scene.accel().tracer()?,
        global: Vec::new(),
        caustic: Vec::new(),
        rays: 0,
    };
    let base = PhotonParams {
        sources: source_buffer.device_ptr(),
        seed: settings.seed,
        source_count: records.len() as u32,
        max_bounces: settings.max_bounces,
        inv_photons: 1.0 / settings.photons.max(1) as f32,
        global_rule: match settings.global_rule {
            GlobalRule::AfterFirstBounce => global_rule::AFTER_FIRST_BOUNCE,
            GlobalRule::IndirectOnly => global_rule::INDIRECT_ONLY,
            GlobalRule::All => global_rule::ALL,
        },
        mean_roulette: u32::from(settings.roulette == RouletteRule::MeanAlbedo),
        caustic_only: u32::from(caustic_only),
        first_photon: 0,
    };
    let end = indices.end.min(settings.photons);
    let mut first = indices.start;
    while first < end && !records.is_empty() {
        let count = (end - first).min(WAVE);
        let params = PhotonParams {
            first_photon: first,
            ..base
        };
        let params = DeviceBuffer::from_slice(&gpu, "photon params", &[params])?;
        pass.wave(&params, count as usize, settings.max_bounces)?;
        first += count;
    }
    let global = concat(&gpu, "global photon map", &pass.global)?;
    let caustic = concat(&gpu, "caustic photon map", &pass.caustic)?;
    gpu.synchronize()?;
    let stats = PhotonStats {
        emitted: settings.photons,
        global: global.len(),
        caustic: caustic.len(),
        rays: pass.rays,
        seconds: start.elapsed().as_secs_f64(),
    };
    Ok(GpuPhotonMaps {
        global,
        caustic,
        emitted: settings.photons,
        stats,
    })
}

/// The scene's photon sources as the emission kernel reads them.
fn source_records(sources: &PhotonSources) -> Vec<GpuPhotonSource> {
    let rows = sources.sources.iter().zip(&sources.power);
    rows.zip(sources.pick.iter().zip(&sources.cdf))
        .map(|((source, power), (&pick, &cdf))| {
            let mut r = GpuPhotonSource {
                power: power.to_array(),
                pick,
                cdf,
                ..Default::default()
            };
            match *source {
                Source::Area { index } => {
                    (r.kind, r.area) = (source_kind::AREA, index as u32);
                }
                Source::Point { position, .. } => {
                    (r.kind, r.a) = (source_kind::POINT, position.to_array());
                }
                Source::Spot {
                    position,
                    axis,
                    intensity,
                    cos_falloff_start,
                    cos_total_width,
                } => {
                    (r.kind, r.a, r.b) = (source_kind::SPOT, position.to_array(), axis.to_array());
                    (r.power, r.cos_start) = (intensity.to_array(), cos_falloff_start);
                    r.cos_width = cos_total_width;
                }
                Source::Directional {
                    direction,
                    centre,
                    radius,
                    ..
                } => {
                    r.kind = source_kind::DIRECTIONAL;
                    (r.a, r.b, r.radius) = (direction.to_array(), centre.to_array(), radius);
                }
            }
            r
        })
        .collect()
}

/// One photon pass in progress.
struct Pass<'a> {
    scene: &'a GpuScene,
    scene_params: &'a DeviceBuffer<crate::scene_cuda::FrameParams>,
    tracer: AccelTracer,
    /// Compacted runs of stored photons, one per bounce and wave.
    global: Vec<DeviceBuffer<GpuPhoton>>,
    caustic: Vec<DeviceBuffer<GpuPhoton>>,
    rays: u64,
}

/// The rays of live photons and their states, slot for slot.
struct Wave {
    rays: DeviceBuffer<GpuRay>,
    paths: DeviceBuffer<GpuPhotonPath>,
}

impl Pass<'_> {
    /// Emits `count` photons and follows them for `max_bounces` bounces.
    fn wave(
        &mut self,
        params: &DeviceBuffer<PhotonParams>,
        count: usize,
        max_bounces: u32,
    ) -> Result<(), GpuError> {
        let gpu = params.gpu().clone();
        let mut emitted = Wave {
            rays: DeviceBuffer::uninit(&gpu, "emitted photon rays", count)?,
            paths: DeviceBuffer::uninit(&gpu, "emitted photon paths", count)?,
        };
        let mut live = DeviceBuffer::uninit(&gpu, "emitted photon flags", count)?;
        emit(
            self.scene_params,
            params,
            &mut emitted.rays,
            &mut emitted.paths,
            &mut live,
        )?;
        let mut wave = compact(&emitted, &live)?;
        drop(emitted);
        for _ in 0..max_bounces {
            if wave.rays.is_empty() {
                break;
            }
            wave = self.bounce(params, &wave)?;
        }
        Ok(())
    }

    /// Traces and bounces `wave`, keeps what it stored, returns the
    /// survivors.
    fn bounce(
        &mut self,
        params: &DeviceBuffer<PhotonParams>,
        wave: &Wave,
    ) -> Result<Wave, GpuError> {
        let gpu = params.gpu().clone();
        let n = wave.rays.len();
        let mut hits = DeviceBuffer::<GpuHit>::uninit(&gpu, "photon hits", n)?;
        self.tracer
            .intersect(self.scene.accel(), &wave.rays, &mut hits)?;
        self.rays += n as u64;
        let mut next = Wave {
            rays: DeviceBuffer::uninit(&gpu, "photon next rays", n)?,
            paths: DeviceBuffer::uninit(&gpu, "photon next paths", n)?,
        };
        let mut live = DeviceBuffer::uninit(&gpu, "photon live flags", n)?;
        let mut stored = DeviceBuffer::uninit(&gpu, "stored photons", n)?;
        let mut global = DeviceBuffer::uninit(&gpu, "global map flags", n)?;
        let mut caustic = DeviceBuffer::uninit(&gpu, "caustic map flags", n)?;
        let targets = BounceTargets {
            rays: &mut next.rays,
            paths: &mut next.paths,
            live: &mut live,
            stored: &mut stored,
            global: &mut global,
            caustic: &mut caustic,
        };
        bounce(
            self.scene_params,
            params,
            &wave.rays,
            &hits,
            &wave.paths,
            targets,
        )?;
        drop(hits);
        keep_flagged(&stored, &global, &mut self.global)?;
        keep_flagged(&stored, &caustic, &mut self.caustic)?;
        compact(&next, &live)
    }
}

/// The flagged slots of `wave`, in order.
fn compact(wave: &Wave, flags: &DeviceBuffer<u32>) -> Result<Wave, GpuError> {
    let gpu = flags.gpu();
    let indices = select_indices(flags)?;
    let n = indices.len();
    let mut out = Wave {
        rays: DeviceBuffer::uninit(gpu, "photon rays", n)?,
        paths: DeviceBuffer::uninit(gpu, "photon paths", n)?,
    };
    gather_wave(
        &wave.rays,
        &wave.paths,
        &indices,
        &mut out.rays,
        &mut out.paths,
    )?;
    Ok(out)
}

/// Appends the flagged stored photons to `runs` as one compacted run.
fn keep_flagged(
    stored: &DeviceBuffer<GpuPhoton>,
    flags: &DeviceBuffer<u32>,
    runs: &mut Vec<DeviceBuffer<GpuPhoton>>,
) -> Result<(), GpuError> {
    let indices = select_indices(flags)?;
    if indices.is_empty() {
        return Ok(());
    }
    let mut run = DeviceBuffer::uninit(stored.gpu(), "photon map run", indices.len())?;
    gather_stored(stored, &indices, &mut run, 0)?;
    runs.push(run);
    Ok(())
}

/// The runs one after another in one buffer.
fn concat(
    gpu: &caustic_gpu::Gpu,
    what: &'static str,
    runs: &[DeviceBuffer<GpuPhoton>],
) -> Result<DeviceBuffer<GpuPhoton>, GpuError> {
    let total = runs.iter().map(DeviceBuffer::len).sum();
    let mut out = DeviceBuffer::uninit(gpu, what, total)?;
    let mut offset = 0;
    for run in runs {
        out.copy_from_at(run, offset)?;
        offset += run.len();
    }
    Ok(out)
}

// ------------------------------------------------------------------ launches

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
