//! `render --frames` and `--time` on the built-in animated scene, on the
//! CPU: one image per frame, the sphere moving between them, refitted
//! frames identical to rebuilt ones, and clear errors.

use crate::common::{caustic_in, scratch};

fn frames(dir: &std::path::Path, prefix: &str, update: &str) -> Vec<String> {
    let pattern = format!("{prefix}_%03d.exr");
    let run = caustic_in(
        dir,
        &[
            "render",
            "cornell-caustics-moving",
            "--integrator",
            "whitted",
            "--device",
            "cpu",
            "--width",
            "48",
            "--height",
            "48",
            "--spp",
            "1",
            "--accel",
            "bvh-binned",
            "--frames",
            "0..2",
            "--update",
            update,
            "-o",
            &pattern,
        ],
    )
    .ok();
    run.lines_starting("frame ")
        .iter()
        .map(|l| l.to_string())
        .collect()
}

#[test]
fn frames_render_one_image_each_and_refits_equal_rebuilds() {
    let dir = scratch("animation-frames");
    let refit = frames(&dir, "refit", "refit");
    assert_eq!(refit.len(), 3, "{refit:?}");
    assert!(refit[0].contains("update rebuild"), "{}", refit[0]);
    assert!(refit[1].contains("update refit") && refit[2].contains("update refit"));
    let rebuild = frames(&dir, "rebuild", "rebuild");
    assert!(rebuild.iter().all(|l| l.contains("update rebuild")));
    let read = |name: &str| std::fs::read(dir.join(name)).unwrap();
    for f in ["000", "001", "002"] {
        assert_eq!(
            read(&format!("refit_{f}.exr")),
            read(&format!("rebuild_{f}.exr")),
            "frame {f}: a refitted tree gives the rebuilt tree's hits"
        );
    }
    // The sphere moves: the frames differ.
    assert_ne!(read("refit_000.exr"), read("refit_002.exr"));
}

#[test]
fn animation_flags_refuse_what_they_cannot_do() {
    let dir = scratch("animation-errors");
    let render = |extra: &[&str]| {
        let mut args = vec!["render", "--device", "cpu", "--width", "8", "--height", "8"];
        args.extend_from_slice(extra);
        caustic_in(&dir, &args)
    };
    render(&["cornell-box", "--frames", "0..1", "-o", "a_%02d.png"])
        .fails_with(1, "is not animated");
    render(&["cornell-caustics-moving", "--frames", "0..1", "-o", "a.png"])
        .fails_with(1, "pattern with %04d");
    render(&[
        "cornell-caustics-moving",
        "--frames",
        "3..1",
        "-o",
        "a_%02d.png",
    ])
    .fails_with(2, "comes after the last");
    render(&[
        "cornell-caustics-moving",
        "--frames",
        "0..1",
        "--update",
        "refit",
        "--accel",
        "grid",
        "-o",
        "a_%02d.png",
    ])
    .fails_with(1, "refitting needs a binary BVH");
    render(&["cornell-caustics-moving", "--time", "1.5", "-o", "t.png"]).ok();
    assert!(dir.join("t.png").exists());
}
