//! A small Chrome DevTools Protocol client for the browser test: it starts
//! headless Chromium, opens one page and drives it over the DevTools
//! WebSocket (navigate, evaluate JavaScript, mouse events, screenshots).
//! The test needs a handful of methods of four domains (Target, Page,
//! Runtime, Input), so this is written here on the WebSocket client the
//! viewer already uses, rather than brought in as a browser-automation
//! crate with its own dependency tree.

use crate::view_server::PATIENCE;
use base64::Engine as _;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;

/// The Chromium to drive: `CAUSTIC_CHROMIUM`, else the first of Debian's
/// `chromium` and the other usual names on the `PATH`.
pub fn find_chromium() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("CAUSTIC_CHROMIUM") {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH")?;
    let names = ["chromium", "chromium-browser", "google-chrome"];
    std::env::split_paths(&path)
        .flat_map(|dir| names.map(|name| dir.join(name)))
        .find(|candidate| candidate.is_file())
}

/// A headless Chromium with one page attached.
pub struct Browser {
    child: Child,
    profile: PathBuf,
    socket: WebSocketStream<TcpStream>,
    /// The page's flat session: every page command names it.
    session: Option<String>,
    next_id: u64,
}

impl Browser {
    /// Starts `binary` headless with a fresh profile in `profile`, and
    /// opens a blank page.
    pub async fn launch(binary: &Path, profile: PathBuf) -> Self {
        let mut child = Command::new(binary)
            .args([
                "--headless=new",
                // Root in a container has no user namespace to sandbox in.
                "--no-sandbox",
                // Containers often give /dev/shm a few MiB only.
                "--disable-dev-shm-usage",
                "--disable-gpu",
                "--remote-debugging-port=0",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-extensions",
                "--disable-background-networking",
                "--mute-audio",
                "--window-size=800,700",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
        let url = devtools_url(&mut child);
        let address = url
            .trim_start_matches("ws://")
            .split('/')
            .next()
            .unwrap_or_default()
            .to_owned();
        let stream = TcpStream::connect(&address)
            .await
            .expect("Chromium's DevTools port");
        let (socket, _) = tokio_tungstenite::client_async(url.as_str(), stream)
            .await
            .expect("the DevTools WebSocket");
        let mut browser = Self {
            child,
            profile,
            socket,
            session: None,
            next_id: 0,
        };
        browser.attach_page().await;
        browser
    }

    async fn attach_page(&mut self) {
        let target = self
            .call("Target.createTarget", json!({ "url": "about:blank" }))
            .await;
        let target_id = target["targetId"].clone();
        let attached = self
            .call(
                "Target.attachToTarget",
                json!({ "targetId": target_id, "flatten": true }),
            )
            .await;
        self.session = attached["sessionId"].as_str().map(str::to_owned);
        self.call("Page.enable", json!({})).await;
        self.call("Runtime.enable", json!({})).await;
    }

    /// Calls `method`; its result, or a panic with the browser's error.
    pub async fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut command = json!({ "id": id, "method": method, "params": params });
        if let Some(session) = &self.session {
            command["sessionId"] = json!(session);
        }
        self.socket
            .send(Message::Text(command.to_string().into()))
            .await
            .expect("a DevTools command goes out");
        loop {
            let reply = match tokio::time::timeout(PATIENCE, self.socket.next()).await {
                Ok(Some(Ok(Message::Text(text)))) => text,
                Ok(Some(Ok(_))) => continue,
                other => panic!("no DevTools reply to {method}: {other:?}"),
            };
            let reply: Value = serde_json::from_str(&reply).expect("DevTools speaks JSON");
            // Events (no id) and replies to others are not ours.
            if reply["id"].as_u64() != Some(id) {
                continue;
            }
            if !reply["error"].is_null() {
                panic!("{method}: {}", reply["error"]);
            }
            return reply["result"].clone();
        }
    }

    /// Opens `url` and waits until it has loaded.
    pub async fn navigate(&mut self, url: &str) {
        self.call("Page.navigate", json!({ "url": url })).await;
        self.wait_for("document.readyState === 'complete'", "the page to load")
            .await;
    }

    /// The value of a JavaScript expression (promises awaited); an
    /// exception is an error with its text.
    pub async fn eval(&mut self, expression: &str) -> Result<Value, String> {
        let params = json!({
            "expression": expression,
            "returnByValue": true,
            "awaitPromise": true,
        });
        let result = self.call("Runtime.evaluate", params).await;
        if let Some(details) = result.get("exceptionDetails") {
            return Err(format!("{expression}: {details}"));
        }
        Ok(result["result"]["value"].clone())
    }

    /// Evaluates `expression` until it is true; panics naming `what` when
    /// it has not become true in time.
    pub async fn wait_for(&mut self, expression: &str, what: &str) {
        let start = Instant::now();
        loop {
            if let Ok(Value::Bool(true)) = self.eval(expression).await {
                return;
            }
            assert!(
                start.elapsed() < PATIENCE,
                "waited in vain for {what}: {expression}"
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// A left-button drag from `from` to `to` (CSS pixels) in `steps` moves.
    pub async fn drag(&mut self, from: (f64, f64), to: (f64, f64), steps: u32) {
        self.mouse("mousePressed", from, 1).await;
        for step in 1..=steps {
            let f = f64::from(step) / f64::from(steps);
            let at = (from.0 + (to.0 - from.0) * f, from.1 + (to.1 - from.1) * f);
            self.mouse("mouseMoved", at, 1).await;
            // A person's drag spans several animation frames.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.mouse("mouseReleased", to, 0).await;
    }

    async fn mouse(&mut self, kind: &str, (x, y): (f64, f64), buttons: u32) {
        let event = json!({
            "type": kind,
            "x": x,
            "y": y,
            "button": "left",
            "buttons": buttons,
            "clickCount": 1,
        });
        self.call("Input.dispatchMouseEvent", event).await;
    }

    /// Saves a PNG screenshot of the page to `path`.
    pub async fn screenshot(&mut self, path: &Path) {
        let shot = self
            .call("Page.captureScreenshot", json!({ "format": "png" }))
            .await;
        let data = shot["data"].as_str().expect("screenshot data");
        let png = base64::engine::general_purpose::STANDARD
            .decode(data)
            .expect("base64 screenshot");
        std::fs::write(path, png).expect("the screenshot is written");
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

/// Reads Chromium's stderr until it says where DevTools listens; the rest
/// of its stderr is drained in the background so it never blocks.
fn devtools_url(child: &mut Child) -> String {
    let stderr = child.stderr.take().expect("piped stderr");
    let (found, url) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut seen = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(at) = line.split("DevTools listening on ").nth(1) {
                let _ = found.send(Ok(at.trim().to_owned()));
            } else if seen.len() < 4096 {
                seen.push_str(&line);
                seen.push('\n');
            }
        }
        let _ = found.send(Err(seen));
    });
    match url.recv_timeout(PATIENCE) {
        Ok(Ok(url)) => url,
        Ok(Err(said)) => panic!("Chromium exited without a DevTools address:\n{said}"),
        Err(_) => panic!("Chromium printed no DevTools address in {PATIENCE:?}"),
    }
}
