//! Irradiance samples placed adaptively in screen space, and their
//! interpolation (Zeidan 2011, §6.2.3–6.2.4, after Wang et al. 2009).
//!
//! A final gather per shading point is the expensive part of photon
//! mapping; indirect irradiance changes slowly, so it is gathered at a few
//! thousand *irradiance samples* and interpolated between them.
//!
//! **Seeding.** The diffuse shading points seen from the pixel centres
//! (directly or through mirrors and glass) are sorted by the Morton code of
//! their pixel, which makes every node of a screen-space quadtree a
//! contiguous run. The sample budget `K` starts at the root and goes down
//! the tree, each child getting a share proportional to its error
//!
//! `η = Σ_i α‖x_i − x̄‖ + sqrt(2 − 2 n_i·n̄)` (Zeidan 2011, eq. 6.1)
//!
//! over its points (`x̄`, `n̄` the node's mean position and normal), shares
//! rounded by largest remainder so the total stays `K`. Where geometry
//! bends (edges, corners, the spheres) the error, and so the sample
//! density, is high; flat walls get samples in proportion to their
//! extent. A node that receives one sample, or a pixel, picks its samples
//! by jittered selection along its run. The thesis's k-means refinement is
//! left out (it gives no details). `α` is `position_weight / scene
//! diagonal`, so the metric does not depend on the scene's units.
//!
//! **Interpolation.** Each sample stores its gathered irradiance and a
//! validity radius `R_i = min(a · H_i, 2 d_i)`: `H_i` the harmonic mean
//! distance of its gather rays (Ward 1988: small next to other surfaces,
//! where irradiance changes fast), `d_i` the distance to its 4th nearest
//! fellow sample (the local sample spacing). A shading point takes the
//! samples within their radius whose normal is within the tolerance,
//! weighted by `(1 − d/R_i)` times the normal agreement. A point no sample
//! covers gets its own final gather: the interpolation never leaves holes,
//! it only saves work where the samples suffice (the thesis leaves out
//! Ward's radius; without it corners and contact shadows blur).

use super::gather::Gathered;
use crate::draw;
use crate::tiles::morton2;
use caustic_accel::points::{Neighbour, PointStructure, build_point_structure};
use caustic_geom::{Rgb, Vec3};

/// Random-number purpose: jittered selection of seeds inside a node.
const JITTER: u64 = 0x6a69_7474;

/// Samples looked at per interpolation.
const NEIGHBOURS: usize = 8;

/// The sample spacing is measured to this nearest fellow sample.
const SPACING_NEIGHBOUR: usize = 4;

/// How irradiance samples are placed and used.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SampleSettings {
    /// Average screen distance between samples, in pixels: `K = pixels /
    /// spacing²` samples.
    pub spacing: f32,
    /// `α · scene diagonal` of the seeding error metric.
    pub position_weight: f32,
    /// Ward's accuracy constant `a` of the validity radius `a · H_i`.
    pub ward_scale: f32,
    /// Smallest cosine between a point's normal and a sample's.
    pub normal_cos: f32,
}

impl Default for SampleSettings {
    fn default() -> Self {
        Self {
            spacing: 4.0,
            position_weight: 10.0,
            ward_scale: 0.5,
            normal_cos: 0.9,
        }
    }
}

/// A diffuse shading point seen from a pixel: seeding input.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ShadingPoint {
    pub pixel: (u32, u32),
    pub position: Vec3,
    /// Unit shading normal on the viewer's side.
    pub normal: Vec3,
}

/// Chooses about `count` of `points` (returned as indices, ascending) by
/// the error-driven quadtree descent described in the module header.
pub fn seed(points: &[ShadingPoint], count: usize, alpha: f32, seed: u64) -> Vec<usize> {
    let max_side = points
        .iter()
        .map(|p| p.pixel.0.max(p.pixel.1))
        .max()
        .unwrap_or(0);
    let levels = 32 - max_side.leading_zeros();
    let mut order: Vec<(u64, usize)> = points
        .iter()
        .enumerate()
        .map(|(i, p)| (u64::from(morton2(p.pixel.0, p.pixel.1)), i))
        .collect();
    order.sort_unstable();
    let quadtree = Quadtree {
        points,
        order: &order,
        levels,
        alpha,
        seed,
    };
    let mut chosen = Vec::with_capacity(count);
    quadtree.distribute(0, order.len(), 0, count, &mut chosen);
    chosen.sort_unstable();
    chosen.dedup();
    chosen
}

/// The screen-space quadtree as runs of Morton-sorted points.
struct Quadtree<'a> {
    points: &'a [ShadingPoint],
    /// `(Morton code of the pixel, point index)`, sorted.
    order: &'a [(u64, usize)],
    /// Levels below the root: a leaf is one pixel.
    levels: u32,
    alpha: f32,
    seed: u64,
}

impl Quadtree<'_> {
    /// Hands `count` samples to the node `order[lo..hi]` at depth `level`.
    fn distribute(&self, lo: usize, hi: usize, level: u32, count: usize, out: &mut Vec<usize>) {
        if count == 0 || lo == hi {
            return;
        }
        if count == 1 || level >= self.levels || hi - lo <= count {
            self.select(lo, hi, level, count, out);
            return;
        }
        let shift = 2 * (self.levels - level - 1);
        let mut bounds = [lo; 5];
        for c in 0..4u64 {
            let start = bounds[c as usize];
            let len = self.order[start..hi].partition_point(|&(code, _)| (code >> shift) & 3 <= c);
            bounds[c as usize + 1] = start + len;
        }
        let errors: [f64; 4] = std::array::from_fn(|c| self.error(bounds[c], bounds[c + 1]));
        let total: f64 = errors.iter().sum();
        let shares: [f64; 4] = if total > 0.0 {
            errors.map(|e| e / total)
        } else {
            std::array::from_fn(|c| (bounds[c + 1] - bounds[c]) as f64 / (hi - lo) as f64)
        };
        for (c, n) in largest_remainder(count, shares).into_iter().enumerate() {
            self.distribute(bounds[c], bounds[c + 1], level + 1, n, out);
        }
    }

    /// Error of the node `order[lo..hi]`: eq. 6.1 summed over its points.
    fn error(&self, lo: usize, hi: usize) -> f64 {
        if lo == hi {
            return 0.0;
        }
        let run = &self.order[lo..hi];
        let (mut position, mut normal) = (Vec3::ZERO, Vec3::ZERO);
        for &(_, i) in run {
            position += self.points[i].position;
            normal += self.points[i].normal;
        }
        let position = position / run.len() as f32;
        let normal = normal.normalize_or_zero();
        run.iter()
            .map(|&(_, i)| {
                let p = &self.points[i];
                f64::from(self.alpha * p.position.distance(position) + bend(p.normal.dot(normal)))
            })
            .sum()
    }

    /// Jittered selection of `count` points along the run: one uniformly
    /// chosen in each of `count` equal strata.
    fn select(&self, lo: usize, hi: usize, level: u32, count: usize, out: &mut Vec<usize>) {
        let len = hi - lo;
        if len <= count {
            out.extend(self.order[lo..hi].iter().map(|&(_, i)| i));
            return;
        }
        let node_key = draw::mix(draw::mix(self.seed, self.order[lo].0), u64::from(level));
        for j in 0..count {
            let u = draw::uniform(draw::mix(node_key, j as u64), JITTER);
            let at = ((j as f64 + f64::from(u)) * len as f64 / count as f64) as usize;
            out.push(self.order[lo + at.min(len - 1)].1);
        }
    }
}

/// Below this `2 − 2 cos θ` (θ about 0.06°) a normal counts as the mean
/// normal: the `f32` rounding of a unit normal's dot product with itself
/// (about 10^-7) must not give single-point nodes an error, which would
/// share samples among a node's pixels by rounding noise.
pub const BEND_FLOOR: f32 = 1e-6;

/// The normal term of eq. 6.1, `sqrt(2 − 2 cos θ)`, for `cos θ = cosine`.
fn bend(cosine: f32) -> f32 {
    let chord2 = 2.0 - 2.0 * cosine;
    if chord2 > BEND_FLOOR {
        chord2.sqrt()
    } else {
        0.0
    }
}

/// Splits `count` into four integers proportional to `shares` (summing to
/// 1), rounding by largest remainder so that they add up to `count`.
fn largest_remainder(count: usize, shares: [f64; 4]) -> [usize; 4] {
    let exact = shares.map(|s| s * count as f64);
    let mut parts = exact.map(|e| e.floor() as usize);
    let mut left = count.saturating_sub(parts.iter().sum());
    let mut by_remainder = [0usize, 1, 2, 3];
    by_remainder.sort_by(|&a, &b| {
        let (ra, rb) = (exact[a] - exact[a].floor(), exact[b] - exact[b].floor());
        rb.total_cmp(&ra).then(a.cmp(&b))
    });
    for &c in by_remainder.iter().cycle() {
        if left == 0 {
            break;
        }
        if shares[c] > 0.0 {
            parts[c] += 1;
            left -= 1;
        }
    }
    parts
}

/// One irradiance sample.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IrradianceSample {
    pub position: Vec3,
    pub normal: Vec3,
    pub irradiance: Rgb,
    /// Validity radius `R_i`.
    pub radius: f32,
}

/// The gathered samples and a point structure over their positions.
pub struct IrradianceCache {
    samples: Vec<IrradianceSample>,
    index: Box<dyn PointStructure>,
    largest_radius: f32,
    normal_cos: f32,
}

impl IrradianceCache {
    /// Builds the cache from gathered samples: `(point, gather)` pairs.
    pub fn build(
        gathered: &[(ShadingPoint, Gathered)],
        settings: &SampleSettings,
        structure: &str,
    ) -> Result<Self, caustic_accel::points::UnknownPointStructure> {
        let positions: Vec<Vec3> = gathered.iter().map(|(p, _)| p.position).collect();
        let index = build_point_structure(structure, &positions, f32::INFINITY)?;
        let mut scratch = Vec::new();
        let samples: Vec<IrradianceSample> = gathered
            .iter()
            .map(|(p, g)| {
                index.knn(
                    p.position,
                    SPACING_NEIGHBOUR + 1,
                    f32::INFINITY,
                    &mut scratch,
                );
                let spacing = scratch.last().map_or(f32::INFINITY, |n| n.dist2.sqrt());
                IrradianceSample {
                    position: p.position,
                    normal: p.normal,
                    irradiance: g.irradiance,
                    radius: (settings.ward_scale * g.harmonic_distance).min(2.0 * spacing),
                }
            })
            .collect();
        let largest_radius = samples
            .iter()
            .map(|s| s.radius)
            .filter(|r| r.is_finite())
            .fold(0.0f32, f32::max);
        Ok(Self {
            samples,
            index,
            largest_radius,
            normal_cos: settings.normal_cos,
        })
    }

    pub fn len(&self) -> usize {
        self.samples.len()
    }

    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    pub fn samples(&self) -> &[IrradianceSample] {
        &self.samples
    }

    /// Interpolated irradiance at `point` with unit normal `normal`, or
    /// `None` where no sample is valid (the caller gathers there).
    pub fn interpolate(
        &self,
        point: Vec3,
        normal: Vec3,
        scratch: &mut Vec<Neighbour>,
    ) -> Option<Rgb> {
        if self.samples.is_empty() {
            return None;
        }
        self.index
            .knn(point, NEIGHBOURS, self.largest_radius, scratch);
        let (mut sum, mut weights) = (Rgb::ZERO, 0.0f32);
        for n in scratch.iter() {
            let s = &self.samples[n.index as usize];
            let agreement = (s.normal.dot(normal) - self.normal_cos) / (1.0 - self.normal_cos);
            let closeness = 1.0 - n.dist2.sqrt() / s.radius;
            if agreement > 0.0 && closeness > 0.0 {
                let w = agreement.min(1.0) * closeness;
                sum += s.irradiance * w;
                weights += w;
            }
        }
        (weights > 1e-3).then(|| sum / weights)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plane(width: u32, height: u32) -> Vec<ShadingPoint> {
        (0..height)
            .flat_map(|y| (0..width).map(move |x| (x, y)))
            .map(|(x, y)| ShadingPoint {
                pixel: (x, y),
                position: Vec3::new(x as f32, y as f32, 0.0) * 0.01,
                normal: Vec3::Z,
            })
            .collect()
    }

    #[test]
    fn largest_remainder_keeps_the_total() {
        assert_eq!(largest_remainder(10, [0.25; 4]).iter().sum::<usize>(), 10);
        assert_eq!(largest_remainder(3, [0.5, 0.5, 0.0, 0.0]), [2, 1, 0, 0]);
        assert_eq!(largest_remainder(5, [0.0, 0.0, 0.0, 1.0]), [0, 0, 0, 5]);
    }

    #[test]
    fn seeds_cover_a_flat_image_evenly_and_are_deterministic() {
        let points = plane(64, 64);
        let chosen = seed(&points, 256, 10.0, 7);
        assert_eq!(chosen.len(), 256);
        assert_eq!(chosen, seed(&points, 256, 10.0, 7));
        // Every 8x8 block of a flat image gets its share (4).
        let mut per_block = [0u32; 64];
        for &i in &chosen {
            let (x, y) = points[i].pixel;
            per_block[(y / 8 * 8 + x / 8) as usize] += 1;
        }
        assert!(per_block.iter().all(|&n| n == 4), "{per_block:?}");
    }

    #[test]
    fn creases_attract_seeds() {
        // Columns from 37 on face +x, the rest +z: the nodes that straddle
        // the crease get more than the eighth of the samples that columns
        // 32..40 would get on a flat image.
        let mut points = plane(64, 64);
        for p in points.iter_mut().filter(|p| p.pixel.0 >= 37) {
            p.normal = Vec3::X;
        }
        let chosen = seed(&points, 128, 1.0, 1);
        let near = chosen
            .iter()
            .filter(|&&i| (32..40).contains(&points[i].pixel.0))
            .count();
        assert!(near * 8 > chosen.len() * 2, "{near} of {}", chosen.len());
    }
}
