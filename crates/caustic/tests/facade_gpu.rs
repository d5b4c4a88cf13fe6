//! The facade on a CUDA GPU: every test needs one and is ignored
//! elsewhere; `scripts/gpu-bundle.sh` builds them and `gpu-run.sh` runs
//! them on the GPU machine with `--include-ignored`.
//!
//! The GPU queries must equal the CPU's bit for bit (one traversal
//! contract); the GPU images must equal the CPU images up to float
//! rounding (the same keyed random numbers on both devices), checked here
//! by PSNR against the CPU render with the brightest CPU pixel as the
//! peak. Each bound sits about 15 dB under the agreement measured on an
//! NVIDIA H100 (2026-11-26): Whitted 150.2 dB, photon mapping 123.3 dB,
//! SPPM 110.3 dB; a wrong bounce or a lost light costs far more.

use caustic::{
    AccelKind, Accelerator, Device, Integrator, PassJitter, PhotonMapKind, PhotonSettings, Ray,
    Renderer, Scene, SppmSettings, WhittedSettings,
};
use caustic_render::image_io::psnr;
use std::sync::Mutex;

fn scene() -> Scene {
    caustic::load_scene("cornell-caustics").unwrap()
}

fn camera_rays(scene: &Scene, side: u32) -> Vec<Ray> {
    let pinhole = caustic::PinholeCamera::new(&scene.camera_or_default(), side, side);
    (0..side * side)
        .map(|i| pinhole.ray((i % side) as f32 + 0.5, (i / side) as f32 + 0.5))
        .collect()
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_queries_equal_the_cpu_queries() {
    let scene = scene();
    let triangles = scene.triangles();
    let rays = camera_rays(&scene, 128);
    for spec in [
        "bvh-wide",
        "bvh-binned",
        "lbvh",
        "ploc:r=8",
        "hlbvh",
        "bvh-sweep",
        "grid",
        "grid:k=2:exact=1",
        "kdtree",
        "kdtree:small=16",
    ] {
        let kind: AccelKind = spec.parse().unwrap();
        let gpu = Accelerator::build(&triangles, kind, Device::Cuda(0)).unwrap();
        let cpu = Accelerator::build(&triangles, kind, Device::Cpu).unwrap();
        assert!(gpu.is_gpu(), "{}", gpu.note());
        println!("{spec}: {}", gpu.note());
        assert_eq!(gpu.intersect(&rays).unwrap(), cpu.intersect(&rays).unwrap());
        assert_eq!(gpu.occluded(&rays).unwrap(), cpu.occluded(&rays).unwrap());
        assert!(gpu.intersect(&[]).unwrap().is_empty());
    }
    let auto = Accelerator::build(&triangles, "brute".parse().unwrap(), Device::Auto).unwrap();
    assert!(!auto.is_gpu());
    assert!(auto.note().contains("brute runs on the CPU only"));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn auto_takes_the_gpu_and_says_so() {
    let backend = Device::Auto.resolve().unwrap();
    assert!(backend.is_gpu());
    assert!(backend.note().ends_with("(auto)"), "{}", backend.note());
    println!("{}", backend.note());
}

/// Renders `integrator` on the GPU and the CPU; returns the PSNR.
fn gpu_vs_cpu(integrator: &Integrator) -> f64 {
    let scene = scene();
    let camera = scene.camera_or_default();
    let gpu = Renderer::new(&scene).device(Device::Cuda(0));
    let gpu = gpu.render(&camera, integrator).unwrap();
    let cpu = Renderer::new(&scene).device(Device::Cpu);
    let cpu = cpu.render(&camera, integrator).unwrap();
    assert_ne!(gpu.device, cpu.device);
    let peak = cpu
        .film
        .pixels
        .iter()
        .map(|p| p.max_element())
        .fold(0.0, f32::max);
    let db = psnr(&gpu.film, &cpu.film, peak as f64).unwrap();
    println!(
        "{}: GPU {} in {:.3} s, CPU {} in {:.3} s, PSNR {db:.1} dB",
        integrator.name(),
        gpu.device,
        gpu.stats.seconds(),
        cpu.device,
        cpu.stats.seconds()
    );
    db
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn whitted_on_the_gpu_matches_the_cpu() {
    let settings = WhittedSettings {
        width: 96,
        height: 96,
        spp: 4,
        ..WhittedSettings::default()
    };
    assert!(gpu_vs_cpu(&Integrator::Whitted(settings)) > 135.0);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn photon_mapping_on_the_gpu_matches_the_cpu() {
    let settings = PhotonSettings {
        width: 96,
        height: 96,
        spp: 1,
        global_photons: 20_000,
        caustic_photons: 50_000,
        gather_rays: 0,
        ..PhotonSettings::default()
    };
    assert!(gpu_vs_cpu(&Integrator::Photon(settings)) > 105.0);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn photon_settings_only_the_cpu_takes_fall_back_on_auto() {
    let scene = scene();
    let settings = Integrator::Photon(PhotonSettings {
        width: 16,
        height: 16,
        spp: 1,
        global_photons: 2_000,
        caustic_photons: 2_000,
        gather_rays: 8,
        points: Some(PhotonMapKind::KdTree),
        ..PhotonSettings::default()
    });
    let camera = scene.camera_or_default();
    let auto = Renderer::new(&scene);
    let planned = auto.backend_for(&settings).unwrap();
    let auto = auto.render(&camera, &settings).unwrap();
    assert!(
        auto.note.starts_with("device: CPU (auto; ") && auto.note.contains("--points"),
        "{}",
        auto.note
    );
    assert_eq!(planned.note(), auto.note, "said before the render as after");
    assert!(auto.device.ends_with("CPU threads"));
    let cuda = Renderer::new(&scene).device(Device::Cuda(0));
    assert!(matches!(
        cuda.render(&camera, &settings),
        Err(caustic::Error::Photon(_))
    ));
}

/// The GPU builds the structure a spec names (`cpu:SPEC` on the CPU,
/// uploaded), every one giving the same image (the same hits); on `Auto` a structure it
/// does not build sends the render to the CPU, which the note says.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_structures_by_spec_and_auto_takes_the_cpu_for_the_others() {
    let scene = scene();
    let camera = scene.camera_or_default();
    let whitted = Integrator::Whitted(WhittedSettings {
        width: 32,
        height: 32,
        spp: 1,
        ..WhittedSettings::default()
    });
    let default = Renderer::new(&scene).device(Device::Cuda(0));
    let reference = default.render(&camera, &whitted).unwrap().film;
    assert_eq!(default.gpu_accel_stats().unwrap().spec, "bvh-binned");
    for (spec, written) in [
        ("lbvh:bits=63", "lbvh:bits=63"),
        ("hlbvh", "hlbvh"),
        ("ploc", "ploc"),
        ("bvh-wide", "bvh-wide:from=bvh-binned"),
        ("cpu:bvh-binned", "cpu:bvh-binned"),
        ("grid:macro=4", "grid"),
        ("kdtree:small=64", "kdtree"),
    ] {
        let renderer = Renderer::new(&scene)
            .device(Device::Cuda(0))
            .gpu_accel_spec(spec);
        let image = renderer.render(&camera, &whitted).unwrap();
        let stats = renderer.gpu_accel_stats().unwrap();
        assert_eq!(stats.spec, written);
        assert!(stats.build_ms > 0.0, "{spec}");
        assert!(renderer.cpu_accel_stats().is_none(), "{spec}");
        let peak = reference
            .pixels
            .iter()
            .map(|p| p.max_element())
            .fold(0.0, f32::max);
        let db = psnr(&image.film, &reference, peak as f64).unwrap();
        println!("{spec}: {db:.1} dB against the default structure");
        // Trees differ only in which of two equally near triangles an
        // exact tie returns: measured identical (infinite PSNR) on an H100.
        assert!(db > 100.0, "{spec}: {db:.1} dB against the default");
    }
    let brute: AccelKind = "brute".parse().unwrap();
    let auto = Renderer::new(&scene).accel(brute).gpu_accel_spec("brute");
    let planned = auto.backend_for(&whitted).unwrap();
    let image = auto.render(&camera, &whitted).unwrap();
    assert!(
        image.note.starts_with("device: CPU (auto; ") && image.note.contains("no GPU builder"),
        "{}",
        image.note
    );
    assert_eq!(planned.note(), image.note);
    assert!(image.device.ends_with("CPU threads"));
    assert_eq!(auto.cpu_accel_stats().unwrap().name, "brute");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn sppm_on_the_gpu_matches_the_cpu_and_reports_passes() {
    let settings = SppmSettings {
        width: 64,
        height: 64,
        passes: 4,
        photons_per_pass: 20_000,
        // The draws this bound was measured with (the passes' sequence is
        // compared by caustic-render's sppm_gpu).
        jitter: PassJitter::Independent,
        ..SppmSettings::default()
    };
    assert!(gpu_vs_cpu(&Integrator::Sppm(settings.clone())) > 95.0);
    let scene = scene();
    let passes = Mutex::new(Vec::new());
    let renderer = Renderer::new(&scene)
        .device(Device::Cuda(0))
        .on_progress(|p| {
            if let caustic::Progress::Pass(pass) = p {
                let film = pass.film().unwrap();
                let stats = pass.stats().is_some();
                passes
                    .lock()
                    .unwrap()
                    .push((pass.passes(), film.width, stats));
            }
        });
    let image = renderer
        .render(&scene.camera_or_default(), &Integrator::Sppm(settings))
        .unwrap();
    drop(renderer);
    let passes = passes.into_inner().unwrap();
    assert_eq!(
        passes,
        [
            (1, 64, false),
            (2, 64, false),
            (3, 64, false),
            (4, 64, false)
        ]
    );
    assert_eq!(image.film.width, 64);
}

/// `cuda:all` splits every integrator among the machine's GPUs and renders
/// the image one GPU renders, up to the float rounding of each pixel's sum
/// (see the `render_cuda_in_team` functions). On a machine with one GPU the
/// set is that GPU, and the splits are checked by `caustic-render`'s team
/// tests (`gpu_sppm_team_renders_the_single_gpu_image`,
/// `gpu_whitted_team_renders_the_single_gpu_image`,
/// `gpu_photon_team_renders_the_single_gpu_image`) with several members on
/// one device.
#[test]
#[ignore = "needs a CUDA GPU"]
fn several_gpus_render_one_gpus_sppm_image() {
    let scene = scene();
    let camera = scene.camera_or_default();
    let sppm = Integrator::Sppm(SppmSettings {
        width: 96,
        height: 72,
        passes: 3,
        photons_per_pass: 20_011,
        ..SppmSettings::default()
    });
    let whitted = Integrator::Whitted(WhittedSettings {
        width: 96,
        height: 72,
        ..WhittedSettings::default()
    });
    let photon = Integrator::Photon(PhotonSettings {
        width: 96,
        height: 72,
        ..PhotonSettings::default()
    });
    let all: Device = "cuda:all".parse().unwrap();
    let one = Renderer::new(&scene).device(Device::Cuda(0));
    let many = Renderer::new(&scene).device(all);
    for (integrator, bound) in [(&sppm, 0.0), (&whitted, 1e-5), (&photon, 1e-5)] {
        let backend = many.backend_for(integrator).unwrap();
        eprintln!("{} ({} devices)", backend.note(), backend.device_count());
        let single = one.render(&camera, integrator).unwrap().film;
        let split = many.render(&camera, integrator).unwrap();
        let worst = single.max_relative_difference(&split.film);
        eprintln!(
            "{}: largest relative difference to one GPU: {worst:.2e}",
            integrator.name()
        );
        assert!(
            worst <= bound,
            "{}: {worst:e}: {}",
            integrator.name(),
            split.note
        );
        assert!(!split.note.contains("first GPU"), "{}", split.note);
    }
    // Dealt whole (an animation's frames): each GPU of the set alone, and
    // its render the one GPU's.
    let backend = all.resolve().unwrap();
    let lanes = backend.each_device();
    assert_eq!(lanes.len(), backend.device_count());
    let single = one.render(&camera, &whitted).unwrap().film;
    for lane in lanes {
        assert_eq!(lane.device_count(), 1, "{}", lane.note());
        assert!(lane.is_gpu());
        let dealt = Renderer::new(&scene).device(all).on_backend(lane);
        let worst = single.max_relative_difference(&dealt.render(&camera, &whitted).unwrap().film);
        assert!(worst <= 1e-5, "whitted on one GPU of the set: {worst:e}");
    }
}

/// Frames of an animation rendered from the previous frame's device scene
/// (`Renderer::follow`: only the moving sphere's triangles uploaded, the
/// structure rebuilt or refitted on the device) equal frames rendered
/// afresh, for each update policy, Whitted and photon mapping; the frame
/// update says what moved and what it sent.
#[test]
#[ignore = "needs a CUDA GPU"]
fn followed_frames_equal_fresh_frames() {
    use caustic::{FrameCarry, UpdateAction, UpdatePolicy};
    let whitted = Integrator::Whitted(WhittedSettings {
        width: 96,
        height: 96,
        spp: 2,
        ..Default::default()
    });
    let photon = Integrator::Photon(PhotonSettings {
        width: 64,
        height: 64,
        spp: 1,
        global_photons: 20_000,
        caustic_photons: 20_000,
        gather_rays: 0,
        ..Default::default()
    });
    for integrator in [&whitted, &photon] {
        for (policy, spec) in [
            (UpdatePolicy::Refit, "bvh-binned"),
            (UpdatePolicy::Rebuild, "bvh-binned"),
            (UpdatePolicy::default(), "bvh-wide"),
            (UpdatePolicy::Rebuild, "kdtree"),
        ] {
            let mut scene = caustic::load_scene("cornell-caustics-moving").unwrap();
            let clock = scene.timeline().unwrap();
            let sphere = &scene.meshes[scene.animation.as_ref().unwrap().moving_meshes()[0]];
            let moving = sphere.indices.len();
            // Triangles (48 bytes) and, where they carry normals, their
            // shading records (68 bytes).
            let per_triangle = 48 + if sphere.normals.is_empty() { 0 } else { 68 };
            let mut carry: Option<FrameCarry> = None;
            for frame in [0, 5, 10, 30] {
                scene.set_time(clock.time_of_frame(frame));
                let camera = scene.camera_or_default();
                let mut renderer = Renderer::new(&scene)
                    .device(Device::Cuda(0))
                    .gpu_accel_spec(spec)
                    .update_policy(policy);
                if let Some(c) = carry.take() {
                    renderer = renderer.follow(c);
                }
                let followed = renderer.render(&camera, integrator).unwrap();
                let update = renderer.frame_update();
                assert_eq!(update.is_some(), frame > 0, "{spec} frame {frame}");
                if let Some(u) = update {
                    assert_eq!(u.moved_triangles, moving, "{spec} frame {frame}");
                    assert_eq!(
                        u.upload_bytes,
                        moving * per_triangle,
                        "{spec} frame {frame}"
                    );
                    let refitted = u.action == UpdateAction::Refitted;
                    match policy {
                        UpdatePolicy::Refit => assert!(refitted, "{spec} {policy}"),
                        UpdatePolicy::Rebuild => assert!(!refitted, "{spec} {policy}"),
                        UpdatePolicy::Auto { .. } => {}
                    }
                    println!("{spec} {policy} frame {frame}: {u:?}");
                }
                carry = renderer.into_carry();
                assert!(carry.is_some());
                let fresh = Renderer::new(&scene)
                    .device(Device::Cuda(0))
                    .gpu_accel_spec(spec)
                    .render(&camera, integrator)
                    .unwrap();
                let peak = fresh
                    .film
                    .pixels
                    .iter()
                    .map(|p| p.max_element())
                    .fold(0.0, f32::max);
                let db = psnr(&followed.film, &fresh.film, f64::from(peak)).unwrap();
                println!(
                    "{} {spec} {policy} frame {frame}: {db:.1} dB",
                    integrator.name()
                );
                assert!(db > 100.0, "{spec} {policy} frame {frame}: {db:.1} dB");
            }
        }
    }
}
