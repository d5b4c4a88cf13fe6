//! Collision detection of moving agents against a static scene by ray
//! segments: the experiment of Vinkler, Bittner, Havran and Hapala 2013,
//! §6.2. Each agent moves along a random segment inside the scene's box;
//! its `frames` equidistant points are its positions, one per frame. Each
//! frame it shoots `rays` segments uniformly over the sphere, each as long
//! as its step to the next position; the agent collides in that frame when
//! any segment hits the scene, and the nearest hit (distance, triangle) is
//! what it would run into first.
//!
//! Everything is drawn from a seed, ray by ray, so every method and device
//! traces the same rays and must give the same answers; [`FrameAnswers`]
//! reduce each agent's closest hits in a fixed order (nearest distance,
//! then lowest triangle id).

use caustic_geom::{Aabb, Hit, Pcg32, Ray, Vec3};

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

    /// The segments of `frame`: `rays_per_agent` per agent, agent by agent,
    /// each from the agent's position in a uniform direction on the sphere
    /// (unit length, so `t` is the distance), `tmax` its step.
    pub fn frame_rays(&self, frame: usize) -> Vec<Ray> {
        let mut rays = Vec::with_capacity(self.count() * self.rays_per_agent);
        for agent in 0..self.count() {
            let origin = self.position(agent, frame);
            let length = self.step(agent);
            let stream = (frame * self.count() + agent) as u64;
            let mut rng = Pcg32::new(self.seed ^ 0x5eed_c011, stream);
            for _ in 0..self.rays_per_agent {
                let dir = uniform_sphere(rng.next_f32(), rng.next_f32());
                rays.push(Ray::segment(origin, dir, 0.0, length));
            }
        }
        rays
    }

    /// Each agent's answer from the closest hits of [`Agents::frame_rays`]
    /// (same order).
    ///
    /// # Panics
    /// If `hits` is not one per ray of a frame.
    pub fn answers(&self, hits: &[Option<Hit>]) -> FrameAnswers {
        assert_eq!(hits.len(), self.count() * self.rays_per_agent);
        hits.chunks(self.rays_per_agent.max(1))
            .take(self.count())
            .map(|agent_hits| {
                let nearest = agent_hits.iter().flatten().fold(None, |best, h| {
                    let candidate = (h.t, h.prim);
                    match best {
                        Some((t, prim)) if (t, prim) <= candidate => Some((t, prim)),
                        _ => Some(candidate),
                    }
                });
                AgentAnswer {
                    collides: nearest.is_some(),
                    nearest,
                }
            })
            .collect()
    }
}

/// A uniform direction on the unit sphere from two uniforms in [0, 1).
fn uniform_sphere(u: f32, v: f32) -> Vec3 {
    let z = 1.0 - 2.0 * u;
    let r = (1.0 - z * z).max(0.0).sqrt();
    let phi = 2.0 * std::f32::consts::PI * v;
    Vec3::new(r * phi.cos(), r * phi.sin(), z)
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
}
