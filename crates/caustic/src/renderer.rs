//! Scene to image: [`Renderer`] flattens a scene, builds its acceleration
//! structure, opens the device and runs an [`Integrator`] into a [`Film`].
//!
//! The six renderers behind it, by integrator and device:
//!
//! | integrator | CPU | GPU |
//! |---|---|---|
//! | Whitted | `caustic_render::whitted::render` | `whitted::render_cuda::GpuScene::render` |
//! | photon | `caustic_render::photon::render` | `photon::render_cuda::GpuPhotonRenderer` |
//! | SPPM | `caustic_render::sppm::render_passes` | `sppm::render_cuda_on` |
//!
//! The GPU renderers share one upload of the scene and its structure.
//!
//! Both devices draw the same counter-based random numbers, so a GPU image
//! equals the CPU image up to float rounding. The CPU renderers trace the
//! structure chosen with [`Renderer::accel`]; the GPU renderers one built
//! on the device (`caustic_accel::bvh::device_accel_cuda`): the one
//! `Renderer::gpu_accel` or `Renderer::gpu_accel_spec` (feature `cuda`)
//! names, else the GPU version of the chosen structure, else the GPU
//! default (`bvh-binned`).

use crate::accel::{AccelKind, AccelStats};
use crate::device::{Backend, Device};
use crate::error::{Error, Result};
use crate::integrator::{Integrator, PhotonSettings, Stats};
use caustic_accel::bvh::{UpdateAction, UpdatePolicy, UpdateTracker};
#[cfg(feature = "cuda")]
use caustic_render::photon::PhotonRenderError;
use caustic_render::sppm::{PassView, SppmSettings, SppmStats};
use caustic_render::team::{Team, TeamError};
use caustic_render::{Film, MeshLayout, RenderScene, WhittedSettings, photon, sppm, whitted};
use caustic_scene::{Camera, Scene};
use std::ops::ControlFlow;
use std::sync::{Arc, Mutex, OnceLock};

#[cfg(feature = "cuda")]
use caustic_accel::AccelSpecError;
#[cfg(feature = "cuda")]
use caustic_accel::bvh::device_accel_cuda::{GpuAccelSpec, GpuAccelStats};

/// A callback for progress reports.
type ProgressFn<'a> = dyn Fn(Progress<'_>) + Send + Sync + 'a;

/// A test asked between the passes of a render: true ends it there.
type StopFn<'a> = dyn Fn() -> bool + Send + Sync + 'a;

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
    /// The GPU structure asked for by [`Renderer::gpu_accel`] or
    /// [`Renderer::gpu_accel_spec`]; an error is a structure the GPU does
    /// not build, which keeps renders off the GPU.
    #[cfg(feature = "cuda")]
    gpu_accel: Option<Result<GpuAccelSpec, AccelSpecError>>,
    device: Device,
    /// The device opened by the caller ([`Renderer::on_backend`]), used
    /// instead of opening `device`.
    opened: Option<Backend>,
    progress: Option<Box<ProgressFn<'a>>>,
    stop: Option<Box<StopFn<'a>>>,
    /// A CPU structure built by the caller ([`Renderer::cpu_structure`]),
    /// taken by the first preparation on the CPU.
    given_structure: Mutex<Option<Box<dyn caustic_accel::Accel>>>,
    /// The team this renderer's process belongs to ([`Renderer::team`]).
    team: Option<Arc<dyn Team>>,
    /// The previous frame's scene on the device ([`Renderer::follow`]),
    /// taken by the first preparation.
    carry: Mutex<Option<FrameCarry>>,
    /// How a followed frame updates its structure.
    update: UpdatePolicy,
    prepared: OnceLock<Prepared>,
}

/// What a GPU render keeps for the next frame of an animation
/// ([`Renderer::into_carry`], [`Renderer::follow`]): the flattened scene
/// and the scene on the device with its structure, which the next frame
/// updates in place — only the triangles of the meshes that move are
/// rewritten on the host and uploaded, into the device arrays they already
/// occupy, and the structure is rebuilt on the device from them or refitted
/// ([`UpdatePolicy`]). Materials, textures, uvs and still meshes never
/// travel again.
pub struct FrameCarry {
    prepared: Prepared,
    follow: Follow,
}

/// Where a followed scene's meshes lie and how its structure is updated.
#[derive(Clone)]
struct Follow {
    layout: MeshLayout,
    tracker: UpdateTracker,
}

/// What the update of a followed GPU frame did and cost
/// ([`Renderer::frame_update`]).
#[derive(Clone, Copy, Debug)]
pub struct FrameUpdate {
    /// Host time rewriting the moving meshes' triangles, normals and
    /// lights into the carried flattened scene.
    pub repose_ms: f64,
    /// Bytes sent to the device: the moved triangles (48 bytes each), their
    /// shading records where they carry normals (68 bytes each), lights
    /// that changed.
    pub upload_bytes: usize,
    /// Triangles rewritten (the moving meshes').
    pub moved_triangles: usize,
    /// Host wall time of the uploads.
    pub upload_ms: f64,
    pub action: UpdateAction,
    /// Wall time of the rebuild or refit (device work included).
    pub update_ms: f64,
    /// SAH cost of the structure traced (NaN for a grid or DACRT).
    pub sah_cost: f32,
    /// Under `auto`, the SAH of a refit that passed the bound, when the
    /// frame rebuilt because of it.
    pub rejected_refit_sah: Option<f32>,
}

/// What every render of the scene shares.
struct Prepared {
    /// On the CPU, the scene flattened with its structure built; on a GPU,
    /// with none (brute force, which builds in one copy): the GPU builds
    /// its own.
    scene: RenderScene,
    backend: Backend,
    /// On a GPU backend, the scene with the CPU structure, built for the
    /// first render that [`Renderer::backend_for`] sends to the CPU.
    #[cfg(feature = "cuda")]
    cpu_scene: OnceLock<RenderScene>,
    /// The scene on the GPU with its structure, uploaded at the first GPU render.
    #[cfg(feature = "cuda")]
    gpu_scene: OnceLock<whitted::render_cuda::GpuScene>,
    /// For a frame prepared from the previous one's carry: how it follows
    /// the animation, and what this frame's update did.
    follow: Option<(Follow, FrameUpdate)>,
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
    /// A team member's pass (passes done): its image exists only at the end.
    Team(u32),
    #[cfg(feature = "cuda")]
    Gpu(&'a sppm::GpuPassView<'a>),
}

impl SppmPass<'_> {
    /// Passes done (1 after the first).
    pub fn passes(&self) -> u32 {
        match self.view {
            PassSource::Cpu(view) => view.passes,
            PassSource::Team(passes) => passes,
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
            PassSource::Team(_) => Err(TeamError(
                "a team render's image is assembled after its last pass".into(),
            )
            .into()),
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
            PassSource::Team(_) => None,
        }
    }
}

/// A finished render.
#[derive(Clone, Debug)]
pub struct Rendered {
    /// The image: linear radiance per pixel. In a team ([`Renderer::team`],
    /// the ranks of an MPI job) only the root (rank 0) holds the image;
    /// the other members' films are empty (0 × 0).
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
            opened: None,
            progress: None,
            stop: None,
            given_structure: Mutex::new(None),
            team: None,
            carry: Mutex::new(None),
            update: UpdatePolicy::default(),
            prepared: OnceLock::new(),
        }
    }

    /// Shares every render with the other members of `team` (the ranks of
    /// an MPI job, say): each member renders its share, and only the root
    /// holds the image (the other members' films are empty). On the CPU
    /// it is bit-identical to a single process's render of the same
    /// settings (see `caustic_render::team`); on a GPU backend (each member
    /// on its own GPU) it equals one GPU's up to the order of each pixel's
    /// float sum. Progress reports count the member's own share.
    pub fn team(mut self, team: Arc<dyn Team>) -> Self {
        self.team = Some(team);
        self
    }

    /// The team when it has more than one member (which GPU renders it
    /// reaches is decided in [`Renderer::render`] and `sppm`).
    fn shared_team(&self) -> Option<&dyn Team> {
        self.team.as_deref().filter(|t| t.size() > 1)
    }

    /// Renders the next pose of an animated scene on the GPU from the
    /// previous frame's device scene (`carry`, from that frame's
    /// [`Renderer::into_carry`]): the scene given to [`Renderer::new`] must
    /// be the same scene posed anew ([`Scene::set_time`]). Its moving
    /// meshes are rewritten in the carried scene and uploaded in place,
    /// then the structure is rebuilt on the device or refitted as
    /// [`Renderer::update_policy`] says; [`Renderer::frame_update`] tells
    /// what that cost. A carry that does not fit (another device or GPU
    /// structure, other meshes) is dropped and the frame prepared afresh.
    ///
    /// [`Scene::set_time`]: caustic_scene::Scene::set_time
    pub fn follow(mut self, carry: FrameCarry) -> Self {
        self.carry = Mutex::new(Some(carry));
        self.prepared = OnceLock::new();
        self
    }

    /// How a followed frame ([`Renderer::follow`]) updates its structure:
    /// rebuild it on the device every frame, refit the previous frame's
    /// (a BVH: `refit_cuda.rs`), or `auto` (refit while the SAH stays
    /// within the bound of the last build's). Default: `auto`.
    pub fn update_policy(mut self, policy: UpdatePolicy) -> Self {
        self.update = policy;
        self
    }

    /// What this frame's update did, for a frame prepared from a carry;
    /// `None` for a frame prepared afresh.
    pub fn frame_update(&self) -> Option<FrameUpdate> {
        Some(self.prepared.get()?.follow.as_ref()?.1)
    }

    /// Ends this renderer, keeping what the next frame of the animation
    /// reuses ([`Renderer::follow`]): `Some` after a GPU render of a scene
    /// whose meshes keep their triangles from pose to pose; `None` on the
    /// CPU (whose animations carry their tree themselves, see
    /// [`Renderer::cpu_structure`]) or before any GPU render.
    pub fn into_carry(self) -> Option<FrameCarry> {
        #[cfg(feature = "cuda")]
        {
            let policy = self.update;
            let scene = self.scene;
            let prepared = self.prepared.into_inner()?;
            let sah = prepared.gpu_scene.get()?.accel().stats().sah_cost;
            let follow = match &prepared.follow {
                Some((follow, _)) => follow.clone(),
                None => {
                    let mut tracker = UpdateTracker::new(policy);
                    tracker.built(sah);
                    Follow {
                        layout: MeshLayout::new(scene)?,
                        tracker,
                    }
                }
            };
            Some(FrameCarry { prepared, follow })
        }
        #[cfg(not(feature = "cuda"))]
        {
            let _ = (self.update, self.scene);
            None
        }
    }

    /// Renders on the CPU with `structure`, built by the caller over
    /// `scene.triangles()` (the same triangles in the same order), instead
    /// of building [`Renderer::accel`]'s: how an animation reuses a tree it
    /// refitted from the previous frame, and how the CLI hands the Whitted
    /// renderer a DACRT tracer (`caustic_accel::dacrt::Dacrt`, which builds
    /// nothing and prefers batches, so the renderer traces by wavefronts).
    /// A GPU backend ignores it and builds its own.
    pub fn cpu_structure(mut self, structure: Box<dyn caustic_accel::Accel>) -> Self {
        self.given_structure = Mutex::new(Some(structure));
        self.prepared = OnceLock::new();
        self
    }

    /// The acceleration structure the renderers trace: on the CPU this
    /// structure, on a GPU its GPU version (the device build of `lbvh`,
    /// `hlbvh`, `ploc`, `bvh-binned`, `bvh-binned-staged`, the compressed
    /// wide BVH for `bvh-wide`, the CPU build uploaded for `bvh-sweep`) unless
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
        self.gpu_accel = Some(Ok(spec));
        self.prepared = OnceLock::new();
        self
    }

    /// [`Renderer::gpu_accel`] by spec string, for a structure named once
    /// for either device (a command line's `--accel`): `ploc:r=32`,
    /// `bvh-wide`, `cpu:bvh-binned`, `grid`, `kdtree`. A spec the GPU does
    /// not build (`brute`) is no error here, as the render may run on
    /// the CPU: it keeps renders off the GPU, so `Cuda` is then an error
    /// that lists what the GPU builds, and `Auto` renders on the CPU and
    /// says why ([`Renderer::backend_for`]).
    ///
    /// ```
    /// use caustic::{Device, Integrator, Renderer, Scene, WhittedSettings};
    ///
    /// let scene = Scene::builtin("cornell-box").expect("a built-in scene");
    /// let whitted = Integrator::Whitted(WhittedSettings::default());
    /// let cuda = Renderer::new(&scene).device(Device::Cuda(0)).gpu_accel_spec("brute");
    /// let err = cuda.backend_for(&whitted).unwrap_err().to_string();
    /// assert!(err.contains("no GPU builder") && err.contains("cpu:SPEC"), "{err}");
    /// ```
    #[cfg(feature = "cuda")]
    pub fn gpu_accel_spec(mut self, spec: &str) -> Self {
        self.gpu_accel = Some(spec.parse());
        self.prepared = OnceLock::new();
        self
    }

    /// Where to render.
    pub fn device(mut self, device: Device) -> Self {
        self.device = device;
        self.prepared = OnceLock::new();
        self
    }

    /// Renders on `backend`, a device the caller opened
    /// ([`Device::resolve`]), instead of opening [`Renderer::device`]'s
    /// at the first render: the renderers of successive frames then share
    /// one CUDA context and the kernels loaded into it. Set `device` to the
    /// choice that opened it: it still decides whether a render the GPU
    /// cannot do falls back to the CPU (`Auto`) or is an error (`Cuda`).
    pub fn on_backend(mut self, backend: Backend) -> Self {
        self.opened = Some(backend);
        self.prepared = OnceLock::new();
        self
    }

    /// Asks `stop` after every pass of a render made of passes (SPPM, on
    /// either device); when it answers true the render ends there, with
    /// the image and statistics of the passes done. A live view uses it to
    /// drop a render whose camera has moved. Whitted and photon-mapping
    /// renders are one pass and run to their end.
    ///
    /// ```
    /// use caustic::{Device, Integrator, Renderer, Scene, SppmSettings, Stats};
    /// use std::sync::atomic::{AtomicU32, Ordering};
    ///
    /// let scene = Scene::builtin("cornell-box").expect("a built-in scene");
    /// let done = AtomicU32::new(0);
    /// let renderer = Renderer::new(&scene)
    ///     .device(Device::Cpu)
    ///     .on_progress(|_| {
    ///         done.fetch_add(1, Ordering::Relaxed);
    ///     })
    ///     .stop_when(|| done.load(Ordering::Relaxed) == 2);
    /// let settings = SppmSettings { width: 8, height: 8, passes: 100, photons_per_pass: 500, ..Default::default() };
    /// let image = renderer.render(&scene.camera_or_default(), &Integrator::Sppm(settings))?;
    /// let Stats::Sppm(stats) = image.stats else { unreachable!("an SPPM render") };
    /// assert_eq!(stats.passes, 2);
    /// # Ok::<(), caustic::Error>(())
    /// ```
    pub fn stop_when(mut self, stop: impl Fn() -> bool + Send + Sync + 'a) -> Self {
        self.stop = Some(Box::new(stop));
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
    /// see it (triangles, lights, and on the CPU `accel.stats()`; on a GPU
    /// backend no CPU structure is built, see [`Renderer::gpu_accel_stats`]).
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
    /// photon-mapping settings the GPU version does not take, or a
    /// structure the GPU does not build, send the render to the CPU, which
    /// [`Rendered::note`] says; on `Cuda` they are an error.
    pub fn render(&self, camera: &Camera, integrator: &Integrator) -> Result<Rendered> {
        if !camera.is_valid() {
            return Err(Error::Camera(format!("{camera:?}")));
        }
        integrator.validate()?;
        let backend = self.backend_for(integrator)?;
        let prepared = self.prepared()?;
        #[cfg(feature = "cuda")]
        if backend.device_count() > 1 {
            return self.on_gpus(prepared, &backend, camera, integrator);
        }
        match integrator {
            Integrator::Whitted(settings) => self.whitted(prepared, &backend, camera, settings),
            Integrator::Photon(settings) => self.photon(prepared, &backend, camera, settings),
            Integrator::Sppm(settings) => self.sppm(prepared, &backend, camera, settings),
        }
    }

    /// The device a render with `integrator` runs on, and its one-line
    /// note, known before the render: a caller can say where a long render
    /// runs before it starts. Prepares the renderer (see
    /// [`Renderer::prepare`]) if that was not done yet.
    ///
    /// It is [`Renderer::backend`] except where the GPU cannot do the
    /// render: a structure it does not build (see
    /// [`Renderer::gpu_accel_spec`]), or photon-mapping settings its
    /// version does not take (a point structure other than the hash grid,
    /// `precompute: 0` with a final gather, `k` past the GPU's limit). On
    /// `Auto` with a GPU that is the CPU, the reason in the note; on `Cuda`
    /// an error naming the structure or the setting, before the device is
    /// opened.
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
        if self.device == Device::Cpu {
            return Ok(self.backend()?.clone());
        }
        let Some(refusal) = self.gpu_refusal(integrator) else {
            return Ok(self.backend()?.clone());
        };
        match self.device {
            Device::Cuda(_) => Err(refusal),
            Device::Auto if self.backend()?.is_gpu() => {
                Ok(Backend::cpu(format!("device: CPU (auto; {refusal})")))
            }
            _ => Ok(self.backend()?.clone()),
        }
    }

    /// Without the `cuda` feature every render runs on the CPU.
    #[cfg(not(feature = "cuda"))]
    pub fn backend_for(&self, _integrator: &Integrator) -> Result<Backend> {
        Ok(self.backend()?.clone())
    }

    /// Why the GPU cannot render `integrator` with this renderer's
    /// structure, judged from the settings alone (no device opened).
    #[cfg(feature = "cuda")]
    fn gpu_refusal(&self, integrator: &Integrator) -> Option<Error> {
        if let Err(e) = self.gpu_spec() {
            return Some(e);
        }
        match integrator {
            Integrator::Photon(settings) => settings
                .gpu_refusal()
                .map(|why| PhotonRenderError::Invalid(why).into()),
            _ => None,
        }
    }

    fn prepared(&self) -> Result<&Prepared> {
        if let Some(prepared) = self.prepared.get() {
            return Ok(prepared);
        }
        #[cfg(feature = "cuda")]
        if let Some(carry) = self.carry.lock().unwrap_or_else(|e| e.into_inner()).take()
            && let Some(prepared) = self.followed(carry)?
        {
            return Ok(self.prepared.get_or_init(|| prepared));
        }
        let backend = match &self.opened {
            Some(opened) => opened.clone(),
            None => self.device.resolve()?,
        };
        let spec = if backend.is_gpu() {
            "brute".to_owned()
        } else {
            self.accel.to_string()
        };
        let given = self
            .given_structure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .filter(|_| !backend.is_gpu());
        let scene = match given {
            Some(structure) => RenderScene::with_accel(self.scene, structure),
            None => RenderScene::new(self.scene, &spec)?,
        };
        Ok(self.prepared.get_or_init(|| Prepared {
            scene,
            backend,
            #[cfg(feature = "cuda")]
            cpu_scene: OnceLock::new(),
            #[cfg(feature = "cuda")]
            gpu_scene: OnceLock::new(),
            follow: None,
        }))
    }

    /// The previous frame's carry moved to this renderer's pose, or `None`
    /// where it does not fit (then the frame is prepared afresh).
    #[cfg(feature = "cuda")]
    fn followed(&self, carry: FrameCarry) -> Result<Option<Prepared>> {
        let FrameCarry {
            mut prepared,
            mut follow,
        } = carry;
        let same_device = match &self.opened {
            Some(opened) => opened.name() == prepared.backend.name(),
            None => self.device != Device::Cpu,
        };
        let Some(uploaded) = prepared.gpu_scene.get_mut() else {
            return Ok(None);
        };
        if !same_device
            || self.gpu_spec().ok().as_ref() != Some(uploaded.accel().spec())
            || !follow.layout.matches(self.scene)
        {
            return Ok(None);
        }
        let start = std::time::Instant::now();
        let Ok(moved) = prepared.scene.repose(self.scene, &follow.layout) else {
            return Ok(None);
        };
        // The GPU traces its own structure: the flattened scene's CPU
        // one (a brute-force copy of the first pose) would be stale.
        prepared.scene.accel = Box::new(caustic_accel::BruteForce::new(&[]));
        let repose_ms = start.elapsed().as_secs_f64() * 1e3;
        let upload = uploaded.upload_moved(&prepared.scene, &moved)?;
        let start = std::time::Instant::now();
        let tracker = &mut follow.tracker;
        let accel = uploaded.accel_mut();
        let mut rejected_refit_sah = None;
        let try_refit = match tracker.policy() {
            UpdatePolicy::Rebuild => false,
            UpdatePolicy::Refit => true,
            UpdatePolicy::Auto { .. } => accel.refits() && !tracker.must_rebuild(),
        };
        let (action, sah_cost) = 'update: {
            if try_refit {
                let refit = accel.refit()?;
                if tracker.keeps_refit(refit.sah_cost) {
                    break 'update (UpdateAction::Refitted, refit.sah_cost);
                }
                rejected_refit_sah = Some(refit.sah_cost);
            }
            accel.rebuild(&prepared.scene.triangles)?;
            let sah = accel.stats().sah_cost;
            tracker.built(sah);
            (UpdateAction::Rebuilt, sah)
        };
        let update = FrameUpdate {
            repose_ms,
            upload_bytes: upload.bytes,
            moved_triangles: upload.triangles,
            upload_ms: upload.ms,
            action,
            update_ms: start.elapsed().as_secs_f64() * 1e3,
            sah_cost,
            rejected_refit_sah,
        };
        Ok(Some(Prepared {
            // A render sent to the CPU flattens this pose afresh.
            cpu_scene: OnceLock::new(),
            follow: Some((follow, update)),
            ..prepared
        }))
    }

    /// The scene with the CPU structure: the prepared one on the CPU; on a
    /// GPU backend (a render sent to the CPU) built at the first call.
    fn cpu_scene<'p>(&self, p: &'p Prepared) -> Result<&'p RenderScene> {
        #[cfg(feature = "cuda")]
        if p.backend.is_gpu() {
            if let Some(scene) = p.cpu_scene.get() {
                return Ok(scene);
            }
            let scene = RenderScene::new(self.scene, &self.accel.to_string())?;
            return Ok(p.cpu_scene.get_or_init(|| scene));
        }
        Ok(&p.scene)
    }

    /// The build statistics of the CPU structure, once a CPU render (or
    /// [`Renderer::prepare`] on the CPU) has built it: name, build time,
    /// SAH cost, size. `None` before, or where only the GPU has rendered.
    pub fn cpu_accel_stats(&self) -> Option<&AccelStats> {
        let prepared = self.prepared.get()?;
        #[cfg(feature = "cuda")]
        if prepared.backend.is_gpu() {
            return Some(prepared.cpu_scene.get()?.accel.stats());
        }
        Some(prepared.scene.accel.stats())
    }

    /// The GPU structure to build: the explicit one, the chosen CPU
    /// structure's GPU version, or the GPU default. An error (the
    /// registry's, which lists what the GPU builds) for a structure the
    /// GPU does not build.
    #[cfg(feature = "cuda")]
    fn gpu_spec(&self) -> Result<GpuAccelSpec> {
        match &self.gpu_accel {
            Some(chosen) => Ok(chosen.clone()?),
            None if !self.accel_chosen => Ok(GpuAccelSpec::default()),
            None => crate::accelerator_cuda::gpu_spec(&self.accel)?.ok_or_else(|| {
                AccelSpecError::NotOnGpu {
                    name: self.accel.name().to_owned(),
                }
                .into()
            }),
        }
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
    pub fn gpu_accel_stats(&self) -> Option<&GpuAccelStats> {
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

    /// A team member's SPPM pass (its image exists only at the end).
    fn report_team_pass(&self, passes: u32, total: u32) {
        let view = PassSource::Team(passes);
        self.report(Progress::Pass(SppmPass { view, total }));
    }

    fn report(&self, progress: Progress<'_>) {
        if let Some(report) = &self.progress {
            report(progress);
        }
    }

    /// Whether a render of passes goes on after the one just done.
    fn next_pass(&self) -> ControlFlow<()> {
        match &self.stop {
            Some(stop) if stop() => ControlFlow::Break(()),
            _ => ControlFlow::Continue(()),
        }
    }

    fn whitted(
        &self,
        p: &Prepared,
        backend: &Backend,
        camera: &Camera,
        s: &WhittedSettings,
    ) -> Result<Rendered> {
        #[cfg(feature = "cuda")]
        if let Some(gpu) = backend.gpu() {
            let uploaded = self.gpu_scene(p, gpu)?;
            let (film, stats) = match self.shared_team() {
                // An MPI rank on its GPU: the same split as several GPUs.
                Some(team) => {
                    let (film, stats) = whitted::render_cuda_in_team(uploaded, camera, s, team)?;
                    (rank_film(film), stats)
                }
                None => uploaded.render(camera, s)?,
            };
            return Ok(rendered(film, Stats::Whitted(stats), backend));
        }
        let scene = self.cpu_scene(p)?;
        let report = |n| self.report(Progress::Pixels(n));
        let (film, stats) = match self.shared_team() {
            Some(team) => {
                let (film, stats) = whitted::render_in_team(scene, camera, s, team, &report)?;
                (rank_film(film), stats)
            }
            None => whitted::render(scene, camera, s, &report),
        };
        Ok(rendered(film, Stats::Whitted(stats), backend))
    }

    fn photon(
        &self,
        p: &Prepared,
        backend: &Backend,
        camera: &Camera,
        s: &PhotonSettings,
    ) -> Result<Rendered> {
        #[cfg(feature = "cuda")]
        if let Some(gpu) = backend.gpu() {
            use photon::render_cuda::GpuPhotonRenderer;
            let settings = s.render_settings(true);
            let uploaded = self.gpu_scene(p, gpu)?;
            let renderer = GpuPhotonRenderer::on(uploaded, &p.scene);
            let (film, stats) = match self.shared_team() {
                Some(team) => {
                    let (film, stats) = renderer.render_in_team(camera, &settings, team)?;
                    (rank_film(film), stats)
                }
                None => renderer.render(camera, &settings)?,
            };
            return Ok(rendered(film, Stats::Photon(stats), backend));
        }
        let settings = s.render_settings(false);
        let report = |n| self.report(Progress::Pixels(n));
        let scene = self.cpu_scene(p)?;
        let (film, stats) = match self.shared_team() {
            Some(team) => {
                let (film, stats) =
                    photon::render_in_team(scene, camera, &settings, team, &report)?;
                (rank_film(film), stats)
            }
            None => photon::render(scene, camera, &settings, &report)?,
        };
        Ok(rendered(film, Stats::Photon(stats), backend))
    }

    fn sppm(
        &self,
        p: &Prepared,
        backend: &Backend,
        camera: &Camera,
        s: &SppmSettings,
    ) -> Result<Rendered> {
        let total = s.passes;
        let team_report = |passes| self.report_team_pass(passes, total);
        #[cfg(feature = "cuda")]
        if let Some(gpu) = backend.gpu() {
            if let Some(team) = self.shared_team() {
                // An MPI rank on its GPU: the same split as several GPUs.
                let uploaded = self.gpu_scene(p, gpu)?;
                let (film, stats) =
                    sppm::render_cuda_in_team(uploaded, &p.scene, camera, s, team, &team_report)?;
                return Ok(rendered(rank_film(film), Stats::Sppm(stats), backend));
            }
            let mut on_pass = |view: &sppm::GpuPassView| {
                let view = PassSource::Gpu(view);
                self.report(Progress::Pass(SppmPass { view, total }));
                self.next_pass()
            };
            let uploaded = self.gpu_scene(p, gpu)?;
            let (film, stats) = sppm::render_cuda_on(uploaded, &p.scene, camera, s, &mut on_pass)?;
            return Ok(rendered(film, Stats::Sppm(stats), backend));
        }
        if let Some(team) = self.shared_team() {
            // Every member makes every pass: no early stop, which would
            // leave the others waiting at the next exchange.
            let scene = self.cpu_scene(p)?;
            let (film, stats) = sppm::render_in_team(scene, camera, s, team, &team_report)?;
            return Ok(rendered(rank_film(film), Stats::Sppm(stats), backend));
        }
        let mut on_pass = |view: &PassView| {
            let view = PassSource::Cpu(view);
            self.report(Progress::Pass(SppmPass { view, total }));
            self.next_pass()
        };
        let (film, stats) = sppm::render_passes(self.cpu_scene(p)?, camera, s, &mut on_pass)?;
        Ok(rendered(film, Stats::Sppm(stats), backend))
    }
}

#[cfg(feature = "cuda")]
impl Renderer<'_> {
    /// A render split among the backend's GPUs, one thread and one upload
    /// of the scene (with its own structure) per device, joined as a
    /// `ThreadTeam` (peer copies between the devices where they can):
    /// SPPM's passes (`sppm::render_cuda_in_team`: photons by index, pixel
    /// statistics by bands of tile rows), Whitted's bands of tile rows
    /// (`whitted::render_cuda_in_team`), photon mapping's photon waves,
    /// eye pass and final gathers (`photon::render_cuda_in_team`). The
    /// image is one GPU's up to the order of float additions within a
    /// pixel (see those functions). Progress comes from the first GPU's
    /// member.
    fn on_gpus(
        &self,
        p: &Prepared,
        backend: &Backend,
        camera: &Camera,
        integrator: &Integrator,
    ) -> Result<Rendered> {
        if self.shared_team().is_some() {
            return Err(Error::Team(TeamError(
                "several GPUs in each of several processes: give every MPI rank one device".into(),
            )));
        }
        use caustic_render::team::ThreadTeam;
        let gpus: Vec<&caustic_gpu::Gpu> = backend.gpus().collect();
        for (a, b) in gpus.iter().flat_map(|a| gpus.iter().map(move |b| (a, b))) {
            // Where the pair cannot, their copies go through the host.
            a.enable_peer_access(b)?;
        }
        let spec = self.gpu_spec()?;
        let members = ThreadTeam::run(gpus.len(), |team| -> Result<_> {
            let gpu = gpus[team.rank()];
            let own;
            let uploaded = if team.is_root() {
                self.gpu_scene(p, gpu)?
            } else {
                own = whitted::render_cuda::GpuScene::upload_with(gpu, &p.scene, &spec)?;
                &own
            };
            Ok(match integrator {
                Integrator::Whitted(s) => {
                    let (film, stats) = whitted::render_cuda_in_team(uploaded, camera, s, team)?;
                    (film, Stats::Whitted(stats))
                }
                Integrator::Photon(s) => {
                    let settings = s.render_settings(true);
                    let (film, stats) =
                        photon::render_cuda_in_team(uploaded, &p.scene, camera, &settings, team)?;
                    (film, Stats::Photon(stats))
                }
                Integrator::Sppm(s) => {
                    let total = s.passes;
                    let report = |passes| {
                        if team.is_root() {
                            self.report_team_pass(passes, total);
                        }
                    };
                    let (film, stats) =
                        sppm::render_cuda_in_team(uploaded, &p.scene, camera, s, team, &report)?;
                    (film, Stats::Sppm(stats))
                }
            })
        });
        // A member's own error comes before the others' "left the team".
        let left = |e: &Error| e.to_string().contains("left the team");
        let mut members = members.into_iter();
        let (film, stats) = match members.next().expect("a team of at least one GPU") {
            Err(e) if left(&e) => {
                return Err(members
                    .filter_map(Result::err)
                    .find(|e| !left(e))
                    .unwrap_or(e));
            }
            other => other?,
        };
        Ok(rendered(rank_film(film), stats, backend))
    }
}

/// A team member's image: the whole image on the root; the others hold
/// none (their rows went to the root) and get an empty film, which the
/// CLI's other MPI ranks never write.
fn rank_film(film: Option<Film>) -> Film {
    film.unwrap_or_else(|| Film::new(0, 0))
}

fn rendered(film: Film, stats: Stats, backend: &Backend) -> Rendered {
    Rendered {
        film,
        stats,
        device: backend.name(),
        note: backend.note().to_owned(),
    }
}
