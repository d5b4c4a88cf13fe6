//! The viewer's HTTP server (axum on tokio): the page and its script and
//! style, built into the binary; the WebSocket upgrade at `/ws`; the
//! limit on clients served at once; and a clean stop: no new connections,
//! every session told and its render thread ended, then return.

use super::Viewer;
use super::protocol::MAX_TRANSPORT_BYTES;
use super::session;
use anyhow::{Context, Result};
use axum::Router;
use axum::extract::{State, WebSocketUpgrade};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::serve::ListenerExt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};

const PAGE_HTML: &str = include_str!("page.html");
const PAGE_JS: &str = include_str!("page.js");
const PAGE_CSS: &str = include_str!("page.css");

/// How long a stop waits for sessions to end: a render thread ends after
/// the pass under way, which on a slow device and a large image can take
/// a few seconds.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(20);

/// The tokio runtime for the network side. Rendering runs on threads of
/// its own, so two I/O threads are plenty.
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("caustic-view-io")
        .enable_all()
        .build()
        .context("cannot start the viewer's I/O threads")
}

/// What every request handler sees.
#[derive(Clone)]
struct App {
    viewer: Arc<Viewer>,
    /// One permit per client served; a session holds one while it lasts.
    seats: Arc<Semaphore>,
    max_clients: usize,
    /// Becomes true when the server stops.
    stopping: watch::Receiver<bool>,
}

/// Serves the viewer on `listener` until `stop` completes, then ends
/// every session and returns.
pub async fn serve(
    listener: TcpListener,
    viewer: Arc<Viewer>,
    max_clients: usize,
    stop: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let (stop_sessions, stopping) = watch::channel(false);
    let seats = Arc::new(Semaphore::new(max_clients));
    let app = App {
        viewer,
        seats: Arc::clone(&seats),
        max_clients,
        stopping,
    };
    // A frame is a small text message then the image: without NODELAY the
    // second write can wait for the client's delayed ACK (up to 40 ms).
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, router(app))
        .with_graceful_shutdown(async move {
            stop.await;
            stop_sessions.send_replace(true);
        })
        .await
        .context("the viewer's server failed")?;
    // Every session holds a seat until its render thread has ended: all
    // seats back means all sessions are over.
    let all = u32::try_from(max_clients).unwrap_or(u32::MAX);
    if tokio::time::timeout(SHUTDOWN_WAIT, seats.acquire_many(all))
        .await
        .is_err()
    {
        crate::notes::warn("some sessions were still rendering when the viewer stopped");
    }
    Ok(())
}

fn router(app: App) -> Router {
    Router::new()
        .route("/", get(page))
        .route("/page.js", get(script))
        .route("/page.css", get(style))
        .route("/ws", get(upgrade))
        .with_state(app)
}

/// A built-in file; `no-store` so that a new build's page is never mixed
/// with an old script from the browser's cache.
fn file(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response()
}

async fn page() -> Response {
    file("text/html; charset=utf-8", PAGE_HTML)
}

async fn script() -> Response {
    file("text/javascript; charset=utf-8", PAGE_JS)
}

async fn style() -> Response {
    file("text/css; charset=utf-8", PAGE_CSS)
}

/// `/ws`: a session, for the page this server served. Browsers let any
/// page open a WebSocket anywhere, so a connection whose `Origin` is
/// another site (a page elsewhere steering a local viewer) is refused;
/// clients that are not browsers send no `Origin`.
async fn upgrade(State(app): State<App>, headers: HeaderMap, ws: WebSocketUpgrade) -> Response {
    if !same_origin(&headers) {
        return (
            StatusCode::FORBIDDEN,
            "the viewer's WebSocket serves its own page only",
        )
            .into_response();
    }
    ws.max_message_size(MAX_TRANSPORT_BYTES)
        .max_frame_size(MAX_TRANSPORT_BYTES)
        .on_upgrade(move |socket| {
            session::run(socket, app.viewer, app.seats, app.max_clients, app.stopping)
        })
}

/// Whether the request has no `Origin`, or one naming the host it was
/// sent to.
fn same_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return true;
    };
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let origin_host = origin.to_str().ok().and_then(|o| o.split_once("://"));
    matches!((origin_host, host), (Some((_, o)), Some(h)) if o.eq_ignore_ascii_case(h))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn only_the_page_s_own_origin_may_connect() {
        let headers = |origin: Option<&'static str>| {
            let mut map = HeaderMap::new();
            map.insert(header::HOST, HeaderValue::from_static("127.0.0.1:8080"));
            if let Some(origin) = origin {
                map.insert(header::ORIGIN, HeaderValue::from_static(origin));
            }
            map
        };
        assert!(same_origin(&headers(None)));
        assert!(same_origin(&headers(Some("http://127.0.0.1:8080"))));
        assert!(!same_origin(&headers(Some("https://example.com"))));
        assert!(!same_origin(&headers(Some("http://127.0.0.1:9999"))));
        assert!(!same_origin(&headers(Some("null"))));
    }

    #[test]
    fn the_page_links_its_script_and_style() {
        assert!(PAGE_HTML.contains("page.js") && PAGE_HTML.contains("page.css"));
        assert!(PAGE_JS.contains("/ws"));
        // Nothing is fetched from elsewhere: the page works offline.
        for text in [PAGE_HTML, PAGE_JS, PAGE_CSS] {
            assert!(!text.contains("https://") && !text.contains("http://"));
        }
    }
}
