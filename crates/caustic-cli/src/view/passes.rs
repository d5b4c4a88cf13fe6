//! How the image of one look (camera and integrator) is built up, pass by
//! pass, for Whitted and photon mapping: what the next pass is, and the
//! running mean of the passes. The aim is that a camera move shows at
//! once and the image then refines, whatever the device's speed:
//!
//! - The first pass of a look renders the pixel centres (1 sample per
//!   pixel). Where the device would take longer than [`PASS_TARGET_MS`]
//!   for that, it renders a preview first: the centres of a coarser image
//!   (1/s of the resolution per side), shown enlarged and not kept.
//! - While the look is young ([`SETTLE`]: the mouse is likely still
//!   moving) no pass longer than [`PASS_TARGET_MS`] starts; the render
//!   thread waits for the next move or for the look to settle, so a move
//!   never waits behind a long pass.
//! - Then passes of 2 to [`PASS_SAMPLES`] jittered samples per pixel (a
//!   single Whitted sample is always the pixel centre, which adds nothing
//!   new), as many as fit in [`PASS_TARGET_MS`], averaged.

use crate::render::IntegratorName;
use caustic::{Film, Rgb};
use caustic_scene::Camera;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The most samples per pixel of a pass: enough to amortise a
/// photon-mapping pass's photon tracing, few enough that a pass is short.
pub const PASS_SAMPLES: u32 = 4;

/// The time a pass aims at, where the device allows.
pub const PASS_TARGET_MS: f64 = 50.0;

/// How long after a move a look counts as moving.
pub const SETTLE: Duration = Duration::from_millis(300);

/// The coarsest preview: 1/8 of the resolution per side.
const MAX_PREVIEW_SCALE: u32 = 8;

/// What an image is accumulated for; a change restarts it.
#[derive(Clone, Debug, PartialEq)]
pub struct Look {
    pub camera: Camera,
    pub integrator: IntegratorName,
}

/// The next thing to do for a look's image.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Plan {
    /// A one-sample image at 1/`scale` of the resolution per side.
    Preview { scale: u32 },
    /// A full-resolution pass of `samples` per pixel, kept.
    Pass { samples: u32 },
    /// Nothing yet: the look is moving and the next pass is long.
    Settle(Duration),
}

/// The device's measured speed, in milliseconds per sample per pixel, from
/// the last pass of any look (an `f64` in an atomic: the renderer's
/// callbacks share the render thread's state across threads).
#[derive(Default)]
pub struct Speed(AtomicU64);

impl Speed {
    pub fn ms_per_pixel_sample(&self) -> Option<f64> {
        let bits = self.0.load(Ordering::Relaxed);
        (bits != 0).then(|| f64::from_bits(bits))
    }

    /// Records a pass of `samples` over `pixels` that took `ms`.
    pub fn record(&self, ms: f64, pixels: u64, samples: u32) {
        let per = ms / (pixels.max(1) as f64 * f64::from(samples.max(1)));
        if per.is_finite() && per > 0.0 {
            self.0.store(per.to_bits(), Ordering::Relaxed);
        }
    }
}

/// The running mean of a look's passes.
pub struct Accumulation {
    pub look: Look,
    sum: Vec<Rgb>,
    pub samples: u32,
    pub passes: u32,
    previewed: bool,
    started: Instant,
}

impl Accumulation {
    pub fn new(look: Look, now: Instant) -> Self {
        Self {
            look,
            sum: Vec::new(),
            samples: 0,
            passes: 0,
            previewed: false,
            started: now,
        }
    }

    /// The next step at `now` for an image of `pixels` with `left` samples
    /// per pixel to go, on a device of `speed` (ms per pixel sample;
    /// `None` before the first pass measured it).
    pub fn plan(&self, speed: Option<f64>, pixels: u64, left: u32, now: Instant) -> Plan {
        let full_ms = speed.map(|ms| ms * pixels as f64);
        if let Some(ms) = full_ms
            && self.passes == 0
            && !self.previewed
            && ms > PASS_TARGET_MS
        {
            return Plan::Preview {
                scale: preview_scale(ms),
            };
        }
        let samples = self.samples_per_pass(full_ms, left);
        let age = now.saturating_duration_since(self.started);
        let long = full_ms.is_some_and(|ms| ms * f64::from(samples) > PASS_TARGET_MS);
        if age < SETTLE && long {
            return Plan::Settle(SETTLE - age);
        }
        Plan::Pass { samples }
    }

    /// One for the first pass, then 2 to [`PASS_SAMPLES`] as fit in the
    /// target time; at most `left`.
    fn samples_per_pass(&self, full_ms: Option<f64>, left: u32) -> u32 {
        if self.passes == 0 {
            return 1.min(left);
        }
        let most = f64::from(PASS_SAMPLES);
        let fit = full_ms.map_or(most, |ms| (PASS_TARGET_MS / ms.max(1e-9)).floor());
        (fit.clamp(2.0, most) as u32).min(left)
    }

    /// Notes that the look's preview has been shown.
    pub fn previewed(&mut self) {
        self.previewed = true;
    }

    /// Adds a full-resolution pass of `samples` per pixel.
    pub fn add(&mut self, film: &Film, samples: u32) {
        self.sum.resize(film.pixels.len(), Rgb::ZERO);
        for (sum, &value) in self.sum.iter_mut().zip(&film.pixels) {
            *sum += value * samples as f32;
        }
        self.samples += samples;
        self.passes += 1;
    }

    pub fn mean(&self, width: u32, height: u32) -> Film {
        let mut film = Film::new(width, height);
        let scale = 1.0 / self.samples.max(1) as f32;
        for (out, &sum) in film.pixels.iter_mut().zip(&self.sum) {
            *out = sum * scale;
        }
        film
    }
}

/// The finest preview scale at which one sample per pixel fits the
/// target time, for a full-resolution pass of `full_ms`.
fn preview_scale(full_ms: f64) -> u32 {
    (2..=MAX_PREVIEW_SCALE)
        .find(|s| full_ms / f64::from(s * s) <= PASS_TARGET_MS)
        .unwrap_or(MAX_PREVIEW_SCALE)
}

/// `small` shown `scale` times larger (each pixel repeated), cut to
/// `width` × `height`.
pub fn enlarge(small: &Film, scale: u32, width: u32, height: u32) -> Film {
    let mut film = Film::new(width, height);
    let last = (
        small.width.saturating_sub(1),
        small.height.saturating_sub(1),
    );
    for y in 0..height {
        for x in 0..width {
            let from = ((x / scale).min(last.0), (y / scale).min(last.1));
            film.set(x, y, small.get(from.0, from.1));
        }
    }
    film
}

#[cfg(test)]
mod tests {
    use super::*;
    use caustic_geom::Vec3;

    fn look() -> Look {
        Look {
            camera: Camera::look_at(Vec3::Z, Vec3::ZERO, Vec3::Y, 45.0),
            integrator: IntegratorName::Whitted,
        }
    }

    #[test]
    fn a_fast_device_renders_passes_that_fit_the_target() {
        let start = Instant::now();
        let mut image = Accumulation::new(look(), start);
        // Unmeasured, then fast: one centre sample first, no preview.
        assert_eq!(image.plan(None, 100, 64, start), Plan::Pass { samples: 1 });
        let fast = Some(0.01 / 100.0);
        assert_eq!(image.plan(fast, 100, 64, start), Plan::Pass { samples: 1 });
        image.add(&Film::new(10, 10), 1);
        let most = Plan::Pass {
            samples: PASS_SAMPLES,
        };
        assert_eq!(image.plan(fast, 100, 64, start), most);
        assert_eq!(image.plan(fast, 100, 3, start), Plan::Pass { samples: 3 });
        // 15 ms a sample: three fit in the target.
        let steady = Some(15.0 / 100.0);
        assert_eq!(
            image.plan(steady, 100, 64, start),
            Plan::Pass { samples: 3 }
        );
    }

    #[test]
    fn a_slow_device_previews_then_waits_for_the_look_to_settle() {
        let start = Instant::now();
        let mut image = Accumulation::new(look(), start);
        // 200 ms a full-resolution sample: a half-resolution preview is 50.
        let slow = Some(200.0 / 100.0);
        assert_eq!(image.plan(slow, 100, 64, start), Plan::Preview { scale: 2 });
        let slower = Some(3000.0 / 100.0);
        assert_eq!(
            image.plan(slower, 100, 64, start),
            Plan::Preview { scale: 8 }
        );
        image.previewed();
        // While the look is young, no long pass starts...
        let soon = start + Duration::from_millis(100);
        assert_eq!(
            image.plan(slow, 100, 64, soon),
            Plan::Settle(SETTLE - Duration::from_millis(100))
        );
        // ...once it has settled, the passes come, two samples at least.
        let later = start + SETTLE;
        assert_eq!(image.plan(slow, 100, 64, later), Plan::Pass { samples: 1 });
        image.add(&Film::new(10, 10), 1);
        assert_eq!(image.plan(slow, 100, 64, later), Plan::Pass { samples: 2 });
        assert_eq!((image.samples, image.passes), (1, 1));
    }

    #[test]
    fn the_image_is_the_sample_weighted_mean_of_its_passes() {
        let mut image = Accumulation::new(look(), Instant::now());
        let mut film = Film::new(1, 1);
        film.pixels[0] = Rgb::splat(1.0);
        image.add(&film, 1);
        film.pixels[0] = Rgb::splat(4.0);
        image.add(&film, 3);
        assert_eq!(image.mean(1, 1).pixels[0], Rgb::splat(13.0 / 4.0));
    }

    #[test]
    fn previews_are_enlarged_to_the_full_size() {
        let mut small = Film::new(2, 2);
        small.set(1, 0, Rgb::ONE);
        small.set(1, 1, Rgb::splat(0.5));
        let big = enlarge(&small, 2, 3, 3);
        assert_eq!(
            (big.get(0, 0), big.get(2, 0), big.get(2, 2)),
            (Rgb::ZERO, Rgb::ONE, Rgb::splat(0.5))
        );
        let speed = Speed::default();
        assert_eq!(speed.ms_per_pixel_sample(), None);
        speed.record(8.0, 4, 2);
        assert_eq!(speed.ms_per_pixel_sample(), Some(1.0));
    }
}
