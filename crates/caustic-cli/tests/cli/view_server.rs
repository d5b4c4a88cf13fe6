//! A `caustic view` process for the viewer's tests, and a WebSocket client
//! that speaks its protocol.

use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;

/// The longest any one wait in these tests may take: far above what a
/// debug build on two cores needs, short enough to fail a hung test.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// A running `caustic view` on a free local port.
pub struct ViewServer {
    child: Child,
    pub address: SocketAddr,
    /// Everything it wrote to stderr so far.
    stderr: Arc<Mutex<String>>,
}

impl ViewServer {
    /// Starts `caustic view ARGS --port 0` and reads its address.
    pub fn start(args: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_caustic"))
            .arg("view")
            .args(args)
            .args(["--port", "0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the caustic binary starts");
        let stderr = Arc::new(Mutex::new(String::new()));
        let (found, address) = std::sync::mpsc::channel();
        let lines = BufReader::new(child.stderr.take().expect("piped stderr"));
        let log = Arc::clone(&stderr);
        std::thread::spawn(move || {
            for line in lines.lines().map_while(Result::ok) {
                if let Some(at) = line.split("http://").nth(1) {
                    let _ = found.send(at.trim_end_matches(['/', ' ']).to_owned());
                }
                let mut log = log.lock().unwrap();
                log.push_str(&line);
                log.push('\n');
            }
        });
        let address = match address.recv_timeout(PATIENCE) {
            Ok(text) => text
                .split('/')
                .next()
                .unwrap_or("")
                .parse()
                .expect("an address"),
            Err(_) => {
                let _ = child.kill();
                panic!(
                    "caustic view printed no address:\n{}",
                    stderr.lock().unwrap()
                );
            }
        };
        Self {
            child,
            address,
            stderr,
        }
    }

    /// The page's address.
    pub fn url(&self) -> String {
        format!("http://{}/", self.address)
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Sends Ctrl-C's signal and waits for the exit; the exit code.
    pub fn interrupt(&mut self) -> Option<i32> {
        // SAFETY: `kill` with a child's pid and a valid signal number.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGINT) };
        let start = std::time::Instant::now();
        while start.elapsed() < PATIENCE {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for ViewServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let log = self.stderr();
        assert!(!log.contains("panicked"), "caustic view panicked:\n{log}");
    }
}

/// One frame: its statistics and its JPEG.
pub struct Frame {
    pub stats: Value,
    pub jpeg: Vec<u8>,
}

impl Frame {
    /// The JPEG decoded to RGB bytes, with its size.
    pub fn pixels(&self) -> (u32, u32, Vec<u8>) {
        let image = image::load_from_memory_with_format(&self.jpeg, image::ImageFormat::Jpeg)
            .expect("frames are JPEG images")
            .into_rgb8();
        (image.width(), image.height(), image.into_raw())
    }
}

/// A WebSocket client of the viewer.
pub struct Client {
    socket: WebSocketStream<TcpStream>,
    /// Errors the server sent while the client waited for something else.
    pub errors: Vec<String>,
}

impl Client {
    pub async fn connect(address: SocketAddr) -> Self {
        let stream = TcpStream::connect(address)
            .await
            .expect("the viewer listens");
        let (socket, _) = tokio_tungstenite::client_async(format!("ws://{address}/ws"), stream)
            .await
            .expect("the WebSocket handshake");
        Self {
            socket,
            errors: Vec::new(),
        }
    }

    /// A client past the server's `hello`, which it returns.
    pub async fn greeted(address: SocketAddr) -> (Self, Value) {
        let mut client = Self::connect(address).await;
        let hello = client.next_of("hello").await;
        (client, hello)
    }

    /// The text of the next `error` message.
    pub async fn next_error(&mut self) -> String {
        let error = self.next_of("error").await;
        error["message"].as_str().unwrap_or_default().to_owned()
    }

    pub async fn send_text(&mut self, text: &str) {
        self.socket
            .send(Message::Text(text.into()))
            .await
            .expect("a request goes out");
    }

    /// Sends without insisting: the server may close on it.
    pub async fn try_send_text(&mut self, text: &str) {
        let _ = self.socket.send(Message::Text(text.into())).await;
    }

    pub async fn send_binary(&mut self, bytes: Vec<u8>) {
        self.socket
            .send(Message::Binary(bytes.into()))
            .await
            .expect("a message goes out");
    }

    /// The next message, or `None` once the server has closed.
    pub async fn next(&mut self) -> Option<Message> {
        match tokio::time::timeout(PATIENCE, self.socket.next()).await {
            Ok(Some(Ok(message))) => Some(message),
            Ok(_) => None,
            Err(_) => panic!("no message from the viewer in {PATIENCE:?}"),
        }
    }

    /// The next JSON message, whatever its type.
    pub async fn next_of_any(&mut self) -> Value {
        loop {
            match self.next().await {
                Some(Message::Text(text)) => {
                    return serde_json::from_str(&text).expect("JSON from the server");
                }
                Some(_) => {}
                None => return Value::Null,
            }
        }
    }

    /// The next JSON message of `kind`; frames and others are skipped.
    pub async fn next_of(&mut self, kind: &str) -> Value {
        loop {
            let Some(message) = self.next().await else {
                panic!("the viewer closed while a `{kind}` message was awaited");
            };
            if let Message::Text(text) = message {
                let value: Value = serde_json::from_str(&text).expect("JSON from the server");
                if value["type"] == kind {
                    return value;
                }
                if value["type"] == "error" {
                    self.errors
                        .push(value["message"].as_str().unwrap_or("").to_owned());
                }
            }
        }
    }

    /// The first frame whose view counts at least `view` requests.
    pub async fn frame_of_view(&mut self, view: u64) -> Frame {
        loop {
            let stats = self.next_of("frame").await;
            let Some(Message::Binary(jpeg)) = self.next().await else {
                panic!("a frame's statistics are followed by its JPEG");
            };
            if stats["view"].as_u64() >= Some(view) {
                return Frame {
                    stats,
                    jpeg: jpeg.to_vec(),
                };
            }
        }
    }

    /// The first frame whose statistics satisfy `wanted`.
    pub async fn frame_where(&mut self, wanted: impl Fn(&Value) -> bool) -> Frame {
        loop {
            let frame = self.frame_of_view(0).await;
            if wanted(&frame.stats) {
                return frame;
            }
        }
    }

    /// The close frame's code, reading past anything else.
    pub async fn close_code(&mut self) -> Option<u16> {
        while let Some(message) = self.next().await {
            if let Message::Close(frame) = message {
                return frame.map(|f| f.code.into());
            }
        }
        None
    }
}
