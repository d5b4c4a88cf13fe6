//! The SPPM render loop: eye pass, grid, photon pass, update, per pass.

use super::gather::{photon_pass, photon_settings};
use super::grid::VisiblePointGrid;
use super::pixels::PixelStats;
use super::visible::{EyeSettings, eye_pass};
use super::{AUTO_RADIUS_PIXELS, SppmError, SppmSettings, SppmStats};
use crate::{Film, RenderScene};
use caustic_scene::Camera;
use std::ops::ControlFlow;
use std::time::Instant;

/// The state after a pass, handed to the per-pass callback.
pub struct PassView<'a> {
    /// Passes done (1 after the first).
    pub passes: u32,
    pub stats: &'a SppmStats,
    pub pixels: &'a PixelStats,
}

impl PassView<'_> {
    /// The image so far (costs one pass over the pixels: build it only
    /// for the passes you write or score).
    pub fn film(&self) -> Film {
        self.pixels.film()
    }
}

/// Renders `scene` through `camera`; `progress` is called with the number
/// of passes done after each pass.
pub fn render(
    scene: &RenderScene,
    camera: &Camera,
    settings: &SppmSettings,
    progress: &(dyn Fn(u32) + Sync),
) -> Result<(Film, SppmStats), SppmError> {
    render_passes(scene, camera, settings, &mut |view| {
        progress(view.passes);
        ControlFlow::Continue(())
    })
}

/// Renders like [`render`], calling `on_pass` after every pass with the
/// state so far, so a caller can write or score intermediate images. A
/// `Break` from it ends the render there (a viewer whose camera moved):
/// the image and statistics are those of the passes done.
pub fn render_passes(
    scene: &RenderScene,
    camera: &Camera,
    settings: &SppmSettings,
    on_pass: &mut dyn FnMut(&PassView) -> ControlFlow<()>,
) -> Result<(Film, SppmStats), SppmError> {
    settings.validate()?;
    if !camera.is_valid() {
        return Err(SppmError("the camera frame is degenerate".into()));
    }
    let start = Instant::now();
    let mut pixels = PixelStats::new(settings.width, settings.height);
    let mut stats = SppmStats::default();
    for pass in 0..settings.passes {
        run_pass(scene, camera, settings, pass, &mut pixels, &mut stats);
        stats.seconds = start.elapsed().as_secs_f64();
        stats.mean_radius = pixels.mean_radius();
        let view = PassView {
            passes: pass + 1,
            stats: &stats,
            pixels: &pixels,
        };
        if on_pass(&view).is_break() {
            break;
        }
    }
    Ok((pixels.film(), stats))
}

/// One eye pass and one photon pass, folded into `pixels`.
fn run_pass(
    scene: &RenderScene,
    camera: &Camera,
    settings: &SppmSettings,
    pass: u32,
    pixels: &mut PixelStats,
    stats: &mut SppmStats,
) {
    let clock = Instant::now();
    let eye = eye_pass(scene, camera, &eye_settings(settings), pass);
    pixels.init_radii(&eye.points, settings.initial_radius, AUTO_RADIUS_PIXELS);
    let radii = pixels.radii(&eye.points);
    stats.eye_seconds += clock.elapsed().as_secs_f64();

    let clock = Instant::now();
    let positions: Vec<_> = eye.points.iter().map(|p| p.position).collect();
    let grid = VisiblePointGrid::build(&positions, &radii);
    stats.grid_seconds += clock.elapsed().as_secs_f64();

    let clock = Instant::now();
    let photon = photon_settings(
        settings.photons_per_pass,
        settings.max_depth,
        settings.seed,
        pass,
    );
    let photons = photon_pass(scene, &photon, &eye.points, &radii, &grid);
    let photon_total = clock.elapsed().as_secs_f64();
    stats.photon_seconds += photons.trace_seconds;
    stats.gather_seconds += photon_total - photons.trace_seconds;

    pixels.add_pass(&eye, &photons, settings.alpha as f64);
    stats.passes += 1;
    stats.photons_emitted += photons.emitted;
    stats.photons_stored += photons.stored;
    stats.deposits += photons.deposits;
    stats.rays += eye.rays + photons.rays;
}

fn eye_settings(settings: &SppmSettings) -> EyeSettings {
    EyeSettings {
        width: settings.width,
        height: settings.height,
        max_depth: settings.max_depth,
        light_samples: settings.light_samples,
        seed: settings.seed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use caustic_scene::Scene;

    #[test]
    fn a_break_ends_the_render_after_that_pass() {
        let scene = Scene::builtin("cornell-box").expect("a built-in scene");
        let rs = RenderScene::new(&scene, "bvh-binned").unwrap();
        let settings = SppmSettings {
            width: 8,
            height: 8,
            passes: 6,
            photons_per_pass: 500,
            ..SppmSettings::default()
        };
        let camera = scene.camera_or_default();
        let mut seen = Vec::new();
        let (film, stats) = render_passes(&rs, &camera, &settings, &mut |view| {
            seen.push(view.passes);
            if view.passes == 2 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
        .unwrap();
        assert_eq!(seen, [1, 2]);
        assert_eq!(stats.passes, 2);
        assert!(film.mean().x > 0.0, "the image of the two passes done");
    }
}
