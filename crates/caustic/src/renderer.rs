//! Scene to image: [`Renderer`] flattens a scene, builds its acceleration
//! structure, opens the device and runs an [`Integrator`] into a [`Film`].
//!
//! The six renderers behind it, by integrator and device:
//!
//! | integrator | CPU | GPU |
//! |---|---|---|
//! | Whitted | `caustic_render::whitted::render` | `whitted::render_cuda::render` |
//! | photon | `caustic_render::photon::render` | `photon::render_cuda::render` |
//! | SPPM | `caustic_render::sppm::render_passes` | `sppm::render_cuda` |
//!
//! Both devices draw the same counter-based random numbers, so a GPU image
//! equals the CPU image up to float rounding. The GPU renderers trace a
//! binned-SAH BVH of their own; the structure chosen with
//! [`Renderer::accel`] serves the CPU renderers.

use crate::accel::AccelKind;
use crate::device::{Backend, Device};
use crate::error::{Error, Result};
use crate::integrator::{Integrator, PhotonSettings, Stats};
use caustic_render::sppm::{PassView, SppmSettings, SppmStats};
use caustic_render::{Film, RenderScene, WhittedSettings, photon, sppm, whitted};
use caustic_scene::{Camera, Scene};
use std::sync::OnceLock;

#[cfg(feature = "cuda")]
use caustic_accel::bvh::device_accel_cuda::GpuAccelSpec;

/// The largest image side the renderers accept.
const MAX_SIDE: u32 = 1 << 15;

/// A callback for progress reports.
type ProgressFn<'a> = dyn Fn(Progress<'_>) + Send + Sync + 'a;

/// Renders one scene, with any camera and integrator, on one device.
///
/// The structure is built and the device opened at the first render (or
/// by [`Renderer::prepare`]) and kept for the renders that follow.
///
/// ```
/// use caustic::{Device, Integrator, Renderer, Scene, WhittedSettings};
///
/// let scene = Scene::builtin("cornell-box").expect("a built-in scene");
/// let renderer = Renderer::new(&scene).device(Device::Cpu);
/// let settings = WhittedSettings { width: 32, height: 32, spp: 1, ..Default::default() };
/// let image = renderer.render(&scene.camera_or_default(), &Integrator::Whitted(settings))?;
/// assert_eq!((image.film.width, image.film.height), (32, 32));
/// assert!(image.film.mean().x > 0.0);
/// # Ok::<(), caustic::Error>(())
/// ```
pub struct Renderer<'a> {
    scene: &'a Scene,
    accel: AccelKind,
    /// Whether [`Renderer::accel`] chose the structure (on a GPU it then
    /// picks the same structure's GPU version; else the GPU default).
    accel_chosen: bool,
    #[cfg(feature = "cuda")]
    gpu_accel: Option<GpuAccelSpec>,
    device: Device,
    progress: Option<Box<ProgressFn<'a>>>,
    prepared: OnceLock<Prepared>,
}

/// What every render of the scene shares.
struct Prepared {
    /// On a GPU, the scene flattened with no CPU structure built (brute
    /// force, which builds in one copy): the GPU builds its own.
    scene: RenderScene,
    backend: Backend,
    /// The scene on the GPU with its structure, uploaded at the first GPU render.
    #[cfg(feature = "cuda")]
    gpu_scene: OnceLock<whitted::render_cuda::GpuScene>,
}

/// A progress report, from the thread doing the work.
#[non_exhaustive]
pub enum Progress<'a> {
    /// This many more pixels are done (Whitted and photon mapping on the
    /// CPU, which render tiles in parallel).
    Pixels(u64),
    /// An SPPM pass is done.
    Pass(SppmPass<'a>),
}

/// The state of an SPPM render after a pass.
pub struct SppmPass<'a> {
    view: PassSource<'a>,
    total: u32,
}

#[derive(Clone, Copy)]
enum PassSource<'a> {
    Cpu(&'a PassView<'a>),
    #[cfg(feature = "cuda")]
    Gpu(&'a sppm::GpuPassView<'a>),
}

impl SppmPass<'_> {
    /// Passes done (1 after the first).
    pub fn passes(&self) -> u32 {
        match self.view {
            PassSource::Cpu(view) => view.passes,
            #[cfg(feature = "cuda")]
            PassSource::Gpu(view) => view.passes,
        }
    }

    /// Passes the render will make.
    pub fn total(&self) -> u32 {
        self.total
    }

    /// The image so far. It costs a pass over the pixels (on a GPU, a
    /// kernel and a download): ask only for the passes you keep.
    pub fn film(&self) -> Result<Film> {
        match self.view {
            PassSource::Cpu(view) => Ok(view.film()),
            #[cfg(feature = "cuda")]
            PassSource::Gpu(view) => Ok(view.film()?),
        }
    }

    /// The statistics so far (time per stage, mean radius) where the device
    /// keeps them as it goes: the CPU. The GPU reports at the end.
    pub fn stats(&self) -> Option<&SppmStats> {
        match self.view {
            PassSource::Cpu(view) => Some(view.stats),
            #[cfg(feature = "cuda")]
            PassSource::Gpu(_) => None,
        }
    }
}

/// A finished render.
#[derive(Clone, Debug)]
pub struct Rendered {
    /// The image: linear radiance per pixel.
    pub film: Film,
    pub stats: Stats,
    /// What it ran on: the GPU's name or `N CPU threads`.
    pub device: String,
    /// One line on the device choice (`device: CPU (auto; ...)`).
    pub note: String,
}

impl<'a> Renderer<'a> {
    /// A renderer of `scene` with the default structure ([`AccelKind`]'s
    /// default, `bvh-wide`) on [`Device::Auto`].
    pub fn new(scene: &'a Scene) -> Self {
        Self {
            scene,
            accel: AccelKind::default(),
            accel_chosen: false,
            #[cfg(feature = "cuda")]
            gpu_accel: None,
            device: Device::Auto,
            progress: None,
            prepared: OnceLock::new(),
        }
    }

    /// The acceleration structure the renderers trace: on the CPU this
    /// structure, on a GPU its GPU version (the device build of `lbvh`,
    /// `hlbvh`, `ploc`, the compressed wide BVH for `bvh-wide`, the CPU
    /// build uploaded for the other binary BVHs) unless
    /// [`Renderer::gpu_accel`] says otherwise. Without either, a GPU builds
    /// its default ([`GpuAccelSpec::default`]).
    pub fn accel(mut self, kind: AccelKind) -> Self {
        self.accel = kind;
        self.accel_chosen = true;
        self.prepared = OnceLock::new();
        self
    }

    /// The structure the GPU renderers build and trace, whatever
    /// [`Renderer::accel`] says (`"lbvh:bits=63".parse()?`,
    /// `"cpu:bvh-binned".parse()?`).
    #[cfg(feature = "cuda")]
    pub fn gpu_accel(mut self, spec: GpuAccelSpec) -> Self {
        self.gpu_accel = Some(spec);
        self.prepared = OnceLock::new();
        self
    }

    /// Where to render.
    pub fn device(mut self, device: Device) -> Self {
        self.device = device;
        self.prepared = OnceLock::new();
        self
    }

    /// Calls `report` as work gets done: pixels for Whitted and photon
    /// mapping on the CPU, every pass of SPPM. It is called from worker
    /// threads, hence `Sync`.
    pub fn on_progress(mut self, report: impl Fn(Progress<'_>) + Send + Sync + 'a) -> Self {
        self.progress = Some(Box::new(report));
        self
    }

    /// Flattens the scene, builds the structure and opens the device now
    /// rather than at the first render; returns the scene as the renderers
    /// see it (triangles, `accel.stats()`, lights).
    pub fn prepare(&self) -> Result<&RenderScene> {
        Ok(&self.prepared()?.scene)
    }

    /// The device, resolved (see [`Device::resolve`]).
    pub fn backend(&self) -> Result<&Backend> {
        Ok(&self.prepared()?.backend)
    }

    /// Renders through `camera` with `integrator`.
    ///
    /// On `Auto` with a GPU, the photon mapper falls back to the CPU for
    /// settings its GPU version does not take (a point structure other
    /// than the hash grid, `precompute: 0` with a final gather), and says
    /// why in [`Rendered::note`]; on `Cuda` those settings are an error.
    pub fn render(&self, camera: &Camera, integrator: &Integrator) -> Result<Rendered> {
        if !camera.is_valid() {
            return Err(Error::Camera(format!("{camera:?}")));
        }
        check_size(integrator)?;
        let prepared = self.prepared()?;
        match integrator {
            Integrator::Whitted(settings) => self.whitted(prepared, camera, settings),
            Integrator::Photon(settings) => self.photon(prepared, camera, settings),
            Integrator::Sppm(settings) => self.sppm(prepared, camera, settings),
        }
    }

    fn prepared(&self) -> Result<&Prepared> {
        if let Some(prepared) = self.prepared.get() {
            return Ok(prepared);
        }
        let backend = self.device.resolve()?;
        let spec = if backend.is_gpu() {
            "brute".to_owned()
        } else {
            self.accel.to_string()
        };
        let scene = RenderScene::new(self.scene, &spec)?;
        Ok(self.prepared.get_or_init(|| Prepared {
            scene,
            backend,
            #[cfg(feature = "cuda")]
            gpu_scene: OnceLock::new(),
        }))
    }

    /// The GPU structure to build: the explicit one, the chosen CPU
    /// structure's GPU version, or the GPU default.
    #[cfg(feature = "cuda")]
    fn gpu_spec(&self) -> Result<GpuAccelSpec> {
        if let Some(spec) = &self.gpu_accel {
            return Ok(spec.clone());
        }
        if !self.accel_chosen {
            return Ok(GpuAccelSpec::default());
        }
        crate::accelerator_cuda::gpu_spec(&self.accel).ok_or_else(|| Error::Settings {
            integrator: "gpu",
            message: format!(
                "the GPU has no `{}`; it builds {}",
                self.accel.name(),
                caustic_accel::bvh::device_accel_cuda::GPU_STRUCTURES.join(", ")
            ),
        })
    }

    /// The scene on the GPU with its structure, built on the first call.
    #[cfg(feature = "cuda")]
    fn gpu_scene<'p>(
        &self,
        p: &'p Prepared,
        gpu: &caustic_gpu::Gpu,
    ) -> Result<&'p whitted::render_cuda::GpuScene> {
        if let Some(uploaded) = p.gpu_scene.get() {
            return Ok(uploaded);
        }
        let uploaded =
            whitted::render_cuda::GpuScene::upload_with(gpu, &p.scene, &self.gpu_spec()?)?;
        Ok(p.gpu_scene.get_or_init(|| uploaded))
    }

    /// The build statistics of the GPU structure, once a GPU render (or
    /// [`Renderer::prepare_gpu`]) has built it; `None` on the CPU.
    #[cfg(feature = "cuda")]
    pub fn gpu_accel_stats(&self) -> Option<&caustic_accel::bvh::device_accel_cuda::GpuAccelStats> {
        let prepared = self.prepared.get()?;
        Some(prepared.gpu_scene.get()?.accel().stats())
    }

    /// Builds the GPU structure and uploads the scene now, on a GPU
    /// backend, rather than at the first render; nothing on the CPU.
    #[cfg(feature = "cuda")]
    pub fn prepare_gpu(&self) -> Result<()> {
        let prepared = self.prepared()?;
        if let Some(gpu) = prepared.backend.gpu() {
            self.gpu_scene(prepared, gpu)?;
        }
        Ok(())
    }

    fn report(&self, progress: Progress<'_>) {
        if let Some(report) = &self.progress {
            report(progress);
        }
    }

    fn whitted(&self, p: &Prepared, camera: &Camera, s: &WhittedSettings) -> Result<Rendered> {
        if s.spp == 0 {
            return Err(Error::Settings {
                integrator: "whitted",
                message: "spp must be at least 1".into(),
            });
        }
        #[cfg(feature = "cuda")]
        if let Some(gpu) = p.backend.gpu() {
            let (film, stats) = self.gpu_scene(p, gpu)?.render(camera, s)?;
            return Ok(rendered(film, Stats::Whitted(stats), &p.backend));
        }
        let (film, stats) =
            whitted::render(&p.scene, camera, s, &|n| self.report(Progress::Pixels(n)));
        Ok(rendered(film, Stats::Whitted(stats), &p.backend))
    }

    fn photon(&self, p: &Prepared, camera: &Camera, s: &PhotonSettings) -> Result<Rendered> {
        #[cfg(feature = "cuda")]
        if let Some(gpu) = p.backend.gpu() {
            use photon::render_cuda::{GpuPhotonError, GpuPhotonRenderer};
            let settings = s.render_settings(true);
            match photon::render_cuda::check(&settings) {
                Ok(()) => {
                    let uploaded = self.gpu_scene(p, gpu)?;
                    let (film, stats) =
                        GpuPhotonRenderer::on(uploaded, &p.scene).render(camera, &settings)?;
                    return Ok(rendered(film, Stats::Photon(stats), &p.backend));
                }
                // `Auto` asks for an image wherever it can be made: settings
                // that only the CPU version takes are rendered there.
                Err(why) if self.device == Device::Auto => {
                    let note = format!(
                        "device: CPU (auto; the GPU photon mapper does not take these settings: {why})"
                    );
                    // The prepared scene has no CPU structure on a GPU backend.
                    let cpu = Prepared {
                        scene: RenderScene::new(self.scene, &self.accel.to_string())?,
                        backend: Backend::cpu(note),
                        gpu_scene: OnceLock::new(),
                    };
                    return self.photon_cpu(&cpu, camera, s, &cpu.backend);
                }
                Err(why) => return Err(GpuPhotonError::Settings(why).into()),
            }
        }
        self.photon_cpu(p, camera, s, &p.backend)
    }

    fn photon_cpu(
        &self,
        p: &Prepared,
        camera: &Camera,
        s: &PhotonSettings,
        backend: &Backend,
    ) -> Result<Rendered> {
        let settings = s.render_settings(false);
        let (film, stats) = photon::render(&p.scene, camera, &settings, &|n| {
            self.report(Progress::Pixels(n))
        })?;
        Ok(rendered(film, Stats::Photon(stats), backend))
    }

    fn sppm(&self, p: &Prepared, camera: &Camera, s: &SppmSettings) -> Result<Rendered> {
        let total = s.passes;
        #[cfg(feature = "cuda")]
        if let Some(gpu) = p.backend.gpu() {
            let mut on_pass = |view: &sppm::GpuPassView| {
                let view = PassSource::Gpu(view);
                self.report(Progress::Pass(SppmPass { view, total }));
            };
            let uploaded = self.gpu_scene(p, gpu)?;
            let (film, stats) = sppm::render_cuda_on(uploaded, &p.scene, camera, s, &mut on_pass)?;
            return Ok(rendered(film, Stats::Sppm(stats), &p.backend));
        }
        let mut on_pass = |view: &PassView| {
            let view = PassSource::Cpu(view);
            self.report(Progress::Pass(SppmPass { view, total }));
        };
        let (film, stats) = sppm::render_passes(&p.scene, camera, s, &mut on_pass)?;
        Ok(rendered(film, Stats::Sppm(stats), &p.backend))
    }
}

fn rendered(film: Film, stats: Stats, backend: &Backend) -> Rendered {
    Rendered {
        film,
        stats,
        device: backend.name(),
        note: backend.note().to_owned(),
    }
}

/// The renderers allocate per pixel: a size of 0 or past 32768 a side is
/// refused before any work.
fn check_size(integrator: &Integrator) -> Result<()> {
    let (width, height) = integrator.size();
    if (1..=MAX_SIDE).contains(&width) && (1..=MAX_SIDE).contains(&height) {
        return Ok(());
    }
    Err(Error::Settings {
        integrator: integrator.name(),
        message: format!("image size {width}x{height} is out of range (1..={MAX_SIDE} per side)"),
    })
}
