//! `caustic render` with each integrator, the device line and `-q`.

use crate::common::{arg, caustic_in, mean, png_size, scratch};

#[test]
fn whitted_renders_a_png_of_the_size_asked() {
    let dir = scratch("whitted");
    let out = dir.join("cb.png");
    let run = caustic_in(
        &dir,
        &[
            "render",
            "cornell-box",
            "--integrator",
            "whitted",
            "--width",
            "24",
            "--height",
            "16",
            "--spp",
            "1",
            "-o",
            arg(&out),
        ],
    )
    .ok();
    assert_eq!(png_size(&out), (24, 16));
    assert!(run.stderr.contains("wrote"), "{}", run.stderr);
    assert!(
        run.stderr
            .contains("24x16, 1 spp, 36 triangles, bvh-wide build")
    );
}

#[test]
fn photon_mapping_renders_an_exr_with_caustics_and_indirect_light() {
    let dir = scratch("photon");
    let out = dir.join("pm.exr");
    let run = caustic_in(
        &dir,
        &[
            "render",
            "cornell-caustics",
            "--integrator",
            "photon",
            "--width",
            "16",
            "--height",
            "16",
            "--spp",
            "1",
            "--photons",
            "2000",
            "--caustic-photons",
            "2000",
            "--gather-rays",
            "8",
            "-o",
            arg(&out),
        ],
    )
    .ok();
    // Equal counts: one photon pass fills both maps.
    assert!(
        run.stderr.contains("photon: 2000 photons traced"),
        "{}",
        run.stderr
    );
    let [r, g, b] = mean(&out);
    assert!(r > 0.01 && g > 0.01 && b > 0.01, "a lit image: {r} {g} {b}");
}

#[test]
fn sppm_renders_the_passes_asked() {
    let dir = scratch("sppm");
    let out = dir.join("sppm.exr");
    let run = caustic_in(
        &dir,
        &[
            "render",
            "cornell-box",
            "--integrator",
            "sppm",
            "--width",
            "12",
            "--height",
            "12",
            "--passes",
            "2",
            "--photons-per-pass",
            "2000",
            "-o",
            arg(&out),
        ],
    )
    .ok();
    assert!(
        run.stderr
            .contains("12x12, sppm: 2 passes x 2000 photons, 36 triangles"),
        "{}",
        run.stderr
    );
    assert!(mean(&out)[0] > 0.01);
}

/// `--jitter` reaches the renderer: the passes' sequence and independent
/// draws place the primary rays apart, so the images differ.
#[test]
fn sppm_jitter_flag_picks_the_primary_rays() {
    let dir = scratch("sppm-jitter");
    let render = |jitter: &str| {
        let out = dir.join(format!("{jitter}.exr"));
        caustic_in(
            &dir,
            &[
                "render",
                "cornell-box",
                "--integrator",
                "sppm",
                "--device",
                "cpu",
                "--width",
                "12",
                "--height",
                "12",
                "--passes",
                "2",
                "--photons-per-pass",
                "2000",
                "--jitter",
                jitter,
                "-o",
                arg(&out),
            ],
        )
        .ok();
        assert!(mean(&out)[0] > 0.01, "{jitter}: a black image");
        std::fs::read(&out).expect("the image was written")
    };
    assert_ne!(render("sequence"), render("independent"));
}

/// A bare `render` draws cornell-caustics by photon mapping to
/// `cornell-caustics.png` (here smaller, to stay quick).
#[test]
fn the_default_render_is_photon_mapped_caustics() {
    let dir = scratch("default");
    let run = caustic_in(&dir, &["render", "--width", "16", "--height", "16"]).ok();
    assert!(run.stderr.contains("photon: "), "{}", run.stderr);
    assert_eq!(png_size(&dir.join("cornell-caustics.png")), (16, 16));
}

/// `--device auto` says on one line which device it took (the CPU here,
/// with the reason); `-q` silences that line and the notes, not the
/// summary.
#[test]
fn auto_device_says_which_once_and_quiet_says_nothing() {
    let dir = scratch("auto");
    let base = [
        "render",
        "cornell-box",
        "--width",
        "8",
        "--height",
        "8",
        "--spp",
        "1",
        "--photons",
        "1000",
        "--caustic-photons",
        "1000",
        "--gather-rays",
        "4",
        "--device",
        "auto",
    ];
    for integrator in ["whitted", "photon", "sppm"] {
        let mut args = base.to_vec();
        args.extend(["--integrator", integrator, "--passes", "1"]);
        let run = caustic_in(&dir, &args).ok();
        let lines = run.lines_starting("device:");
        assert_eq!(lines.len(), 1, "{integrator}: {}", run.stderr);
        if lines[0].starts_with("device: CPU") {
            assert!(lines[0].contains("auto; CUDA unavailable"), "{}", lines[0]);
        }
        args.push("-q");
        let quiet = caustic_in(&dir, &args).ok();
        assert!(
            quiet.lines_starting("device:").is_empty(),
            "{}",
            quiet.stderr
        );
        assert!(quiet.lines_starting("note:").is_empty(), "{}", quiet.stderr);
        assert!(quiet.lines_starting("wrote").len() == 1, "{}", quiet.stderr);
    }
}

/// `--device cuda` where no GPU opens (or in a build without the `cuda`
/// feature): a clear error and exit code 1, never the CPU in its place.
#[test]
fn explicit_cuda_without_a_gpu_is_an_error() {
    const NO_CUDA: &str = if cfg!(feature = "cuda") {
        "error: no CUDA driver"
    } else {
        "built without CUDA support; rebuild with the default `cuda` feature"
    };
    let dir = scratch("cuda");
    let auto = caustic_in(
        &dir,
        &[
            "render",
            "cornell-box",
            "--width",
            "4",
            "--height",
            "4",
            "--spp",
            "1",
            "--integrator",
            "whitted",
        ],
    )
    .ok();
    if !auto.stderr.contains("device: CPU (auto; CUDA unavailable") {
        eprintln!("a GPU is present: nothing to check here");
        return;
    }
    for integrator in ["whitted", "photon", "sppm"] {
        let run = caustic_in(
            &dir,
            &[
                "render",
                "cornell-box",
                "--width",
                "4",
                "--height",
                "4",
                "--integrator",
                integrator,
                "--device",
                "cuda",
                "-o",
                "x.png",
            ],
        );
        run.fails_with(1, NO_CUDA);
        assert!(!dir.join("x.png").exists());
    }
}
