//! Stochastic progressive photon mapping (SPPM; Hachisuka & Jensen,
//! "Stochastic Progressive Photon Mapping", SIGGRAPH Asia 2009): the
//! consistent renderer, whose error goes to zero as passes grow.
//!
//! Each pass:
//! 1. **eye pass** ([`visible`]): one jittered primary ray per pixel follows
//!    its specular chain (one branch per dielectric, chosen by Fresnel) to
//!    the first diffuse or glossy surface, the pass's *visible point*.
//!    Emission seen along the chain and direct light at the visible point
//!    (shadow rays, `direct::direct_light`) go straight into the pixel's
//!    running sum;
//! 2. **grid** ([`grid`]): the visible points are hashed into a uniform
//!    grid whose cell edge is twice the largest radius, each point in every
//!    cell its sphere overlaps, so a photon looks into one cell only;
//! 3. **photon pass** ([`gather`]): photons are traced with
//!    `photon::trace_photons` leaving out `L D` (direct light is ray traced,
//!    so nothing counts twice); every stored photon adds `β f Φ` to each
//!    visible point within its pixel's radius;
//! 4. **statistics** ([`pixels`]): per pixel, `N ← N + αM`,
//!    `R ← R √((N + αM) / (N + M))`, `τ ← (τ + Φ) (R_new / R)²`.
//!
//! The pixel value after `n` passes is `S / n + τ / (n π R²)` with `S` the
//! sum of the ray-traced terms: the photon term is the progressive density
//! estimate, whose bias vanishes as `R → 0` while its variance still falls
//! (α < 1), hence consistency.
//!
//! On a CUDA GPU ([`render_cuda`]): the same passes with the same random
//! numbers, the photons gathered at each pixel from a hash grid over the
//! pass's photons instead of deposited from each photon.
//!
//! **Determinism.** Every random number is counter-based: the eye pass draws
//! from `draw` keys (seed, pixel, pass, branch path), photon `i` of
//! pass `p` from `photon_rng(mix(seed, p), i)`. Photons are gathered in
//! fixed chunks of consecutive indices; each chunk lists its deposits in
//! photon order and the chunks are merged in chunk order, so every pixel's
//! sum is formed in the same order for any thread count and the image is
//! bit-identical.

pub mod gather;
pub mod grid;
#[cfg(feature = "cuda")]
pub mod kernels_cuda;
pub mod pixels;
mod renderer;
#[cfg(feature = "cuda")]
pub mod renderer_cuda;
pub mod visible;

pub use renderer::{PassView, render, render_in_team, render_passes};
#[cfg(feature = "cuda")]
pub use renderer_cuda::{
    GpuPassView, SppmCudaError, TeamSplit, render_cuda, render_cuda_in_team,
    render_cuda_in_team_split, render_cuda_on,
};

use std::fmt;

/// What to render and how.
#[derive(Clone, Debug, PartialEq)]
pub struct SppmSettings {
    pub width: u32,
    pub height: u32,
    /// Eye pass + photon pass pairs.
    pub passes: u32,
    /// Photons emitted per pass.
    pub photons_per_pass: u64,
    /// Initial gather radius in scene units; `None`: [`AUTO_RADIUS_PIXELS`]
    /// pixel footprints at each pixel's first visible point.
    pub initial_radius: Option<f32>,
    /// Fraction of the new photons kept per pass, in (0, 1); 2/3 is the
    /// paper's choice.
    pub alpha: f32,
    /// Most specular bounces of an eye path and most bounces of a photon.
    pub max_depth: u32,
    /// Shadow rays per area light at each visible point, per pass.
    pub light_samples: u32,
    pub seed: u64,
    /// Where each pass's primary ray falls inside its pixel.
    pub jitter: PassJitter,
    /// On the CPU, one ray at a time or by waves ([`crate::waves`]): the
    /// image is the same bit for bit either way.
    pub trace: crate::TraceMode,
}

/// Where each pass's primary ray falls inside its pixel. One ray a pixel
/// and pass means a pixel cut by an edge is sampled once a pass: with
/// independent draws its error falls like `1/√passes`, and on the Cornell
/// box the 436 pixels along the light's outline (radiance 18 beside 0.2,
/// 0.17 % of the image) carried 77 % of the squared error after 32 passes
/// (docs/BENCHMARKS.md, "SPPM to the references' noise").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PassJitter {
    /// Each pass's point drawn on its own (the sample key's
    /// [`crate::draw::CAMERA`] numbers).
    Independent,
    /// The passes follow a low-discrepancy sequence, shifted per pixel
    /// ([`crate::draw::pass_jitter`]): each pass's point is still uniform
    /// in the pixel, and the passes together cover it evenly.
    #[default]
    Sequence,
}

/// Initial radius when none is given, in pixel footprints (the width of a
/// pixel's cone at the visible point's distance along the eye path).
pub const AUTO_RADIUS_PIXELS: f32 = 2.0;

impl Default for SppmSettings {
    fn default() -> Self {
        Self {
            width: 512,
            height: 512,
            passes: 64,
            photons_per_pass: 200_000,
            initial_radius: None,
            alpha: 2.0 / 3.0,
            max_depth: 64,
            light_samples: 1,
            seed: 0,
            jitter: PassJitter::default(),
            trace: crate::TraceMode::Auto,
        }
    }
}

/// Settings that cannot be rendered.
#[derive(Clone, Debug, PartialEq)]
pub struct SppmError(pub String);

impl fmt::Display for SppmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SppmError {}

impl SppmSettings {
    /// Checks every value, so that a render never divides by zero or runs
    /// away on a bad command line.
    pub fn validate(&self) -> Result<(), SppmError> {
        let fail = |m: String| Err(SppmError(m));
        if self.width == 0 || self.height == 0 || self.width > 1 << 15 || self.height > 1 << 15 {
            return fail(format!(
                "image size {}x{} is out of range (1..=32768 per side)",
                self.width, self.height
            ));
        }
        if self.passes == 0 {
            return fail("passes must be at least 1".into());
        }
        if self.photons_per_pass == 0 || self.photons_per_pass > u32::MAX as u64 {
            return fail(format!(
                "photons per pass must be in 1..={}, got {}",
                u32::MAX,
                self.photons_per_pass
            ));
        }
        if !(self.alpha > 0.0 && self.alpha < 1.0) {
            return fail(format!("alpha must lie in (0, 1), got {}", self.alpha));
        }
        if let Some(r) = self.initial_radius
            && !(r.is_finite() && r > 0.0)
        {
            return fail(format!("radius must be positive and finite, got {r}"));
        }
        if self.light_samples == 0 {
            return fail("light samples must be at least 1".into());
        }
        Ok(())
    }
}

/// What a render did, summed over its passes.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SppmStats {
    pub passes: u32,
    pub photons_emitted: u64,
    /// Photons stored at diffuse surfaces (all but `L D`).
    pub photons_stored: u64,
    /// Photon–visible-point pairs within the radius.
    pub deposits: u64,
    /// Rays traced: primary, specular, shadow and photon rays.
    pub rays: u64,
    pub eye_seconds: f64,
    pub grid_seconds: f64,
    pub photon_seconds: f64,
    pub gather_seconds: f64,
    /// A team's exchange of each pass's photons, once every member has
    /// traced its share (zero alone; the wait for the slowest member's
    /// eye pass and photons counts in `photon_seconds`); where the team
    /// deals out whole passes, taking over the pixel statistics from the
    /// member before, with the wait for them.
    pub exchange_seconds: f64,
    /// Before the first pass: the per-pixel buffers (GPU).
    pub setup_seconds: f64,
    /// After the last pass: the image and the radii downloaded, a team's
    /// bands exchanged (GPU).
    pub film_seconds: f64,
    /// A GPU team's balance: the fastest and the slowest member's own eye
    /// passes (their work before the pass's radius sums, summed over the
    /// passes); the wait for the slowest member counts in
    /// `photon_seconds` (GPU). Zero alone.
    pub eye_member_seconds: [f64; 2],
    /// The same for the members' own photon tracing.
    pub photon_member_seconds: [f64; 2],
    pub seconds: f64,
    /// Mean gather radius over the pixels that have one, after the last
    /// pass.
    pub mean_radius: f64,
}
