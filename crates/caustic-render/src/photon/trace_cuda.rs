//! Photon tracing on a CUDA GPU, the twin of [`super::trace`]: photons as a
//! wavefront, stored by stream compaction (Zeidan 2011, §15.1 and chapter 5).
//!
//! 1. One kernel emits a wave of photons (at most [`WAVE`]); the photons
//!    that carry power are compacted into the first bounce's queue.
//! 2. Per bounce: closest-hit traversal of the whole queue, one kernel that
//!    stores, bounces or absorbs each photon (writing its stored photon and
//!    map flags, and its next ray, into its own slots), then three
//!    compactions: the global-map photons and the caustic-map photons,
//!    appended to their maps, and the surviving photons, which are the next
//!    bounce's queue.
//! 3. The counts stay on the device: the queue is padded to the host's
//!    bound on its length, and the host reads the counts only after
//!    bounces 1, 2, 4, 8, … (`wavefront_cuda.rs`), so a pass's long
//!    specular tails cost launches, not round trips.
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
use caustic_accel::bvh::triangle_bvh_cuda::DeviceBvh;
use caustic_gpu::ops::compact::{SelectScratch, gather_wave_padded, select_indices_at};
use caustic_gpu::ops::launch_per_element as launch;
use caustic_gpu::{DeviceBuffer, GpuError};

use super::emit::{PhotonSources, Source};
use super::record::Photon;
use super::trace::{GlobalRule, PhotonMaps, PhotonSettings, PhotonStats, RouletteRule};
use crate::wavefront_cuda::{WavePad, host_reads_after, tail_paths};
use crate::whitted::render_cuda::GpuScene;

/// Most photons emitted in one wave: bounds the wave's device memory
/// (about 170 bytes per photon).
pub const WAVE: u64 = 1 << 22;

/// Most (photon, bounce) slots a wave's tail kernel may store into (48
/// bytes each with their flags and indices).
const TAIL_SLOTS: usize = 1 << 24;

/// The two maps of one pass, on the device.
pub struct GpuPhotonMaps {
    pub global: DeviceBuffer<GpuPhoton>,
    pub caustic: DeviceBuffer<GpuPhoton>,
    /// The maps' runs: how many photons each bounce of each wave stored,
    /// wave by wave ([`WAVE`] photons of the whole pass each, cut at the
    /// same indices whatever range was traced), zero where the trace held
    /// none of the wave's photons. A team's members, each tracing a range,
    /// merge their maps run by run in rank order
    /// ([`crate::team::run_plan`]) into the whole pass's maps, photon for
    /// photon and in order.
    pub global_runs: Vec<u64>,
    pub caustic_runs: Vec<u64>,
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

// The device record is the CPU record's twin: same fields, same order;
// its alignment (16, for the kernels' 16-byte accesses) a multiple of the
// CPU record's, so `download` casts the device records in place.
const _: () = assert!(size_of::<GpuPhoton>() == size_of::<Photon>());
const _: () = assert!(align_of::<GpuPhoton>().is_multiple_of(align_of::<Photon>()));

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

/// Traces photons `indices` of a caustic-only pass (a team member's share
/// of [`trace_caustic_photons`]), its map in index order, run by run.
pub fn trace_caustic_range(
    scene: &GpuScene,
    sources: &PhotonSources,
    settings: &PhotonSettings,
    indices: std::ops::Range<u64>,
) -> Result<GpuPhotonMaps, GpuError> {
    trace_range(scene, sources, settings, indices, true)
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
    // The whole pass's waves, cut at multiples of WAVE, so every member of
    // a team names the same runs whatever its range.
    let bounces = settings.max_bounces as usize;
    let waves = settings.photons.div_ceil(WAVE) as usize;
    let mut runs = [vec![0; waves * bounces], vec![0; waves * bounces]];
    let end = indices.end.min(settings.photons);
    for wave in 0..waves {
        let first = (wave as u64 * WAVE).max(indices.start);
        let last = ((wave as u64 + 1) * WAVE).min(end);
        if first >= last || records.is_empty() {
            continue;
        }
        let params = PhotonParams {
            first_photon: first,
            ..base
        };
        let params = DeviceBuffer::from_slice(&gpu, "photon params", &[params])?;
        let [global, caustic] = &mut runs;
        let at = wave * bounces..(wave + 1) * bounces;
        let wave_runs = [&mut global[at.clone()], &mut caustic[at]];
        pass.wave(
            &params,
            (last - first) as usize,
            settings.max_bounces,
            wave_runs,
        )?;
    }
    let global = concat(&gpu, "global photon map", &pass.global)?;
    let caustic = concat(&gpu, "caustic photon map", &pass.caustic)?;
    let [global_runs, caustic_runs] = runs;
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
        global_runs,
        caustic_runs,
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
    /// The stored photons of each wave, one run per wave and map.
    global: Vec<DeviceBuffer<GpuPhoton>>,
    caustic: Vec<DeviceBuffer<GpuPhoton>>,
    rays: u64,
}

/// The rays of live photons and their states, slot for slot; past the live
/// ones (whose number only the device may know), padding.
struct Wave {
    rays: DeviceBuffer<GpuRay>,
    paths: DeviceBuffer<GpuPhotonPath>,
}

/// Where a wave keeps its counts on the device, one buffer for all (the
/// host reads it with one wait): the survivors of each step (emission, then
/// each bounce), each bounce's kept photons per map, and each map's fill
/// before each bounce.
struct CountSlots {
    bounces: usize,
}

impl CountSlots {
    /// Photons alive after step `s` (0: emission, `b + 1`: bounce `b`).
    fn live(&self, s: usize) -> usize {
        s
    }
    /// Photons bounce `b` keeps for map `m` (0 global, 1 caustic).
    fn kept(&self, m: usize, b: usize) -> usize {
        self.bounces + 1 + m * self.bounces + b
    }
    /// Map `m`'s fill before bounce `b` (`b = bounces`: at the end).
    fn fill(&self, m: usize, b: usize) -> usize {
        3 * self.bounces + 1 + m * (self.bounces + 1) + b
    }
    /// The photons a tail kernel's rows keep for map `m`, all bounces.
    fn tail_kept(&self, m: usize) -> usize {
        5 * self.bounces + 3 + m
    }
    fn len(&self) -> usize {
        5 * self.bounces + 5
    }
}

/// A map growing on the device by bounces, with the host's bound on its
/// fill (the exact fill at the last read, plus each bounce's wave bound).
struct MapRun {
    photons: DeviceBuffer<GpuPhoton>,
    fill_bound: usize,
}

impl MapRun {
    fn new(gpu: &caustic_gpu::Gpu, what: &'static str, capacity: usize) -> Result<Self, GpuError> {
        Ok(Self {
            photons: DeviceBuffer::uninit(gpu, what, capacity.max(1))?,
            fill_bound: 0,
        })
    }

    /// Room for `more` photons after the exact fill `filled`: a larger
    /// buffer holding the first `filled` where it has too little.
    fn reserve(&mut self, filled: usize, more: usize) -> Result<(), GpuError> {
        self.fill_bound = filled;
        let needed = filled + more;
        let capacity = self.photons.len();
        if needed <= capacity {
            return Ok(());
        }
        let gpu = self.photons.gpu().clone();
        let what = self.photons.what();
        let larger = DeviceBuffer::uninit(&gpu, what, needed.max(2 * capacity))?;
        let mut old = std::mem::replace(&mut self.photons, larger);
        old.truncate(filled);
        self.photons.copy_from_at(&old, 0)
    }

    /// The run of the `filled` photons the device stored.
    fn finish(mut self, filled: usize) -> Result<DeviceBuffer<GpuPhoton>, GpuError> {
        if filled > self.photons.len() {
            return Err(GpuError::Invalid {
                what: "photon map",
                message: format!(
                    "{filled} stored photons overflowed a run of {} (a bound the host kept was wrong)",
                    self.photons.len()
                ),
            });
        }
        self.photons.truncate(filled);
        Ok(self.photons)
    }
}

/// A wave's device memory, allocated once for its emitted count and set to
/// each bounce's bound: no allocation or free per bounce (at the long
/// specular tails, the driver calls, not the GPU, set the pace).
struct WaveBuffers {
    /// The queue being traced (compacted survivors, padded to the bound).
    queue: Wave,
    /// The next queue, compacted from `bounced`.
    next: Wave,
    /// The slots the emission or bounce kernel writes.
    bounced: Wave,
    hits: DeviceBuffer<GpuHit>,
    live: DeviceBuffer<u32>,
    stored: DeviceBuffer<GpuPhoton>,
    map_flags: [DeviceBuffer<u32>; 2],
    indices: DeviceBuffer<u32>,
    scratch: SelectScratch,
    counts: DeviceBuffer<u32>,
}

impl WaveBuffers {
    fn new(gpu: &caustic_gpu::Gpu, count: usize, slots: &CountSlots) -> Result<Self, GpuError> {
        let wave = |what_rays, what_paths| -> Result<Wave, GpuError> {
            Ok(Wave {
                rays: DeviceBuffer::uninit(gpu, what_rays, count)?,
                paths: DeviceBuffer::uninit(gpu, what_paths, count)?,
            })
        };
        Ok(Self {
            queue: wave("photon rays", "photon paths")?,
            next: wave("photon next rays", "photon next paths")?,
            bounced: wave("photon bounced rays", "photon bounced paths")?,
            hits: DeviceBuffer::uninit(gpu, "photon hits", count)?,
            live: DeviceBuffer::uninit(gpu, "photon live flags", count)?,
            stored: DeviceBuffer::uninit(gpu, "stored photons", count)?,
            map_flags: [
                DeviceBuffer::uninit(gpu, "global map flags", count)?,
                DeviceBuffer::uninit(gpu, "caustic map flags", count)?,
            ],
            indices: DeviceBuffer::uninit(gpu, "photon wave indices", count)?,
            scratch: SelectScratch::new(gpu, count)?,
            counts: DeviceBuffer::zeroed(gpu, "photon wave counts", slots.len())?,
        })
    }

    /// Every per-slot buffer `bound` long (the queue keeps its own length).
    fn set_len(&mut self, bound: usize) -> Result<(), GpuError> {
        for wave in [&mut self.next, &mut self.bounced] {
            wave.rays.set_len(bound)?;
            wave.paths.set_len(bound)?;
        }
        self.hits.set_len(bound)?;
        self.live.set_len(bound)?;
        self.stored.set_len(bound)?;
        for flags in &mut self.map_flags {
            flags.set_len(bound)?;
        }
        self.indices.set_len(bound)
    }

    /// The bounced slots' survivors (their number goes to `counts[slot]`)
    /// into the next queue, padded to the bound, which then becomes the
    /// queue.
    fn compact(&mut self, slot: usize, pad: &WavePad<GpuPhotonPath>) -> Result<(), GpuError> {
        select_indices_at(
            &self.live,
            &mut self.indices,
            (&mut self.counts, slot),
            &mut self.scratch,
        )?;
        gather_wave_padded(
            &self.bounced.rays,
            &self.bounced.paths,
            &self.indices,
            (&self.counts, slot),
            &pad.ray,
            &pad.path,
            &mut self.next.rays,
            &mut self.next.paths,
        )?;
        std::mem::swap(&mut self.queue, &mut self.next);
        Ok(())
    }

    /// The queue cut to the `live` photons the host now knows of.
    fn cut_queue(&mut self, live: usize) {
        self.queue.rays.truncate(live);
        self.queue.paths.truncate(live);
    }
}

impl Pass<'_> {
    /// Emits `count` photons and follows them for at most `max_bounces`
    /// bounces, reading the wave's counts only now and then
    /// ([`host_reads_after`]); `runs` gets the photons each bounce stored
    /// in each map.
    fn wave(
        &mut self,
        params: &DeviceBuffer<PhotonParams>,
        count: usize,
        max_bounces: u32,
        runs: [&mut [u64]; 2],
    ) -> Result<(), GpuError> {
        let gpu = params.gpu().clone();
        let slots = CountSlots {
            bounces: max_bounces as usize,
        };
        let pad = WavePad::new(&gpu, GpuPhotonPath::default())?;
        let mut w = WaveBuffers::new(&gpu, count, &slots)?;
        emit(
            self.scene_params,
            params,
            &mut w.bounced.rays,
            &mut w.bounced.paths,
            &mut w.live,
        )?;
        w.compact(slots.live(0), &pad)?;
        // Room for two stored photons per emitted one in the global map:
        // a map that may outgrow its run makes the host read the fills
        // before each bounce (a wait of the device each), and the global
        // map of 10^6 photons holds 1.07·10^6 after 32 bounces, which
        // cost four such reads, after bounces 2, 4, 5 and 6 (H200,
        // 2026-11-28). The caustic map keeps far fewer.
        let mut maps = [
            MapRun::new(&gpu, "global photon map", 2 * count)?,
            MapRun::new(&gpu, "caustic photon map", count)?,
        ];
        let tail_paths = tail_paths(&gpu);
        let mut bound = count;
        let mut bounces = 0;
        // The bounce from which a tail kernel followed the wave, if one did.
        let mut tail_from = None;
        while bounces < slots.bounces && bound > 0 {
            let b = bounces;
            if maps.iter().any(|m| m.fill_bound + bound > m.photons.len()) {
                let known = w.counts.download()?;
                bound = known[slots.live(b)] as usize;
                for (m, map) in maps.iter_mut().enumerate() {
                    map.reserve(known[slots.fill(m, b)] as usize, bound)?;
                }
                w.cut_queue(bound);
                if bound == 0 {
                    break;
                }
            }
            self.bounce(params, &mut w, (&slots, b), &mut maps, &pad)?;
            bounces += 1;
            if host_reads_after(b as u32) {
                let known = w.counts.download()?;
                bound = known[slots.live(b + 1)] as usize;
                for (m, map) in maps.iter_mut().enumerate() {
                    map.fill_bound = known[slots.fill(m, b + 1)] as usize;
                }
                w.cut_queue(bound);
                let bvh = self.scene.accel().binary();
                // The tail's rows hold a slot per photon and bounce left:
                // at most TAIL_SLOTS of them (about 0.7 GB with their flags
                // and indices), else the wavefront goes on.
                let rows = slots.bounces - bounces.min(slots.bounces);
                let tail = bound > 0 && bound <= tail_paths && rows > 0;
                let tail = tail && bound * rows <= TAIL_SLOTS;
                if let Some(bvh) = bvh.filter(|_| tail) {
                    self.tail(params, &mut w, bvh, (&slots, bounces), &mut maps)?;
                    tail_from = Some(bounces);
                    bounces = slots.bounces;
                }
            }
        }
        let known = w.counts.download()?;
        self.rays += (0..bounces)
            .map(|s| u64::from(known[slots.live(s)]))
            .sum::<u64>();
        // Each bounce's runs: the fills' steps up to the tail, the tail's
        // per-bounce counts from there.
        let first_tail = tail_from.unwrap_or(bounces);
        let mut filled = [0; 2];
        for (m, runs) in runs.into_iter().enumerate() {
            for (b, run) in runs.iter_mut().enumerate().take(bounces) {
                *run = u64::from(if b < first_tail {
                    known[slots.fill(m, b + 1)] - known[slots.fill(m, b)]
                } else {
                    known[slots.kept(m, b)]
                });
            }
            filled[m] = u64::from(known[slots.fill(m, first_tail)])
                + (first_tail..bounces)
                    .map(|b| u64::from(known[slots.kept(m, b)]))
                    .sum::<u64>();
        }
        let [global, caustic] = maps;
        self.global.push(global.finish(filled[0] as usize)?);
        self.caustic.push(caustic.finish(filled[1] as usize)?);
        Ok(())
    }

    /// The rest of the wave, from bounce `first` on, in one launch
    /// (`photon_tail`: each of the queue's photons followed by a thread),
    /// its stored photons appended to the maps bounce by bounce in the
    /// wavefront's order.
    fn tail(
        &mut self,
        params: &DeviceBuffer<PhotonParams>,
        w: &mut WaveBuffers,
        bvh: &DeviceBvh,
        (slots, first): (&CountSlots, usize),
        maps: &mut [MapRun; 2],
    ) -> Result<(), GpuError> {
        let gpu = params.gpu().clone();
        let n = w.queue.rays.len();
        let rows = slots.bounces - first;
        w.set_len(n)?;
        let mut stored = DeviceBuffer::uninit(&gpu, "photon tail stores", rows * n)?;
        let mut flags = [
            DeviceBuffer::<u32>::zeroed(&gpu, "photon tail global flags", rows * n)?,
            DeviceBuffer::<u32>::zeroed(&gpu, "photon tail caustic flags", rows * n)?,
        ];
        let [global, caustic] = &mut flags;
        launch(
            &gpu,
            k::PHOTON_TAIL,
            n,
            (
                self.scene_params.ptr(),
                params.ptr(),
                bvh.nodes().ptr(),
                bvh.nodes().len() as u32,
                bvh.triangles().ptr(),
                w.queue.rays.ptr(),
                w.queue.paths.ptr(),
                w.counts.ptr_mut(),
                slots.live(first) as u32,
                slots.kept(0, first) as u32,
                slots.kept(1, first) as u32,
                first as u32,
                n as u32,
                w.bounced.rays.ptr_mut(),
                w.bounced.paths.ptr_mut(),
                w.live.ptr_mut(),
                stored.ptr_mut(),
                global.ptr_mut(),
                caustic.ptr_mut(),
            ),
        )?;
        let mut scratch = SelectScratch::new(&gpu, rows * n)?;
        let mut indices = [
            DeviceBuffer::uninit(&gpu, "photon tail global indices", rows * n)?,
            DeviceBuffer::uninit(&gpu, "photon tail caustic indices", rows * n)?,
        ];
        for (m, selected) in indices.iter_mut().enumerate() {
            let count = (&mut w.counts, slots.tail_kept(m));
            select_indices_at(&flags[m], selected, count, &mut scratch)?;
        }
        let known = w.counts.download()?;
        for (m, (map, selected)) in maps.iter_mut().zip(&indices).enumerate() {
            let kept = slots.tail_kept(m);
            map.reserve(known[slots.fill(m, first)] as usize, known[kept] as usize)?;
            let fill = slots.fill(m, first);
            let append = AppendSlots { kept, fill };
            append_stored(&stored, selected, &mut w.counts, append, &mut map.photons)?;
        }
        Ok(())
    }

    /// Traces and bounces the queue's slots (bounce `b`), appends what they
    /// stored to the maps, and makes the survivors, padded to as many
    /// slots, the queue.
    fn bounce(
        &mut self,
        params: &DeviceBuffer<PhotonParams>,
        w: &mut WaveBuffers,
        (slots, b): (&CountSlots, usize),
        maps: &mut [MapRun; 2],
        pad: &WavePad<GpuPhotonPath>,
    ) -> Result<(), GpuError> {
        let n = w.queue.rays.len();
        w.set_len(n)?;
        self.tracer
            .intersect(self.scene.accel(), &w.queue.rays, &mut w.hits)?;
        let [global, caustic] = &mut w.map_flags;
        let targets = BounceTargets {
            rays: &mut w.bounced.rays,
            paths: &mut w.bounced.paths,
            live: &mut w.live,
            stored: &mut w.stored,
            global,
            caustic,
        };
        bounce(
            self.scene_params,
            params,
            &w.queue.rays,
            &w.hits,
            &w.queue.paths,
            targets,
        )?;
        for (m, map) in maps.iter_mut().enumerate() {
            let kept = slots.kept(m, b);
            select_indices_at(
                &w.map_flags[m],
                &mut w.indices,
                (&mut w.counts, kept),
                &mut w.scratch,
            )?;
            let append = AppendSlots {
                kept,
                fill: slots.fill(m, b),
            };
            append_stored(
                &w.stored,
                &w.indices,
                &mut w.counts,
                append,
                &mut map.photons,
            )?;
            map.fill_bound += n;
        }
        w.compact(slots.live(b + 1), pad)
    }
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

/// The count slots of one bounce's append to one map.
pub struct AppendSlots {
    /// Where the bounce's kept count lies.
    pub kept: usize,
    /// Where the map's fill before the bounce lies (the kernel writes the
    /// fill after it to the next slot).
    pub fill: usize,
}

/// `map[counts[fill] + i] = stored[indices[i]]` for `i < counts[kept]`, and
/// `counts[fill + 1] = counts[fill] + counts[kept]`, without waiting; the
/// caller keeps `map` long enough (a write past it is dropped).
pub fn append_stored(
    stored: &DeviceBuffer<GpuPhoton>,
    indices: &DeviceBuffer<u32>,
    counts: &mut DeviceBuffer<u32>,
    slots: AppendSlots,
    map: &mut DeviceBuffer<GpuPhoton>,
) -> Result<(), GpuError> {
    if slots.kept.max(slots.fill + 1) >= counts.len() {
        return Err(GpuError::Invalid {
            what: "photon map append",
            message: format!(
                "count slots {} and {} past a buffer of {}",
                slots.kept,
                slots.fill + 1,
                counts.len()
            ),
        });
    }
    let n = stored.len().min(indices.len());
    let capacity = map.len() as u32;
    // At least one thread: it writes the next fill.
    launch(
        stored.gpu(),
        k::PHOTON_APPEND_STORED,
        n.max(1),
        (
            stored.ptr(),
            indices.ptr(),
            counts.ptr_mut(),
            slots.kept as u32,
            slots.fill as u32,
            n as u32,
            map.ptr_mut(),
            capacity,
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
