//! `caustic view` in a real browser: headless Chromium (Debian's
//! `chromium`, which `.ci/run` installs) driven through the DevTools
//! protocol. The page loads, an image appears and refines, a mouse drag
//! moves the camera and changes the image, the animation plays, and a
//! malformed WebSocket message sent by the page is answered with an error
//! while the server keeps serving. Screenshots go to
//! `target/ci-artifacts/viewer/`. Under CI a missing Chromium fails the
//! test; elsewhere it is skipped, and says so.

use crate::cdp::{Browser, find_chromium};
use crate::common::scratch;
use crate::view_server::ViewServer;
use caustic_scene::data_dirs::{data_required, say_uncaptured};
use serde_json::Value;
use std::path::PathBuf;

/// A checksum of the canvas's pixels, and whether any is lit.
const CANVAS_PIXELS: &str = "(() => {
    const canvas = document.getElementById('image');
    const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
    let sum = 0, lit = false;
    for (let i = 0; i < data.length; i++) {
        sum = (Math.imul(sum, 31) + data[i]) >>> 0;
        if (i % 4 !== 3 && data[i] > 40) lit = true;
    }
    return [sum, lit];
})()";

fn chromium_or_skip() -> Option<PathBuf> {
    let found = find_chromium();
    if found.is_none() {
        let why = "no Chromium (install Debian's `chromium`, or set CAUSTIC_CHROMIUM)";
        // The repository's rule for missing test data: fail under CI (or
        // CAUSTIC_REQUIRE_DATA=1), skip and say so elsewhere.
        assert!(
            !data_required(),
            "the browser test needs Chromium under CI: {why}"
        );
        say_uncaptured(&format!("skipping: the viewer's browser test: {why}"));
    }
    found
}

/// Where the screenshots go: `target/ci-artifacts/viewer`.
fn artifacts() -> PathBuf {
    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let dir = target
        .parent()
        .unwrap_or(&target)
        .join("ci-artifacts")
        .join("viewer");
    std::fs::create_dir_all(&dir).expect("the artifacts folder");
    dir
}

async fn canvas(browser: &mut Browser) -> (u64, bool) {
    let value = browser.eval(CANVAS_PIXELS).await.expect("the canvas reads");
    (
        value[0].as_u64().unwrap_or(0),
        value[1].as_bool().unwrap_or(false),
    )
}

async fn number(browser: &mut Browser, expression: &str) -> f64 {
    let value = browser.eval(expression).await.expect(expression);
    value
        .as_f64()
        .unwrap_or_else(|| panic!("{expression} = {value}"))
}

#[test]
fn the_page_shows_refines_orbits_plays_and_survives_a_malformed_message() {
    let Some(chromium) = chromium_or_skip() else {
        return;
    };
    let server = ViewServer::start(&[
        "cornell-caustics-moving",
        "--device",
        "cpu",
        "--width",
        "128",
        "--height",
        "96",
        "--budget",
        "16",
    ]);
    let shots = artifacts();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(async {
        let mut browser = Browser::launch(&chromium, scratch("browser-profile")).await;
        browser.navigate(&server.url()).await;

        // The page loads and shows a lit image, which refines to its budget.
        browser
            .wait_for("viewer.framesDrawn > 0 && viewer.hello !== null", "a first image")
            .await;
        let first = canvas(&mut browser).await;
        assert!(first.1, "the first image shows the lit box");
        browser
            .wait_for("viewer.stats.done && viewer.stats.samples === 16", "16 samples per pixel")
            .await;
        let refined = canvas(&mut browser).await;
        assert_ne!(first.0, refined.0, "refining changes the pixels");
        let overlay = browser.eval("document.getElementById('overlay').textContent").await;
        let overlay = overlay.unwrap_or(Value::Null);
        for says in ["fps", "update", "render", "Mrays/s", "16/16 spp"] {
            assert!(overlay.as_str().unwrap_or("").contains(says), "overlay: {overlay}");
        }
        browser.screenshot(&shots.join("loaded.png")).await;

        // A drag across the image orbits the camera: another camera, another image.
        let camera = browser.eval("JSON.stringify(viewer.stats.camera)").await.unwrap();
        let box_ = browser
            .eval("(() => { const r = document.getElementById('image').getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()")
            .await
            .unwrap();
        let centre = (box_[0].as_f64().unwrap(), box_[1].as_f64().unwrap());
        browser.drag(centre, (centre.0 + 40.0, centre.1 + 12.0), 8).await;
        let moved = format!("JSON.stringify(viewer.stats.camera) !== {camera} && viewer.stats.done");
        browser.wait_for(&moved, "an image of the dragged camera").await;
        let orbited = canvas(&mut browser).await;
        assert_ne!(orbited.0, refined.0, "the image follows the camera");
        browser.screenshot(&shots.join("orbit.png")).await;

        // Play: the animation's frame advances.
        browser.eval("document.getElementById('play').click()").await.unwrap();
        browser
            .wait_for("viewer.stats.playing && viewer.stats.frame >= 6", "the animation to play")
            .await;
        browser.screenshot(&shots.join("playing.png")).await;
        browser.eval("document.getElementById('play').click()").await.unwrap();
        browser.wait_for("!viewer.stats.playing", "the animation to pause").await;

        // A malformed message from the page gets an error; the server goes on.
        let errors = number(&mut browser, "viewer.errors.length").await;
        browser.eval("viewer.sendRaw('{this is not json')").await.unwrap();
        let answered = format!("viewer.errors.length > {errors}");
        browser.wait_for(&answered, "the error reply").await;
        let error = browser.eval("viewer.errors[viewer.errors.length - 1]").await.unwrap();
        assert!(error.as_str().unwrap_or("").contains("malformed"), "{error}");
        let view = number(&mut browser, "viewer.stats.view").await;
        browser
            .eval("viewer.sendRaw(JSON.stringify({ type: 'zoom', factor: 0.8 }))")
            .await
            .unwrap();
        let served = format!("viewer.stats.view > {view} && viewer.socket.readyState === 1");
        browser.wait_for(&served, "a frame after the error").await;
        browser.screenshot(&shots.join("after-error.png")).await;
    });
}
