//! The CPU Whitted renderer by wavefronts, for structures that answer
//! whole batches of rays far faster than one ray at a time (divide-and-
//! conquer ray tracing, `caustic_accel::dacrt`, which builds nothing
//! between batches and answers a lone ray by brute force).
//!
//! A group of tiles (at most [`GROUP_RAYS`] primary rays, so a frame of any
//! size needs a bounded amount of memory) is traced wave by wave: the
//! wave's rays in one [`Accel::intersect_batch`](caustic_accel::Accel),
//! every hit shaded in parallel (rayon) by the per-ray renderer's own
//! [`Tracer::shade`], the shadow rays of all diffuse and glossy hits in one
//! [`Accel::occluded_batch`](caustic_accel::Accel), and the reflected and
//! refracted branches that go on form the next wave, up to the largest
//! depth. Every traced ray is a node that keeps its [`Shading`], its direct
//! light and where its branches' nodes start; once the last wave is traced
//! the nodes are folded from the last wave back to the first with
//! [`Shading::combine`], the very sums of the recursion, and each pixel
//! adds its samples in order: the image is the per-ray renderer's bit for
//! bit, whatever the structure (the random numbers are keyed by the path,
//! [`crate::draw`], not drawn in order).

use super::render::{Shading, Then, Tracer};
use crate::PinholeCamera;
use crate::tiles::Tile;
use caustic_geom::{Ray, Rgb};
use rayon::prelude::*;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

/// Most primary rays traced together (one 362 × 362 image at 1 spp); a
/// group holds at least one tile. A group's rays, nodes, shadow rays and
/// the structure's own batch scratch take about 1.5 KB per primary ray
/// with four shadow rays per hit (measured: 190 MB peak for the Cornell box
/// at 256 × 256 and 16 spp under DACRT), whatever the frame's size.
pub const GROUP_RAYS: usize = 1 << 17;

/// A traced ray of a group.
struct Node {
    /// What its hit adds; `None` where it missed (the background).
    shading: Option<Shading>,
    /// Its direct light ([`Then::Direct`]), else zero.
    direct: Rgb,
    /// The node of its first traced branch ([`Shading::traced`]); the
    /// others follow it.
    first_child: usize,
}

/// The pixels of `tiles`, each tile's row by row (as [`crate::team::tiled_film_with`]
/// takes them), traced by wavefronts in groups of tiles of at most
/// `group_rays` primary rays (at least one tile); adds the rays traced to
/// `rays` and reports each group's pixels to `progress`.
pub(super) fn render_tiles(
    tracer: &Tracer,
    camera: &PinholeCamera,
    tiles: &[Tile],
    rays: &AtomicU64,
    progress: &(dyn Fn(u64) + Sync),
    group_rays: usize,
) -> Vec<Vec<Rgb>> {
    let spp = tracer.settings.spp.max(1) as usize;
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
        let (pixels, traced) = render_group(tracer, camera, group);
        rays.fetch_add(traced, Ordering::Relaxed);
        progress(pixels.len() as u64);
        let mut pixels = pixels.into_iter();
        for tile in group {
            out.push(pixels.by_ref().take(tile.pixel_count()).collect());
        }
        rest = tail;
    }
    out
}

/// The pixels of `group`'s tiles in order, and the number of rays traced.
fn render_group(tracer: &Tracer, camera: &PinholeCamera, group: &[Tile]) -> (Vec<Rgb>, u64) {
    let spp = tracer.settings.spp.max(1);
    let pixels: Vec<(u32, u32)> = group
        .iter()
        .flat_map(|t| (t.y0..t.y1).flat_map(move |y| (t.x0..t.x1).map(move |x| (x, y))))
        .collect();
    let (mut rays, mut keys): (Vec<Ray>, Vec<u64>) = pixels
        .par_iter()
        .flat_map_iter(|&(x, y)| (0..spp).map(move |s| tracer.camera_ray(camera, x, y, s)))
        .unzip();
    let mut nodes: Vec<Node> = Vec::with_capacity(rays.len());
    let mut waves: Vec<Range<usize>> = Vec::new();
    let mut shadow_rays = 0u64;
    let mut depth = 0;
    while !rays.is_empty() {
        let start = nodes.len();
        let wave = trace_wave(tracer, &rays, &keys, depth, start + rays.len());
        nodes.extend(wave.nodes);
        waves.push(start..nodes.len());
        shadow_rays += wave.shadow_rays;
        (rays, keys) = (wave.next_rays, wave.next_keys);
        depth += 1;
    }
    // Fold the waves back: a node's branches are all in the next wave.
    let background = tracer.scene.background;
    let mut values = vec![Rgb::ZERO; nodes.len()];
    for wave in waves.iter().rev() {
        let (head, later) = values.split_at_mut(wave.end);
        head[wave.clone()]
            .par_iter_mut()
            .zip(&nodes[wave.clone()])
            .for_each(|(value, node)| {
                *value = match &node.shading {
                    None => background,
                    Some(shading) => {
                        let mut child = node.first_child - wave.end;
                        shading.combine(node.direct, |_| {
                            child += 1;
                            later[child - 1]
                        })
                    }
                };
            });
    }
    // The first wave is the primary rays, pixel by pixel, sample by sample.
    let film = values[..pixels.len() * spp as usize]
        .par_chunks(spp as usize)
        .map(|samples| {
            let mut sum = Rgb::ZERO;
            for &radiance in samples {
                sum += radiance;
            }
            sum / spp as f32
        })
        .collect();
    (film, nodes.len() as u64 + shadow_rays)
}

/// A traced wave: its nodes, the branches that go on, and how many shadow
/// rays it traced.
struct Wave {
    nodes: Vec<Node>,
    next_rays: Vec<Ray>,
    next_keys: Vec<u64>,
    shadow_rays: u64,
}

/// Traces `rays` (path keys `keys`, the `depth`-th specular bounce) as one
/// batch, their shadow rays as another, and gives the next wave's rays,
/// whose nodes will start at `next_node`.
fn trace_wave(tracer: &Tracer, rays: &[Ray], keys: &[u64], depth: u32, next_node: usize) -> Wave {
    let scene = tracer.scene;
    let mut hits = vec![None; rays.len()];
    scene.accel.intersect_batch(rays, &mut hits);
    // Shade every hit; collect the shadow rays of direct light, in the
    // order `direct_light_with` asks for them.
    let shaded: Vec<_> = (rays, keys, &hits)
        .into_par_iter()
        .map(|(ray, &key, hit)| {
            let hit = hit.as_ref()?;
            let surface = scene.surface(ray, hit);
            let shading = tracer.shade(ray, &surface, depth, key);
            let mut shadows = Vec::new();
            if let Then::Direct = shading.then {
                tracer.direct(ray, &surface, key, |shadow| {
                    shadows.push(*shadow);
                    true
                });
            }
            Some((surface, shading, shadows))
        })
        .collect();
    let mut offsets = Vec::with_capacity(shaded.len());
    let mut shadow_count = 0;
    for node in &shaded {
        offsets.push(shadow_count);
        shadow_count += node.as_ref().map_or(0, |(_, _, shadows)| shadows.len());
    }
    let mut shadows = Vec::with_capacity(shadow_count);
    for (_, _, node_shadows) in shaded.iter().flatten() {
        shadows.extend_from_slice(node_shadows);
    }
    let mut occluded = vec![false; shadows.len()];
    scene.accel.occluded_batch(&shadows, &mut occluded);
    // The same direct light again, its shadow rays answered by the batch.
    let direct: Vec<Rgb> = (&shaded, rays, keys, &offsets)
        .into_par_iter()
        .map(|(node, ray, &key, &offset)| match node {
            Some((surface, shading, _)) if matches!(shading.then, Then::Direct) => {
                let mut answers = occluded[offset..].iter();
                tracer.direct(ray, surface, key, |_| {
                    answers.next().copied().unwrap_or(true)
                })
            }
            _ => Rgb::ZERO,
        })
        .collect();
    let mut wave = Wave {
        nodes: Vec::with_capacity(shaded.len()),
        next_rays: Vec::new(),
        next_keys: Vec::new(),
        shadow_rays: shadow_count as u64,
    };
    for (node, direct) in shaded.into_iter().zip(direct) {
        let shading = node.map(|(_, shading, _)| shading);
        let first_child = next_node + wave.next_rays.len();
        for branch in shading.iter().flat_map(|s| s.traced()) {
            wave.next_rays.push(branch.ray);
            wave.next_keys.push(branch.key);
        }
        wave.nodes.push(Node {
            shading,
            direct,
            first_child,
        });
    }
    wave
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tiles::morton_tiles;
    use crate::whitted::{TILE_SIZE, WhittedSettings, WhittedTrace};
    use crate::{RenderScene, whitted};
    use caustic_scene::Scene;

    /// Groups of one tile or a few give the pixels and ray count of one
    /// group of the whole image, and both are the per-ray renderer's.
    #[test]
    fn groups_of_any_size_give_the_per_ray_pixels() {
        let scene = Scene::builtin("cornell-caustics").expect("a built-in scene");
        let rs = RenderScene::new(&scene, "bvh-wide").expect("the scene flattens");
        let camera = scene.camera_or_default();
        let settings = WhittedSettings {
            width: 19,
            height: 13,
            spp: 2,
            trace: WhittedTrace::PerRay,
            ..WhittedSettings::default()
        };
        let (per_ray, stats) = whitted::render(&rs, &camera, &settings, &|_| {});
        let pinhole = PinholeCamera::new(&camera, settings.width, settings.height);
        let tracer = Tracer {
            scene: &rs,
            settings: &settings,
        };
        let tiles = morton_tiles(settings.width, settings.height, TILE_SIZE);
        for group_rays in [1, 150, GROUP_RAYS] {
            let rays = AtomicU64::new(0);
            let reported = AtomicU64::new(0);
            let progress = |n| {
                reported.fetch_add(n, Ordering::Relaxed);
            };
            let pixels = render_tiles(&tracer, &pinhole, &tiles, &rays, &progress, group_rays);
            assert_eq!(rays.into_inner(), stats.rays, "groups of {group_rays}");
            assert_eq!(reported.into_inner(), 19 * 13, "groups of {group_rays}");
            let mut differing = 0;
            for (tile, pixels) in tiles.iter().zip(&pixels) {
                assert_eq!(pixels.len(), tile.pixel_count());
                let mut it = pixels.iter();
                for y in tile.y0..tile.y1 {
                    for x in tile.x0..tile.x1 {
                        let bits = |p: Rgb| p.to_array().map(f32::to_bits);
                        let got = *it.next().expect("a pixel per place");
                        differing += usize::from(bits(got) != bits(per_ray.get(x, y)));
                    }
                }
            }
            assert_eq!(differing, 0, "groups of {group_rays}: pixels differ");
        }
    }
}
