//! The team exchanges of [`crate::team`] for device buffers: every
//! member's runs merged on every member's GPU in [`run_plan`]'s order.
//! Each member reaches the others' runs by the shortest way its team
//! allows:
//!
//! - among the GPUs of one process ([`Team::shares_memory`]) it copies
//!   them device to device (`cuMemcpyPeerAsync`, over NVLink where the
//!   devices are peers);
//! - among the processes of one node ([`Team::on_one_node`]: the GPU ranks
//!   of an MPI job on one machine) through CUDA IPC: each rank copies its
//!   runs into its device's exportable staging allocation ([`Gpu::ipc`],
//!   kept with the device across exchanges, since a render exchanges
//!   every pass), the ranks swap the 64-byte handles with their run
//!   lengths in one all-gather, and each copies the pieces from the
//!   others' mapped allocations device to device; a barrier then keeps
//!   every rank's staging intact until all have read it. Should a rank
//!   fail to export or open (a driver or container without IPC), all of
//!   them agree on it at the next collective step and fall back to the
//!   host for the rest of the process, with a one-line warning;
//! - otherwise (ranks on several nodes) through the host: download,
//!   all-gather, upload.
//!
//! Every route copies the same pieces in the same order, so the merged
//! array is the same, bit for bit. [`add_band_sums`] reduces whole-image
//! partial sums into the members' bands (members of one process).
//! [`hand_over`] and [`take_over`] pass one buffer's contents from one
//! member to the next alone (a peer copy in one process, the sender's
//! staging allocation through CUDA IPC between the processes of one
//! node), so that members that take turns with a state (SPPM's pixel
//! statistics, pass by pass) need not meet at every turn.
//!
//! [`Gpu::ipc`]: caustic_gpu::Gpu::ipc

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use bytemuck::Pod;
use caustic_gpu::ops::launch_per_element as launch;
use caustic_gpu::{DeviceBuffer, GpuError, IpcExchange, IpcHandle, PeerHandle};

use crate::Film;
use crate::download_cuda::download_large;
use crate::kernels::team as k;
use crate::scene_cuda::FrameParams;
use crate::team::{
    RunPiece, Team, TeamError, TileBand, TileRows, gather_concat, gather_runs, run_plan,
};

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
    let merged = match route(team, ipc_allowed()) {
        Route::Peer => Some(gather_between_threads(team, &mine, at, runs)?),
        Route::Ipc => gather_between_processes(team, &mine, at, end, runs)?,
        Route::Host => None,
    };
    match merged {
        Some(merged) => Ok(merged),
        None => gather_through_host(team, &mine, at, end, runs),
    }
}

/// Whether `team` can pass device buffers from one member to another
/// alone ([`hand_over`], [`take_over`]): members that send each other
/// messages and reach each other's device memory (threads of one process
/// by peer copies, the ranks of one node through CUDA IPC).
pub fn hands_over_on_device(team: &dyn Team) -> bool {
    team.sends_point_to_point() && route(team, ipc_allowed()) != Route::Host
}

/// What [`hand_over`] sends between processes: the staging allocation
/// holding the buffer, and the buffer's size.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct IpcNote {
    handle: IpcHandle,
    bytes: u64,
}

/// Offers `state` (complete once its device is synchronised here) to
/// member `to`, which copies it with [`take_over`]; this member must not
/// write or free `state` (nor hand another buffer over) before `to` has
/// copied it: a member that takes the state back from the team's turns
/// knows that it has, and every member meets the others before freeing
/// it. Between processes the buffer is first copied into the device's
/// exportable staging allocation ([`caustic_gpu::Gpu::ipc`]), which the
/// next member maps.
pub fn hand_over<T: Pod>(
    team: &dyn Team,
    to: usize,
    state: &DeviceBuffer<T>,
) -> Result<(), GpuTeamError> {
    let gpu = state.gpu();
    match route(team, ipc_allowed()) {
        Route::Peer => {
            gpu.synchronize()?;
            team.send(to, bytemuck::bytes_of(&state.peer_handle()))?;
        }
        Route::Ipc => {
            // Staged and waited for before the note goes out.
            let handle = gpu.ipc().stage(state, 0..state.len())?;
            let note = IpcNote {
                handle: handle.unwrap_or_else(bytemuck::Zeroable::zeroed),
                bytes: state.bytes() as u64,
            };
            team.send(to, bytemuck::bytes_of(&note))?;
        }
        Route::Host => return Err(no_hand_over(team.rank(), to)),
    }
    Ok(())
}

/// Copies into `state` the buffer member `from` offered with
/// [`hand_over`] (waited for; of `state`'s length), device to device, and
/// waits for the copy.
pub fn take_over<T: Pod>(
    team: &dyn Team,
    from: usize,
    state: &mut DeviceBuffer<T>,
) -> Result<(), GpuTeamError> {
    let route = route(team, ipc_allowed());
    if route == Route::Host {
        return Err(no_hand_over(from, team.rank()));
    }
    let message = team.receive(from)?;
    let malformed = || {
        TeamError(format!(
            "member {from} handed over a malformed buffer note ({} bytes)",
            message.len()
        ))
    };
    let gpu = state.gpu().clone();
    let source = match route {
        Route::Ipc => {
            let note: IpcNote =
                bytemuck::try_pod_read_unaligned(&message).map_err(|_| malformed())?;
            expect_bytes(state, note.bytes)?;
            gpu.ipc().open(&gpu, from, &note.handle, note.bytes)?
        }
        _ => {
            let handle: PeerHandle =
                bytemuck::try_pod_read_unaligned(&message).map_err(|_| malformed())?;
            expect_bytes(state, handle.bytes)?;
            handle
        }
    };
    // SAFETY: `from` synchronised its device before naming the buffer (a
    // buffer of this process, or its staging allocation mapped here), and
    // it does not write or free it before this copy is done (the contract
    // of `hand_over`); the device is synchronised below.
    unsafe { state.copy_from_peer(0, source)? };
    gpu.synchronize()?;
    Ok(())
}

fn expect_bytes<T: Pod>(state: &DeviceBuffer<T>, bytes: u64) -> Result<(), GpuError> {
    if bytes == state.bytes() as u64 {
        return Ok(());
    }
    Err(GpuError::LengthMismatch {
        operation: "take_over",
        what: "bytes handed over",
        expected: state.bytes(),
        actual: bytes as usize,
    })
}

fn no_hand_over(from: usize, to: usize) -> GpuTeamError {
    TeamError(format!(
        "member {from} cannot hand a device buffer to member {to}: they reach each other only through the host"
    ))
    .into()
}

/// Whether `team`'s members reach one another's device buffers without
/// the host: threads of one process (peer copies), or processes of one
/// node while CUDA IPC works.
pub fn exchanges_on_device(team: &dyn Team) -> bool {
    route(team, ipc_allowed()) != Route::Host
}

/// The image of `width × height` pixels whose interleaved tile rows
/// ([`TileRows::interleaved`]) the members hold on their devices (`mine`:
/// three floats a pixel, this member's pixel rows in order), merged on the
/// devices a tile row a run ([`TileRows::tile_row_runs`], whose merge is
/// the image's rows in order) and downloaded by the root alone: `Some`
/// there, `None` on the other members. Where the devices reach each other
/// ([`exchanges_on_device`]) this costs the root one download into the
/// film, as on a single GPU, and the others none, where
/// [`crate::team::rows_film_to_root`] has every member download its rows
/// (a pinned staging allocation each, at once) and the root assemble them
/// on the host.
pub fn interleaved_film_to_root(
    team: &dyn Team,
    (width, height): (u32, u32),
    mine: DeviceBuffer<f32>,
) -> Result<Option<Film>, GpuTeamError> {
    let rows = TileRows::interleaved(team, width, height);
    if mine.len() != 3 * rows.pixel_count() {
        return Err(GpuError::LengthMismatch {
            operation: "interleaved_film_to_root",
            what: "the member's pixels",
            expected: 3 * rows.pixel_count(),
            actual: mine.len(),
        }
        .into());
    }
    let slots = TileRows::interleaved_of(0, team.size() as u64, width, height).count;
    let runs: Vec<u64> = rows.tile_row_runs(slots).iter().map(|n| 3 * n).collect();
    let (image, _) = gather_device_runs(team, mine, 0, &runs)?;
    if !team.is_root() {
        return Ok(None);
    }
    let mut film = Film::new(width, height);
    let pixels: &mut [f32] = bytemuck::cast_slice_mut(&mut film.pixels);
    if image.len() != pixels.len() {
        return Err(TeamError(format!(
            "the members' rows hold {} floats, not the {width} × {height} image's {}",
            image.len(),
            pixels.len()
        ))
        .into());
    }
    download_large(&image, pixels)?;
    Ok(Some(film))
}

/// A merged array and the plan's pieces, as [`gather_device_runs`]
/// returns them.
type Merged<T> = (DeviceBuffer<T>, Vec<RunPiece>);

/// How a member reaches the other members' device buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route {
    /// Peer copies between the devices of one process.
    Peer,
    /// CUDA IPC between the processes of one node.
    Ipc,
    /// Download, exchange through the team, upload.
    Host,
}

/// The route for `team`; `ipc_allowed` is false once IPC failed in this
/// process or when `CAUSTIC_TEAM_IPC=0` turns it off.
fn route(team: &dyn Team, ipc_allowed: bool) -> Route {
    if team.shares_memory() {
        Route::Peer
    } else if team.on_one_node() && ipc_allowed {
        Route::Ipc
    } else {
        Route::Host
    }
}

/// Set, on every member at once, when an IPC exchange failed: the
/// process's later exchanges go through the host.
static IPC_FAILED: AtomicBool = AtomicBool::new(false);

/// Whether exchanges may use CUDA IPC: not after a failure, nor with
/// `CAUSTIC_TEAM_IPC=0` in the environment (the same on every rank, as
/// `mpirun` passes it on; for comparing the routes).
fn ipc_allowed() -> bool {
    static OFF: OnceLock<bool> = OnceLock::new();
    let off = *OFF.get_or_init(|| std::env::var("CAUSTIC_TEAM_IPC").is_ok_and(|v| v == "0"));
    !off && !IPC_FAILED.load(Ordering::Relaxed)
}

/// Every member's runs through the host (download, all-gather, upload).
fn gather_through_host<T: Pod>(
    team: &dyn Team,
    mine: &DeviceBuffer<T>,
    at: usize,
    end: usize,
    runs: &[u64],
) -> Result<Merged<T>, GpuTeamError> {
    let host = mine.download()?;
    let lengths = gather_concat(team, runs.to_vec())?;
    let merged = gather_runs(team, &host[at..end], runs)?;
    let pieces = run_plan(&lengths, team.size())?;
    Ok((
        DeviceBuffer::from_slice(mine.gpu(), mine.what(), &merged)?,
        pieces,
    ))
}

/// Every member's runs by peer copies, among the threads of one process.
fn gather_between_threads<T: Pod>(
    team: &dyn Team,
    mine: &DeviceBuffer<T>,
    at: usize,
    runs: &[u64],
) -> Result<Merged<T>, GpuTeamError> {
    let gpu = mine.gpu();
    let lengths = gather_concat(team, runs.to_vec())?;
    let pieces = run_plan(&lengths, team.size())?;
    gpu.synchronize()?;
    let size = size_of::<T>() as u64;
    let mut handle = mine.peer_handle();
    handle.ptr += at as u64 * size;
    let handles = gather_concat(team, vec![handle])?;
    let count = pieces.iter().map(|p| p.len as usize).sum();
    let mut merged = DeviceBuffer::uninit(gpu, mine.what(), count)?;
    // SAFETY: every member synchronised its device before naming its
    // buffer, the pieces lie inside the runs it named (the plan is built
    // from the lengths it sent) and fill `merged`, and no member returns
    // (freeing its buffer) before the barrier below, after this device's
    // copies are done.
    unsafe { merge_pieces(&mut merged, &handles, &pieces)? };
    gpu.synchronize()?;
    team.all_gather(&[])?;
    Ok((merged, pieces))
}

/// Most bytes one block copies in [`copy_pieces`].
const COPY_CHUNK: u64 = 1 << 20;

/// Copies `parts` (source address, destination address, bytes), sources
/// on this device or on peers it reads directly, in one launch.
///
/// # Safety
/// Every source and destination range must lie inside a live allocation
/// this device reads (sources) or writes (destinations), sources complete
/// and distinct from the destinations, until the launch is done.
unsafe fn copy_pieces(
    gpu: &caustic_gpu::Gpu,
    parts: impl Iterator<Item = (u64, u64, u64)>,
) -> Result<(), GpuError> {
    let table = piece_table(parts);
    let count = u32::try_from(table.len() / 3).map_err(|_| GpuError::LengthMismatch {
        operation: "copy_pieces",
        what: "pieces",
        expected: u32::MAX as usize,
        actual: table.len() / 3,
    })?;
    if count == 0 {
        return Ok(());
    }
    let table = DeviceBuffer::from_slice(gpu, "merge pieces", &table)?;
    gpu.launch(
        k::TEAM_COPY_PIECES,
        count.min(1 << 16),
        256,
        (table.ptr(), count),
    )
}

/// `team_copy_pieces`'s table: each part as (from, to, bytes) triples of
/// at most [`COPY_CHUNK`] bytes, in order; empty parts leave no entry.
fn piece_table(parts: impl Iterator<Item = (u64, u64, u64)>) -> Vec<u64> {
    let mut table = Vec::new();
    for (from, to, bytes) in parts {
        let mut done = 0;
        while done < bytes {
            let chunk = (bytes - done).min(COPY_CHUNK);
            table.extend([from + done, to + done, chunk]);
            done += chunk;
        }
    }
    table
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

/// Every member's runs through CUDA IPC, among the processes of one node;
/// `None` when a member could not export or open, which every member
/// learns at the same collective step (the route then falls back to the
/// host, here and for the rest of the process).
fn gather_between_processes<T: Pod>(
    team: &dyn Team,
    mine: &DeviceBuffer<T>,
    at: usize,
    end: usize,
    runs: &[u64],
) -> Result<Option<Merged<T>>, GpuTeamError> {
    let gpu = mine.gpu();
    let mut ipc = gpu.ipc();
    // Staged and waited for before the note goes out: a peer that has the
    // note may read at once.
    let (staged, trouble) = match ipc.stage(mine, at..end) {
        Ok(Some(handle)) => (Staged::Shared(handle), None),
        Ok(None) => (Staged::Nothing, None),
        Err(error) => (Staged::Failed, Some(error.to_string())),
    };
    let notes = team
        .all_gather(&encode_note(staged, runs))?
        .iter()
        .enumerate()
        .map(|(rank, bytes)| decode_note(bytes, rank))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(rank) = notes.iter().position(|(s, _)| *s == Staged::Failed) {
        give_up_ipc(team, trouble, rank, "share its buffer");
        return Ok(None);
    }
    let lengths: Vec<u64> = notes.iter().flat_map(|(_, runs)| runs.clone()).collect();
    let pieces = run_plan(&lengths, team.size())?;
    let copied = copy_staged_pieces(&mut ipc, team.rank(), mine, at, &notes, &pieces);
    // The barrier: no member stages again (overwriting what it shared) or
    // frees a retired staging allocation before every member's copies
    // are done; it also tells every member whether all of them succeeded.
    let verdicts = team.all_gather(&[u8::from(copied.is_ok())])?;
    if let Some(rank) = verdicts.iter().position(|v| v[..] != [1]) {
        let trouble = copied.err().map(|e| e.to_string());
        give_up_ipc(team, trouble, rank, "open another rank's buffer");
        return Ok(None);
    }
    // Every member has now opened every other's current staging
    // allocation, closing its mappings of any retired one.
    ipc.release_retired()?;
    Ok(Some((copied?, pieces)))
}

/// The merged array from the members' staged runs (this member's own runs
/// straight from `mine`), pieces in the plan's order.
fn copy_staged_pieces<T: Pod>(
    ipc: &mut IpcExchange,
    rank: usize,
    mine: &DeviceBuffer<T>,
    at: usize,
    notes: &[(Staged, Vec<u64>)],
    pieces: &[RunPiece],
) -> Result<DeviceBuffer<T>, GpuError> {
    let gpu = mine.gpu();
    let size = size_of::<T>() as u64;
    let mut sources = Vec::with_capacity(notes.len());
    for (member, (staged, runs)) in notes.iter().enumerate() {
        let bytes = runs.iter().sum::<u64>() * size;
        let source = match staged {
            _ if member == rank => PeerHandle {
                ptr: mine.device_ptr() + at as u64 * size,
                ..mine.peer_handle()
            },
            Staged::Shared(handle) => ipc.open(gpu, member, handle, bytes)?,
            _ if bytes == 0 => bytemuck::Zeroable::zeroed(),
            _ => {
                return Err(GpuError::Invalid {
                    what: "team exchange",
                    message: format!("rank {member} names {bytes} bytes of runs but shared none"),
                });
            }
        };
        sources.push(source);
    }
    let count = pieces.iter().map(|p| p.len as usize).sum();
    let mut merged = DeviceBuffer::uninit(gpu, mine.what(), count)?;
    // SAFETY: every member staged its runs and waited for the copy before
    // sending its note; the pieces lie inside the runs it named (the plan
    // is built from the lengths in the notes), at the start of its staging
    // allocation, which it neither overwrites nor frees before the barrier
    // after this device's copies are done (own pieces come from `mine`,
    // borrowed for the call).
    unsafe { merge_pieces(&mut merged, &sources, pieces)? };
    gpu.synchronize()?;
    Ok(merged)
}

/// Fills `merged` with `pieces` of the members' buffers `sources`, in
/// order: in one launch where this device reads every source directly
/// (its own memory, peers', IPC mappings), else one peer copy a piece.
///
/// # Safety
/// Every piece must lie inside its source, whose contents are complete
/// and which stays allocated until this device is synchronised after the
/// call; the pieces must fill `merged`.
unsafe fn merge_pieces<T: Pod>(
    merged: &mut DeviceBuffer<T>,
    sources: &[PeerHandle],
    pieces: &[RunPiece],
) -> Result<(), GpuError> {
    let gpu = merged.gpu().clone();
    let size = size_of::<T>() as u64;
    if sources.iter().all(|s| gpu.reads_directly(s.context)) {
        let mut to = merged.device_ptr();
        let parts = pieces.iter().map(|piece| {
            let part = (
                sources[piece.member].ptr + piece.from * size,
                to,
                piece.len * size,
            );
            to += part.2;
            part
        });
        // SAFETY: the caller vouches for the pieces; `merged` holds them.
        return unsafe { copy_pieces(&gpu, parts) };
    }
    let mut offset = 0;
    for piece in pieces {
        let source = sources[piece.member];
        let part = PeerHandle {
            ptr: source.ptr + piece.from * size,
            bytes: piece.len * size,
            ..source
        };
        // SAFETY: the caller vouches for the piece.
        unsafe { merged.copy_from_peer(offset, part)? };
        offset += part.bytes as usize;
    }
    Ok(())
}

/// Turns IPC off for the rest of the process (every member does, at the
/// same step) and says why once: the member that failed gives its error,
/// rank 0 names the failed rank when it was another.
fn give_up_ipc(team: &dyn Team, trouble: Option<String>, failed: usize, could_not: &str) {
    if IPC_FAILED.swap(true, Ordering::Relaxed) {
        return;
    }
    let why = match trouble {
        Some(error) => Some(error),
        None if team.is_root() => Some(format!("rank {failed} could not {could_not}")),
        None => None,
    };
    if let Some(why) = why {
        eprintln!(
            "warning: rank {}: GPU buffers go between ranks through the host, not CUDA IPC: {why}",
            team.rank()
        );
    }
}

/// What a member shared for an IPC exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Staged {
    /// Its runs, at the start of the allocation this handle names.
    Shared(IpcHandle),
    /// Nothing: it has no runs and no staging allocation yet.
    Nothing,
    /// Staging or exporting failed.
    Failed,
}

/// A member's note as it travels: the handle (zero unless shared) and
/// what it means.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct NoteHeader {
    handle: IpcHandle,
    state: u64,
}

const SHARED: u64 = 1;
const NOTHING: u64 = 2;
const FAILED: u64 = 3;

/// A member's note: what it staged, then its run lengths.
fn encode_note(staged: Staged, runs: &[u64]) -> Vec<u8> {
    let (handle, state) = match staged {
        Staged::Shared(handle) => (handle, SHARED),
        Staged::Nothing => (bytemuck::Zeroable::zeroed(), NOTHING),
        Staged::Failed => (bytemuck::Zeroable::zeroed(), FAILED),
    };
    let mut bytes = bytemuck::bytes_of(&NoteHeader { handle, state }).to_vec();
    bytes.extend(runs.iter().flat_map(|r| r.to_ne_bytes()));
    bytes
}

/// Member `rank`'s note, read back; a malformed one is an error.
fn decode_note(bytes: &[u8], rank: usize) -> Result<(Staged, Vec<u64>), TeamError> {
    let header = size_of::<NoteHeader>();
    let malformed = |why: &str| TeamError(format!("rank {rank} sent a malformed IPC note: {why}"));
    if bytes.len() < header || !(bytes.len() - header).is_multiple_of(8) {
        return Err(malformed(&format!("{} bytes", bytes.len())));
    }
    let note: NoteHeader = bytemuck::pod_read_unaligned(&bytes[..header]);
    let staged = match note.state {
        SHARED => Staged::Shared(note.handle),
        NOTHING => Staged::Nothing,
        FAILED => Staged::Failed,
        other => return Err(malformed(&format!("state {other}"))),
    };
    let runs = bytes[header..]
        .chunks_exact(8)
        .map(|b| u64::from_ne_bytes(b.try_into().unwrap_or_default()))
        .collect();
    Ok((staged, runs))
}

#[cfg(test)]
mod tests {

    #[test]
    fn piece_tables_cover_every_byte_once_in_bounded_chunks() {
        let parts = [
            (1 << 40, 0, 3 * COPY_CHUNK + 17),
            (5 << 40, 999, 0),
            (7 << 40, 3 * COPY_CHUNK + 17, 48),
        ];
        let table = piece_table(parts.into_iter());
        assert_eq!(table.len() % 3, 0);
        let entries: Vec<&[u64]> = table.chunks_exact(3).collect();
        assert_eq!(
            entries.len(),
            5,
            "4 chunks of the first part, none of the empty one, 1 of the last"
        );
        let mut next_to = 0;
        for entry in &entries {
            let [from, to, bytes] = [entry[0], entry[1], entry[2]];
            assert!(bytes > 0 && bytes <= COPY_CHUNK);
            assert_eq!(
                to, next_to,
                "the destination is filled in order, without gaps"
            );
            let part = parts
                .iter()
                .find(|p| from >= p.0 && from < p.0 + p.2.max(1))
                .unwrap();
            assert_eq!(
                from - part.0,
                to - part.1,
                "a chunk keeps its offset in its part"
            );
            next_to = to + bytes;
        }
        assert_eq!(next_to, 3 * COPY_CHUNK + 17 + 48);
    }
    use super::*;
    use crate::team::{Gathered, Solo, ThreadTeam};

    /// A team that says what it is, for the route.
    struct Said {
        shares_memory: bool,
        on_one_node: bool,
    }

    impl Team for Said {
        fn rank(&self) -> usize {
            0
        }
        fn size(&self) -> usize {
            2
        }
        fn all_gather(&self, _: &[u8]) -> Result<Gathered, TeamError> {
            Err(TeamError("not for exchanges".into()))
        }
        fn shares_memory(&self) -> bool {
            self.shares_memory
        }
        fn on_one_node(&self) -> bool {
            self.on_one_node
        }
    }

    #[test]
    fn routes_follow_what_the_team_shares() {
        let team = |shares_memory, on_one_node| Said {
            shares_memory,
            on_one_node,
        };
        assert_eq!(route(&team(true, false), true), Route::Peer);
        assert_eq!(route(&team(true, true), false), Route::Peer);
        assert_eq!(route(&team(false, true), true), Route::Ipc);
        // IPC failed or turned off: the host.
        assert_eq!(route(&team(false, true), false), Route::Host);
        // Ranks on several nodes.
        assert_eq!(route(&team(false, false), true), Route::Host);
        assert_eq!(route(&Solo, true), Route::Host);
        let threads = ThreadTeam::run(2, |team| route(team, true));
        assert_eq!(threads, [Route::Peer, Route::Peer]);
    }

    #[test]
    fn notes_carry_the_handle_and_the_runs() {
        let mut bytes = [0u8; 64];
        bytes
            .iter_mut()
            .enumerate()
            .for_each(|(i, b)| *b = 255 - i as u8);
        let handle = IpcHandle { bytes };
        for (staged, runs) in [
            (Staged::Shared(handle), vec![3u64, 0, 1 << 40]),
            (Staged::Nothing, vec![0, 0]),
            (Staged::Failed, vec![]),
        ] {
            let note = encode_note(staged, &runs);
            // Received bytes have no alignment of their own.
            let mut unaligned = vec![0u8];
            unaligned.extend(&note);
            assert_eq!(decode_note(&unaligned[1..], 2), Ok((staged, runs)));
        }
    }

    #[test]
    fn malformed_notes_name_their_rank() {
        let note = encode_note(Staged::Nothing, &[1, 2]);
        let err = decode_note(&note[..note.len() - 3], 1).unwrap_err();
        assert!(err.0.contains("rank 1 sent a malformed IPC note"), "{err}");
        let err = decode_note(&note[..10], 3).unwrap_err();
        assert!(err.0.contains("rank 3"), "{err}");
        let mut bad = note.clone();
        bad[64] = 9;
        let err = decode_note(&bad, 0).unwrap_err();
        assert!(err.0.contains("state 9"), "{err}");
    }
}
