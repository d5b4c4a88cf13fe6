//! One render shared by a team of processes (MPI ranks) or threads.
//!
//! A [`Team`] is `size` members, each knowing its `rank`, that can do one
//! collective operation: [`Team::all_gather`], every member's bytes handed
//! to every member in rank order. Everything the renderers distribute
//! reduces to it:
//!
//! - independent work is split into contiguous shares of an index range
//!   ([`share`]: photons by index, image tiles, irradiance samples), each
//!   member computes its share, and the shares are concatenated in rank
//!   order ([`gather_concat`]), which is index order: every member then
//!   holds exactly the array a single process would have made;
//! - per-pixel state is *owned*: a member keeps the statistics of its own
//!   rows, and only the finished rows travel, once, at the end.
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
use std::ops::Range;
use std::sync::{Barrier, Mutex};

/// A collective failed (a member left, a message was malformed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TeamError(pub String);

impl std::fmt::Display for TeamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TeamError {}

/// Members sharing one render. Every member must make the same sequence of
/// collective calls (as with MPI collectives).
pub trait Team: Send + Sync {
    /// This member's number, `0..size`.
    fn rank(&self) -> usize;
    /// Members in all.
    fn size(&self) -> usize;
    /// Every member's `mine`, indexed by rank, on every member.
    fn all_gather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>, TeamError>;

    /// Member 0 writes the image and reports progress.
    fn is_root(&self) -> bool {
        self.rank() == 0
    }
}

/// The team of one: a single process, nothing to exchange.
#[derive(Clone, Copy, Debug, Default)]
pub struct Solo;

impl Team for Solo {
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        1
    }
    fn all_gather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>, TeamError> {
        Ok(vec![mine.to_vec()])
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

/// Every member's `mine`, concatenated in rank order, on every member.
/// With `mine` computed over [`share`], the result is the whole array in
/// index order.
pub fn gather_concat<T: Pod>(team: &dyn Team, mine: Vec<T>) -> Result<Vec<T>, TeamError> {
    if team.size() == 1 {
        return Ok(mine);
    }
    let parts = team.all_gather(bytemuck::cast_slice(&mine))?;
    let size = std::mem::size_of::<T>().max(1);
    let mut out = Vec::with_capacity(parts.iter().map(|p| p.len() / size).sum());
    for (rank, bytes) in parts.iter().enumerate() {
        if bytes.len() % size != 0 {
            return Err(TeamError(format!(
                "rank {rank} sent {} bytes, not a whole number of {size}-byte items",
                bytes.len()
            )));
        }
        out.extend(read_items::<T>(bytes));
    }
    Ok(out)
}

/// The image of `width × height` pixels made tile by tile: member `r`
/// renders the tiles `r, r + size, …` of the Morton order (interleaved, so
/// that an expensive corner of the image is shared) with `render_tile`
/// (which returns the tile's pixels row by row), in parallel with rayon,
/// and every member ends with the whole image. Every pixel is computed by
/// exactly one member, so the image is the single process's, bit for bit.
pub fn tiled_film(
    team: &dyn Team,
    (width, height): (u32, u32),
    tile_size: u32,
    render_tile: impl Fn(Tile) -> Vec<Rgb> + Sync + Send,
) -> Result<Film, TeamError> {
    let tiles = morton_tiles(width, height, tile_size);
    let (rank, size) = (team.rank(), team.size());
    let mine: Vec<Tile> = tiles.iter().copied().skip(rank).step_by(size).collect();
    let rendered: Vec<Vec<Rgb>> = mine.into_par_iter().map(&render_tile).collect();
    let parts: Vec<Vec<Rgb>> = if size == 1 {
        vec![rendered.concat()]
    } else {
        let all = team.all_gather(bytemuck::cast_slice(&rendered.concat()))?;
        all.iter().map(|bytes| read_items(bytes)).collect()
    };
    // Tile t was member t % size's (t / size)-th.
    let mut film = Film::new(width, height);
    let mut cursors = vec![0usize; size];
    for (t, tile) in tiles.iter().enumerate() {
        let (member, at) = (t % size, &mut cursors[t % size]);
        let pixels = parts[member]
            .get(*at..*at + tile.pixel_count())
            .ok_or_else(|| TeamError(format!("rank {member} sent too few pixels")))?;
        *at += tile.pixel_count();
        let mut it = pixels.iter();
        for y in tile.y0..tile.y1 {
            for x in tile.x0..tile.x1 {
                film.set(x, y, it.next().copied().unwrap_or_default());
            }
        }
    }
    Ok(film)
}

/// The items in `bytes` (received, so of no particular alignment); a
/// trailing partial item is dropped (callers check counts).
fn read_items<T: Pod>(bytes: &[u8]) -> Vec<T> {
    bytes
        .chunks_exact(std::mem::size_of::<T>().max(1))
        .map(bytemuck::pod_read_unaligned)
        .collect()
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

/// Members as threads of one process: [`ThreadTeam::run`] starts `size`
/// threads, each with its member, and returns their results in rank
/// order. The distributed renderers' tests run on it.
pub struct ThreadTeam {
    rank: usize,
    shared: std::sync::Arc<Exchange>,
}

struct Exchange {
    size: usize,
    slots: Mutex<Vec<Vec<u8>>>,
    barrier: Barrier,
}

impl ThreadTeam {
    /// Runs `work` on `size` members (threads) and collects their results.
    /// A member that panics fails the whole run with its message (the
    /// other members may be waiting at a barrier, so the process aborts
    /// rather than hangs: the same contract as an MPI job).
    pub fn run<R: Send>(size: usize, work: impl Fn(&dyn Team) -> R + Sync) -> Vec<R> {
        assert!(size > 0, "a team has at least one member");
        let shared = std::sync::Arc::new(Exchange {
            size,
            slots: Mutex::new(vec![Vec::new(); size]),
            barrier: Barrier::new(size),
        });
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..size)
                .map(|rank| {
                    let member = ThreadTeam {
                        rank,
                        shared: shared.clone(),
                    };
                    let work = &work;
                    scope.spawn(move || {
                        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            work(&member)
                        }));
                        caught.unwrap_or_else(|_| {
                            eprintln!("ThreadTeam: member {rank} panicked; aborting the team");
                            std::process::abort()
                        })
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a member's panic aborts the process"))
                .collect()
        })
    }
}

impl Team for ThreadTeam {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.shared.size
    }
    fn all_gather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>, TeamError> {
        let lock = || {
            self.shared
                .slots
                .lock()
                .map_err(|_| TeamError("a member failed mid-exchange".into()))
        };
        lock()?[self.rank] = mine.to_vec();
        self.shared.barrier.wait(); // every member has written
        let all = lock()?.clone();
        self.shared.barrier.wait(); // every member has read: slots reusable
        Ok(all)
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
    fn a_ragged_message_is_an_error() {
        struct Ragged;
        impl Team for Ragged {
            fn rank(&self) -> usize {
                0
            }
            fn size(&self) -> usize {
                2
            }
            fn all_gather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>, TeamError> {
                Ok(vec![mine.to_vec(), vec![1, 2, 3]])
            }
        }
        let err = gather_concat::<u32>(&Ragged, vec![7]).unwrap_err();
        assert!(err.0.contains("rank 1 sent 3 bytes"), "{err}");
    }
}
