//! The DACRT task on the CPU: cull, split, partition, and the seven
//! children in three waves (see the module docs of [`super`] for the
//! scheme and the exactness argument).

use super::schedule;
use super::split::{self, Plane};
use super::{DacrtConfig, DacrtSchedule, DacrtScheme, DacrtStats};
use crate::is_traceable;
use crate::slab_ray::{SlabRay, next_up};
use caustic_geom::{Aabb, Hit, Ray, RayTriangleTest, Triangle};

/// `RayItem::prim` of a ray with no hit yet.
const NO_HIT: u32 = u32::MAX;

/// Below this many ray–triangle pairs a task runs its children on the
/// calling thread: a rayon join costs more than the work.
const PARALLEL_PAIRS: usize = 1 << 16;

/// Which side of a split plane a ray or a triangle lies on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Side {
    Left = 0,
    /// Straddling: the ray (or triangle) meets both children.
    Both = 1,
    Right = 2,
}

/// What never changes about a ray during a trace.
struct RayConst {
    /// The ray's index in the caller's slice.
    index: usize,
    test: RayTriangleTest,
    slab: SlabRay,
    tmin: f32,
    tmax: f32,
}

/// A ray as the tasks move it: its constants' index and its best hit so
/// far. Tasks own disjoint slices of these, so the hits need no locks.
#[derive(Clone, Copy, Debug)]
pub(super) struct RayItem {
    pub id: u32,
    closest: f32,
    prim: u32,
    u: f32,
    v: f32,
}

/// The read-only state of one trace.
struct Context<'a> {
    triangles: &'a [Triangle],
    /// Whole-triangle boxes by scene id.
    boxes: Vec<Aabb>,
    rays: Vec<RayConst>,
    config: &'a DacrtConfig,
    any_hit: bool,
}

/// A task's rays and triangles, read-only: what the split choice reads.
pub(super) struct TaskView<'a> {
    context: &'a Context<'a>,
    pub rays: &'a [RayItem],
    pub tris: &'a [u32],
}

impl TaskView<'_> {
    /// The side of `plane` a triangle lies on, by its box (exactly; the
    /// rays carry the rounding margin).
    pub fn tri_side(&self, tri: u32, plane: Plane) -> Side {
        tri_side(&self.context.boxes[tri as usize], plane)
    }

    /// The children of `bounds` split at `plane` whose boxes, grown by the
    /// ray's thickness, its line meets; `None` when it meets neither.
    pub fn ray_side(&self, ray: u32, bounds: &Aabb, plane: Plane) -> Option<Side> {
        ray_side(&self.context.rays[ray as usize], bounds, plane)
    }
}

fn tri_side(b: &Aabb, plane: Plane) -> Side {
    if b.max[plane.axis] <= plane.pos {
        Side::Left
    } else if b.min[plane.axis] >= plane.pos {
        Side::Right
    } else {
        Side::Both
    }
}

fn ray_side(ray: &RayConst, bounds: &Aabb, plane: Plane) -> Option<Side> {
    let (left, right) = halves(bounds, plane);
    let delta = ray.slab.delta;
    let in_left = ray.slab.clip_to(&left, delta).is_some();
    let in_right = ray.slab.clip_to(&right, delta).is_some();
    match (in_left, in_right) {
        (true, true) => Some(Side::Both),
        (true, false) => Some(Side::Left),
        (false, true) => Some(Side::Right),
        (false, false) => None,
    }
}

fn halves(bounds: &Aabb, plane: Plane) -> (Aabb, Aabb) {
    let (mut left, mut right) = (*bounds, *bounds);
    left.max[plane.axis] = plane.pos;
    right.min[plane.axis] = plane.pos;
    (left, right)
}

/// Traces `rays` against `triangles` and hands each traced ray's result to
/// `report(index, hit)` (for any-hit, `Some` means occluded). Rays that
/// cannot be traced are reported as misses.
pub(super) fn trace(
    triangles: &[Triangle],
    rays: &[Ray],
    config: &DacrtConfig,
    any_hit: bool,
    mut report: impl FnMut(usize, Option<Hit>),
) -> DacrtStats {
    let mut tris: Vec<u32> = (0..triangles.len() as u32)
        .filter(|&i| triangles[i as usize].is_finite())
        .collect();
    let boxes: Vec<Aabb> = triangles.iter().map(Triangle::bounds).collect();
    let scale = tris.iter().fold(0.0f32, |s, &i| {
        let b = &boxes[i as usize];
        s.max(b.min.abs().max_element())
            .max(b.max.abs().max_element())
    });
    let consts: Vec<RayConst> = rays
        .iter()
        .enumerate()
        .filter(|(_, r)| is_traceable(r))
        .map(|(index, r)| RayConst {
            index,
            test: RayTriangleTest::new(r.origin, r.dir),
            slab: SlabRay::new(r.origin, r.dir, scale),
            tmin: r.tmin,
            tmax: r.tmax,
        })
        .collect();
    let mut items: Vec<RayItem> = consts
        .iter()
        .enumerate()
        .map(|(id, c)| RayItem {
            id: id as u32,
            closest: c.tmax,
            prim: NO_HIT,
            u: 0.0,
            v: 0.0,
        })
        .collect();
    let context = Context {
        triangles,
        boxes,
        rays: consts,
        config,
        any_hit,
    };
    let root = union(&context.boxes, &tris);
    let stats = run_task(&context, root, &mut items, &mut tris, 0);
    for (index, ray) in rays.iter().enumerate() {
        // Untraceable rays are not among the items: they miss.
        if !is_traceable(ray) {
            report(index, None);
        }
    }
    for item in &items {
        let hit = (item.prim != NO_HIT).then_some(Hit {
            t: item.closest,
            prim: item.prim,
            u: item.u,
            v: item.v,
        });
        report(context.rays[item.id as usize].index, hit);
    }
    stats
}

/// The box of the triangles `tris`.
fn union(boxes: &[Aabb], tris: &[u32]) -> Aabb {
    tris.iter()
        .fold(Aabb::EMPTY, |b, &t| b.union(boxes[t as usize]))
}

/// One task: `bounds` is the region its rays and triangles share (a point
/// of every hit pair lies inside it, grown by the ray's thickness).
fn run_task(
    context: &Context<'_>,
    bounds: Aabb,
    rays: &mut [RayItem],
    tris: &mut [u32],
    depth: u32,
) -> DacrtStats {
    let mut stats = DacrtStats {
        tasks: 1,
        max_depth: depth,
        ..DacrtStats::default()
    };
    if rays.is_empty() || tris.is_empty() {
        return stats;
    }
    stats.critical_path = 1;
    let whole = union(&context.boxes, tris);
    let bounds = bounds.intersection(whole);
    let live = partition(rays, |r| can_hit(context, r, &bounds, &whole));
    let rays = &mut rays[..live];
    if rays.is_empty() {
        return stats;
    }
    let config = context.config;
    let plane = if config.is_direct(rays.len(), tris.len()) || depth >= config.max_depth {
        None
    } else {
        separating_plane(context, &bounds, rays, tris)
    };
    let Some(plane) = plane else {
        stats.direct_tasks = 1;
        stats.pair_tests = direct(context, rays, tris);
        return stats;
    };
    stats.items = (rays.len() + tris.len()) as u64;
    let split = Subdivision {
        context,
        bounds,
        plane,
        depth,
    };
    let children = match config.scheme {
        DacrtScheme::Seven => split.seven_children(rays, tris),
        DacrtScheme::Binary => split.two_children(rays, tris),
    };
    stats.add(&children);
    stats.critical_path = 1 + children.critical_path;
    stats
}

/// Whether `ray` may still get a hit from triangles inside `whole` (the box
/// of the task's whole triangles): not done (any hit), its thick line meets
/// the task's region, and the depth slab of `whole` reaches `[tmin,
/// closest]`.
fn can_hit(context: &Context<'_>, ray: &RayItem, bounds: &Aabb, whole: &Aabb) -> bool {
    if context.any_hit && ray.prim != NO_HIT {
        return false;
    }
    let c = &context.rays[ray.id as usize];
    c.slab.clip_to(bounds, c.slab.delta).is_some()
        && c.slab.reach(whole, c.tmin, ray.closest).is_some()
}

/// The plane the configured split picks, or, when it separates no
/// triangle from the others (all straddle it), the median of another axis
/// that does; `None` when none does (the task then intersects directly).
fn separating_plane(
    context: &Context<'_>,
    bounds: &Aabb,
    rays: &[RayItem],
    tris: &[u32],
) -> Option<Plane> {
    let view = TaskView {
        context,
        rays,
        tris,
    };
    let separates = |plane: Plane| tris.iter().any(|&t| view.tri_side(t, plane) != Side::Both);
    let chosen = split::choose(context.config.split, &view, bounds)?;
    if separates(chosen) {
        return Some(chosen);
    }
    (0..3)
        .filter(|&axis| axis != chosen.axis)
        .filter_map(|axis| split::median_on(bounds, axis))
        .find(|&plane| separates(plane))
}

/// A task's split: its region, the plane, and its depth.
struct Subdivision<'c> {
    context: &'c Context<'c>,
    bounds: Aabb,
    plane: Plane,
    depth: u32,
}

impl Subdivision<'_> {
    /// A ray's side; a ray whose thick line the rounding of the two halves'
    /// tests puts in neither (it met the whole region) counts as both.
    fn ray_side(&self, ray: &RayItem) -> Side {
        ray_side(
            &self.context.rays[ray.id as usize],
            &self.bounds,
            self.plane,
        )
        .unwrap_or(Side::Both)
    }

    fn tri_side(&self, tri: u32) -> Side {
        tri_side(&self.context.boxes[tri as usize], self.plane)
    }

    fn child(&self, bounds: Aabb, rays: &mut [RayItem], tris: &mut [u32]) -> DacrtStats {
        run_task(self.context, bounds, rays, tris, self.depth + 1)
    }

    /// Partitions the rays into [left | both | right] and the triangles
    /// the same way, then runs the seven children of Vinkler et al.'s
    /// Figure 3 in their three waves; within a wave no two children share
    /// a slice.
    fn seven_children(&self, rays: &mut [RayItem], tris: &mut [u32]) -> DacrtStats {
        let pairs = rays.len().saturating_mul(tris.len());
        let parallel = rays.len() >= 256 && pairs >= PARALLEL_PAIRS;
        let (rays_left, rays_both, rays_right) = split_three(rays, |r| self.ray_side(r));
        let (tris_left, tris_both, tris_right) = split_three(tris, |&t| self.tri_side(t));
        // Which classes are not empty: the key of the children's plan.
        let classes = [
            !rays_left.is_empty(),
            !rays_both.is_empty(),
            !rays_right.is_empty(),
            !tris_left.is_empty(),
            !tris_both.is_empty(),
            !tris_right.is_empty(),
        ];
        let mask = classes
            .iter()
            .enumerate()
            .fold(0u8, |m, (bit, &full)| m | u8::from(full) << bit);
        let (left, right) = halves(&self.bounds, self.plane);
        // Wave 1: T1 (left x left), T4 (both x both), T7 (right x right).
        let (t1, (t4, t7)) = join(
            parallel,
            || self.child(left, rays_left, tris_left),
            || {
                join(
                    parallel,
                    || self.child(self.bounds, rays_both, tris_both),
                    || self.child(right, rays_right, tris_right),
                )
            },
        );
        // Wave 2: T2 (left rays x straddling triangles), T3 (both x left).
        let (t2, t3) = join(
            parallel,
            || self.child(left, rays_left, tris_both),
            || self.child(left, rays_both, tris_left),
        );
        // Wave 3: T5 (both x right), T6 (right rays x straddling triangles).
        let (t5, t6) = join(
            parallel,
            || self.child(right, rays_both, tris_right),
            || self.child(right, rays_right, tris_both),
        );
        let mut stats = DacrtStats::default();
        let children = [t1, t2, t3, t4, t5, t6, t7];
        for child in &children {
            stats.add(child);
        }
        let chains = children.map(|c| c.critical_path);
        let config = self.context.config;
        stats.critical_path = match config.schedule {
            DacrtSchedule::Waves => schedule::critical_path(mask, chains),
            // Out-of-place partitions: no child waits for a sibling but,
            // at the near levels, the far straddling child for the near
            // one (T3 and T5, whichever order).
            DacrtSchedule::Concurrent => {
                let near_far = if self.depth < config.near_levels {
                    chains[2] + chains[4]
                } else {
                    0
                };
                chains.into_iter().max().unwrap_or(0).max(near_far)
            }
        };
        stats
    }

    /// Mora's two children, one after the other: the left box with the
    /// rays and triangles that meet it (left and straddling), then the
    /// right box with those that meet it. Each triangle is in at most two
    /// children (the seven-child scheme puts a left triangle in two and a
    /// straddling one in three), and the right child's rays already carry
    /// the left child's hits, so its culling drops more of them;
    /// straddling pairs are tested in both children (the tie rule keeps
    /// the answer exact).
    fn two_children(&self, rays: &mut [RayItem], tris: &mut [u32]) -> DacrtStats {
        let (left, right) = halves(&self.bounds, self.plane);
        let ray_left = partition(rays, |r| self.ray_side(r) != Side::Right);
        let tri_left = partition(tris, |&t| self.tri_side(t) != Side::Right);
        let mut stats = self.child(left, &mut rays[..ray_left], &mut tris[..tri_left]);
        // The left child reordered its slices: gather the right side's again.
        let ray_from = partition(rays, |r| self.ray_side(r) == Side::Left);
        let tri_from = partition(tris, |&t| self.tri_side(t) == Side::Left);
        let right = self.child(right, &mut rays[ray_from..], &mut tris[tri_from..]);
        let chain = stats.critical_path + right.critical_path;
        stats.add(&right);
        stats.critical_path = chain;
        stats
    }
}

/// `rayon::join` when `parallel`, else the two calls in order.
fn join<A: Send, B: Send>(
    parallel: bool,
    a: impl FnOnce() -> A + Send,
    b: impl FnOnce() -> B + Send,
) -> (A, B) {
    if parallel {
        rayon::join(a, b)
    } else {
        (a(), b())
    }
}

/// Reorders `items` into [left | both | right] by `side` and returns the
/// three slices.
fn split_three<T>(items: &mut [T], side: impl Fn(&T) -> Side) -> (&mut [T], &mut [T], &mut [T]) {
    let not_right = partition(items, |x| side(x) != Side::Right);
    let (front, right) = items.split_at_mut(not_right);
    let lefts = partition(front, |x| side(x) == Side::Left);
    let (left, both) = front.split_at_mut(lefts);
    (left, both, right)
}

/// Moves the items that satisfy `keep` to the front (order not kept);
/// returns how many.
fn partition<T>(items: &mut [T], keep: impl Fn(&T) -> bool) -> usize {
    let mut front = 0;
    for i in 0..items.len() {
        if keep(&items[i]) {
            items.swap(front, i);
            front += 1;
        }
    }
    front
}

/// Every ray against every triangle; returns the number of tests.
fn direct(context: &Context<'_>, rays: &mut [RayItem], tris: &[u32]) -> u64 {
    let mut tests = 0u64;
    for ray in rays.iter_mut() {
        let c = &context.rays[ray.id as usize];
        if context.any_hit {
            for &t in tris {
                tests += 1;
                let tri = &context.triangles[t as usize];
                if c.test.intersect(tri, c.tmin, c.tmax).is_some() {
                    ray.prim = t;
                    break;
                }
            }
            continue;
        }
        // Up to and including the closest hit so far: an equal t with a
        // lower id wins the tie, as brute force's id order gives it.
        let mut limit = if ray.prim == NO_HIT {
            c.tmax
        } else {
            next_up(ray.closest)
        };
        tests += tris.len() as u64;
        for &t in tris {
            let tri = &context.triangles[t as usize];
            let Some(h) = c.test.intersect(tri, c.tmin, limit) else {
                continue;
            };
            if ray.prim == NO_HIT || h.t < ray.closest || t < ray.prim {
                *ray = RayItem {
                    id: ray.id,
                    closest: h.t,
                    prim: t,
                    u: h.u,
                    v: h.v,
                };
                limit = next_up(h.t);
            }
        }
    }
    tests
}
