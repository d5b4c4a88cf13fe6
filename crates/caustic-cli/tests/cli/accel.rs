//! `caustic render --accel` on each device: the CPU's structure, the GPU's
//! device builds and `cpu:SPEC` uploads, and the structures the GPU does
//! not build (an error on `--device cuda`, the CPU on `--device auto`).

use crate::common::{arg, caustic, caustic_in, png_size, scratch};

/// A tiny render of the Cornell box into `out` with `extra` flags.
fn render_args<'a>(out: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "render",
        "cornell-box",
        "--width",
        "8",
        "--height",
        "8",
        "--spp",
        "1",
        "--passes",
        "1",
        "--photons",
        "1000",
        "--caustic-photons",
        "1000",
        "--photons-per-pass",
        "1000",
        "--gather-rays",
        "4",
        "-o",
        out,
    ];
    args.extend(extra);
    args
}

/// `--device cuda` with a structure the GPU does not build fails from the
/// flags, naming what the GPU builds: before the scene loads (the scene
/// here does not exist) or any device opens, so without a GPU too.
#[test]
fn cuda_with_a_structure_the_gpu_does_not_build_names_the_gpu_structures() {
    {
        let accel = "brute";
        let run = caustic(&[
            "render",
            "no-such-scene.obj",
            "--device",
            "cuda",
            "--accel",
            accel,
        ]);
        if cfg!(feature = "cuda") {
            run.fails_with(1, &format!("--accel {accel} with --device cuda"))
                .fails_with(
                    1,
                    "has no GPU builder; the GPU builds bvh-binned, bvh-binned-staged, bvh-sweep, lbvh, hlbvh, ploc, bvh-taskpool, bvh-wide",
                )
                .fails_with(1, "cpu:SPEC");
        } else {
            run.fails_with(1, "built without CUDA support");
        }
    }
    let run = caustic(&[
        "render",
        "no-such-scene.obj",
        "--device",
        "cuda",
        "--accel",
        "cpu:grid",
    ]);
    if cfg!(feature = "cuda") {
        run.fails_with(1, "`grid` is not a binary BVH builder");
    } else {
        run.fails_with(1, "built without CUDA support");
    }
}

/// On the CPU `cpu:SPEC` is SPEC, with each integrator.
#[test]
fn cpu_spec_on_the_cpu_is_the_cpu_structure() {
    let dir = scratch("accel-cpu-spec");
    let out = dir.join("cb.png");
    for (integrator, accel, named) in [
        ("whitted", "cpu:bvh-binned", "bvh-binned build"),
        ("photon", "cpu:bvh-sweep", "bvh-sweep build"),
        ("sppm", "bvh-wide:from=cpu:lbvh", "bvh-wide build"),
    ] {
        let args = render_args(
            arg(&out),
            &[
                "--device",
                "cpu",
                "--integrator",
                integrator,
                "--accel",
                accel,
            ],
        );
        let run = caustic_in(&dir, &args).ok();
        assert_eq!(png_size(&out), (8, 8));
        assert_eq!(run.lines_starting("device:"), ["device: CPU"]);
        let wrote = run.lines_starting("wrote");
        assert!(
            wrote.len() == 1 && wrote[0].contains(named) && wrote[0].contains("CPU threads"),
            "{integrator} --accel {accel}: {}",
            run.stderr
        );
    }
}

/// `--accel dacrt[:split=rdh]` on the CPU (`cpu`, and `auto` without a
/// GPU): every integrator traces it by waves and writes the image the
/// default structure's per-ray render writes.
#[test]
fn dacrt_on_the_cpu_renders_every_integrator_as_per_ray() {
    let dir = scratch("accel-cpu-dacrt");
    for integrator in ["whitted", "photon", "sppm"] {
        let reference = dir.join(format!("{integrator}-bvh.png"));
        let flags = ["--device", "cpu", "--integrator", integrator];
        caustic_in(&dir, &render_args(arg(&reference), &flags)).ok();
        let runs = [
            ("cpu", "dacrt"),
            ("cpu", "dacrt:split=rdh"),
            ("auto", "dacrt:split=rdh"),
        ];
        for (i, (device, accel)) in runs.into_iter().enumerate() {
            let out = dir.join(format!("{integrator}-{i}.png"));
            let extra = [
                "--device",
                device,
                "--integrator",
                integrator,
                "--accel",
                accel,
            ];
            let run = caustic_in(&dir, &render_args(arg(&out), &extra));
            if !run.stderr.contains("device: CPU") {
                continue; // `auto` on a GPU machine traces it there
            }
            let run = run.ok();
            let wrote = run.lines_starting("wrote");
            assert!(
                wrote.len() == 1
                    && wrote[0].contains(&format!("{accel} build"))
                    && wrote[0].contains("CPU"),
                "{integrator} --accel {accel}: {}",
                run.stderr
            );
            assert_eq!(png_size(&out), (8, 8));
            assert!(
                std::fs::read(&out).unwrap() == std::fs::read(&reference).unwrap(),
                "{integrator} --accel {accel}: not the per-ray bvh-wide image"
            );
        }
    }
}

/// Unknown structures and parameters are refused by clap (exit code 2)
/// with the flag's name, on any device.
#[test]
fn unknown_structures_are_refused_on_every_device() {
    for device in ["cpu", "auto", "cuda"] {
        for (accel, says) in [
            ("bogus", "unknown accel `bogus`"),
            ("cpu:bogus", "unknown accel `bogus`"),
            ("ploc:radius=3", "has no parameter"),
        ] {
            caustic(&["render", "--device", device, "--accel", accel])
                .fails_with(2, "--accel")
                .fails_with(2, says);
        }
    }
}

/// `--device auto` with a structure the GPU does not build renders: on the
/// CPU, and with a GPU present the device line says why.
#[test]
fn auto_with_a_cpu_only_structure_renders_on_the_cpu() {
    let dir = scratch("accel-auto-brute");
    let out = dir.join("brute.png");
    let args = render_args(arg(&out), &["--integrator", "whitted", "--accel", "brute"]);
    let run = caustic_in(&dir, &args).ok();
    let lines = run.lines_starting("device:");
    assert_eq!(lines.len(), 1, "{}", run.stderr);
    assert!(
        lines[0].starts_with("device: CPU (auto; ")
            && (lines[0].contains("CUDA unavailable") || lines[0].contains("no GPU builder")),
        "{}",
        lines[0]
    );
    assert!(
        run.lines_starting("wrote")[0].contains("brute build"),
        "{}",
        run.stderr
    );
}

/// On the GPU each integrator traces the structure built there, which the
/// summary names with its build time: the default `bvh-binned`, a device build
/// with parameters, the wide BVH, and a CPU-built tree uploaded.
#[test]
#[ignore = "needs a CUDA GPU"]
fn cuda_builds_the_named_structure_on_the_gpu() {
    let dir = scratch("accel-cuda");
    let out = dir.join("gpu.png");
    for integrator in ["whitted", "photon", "sppm"] {
        for (accel, named) in [
            (None, "bvh-binned build"),
            (Some("lbvh:bits=63"), "lbvh:bits=63 build"),
            (Some("bvh-binned:bins=16"), "bvh-binned:bins=16 build"),
            (Some("bvh-wide"), "bvh-wide:from=bvh-binned build"),
            (Some("cpu:bvh-binned"), "cpu:bvh-binned build"),
        ] {
            let mut extra = vec!["--device", "cuda", "--integrator", integrator];
            if let Some(accel) = accel {
                extra.extend(["--accel", accel]);
            }
            let run = caustic_in(&dir, &render_args(arg(&out), &extra)).ok();
            let wrote = run.lines_starting("wrote");
            let built_on = if named.starts_with("cpu:") {
                "on the CPU"
            } else {
                "on the GPU"
            };
            assert!(
                wrote[0].contains(named) && wrote[0].contains(built_on),
                "{integrator} {accel:?}: {}",
                run.stderr
            );
        }
    }
    // `auto` takes the CPU for a structure the GPU does not build.
    let args = render_args(arg(&out), &["--integrator", "whitted", "--accel", "kdtree"]);
    let run = caustic_in(&dir, &args).ok();
    let lines = run.lines_starting("device:");
    assert!(
        lines[0].starts_with("device: CPU (auto; ") && lines[0].contains("no GPU builder"),
        "{}",
        run.stderr
    );
}

/// `bench gpu --devices` traces scenes on several GPUs: without a scene it
/// says so before touching a GPU.
#[test]
fn bench_gpu_devices_needs_scenes() {
    let run = caustic(&["bench", "gpu", "--devices", "all"]);
    if cfg!(feature = "cuda") {
        run.fails_with(1, "--devices traces scenes: name them with --scene");
    } else {
        run.fails_with(1, "caustic bench gpu needs the `cuda` feature");
    }
}

/// `bench gpu --accel` takes GPU specs only, checked before any GPU work.
#[test]
fn bench_gpu_refuses_a_structure_the_gpu_does_not_build() {
    let run = caustic(&[
        "bench",
        "gpu",
        "--log2-n",
        "0",
        "--accel",
        "ploc,grid,kdtree,brute",
    ]);
    if cfg!(feature = "cuda") {
        run.fails_with(1, "--accel brute: accel `brute` has no GPU builder");
    } else {
        run.fails_with(1, "caustic bench gpu needs the `cuda` feature");
    }
}
