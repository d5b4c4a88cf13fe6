//! The specular tree of an eye sample, which the Whitted and the
//! photon-mapping renderers share: what a hit adds ([`Shading`]: its
//! emission, then a dielectric's two Fresnel branches, a mirror's branch,
//! or an *end*, a diffuse or glossy point whose value the renderer
//! computes), how the hit's radiance is summed from its branches'
//! ([`Shading::combine`]), and the tree traced by waves ([`trace`], a
//! [`Forest`] of whole groups of samples) for structures that prefer
//! batches ([`crate::waves`]).
//!
//! One ray at a time, a renderer recurses: shade the hit, value its end,
//! combine with its branches' radiance. By waves, every ray of a wave goes
//! to one [`Accel::intersect_batch`](caustic_accel::Accel::intersect_batch),
//! every hit is shaded in parallel by the same function, the branches that
//! go on form the next wave, up to the largest depth; every traced ray is
//! a node that keeps its [`Shading`] and where its branches' nodes start.
//! The renderer values all the group's ends together (their shadow rays,
//! gathers, estimates in batches), and the nodes are folded from the last
//! wave back to the first with [`Shading::combine`], the very sums of the
//! recursion: the same radiance bit for bit, whatever the structure (the
//! random numbers are keyed by the path, [`crate::draw`], not drawn in
//! order).

use crate::draw;
use crate::tiles::Tile;
use crate::whitted::SPLIT_THRESHOLD;
use crate::{PinholeCamera, RenderScene, SurfaceHit};
use caustic_geom::{Ray, Rgb};
use rayon::prelude::*;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

/// What a ray's hit adds to its radiance, before the radiance of the
/// specular branches it spawns is known.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Shading {
    /// Emitted radiance, where the surface emits towards the ray.
    pub(crate) emission: Option<Rgb>,
    pub(crate) then: Then,
}

/// The rest of a hit's radiance after its emission.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Then {
    Nothing,
    /// `tint ×` the sum of the reflected and refracted branches (each
    /// present where it exists; none past the largest depth).
    Dielectric {
        tint: Rgb,
        branches: [Option<Branch>; 2],
    },
    /// `reflectance ×` the reflected branch (of weight 1).
    Mirror {
        reflectance: Rgb,
        branch: Branch,
    },
    /// An end: a diffuse or glossy point whose value the renderer adds
    /// (Whitted: direct light; photon mapping: direct light, caustics and
    /// indirect light).
    End,
}

/// A specular branch: the ray it continues along, its path key, and the
/// factor its radiance is weighted by (`None`: Russian roulette ended it,
/// it adds zero and is not traced).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Branch {
    pub(crate) ray: Ray,
    pub(crate) key: u64,
    pub(crate) factor: Option<f32>,
}

impl Branch {
    /// A branch of weight `weight`: weak branches survive Russian roulette
    /// with probability `weight / SPLIT_THRESHOLD` and are then weighted by
    /// the threshold, so the estimate stays unbiased.
    pub(crate) fn new(ray: Ray, weight: f32, key: u64) -> Self {
        let factor = if weight >= SPLIT_THRESHOLD {
            Some(weight)
        } else if draw::uniform(key, draw::ROULETTE) * SPLIT_THRESHOLD < weight {
            Some(SPLIT_THRESHOLD)
        } else {
            None
        };
        Self { ray, key, factor }
    }
}

impl Shading {
    /// The branches to trace, in the order [`Shading::combine`] asks for
    /// their radiance.
    pub(crate) fn traced(&self) -> impl Iterator<Item = &Branch> {
        let (first, second) = match &self.then {
            Then::Dielectric {
                branches: [first, second],
                ..
            } => (first.as_ref(), second.as_ref()),
            Then::Mirror { branch, .. } => (Some(branch), None),
            _ => (None, None),
        };
        first
            .into_iter()
            .chain(second)
            .filter(|b| b.factor.is_some())
    }

    /// The hit's radiance from its end's value (`Rgb::ZERO` unless
    /// [`Then::End`]) and the radiance of its traced branches, which
    /// `child` returns, called once per branch of [`Shading::traced`] in
    /// that order. The sums are the per-ray recursion's, in its order.
    pub(crate) fn combine(&self, end: Rgb, mut child: impl FnMut(&Branch) -> Rgb) -> Rgb {
        let mut value = |b: &Branch| b.factor.map_or(Rgb::ZERO, |f| f * child(b));
        let mut radiance = Rgb::ZERO;
        if let Some(emission) = self.emission {
            radiance += emission;
        }
        match &self.then {
            Then::Dielectric { tint, branches } => {
                let mut split = Rgb::ZERO;
                for branch in branches.iter().flatten() {
                    split += value(branch);
                }
                radiance += *tint * split;
            }
            Then::Mirror {
                reflectance,
                branch,
            } => radiance += *reflectance * value(branch),
            Then::End => radiance += end,
            Then::Nothing => {}
        }
        radiance
    }
}

/// A renderer's shading decision at a hit of its specular tree.
pub(crate) trait Shader: Sync {
    fn scene(&self) -> &RenderScene;

    /// What the hit `surface` of `ray` (the `depth`-th specular bounce,
    /// path key `key`) adds.
    fn shade(&self, ray: &Ray, surface: &SurfaceHit, depth: u32, key: u64) -> Shading;
}

/// An end of a tree traced by waves: the ray that reached it, its hit and
/// its path key.
#[derive(Clone, Copy, Debug)]
pub(crate) struct End {
    pub(crate) ray: Ray,
    pub(crate) surface: SurfaceHit,
    pub(crate) key: u64,
}

/// A traced ray of a [`Forest`].
struct Node {
    /// What its hit adds; `None` where it missed (the background).
    shading: Option<Shading>,
    /// Its place in [`Forest::ends`] where it is an end.
    end: Option<usize>,
    /// The node of its first traced branch ([`Shading::traced`]); the
    /// others follow it.
    first_child: usize,
}

/// The specular trees of a group of samples, traced by waves: nodes wave
/// after wave (the first wave is the samples' first rays, in order), and
/// the ends in node order.
pub(crate) struct Forest {
    nodes: Vec<Node>,
    waves: Vec<Range<usize>>,
    pub(crate) ends: Vec<End>,
}

/// Traces the trees of the first rays `rays` (path keys `keys`) wave by
/// wave, each shaded by `shader`, to the largest depth its shading allows.
pub(crate) fn trace(shader: &impl Shader, mut rays: Vec<Ray>, mut keys: Vec<u64>) -> Forest {
    let mut forest = Forest {
        nodes: Vec::with_capacity(rays.len()),
        waves: Vec::new(),
        ends: Vec::new(),
    };
    let mut depth = 0;
    while !rays.is_empty() {
        let start = forest.nodes.len();
        (rays, keys) = forest.trace_wave(shader, &rays, &keys, depth);
        forest.waves.push(start..forest.nodes.len());
        depth += 1;
    }
    forest
}

impl Forest {
    /// Rays traced: one per node.
    pub(crate) fn rays(&self) -> u64 {
        self.nodes.len() as u64
    }

    /// Traces `rays` (path keys `keys`, the `depth`-th specular bounce) as
    /// one batch, adds their nodes, and gives the next wave's rays and keys.
    fn trace_wave(
        &mut self,
        shader: &impl Shader,
        rays: &[Ray],
        keys: &[u64],
        depth: u32,
    ) -> (Vec<Ray>, Vec<u64>) {
        let scene = shader.scene();
        let mut hits = vec![None; rays.len()];
        scene.accel.intersect_batch(rays, &mut hits);
        let shaded: Vec<Option<(SurfaceHit, Shading)>> = (rays, keys, &hits)
            .into_par_iter()
            .map(|(ray, &key, hit)| {
                let surface = scene.surface(ray, hit.as_ref()?);
                Some((surface, shader.shade(ray, &surface, depth, key)))
            })
            .collect();
        let next_node = self.nodes.len() + rays.len();
        let (mut next_rays, mut next_keys) = (Vec::new(), Vec::new());
        for ((node, ray), &key) in shaded.into_iter().zip(rays).zip(keys) {
            let first_child = next_node + next_rays.len();
            let mut end = None;
            if let Some((surface, shading)) = &node {
                if let Then::End = shading.then {
                    end = Some(self.ends.len());
                    self.ends.push(End {
                        ray: *ray,
                        surface: *surface,
                        key,
                    });
                }
                for branch in shading.traced() {
                    next_rays.push(branch.ray);
                    next_keys.push(branch.key);
                }
            }
            self.nodes.push(Node {
                shading: node.map(|(_, shading)| shading),
                end,
                first_child,
            });
        }
        (next_rays, next_keys)
    }

    /// The radiance of the first wave's rays, the ends valued by
    /// `end_values` (in the order of [`Forest::ends`]) and misses by
    /// `background`: the nodes folded from the last wave back, a node's
    /// branches being all in the next wave.
    pub(crate) fn fold(&self, end_values: &[Rgb], background: Rgb) -> Vec<Rgb> {
        let mut values = vec![Rgb::ZERO; self.nodes.len()];
        for wave in self.waves.iter().rev() {
            let (head, later) = values.split_at_mut(wave.end);
            head[wave.clone()]
                .par_iter_mut()
                .zip(&self.nodes[wave.clone()])
                .for_each(|(value, node)| {
                    *value = match &node.shading {
                        None => background,
                        Some(shading) => {
                            let end = node.end.map_or(Rgb::ZERO, |e| end_values[e]);
                            let mut child = node.first_child - wave.end;
                            shading.combine(end, |_| {
                                child += 1;
                                later[child - 1]
                            })
                        }
                    };
                });
        }
        values.truncate(self.waves.first().map_or(0, |w| w.len()));
        values
    }

    /// The ends of each first ray's tree in the order the per-ray
    /// recursion meets them (depth first, branches in [`Shading::traced`]
    /// order), the trees in order: `(first ray, end)` pairs, the end an
    /// index into [`Forest::ends`].
    pub(crate) fn ends_depth_first(&self) -> Vec<(usize, usize)> {
        let roots = self.waves.first().map_or(0, |w| w.len());
        let mut order = Vec::with_capacity(self.ends.len());
        let mut stack = Vec::new();
        for root in 0..roots {
            stack.push(root);
            while let Some(n) = stack.pop() {
                let node = &self.nodes[n];
                order.extend(node.end.map(|end| (root, end)));
                let children = node.shading.as_ref().map_or(0, |s| s.traced().count());
                stack.extend((node.first_child..node.first_child + children).rev());
            }
        }
        order
    }
}

/// How a renderer's eye samples are placed: `spp` per pixel of an image
/// `width` pixels wide, by [`draw::pixel_sample`] from `seed`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sampling {
    pub(crate) width: u32,
    pub(crate) spp: u32,
    pub(crate) seed: u64,
}

impl Sampling {
    /// Primary sample `s` of pixel `(x, y)` and its path key: through the
    /// pixel centre at 1 spp, else jittered (stratified on a grid when the
    /// count is a square).
    pub(crate) fn camera_ray(&self, camera: &PinholeCamera, x: u32, y: u32, s: u32) -> (Ray, u64) {
        let spp = self.spp.max(1);
        let pixel = u64::from(y) * u64::from(self.width) + u64::from(x);
        let (offset, key) = draw::pixel_sample(self.seed, pixel, s, spp);
        (camera.ray(x as f32 + offset.x, y as f32 + offset.y), key)
    }
}

/// The pixels of `tiles`, each tile's row by row (as
/// [`crate::team::tiled_film_with`] takes them), traced in groups of tiles
/// of at most `group_rays` primary rays (at least one tile): `trace_group`
/// gets a group's primary rays and keys (pixel by pixel, sample by
/// sample) and returns their radiance and the rays it traced; each pixel
/// is the mean of its samples, summed in order. Adds the rays traced to
/// `rays` and reports each group's pixels to `progress`.
pub(crate) fn render_tiles(
    tiles: &[Tile],
    camera: &PinholeCamera,
    sampling: Sampling,
    group_rays: usize,
    trace_group: impl Fn(Vec<Ray>, Vec<u64>) -> (Vec<Rgb>, u64),
    rays: &AtomicU64,
    progress: &(dyn Fn(u64) + Sync),
) -> Vec<Vec<Rgb>> {
    let spp = sampling.spp.max(1) as usize;
    let mut out = Vec::with_capacity(tiles.len());
    let mut rest = tiles;
    while !rest.is_empty() {
        let mut count = rest[0].pixel_count() * spp;
        let mut n = 1;
        while n < rest.len() && count + rest[n].pixel_count() * spp <= group_rays {
            count += rest[n].pixel_count() * spp;
            n += 1;
        }
        let (group, tail) = rest.split_at(n);
        let pixels: Vec<(u32, u32)> = group
            .iter()
            .flat_map(|t| (t.y0..t.y1).flat_map(move |y| (t.x0..t.x1).map(move |x| (x, y))))
            .collect();
        let (primary, keys): (Vec<Ray>, Vec<u64>) = pixels
            .par_iter()
            .flat_map_iter(|&(x, y)| {
                (0..spp as u32).map(move |s| sampling.camera_ray(camera, x, y, s))
            })
            .unzip();
        let (radiance, traced) = trace_group(primary, keys);
        rays.fetch_add(traced, Ordering::Relaxed);
        progress(pixels.len() as u64);
        let film: Vec<Rgb> = radiance
            .par_chunks(spp)
            .map(|samples| {
                let mut sum = Rgb::ZERO;
                for &radiance in samples {
                    sum += radiance;
                }
                sum / spp as f32
            })
            .collect();
        let mut film = film.into_iter();
        for tile in group {
            out.push(film.by_ref().take(tile.pixel_count()).collect());
        }
        rest = tail;
    }
    out
}
