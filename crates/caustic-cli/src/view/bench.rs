//! `caustic bench view`: the viewer's interaction latency. The server runs
//! in this process on a free local port; a WebSocket client connects as
//! the page does, waits for the first image, then moves the camera N
//! times (small orbits, alternately left and right) and times each move
//! from sending the request to receiving the first frame of the new view.
//! It sends the next move as soon as that frame arrives, so every move
//! lands while the previous view is still young, as it does when a person
//! drags the mouse. On a device too slow for a full-resolution pass in
//! the target time that first frame is a preview (`passes.rs`); the
//! report says how many were.

use super::server;
use super::{SetupArgs, Viewer};
use anyhow::{Context, Result, bail};
use clap::Args;
use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;

/// The longest wait for any one frame before the run is called broken.
const FRAME_TIMEOUT: Duration = Duration::from_secs(120);

pub fn help() -> &'static str {
    "Examples:\n  \
     caustic bench view --device cpu --width 640 --height 480\n  \
     caustic bench view cornell-caustics-moving --device cuda --changes 200\n  \
     caustic bench view target/scenes/bart-museum/museum5.aff --device cuda --accel lbvh"
}

#[derive(Args)]
pub struct ViewBenchArgs {
    #[command(flatten)]
    setup: SetupArgs,
    /// Camera moves to time.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=100_000), allow_negative_numbers = true)]
    changes: u32,
    /// Moves made first and not timed (the first structure build, kernel
    /// loading).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(0..=1000), allow_negative_numbers = true)]
    warmup: u32,
}

pub fn run(args: ViewBenchArgs) -> Result<()> {
    let viewer = Arc::new(Viewer::new(&args.setup)?);
    let runtime = server::runtime()?;
    let timed = runtime.block_on(measure(Arc::clone(&viewer), &args))?;
    report(&viewer, &timed);
    Ok(())
}

/// One timed move: milliseconds to its first frame, and that frame's
/// preview scale (1: full resolution).
struct Timed {
    ms: f64,
    scale: u64,
}

/// Serves `viewer` on a free port for the length of one client's run.
async fn measure(viewer: Arc<Viewer>, args: &ViewBenchArgs) -> Result<Vec<Timed>> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(server::serve(listener, viewer, 1, async {
        let _ = stopped.await;
    }));
    let timed = drive(address, args.warmup, args.changes).await;
    let _ = stop.send(());
    server.await.context("the viewer's server task failed")??;
    timed
}

/// The client's run: each timed move.
async fn drive(address: SocketAddr, warmup: u32, changes: u32) -> Result<Vec<Timed>> {
    let mut client = Client::connect(address).await?;
    let hello = client.next_text().await?;
    if hello["type"] != "hello" {
        bail!("the server did not greet: {hello}");
    }
    let size = (hello["width"].as_u64(), hello["height"].as_u64());
    let first = client.frame_of_view(0).await?;
    check_image(&first.1, size)?;
    let mut camera = first.0["camera"].clone();
    let mut latencies = Vec::with_capacity(changes as usize);
    for change in 0..warmup + changes {
        let yaw = if change % 2 == 0 { 0.05 } else { -0.05 };
        let request = format!(r#"{{"type":"orbit","yaw":{yaw},"pitch":0}}"#);
        let sent = Instant::now();
        client.send(request).await?;
        let (stats, jpeg) = client.frame_of_view(u64::from(change) + 1).await?;
        let elapsed = sent.elapsed().as_secs_f64() * 1e3;
        // The frame must show the new view: another camera, a whole image.
        if stats["camera"] == camera {
            bail!("move {change}: the frame shows the old camera");
        }
        check_image(&jpeg, size)?;
        camera = stats["camera"].clone();
        if change >= warmup {
            let scale = stats["scale"].as_u64().unwrap_or(1);
            latencies.push(Timed { ms: elapsed, scale });
        }
    }
    client.close().await;
    Ok(latencies)
}

/// Checks that `jpeg` decodes as an image of the announced size.
fn check_image(jpeg: &[u8], size: (Option<u64>, Option<u64>)) -> Result<()> {
    let image = image::load_from_memory_with_format(jpeg, image::ImageFormat::Jpeg)
        .context("a frame is not a JPEG image")?;
    let got = (
        Some(u64::from(image.width())),
        Some(u64::from(image.height())),
    );
    if got != size {
        bail!("a frame is {got:?}, the server announced {size:?}");
    }
    Ok(())
}

fn report(viewer: &Viewer, timed: &[Timed]) {
    let mut sorted: Vec<f64> = timed.iter().map(|t| t.ms).collect();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    let p95 = sorted[(sorted.len() * 95).div_ceil(100).max(1) - 1];
    println!(
        "bench view: {} {}x{}, {} on {}",
        viewer.name,
        viewer.width,
        viewer.height,
        super::render_loop::integrator_name(viewer.first_view.integrator),
        viewer.device_name
    );
    println!(
        "camera change -> first new frame over {} changes: median {median:.1} ms, p95 {p95:.1} ms (min {:.1}, max {:.1})",
        sorted.len(),
        sorted[0],
        sorted[sorted.len() - 1]
    );
    let previews: Vec<u64> = timed.iter().map(|t| t.scale).filter(|&s| s > 1).collect();
    if let (Some(least), Some(most)) = (previews.iter().min(), previews.iter().max()) {
        println!(
            "{} of {} first frames were previews at 1/{least} to 1/{most} of the resolution per side (a full-resolution pass would not fit {} ms here)",
            previews.len(),
            timed.len(),
            super::passes::PASS_TARGET_MS
        );
    }
}

/// A WebSocket client of the viewer, as the page is.
struct Client {
    socket: WebSocketStream<TcpStream>,
}

impl Client {
    async fn connect(address: SocketAddr) -> Result<Self> {
        let stream = TcpStream::connect(address).await?;
        // Small requests go out at once rather than wait to be batched.
        stream.set_nodelay(true)?;
        let url = format!("ws://{address}/ws");
        let (socket, _) = tokio_tungstenite::client_async(url, stream)
            .await
            .context("WebSocket handshake with the viewer")?;
        Ok(Self { socket })
    }

    async fn send(&mut self, text: String) -> Result<()> {
        self.socket.send(Message::Text(text.into())).await?;
        Ok(())
    }

    async fn next(&mut self) -> Result<Message> {
        match tokio::time::timeout(FRAME_TIMEOUT, self.socket.next()).await {
            Err(_) => bail!("no message from the viewer in {FRAME_TIMEOUT:?}"),
            Ok(None) => bail!("the viewer closed the connection"),
            Ok(Some(message)) => Ok(message?),
        }
    }

    async fn next_text(&mut self) -> Result<Value> {
        loop {
            if let Message::Text(text) = self.next().await? {
                return Ok(serde_json::from_str(&text)?);
            }
        }
    }

    /// The first frame whose view counts at least `view` requests:
    /// statistics and JPEG. An error message from the server fails.
    async fn frame_of_view(&mut self, view: u64) -> Result<(Value, Vec<u8>)> {
        let mut stats = Value::Null;
        loop {
            match self.next().await? {
                Message::Text(text) => {
                    let message: Value = serde_json::from_str(&text)?;
                    if message["type"] == "error" {
                        bail!("the viewer answered: {}", message["message"]);
                    }
                    stats = message;
                }
                Message::Binary(jpeg) if stats["view"].as_u64() >= Some(view) => {
                    return Ok((stats, jpeg.to_vec()));
                }
                _ => {}
            }
        }
    }

    async fn close(mut self) {
        let _ = self.socket.close(None).await;
    }
}
