//! A client's render thread. It poses the scene at the view's animation
//! frame, follows it with the structure (refit or rebuild, as `render
//! --frames` does), and refines the image pass by pass through the
//! library's [`Renderer`], streaming the image after every pass. An image
//! whose view has changed is dropped after the pass under way.
//!
//! Whitted and photon mapping render 1 sample per pixel first (the
//! quickest first image after a camera move), then passes of 2 to
//! [`PASS_SAMPLES`] jittered samples with a new seed each (as many as fit
//! in [`PASS_TARGET_MS`] at the last pass's speed), averaged until the
//! budget is reached. SPPM is progressive by itself: one render of
//! `budget` passes, every pass streamed, stopped between passes
//! ([`Renderer::stop_when`]) when the view changes. Either way a camera
//! move is seen after at most one pass.

use super::Viewer;
use super::mailbox::{Mailbox, Snapshot};
use super::orbit::CameraWire;
use super::protocol::FrameStats;
use super::state::ViewState;
use crate::parse::AccelArg;
use crate::render::{self, CarriedTree, IntegratorName};
use caustic::{Film, Progress, Renderer, Rgb, Scene, SppmPass, Stats, image_io};
use caustic_scene::Camera;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;
use tokio::sync::{mpsc, watch};

/// The most samples per pixel of a pass: enough to amortise a
/// photon-mapping pass's photon tracing, few enough that a pass is short.
const PASS_SAMPLES: u32 = 4;

/// The time a pass after the first aims at: a camera move waits for the
/// pass under way, so passes are kept about this short where the device
/// allows (a pass of 2 samples may take longer on a slow one).
const PASS_TARGET_MS: f64 = 50.0;

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
        },
        scene: viewer.scene.clone(),
        carried: None,
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
            if let Err(failure) = self.show(&pose, snapshot.generation) {
                self.streamer.out.error(failure.message);
                self.failed = Some(failure.generation);
            }
        }
    }

    /// Poses the scene and its structure, then refines images of it until
    /// the view leaves the pose.
    fn show(&mut self, pose: &Pose, generation: u64) -> Result<(), Failure> {
        let viewer = self.streamer.viewer;
        let fail = |message: String| Failure {
            generation,
            message,
        };
        let start = Instant::now();
        let time = viewer.time_of_frame(pose.frame);
        self.scene.set_time(time);
        let scene_camera = viewer.scene_camera(&self.scene);
        self.streamer.mailbox.show_scene_camera(scene_camera);
        let (given, refit) = self.follow(pose).map_err(|e| fail(format!("{e:#}")))?;
        let streamer = &self.streamer;
        let mut renderer = render::renderer(&self.scene, pose.accel.as_ref(), viewer.device)
            .on_backend(viewer.backend.clone())
            .on_progress(|progress| streamer.sppm_pass(progress))
            .stop_when(|| streamer.sppm_unwanted());
        if let Some(tree) = given {
            renderer = renderer.cpu_structure(tree);
        }
        viewer
            .pool
            .install(|| prepare(&renderer))
            .map_err(|e| fail(format!("cannot prepare the scene: {e}")))?;
        let shown = Shown {
            time,
            frame: pose.frame,
            scene_camera,
            update_ms: start.elapsed().as_secs_f64() * 1e3,
            structure: match refit {
                Some(words) => format!("{} {words}", spec_name(pose)),
                None => render::structure(&renderer, viewer.backend.is_gpu()),
            },
        };
        streamer.refine(&renderer, pose, &shown)
    }

    /// The structure for `pose` when the render thread carries one from
    /// frame to frame (refit or rebuilt by the update policy), with the
    /// words that say which it did.
    fn follow(
        &mut self,
        pose: &Pose,
    ) -> anyhow::Result<(Option<Box<dyn caustic_accel::Accel>>, Option<String>)> {
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
            return Ok((None, None));
        };
        let triangles = self.scene.triangles();
        let words = viewer.pool.install(|| tree.update(&triangles))?;
        Ok((Some(tree.shared()), Some(words)))
    }
}

/// The structure's spec as the client chose it.
fn spec_name(pose: &Pose) -> String {
    pose.accel
        .as_ref()
        .map_or_else(|| render::DEFAULT_ACCEL.to_owned(), |a| a.spec.clone())
}

/// Builds the structure (and on a GPU uploads the scene) before the first
/// pass, so that its time is the update's, not the render's.
fn prepare(renderer: &Renderer) -> caustic::Result<()> {
    renderer.prepare()?;
    #[cfg(feature = "cuda")]
    renderer.prepare_gpu()?;
    Ok(())
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

/// What an image is accumulated for; a change restarts it.
#[derive(Clone, Debug, PartialEq)]
struct Look {
    camera: Camera,
    integrator: IntegratorName,
}

impl Look {
    fn of(view: &ViewState, scene_camera: Camera) -> Self {
        Self {
            camera: view.camera.unwrap_or(scene_camera),
            integrator: view.integrator,
        }
    }
}

/// The running mean of a look's passes.
struct Accumulation {
    look: Look,
    sum: Vec<Rgb>,
    samples: u32,
    passes: u32,
    /// Milliseconds per sample per pixel of the last pass.
    sample_ms: f64,
}

impl Accumulation {
    fn new(look: Look) -> Self {
        Self {
            look,
            sum: Vec::new(),
            samples: 0,
            passes: 0,
            sample_ms: 0.0,
        }
    }

    /// Samples per pixel of the next pass, at most `left`: one for the
    /// first (the pixel centres, the quickest image); then at least two,
    /// as Whitted's single sample is always the centre and adds nothing
    /// new, and as many more as fit in [`PASS_TARGET_MS`].
    fn next_pass(&self, left: u32) -> u32 {
        if self.passes == 0 {
            return 1;
        }
        let fit = (PASS_TARGET_MS / self.sample_ms.max(1e-3)).floor();
        let samples = fit.clamp(2.0, f64::from(PASS_SAMPLES)) as u32;
        samples.min(left)
    }

    fn add(&mut self, film: &Film, samples: u32, ms: f64) {
        self.sample_ms = ms / f64::from(samples.max(1));
        self.sum.resize(film.pixels.len(), Rgb::ZERO);
        for (sum, &value) in self.sum.iter_mut().zip(&film.pixels) {
            *sum += value * samples as f32;
        }
        self.samples += samples;
        self.passes += 1;
    }

    fn mean(&self, width: u32, height: u32) -> Film {
        let mut film = Film::new(width, height);
        let scale = 1.0 / self.samples.max(1) as f32;
        for (out, &sum) in film.pixels.iter_mut().zip(&self.sum) {
            *out = sum * scale;
        }
        film
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
            let look = Look::of(&snapshot.view, shown.scene_camera);
            let image = match &mut image {
                Some(image) if image.look == look => image,
                _ => image.insert(Accumulation::new(look)),
            };
            if image.samples >= snapshot.view.budget {
                let wait = self.viewer.idle_wait(&snapshot.view);
                self.mailbox.wait(snapshot.generation, wait);
                continue;
            }
            let done = match snapshot.view.integrator {
                IntegratorName::Sppm => self.sppm(renderer, &snapshot, image, shown),
                _ => self.pass(renderer, &snapshot, image, shown),
            };
            done.map_err(|message| Failure {
                generation: snapshot.generation,
                message,
            })?;
        }
    }

    /// One pass of Whitted or photon mapping, added to `image` and sent.
    fn pass(
        &self,
        renderer: &Renderer,
        snapshot: &Snapshot,
        image: &mut Accumulation,
        shown: &Shown,
    ) -> Result<(), String> {
        let view = &snapshot.view;
        let samples = image.next_pass(view.budget - image.samples);
        let integrator = self
            .viewer
            .integrator(view.integrator, samples, image.passes);
        let rendered = self
            .viewer
            .pool
            .install(|| renderer.render(&image.look.camera, &integrator))
            .map_err(|e| e.to_string())?;
        let seconds = rendered.stats.seconds();
        image.add(&rendered.film, samples, seconds * 1e3);
        let stats = FrameStats {
            samples: image.samples,
            done: image.samples >= view.budget,
            render_ms: seconds * 1e3,
            mrays_per_s: rendered.stats.rays() as f64 / seconds.max(1e-9) / 1e6,
            ..self.stats(snapshot, &image.look.camera, shown)
        };
        let (width, height) = (rendered.film.width, rendered.film.height);
        self.out
            .frame(&image.mean(width, height), stats, self.viewer.exposure);
        Ok(())
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
        let integrator = self.viewer.integrator(IntegratorName::Sppm, view.budget, 0);
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
                self.out.frame(&film, stats, self.viewer.exposure);
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

#[cfg(test)]
mod tests {
    use super::*;
    use caustic_geom::Vec3;

    #[test]
    fn passes_start_with_one_sample_then_fit_the_target_time() {
        let look = Look {
            camera: Camera::look_at(Vec3::Z, Vec3::ZERO, Vec3::Y, 45.0),
            integrator: IntegratorName::Whitted,
        };
        let mut image = Accumulation::new(look);
        assert_eq!(image.next_pass(64), 1);
        let film = Film::new(2, 1);
        // Fast passes take the most samples; the budget caps them.
        image.add(&film, 1, 1.0);
        assert_eq!((image.next_pass(64), image.next_pass(3)), (PASS_SAMPLES, 3));
        // Slow ones take two, never the centre-only single sample.
        image.add(&film, 4, 4.0 * PASS_TARGET_MS);
        assert_eq!(image.next_pass(64), 2);
        assert_eq!(image.next_pass(1), 1);
        assert_eq!((image.samples, image.passes), (5, 2));
        // 15 ms a sample: three fit in 50 ms.
        image.add(&film, 2, 30.0);
        assert_eq!(image.next_pass(64), 3);
    }

    #[test]
    fn the_image_is_the_sample_weighted_mean_of_its_passes() {
        let look = Look {
            camera: Camera::look_at(Vec3::Z, Vec3::ZERO, Vec3::Y, 45.0),
            integrator: IntegratorName::Photon,
        };
        let mut image = Accumulation::new(look);
        let mut film = Film::new(1, 1);
        film.pixels[0] = Rgb::splat(1.0);
        image.add(&film, 1, 1.0);
        film.pixels[0] = Rgb::splat(4.0);
        image.add(&film, 3, 1.0);
        assert_eq!(image.mean(1, 1).pixels[0], Rgb::splat(13.0 / 4.0));
    }
}
