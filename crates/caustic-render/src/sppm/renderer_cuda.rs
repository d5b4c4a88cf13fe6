//! SPPM on a CUDA GPU, the twin of [`super::render`]: every pass on the
//! device, the pixel statistics kept there in doubles, one download at the
//! end (`kernels/sppm.cu` has the stages).
//!
//! Per pass: the eye pass as a wavefront (one jittered ray per pixel, one
//! Fresnel-chosen branch at glass, visible point and shadow rays at the
//! first diffuse or glossy hit; the CPU's random keys), the radii of new
//! pixels, the photon pass of [`crate::photon::trace_cuda`] with the CPU's
//! per-pass seed (`L D` left out), a hash grid over the pass's photons, and
//! one thread per pixel that sums the photons within its radius and applies
//! the progressive update. The CPU deposits each photon at the points
//! around it; the GPU gathers them at each point: the same sums, added in
//! another order, with no atomics, so the image is deterministic.

use std::ops::ControlFlow;
use std::time::Instant;

use crate::photon::records_cuda::{GpuPhoton, GridView};
use crate::scene_cuda::FrameParams;
use crate::sppm::kernels_cuda::{
    self as kernels, EyeStep, EyeTargets, GpuSppmPath, GpuSppmPixel, GpuVisiblePoint,
};
use crate::team::{
    Solo, Team, TeamError, TileRows, gather_concat, rows_film_to_root, share, sum_u64,
};
use caustic_accel::bvh::device_accel_cuda::AccelTracer;
use caustic_accel::bvh::traverse_cuda::{GpuHit, GpuRay};
use caustic_accel::bvh::triangle_bvh_cuda::DeviceBvh;
use caustic_accel::points::hash_grid_cuda::GpuHashGrid;
use caustic_geom::Rgb;
use caustic_gpu::ops::compact::{SelectScratch, gather_wave_padded, select_indices_at};
use caustic_gpu::{DeviceBuffer, Gpu, GpuError};
use caustic_scene::Camera;

use super::gather::photon_settings;
use super::{AUTO_RADIUS_PIXELS, SppmError, SppmSettings, SppmStats};
use crate::download_cuda::download_large;
use crate::photon::trace_cuda::GpuPhotonMaps;
use crate::photon::{PhotonSources, trace_cuda};
use crate::team_cuda::{
    GpuTeamError, exchanges_on_device, gather_device_runs, hand_over, hands_over_on_device,
    interleaved_film_to_root, take_over,
};
use crate::wavefront_cuda::{WavePad, host_reads_after, tail_paths};
use crate::whitted::render_cuda::GpuScene;
use crate::{Film, FresnelMode, RenderScene, WhittedSettings};

/// A GPU SPPM error: a setting it cannot render, or a device failure.
#[derive(Debug, thiserror::Error)]
pub enum SppmCudaError {
    #[error(transparent)]
    Settings(#[from] SppmError),
    #[error(transparent)]
    Gpu(#[from] GpuError),
}

/// The state after a pass, handed to the per-pass callback.
pub struct GpuPassView<'a> {
    /// Passes done (1 after the first).
    pub passes: u32,
    pixels: &'a DeviceBuffer<GpuSppmPixel>,
    width: u32,
    height: u32,
}

impl GpuPassView<'_> {
    /// The image so far (one kernel and a download: build it only for the
    /// passes you write or score).
    pub fn film(&self) -> Result<Film, GpuError> {
        image(self.pixels, self.passes, self.width, self.height)
    }
}

/// Renders `scene` through `camera` on `gpu` (the scene uploaded with the
/// default GPU structure); `on_pass` is called after every pass with the
/// state so far, and a `Break` from it ends the render there, as on the
/// CPU ([`super::render_passes`]).
pub fn render_cuda(
    gpu: &Gpu,
    scene: &RenderScene,
    camera: &Camera,
    settings: &SppmSettings,
    on_pass: &mut dyn FnMut(&GpuPassView) -> ControlFlow<()>,
) -> Result<(Film, SppmStats), SppmCudaError> {
    settings.validate()?;
    let start = Instant::now();
    let device = GpuScene::upload(gpu, scene)?;
    let (film, mut stats) = render_cuda_on(&device, scene, camera, settings, on_pass)?;
    stats.seconds = start.elapsed().as_secs_f64();
    Ok((film, stats))
}

/// [`render_cuda`] on a scene already uploaded as `device` (with the
/// structure of the caller's choice); the stats' time leaves the upload out.
pub fn render_cuda_on(
    device: &GpuScene,
    scene: &RenderScene,
    camera: &Camera,
    settings: &SppmSettings,
    on_pass: &mut dyn FnMut(&GpuPassView) -> ControlFlow<()>,
) -> Result<(Film, SppmStats), SppmCudaError> {
    let (film, stats) = run(device, scene, camera, (settings, &Solo), on_pass)?;
    Ok((Solo::image(film), stats))
}

/// Renders like [`render_cuda_on`] as one member of `team` (one GPU each,
/// or one MPI rank each; see [`crate::team`]), as the CPU's
/// [`super::render_in_team`] shares the work: each member owns every
/// size-th row of 8×8 tiles ([`TileRows::interleaved`]: their eye paths,
/// visible points and statistics; interleaved, so that the rows seen
/// through the glass, whose paths are the longest, are shared) and
/// traces a contiguous share of every pass's photons; the shares are
/// merged on every member run by run (each bounce of each wave, members in
/// rank order: [`gather_device_runs`]), which is the single GPU's photon
/// list in its order, so each member gathers, for its own pixels, exactly
/// the photons a single GPU gathers in the same order (the radius sums are
/// exact too). The root returns the whole image, equal to the single GPU's
/// bit for bit; the other members return `None`, their rows sent to the
/// root ([`rows_film_to_root`]). `progress` gets the passes done.
/// Statistics count the whole team's rays and deposits.
///
/// That is [`TeamSplit::Rows`]; a team of the GPUs of one process deals
/// out whole passes instead ([`TeamSplit::Passes`], the default there:
/// [`TeamSplit::for_team`]), with the same image.
pub fn render_cuda_in_team(
    device: &GpuScene,
    scene: &RenderScene,
    camera: &Camera,
    settings: &SppmSettings,
    team: &dyn Team,
    progress: &(dyn Fn(u32) + Sync),
) -> Result<(Option<Film>, SppmStats), SppmCudaError> {
    let split = TeamSplit::for_team(team);
    render_cuda_in_team_split(device, scene, camera, settings, (team, split), progress)
}

/// [`render_cuda_in_team`] with the team's split named: an error for
/// [`TeamSplit::Passes`] on a team that cannot hand a buffer from one
/// member to another ([`hands_over_on_device`]).
pub fn render_cuda_in_team_split(
    device: &GpuScene,
    scene: &RenderScene,
    camera: &Camera,
    settings: &SppmSettings,
    (team, split): (&dyn Team, TeamSplit),
    progress: &(dyn Fn(u32) + Sync),
) -> Result<(Option<Film>, SppmStats), SppmCudaError> {
    let on_pass = &mut |view: &GpuPassView| {
        progress(view.passes);
        ControlFlow::Continue(())
    };
    match split {
        TeamSplit::Rows => run(device, scene, camera, (settings, team), on_pass),
        TeamSplit::Passes if team.size() == 1 || hands_over_on_device(team) => {
            run_dealt(device, scene, camera, (settings, team), on_pass)
        }
        TeamSplit::Passes => Err(SppmError(
            "whole passes are dealt only among GPUs that hand each other device buffers (the GPUs of one process, or the GPU ranks of one node)".into(),
        )
        .into()),
    }
}

/// How the members of a GPU team share an SPPM render. Both give the
/// single GPU's image bit for bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TeamSplit {
    /// Every pass shared: each member owns interleaved rows of tiles
    /// (their eye paths, visible points and statistics) and traces a
    /// share of every pass's photons; the photons are merged on every
    /// member (one exchange a pass, all members together). A member holds
    /// its rows' state only, so an image too large for one GPU divides.
    /// Any team.
    Rows,
    /// Whole passes dealt round the team: member `r` renders passes `r`,
    /// `r + size`, … (eye pass and photons over the whole image, as one
    /// GPU does), and the pixel statistics travel from the member that
    /// gathered pass `p` to the one that gathers `p + 1`, alone
    /// ([`hand_over`], [`take_over`]: about 64 bytes a pixel, device to
    /// device). The members' waves are a single GPU's, so a pass's fixed
    /// costs (its launches, its longest paths) are not paid by every
    /// member, and the only serial part is the gather chain. Each member
    /// needs one GPU's memory for the whole image. The GPUs of one
    /// process (peer copies) or the GPU ranks of one node (CUDA IPC).
    Passes,
}

impl TeamSplit {
    /// [`TeamSplit::Passes`] where `team` hands buffers over on the
    /// devices ([`hands_over_on_device`]), else [`TeamSplit::Rows`];
    /// `CAUSTIC_SPPM_SPLIT=rows` picks rows everywhere (to compare them).
    pub fn for_team(team: &dyn Team) -> Self {
        static ROWS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        let rows =
            *ROWS.get_or_init(|| std::env::var("CAUSTIC_SPPM_SPLIT").is_ok_and(|v| v == "rows"));
        if team.size() > 1 && hands_over_on_device(team) && !rows {
            Self::Passes
        } else {
            Self::Rows
        }
    }
}

fn run(
    device: &GpuScene,
    scene: &RenderScene,
    camera: &Camera,
    (settings, team): (&SppmSettings, &dyn Team),
    on_pass: &mut dyn FnMut(&GpuPassView) -> ControlFlow<()>,
) -> Result<(Option<Film>, SppmStats), SppmCudaError> {
    check_inputs(settings, camera)?;
    let start = Instant::now();
    let sources = PhotonSources::new(scene);
    // Passes in flight: the eye passes on a second upload, on its own
    // stream of the same GPU (the upload's time counts as setup).
    let eye_device = if overlap_passes() {
        let stream = device.gpu().with_own_stream()?;
        Some(GpuScene::upload_with(
            &stream,
            scene,
            device.accel().spec(),
        )?)
    } else {
        None
    };
    let eye_device = eye_device.as_ref().unwrap_or(device);
    // A member keeps the state of its own rows' pixels only.
    let rows = TileRows::interleaved(team, settings.width, settings.height);
    let count = rows.pixel_count();
    let mut frames = (0..if std::ptr::eq(eye_device, device) {
        1
    } else {
        2
    })
        .map(|_| EyeFrame::new(eye_device.gpu(), count))
        .collect::<Result<Vec<_>, _>>()?;
    let mut eye = Eye::new(eye_device, camera, settings, rows)?;
    // The eye's buffers, made on its stream, ready before this stream's
    // work reads them.
    eye_device.gpu().synchronize()?;
    let mut state = State::new(device, camera, settings, team, count)?;
    let mut stats = SppmStats {
        setup_seconds: start.elapsed().as_secs_f64(),
        ..SppmStats::default()
    };
    let scale = radius_scale(scene);
    let parts = (&mut state, &mut eye, &mut frames[..]);
    passes(parts, &sources, scale, &mut stats, on_pass)?;
    let film_start = Instant::now();
    let [sum, count] = kernels::final_radius_sum(&state.pixels, scale)?;
    let [sum, count] = sum_u64(team, &[sum, count]).map_err(team_error)?[..] else {
        unreachable!("two sums for two counts")
    };
    stats.mean_radius = mean_radius(sum, count, scale);
    let values = kernels::film(&state.pixels, stats.passes)?;
    let film = film_to_root(team, (settings.width, settings.height), values)?;
    let sums = sum_u64(team, &[stats.rays, stats.deposits]).map_err(team_error)?;
    (stats.rays, stats.deposits) = (sums[0], sums[1]);
    if team.size() > 1 {
        [stats.eye_member_seconds, stats.photon_member_seconds] =
            member_ranges(team, state.own_seconds)?;
    }
    stats.film_seconds = film_start.elapsed().as_secs_f64();
    stats.seconds = start.elapsed().as_secs_f64();
    Ok((film, stats))
}

/// The image on the root (`None` on the other members) from each member's
/// `values` of its own rows ([`TileRows::interleaved`]): merged on the
/// devices and downloaded once by the root where the members' devices
/// reach each other, else each member's rows downloaded and sent to the
/// root through the team.
fn film_to_root(
    team: &dyn Team,
    size: (u32, u32),
    values: DeviceBuffer<f32>,
) -> Result<Option<Film>, SppmCudaError> {
    if team.size() > 1 && exchanges_on_device(team) {
        return Ok(interleaved_film_to_root(team, size, values)?);
    }
    let mut mine: Vec<Rgb> = bytemuck::zeroed_vec(values.len() / 3);
    download_large(&values, bytemuck::cast_slice_mut(&mut mine))?;
    let members = team.size() as u64;
    let rows_of = |rank| TileRows::interleaved_of(rank as u64, members, size.0, size.1);
    rows_film_to_root(team, size, mine, rows_of).map_err(team_error)
}

/// The settings and the camera checked before anything runs.
fn check_inputs(settings: &SppmSettings, camera: &Camera) -> Result<(), SppmCudaError> {
    settings.validate()?;
    if !camera.is_valid() {
        return Err(SppmError("the camera frame is degenerate".into()).into());
    }
    Ok(())
}

/// Fixed point for the radius sums: 2^32 steps across the scene (exact in
/// any order, so every split sums the same).
fn radius_scale(scene: &RenderScene) -> f64 {
    2f64.powi(32) / f64::from(scene.scene_diagonal.max(1e-30))
}

/// The mean radius from fixed-point radius sums (`sum` of `count` radii at
/// `scale` steps a unit; 0 when no pixel has a radius).
fn mean_radius(sum: u64, count: u64, scale: f64) -> f64 {
    if count > 0 {
        sum as f64 / scale / count as f64
    } else {
        0.0
    }
}

/// [`TeamSplit::Passes`]: this member's passes (`rank`, `rank + size`,
/// …) rendered whole, each gathered into the pixel statistics taken over
/// from the member that gathered the pass before and handed on to the one
/// that gathers the next; the last pass's statistics go to the root,
/// which makes the image. Every pass is a single GPU's pass (the same
/// waves, photons, grid and gather, on the same statistics), so the image
/// is the single GPU's bit for bit. A member traces its next pass while
/// the others gather theirs: the statistics wait for the member, not the
/// other way round, until the gathers' chain (about a quarter of a pass)
/// is the longer.
fn run_dealt(
    device: &GpuScene,
    scene: &RenderScene,
    camera: &Camera,
    (settings, team): (&SppmSettings, &dyn Team),
    on_pass: &mut dyn FnMut(&GpuPassView) -> ControlFlow<()>,
) -> Result<(Option<Film>, SppmStats), SppmCudaError> {
    check_inputs(settings, camera)?;
    let start = Instant::now();
    let sources = PhotonSources::new(scene);
    let rows = TileRows::interleaved(&Solo, settings.width, settings.height);
    let count = rows.pixel_count();
    let mut frame = EyeFrame::new(device.gpu(), count)?;
    let mut eye = Eye::new(device, camera, settings, rows)?;
    // Each pass is a single GPU's: nothing of it is shared within the pass.
    let mut state = State::new(device, camera, settings, &Solo, count)?;
    let mut stats = SppmStats {
        setup_seconds: start.elapsed().as_secs_f64(),
        ..SppmStats::default()
    };
    let scale = radius_scale(scene);
    let size = team.size() as u32;
    let owner = |pass: u32| (pass % size) as usize;
    let passes = settings.passes;
    for pass in (team.rank() as u32..passes).step_by(size as usize) {
        let (rays, seconds) = eye.pass(pass, &mut frame)?;
        state.add_eye(&mut stats, rays, seconds);
        let maps = state.trace_photons(&sources, pass, &mut stats)?;
        let turns = Turns {
            team,
            before: pass.checked_sub(1).map(owner),
            next: (pass + 1 < passes).then(|| owner(pass + 1)),
        };
        state.fold_dealt(maps, (scale, &frame), turns, &mut stats)?;
        let view = GpuPassView {
            passes: pass + 1,
            pixels: &state.pixels,
            width: settings.width,
            height: settings.height,
        };
        // Every member renders its passes: the others wait for them.
        let _ = on_pass(&view);
    }
    let film_start = Instant::now();
    if team.is_root() && passes > 0 && owner(passes - 1) != 0 {
        take_over(team, owner(passes - 1), &mut state.pixels)?;
    }
    // Also the barrier after the root's last take-over: no member frees
    // statistics another may still be copying.
    let sums = sum_u64(
        team,
        &[
            stats.rays,
            stats.deposits,
            stats.photons_emitted,
            stats.photons_stored,
        ],
    )
    .map_err(team_error)?;
    [
        stats.rays,
        stats.deposits,
        stats.photons_emitted,
        stats.photons_stored,
    ] = [sums[0], sums[1], sums[2], sums[3]];
    [stats.eye_member_seconds, stats.photon_member_seconds] =
        member_ranges(team, state.own_seconds)?;
    stats.passes = passes;
    let film = if team.is_root() {
        let [sum, count] = kernels::final_radius_sum(&state.pixels, scale)?;
        stats.mean_radius = mean_radius(sum, count, scale);
        Some(image(
            &state.pixels,
            passes,
            settings.width,
            settings.height,
        )?)
    } else {
        None
    };
    stats.film_seconds = film_start.elapsed().as_secs_f64();
    stats.seconds = start.elapsed().as_secs_f64();
    Ok((film, stats))
}

/// The fastest and the slowest member's value of each of `mine`'s two
/// times.
fn member_ranges(team: &dyn Team, mine: [f64; 2]) -> Result<[[f64; 2]; 2], SppmCudaError> {
    let all = gather_concat(team, vec![mine]).map_err(team_error)?;
    let range = |i: usize| {
        let values = all.iter().map(|m| m[i]);
        [
            values.clone().fold(f64::INFINITY, f64::min),
            values.fold(0.0, f64::max),
        ]
    };
    Ok([range(0), range(1)])
}

fn team_error(e: TeamError) -> SppmCudaError {
    SppmError(format!("team exchange failed: {e}")).into()
}

impl From<GpuTeamError> for SppmCudaError {
    fn from(error: GpuTeamError) -> Self {
        match error {
            GpuTeamError::Gpu(e) => e.into(),
            GpuTeamError::Team(e) => team_error(e),
        }
    }
}

/// The image of the pixel statistics after `passes` passes.
fn image(
    pixels: &DeviceBuffer<GpuSppmPixel>,
    passes: u32,
    width: u32,
    height: u32,
) -> Result<Film, GpuError> {
    let mut film = Film::new(width, height);
    download_large(
        &kernels::film(pixels, passes)?,
        bytemuck::cast_slice_mut(&mut film.pixels),
    )?;
    Ok(film)
}

/// What every pass shares: the scene, the camera's parameters and the
/// pixel statistics (the eye pass is [`Eye`]'s, into [`EyeFrame`]s).
struct State<'a> {
    device: &'a GpuScene,
    settings: &'a SppmSettings,
    team: &'a dyn Team,
    params: DeviceBuffer<FrameParams>,
    pixels: DeviceBuffer<GpuSppmPixel>,
    /// This member's own eye-pass and photon seconds so far (without the
    /// waits for the others).
    own_seconds: [f64; 2],
    /// The next pass's grid cell ([`State::cell_after`]).
    cell: Option<f32>,
}

/// Whether SPPM's eye passes run a pass ahead, on a second upload of the
/// scene on a stream of its own (`CAUSTIC_SPPM_OVERLAP=1`; off by default:
/// on one and two H200s the two streams' waves share the device rather
/// than fill each other's gaps, and the render takes the same time,
/// docs/SCALING.md; four GPUs are not measured).
fn overlap_passes() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("CAUSTIC_SPPM_OVERLAP").is_ok_and(|v| v == "1"))
}

/// The camera's frame parameters for SPPM's eye pass on `device`.
fn eye_params(
    device: &GpuScene,
    camera: &Camera,
    settings: &SppmSettings,
) -> Result<DeviceBuffer<FrameParams>, GpuError> {
    let whitted = WhittedSettings {
        width: settings.width,
        height: settings.height,
        spp: 1,
        max_depth: settings.max_depth,
        light_samples: settings.light_samples,
        fresnel: FresnelMode::Exact,
        seed: settings.seed,
        trace: Default::default(),
    };
    let params = device.params(camera, &whitted, 0);
    DeviceBuffer::from_slice(device.gpu(), "sppm params", &[params])
}

/// Every pass, each folded into the pixels; `on_pass` after each (a
/// `Break` ends a render of one member there). With two `frames` the eye
/// passes run a pass ahead ([`State::pass_beside_next_eye`]).
fn passes(
    (state, eye, frames): (&mut State, &mut Eye, &mut [EyeFrame]),
    sources: &PhotonSources,
    scale: f64,
    stats: &mut SppmStats,
    on_pass: &mut dyn FnMut(&GpuPassView) -> ControlFlow<()>,
) -> Result<(), SppmCudaError> {
    let ahead = frames.len() == 2;
    let count = state.settings.passes;
    if ahead && count > 0 {
        let (rays, seconds) = eye.pass(0, &mut frames[0])?;
        state.add_eye(stats, rays, seconds);
    }
    for pass in 0..count {
        if ahead {
            state.pass_beside_next_eye((eye, frames), sources, pass, scale, stats)?;
        } else {
            let (rays, seconds) = eye.pass(pass, &mut frames[0])?;
            state.add_eye(stats, rays, seconds);
            state.fold(sources, pass, scale, &frames[0], stats)?;
        }
        stats.passes += 1;
        let view = GpuPassView {
            passes: pass + 1,
            pixels: &state.pixels,
            width: state.settings.width,
            height: state.settings.height,
        };
        // A team's members make every pass (a member that stopped early
        // would leave the others waiting at the next exchange).
        if on_pass(&view).is_break() && state.team.size() == 1 {
            break;
        }
    }
    Ok(())
}

impl<'a> State<'a> {
    fn new(
        device: &'a GpuScene,
        camera: &Camera,
        settings: &'a SppmSettings,
        team: &'a dyn Team,
        pixels: usize,
    ) -> Result<Self, GpuError> {
        Ok(Self {
            device,
            settings,
            team,
            params: eye_params(device, camera, settings)?,
            pixels: DeviceBuffer::zeroed(device.gpu(), "sppm pixels", pixels)?,
            own_seconds: [0.0; 2],
            cell: None,
        })
    }

    fn add_eye(&mut self, stats: &mut SppmStats, rays: u64, seconds: f64) {
        stats.rays += rays;
        stats.eye_seconds += seconds;
        self.own_seconds[0] += seconds;
    }

    /// Pass `pass` (its eye pass already in frame `pass % 2`) while the
    /// next pass's eye pass runs into the other frame, on the eye's own
    /// stream and a thread of its own: an eye pass depends on no earlier
    /// pass (only the gather reads the radii), and it and this pass's
    /// photons, grid and gather are latency-bound, so each may fill the
    /// GPU the other leaves idle. The eye's seconds then run beside the
    /// other stages', not after them.
    fn pass_beside_next_eye(
        &mut self,
        (eye, frames): (&mut Eye, &mut [EyeFrame]),
        sources: &PhotonSources,
        pass: u32,
        scale: f64,
        stats: &mut SppmStats,
    ) -> Result<(), SppmCudaError> {
        let next = pass + 1 < self.settings.passes;
        let [first, second] = frames else {
            unreachable!("passes in flight keep two frames")
        };
        let (current, other) = match pass % 2 {
            0 => (first, second),
            _ => (second, first),
        };
        let (ahead, folded) = std::thread::scope(|scope| {
            let ahead = next.then(|| scope.spawn(move || eye.pass(pass + 1, other)));
            let folded = self.fold(sources, pass, scale, current, stats);
            let ahead = ahead.map(|thread| {
                thread
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            });
            (ahead, folded)
        });
        folded?;
        if let Some(ahead) = ahead {
            let (rays, seconds) = ahead?;
            self.add_eye(stats, rays, seconds);
        }
        Ok(())
    }

    /// The pass's photons traced and merged, the new pixels' radii, the
    /// grid and the gather with `frame`'s visible points and radiance.
    fn fold(
        &mut self,
        sources: &PhotonSources,
        pass: u32,
        scale: f64,
        frame: &EyeFrame,
        stats: &mut SppmStats,
    ) -> Result<(), SppmCudaError> {
        let maps = self.trace_photons(sources, pass, stats)?;
        self.fold_photons(maps, scale, frame, stats)
    }

    /// This member's share of pass `pass`'s photons, traced and waited for.
    fn trace_photons(
        &mut self,
        sources: &PhotonSources,
        pass: u32,
        stats: &mut SppmStats,
    ) -> Result<GpuPhotonMaps, SppmCudaError> {
        let clock = Instant::now();
        let s = self.settings;
        let photon = photon_settings(s.photons_per_pass, s.max_depth, s.seed, pass);
        let share = share(self.team, photon.photons);
        let maps = trace_cuda::trace_photon_range(self.device, sources, &photon, share)?;
        self.device.gpu().synchronize()?;
        self.own_seconds[1] += clock.elapsed().as_secs_f64();
        stats.photon_seconds += clock.elapsed().as_secs_f64();
        Ok(maps)
    }

    /// The traced `maps` merged with the team's, the new pixels' radii,
    /// the grid and the gather with `frame`'s visible points and radiance.
    fn fold_photons(
        &mut self,
        maps: GpuPhotonMaps,
        scale: f64,
        frame: &EyeFrame,
        stats: &mut SppmStats,
    ) -> Result<(), SppmCudaError> {
        // The team's radius sums are exchanged once the photons are
        // traced: the one exchange both waits for the slowest member (its
        // eye pass and its photons together, one alignment a pass rather
        // than one after each) and keeps the photons' exchange below its
        // own time.
        let mean_radius = self.radii(frame, scale, stats)?;
        let photons = self.merge_photons(maps, stats)?;
        let cell = self.cell_after(mean_radius);
        let grid = self.grid(photons, cell, stats)?;
        self.gather(&grid, frame, stats)
    }

    /// The radii of the pixels `frame` sees for the first time, and the
    /// mean radius of the pixels it sees (summed over the team, in fixed
    /// point: exact in any order).
    fn radii(
        &mut self,
        frame: &EyeFrame,
        scale: f64,
        stats: &mut SppmStats,
    ) -> Result<f64, SppmCudaError> {
        let clock = Instant::now();
        let fixed = self.settings.initial_radius.unwrap_or(0.0);
        kernels::init_radii(&mut self.pixels, &frame.points, fixed, AUTO_RADIUS_PIXELS)?;
        let radius_sums = kernels::radius_sum(&self.pixels, &frame.points, scale)?;
        self.own_seconds[0] += clock.elapsed().as_secs_f64();
        stats.eye_seconds += clock.elapsed().as_secs_f64();
        let clock = Instant::now();
        let [sum, count] = sum_u64(self.team, &radius_sums).map_err(team_error)?[..] else {
            unreachable!("two sums for two counts")
        };
        stats.photon_seconds += clock.elapsed().as_secs_f64();
        Ok(mean_radius(sum, count, scale))
    }

    /// The grid cell for the pass whose pixels' mean radius is
    /// `mean_radius`: the previous pass's mean radius, and for the first
    /// pass its own. Cells of the mean radius: the gather walks as many
    /// shells as a pixel's radius needs, so a few large radii (pixels seen
    /// through glass) do not make every pixel's cells large. A pass late
    /// (the radii shrink slowly), so that a team dealing out the passes
    /// builds a pass's grid before the statistics of the pass before reach
    /// it ([`TeamSplit::Passes`]); every split uses the same cells, so the
    /// gathers' sums run in the same order.
    fn cell_after(&mut self, mean_radius: f64) -> f32 {
        let cell = cell_of(mean_radius);
        self.cell.replace(cell).unwrap_or(cell)
    }

    /// The team's photons of the pass in the single GPU's order (merged
    /// run by run): every member sees the same photons in the same order.
    fn merge_photons(
        &mut self,
        maps: GpuPhotonMaps,
        stats: &mut SppmStats,
    ) -> Result<DeviceBuffer<GpuPhoton>, SppmCudaError> {
        stats.photons_emitted += maps.emitted;
        stats.rays += maps.stats.rays;
        let clock = Instant::now();
        let (photons, _) = gather_device_runs(self.team, maps.global, 0, &maps.global_runs)?;
        stats.exchange_seconds += clock.elapsed().as_secs_f64();
        stats.photons_stored += photons.len() as u64;
        Ok(photons)
    }

    /// The hash grid over the pass's `photons`, with cells of `cell`.
    fn grid(
        &self,
        photons: DeviceBuffer<GpuPhoton>,
        cell: f32,
        stats: &mut SppmStats,
    ) -> Result<PassGrid, SppmCudaError> {
        let clock = Instant::now();
        let positions = crate::photon::trace_cuda::positions(&photons)?;
        let grid = GpuHashGrid::build(&positions, cell)?;
        let view =
            DeviceBuffer::from_slice(photons.gpu(), "sppm photon grid", &[GridView::new(&grid)])?;
        stats.grid_seconds += clock.elapsed().as_secs_f64();
        Ok(PassGrid {
            photons,
            _grid: grid,
            view,
        })
    }

    /// Every pixel's photons within its radius from `grid`, and the
    /// progressive update.
    fn gather(
        &mut self,
        grid: &PassGrid,
        frame: &EyeFrame,
        stats: &mut SppmStats,
    ) -> Result<(), SppmCudaError> {
        let clock = Instant::now();
        stats.deposits += kernels::gather_update(
            &self.params,
            &grid.view,
            &grid.photons,
            &frame.points,
            &mut self.pixels,
            &frame.radiance,
            f64::from(self.settings.alpha),
        )?;
        stats.gather_seconds += clock.elapsed().as_secs_f64();
        Ok(())
    }
}

/// Who gathers around a pass of [`TeamSplit::Passes`]: the member that
/// gathered the pass before and the one that gathers the next (`None`
/// for the first and after the last pass).
struct Turns<'t> {
    team: &'t dyn Team,
    before: Option<usize>,
    next: Option<usize>,
}

impl Turns<'_> {
    /// Where the statistics go after this pass: the next pass's member,
    /// or the root after the last pass.
    fn after(&self) -> usize {
        self.next.unwrap_or(0)
    }
}

impl State<'_> {
    /// A pass of [`TeamSplit::Passes`] folded into the statistics, which
    /// come from the member before and go on to the member after. The
    /// grid is built while the member before still gathers: its cell (the
    /// pass before's mean radius, [`State::cell_after`]) comes ahead of
    /// the statistics; then this pass's own mean radius goes ahead to the
    /// member after.
    fn fold_dealt(
        &mut self,
        maps: GpuPhotonMaps,
        (scale, frame): (f64, &EyeFrame),
        turns: Turns,
        stats: &mut SppmStats,
    ) -> Result<(), SppmCudaError> {
        let rank = turns.team.rank();
        let photons = self.merge_photons(maps, stats)?;
        let other_before = turns.before.filter(|&member| member != rank);
        let cell = match other_before {
            Some(member) => Some(receive_cell(turns.team, member)?),
            None => self.cell,
        };
        let early = match cell {
            Some(cell) => Ok(self.grid(photons, cell, stats)?),
            None => Err(photons),
        };
        if let Some(member) = other_before {
            let clock = Instant::now();
            take_over(turns.team, member, &mut self.pixels)?;
            stats.exchange_seconds += clock.elapsed().as_secs_f64();
        }
        let mean_radius = self.radii(frame, scale, stats)?;
        // The first pass's grid has its own cell.
        let cell = self.cell_after(mean_radius);
        if let Some(member) = turns.next.filter(|&member| member != rank) {
            send_cell(turns.team, member, cell_of(mean_radius))?;
        }
        let grid = match early {
            Ok(grid) => grid,
            Err(photons) => self.grid(photons, cell, stats)?,
        };
        self.gather(&grid, frame, stats)?;
        if turns.after() != rank {
            hand_over(turns.team, turns.after(), &self.pixels)?;
        }
        Ok(())
    }
}

/// Sends the next pass's grid `cell` to member `to` (ahead of the
/// statistics).
fn send_cell(team: &dyn Team, to: usize, cell: f32) -> Result<(), SppmCudaError> {
    team.send(to, &cell.to_bits().to_le_bytes())
        .map_err(team_error)
}

/// The grid cell member `from` sent with [`send_cell`].
fn receive_cell(team: &dyn Team, from: usize) -> Result<f32, SppmCudaError> {
    let message = team.receive(from).map_err(team_error)?;
    let bits = <[u8; 4]>::try_from(message.as_slice()).map_err(|_| {
        team_error(TeamError(format!(
            "member {from} sent a grid cell of {} bytes",
            message.len()
        )))
    })?;
    Ok(f32::from_bits(u32::from_le_bytes(bits)))
}

/// A grid cell for pixels of mean radius `mean_radius` (1 when no pixel
/// has one).
fn cell_of(mean_radius: f64) -> f32 {
    if mean_radius > 0.0 {
        mean_radius as f32
    } else {
        1.0
    }
}

/// A pass's photons and the hash grid over them (which the view names).
struct PassGrid {
    photons: DeviceBuffer<GpuPhoton>,
    _grid: GpuHashGrid,
    view: DeviceBuffer<GridView>,
}

/// What an eye pass writes for each pixel of the member's rows: its
/// visible point and the pass's radiance.
struct EyeFrame {
    points: DeviceBuffer<GpuVisiblePoint>,
    radiance: DeviceBuffer<f32>,
}

impl EyeFrame {
    fn new(gpu: &Gpu, count: usize) -> Result<Self, GpuError> {
        Ok(Self {
            points: DeviceBuffer::zeroed(gpu, "sppm visible points", count)?,
            radiance: DeviceBuffer::zeroed(gpu, "sppm pass radiance", 3 * count)?,
        })
    }
}

/// The eye pass of the member's rows on one upload of the scene (its
/// launches go to that upload's stream).
struct Eye<'a> {
    device: &'a GpuScene,
    settings: &'a SppmSettings,
    rows: TileRows,
    params: DeviceBuffer<FrameParams>,
    tracer: AccelTracer,
    slots: u32,
    pixel_angle: f32,
}

impl<'a> Eye<'a> {
    fn new(
        device: &'a GpuScene,
        camera: &Camera,
        settings: &'a SppmSettings,
        rows: TileRows,
    ) -> Result<Self, GpuError> {
        let (tx, _) = camera.half_extents(settings.width as f32 / settings.height as f32);
        Ok(Self {
            device,
            settings,
            rows,
            params: eye_params(device, camera, settings)?,
            tracer: device.accel().tracer()?,
            slots: device.shadow_slots(settings.light_samples),
            pixel_angle: 2.0 * tx / settings.width as f32,
        })
    }

    /// Pass `pass`'s eye pass into `frame` (cleared first), waited for:
    /// the rays traced and the seconds it took.
    fn pass(&mut self, pass: u32, frame: &mut EyeFrame) -> Result<(u64, f64), GpuError> {
        let clock = Instant::now();
        frame.radiance.fill_zero()?;
        frame.points.fill_zero()?;
        let rays = self.eye_pass(pass, frame)?;
        self.device.gpu().synchronize()?;
        Ok((rays, clock.elapsed().as_secs_f64()))
    }

    /// The eye pass: rays traced, eye and shadow. The wave's length stays
    /// on the device between bounces, and its buffers are allocated once
    /// ([`crate::wavefront_cuda`]).
    fn eye_pass(&mut self, pass: u32, frame: &mut EyeFrame) -> Result<u64, GpuError> {
        let gpu = self.device.gpu().clone();
        let n = self.rows.tiles() as usize * 64;
        let depths = self.settings.max_depth as usize + 1;
        let mut w = EyeBuffers::new(&gpu, n, self.slots as usize, depths)?;
        kernels::primary(
            &self.params,
            (pass, self.settings.jitter),
            &self.rows,
            &mut w.queue.0,
            &mut w.queue.1,
        )?;
        let tail_paths = tail_paths(&gpu);
        let mut depth = 0;
        while depth < depths && !w.queue.0.is_empty() {
            self.eye_step(&mut w, depth, frame)?;
            depth += 1;
            if host_reads_after(depth as u32 - 1) {
                let live = w.counts.download()?[depth] as usize;
                w.queue.0.truncate(live);
                w.queue.1.truncate(live);
                let bvh = self.device.accel().binary();
                if let Some(bvh) = bvh.filter(|_| live > 0 && live <= tail_paths && depth < depths)
                {
                    self.eye_tail(&mut w, bvh, depth, frame)?;
                    break;
                }
            }
        }
        // Every path of every depth traced, with its shadow slots.
        let known = w.counts.download()?;
        let paths_traced = n as u64 + known[1..].iter().map(|&c| u64::from(c)).sum::<u64>();
        Ok(paths_traced * (1 + u64::from(self.slots)))
    }

    /// The rest of the eye wave, from `depth` on, in one launch
    /// ([`kernels::eye_tail`]): the queue's paths each followed by a thread.
    fn eye_tail(
        &mut self,
        w: &mut EyeBuffers,
        bvh: &DeviceBvh,
        depth: usize,
        frame: &mut EyeFrame,
    ) -> Result<(), GpuError> {
        w.set_len(w.queue.0.len(), self.slots as usize)?;
        self.shade(w, depth, Some(bvh), frame)
    }

    /// The queue's paths at `depth` shaded: one step with the traced hits,
    /// or, with `tail`, the whole rest of their paths in one launch.
    fn shade(
        &mut self,
        w: &mut EyeBuffers,
        depth: usize,
        tail: Option<&DeviceBvh>,
        frame: &mut EyeFrame,
    ) -> Result<(), GpuError> {
        let step = EyeStep {
            depth: depth as u32,
            slots: self.slots,
            pixel_angle: self.pixel_angle,
        };
        let targets = EyeTargets {
            child_rays: &mut w.children.0,
            child_paths: &mut w.children.1,
            child_flags: &mut w.child_flags,
            shadow_rays: &mut w.shadow_rays,
            shadow_values: &mut w.shadow_values,
            shadow_flags: &mut w.shadow_flags,
            radiance: &mut frame.radiance,
            points: &mut frame.points,
        };
        let paths = (&w.queue.0, &w.queue.1);
        match tail {
            Some(bvh) => {
                let counts = (&mut w.counts, depth as u32);
                kernels::eye_tail(&self.params, bvh, paths, counts, step, targets)
            }
            None => kernels::eye_step(&self.params, paths.0, &w.hits, paths.1, step, targets),
        }
    }

    /// One depth of the eye wave: trace, shade, shadow rays, and the
    /// survivors compacted into the queue (padded to its bound).
    fn eye_step(
        &mut self,
        w: &mut EyeBuffers,
        depth: usize,
        frame: &mut EyeFrame,
    ) -> Result<(), GpuError> {
        let bound = w.queue.0.len();
        w.set_len(bound, self.slots as usize)?;
        self.tracer
            .intersect(self.device.accel(), &w.queue.0, &mut w.hits)?;
        self.shade(w, depth, None, frame)?;
        if !w.shadow_rays.is_empty() {
            self.tracer
                .occluded(self.device.accel(), &w.shadow_rays, &mut w.occluded)?;
            kernels::shadow_add(
                &w.queue.1,
                self.slots,
                &w.occluded,
                &w.shadow_values,
                &w.shadow_flags,
                &mut frame.radiance,
            )?;
        }
        select_indices_at(
            &w.child_flags,
            &mut w.indices,
            (&mut w.counts, depth + 1),
            &mut w.scratch,
        )?;
        gather_wave_padded(
            &w.children.0,
            &w.children.1,
            &w.indices,
            (&w.counts, depth + 1),
            &w.pad.ray,
            &w.pad.path,
            &mut w.next.0,
            &mut w.next.1,
        )?;
        std::mem::swap(&mut w.queue, &mut w.next);
        Ok(())
    }
}

/// The eye wave's device memory, allocated once for the member's paths and
/// set to each depth's bound.
struct EyeBuffers {
    queue: (DeviceBuffer<GpuRay>, DeviceBuffer<GpuSppmPath>),
    next: (DeviceBuffer<GpuRay>, DeviceBuffer<GpuSppmPath>),
    children: (DeviceBuffer<GpuRay>, DeviceBuffer<GpuSppmPath>),
    child_flags: DeviceBuffer<u32>,
    hits: DeviceBuffer<GpuHit>,
    shadow_rays: DeviceBuffer<GpuRay>,
    shadow_values: DeviceBuffer<[f32; 4]>,
    shadow_flags: DeviceBuffer<u32>,
    occluded: DeviceBuffer<u32>,
    indices: DeviceBuffer<u32>,
    scratch: SelectScratch,
    /// `counts[d]`: the paths entering depth `d` (`counts[0]` unused).
    counts: DeviceBuffer<u32>,
    pad: WavePad<GpuSppmPath>,
}

impl EyeBuffers {
    fn new(gpu: &Gpu, n: usize, slots: usize, depths: usize) -> Result<Self, GpuError> {
        let wave = || -> Result<(DeviceBuffer<GpuRay>, DeviceBuffer<GpuSppmPath>), GpuError> {
            Ok((
                DeviceBuffer::uninit(gpu, "sppm rays", n)?,
                DeviceBuffer::uninit(gpu, "sppm paths", n)?,
            ))
        };
        let no_pixel = GpuSppmPath {
            pixel: u32::MAX,
            ..bytemuck::Zeroable::zeroed()
        };
        Ok(Self {
            queue: wave()?,
            next: wave()?,
            children: wave()?,
            child_flags: DeviceBuffer::uninit(gpu, "sppm child flags", n)?,
            hits: DeviceBuffer::uninit(gpu, "sppm hits", n)?,
            shadow_rays: DeviceBuffer::uninit(gpu, "sppm shadow rays", n * slots)?,
            shadow_values: DeviceBuffer::uninit(gpu, "sppm shadow values", n * slots)?,
            shadow_flags: DeviceBuffer::uninit(gpu, "sppm shadow flags", n * slots)?,
            occluded: DeviceBuffer::uninit(gpu, "sppm occlusion", n * slots)?,
            indices: DeviceBuffer::uninit(gpu, "sppm wave indices", n)?,
            scratch: SelectScratch::new(gpu, n)?,
            counts: DeviceBuffer::zeroed(gpu, "sppm wave counts", depths + 1)?,
            pad: WavePad::new(gpu, no_pixel)?,
        })
    }

    /// Every per-slot buffer `bound` paths long (the queue keeps its own).
    fn set_len(&mut self, bound: usize, slots: usize) -> Result<(), GpuError> {
        for (rays, paths) in [&mut self.next, &mut self.children] {
            rays.set_len(bound)?;
            paths.set_len(bound)?;
        }
        self.child_flags.set_len(bound)?;
        self.hits.set_len(bound)?;
        self.indices.set_len(bound)?;
        self.shadow_rays.set_len(bound * slots)?;
        self.shadow_values.set_len(bound * slots)?;
        self.shadow_flags.set_len(bound * slots)?;
        self.occluded.set_len(bound * slots)
    }
}
