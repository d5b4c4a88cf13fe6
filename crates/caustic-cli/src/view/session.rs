//! One client's connection. It greets the client, then serves four kinds
//! of events until the client leaves or the server stops: a request
//! (checked against the size and rate limits and the protocol, applied to
//! the view, or answered with an error; the connection stays open), a new
//! frame from the render thread (statistics, then the JPEG), an error
//! from the render thread, and the server's stop.

use super::Viewer;
use super::mailbox::Mailbox;
use super::protocol::{
    self, Admission, ClockWire, Hello, Limits, RateLimit, Request, ServerMessage,
};
use super::render_loop::{self, Frame, Outbox};
use super::state::Surroundings;
use axum::extract::ws::{CloseFrame, Message, WebSocket, close_code};
use caustic_accel::ACCEL_NAMES;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::{Semaphore, mpsc, watch};

/// Close code for "try again later" (RFC 6455 registry), for clients
/// beyond the limit.
const TRY_AGAIN_LATER: u16 = 1013;

/// Serves one client; returns when it has gone and its render thread has
/// ended.
pub async fn run(
    mut socket: WebSocket,
    viewer: Arc<Viewer>,
    seats: Arc<Semaphore>,
    max_clients: usize,
    mut stopping: watch::Receiver<bool>,
) {
    let Ok(seat) = seats.try_acquire_owned() else {
        let why =
            format!("the viewer serves at most {max_clients} clients at once; try again later");
        let _ = send(&mut socket, &ServerMessage::Error { message: why }).await;
        let _ = socket.send(close(TRY_AGAIN_LATER, "busy")).await;
        return;
    };
    let mut session = Session::start(viewer);
    session.serve(&mut socket, &mut stopping).await;
    session.finish().await;
    drop(seat);
}

/// A session: the client's view, its render thread and what comes back.
struct Session {
    viewer: Arc<Viewer>,
    mailbox: Arc<Mailbox>,
    frames: watch::Receiver<Option<Arc<Frame>>>,
    errors: mpsc::Receiver<String>,
    render_thread: Option<std::thread::JoinHandle<()>>,
    limit: RateLimit,
}

/// What woke the session.
enum Event {
    Incoming(Option<Result<Message, axum::Error>>),
    Frame,
    Error(String),
    Stop,
}

impl Session {
    fn start(viewer: Arc<Viewer>) -> Self {
        let scene_camera = viewer.scene_camera(&viewer.scene);
        let mailbox = Arc::new(Mailbox::new(viewer.first_view.clone(), scene_camera));
        let (frames_in, frames) = watch::channel(None);
        let (errors_in, errors) = mpsc::channel(16);
        let outbox = Outbox {
            frames: frames_in,
            errors: errors_in,
        };
        let thread = {
            let (viewer, mailbox) = (Arc::clone(&viewer), Arc::clone(&mailbox));
            std::thread::Builder::new()
                .name("caustic-view-render".into())
                .spawn(move || render_loop::run(&viewer, &mailbox, &outbox))
        };
        let render_thread = match thread {
            Ok(handle) => Some(handle),
            Err(e) => {
                crate::notes::warn(format!("cannot start a render thread: {e}"));
                None
            }
        };
        Self {
            viewer,
            mailbox,
            frames,
            errors,
            render_thread,
            limit: RateLimit::new(Instant::now()),
        }
    }

    async fn serve(&mut self, socket: &mut WebSocket, stopping: &mut watch::Receiver<bool>) {
        if send(socket, &ServerMessage::Hello(self.hello()))
            .await
            .is_err()
        {
            return;
        }
        if self.render_thread.is_none() {
            let message = "the server cannot render for this client".to_owned();
            let _ = send(socket, &ServerMessage::Error { message }).await;
            return;
        }
        loop {
            let event = tokio::select! {
                incoming = socket.recv() => Event::Incoming(incoming),
                Ok(()) = self.frames.changed() => Event::Frame,
                Some(error) = self.errors.recv() => Event::Error(error),
                _ = stopping.changed() => Event::Stop,
            };
            let carry_on = match event {
                Event::Incoming(incoming) => self.receive(socket, incoming).await,
                Event::Frame => self.send_frame(socket).await,
                Event::Error(message) => send(socket, &ServerMessage::Error { message })
                    .await
                    .is_ok(),
                Event::Stop => {
                    let _ = socket
                        .send(close(close_code::AWAY, "the viewer is stopping"))
                        .await;
                    false
                }
            };
            if !carry_on {
                return;
            }
        }
    }

    /// Handles what the client sent; false when the connection is over.
    async fn receive(
        &mut self,
        socket: &mut WebSocket,
        incoming: Option<Result<Message, axum::Error>>,
    ) -> bool {
        let reply = match incoming {
            None | Some(Ok(Message::Close(_))) => return false,
            Some(Err(e)) => {
                if too_big(e) {
                    let limit = protocol::MAX_TRANSPORT_BYTES;
                    let why = format!("message over {limit} bytes");
                    let _ = socket.send(close(close_code::SIZE, &why)).await;
                }
                return false;
            }
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => return true,
            Some(Ok(Message::Text(text))) => self.request(|| protocol::parse_request(&text)),
            Some(Ok(Message::Binary(bytes))) => {
                self.request(|| Err(protocol::binary_refused(bytes.len())))
            }
        };
        match reply {
            Some(message) => send(socket, &ServerMessage::Error { message })
                .await
                .is_ok(),
            None => true,
        }
    }

    /// Admits one message under the rate limit, then `read`s and applies
    /// it; returns the error to reply, if any.
    fn request(&mut self, read: impl FnOnce() -> Result<Request, String>) -> Option<String> {
        match self.limit.admit(Instant::now()) {
            Admission::Admit => read().and_then(|request| self.apply(request)).err(),
            Admission::Refuse { tell } => tell.then(protocol::rate_refusal),
        }
    }

    fn apply(&self, request: Request) -> Result<u64, String> {
        let viewer = &self.viewer;
        self.mailbox.change(|view, scene_camera| {
            let around = Surroundings {
                scene_camera,
                aspect: viewer.aspect(),
                clock: viewer.clock.as_ref(),
                now: Instant::now(),
            };
            view.apply(request, &around)
        })
    }

    /// Sends the newest frame: its statistics, then its JPEG.
    async fn send_frame(&mut self, socket: &mut WebSocket) -> bool {
        let Some(frame) = self.frames.borrow_and_update().clone() else {
            return true;
        };
        let stats = ServerMessage::Frame(frame.stats.clone());
        send(socket, &stats).await.is_ok()
            && socket
                .send(Message::Binary(frame.jpeg.clone().into()))
                .await
                .is_ok()
    }

    fn hello(&self) -> Hello {
        let viewer = &self.viewer;
        let view = &viewer.first_view;
        Hello {
            scene: viewer.name.clone(),
            device: viewer.device_name.clone(),
            width: viewer.width,
            height: viewer.height,
            clock: viewer.clock.map(|c| ClockWire {
                start: c.start,
                end: c.end,
                frames: c.frames,
                fps: c.fps().unwrap_or(0.0),
            }),
            integrators: vec!["whitted", "photon", "sppm"],
            structures: ACCEL_NAMES.to_vec(),
            integrator: render_loop::integrator_name(view.integrator),
            accel: view
                .accel
                .as_ref()
                .map_or(String::new(), |a| a.spec.clone()),
            budget: view.budget,
            max_budget: protocol::MAX_BUDGET,
            limits: Limits::current(),
        }
    }

    /// Ends the render thread (after the pass under way) and waits for it.
    async fn finish(mut self) {
        self.mailbox.close();
        if let Some(thread) = self.render_thread.take() {
            let joined = tokio::task::spawn_blocking(move || thread.join()).await;
            if !matches!(joined, Ok(Ok(()))) {
                crate::notes::warn("a render thread ended abnormally");
            }
        }
    }
}

/// Whether a read failed because the message passed the transport limit.
fn too_big(error: axum::Error) -> bool {
    use tokio_tungstenite::tungstenite::Error;
    matches!(
        error.into_inner().downcast_ref::<Error>(),
        Some(Error::Capacity(_))
    )
}

async fn send(socket: &mut WebSocket, message: &ServerMessage) -> Result<(), axum::Error> {
    socket.send(Message::Text(message.to_json().into())).await
}

fn close(code: u16, reason: &str) -> Message {
    Message::Close(Some(CloseFrame {
        code,
        reason: reason.into(),
    }))
}
