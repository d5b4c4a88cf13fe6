//! Queries on the photon kd-tree: range search, priority-queue kNN and
//! Zhou et al.'s iterative histogram kNN (Algorithm 6 of "Real-Time KD-Tree
//! Construction on Graphics Hardware", 2008, §8.2).
//!
//! All three walk the tree the same way: a fixed stack (the tree is at most
//! [`MAX_DEPTH`] deep and the stack holds at most one far child per level),
//! the child on the query's side first, the far child pushed with the
//! squared distance to its splitting plane and skipped when that exceeds
//! the current bound. The bound is compared with `>`, not `>=`, so a point
//! at exactly the bound distance with a lower index is never pruned.
//!
//! Histogram kNN, exact variant. Zhou's search brackets the k-th distance
//! in `[lo, hi]`: a range search of radius `hi` counts points per distance
//! bin of width `(hi − lo) / bins` (points nearer than `lo` in one counter),
//! the bin where the cumulative count reaches `k` becomes the next bracket,
//! and after the iterations a final range search of radius `hi` returns at
//! least `k` points, of which the `k` nearest are selected. The start
//! radius `r_0` must hold at least `k` points: here it is the farthest
//! corner of the deepest cell on the query's root-to-leaf path whose
//! subtree still holds `k` points (Zhou and MNRT estimate it from a cut of
//! the tree; this one is conservative by construction). Bin edges are
//! computed in floating point, so the final radius gets a relative slack of
//! `1e-5` and never exceeds the last radius actually searched; should the
//! final search still find fewer than `k`, it repeats at that radius. The
//! result is therefore exactly the priority queue's.

use super::{MAX_DEPTH, PointKdTree};
use crate::points::Neighbour;
use crate::points::dist2;
use crate::points::neighbours::MaxHeap;
use caustic_geom::{Aabb, Vec3};

/// Most histogram bins (a fixed array per query).
const MAX_BINS: usize = 64;

/// Relative slack of the histogram's final radius.
const BRACKET_SLACK: f32 = 1e-5;

/// What a traversal does at leaves, and how far it still searches.
trait Visitor {
    /// The current squared search radius.
    fn bound(&self) -> f32;
    /// Tests the leaf points `first..first + count`.
    fn leaf(&mut self, first: usize, count: usize);
}

/// Every point within a fixed radius.
struct RangeVisitor<'t, F> {
    tree: &'t PointKdTree,
    query: Vec3,
    radius2: f32,
    visit: F,
}

impl<F: FnMut(usize, f32)> Visitor for RangeVisitor<'_, F> {
    #[inline(always)]
    fn bound(&self) -> f32 {
        self.radius2
    }

    #[inline(always)]
    fn leaf(&mut self, first: usize, count: usize) {
        for slot in first..first + count {
            let d2 = dist2(self.tree.points[slot], self.query);
            if d2 <= self.radius2 {
                (self.visit)(slot, d2);
            }
        }
    }
}

/// The k nearest so far in a max-heap; the bound shrinks as it fills.
struct HeapVisitor<'t, 'o> {
    tree: &'t PointKdTree,
    query: Vec3,
    radius2: f32,
    heap: MaxHeap<'o>,
}

impl Visitor for HeapVisitor<'_, '_> {
    #[inline(always)]
    fn bound(&self) -> f32 {
        self.heap.bound(self.radius2)
    }

    #[inline(always)]
    fn leaf(&mut self, first: usize, count: usize) {
        for slot in first..first + count {
            let d2 = dist2(self.tree.points[slot], self.query);
            if d2 <= self.heap.bound(self.radius2) {
                self.heap.offer(Neighbour::new(self.tree.ids[slot], d2));
            }
        }
    }
}

impl PointKdTree {
    /// Calls `visit(slot, dist2)` for every point within `sqrt(radius2)`;
    /// `slot` indexes the reordered `points`/`ids`.
    pub(super) fn range(&self, query: Vec3, radius2: f32, visit: impl FnMut(usize, f32)) {
        let mut visitor = RangeVisitor {
            tree: self,
            query,
            radius2,
            visit,
        };
        self.traverse(query, &mut visitor);
    }

    /// kNN with a bounded max-heap: one traversal, the bound shrinking as
    /// the heap fills.
    pub(super) fn knn_heap(
        &self,
        query: Vec3,
        k: usize,
        max_radius: f32,
        out: &mut Vec<Neighbour>,
    ) {
        let mut visitor = HeapVisitor {
            tree: self,
            query,
            radius2: max_radius * max_radius,
            heap: MaxHeap::new(out, k),
        };
        self.traverse(query, &mut visitor);
        visitor.heap.finish();
    }

    /// The stack traversal shared by every query.
    #[inline(always)]
    fn traverse(&self, query: Vec3, visitor: &mut impl Visitor) {
        let mut stack = [(0u32, 0f32); MAX_DEPTH];
        let mut top = 0;
        let mut node = 0usize;
        loop {
            let n = self.nodes[node];
            if n.is_leaf() {
                visitor.leaf(n.first() as usize, n.count() as usize);
                // Pop the next far child still within the bound.
                loop {
                    if top == 0 {
                        return;
                    }
                    top -= 1;
                    let (far, plane2) = stack[top];
                    if plane2 <= visitor.bound() {
                        node = far as usize;
                        break;
                    }
                }
            } else {
                let diff = query[n.axis()] - n.split();
                let (near, far) = if diff < 0.0 {
                    (node + 1, n.right() as usize)
                } else {
                    (n.right() as usize, node + 1)
                };
                let plane2 = diff * diff;
                if plane2 <= visitor.bound() {
                    stack[top] = (far as u32, plane2);
                    top += 1;
                }
                node = near;
            }
        }
    }

    /// Zhou's Algorithm 6 (see the module docs for the exact variant).
    pub(super) fn knn_histogram(
        &self,
        query: Vec3,
        k: usize,
        max_radius: f32,
        iterations: u32,
        bins: u32,
        out: &mut Vec<Neighbour>,
    ) {
        let bins = (bins as usize).clamp(1, MAX_BINS);
        let start = self.initial_radius(query, k).min(max_radius);
        let (mut lo, mut hi) = (0.0f32, start);
        // The last radius a range search actually used.
        let mut searched = start;
        if start.is_finite() {
            for _ in 0..iterations {
                let (below, counts) = self.histogram(query, lo, hi, bins);
                let total = below + counts.iter().sum::<usize>();
                searched = hi;
                if total <= k {
                    // At most k points within hi: they are the answer.
                    break;
                }
                let (new_lo, new_hi) = bracket(lo, hi, below, &counts[..bins], k);
                (lo, hi) = (new_lo, new_hi);
            }
        }
        let radius = if hi < searched {
            (hi + hi * BRACKET_SLACK).min(searched)
        } else {
            searched
        };
        self.collect_nearest(query, radius, k, out);
        if out.len() < k && radius < searched {
            self.collect_nearest(query, searched, k, out);
        }
        if out.len() < k && searched < max_radius {
            // r_0 held fewer than k points after rounding: the heap is exact.
            self.knn_heap(query, k, max_radius, out);
        }
    }

    /// Counts the points within `hi`: those nearer than `lo`, and the rest
    /// per bin of width `(hi − lo) / bins`.
    fn histogram(&self, query: Vec3, lo: f32, hi: f32, bins: usize) -> (usize, [usize; MAX_BINS]) {
        let width = (hi - lo) / bins as f32;
        let mut counts = [0usize; MAX_BINS];
        let mut below = 0;
        self.range(query, hi * hi, |_, d2| {
            let d = d2.sqrt();
            if d < lo {
                below += 1;
            } else {
                let bin = if width > 0.0 {
                    ((d - lo) / width) as usize
                } else {
                    0
                };
                counts[bin.min(bins - 1)] += 1;
            }
        });
        (below, counts)
    }

    /// Every point within `radius`, then the `k` smallest by key, sorted.
    fn collect_nearest(&self, query: Vec3, radius: f32, k: usize, out: &mut Vec<Neighbour>) {
        out.clear();
        self.range(query, radius * radius, |slot, d2| {
            out.push(Neighbour::new(self.ids[slot], d2));
        });
        if out.len() > k {
            out.select_nth_unstable_by_key(k - 1, Neighbour::key);
            out.truncate(k);
        }
        out.sort_unstable_by_key(Neighbour::key);
    }

    /// A radius holding at least `k` points (if the tree has that many):
    /// the farthest corner of the deepest cell on the query's path whose
    /// subtree holds `k` points; infinite when the whole tree holds fewer.
    fn initial_radius(&self, query: Vec3, k: usize) -> f32 {
        if self.points.len() < k {
            return f32::INFINITY;
        }
        let mut cell = self.bounds;
        // The subtree at `node` holds the points `first..end`.
        let (mut node, mut first, mut end) = (0usize, 0usize, self.points.len());
        while !self.nodes[node].is_leaf() {
            let n = self.nodes[node];
            let (axis, split) = (n.axis(), n.split());
            let right = n.right() as usize;
            let right_first = self.first_point(right);
            let goes_left = query[axis] < split;
            let (child, child_first, child_end) = if goes_left {
                (node + 1, first, right_first)
            } else {
                (right, right_first, end)
            };
            if child_end - child_first < k {
                break;
            }
            if goes_left {
                cell.max[axis] = split;
            } else {
                cell.min[axis] = split;
            }
            (node, first, end) = (child, child_first, child_end);
        }
        farthest_corner(query, &cell) * (1.0 + BRACKET_SLACK)
    }

    /// The first point of the subtree at `node` (pre-order: follow left
    /// children, the next nodes, down to a leaf); the point count for the
    /// index one past the last node.
    fn first_point(&self, mut node: usize) -> usize {
        while let Some(n) = self.nodes.get(node) {
            if n.is_leaf() {
                return n.first() as usize;
            }
            node += 1;
        }
        self.points.len()
    }
}

/// The next bracket: the bin where the cumulative count reaches `k`.
fn bracket(lo: f32, hi: f32, below: usize, counts: &[usize], k: usize) -> (f32, f32) {
    let width = (hi - lo) / counts.len() as f32;
    let mut cumulative = below;
    for (j, &c) in counts.iter().enumerate() {
        cumulative += c;
        if cumulative >= k {
            let new_lo = lo + j as f32 * width;
            let new_hi = if j + 1 == counts.len() {
                hi
            } else {
                lo + (j + 1) as f32 * width
            };
            return (new_lo, new_hi);
        }
    }
    (lo, hi)
}

/// Distance from `q` to the farthest corner of `cell`: every point of the
/// cell lies within it.
fn farthest_corner(q: Vec3, cell: &Aabb) -> f32 {
    let far = (q - cell.min).abs().max((q - cell.max).abs());
    far.length()
}
