//! One render shared by a team of processes (MPI ranks) or threads.
//!
//! A [`Team`] is `size` members, each knowing its `rank`, that can do two
//! collective operations: [`Team::all_gather`], every member's bytes handed
//! to every member in rank order, and [`Team::gather_to_root`], every
//! member's bytes handed to the root alone. Everything the renderers
//! distribute reduces to them:
//!
//! - independent work is split into contiguous shares of an index range
//!   ([`share`]: photons by index, image tiles, irradiance samples), each
//!   member computes its share, and the shares are concatenated in rank
//!   order ([`gather_concat`]), which is index order: every member then
//!   holds exactly the array a single process would have made;
//! - per-pixel state is *owned*: a member keeps the statistics of its own
//!   rows, and only the finished rows travel, once, at the end, to the
//!   root, which alone holds the image (the other members' renders return
//!   `None` for it).
//!
//! Because no sum is ever re-associated across members, a team's image is
//! bit-identical to a single process's for the same settings, whatever the
//! team's size (the renderers' tests check it for 1, 2 and 3 members).
//!
//! [`Solo`] is the team of one (no communication); [`ThreadTeam`] runs the
//! members as threads of one process, which is how the tests exercise the
//! distributed paths without MPI; the `caustic` CLI's `mpi` feature
//! implements the trait over an MPI communicator.

use crate::Film;
use crate::tiles::{Tile, morton_tiles};
use bytemuck::Pod;
use caustic_geom::Rgb;
use rayon::prelude::*;
use std::collections::VecDeque;
use std::ops::Range;
use std::sync::{Arc, Condvar, Mutex};

/// A collective failed (a member left, a message was malformed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TeamError(pub String);

impl std::fmt::Display for TeamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TeamError {}

/// What an exchange hands every member: each member's bytes, by rank.
pub type Gathered = Arc<Vec<Vec<u8>>>;

/// Where [`Team::gather_to_root`] hands the root each member's bytes:
/// `(rank, bytes)`, in rank order.
pub type RootSink<'a> = dyn FnMut(usize, &[u8]) -> Result<(), TeamError> + 'a;

/// Members sharing one render. Every member must make the same sequence of
/// collective calls (as with MPI collectives).
pub trait Team: Send + Sync {
    /// This member's number, `0..size`.
    fn rank(&self) -> usize;
    /// Members in all.
    fn size(&self) -> usize;
    /// Every member's `mine`, indexed by rank, on every member (shared,
    /// not copied, among the threads of one process).
    fn all_gather(&self, mine: &[u8]) -> Result<Gathered, TeamError>;

    /// Member 0 writes the image and reports progress.
    fn is_root(&self) -> bool {
        self.rank() == 0
    }

    /// Hands every member's `mine` to `sink` on the root alone, in rank
    /// order (`sink(rank, bytes)`); the other members only send: how the
    /// finished rows of an image reach the member that writes it, without
    /// every member holding the whole image (805 MB a member at 8192²).
    /// Every member must call it, as any collective; a sink's error ends
    /// the root's call with it. This default is an [`Team::all_gather`];
    /// a team whose transport can send to one member does less.
    fn gather_to_root(&self, mine: &[u8], sink: &mut RootSink<'_>) -> Result<(), TeamError> {
        let all = self.all_gather(mine)?;
        if self.is_root() {
            for (rank, bytes) in all.iter().enumerate() {
                sink(rank, bytes)?;
            }
        }
        Ok(())
    }

    /// Whether the members share one address space (threads of one
    /// process), so that a device allocation one member names can be
    /// copied by another (GPU members then exchange device to device).
    fn shares_memory(&self) -> bool {
        false
    }

    /// Whether the members are processes of one machine (an MPI job on
    /// one node), so that a GPU member can map another member's device
    /// memory (CUDA IPC) instead of receiving it through the host. The
    /// threads of one process answer [`Team::shares_memory`] instead.
    fn on_one_node(&self) -> bool {
        false
    }

    /// Whether [`Team::send`] and [`Team::receive`] work: messages between
    /// two members that the others take no part in, so that members may
    /// run at their own pace (a token handed round the team) instead of
    /// meeting at every exchange.
    fn sends_point_to_point(&self) -> bool {
        false
    }

    /// Sends `bytes` to member `to` alone, without waiting for it: messages
    /// from one member to another arrive in the order they were sent. Not
    /// a collective (the other members take no part). Fails on a team
    /// without [`Team::sends_point_to_point`].
    fn send(&self, to: usize, bytes: &[u8]) -> Result<(), TeamError> {
        let _ = bytes;
        Err(no_point_to_point(self.rank(), to))
    }

    /// The next message member `from` sent to this member, waited for; an
    /// error if `from` has left the team with nothing more sent.
    fn receive(&self, from: usize) -> Result<Vec<u8>, TeamError> {
        Err(no_point_to_point(from, self.rank()))
    }
}

fn no_point_to_point(from: usize, to: usize) -> TeamError {
    TeamError(format!(
        "member {from} cannot send to member {to}: this team exchanges only collectively"
    ))
}

/// The team of one: a single process, nothing to exchange.
#[derive(Clone, Copy, Debug, Default)]
pub struct Solo;

impl Solo {
    /// The image a render by the team of one returns: it is its own root,
    /// so a team render's `Option<Film>` always holds the image.
    pub fn image(film: Option<Film>) -> Film {
        film.expect("the team of one is its own root")
    }
}

impl Team for Solo {
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        1
    }
    fn all_gather(&self, mine: &[u8]) -> Result<Gathered, TeamError> {
        Ok(Arc::new(vec![mine.to_vec()]))
    }
}

/// This member's contiguous share of `0..count`: the first `count % size`
/// members take one item more, so shares differ by at most one.
pub fn share(team: &dyn Team, count: u64) -> Range<u64> {
    share_of(team.rank() as u64, team.size() as u64, count)
}

fn share_of(rank: u64, size: u64, count: u64) -> Range<u64> {
    let (base, extra) = (count / size, count % size);
    let start = rank * base + rank.min(extra);
    start..start + base + u64::from(rank < extra)
}

/// A member's part of an image split by bands of 8-pixel tile rows: the
/// rows [`share`] gives it, as the tiles of the 8×8 tiling (row-major
/// tile numbers, as the GPU wavefronts number them) and as the pixels
/// `y * width + x` of those rows. The bands of the members, in rank
/// order, cover the image once, so their pixels concatenated in rank
/// order are the image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TileBand {
    /// The band's first tile, `first_tile_row * tiles_x`.
    pub first_tile: u32,
    /// Tiles in the band, whole rows of `tiles_x` tiles.
    pub tiles: u32,
    /// The band's pixels, `y * width + x`, from its first row to its last.
    pub pixels: Range<u32>,
}

impl TileBand {
    /// Member `team.rank()`'s band of a `width × height` image.
    pub fn of(team: &dyn Team, width: u32, height: u32) -> Self {
        Self::of_member(team.rank() as u64, team.size() as u64, width, height)
    }

    /// The whole image as one band (a team of one).
    pub fn whole(width: u32, height: u32) -> Self {
        Self::of_member(0, 1, width, height)
    }

    fn of_member(rank: u64, size: u64, width: u32, height: u32) -> Self {
        let rows = TileRows::band_of(rank, size, width, height);
        let (first_row, end_row) = (rows.first, rows.first + rows.count);
        Self {
            first_tile: first_row * width.div_ceil(8),
            tiles: rows.tiles(),
            pixels: (8 * first_row).min(height) * width..(8 * end_row).min(height) * width,
        }
    }

    /// Pixels in the band.
    pub fn pixel_count(&self) -> usize {
        (self.pixels.end - self.pixels.start) as usize
    }
}

/// A member's rows of an image's 8×8 tiles: tile rows `first`, `first +
/// stride`, … (`count` of them), the pixel rows of each in order. A
/// contiguous band ([`TileRows::band_of`], stride 1) is what [`TileBand`]
/// covers; interleaved rows ([`TileRows::interleaved`], stride the team's
/// size) share an expensive part of the image among the members, so the
/// slowest member's rows cost about the mean.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TileRows {
    pub first: u32,
    pub stride: u32,
    pub count: u32,
    pub width: u32,
    pub height: u32,
}

impl TileRows {
    /// Member `team.rank()`'s tile rows `rank, rank + size, …`.
    pub fn interleaved(team: &dyn Team, width: u32, height: u32) -> Self {
        Self::interleaved_of(team.rank() as u64, team.size() as u64, width, height)
    }

    /// Member `rank` of `size`'s tile rows `rank, rank + size, …`.
    pub fn interleaved_of(rank: u64, size: u64, width: u32, height: u32) -> Self {
        let tile_rows = u64::from(height.div_ceil(8));
        let count = tile_rows.saturating_sub(rank).div_ceil(size.max(1));
        Self {
            first: rank.min(tile_rows) as u32,
            stride: size.max(1) as u32,
            count: count as u32,
            width,
            height,
        }
    }

    /// Member `rank` of `size`'s contiguous band ([`TileBand`]'s rows).
    pub fn band_of(rank: u64, size: u64, width: u32, height: u32) -> Self {
        let rows = share_of(rank, size, u64::from(height.div_ceil(8)));
        Self {
            first: rows.start as u32,
            stride: 1,
            count: (rows.end - rows.start) as u32,
            width,
            height,
        }
    }

    /// Tiles in the rows, `count` rows of `⌈width / 8⌉`.
    pub fn tiles(&self) -> u32 {
        self.count * self.width.div_ceil(8)
    }

    /// The image's pixel rows these tile rows hold, in order (the last
    /// tile row of an image whose height is no multiple of 8 holds fewer
    /// than 8).
    pub fn pixel_rows(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.count).flat_map(move |k| {
            let y0 = 8 * (self.first + k * self.stride);
            y0..(y0 + 8).min(self.height)
        })
    }

    /// Where the image's pixel row `y` lies among [`Self::pixel_rows`], if
    /// these rows hold it.
    pub fn local_row(&self, y: u32) -> Option<u32> {
        let tile_row = (y / 8).checked_sub(self.first)?;
        let k = tile_row / self.stride;
        (y < self.height && tile_row % self.stride == 0 && k < self.count).then_some(8 * k + y % 8)
    }

    /// Pixels in the rows.
    pub fn pixel_count(&self) -> usize {
        self.pixel_rows().count() * self.width as usize
    }

    /// The pixels of each tile row in order (8 image rows of `width`, the
    /// image's last tile row fewer when its height is no multiple of 8),
    /// then empty runs up to `slots` runs: a member's runs when the
    /// members' [`Self::interleaved`] rows are merged run by run
    /// ([`run_plan`]). Slot `k` of member `rank` is tile row
    /// `k · size + rank`, so that merge is the image's rows in order.
    pub fn tile_row_runs(&self, slots: u32) -> Vec<u64> {
        (0..slots)
            .map(|k| {
                if k >= self.count {
                    return 0;
                }
                let y0 = 8 * (self.first + k * self.stride);
                u64::from((y0 + 8).min(self.height) - y0) * u64::from(self.width)
            })
            .collect()
    }
}

/// One piece of a [`run_plan`]: `len` items from member `member`'s buffer
/// at item `from`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunPiece {
    pub member: usize,
    pub from: u64,
    pub len: u64,
}

/// Where every member's runs go when the members' buffers are merged run
/// by run: `lengths[m * slots + s]` is the length of member `m`'s run `s`
/// (its runs lie one after another in its buffer), and the merged array
/// holds run 0 of every member in rank order, then run 1 of every member,
/// and so on. That is the order a single device makes when each run is
/// one step of a wavefront over items split in rank order (a wave's
/// compacted survivors, a photon bounce's stored photons), so the merge
/// gives every member the single device's array. The pieces are in the
/// merged order; empty runs are left out.
pub fn run_plan(lengths: &[u64], members: usize) -> Result<Vec<RunPiece>, TeamError> {
    if members == 0 || !lengths.len().is_multiple_of(members) {
        return Err(TeamError(format!(
            "{} run lengths do not divide among {members} members",
            lengths.len()
        )));
    }
    let slots = lengths.len() / members;
    let mut starts = vec![0u64; members];
    let mut pieces = Vec::new();
    for slot in 0..slots {
        for (member, start) in starts.iter_mut().enumerate() {
            let len = lengths[member * slots + slot];
            if len > 0 {
                pieces.push(RunPiece {
                    member,
                    from: *start,
                    len,
                });
            }
            *start += len;
        }
    }
    Ok(pieces)
}

/// This member's pieces of a merge, as `(offset in the merged array,
/// length)`: where its own runs landed.
pub fn own_pieces(pieces: &[RunPiece], rank: usize) -> Vec<(u64, u64)> {
    let mut at = 0;
    let mut own = Vec::new();
    for piece in pieces {
        if piece.member == rank {
            own.push((at, piece.len));
        }
        at += piece.len;
    }
    own
}

/// The members' runs merged on every member in the order of [`run_plan`]
/// (through the host): `mine` is this member's items, its runs of
/// lengths `runs` one after another (every member names as many runs).
pub fn gather_runs<T: Pod>(team: &dyn Team, mine: &[T], runs: &[u64]) -> Result<Vec<T>, TeamError> {
    let lengths = gather_concat(team, runs.to_vec())?;
    let pieces = run_plan(&lengths, team.size())?;
    let parts = team.all_gather(bytemuck::cast_slice(mine))?;
    let mut items: Vec<Vec<T>> = vec![Vec::new(); team.size()];
    for (rank, (part, bytes)) in items.iter_mut().zip(parts.iter()).enumerate() {
        append_items(part, bytes, rank)?;
    }
    let mut out = Vec::with_capacity(pieces.iter().map(|p| p.len as usize).sum());
    for piece in pieces {
        let range = piece.from as usize..(piece.from + piece.len) as usize;
        let run = items[piece.member].get(range).ok_or_else(|| {
            TeamError(format!(
                "rank {} sent fewer items than its runs name",
                piece.member
            ))
        })?;
        out.extend_from_slice(run);
    }
    Ok(out)
}

/// Every member's `mine`, concatenated in rank order, on every member.
/// With `mine` computed over [`share`], the result is the whole array in
/// index order.
pub fn gather_concat<T: Pod>(team: &dyn Team, mine: Vec<T>) -> Result<Vec<T>, TeamError> {
    if team.size() == 1 {
        return Ok(mine);
    }
    let mut out = Vec::new();
    gather_concat_into(team, &mine, &mut out)?;
    Ok(out)
}

/// The image of `width × height` pixels whose rows the members hold (each
/// the pixel rows of its [`TileRows`], `rows_of(rank)`, in their order),
/// assembled on the root alone: `Some` on the root, `None` on the other
/// members, which hold no image ([`Team::gather_to_root`]). A member that
/// sends another number of pixels than its rows hold is an error.
pub fn rows_film_to_root(
    team: &dyn Team,
    (width, height): (u32, u32),
    mine: Vec<Rgb>,
    rows_of: impl Fn(usize) -> TileRows,
) -> Result<Option<Film>, TeamError> {
    if team.size() == 1 && mine.len() == width as usize * height as usize {
        // A team of one holds the whole image already, row by row.
        return Ok(Some(Film {
            width,
            height,
            pixels: mine,
        }));
    }
    let mut film = team.is_root().then(|| Film::new(width, height));
    let row_bytes = width as usize * std::mem::size_of::<Rgb>();
    team.gather_to_root(bytemuck::cast_slice(&mine), &mut |rank, bytes| {
        let Some(film) = film.as_mut() else {
            return Ok(());
        };
        let rows = rows_of(rank);
        if bytes.len() != rows.pixel_count() * std::mem::size_of::<Rgb>() {
            return Err(TeamError(format!(
                "rank {rank} sent {} bytes for its {} pixels of the {width} × {height} image",
                bytes.len(),
                rows.pixel_count()
            )));
        }
        // Byte copies (an MPI receive buffer need not be aligned for f32),
        // the rows in parallel: the film is fresh memory, whose first
        // touch costs more than the copy.
        let pixels: &mut [u8] = bytemuck::cast_slice_mut(&mut film.pixels);
        pixels
            .par_chunks_mut(row_bytes.max(1))
            .enumerate()
            .for_each(|(y, row)| {
                if let Some(k) = rows.local_row(y as u32) {
                    let at = k as usize * row_bytes;
                    row.copy_from_slice(&bytes[at..at + row_bytes]);
                }
            });
        Ok(())
    })?;
    Ok(film)
}

/// The image of `width × height` pixels whose rows the members hold by
/// contiguous bands in rank order (a [`TileBand`] each, or any split of
/// the rows by [`share`]), so that their pixels concatenated in rank order
/// are the image: assembled on the root alone (`Some` there, `None` on the
/// other members). Bands that do not add up to the image are an error.
pub fn band_film_to_root(
    team: &dyn Team,
    (width, height): (u32, u32),
    mine: Vec<Rgb>,
) -> Result<Option<Film>, TeamError> {
    let total = width as usize * height as usize;
    if team.size() == 1 && mine.len() == total {
        return Ok(Some(Film {
            width,
            height,
            pixels: mine,
        }));
    }
    let mut film = team.is_root().then(|| Film::new(width, height));
    let mut at = 0usize;
    team.gather_to_root(bytemuck::cast_slice(&mine), &mut |rank, bytes| {
        let Some(film) = film.as_mut() else {
            return Ok(());
        };
        let pixels: &mut [u8] = bytemuck::cast_slice_mut(&mut film.pixels);
        let to = pixels.get_mut(at..at + bytes.len()).ok_or_else(|| {
            TeamError(format!(
                "rank {rank}'s band runs past the {width} × {height} image"
            ))
        })?;
        copy_in_parallel(to, bytes);
        at += bytes.len();
        Ok(())
    })?;
    if film.is_some() && at != std::mem::size_of_val(&film.as_ref().unwrap().pixels[..]) {
        return Err(TeamError(format!(
            "the members' bands hold {} pixels, not the {width} × {height} image's {total}",
            at / std::mem::size_of::<Rgb>()
        )));
    }
    Ok(film)
}

/// `to.copy_from_slice(from)` by megabytes on the thread pool: a fresh
/// image's pages are first touched by the copy, which costs more than the
/// copy itself.
fn copy_in_parallel(to: &mut [u8], from: &[u8]) {
    const PART: usize = 1 << 20;
    to.par_chunks_mut(PART)
        .zip(from.par_chunks(PART))
        .for_each(|(to, from)| to.copy_from_slice(from));
}

/// [`gather_concat`] into `out`, whose allocation is reused: an exchange
/// made every pass then touches no fresh pages (tens of megabytes of page
/// faults a pass otherwise).
pub fn gather_concat_into<T: Pod>(
    team: &dyn Team,
    mine: &[T],
    out: &mut Vec<T>,
) -> Result<(), TeamError> {
    let parts = team.all_gather(bytemuck::cast_slice(mine))?;
    out.clear();
    out.reserve(parts.iter().map(Vec::len).sum::<usize>() / std::mem::size_of::<T>().max(1));
    for (rank, bytes) in parts.iter().enumerate() {
        append_items(out, bytes, rank)?;
    }
    Ok(())
}

/// Appends the items in `bytes`, member `rank`'s part of an exchange: one
/// copy into aligned items (received bytes carry no alignment of their
/// own); a part that is not a whole number of items is an error.
fn append_items<T: Pod>(out: &mut Vec<T>, bytes: &[u8], rank: usize) -> Result<(), TeamError> {
    let size = std::mem::size_of::<T>().max(1);
    if !bytes.len().is_multiple_of(size) {
        return Err(TeamError(format!(
            "rank {rank} sent {} bytes, not a whole number of {size}-byte items",
            bytes.len()
        )));
    }
    let at = out.len();
    out.resize(at + bytes.len() / size, T::zeroed());
    bytemuck::cast_slice_mut::<T, u8>(&mut out[at..]).copy_from_slice(bytes);
    Ok(())
}

/// The image of `width × height` pixels made tile by tile: member `r`
/// renders the tiles `r, r + size, …` of the Morton order (interleaved, so
/// that an expensive corner of the image is shared) with `render_tile`
/// (which returns the tile's pixels row by row), in parallel with rayon,
/// and the root assembles the image (`Some` there, `None` on the other
/// members: [`Team::gather_to_root`]). Every pixel is computed by exactly
/// one member, so the image is the single process's, bit for bit.
pub fn tiled_film(
    team: &dyn Team,
    size: (u32, u32),
    tile_size: u32,
    render_tile: impl Fn(Tile) -> Vec<Rgb> + Sync + Send,
) -> Result<Option<Film>, TeamError> {
    tiled_film_with(team, size, tile_size, |mine| {
        mine.into_par_iter().map(&render_tile).collect()
    })
}

/// [`tiled_film`] with the member's tiles rendered all together by
/// `render_mine`, which gets them in order and returns each one's pixels
/// row by row, in the same order: how a wavefront renderer traces many
/// tiles' rays in one batch.
pub fn tiled_film_with(
    team: &dyn Team,
    (width, height): (u32, u32),
    tile_size: u32,
    render_mine: impl FnOnce(Vec<Tile>) -> Vec<Vec<Rgb>>,
) -> Result<Option<Film>, TeamError> {
    let tiles = morton_tiles(width, height, tile_size);
    let (rank, size) = (team.rank(), team.size());
    let of = |member: usize| tiles.iter().skip(member).step_by(size);
    let rendered = render_mine(of(rank).copied().collect()).concat();
    let mut film = team.is_root().then(|| Film::new(width, height));
    team.gather_to_root(
        bytemuck::cast_slice(&rendered),
        &mut |member, bytes| match film.as_mut() {
            Some(film) => place_tiles(film, of(member), bytes, member),
            None => Ok(()),
        },
    )?;
    Ok(film)
}

/// Writes `bytes`, the pixels of `tiles` one after another (each row by
/// row), into `film`; member `member` sent them.
fn place_tiles<'a>(
    film: &mut Film,
    tiles: impl Iterator<Item = &'a Tile>,
    bytes: &[u8],
    member: usize,
) -> Result<(), TeamError> {
    let pixel = std::mem::size_of::<Rgb>();
    let width = film.width as usize;
    let pixels: &mut [u8] = bytemuck::cast_slice_mut(&mut film.pixels);
    let mut at = 0;
    for tile in tiles {
        let row = (tile.x1 - tile.x0) as usize * pixel;
        for y in tile.y0..tile.y1 {
            let from = bytes
                .get(at..at + row)
                .ok_or_else(|| TeamError(format!("rank {member} sent too few pixels")))?;
            let to = (y as usize * width + tile.x0 as usize) * pixel;
            pixels[to..to + row].copy_from_slice(from);
            at += row;
        }
    }
    if at != bytes.len() {
        return Err(TeamError(format!("rank {member} sent too many pixels")));
    }
    Ok(())
}

/// Sums of `mine` over the members (in rank order, so the same on all).
pub fn sum_u64(team: &dyn Team, mine: &[u64]) -> Result<Vec<u64>, TeamError> {
    let all = gather_concat(team, mine.to_vec())?;
    let mut sums = vec![0u64; mine.len()];
    for part in all.chunks_exact(mine.len().max(1)) {
        for (s, v) in sums.iter_mut().zip(part) {
            *s += v;
        }
    }
    Ok(sums)
}

/// The mean of values whose members hold `sum` and `count` each (added in
/// rank order, so the same on all); 0 when the team counts none.
pub fn team_mean(team: &dyn Team, sum: f64, count: f64) -> Result<f64, TeamError> {
    let all = gather_concat(team, vec![[sum, count]])?;
    let (sum, count) = all
        .iter()
        .fold((0.0, 0.0), |(s, c), [ms, mc]| (s + ms, c + mc));
    Ok(if count > 0.0 { sum / count } else { 0.0 })
}

/// Members as threads of one process: [`ThreadTeam::run`] starts `size`
/// threads, each with its member, and returns their results in rank
/// order. The distributed renderers' tests run on it, and so do several
/// GPUs in one process (a member per device).
pub struct ThreadTeam {
    rank: usize,
    shared: Arc<Exchange>,
}

/// The members' meeting point: one exchange (generation) at a time.
struct Exchange {
    size: usize,
    state: Mutex<ExchangeState>,
    changed: Condvar,
}

struct ExchangeState {
    /// Exchanges completed.
    generation: u64,
    arrived: usize,
    slots: Vec<Vec<u8>>,
    /// The last completed exchange's data, read by its members.
    last: Gathered,
    /// A member that returned or panicked: nobody waits for it any more.
    departed: Option<usize>,
    /// The last exchange of lent bytes the root has finished reading
    /// ([`ThreadTeam::gather_to_root`]), by its generation.
    root_read: u64,
    /// The root returned or panicked: nobody's bytes are read any more.
    root_departed: bool,
    /// Point-to-point messages not yet received: `mail[from * size + to]`.
    mail: Vec<VecDeque<Vec<u8>>>,
    /// Every member that returned or panicked (`departed` is the first).
    gone: Vec<bool>,
}

impl ThreadTeam {
    /// Runs `work` on `size` members (threads) and collects their results.
    /// A member that returns early (an error) or panics leaves the team:
    /// the others' next exchange fails with a [`TeamError`] naming it
    /// instead of waiting forever, and a panic is resumed here once every
    /// member has ended.
    pub fn run<R: Send>(size: usize, work: impl Fn(&dyn Team) -> R + Sync) -> Vec<R> {
        assert!(size > 0, "a team has at least one member");
        let shared = Arc::new(Exchange {
            size,
            state: Mutex::new(ExchangeState {
                generation: 0,
                arrived: 0,
                slots: vec![Vec::new(); size],
                last: Default::default(),
                departed: None,
                root_read: 0,
                root_departed: false,
                mail: vec![VecDeque::new(); size * size],
                gone: vec![false; size],
            }),
            changed: Condvar::new(),
        });
        let outcomes: Vec<std::thread::Result<R>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..size)
                .map(|rank| {
                    let member = ThreadTeam {
                        rank,
                        shared: shared.clone(),
                    };
                    let work = &work;
                    scope.spawn(move || {
                        let outcome =
                            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                                work(&member)
                            }));
                        member.depart();
                        outcome
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(Err))
                .collect()
        });
        outcomes
            .into_iter()
            .map(|o| o.unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
            .collect()
    }

    fn depart(&self) {
        let mut state = self.lock();
        state.departed.get_or_insert(self.rank);
        state.gone[self.rank] = true;
        state.root_departed |= self.rank == 0;
        self.shared.changed.notify_all();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ExchangeState> {
        self.shared.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// [`Team::all_gather`] of `mine`, with the exchange's generation.
    fn exchange(&self, mine: Vec<u8>) -> Result<(Gathered, u64), TeamError> {
        let left = |rank| TeamError(format!("member {rank} left the team"));
        let mut state = self.lock();
        if let Some(rank) = state.departed {
            return Err(left(rank));
        }
        state.slots[self.rank] = mine;
        state.arrived += 1;
        let generation = state.generation;
        if state.arrived == self.shared.size {
            let slots = std::mem::replace(&mut state.slots, vec![Vec::new(); self.shared.size]);
            state.last = Arc::new(slots);
            state.arrived = 0;
            state.generation += 1;
            self.shared.changed.notify_all();
            return Ok((state.last.clone(), generation + 1));
        }
        while state.generation == generation {
            if let Some(rank) = state.departed {
                return Err(left(rank));
            }
            state = self
                .shared
                .changed
                .wait(state)
                .unwrap_or_else(|e| e.into_inner());
        }
        // The next exchange cannot complete before this member joins it,
        // so `last` is still this one's.
        Ok((state.last.clone(), generation + 1))
    }
}

impl Team for ThreadTeam {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.shared.size
    }
    fn shares_memory(&self) -> bool {
        true
    }
    fn sends_point_to_point(&self) -> bool {
        true
    }

    fn send(&self, to: usize, bytes: &[u8]) -> Result<(), TeamError> {
        let size = self.shared.size;
        if to >= size {
            return Err(TeamError(format!("no member {to} in a team of {size}")));
        }
        let mut state = self.lock();
        state.mail[self.rank * size + to].push_back(bytes.to_vec());
        self.shared.changed.notify_all();
        Ok(())
    }

    fn receive(&self, from: usize) -> Result<Vec<u8>, TeamError> {
        let size = self.shared.size;
        if from >= size {
            return Err(TeamError(format!("no member {from} in a team of {size}")));
        }
        let mut state = self.lock();
        loop {
            if let Some(message) = state.mail[from * size + self.rank].pop_front() {
                return Ok(message);
            }
            if state.gone[from] {
                return Err(TeamError(format!(
                    "member {from} left the team before sending to member {}",
                    self.rank
                )));
            }
            state = self
                .shared
                .changed
                .wait(state)
                .unwrap_or_else(|e| e.into_inner());
        }
    }

    fn all_gather(&self, mine: &[u8]) -> Result<Gathered, TeamError> {
        // Copied before the lock: the members' copies (a band of an image,
        // hundreds of megabytes) run at once rather than one by one.
        Ok(self.exchange(mine.to_vec())?.0)
    }

    /// The members lend their bytes in place: each sends only where they
    /// are, the root's sink reads them there, and the others wait until the
    /// root has read (or has left the team), so nothing is copied but into
    /// the root's result.
    fn gather_to_root(&self, mine: &[u8], sink: &mut RootSink<'_>) -> Result<(), TeamError> {
        let lent = [mine.as_ptr() as usize as u64, mine.len() as u64];
        let (all, generation) = self.exchange(bytemuck::cast_slice(&lent).to_vec())?;
        if !self.is_root() {
            let mut state = self.lock();
            while state.root_read < generation && !state.root_departed {
                state = self
                    .shared
                    .changed
                    .wait(state)
                    .unwrap_or_else(|e| e.into_inner());
            }
            return match state.root_read >= generation {
                true => Ok(()),
                false => Err(TeamError("member 0 left the team".into())),
            };
        }
        let read = all.iter().enumerate().try_for_each(|(rank, address)| {
            let [at, len]: [u64; 2] = bytemuck::pod_read_unaligned(address);
            // SAFETY: member `rank` lent `mine` (`len` bytes at `at`) for
            // this call, which it does not leave until `root_read` reaches
            // this exchange's generation (set below, after the last read)
            // or the root departs (this thread, after this call).
            let bytes =
                unsafe { std::slice::from_raw_parts(at as usize as *const u8, len as usize) };
            sink(rank, bytes)
        });
        let mut state = self.lock();
        state.root_read = generation;
        self.shared.changed.notify_all();
        read
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_cover_the_range_once_in_rank_order() {
        for size in 1..=7u64 {
            for count in [0u64, 1, 2, 6, 7, 100, 101] {
                let mut next = 0;
                for rank in 0..size {
                    let s = share_of(rank, size, count);
                    assert_eq!(s.start, next, "size {size} count {count} rank {rank}");
                    assert!(s.end - s.start <= count / size + 1);
                    next = s.end;
                }
                assert_eq!(next, count);
            }
        }
    }

    #[test]
    fn thread_team_gathers_in_rank_order() {
        let results = ThreadTeam::run(3, |team| {
            let range = share(team, 10);
            let mine: Vec<u32> = range.map(|i| i as u32 * 10).collect();
            let all = gather_concat(team, mine).unwrap();
            let sums = sum_u64(team, &[1, team.rank() as u64]).unwrap();
            (all, sums)
        });
        for (all, sums) in results {
            assert_eq!(all, (0..10).map(|i| i * 10).collect::<Vec<u32>>());
            assert_eq!(sums, [3, 3]);
        }
    }

    #[test]
    fn rows_reach_the_root_alone_as_the_whole_image() {
        let (width, height) = (13u32, 21u32);
        let pixel = |i: u32| Rgb::new(i as f32, 0.5, -(i as f32));
        let rows_pixels = |rows: TileRows| -> Vec<Rgb> {
            rows.pixel_rows()
                .flat_map(|y| (0..width).map(move |x| pixel(y * width + x)))
                .collect()
        };
        for size in 1..=4u64 {
            for interleaved in [false, true] {
                let rows_of = |rank: usize| match interleaved {
                    true => TileRows::interleaved_of(rank as u64, size, width, height),
                    false => TileRows::band_of(rank as u64, size, width, height),
                };
                let films = ThreadTeam::run(size as usize, |team| {
                    let mine = rows_pixels(rows_of(team.rank()));
                    rows_film_to_root(team, (width, height), mine, rows_of).unwrap()
                });
                let root = films[0].as_ref().expect("the root holds the image");
                assert_eq!((root.width, root.height), (width, height));
                assert!(
                    root.pixels
                        .iter()
                        .copied()
                        .eq((0..width * height).map(pixel))
                );
                assert!(films[1..].iter().all(Option::is_none), "team of {size}");
            }
        }
        // Rows that do not make the image are an error, not a torn film.
        let short = ThreadTeam::run(2, |team| {
            band_film_to_root(team, (width, height), vec![Rgb::ZERO; 3])
        });
        let error = short[0].as_ref().unwrap_err();
        assert!(error.0.contains("6 pixels, not the 13 × 21"), "{error}");
        let interleaved = ThreadTeam::run(2, |team| {
            let rows_of = |rank| TileRows::interleaved_of(rank as u64, 2, width, height);
            rows_film_to_root(team, (width, height), vec![Rgb::ZERO; 3], rows_of)
        });
        let error = interleaved[0].as_ref().unwrap_err();
        assert!(error.0.contains("rank 0 sent 36 bytes"), "{error}");
    }

    #[test]
    fn tile_rows_cover_the_image_once() {
        for (width, height) in [(17u32, 9u32), (64, 64), (5, 40), (100, 3)] {
            for size in 1..=5u64 {
                for of in [TileRows::band_of, TileRows::interleaved_of] {
                    let mut seen = vec![0u32; height as usize];
                    let mut tiles = 0;
                    for rank in 0..size {
                        let rows = of(rank, size, width, height);
                        assert_eq!(
                            rows.pixel_count(),
                            rows.pixel_rows().count() * width as usize
                        );
                        for (k, y) in rows.pixel_rows().enumerate() {
                            assert_eq!(rows.local_row(y), Some(k as u32));
                        }
                        let held = (0..height + 9).filter(|&y| rows.local_row(y).is_some());
                        assert_eq!(held.count(), rows.pixel_rows().count());
                        rows.pixel_rows().for_each(|y| seen[y as usize] += 1);
                        tiles += rows.tiles();
                    }
                    assert!(seen.iter().all(|&n| n == 1), "{width}x{height}, {size}");
                    assert_eq!(tiles, width.div_ceil(8) * height.div_ceil(8));
                }
                let band = TileBand::of_member(size - 1, size, width, height);
                let rows = TileRows::band_of(size - 1, size, width, height);
                assert_eq!(rows.pixel_count(), band.pixel_count());
            }
        }
    }

    #[test]
    fn a_member_that_leaves_fails_the_others_exchange() {
        let results = ThreadTeam::run(3, |team| {
            if team.rank() == 1 {
                return Err(TeamError("member 1's own error".into()));
            }
            team.all_gather(&[1])?;
            team.all_gather(&[2]).map(|_| ())
        });
        assert_eq!(results[1], Err(TeamError("member 1's own error".into())));
        for rank in [0, 2] {
            assert_eq!(
                results[rank],
                Err(TeamError("member 1 left the team".into()))
            );
        }
    }

    #[test]
    fn a_token_handed_round_the_team_arrives_in_order() {
        // Each member adds its rank to the token and hands it on, three
        // rounds, as SPPM's members hand on the pixel statistics.
        let size = 4;
        let results = ThreadTeam::run(size, |team| -> Result<Vec<u64>, TeamError> {
            let rank = team.rank();
            let mut seen = Vec::new();
            for round in 0..3u64 {
                let mut token = if rank == 0 && round == 0 {
                    0
                } else {
                    let from = (rank + size - 1) % size;
                    u64::from_le_bytes(team.receive(from)?.try_into().unwrap())
                };
                seen.push(token);
                token = token * 10 + rank as u64;
                if round < 2 || rank + 1 < size {
                    team.send((rank + 1) % size, &token.to_le_bytes())?;
                }
            }
            Ok(seen)
        });
        let mut expected = 0u64;
        let mut order = Vec::new();
        for round in 0..3 {
            for rank in 0..size {
                order.push((rank, round, expected));
                expected = expected * 10 + rank as u64;
            }
        }
        for (rank, round, token) in order {
            assert_eq!(results[rank].as_ref().unwrap()[round], token);
        }
    }

    #[test]
    fn a_member_that_leaves_fails_a_receive_from_it() {
        let results = ThreadTeam::run(2, |team| {
            if team.rank() == 1 {
                team.send(0, b"first")?;
                return Err(TeamError("member 1's own error".into()));
            }
            assert_eq!(team.receive(1)?, b"first");
            team.receive(1).map(|_| ())
        });
        assert_eq!(
            results[0],
            Err(TeamError(
                "member 1 left the team before sending to member 0".into()
            ))
        );
        assert!(Solo.send(0, b"x").is_err() && !Solo.sends_point_to_point());
    }

    #[test]
    fn bands_cover_the_image_once_in_rank_order() {
        for (width, height) in [(17u32, 9u32), (64, 64), (5, 40), (100, 3)] {
            let tiles_x = width.div_ceil(8);
            for size in 1..=5u64 {
                let (mut tile, mut pixel) = (0, 0);
                for rank in 0..size {
                    let band = TileBand::of_member(rank, size, width, height);
                    assert_eq!(band.first_tile, tile, "{width}x{height} {rank}/{size}");
                    assert_eq!(band.pixels.start, pixel);
                    assert_eq!(band.tiles % tiles_x, 0);
                    assert_eq!(band.pixel_count(), band.pixels.len());
                    (tile, pixel) = (tile + band.tiles, band.pixels.end);
                }
                assert_eq!(tile, tiles_x * height.div_ceil(8));
                assert_eq!(pixel, width * height);
            }
            assert_eq!(TileBand::whole(width, height).pixels, 0..width * height);
        }
    }

    #[test]
    fn interleaved_tile_rows_merged_run_by_run_are_the_image_rows() {
        // Heights with a partial last tile row, and teams larger than the
        // tile rows (members with no rows).
        for (width, height) in [(5, 8), (3, 29), (2, 64), (4, 3)] {
            for size in 1..=5u64 {
                let slots = TileRows::interleaved_of(0, size, width, height).count;
                let mut lengths = Vec::new();
                let mut members = Vec::new();
                for rank in 0..size {
                    let rows = TileRows::interleaved_of(rank, size, width, height);
                    let runs = rows.tile_row_runs(slots);
                    assert_eq!(runs.iter().sum::<u64>(), rows.pixel_count() as u64);
                    lengths.extend(runs);
                    // Each member's pixels named by their image index.
                    let pixels: Vec<u32> = rows
                        .pixel_rows()
                        .flat_map(|y| (0..width).map(move |x| y * width + x))
                        .collect();
                    members.push(pixels);
                }
                let merged: Vec<u32> = run_plan(&lengths, size as usize)
                    .unwrap()
                    .iter()
                    .flat_map(|p| {
                        members[p.member][p.from as usize..(p.from + p.len) as usize].to_vec()
                    })
                    .collect();
                let image: Vec<u32> = (0..width * height).collect();
                assert_eq!(merged, image, "{width} × {height}, {size} members");
            }
        }
    }

    #[test]
    fn run_plans_merge_run_by_run_in_rank_order() {
        // Member 0: runs [a0 a1 | a2 | -], member 1: runs [- | b0 | b1 b2].
        let plan = run_plan(&[2, 1, 0, 0, 1, 2], 2).unwrap();
        let piece = |member, from, len| RunPiece { member, from, len };
        assert_eq!(
            plan,
            [
                piece(0, 0, 2),
                piece(0, 2, 1),
                piece(1, 0, 1),
                piece(1, 1, 2)
            ]
        );
        assert_eq!(own_pieces(&plan, 0), [(0, 2), (2, 1)]);
        assert_eq!(own_pieces(&plan, 1), [(3, 1), (4, 2)]);
        assert!(run_plan(&[1, 2, 3], 2).is_err());
    }

    #[test]
    fn gathered_runs_are_the_single_members_order() {
        // Items tagged (wave, index): one "device" makes wave 0 of all
        // items, then wave 1 of the survivors (every third), and so on; a
        // team splits the items by index and merges its waves run by run.
        fn waves(items: std::ops::Range<u32>) -> (Vec<[u32; 2]>, Vec<u64>) {
            let (mut out, mut runs) = (Vec::new(), Vec::new());
            for wave in 0..3 {
                let run: Vec<[u32; 2]> = items
                    .clone()
                    .filter(|i| i % 3u32.pow(wave) == 0)
                    .map(|i| [wave, i])
                    .collect();
                runs.push(run.len() as u64);
                out.extend(run);
            }
            (out, runs)
        }
        let (single, _) = waves(0..20);
        for size in 1..=3 {
            for merged in ThreadTeam::run(size, |team| {
                let range = share(team, 20);
                let (mine, runs) = waves(range.start as u32..range.end as u32);
                gather_runs(team, &mine, &runs).unwrap()
            }) {
                assert_eq!(merged, single, "team of {size}");
            }
        }
    }

    #[test]
    fn a_ragged_message_is_an_error() {
        struct Ragged;
        impl Team for Ragged {
            fn rank(&self) -> usize {
                0
            }
            fn size(&self) -> usize {
                2
            }
            fn all_gather(&self, mine: &[u8]) -> Result<Gathered, TeamError> {
                Ok(Arc::new(vec![mine.to_vec(), vec![1, 2, 3]]))
            }
        }
        let err = gather_concat::<u32>(&Ragged, vec![7]).unwrap_err();
        assert!(err.0.contains("rank 1 sent 3 bytes"), "{err}");
    }
}
