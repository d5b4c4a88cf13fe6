//! Bad input ends in a clear error naming what is wrong, exit code 2 for a
//! flag clap refuses and 1 for anything found later, and no output file.

use crate::common::{arg, caustic, caustic_in, scratch};

/// The output is checked before the scene loads or anything renders.
#[test]
fn unwritable_outputs_fail_before_rendering() {
    let dir = scratch("outputs");
    std::fs::create_dir_all(dir.join("folder.png")).unwrap();
    for (output, says) in [
        ("missing/out.png", "the folder missing does not exist"),
        ("out.jpg", "unknown image format"),
        ("out", "unknown image format"),
        ("folder.png", "is a directory"),
    ] {
        // A scene that does not exist: the output error must come first.
        let run =
            caustic_in(&dir, &["render", "no-such-scene.obj", "-o", output]).fails_with(1, says);
        assert!(!run.stderr.contains("no such file"), "{}", run.stderr);
    }
}

/// Every numeric flag refuses values no algorithm can use, naming itself.
#[test]
fn nonsensical_numbers_are_refused_by_flag() {
    let render = |extra: &[&'static str]| {
        let mut args = vec!["render", "cornell-box"];
        args.extend(extra);
        args
    };
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (render(&["--exposure", "nan"]), "--exposure"),
        (render(&["--exposure", "inf"]), "--exposure"),
        (render(&["--exposure", "1000"]), "--exposure"),
        (render(&["--photons", "0"]), "--photons"),
        (render(&["--caustic-photons", "0"]), "--caustic-photons"),
        (render(&["--passes", "0"]), "--passes"),
        (render(&["--photons-per-pass", "0"]), "--photons-per-pass"),
        (render(&["--spp", "0"]), "--spp"),
        (render(&["--width", "0"]), "--width"),
        (render(&["--height", "40000"]), "--height"),
        (render(&["--light-samples", "0"]), "--light-samples"),
        (render(&["--max-depth", "100000"]), "--max-depth"),
        (render(&["--k", "1"]), "--k"),
        (render(&["--caustic-k", "0"]), "--caustic-k"),
        (render(&["--max-radius", "0"]), "--max-radius"),
        (render(&["--caustic-radius", "2"]), "--caustic-radius"),
        (render(&["--sample-spacing", "-1"]), "--sample-spacing"),
        (render(&["--photon-bounces", "0"]), "--photon-bounces"),
        (render(&["--alpha", "1"]), "--alpha"),
        (render(&["--radius", "nan"]), "--radius"),
        (render(&["--radius", "0"]), "--radius"),
        (render(&["--threads", "100000"]), "--threads"),
        (render(&["--fov", "0"]), "--fov"),
        (render(&["--fov", "180"]), "--fov"),
        (render(&["--fov", "nan"]), "--fov"),
        (render(&["--eye", "0,nan,1", "--at", "0,0,0"]), "--eye"),
        (render(&["--accel", "bvh-fastest"]), "--accel"),
        (render(&["--accel", "lbvh:bits=99"]), "--accel"),
        (
            vec!["bench", "accel", "--scene", "cornell-box", "--reps", "0"],
            "--reps",
        ),
        (
            vec!["bench", "accel", "--scene", "cornell-box", "--width", "0"],
            "--width",
        ),
        (vec!["bench", "photons", "--sizes", "1e4,0"], "--sizes"),
        (vec!["bench", "photons", "--k", "0"], "--k"),
        (vec!["bench", "photons", "--at-k", "0"], "--at-k"),
        (vec!["bench", "photons", "--radius", "nan"], "--radius"),
        (
            vec!["bench", "photons", "--max-radius", "-1"],
            "--max-radius",
        ),
        (
            vec!["bench", "photons", "--resolution", "0x5"],
            "--resolution",
        ),
        (
            vec!["bench", "photons", "--at-resolution", "512"],
            "--at-resolution",
        ),
        (vec!["bench", "photons", "--reps", "0"], "--reps"),
        (
            vec!["bench", "photons", "--max-emitted", "0"],
            "--max-emitted",
        ),
        (vec!["bench", "gpu", "--log2-n", "29"], "--log2-n"),
        (vec!["bench", "gpu", "--reps", "0"], "--reps"),
        (vec!["bench", "gpu", "--height", "0"], "--height"),
        (vec!["bench", "gpu", "--devices", "0,0"], "--devices"),
        (vec!["bench", "gpu", "--devices", "cuda:1"], "--devices"),
        (vec!["compare", "a.exr", "b.exr", "--block", "0"], "--block"),
    ];
    for (args, flag) in cases {
        let run = caustic(&args);
        assert_eq!(run.code, 2, "{args:?} should be refused\n{}", run.stderr);
        assert!(
            run.stderr.contains("invalid value") && run.stderr.contains(flag),
            "{args:?} should name {flag}:\n{}",
            run.stderr
        );
    }
}

/// A degenerate camera names the flag at fault and what to pass instead.
#[test]
fn degenerate_cameras_name_the_flag() {
    let cases: [(&[&str], &str); 6] = [
        (
            &["--eye", "1,2,3", "--at", "1,2,3"],
            "--eye and --at are the same point (1,2,3)",
        ),
        (
            &["--eye", "0,5,0", "--at", "0,0,0"],
            "the view direction from --eye to --at (0,-1,0) is parallel to the default up (0,1,0), so the image has no up: pass an --up across the view, e.g. --up 0,0,1",
        ),
        (
            &["--eye", "0,0,5", "--at", "0,0,0", "--up", "0,0,-2"],
            "is parallel to --up",
        ),
        (&["--up", "0,0,0"], "--up 0,0,0 has no direction"),
        (
            &["--up", "0,0,1"],
            "the view direction of the scene's camera",
        ),
        (&["--eye", "0,0,5"], "--eye and --at go together"),
    ];
    for (flags, says) in cases {
        let mut args = vec!["render", "cornell-box", "-o", "x.png"];
        args.extend(flags);
        caustic(&args).fails_with(1, says);
    }
}

#[test]
fn unknown_scenes_and_cameras_say_what_exists() {
    caustic(&["render", "cornell-bx"]).fails_with(
        1,
        "not a built-in scene (built-in: cornell-box, cornell-caustics, cornell-caustics-moving)",
    );
    caustic(&["info", "nowhere.obj"]).fails_with(1, "nowhere.obj: no such file");
    caustic(&["render", "cornell-box", "--camera", "spnoza"]).fails_with(
        1,
        "--camera spnoza: not a preset and not a camera file (presets: standard, cornell-mm",
    );
    caustic(&[
        "render",
        "cornell-box",
        "--integrator",
        "photon",
        "--fresnel",
        "schlick",
    ])
    .fails_with(1, "--fresnel schlick is for --integrator whitted");
}

#[test]
fn compare_refuses_other_formats_and_sizes() {
    let dir = scratch("compare-errors");
    let png = dir.join("a.png");
    let big = dir.join("b.png");
    for (out, size) in [(&png, "8"), (&big, "16")] {
        caustic_in(
            &dir,
            &[
                "render",
                "cornell-box",
                "--integrator",
                "whitted",
                "--spp",
                "1",
                "--width",
                size,
                "--height",
                size,
                "-q",
                "-o",
                arg(out),
            ],
        )
        .ok();
    }
    std::fs::write(dir.join("a.jpg"), b"not an image").unwrap();
    for other in ["a.jpg", "a", "."] {
        let says = format!("{other}: not an image compare reads: it reads .exr (linear) and .png");
        caustic_in(&dir, &["compare", other, "a.png"]).fails_with(1, &says);
    }
    caustic_in(&dir, &["compare", "a.png", "b.png"])
        .fails_with(1, "images differ in size: 8x8 vs 16x16");
    caustic_in(&dir, &["compare", "a.png", "a.png", "--block", "9"])
        .fails_with(1, "--block 9 is larger than the image's smaller side (8)");
}

/// A build without the `mpi` feature started by an MPI launcher as one of
/// several ranks refuses to run (each rank would render and write the
/// whole image), and names the feature; one rank is a plain process.
#[cfg(not(feature = "mpi"))]
#[test]
fn several_ranks_need_the_mpi_feature() {
    let dir = scratch("ranks");
    let run = |size: &str| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_caustic"))
            .args(["render", "cornell-box", "--width", "8", "--height", "8"])
            .args(["--integrator", "whitted", "--device", "cpu", "-o", "r.png"])
            .env("OMPI_COMM_WORLD_SIZE", size)
            .current_dir(&dir)
            .output()
            .unwrap();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let (code, stderr) = run("3");
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("one of 3 MPI ranks") && stderr.contains("`mpi` feature"),
        "{stderr}"
    );
    assert!(!dir.join("r.png").exists());
    let (code, stderr) = run("1");
    assert_eq!(code, Some(0), "{stderr}");
    assert!(dir.join("r.png").exists());
}
