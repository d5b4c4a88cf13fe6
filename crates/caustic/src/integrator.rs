//! The light-transport algorithms and their typed settings: which
//! renderer runs, and with what.

use crate::error::{Error, Result};
use caustic_render::photon::PhotonRenderSettings;
use std::fmt;
use std::str::FromStr;

pub use caustic_render::photon::PhotonRenderStats;
pub use caustic_render::photon::irradiance_samples::SampleSettings;
pub use caustic_render::sppm::{PassJitter, SppmSettings, SppmStats};
pub use caustic_render::{FresnelMode, RenderStats, TraceMode, WhittedSettings};

/// A renderer and its settings; the image size is part of the settings.
///
/// ```
/// use caustic::{Integrator, PhotonSettings};
///
/// let photon = Integrator::Photon(PhotonSettings {
///     width: 320,
///     height: 240,
///     global_photons: 50_000,
///     ..PhotonSettings::default()
/// });
/// assert_eq!(photon.size(), (320, 240));
/// assert_eq!(photon.name(), "photon");
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Integrator {
    /// Whitted ray tracing (Whitted, "An Improved Illumination Model for
    /// Shaded Display", CACM 1980): specular chains from the eye, direct
    /// light by shadow rays at their first diffuse or glossy surface.
    Whitted(WhittedSettings),
    /// Photon mapping (Jensen, "Realistic Image Synthesis Using Photon
    /// Mapping", 2001): direct light by shadow rays, caustics from a
    /// caustic map, indirect light by final gather into a global map at
    /// adaptive irradiance samples (Zeidan's M.Sc. thesis, 2011, §6.2.3).
    Photon(PhotonSettings),
    /// Stochastic progressive photon mapping (Hachisuka and Jensen,
    /// SIGGRAPH Asia 2009): full global illumination, consistent, by
    /// passes.
    Sppm(SppmSettings),
}

impl Integrator {
    /// `whitted`, `photon` or `sppm`: the names the command line uses.
    pub fn name(&self) -> &'static str {
        match self {
            Integrator::Whitted(_) => "whitted",
            Integrator::Photon(_) => "photon",
            Integrator::Sppm(_) => "sppm",
        }
    }

    /// The image size, `(width, height)` in pixels.
    pub fn size(&self) -> (u32, u32) {
        match self {
            Integrator::Whitted(s) => (s.width, s.height),
            Integrator::Photon(s) => (s.width, s.height),
            Integrator::Sppm(s) => (s.width, s.height),
        }
    }

    /// The checks [`Renderer::render`](crate::Renderer::render) makes
    /// before any work: the image size, then the renderer's own. A caller
    /// that prepares a large scene first can refuse bad settings before
    /// paying for the structure.
    ///
    /// ```
    /// use caustic::{Integrator, WhittedSettings};
    ///
    /// let ok = Integrator::Whitted(WhittedSettings::default());
    /// assert!(ok.validate().is_ok());
    /// let huge = Integrator::Whitted(WhittedSettings { width: 1 << 16, ..Default::default() });
    /// assert!(huge.validate().unwrap_err().to_string().contains("image size 65536x512"));
    /// ```
    pub fn validate(&self) -> Result<()> {
        self.check_size()?;
        match self {
            Integrator::Whitted(s) if s.spp == 0 => Err(Error::Settings {
                integrator: "whitted",
                message: "spp must be at least 1".into(),
            }),
            Integrator::Whitted(_) => Ok(()),
            Integrator::Photon(s) => Ok(s.render_settings(false).validate()?),
            Integrator::Sppm(s) => Ok(s.validate()?),
        }
    }

    /// The renderers allocate per pixel: a size of 0 or past 32768 a side
    /// is refused before any work.
    fn check_size(&self) -> Result<()> {
        let (width, height) = self.size();
        if (1..=MAX_SIDE).contains(&width) && (1..=MAX_SIDE).contains(&height) {
            return Ok(());
        }
        Err(Error::Settings {
            integrator: self.name(),
            message: format!(
                "image size {width}x{height} is out of range (1..={MAX_SIDE} per side)"
            ),
        })
    }
}

/// The largest image side the renderers accept.
const MAX_SIDE: u32 = 1 << 15;

/// What a render did; which variant follows the integrator.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Stats {
    Whitted(RenderStats),
    Photon(PhotonRenderStats),
    Sppm(SppmStats),
}

impl Stats {
    /// Wall time of the render in seconds (on a GPU, with the upload).
    pub fn seconds(&self) -> f64 {
        match self {
            Stats::Whitted(s) => s.seconds,
            Stats::Photon(s) => s.seconds,
            Stats::Sppm(s) => s.seconds,
        }
    }

    /// Rays traced, of every kind.
    pub fn rays(&self) -> u64 {
        match self {
            Stats::Whitted(s) => s.rays,
            Stats::Photon(s) => s.rays,
            Stats::Sppm(s) => s.rays,
        }
    }
}

/// The point structure that indexes the photon maps. All three return the
/// same neighbours, so the CPU image does not depend on the choice; the
/// GPU photon mapper indexes its maps with the hash grid only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PhotonMapKind {
    /// `kdtree`: the photon kd-tree (Zhou et al., SIGGRAPH Asia 2008, §5.1;
    /// Zeidan's M.Sc. thesis, 2011, §6.2.2).
    KdTree,
    /// `hashgrid`: spatial hashing (Fleisz, "Photon Mapping on the GPU",
    /// M.Sc. thesis 2009, §3.3–3.4).
    HashGrid,
    /// `brute`: every photon for every query (the reference).
    Brute,
}

impl PhotonMapKind {
    /// The registry name: `kdtree`, `hashgrid` or `brute`.
    pub fn name(self) -> &'static str {
        match self {
            PhotonMapKind::KdTree => "kdtree",
            PhotonMapKind::HashGrid => "hashgrid",
            PhotonMapKind::Brute => "brute",
        }
    }
}

impl fmt::Display for PhotonMapKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for PhotonMapKind {
    type Err = Error;

    fn from_str(name: &str) -> Result<Self> {
        [
            PhotonMapKind::KdTree,
            PhotonMapKind::HashGrid,
            PhotonMapKind::Brute,
        ]
        .into_iter()
        .find(|kind| kind.name() == name.trim())
        .ok_or_else(|| Error::BadPhotonMap(name.to_owned()))
    }
}

/// Settings of the photon-mapping renderer: those of
/// `caustic_render::photon::PhotonRenderSettings`, with the point structure
/// typed and left to the device by default.
#[derive(Clone, Debug, PartialEq)]
pub struct PhotonSettings {
    pub width: u32,
    pub height: u32,
    /// Primary rays per pixel.
    pub spp: u32,
    /// Most specular bounces of eye and gather rays.
    pub max_depth: u32,
    /// Shadow rays per area light at each shaded point.
    pub light_samples: u32,
    pub seed: u64,
    /// Photons emitted for the global map (0: no indirect light).
    pub global_photons: u64,
    /// Photons emitted for the caustic map (0: no caustics).
    pub caustic_photons: u64,
    /// Most surface interactions per photon.
    pub photon_bounces: u32,
    /// Photons per global-map estimate.
    pub k: usize,
    /// Photons per caustic-map estimate.
    pub caustic_k: usize,
    /// Largest global-map search radius, as a fraction of the scene's
    /// bounding-box diagonal.
    pub max_radius: f32,
    /// Largest caustic-map search radius, same unit.
    pub caustic_max_radius: f32,
    /// Cone filter on the caustic estimate (Jensen 2001, §7.2.2).
    pub cone_filter: bool,
    /// Final-gather rays per gather; 0 reads the global map directly.
    pub gather_rays: u32,
    /// Irradiance samples; a spacing of 0 gathers at every shading point.
    pub samples: SampleSettings,
    /// Gather rays read irradiance precomputed at every `precompute`-th
    /// global photon (Christensen, "Faster Photon Map Global Illumination",
    /// JGT 1999); 0 estimates from the global map at every gather hit (CPU
    /// only).
    pub precompute: usize,
    /// The maps' point structure; `None`: the device's own (the kd-tree on
    /// the CPU, the hash grid on a GPU).
    pub points: Option<PhotonMapKind>,
    /// On the CPU, one ray at a time or by waves (`Auto`: waves where the
    /// structure prefers batches, DACRT); the image is the same either way.
    pub trace: TraceMode,
}

impl Default for PhotonSettings {
    /// The renderer's defaults (`PhotonRenderSettings::default()`), the
    /// point structure left to the device.
    fn default() -> Self {
        let r = PhotonRenderSettings::default();
        Self {
            width: r.width,
            height: r.height,
            spp: r.spp,
            max_depth: r.max_depth,
            light_samples: r.light_samples,
            seed: r.seed,
            global_photons: r.global_photons,
            caustic_photons: r.caustic_photons,
            photon_bounces: r.photon_bounces,
            k: r.k,
            caustic_k: r.caustic_k,
            max_radius: r.max_radius,
            caustic_max_radius: r.caustic_max_radius,
            cone_filter: r.cone_filter,
            gather_rays: r.gather_rays,
            samples: r.samples,
            precompute: r.precompute,
            points: None,
            trace: r.trace,
        }
    }
}

impl PhotonSettings {
    /// The point structure the maps get on the CPU (`on_gpu` false) or a
    /// GPU: `points`, or the device's own when it is `None`.
    ///
    /// ```
    /// use caustic::{PhotonMapKind, PhotonSettings};
    ///
    /// let settings = PhotonSettings::default();
    /// assert_eq!(settings.points_on(false), PhotonMapKind::KdTree);
    /// assert_eq!(settings.points_on(true), PhotonMapKind::HashGrid);
    /// ```
    pub fn points_on(&self, on_gpu: bool) -> PhotonMapKind {
        let device_default = if on_gpu {
            PhotonMapKind::HashGrid
        } else {
            PhotonMapKind::KdTree
        };
        self.points.unwrap_or(device_default)
    }

    /// Why the GPU photon mapper would refuse these settings, if it would:
    /// the checks `photon::render_cuda` makes before any GPU work, asked
    /// ahead so that a render can say where it runs before it starts.
    #[cfg(feature = "cuda")]
    pub(crate) fn gpu_refusal(&self) -> Option<String> {
        let max_k = caustic_accel::points::hash_grid_cuda::MAX_K;
        if self.gather_rays > 0 && self.precompute == 0 {
            Some("the GPU final gather reads irradiance precomputed at photons: set precompute (--precompute) to 1 or more".into())
        } else if self.points_on(true) != PhotonMapKind::HashGrid {
            Some("the GPU photon mapper indexes its maps with the hash grid: set points (--points) to hashgrid".into())
        } else if self.k > max_k || self.caustic_k > max_k {
            Some(format!(
                "the GPU photon mapper's estimates take at most {max_k} photons: set k and caustic_k (--k, --caustic-k) to {max_k} or less"
            ))
        } else {
            // Any other check the GPU renderer makes, in its words.
            let settings = self.render_settings(true);
            caustic_render::photon::render_cuda::check(&settings)
                .err()
                .map(|e| e.to_string())
        }
    }

    /// The renderer's own settings for the CPU (`on_gpu` false) or a GPU,
    /// with the point structure of [`PhotonSettings::points_on`].
    pub fn render_settings(&self, on_gpu: bool) -> PhotonRenderSettings {
        // Every field named, so a field added to the renderer's settings
        // fails to compile here until the facade carries it too.
        PhotonRenderSettings {
            width: self.width,
            height: self.height,
            spp: self.spp,
            max_depth: self.max_depth,
            light_samples: self.light_samples,
            seed: self.seed,
            global_photons: self.global_photons,
            caustic_photons: self.caustic_photons,
            photon_bounces: self.photon_bounces,
            k: self.k,
            caustic_k: self.caustic_k,
            max_radius: self.max_radius,
            caustic_max_radius: self.caustic_max_radius,
            cone_filter: self.cone_filter,
            gather_rays: self.gather_rays,
            samples: self.samples,
            precompute: self.precompute,
            points: self.points_on(on_gpu).name().to_owned(),
            trace: self.trace,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn photon_map_kinds_match_the_registry() {
        let names = caustic_accel::points::POINT_STRUCTURE_NAMES;
        for &name in names {
            let kind: PhotonMapKind = name.parse().unwrap();
            assert_eq!(kind.to_string(), name);
        }
        assert_eq!(names.len(), 3, "a new point structure needs a variant");
        let err = "octree".parse::<PhotonMapKind>().unwrap_err().to_string();
        assert!(err.contains("kdtree, hashgrid or brute"), "{err}");
    }

    #[test]
    fn photon_defaults_are_the_renderers() {
        let cpu = PhotonSettings::default().render_settings(false);
        assert_eq!(cpu, PhotonRenderSettings::default());
        let gpu = PhotonSettings::default().render_settings(true);
        assert_eq!(gpu.points, "hashgrid");
        let brute = PhotonSettings {
            points: Some(PhotonMapKind::Brute),
            ..PhotonSettings::default()
        };
        assert_eq!(brute.render_settings(true).points, "brute");
    }

    #[cfg(feature = "cuda")]
    #[test]
    fn gpu_refusals_name_the_setting() {
        assert_eq!(PhotonSettings::default().gpu_refusal(), None);
        let refusal = |s: PhotonSettings| s.gpu_refusal().unwrap_or_default();
        let no_precompute = PhotonSettings {
            precompute: 0,
            ..PhotonSettings::default()
        };
        assert!(refusal(no_precompute).contains("--precompute"));
        let kdtree = PhotonSettings {
            points: Some(PhotonMapKind::KdTree),
            ..PhotonSettings::default()
        };
        assert!(refusal(kdtree).contains("--points"));
        let big_k = PhotonSettings {
            caustic_k: 4096,
            ..PhotonSettings::default()
        };
        assert!(refusal(big_k).contains("--caustic-k"));
    }

    #[test]
    fn validate_checks_size_and_settings() {
        let whitted = |width, spp| {
            Integrator::Whitted(WhittedSettings {
                width,
                spp,
                ..WhittedSettings::default()
            })
        };
        assert!(whitted(64, 1).validate().is_ok());
        assert!(matches!(
            whitted(0, 1).validate(),
            Err(Error::Settings { .. })
        ));
        assert!(matches!(
            whitted(64, 0).validate(),
            Err(Error::Settings { .. })
        ));
        let photon = Integrator::Photon(PhotonSettings {
            k: 1,
            ..PhotonSettings::default()
        });
        assert!(matches!(photon.validate(), Err(Error::Photon(_))));
        let sppm = Integrator::Sppm(SppmSettings {
            alpha: 1.5,
            ..SppmSettings::default()
        });
        assert!(matches!(sppm.validate(), Err(Error::Sppm(_))));
    }

    #[test]
    fn size_and_name_follow_the_settings() {
        let sppm = Integrator::Sppm(SppmSettings {
            width: 7,
            height: 5,
            ..SppmSettings::default()
        });
        assert_eq!((sppm.name(), sppm.size()), ("sppm", (7, 5)));
        let whitted = Integrator::Whitted(WhittedSettings::default());
        assert_eq!(whitted.size(), (512, 512));
    }
}
