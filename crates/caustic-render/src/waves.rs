//! Tracing by waves on the CPU, for structures that answer whole batches
//! of rays far faster than one ray at a time (divide-and-conquer ray
//! tracing, `caustic_accel::dacrt`, which builds nothing between batches
//! and answers a lone ray by brute force).
//!
//! Every CPU renderer traces either one ray at a time or by waves
//! ([`TraceMode`]); both give the same image bit for bit, because both run
//! the same per-ray decisions and draw the same random numbers (keyed by
//! the path, [`crate::draw`], or by the photon, `photon_rng`): only the
//! order in which rays meet the structure changes.
//!
//! `trace_walks` drives *walks*, paths that trace one ray after another
//! without branching (photons, SPPM eye paths, final-gather rays): each
//! wave gathers the next ray of every live walk into one
//! [`Accel::intersect_batch`](caustic_accel::Accel::intersect_batch) and
//! hands each walk its hit, in parallel. Branching eye paths (the Whitted
//! and photon-mapping renderers' specular trees) are traced by
//! `specular_tree`; shadow rays by
//! [`crate::direct::direct_light_batch`].

use crate::RenderScene;
use caustic_geom::{Hit, Ray};
use rayon::prelude::*;
use std::ops::Range;

/// Most rays a renderer traces together (one 362 × 362 image at 1 spp):
/// its paths are taken in groups of at most this many first rays, so a
/// frame of any size, or a photon pass of any count, needs a bounded
/// amount of memory. A Whitted group's rays, nodes, shadow rays and the
/// structure's own batch scratch take about 1.5 KB per primary ray with
/// four shadow rays per hit (measured: 190 MB peak for the Cornell box at
/// 256 × 256 and 16 spp under DACRT).
pub const GROUP_RAYS: usize = 1 << 17;

/// How a CPU renderer traces its rays (a GPU always traces wavefronts).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TraceMode {
    /// Waves where the structure prefers batches
    /// ([`caustic_accel::Accel::prefers_batches`]: DACRT), else one ray
    /// at a time.
    #[default]
    Auto,
    /// One ray at a time.
    PerRay,
    /// Waves of whole groups of paths through the batch queries.
    Wavefront,
}

impl TraceMode {
    /// Whether a render on `scene` traces waves.
    pub fn traces_waves(self, scene: &RenderScene) -> bool {
        match self {
            Self::Auto => scene.accel.prefers_batches(),
            Self::PerRay => false,
            Self::Wavefront => true,
        }
    }
}

/// `rows` of an image `width` pixels wide in groups of whole rows of at
/// most `group_rays` pixels (at least one row), in order.
pub(crate) fn row_groups(
    rows: Range<u32>,
    width: u32,
    group_rays: usize,
) -> impl Iterator<Item = Range<u32>> {
    let per_group = (group_rays / width.max(1) as usize).clamp(1, u32::MAX as usize) as u32;
    rows.clone()
        .step_by(per_group as usize)
        .map(move |y| y..y.saturating_add(per_group).min(rows.end))
}

/// Traces `walks` wave by wave until every one has ended, and returns the
/// number of rays traced. `next_ray` gives a walk's next ray (`None` once
/// it has ended); each wave's rays, in the walks' order, go to one batched
/// query, and `step` takes each walk on from its hit (in parallel, with
/// per-task scratch from `init`), exactly as a per-ray loop would:
/// `while let Some(ray) = next_ray(w) { step(s, w, scene.intersect(&ray)) }`.
pub(crate) fn trace_walks<W, S>(
    scene: &RenderScene,
    walks: &mut [W],
    next_ray: impl Fn(&W) -> Option<Ray> + Sync,
    init: impl Fn() -> S + Sync + Send,
    step: impl Fn(&mut S, &mut W, Option<Hit>) + Sync + Send,
) -> u64
where
    W: Send + Sync,
{
    let mut rays = Vec::new();
    let mut hits = Vec::new();
    let mut traced = 0u64;
    loop {
        rays.clear();
        rays.extend(walks.iter().filter_map(&next_ray));
        if rays.is_empty() {
            return traced;
        }
        traced += rays.len() as u64;
        hits.clear();
        hits.resize(rays.len(), None);
        scene.accel.intersect_batch(&rays, &mut hits);
        let mut live: Vec<&mut W> = walks.iter_mut().filter(|w| next_ray(w).is_some()).collect();
        live.par_iter_mut()
            .zip(hits.par_drain(..))
            .for_each_init(&init, |scratch, (walk, hit)| step(scratch, walk, hit));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_groups_cover_the_rows_in_whole_rows() {
        let groups = |g| row_groups(3..10, 4, g).collect::<Vec<_>>();
        assert_eq!(groups(9), [3..5, 5..7, 7..9, 9..10]);
        assert_eq!(groups(1), (3..10).map(|y| y..y + 1).collect::<Vec<_>>());
        assert_eq!(groups(1000), vec![Range { start: 3, end: 10 }]);
        assert_eq!(row_groups(0..0, 4, 9).count(), 0);
    }
}
