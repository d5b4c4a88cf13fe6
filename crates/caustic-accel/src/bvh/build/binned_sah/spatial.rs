//! `bvh-spatial`: the binned SAH builder with spatial splits, after Stich,
//! Friedrich and Dietrich, "Spatial Splits in Bounding Volume Hierarchies"
//! (HPG 2009), the split BVH (SBVH) that Embree's high-quality build and
//! OptiX's `Sbvh` builder make.
//!
//! An object split (the binned builder's) partitions a node's references;
//! where large or long triangles make its two children overlap, a *spatial*
//! split cuts space instead: a plane splits the node's box, references on
//! one side go there, and those that straddle it are cut in two
//! ([`super::chop`]), each part bounded by the part of its triangle on that
//! side. Children of a spatial split do not overlap, at the price of
//! references that appear in both. Per large node:
//!
//! 1. the binned object split, as `bvh-binned` finds it;
//! 2. only where its children's overlap exceeds `overlap_alpha` times the
//!    root's area (Stich et al., §4.4: α = 1e-5 tries spatial splits on a
//!    few percent of nodes and loses almost nothing), a spatial split:
//!    `spatial_bins` equal bins over the node's box along its longest axis
//!    (`spatial_axes = 1`; every axis with 3); each reference
//!    is chopped at the bin planes it spans and each bin's box grows by the
//!    part inside it; a reference enters the bin of its lower end and exits
//!    the bin of its upper end, so a plane has `N_L` = the references that
//!    entered left of it and `N_R` = those that exit right of it; the
//!    cheapest plane by the same SAH as the object split;
//! 3. the cheaper of the two, against the leaf cost (the binned rules);
//! 4. applying a spatial split *unsplits* references where that is cheaper
//!    (Stich et al., §4.3): a straddling reference goes whole to the side
//!    whose SAH grows least, if that costs less than the duplicate.
//!
//! Duplication budget: a build makes at most `duplication` times as many
//! references as there are triangles. Each node owns a share of the spare
//! references, handed down to its children in proportion to their sizes
//! (as Embree does), so the tree depends on the input and the config,
//! never on the thread count; a node whose share is spent splits by
//! objects only. The shares also lay out the work arrays: a node of `n`
//! references and `b` spare works in a run of `n + b` slots, its left child
//! in the front `n_L + b_L`, its right child in the rest, and leaves record
//! their slots there; the gaps left by unused spare slots are closed once
//! the tree is built ([`close_gaps`]).
//!
//! The build is the binned builder's own (`super::Build`: its recursion,
//! object splits, leaves and parallelism) with [`SpatialSplits`] as a
//! further candidate at each large node; this file holds only what spatial
//! splits add. Small nodes (at most `sweep_max_prims` references) take the
//! binned builder's exact object sweep without spatial splits, as do nodes
//! that must split by median to keep within `MAX_DEPTH`. A spatial split must
//! leave both children smaller than the node, which bounds the depth as
//! for object splits. Without triangles ([`Bvh2Builder::build`] sees boxes
//! only) nothing can be cut and the build is `bvh-binned`'s, tree for tree;
//! with `duplication = 1` too.
//!
//! The tree's leaves hold a triangle once per part, and a leaf's box holds
//! that part, not the whole triangle: [`Bvh2::validate_split`] checks such
//! trees, and refitting one (moving its triangles) gives leaf boxes of the
//! whole triangles again, correct but no longer the tight parts.

use super::chop::{chop, chop_on};
use super::split::{BinSplit, Planes};
use super::{BinnedSahConfig, Build, Children, NodeInfo, Refs, share};
use crate::BuildInput;
use crate::bvh::Bvh2;
use crate::bvh::build::build_box::BuildBox;
use crate::bvh::build::memory::PeakMemory;
use crate::bvh::build::{Bvh2Builder, debug_validate_split};
use caustic_geom::{Triangle, Vec3A};
use glam::BVec3A;
use rayon::prelude::*;

/// Most spatial bins per axis (the bins live on the stack).
pub const MAX_SPATIAL_BINS: usize = 64;

/// References per rayon task when spatial bins are filled in parallel.
const SPATIAL_CHUNK: usize = 4 * 1024;

/// Settings of [`SpatialSahBuilder`]: the binned builder's (bins, leaves,
/// costs, parallelism) plus the spatial splits'.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SpatialSahConfig {
    /// Object splits, leaf rules and parallel thresholds, as `bvh-binned`.
    pub base: BinnedSahConfig,
    /// Bins per axis of a spatial split, `2..=MAX_SPATIAL_BINS`.
    pub spatial_bins: usize,
    /// A node tries spatial splits when its best object split's children
    /// overlap by more than this fraction of the root's area (Stich et
    /// al.'s α).
    pub overlap_alpha: f32,
    /// At most this many references per triangle over the whole tree, at
    /// least 1 (1: no spatial splits).
    pub duplication: f32,
    /// Axes binned for a spatial split: 1, the node's longest, or 3,
    /// every axis. Binning cuts each reference at every plane it spans, and
    /// was 60-80 % of a build over three axes; the longest axis alone
    /// halves the build with the same tree quality on the standard scenes
    /// (SAH within 1.4 %, conference's 3 % lower; docs/BENCHMARKS.md,
    /// "Spatial splits, session 20").
    pub spatial_axes: usize,
}

impl SpatialSahConfig {
    /// `bvh-binned`'s settings, 16 spatial bins, α = 1e-5, at most 1.3
    /// references per triangle.
    pub const DEFAULT: Self = Self {
        base: BinnedSahConfig::DEFAULT,
        spatial_bins: 16,
        overlap_alpha: 1e-5,
        duplication: 1.3,
        spatial_axes: 1,
    };

    /// Checks the documented bounds (and the base config's).
    pub fn validate(&self) -> Result<(), String> {
        self.base.validate()?;
        if !(2..=MAX_SPATIAL_BINS).contains(&self.spatial_bins) {
            return Err(format!(
                "{} spatial bins: must be in 2..={MAX_SPATIAL_BINS}",
                self.spatial_bins
            ));
        }
        if !(self.overlap_alpha >= 0.0 && self.overlap_alpha.is_finite()) {
            return Err(format!(
                "overlap alpha {} must be finite and at least 0",
                self.overlap_alpha
            ));
        }
        if !matches!(self.spatial_axes, 1 | 3) {
            return Err(format!(
                "{} spatial split axes: must be 1 (the longest) or 3 (all)",
                self.spatial_axes
            ));
        }
        if !(1.0..=16.0).contains(&self.duplication) {
            return Err(format!(
                "duplication {} must be in 1..=16",
                self.duplication
            ));
        }
        Ok(())
    }
}

impl Default for SpatialSahConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// The spatial-split SAH builder (`bvh-spatial`); see the module docs.
#[derive(Clone, Debug, Default)]
pub struct SpatialSahBuilder {
    pub config: SpatialSahConfig,
}

impl SpatialSahBuilder {
    /// The builder with `config`; panics on a configuration
    /// [`SpatialSahConfig::validate`] rejects (use that first for input).
    pub fn new(config: SpatialSahConfig) -> Self {
        if let Err(message) = config.validate() {
            panic!("invalid spatial SAH configuration: {message}");
        }
        Self { config }
    }

    fn run(&self, input: &BuildInput, triangles: Option<&[Triangle]>) -> (Bvh2, usize) {
        if let Some(triangles) = triangles {
            assert_eq!(
                triangles.len(),
                input.len(),
                "the triangles a build input was made from"
            );
        }
        let memory = PeakMemory::new();
        let build = Build {
            config: &self.config.base,
            planes: Planes::Bins,
            rules: self.config.base.rules(),
            memory: &memory,
            spatial: triangles.map(|triangles| SpatialSplits::new(&self.config, triangles)),
        };
        let bvh = build.run(input);
        debug_validate_split(self.name(), &bvh, input);
        (bvh, memory.peak())
    }
}

impl Bvh2Builder for SpatialSahBuilder {
    fn name(&self) -> &'static str {
        "bvh-spatial"
    }

    /// Without the triangles nothing can be cut: `bvh-binned`'s tree.
    fn build(&self, input: &BuildInput) -> Bvh2 {
        self.run(input, None).0
    }

    fn build_with_peak(&self, input: &BuildInput) -> (Bvh2, usize) {
        self.run(input, None)
    }

    fn build_triangles(&self, input: &BuildInput, triangles: &[Triangle]) -> (Bvh2, usize) {
        self.run(input, Some(triangles))
    }
}

/// The spatial-split stage of a build (`bvh-spatial`): the triangles
/// that references are cut from, and the settings.
pub(super) struct SpatialSplits<'a> {
    triangles: &'a [Triangle],
    bins: usize,
    all_axes: bool,
    alpha: f32,
    duplication: f32,
    /// `alpha` times the root's half area, set by [`SpatialSplits::start`].
    alpha_area: f32,
}

impl<'a> SpatialSplits<'a> {
    fn new(config: &SpatialSahConfig, triangles: &'a [Triangle]) -> Self {
        Self {
            triangles,
            bins: config.spatial_bins,
            all_axes: config.spatial_axes == 3,
            alpha: config.overlap_alpha,
            duplication: config.duplication,
            alpha_area: 0.0,
        }
    }

    /// Starts a build of `placed` references under a root of box `root`;
    /// returns the spare slots the whole tree may fill with cut parts.
    pub(super) fn start(&mut self, placed: usize, root: &BuildBox) -> usize {
        self.alpha_area = self.alpha * root.half_area();
        ((f64::from(self.duplication) - 1.0) * placed as f64) as usize
    }

    /// The cheapest spatial split of the node, where one is allowed and
    /// beats the object split `object`: spare references
    /// left for its duplicates, the object split's children overlapping by
    /// more than α, and both children smaller than the node.
    pub(super) fn candidate(
        &self,
        run: &Refs,
        n: usize,
        info: &NodeInfo,
        object: Option<&BinSplit>,
        parallel: bool,
    ) -> Option<SpatialPlan> {
        let spare = run.len() - n;
        if spare == 0 {
            return None;
        }
        if let Some(plan) = object {
            let overlap = plan.left_bounds.intersection(plan.right_bounds);
            if overlap.half_area() <= self.alpha_area {
                return None;
            }
        }
        let grid = SpatialGrid::new(&info.bounds, self.bins, self.all_axes);
        let refs = (&run.boxes[..n], &run.ids[..n]);
        let plan = best_spatial_plane(refs, self.triangles, &grid, parallel)?;
        let beats_object = object.is_none_or(|o| plan.weighted_area < o.weighted_area);
        let fits = plan.left_count + plan.right_count - n <= spare;
        let shrinks = plan.left_count < n && plan.right_count < n;
        (beats_object && fits && shrinks).then_some(plan)
    }

    /// Applies a spatial split with reference unsplitting: left references
    /// are compacted in place at the front of the run (never overtaking
    /// the one being read), right ones gathered aside and copied to where
    /// the right child's run starts.
    pub(super) fn apply(&self, run: &mut Refs, n: usize, plan: &SpatialPlan) -> Children {
        let triangles = self.triangles;
        let (axis, grid) = (plan.axis, &plan.grid);
        let plane = grid.plane(axis, plan.bin);
        let mut sides = Unsplitting {
            left: plan.left_bounds,
            right: plan.right_bounds,
            left_count: plan.left_count as f32,
            right_count: plan.right_count as f32,
        };
        let (mut left, mut right) = (NodeInfo::EMPTY, NodeInfo::EMPTY);
        let mut right_refs: Vec<(BuildBox, u32)> = Vec::with_capacity(plan.right_count);
        let mut left_count = 0;
        for i in 0..n {
            let (b, id) = (run.boxes[i], run.ids[i]);
            let (first, last) = (grid.bin(axis, b.min[axis]), grid.bin(axis, b.max[axis]));
            let (goes_left, goes_right) = if last < plan.bin {
                (Some(b), None)
            } else if first >= plan.bin {
                (None, Some(b))
            } else {
                match sides.unsplit(&b) {
                    Side::Left => (Some(b), None),
                    Side::Right => (None, Some(b)),
                    Side::Both => {
                        let (below, above) = chop(&triangles[id as usize], &b, axis, plane);
                        match (below.is_empty(), above.is_empty()) {
                            // Cannot happen in exact arithmetic; keep it whole.
                            (true, true) => (Some(b), None),
                            (false, true) => (Some(below), None),
                            (true, false) => (None, Some(above)),
                            (false, false) => (Some(below), Some(above)),
                        }
                    }
                }
            };
            if let Some(part) = goes_left {
                run.boxes[left_count] = part;
                run.ids[left_count] = id;
                left = left.add(&part);
                left_count += 1;
            }
            if let Some(part) = goes_right {
                right_refs.push((part, id));
                right = right.add(&part);
            }
        }
        let right_count = right_refs.len();
        let spare = run.len() - left_count - right_count;
        let left_spare = share(spare, left_count, right_count);
        let right_start = left_count + left_spare;
        for (k, (part, id)) in right_refs.into_iter().enumerate() {
            run.boxes[right_start + k] = part;
            run.ids[right_start + k] = id;
        }
        Children {
            left_count,
            left,
            right_start,
            right_count,
            right,
        }
    }
}

/// Where a straddling reference goes.
enum Side {
    Left,
    Right,
    Both,
}

/// The running SAH terms of a spatial split while its references are
/// placed (Stich et al., §4.3).
struct Unsplitting {
    left: BuildBox,
    right: BuildBox,
    left_count: f32,
    right_count: f32,
}

impl Unsplitting {
    /// Whole to one side where that costs less than cutting, else both.
    fn unsplit(&mut self, b: &BuildBox) -> Side {
        let (a_left, a_right) = (self.left.half_area(), self.right.half_area());
        let cut = a_left * self.left_count + a_right * self.right_count;
        let left_grown = self.left.union(*b);
        let right_grown = self.right.union(*b);
        let whole_left =
            left_grown.half_area() * self.left_count + a_right * (self.right_count - 1.0);
        let whole_right =
            a_left * (self.left_count - 1.0) + right_grown.half_area() * self.right_count;
        if whole_left < cut && whole_left <= whole_right {
            self.left = left_grown;
            self.right_count -= 1.0;
            Side::Left
        } else if whole_right < cut {
            self.right = right_grown;
            self.left_count -= 1.0;
            Side::Right
        } else {
            Side::Both
        }
    }
}

/// Equal bins over a node's box on each axis.
#[derive(Clone, Copy, Debug)]
struct SpatialGrid {
    origin: Vec3A,
    /// Bin width per axis.
    width: Vec3A,
    /// Bins per unit length; 0 on axes that cannot be split (no extent).
    scale: Vec3A,
    bins: usize,
}

impl SpatialGrid {
    /// Bins over `bounds` on every axis with `all_axes`, else on the
    /// longest one only (the first of equally long ones).
    fn new(bounds: &BuildBox, bins: usize, all_axes: bool) -> Self {
        let extent = bounds.max - bounds.min;
        let scale = Vec3A::splat(bins as f32) / extent;
        let mut usable = extent.cmpgt(Vec3A::ZERO) & scale.is_finite_mask();
        if !all_axes {
            let longest = extent.max_position();
            usable &= BVec3A::from(std::array::from_fn(|axis| axis == longest));
        }
        Self {
            origin: bounds.min,
            width: extent / bins as f32,
            scale: Vec3A::select(usable, scale, Vec3A::ZERO),
            bins,
        }
    }

    fn splits(&self, axis: usize) -> bool {
        self.scale[axis] > 0.0
    }

    /// The bin of coordinate `x` on `axis`, clamped to the grid.
    #[inline(always)]
    fn bin(&self, axis: usize, x: f32) -> usize {
        let f = (x - self.origin[axis]) * self.scale[axis];
        (f.max(0.0) as usize).min(self.bins - 1)
    }

    /// The plane between bins `k - 1` and `k`.
    fn plane(&self, axis: usize, k: usize) -> f32 {
        self.origin[axis] + self.width[axis] * k as f32
    }
}

/// The cheapest spatial plane of a node.
#[derive(Clone, Copy, Debug)]
pub(super) struct SpatialPlan {
    grid: SpatialGrid,
    axis: usize,
    /// First bin right of the plane.
    bin: usize,
    /// `A_L N_L + A_R N_R` with half areas, as the object split's.
    pub weighted_area: f32,
    left_count: usize,
    right_count: usize,
    left_bounds: BuildBox,
    right_bounds: BuildBox,
}

/// Per axis and bin: the box of the reference parts inside it, and how
/// many references start (enter) and end (exit) in it.
#[derive(Clone, Copy)]
struct SpatialBins {
    bounds: [[BuildBox; MAX_SPATIAL_BINS]; 3],
    enter: [[u32; MAX_SPATIAL_BINS]; 3],
    exit: [[u32; MAX_SPATIAL_BINS]; 3],
}

impl SpatialBins {
    const EMPTY: Self = Self {
        bounds: [[BuildBox::EMPTY; MAX_SPATIAL_BINS]; 3],
        enter: [[0; MAX_SPATIAL_BINS]; 3],
        exit: [[0; MAX_SPATIAL_BINS]; 3],
    };

    /// Chops each reference (`boxes`, triangles `ids`) at every plane it
    /// spans, on every axis the grid bins.
    fn add(
        &mut self,
        (boxes, ids): (&[BuildBox], &[u32]),
        triangles: &[Triangle],
        grid: &SpatialGrid,
    ) {
        for axis in (0..3).filter(|&axis| grid.splits(axis)) {
            match axis {
                0 => self.add_on::<0>(boxes, ids, triangles, grid),
                1 => self.add_on::<1>(boxes, ids, triangles, grid),
                _ => self.add_on::<2>(boxes, ids, triangles, grid),
            }
        }
    }

    /// [`SpatialBins::add`] on axis `AXIS` (a constant: see [`chop_on`]).
    fn add_on<const AXIS: usize>(
        &mut self,
        boxes: &[BuildBox],
        ids: &[u32],
        triangles: &[Triangle],
        grid: &SpatialGrid,
    ) {
        for (b, &id) in boxes.iter().zip(ids) {
            let triangle = &triangles[id as usize];
            let (first, last) = (grid.bin(AXIS, b.min[AXIS]), grid.bin(AXIS, b.max[AXIS]));
            self.enter[AXIS][first] += 1;
            self.exit[AXIS][last] += 1;
            let mut rest = *b;
            for bin in first..last {
                let (inside, beyond) = chop_on::<AXIS>(triangle, &rest, grid.plane(AXIS, bin + 1));
                self.bounds[AXIS][bin] = self.bounds[AXIS][bin].union(inside);
                rest = beyond;
            }
            self.bounds[AXIS][last] = self.bounds[AXIS][last].union(rest);
        }
    }

    fn merge(mut self, other: &Self, used: usize) -> Self {
        for axis in 0..3 {
            for bin in 0..used {
                self.bounds[axis][bin] = self.bounds[axis][bin].union(other.bounds[axis][bin]);
                self.enter[axis][bin] += other.enter[axis][bin];
                self.exit[axis][bin] += other.exit[axis][bin];
            }
        }
        self
    }
}

/// Bins the references (in parallel when asked) and sweeps every axis's
/// planes for the cheapest with references on both sides.
fn best_spatial_plane(
    (boxes, ids): (&[BuildBox], &[u32]),
    triangles: &[Triangle],
    grid: &SpatialGrid,
    parallel: bool,
) -> Option<SpatialPlan> {
    let fill = |bins: &mut SpatialBins, boxes: &[BuildBox], ids: &[u32]| {
        bins.add((boxes, ids), triangles, grid);
    };
    let bins = if parallel {
        boxes
            .par_chunks(SPATIAL_CHUNK)
            .zip(ids.par_chunks(SPATIAL_CHUNK))
            .map(|(boxes, ids)| {
                let mut bins = Box::new(SpatialBins::EMPTY);
                fill(&mut bins, boxes, ids);
                bins
            })
            .reduce(
                || Box::new(SpatialBins::EMPTY),
                |a, b| Box::new(a.merge(&b, grid.bins)),
            )
    } else {
        let mut bins = Box::new(SpatialBins::EMPTY);
        fill(&mut bins, boxes, ids);
        bins
    };
    let mut best: Option<SpatialPlan> = None;
    for axis in (0..3).filter(|&axis| grid.splits(axis)) {
        let Some(plan) = sweep_axis(&bins, grid, axis) else {
            continue;
        };
        if best.is_none_or(|b| plan.weighted_area < b.weighted_area) {
            best = Some(plan);
        }
    }
    best
}

/// The cheapest plane of one axis: suffix boxes and exit counts from the
/// right, then prefix boxes and enter counts from the left.
fn sweep_axis(bins: &SpatialBins, grid: &SpatialGrid, axis: usize) -> Option<SpatialPlan> {
    let used = grid.bins;
    let mut suffix = [(BuildBox::EMPTY, 0usize); MAX_SPATIAL_BINS];
    let mut acc = (BuildBox::EMPTY, 0usize);
    for bin in (1..used).rev() {
        acc = (
            acc.0.union(bins.bounds[axis][bin]),
            acc.1 + bins.exit[axis][bin] as usize,
        );
        suffix[bin] = acc;
    }
    let mut best: Option<SpatialPlan> = None;
    let mut prefix = (BuildBox::EMPTY, 0usize);
    for (bin, &(right_bounds, right_count)) in suffix.iter().enumerate().take(used).skip(1) {
        prefix = (
            prefix.0.union(bins.bounds[axis][bin - 1]),
            prefix.1 + bins.enter[axis][bin - 1] as usize,
        );
        if prefix.1 == 0 || right_count == 0 {
            continue;
        }
        let cost =
            prefix.0.half_area() * prefix.1 as f32 + right_bounds.half_area() * right_count as f32;
        if cost.is_finite() && best.is_none_or(|b| cost < b.weighted_area) {
            best = Some(SpatialPlan {
                grid: *grid,
                axis,
                bin,
                weighted_area: cost,
                left_count: prefix.1,
                right_count,
                left_bounds: prefix.0,
                right_bounds,
            });
        }
    }
    best
}

/// Renumbers the leaves' slots in depth-first order, dropping the spare
/// slots no reference used, so `prim_indices` holds the references alone
/// and every subtree's references form one run (as other builders' trees).
pub(super) fn close_gaps(bvh: &mut Bvh2) {
    let mut leaves = Vec::new();
    bvh.walk(|index, _| {
        if bvh.nodes[index].is_leaf() {
            leaves.push(index);
        }
    });
    let mut slots = Vec::with_capacity(bvh.prim_indices.len());
    for index in leaves {
        let node = &mut bvh.nodes[index];
        let range = node.prim_range();
        node.first = slots.len() as u32;
        slots.extend_from_slice(&bvh.prim_indices[range]);
    }
    bvh.prim_indices = slots;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bvh::build::BinnedSahBuilder;
    use crate::bvh::sah_cost;
    use caustic_geom::{Pcg32, Vec3};

    /// Long thin triangles crossing a field of small ones: object splits
    /// cannot separate them, spatial splits can.
    fn slivers_and_grains(seed: u64) -> Vec<Triangle> {
        let mut rng = Pcg32::new(seed, 7);
        let mut unit = || rng.next_f32();
        let mut tris = Vec::new();
        for _ in 0..2000 {
            let c = Vec3::new(unit(), unit(), unit()) * 10.0;
            let d = Vec3::new(unit(), unit(), unit()) * 0.05;
            tris.push(Triangle::new(
                c,
                c + Vec3::new(d.x, 0.0, 0.0),
                c + Vec3::new(0.0, d.y, d.z),
            ));
        }
        for _ in 0..200 {
            let a = Vec3::new(0.0, unit() * 10.0, unit() * 10.0);
            let b = Vec3::new(10.0, unit() * 10.0, unit() * 10.0);
            tris.push(Triangle::new(a, b, a + Vec3::new(0.0, 0.02, 0.0)));
        }
        tris
    }

    fn spatial(config: SpatialSahConfig, tris: &[Triangle]) -> Bvh2 {
        let input = BuildInput::from_triangles(tris);
        let bvh = SpatialSahBuilder::new(config)
            .build_triangles(&input, tris)
            .0;
        bvh.validate_split(&input.bounds).unwrap();
        bvh
    }

    #[test]
    fn spatial_splits_duplicate_within_budget_and_lower_the_sah() {
        let tris = slivers_and_grains(1);
        let input = BuildInput::from_triangles(&tris);
        let binned = BinnedSahBuilder::default().build(&input);
        for spatial_axes in [1, 3] {
            let config = SpatialSahConfig {
                spatial_axes,
                ..SpatialSahConfig::DEFAULT
            };
            let bvh = spatial(config, &tris);
            let refs = bvh.prim_indices.len();
            assert!(
                refs > tris.len(),
                "no reference was cut ({spatial_axes} axes)"
            );
            assert!(refs as f32 <= 1.3 * tris.len() as f32, "{refs} references");
            let (before, after) = (sah_cost(&binned), sah_cost(&bvh));
            assert!(
                after < 0.9 * before,
                "SAH {before} -> {after} ({spatial_axes} axes)"
            );
        }
    }

    #[test]
    fn without_budget_or_triangles_it_is_the_binned_tree() {
        let tris = slivers_and_grains(2);
        let input = BuildInput::from_triangles(&tris);
        let binned = BinnedSahBuilder::default().build(&input);
        let no_budget = SpatialSahConfig {
            duplication: 1.0,
            ..SpatialSahConfig::DEFAULT
        };
        assert_eq!(spatial(no_budget, &tris), binned);
        assert_eq!(SpatialSahBuilder::default().build(&input), binned);
    }

    #[test]
    fn the_tree_does_not_depend_on_the_thread_count() {
        let tris = slivers_and_grains(3);
        let config = SpatialSahConfig {
            base: BinnedSahConfig {
                parallel_min_prims: 64,
                parallel_binning_min_prims: 512,
                ..BinnedSahConfig::DEFAULT
            },
            ..SpatialSahConfig::DEFAULT
        };
        let parallel = spatial(config, &tris);
        let sequential = spatial(
            SpatialSahConfig {
                base: config.base.sequential(),
                ..config
            },
            &tris,
        );
        assert_eq!(parallel, sequential);
    }

    #[test]
    fn degenerate_and_unplaceable_triangles_are_kept() {
        let mut tris = slivers_and_grains(4);
        let p = Vec3::splat(5.0);
        tris.extend([
            Triangle::new(p, p, p),
            Triangle::new(Vec3::splat(f32::NAN), Vec3::X, Vec3::Y),
            Triangle::new(Vec3::ZERO, Vec3::splat(10.0), Vec3::splat(5.0)),
        ]);
        let bvh = spatial(SpatialSahConfig::DEFAULT, &tris);
        let mut seen = vec![false; tris.len()];
        for &id in &bvh.prim_indices {
            seen[id as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
    }
}
