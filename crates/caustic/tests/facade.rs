//! The facade renders exactly what the renderers it wraps render, and its
//! queries answer exactly what the structures answer: each case runs the
//! same work through `caustic` and through the underlying crates directly
//! and compares the results bit for bit.

use caustic::{
    AccelKind, Accelerator, Device, Error, Integrator, PhotonSettings, Ray, Renderer, Scene,
    SppmSettings, Vec3, WhittedSettings,
};
use caustic_render::{Film, RenderScene};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

fn scene() -> Scene {
    caustic::load_scene("cornell-caustics").expect("a built-in scene")
}

/// The direct calls use the same structure the facade builds.
fn direct_scene(scene: &Scene, kind: AccelKind) -> RenderScene {
    RenderScene::new(scene, &kind.to_string()).unwrap()
}

fn assert_same_film(a: &Film, b: &Film) {
    assert_eq!((a.width, a.height), (b.width, b.height));
    let same = a.pixels.iter().zip(&b.pixels).all(|(p, q)| {
        p.x.to_bits() == q.x.to_bits()
            && p.y.to_bits() == q.y.to_bits()
            && p.z.to_bits() == q.z.to_bits()
    });
    assert!(same, "the films differ");
    assert!(a.mean().x > 0.0, "a black image proves nothing");
}

#[test]
fn whitted_matches_the_direct_render() {
    let scene = scene();
    let camera = scene.camera_or_default();
    let settings = WhittedSettings {
        width: 24,
        height: 18,
        spp: 2,
        ..WhittedSettings::default()
    };
    let pixels = AtomicU64::new(0);
    let image = Renderer::new(&scene)
        .device(Device::Cpu)
        .on_progress(|p| {
            if let caustic::Progress::Pixels(n) = p {
                pixels.fetch_add(n, Ordering::Relaxed);
            }
        })
        .render(&camera, &Integrator::Whitted(settings.clone()))
        .unwrap();
    let direct = direct_scene(&scene, AccelKind::default());
    let (film, _) = caustic_render::whitted::render(&direct, &camera, &settings, &|_| {});
    assert_same_film(&image.film, &film);
    assert_eq!(pixels.into_inner(), 24 * 18);
    assert_eq!(image.note, "device: CPU");
}

#[test]
fn photon_mapping_matches_the_direct_render() {
    let scene = scene();
    let camera = scene.camera_or_default();
    let settings = PhotonSettings {
        width: 20,
        height: 16,
        spp: 1,
        global_photons: 4_000,
        caustic_photons: 8_000,
        gather_rays: 16,
        ..PhotonSettings::default()
    };
    let kind: AccelKind = "bvh-binned".parse().unwrap();
    let image = Renderer::new(&scene)
        .accel(kind)
        .device(Device::Cpu)
        .render(&camera, &Integrator::Photon(settings.clone()))
        .unwrap();
    let direct = direct_scene(&scene, kind);
    let (film, stats) =
        caustic_render::photon::render(&direct, &camera, &settings.render_settings(false), &|_| {})
            .unwrap();
    assert_same_film(&image.film, &film);
    let caustic::Stats::Photon(facade_stats) = &image.stats else {
        panic!("photon stats expected");
    };
    assert_eq!(facade_stats.photons_traced, stats.photons_traced);
}

#[test]
fn sppm_matches_the_direct_render_and_reports_every_pass() {
    let scene = scene();
    let camera = scene.camera_or_default();
    let settings = SppmSettings {
        width: 16,
        height: 12,
        passes: 3,
        photons_per_pass: 5_000,
        ..SppmSettings::default()
    };
    let passes = Mutex::new(Vec::new());
    let image = Renderer::new(&scene)
        .device(Device::Cpu)
        .on_progress(|p| {
            if let caustic::Progress::Pass(pass) = p {
                let film = pass.film().unwrap();
                let mut seen = passes.lock().unwrap();
                seen.push((pass.passes(), pass.total(), film, pass.stats().is_some()));
            }
        })
        .render(&camera, &Integrator::Sppm(settings.clone()))
        .unwrap();
    let direct = direct_scene(&scene, AccelKind::default());
    let (film, _) = caustic_render::sppm::render(&direct, &camera, &settings, &|_| {}).unwrap();
    assert_same_film(&image.film, &film);
    let passes = passes.into_inner().unwrap();
    let numbers: Vec<(u32, u32)> = passes.iter().map(|p| (p.0, p.1)).collect();
    assert_eq!(numbers, [(1, 3), (2, 3), (3, 3)]);
    assert_same_film(&passes[2].2, &film);
    assert!(passes.iter().all(|p| p.3), "the CPU keeps stats as it goes");
}

#[test]
fn one_renderer_renders_many_frames() {
    let scene = caustic::load_scene("cornell-box").unwrap();
    let renderer = Renderer::new(&scene).device(Device::Cpu);
    let triangles = renderer.prepare().unwrap().triangles.len();
    assert_eq!(triangles, scene.triangle_count());
    let settings = Integrator::Whitted(WhittedSettings {
        width: 8,
        height: 8,
        spp: 1,
        ..WhittedSettings::default()
    });
    let camera = scene.camera_or_default();
    let first = renderer.render(&camera, &settings).unwrap();
    let second = renderer.render(&camera, &settings).unwrap();
    assert_eq!(first.film, second.film);
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    let scene = caustic::load_scene("cornell-box").unwrap();
    let renderer = Renderer::new(&scene).device(Device::Cpu);
    let mut camera = scene.camera_or_default();
    let ok = Integrator::Whitted(WhittedSettings {
        width: 4,
        height: 4,
        ..WhittedSettings::default()
    });
    let zero = Integrator::Whitted(WhittedSettings {
        width: 0,
        ..WhittedSettings::default()
    });
    let message = renderer.render(&camera, &zero).unwrap_err().to_string();
    assert!(message.contains("image size 0x512"), "{message}");
    let no_spp = Integrator::Whitted(WhittedSettings {
        width: 4,
        height: 4,
        spp: 0,
        ..WhittedSettings::default()
    });
    assert!(matches!(
        renderer.render(&camera, &no_spp),
        Err(Error::Settings { .. })
    ));
    let no_photons = Integrator::Photon(PhotonSettings {
        width: 4,
        height: 4,
        k: 0,
        ..PhotonSettings::default()
    });
    assert!(matches!(
        renderer.render(&camera, &no_photons),
        Err(Error::Photon(_))
    ));
    let no_passes = Integrator::Sppm(SppmSettings {
        width: 4,
        height: 4,
        passes: 0,
        ..SppmSettings::default()
    });
    assert!(matches!(
        renderer.render(&camera, &no_passes),
        Err(Error::Sppm(_))
    ));
    camera.target = camera.eye;
    assert!(matches!(
        renderer.render(&camera, &ok),
        Err(Error::Camera(_))
    ));
    let bad_accel = AccelKind::Ploc(caustic::accel::Ploc {
        radius: 0,
        ..Default::default()
    });
    let err = Renderer::new(&scene)
        .accel(bad_accel)
        .device(Device::Cpu)
        .render(&scene.camera_or_default(), &ok)
        .unwrap_err();
    assert!(matches!(err, Error::AccelSpec(_)), "{err}");
}

#[test]
fn queries_match_the_structure_and_brute_force() {
    let scene = scene();
    let triangles = scene.triangles();
    let camera = scene.camera_or_default();
    let pinhole = caustic::PinholeCamera::new(&camera, 32, 32);
    let mut rays: Vec<Ray> = (0..32 * 32)
        .map(|i| pinhole.ray((i % 32) as f32 + 0.5, (i / 32) as f32 + 0.5))
        .collect();
    rays.push(Ray::new(Vec3::splat(f32::NAN), Vec3::X));
    rays.push(Ray::new(Vec3::ZERO, Vec3::ZERO));
    let brute = caustic_accel::BruteForce::new(&triangles);
    for spec in ["bvh-wide", "ploc:r=8", "kdtree", "grid", "brute"] {
        let kind: AccelKind = spec.parse().unwrap();
        let accel = Accelerator::build(&triangles, kind, Device::Auto).unwrap();
        assert!(!accel.note().contains('\n'));
        let hits = accel.intersect(&rays).unwrap();
        let occluded = accel.occluded(&rays).unwrap();
        for (i, ray) in rays.iter().enumerate() {
            use caustic_accel::Accel;
            assert_eq!(hits[i], brute.intersect(ray), "{spec}, ray {i}");
            assert_eq!(occluded[i], hits[i].is_some(), "{spec}, ray {i}");
        }
        // A GPU builds its own version of each structure that has one
        // (all but brute force) under the same name; brute force stays on
        // the CPU.
        assert_eq!(
            accel.is_gpu(),
            kind.runs_on_gpu() && Device::Auto.resolve().unwrap().is_gpu()
        );
        assert_eq!(accel.stats().name, kind.name());
        assert_eq!(accel.stats().prims, triangles.len());
        assert!(accel.intersect(&[]).unwrap().is_empty());
    }
}

/// Without a GPU (these machines, CI), asking for one is a clear error.
#[test]
fn cuda_without_a_gpu_is_an_error() {
    if Device::Auto.resolve().unwrap().is_gpu() {
        return;
    }
    let triangles = scene().triangles();
    let err = Accelerator::build(&triangles, AccelKind::default(), Device::Cuda(0))
        .err()
        .expect("no GPU here");
    assert!(!err.to_string().is_empty());
    let err = Accelerator::build(&triangles, "brute".parse().unwrap(), Device::Cuda(0))
        .err()
        .expect("brute force has no GPU version");
    assert!(
        err.to_string().contains("brute runs on the CPU only"),
        "{err}"
    );
}

/// A structure the GPU does not build keeps a render off the GPU: `Cuda`
/// is an error that lists what the GPU builds, given before any device
/// opens (so it is the same here, without a GPU); the CPU renders it.
#[cfg(feature = "cuda")]
#[test]
fn a_structure_the_gpu_does_not_build_is_refused_on_cuda_before_the_device() {
    let scene = scene();
    let whitted = Integrator::Whitted(WhittedSettings {
        width: 8,
        height: 8,
        spp: 1,
        ..WhittedSettings::default()
    });
    let grid: AccelKind = "grid".parse().unwrap();
    let brute: AccelKind = "brute".parse().unwrap();
    let refused = [
        Renderer::new(&scene).accel(brute),
        Renderer::new(&scene).gpu_accel_spec("brute"),
        Renderer::new(&scene).accel(grid).gpu_accel_spec("brute"),
    ];
    for renderer in refused {
        let renderer = renderer.device(Device::Cuda(0));
        let err = renderer.backend_for(&whitted).unwrap_err();
        let message = err.to_string();
        assert!(matches!(err, Error::AccelSpec(_)), "{message}");
        assert!(
            message.contains("no GPU builder")
                && message.contains("lbvh, hlbvh, ploc")
                && message.contains("kdtree, grid")
                && message.contains("cpu:SPEC"),
            "{message}"
        );
        let camera = scene.camera_or_default();
        assert!(matches!(
            renderer.render(&camera, &whitted),
            Err(Error::AccelSpec(_))
        ));
    }
    // A typed parameter out of range is the registry's error on the GPU
    // too, not a panic.
    let bad_ploc = AccelKind::Ploc(caustic::accel::Ploc {
        radius: 0,
        ..Default::default()
    });
    let cuda = Renderer::new(&scene)
        .accel(bad_ploc)
        .device(Device::Cuda(0));
    let err = cuda.backend_for(&whitted).unwrap_err();
    assert!(matches!(err, Error::AccelSpec(_)), "{err}");
    // On the CPU the GPU's structure is not asked for.
    let cpu = Renderer::new(&scene)
        .accel(grid)
        .gpu_accel_spec("grid")
        .device(Device::Cpu);
    let image = cpu.render(&scene.camera_or_default(), &whitted).unwrap();
    assert_eq!(image.note, "device: CPU");
    assert_eq!(cpu.cpu_accel_stats().unwrap().name, "grid");
    assert!(cpu.gpu_accel_stats().is_none());
}

/// The CPU structure's stats, after a CPU render: what a summary names.
#[test]
fn cpu_accel_stats_name_the_structure_the_render_traced() {
    let scene = scene();
    let kind: AccelKind = "bvh-binned".parse().unwrap();
    let renderer = Renderer::new(&scene).accel(kind).device(Device::Cpu);
    assert!(renderer.cpu_accel_stats().is_none(), "nothing built yet");
    let whitted = Integrator::Whitted(WhittedSettings {
        width: 8,
        height: 8,
        spp: 1,
        ..WhittedSettings::default()
    });
    renderer
        .render(&scene.camera_or_default(), &whitted)
        .unwrap();
    let stats = renderer.cpu_accel_stats().unwrap();
    assert_eq!(stats.name, "bvh-binned");
    assert_eq!(stats.prims, scene.triangles().len());
}

/// Both builds, with and without `cuda`, give the same auto traits, so a
/// feature cannot take `Send` or `Sync` away from a user's type.
#[test]
fn facade_types_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Accelerator>();
    send_sync::<Renderer<'static>>();
    send_sync::<caustic::Backend>();
    send_sync::<caustic::Rendered>();
    send_sync::<Error>();
}
