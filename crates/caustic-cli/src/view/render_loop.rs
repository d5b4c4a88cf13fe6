//! A client's render thread. It poses the scene at the view's animation
//! frame, follows it with the structure (refit or rebuild, as `render
//! --frames` does; on a GPU the scene stays on the device from pose to
//! pose, [`caustic::FrameCarry`], and only the moving meshes are
//! uploaded), and refines the image pass by pass through the
//! library's [`Renderer`], streaming the image after every pass. An image
//! whose view has changed is dropped after the pass under way.
//!
//! Whitted and photon mapping refine as `passes.rs` plans: a quick first
//! image (a coarser preview on a slow device), no long pass while the
//! camera is moving, then passes of a few jittered samples averaged until
//! the budget is reached. SPPM is progressive by itself: one render of
//! `budget` passes, every pass streamed, stopped between passes
//! ([`Renderer::stop_when`]) when the view changes.

use super::Viewer;
use super::mailbox::{Mailbox, Snapshot};
use super::orbit::CameraWire;
use super::passes::{self, Accumulation, Look, Plan, Speed};
use super::protocol::FrameStats;
use super::state::ViewState;
use crate::parse::AccelArg;
use crate::render::{self, CarriedTree, IntegratorName};
use caustic::{Film, Integrator, Progress, Renderer, Scene, SppmPass, Stats, image_io};
use caustic_scene::Camera;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;
use tokio::sync::{mpsc, watch};

/// JPEG quality of streamed frames: visually lossless for noisy renders
/// at a tenth of the bytes of a PNG.
const JPEG_QUALITY: u8 = 85;

/// One streamed image and its statistics.
pub struct Frame {
    pub stats: FrameStats,
    pub jpeg: Vec<u8>,
}

/// Where a render thread's output goes: the newest frame (a frame not yet
/// sent when the next arrives is dropped: the client wants the newest),
/// and error texts for the client.
pub struct Outbox {
    pub frames: watch::Sender<Option<Arc<Frame>>>,
    pub errors: mpsc::Sender<String>,
}

impl Outbox {
    fn frame(&self, film: &Film, stats: FrameStats, exposure: f32) {
        match image_io::jpeg_bytes(film, exposure, JPEG_QUALITY) {
            Ok(jpeg) => {
                self.frames
                    .send_replace(Some(Arc::new(Frame { stats, jpeg })));
            }
            Err(e) => self.error(format!("cannot encode the image: {e}")),
        }
    }

    fn error(&self, message: String) {
        // A client too slow to read its errors loses some; rendering never
        // waits for it.
        let _ = self.errors.try_send(message);
    }
}

/// Serves one client's views until its connection ends.
pub fn run(viewer: &Viewer, mailbox: &Mailbox, out: &Outbox) {
    let mut worker = Worker {
        streamer: Streamer {
            viewer,
            mailbox,
            out,
            sppm: Mutex::new(None),
            speed: Speed::default(),
        },
        scene: viewer.scene.clone(),
        carried: None,
        gpu_carry: None,
        failed: None,
    };
    worker.run();
}

/// What the structure is built for: an animation frame and a structure.
#[derive(Clone, Debug, PartialEq)]
pub struct Pose {
    pub frame: u32,
    pub accel: Option<AccelArg>,
}

/// A refused view: the client hears why, and the thread waits for the
/// next request rather than failing again.
struct Failure {
    generation: u64,
    message: String,
}

/// The render thread's state: its own copy of the scene to pose, and the
/// tree it refits from frame to frame.
struct Worker<'v> {
    streamer: Streamer<'v>,
    scene: Scene,
    carried: Option<Carried>,
    /// The scene the GPU rendered the last pose of, kept on the device.
    gpu_carry: Option<caustic::FrameCarry>,
    /// The view that failed last; not tried again until it changes.
    failed: Option<u64>,
}

/// The tree carried for one structure choice (`None` where it cannot be
/// refit: the renderer then builds afresh each frame).
struct Carried {
    accel: Option<AccelArg>,
    tree: Option<CarriedTree>,
}

impl Worker<'_> {
    fn run(&mut self) {
        let mailbox = self.streamer.mailbox;
        while let Some(snapshot) = mailbox.snapshot() {
            if self.failed == Some(snapshot.generation) {
                mailbox.wait(
                    snapshot.generation,
                    self.streamer.viewer.idle_wait(&snapshot.view),
                );
                continue;
            }
            let pose = self.streamer.viewer.pose(&snapshot.view, Instant::now());
            if let Err(failure) = self.show(&pose, &snapshot) {
                self.streamer.out.error(failure.message);
                self.failed = Some(failure.generation);
            }
        }
    }

    /// Poses the scene and its structure, then refines images of it until
    /// the view leaves the pose.
    fn show(&mut self, pose: &Pose, snapshot: &Snapshot) -> Result<(), Failure> {
        let viewer = self.streamer.viewer;
        let fail = |message: String| Failure {
            generation: snapshot.generation,
            message,
        };
        let start = Instant::now();
        let time = viewer.time_of_frame(pose.frame);
        self.scene.set_time(time);
        let scene_camera = viewer.scene_camera(&self.scene);
        self.streamer.mailbox.show_scene_camera(scene_camera);
        let followed = self.follow(pose).map_err(|e| fail(format!("{e:#}")))?;
        let refit = followed.as_ref().map(|f| f.words.clone());
        let streamer = &self.streamer;
        let mut renderer = render::renderer(&self.scene, pose.accel.as_ref(), viewer.device)
            .on_backend(viewer.backend.clone())
            .update_policy(viewer.update)
            .on_progress(|progress| streamer.sppm_pass(progress))
            .stop_when(|| streamer.sppm_unwanted());
        if let Some(carry) = self.gpu_carry.take() {
            renderer = renderer.follow(carry);
        }
        if let Some(followed) = followed {
            renderer = renderer.cpu_structure(followed.tree);
        }
        let integrator = viewer.integrator(snapshot.view.integrator, 1, 0, 1);
        let on_gpu = viewer
            .pool
            .install(|| prepare(&renderer, &integrator))
            .map_err(|e| fail(format!("cannot prepare the scene: {e}")))?;
        let shown = Shown {
            time,
            frame: pose.frame,
            scene_camera,
            update_ms: start.elapsed().as_secs_f64() * 1e3,
            structure: match refit {
                Some(words) => format!("{} {words}", spec_name(pose)),
                None => render::structure(&renderer, on_gpu),
            },
        };
        let refined = streamer.refine(&renderer, pose, &shown);
        self.gpu_carry = renderer.into_carry();
        refined
    }

    /// The structure for `pose` when the render thread carries one from
    /// frame to frame (refit or rebuilt by the update policy), with the
    /// words that say which it did.
    fn follow(&mut self, pose: &Pose) -> anyhow::Result<Option<Followed>> {
        let viewer = self.streamer.viewer;
        if self.carried.as_ref().is_none_or(|c| c.accel != pose.accel) {
            let tree = CarriedTree::new(
                pose.accel.as_ref(),
                !viewer.backend.is_gpu(),
                viewer.update,
                viewer.fixed_topology,
            )?;
            self.carried = Some(Carried {
                accel: pose.accel.clone(),
                tree,
            });
        }
        let Some(tree) = self.carried.as_mut().and_then(|c| c.tree.as_mut()) else {
            return Ok(None);
        };
        let triangles = self.scene.triangles();
        let words = viewer.pool.install(|| tree.update(&triangles))?;
        Ok(Some(Followed {
            tree: tree.shared(),
            words,
        }))
    }
}

/// The carried tree, posed for a frame, and what its update did.
struct Followed {
    tree: Box<dyn caustic_accel::Accel>,
    words: String,
}

/// The structure's spec as the client chose it.
fn spec_name(pose: &Pose) -> String {
    pose.accel
        .as_ref()
        .map_or_else(|| render::DEFAULT_ACCEL.to_owned(), |a| a.spec.clone())
}

/// Builds the structure before the first pass, so that its time is the
/// update's, not the render's: on the CPU, or where the GPU renders
/// `integrator` (not on `auto` when it falls back to the CPU) the scene
/// uploaded and the structure built there. Whether the GPU renders.
fn prepare(renderer: &Renderer, integrator: &Integrator) -> caustic::Result<bool> {
    renderer.prepare()?;
    let on_gpu = renderer.backend_for(integrator)?.is_gpu();
    #[cfg(feature = "cuda")]
    if on_gpu {
        renderer.prepare_gpu()?;
    }
    Ok(on_gpu)
}

/// What the frames of one pose say of it.
#[derive(Clone)]
struct Shown {
    time: f32,
    frame: u32,
    scene_camera: Camera,
    update_ms: f64,
    structure: String,
}

/// The look `view` asks for, its camera the scene's when it has none.
fn look_of(view: &ViewState, scene_camera: Camera) -> Look {
    Look {
        camera: view.camera.unwrap_or(scene_camera),
        integrator: view.integrator,
    }
}

/// The SPPM render under way, for the renderer's callbacks.
struct SppmJob {
    snapshot: Snapshot,
    frame: u32,
    camera: Camera,
    shown: Shown,
    last_pass: Instant,
}

/// The half of a render thread that the renderer's callbacks see.
struct Streamer<'v> {
    viewer: &'v Viewer,
    mailbox: &'v Mailbox,
    out: &'v Outbox,
    sppm: Mutex<Option<SppmJob>>,
    /// How fast passes go on this device, for planning the next.
    speed: Speed,
}

impl Streamer<'_> {
    /// Renders passes of the pose's images, restarting the image when the
    /// look changes, until the view leaves the pose or the client leaves.
    fn refine(&self, renderer: &Renderer, pose: &Pose, shown: &Shown) -> Result<(), Failure> {
        let mut image: Option<Accumulation> = None;
        loop {
            let Some(snapshot) = self.mailbox.snapshot() else {
                return Ok(());
            };
            if self.viewer.pose(&snapshot.view, Instant::now()) != *pose {
                return Ok(());
            }
            let look = look_of(&snapshot.view, shown.scene_camera);
            let image = match &mut image {
                Some(image) if image.look == look => image,
                _ => image.insert(Accumulation::new(look, Instant::now())),
            };
            let view = &snapshot.view;
            if image.samples >= view.budget {
                let wait = self.viewer.idle_wait(view);
                self.mailbox.wait(snapshot.generation, wait);
                continue;
            }
            let done = if view.integrator == IntegratorName::Sppm {
                self.sppm(renderer, &snapshot, image, shown)
            } else {
                self.step(renderer, &snapshot, image, shown)
            };
            done.map_err(|message| Failure {
                generation: snapshot.generation,
                message,
            })?;
        }
    }

    /// The next step of a Whitted or photon-mapping image, as planned.
    fn step(
        &self,
        renderer: &Renderer,
        snapshot: &Snapshot,
        image: &mut Accumulation,
        shown: &Shown,
    ) -> Result<(), String> {
        let pixels = u64::from(self.viewer.width) * u64::from(self.viewer.height);
        let speed = self.speed.ms_per_pixel_sample();
        let left = snapshot.view.budget - image.samples;
        match image.plan(speed, pixels, left, Instant::now()) {
            Plan::Settle(wait) => {
                self.mailbox.wait(snapshot.generation, wait);
                Ok(())
            }
            Plan::Preview { scale } => self.preview(renderer, snapshot, image, shown, scale),
            Plan::Pass { samples } => self.pass(renderer, snapshot, image, shown, samples),
        }
    }

    /// One full-resolution pass of `samples` per pixel, added to `image`
    /// and sent.
    fn pass(
        &self,
        renderer: &Renderer,
        snapshot: &Snapshot,
        image: &mut Accumulation,
        shown: &Shown,
        samples: u32,
    ) -> Result<(), String> {
        let view = &snapshot.view;
        let integrator = self
            .viewer
            .integrator(view.integrator, samples, image.passes, 1);
        let rendered = self.render(renderer, &image.look.camera, &integrator, samples)?;
        image.add(&rendered.film, samples);
        let stats = FrameStats {
            samples: image.samples,
            done: image.samples >= view.budget,
            ..self.pass_stats(snapshot, &image.look.camera, shown, &rendered)
        };
        let (width, height) = (rendered.film.width, rendered.film.height);
        self.send(&image.mean(width, height), stats);
        Ok(())
    }

    /// A one-sample image at 1/`scale` of the resolution per side, sent
    /// enlarged; `image` keeps nothing of it.
    fn preview(
        &self,
        renderer: &Renderer,
        snapshot: &Snapshot,
        image: &mut Accumulation,
        shown: &Shown,
        scale: u32,
    ) -> Result<(), String> {
        let viewer = self.viewer;
        let integrator = viewer.integrator(snapshot.view.integrator, 1, 0, scale);
        let rendered = self.render(renderer, &image.look.camera, &integrator, 1)?;
        image.previewed();
        let stats = FrameStats {
            scale,
            ..self.pass_stats(snapshot, &image.look.camera, shown, &rendered)
        };
        let film = passes::enlarge(&rendered.film, scale, viewer.width, viewer.height);
        self.send(&film, stats);
        Ok(())
    }

    /// Encodes and hands over a frame, on the viewer's pool (the sRGB
    /// conversion is parallel).
    fn send(&self, film: &Film, stats: FrameStats) {
        let exposure = self.viewer.exposure;
        self.viewer
            .pool
            .install(|| self.out.frame(film, stats, exposure));
    }

    /// Renders on the viewer's pool and records the device's speed.
    fn render(
        &self,
        renderer: &Renderer,
        camera: &Camera,
        integrator: &Integrator,
        samples: u32,
    ) -> Result<caustic::Rendered, String> {
        let rendered = self
            .viewer
            .pool
            .install(|| renderer.render(camera, integrator))
            .map_err(|e| e.to_string())?;
        let pixels = rendered.film.pixels.len() as u64;
        let ms = rendered.stats.seconds() * 1e3;
        self.speed.record(ms, pixels, samples);
        Ok(rendered)
    }

    /// The statistics of a frame made by `rendered`'s pass.
    fn pass_stats(
        &self,
        snapshot: &Snapshot,
        camera: &Camera,
        shown: &Shown,
        rendered: &caustic::Rendered,
    ) -> FrameStats {
        let seconds = rendered.stats.seconds();
        FrameStats {
            render_ms: seconds * 1e3,
            mrays_per_s: rendered.stats.rays() as f64 / seconds.max(1e-9) / 1e6,
            ..self.stats(snapshot, camera, shown)
        }
    }

    /// An SPPM render of `budget` passes; the renderer's progress reports
    /// stream its passes ([`Streamer::sppm_pass`]) and its stop test ends
    /// it when the view changes ([`Streamer::sppm_unwanted`]).
    fn sppm(
        &self,
        renderer: &Renderer,
        snapshot: &Snapshot,
        image: &mut Accumulation,
        shown: &Shown,
    ) -> Result<(), String> {
        let view = &snapshot.view;
        let integrator = self
            .viewer
            .integrator(IntegratorName::Sppm, view.budget, 0, 1);
        *self.job() = Some(SppmJob {
            snapshot: snapshot.clone(),
            frame: self.viewer.pose(view, Instant::now()).frame,
            camera: image.look.camera,
            shown: shown.clone(),
            last_pass: Instant::now(),
        });
        let rendered = self
            .viewer
            .pool
            .install(|| renderer.render(&image.look.camera, &integrator));
        *self.job() = None;
        let rendered = rendered.map_err(|e| e.to_string())?;
        if let Stats::Sppm(stats) = rendered.stats {
            image.samples = stats.passes;
            image.passes = stats.passes;
        }
        Ok(())
    }

    fn job(&self) -> std::sync::MutexGuard<'_, Option<SppmJob>> {
        self.sppm.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The renderer's progress report: an SPPM pass is streamed.
    fn sppm_pass(&self, progress: Progress<'_>) {
        let Progress::Pass(pass) = progress else {
            return;
        };
        let mut job = self.job();
        let Some(job) = job.as_mut() else {
            return;
        };
        match pass.film() {
            Ok(film) => {
                let stats = self.sppm_stats(job, &pass);
                self.send(&film, stats);
            }
            Err(e) => self.out.error(format!("cannot read the SPPM image: {e}")),
        }
        job.last_pass = Instant::now();
    }

    fn sppm_stats(&self, job: &SppmJob, pass: &SppmPass) -> FrameStats {
        // The CPU keeps running totals; the GPU reports at the end only.
        let mrays_per_s = pass
            .stats()
            .map_or(0.0, |s| s.rays as f64 / s.seconds.max(1e-9) / 1e6);
        FrameStats {
            samples: pass.passes(),
            done: pass.passes() >= pass.total(),
            render_ms: job.last_pass.elapsed().as_secs_f64() * 1e3,
            mrays_per_s,
            ..self.stats(&job.snapshot, &job.camera, &job.shown)
        }
    }

    /// The renderer's stop test: the SPPM render's view has changed, its
    /// animation frame has passed, or the client has left.
    fn sppm_unwanted(&self) -> bool {
        let job = self.job();
        let Some(job) = job.as_ref() else {
            return false;
        };
        self.mailbox.stale(job.snapshot.generation)
            || self.viewer.pose(&job.snapshot.view, Instant::now()).frame != job.frame
    }

    /// The statistics every frame of `snapshot` shares; the pass fields
    /// are filled in by the caller.
    fn stats(&self, snapshot: &Snapshot, camera: &Camera, shown: &Shown) -> FrameStats {
        let view = &snapshot.view;
        let viewer = self.viewer;
        FrameStats {
            view: snapshot.generation,
            samples: 0,
            budget: view.budget,
            done: false,
            integrator: integrator_name(view.integrator),
            structure: shown.structure.clone(),
            update_ms: shown.update_ms,
            render_ms: 0.0,
            mrays_per_s: 0.0,
            time: shown.time,
            frame: shown.frame,
            playing: view.playhead.playing(),
            camera: CameraWire::from_camera(camera, viewer.aspect()),
            width: viewer.width,
            height: viewer.height,
            scale: 1,
        }
    }
}

/// The protocol's name of an integrator (the command line's).
pub fn integrator_name(name: IntegratorName) -> &'static str {
    match name {
        IntegratorName::Whitted => "whitted",
        IntegratorName::Photon => "photon",
        IntegratorName::Sppm => "sppm",
    }
}
