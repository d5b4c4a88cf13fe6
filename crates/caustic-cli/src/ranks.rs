//! The process's place in an MPI job (`mpirun -np N caustic render …`).
//!
//! With the `mpi` feature, a process started by an MPI launcher joins the
//! job's world at start-up ([`join`]) and every render is shared with the
//! other ranks through `caustic_render::team` (a share of the photons,
//! tiles and rows each, exchanged in index order, so the image is the
//! single process's, bit for bit). With `--device cuda` each rank takes
//! its node's GPU number `local rank mod GPUs` ([`local_gpu`]) and the
//! three integrators split among the ranks' GPUs as among the GPUs of one
//! process (the image one GPU's up to the order of float additions within
//! a pixel; see `caustic_render::team_cuda`); the ranks of one node
//! exchange device buffers through CUDA IPC ([`Team::on_one_node`]).
//! Rank 0 prints progress and notes and writes the image; the others are
//! quiet. A rank that fails prints its error with its rank and aborts the
//! whole job ([`fail`]), so the others never wait for it at the next
//! exchange.
//!
//! Without the feature, a process that finds itself one of several ranks
//! refuses to run: each would render the whole image and write the same
//! file.

use anyhow::Result;
use caustic::team::Team;
use std::sync::{Arc, OnceLock};

/// The job's team, set once by [`join`]; `None` in a single process.
static TEAM: OnceLock<Arc<dyn Team>> = OnceLock::new();

/// The team of this process's MPI job, when it has more than one rank.
pub(crate) fn team() -> Option<Arc<dyn Team>> {
    TEAM.get().filter(|t| t.size() > 1).cloned()
}

/// Whether this process speaks for the job: rank 0, or a single process.
pub(crate) fn is_root() -> bool {
    TEAM.get().is_none_or(|t| t.is_root())
}

/// `--device cuda` for this rank: device `local rank mod devices` of its
/// node, so that the ranks of a node spread over its GPUs (Open MPI's and
/// MPICH's local rank; device 0 when neither says).
pub(crate) fn local_gpu() -> caustic::Device {
    let local = launcher_number(&[
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "MPI_LOCALRANKID",
        "PMIX_LOCAL_RANK",
    ])
    .unwrap_or(0);
    #[cfg(feature = "cuda")]
    let devices = caustic_gpu::device_count().unwrap_or(1).max(1);
    #[cfg(not(feature = "cuda"))]
    let devices = 1;
    caustic::Device::Cuda(local % devices)
}

/// The number of ranks that an MPI launcher announced in the environment
/// (Open MPI, MPICH/Hydra, PMIx), if any.
fn launched_ranks() -> Option<usize> {
    launcher_number(&["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"])
}

/// The number of ranks on this node that an MPI launcher announced (Open
/// MPI, MPICH/Hydra, PMIx), if any.
fn local_ranks() -> Option<usize> {
    launcher_number(&[
        "OMPI_COMM_WORLD_LOCAL_SIZE",
        "MPI_LOCALNRANKS",
        "PMIX_LOCAL_SIZE",
    ])
}

/// The number in the first of `names` (one variable per launcher: Open
/// MPI, MPICH/Hydra, PMIx) that the environment sets to one.
fn launcher_number(names: &[&str]) -> Option<usize> {
    names
        .iter()
        .find_map(|name| std::env::var(name).ok()?.trim().parse().ok())
}

/// The worker threads a render of this process runs: `requested` when
/// given (`--threads N`), otherwise one per core it may use. Ranks of one
/// MPI job that share a node and were not bound to cores by the launcher
/// (`--bind-to none`) would each start a worker per core of the whole
/// machine, so they share its cores instead: `cores / local ranks` each.
/// Where the launcher bound the rank to a core set, that set is its share
/// already (Rust's count of usable cores follows the affinity mask).
pub(crate) fn render_threads(requested: usize) -> usize {
    let usable = std::thread::available_parallelism().map_or(1, |n| n.get());
    share_of_cores(requested, usable, online_cores(), local_ranks())
}

/// [`render_threads`] for the given counts: `requested` when non-zero;
/// `usable / local` when the process may use every online core and the
/// node runs `local` > 1 ranks; 0 (rayon's one per usable core) otherwise.
fn share_of_cores(requested: usize, usable: usize, online: usize, local: Option<usize>) -> usize {
    match local {
        _ if requested > 0 => requested,
        Some(local) if local > 1 && usable >= online => (usable / local).max(1),
        _ => 0,
    }
}

/// The cores online on this machine (the affinity mask aside).
#[cfg(unix)]
fn online_cores() -> usize {
    // SAFETY: sysconf reads a system constant; no memory is passed.
    let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(online).unwrap_or(1).max(1)
}

/// Without `sysconf`: the usable cores stand for the online ones.
#[cfg(not(unix))]
fn online_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Joins the MPI job this process was started in, if any: the returned
/// guard finalises MPI when dropped (at the end of `main`).
#[cfg(feature = "mpi")]
pub(crate) fn join() -> Result<Option<mpi_team::Membership>> {
    if launched_ranks().is_none_or(|n| n < 2) {
        return Ok(None);
    }
    let membership = mpi_team::Membership::join()?;
    // A second join cannot happen: `join` runs once, first in `main`.
    let _ = TEAM.set(membership.team());
    Ok(Some(membership))
}

/// Without the `mpi` feature: refuses to be one of several ranks.
#[cfg(not(feature = "mpi"))]
pub(crate) fn join() -> Result<Option<()>> {
    match launched_ranks() {
        Some(n) if n > 1 => anyhow::bail!(
            "started as one of {n} MPI ranks, but this caustic was built without the `mpi` \
             feature: every rank would render the whole image. Rebuild with \
             `cargo build --release --features mpi` (needs an MPI library, e.g. Debian's \
             libopenmpi-dev), or run one process"
        ),
        _ => Ok(None),
    }
}

/// Reports `error` and ends the job: in a team, with the rank named and
/// every other rank stopped (MPI_Abort), so no rank hangs at an exchange
/// the failed one will never reach.
pub(crate) fn fail(error: &anyhow::Error) {
    match TEAM.get() {
        Some(team) if team.size() > 1 => {
            eprintln!("error (rank {} of {}): {error:#}", team.rank(), team.size());
            #[cfg(feature = "mpi")]
            mpi_team::abort(1);
        }
        _ => eprintln!("error: {error:#}"),
    }
}

#[cfg(feature = "mpi")]
mod mpi_team {
    //! `Team` over an MPI communicator (the `mpi` crate, over the system's
    //! MPI library).

    use anyhow::{Context, Result, bail};
    use caustic::team::{Gathered, RootSink, Team, TeamError};
    use mpi::Threading;
    use mpi::datatype::PartitionMut;
    use mpi::environment::Universe;
    use mpi::topology::SimpleCommunicator;
    use mpi::traits::*;
    use std::sync::{Arc, Mutex};

    /// MPI initialised for this process; finalised when dropped.
    pub(crate) struct Membership {
        _universe: Universe,
        team: Arc<MpiTeam>,
    }

    impl Membership {
        pub(crate) fn join() -> Result<Self> {
            let (universe, threading) = mpi::initialize_with_threading(Threading::Serialized)
                .context("MPI was initialised already")?;
            if threading < Threading::Serialized {
                bail!(
                    "the MPI library gives only {threading:?} threading; caustic needs Serialized"
                );
            }
            let world = universe.world();
            // The ranks that share this node's memory (MPI_Comm_split_type
            // with MPI_COMM_TYPE_SHARED): all of them when the job runs on
            // one machine, where GPU ranks can exchange device memory
            // through CUDA IPC.
            let one_node = world.split_shared(0).size() == world.size();
            let team = Arc::new(MpiTeam {
                rank: world.rank() as usize,
                size: world.size() as usize,
                one_node,
                world: Mutex::new(world),
            });
            Ok(Self {
                _universe: universe,
                team,
            })
        }

        pub(crate) fn team(&self) -> Arc<dyn Team> {
            self.team.clone()
        }
    }

    /// Ends every rank of the job.
    pub(crate) fn abort(code: i32) {
        mpi::topology::SimpleCommunicator::world().abort(code)
    }

    struct MpiTeam {
        rank: usize,
        size: usize,
        /// Every rank runs on this node.
        one_node: bool,
        world: Mutex<SimpleCommunicator>,
    }

    // SAFETY: MPI runs with at least MPI_THREAD_SERIALIZED (checked in
    // `Membership::join`), which allows calls from any thread one at a
    // time; every call goes through the mutex around the communicator.
    unsafe impl Send for MpiTeam {}
    // SAFETY: as above: `&MpiTeam` reaches MPI only through the mutex.
    unsafe impl Sync for MpiTeam {}

    impl Team for MpiTeam {
        fn rank(&self) -> usize {
            self.rank
        }

        fn size(&self) -> usize {
            self.size
        }

        fn on_one_node(&self) -> bool {
            self.one_node
        }

        fn sends_point_to_point(&self) -> bool {
            true
        }

        fn send(&self, to: usize, bytes: &[u8]) -> Result<(), TeamError> {
            let to = self.rank_of(to)?;
            self.world()?.process_at_rank(to).send(bytes);
            Ok(())
        }

        fn receive(&self, from: usize) -> Result<Vec<u8>, TeamError> {
            let from = self.rank_of(from)?;
            let (message, _) = self.world()?.process_at_rank(from).receive_vec::<u8>();
            Ok(message)
        }

        fn all_gather(&self, mine: &[u8]) -> Result<Gathered, TeamError> {
            let world = self.world()?;
            let count = message_count(mine)?;
            let mut counts = vec![0i32; self.size];
            world.all_gather_into(&count, &mut counts[..]);
            let (displs, total) = displacements(&counts)?;
            if total == 0 {
                // A barrier: the counts' all-gather above was the
                // collective, and MPI refuses an all-gather of no bytes.
                return Ok(Arc::new(vec![Vec::new(); self.size]));
            }
            let mut all = vec![0u8; total];
            {
                let mut parts = PartitionMut::new(&mut all[..], &counts[..], &displs[..]);
                world.all_gather_varcount_into(mine, &mut parts);
            }
            Ok(split_parts(&all, &counts, &displs))
        }

        fn gather_to_root(&self, mine: &[u8], sink: &mut RootSink<'_>) -> Result<(), TeamError> {
            let world = self.world()?;
            let count = message_count(mine)?;
            // Every rank learns the counts, so that all of them skip a
            // gather of no bytes (which MPI may refuse, as it refuses the
            // all-gather's).
            let mut counts = vec![0i32; self.size];
            world.all_gather_into(&count, &mut counts[..]);
            let (displs, total) = displacements(&counts)?;
            let root = world.process_at_rank(0);
            if self.rank != 0 {
                if total > 0 {
                    root.gather_varcount_into(mine);
                }
                return Ok(());
            }
            let mut all = vec![0u8; total];
            if total > 0 {
                let mut parts = PartitionMut::new(&mut all[..], &counts[..], &displs[..]);
                root.gather_varcount_into_root(mine, &mut parts);
            }
            for (rank, (&c, &d)) in counts.iter().zip(&displs).enumerate() {
                sink(rank, &all[d as usize..(d + c) as usize])?;
            }
            Ok(())
        }
    }

    impl MpiTeam {
        /// Member `member` as an MPI rank of the world communicator.
        fn rank_of(&self, member: usize) -> Result<i32, TeamError> {
            match i32::try_from(member) {
                Ok(rank) if member < self.size => Ok(rank),
                _ => Err(TeamError(format!(
                    "no rank {member} in a job of {} ranks",
                    self.size
                ))),
            }
        }

        fn world(&self) -> Result<std::sync::MutexGuard<'_, SimpleCommunicator>, TeamError> {
            self.world
                .lock()
                .map_err(|_| TeamError("an MPI call panicked".into()))
        }
    }

    fn too_big() -> TeamError {
        TeamError("an exchange of 2 GiB or more (MPI counts are 32-bit)".into())
    }

    /// A message's length as MPI counts it.
    fn message_count(mine: &[u8]) -> Result<i32, TeamError> {
        i32::try_from(mine.len()).map_err(|_| too_big())
    }

    /// Where each rank's bytes start in the concatenation, and its length.
    fn displacements(counts: &[i32]) -> Result<(Vec<i32>, usize), TeamError> {
        let mut displs = Vec::with_capacity(counts.len());
        let mut total = 0i32;
        for &c in counts {
            displs.push(total);
            total = total.checked_add(c).ok_or_else(too_big)?;
        }
        Ok((displs, total as usize))
    }

    fn split_parts(all: &[u8], counts: &[i32], displs: &[i32]) -> Gathered {
        Arc::new(
            counts
                .iter()
                .zip(displs)
                .map(|(&c, &d)| all[d as usize..(d + c) as usize].to_vec())
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::share_of_cores;

    #[test]
    fn ranks_of_one_node_share_its_cores_unless_bound_or_told() {
        // Unbound ranks on a 64-core node: the cores divided among them.
        assert_eq!(share_of_cores(0, 64, 64, Some(4)), 16);
        assert_eq!(share_of_cores(0, 64, 64, Some(3)), 21);
        // More ranks than cores: one worker each, never none.
        assert_eq!(share_of_cores(0, 2, 2, Some(3)), 1);
        // Bound by the launcher to fewer cores than the machine's: the
        // binding is the share already (rayon's default).
        assert_eq!(share_of_cores(0, 16, 64, Some(4)), 0);
        // A single process, or the only rank on its node: every core.
        assert_eq!(share_of_cores(0, 64, 64, None), 0);
        assert_eq!(share_of_cores(0, 64, 64, Some(1)), 0);
        // `--threads N` wins.
        assert_eq!(share_of_cores(5, 64, 64, Some(4)), 5);
    }
}
