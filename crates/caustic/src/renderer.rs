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
#[cfg(feature = "cuda")]
use caustic_render::photon::PhotonRenderError;
use caustic_render::sppm::{PassView, SppmSettings, SppmStats};
use caustic_render::{Film, RenderScene, WhittedSettings, photon, sppm, whitted};
use caustic_scene::{Camera, Scene};
use std::sync::OnceLock;

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
    device: Device,
    progress: Option<Box<ProgressFn<'a>>>,
    prepared: OnceLock<Prepared>,
}

/// What every render of the scene shares.
struct Prepared {
    scene: RenderScene,
    backend: Backend,
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
            device: Device::Auto,
            progress: None,
            prepared: OnceLock::new(),
        }
    }

    /// The acceleration structure the CPU renderers trace.
    pub fn accel(mut self, kind: AccelKind) -> Self {
        self.accel = kind;
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
    /// It runs where [`Renderer::backend_for`] says: on `Auto` with a GPU,
    /// the photon mapper falls back to the CPU for settings its GPU
    /// version does not take, and says why in [`Rendered::note`]; on
    /// `Cuda` those settings are an error.
    pub fn render(&self, camera: &Camera, integrator: &Integrator) -> Result<Rendered> {
        if !camera.is_valid() {
            return Err(Error::Camera(format!("{camera:?}")));
        }
        integrator.validate()?;
        let backend = self.backend_for(integrator)?;
        let prepared = self.prepared()?;
        match integrator {
            Integrator::Whitted(settings) => self.whitted(prepared, camera, settings),
            Integrator::Photon(settings) => self.photon(prepared, &backend, camera, settings),
            Integrator::Sppm(settings) => self.sppm(prepared, camera, settings),
        }
    }

    /// The device a render with `integrator` runs on, and its one-line
    /// note, known before the render: a caller can say where a long render
    /// runs before it starts. Prepares the renderer (see
    /// [`Renderer::prepare`]) if that was not done yet.
    ///
    /// It is [`Renderer::backend`] except for photon-mapping settings the
    /// GPU version does not take (a point structure other than the hash
    /// grid, `precompute: 0` with a final gather, `k` past the GPU's
    /// limit): on `Auto` with a GPU the CPU then, the reason in the note;
    /// on `Cuda` an error naming the setting, before the device is opened.
    ///
    /// ```
    /// use caustic::{Device, Integrator, PhotonSettings, Renderer, Scene};
    ///
    /// let scene = Scene::builtin("cornell-box").expect("a built-in scene");
    /// let renderer = Renderer::new(&scene).device(Device::Cpu);
    /// let backend = renderer.backend_for(&Integrator::Photon(PhotonSettings::default()))?;
    /// assert_eq!(backend.note(), "device: CPU");
    /// # Ok::<(), caustic::Error>(())
    /// ```
    #[cfg(feature = "cuda")]
    pub fn backend_for(&self, integrator: &Integrator) -> Result<Backend> {
        let refusal = match integrator {
            Integrator::Photon(settings) => settings.gpu_refusal(),
            _ => None,
        };
        let backend = match (refusal, self.device) {
            (Some(why), Device::Cuda(_)) => return Err(PhotonRenderError::Invalid(why).into()),
            (Some(why), Device::Auto) if self.backend()?.is_gpu() => {
                Backend::cpu(format!("device: CPU (auto; {why})"))
            }
            _ => self.backend()?.clone(),
        };
        Ok(backend)
    }

    /// Without the `cuda` feature every render runs on the CPU.
    #[cfg(not(feature = "cuda"))]
    pub fn backend_for(&self, _integrator: &Integrator) -> Result<Backend> {
        Ok(self.backend()?.clone())
    }

    fn prepared(&self) -> Result<&Prepared> {
        if let Some(prepared) = self.prepared.get() {
            return Ok(prepared);
        }
        let backend = self.device.resolve()?;
        let scene = RenderScene::new(self.scene, &self.accel.to_string())?;
        Ok(self.prepared.get_or_init(|| Prepared { scene, backend }))
    }

    fn report(&self, progress: Progress<'_>) {
        if let Some(report) = &self.progress {
            report(progress);
        }
    }

    fn whitted(&self, p: &Prepared, camera: &Camera, s: &WhittedSettings) -> Result<Rendered> {
        #[cfg(feature = "cuda")]
        if let Some(gpu) = p.backend.gpu() {
            let (film, stats) = whitted::render_cuda::render(gpu, &p.scene, camera, s)?;
            return Ok(rendered(film, Stats::Whitted(stats), &p.backend));
        }
        let (film, stats) =
            whitted::render(&p.scene, camera, s, &|n| self.report(Progress::Pixels(n)));
        Ok(rendered(film, Stats::Whitted(stats), &p.backend))
    }

    /// `backend` is [`Renderer::backend_for`]'s: the CPU where `Auto`
    /// found settings the GPU version does not take.
    fn photon(
        &self,
        p: &Prepared,
        backend: &Backend,
        camera: &Camera,
        s: &PhotonSettings,
    ) -> Result<Rendered> {
        #[cfg(feature = "cuda")]
        if let Some(gpu) = backend.gpu() {
            let settings = s.render_settings(true);
            let (film, stats) = photon::render_cuda::render(gpu, &p.scene, camera, &settings)?;
            return Ok(rendered(film, Stats::Photon(stats), backend));
        }
        let settings = s.render_settings(false);
        let report = |n| self.report(Progress::Pixels(n));
        let (film, stats) = photon::render(&p.scene, camera, &settings, &report)?;
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
            let (film, stats) = sppm::render_cuda(gpu, &p.scene, camera, s, &mut on_pass)?;
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
