//! The team exchanges of [`crate::team`] for device buffers: every
//! member's runs merged on every member's GPU in [`run_plan`]'s order.
//! Among the GPUs of one process ([`Team::shares_memory`]) each member
//! copies the others' runs device to device (`cuMemcpyPeerAsync`, over
//! NVLink where the devices are peers); members in other processes (MPI
//! ranks) exchange through the host. [`add_band_sums`] reduces whole-image
//! partial sums into the members' bands.

use bytemuck::Pod;
use caustic_gpu::ops::launch_per_element as launch;
use caustic_gpu::{DeviceBuffer, GpuError, PeerHandle};

use crate::kernels::team as k;
use crate::scene_cuda::FrameParams;
use crate::team::{RunPiece, Team, TeamError, TileBand, gather_concat, gather_runs, run_plan};

/// A device failure or a failed exchange.
#[derive(Debug, thiserror::Error)]
pub enum GpuTeamError {
    #[error(transparent)]
    Gpu(#[from] GpuError),
    #[error("team exchange failed: {0}")]
    Team(#[from] TeamError),
}

impl From<GpuTeamError> for GpuError {
    /// A failed exchange as a device error, for the device steps whose
    /// signature knows only those ([`crate::whitted::render_cuda::WaveSteps`]).
    fn from(error: GpuTeamError) -> Self {
        match error {
            GpuTeamError::Gpu(e) => e,
            GpuTeamError::Team(e) => GpuError::Invalid {
                what: "team exchange",
                message: e.0,
            },
        }
    }
}

/// The members' runs merged on this member's device: `mine[at ..]` holds
/// this member's runs of lengths `runs`, one after another (every member
/// names as many runs), and the result holds run 0 of every member in
/// rank order, then run 1, and so on (see [`run_plan`]), with the plan's
/// pieces. A team of one gets its buffer back as it is when the runs fill
/// it.
pub fn gather_device_runs<T: Pod>(
    team: &dyn Team,
    mine: DeviceBuffer<T>,
    at: usize,
    runs: &[u64],
) -> Result<(DeviceBuffer<T>, Vec<RunPiece>), GpuTeamError> {
    let total: u64 = runs.iter().sum();
    let end = at + total as usize;
    if team.size() == 1 && at == 0 && end == mine.len() {
        let pieces = run_plan(runs, 1)?;
        return Ok((mine, pieces));
    }
    if end > mine.len() {
        return Err(GpuError::LengthMismatch {
            operation: "gather_device_runs",
            what: "runs",
            expected: mine.len(),
            actual: end,
        }
        .into());
    }
    let gpu = mine.gpu();
    if !team.shares_memory() {
        let host = mine.download()?;
        let lengths = gather_concat(team, runs.to_vec())?;
        let merged = gather_runs(team, &host[at..end], runs)?;
        let pieces = run_plan(&lengths, team.size())?;
        return Ok((DeviceBuffer::from_slice(gpu, mine.what(), &merged)?, pieces));
    }
    let lengths = gather_concat(team, runs.to_vec())?;
    let pieces = run_plan(&lengths, team.size())?;
    gpu.synchronize()?;
    let size = size_of::<T>() as u64;
    let mut handle = mine.peer_handle();
    handle.ptr += at as u64 * size;
    let handles = gather_concat(team, vec![handle])?;
    let count = pieces.iter().map(|p| p.len as usize).sum();
    let mut merged = DeviceBuffer::uninit(gpu, mine.what(), count)?;
    let mut offset = 0;
    for piece in &pieces {
        let source = handles[piece.member];
        let part = PeerHandle {
            ptr: source.ptr + piece.from * size,
            bytes: piece.len * size,
            ..source
        };
        // SAFETY: every member synchronised its device before naming its
        // buffer, the piece lies inside the runs it named (the plan is
        // built from the lengths it sent), and no member returns (freeing
        // its buffer) before the barrier below, after this device's
        // copies are done.
        unsafe { merged.copy_from_peer(offset, part)? };
        offset += part.bytes as usize;
    }
    gpu.synchronize()?;
    team.all_gather(&[])?;
    Ok((merged, pieces))
}

/// Adds to this member's band of the frame (the framebuffer `frame`
/// names, at the band's pixels) every member's `whole` buffer over the
/// band's pixels (three floats a pixel, the whole image's pixels in each
/// member's buffer), one member after another in rank order: the
/// reduction of work that the members shared by something other than
/// bands (the photon mapper's estimates and gathers, round-robin over all
/// eye vertices). Members of one process only: the buffers are read
/// device to device.
pub fn add_band_sums(
    team: &dyn Team,
    frame: &DeviceBuffer<FrameParams>,
    whole: &DeviceBuffer<f32>,
    band: &TileBand,
) -> Result<(), GpuTeamError> {
    if !team.shares_memory() {
        return Err(TeamError("band sums need the members' devices in one process".into()).into());
    }
    let gpu = whole.gpu();
    let first = 3 * band.pixels.start as usize;
    let floats = 3 * band.pixel_count();
    let size = size_of::<f32>() as u64;
    if first + floats > whole.len() {
        return Err(GpuError::LengthMismatch {
            operation: "add_band_sums",
            what: "band pixels",
            expected: whole.len(),
            actual: first + floats,
        }
        .into());
    }
    gpu.synchronize()?;
    let handles = gather_concat(team, vec![whole.peer_handle()])?;
    let mut sums = DeviceBuffer::<f32>::uninit(gpu, "band sums", floats)?;
    for handle in handles {
        if handle.bytes < (first + floats) as u64 * size {
            return Err(TeamError("a member's whole-image buffer is short".into()).into());
        }
        let part = PeerHandle {
            ptr: handle.ptr + first as u64 * size,
            bytes: floats as u64 * size,
            ..handle
        };
        // SAFETY: every member synchronised its device before naming its
        // buffer, the part lies inside it (checked above), and no member
        // returns (freeing it) before the barrier below, after this
        // device's copies and additions are done.
        unsafe { sums.copy_from_peer(0, part)? };
        launch(
            gpu,
            k::TEAM_ADD_BAND,
            floats,
            (frame.ptr(), band.pixels.start, sums.ptr(), floats as u32),
        )?;
    }
    gpu.synchronize()?;
    team.all_gather(&[])?;
    Ok(())
}
