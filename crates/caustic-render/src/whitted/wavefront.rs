//! The CPU Whitted renderer by wavefronts, for structures that answer
//! whole batches of rays far faster than one ray at a time (divide-and-
//! conquer ray tracing, `caustic_accel::dacrt`; [`crate::waves`]).
//!
//! A group of tiles (at most [`GROUP_RAYS`](crate::waves::GROUP_RAYS)
//! primary rays, `specular_tree::render_tiles`) is traced as a forest of
//! specular trees wave by wave (`specular_tree::trace`), every hit shaded
//! by the per-ray renderer's own `Tracer::shade`; the direct light of all
//! the group's diffuse and glossy ends comes from one batch of shadow rays
//! ([`direct_light_batch`]), and the forest folds back into the primary
//! rays' radiance with the recursion's sums. The image is the per-ray
//! renderer's bit for bit, whatever the structure, and so is the ray
//! count.

use super::render::Tracer;
use crate::direct::{PathVertex, direct_light_batch};
use crate::specular_tree;
use caustic_geom::{Ray, Rgb};

/// The radiance of a group's primary rays `rays` (path keys `keys`), and
/// the number of rays traced (primary, specular and shadow rays).
pub(super) fn trace_group(tracer: &Tracer, rays: Vec<Ray>, keys: Vec<u64>) -> (Vec<Rgb>, u64) {
    let forest = specular_tree::trace(tracer, rays, keys);
    let ends: Vec<PathVertex> = forest
        .ends
        .iter()
        .map(|end| PathVertex {
            surface: end.surface,
            wo: -end.ray.dir,
            key: end.key,
        })
        .collect();
    let samples = tracer.settings.light_samples;
    let (direct, shadow_rays) = direct_light_batch(tracer.scene, &ends, samples);
    let radiance = forest.fold(&direct, tracer.scene.background);
    (radiance, forest.rays() + shadow_rays)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PinholeCamera;
    use crate::specular_tree::render_tiles;
    use crate::tiles::morton_tiles;
    use crate::waves::{GROUP_RAYS, TraceMode};
    use crate::whitted::{TILE_SIZE, WhittedSettings};
    use crate::{RenderScene, whitted};
    use caustic_scene::Scene;
    use std::sync::atomic::{AtomicU64, Ordering};

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
            trace: TraceMode::PerRay,
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
            let group = |primary, keys| trace_group(&tracer, primary, keys);
            let sampling = tracer.sampling();
            let pixels = render_tiles(
                &tiles, &pinhole, sampling, group_rays, group, &rays, &progress,
            );
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
