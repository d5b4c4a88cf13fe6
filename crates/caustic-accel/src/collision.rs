//! Collision detection of moving agents against a static scene by ray
//! segments: the experiment of Vinkler, Bittner, Havran and Hapala 2013,
//! §6.2. Each agent moves along a random segment inside the scene's box;
//! its `frames` equidistant points are its positions, one per frame. Each
//! frame it shoots `rays` segments uniformly over the sphere, each as long
//! as its step to the next position; the agent collides in that frame when
//! any segment hits the scene, and the nearest hit (distance, triangle) is
//! what it would run into first.
//!
//! Everything is drawn from a seed, so every method and device traces the
//! same rays and must give the same answers. The paths come from a
//! sequential generator; each segment's direction from a counter-based one
//! ([`segment_direction`]: a hash of the seed, the agent, the frame and the
//! ray, in the manner of Salmon et al. 2011, "Parallel random numbers: as
//! easy as 1, 2, 3"), so the GPU makes a frame's rays itself
//! (`collision.cu`) with the same arithmetic, bit for bit, and only the
//! agents' paths go to the device. [`FrameAnswers`] reduce each agent's
//! closest hits by one key ([`nearest_key`]: nearest distance, then lowest
//! triangle id), which the device reduces with too.

use caustic_geom::{Aabb, Hit, Pcg32, Ray, Vec3};
use rayon::prelude::*;

/// Agents moving through a box.
#[derive(Clone, Debug)]
pub struct Agents {
    /// Per agent, its first and last position.
    paths: Vec<(Vec3, Vec3)>,
    frames: usize,
    rays_per_agent: usize,
    seed: u64,
}

/// What one agent meets in one frame.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AgentAnswer {
    /// Whether any of its segments hits the scene.
    pub collides: bool,
    /// The nearest hit of its segments: distance and triangle (ties to the
    /// lowest triangle id).
    pub nearest: Option<(f32, u32)>,
}

/// The answers of every agent in one frame, in agent order.
pub type FrameAnswers = Vec<AgentAnswer>;

impl Agents {
    /// `count` agents on random segments inside `bounds` (the scene's box),
    /// `frames` positions each (at least 2), `rays_per_agent` segments per
    /// frame, all drawn from `seed`.
    pub fn random(
        bounds: &Aabb,
        count: usize,
        frames: usize,
        rays_per_agent: usize,
        seed: u64,
    ) -> Self {
        let mut rng = Pcg32::new(seed, 0xa9e7);
        let mut point = || {
            let u = Vec3::new(rng.next_f32(), rng.next_f32(), rng.next_f32());
            bounds.min + u * bounds.extent()
        };
        let paths = (0..count).map(|_| (point(), point())).collect();
        Self {
            paths,
            frames: frames.max(2),
            rays_per_agent,
            seed,
        }
    }

    pub fn count(&self) -> usize {
        self.paths.len()
    }

    pub fn frames(&self) -> usize {
        self.frames
    }

    pub fn rays_per_agent(&self) -> usize {
        self.rays_per_agent
    }

    /// Where agent `agent` stands in `frame`.
    pub fn position(&self, agent: usize, frame: usize) -> Vec3 {
        let (a, b) = self.paths[agent];
        let s = frame.min(self.frames - 1) as f32 / (self.frames - 1) as f32;
        a + (b - a) * s
    }

    /// The length of agent `agent`'s step between frames: its segments'
    /// length.
    pub fn step(&self, agent: usize) -> f32 {
        let (a, b) = self.paths[agent];
        (b - a).length() / (self.frames - 1) as f32
    }

    /// The agents' paths: per agent its first and last position.
    pub fn paths(&self) -> &[(Vec3, Vec3)] {
        &self.paths
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The fraction of its path an agent has walked in `frame`.
    pub fn progress(&self, frame: usize) -> f32 {
        frame.min(self.frames - 1) as f32 / (self.frames - 1) as f32
    }

    /// The segments of `frame`: `rays_per_agent` per agent, agent by agent,
    /// each from the agent's position in the direction
    /// [`segment_direction`] draws (uniform on the sphere, unit length, so
    /// `t` is the distance), `tmax` its step. An agent's segments are
    /// ordered by [`direction_class`], segment number within a class, so
    /// that neighbouring segments point the same way: 32 consecutive ones
    /// (a GPU warp) then span mostly two octants, and traverse the same
    /// nodes. The answers do not depend on the order.
    pub fn frame_rays(&self, frame: usize) -> Vec<Ray> {
        let per_agent = self.rays_per_agent;
        let mut rays = vec![Ray::segment(Vec3::ZERO, Vec3::Z, 0.0, 0.0); self.count() * per_agent];
        rays.par_chunks_mut(per_agent.max(1))
            .enumerate()
            .for_each(|(agent, chunk)| {
                let origin = self.position(agent, frame);
                let length = self.step(agent);
                let mut dirs: Vec<Vec3> = (0..chunk.len())
                    .map(|ray| segment_direction(self.seed, agent as u32, frame as u32, ray as u32))
                    .collect();
                // Stable, so segment number breaks ties (collision.cu's ranks).
                dirs.sort_by_key(|&dir| direction_class(dir));
                for (slot, dir) in chunk.iter_mut().zip(dirs) {
                    *slot = Ray::segment(origin, dir, 0.0, length);
                }
            });
        rays
    }

    /// Each agent's answer from the closest hits of [`Agents::frame_rays`]
    /// (same order): the smallest [`nearest_key`] of its rays.
    ///
    /// # Panics
    /// If `hits` is not one per ray of a frame.
    pub fn answers(&self, hits: &[Option<Hit>]) -> FrameAnswers {
        assert_eq!(hits.len(), self.count() * self.rays_per_agent);
        if self.rays_per_agent == 0 {
            return vec![AgentAnswer::from_key(NO_HIT_KEY); self.count()];
        }
        hits.chunks(self.rays_per_agent)
            .map(|agent_hits| {
                let key = agent_hits.iter().map(nearest_key).min();
                AgentAnswer::from_key(key.unwrap_or(NO_HIT_KEY))
            })
            .collect()
    }
}

/// The key of [`nearest_key`] for a miss: larger than every hit's.
pub const NO_HIT_KEY: u64 = u64::MAX;

/// The order of an agent's hits as one integer: the distance's bits made
/// monotonic (the sign bit flipped for positive values, every bit for
/// negative ones) above the triangle id, so the smallest key is the
/// nearest hit and, at equal distances, the lowest triangle.
/// `collision.cu`'s `nearest_key` is the same function.
pub fn nearest_key(hit: &Option<Hit>) -> u64 {
    match hit {
        None => NO_HIT_KEY,
        Some(h) => {
            let bits = h.t.to_bits();
            let ordered = if bits & 0x8000_0000 != 0 {
                !bits
            } else {
                bits | 0x8000_0000
            };
            (u64::from(ordered) << 32) | u64::from(h.prim)
        }
    }
}

impl AgentAnswer {
    /// The answer of an agent whose smallest [`nearest_key`] is `key`.
    pub fn from_key(key: u64) -> Self {
        if key == NO_HIT_KEY {
            return Self {
                collides: false,
                nearest: None,
            };
        }
        let ordered = (key >> 32) as u32;
        let bits = if ordered & 0x8000_0000 != 0 {
            ordered & 0x7fff_ffff
        } else {
            !ordered
        };
        Self {
            collides: true,
            nearest: Some((f32::from_bits(bits), key as u32)),
        }
    }
}

/// The splitmix64 finaliser (Steele, Lea and Flood 2014): a bijection of
/// 64-bit words that mixes every input bit into every output bit.
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Attempts of the rejection in [`segment_direction`] before it gives up
/// (each fails with probability 1 - π/4, so 64 fail together with
/// probability below 10^-42).
pub const DIRECTION_ATTEMPTS: u32 = 64;

/// The octant of a direction, the sign of x lowest, so that consecutive
/// classes share the signs of y and z (`collision.cu`'s `direction_class`).
pub fn direction_class(dir: Vec3) -> u32 {
    u32::from(dir.x < 0.0) | (u32::from(dir.y < 0.0) << 1) | (u32::from(dir.z < 0.0) << 2)
}

/// The direction of segment `ray` of `agent` in `frame`: counter-based, a
/// function of its four arguments alone (so any device makes any ray in
/// any order), uniform on the unit sphere by Marsaglia's method (1972): a
/// point `(x1, x2)` uniform in the unit disc by rejection from the square,
/// then `(2 x1 √(1 - s), 2 x2 √(1 - s), 1 - 2 s)` with `s = x1² + x2²`.
/// Only additions, multiplications and a square root, each rounded once,
/// so `collision.cu` computes the same bits (its `segment_direction`).
pub fn segment_direction(seed: u64, agent: u32, frame: u32, ray: u32) -> Vec3 {
    let stream =
        mix64(seed ^ 0x5eed_c011_a9e7_0001 ^ ((u64::from(agent) << 32) | u64::from(frame)));
    for attempt in 0..DIRECTION_ATTEMPTS {
        let h = mix64(stream ^ ((u64::from(ray) << 32) | u64::from(attempt)));
        // Two 24-bit integers, scaled to [-1, 1) exactly.
        let x1 = (h >> 40) as f32 * (1.0 / 8_388_608.0) - 1.0;
        let x2 = ((h >> 16) & 0xff_ffff) as f32 * (1.0 / 8_388_608.0) - 1.0;
        let s = x1 * x1 + x2 * x2;
        if s < 1.0 && s > 0.0 {
            let f = 2.0 * (1.0 - s).sqrt();
            return Vec3::new(x1 * f, x2 * f, 1.0 - 2.0 * s);
        }
    }
    Vec3::Z
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agents_walk_inside_the_box_and_rays_are_reproducible() {
        let bounds = Aabb::new(Vec3::ZERO, Vec3::new(4.0, 2.0, 1.0));
        let agents = Agents::random(&bounds, 50, 20, 16, 3);
        for a in 0..agents.count() {
            for f in 0..20 {
                let p = agents.position(a, f);
                assert!(bounds.contains_point(p), "{p}");
            }
            let step = (agents.position(a, 1) - agents.position(a, 0)).length();
            assert!((step - agents.step(a)).abs() <= 1e-5 * (1.0 + step));
        }
        let rays = agents.frame_rays(7);
        assert_eq!(rays.len(), 50 * 16);
        assert_eq!(rays, agents.frame_rays(7), "the same seed, the same rays");
        assert_ne!(rays, agents.frame_rays(8));
        for r in &rays {
            assert!((r.dir.length() - 1.0).abs() < 1e-5 && r.tmin == 0.0);
        }
        // Directions cover the sphere: every octant is used.
        let mut octants = [false; 8];
        for r in &rays {
            let o = usize::from(r.dir.x > 0.0)
                | usize::from(r.dir.y > 0.0) << 1
                | usize::from(r.dir.z > 0.0) << 2;
            octants[o] = true;
        }
        assert!(octants.iter().all(|&o| o));
    }

    #[test]
    fn answers_take_the_nearest_hit_and_the_lowest_triangle_on_ties() {
        let bounds = Aabb::new(Vec3::ZERO, Vec3::ONE);
        let agents = Agents::random(&bounds, 2, 2, 3, 1);
        let hit = |t, prim| {
            Some(Hit {
                t,
                prim,
                u: 0.0,
                v: 0.0,
            })
        };
        let hits = [hit(0.5, 9), hit(0.25, 7), hit(0.25, 3), None, None, None];
        let answers = agents.answers(&hits);
        assert_eq!(answers[0].nearest, Some((0.25, 3)));
        assert!(answers[0].collides);
        assert_eq!(
            answers[1],
            AgentAnswer {
                collides: false,
                nearest: None
            }
        );
    }

    #[test]
    fn directions_are_counter_based_and_uniform_on_the_sphere() {
        // A function of (seed, agent, frame, ray) alone.
        let d = segment_direction(5, 17, 3, 99);
        assert_eq!(d, segment_direction(5, 17, 3, 99));
        for other in [
            segment_direction(6, 17, 3, 99),
            segment_direction(5, 18, 3, 99),
            segment_direction(5, 17, 4, 99),
            segment_direction(5, 17, 3, 100),
        ] {
            assert_ne!(d, other);
        }
        // Unit length; the mean near zero and each coordinate's second
        // moment near 1/3, as for the uniform distribution on the sphere.
        let n = 200_000u32;
        let mut mean = Vec3::ZERO;
        let mut second = Vec3::ZERO;
        let mut upper = 0u32;
        for ray in 0..n {
            let d = segment_direction(1, ray / 128, ray % 7, ray);
            assert!((d.length() - 1.0).abs() < 1e-6, "{d}");
            mean += d;
            second += d * d;
            upper += u32::from(d.z > 0.5);
        }
        let (mean, second) = (mean / n as f32, second / n as f32);
        assert!(mean.abs().max_element() < 0.01, "mean {mean}");
        assert!(
            (second - Vec3::splat(1.0 / 3.0)).abs().max_element() < 0.01,
            "{second}"
        );
        // The cap z > 1/2 holds a quarter of the sphere's area.
        let cap = f64::from(upper) / f64::from(n);
        assert!((cap - 0.25).abs() < 0.01, "cap {cap}");
    }

    #[test]
    fn direction_classes_are_octants_with_x_lowest() {
        assert_eq!(direction_class(Vec3::new(1.0, 1.0, 1.0)), 0);
        assert_eq!(direction_class(Vec3::new(-1.0, 1.0, 1.0)), 1);
        assert_eq!(direction_class(Vec3::new(1.0, -1.0, 1.0)), 2);
        assert_eq!(direction_class(Vec3::new(-1.0, -1.0, -1.0)), 7);
        assert_eq!(direction_class(Vec3::new(-0.0, 0.0, -0.0)), 0);
    }

    #[test]
    fn frame_rays_follow_the_generator() {
        let bounds = Aabb::new(Vec3::ZERO, Vec3::new(3.0, 1.0, 2.0));
        let per_agent = 40;
        let agents = Agents::random(&bounds, 5, 4, per_agent, 11);
        let rays = agents.frame_rays(2);
        assert_eq!(rays.len(), 5 * per_agent);
        for (agent, chunk) in rays.chunks(per_agent).enumerate() {
            // The agent's segments, by class and within a class by number.
            let mut drawn: Vec<(u32, u32)> = (0..per_agent as u32)
                .map(|ray| {
                    let dir = segment_direction(11, agent as u32, 2, ray);
                    (direction_class(dir), ray)
                })
                .collect();
            drawn.sort();
            for (r, &(class, ray)) in chunk.iter().zip(&drawn) {
                assert_eq!(r.origin, agents.position(agent, 2));
                assert_eq!(r.tmax, agents.step(agent));
                assert_eq!(r.dir, segment_direction(11, agent as u32, 2, ray));
                assert_eq!(direction_class(r.dir), class);
            }
            let classes: Vec<u32> = chunk.iter().map(|r| direction_class(r.dir)).collect();
            assert!(classes.windows(2).all(|w| w[0] <= w[1]), "{classes:?}");
            assert!(classes.iter().any(|&c| c != classes[0]), "one class only");
        }
        assert_eq!(agents.progress(0), 0.0);
        assert_eq!(agents.progress(3), 1.0);
        assert_eq!(agents.progress(9), 1.0);
    }

    #[test]
    fn keys_order_hits_by_distance_then_triangle() {
        let hit = |t: f32, prim| {
            Some(Hit {
                t,
                prim,
                u: 0.5,
                v: 0.25,
            })
        };
        let ordered = [
            hit(-2.0, 0),
            hit(-1.0, 5),
            hit(0.0, 1),
            hit(1e-30, 0),
            hit(0.25, 3),
            hit(0.25, 7),
            hit(0.5, 0),
            hit(f32::MAX, u32::MAX - 1),
            None,
        ];
        for pair in ordered.windows(2) {
            assert!(nearest_key(&pair[0]) < nearest_key(&pair[1]), "{pair:?}");
        }
        for h in ordered {
            let answer = AgentAnswer::from_key(nearest_key(&h));
            assert_eq!(answer.collides, h.is_some());
            assert_eq!(answer.nearest, h.map(|h| (h.t, h.prim)));
        }
        assert_eq!(mix64(0), 0);
        assert_ne!(mix64(1), mix64(2));
    }
}
