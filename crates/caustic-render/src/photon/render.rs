//! The photon-mapping integrator (Jensen 2001; Zeidan 2011 chapter 6): the
//! image as the sum of four parts, each computed where it is cheapest and
//! counted exactly once.
//!
//! From the eye the renderer follows specular chains as the Whitted
//! renderer does (mirrors, a Fresnel split at glass with Russian roulette
//! for weak branches, emission added at every chain vertex: paths `E S* L`).
//! At each diffuse (or glossy) end `x` of a chain it adds
//!
//! | part | paths into `x` | how |
//! |---|---|---|
//! | direct | `x ← L` | shadow rays ([`direct_light`]) |
//! | caustics | `x ← S+ L` | radiance estimate in the caustic map |
//! | indirect | `x ← S* D …  L` | final gather into the global map (traced with [`GlobalRule::All`]), or the global map at `x` (traced with [`GlobalRule::IndirectOnly`]) |
//!
//! Shadow rays are blocked by glass, so light through glass arrives only by
//! the caustic map; gather rays add no emission (those paths are the first
//! two rows), see [`super::gather`]. With the final gather the indirect
//! irradiance is interpolated between adaptively placed irradiance samples
//! ([`super::irradiance_samples`]), or gathered at every shading point when
//! the sample spacing is 0. Interpolated irradiance reflects by the diffuse
//! albedo only (a glossy lobe's indirect part is left out; the global-map
//! mode keeps it).
//!
//! Passes: photon tracing and map builds, irradiance precomputed at every
//! 4th global photon for the gather rays ([`super::precomputed`]); the
//! irradiance samples (centre
//! rays collect the diffuse shading points, seeding, a gather per sample);
//! then the image, 8×8 tiles in Morton order with rayon. Every random
//! decision is keyed (`draw`), photons by their index: the image
//! does not depend on the thread count.
//!
//! By waves ([`PhotonRenderSettings::trace`], [`crate::waves`]), for
//! structures that prefer batches: the photons bounce together
//! (`trace.rs`), the eye samples' specular trees are traced wave by wave
//! (`specular_tree`, shaded by the per-ray renderer's own `Shader::shade`)
//! in groups of tiles, and the group's diffuse ends get their shadow rays
//! in one batch and their final gathers' rays by waves
//! ([`Gatherer::gather_batch`]); the centre rays and the irradiance
//! samples' gathers likewise. The image is the per-ray one bit for bit.

use super::estimate::{self, EstimateSettings};
use super::gather::{Gathered, Gatherer};
use super::irradiance_samples::{self, IrradianceCache, SampleSettings, ShadingPoint};
use super::map::PhotonMap;
use super::precomputed::IrradianceMap;
use super::record::Photon;
use super::trace::{GlobalRule, PhotonSettings, trace_photon_range};
use crate::direct::{PathVertex, brdf, direct_light, direct_light_batch, face_towards};
use crate::draw;
use crate::specular_tree::{self, Branch, Sampling, Shader, Shading, Then};
use crate::team::{
    Solo, Team, TeamError, gather_concat, share, sum_u64, tiled_film, tiled_film_with,
};
use crate::tiles::Tile;
use crate::waves::{GROUP_RAYS, TraceMode, row_groups};
use crate::whitted::TILE_SIZE;
use crate::{Film, PinholeCamera, RenderScene, SurfaceHit};
use caustic_accel::points::{Neighbour, POINT_STRUCTURE_NAMES, UnknownPointStructure};
use caustic_geom::{Ray, Rgb, Vec3};
use caustic_scene::{Bsdf, Camera};
use rayon::prelude::*;
use std::f32::consts::FRAC_1_PI;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Key salt of the gathers at irradiance samples.
const SAMPLE_GATHER: u64 = 0x7361_6d70;
/// Key salt of the gathers at shading points no sample covers.
const POINT_GATHER: u64 = 0x706f_696e;
/// Seed salt of the caustic photon pass (when it is a pass of its own).
pub(super) const CAUSTIC_PASS: u64 = 0x6361_7573;

/// What to render and how.
#[derive(Clone, Debug, PartialEq)]
pub struct PhotonRenderSettings {
    pub width: u32,
    pub height: u32,
    /// Primary rays per pixel (as in `WhittedSettings`).
    pub spp: u32,
    /// Most specular bounces of eye and gather rays.
    pub max_depth: u32,
    /// Shadow rays per area light at each shaded point.
    pub light_samples: u32,
    pub seed: u64,
    /// Photons emitted for the global map (0: no indirect light).
    pub global_photons: u64,
    /// Photons emitted for the caustic map (0: no caustics). When equal to
    /// `global_photons` one pass fills both maps.
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
    /// Cone filter on the caustic estimate.
    pub cone_filter: bool,
    /// Final-gather rays per gather; 0 reads the global map directly at the
    /// shading points.
    pub gather_rays: u32,
    /// Irradiance samples; a spacing of 0 gathers at every shading point.
    pub samples: SampleSettings,
    /// Gather rays read irradiance precomputed at every `precompute`-th
    /// global photon ([`super::precomputed`]); 0 estimates from the global
    /// map at every gather hit.
    pub precompute: usize,
    /// Point structure of the maps: `kdtree`, `hashgrid` or `brute`.
    pub points: String,
    /// On the CPU, one ray at a time or by waves ([`crate::waves`]): the
    /// image is the same bit for bit either way.
    pub trace: TraceMode,
}

impl Default for PhotonRenderSettings {
    fn default() -> Self {
        Self {
            width: 512,
            height: 512,
            spp: 4,
            max_depth: 16,
            light_samples: 4,
            seed: 0,
            global_photons: 200_000,
            caustic_photons: 1_000_000,
            photon_bounces: 32,
            k: 64,
            caustic_k: 64,
            max_radius: 0.05,
            caustic_max_radius: 0.02,
            cone_filter: false,
            gather_rays: 256,
            samples: SampleSettings::default(),
            precompute: 4,
            points: "kdtree".to_owned(),
            trace: TraceMode::Auto,
        }
    }
}

/// A setting the renderer cannot use.
#[derive(Debug, thiserror::Error)]
pub enum PhotonRenderError {
    #[error("{0}")]
    Points(#[from] UnknownPointStructure),
    #[error("invalid photon render setting: {0}")]
    Invalid(String),
    #[error("team exchange failed: {0}")]
    Team(#[from] TeamError),
}

impl PhotonRenderSettings {
    /// Checks every value the renderer relies on.
    pub fn validate(&self) -> Result<(), PhotonRenderError> {
        let fail = |m: &str| Err(PhotonRenderError::Invalid(m.to_owned()));
        if self.width == 0 || self.height == 0 || self.width > 1 << 15 || self.height > 1 << 15 {
            return fail("image size must be 1..=32768 pixels per side");
        }
        if self.spp == 0 {
            return fail("spp must be at least 1");
        }
        if self.k < 2 || self.caustic_k < 2 {
            return fail("k must be at least 2 (the k-th photon sets the radius)");
        }
        let radius_ok = |r: f32| r.is_finite() && r > 0.0;
        if !radius_ok(self.max_radius) || !radius_ok(self.caustic_max_radius) {
            return fail("search radii must be finite and positive");
        }
        if !POINT_STRUCTURE_NAMES.contains(&self.points.as_str()) {
            let err = UnknownPointStructure {
                name: self.points.clone(),
            };
            return Err(err.into());
        }
        let s = &self.samples;
        if !(s.spacing.is_finite() && s.spacing >= 0.0) {
            return fail("irradiance-sample spacing must be 0 or more pixels");
        }
        if !(s.position_weight.is_finite() && s.position_weight >= 0.0) {
            return fail("the seeding position weight must be 0 or more");
        }
        if !(s.ward_scale.is_finite() && s.ward_scale > 0.0) {
            return fail("the validity-radius scale must be positive");
        }
        if !(-1.0..1.0).contains(&s.normal_cos) {
            return fail("the normal tolerance cosine must lie in [-1, 1)");
        }
        Ok(())
    }
}

/// What a render did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PhotonRenderStats {
    /// Photons emitted, both passes together.
    pub photons_traced: u64,
    pub global_stored: usize,
    pub caustic_stored: usize,
    pub photon_ms: f64,
    /// Build time of the two maps' point structures.
    pub build_ms: f64,
    /// Photons with precomputed irradiance, and the time it took.
    pub precomputed: usize,
    pub precompute_ms: f64,
    /// Irradiance samples gathered.
    pub samples: usize,
    /// Gathers at shading points that no sample covered (or every shading
    /// point's gather when samples are off).
    pub point_gathers: u64,
    /// Collecting shading points, seeding and gathering at the samples
    /// (the GPU: its whole final gather).
    pub sample_ms: f64,
    /// The GPU eye pass's own stages in order, `(name, ms)` (the eye
    /// waves with their eye-vertex collection, the vertices' Morton order,
    /// the estimates, the final gather's steps); empty on the CPU.
    pub stage_ms: Vec<(&'static str, f64)>,
    /// The image pass.
    pub render_ms: f64,
    /// Every ray: photon, eye, shadow and gather rays.
    pub rays: u64,
    pub seconds: f64,
}

/// Renders `scene` through `camera`; `progress` is called with the number
/// of pixels finished after each tile of the image pass.
pub fn render(
    scene: &RenderScene,
    camera: &Camera,
    settings: &PhotonRenderSettings,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<(Film, PhotonRenderStats), PhotonRenderError> {
    let (film, stats) = render_in_team(scene, camera, settings, &Solo, progress)?;
    Ok((Solo::image(film), stats))
}

/// Renders like [`render`] as one member of `team` (see [`crate::team`]):
/// each member traces a contiguous share of the photons of each pass and
/// the shares are exchanged in index order, so every member builds the
/// maps a single process builds; the irradiance samples' gathers and the
/// image's tiles are shared the same way. The root returns the whole image,
/// bit-identical to [`render`]'s, the other members `None`. `stats.rays` counts the whole
/// team's rays (every member builds the maps).
pub fn render_in_team(
    scene: &RenderScene,
    camera: &Camera,
    settings: &PhotonRenderSettings,
    team: &dyn Team,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<(Option<Film>, PhotonRenderStats), PhotonRenderError> {
    settings.validate()?;
    let start = Instant::now();
    let mut stats = PhotonRenderStats::default();
    let maps = Maps::trace(scene, settings, team, &mut stats)?;
    let renderer = Renderer::new(scene, settings, &maps);
    let pinhole = PinholeCamera::new(camera, settings.width, settings.height);
    let sample_start = Instant::now();
    let cache = renderer.irradiance_samples(&pinhole, team, &mut stats)?;
    stats.sample_ms = sample_start.elapsed().as_secs_f64() * 1e3;
    let render_start = Instant::now();
    let film = renderer.image(&pinhole, cache.as_ref(), team, &mut stats, progress)?;
    stats.render_ms = render_start.elapsed().as_secs_f64() * 1e3;
    let sums = sum_u64(team, &[stats.rays, stats.point_gathers])?;
    (stats.rays, stats.point_gathers) = (sums[0], sums[1]);
    stats.seconds = start.elapsed().as_secs_f64();
    Ok((film, stats))
}

/// The global and caustic maps of one render.
struct Maps {
    global: PhotonMap,
    caustic: PhotonMap,
    /// Irradiance at global photons, for the final gather.
    precomputed: Option<IrradianceMap>,
}

impl Maps {
    /// Traces the photons and builds the maps' point structures (and the
    /// precomputed irradiance when the final gather uses it).
    fn trace(
        scene: &RenderScene,
        settings: &PhotonRenderSettings,
        team: &dyn Team,
        stats: &mut PhotonRenderStats,
    ) -> Result<Self, PhotonRenderError> {
        let (global, caustic) = trace_lists(scene, settings, team, stats)?;
        let start = Instant::now();
        let diagonal = scene.scene_diagonal;
        let global = PhotonMap::build(global, &settings.points, settings.max_radius * diagonal)?;
        let caustic_radius = settings.caustic_max_radius * diagonal;
        let caustic = PhotonMap::build(caustic, &settings.points, caustic_radius)?;
        stats.build_ms = start.elapsed().as_secs_f64() * 1e3;
        let start = Instant::now();
        let precomputed = if settings.gather_rays > 0 && settings.precompute > 0 {
            let estimate = global_estimate(settings, diagonal);
            let map = IrradianceMap::build(
                &global,
                &estimate,
                settings.precompute,
                &settings.points,
                team,
            )?;
            stats.precomputed = map.len();
            Some(map)
        } else {
            None
        };
        stats.precompute_ms = start.elapsed().as_secs_f64() * 1e3;
        Ok(Self {
            global,
            caustic,
            precomputed,
        })
    }
}

/// The photon passes of a render: one pass filling both maps when they
/// want the same count, else a full pass for the global map and a
/// caustic-only pass with a seed of its own. The GPU renderer traces the
/// same passes.
pub(super) struct PassPlan {
    pub global: PhotonSettings,
    /// `None`: the global pass fills the caustic map too.
    pub caustic: Option<PhotonSettings>,
}

impl PassPlan {
    pub(super) fn new(settings: &PhotonRenderSettings) -> Self {
        let global_rule = if settings.gather_rays > 0 {
            GlobalRule::All
        } else {
            GlobalRule::IndirectOnly
        };
        let pass = |photons: u64, seed: u64| PhotonSettings {
            photons,
            max_bounces: settings.photon_bounces,
            global_rule,
            seed,
            trace: settings.trace,
            ..Default::default()
        };
        let separate = settings.global_photons != settings.caustic_photons;
        Self {
            global: pass(settings.global_photons, settings.seed),
            caustic: separate.then(|| pass(settings.caustic_photons, settings.seed ^ CAUSTIC_PASS)),
        }
    }
}

/// The global and caustic photons of the [`PassPlan`]; a team member
/// traces its share of each pass and receives the others'.
fn trace_lists(
    scene: &RenderScene,
    settings: &PhotonRenderSettings,
    team: &dyn Team,
    stats: &mut PhotonRenderStats,
) -> Result<(Vec<Photon>, Vec<Photon>), PhotonRenderError> {
    let plan = PassPlan::new(settings);
    let start = Instant::now();
    let global = trace_photon_range(scene, &plan.global, share(team, plan.global.photons), false);
    stats.rays += global.stats.rays;
    stats.photons_traced = global.emitted;
    let (global, caustic) = match &plan.caustic {
        None => (global.global, global.caustic),
        Some(pass) => {
            let caustic = trace_photon_range(scene, pass, share(team, pass.photons), true);
            stats.rays += caustic.stats.rays;
            stats.photons_traced += caustic.emitted;
            (global.global, caustic.caustic)
        }
    };
    let global = gather_concat(team, global)?;
    let caustic = gather_concat(team, caustic)?;
    stats.photon_ms = start.elapsed().as_secs_f64() * 1e3;
    stats.global_stored = global.len();
    stats.caustic_stored = caustic.len();
    Ok((global, caustic))
}

/// How the global map is queried.
fn global_estimate(settings: &PhotonRenderSettings, diagonal: f32) -> EstimateSettings {
    EstimateSettings {
        k: settings.k,
        max_radius: settings.max_radius * diagonal,
        cone_filter: false,
    }
}

/// Per-task scratch space and counters.
#[derive(Default)]
struct Work {
    rays: u64,
    point_gathers: u64,
    scratch: Vec<Neighbour>,
}

struct Renderer<'a> {
    scene: &'a RenderScene,
    settings: &'a PhotonRenderSettings,
    maps: &'a Maps,
    global_estimate: EstimateSettings,
    caustic_estimate: EstimateSettings,
    gatherer: Option<Gatherer<'a>>,
}

impl<'a> Renderer<'a> {
    fn new(scene: &'a RenderScene, settings: &'a PhotonRenderSettings, maps: &'a Maps) -> Self {
        let diagonal = scene.scene_diagonal;
        let global_estimate = global_estimate(settings, diagonal);
        let caustic_estimate = EstimateSettings {
            k: settings.caustic_k,
            max_radius: settings.caustic_max_radius * diagonal,
            cone_filter: settings.cone_filter,
        };
        let gatherer = (settings.gather_rays > 0).then_some(Gatherer {
            scene,
            global: &maps.global,
            estimate: global_estimate,
            precomputed: maps.precomputed.as_ref(),
            rays: settings.gather_rays,
            max_depth: settings.max_depth,
        });
        Self {
            scene,
            settings,
            maps,
            global_estimate,
            caustic_estimate,
            gatherer,
        }
    }

    /// Places and gathers the irradiance samples; `None` when the final
    /// gather or the samples are off.
    fn irradiance_samples(
        &self,
        camera: &PinholeCamera,
        team: &dyn Team,
        stats: &mut PhotonRenderStats,
    ) -> Result<Option<IrradianceCache>, PhotonRenderError> {
        let spacing = self.settings.samples.spacing;
        let Some(gatherer) = self.gatherer.as_ref().filter(|_| spacing > 0.0) else {
            return Ok(None);
        };
        let (points, rays) = self.shading_points(camera);
        // Every member traces the centre rays; the team counts them once.
        if team.is_root() {
            stats.rays += rays;
        }
        let pixels = f64::from(self.settings.width) * f64::from(self.settings.height);
        let count = (pixels / f64::from(spacing * spacing)).ceil() as usize;
        let alpha = self.settings.samples.position_weight / self.scene.scene_diagonal.max(1e-12);
        let shading: Vec<ShadingPoint> = points.iter().map(|(p, _)| *p).collect();
        let chosen = irradiance_samples::seed(&shading, count, alpha, self.settings.seed);
        // Every member places the same samples (the centre rays are cheap);
        // the gathers, 256 rays each by default, are shared.
        let mine = share(team, chosen.len() as u64);
        let mine = &chosen[mine.start as usize..mine.end as usize];
        let (gathered, rays) = self.sample_gathers(gatherer, &points, mine);
        stats.rays += rays;
        let values = gathered
            .into_iter()
            .map(|g| {
                let e = g.irradiance;
                [e.x, e.y, e.z, g.harmonic_distance]
            })
            .collect();
        let values = gather_concat(team, values)?;
        let pairs: Vec<(ShadingPoint, Gathered)> = chosen
            .iter()
            .zip(values)
            .map(|(&i, [r, g, b, harmonic_distance])| {
                let irradiance = Rgb::new(r, g, b);
                let gathered = Gathered {
                    irradiance,
                    harmonic_distance,
                };
                (points[i].0, gathered)
            })
            .collect();
        stats.samples = pairs.len();
        let cache = IrradianceCache::build(&pairs, &self.settings.samples, &self.settings.points)?;
        Ok(Some(cache))
    }

    /// The gathers at the irradiance samples `chosen` (indices into
    /// `points`), and the rays they traced.
    fn sample_gathers(
        &self,
        gatherer: &Gatherer,
        points: &[(ShadingPoint, PathVertex)],
        chosen: &[usize],
    ) -> (Vec<Gathered>, u64) {
        let vertex = |i: usize| PathVertex {
            key: draw::mix(self.settings.seed ^ SAMPLE_GATHER, i as u64),
            ..points[i].1
        };
        if self.traces_waves() {
            let vertices: Vec<PathVertex> = chosen.iter().map(|&i| vertex(i)).collect();
            let mut rays = 0;
            let gathered = gatherer.gather_batch(&vertices, &mut rays);
            return (gathered, rays);
        }
        let gathered: Vec<(Gathered, u64)> = chosen
            .par_iter()
            .map_init(Vec::new, |scratch, &i| {
                let v = vertex(i);
                let mut rays = 0;
                let g = gatherer.gather(&v.surface, v.wo, v.key, scratch, &mut rays);
                (g, rays)
            })
            .collect();
        let rays = gathered.iter().map(|g| g.1).sum();
        (gathered.into_iter().map(|g| g.0).collect(), rays)
    }

    /// Whether this render traces waves ([`TraceMode`]).
    fn traces_waves(&self) -> bool {
        self.settings.trace.traces_waves(self.scene)
    }

    /// The path key of pixel `pixel`'s centre ray.
    fn centre_key(&self, pixel: u64) -> u64 {
        draw::sample_key(self.settings.seed, pixel, u32::MAX)
    }

    /// The diffuse shading points of every pixel's centre ray, in pixel
    /// order, and the rays traced to find them.
    fn shading_points(&self, camera: &PinholeCamera) -> (Vec<(ShadingPoint, PathVertex)>, u64) {
        if self.traces_waves() {
            return self.shading_points_by_waves(camera);
        }
        let width = self.settings.width;
        let rows: Vec<(Vec<(ShadingPoint, PathVertex)>, u64)> = (0..self.settings.height)
            .into_par_iter()
            .map(|y| {
                let mut row = Vec::new();
                let mut rays = 0;
                for x in 0..width {
                    let ray = camera.ray(x as f32 + 0.5, y as f32 + 0.5);
                    let pixel = u64::from(y) * u64::from(width) + u64::from(x);
                    let key = self.centre_key(pixel);
                    self.walk(&ray, 0, key, &mut rays, &mut |v| {
                        row.push((shading_point((x, y), v), *v));
                        Rgb::ZERO
                    });
                }
                (row, rays)
            })
            .collect();
        let rays = rows.iter().map(|r| r.1).sum();
        (rows.into_iter().flat_map(|r| r.0).collect(), rays)
    }

    /// [`Renderer::shading_points`] by waves, in groups of rows of at most
    /// [`GROUP_RAYS`] centre rays: each pixel's points in the order its
    /// per-ray walk meets them.
    fn shading_points_by_waves(
        &self,
        camera: &PinholeCamera,
    ) -> (Vec<(ShadingPoint, PathVertex)>, u64) {
        let (width, height) = (self.settings.width, self.settings.height);
        let (mut points, mut rays) = (Vec::new(), 0);
        for rows in row_groups(0..height, width, GROUP_RAYS) {
            let pixels: Vec<(u32, u32)> =
                rows.flat_map(|y| (0..width).map(move |x| (x, y))).collect();
            let (centre, keys): (Vec<Ray>, Vec<u64>) = pixels
                .par_iter()
                .map(|&(x, y)| {
                    let ray = camera.ray(x as f32 + 0.5, y as f32 + 0.5);
                    let pixel = u64::from(y) * u64::from(width) + u64::from(x);
                    (ray, self.centre_key(pixel))
                })
                .unzip();
            let forest = specular_tree::trace(self, centre, keys);
            rays += forest.rays();
            for (root, end) in forest.ends_depth_first() {
                let v = vertex_of(&forest.ends[end]);
                points.push((shading_point(pixels[root], &v), v));
            }
        }
        (points, rays)
    }

    /// The image pass, its tiles shared by the team.
    fn image(
        &self,
        camera: &PinholeCamera,
        cache: Option<&IrradianceCache>,
        team: &dyn Team,
        stats: &mut PhotonRenderStats,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<Option<Film>, PhotonRenderError> {
        let size = (self.settings.width, self.settings.height);
        let rays = AtomicU64::new(0);
        let point_gathers = AtomicU64::new(0);
        let film = if self.traces_waves() {
            tiled_film_with(team, size, TILE_SIZE, |mine| {
                let sampling = Sampling {
                    width: self.settings.width,
                    spp: self.settings.spp,
                    seed: self.settings.seed,
                };
                let group = |primary, keys| {
                    let forest = specular_tree::trace(self, primary, keys);
                    let ends: Vec<PathVertex> = forest.ends.iter().map(vertex_of).collect();
                    let (values, traced, gathers) = self.light_at_all(&ends, cache);
                    point_gathers.fetch_add(gathers, Ordering::Relaxed);
                    let radiance = forest.fold(&values, self.scene.background);
                    (radiance, forest.rays() + traced)
                };
                specular_tree::render_tiles(
                    &mine, camera, sampling, GROUP_RAYS, group, &rays, progress,
                )
            })?
        } else {
            tiled_film(team, size, TILE_SIZE, |tile| {
                let mut work = Work::default();
                let pixels = self.tile(camera, cache, tile, &mut work);
                rays.fetch_add(work.rays, Ordering::Relaxed);
                point_gathers.fetch_add(work.point_gathers, Ordering::Relaxed);
                progress(tile.pixel_count() as u64);
                pixels
            })?
        };
        stats.rays += rays.into_inner();
        stats.point_gathers += point_gathers.into_inner();
        Ok(film)
    }

    fn tile(
        &self,
        camera: &PinholeCamera,
        cache: Option<&IrradianceCache>,
        tile: Tile,
        work: &mut Work,
    ) -> Vec<Rgb> {
        let mut out = Vec::with_capacity(tile.pixel_count());
        for y in tile.y0..tile.y1 {
            for x in tile.x0..tile.x1 {
                out.push(self.pixel(camera, cache, x, y, work));
            }
        }
        out
    }

    /// The mean radiance of `spp` primary rays through pixel `(x, y)`,
    /// placed as the Whitted renderer places them.
    fn pixel(
        &self,
        camera: &PinholeCamera,
        cache: Option<&IrradianceCache>,
        x: u32,
        y: u32,
        work: &mut Work,
    ) -> Rgb {
        let spp = self.settings.spp.max(1);
        let pixel = u64::from(y) * u64::from(self.settings.width) + u64::from(x);
        let mut sum = Rgb::ZERO;
        for s in 0..spp {
            let (offset, key) = draw::pixel_sample(self.settings.seed, pixel, s, spp);
            let ray = camera.ray(x as f32 + offset.x, y as f32 + offset.y);
            let mut rays = 0;
            sum += self.walk(&ray, 0, key, &mut rays, &mut |v| {
                self.light_at(v, cache, work)
            });
            work.rays += rays;
        }
        sum / spp as f32
    }

    /// Radiance along `ray` (the `depth`-th specular bounce, path key
    /// `key`): emission and background along the specular tree, plus
    /// `visit` at each diffuse end, weighted by the branch's throughput.
    fn walk(
        &self,
        ray: &Ray,
        depth: u32,
        key: u64,
        rays: &mut u64,
        visit: &mut dyn FnMut(&PathVertex) -> Rgb,
    ) -> Rgb {
        *rays += 1;
        let Some(hit) = self.scene.intersect(ray) else {
            return self.scene.background;
        };
        let surface = self.scene.surface(ray, &hit);
        let shading = self.shade(ray, &surface, depth, key);
        let end = match shading.then {
            Then::End => visit(&PathVertex {
                surface,
                wo: -ray.dir.normalize(),
                key,
            }),
            _ => Rgb::ZERO,
        };
        shading.combine(end, |branch| {
            self.walk(&branch.ray, depth + 1, branch.key, rays, visit)
        })
    }

    /// The Fresnel split at glass: both branches where they exist, weighted
    /// by the Fresnel reflectance (weak ones go on by Russian roulette).
    fn dielectric(
        &self,
        ray: &Ray,
        surface: &SurfaceHit,
        ior: f32,
        key: u64,
    ) -> [Option<Branch>; 2] {
        let (n, eta) = surface.interface(ray.dir, ior);
        let d = ray.dir.normalize();
        let reflectance = crate::bsdf::fresnel_dielectric((-d.dot(n)).max(0.0), eta);
        let reflected = (reflectance > 0.0).then(|| {
            let next = self.scene.spawn(surface, crate::bsdf::reflect(d, n));
            Branch::new(next, reflectance, draw::child_key(key, draw::REFLECT))
        });
        let refracted = (reflectance < 1.0)
            .then(|| crate::bsdf::refract(d, n, eta))
            .flatten()
            .map(|dir| {
                let next = self.scene.spawn(surface, dir);
                Branch::new(next, 1.0 - reflectance, draw::child_key(key, draw::REFRACT))
            });
        [reflected, refracted]
    }

    /// Direct light, caustics and indirect light reflected at `v`.
    fn light_at(&self, v: &PathVertex, cache: Option<&IrradianceCache>, work: &mut Work) -> Rgb {
        let surface = &v.surface;
        let material = &self.scene.materials[surface.material as usize];
        let light_samples = self.settings.light_samples;
        let direct = direct_light(
            self.scene,
            v.wo,
            surface,
            material,
            v.key,
            light_samples,
            &mut work.rays,
        );
        self.light_with(v, direct, work, |gatherer, n, work| {
            self.indirect_irradiance(gatherer, v, n, cache, work)
        })
    }

    /// [`Renderer::light_at`] at every one of `vertices`: their shadow rays
    /// in one batch, the final gathers of those no irradiance sample covers
    /// by waves. Returns the values, the rays traced and the gathers made.
    fn light_at_all(
        &self,
        vertices: &[PathVertex],
        cache: Option<&IrradianceCache>,
    ) -> (Vec<Rgb>, u64, u64) {
        let (direct, mut rays) =
            direct_light_batch(self.scene, vertices, self.settings.light_samples);
        let mut gathers = 0;
        let irradiance: Vec<Rgb> = match &self.gatherer {
            None => Vec::new(),
            Some(gatherer) => {
                let interpolated: Vec<Option<Rgb>> = vertices
                    .par_iter()
                    .map_init(Vec::new, |scratch, v| {
                        let n = face_towards(v.surface.shading_normal, v.wo);
                        cache.and_then(|c| c.interpolate(v.surface.point, n, scratch))
                    })
                    .collect();
                let missing: Vec<PathVertex> = vertices
                    .iter()
                    .zip(&interpolated)
                    .filter(|(_, e)| e.is_none())
                    .map(|(v, _)| point_gather_vertex(v))
                    .collect();
                gathers = missing.len() as u64;
                let mut gathered = gatherer.gather_batch(&missing, &mut rays).into_iter();
                interpolated
                    .into_iter()
                    .map(|e| e.or_else(|| gathered.next().map(|g| g.irradiance)))
                    .map(Option::unwrap_or_default)
                    .collect()
            }
        };
        let values = (vertices, &direct)
            .into_par_iter()
            .enumerate()
            .map_init(Work::default, |work, (i, (v, &direct))| {
                self.light_with(v, direct, work, |_, _, _| irradiance[i])
            })
            .collect();
        (values, rays, gathers)
    }

    /// `direct` plus caustics and indirect light reflected at `v`: the
    /// global map's estimate, or with a final gather the indirect
    /// irradiance that `irradiance` gives (at the unit normal facing the
    /// viewer) reflected by the albedo.
    fn light_with(
        &self,
        v: &PathVertex,
        direct: Rgb,
        work: &mut Work,
        irradiance: impl FnOnce(&Gatherer, Vec3, &mut Work) -> Rgb,
    ) -> Rgb {
        let surface = &v.surface;
        let material = &self.scene.materials[surface.material as usize];
        let n = face_towards(surface.shading_normal, v.wo);
        let ng = face_towards(surface.geometric_normal, v.wo);
        let albedo = self.scene.albedo(material, surface.uv);
        let f = |wi: Vec3| brdf(material, albedo, n, v.wo, wi);
        let caustic = estimate::radiance(
            &self.maps.caustic,
            &self.caustic_estimate,
            surface.point,
            ng,
            &mut work.scratch,
            f,
        );
        let indirect = match &self.gatherer {
            None => estimate::radiance(
                &self.maps.global,
                &self.global_estimate,
                surface.point,
                ng,
                &mut work.scratch,
                f,
            ),
            Some(gatherer) => albedo * FRAC_1_PI * irradiance(gatherer, n, work),
        };
        direct + caustic + indirect
    }

    /// Indirect irradiance at `v` (unit normal `n` facing the viewer):
    /// interpolated where samples cover the point, gathered otherwise.
    fn indirect_irradiance(
        &self,
        gatherer: &Gatherer,
        v: &PathVertex,
        n: Vec3,
        cache: Option<&IrradianceCache>,
        work: &mut Work,
    ) -> Rgb {
        let interpolated = cache.and_then(|c| c.interpolate(v.surface.point, n, &mut work.scratch));
        if let Some(e) = interpolated {
            return e;
        }
        work.point_gathers += 1;
        let v = point_gather_vertex(v);
        gatherer
            .gather(&v.surface, v.wo, v.key, &mut work.scratch, &mut work.rays)
            .irradiance
    }
}

impl Shader for Renderer<'_> {
    fn scene(&self) -> &RenderScene {
        self.scene
    }

    /// Emission, then the specular branches of mirrors and glass (up to the
    /// largest depth), or an end at a visible diffuse or glossy surface.
    fn shade(&self, ray: &Ray, surface: &SurfaceHit, depth: u32, key: u64) -> Shading {
        let material = &self.scene.materials[surface.material as usize];
        let front = surface.geometric_normal.dot(ray.dir) < 0.0;
        let visible = front || material.two_sided;
        let emission = (material.is_emissive() && visible).then_some(material.emission);
        let more = depth < self.settings.max_depth;
        let then = match material.bsdf {
            Bsdf::Dielectric { ior, tint } if more => Then::Dielectric {
                tint,
                branches: self.dielectric(ray, surface, ior, key),
            },
            Bsdf::Mirror { reflectance } if visible && more => {
                let n = face_towards(surface.shading_normal, -ray.dir);
                let next = self.scene.spawn(surface, crate::bsdf::reflect(ray.dir, n));
                let child = draw::child_key(key, draw::REFLECT);
                Then::Mirror {
                    reflectance,
                    branch: Branch::new(next, 1.0, child),
                }
            }
            Bsdf::Diffuse { .. } | Bsdf::Glossy { .. } if visible => Then::End,
            _ => Then::Nothing,
        };
        Shading { emission, then }
    }
}

/// The vertex at an end of a traced specular tree.
fn vertex_of(end: &specular_tree::End) -> PathVertex {
    PathVertex {
        surface: end.surface,
        wo: -end.ray.dir.normalize(),
        key: end.key,
    }
}

/// `v` with the key of its own final gather (a shading point no
/// irradiance sample covers).
fn point_gather_vertex(v: &PathVertex) -> PathVertex {
    PathVertex {
        key: draw::mix(v.key, POINT_GATHER),
        ..*v
    }
}

/// The seeding input of the shading point `v` seen from `pixel`.
fn shading_point(pixel: (u32, u32), v: &PathVertex) -> ShadingPoint {
    ShadingPoint {
        pixel,
        position: v.surface.point,
        normal: face_towards(v.surface.shading_normal, v.wo),
    }
}
