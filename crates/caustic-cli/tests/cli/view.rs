//! `caustic view` through its WebSocket, as a Rust client sees it: frames
//! that decode and follow the camera, errors for bad requests on a
//! connection that stays usable, the rate and client limits, the clock,
//! and a clean stop on Ctrl-C.

use crate::common::caustic;
use crate::view_server::{Client, PATIENCE, ViewServer};
use std::time::{Duration, Instant};

/// The animated built-in scene, tiny, on the CPU.
const TINY: &[&str] = &[
    "cornell-caustics-moving",
    "--device",
    "cpu",
    "--width",
    "64",
    "--height",
    "48",
    "--budget",
    "8",
];

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
        .block_on(future)
}

/// Mean absolute difference of two images' bytes.
fn difference(a: &[u8], b: &[u8]) -> f64 {
    assert_eq!(a.len(), b.len());
    let sum: u64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| u64::from(x.abs_diff(*y)))
        .sum();
    sum as f64 / a.len() as f64
}

const ORBIT: &str = r#"{"type":"orbit","yaw":0.5,"pitch":0.2}"#;

#[test]
fn frames_decode_refine_and_follow_the_camera() {
    let server = ViewServer::start(TINY);
    block_on(async {
        let (mut client, hello) = Client::greeted(server.address).await;
        assert_eq!(
            (hello["width"].as_u64(), hello["height"].as_u64()),
            (Some(64), Some(48))
        );
        assert_eq!(hello["clock"]["frames"], 121, "{hello}");
        let first = client.frame_of_view(0).await;
        let (width, height, before) = first.pixels();
        assert_eq!((width, height), (64, 48));
        assert!(
            before.iter().any(|&b| b > 32),
            "the first image shows the lit box"
        );
        // The image refines to its budget of 8 samples, then stops.
        let done = client.frame_where(|s| s["done"] == true).await;
        assert_eq!(done.stats["samples"], 8, "{}", done.stats);
        client.send_text(ORBIT).await;
        let moved = client.frame_of_view(1).await;
        assert_ne!(moved.stats["camera"], first.stats["camera"]);
        assert_eq!(moved.stats["samples"], 1, "a new view starts over");
        let (_, _, after) = moved.pixels();
        assert!(
            difference(&before, &after) > 2.0,
            "the image follows the camera"
        );
    });
}

#[test]
fn bad_requests_are_answered_and_the_connection_goes_on() {
    let server = ViewServer::start(TINY);
    block_on(async {
        let (mut client, _) = Client::greeted(server.address).await;
        client.frame_of_view(0).await;
        let oversized = format!(r#"{{"type":"play","pad":"{}"}}"#, "x".repeat(70_000));
        for (request, says) in [
            ("{not json", "malformed"),
            (r#"{"type":"explode"}"#, "malformed"),
            (r#"{"type":"zoom","factor":-1}"#, "factor"),
            (r#"{"type":"settings","accel":"bvh-fast"}"#, "accel"),
            (oversized.as_str(), "at most 65536 bytes"),
        ] {
            client.send_text(request).await;
            let error = client.next_error().await;
            assert!(error.contains(says), "{request:.40}: {error}");
        }
        client.send_binary(vec![1, 2, 3]).await;
        let error = client.next_error().await;
        assert!(error.contains("binary"), "{error}");
        // None of them counted as a view change; the next request is view 1.
        client.send_text(ORBIT).await;
        client.frame_of_view(1).await;
        // Past the transport limit the connection is closed (1009), and
        // the server goes on serving others.
        client.try_send_text(&"x".repeat(2 << 20)).await;
        assert!(matches!(client.close_code().await, None | Some(1009)));
        let (mut other, _) = Client::greeted(server.address).await;
        other.frame_of_view(0).await;
    });
}

#[test]
fn a_flood_of_requests_is_cut_to_the_rate_limit() {
    let server = ViewServer::start(TINY);
    block_on(async {
        let (mut client, _) = Client::greeted(server.address).await;
        let flood = 400;
        let started = Instant::now();
        for _ in 0..flood {
            client.send_text(r#"{"type":"reset_camera"}"#).await;
        }
        let error = client.next_error().await;
        assert!(error.contains("rate limit"), "{error}");
        // After a pause requests are admitted again.
        tokio::time::sleep(Duration::from_millis(500)).await;
        client.send_text(ORBIT).await;
        // The burst of 240 was applied, plus what the bucket refilled
        // (120 a second) while the flood arrived, which on a slow machine
        // is more than nothing; the rest was dropped. The server reads in
        // order, so the flood was over before the orbit was sent.
        let refilled = (started.elapsed().as_secs_f64() * 120.0).ceil() as u64;
        let frame = client.frame_of_view(241).await;
        let view = frame.stats["view"].as_u64().expect("a view number");
        assert!(
            (241..=241 + refilled).contains(&view) && view < flood + 1,
            "view {view}: expected the burst of 240 and up to {refilled} refilled, of {flood}"
        );
    });
}

#[test]
fn play_runs_the_clock_pause_holds_it_and_seek_jumps() {
    let server = ViewServer::start(TINY);
    block_on(async {
        let (mut client, _) = Client::greeted(server.address).await;
        let still = client.frame_of_view(0).await;
        assert_eq!(
            (
                still.stats["frame"].as_u64(),
                still.stats["playing"].as_bool()
            ),
            (Some(0), Some(false))
        );
        client.send_text(r#"{"type":"play"}"#).await;
        let later = client
            .frame_where(|s| s["playing"] == true && s["frame"].as_u64() > Some(3))
            .await;
        assert!(later.stats["time"].as_f64() > Some(0.0));
        client.send_text(r#"{"type":"pause"}"#).await;
        client.send_text(r#"{"type":"seek","time":2.0}"#).await;
        let held = client.frame_of_view(3).await;
        assert_eq!(
            (
                held.stats["frame"].as_u64(),
                held.stats["playing"].as_bool()
            ),
            (Some(60), Some(false))
        );
        let (_, _, middle) = held.pixels();
        let (_, _, start) = still.pixels();
        assert!(difference(&start, &middle) > 0.5, "the sphere has moved");
    });
}

#[test]
fn clients_come_and_go_up_to_the_limit_and_ctrl_c_stops_cleanly() {
    let mut server = ViewServer::start(&[TINY, &["--max-clients", "2"]].concat());
    block_on(async {
        let (mut first, _) = Client::greeted(server.address).await;
        first.frame_of_view(0).await;
        {
            // A second client has a view of its own.
            let (mut second, _) = Client::greeted(server.address).await;
            second.send_text(ORBIT).await;
            let moved = second.frame_of_view(1).await;
            assert_eq!(moved.stats["view"], 1);
            // A third is one too many.
            let mut third = Client::connect(server.address).await;
            let busy = third.next_error().await;
            assert!(busy.contains("at most 2"), "{busy}");
            assert_eq!(third.close_code().await, Some(1013));
        }
        // The second left without a word; its seat comes free.
        let start = Instant::now();
        loop {
            let mut again = Client::connect(server.address).await;
            let hello = again.next_of_any().await;
            if hello["type"] == "hello" {
                again.frame_of_view(0).await;
                break;
            }
            assert!(
                start.elapsed() < PATIENCE,
                "the seat never came free: {hello}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // The first client's view was never touched by the others.
        first.send_text(r#"{"type":"zoom","factor":0.8}"#).await;
        assert_eq!(first.frame_of_view(1).await.stats["view"], 1);
        let code = server.interrupt();
        assert_eq!(code, Some(0), "{}", server.stderr());
        assert_eq!(first.close_code().await, Some(1001));
    });
    assert!(server.stderr().contains("stopping"), "{}", server.stderr());
}

#[test]
fn the_view_command_refuses_what_it_cannot_serve() {
    caustic(&[
        "view",
        "cornell-box",
        "--integrator",
        "sppm",
        "--score",
        "ref.exr",
    ])
    .fails_with(1, "--score is for");
    caustic(&["view", "no-such-scene"]).fails_with(1, "no-such-scene");
    caustic(&["view", "--bind", "localhost:80"]).fails_with(2, "--bind");
}

#[test]
fn the_latency_benchmark_runs_its_moves() {
    let run = caustic(&[
        "bench",
        "view",
        "cornell-box",
        "--device",
        "cpu",
        "--width",
        "32",
        "--height",
        "24",
        "--changes",
        "4",
        "--warmup",
        "1",
    ])
    .ok();
    assert!(
        run.stdout.contains("over 4 changes: median"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("CPU threads"), "{}", run.stdout);
}
