//! Single-ray traversal of a [`WideBvh`]: one SIMD slab test of all `N`
//! children of a node, the nearest hit child visited next and the others
//! pushed far-to-near with their cull bounds; generic over the SIMD backend
//! ([`Lanes`]), over closest-hit and any-hit (`ANY_HIT`), and over the leaf
//! test (a closure over a leaf's triangle groups).
//!
//! The box test is the exact culling rule of the binary traversal
//! ([`crate::bvh::traverse`], whose module docs give the proof), evaluated
//! lane by lane with the same operations and the same NaN behaviour:
//! a child is kept when the ray crosses its box (all three slabs, widened by
//! [`SLACK`] times the depth slab's largest distance) and when its slab along
//! the depth axis overlaps `[t_min, closest hit]`, widened the same way. The
//! watertight test's `t` is a convex combination of the vertices' distances
//! along that axis, so any hit the reference would return lies inside the
//! widened depth slab of every box holding its triangle: the wide tree
//! returns exactly what brute force returns. Children are ordered by their
//! exact entry distance (no margin), which only affects speed.
//!
//! The crossing rule (trees whose leaves hold whole triangles,
//! [`super::WideBvh::whole_leaves`]; `RayBoxes::crossing`): a child is kept
//! when `[near - m, far + m]`, where the ray crosses its widened box, meets
//! `[t_min, cutoff]`, with `m = CROSSING_SLACK` times its widened depth slab
//! (`f2 - n2`), as Embree culls, rather than when the ray's line crosses the
//! box anywhere and the depth slab alone meets the range. Exact because the
//! triangle test keeps only hits whose `t` lies where the ray crosses the
//! triangle's own box widened by `CROSSING_SLACK` of its depth slab plus
//! `CROSSING_ROUNDING` (`caustic_geom::RayTriangleTest::within_crossing`):
//! that interval lies inside this one for every box holding the whole
//! triangle (the box's planes are farther out, its depth slab wider, and the
//! folded margins hold `SLACK` times the scene's depth distances, at least
//! the triangle's `CROSSING_ROUNDING` term, plus both computations'
//! rounding). A box holding a part of a triangle (spatial splits) gives no
//! such guarantee, so those trees keep the depth-range rule. On sponza's AO
//! rays the rule cuts the leaves a ray tests from 2.57 to 1.42 (Embree:
//! 0.90) and AO is about a quarter faster (docs/BENCHMARKS.md, "The
//! crossing rule" and "CPU rays, session 22").
//!
//! The stack holds at most `N - 1` entries per level of the current path,
//! and depth is bounded by [`MAX_DEPTH`] (checked by `WideBvh::validate`),
//! so a fixed array of [`stack_capacity`] entries (plus [`MORE_STARTS`]
//! for the extra subtrees of [`traverse_subtrees`]) cannot overflow; on an
//! invalid, deeper tree the bounds check panics instead.

use super::leaf::set_bits;
use super::node::{TriangleGroup, WideNode};
use super::simd::Lanes;
use super::{WideBvh, root_entry};
use crate::bvh::MAX_DEPTH;
use crate::bvh::traverse::SLACK;
use caustic_geom::{Aabb, CROSSING_SLACK, Vec3};
use std::mem::MaybeUninit;

/// Entries the traversal stack needs for an `N`-wide tree of depth at most
/// [`MAX_DEPTH`].
pub const fn stack_capacity(n: usize) -> usize {
    (n - 1) * (MAX_DEPTH + 1) + 1
}

/// Largest stack of any width here (`N = 8`).
const STACK: usize = stack_capacity(8);

/// Per-ray constants of the `N`-lane slab test.
#[derive(Clone, Copy, Debug)]
pub struct RayBoxes<const N: usize, V: Lanes<N>> {
    /// The backend's token, for the vectors made from nodes.
    isa: V::Isa,
    /// Where the node rows of the ray's entry and exit planes lie.
    rows: RowOffsets<N>,
    /// Per axis (same order), the reciprocal direction (a zero component
    /// gives a huge finite value of its sign, see [`finite_reciprocal`]).
    inv_dir: [V; 3],
    /// Per axis, the constant that makes a plane's distance, already
    /// widened by the axis's margin: `p * inv + near_shift` for an entry
    /// plane, `p * inv + far_shift` for an exit plane.
    near_shift: [V; 3],
    far_shift: [V; 3],
    /// The crossing rule's factors when the boxes are culled by it
    /// ([`RayBoxes::crossing`]); `None`: the depth-range rule.
    crossing: Option<Crossing<V>>,
}

impl<const N: usize, V: Lanes<N>> RayBoxes<N, V> {
    /// `dir` must be finite and non-zero; `bounds` must hold every box the
    /// traversal will test (the tree's [`WideBvh::bounds`]).
    ///
    /// The margins are `SlabFrame::shifts`' formula (see [`RayBoxes::test`] for
    /// why they make this test keep every box the exact scalar rule keeps),
    /// computed over `bounds`, plus a floor beyond every other axis's
    /// distances on an axis the ray runs parallel to.
    #[inline(always)]
    pub fn new(isa: V::Isa, origin: Vec3, dir: Vec3, bounds: &Aabb) -> Self {
        let parts = BoxParts::new(origin, dir, bounds);
        Self::from_parts(
            isa,
            RowOffsets::new(parts.rows),
            parts.inv,
            parts.near_shift,
            parts.far_shift,
        )
    }

    /// The constants from parts computed elsewhere: a packet lane's
    /// (`LaneRays::box_constants`), which [`SlabFrame::shifts`] computes with
    /// the same operations, axis order and bounds as [`RayBoxes::new`].
    #[inline(always)]
    pub(super) fn from_parts(
        isa: V::Isa,
        rows: RowOffsets<N>,
        inv_dir: [f32; 3],
        near_shift: [f32; 3],
        far_shift: [f32; 3],
    ) -> Self {
        Self {
            isa,
            rows,
            inv_dir: splat3(isa, inv_dir),
            near_shift: splat3(isa, near_shift),
            far_shift: splat3(isa, far_shift),
            crossing: None,
        }
    }

    /// These constants culling by the crossing rule when `whole_leaves`
    /// (the tree's [`super::WideBvh::whole_leaves`]), see `slab_rule`.
    #[inline(always)]
    pub fn crossing(mut self, whole_leaves: bool) -> Self {
        self.crossing = Crossing::when(self.isa, whole_leaves);
        self
    }

    /// Tests the `N` child boxes of `node` over `[t_min, cutoff]`: the
    /// children that may hold a hit (bit per slot), each child's widened
    /// entry distance (the visiting order) and its cull bound (no hit
    /// inside can have a smaller `t`).
    ///
    /// Every box the binary traversal's exact rule keeps
    /// ([`crate::bvh::traverse`], `RayBoxTest::entry`: slabs crossed and a
    /// depth slab overlapping `[t_min, cutoff]`, both widened by `SLACK`
    /// times the depth slab's largest distance) is kept here, with a cull
    /// bound no larger, so the hits are those of brute force. Each plane's
    /// distance comes out at most its exact-rule value minus that rule's
    /// margin (entry planes; at least plus it for exit planes): the
    /// margin `m_k` of [`RayBoxes::new`] holds the exact rule's margin
    /// (at most `SLACK * D_depth`), both computations' rounding (about
    /// `5u |t| + 3u |o_k inv_k|` with `u = 2^-24`, `|t| <= D_k`, whether the
    /// multiply and add are fused or not) and the rounding of `m_k` itself.
    /// So the margin work the exact rule does per node (absolute values, a
    /// maximum, a scale, four additions) is done once per ray. An axis the
    /// ray runs parallel to gets a huge finite reciprocal and a margin
    /// beyond every other axis's distances: a box whose slab on that axis
    /// holds the origin is not limited by it (the exact rule's NaN), and one
    /// the ray passes outside by more than about `2^-21` of the scene's
    /// extent there is still culled.
    #[inline(always)]
    pub fn test(&self, node: &WideNode<N>, t_min: V, cutoff: V) -> (u32, V, V) {
        let rows = self.rows.load::<V>(self.isa, node);
        let shifts = [&self.near_shift, &self.far_shift];
        let (kept, near, lo) =
            slab_rule(&rows, &self.inv_dir, shifts, t_min, cutoff, self.crossing);
        (V::bits(kept), near, lo)
    }
}

/// The crossing rule's margin factors in every lane: `-CROSSING_SLACK`
/// and `CROSSING_SLACK` (see `slabs_rule`).
#[derive(Clone, Copy, Debug)]
pub(super) struct Crossing<V> {
    pub(super) down: V,
    pub(super) up: V,
}

impl<V: Copy> Crossing<V> {
    /// The factors when the boxes are culled by the crossing rule
    /// (`whole_leaves`, the tree's [`super::WideBvh::whole_leaves`]), else
    /// `None`: the depth-range rule. (No closure: it would not be compiled
    /// with the caller's instruction set, see `RayTriangles::test`.)
    #[inline(always)]
    pub(super) fn when<const N: usize>(isa: V::Isa, whole_leaves: bool) -> Option<Self>
    where
        V: Lanes<N>,
    {
        if whole_leaves {
            Some(Self {
                down: V::splat(isa, -CROSSING_SLACK),
                up: V::splat(isa, CROSSING_SLACK),
            })
        } else {
            None
        }
    }
}

/// The folded box rule of [`RayBoxes::test`] on a node's entry and exit
/// rows (`rows`, as [`RowOffsets::load`] gives them) for one ray's
/// constants, whether kept in a [`RayBoxes`] or broadcast per node by the
/// streams' per-ray step: each plane's widened distance `p * inv + shift`
/// (one rounding where the backend fuses it, two otherwise, and no
/// subtraction of the origin per node), then the slabs' overlap with
/// `[t_min, cutoff]`: by the crossing rule when `crossing` holds
/// `CROSSING_SLACK` (see the module docs), else by the depth-range rule.
/// The children kept, their entry distances and their cull bounds.
#[inline(always)]
pub(super) fn slab_rule<const N: usize, V: Lanes<N>>(
    [near_rows, far_rows]: &[[V; 3]; 2],
    inv: &[V; 3],
    [near_shift, far_shift]: [&[V; 3]; 2],
    t_min: V,
    cutoff: V,
    crossing: Option<Crossing<V>>,
) -> (V::Mask, V, V) {
    let n0 = near_rows[0].mul_add(inv[0], near_shift[0]);
    let n1 = near_rows[1].mul_add(inv[1], near_shift[1]);
    let n2 = near_rows[2].mul_add(inv[2], near_shift[2]);
    let f0 = far_rows[0].mul_add(inv[0], far_shift[0]);
    let f1 = far_rows[1].mul_add(inv[1], far_shift[1]);
    let f2 = far_rows[2].mul_add(inv[2], far_shift[2]);
    // `max_or(a, b)` skips a NaN `a` (an empty slot's infinite planes
    // times a huge reciprocal stay infinite, so NaN comes only from NaN
    // bounds); the depth slab goes last.
    slabs_rule([n0, n1, n2], [f0, f1, f2], t_min, cutoff, crossing)
}

/// The rule of [`slab_rule`] on the planes' widened distances, entry
/// `[n0, n1, n2]` and exit `[f0, f1, f2]` (depth axis last), shared with the
/// packets' lane test, which computes the distances from a node's slot for
/// rays in lanes. The children kept, their entry distances and their cull
/// bounds.
#[inline(always)]
pub(super) fn slabs_rule<const N: usize, V: Lanes<N>>(
    [n0, n1, n2]: [V; 3],
    [f0, f1, f2]: [V; 3],
    t_min: V,
    cutoff: V,
    crossing: Option<Crossing<V>>,
) -> (V::Mask, V, V) {
    let near = n0.max_or(n1.max_or(n2));
    let far = f0.min_or(f1.min_or(f2));
    if let Some(Crossing { down, up }) = crossing {
        // The crossing rule: `[near, far]` widened by `CROSSING_SLACK` of
        // the depth slab's width must meet `[t_min, cutoff]`. A NaN bound
        // (from NaN boxes) falls back to `t_min` or `cutoff`: kept. The
        // margin's product is exact (the slack is a power of two), so
        // `near - width * slack` fused is the subtraction of the rounded
        // margin, bit for bit (a subnormal product aside, where the fused
        // form applies the exact margin), and every traversal here computes
        // it this one way. The multiply-adds run on the FMA pipes instead of
        // the adder's, which the slabs' minima and maxima already keep busy
        // (on this AMD core, the node step's bound).
        let width = f2 - n2;
        let lo = width.mul_add(down, near).max_or(t_min);
        let hi = width.mul_add(up, far).min_or(cutoff);
        return (lo.le(hi), near, lo);
    }
    let lo = t_min.max_or(n2);
    let hi = cutoff.min_or(f2);
    (near.le(far) & lo.le(hi), near, lo)
}

/// One ray's constants of the slab test as scalars, before
/// [`RayBoxes::new`] broadcasts them: the rows of its entry and exit
/// planes, its reciprocal direction and its planes' shifts, per axis in the
/// test's order `[other, other, depth]`.
#[derive(Clone, Copy, Debug)]
pub(super) struct BoxParts {
    pub(super) rows: ([usize; 3], [usize; 3]),
    pub(super) inv: [f32; 3],
    pub(super) near_shift: [f32; 3],
    pub(super) far_shift: [f32; 3],
}

impl BoxParts {
    /// [`RayBoxes::new`]'s constants (same conditions).
    #[inline(always)]
    pub(super) fn new(origin: Vec3, dir: Vec3, bounds: &Aabb) -> Self {
        // One copy per depth axis, so that the axes are constants and the
        // permutation costs nothing.
        match depth_axis(dir) {
            0 => Self::in_frame::<1, 2, 0>(origin, dir, bounds),
            1 => Self::in_frame::<2, 0, 1>(origin, dir, bounds),
            _ => Self::in_frame::<0, 1, 2>(origin, dir, bounds),
        }
    }

    /// [`RayBoxes::new`] in the slab test's axis order `[A, B, D]` (`D` the
    /// depth axis).
    #[inline(always)]
    fn in_frame<const A: usize, const B: usize, const D: usize>(
        origin: Vec3,
        dir: Vec3,
        bounds: &Aabb,
    ) -> Self {
        let axes = [A, B, D];
        let (dir, origin) = (dir.to_array(), origin.to_array());
        let (lo, hi) = (bounds.min.to_array(), bounds.max.to_array());
        let exact = axes.map(|axis| 1.0 / dir[axis]);
        let parallel = exact.map(|inv| !inv.is_finite());
        let inv = exact.map(finite_reciprocal);
        // One ray: its constants in scalars, broadcast once at the end
        // (the lanes' `SlabFrame` does the same operations in the same
        // order, so the bits agree; a test checks it).
        let along = |x: [f32; 3]| axes.map(|axis| x[axis]);
        let (o, lo, hi) = (along(origin), along(lo), along(hi));
        let reach = [0, 1, 2].map(|k| {
            let low = (lo[k] - o[k]) * inv[k];
            let high = (hi[k] - o[k]) * inv[k];
            max_or(low.abs(), high.abs())
        });
        // Along an axis the ray runs parallel to, the exact rule puts no
        // limit on a box whose slab holds the origin (NaN distances): a
        // margin beyond every other axis's distances does the same.
        let crossing = (0..3)
            .filter(|&k| !parallel[k])
            .fold(0.0f32, |m, k| m.max(reach[k]));
        let mut near_shift = [0.0; 3];
        let mut far_shift = [0.0; 3];
        for k in 0..3 {
            let floor = if parallel[k] { 2.0 * crossing } else { 0.0 };
            let shift = o[k] * inv[k];
            let margin =
                (reach[2] * SLACK + (reach[k] + shift.abs()) * ROUNDING + floor) * MARGIN_PAD;
            near_shift[k] = 0.0 - (shift + margin);
            far_shift[k] = 0.0 - (shift - margin);
        }
        let negative = |k: usize| usize::from(inv[k].is_sign_negative());
        let rows = (
            [0, 1, 2].map(|k| axes[k] + 3 * negative(k)),
            [0, 1, 2].map(|k| axes[k] + 3 * (1 - negative(k))),
        );
        Self {
            rows,
            inv,
            near_shift,
            far_shift,
        }
    }
}

/// The slab test's axis order `[other, other, depth]` for rays whose
/// depth axis is `depth`.
pub(super) fn slab_axes(depth: usize) -> [usize; 3] {
    [(depth + 1) % 3, (depth + 2) % 3, depth]
}

/// The rows of the entry and exit planes, per axis of [`slab_axes`], that
/// rays with depth axis `depth` and direction signs `negative` (per axis
/// `x, y, z`) share: a direction class's, for [`RowOffsets::new`].
pub(super) fn class_rows(depth: usize, negative: [bool; 3]) -> ([usize; 3], [usize; 3]) {
    let axes = slab_axes(depth);
    let row = |k: usize, far: bool| axes[k] + 3 * usize::from(negative[axes[k]] != far);
    (
        [0, 1, 2].map(|k| row(k, false)),
        [0, 1, 2].map(|k| row(k, true)),
    )
}

/// Per axis in the slab test's order `[other, other, depth]` (the depth
/// axis is the direction's largest component, as in the triangle test):
/// the byte offset in a [`WideNode`] of the row holding the plane a ray
/// enters through, and of the one it leaves by. Computed once per ray (or
/// per stream, whose rays share them), so that the box test loads its six
/// rows with no index arithmetic or check per node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct RowOffsets<const N: usize> {
    near: [usize; 3],
    far: [usize; 3],
}

impl<const N: usize> RowOffsets<N> {
    /// The offsets of rows `(near, far)` of `bounds` (a row past the last,
    /// which no caller passes, is clamped to it).
    #[inline(always)]
    pub(super) fn new((near, far): ([usize; 3], [usize; 3])) -> Self {
        let offset = |row: usize| row.min(5) * std::mem::size_of::<[f32; N]>();
        Self {
            near: near.map(offset),
            far: far.map(offset),
        }
    }

    /// The entry planes' rows of `node` and its exit planes' rows, per
    /// axis: the rows [`RayBoxes::test`] loads, for tests that share them.
    #[inline(always)]
    pub(super) fn load<V: Lanes<N>>(&self, isa: V::Isa, node: &WideNode<N>) -> [[V; 3]; 2] {
        let row = |offset: usize| {
            // SAFETY: `offset` is one of `RowOffsets`', the start of one of
            // the six rows of `bounds`, at the start of the `repr(C)` node.
            unsafe { &*std::ptr::from_ref(node).byte_add(offset).cast::<[f32; N]>() }
        };
        let (n, f) = (self.near.map(row), self.far.map(row));
        [
            [V::load(isa, n[0]), V::load(isa, n[1]), V::load(isa, n[2])],
            [V::load(isa, f[0]), V::load(isa, f[1]), V::load(isa, f[2])],
        ]
    }
}

/// `a > b ? a : b`, the scalar [`Lanes::max_or`].
#[inline(always)]
fn max_or(a: f32, b: f32) -> f32 {
    if a > b { a } else { b }
}

/// `2^-21`: eight units of the single-precision rounding, the part of each
/// axis's margin that covers this test's own rounding.
const ROUNDING: f32 = 1.0 / 2_097_152.0;

/// `1 + 2^-12`: covers the rounding of the margins themselves.
const MARGIN_PAD: f32 = 1.0 + 1.0 / 4096.0;

/// Per axis in the slab test's order `[other, other, depth]`, lane by lane
/// (one ray a lane: a packet's; [`RayBoxes::new`] does the same operations
/// in scalars for one ray): the origin, the reciprocal direction and the
/// planes of the box holding every node.
pub(super) struct SlabFrame<const N: usize, V: Lanes<N>> {
    pub(super) isa: V::Isa,
    pub(super) origin: [V; 3],
    pub(super) inv_dir: [V; 3],
    pub(super) low: [V; 3],
    pub(super) high: [V; 3],
}

impl<const N: usize, V: Lanes<N>> SlabFrame<N, V> {
    /// Per axis, the largest `|(c - o) inv|` over the box's two planes `c`:
    /// a bound on every plane distance the traversal computes there.
    #[inline(always)]
    pub(super) fn reach(&self) -> [V; 3] {
        let mut reach = [V::splat(self.isa, 0.0); 3];
        for (k, reach) in reach.iter_mut().enumerate() {
            let low = (self.low[k] - self.origin[k]) * self.inv_dir[k];
            let high = (self.high[k] - self.origin[k]) * self.inv_dir[k];
            *reach = low.abs().max_or(high.abs());
        }
        reach
    }

    /// The entry and exit planes' constants of [`RayBoxes::test`]'s folded
    /// rule: per axis `-(o inv + m)` and `-(o inv - m)`, with the margin
    /// `m_k = (SLACK * reach_depth + 2^-21 * (reach_k + |o_k inv_k|) +
    /// floor_k) * (1 + 2^-12)` (see [`RayBoxes::test`] for why it covers
    /// the exact rule's margin and both computations' rounding).
    #[inline(always)]
    pub(super) fn shifts(&self, reach: [V; 3], floor: [V; 3]) -> ([V; 3], [V; 3]) {
        let slack = V::splat(self.isa, SLACK);
        let rounding = V::splat(self.isa, ROUNDING);
        let pad = V::splat(self.isa, MARGIN_PAD);
        let zero = V::splat(self.isa, 0.0);
        let mut near = [zero; 3];
        let mut far = [zero; 3];
        for k in 0..3 {
            let shift = self.origin[k] * self.inv_dir[k];
            let margin = (reach[2] * slack + (reach[k] + shift.abs()) * rounding + floor[k]) * pad;
            near[k] = zero - (shift + margin);
            far[k] = zero - (shift - margin);
        }
        (near, far)
    }
}

/// `x` as vectors, each value in every lane.
#[inline(always)]
pub(super) fn splat3<const N: usize, V: Lanes<N>>(isa: V::Isa, x: [f32; 3]) -> [V; 3] {
    [
        V::splat(isa, x[0]),
        V::splat(isa, x[1]),
        V::splat(isa, x[2]),
    ]
}

/// A reciprocal `inv = 1 / x` as the slab test takes it: itself, or for
/// a zero (or tiny) `x`, whose reciprocal is infinite, a huge finite value
/// of the same sign: an infinite reciprocal would turn `p * inv + shift`
/// into `inf - inf` for a ray in a box's plane.
#[inline(always)]
fn finite_reciprocal(inv: f32) -> f32 {
    if inv.is_finite() {
        inv
    } else {
        HUGE_RECIPROCAL.copysign(inv)
    }
}

/// `2^64`.
const HUGE_RECIPROCAL: f32 = 18_446_744_073_709_551_616.0;

/// The axis of the direction's largest magnitude, first axis on ties: the
/// depth axis of both the slab test and the triangle test.
#[inline(always)]
fn depth_axis(dir: Vec3) -> usize {
    let a = dir.abs();
    if a.x >= a.y && a.x >= a.z {
        0
    } else if a.y >= a.z {
        1
    } else {
        2
    }
}

/// A child waiting on the stack: where it leads and its cull bound.
#[derive(Clone, Copy, Debug)]
struct Entry {
    child: u32,
    groups: u32,
    bound: f32,
}

/// The test a traversal runs at each leaf it reaches.
pub trait LeafTest<const N: usize> {
    /// Tests a leaf's triangle groups; `Some(t)` when it found a hit that
    /// becomes the new closest distance `t` (the test keeps the hit itself).
    fn test(&mut self, groups: &[TriangleGroup<N>]) -> Option<f32>;
}

/// Traverses `bvh` for a ray over `(t_min, t_max)`, running `leaf` on every
/// leaf that may hold a hit. With `ANY_HIT` the traversal stops at the
/// first leaf that reports one; otherwise it goes on with the interval cut
/// to the reported `t`. Returns whether any leaf reported a hit.
///
/// The leaf test is a trait, not a closure, because a closure is compiled
/// without the SIMD backend's target features (see `simd`).
#[inline(always)]
pub fn traverse<const N: usize, V: Lanes<N>, const ANY_HIT: bool>(
    bvh: &WideBvh<N>,
    boxes: &RayBoxes<N, V>,
    t_min: f32,
    t_max: f32,
    leaf: &mut impl LeafTest<N>,
) -> bool {
    let Some(start) = root_entry(bvh.root) else {
        return false;
    };
    traverse_from::<N, V, ANY_HIT>(bvh, boxes, start, t_min, t_max, leaf)
}

/// [`traverse`] of the subtree `start` (a node or leaf as the
/// `(child, groups)` pair of a slot) instead of the whole tree.
#[inline(always)]
pub fn traverse_from<const N: usize, V: Lanes<N>, const ANY_HIT: bool>(
    bvh: &WideBvh<N>,
    boxes: &RayBoxes<N, V>,
    start: (u32, u32),
    t_min: f32,
    t_max: f32,
    leaf: &mut impl LeafTest<N>,
) -> bool {
    traverse_subtrees::<N, V, ANY_HIT>(bvh, boxes, start, &[], t_min, t_max, leaf)
}

/// Subtrees a single-ray traversal may start from at once
/// ([`traverse_subtrees`]), beyond the first.
pub const MORE_STARTS: usize = 8;

/// [`traverse_from`] of the subtree `first` and of each of `more` (at most
/// [`MORE_STARTS`]), in one traversal with one stack: the others wait on
/// the stack as if a node had pushed them, with no cull bound (each is
/// tested against the closest hit only through its own nodes' boxes).
#[inline(always)]
pub fn traverse_subtrees<const N: usize, V: Lanes<N>, const ANY_HIT: bool>(
    bvh: &WideBvh<N>,
    boxes: &RayBoxes<N, V>,
    first: (u32, u32),
    more: &[(u32, u32)],
    t_min: f32,
    t_max: f32,
    leaf: &mut impl LeafTest<N>,
) -> bool {
    assert!(stack_capacity(N) <= STACK, "widths up to 8");
    assert!(
        more.len() <= MORE_STARTS,
        "at most {MORE_STARTS} more starts"
    );
    let (mut child, mut groups) = first;
    let t_min_v = V::splat(boxes.isa, t_min);
    let mut cutoff = t_max;
    // Broadcast again only when a hit cuts it (never for any-hit).
    let mut cutoff_v = V::splat(boxes.isa, cutoff);
    let mut stack = [const { MaybeUninit::<Entry>::uninit() }; STACK + MORE_STARTS];
    let mut depth = 0;
    for &(child, groups) in more {
        stack[depth].write(Entry {
            child,
            groups,
            bound: f32::NEG_INFINITY,
        });
        depth += 1;
    }
    let mut found = false;
    loop {
        if groups == 0 {
            let node = &bvh.nodes[child as usize];
            let (hits, order, bound) = boxes.test(node, t_min_v, cutoff_v);
            if hits != 0 {
                let first = hits.trailing_zeros() as usize;
                let rest = hits & (hits - 1);
                let nearest = if rest == 0 {
                    first
                } else if ANY_HIT {
                    // Any hit will do: no order, push the rest as they come,
                    // with no cull bound (the cutoff never moves).
                    for slot in set_bits(rest) {
                        stack[depth].write(Entry {
                            child: node.child[slot],
                            groups: node.groups[slot],
                            bound: f32::NEG_INFINITY,
                        });
                        depth += 1;
                    }
                    first
                } else if rest & (rest - 1) == 0 {
                    // Two children, the most common case: one comparison.
                    let second = rest.trailing_zeros() as usize;
                    let (order, bound) = (order.to_array(), bound.to_array());
                    let (near, far) = if order[second] < order[first] {
                        (second, first)
                    } else {
                        (first, second)
                    };
                    stack[depth].write(Entry {
                        child: node.child[far],
                        groups: node.groups[far],
                        bound: bound[far],
                    });
                    depth += 1;
                    near
                } else {
                    push_far_children(node, hits, order, bound, &mut stack, &mut depth)
                };
                child = node.child[nearest];
                groups = node.groups[nearest];
                continue;
            }
        } else {
            let range = child as usize..(child + groups) as usize;
            if let Some(t) = leaf.test(&bvh.groups[range]) {
                found = true;
                if ANY_HIT {
                    return true;
                }
                cutoff = t;
                cutoff_v = V::splat(boxes.isa, cutoff);
            }
        }
        // Pop the next child that still starts before the closest hit.
        loop {
            if depth == 0 {
                return found;
            }
            depth -= 1;
            // SAFETY: entries below `depth` were written by the pushes.
            let entry = unsafe { stack[depth].assume_init() };
            if ANY_HIT || entry.bound <= cutoff {
                child = entry.child;
                groups = entry.groups;
                break;
            }
        }
    }
}

/// The slots `slots` (bit per slot, at least one) ordered by `key`,
/// largest (farthest) first, equal keys in slot order: the push order of
/// the children a node keeps (an insertion sort; at most `N <= 8` slots).
/// The order lives in one register, a byte per position ([`SlotOrder`]):
/// an array of indices written entry by entry and then copied out whole
/// made the copy's wide load wait for the narrow stores before it (a
/// failed store-to-load forward, 3 % of the diffuse streams' samples on an
/// Intel Xeon; docs/BENCHMARKS.md, "CPU rays, session 26").
#[inline(always)]
pub(super) fn far_to_near<const N: usize>(slots: u32, key: &[f32; N]) -> SlotOrder {
    const { assert!(N <= 8, "a byte per slot in a u64") };
    let mut packed = 0u64;
    let mut count = 0;
    for slot in set_bits(slots) {
        let mut j = count;
        while j > 0 {
            let before = (packed >> (8 * (j - 1))) as usize & 0xff;
            if key[before] < key[slot] {
                packed = packed & !(0xff << (8 * j)) | (before as u64) << (8 * j);
                j -= 1;
            } else {
                break;
            }
        }
        packed = packed & !(0xff << (8 * j)) | (slot as u64) << (8 * j);
        count += 1;
    }
    SlotOrder { packed, count }
}

/// Slots in an order ([`far_to_near`]): slot `i` of the order in byte `i`.
#[derive(Clone, Copy, Debug)]
pub(super) struct SlotOrder {
    packed: u64,
    /// How many slots.
    pub(super) count: usize,
}

impl SlotOrder {
    /// The slot at position `i` (below [`SlotOrder::count`]).
    #[inline(always)]
    fn slot(self, i: usize) -> usize {
        debug_assert!(i < self.count);
        (self.packed >> (8 * i)) as usize & 0xff
    }

    /// The slots in order.
    #[inline(always)]
    pub(super) fn slots(self) -> impl Iterator<Item = usize> {
        (0..self.count).map(move |i| self.slot(i))
    }

    /// The slots but the last, farthest first: the children to push when
    /// the traversal goes on into the nearest.
    #[inline(always)]
    pub(super) fn farther(self) -> impl Iterator<Item = usize> {
        (0..self.count - 1).map(move |i| self.slot(i))
    }

    /// The last slot: the nearest child.
    #[inline(always)]
    pub(super) fn nearest(self) -> usize {
        self.slot(self.count - 1)
    }
}

/// Sorts the hit children (`hits`, at least three) by entry distance, pushes
/// all but the nearest far-to-near and returns the nearest's slot.
#[inline(always)]
fn push_far_children<const N: usize, V: Lanes<N>>(
    node: &WideNode<N>,
    hits: u32,
    order: V,
    bound: V,
    stack: &mut [MaybeUninit<Entry>; STACK + MORE_STARTS],
    depth: &mut usize,
) -> usize {
    let bound = bound.to_array();
    let order = far_to_near(hits, &order.to_array());
    for slot in order.farther() {
        stack[*depth].write(Entry {
            child: node.child[slot],
            groups: node.groups[slot],
            bound: bound[slot],
        });
        *depth += 1;
    }
    order.nearest()
}

#[cfg(test)]
mod tests {
    use super::super::node::{ChildRef, WideNode};
    use super::super::simd::{AnyCpu, Portable};
    use super::*;
    use crate::bvh::BvhNode;
    use crate::bvh::traverse::RayBoxTest;
    use caustic_geom::{Aabb, Pcg32};

    /// The crossing rule's fused margins give the bits of the margin
    /// rounded first and then subtracted (and added): `CROSSING_SLACK` is a
    /// power of two, so the product is exact for every width above the
    /// subnormal range. Distances span many magnitudes and signs, widths
    /// from zero to infinity; the AVX backends fuse, the portable one does
    /// not.
    fn crossing_margins_are_rounded_then_applied<V: Lanes<8>>(isa: V::Isa) {
        let mut rng = Pcg32::new(5, 9);
        let value = |rng: &mut Pcg32| {
            let magnitude = 2f32.powi((rng.next_u32() % 80) as i32 - 40);
            let sign = if rng.next_u32() & 1 == 0 { 1.0 } else { -1.0 };
            sign * magnitude * (1.0 + rng.next_f32())
        };
        let crossing = Crossing::when::<8>(isa, true);
        for _ in 0..20_000 {
            let n: [[f32; 8]; 3] =
                std::array::from_fn(|_| std::array::from_fn(|_| value(&mut rng)));
            let f: [[f32; 8]; 3] = std::array::from_fn(|k| {
                std::array::from_fn(|i| {
                    let width = if k == 2 && rng.next_u32().is_multiple_of(16) {
                        f32::INFINITY
                    } else {
                        value(&mut rng).abs()
                    };
                    n[k][i] + width
                })
            });
            let (t_min, cutoff) = (value(&mut rng), value(&mut rng));
            let rows = |x: &[[f32; 8]; 3]| [0, 1, 2].map(|k| V::load(isa, &x[k]));
            let (kept, near, lo) = slabs_rule(
                rows(&n),
                rows(&f),
                V::splat(isa, t_min),
                V::splat(isa, cutoff),
                crossing,
            );
            let (kept, near, lo) = (V::bits(kept), near.to_array(), lo.to_array());
            for i in 0..8 {
                let margin = (f[2][i] - n[2][i]) * CROSSING_SLACK;
                let near_i = max_or(n[0][i], max_or(n[1][i], n[2][i]));
                let far_i = f[0][i].min(f[1][i]).min(f[2][i]);
                let lo_i = max_or(near_i - margin, t_min);
                let hi_i = cutoff.min(far_i + margin);
                assert_eq!(near[i].to_bits(), near_i.to_bits());
                assert_eq!(lo[i].to_bits(), lo_i.to_bits(), "lane {i}: {n:?} {f:?}");
                assert_eq!(kept >> i & 1 == 1, lo_i <= hi_i, "lane {i}: {n:?} {f:?}");
            }
        }
    }

    #[test]
    fn fused_crossing_margins_are_the_rounded_margins() {
        crossing_margins_are_rounded_then_applied::<Portable<8>>(AnyCpu);
        #[cfg(target_arch = "x86_64")]
        {
            use super::super::simd::{Avx8, Avx8k, avx2_for_test, avx512_for_test};
            let test = "fused_crossing_margins_are_the_rounded_margins";
            if let Some(avx) = avx2_for_test(test) {
                crossing_margins_are_rounded_then_applied::<Avx8>(avx);
            }
            if let Some(avx512) = avx512_for_test(test) {
                crossing_margins_are_rounded_then_applied::<Avx8k>(avx512);
            }
        }
    }

    /// `far_to_near` against a stable sort: the kept slots, largest key
    /// first, equal keys in slot order (keys drawn from a few values so that
    /// ties are common, infinities included); with NaN keys still every
    /// kept slot exactly once.
    #[test]
    fn far_to_near_orders_kept_slots_largest_first_ties_by_slot() {
        let mut rng = Pcg32::new(11, 3);
        let values = [f32::NEG_INFINITY, -2.5, 0.0, 1.0, 1.0, 7.25, f32::INFINITY];
        for case in 0..2000 {
            let slots = rng.next_u32() & 0xff | 1 << (case % 8);
            let key: [f32; 8] =
                std::array::from_fn(|_| values[rng.next_u32() as usize % values.len()]);
            let mut expected: Vec<usize> = (0..8).filter(|&s| slots & (1 << s) != 0).collect();
            expected.sort_by(|&a, &b| key[b].partial_cmp(&key[a]).unwrap());
            let sorted: Vec<usize> = far_to_near(slots, &key).slots().collect();
            assert_eq!(sorted, expected, "slots {slots:#b} keys {key:?}");
            let mut with_nan = key;
            with_nan[case % 8] = f32::NAN;
            let mut seen: Vec<usize> = far_to_near(slots, &with_nan).slots().collect();
            seen.sort_unstable();
            let kept: Vec<usize> = (0..8).filter(|&s| slots & (1 << s) != 0).collect();
            assert_eq!(seen, kept, "slots {slots:#b} keys {with_nan:?}");
        }
    }

    /// A random node of three boxes around `centre`, of half-extents up to
    /// `size` (the last axis thin), and a ray towards it.
    fn random_case(unit: &mut impl FnMut() -> f32, size: f32) -> (WideNode<4>, Vec3, Vec3) {
        let mut node = WideNode::<4>::empty();
        for slot in 0..3 {
            let p = Vec3::new(unit(), unit(), unit()) * 4.0;
            let e = Vec3::new(unit().abs(), unit().abs(), unit().abs() * 0.01) * size;
            node.set(slot, Aabb::new(p - e, p + e), ChildRef::Node(0));
        }
        let origin = Vec3::new(unit(), unit(), unit()) * 6.0;
        let dir = Vec3::new(unit(), unit(), unit());
        (node, origin, dir)
    }

    /// The node's three boxes and the origin, the box the margins see.
    fn scene_box(node: &WideNode<4>) -> Aabb {
        (0..3).fold(Aabb::EMPTY, |b, slot| b.union(node.slot_bounds(slot)))
    }

    /// Every slot the binary traversal's exact scalar test keeps, the SIMD
    /// test keeps too, with a cull bound no larger (so the wide tree's hits
    /// are brute force's), also for rays parallel to an axis and lying in a
    /// box's plane, and for flat boxes and scenes; and it culls almost every slot the
    /// exact test culls (the margins are a few millionths of the scene).
    #[test]
    fn lanes_keep_every_box_the_exact_test_keeps() {
        let mut rng = Pcg32::new(7, 1);
        let mut unit = || rng.next_f32() * 2.0 - 1.0;
        let (mut exact_culled, mut also_culled) = (0, 0);
        for case in 0..20_000 {
            let (mut node, mut origin, mut dir) = random_case(&mut unit, 1.0);
            match case % 4 {
                // Parallel to y, in the plane of slot 0's bottom face.
                1 => {
                    dir.y = if unit() < 0.0 { 0.0 } else { -0.0 };
                    node.bounds[1][0] = origin.y.min(node.bounds[4][0]);
                }
                // Parallel to x and z, slot 1 flat in x through the origin.
                2 => {
                    dir.x = 0.0;
                    dir.z = -0.0;
                    node.bounds[0][1] = origin.x;
                    node.bounds[3][1] = origin.x;
                }
                // A scene flat in x at 0 and a ray in its plane: the
                // exact rule keeps what the other axes keep.
                3 => {
                    for slot in 0..3 {
                        node.bounds[0][slot] = 0.0;
                        node.bounds[3][slot] = 0.0;
                    }
                    origin.x = 0.0;
                    dir.x = -0.0;
                }
                _ => {}
            }
            let (t_min, cutoff) = (unit().abs(), 3.0 * unit().abs());
            let wide = RayBoxes::<4, Portable<4>>::new(AnyCpu, origin, dir, &scene_box(&node));
            let (hits, _, bound) = wide.test(&node, Portable([t_min; 4]), Portable([cutoff; 4]));
            let scalar = RayBoxTest::new(origin, dir);
            for slot in 0..3 {
                let b = node.slot_bounds(slot);
                match scalar.entry(&BvhNode::leaf(b, 0, 1), t_min, cutoff) {
                    Some(e) => {
                        assert!(hits & (1 << slot) != 0, "case {case} slot {slot} dropped");
                        assert!(bound.0[slot] <= e.bound, "case {case} slot {slot} bound");
                    }
                    None => {
                        exact_culled += 1;
                        also_culled += usize::from(hits & (1 << slot) == 0);
                    }
                }
            }
            assert_eq!(hits & (1 << 3), 0, "the empty slot is never kept");
        }
        assert!(
            also_culled * 1000 >= exact_culled * 995,
            "{also_culled} of {exact_culled} culled"
        );
    }

    /// The SIMD backends give the portable backend's bits.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn backends_agree_bit_for_bit() {
        use super::super::simd::{Sse2, Sse4};
        let mut rng = Pcg32::new(9, 2);
        let mut unit = || rng.next_f32() * 2.0 - 1.0;
        for _ in 0..2000 {
            let (node, origin, dir) = random_case(&mut unit, 3.0);
            let scene = scene_box(&node);
            let (t_min, cutoff) = (unit().abs(), 5.0 * unit().abs());
            let portable = RayBoxes::<4, Portable<4>>::new(AnyCpu, origin, dir, &scene);
            let sse = RayBoxes::<4, Sse4>::new(Sse2, origin, dir, &scene);
            let (h0, o0, b0) = portable.test(&node, Portable([t_min; 4]), Portable([cutoff; 4]));
            let (h1, o1, b1) = sse.test(&node, Sse4::splat(Sse2, t_min), Sse4::splat(Sse2, cutoff));
            assert_eq!(h0, h1);
            let bits = |v: [f32; 4]| v.map(f32::to_bits);
            assert_eq!(bits(o0.0), bits(o1.to_array()));
            assert_eq!(bits(b0.0), bits(b1.to_array()));
        }
    }

    #[test]
    fn capacity_covers_a_full_path() {
        assert_eq!(stack_capacity(2), MAX_DEPTH + 2);
        assert!(stack_capacity(8) >= 7 * MAX_DEPTH);
    }
}
