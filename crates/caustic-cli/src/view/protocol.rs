//! The viewer's WebSocket protocol, both directions, and the limits a
//! client is held to.
//!
//! Client to server: JSON text messages, one request each, tagged by
//! `type` (`{"type": "orbit", "yaw": 0.1, "pitch": 0}`); see
//! [`ClientMessage`]. Every number is checked here, so the session and the
//! render thread only ever see finite values in range; anything else is
//! answered with an [`ServerMessage::Error`] and the connection stays open.
//!
//! Server to client: JSON text messages ([`ServerMessage`]): `hello` once
//! on connecting, `error` when a request is refused, and `frame` with the
//! statistics of an image, always followed by one binary message holding
//! that image as a JPEG file.

use super::orbit::CameraWire;
use crate::parse::{self, AccelArg};
use crate::render::IntegratorName;
use clap::ValueEnum;
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// The longest request the protocol accepts; longer ones are answered
/// with an error. No request needs more than a few hundred bytes.
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024;

/// The longest message the WebSocket layer reads at all: past it the
/// connection is closed (code 1009), as reading it would already cost the
/// memory the limit is there to protect.
pub const MAX_TRANSPORT_BYTES: usize = 1024 * 1024;

/// Requests a client may send per second, sustained. The page sends at
/// most one camera request per animation frame (60 a second) while the
/// mouse moves, so this leaves it room.
pub const MESSAGES_PER_SECOND: f64 = 120.0;

/// Requests a client may send at once before the sustained rate applies.
pub const BURST: f64 = 240.0;

/// The most a sample budget can be: samples per pixel, or SPPM passes.
pub const MAX_BUDGET: u32 = 1 << 16;

/// A request as it arrives, before its values are checked.
#[derive(Debug, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
enum ClientMessage {
    /// Turn the camera around its target: `yaw` about the camera's up
    /// vector, `pitch` about its right vector, in radians.
    Orbit {
        yaw: f32,
        pitch: f32,
    },
    /// Move eye and target together, by fractions of the view's height at
    /// the target's distance (`right`, `up` on the image).
    Pan {
        right: f32,
        up: f32,
    },
    /// Multiply the eye's distance to the target by `factor`.
    Zoom {
        factor: f32,
    },
    /// Place the camera: eye, target, up, vertical field of view in degrees.
    Camera {
        eye: [f32; 3],
        target: [f32; 3],
        up: [f32; 3],
        fov: f32,
    },
    /// Back to the scene's camera (which follows an animated camera path).
    ResetCamera,
    Play,
    Pause,
    /// Go to instant `time` (seconds) of the scene's clock.
    Seek {
        time: f32,
    },
    /// Change what renders; absent fields stay as they are. `accel` is a
    /// structure spec as `--accel` takes it, `""` for the default.
    Settings {
        #[serde(default)]
        integrator: Option<String>,
        #[serde(default)]
        accel: Option<String>,
        #[serde(default)]
        budget: Option<u32>,
    },
}

/// A checked request: what the session applies.
#[derive(Clone, Debug, PartialEq)]
pub enum Request {
    Orbit { yaw: f32, pitch: f32 },
    Pan { right: f32, up: f32 },
    Zoom { factor: f32 },
    Camera(CameraWire),
    ResetCamera,
    Play,
    Pause,
    Seek { time: f32 },
    Settings(SettingsChange),
}

/// The fields of a `settings` request that were given.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SettingsChange {
    pub integrator: Option<IntegratorName>,
    /// `Some(None)`: back to the default structure.
    pub accel: Option<Option<AccelArg>>,
    pub budget: Option<u32>,
}

/// Reads one text message into a checked request; the error is the text
/// of the `error` reply.
pub fn parse_request(text: &str) -> Result<Request, String> {
    if text.len() > MAX_MESSAGE_BYTES {
        return Err(format!(
            "message of {} bytes refused: requests are at most {MAX_MESSAGE_BYTES} bytes",
            text.len()
        ));
    }
    let message: ClientMessage = serde_json::from_str(text).map_err(|e| {
        format!(
            "malformed request ({e}); expected JSON such as {{\"type\": \"orbit\", \"yaw\": 0.1, \"pitch\": 0}}"
        )
    })?;
    check(message)
}

/// The reply to a binary message: requests are text.
pub fn binary_refused(len: usize) -> String {
    format!("binary message of {len} bytes refused: requests are JSON text messages")
}

fn check(message: ClientMessage) -> Result<Request, String> {
    Ok(match message {
        ClientMessage::Orbit { yaw, pitch } => Request::Orbit {
            yaw: within("yaw", yaw, -TURN, TURN)?,
            pitch: within("pitch", pitch, -TURN, TURN)?,
        },
        ClientMessage::Pan { right, up } => Request::Pan {
            right: within("right", right, -100.0, 100.0)?,
            up: within("up", up, -100.0, 100.0)?,
        },
        ClientMessage::Zoom { factor } => Request::Zoom {
            factor: within("factor", factor, 0.01, 100.0)?,
        },
        ClientMessage::Camera {
            eye,
            target,
            up,
            fov,
        } => Request::Camera(checked_camera(CameraWire {
            eye,
            target,
            up,
            fov,
        })?),
        ClientMessage::ResetCamera => Request::ResetCamera,
        ClientMessage::Play => Request::Play,
        ClientMessage::Pause => Request::Pause,
        ClientMessage::Seek { time } => Request::Seek {
            time: within("time", time, -1e6, 1e6)?,
        },
        ClientMessage::Settings {
            integrator,
            accel,
            budget,
        } => Request::Settings(SettingsChange {
            integrator: integrator.as_deref().map(integrator_named).transpose()?,
            accel: accel.as_deref().map(accel_spec).transpose()?,
            budget: budget.map(checked_budget).transpose()?,
        }),
    })
}

/// A full turn: larger angles are typing errors, not gestures.
const TURN: f32 = std::f32::consts::TAU;

/// `value` if finite and within `[low, high]`, else an error naming it.
fn within(name: &str, value: f32, low: f32, high: f32) -> Result<f32, String> {
    if value.is_finite() && (low..=high).contains(&value) {
        Ok(value)
    } else {
        Err(format!(
            "{name} = {value} is out of range ({low} to {high})"
        ))
    }
}

fn checked_camera(camera: CameraWire) -> Result<CameraWire, String> {
    let finite = |v: [f32; 3]| v.iter().all(|x| x.is_finite() && x.abs() < 1e15);
    if !(finite(camera.eye) && finite(camera.target) && finite(camera.up)) {
        return Err("camera: eye, target and up must be finite numbers".into());
    }
    within("fov", camera.fov, 0.01, 179.0)?;
    if !crate::camera::usable(&camera.to_camera()) {
        return Err("camera: eye and target must differ and up must lie across the view".into());
    }
    Ok(camera)
}

fn integrator_named(name: &str) -> Result<IntegratorName, String> {
    IntegratorName::from_str(name, true)
        .map_err(|_| format!("integrator `{name}` is not one of whitted, photon, sppm"))
}

fn accel_spec(spec: &str) -> Result<Option<AccelArg>, String> {
    if spec.trim().is_empty() {
        return Ok(None);
    }
    parse::accel_arg(spec)
        .map(Some)
        .map_err(|e| format!("accel `{spec}`: {e}"))
}

fn checked_budget(budget: u32) -> Result<u32, String> {
    if (1..=MAX_BUDGET).contains(&budget) {
        Ok(budget)
    } else {
        Err(format!(
            "budget = {budget} is out of range (1 to {MAX_BUDGET})"
        ))
    }
}

/// A message to the client.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerMessage {
    Hello(Hello),
    /// Statistics of the image in the binary message that follows.
    Frame(FrameStats),
    Error {
        message: String,
    },
}

impl ServerMessage {
    /// The message as JSON text.
    pub fn to_json(&self) -> String {
        // Serializing these plain structs cannot fail (no maps with
        // non-string keys, no failing Serialize impls); say so if it did.
        serde_json::to_string(self)
            .unwrap_or_else(|e| format!(r#"{{"type":"error","message":"internal: {e}"}}"#))
    }
}

/// What a client learns on connecting: the scene and the choices it has.
#[derive(Debug, Serialize)]
pub struct Hello {
    pub scene: String,
    pub device: String,
    pub width: u32,
    pub height: u32,
    /// The animation's clock; absent for a still scene.
    pub clock: Option<ClockWire>,
    pub integrators: Vec<&'static str>,
    pub structures: Vec<&'static str>,
    pub integrator: &'static str,
    /// The structure spec in use, `""` for the default.
    pub accel: String,
    pub budget: u32,
    pub max_budget: u32,
    pub limits: Limits,
}

/// An animation's clock: `frames` instants from `start` to `end` seconds.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct ClockWire {
    pub start: f32,
    pub end: f32,
    pub frames: u32,
    pub fps: f32,
}

/// The limits a client is held to.
#[derive(Debug, Serialize)]
pub struct Limits {
    pub max_message_bytes: usize,
    pub messages_per_second: f64,
    pub burst: f64,
}

impl Limits {
    pub fn current() -> Self {
        Self {
            max_message_bytes: MAX_MESSAGE_BYTES,
            messages_per_second: MESSAGES_PER_SECOND,
            burst: BURST,
        }
    }
}

/// The statistics of one streamed image.
#[derive(Clone, Debug, Serialize)]
pub struct FrameStats {
    /// How many requests had changed the view when this image began: a
    /// client that counts its requests knows which view the image shows.
    pub view: u64,
    /// Samples per pixel so far (SPPM: passes so far).
    pub samples: u32,
    pub budget: u32,
    /// Whether the image has reached its budget and stops refining.
    pub done: bool,
    pub integrator: &'static str,
    /// The structure traced, with its last build or refit.
    pub structure: String,
    /// Milliseconds to pose the scene and build or refit the structure
    /// for this animation frame.
    pub update_ms: f64,
    /// Milliseconds of the last pass.
    pub render_ms: f64,
    /// Rays per second of the last pass, in millions.
    pub mrays_per_s: f64,
    /// Instant of the scene's clock shown, and its frame number.
    pub time: f32,
    pub frame: u32,
    pub playing: bool,
    pub camera: CameraWire,
    pub width: u32,
    pub height: u32,
    /// 1 for a full-resolution image; s for a preview rendered at 1/s of
    /// the resolution per side and enlarged.
    pub scale: u32,
}

/// A token bucket over one client's requests: [`BURST`] at once, then
/// [`MESSAGES_PER_SECOND`]. Refused requests are dropped; the client hears
/// of it at most once a second, so a flood does not earn a flood of
/// replies.
pub struct RateLimit {
    tokens: f64,
    last: Instant,
    last_told: Option<Instant>,
}

/// What to do with a request under the rate limit.
#[derive(Debug, PartialEq)]
pub enum Admission {
    Admit,
    /// Drop it; `tell`: send the client an error about it.
    Refuse {
        tell: bool,
    },
}

impl RateLimit {
    pub fn new(now: Instant) -> Self {
        Self {
            tokens: BURST,
            last: now,
            last_told: None,
        }
    }

    /// Whether a request arriving at `now` is admitted.
    pub fn admit(&mut self, now: Instant) -> Admission {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + elapsed * MESSAGES_PER_SECOND).min(BURST);
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            return Admission::Admit;
        }
        let tell = self
            .last_told
            .is_none_or(|told| now.saturating_duration_since(told) >= Duration::from_secs(1));
        if tell {
            self.last_told = Some(now);
        }
        Admission::Refuse { tell }
    }
}

/// The error text for refused requests.
pub fn rate_refusal() -> String {
    format!(
        "rate limit: more than {MESSAGES_PER_SECOND} requests a second (bursts of {BURST}); requests are being dropped"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_request_type_parses() {
        let cases = [
            (
                r#"{"type":"orbit","yaw":0.1,"pitch":-0.2}"#,
                Request::Orbit {
                    yaw: 0.1,
                    pitch: -0.2,
                },
            ),
            (
                r#"{"type":"pan","right":0.5,"up":0}"#,
                Request::Pan {
                    right: 0.5,
                    up: 0.0,
                },
            ),
            (
                r#"{"type":"zoom","factor":0.9}"#,
                Request::Zoom { factor: 0.9 },
            ),
            (r#"{"type":"reset_camera"}"#, Request::ResetCamera),
            (r#"{"type":"play"}"#, Request::Play),
            (r#"{"type":"pause"}"#, Request::Pause),
            (r#"{"type":"seek","time":1.5}"#, Request::Seek { time: 1.5 }),
            (
                r#"{"type":"settings","budget":8}"#,
                Request::Settings(SettingsChange {
                    budget: Some(8),
                    ..Default::default()
                }),
            ),
        ];
        for (text, want) in cases {
            assert_eq!(parse_request(text), Ok(want), "{text}");
        }
        let camera = r#"{"type":"camera","eye":[0,1,5],"target":[0,1,0],"up":[0,1,0],"fov":40}"#;
        let Ok(Request::Camera(c)) = parse_request(camera) else {
            panic!("{camera} parses");
        };
        assert_eq!((c.eye, c.fov), ([0.0, 1.0, 5.0], 40.0));
        let settings = r#"{"type":"settings","integrator":"SPPM","accel":"ploc:r=32"}"#;
        let Ok(Request::Settings(change)) = parse_request(settings) else {
            panic!("{settings} parses");
        };
        assert_eq!(change.integrator, Some(IntegratorName::Sppm));
        let accel = change.accel.flatten().map(|a| a.spec);
        assert_eq!(accel.as_deref(), Some("ploc:r=32"));
        let default = parse_request(r#"{"type":"settings","accel":""}"#);
        assert!(matches!(
            default,
            Ok(Request::Settings(SettingsChange {
                accel: Some(None),
                ..
            }))
        ));
    }

    #[test]
    fn malformed_requests_are_refused_with_a_reason() {
        let cases = [
            ("not json", "malformed"),
            ("", "malformed"),
            (r#"{"yaw":1}"#, "malformed"),
            (r#"{"type":"explode"}"#, "malformed"),
            (r#"{"type":"orbit","yaw":0.1}"#, "malformed"),
            (r#"{"type":"orbit","yaw":"left","pitch":0}"#, "malformed"),
            (r#"{"type":"zoom","factor":2,"extra":1}"#, "malformed"),
            (r#"{"type":"zoom","factor":1e300}"#, "factor"),
            (r#"{"type":"zoom","factor":0}"#, "factor"),
            (r#"{"type":"orbit","yaw":100,"pitch":0}"#, "yaw"),
            (r#"{"type":"seek","time":-1e30}"#, "time"),
            (r#"{"type":"settings","budget":0}"#, "budget"),
            (r#"{"type":"settings","budget":-3}"#, "malformed"),
            (r#"{"type":"settings","integrator":"path"}"#, "integrator"),
            (r#"{"type":"settings","accel":"bvh-fast"}"#, "accel"),
            (
                r#"{"type":"camera","eye":[0,0,0],"target":[0,0,0],"up":[0,1,0],"fov":40}"#,
                "camera",
            ),
            (
                r#"{"type":"camera","eye":[0,5,0],"target":[0,0,0],"up":[0,1,0],"fov":40}"#,
                "camera",
            ),
            (
                r#"{"type":"camera","eye":[0,0,5],"target":[0,0,0],"up":[0,1,0],"fov":180}"#,
                "fov",
            ),
        ];
        for (text, says) in cases {
            let err = parse_request(text).expect_err(text);
            assert!(err.contains(says), "{text}: {err}");
        }
        assert!(binary_refused(3).contains("JSON text"));
    }

    #[test]
    fn oversized_requests_are_refused_before_parsing() {
        let padding = " ".repeat(MAX_MESSAGE_BYTES);
        let text = format!(r#"{{"type":"play"}}{padding}"#);
        let err = parse_request(&text).unwrap_err();
        assert!(err.contains("at most 65536 bytes"), "{err}");
        // Just under the limit, the same request is fine.
        let fits = format!(r#"{{"type":"play"}}{}"#, &padding[..1000]);
        assert_eq!(parse_request(&fits), Ok(Request::Play));
    }

    #[test]
    fn the_rate_limit_admits_a_burst_then_the_sustained_rate() {
        let start = Instant::now();
        let mut limit = RateLimit::new(start);
        let answers: Vec<Admission> = (0..1000).map(|_| limit.admit(start)).collect();
        let admitted = answers.iter().filter(|a| **a == Admission::Admit).count();
        assert_eq!(admitted, BURST as usize);
        // Refused requests tell the client once a second, not each time.
        let told = answers
            .iter()
            .filter(|a| **a == Admission::Refuse { tell: true })
            .count();
        assert_eq!(told, 1);
        // A quarter of a second refills a quarter second's worth.
        let soon = start + Duration::from_millis(250);
        assert!((0..30).all(|_| limit.admit(soon) == Admission::Admit));
        assert_eq!(limit.admit(soon), Admission::Refuse { tell: false });
        // A second on, a second's worth, and the next refusal is told.
        let later = soon + Duration::from_secs(1);
        let second = MESSAGES_PER_SECOND as usize;
        assert!((0..second).all(|_| limit.admit(later) == Admission::Admit));
        assert_eq!(limit.admit(later), Admission::Refuse { tell: true });
        assert!(rate_refusal().contains("120"));
    }

    #[test]
    fn server_messages_are_tagged_json() {
        let error = ServerMessage::Error {
            message: "no".into(),
        };
        assert_eq!(error.to_json(), r#"{"type":"error","message":"no"}"#);
        let limits = serde_json::to_value(Limits::current()).unwrap();
        assert_eq!(limits["max_message_bytes"], 65536);
    }
}
