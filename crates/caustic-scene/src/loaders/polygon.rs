//! Triangulation of polygons (OBJ and PLY faces) by ear clipping in the
//! polygon's best-fit plane.
//!
//! A fan from the first corner (what tobj does) is right only for convex
//! polygons: for a concave one some fan triangles lie outside the polygon
//! and cover area it does not have. Ear clipping (Meisters 1975; Eberly,
//! "Triangulation by Ear Clipping", 2002) is right for every simple
//! polygon:
//!
//! 1. The plane: the Newell normal (the sum of the edge cross products,
//!    Sutherland, Sproull and Schumacker 1974) is the polygon's area vector,
//!    robust for non-planar and nearly degenerate polygons, and points to
//!    the side from which the corners run counter-clockwise. Corners are
//!    projected onto the plane perpendicular to it (in `f64`, relative to
//!    the first corner), so the 2D polygon is counter-clockwise.
//! 2. An *ear* is a convex corner whose triangle with its two neighbours
//!    contains no other corner; cutting it off leaves a simple polygon, and
//!    every simple polygon with more than three corners has two ears
//!    (Meisters' two-ears theorem). Only reflex corners can lie inside a
//!    candidate triangle, and a convex corner never becomes reflex when an
//!    ear is cut, so only the (shrinking) list of reflex corners is tested.
//! 3. Candidates are tried in corner order starting at corner 1, so a
//!    convex polygon gives exactly the fan from corner 0, as before.
//!
//! Triangles keep the polygon's winding. A polygon with no ear left (it
//! crosses itself, or all its corners are collinear) has no correct
//! triangulation: its remaining corners are fanned and it is counted, as
//! are polygons bent out of their plane by more than [`PLANAR_TOLERANCE`].
//! Polygons of more than [`MAX_EAR_CLIPPED`] corners are fanned: ear
//! clipping costs up to O(n²) tests, and a hostile file must not hang the
//! loader.

use crate::Warning;
use caustic_geom::{DVec3, Vec3};
use glam::DVec2;
use std::path::Path;

/// How far (relative to the polygon's size, its bounding-box diagonal) a
/// corner may lie off the best-fit plane before the polygon counts as
/// non-planar: where the choice of diagonal starts to show. Hand-modelled
/// quads are often bent by a few tenths of a percent (the walls of the
/// McGuire Cornell boxes by 0.2 %), which no one sees.
pub(super) const PLANAR_TOLERANCE: f64 = 1e-2;

/// Polygons with more corners than this are fanned (see the module header).
pub(super) const MAX_EAR_CLIPPED: usize = 4096;

/// What went wrong while triangulating, counted over a whole file so that
/// it can be reported in one line each.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub(super) struct PolygonStats {
    /// Polygons bent out of their plane by more than the tolerance.
    pub non_planar: usize,
    /// The largest such bend, relative to the polygon's size.
    pub worst_bend: f64,
    /// Polygons that had no ear left (self-intersecting or degenerate).
    pub no_ear: usize,
    /// Polygons fanned because they have more than [`MAX_EAR_CLIPPED`] corners.
    pub too_large: usize,
}

impl PolygonStats {
    /// One warning for each kind of polygon trouble in a file.
    pub fn warn(&self, path: &Path, warnings: &mut Vec<Warning>) {
        let mut warn = |message: String| warnings.push(Warning::new(path, message));
        if self.non_planar > 0 {
            warn(format!(
                "{} polygon(s) are not planar (up to {:.1}% of their size off their best-fit plane); triangulated in that plane",
                self.non_planar,
                self.worst_bend * 100.0
            ));
        }
        if self.no_ear > 0 {
            warn(format!(
                "{} polygon(s) cross themselves or are degenerate; fanned from a corner",
                self.no_ear
            ));
        }
        if self.too_large > 0 {
            warn(format!(
                "{} polygon(s) have more than {MAX_EAR_CLIPPED} corners; fanned from their first corner (right only if convex)",
                self.too_large
            ));
        }
    }
}

/// Reusable buffers, so a file of a million quads allocates once.
#[derive(Default)]
pub(super) struct Triangulator {
    relative: Vec<DVec3>,
    points: Vec<DVec2>,
    prev: Vec<usize>,
    next: Vec<usize>,
    reflex: Vec<usize>,
    pub stats: PolygonStats,
}

impl Triangulator {
    /// Appends the triangles of the polygon whose corners are the vertex
    /// indices `corners` (into `positions`) to `out`.
    pub fn triangulate(&mut self, positions: &[Vec3], corners: &[u32], out: &mut Vec<[u32; 3]>) {
        match corners.len() {
            0..=2 => {}
            3 => out.push([corners[0], corners[1], corners[2]]),
            n if n > MAX_EAR_CLIPPED => {
                self.stats.too_large += 1;
                fan(corners, out);
            }
            _ => self.ear_clip(positions, corners, out),
        }
    }

    fn ear_clip(&mut self, positions: &[Vec3], corners: &[u32], out: &mut Vec<[u32; 3]>) {
        if corners.iter().any(|&c| c as usize >= positions.len()) {
            // Not for us to judge: `Mesh::sanitize` reports the bad index.
            fan(corners, out);
            return;
        }
        let corner = |i: usize| positions[corners[i] as usize].as_dvec3();
        let origin = corner(0);
        self.relative.clear();
        self.relative
            .extend((0..corners.len()).map(|i| corner(i) - origin));
        let normal = newell_normal(&self.relative);
        let Some(unit) = normal.try_normalize().filter(|_| normal.is_finite()) else {
            // No area or no finite coordinates: nothing to clip; the zero
            // or non-finite triangles are dropped (and counted) later.
            fan(corners, out);
            return;
        };
        let bend = bend(&self.relative, unit);
        if bend > PLANAR_TOLERANCE {
            self.stats.non_planar += 1;
            self.stats.worst_bend = self.stats.worst_bend.max(bend);
        }
        let u = unit.any_orthonormal_vector();
        let v = unit.cross(u);
        self.points.clear();
        self.points
            .extend(self.relative.iter().map(|p| DVec2::new(p.dot(u), p.dot(v))));
        self.clip_ears(corners, out);
    }

    /// Ear clipping over `self.points` (counter-clockwise).
    fn clip_ears(&mut self, corners: &[u32], out: &mut Vec<[u32; 3]>) {
        let n = corners.len();
        self.prev.clear();
        self.prev.extend((0..n).map(|i| (i + n - 1) % n));
        self.next.clear();
        self.next.extend((0..n).map(|i| (i + 1) % n));
        self.reflex.clear();
        let (points, prev, next) = (&self.points, &self.prev, &self.next);
        self.reflex
            .extend((0..n).filter(|&i| !is_convex_at(points, prev, next, i)));
        let emit = |a: usize, b: usize, c: usize, out: &mut Vec<[u32; 3]>| {
            out.push([corners[a], corners[b], corners[c]]);
        };
        let mut remaining = n;
        let mut current = 1;
        let mut misses = 0;
        while remaining > 3 {
            if self.is_ear(current) {
                let (a, c) = (self.prev[current], self.next[current]);
                emit(a, current, c, out);
                self.next[a] = c;
                self.prev[c] = a;
                remaining -= 1;
                misses = 0;
                // Cutting an ear can only make its neighbours convex.
                let (points, prev, next) = (&self.points, &self.prev, &self.next);
                self.reflex
                    .retain(|&r| !((r == a || r == c) && is_convex_at(points, prev, next, r)));
                current = c;
            } else {
                misses += 1;
                if misses > remaining {
                    self.stats.no_ear += 1;
                    self.fan_remaining(current, remaining, corners, out);
                    return;
                }
                current = self.next[current];
            }
        }
        emit(self.prev[current], current, self.next[current], out);
    }

    /// Fans the corners still in the list, starting at `start`.
    fn fan_remaining(
        &self,
        start: usize,
        remaining: usize,
        corners: &[u32],
        out: &mut Vec<[u32; 3]>,
    ) {
        let mut b = self.next[start];
        for _ in 2..remaining {
            let c = self.next[b];
            out.push([corners[start], corners[b], corners[c]]);
            b = c;
        }
    }

    fn is_convex(&self, i: usize) -> bool {
        is_convex_at(&self.points, &self.prev, &self.next, i)
    }

    /// A convex corner whose triangle holds no reflex corner (corners at
    /// the same place as the triangle's own do not count: they are where a
    /// polygon touches itself, not inside).
    fn is_ear(&self, b: usize) -> bool {
        if !self.is_convex(b) {
            return false;
        }
        let (a, c) = (self.prev[b], self.next[b]);
        let [pa, pb, pc] = [a, b, c].map(|i| self.points[i]);
        !self.reflex.iter().any(|&r| {
            let p = self.points[r];
            r != a && r != c && p != pa && p != pb && p != pc && in_triangle(pa, pb, pc, p)
        })
    }
}

fn is_convex_at(points: &[DVec2], prev: &[usize], next: &[usize], i: usize) -> bool {
    orient(points[prev[i]], points[i], points[next[i]]) > 0.0
}

/// Twice the signed area of the triangle `abc`: positive if counter-clockwise.
fn orient(a: DVec2, b: DVec2, c: DVec2) -> f64 {
    (b - a).perp_dot(c - a)
}

/// Whether `p` lies in the counter-clockwise triangle `abc`, edges included.
fn in_triangle(a: DVec2, b: DVec2, c: DVec2, p: DVec2) -> bool {
    orient(a, b, p) >= 0.0 && orient(b, c, p) >= 0.0 && orient(c, a, p) >= 0.0
}

/// How far the corners lie off the plane through their centroid with
/// normal `unit`, relative to the polygon's size (its bounding-box
/// diagonal).
fn bend(relative: &[DVec3], unit: DVec3) -> f64 {
    let centroid = relative.iter().sum::<DVec3>() / relative.len() as f64;
    let (lo, hi) = relative.iter().fold(
        (DVec3::splat(f64::MAX), DVec3::splat(f64::MIN)),
        |(lo, hi), &p| (lo.min(p), hi.max(p)),
    );
    let off = relative
        .iter()
        .map(|&p| (p - centroid).dot(unit).abs())
        .fold(0.0, f64::max);
    off / (hi - lo).length()
}

/// The Newell normal: the sum of the cross products of consecutive corners
/// (twice the polygon's vector area).
fn newell_normal(relative: &[DVec3]) -> DVec3 {
    let n = relative.len();
    (0..n)
        .map(|i| relative[i].cross(relative[(i + 1) % n]))
        .sum()
}

/// The fan from the first corner.
fn fan(corners: &[u32], out: &mut Vec<[u32; 3]>) {
    out.extend(corners.windows(2).skip(1).map(|w| [corners[0], w[0], w[1]]));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn triangulate(points: &[Vec3]) -> (Vec<[u32; 3]>, PolygonStats) {
        let corners: Vec<u32> = (0..points.len() as u32).collect();
        let mut t = Triangulator::default();
        let mut out = Vec::new();
        t.triangulate(points, &corners, &mut out);
        (out, t.stats)
    }

    fn area(points: &[Vec3], tris: &[[u32; 3]]) -> f32 {
        tris.iter()
            .map(|t| {
                let [a, b, c] = t.map(|i| points[i as usize]);
                (b - a).cross(c - a).length() / 2.0
            })
            .sum()
    }

    /// Every triangle must face the same way as the polygon (+z here).
    fn assert_facing(points: &[Vec3], tris: &[[u32; 3]], normal: Vec3) {
        for t in tris {
            let [a, b, c] = t.map(|i| points[i as usize]);
            assert!((b - a).cross(c - a).dot(normal) > 0.0, "{t:?} faces away");
        }
    }

    fn xy(coords: &[(f32, f32)]) -> Vec<Vec3> {
        coords.iter().map(|&(x, y)| Vec3::new(x, y, 0.0)).collect()
    }

    #[test]
    fn convex_polygons_are_fanned_from_the_first_corner() {
        let hexagon: Vec<Vec3> = (0..6)
            .map(|i| {
                let a = i as f32 * std::f32::consts::TAU / 6.0;
                Vec3::new(a.cos(), a.sin(), 0.0)
            })
            .collect();
        let (tris, stats) = triangulate(&hexagon);
        assert_eq!(tris, [[0, 1, 2], [0, 2, 3], [0, 3, 4], [0, 4, 5]]);
        assert_eq!(stats, PolygonStats::default());
    }

    #[test]
    fn a_concave_polygon_covers_exactly_its_area() {
        // An L of area 3 whose reflex corner is 3: the fan from corner 0
        // happens to be right here, but ear clipping must be too.
        let l = xy(&[
            (0.0, 0.0),
            (2.0, 0.0),
            (2.0, 1.0),
            (1.0, 1.0),
            (1.0, 2.0),
            (0.0, 2.0),
        ]);
        let (tris, stats) = triangulate(&l);
        assert_eq!(tris.len(), 4);
        assert!((area(&l, &tris) - 3.0).abs() < 1e-6, "{tris:?}");
        assert_facing(&l, &tris, Vec3::Z);
        assert_eq!(stats, PolygonStats::default());
    }

    /// Twice the signed area of a polygon in the xy plane (shoelace).
    fn signed_area(points: &[Vec3]) -> f32 {
        let n = points.len();
        (0..n)
            .map(|i| {
                points[i]
                    .truncate()
                    .perp_dot(points[(i + 1) % n].truncate())
            })
            .sum::<f32>()
            / 2.0
    }

    #[test]
    fn a_clockwise_arrow_head_fanned_from_a_wing_is_fixed() {
        // Left wing, tip, right wing, notch: the fan from the left wing
        // would cover 4.0 (the whole wing-tip-wing triangle plus the notch
        // triangle again) for an arrow of area 1.
        let arrow = xy(&[(-1.0, -1.0), (0.0, 1.5), (1.0, -1.0), (0.0, 0.5)]);
        assert_eq!(signed_area(&arrow), -1.0);
        let (tris, _) = triangulate(&arrow);
        assert_eq!(tris.len(), 2);
        assert!((area(&arrow, &tris) - 1.0).abs() < 1e-6, "{tris:?}");
        assert_facing(&arrow, &tris, -Vec3::Z);
    }

    #[test]
    fn clockwise_and_tilted_polygons_keep_their_winding() {
        // The L, reversed and rotated out of the xy plane.
        let rotation =
            caustic_geom::Mat3::from_axis_angle(Vec3::new(1.0, 2.0, 0.5).normalize(), 1.1);
        let mut l = xy(&[
            (0.0, 0.0),
            (2.0, 0.0),
            (2.0, 1.0),
            (1.0, 1.0),
            (1.0, 2.0),
            (0.0, 2.0),
        ]);
        l.reverse();
        let l: Vec<Vec3> = l
            .iter()
            .map(|&p| rotation * p + Vec3::splat(100.0))
            .collect();
        let (tris, stats) = triangulate(&l);
        assert!((area(&l, &tris) - 3.0).abs() < 1e-4, "{tris:?}");
        assert_facing(&l, &tris, rotation * -Vec3::Z);
        assert_eq!(stats.non_planar, 0);
    }

    #[test]
    fn bent_polygons_are_counted_but_triangulated() {
        let bent = vec![
            Vec3::new(0.0, 0.0, 0.0),
            Vec3::new(1.0, 0.0, 0.0),
            Vec3::new(1.0, 1.0, 0.3),
            Vec3::new(0.0, 1.0, 0.0),
        ];
        let (tris, stats) = triangulate(&bent);
        assert_eq!(tris.len(), 2);
        assert_eq!(stats.non_planar, 1);
        assert!(
            stats.worst_bend > 0.01 && stats.worst_bend < 0.2,
            "{stats:?}"
        );
    }

    #[test]
    fn self_intersecting_and_collinear_polygons_end_fanned() {
        // A bow tie has no ear whose triangle is empty of the other corners.
        let bow_tie = xy(&[(0.0, 0.0), (2.0, 2.0), (2.0, 0.0), (1.0, 1.5), (0.0, 2.0)]);
        let (tris, _) = triangulate(&bow_tie);
        assert_eq!(tris.len(), 3, "every corner is still used");
        let line = xy(&[(0.0, 0.0), (1.0, 0.0), (2.0, 0.0), (3.0, 0.0)]);
        let (tris, stats) = triangulate(&line);
        assert_eq!(tris.len(), 2);
        assert_eq!(stats.no_ear, 0, "no area: fanned before clipping");
    }

    #[test]
    fn a_comb_with_many_reflex_corners_is_exact() {
        // Teeth 1 wide and 2 high, 1 apart, on a base 1 high.
        let teeth = 50;
        let width = 2.0 * teeth as f32 - 1.0;
        let mut pts = vec![(0.0, 0.0), (width, 0.0)];
        for k in (0..teeth).rev() {
            let x = 2.0 * k as f32;
            pts.extend([(x + 1.0, 3.0), (x, 3.0)]);
            if k > 0 {
                pts.extend([(x, 1.0), (x - 1.0, 1.0)]);
            }
        }
        let comb = xy(&pts);
        assert_eq!(signed_area(&comb), width + 2.0 * teeth as f32);
        let (tris, stats) = triangulate(&comb);
        assert_eq!(tris.len(), comb.len() - 2);
        assert!((area(&comb, &tris) - signed_area(&comb)).abs() < 1e-3);
        assert_facing(&comb, &tris, Vec3::Z);
        assert_eq!(stats, PolygonStats::default());
    }

    #[test]
    fn huge_polygons_are_fanned_and_counted() {
        let n = MAX_EAR_CLIPPED + 1;
        let circle: Vec<Vec3> = (0..n)
            .map(|i| {
                let a = i as f32 * std::f32::consts::TAU / n as f32;
                Vec3::new(a.cos(), a.sin(), 0.0)
            })
            .collect();
        let (tris, stats) = triangulate(&circle);
        assert_eq!(tris.len(), n - 2);
        assert_eq!(stats.too_large, 1);
    }
}
