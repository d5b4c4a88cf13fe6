//! Where a DACRT task splits its box: the spatial median of the longest
//! axis, or the ray distribution heuristic (RDH) of Bittner and Havran
//! (SCCG 2009) as Vinkler et al. 2013 §5.2 evaluate it: 32 candidate
//! planes spread evenly over the three axes, each costed by the ray–
//! triangle pairs its seven children would hold, counted on about √n
//! sampled rays and √n sampled triangles.

use super::task::{Side, TaskView};
use caustic_geom::Aabb;
use std::fmt;
use std::str::FromStr;

/// How a task picks its split plane.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DacrtSplit {
    /// The middle of the box's longest axis.
    #[default]
    Median,
    /// The ray distribution heuristic over 32 candidates.
    Rdh,
}

impl FromStr for DacrtSplit {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "median" => Ok(Self::Median),
            "rdh" => Ok(Self::Rdh),
            other => Err(format!("`{other}` is not a split: median or rdh")),
        }
    }
}

impl fmt::Display for DacrtSplit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Median => "median",
            Self::Rdh => "rdh",
        })
    }
}

/// A split plane: axis and position.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Plane {
    pub axis: usize,
    pub pos: f32,
}

/// Candidates per axis (x, y, z): 32 in all, as in Vinkler et al. §5.2.
const CANDIDATES: [usize; 3] = [11, 11, 10];

/// The plane `split` picks for the task; `None` when the box is flat on
/// every axis (nothing to split).
pub(super) fn choose(split: DacrtSplit, task: &TaskView<'_>, bounds: &Aabb) -> Option<Plane> {
    match split {
        DacrtSplit::Median => median(bounds),
        DacrtSplit::Rdh => rdh(task, bounds).or_else(|| median(bounds)),
    }
}

fn median(bounds: &Aabb) -> Option<Plane> {
    median_on(bounds, bounds.largest_axis())
}

/// The middle of `bounds` on `axis`; `None` when the box is flat there.
pub(super) fn median_on(bounds: &Aabb, axis: usize) -> Option<Plane> {
    let extent = bounds.extent()[axis];
    (extent > 0.0 && extent.is_finite()).then(|| Plane {
        axis,
        pos: bounds.min[axis] + 0.5 * extent,
    })
}

/// The candidate with the fewest ray–triangle pairs in the children,
/// counted on samples; ties to the first candidate.
fn rdh(task: &TaskView<'_>, bounds: &Aabb) -> Option<Plane> {
    let tri_step = sample_step(task.tris.len());
    let ray_step = sample_step(task.rays.len());
    let mut best: Option<(u64, Plane)> = None;
    for (axis, &count) in CANDIDATES.iter().enumerate() {
        let extent = bounds.extent()[axis];
        if !(extent > 0.0 && extent.is_finite()) {
            continue;
        }
        for i in 0..count {
            let pos = bounds.min[axis] + extent * (i + 1) as f32 / (count + 1) as f32;
            let plane = Plane { axis, pos };
            let mut tri_sides = [0u64; 3];
            for &t in task.tris.iter().step_by(tri_step) {
                tri_sides[task.tri_side(t, plane) as usize] += 1;
            }
            let mut ray_sides = [0u64; 3];
            for r in task.rays.iter().step_by(ray_step) {
                if let Some(side) = task.ray_side(r.id, bounds, plane) {
                    ray_sides[side as usize] += 1;
                }
            }
            let cost = pairs(ray_sides, tri_sides);
            if best.is_none_or(|(c, _)| cost < c) {
                best = Some((cost, plane));
            }
        }
    }
    best.map(|(_, plane)| plane)
}

/// The pairs of the seven children (Vinkler et al. Figure 3): every class
/// pair but left with right.
fn pairs(rays: [u64; 3], tris: [u64; 3]) -> u64 {
    let (l, s, r) = (
        Side::Left as usize,
        Side::Both as usize,
        Side::Right as usize,
    );
    rays[l] * (tris[l] + tris[s])
        + rays[s] * (tris[l] + tris[s] + tris[r])
        + rays[r] * (tris[s] + tris[r])
}

/// The stride that takes about √n of n items.
fn sample_step(n: usize) -> usize {
    let sqrt = (n as f64).sqrt().ceil() as usize;
    (n / sqrt.max(1)).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use caustic_geom::Vec3;

    #[test]
    fn median_splits_the_longest_axis_and_refuses_a_point() {
        let b = Aabb::new(Vec3::ZERO, Vec3::new(1.0, 4.0, 2.0));
        assert_eq!(median(&b), Some(Plane { axis: 1, pos: 2.0 }));
        assert_eq!(median(&Aabb::from_point(Vec3::ONE)), None);
    }

    #[test]
    fn the_seven_children_hold_every_pair_but_left_with_right() {
        // 2 left, 3 straddling, 5 right rays; 7, 11, 13 triangles.
        assert_eq!(pairs([2, 3, 5], [7, 11, 13]), 2 * 18 + 3 * 31 + 5 * 24);
        assert_eq!(sample_step(10_000), 100);
        assert_eq!(sample_step(3), 1);
        assert_eq!("rdh".parse::<DacrtSplit>(), Ok(DacrtSplit::Rdh));
        assert!("sah".parse::<DacrtSplit>().is_err());
    }
}
