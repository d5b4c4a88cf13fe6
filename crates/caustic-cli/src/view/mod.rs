//! `caustic view`: look around a scene in the browser. A local web server
//! serves one page; over a WebSocket the page sends camera, clock and
//! settings requests and receives the progressively refined image as JPEG
//! frames with their statistics.
//!
//! The rooms:
//! - `server.rs`: the HTTP server (axum on tokio): the page, the
//!   WebSocket upgrade, the client limit, shutdown on Ctrl-C.
//! - `session.rs`: one client's connection: requests in (size and rate
//!   limits, errors answered), frames and errors out.
//! - `protocol.rs`: the messages and the limits.
//! - `state.rs`: one client's view and how requests change it;
//!   `orbit.rs`: the camera moves; `mailbox.rs`: the hand-over of the
//!   newest view to the render thread.
//! - `render_loop.rs`: the render thread: poses the scene, builds or refits
//!   its structure, renders passes through the library's `Renderer` (the
//!   one `caustic render` uses, on the CPU or the GPU) and streams them;
//!   `passes.rs`: what the next pass is (preview, wait, or how many
//!   samples) and the running mean.
//! - `bench.rs`: `caustic bench view`, the interaction latency.
//! - `page.html`, `page.js`, `page.css`: the page, built into the binary.
//!
//! Every client has a session of its own (camera, clock, settings and a
//! render thread); the sessions share the scene as loaded, the device
//! (one CUDA context) and the CPU worker pool, so two clients each render
//! at about half the speed. At most `--max-clients` are served at once.

pub mod bench;
mod mailbox;
mod orbit;
mod passes;
mod protocol;
mod render_loop;
mod server;
mod session;
mod state;

use crate::render::{self, CarriedTree, IntegratorName, RenderFlags};
use crate::{device, notes, scene_arg};
use anyhow::{Context, Result, bail};
use caustic::{Backend, Device, Integrator, Scene};
use caustic_accel::bvh::UpdatePolicy;
use caustic_scene::{Camera, Timeline};
use clap::Args;
use state::{Playhead, ViewState};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The scene a bare `caustic view` shows: animated, with caustics.
const DEFAULT_SCENE: &str = "cornell-caustics-moving";

/// Samples per pixel an image refines to unless told otherwise.
const DEFAULT_BUDGET: u32 = 64;

fn help() -> &'static str {
    "Examples:\n  \
     caustic view                                  # cornell-caustics-moving at http://127.0.0.1:8080/\n  \
     caustic view cornell-box --integrator photon --port 9000\n  \
     caustic view scene.aff --device cuda --accel lbvh --width 1024 --height 768\n  \
     caustic view model.glb --bind 0.0.0.0          # reachable from other machines\n\n\
     In the page: drag to orbit, right-drag or shift-drag to pan, wheel to zoom; the \
     controls play, pause and scrub an animation and choose integrator, structure and \
     sample budget. Every browser tab is a session of its own."
}

#[derive(Args)]
#[command(after_help = help())]
pub struct ViewArgs {
    #[command(flatten)]
    pub setup: SetupArgs,
    /// Port to listen on (0: any free port; the address is printed).
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Address to listen on. The default serves this machine only;
    /// `0.0.0.0` serves every network the machine is on (the viewer has
    /// no authentication).
    #[arg(long, default_value = "127.0.0.1")]
    bind: IpAddr,
    /// Most clients served at once; more are told to come back later.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=64), allow_negative_numbers = true)]
    max_clients: u16,
}

/// What the viewer renders and how: the flags `view` and `bench view`
/// share; those that say what an image is made of are `render`'s.
#[derive(Args)]
pub struct SetupArgs {
    /// Scene file (.obj, .ply, .gltf, .glb, .xml, .aff) or built-in scene name.
    #[arg(default_value = DEFAULT_SCENE)]
    scene: String,
    /// The integrator the page starts with (it can switch).
    #[arg(long, value_enum, default_value_t = IntegratorName::Whitted)]
    integrator: IntegratorName,
    /// Samples per pixel (sppm: passes) after which the image stops
    /// refining [default: 64; with --integrator sppm its --passes].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=protocol::MAX_BUDGET as i64), allow_negative_numbers = true)]
    budget: Option<u32>,
    /// No notes (the device line among them); the address still prints.
    #[arg(short, long)]
    quiet: bool,
    #[command(flatten)]
    flags: RenderFlags,
}

/// What every session shares: the scene as loaded, the device opened
/// once, the worker pool, and the settings the flags chose.
pub struct Viewer {
    /// The scene at the start of its clock, lit and sided as asked.
    pub scene: Scene,
    pub name: String,
    /// The camera the flags chose, at the start of the clock.
    start_camera: Camera,
    /// Whether the view follows the scene's own (animated) camera.
    follows_scene: bool,
    pub clock: Option<Timeline>,
    pub backend: Backend,
    /// What renders, in words: the GPU's name or the CPU threads.
    pub device_name: String,
    pub device: Device,
    pub pool: rayon::ThreadPool,
    pub width: u32,
    pub height: u32,
    pub update: UpdatePolicy,
    pub fixed_topology: bool,
    pub exposure: f32,
    seed: u64,
    /// Each integrator's settings at one sample per pixel.
    templates: [Integrator; 3],
    /// The view a new client starts with.
    pub first_view: ViewState,
}

impl Viewer {
    /// Loads the scene, opens the device and checks the flags, so that a
    /// mistake is an error before the server starts.
    pub fn new(setup: &SetupArgs) -> Result<Self> {
        let flags = &setup.flags;
        notes::set_quiet(setup.quiet);
        if flags.sppm.scores() {
            bail!("--score is for `caustic render --integrator sppm`; the viewer has no reference");
        }
        render::check_gpu_flags(flags.device, flags.accel.as_ref())?;
        let loaded = scene_arg::load(&setup.scene)?;
        let start_camera = flags.camera.resolve(&loaded)?;
        let mut scene = loaded.scene;
        flags.apply_sides(&mut scene);
        render::add_headlight_if_unlit(&mut scene, start_camera.eye);
        let clock = scene.timeline();
        let follows_scene = clock.is_some() && scene.camera == Some(start_camera);
        let fixed_topology = scene.animation.as_ref().is_none_or(|a| a.fixed_topology());
        let backend = device::open(flags.device)?;
        // `--update refit` where the device or structure cannot refit is
        // refused now rather than at every frame.
        let on_cpu = !backend.is_gpu();
        CarriedTree::new(flags.accel.as_ref(), on_cpu, flags.update, fixed_topology)?;
        let common = flags.common(&scene, 1, (640, 480));
        let (width, height) = (common.width, common.height);
        // Each integrator's settings at one sample per pixel, indexed by
        // `IntegratorName`.
        let templates = [
            IntegratorName::Whitted,
            IntegratorName::Photon,
            IntegratorName::Sppm,
        ]
        .map(|name| flags.integrator(name, &common));
        let integrator = &templates[setup.integrator as usize];
        integrator.validate()?;
        let budget = setup.budget.unwrap_or(match integrator {
            Integrator::Sppm(s) => s.passes.min(protocol::MAX_BUDGET),
            _ => DEFAULT_BUDGET,
        });
        let pool = crate::thread_pool(flags.threads())?;
        // Named inside the pool, whose threads are the ones that render.
        let device_name = pool.install(|| backend.name());
        let first_view = ViewState {
            camera: None,
            playhead: Playhead::paused_at(clock.map_or(0.0, |c| c.start)),
            integrator: setup.integrator,
            accel: flags.accel.clone(),
            budget,
        };
        Ok(Self {
            scene,
            name: loaded.name,
            start_camera,
            follows_scene,
            clock,
            backend,
            device_name,
            device: flags.device,
            pool,
            width,
            height,
            update: flags.update,
            fixed_topology,
            exposure: flags.exposure,
            seed: flags.seed,
            templates,
            first_view,
        })
    }

    /// Width over height of the image.
    pub fn aspect(&self) -> f32 {
        self.width as f32 / self.height as f32
    }

    /// The animation frame and structure `view` asks for at `now`.
    pub fn pose(&self, view: &ViewState, now: Instant) -> render_loop::Pose {
        let clock = self.clock.as_ref();
        let frame = clock.map_or(0, |c| c.frame_at(view.playhead.time(clock, now)));
        render_loop::Pose {
            frame,
            accel: view.accel.clone(),
        }
    }

    /// The instant of animation frame `frame` (0 for a still scene).
    pub fn time_of_frame(&self, frame: u32) -> f32 {
        self.clock.map_or(0.0, |c| c.time_of_frame(frame))
    }

    /// The camera of the scene as posed: its own camera where the view
    /// follows the file's camera path, else the one the flags chose.
    pub fn scene_camera(&self, posed: &Scene) -> Camera {
        match posed.camera {
            Some(camera) if self.follows_scene => camera,
            _ => self.start_camera,
        }
    }

    /// How long a render thread with a finished image sleeps before it
    /// looks at the clock again: while playing, half a frame.
    pub fn idle_wait(&self, view: &ViewState) -> Duration {
        let frame = self.clock.and_then(|c| c.fps()).map(|fps| 0.5 / fps);
        match frame {
            Some(half) if view.playhead.playing() => Duration::from_secs_f32(half.max(0.002)),
            _ => Duration::from_secs(1),
        }
    }

    /// `name`'s settings for one pass: `samples` per pixel (SPPM:
    /// passes), the seed of pass `pass`, and 1/`scale` of the resolution
    /// per side (a preview; 1 for the full image).
    pub fn integrator(
        &self,
        name: IntegratorName,
        samples: u32,
        pass: u32,
        scale: u32,
    ) -> Integrator {
        let seed = self.seed.wrapping_add(pass.into());
        let (width, height) = (self.width.div_ceil(scale), self.height.div_ceil(scale));
        let mut integrator = self.templates[name as usize].clone();
        match &mut integrator {
            Integrator::Whitted(s) => {
                (s.spp, s.seed, s.width, s.height) = (samples, seed, width, height);
            }
            Integrator::Photon(s) => {
                (s.spp, s.seed, s.width, s.height) = (samples, seed, width, height);
            }
            Integrator::Sppm(s) => {
                (s.passes, s.seed, s.width, s.height) = (samples, seed, width, height);
            }
            _ => {}
        }
        integrator
    }
}

/// `caustic view`: serves until Ctrl-C (or SIGTERM).
pub fn run(args: ViewArgs) -> Result<()> {
    let viewer = Arc::new(Viewer::new(&args.setup)?);
    let runtime = server::runtime()?;
    runtime.block_on(async {
        let address = SocketAddr::new(args.bind, args.port);
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .with_context(|| format!("cannot listen on {address}"))?;
        let local = listener.local_addr()?;
        if !args.bind.is_loopback() {
            notes::warn(format!(
                "serving on {}: anyone who reaches this port can use the viewer",
                args.bind
            ));
        }
        eprintln!(
            "caustic view: {} at http://{local}/ (Ctrl-C to stop)",
            viewer.name
        );
        let stop = async {
            stop_signal().await;
            eprintln!("caustic view: stopping");
        };
        server::serve(listener, viewer, args.max_clients.into(), stop).await
    })
}

/// Ctrl-C, or on Unix also the polite `kill` (SIGTERM) of service
/// managers and scripts.
async fn stop_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut terminate) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = terminate.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}
