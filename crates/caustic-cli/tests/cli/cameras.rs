//! Where the camera and the light come from for scenes that lack them:
//! camera files next to the scene, `--camera`, the automatic framing and
//! headlight, the empty-image warning and `--two-sided`.

use crate::common::{arg, caustic_in, flat_quad_obj, mean, scratch};
use std::path::Path;

fn render_exr(dir: &Path, scene: &Path, out: &str, extra: &[&str]) -> crate::common::Run {
    let mut args = vec![
        "render",
        arg(scene),
        "--integrator",
        "whitted",
        "--spp",
        "1",
        "--width",
        "16",
        "--height",
        "16",
        "-o",
        out,
    ];
    args.extend(extra);
    caustic_in(dir, &args).ok()
}

/// A flat model with no camera and no light: the automatic camera sees it
/// from above (a camera on the z axis would see it edge-on, an empty
/// image), and the automatic light shows its 50 % grey clearly.
#[test]
fn automatic_camera_and_light_show_a_flat_grey_model() {
    let dir = scratch("auto-framing");
    let floor = flat_quad_obj(&dir);
    let run = render_exr(&dir, &floor, "floor.exr", &[]);
    assert!(
        run.stderr
            .contains("note: floor has no camera: framing its bounds from above")
    );
    assert!(
        run.stderr
            .contains("note: the scene has no lights; adding a point light at the camera")
    );
    assert!(!run.stderr.contains("warning"), "{}", run.stderr);
    let [r, g, b] = mean(&dir.join("floor.exr"));
    // The quad fills about a third of the frame at a radiance near 0.3.
    assert!(
        r > 0.05 && (r - g).abs() < 1e-6 && (g - b).abs() < 1e-6,
        "grey and lit: {r} {g} {b}"
    );
}

/// `SCENE.camera` next to the scene is used, and says so; a camera that
/// looks away from everything gets the empty-image warning.
#[test]
fn a_camera_file_next_to_the_scene_is_used() {
    let dir = scratch("sidecar");
    let floor = flat_quad_obj(&dir);
    std::fs::write(
        dir.join("floor.obj.camera"),
        "# away from the floor\neye = 0, 5, 0\nat = 0, 10, 0\nup = 0, 0, 1\nfov = 30\n",
    )
    .unwrap();
    let run = render_exr(&dir, &floor, "away.exr", &[]);
    assert!(run.stderr.contains("note: camera from "), "{}", run.stderr);
    assert!(run.stderr.contains("floor.obj.camera"));
    assert!(
        run.stderr.contains("warning: the image is entirely black"),
        "{}",
        run.stderr
    );
    assert_eq!(mean(&dir.join("away.exr")), [0.0; 3]);
    // --eye/--at win over the file.
    let run = render_exr(
        &dir,
        &floor,
        "placed.exr",
        &["--eye", "1,3,1", "--at", "0,0,0"],
    );
    assert!(!run.stderr.contains("warning"), "{}", run.stderr);
    // A broken camera file is an error naming the file and line.
    std::fs::write(dir.join("floor.obj.camera"), "eye = 0, 5, 0\nat = 0, 10\n").unwrap();
    let mut args = vec!["render", arg(&floor), "-o", "x.png"];
    args.push("-q");
    caustic_in(&dir, &args).fails_with(1, "floor.obj.camera: line 2");
}

/// `--camera` takes a preset, `standard` (the preset for the file's name)
/// or a camera file; a file's name alone never picks a camera.
#[test]
fn cameras_are_chosen_explicitly() {
    let dir = scratch("presets");
    let sub = dir.join("sponza");
    std::fs::create_dir_all(&sub).unwrap();
    // A flat quad called sponza.obj: once given Sponza's camera silently.
    let quad = flat_quad_obj(&dir);
    let sponza = sub.join("sponza.obj");
    std::fs::copy(&quad, &sponza).unwrap();
    let run = render_exr(&dir, &sponza, "auto.exr", &[]);
    assert!(
        run.stderr
            .contains("sponza has no camera: framing its bounds"),
        "{}",
        run.stderr
    );
    let run = render_exr(&dir, &sponza, "preset.exr", &["--camera", "standard"]);
    assert!(!run.stderr.contains("framing"), "{}", run.stderr);
    assert!(
        run.stderr.contains("warning: the image is entirely black"),
        "Sponza's camera sees nothing here"
    );
    render_exr(&dir, &sponza, "named.exr", &["--camera", "sponza"]);
    assert_eq!(mean(&dir.join("preset.exr")), mean(&dir.join("named.exr")));
    let run = render_exr(&dir, &quad, "fallback.exr", &["--camera", "standard"]);
    assert!(
        run.stderr
            .contains("--camera standard: no preset for floor"),
        "{}",
        run.stderr
    );
    let file = dir.join("top.camera");
    std::fs::write(&file, "eye = 0, 3, 0.01\nat = 0, 0, 0\n").unwrap();
    let run = render_exr(&dir, &quad, "file.exr", &["--camera", arg(&file)]);
    assert!(!run.stderr.contains("warning"), "{}", run.stderr);
    let help = caustic_in(&dir, &["render", "--help"]).ok();
    assert!(
        help.stdout.contains("sponza            sponza.obj"),
        "{}",
        help.stdout
    );
}

/// A one-sided face seen and lit from behind is black; `--two-sided`
/// shades it.
#[test]
fn two_sided_shows_faces_that_point_away() {
    let dir = scratch("two-sided");
    let xml = dir.join("back.xml");
    std::fs::write(
        &xml,
        r#"<scene version="3.0.0">
  <emitter type="point"><point name="position" value="0, 0, -3"/><rgb name="intensity" value="10"/></emitter>
  <shape type="rectangle"><bsdf type="diffuse"/></shape>
</scene>"#,
    )
    .unwrap();
    let behind = ["--eye", "0,0,-4", "--at", "0,0,0"];
    let run = render_exr(&dir, &xml, "one.exr", &behind);
    assert!(
        run.stderr.contains("warning: the image is entirely black"),
        "{}",
        run.stderr
    );
    let mut flags = behind.to_vec();
    flags.push("--two-sided");
    let run = render_exr(&dir, &xml, "two.exr", &flags);
    assert!(!run.stderr.contains("warning"), "{}", run.stderr);
    assert!(mean(&dir.join("two.exr"))[0] > 0.05);
}
