//! The SPPM render loop: eye pass, grid, photon pass, update, per pass.

use super::gather::{gather, photon_settings};
use super::grid::VisiblePointGrid;
use super::pixels::PixelStats;
use super::visible::{EyeSettings, eye_pass_rows};
use super::{AUTO_RADIUS_PIXELS, SppmError, SppmSettings, SppmStats};
use crate::photon::{PhotonSettings, trace_photon_range};
use crate::team::{
    Solo, Team, TeamError, band_film_to_root, gather_concat, share, sum_u64, team_mean,
};
use crate::{Film, RenderScene};
use caustic_scene::Camera;
use std::ops::{ControlFlow, Range};
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
    let mut run = PassRunner::new(scene, camera, settings, &Solo)?;
    for pass in 0..settings.passes {
        run.pass(pass).map_err(team_error)?;
        let view = PassView {
            passes: pass + 1,
            stats: &run.stats,
            pixels: &run.pixels,
        };
        if on_pass(&view).is_break() {
            break;
        }
    }
    Ok((run.pixels.film(), run.stats))
}

/// Renders like [`render`] as one member of `team` (see [`crate::team`]):
/// each member owns a contiguous band of rows (their eye paths, visible
/// points and statistics) and traces a contiguous share of every pass's
/// photons; the pass's photons are exchanged in index order, so each
/// member deposits at its own visible points exactly the photons, in
/// exactly the order, a single process would. The root returns the whole
/// image, bit-identical to [`render`]'s, the other members `None`;
/// `progress` gets the passes done. Statistics count the whole team's rays
/// and deposits.
pub fn render_in_team(
    scene: &RenderScene,
    camera: &Camera,
    settings: &SppmSettings,
    team: &dyn Team,
    progress: &(dyn Fn(u32) + Sync),
) -> Result<(Option<Film>, SppmStats), SppmError> {
    let mut run = PassRunner::new(scene, camera, settings, team)?;
    for pass in 0..settings.passes {
        run.pass(pass).map_err(team_error)?;
        progress(pass + 1);
    }
    let film = run.pixels.film();
    let w = settings.width as usize;
    let mine = film.pixels[run.rows.start as usize * w..run.rows.end as usize * w].to_vec();
    let size = (film.width, film.height);
    let film = band_film_to_root(team, size, mine).map_err(team_error)?;
    let sums = sum_u64(team, &[run.stats.rays, run.stats.deposits]).map_err(team_error)?;
    let mut stats = run.stats;
    (stats.rays, stats.deposits) = (sums[0], sums[1]);
    let (sum, count) = run.pixels.radius_sum();
    stats.mean_radius = team_mean(team, sum, count).map_err(team_error)?;
    Ok((film, stats))
}

fn team_error(e: TeamError) -> SppmError {
    SppmError(format!("team exchange failed: {e}"))
}

/// The passes of one render on one team member: its rows' statistics and
/// its share of the work.
struct PassRunner<'a> {
    scene: &'a RenderScene,
    camera: &'a Camera,
    settings: &'a SppmSettings,
    team: &'a dyn Team,
    /// This member's rows (all of them for a single process).
    rows: Range<u32>,
    pixels: PixelStats,
    stats: SppmStats,
    start: Instant,
}

impl<'a> PassRunner<'a> {
    fn new(
        scene: &'a RenderScene,
        camera: &'a Camera,
        settings: &'a SppmSettings,
        team: &'a dyn Team,
    ) -> Result<Self, SppmError> {
        settings.validate()?;
        if !camera.is_valid() {
            return Err(SppmError("the camera frame is degenerate".into()));
        }
        let rows = share(team, settings.height as u64);
        Ok(Self {
            scene,
            camera,
            settings,
            team,
            rows: rows.start as u32..rows.end as u32,
            pixels: PixelStats::new(settings.width, settings.height),
            stats: SppmStats::default(),
            start: Instant::now(),
        })
    }

    /// One eye pass and one photon pass, folded into the member's pixels.
    fn pass(&mut self, pass: u32) -> Result<(), TeamError> {
        let (scene, settings) = (self.scene, self.settings);
        let clock = Instant::now();
        let eye = eye_pass_rows(
            scene,
            self.camera,
            &eye_settings(settings),
            pass,
            self.rows.clone(),
        );
        let pixels = &mut self.pixels;
        pixels.init_radii(&eye.points, settings.initial_radius, AUTO_RADIUS_PIXELS);
        let radii = pixels.radii(&eye.points);
        let stats = &mut self.stats;
        stats.eye_seconds += clock.elapsed().as_secs_f64();

        let clock = Instant::now();
        let positions: Vec<_> = eye.points.iter().map(|p| p.position).collect();
        let grid = VisiblePointGrid::build(&positions, &radii);
        stats.grid_seconds += clock.elapsed().as_secs_f64();

        let clock = Instant::now();
        let photon = PhotonSettings {
            trace: settings.trace,
            ..photon_settings(
                settings.photons_per_pass,
                settings.max_depth,
                settings.seed,
                pass,
            )
        };
        let share = share(self.team, photon.photons);
        let traced = trace_photon_range(scene, &photon, share, false);
        let trace_seconds = traced.stats.seconds;
        let photon_rays = traced.stats.rays;
        let all = gather_concat(self.team, traced.global)?;
        let mut photons = gather(scene, &all, &eye.points, &radii, &grid);
        photons.emitted = traced.emitted;
        photons.stored = all.len() as u64;
        stats.photon_seconds += trace_seconds;
        stats.gather_seconds += clock.elapsed().as_secs_f64() - trace_seconds;

        pixels.add_pass(&eye, &photons, settings.alpha as f64);
        stats.passes += 1;
        stats.photons_emitted += photons.emitted;
        stats.photons_stored += photons.stored;
        stats.deposits += photons.deposits;
        stats.rays += eye.rays + photon_rays;
        stats.seconds = self.start.elapsed().as_secs_f64();
        stats.mean_radius = pixels.mean_radius();
        Ok(())
    }
}

fn eye_settings(settings: &SppmSettings) -> EyeSettings {
    EyeSettings {
        width: settings.width,
        height: settings.height,
        max_depth: settings.max_depth,
        light_samples: settings.light_samples,
        seed: settings.seed,
        jitter: settings.jitter,
        trace: settings.trace,
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
