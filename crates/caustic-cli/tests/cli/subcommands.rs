//! `info`, `compare`, `bench accel`, `bench photons` and `bench gpu`.

use crate::common::{arg, caustic, caustic_in, flat_quad_obj, scratch};

#[test]
fn info_describes_built_in_scenes_and_files() {
    let run = caustic(&["info", "cornell-caustics"]).ok();
    assert!(run.stdout.contains("triangles  40972"), "{}", run.stdout);
    assert!(run.stdout.contains("camera     eye"));
    let dir = scratch("info");
    let floor = flat_quad_obj(&dir);
    let run = caustic_in(&dir, &["info", arg(&floor)]).ok();
    assert!(run.stdout.contains("triangles  2"));
    assert!(run.stdout.contains("camera     none"));
}

/// `compare` reads EXR as stored and PNG converted from sRGB, saying so.
#[test]
fn compare_reads_exr_and_png() {
    let dir = scratch("compare");
    // A grey floor under the automatic light: no pixel above 1, so the PNG
    // differs from the EXR by its 8-bit rounding only.
    let floor = flat_quad_obj(&dir);
    for out in ["floor.exr", "floor.png"] {
        caustic_in(
            &dir,
            &[
                "render",
                arg(&floor),
                "--integrator",
                "whitted",
                "--spp",
                "2",
                "--width",
                "16",
                "--height",
                "16",
                "-q",
                "-o",
                out,
            ],
        )
        .ok();
    }
    let same = caustic_in(&dir, &["compare", "floor.exr", "floor.exr", "--block", "4"]).ok();
    assert!(
        same.stdout.contains("rmse_linear 0.000000"),
        "{}",
        same.stdout
    );
    assert!(same.stdout.contains("psnr_db     inf"));
    assert!(same.stdout.contains("rmse_block4 0.000000"));
    let png = caustic_in(&dir, &["compare", "floor.png", "floor.exr"]).ok();
    assert!(
        png.stderr
            .contains("note: floor.png: PNG, converted from 8-bit sRGB to linear"),
        "{}",
        png.stderr
    );
    let rmse: f64 = png.stdout.lines().next().unwrap()["rmse_linear ".len()..]
        .parse()
        .unwrap();
    assert!(rmse > 0.0 && rmse < 0.005, "{rmse}\n{}", png.stdout);
}

#[test]
fn collide_answers_agree_across_methods_and_write_json() {
    let dir = scratch("collide");
    let run = caustic_in(
        &dir,
        &[
            "collide",
            "cornell-box",
            "--agents",
            "40",
            "--frames",
            "3",
            "--rays",
            "16",
            "--method",
            "dacrt,lbvh:leaf=1,bvh-binned",
            "--json",
            "collide.json",
        ],
    )
    .ok();
    for name in ["dacrt", "lbvh:leaf=1", "bvh-binned"] {
        assert!(
            run.stdout.contains(&format!("| {name} | CPU | 40 | 640 |")),
            "{name}\n{}",
            run.stdout
        );
    }
    assert_eq!(
        run.stdout.matches("| = dacrt |").count(),
        3,
        "{}",
        run.stdout
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("collide.json")).unwrap()).unwrap();
    assert_eq!(json["answers_of"], "dacrt");
    let frames = json["answers"].as_array().unwrap();
    assert_eq!(frames.len(), 3);
    // Per agent [collides, distance, triangle]; a hit has all three.
    for agent in frames[0].as_array().unwrap() {
        let cells = agent.as_array().unwrap();
        assert_eq!(cells.len(), 3);
        assert_eq!(cells[0].as_bool().unwrap(), !cells[1].is_null());
        assert_eq!(cells[1].is_null(), cells[2].is_null());
    }
    assert_eq!(frames[0].as_array().unwrap().len(), 40);
}

#[test]
fn bench_accel_times_every_structure_and_writes_json() {
    let dir = scratch("bench-accel");
    let run = caustic_in(
        &dir,
        &[
            "bench",
            "accel",
            "--scene",
            "cornell-box",
            "--accel",
            "all",
            "--width",
            "16",
            "--height",
            "16",
            "--reps",
            "1",
            "--json",
            "accel.jsonl",
        ],
    )
    .ok();
    for name in ["bvh-wide", "bvh-binned", "lbvh", "ploc", "kdtree", "grid"] {
        assert!(
            run.stdout.contains(&format!("| cornell-box | {name} |")),
            "{name}\n{}",
            run.stdout
        );
    }
    let json = std::fs::read_to_string(dir.join("accel.jsonl")).unwrap();
    assert!(json.lines().count() >= 9, "{json}");
    // Every structure sees the same hits (the table's checksums agree).
    let primary: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| l.starts_with("| cornell-box |"))
        .map(|l| l.split('|').map(str::trim).collect::<Vec<_>>())
        .filter(|cells| cells[2].parse::<f64>().is_err()) // the first table's rows
        .map(|cells| cells[11])
        .collect();
    // `all`: every registered structure but brute force.
    let registered = caustic_accel::ACCEL_NAMES.len() - 1;
    assert_eq!(primary.len(), registered, "{}", run.stdout);
    assert!(primary.windows(2).all(|w| w[0] == w[1]), "{primary:?}");
    // The default structure is render's.
    let run = caustic_in(
        &dir,
        &[
            "bench",
            "accel",
            "--scene",
            "cornell-box",
            "--width",
            "8",
            "--height",
            "8",
            "--reps",
            "1",
        ],
    )
    .ok();
    assert!(
        run.stdout.contains("| cornell-box | bvh-wide |"),
        "{}",
        run.stdout
    );
}

#[test]
fn bench_photons_measures_every_point_structure() {
    let run = caustic(&[
        "bench",
        "photons",
        "--scene",
        "cornell-box",
        "--sizes",
        "2000",
        "--at-size",
        "2000",
        "--k",
        "4",
        "--at-k",
        "4",
        "--radius",
        "0.01",
        "--resolution",
        "8x8",
        "--at-resolution",
        "8x8",
        "--reps",
        "1",
        "--max-emitted",
        "1e5",
    ])
    .ok();
    for name in ["kdtree", "hashgrid", "brute"] {
        assert!(
            run.stdout.contains(&format!("| global | 2000 | {name} |")),
            "{name}\n{}",
            run.stdout
        );
    }
    assert!(
        run.stdout
            .contains("#### kNN query time against image resolution")
    );
}

/// Without a GPU, `bench gpu` says it needs one (and without the `cuda`
/// feature, that it needs the feature); it never measures a CPU.
#[test]
fn bench_gpu_needs_a_cuda_device() {
    caustic(&["bench", "gpu", "--device", "cpu"])
        .fails_with(1, "--device cpu is not one (use cuda or cuda:N)");
    let run = caustic(&["bench", "gpu", "--log2-n", "0"]);
    if !cfg!(feature = "cuda") {
        run.fails_with(1, "caustic bench gpu needs the `cuda` feature");
        return;
    }
    if run.code == 0 {
        eprintln!("a GPU is present: nothing to check here");
        return;
    }
    run.fails_with(1, "caustic bench gpu needs a CUDA GPU");
}

/// A reader that stops early (`caustic info scene | head -1`) ends the
/// process quietly, as SIGPIPE does for other tools, never with a panic.
#[cfg(unix)]
#[test]
fn a_closed_stdout_ends_info_quietly() {
    use std::os::unix::process::ExitStatusExt;
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_caustic"))
        .args(["info", "cornell-caustics"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // the reader leaves before the first line
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    const SIGPIPE: i32 = 13; // on Linux and the BSDs
    assert_eq!(out.status.signal(), Some(SIGPIPE), "{:?}", out.status);
}
