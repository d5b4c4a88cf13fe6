//! Per-pixel statistics of SPPM (Hachisuka & Jensen 2009, §4; the
//! progressive radius reduction of Hachisuka et al. 2008):
//!
//! - `N`: the photon count the estimate keeps, `R`: the gather radius,
//!   `τ`: the flux gathered within `R` (unnormalised);
//! - after a pass in which the pixel's visible point found `M` photons with
//!   flux `Φ`: `N' = N + αM`, `R' = R √(N' / (N + M))`,
//!   `τ' = (τ + Φ) (R' / R)²` — a fraction `α` of the new photons is kept
//!   and the radius shrinks so that the density `N / πR²` stays the same;
//! - the ray-traced radiance of each pass (emission, direct light) is
//!   summed as it is: it is unbiased per pass.
//!
//! After `n` passes the pixel is `S / n + τ / (n π R²)` (photon powers are
//! already divided by the photons emitted per pass). Sums are `f64`: a
//! thousand passes of `f32` additions would lose the last digits the
//! convergence tests look at.

use super::gather::PhotonPass;
use super::visible::{EyePass, VisiblePoint};
use crate::Film;
use caustic_geom::DVec3;
use std::f64::consts::PI;

/// One pixel's running statistics.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PixelState {
    /// Photons kept (`N`).
    pub photons: f64,
    /// Gather radius; 0 until the pixel's first visible point sets it.
    pub radius: f64,
    /// Flux gathered within the radius (`τ`).
    pub flux: DVec3,
    /// Sum over passes of the ray-traced radiance.
    pub traced: DVec3,
}

/// The statistics of every pixel, row-major.
#[derive(Clone, Debug)]
pub struct PixelStats {
    pub width: u32,
    pub height: u32,
    pub pixels: Vec<PixelState>,
    /// Passes accumulated.
    pub passes: u32,
}

impl PixelStats {
    pub fn new(width: u32, height: u32) -> Self {
        Self {
            width,
            height,
            pixels: vec![PixelState::default(); width as usize * height as usize],
            passes: 0,
        }
    }

    /// Gives each pixel that has no radius yet its initial radius:
    /// `fixed` when given, else `pixels` footprints at its visible point.
    pub fn init_radii(&mut self, points: &[VisiblePoint], fixed: Option<f32>, pixels: f32) {
        for point in points {
            let state = &mut self.pixels[point.pixel as usize];
            if state.radius > 0.0 {
                continue;
            }
            let r = fixed.unwrap_or(pixels * point.footprint);
            if r.is_finite() && r > 0.0 {
                state.radius = r as f64;
            }
        }
    }

    /// The radius of each visible point's pixel, in point order.
    pub fn radii(&self, points: &[VisiblePoint]) -> Vec<f32> {
        points
            .iter()
            .map(|p| self.pixels[p.pixel as usize].radius as f32)
            .collect()
    }

    /// Adds one pass: the eye pass's traced radiance, and the photon pass's
    /// deposits through the progressive update with parameter `alpha`.
    pub fn add_pass(&mut self, eye: &EyePass, photons: &PhotonPass, alpha: f64) {
        let covered = &mut self.pixels[eye.first_pixel as usize..];
        for (state, l) in covered.iter_mut().zip(&eye.radiance) {
            state.traced += l.as_dvec3();
        }
        for (i, point) in eye.points.iter().enumerate() {
            let state = &mut self.pixels[point.pixel as usize];
            update(
                state,
                photons.found[i] as f64,
                photons.flux[i].as_dvec3(),
                alpha,
            );
        }
        self.passes += 1;
    }

    /// The image after the passes so far.
    pub fn film(&self) -> Film {
        let mut film = Film::new(self.width, self.height);
        let n = self.passes.max(1) as f64;
        for (out, state) in film.pixels.iter_mut().zip(&self.pixels) {
            let mut l = state.traced / n;
            if state.radius > 0.0 {
                l += state.flux / (n * PI * state.radius * state.radius);
            }
            *out = l.as_vec3();
        }
        film
    }

    /// Mean radius over the pixels that have one.
    pub fn mean_radius(&self) -> f64 {
        let (sum, count) = self.radius_sum();
        if count == 0.0 { 0.0 } else { sum / count }
    }

    /// The sum of the radii of the pixels that have one, and their count
    /// (a team adds its members' before dividing).
    pub fn radius_sum(&self) -> (f64, f64) {
        self.pixels
            .iter()
            .filter(|s| s.radius > 0.0)
            .fold((0.0, 0.0), |(s, c), p| (s + p.radius, c + 1.0))
    }
}

/// The progressive update of one pixel after its visible point found
/// `found` photons carrying `flux`.
fn update(state: &mut PixelState, found: f64, flux: DVec3, alpha: f64) {
    if found <= 0.0 {
        return;
    }
    let kept = state.photons + alpha * found;
    let shrink2 = kept / (state.photons + found);
    state.flux = (state.flux + flux) * shrink2;
    state.radius *= shrink2.sqrt();
    state.photons = kept;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The update keeps the photon density `N / πR²` and scales the flux
    /// with the disc area.
    #[test]
    fn update_keeps_density() {
        let mut s = PixelState {
            photons: 10.0,
            radius: 1.0,
            flux: DVec3::splat(5.0),
            traced: DVec3::ZERO,
        };
        update(&mut s, 6.0, DVec3::splat(3.0), 2.0 / 3.0);
        assert!((s.photons - 14.0).abs() < 1e-12);
        assert!((s.radius * s.radius - 14.0 / 16.0).abs() < 1e-12);
        assert!((s.flux.x - 8.0 * 14.0 / 16.0).abs() < 1e-12);
        let before = s;
        update(&mut s, 0.0, DVec3::ZERO, 2.0 / 3.0);
        assert_eq!(s, before);
    }
}
