//! DACRT on the GPU: the divide-and-conquer ray tracing of
//! [`super`] run on caustic-gpu's task pool of persistent warps, as
//! Vinkler, Bittner, Havran and Hapala (CGF 2013, §5) run it: one launch
//! traces a whole batch, its tasks splitting, partitioning and
//! intersecting with no host in the loop (`taskpool.cu` for the phases;
//! `schedule.rs` for the seven children's dependencies under the paper's
//! waves; [`DacrtSchedule`](super::DacrtSchedule) for the concurrent
//! default, whose out-of-place partitions take index arenas that persist
//! in the tracer and grow when a batch outruns them).
//!
//! A trace builds nothing that outlives it, so everything is timed as
//! tracing: the triangles' boxes, the index arrays of the traceable rays
//! and the finite triangles, the pool's run, and the hits rebuilt from
//! the winning keys with the watertight test every traversal kernel uses
//! (so hits equal brute force's bit for bit, ties to the lowest id).
//! Device memory running out is [`GpuError::OutOfMemory`] naming the
//! buffer; a pool that fills up or stalls stops itself (its watchdog) and
//! is [`GpuError::TaskPool`]; nothing hangs.

use super::schedule;
use super::{DacrtConfig, DacrtSchedule, DacrtScheme, DacrtSplit};
use crate::bvh::traverse_cuda::{GpuHit, GpuRay};
use crate::bvh::triangle_bvh_cuda::GpuTriangle;
use crate::kernels::dacrt_taskpool as d;
use caustic_gpu::ops::compact::select_indices_into;
use caustic_gpu::ops::{check_len, check_same_len, launch_grid_stride};
use caustic_gpu::taskpool::{PoolStats, TaskPool, TaskPoolConfig};
use caustic_gpu::{DeviceBuffer, DevicePtrMut, Gpu, GpuError};
use std::ops::Range;
use std::time::Instant;

/// The most rays, and the most triangles, of one trace: indices carry a
/// class in their top two bits between the partition passes.
pub const MAX_ITEMS: usize = 1 << 30;
/// Words of one slot's RDH bins (`DACRT_SLOT_BIN_WORDS`).
const SLOT_BIN_WORDS: usize = 32 * 6;
/// `stats[]` words (`DS_WORDS`): tasks, direct tasks, pair tests, depth,
/// lost keys, the words asked of the ray and triangle arenas, the spill
/// bits.
const STAT_WORDS: usize = 8;
/// `stats[]` words of the deepest task, the arenas' demand and the spill
/// bits.
const DS_DEPTH: usize = 3;
const DS_RAY_ARENA: usize = 5;
const DS_TRI_ARENA: usize = 6;
const DS_SPILLED: usize = 7;
/// Words of `params` (`DACRT_PARAM_WORDS`): the configuration, the
/// arenas' sizes (`DACRT_RAY_ARENA`, `DACRT_TRI_ARENA`), the near levels.
pub const PARAM_WORDS: usize = 10;
const RAY_ARENA_PARAM: usize = 7;
/// The most words of one index arena: ranges are 32-bit offsets.
const MAX_ARENA: usize = u32::MAX as usize;
/// Arena words beyond the batch's own, per ray and per triangle of the
/// batch, for the first batch (later ones start from what earlier ones
/// needed); the triangles' at most [`TRI_ARENA_PER_ITEM`] words per ray
/// and triangle. A subdivided task takes its rays and triangles twice
/// (scratch and output). Sponza's 2.07 M primary rays (66 k triangles)
/// took 181–212 M ray words and 3.7–4.6 M triangle words on an H100
/// (2026-11-27), about 100 a ray and 70 a triangle. Too little costs a
/// drained run of the first batch.
const ARENA_PER_ITEM: [f64; 2] = [112.0, 96.0];
const TRI_ARENA_PER_ITEM: usize = 8;

/// What one GPU trace did.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GpuDacrtStats {
    /// Rays given, and those traceable (the others miss).
    pub rays: usize,
    pub traced_rays: usize,
    /// Triangles given.
    pub triangles: usize,
    /// Tasks run (subdivided or direct), direct ones, ray–triangle pairs
    /// handed to direct tasks (an upper bound of the tests: culled rays
    /// and finished any-hit rays skip theirs), the deepest task.
    pub tasks: u64,
    pub direct_tasks: u64,
    pub pair_tests: u64,
    pub max_depth: u32,
    /// Concurrent schedule: index words the tasks took of the ray and the
    /// triangle arena (the most of one slice), and the pool's runs (more
    /// than one when an arena ran out, grew and the batch ran again, or
    /// when the batch ran in slices).
    pub arena_words: [u64; 2],
    pub runs: u32,
    /// Concurrent schedule: the slices the batch ran in, 1 unless its
    /// arenas would have outgrown `u32::MAX` words (32-bit offsets) or
    /// the device's memory (then the rays or the triangles were halved
    /// until each part fitted; see [`DacrtTracer::set_arena_limit`]).
    pub slices: u32,
    /// The pool's run (the paper's Table 2 analogue, the last run's);
    /// `None` when nothing was traced.
    pub pool: Option<PoolStats>,
    /// Host wall time of the trace, everything included (it waits for the
    /// device).
    pub wall_ms: f64,
}

impl std::fmt::Display for GpuDacrtStats {
    /// One line: rays, tasks, pairs, depth, arenas, runs, time, the pool.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} of {} rays traced, {} tasks ({} direct, {} pairs), depth {}, arenas {} + {} \
             words, {} runs, {} slices, {:.2} ms",
            self.traced_rays,
            self.rays,
            self.tasks,
            self.direct_tasks,
            self.pair_tests,
            self.max_depth,
            self.arena_words[0],
            self.arena_words[1],
            self.runs,
            self.slices,
            self.wall_ms
        )?;
        match self.pool {
            Some(pool) => write!(f, "; {pool}"),
            None => Ok(()),
        }
    }
}

/// Traces batches of device rays against device triangles by DACRT; keeps
/// its pool (grown as batches need) and the dependency table between
/// batches. See the module docs.
pub struct DacrtTracer {
    gpu: Gpu,
    config: DacrtConfig,
    plan: DeviceBuffer<u32>,
    /// The configuration as the kernel reads it (`DACRT_MIN_RAYS` ..),
    /// and what the device copy holds now (the arenas' sizes change).
    params: DeviceBuffer<u32>,
    params_now: [u32; PARAM_WORDS],
    /// The pool and its RDH bins, which every run leaves zero.
    pool: Option<(TaskPool, DeviceBuffer<u32>)>,
    /// Slots of the pool when set, else `pool_slots` of each batch times
    /// `pool_scale` (1, four times more after each concurrent run that
    /// filled the pool).
    slots: Option<usize>,
    pool_scale: usize,
    /// Concurrent schedule: the index arenas of rays and triangles (the
    /// root's ranges first, then every task's scratch and output), kept
    /// between batches and grown when a run runs out.
    arenas: [Option<DeviceBuffer<u32>>; 2],
    /// Arena words per item of a batch beyond its own (rays, triangles):
    /// [`ARENA_PER_ITEM`], doubled whenever a run ran out.
    arena_scale: [f64; 2],
    /// Arena words beyond the batch's own when set (tests).
    arena_extra: Option<usize>,
    /// The most words of one arena: `MAX_ARENA`, less when set (tests).
    arena_limit: usize,
    /// The most rays and triangles of one slice, learned from batches
    /// that outgrew their arenas (`usize::MAX`: unsliced), so the next
    /// batch starts in slices instead of outgrowing again.
    slice_items: [usize; 2],
    last: GpuDacrtStats,
}

/// Where a trace writes its answers.
enum Answers<'a> {
    Closest(&'a mut DeviceBuffer<GpuHit>),
    Occluded(&'a mut DeviceBuffer<u32>),
}

impl DacrtTracer {
    /// A tracer with `config`'s split and constants (the GPU runs the
    /// seven-child scheme; `scheme=binary` is the CPU's alone).
    pub fn new(gpu: &Gpu, config: DacrtConfig) -> Result<Self, GpuError> {
        if config.scheme != DacrtScheme::Seven {
            return Err(GpuError::Invalid {
                what: "dacrt on the GPU",
                message: format!(
                    "`{}`: the GPU runs Vinkler et al.'s seven-child scheme; scheme=binary is the CPU's",
                    config.spec()
                ),
            });
        }
        Ok(Self {
            gpu: gpu.clone(),
            config,
            plan: DeviceBuffer::from_slice(
                gpu,
                "dacrt dependency table",
                &schedule::device_table(),
            )?,
            params: DeviceBuffer::from_slice(gpu, "dacrt parameters", &kernel_params(&config))?,
            params_now: kernel_params(&config),
            pool: None,
            slots: None,
            pool_scale: 1,
            arenas: [None, None],
            arena_scale: ARENA_PER_ITEM,
            arena_extra: None,
            arena_limit: MAX_ARENA,
            slice_items: [usize::MAX; 2],
            last: GpuDacrtStats::default(),
        })
    }

    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    pub fn config(&self) -> &DacrtConfig {
        &self.config
    }

    /// Fixes the pool's slots (`None`: sized from each batch). A pool too
    /// small for a batch stops the trace with [`GpuError::TaskPool`].
    pub fn set_pool_slots(&mut self, slots: Option<usize>) {
        self.slots = slots;
    }

    /// Fixes the words each index arena starts a batch with beyond the
    /// batch's own (`None`: sized from the batch and what earlier batches
    /// needed). A run that runs out doubles them and runs again.
    pub fn set_arena_extra(&mut self, words: Option<usize>) {
        self.arena_extra = words;
    }

    /// Caps each index arena at `words` (`None`: `u32::MAX` words, the most
    /// its 32-bit offsets address). A batch whose tasks would take more
    /// runs in slices (see [`GpuDacrtStats::slices`]).
    pub fn set_arena_limit(&mut self, words: Option<usize>) {
        self.arena_limit = words.unwrap_or(MAX_ARENA).clamp(1024, MAX_ARENA);
        self.slice_items = [usize::MAX; 2];
        self.arenas = [None, None];
    }

    /// What the last trace did.
    pub fn last_stats(&self) -> &GpuDacrtStats {
        &self.last
    }

    /// The closest hit of every ray in `rays` against `triangles` (scene
    /// order; a hit's `prim` is the index in it) into `hits`.
    pub fn intersect(
        &mut self,
        triangles: &DeviceBuffer<GpuTriangle>,
        rays: &DeviceBuffer<GpuRay>,
        hits: &mut DeviceBuffer<GpuHit>,
    ) -> Result<GpuDacrtStats, GpuError> {
        check_same_len("dacrt", "hits", rays.len(), hits.len())?;
        self.trace(triangles, rays, Answers::Closest(hits))
    }

    /// 1 for every ray with a hit in `(tmin, tmax)`, else 0, into `occluded`.
    pub fn occluded(
        &mut self,
        triangles: &DeviceBuffer<GpuTriangle>,
        rays: &DeviceBuffer<GpuRay>,
        occluded: &mut DeviceBuffer<u32>,
    ) -> Result<GpuDacrtStats, GpuError> {
        check_same_len("dacrt", "occlusion results", rays.len(), occluded.len())?;
        self.trace(triangles, rays, Answers::Occluded(occluded))
    }

    fn trace(
        &mut self,
        triangles: &DeviceBuffer<GpuTriangle>,
        rays: &DeviceBuffer<GpuRay>,
        answers: Answers<'_>,
    ) -> Result<GpuDacrtStats, GpuError> {
        let wall = Instant::now();
        let gpu = self.gpu.clone();
        let (n_rays, n_tris) = (rays.len(), triangles.len());
        check_len("dacrt rays", n_rays, MAX_ITEMS - 1)?;
        check_len("dacrt triangles", n_tris, MAX_ITEMS - 1)?;
        let any_hit = matches!(answers, Answers::Occluded(_));
        let mut stats = GpuDacrtStats {
            rays: n_rays,
            triangles: n_tris,
            ..GpuDacrtStats::default()
        };
        if n_rays == 0 {
            self.last = stats;
            return Ok(stats);
        }
        let mut keys = DeviceBuffer::<u64>::uninit(&gpu, "dacrt hit keys", n_rays)?;
        keys.fill_bytes(0xff)?;
        let mut words = DeviceBuffer::<i32>::uninit(&gpu, "dacrt root box", 6)?;
        let mut counters = DeviceBuffer::<u64>::uninit(&gpu, "dacrt stats", STAT_WORDS)?;
        let mut ray_count = DeviceBuffer::<u32>::uninit(&gpu, "dacrt ray count", 1)?;
        let mut traceable = DeviceBuffer::<u32>::uninit(&gpu, "dacrt traceable flags", n_rays)?;
        // The statistics words of the slices run (the resolve adds the
        // lost keys to the counters).
        let mut finished = [0u64; STAT_WORDS];
        launch_grid_stride(
            &gpu,
            d::DACRT_PREPARE_RAYS,
            n_rays,
            (
                rays.ptr(),
                n_rays as u64,
                traceable.ptr_mut(),
                words.ptr_mut(),
                counters.ptr_mut(),
            ),
        )?;
        if n_tris > 0 {
            let mut boxes =
                DeviceBuffer::<[f32; 4]>::uninit(&gpu, "dacrt triangle boxes", 2 * n_tris)?;
            let mut tri_count = DeviceBuffer::<u32>::uninit(&gpu, "dacrt triangle count", 1)?;
            let mut finite = DeviceBuffer::<u32>::uninit(&gpu, "dacrt finite flags", n_tris)?;
            launch_grid_stride(
                &gpu,
                d::DACRT_PREPARE_TRIANGLES,
                n_tris,
                (
                    triangles.ptr(),
                    n_tris as u64,
                    boxes.ptr_mut(),
                    finite.ptr_mut(),
                    words.ptr_mut(),
                ),
            )?;
            let batch = Batch {
                triangles,
                rays,
                boxes: &boxes,
                flags: [&traceable, &finite],
                root_box: &words,
                any_hit,
            };
            let run = self.run_slices(
                &batch,
                &mut keys,
                [&mut ray_count, &mut tri_count],
                &mut counters,
            )?;
            stats.pool = Some(run.pool);
            stats.runs = run.runs;
            stats.slices = run.slices;
            stats.traced_rays = run.traced_rays;
            finished = run.words;
        } else {
            // Nothing to hit: only the count of traceable rays is wanted.
            let mut ids = DeviceBuffer::<u32>::uninit(&gpu, "dacrt ray indices", n_rays)?;
            select_indices_into(&traceable, &mut ids, &mut ray_count)?;
            stats.traced_rays = ray_count.download()?[0] as usize;
        }
        let (hits, occluded) = match answers {
            Answers::Closest(hits) => (hits.ptr_mut(), DevicePtrMut::null()),
            Answers::Occluded(out) => (DevicePtrMut::null(), out.ptr_mut()),
        };
        launch_grid_stride(
            &gpu,
            d::DACRT_RESOLVE,
            n_rays,
            (
                rays.ptr(),
                triangles.ptr(),
                keys.ptr(),
                n_rays as u64,
                hits,
                occluded,
                u32::from(any_hit),
                counters.ptr_mut(),
            ),
        )?;
        let resolved =
            <[u64; STAT_WORDS]>::try_from(counters.download()?).expect("eight stats words");
        let [tasks, direct, pairs, depth, lost, ray_words, tri_words, _] =
            add_stat_words(finished, resolved);
        if lost != 0 {
            return Err(GpuError::Invalid {
                what: "dacrt hits",
                message: format!(
                    "{lost} winning keys did not reproduce their hit (a broken invariant)"
                ),
            });
        }
        stats.tasks = tasks;
        stats.direct_tasks = direct;
        stats.pair_tests = pairs;
        stats.max_depth = depth as u32;
        if self.config.schedule == DacrtSchedule::Concurrent {
            stats.arena_words = [ray_words, tri_words];
        }
        stats.wall_ms = wall.elapsed().as_secs_f64() * 1e3;
        self.last = stats;
        Ok(stats)
    }

    /// The batch's pool runs, in slices where its arenas would outgrow
    /// their limit: a slice that outgrows it is halved along the kind that
    /// ran out (rays or triangles), and the halves run one after the
    /// other over the same hit keys. A slice's keys are real hits, kept
    /// until a nearer one (ties to the lower triangle) replaces them, so
    /// the answers are the whole batch's whatever the slicing. The
    /// slices' statistics words are summed (the deepest task and the
    /// largest arena demand kept).
    fn run_slices(
        &mut self,
        batch: &Batch<'_>,
        keys: &mut DeviceBuffer<u64>,
        counts: [&mut DeviceBuffer<u32>; 2],
        counters: &mut DeviceBuffer<u64>,
    ) -> Result<SlicedRun, GpuError> {
        let [ray_count, tri_count] = counts;
        let whole = [0..batch.rays.len(), 0..batch.triangles.len()];
        // Every slice's arena holds the root's range of the whole batch.
        if let Some(k) = (0..2).find(|&k| whole[k].len() >= self.arena_limit) {
            return Err(GpuError::Invalid {
                what: "dacrt index arena",
                message: format!(
                    "{} {} leave no room in the arena's {} words",
                    whole[k].len(),
                    ["rays", "triangles"][k],
                    self.arena_limit
                ),
            });
        }
        // Popped from the back: the first slice last in.
        let mut pending = slices_of(&whole, self.slice_items);
        pending.reverse();
        let mut scratch: [Option<DeviceBuffer<u32>>; 2] = [None, None];
        let mut done = SlicedRun::default();
        while let Some(slice) = pending.pop() {
            let flags = self.slice_flags(batch, &slice, &whole, &mut scratch)?;
            let sliced = Batch {
                flags: [
                    flags[0].unwrap_or(batch.flags[0]),
                    flags[1].unwrap_or(batch.flags[1]),
                ],
                ..*batch
            };
            let run =
                self.run_batch(&sliced, keys, [&mut *ray_count, &mut *tri_count], counters)?;
            match run {
                BatchOutcome::Done(run) => {
                    let words = <[u64; STAT_WORDS]>::try_from(counters.download()?)
                        .expect("eight stats words");
                    counters.fill_zero()?;
                    // Each ray lies in one slice whose triangles start at 0.
                    if slice[1].start == 0 {
                        done.traced_rays += ray_count.download()?[0] as usize;
                    }
                    done.words = add_stat_words(done.words, words);
                    done.pool = run.pool;
                    done.runs += run.runs;
                    done.slices += 1;
                }
                BatchOutcome::Outgrew(kind) => {
                    let range = slice[kind].clone();
                    if range.len() < 2 {
                        return Err(GpuError::Invalid {
                            what: "dacrt index arena",
                            message: format!(
                                "one {} takes more than the arena's {} words",
                                ["ray", "triangle"][kind],
                                self.arena_limit
                            ),
                        });
                    }
                    let half = range.len().div_ceil(2);
                    self.slice_items[kind] = self.slice_items[kind].min(half);
                    counters.fill_zero()?;
                    let mut second = slice.clone();
                    second[kind] = range.start + half..range.end;
                    let mut first = slice;
                    first[kind] = range.start..range.start + half;
                    pending.push(second);
                    pending.push(first);
                }
            }
        }
        Ok(done)
    }

    /// A slice's flags: the batch's (`None`) where the slice takes a
    /// kind whole, else a copy in `scratch` zeroed outside the slice.
    fn slice_flags<'s>(
        &self,
        batch: &Batch<'_>,
        slice: &[Range<usize>; 2],
        whole: &[Range<usize>; 2],
        scratch: &'s mut [Option<DeviceBuffer<u32>>; 2],
    ) -> Result<[Option<&'s DeviceBuffer<u32>>; 2], GpuError> {
        let [ray_scratch, tri_scratch] = scratch;
        let mut flags = [None, None];
        for (k, buffer) in [ray_scratch, tri_scratch].into_iter().enumerate() {
            if slice[k] == whole[k] {
                continue;
            }
            let names = ["dacrt ray slice flags", "dacrt triangle slice flags"];
            if buffer.is_none() {
                *buffer = Some(DeviceBuffer::uninit(&self.gpu, names[k], whole[k].len())?);
            }
            let copy = buffer.as_mut().expect("made above");
            copy.copy_from(batch.flags[k])?;
            copy.fill_bytes_in(0..slice[k].start, 0)?;
            copy.fill_bytes_in(slice[k].end..whole[k].end, 0)?;
            flags[k] = Some(&*copy);
        }
        Ok(flags)
    }

    /// The index arrays of a batch and the pool's run over them: in place
    /// (waves), two arrays per kind made for the batch; concurrent, the
    /// arenas, grown and the run repeated while a run runs out (the keys
    /// it left are real hits, so the next run starts from them), until an
    /// arena would outgrow its limit or the device's memory
    /// ([`BatchOutcome::Outgrew`]).
    fn run_batch(
        &mut self,
        batch: &Batch<'_>,
        keys: &mut DeviceBuffer<u64>,
        counts: [&mut DeviceBuffer<u32>; 2],
        counters: &mut DeviceBuffer<u64>,
    ) -> Result<BatchOutcome, GpuError> {
        let gpu = self.gpu.clone();
        let lens = [batch.rays.len(), batch.triangles.len()];
        let [ray_count, tri_count] = counts;
        if self.config.schedule == DacrtSchedule::Waves {
            let array = |what, n| DeviceBuffer::<u32>::uninit(&gpu, what, n);
            let mut ray_ids = [
                array("dacrt ray indices", lens[0])?,
                array("dacrt ray indices (second)", lens[0])?,
            ];
            let mut tri_ids = [
                array("dacrt triangle indices", lens[1])?,
                array("dacrt triangle indices (second)", lens[1])?,
            ];
            select_indices_into(batch.flags[0], &mut ray_ids[0], ray_count)?;
            select_indices_into(batch.flags[1], &mut tri_ids[0], tri_count)?;
            let [ray_a, ray_b] = &mut ray_ids;
            let [tri_a, tri_b] = &mut tri_ids;
            let ids = [
                ray_a.ptr_mut(),
                ray_b.ptr_mut(),
                tri_a.ptr_mut(),
                tri_b.ptr_mut(),
            ];
            let pool = self.run_pool(batch, ids, keys, [&*ray_count, &*tri_count], counters)?;
            return Ok(BatchOutcome::Done(BatchRun { pool, runs: 1 }));
        }
        let mut extra: [usize; 2] = std::array::from_fn(|k| {
            let cap = if k == 1 {
                TRI_ARENA_PER_ITEM * (lens[0] + lens[1])
            } else {
                usize::MAX
            };
            self.arena_extra
                .unwrap_or(((lens[k] as f64 * self.arena_scale[k]) as usize).min(cap))
                .max(1024)
        });
        let mut grew_pool = false;
        for runs in 1.. {
            let [mut ray_arena, mut tri_arena] = match self.take_arenas(lens, extra)? {
                Ok(arenas) => arenas,
                Err(kind) => return Ok(BatchOutcome::Outgrew(kind)),
            };
            select_indices_into(batch.flags[0], &mut ray_arena, ray_count)?;
            select_indices_into(batch.flags[1], &mut tri_arena, tri_count)?;
            // A kept arena may be longer than the limit (set after it grew).
            let sizes = [&ray_arena, &tri_arena].map(|a| a.len().min(self.arena_limit) as u32);
            self.set_arena_sizes(sizes)?;
            let ids = [
                ray_arena.ptr_mut(),
                DevicePtrMut::null(),
                tri_arena.ptr_mut(),
                DevicePtrMut::null(),
            ];
            let pool = self.run_pool(batch, ids, keys, [&*ray_count, &*tri_count], counters);
            self.arenas = [Some(ray_arena), Some(tri_arena)];
            let pool = match pool {
                // Concurrent children can outnumber the pool's slots (deep
                // trees of tiny tasks): where the slots are the tracer's
                // choice, four times more and the batch again, once.
                Err(GpuError::TaskPool { .. }) if self.slots.is_none() && !grew_pool => {
                    grew_pool = true;
                    self.pool_scale *= 4;
                    counters.fill_zero()?;
                    continue;
                }
                other => other?,
            };
            let words = counters.download()?;
            let spilled = words[DS_SPILLED];
            if spilled == 0 {
                return Ok(BatchOutcome::Done(BatchRun { pool, runs }));
            }
            for k in (0..2).filter(|k| spilled & (1 << k) != 0) {
                if lens[k] + extra[k] >= self.arena_limit {
                    return Ok(BatchOutcome::Outgrew(k));
                }
                // What the run asked before it stopped, at least twice.
                let asked = words[DS_RAY_ARENA + k] as usize;
                extra[k] = (2 * extra[k])
                    .max(asked + asked / 4)
                    .min(self.arena_limit.saturating_sub(lens[k]));
                if self.arena_extra.is_none() {
                    self.arena_scale[k] = self.arena_scale[k].max(extra[k] as f64 / lens[k] as f64);
                }
            }
            counters.fill_zero()?;
        }
        unreachable!("the loop returns")
    }

    /// The arenas, each at least a batch's `lens` plus `extra` words (at
    /// most the arena limit); a smaller one is freed before its successor
    /// is made, so the two never hold memory at once. `Err(kind)` where
    /// the device's memory cannot hold arena `kind` (0 rays, 1 triangles)
    /// beside the other: the batch then runs in slices.
    fn take_arenas(
        &mut self,
        lens: [usize; 2],
        extra: [usize; 2],
    ) -> Result<Result<[DeviceBuffer<u32>; 2], usize>, GpuError> {
        let names = ["dacrt ray arena", "dacrt triangle arena"];
        let limit = self.arena_limit;
        let mut take = |k: usize| {
            let words = (lens[k] + extra[k]).min(limit);
            match self.arenas[k].take() {
                Some(arena) if arena.len() >= words => Ok(arena),
                _ => DeviceBuffer::<u32>::uninit(&self.gpu, names[k], words),
            }
        };
        let rays = match take(0) {
            Err(GpuError::OutOfMemory { .. }) => return Ok(Err(0)),
            other => other?,
        };
        match take(1) {
            Ok(tris) => Ok(Ok([rays, tris])),
            Err(GpuError::OutOfMemory { .. }) => {
                self.arenas[0] = Some(rays);
                Ok(Err(1))
            }
            Err(e) => Err(e),
        }
    }

    /// The arenas' sizes in the kernel's parameters, uploaded only when
    /// they change (the arenas persist, so seldom).
    fn set_arena_sizes(&mut self, sizes: [u32; 2]) -> Result<(), GpuError> {
        let mut params = self.params_now;
        params[RAY_ARENA_PARAM..RAY_ARENA_PARAM + 2].copy_from_slice(&sizes);
        if params != self.params_now {
            self.params.upload(&params)?;
            self.params_now = params;
        }
        Ok(())
    }

    /// The persistent launch over the prepared index arrays (rays A, B,
    /// triangles A, B; the B arrays null for the arenas); the pool (and
    /// its bins) grown first where this batch may need more slots.
    fn run_pool(
        &mut self,
        batch: &Batch<'_>,
        ids: [DevicePtrMut<'_, u32>; 4],
        keys: &mut DeviceBuffer<u64>,
        counts: [&DeviceBuffer<u32>; 2],
        counters: &mut DeviceBuffer<u64>,
    ) -> Result<PoolStats, GpuError> {
        let capacity = self.slots.unwrap_or_else(|| {
            let slots = pool_slots(
                batch.rays.len(),
                batch.triangles.len(),
                self.config.schedule,
            );
            (slots * self.pool_scale).min(MAX_SLOTS)
        });
        let fits = |p: &TaskPool| match self.slots {
            Some(slots) => p.capacity() == slots,
            None => p.capacity() >= capacity,
        };
        if self.pool.as_ref().is_none_or(|(p, _)| !fits(p)) {
            // The old pool goes first, so the two never hold memory at once.
            self.pool = None;
            let pool = TaskPool::new(&self.gpu, d::DACRT_TRACE, TaskPoolConfig::new(capacity))?;
            let bins =
                DeviceBuffer::zeroed(&self.gpu, "dacrt RDH bins", capacity * SLOT_BIN_WORDS)?;
            self.pool = Some((pool, bins));
        }
        let (pool, bins) = self.pool.as_mut().expect("made above");
        pool.reset()?;
        let (grid, threads) = pool.launch_shape();
        let [ray_a, ray_b, tri_a, tri_b] = ids;
        let p = pool.args();
        self.gpu.launch(
            d::DACRT_TRACE,
            grid,
            threads,
            (
                batch.rays.ptr(),
                batch.triangles.ptr(),
                batch.boxes.ptr(),
                ray_a,
                ray_b,
                tri_a,
                tri_b,
                keys.ptr_mut(),
                bins.ptr_mut(),
                self.plan.ptr(),
                counts[0].ptr(),
                counts[1].ptr(),
                batch.root_box.ptr(),
                counters.ptr_mut(),
                self.params.ptr(),
                u32::from(batch.any_hit),
                p.headers,
                p.records,
                p.control,
                p.counters,
                p.capacity,
                p.watchdog_ns,
            ),
        )?;
        match pool.finish(d::DACRT_TRACE.name()) {
            Ok(stats) => Ok(stats),
            Err(e) => {
                // A stopped run leaves bins and slots as they were: start
                // afresh next time.
                self.pool = None;
                Err(e)
            }
        }
    }
}

/// What a batch's trace reads: the caller's rays and triangles, the
/// triangles' boxes, the flags of the traceable rays and the finite
/// triangles, the root box.
struct Batch<'a> {
    triangles: &'a DeviceBuffer<GpuTriangle>,
    rays: &'a DeviceBuffer<GpuRay>,
    boxes: &'a DeviceBuffer<[f32; 4]>,
    flags: [&'a DeviceBuffer<u32>; 2],
    root_box: &'a DeviceBuffer<i32>,
    any_hit: bool,
}

/// A batch's last pool run and how many runs it took.
struct BatchRun {
    pool: PoolStats,
    runs: u32,
}

/// How a batch's run ended: done, or stopped because arena `kind`
/// (0 rays, 1 triangles) would outgrow its limit or the device's memory.
enum BatchOutcome {
    Done(BatchRun),
    Outgrew(usize),
}

/// A batch run in slices: the last pool run, the runs and slices, the
/// traceable rays, and the slices' statistics words.
#[derive(Default)]
struct SlicedRun {
    pool: PoolStats,
    runs: u32,
    slices: u32,
    traced_rays: usize,
    words: [u64; STAT_WORDS],
}

/// `a` and `b`'s statistics words together: counts summed, the deepest
/// task and each arena's demand the larger, the spill bits merged.
fn add_stat_words(a: [u64; STAT_WORDS], b: [u64; STAT_WORDS]) -> [u64; STAT_WORDS] {
    std::array::from_fn(|k| match k {
        DS_DEPTH | DS_RAY_ARENA | DS_TRI_ARENA => a[k].max(b[k]),
        DS_SPILLED => a[k] | b[k],
        _ => a[k] + b[k],
    })
}

/// The slices of `whole` (rays, triangles) with at most `items[k]` of
/// kind `k` each, rays outermost, in order.
fn slices_of(whole: &[Range<usize>; 2], items: [usize; 2]) -> Vec<[Range<usize>; 2]> {
    let chunks = |range: &Range<usize>, most: usize| -> Vec<Range<usize>> {
        let most = most.max(1);
        range
            .clone()
            .step_by(most)
            .map(|start| start..(start + most).min(range.end))
            .collect()
    };
    let mut slices = Vec::new();
    for rays in chunks(&whole[0], items[0]) {
        for tris in chunks(&whole[1], items[1]) {
            slices.push([rays.clone(), tris]);
        }
    }
    slices
}

/// The most slots of a pool.
const MAX_SLOTS: usize = 1 << 24;

/// Slots for a batch: every live task holds rays and triangles of its
/// own or shares them with siblings waiting on it (at most six per
/// subdivision on the way down), so the live set grows with the active
/// frontier, not the tree; measured peaks stay far below this. The
/// concurrent schedule's frontier is wider (all seven children at once:
/// 8 338 tasks alive at the peak for 14 000 rays and 20 000 triangles
/// subdivided down to two of each, H100, 2026-11-27), so it gets 16 384
/// slots more.
fn pool_slots(rays: usize, triangles: usize, schedule: DacrtSchedule) -> usize {
    let base = match schedule {
        DacrtSchedule::Concurrent => 16384,
        DacrtSchedule::Waves => 4096,
    };
    ((rays + triangles) / 8 + base).min(MAX_SLOTS)
}

/// The dependency table `dacrt_trace` reads (`schedule.rs`), for the
/// kernels' host emulation in the tests.
pub fn kernel_table() -> Vec<u32> {
    schedule::device_table()
}

/// `config` as `dacrt_trace`'s `params[]`: the minimum sizes, the depth
/// bound, the split (1 for RDH), the two costs' bits and the schedule (1
/// for concurrent).
pub fn kernel_params(config: &DacrtConfig) -> [u32; PARAM_WORDS] {
    let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    [
        count(config.min_rays),
        count(config.min_tris),
        config.max_depth,
        u32::from(config.split == DacrtSplit::Rdh),
        config.c_inters.to_bits(),
        config.c_sort.to_bits(),
        u32::from(config.schedule == DacrtSchedule::Concurrent),
        // The arenas' sizes: set by each run.
        0,
        0,
        config.near_levels,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Slices cover the batch once, rays outermost, none above its size.
    #[test]
    fn slices_tile_the_batch() {
        let whole = [0..10, 0..7];
        assert_eq!(slices_of(&whole, [usize::MAX; 2]), vec![whole.clone()]);
        let slices = slices_of(&whole, [4, 3]);
        assert_eq!(slices.len(), 3 * 3);
        assert_eq!(slices[0], [0..4, 0..3]);
        assert_eq!(slices[2], [0..4, 6..7]);
        assert_eq!(slices[8], [8..10, 6..7]);
        let mut covered = vec![[0u32; 7]; 10];
        for [rays, tris] in &slices {
            assert!(rays.len() <= 4 && tris.len() <= 3);
            for r in rays.clone() {
                for t in tris.clone() {
                    covered[r][t] += 1;
                }
            }
        }
        assert!(covered.iter().flatten().all(|&c| c == 1));
    }

    /// Counts add up; the deepest task and the arenas' demand are the
    /// largest of the slices'; the spill bits merge.
    #[test]
    fn slice_statistics_add_up() {
        let a = [10, 4, 100, 7, 0, 500, 300, 0];
        let b = [5, 2, 50, 9, 1, 400, 350, 2];
        assert_eq!(add_stat_words(a, b), [15, 6, 150, 9, 1, 500, 350, 2]);
    }

    /// The constants above are the kernel file's.
    #[test]
    fn constants_match_the_kernels() {
        let source = include_str!("taskpool.cu");
        let define = |name: &str| -> String {
            source
                .lines()
                .find_map(|l| l.strip_prefix(&format!("#define {name} ")))
                .unwrap_or_else(|| panic!("{name} not defined"))
                .split_whitespace()
                .next()
                .unwrap()
                .to_owned()
        };
        assert_eq!(define("DACRT_BIN_WORDS"), "6u");
        assert_eq!(define("DS_WORDS"), format!("{STAT_WORDS}u"));
        assert_eq!(define("DACRT_PARAM_WORDS"), format!("{PARAM_WORDS}u"));
        assert_eq!(define("DACRT_C_SORT"), "5u");
        assert_eq!(kernel_params(&DacrtConfig::RDH)[5], 80f32.to_bits());
        assert_eq!(
            define("DACRT_PLAN_WORDS"),
            format!("{}u", schedule::TABLE_WORDS)
        );
        assert_eq!(SLOT_BIN_WORDS, 32 * 6);
        for schedule in [DacrtSchedule::Concurrent, DacrtSchedule::Waves] {
            assert!(pool_slots(0, 0, schedule) >= 4096);
            assert_eq!(pool_slots(usize::MAX / 2, 0, schedule), MAX_SLOTS);
        }
    }
}
