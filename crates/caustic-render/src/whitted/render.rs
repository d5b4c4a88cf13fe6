//! The Whitted ray tracer (Whitted 1980), with area-light soft shadows.
//!
//! From the eye it follows perfectly specular chains: mirrors reflect,
//! dielectrics split into a Fresnel-weighted reflected and refracted ray
//! (total internal reflection included). Emitted radiance is added at every
//! vertex of the chain. At the first non-specular surface it adds direct
//! light: one shadow ray per point, spot and directional light, and `N`
//! stratified shadow rays per area light, then stops. This is the quantity
//! of the `whitted` references in `refs/` (paths E S* L and E S* D L).
//!
//! Work is split into 8×8 tiles traced in Morton order by rayon, one ray
//! at a time, or by wavefronts of whole groups of tiles (`wavefront.rs`,
//! [`TraceMode`]) with the same shading (`Tracer::shade`) and sums
//! (`specular_tree::Shading::combine`), so the same image.
//!
//! Randomness is counter-based ([`draw`]): every random decision seeds a
//! fresh PCG32 from a key that names it (seed, pixel, sample, the branch
//! path through the specular tree, purpose), so an image depends neither on
//! the thread count nor on the order in which work is done, and the CUDA
//! wavefront renderer (`render_cuda`) draws exactly the same numbers.
//!
//! Weak branches of the specular tree (weight below [`SPLIT_THRESHOLD`]) are
//! continued by Russian roulette instead of pruned, so the estimate stays
//! unbiased while deep glass chains stay cheap.

use crate::bsdf::{fresnel_dielectric, fresnel_schlick, reflect, refract};
use crate::direct::{direct_light, face_towards};
use crate::draw;
use crate::specular_tree::{self, Branch, Sampling, Shader, Shading, Then};
use crate::team::{Solo, Team, TeamError, sum_u64, tiled_film, tiled_film_with};
use crate::tiles::Tile;
use crate::waves::{GROUP_RAYS, TraceMode};
use crate::{Film, PinholeCamera, RenderScene, SurfaceHit};
use caustic_geom::{Ray, Rgb};
use caustic_scene::{Bsdf, Camera};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Branch weight under which the specular tree switches to Russian roulette.
pub const SPLIT_THRESHOLD: f32 = 0.05;

/// Tile edge in pixels.
pub const TILE_SIZE: u32 = 8;

/// Which Fresnel formula dielectrics use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FresnelMode {
    #[default]
    Exact,
    Schlick,
}

/// What to render and how.
#[derive(Clone, Debug)]
pub struct WhittedSettings {
    pub width: u32,
    pub height: u32,
    /// Primary rays per pixel: 1 goes through the pixel centre; more are
    /// jittered (stratified on a grid when the count is a square).
    pub spp: u32,
    /// Largest number of specular bounces (reflection or refraction rays)
    /// after the primary ray.
    pub max_depth: u32,
    /// Shadow rays per area light at each shaded point, stratified.
    pub light_samples: u32,
    pub fresnel: FresnelMode,
    /// Seed of the per-pixel random streams.
    pub seed: u64,
    /// Per ray or by wavefronts on the CPU; the image is the same bit for
    /// bit either way.
    pub trace: TraceMode,
}

impl Default for WhittedSettings {
    fn default() -> Self {
        Self {
            width: 512,
            height: 512,
            spp: 16,
            max_depth: 5,
            light_samples: 4,
            fresnel: FresnelMode::Exact,
            seed: 0,
            trace: TraceMode::Auto,
        }
    }
}

/// What a render did.
#[derive(Clone, Copy, Debug, Default)]
pub struct RenderStats {
    pub seconds: f64,
    /// Rays traced: primary, specular and shadow rays together.
    pub rays: u64,
    /// Of `seconds`, the image's copy from a GPU to the host (after every
    /// kernel has finished); 0 on the CPU.
    pub download_ms: f64,
}

impl RenderStats {
    pub fn mrays_per_second(&self) -> f64 {
        self.rays as f64 / self.seconds.max(1e-12) / 1e6
    }
}

/// Renders `scene` through `camera`; `progress` is called with the number
/// of pixels finished after each tile.
pub fn render(
    scene: &RenderScene,
    camera: &Camera,
    settings: &WhittedSettings,
    progress: &(dyn Fn(u64) + Sync),
) -> (Film, RenderStats) {
    let (film, stats) = render_in_team(scene, camera, settings, &Solo, progress)
        .expect("a team of one exchanges nothing");
    (Solo::image(film), stats)
}

/// Renders like [`render`] as one member of `team`, tiles shared as
/// [`tiled_film`] shares them: the root ends with the whole image (the
/// other members with `None`), bit-identical to a single process's (every
/// pixel is computed by exactly one member, from its own keyed random
/// numbers). `stats.rays` counts the whole team's rays.
pub fn render_in_team(
    scene: &RenderScene,
    camera: &Camera,
    settings: &WhittedSettings,
    team: &dyn Team,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<(Option<Film>, RenderStats), TeamError> {
    let start = Instant::now();
    let pinhole = PinholeCamera::new(camera, settings.width, settings.height);
    let rays = AtomicU64::new(0);
    let tracer = Tracer { scene, settings };
    let size = (settings.width, settings.height);
    let film = if settings.trace.traces_waves(scene) {
        tiled_film_with(team, size, TILE_SIZE, |mine| {
            let sampling = tracer.sampling();
            let group = |primary, keys| super::wavefront::trace_group(&tracer, primary, keys);
            specular_tree::render_tiles(
                &mine, &pinhole, sampling, GROUP_RAYS, group, &rays, progress,
            )
        })?
    } else {
        tiled_film(team, size, TILE_SIZE, |tile| {
            let mut counter = 0u64;
            let pixels = tracer.render_tile(&pinhole, tile, &mut counter);
            rays.fetch_add(counter, Ordering::Relaxed);
            progress(tile.pixel_count() as u64);
            pixels
        })?
    };
    let rays = sum_u64(team, &[rays.into_inner()])?[0];
    let stats = RenderStats {
        seconds: start.elapsed().as_secs_f64(),
        rays,
        download_ms: 0.0,
    };
    Ok((film, stats))
}

pub(super) struct Tracer<'a> {
    pub(super) scene: &'a RenderScene,
    pub(super) settings: &'a WhittedSettings,
}

/// Per-path state: the ray counter (the random numbers need none, being
/// keyed by the path itself).
struct PathContext<'r> {
    rays: &'r mut u64,
}

impl Tracer<'_> {
    /// Where the primary rays go.
    pub(super) fn sampling(&self) -> Sampling {
        Sampling {
            width: self.settings.width,
            spp: self.settings.spp,
            seed: self.settings.seed,
        }
    }

    fn render_tile(&self, camera: &PinholeCamera, tile: Tile, rays: &mut u64) -> Vec<Rgb> {
        let mut out = Vec::with_capacity(tile.pixel_count());
        for y in tile.y0..tile.y1 {
            for x in tile.x0..tile.x1 {
                let mut ctx = PathContext { rays: &mut *rays };
                out.push(self.render_pixel(camera, x, y, &mut ctx));
            }
        }
        out
    }

    fn render_pixel(&self, camera: &PinholeCamera, x: u32, y: u32, ctx: &mut PathContext) -> Rgb {
        let spp = self.settings.spp.max(1);
        let mut sum = Rgb::ZERO;
        for s in 0..spp {
            let (ray, key) = self.sampling().camera_ray(camera, x, y, s);
            sum += self.radiance(&ray, 0, key, ctx);
        }
        sum / spp as f32
    }

    /// Radiance along `ray`, which is the `depth`-th specular bounce and
    /// has the path key `key`.
    fn radiance(&self, ray: &Ray, depth: u32, key: u64, ctx: &mut PathContext) -> Rgb {
        *ctx.rays += 1;
        let Some(hit) = self.scene.intersect(ray) else {
            return self.scene.background;
        };
        let surface = self.scene.surface(ray, &hit);
        let shading = self.shade(ray, &surface, depth, key);
        let direct = match shading.then {
            Then::End => {
                let material = &self.scene.materials[surface.material as usize];
                let samples = self.settings.light_samples;
                direct_light(
                    self.scene, -ray.dir, &surface, material, key, samples, ctx.rays,
                )
            }
            _ => Rgb::ZERO,
        };
        shading.combine(direct, |branch| {
            self.radiance(&branch.ray, depth + 1, branch.key, ctx)
        })
    }
}

impl Shader for Tracer<'_> {
    fn scene(&self) -> &RenderScene {
        self.scene
    }

    /// Its emission, and its specular branches or (an end) direct light.
    fn shade(&self, ray: &Ray, surface: &SurfaceHit, depth: u32, key: u64) -> Shading {
        let material = &self.scene.materials[surface.material as usize];
        let front = surface.geometric_normal.dot(ray.dir) < 0.0;
        let emission =
            (material.is_emissive() && (front || material.two_sided)).then_some(material.emission);
        // One-sided surfaces are black from behind (except glass, whose two
        // sides are its inside and outside).
        let visible = front || material.two_sided;
        let then = match material.bsdf {
            Bsdf::Dielectric { ior, tint } => Then::Dielectric {
                tint,
                branches: self.dielectric(ray, surface, ior, depth, key),
            },
            Bsdf::Mirror { reflectance } if visible && depth < self.settings.max_depth => {
                let n = face_towards(surface.shading_normal, -ray.dir);
                let next = self.scene.spawn(surface, reflect(ray.dir, n));
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

impl Tracer<'_> {
    /// Fresnel split at a smooth dielectric interface: the reflected and
    /// the refracted branch, where each exists (none past the largest
    /// depth; no refraction under total internal reflection).
    fn dielectric(
        &self,
        ray: &Ray,
        surface: &SurfaceHit,
        ior: f32,
        depth: u32,
        key: u64,
    ) -> [Option<Branch>; 2] {
        if depth >= self.settings.max_depth {
            return [None, None];
        }
        let (n, eta) = surface.interface(ray.dir, ior);
        let cos_i = (-ray.dir.dot(n)).max(0.0);
        let reflectance = match self.settings.fresnel {
            FresnelMode::Exact => fresnel_dielectric(cos_i, eta),
            FresnelMode::Schlick => fresnel_schlick(cos_i, eta),
        };
        let reflected = (reflectance > 0.0).then(|| {
            let next = self.scene.spawn(surface, reflect(ray.dir, n));
            Branch::new(next, reflectance, draw::child_key(key, draw::REFLECT))
        });
        let transmitted = (reflectance < 1.0)
            .then(|| refract(ray.dir, n, eta))
            .flatten()
            .map(|dir| {
                let next = self.scene.spawn(surface, dir);
                let child = draw::child_key(key, draw::REFRACT);
                Branch::new(next, 1.0 - reflectance, child)
            });
        [reflected, transmitted]
    }
}
