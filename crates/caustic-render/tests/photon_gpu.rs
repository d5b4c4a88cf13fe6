//! The GPU photon mapper against the CPU one. Photon `i` draws from the
//! same random stream on both, so the maps must hold the same photons (up
//! to the rare path a float rounding flips), and the GPU frame must equal
//! the CPU photon renderer's (global-map mode) up to those photons; against
//! the Mitsuba references (when present) both must have the same error.
//! Needs a CUDA GPU.

mod common;

use caustic_accel::points::build_point_structure;
use caustic_geom::Vec3;
use caustic_render::photon::irradiance_samples::{self, ShadingPoint};
use caustic_render::photon::render_cuda::{self, GpuPhotonRenderer};
use caustic_render::photon::{
    GlobalRule, Photon, PhotonRenderSettings, PhotonRenderStats, PhotonSettings, PhotonSources,
    render, trace_caustic_photons, trace_cuda, trace_photons,
};
use caustic_render::whitted::render_cuda::GpuScene;
use caustic_render::{Film, RenderScene, image_io};
use caustic_scene::Scene;
use caustic_scene::data_dirs::ref_file;
use common::{Agreement, display_byte_differences, min_psnr};

fn gpu() -> caustic_gpu::Gpu {
    caustic_gpu::Gpu::probe().expect("a CUDA GPU")
}

/// Photons of `gpu` that have a twin in `cpu`: a photon within 10^-5 of
/// the scene size with the same power (relative 10^-4) and directions
/// (octahedral codes within 2 steps). Float rounding (FMA contraction in
/// the hit point, sin/cos/pow) keeps GPU photons from being the CPU's bit
/// for bit, but not from being the same photon.
fn matched_photons(cpu: &[Photon], gpu: &[Photon]) -> usize {
    let positions: Vec<_> = cpu.iter().map(Photon::position).collect();
    let tolerance = 1e-5 * 5.0; // the Cornell box is about 5 units across
    let grid = build_point_structure("hashgrid", &positions, tolerance).unwrap();
    let close_code = |a: u32, b: u32| {
        let d = |s: u32| ((a >> s) & 0xffff).abs_diff((b >> s) & 0xffff);
        d(0) <= 2 && d(16) <= 2
    };
    let twins = |g: &Photon, c: &Photon| {
        let (pg, pc) = (g.power(), c.power());
        (pg - pc).abs().max_element() <= 1e-4 * pc.max_element()
            && close_code(g.incoming, c.incoming)
            && close_code(g.normal, c.normal)
    };
    let mut scratch = Vec::new();
    gpu.iter()
        .filter(|g| {
            grid.knn(g.position(), 4, tolerance, &mut scratch);
            scratch.iter().any(|n| twins(g, &cpu[n.index as usize]))
        })
        .count()
}

fn total_power(photons: &[Photon]) -> [f64; 3] {
    photons.iter().fold([0.0; 3], |s, p| {
        let w = p.power();
        [s[0] + w.x as f64, s[1] + w.y as f64, s[2] + w.z as f64]
    })
}

fn check_map(name: &str, cpu: &[Photon], gpu: &[Photon]) {
    let shared = matched_photons(cpu, gpu);
    let larger = cpu.len().max(gpu.len());
    let (pc, pg) = (total_power(cpu), total_power(gpu));
    eprintln!(
        "{name}: CPU {} photons, GPU {}, {shared} with a CPU twin ({:.3} %); power CPU {pc:?} GPU {pg:?}",
        cpu.len(),
        gpu.len(),
        100.0 * shared as f64 / larger.max(1) as f64
    );
    assert!(larger > 1000, "{name}: too few photons to compare");
    assert!(
        shared as f64 >= 0.99 * larger as f64,
        "{name}: only {shared} of {larger} photons have a CPU twin"
    );
    for c in 0..3 {
        let relative = (pc[c] - pg[c]).abs() / pc[c].max(1e-30);
        assert!(relative < 0.005, "{name}: power {pc:?} vs {pg:?}");
    }
}

/// Full passes under every global rule, and a caustic-only pass.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_photon_maps_hold_the_cpu_photons() {
    let gpu = gpu();
    let scene = Scene::builtin("cornell-caustics").unwrap();
    let rs = RenderScene::new(&scene, "bvh-binned").unwrap();
    let device = GpuScene::upload(&gpu, &rs).unwrap();
    let sources = PhotonSources::new(&rs);
    for rule in [
        GlobalRule::AfterFirstBounce,
        GlobalRule::IndirectOnly,
        GlobalRule::All,
    ] {
        let settings = PhotonSettings {
            photons: 300_000,
            global_rule: rule,
            seed: 7,
            ..Default::default()
        };
        let cpu = trace_photons(&rs, &settings);
        let maps = trace_cuda::trace_photons(&device, &sources, &settings).unwrap();
        let on_gpu = maps.download(sources.total_power()).unwrap();
        check_map(&format!("{rule:?} global"), &cpu.global, &on_gpu.global);
        check_map(&format!("{rule:?} caustic"), &cpu.caustic, &on_gpu.caustic);
        let rays = (cpu.stats.rays as f64 - maps.stats.rays as f64).abs();
        assert!(
            rays < 0.01 * cpu.stats.rays as f64,
            "rays {} vs {}",
            cpu.stats.rays,
            maps.stats.rays
        );
    }
    let settings = PhotonSettings {
        photons: 1_000_000,
        seed: 3,
        ..Default::default()
    };
    let cpu = trace_caustic_photons(&rs, &settings);
    let on_gpu = trace_cuda::trace_caustic_photons(&device, &sources, &settings)
        .unwrap()
        .download(sources.total_power())
        .unwrap();
    assert!(on_gpu.global.is_empty());
    check_map("caustic-only pass", &cpu.caustic, &on_gpu.caustic);
}

fn global_map_settings(width: u32, height: u32, spp: u32) -> PhotonRenderSettings {
    PhotonRenderSettings {
        width,
        height,
        spp,
        gather_rays: 0,
        global_photons: 200_000,
        caustic_photons: 400_000,
        points: "hashgrid".to_owned(),
        ..Default::default()
    }
}

/// The GPU frame against the CPU photon renderer with the same settings.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_photon_frame_equals_cpu_frame() {
    let gpu = gpu();
    let scene = Scene::builtin("cornell-caustics").unwrap();
    let camera = scene.camera.unwrap();
    let rs = RenderScene::new(&scene, "bvh-binned").unwrap();
    let settings = global_map_settings(192, 192, 4);
    let (cpu, cpu_stats) = render(&rs, &camera, &settings, &|_| {}).unwrap();
    let (on_gpu, gpu_stats) = render_cuda::render(&gpu, &rs, &camera, &settings).unwrap();
    let agreement = Agreement::measure(&cpu, &on_gpu);
    eprintln!(
        "cornell-caustics 192x192: {agreement}; means CPU {} GPU {}; stored CPU {}/{} GPU {}/{}",
        cpu.mean(),
        on_gpu.mean(),
        cpu_stats.global_stored,
        cpu_stats.caustic_stored,
        gpu_stats.global_stored,
        gpu_stats.caustic_stored
    );
    assert!(
        agreement.psnr >= min_psnr::PHOTON_FRAME,
        "GPU frame differs: {agreement}"
    );
    let relative = ((cpu.mean() - on_gpu.mean()) / cpu.mean())
        .abs()
        .max_element();
    assert!(
        relative < 0.002,
        "means {} vs {}",
        cpu.mean(),
        on_gpu.mean()
    );
}

/// The final gather at every shading point (irradiance samples off, gather
/// rays reading irradiance precomputed at every 4th global photon): the
/// GPU frame against the CPU's.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_final_gather_frame_equals_cpu_frame() {
    use caustic_render::photon::irradiance_samples::SampleSettings;
    let gpu = gpu();
    let scene = Scene::builtin("cornell-caustics").unwrap();
    let camera = scene.camera.unwrap();
    let rs = RenderScene::new(&scene, "bvh-binned").unwrap();
    let settings = PhotonRenderSettings {
        gather_rays: 16,
        samples: SampleSettings {
            spacing: 0.0,
            ..Default::default()
        },
        ..global_map_settings(128, 128, 2)
    };
    let (cpu, cpu_stats) = render(&rs, &camera, &settings, &|_| {}).unwrap();
    let (on_gpu, gpu_stats) = render_cuda::render(&gpu, &rs, &camera, &settings).unwrap();
    let agreement = Agreement::measure(&cpu, &on_gpu);
    eprintln!(
        "final gather 128x128: {agreement}; means CPU {} GPU {}; gathers CPU {} GPU {}, precomputed CPU {} GPU {}",
        cpu.mean(),
        on_gpu.mean(),
        cpu_stats.point_gathers,
        gpu_stats.point_gathers,
        cpu_stats.precomputed,
        gpu_stats.precomputed
    );
    // A float rounding can flip a rare eye path's Russian roulette.
    let gathers = cpu_stats.point_gathers.abs_diff(gpu_stats.point_gathers);
    assert!(
        gathers * 1000 <= cpu_stats.point_gathers,
        "gathers {gathers} apart"
    );
    assert_eq!(cpu_stats.precomputed, gpu_stats.precomputed);
    assert!(
        agreement.psnr >= min_psnr::FINAL_GATHER,
        "GPU final gather differs: {agreement}"
    );
    let relative = ((cpu.mean() - on_gpu.mean()) / cpu.mean())
        .abs()
        .max_element();
    assert!(
        relative < 0.002,
        "means {} vs {}",
        cpu.mean(),
        on_gpu.mean()
    );
}

/// Shading points for the seeding comparison: a `width`×`height` image of
/// a wavy surface, with a second point (a "glass branch") in every third
/// pixel, normals from the surface's slope.
fn wavy_points(width: u32, height: u32) -> Vec<ShadingPoint> {
    let mut points = Vec::new();
    for y in 0..height {
        for x in 0..width {
            let (fx, fy) = (x as f32, y as f32);
            let z = 0.05 * (fx / 7.0).sin() * (fy / 5.0).cos();
            let dzdx = 0.05 / 7.0 * (fx / 7.0).cos() * (fy / 5.0).cos() / 0.01;
            let dzdy = -0.05 / 5.0 * (fx / 7.0).sin() * (fy / 5.0).sin() / 0.01;
            points.push(ShadingPoint {
                pixel: (x, y),
                position: Vec3::new(fx * 0.01, fy * 0.01, z),
                normal: Vec3::new(-dzdx, -dzdy, 1.0).normalize(),
            });
            if (x + y) % 3 == 0 {
                points.push(ShadingPoint {
                    pixel: (x, y),
                    position: Vec3::new(0.3 + fy * 0.002, 0.5, fx * 0.003),
                    normal: Vec3::Y,
                });
            }
        }
    }
    points
}

/// The GPU's samples for `points`, sorted.
fn gpu_seed(
    gpu: &caustic_gpu::Gpu,
    points: &[ShadingPoint],
    count: usize,
    alpha: f32,
    seed: u64,
) -> Vec<usize> {
    use caustic_gpu::DeviceBuffer;
    use caustic_render::photon::irradiance_samples_cuda::{SeedPoints, SeedSettings};
    let positions: Vec<[f32; 3]> = points.iter().map(|p| p.position.to_array()).collect();
    let normals: Vec<[f32; 3]> = points.iter().map(|p| p.normal.to_array()).collect();
    let pixels: Vec<u32> = points
        .iter()
        .map(|p| p.pixel.0 | (p.pixel.1 << 16))
        .collect();
    let (mut lo, mut hi) = ([f32::INFINITY; 3], [f32::NEG_INFINITY; 3]);
    for p in &positions {
        for a in 0..3 {
            lo[a] = lo[a].min(p[a]);
            hi[a] = hi[a].max(p[a]);
        }
    }
    let positions = DeviceBuffer::from_slice(gpu, "positions", &positions).unwrap();
    let normals = DeviceBuffer::from_slice(gpu, "normals", &normals).unwrap();
    let pixels = DeviceBuffer::from_slice(gpu, "pixels", &pixels).unwrap();
    let settings = SeedSettings {
        count,
        alpha,
        seed,
        bounds: (lo, hi),
    };
    let seed_points = SeedPoints {
        positions: &positions,
        normals: &normals,
        pixels: &pixels,
    };
    let chosen =
        caustic_render::photon::irradiance_samples_cuda::seed(&seed_points, &settings).unwrap();
    let mut chosen: Vec<usize> = chosen
        .download()
        .unwrap()
        .into_iter()
        .map(|i| i as usize)
        .collect();
    chosen.sort_unstable();
    chosen
}

/// The GPU's level-by-level seeding chooses the CPU recursion's samples: the
/// same budget per quadtree node from the same error metric, the same
/// jittered picks. Its sums are exact where the CPU's are `f32`, so where
/// two children's shares tie exactly (symmetric images: the flat and the
/// creased plane) the CPU's rounding, not the data, picks the child that
/// gets the odd sample: there the GPU must keep the CPU's properties (equal
/// shares on a flat image, creases attract samples); on the wavy surface,
/// with no such ties, the two must share at least 97 % of their samples.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_seeding_chooses_the_cpu_samples() {
    let gpu = gpu();
    let flat: Vec<ShadingPoint> = (0..64u32)
        .flat_map(|y| (0..64u32).map(move |x| (x, y)))
        .map(|(x, y)| ShadingPoint {
            pixel: (x, y),
            position: Vec3::new(x as f32, y as f32, 0.0) * 0.01,
            normal: Vec3::Z,
        })
        .collect();
    let mut crease = flat.clone();
    for p in crease.iter_mut().filter(|p| p.pixel.0 >= 37) {
        p.normal = Vec3::X;
    }
    let wavy = wavy_points(96, 80);
    // (name, points, samples, alpha, seed, free of exact ties)
    type Case<'a> = (&'a str, &'a [ShadingPoint], usize, f32, u64, bool);
    let cases: [Case; 5] = [
        ("flat", &flat, 256, 10.0, 7, false),
        ("crease", &crease, 128, 1.0, 1, false),
        ("wavy", &wavy, 480, 10.0, 3, true),
        ("wavy, dense", &wavy, 4000, 30.0, 4, true),
        (
            "wavy, more samples than points",
            &wavy[..300],
            400,
            10.0,
            5,
            true,
        ),
    ];
    let mut failures = Vec::new();
    for (name, points, count, alpha, seed, untied) in cases {
        let cpu = irradiance_samples::seed(points, count, alpha, seed);
        let on_gpu = gpu_seed(&gpu, points, count, alpha, seed);
        let shared = cpu
            .iter()
            .filter(|i| on_gpu.binary_search(i).is_ok())
            .count();
        eprintln!(
            "{name}: {} points, CPU {} samples, GPU {}, shared {shared}",
            points.len(),
            cpu.len(),
            on_gpu.len()
        );
        if cpu.len() != on_gpu.len() || (untied && shared * 100 < cpu.len() * 97) {
            failures.push(format!(
                "{name}: {shared} of {} / {} shared",
                cpu.len(),
                on_gpu.len()
            ));
        }
        if on_gpu.windows(2).any(|w| w[0] == w[1]) {
            failures.push(format!("{name}: a point chosen twice"));
        }
    }
    assert!(failures.is_empty(), "{failures:?}");
    // Every 8x8 block of a flat image gets its share, as on the CPU.
    let chosen = gpu_seed(&gpu, &flat, 256, 10.0, 7);
    let mut per_block = [0u32; 64];
    for &i in &chosen {
        let (x, y) = flat[i].pixel;
        per_block[(y / 8 * 8 + x / 8) as usize] += 1;
    }
    assert!(per_block.iter().all(|&n| n == 4), "{per_block:?}");
    // The crease (columns 36 | 37) draws more than the eighth of the
    // samples that columns 32..40 would get on a flat image.
    let chosen = gpu_seed(&gpu, &crease, 128, 1.0, 1);
    let near = chosen
        .iter()
        .filter(|&&i| (32..40).contains(&crease[i].pixel.0))
        .count();
    assert!(near * 8 > chosen.len() * 2, "{near} of {}", chosen.len());
}

/// The final gather between irradiance samples (the CLI's default, spacing
/// 4): the GPU seeds from its frame's own shading points where the CPU
/// seeds from the pixel centres, so the samples differ and the images
/// agree up to the gather's noise and the interpolation: image means
/// within 1 %, 8×8 block means within 4 % of the mean (RMS), and both
/// close to the GPU's gather at every point.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_irradiance_samples_frame_matches_cpu() {
    use caustic_render::photon::irradiance_samples::SampleSettings;
    let gpu = gpu();
    let scene = Scene::builtin("cornell-caustics").unwrap();
    let camera = scene.camera.unwrap();
    let rs = RenderScene::new(&scene, "bvh-binned").unwrap();
    let settings = PhotonRenderSettings {
        gather_rays: 64,
        ..global_map_settings(128, 128, 2)
    };
    assert!(settings.samples.spacing > 0.0, "the default places samples");
    let everywhere = PhotonRenderSettings {
        samples: SampleSettings {
            spacing: 0.0,
            ..settings.samples
        },
        ..settings.clone()
    };
    let (cpu, cpu_stats) = render(&rs, &camera, &settings, &|_| {}).unwrap();
    let (on_gpu, gpu_stats) = render_cuda::render(&gpu, &rs, &camera, &settings).unwrap();
    let (all_points, all_stats) = render_cuda::render(&gpu, &rs, &camera, &everywhere).unwrap();
    let mean = on_gpu.mean().element_sum() / 3.0;
    let blocks = |a: &Film, b: &Film| {
        let down = |f| image_io::downsample(f, 8);
        image_io::rmse(&down(a), &down(b)).unwrap() / f64::from(mean)
    };
    let (to_cpu, to_points) = (blocks(&cpu, &on_gpu), blocks(&all_points, &on_gpu));
    eprintln!(
        "irradiance samples 128x128: means CPU {} GPU {} (every point {}); block RMSE / mean: to CPU {to_cpu:.4}, to every point {to_points:.4}; samples CPU {} GPU {}, point gathers CPU {} GPU {} (every point {})",
        cpu.mean(),
        on_gpu.mean(),
        all_points.mean(),
        cpu_stats.samples,
        gpu_stats.samples,
        cpu_stats.point_gathers,
        gpu_stats.point_gathers,
        all_stats.point_gathers,
    );
    let budget = (128 * 128usize).div_ceil(16);
    assert!(gpu_stats.samples <= budget && gpu_stats.samples * 10 >= budget * 9);
    assert!(
        gpu_stats.point_gathers * 2 < all_stats.point_gathers,
        "the samples cover too few points"
    );
    for (other, name) in [(&cpu, "CPU"), (&all_points, "every point")] {
        let relative = ((other.mean() - on_gpu.mean()) / other.mean())
            .abs()
            .max_element();
        assert!(
            relative < 0.01,
            "{name}: means {} vs {}",
            other.mean(),
            on_gpu.mean()
        );
    }
    assert!(
        to_cpu < 0.04 && to_points < 0.04,
        "block RMSE {to_cpu} / {to_points}"
    );
}

/// The GPU path's setting errors: clear, before any work.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_photon_renderer_rejects_what_it_cannot_do() {
    let gpu = gpu();
    let scene = Scene::builtin("cornell-box").unwrap();
    let camera = scene.camera.unwrap();
    let rs = RenderScene::new(&scene, "bvh-binned").unwrap();
    let renderer = GpuPhotonRenderer::new(&gpu, &rs).unwrap();
    let mut samples = global_map_settings(16, 16, 1);
    samples.gather_rays = 16;
    samples.precompute = 0;
    let err = renderer
        .render(&camera, &samples)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("precompute"), "{err}");
    let mut kdtree = global_map_settings(16, 16, 1);
    kdtree.points = "kdtree".to_owned();
    let err = renderer.render(&camera, &kdtree).err().unwrap().to_string();
    assert!(err.contains("hashgrid"), "{err}");
    let mut big_k = global_map_settings(16, 16, 1);
    big_k.k = 500;
    assert!(renderer.render(&camera, &big_k).is_err());
}

/// A scene without lights: no photons, empty maps, a black image, no error.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_photon_frame_of_an_unlit_scene_is_black() {
    let gpu = gpu();
    let mut scene = Scene::builtin("cornell-box").unwrap();
    scene.lights.clear();
    for m in &mut scene.materials {
        m.emission = caustic_geom::Rgb::ZERO;
    }
    let camera = scene.camera.unwrap();
    let rs = RenderScene::new(&scene, "bvh-binned").unwrap();
    let settings = global_map_settings(32, 32, 1);
    let (film, stats) = render_cuda::render(&gpu, &rs, &camera, &settings).unwrap();
    assert_eq!((stats.global_stored, stats.caustic_stored), (0, 0));
    assert!(film.pixels.iter().all(|p| p.max_element() == 0.0));
}

/// The owned renderer traces its photons on a second stream beside the
/// eye waves; one on a borrowed upload traces them first, on the frame's
/// stream. Same photons, same maps: the frames are the same up to the
/// order of the framebuffer's atomic additions, with the same counts, with
/// and without the final gather (at every point, at irradiance samples).
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_photon_frame_beside_the_eye_waves_equals_the_frame_after_them() {
    use caustic_render::photon::irradiance_samples::SampleSettings;
    let gpu = gpu();
    let scene = Scene::builtin("cornell-caustics").unwrap();
    let camera = scene.camera.unwrap();
    let rs = RenderScene::new(&scene, "bvh-binned").unwrap();
    let overlapped = GpuPhotonRenderer::new(&gpu, &rs).unwrap();
    let uploaded = GpuScene::upload(&gpu, &rs).unwrap();
    let sequential = GpuPhotonRenderer::on(&uploaded, &rs);
    for (gather_rays, spacing) in [(0, 0.0), (16, 0.0), (16, 4.0)] {
        let settings = PhotonRenderSettings {
            gather_rays,
            samples: SampleSettings {
                spacing,
                ..Default::default()
            },
            ..global_map_settings(96, 64, 2)
        };
        let (beside, beside_stats) = overlapped.render(&camera, &settings).unwrap();
        let (after, after_stats) = sequential.render(&camera, &settings).unwrap();
        let agreement = Agreement::measure(&after, &beside);
        let stage =
            |stats: &PhotonRenderStats, name: &str| stats.stage_ms.iter().any(|(n, _)| *n == name);
        eprintln!(
            "photons beside the eye waves, gather {gather_rays} every {spacing}: {agreement}"
        );
        let counts = |s: &PhotonRenderStats| {
            let stored = (s.global_stored, s.caustic_stored, s.precomputed);
            (s.photons_traced, stored, s.rays, s.point_gathers, s.samples)
        };
        assert_eq!(
            counts(&beside_stats),
            counts(&after_stats),
            "gather {gather_rays}"
        );
        assert!(beside_stats.global_stored > 0 && beside_stats.photon_ms > 0.0);
        assert!(stage(&beside_stats, "photon wait") && !stage(&after_stats, "photon wait"));
        assert_same_frame_but_for_the_order_of_additions(
            &after,
            &agreement,
            &format!("gather {gather_rays} every {spacing}"),
        );
    }
}

/// Two frames of the same photons that differ only by the order of the
/// framebuffer's atomic additions: a lit frame, every pixel within 1e-5 of
/// its brightest.
fn assert_same_frame_but_for_the_order_of_additions(
    reference: &Film,
    agreement: &Agreement,
    context: &str,
) {
    let peak = reference
        .pixels
        .iter()
        .map(|p| p.max_element())
        .fold(0.0, f32::max);
    assert!(peak > 0.0, "{context}: a black frame");
    assert!(agreement.max_abs <= 1e-5 * peak, "{context}: {agreement}");
}

/// The early launch: the primary wave's estimates on the estimate stream
/// beside the later waves, which a frame takes only when its maps come
/// before the last wave (at 1080p, when the photon side ends first), made
/// to run by waiting for the maps after the primary wave. Its frame is the
/// one the photon pass before the eye pass gives, up to the order of the
/// atomic additions (its vertices, the frame stream's buffer, once had
/// their order and tiles computed on the frame's stream while the
/// estimates read them on the other: a race that only the 1080p bench's
/// PSNR showed).
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_photon_frame_with_the_early_estimates_equals_the_frame_after_the_waves() {
    let gpu = gpu();
    let scene = Scene::builtin("cornell-caustics").unwrap();
    let camera = scene.camera.unwrap();
    let rs = RenderScene::new(&scene, "bvh-binned").unwrap();
    let mut early = GpuPhotonRenderer::new(&gpu, &rs).unwrap();
    early.set_early_estimates_wait_for_maps(true);
    let uploaded = GpuScene::upload(&gpu, &rs).unwrap();
    let sequential = GpuPhotonRenderer::on(&uploaded, &rs);
    let settings = global_map_settings(160, 120, 2);
    for _ in 0..3 {
        let (beside, stats) = early.render(&camera, &settings).unwrap();
        let (after, _) = sequential.render(&camera, &settings).unwrap();
        assert!(
            stats.stage_ms.iter().any(|(n, _)| *n == "early estimates"),
            "no early launch: {:?}",
            stats.stage_ms
        );
        let agreement = Agreement::measure(&after, &beside);
        eprintln!("early estimates: {agreement}");
        assert_same_frame_but_for_the_order_of_additions(&after, &agreement, "early estimates");
    }
}

/// A display frame (`render_display`: 8-bit sRGB on the device) is the
/// host's sRGB of the f32 frame, with and without the final gather: the
/// two frames differ only by the order of the framebuffer's atomic
/// additions, which may move a value across a byte's step now and then;
/// a buffer of the wrong length is refused.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_photon_display_frame_is_the_films_srgb_bytes() {
    let gpu = gpu();
    let scene = Scene::builtin("cornell-caustics").unwrap();
    let camera = scene.camera.unwrap();
    let rs = RenderScene::new(&scene, "bvh-binned").unwrap();
    let renderer = GpuPhotonRenderer::new(&gpu, &rs).unwrap();
    for gather_rays in [0, 16] {
        let settings = PhotonRenderSettings {
            gather_rays,
            ..global_map_settings(96, 64, 2)
        };
        let (film, stats) = renderer.render(&camera, &settings).unwrap();
        let host = image_io::srgb_bytes(&film, 1.0);
        let mut shown = caustic_gpu::PinnedBuffer::<u8>::zeroed(&gpu, host.len()).unwrap();
        let shown_stats = renderer
            .render_display(&camera, &settings, 1.0, &mut shown)
            .unwrap();
        assert_eq!(shown_stats.rays, stats.rays, "gather {gather_rays}");
        let (differing, largest) = display_byte_differences(&host, shown.as_slice());
        eprintln!(
            "photon display frame, gather {gather_rays}: {differing} of {} bytes differ from the film's, by at most {largest}",
            host.len()
        );
        assert!(
            largest <= 1 && differing * 1000 <= host.len(),
            "gather {gather_rays}"
        );
        assert!(shown.as_slice().iter().any(|&b| b > 0));
    }
    // A buffer of the wrong length is refused.
    let mut short = caustic_gpu::PinnedBuffer::<u8>::zeroed(&gpu, 5).unwrap();
    let settings = global_map_settings(96, 64, 2);
    assert!(
        renderer
            .render_display(&camera, &settings, 1.0, &mut short)
            .is_err()
    );
}

fn render_reference_scene(xml: &std::path::Path, gpu: Option<&caustic_gpu::Gpu>) -> Film {
    let scene = Scene::load(xml).unwrap();
    let camera = scene.camera.unwrap();
    let rs = RenderScene::new(&scene, "bvh-binned").unwrap();
    let (w, h) = scene.film.map_or((512, 512), |f| (f.width, f.height));
    let settings = global_map_settings(w, h, 4);
    match gpu {
        Some(gpu) => render_cuda::render(gpu, &rs, &camera, &settings).unwrap().0,
        None => render(&rs, &camera, &settings, &|_| {}).unwrap().0,
    }
}

/// Against the path-traced references: the GPU's error is the CPU's.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_and_cpu_photon_frames_have_the_same_error_against_the_references() {
    let gpu = gpu();
    for name in ["cornell-box", "cornell-caustics"] {
        let (Some(xml), Some(exr)) = (
            ref_file(&format!("{name}/{name}.xml")),
            ref_file(&format!("{name}/{name}_path.exr")),
        ) else {
            eprintln!("{name}: reference not found, skipped");
            continue;
        };
        let reference = image_io::read_exr(&exr).unwrap();
        let cpu = render_reference_scene(&xml, None);
        let on_gpu = render_reference_scene(&xml, Some(&gpu));
        let cpu_rmse = image_io::rmse(&cpu, &reference).unwrap();
        let gpu_rmse = image_io::rmse(&on_gpu, &reference).unwrap();
        eprintln!("{name}: RMSE against the path reference CPU {cpu_rmse:.5} GPU {gpu_rmse:.5}");
        assert!(
            (gpu_rmse - cpu_rmse).abs() <= 0.02 * cpu_rmse,
            "{name}: GPU RMSE {gpu_rmse} vs CPU {cpu_rmse}"
        );
    }
}

/// The estimate's photon search (two grids, shells of fine cells) returns
/// the exact k nearest: on the real maps of the Cornell caustics (10^6
/// photons), for 1.2·10^5 queries (uniform in the box, on photons, near
/// them, and non-finite), against the CPU hash grid for all of them and
/// the brute-force reference for a sample; bit for bit, ties included.
/// Query by query, and by the estimate's tiles of 32 queries, in Morton
/// order and as drawn.
#[test]
#[ignore = "needs a CUDA GPU"]
fn estimate_search_returns_the_exact_k_nearest_photons() {
    use caustic_geom::{Pcg32, Vec3};
    use caustic_gpu::DeviceBuffer;
    use caustic_render::photon::render_cuda::{IndexedPhotons, TILE_FINE_CELL_KTH};

    let gpu = gpu();
    let scene = Scene::builtin("cornell-caustics").unwrap();
    let rs = RenderScene::new(&scene, "bvh-binned").unwrap();
    let device = GpuScene::upload(&gpu, &rs).unwrap();
    let sources = PhotonSources::new(&rs);
    let settings = PhotonSettings {
        photons: 1_000_000,
        global_rule: GlobalRule::All,
        seed: 11,
        ..Default::default()
    };
    let maps = trace_cuda::trace_photons(&device, &sources, &settings).unwrap();
    let diagonal = rs.scene_diagonal;
    // Each map as the renderer views it (the caustic map with its own
    // coarse limit).
    for (name, photons, k, radius, caustic) in [
        ("global", &maps.global, 64, 0.05 * diagonal, false),
        ("caustic", &maps.caustic, 50, 0.02 * diagonal, true),
    ] {
        let positions: Vec<Vec3> = photons
            .download()
            .unwrap()
            .iter()
            .map(|p| Vec3::from_array(p.position))
            .collect();
        let mut rng = Pcg32::new(5, 9);
        let (lo, hi) = positions
            .iter()
            .fold((Vec3::INFINITY, Vec3::NEG_INFINITY), |(a, b), &p| {
                (a.min(p), b.max(p))
            });
        let mut queries: Vec<Vec3> = (0..60_000)
            .map(|_| {
                let u = Vec3::new(rng.next_f32(), rng.next_f32(), rng.next_f32());
                lo + (hi - lo) * u
            })
            .collect();
        for i in 0..60_000 {
            let p = positions[(rng.next_u32() as usize) % positions.len()];
            let jitter = if i % 2 == 0 { 0.0 } else { 0.01 * radius };
            queries.push(p + Vec3::splat(jitter * (rng.next_f32() - 0.5)));
        }
        queries.extend([Vec3::NAN, Vec3::INFINITY]);
        let indexed = IndexedPhotons::build(photons, radius, k, TILE_FINE_CELL_KTH).unwrap();
        let view = if caustic {
            indexed.caustic_view(k, radius, false)
        } else {
            indexed.view(k, radius, false)
        };
        let view = view.unwrap();
        let view = DeviceBuffer::from_slice(&gpu, "view", &[view]).unwrap();
        // Three searches: query by query, and by tiles of 32 (the
        // estimate's) over the queries in Morton order (neighbouring tiles)
        // and as drawn (tiles spread over the map: most lanes search alone).
        let cell = (hi - lo) / 1023.0;
        let morton = |q: &Vec3| {
            let u = ((*q - lo) / cell)
                .to_array()
                .map(|v| v.clamp(0.0, 1023.0) as u32);
            caustic_geom::morton::encode_30(u[0], u[1], u[2])
        };
        let mut sorted = queries.clone();
        sorted.sort_by_key(morton);
        for (how, queries, tiled) in [
            ("per query", &queries, false),
            ("tiles, Morton order", &sorted, true),
            ("tiles, as drawn", &queries, true),
        ] {
            check_map_search(&gpu, &view, &positions, queries, tiled, (k, radius));
            eprintln!("{name} map, {how}: equal");
        }
        check_tile_order(&gpu, &view, &positions, &sorted, (k, radius));
    }
}

/// The estimate's order of the tiles of `queries` (as eye vertices in that
/// order): every tile once, not Morton order (the queries spread from
/// empty space to the densest photons), and the first tenth of the order
/// (the costliest foreseen) has more photons near its queries (up to `k`
/// each, within `radius`) than the last tenth.
fn check_tile_order(
    gpu: &caustic_gpu::Gpu,
    view: &caustic_gpu::DeviceBuffer<caustic_render::photon::records_cuda::PhotonMapView>,
    positions: &[Vec3],
    queries: &[Vec3],
    (k, radius): (usize, f32),
) {
    use caustic_gpu::DeviceBuffer;
    use caustic_render::photon::estimate_cuda;
    use caustic_render::photon::records_cuda::GpuEyeVertex;
    let vertices: Vec<GpuEyeVertex> = queries
        .iter()
        .map(|q| GpuEyeVertex {
            point: q.to_array(),
            ..Default::default()
        })
        .collect();
    let vertices = DeviceBuffer::from_slice(gpu, "vertices", &vertices).unwrap();
    let order: Vec<u32> = (0..queries.len() as u32).collect();
    let order = DeviceBuffer::from_slice(gpu, "order", &order).unwrap();
    let tiles = estimate_cuda::tile_order(view, &vertices, &order)
        .unwrap()
        .download()
        .unwrap();
    let identity: Vec<u32> = (0..queries.len().div_ceil(32) as u32).collect();
    let mut each = tiles.clone();
    each.sort_unstable();
    assert_eq!(each, identity, "the tile order is not a permutation");
    assert_ne!(tiles, identity, "the tiles kept Morton order");
    let cpu = build_point_structure("hashgrid", positions, radius).unwrap();
    let near = |tiles: &[u32]| -> usize {
        let mut found = Vec::new();
        tiles
            .iter()
            .flat_map(|&t| {
                let first = 32 * t as usize;
                &queries[first..(first + 32).min(queries.len())]
            })
            .map(|&q| {
                cpu.knn(q, k, radius, &mut found);
                found.len()
            })
            .sum()
    };
    let tenth = tiles.len() / 10;
    let (first, last) = (near(&tiles[..tenth]), near(&tiles[tiles.len() - tenth..]));
    eprintln!(
        "tile order: {} tiles; photons near the first tenth's queries {first}, the last's {last}",
        tiles.len()
    );
    assert!(
        first > last,
        "first tenth {first} photons near, last {last}"
    );
}

/// The estimate's search of the map `view` over `positions` for `queries`
/// against the CPU hash grid (every query) and the brute-force reference
/// (a sample), bit for bit.
fn check_map_search(
    gpu: &caustic_gpu::Gpu,
    view: &caustic_gpu::DeviceBuffer<caustic_render::photon::records_cuda::PhotonMapView>,
    positions: &[caustic_geom::Vec3],
    queries: &[caustic_geom::Vec3],
    tiled: bool,
    (k, radius): (usize, f32),
) {
    use caustic_accel::points::reference;
    use caustic_gpu::DeviceBuffer;
    use rayon::prelude::*;
    let name = if tiled { "tiled" } else { "per query" };
    let as_arrays: Vec<[f32; 3]> = queries.iter().map(|q| q.to_array()).collect();
    let on_device = DeviceBuffer::from_slice(gpu, "queries", &as_arrays).unwrap();
    let got = caustic_render::photon::estimate_cuda::map_knn(view, &on_device, tiled)
        .unwrap()
        .download()
        .unwrap();
    let cpu = build_point_structure("hashgrid", positions, radius).unwrap();
    let mismatches: Vec<usize> = (0..queries.len())
        .into_par_iter()
        .filter(|&q| {
            let mut want = Vec::new();
            cpu.knn(queries[q], k, radius, &mut want);
            let want: Vec<(u32, u32)> = want.iter().map(|n| (n.index, n.dist2.to_bits())).collect();
            let have: Vec<(u32, u32)> = got[q].iter().map(|&(i, d)| (i, d.to_bits())).collect();
            want != have
        })
        .collect();
    let full = got.iter().filter(|g| g.len() == k).count();
    eprintln!(
        "{name} map: {} photons, {} queries ({full} with all {k} neighbours), {} differ from the CPU hash grid",
        positions.len(),
        queries.len(),
        mismatches.len()
    );
    assert!(
        mismatches.is_empty(),
        "{name}: first differing query {}",
        mismatches[0]
    );
    let sample_differs = (0..queries.len())
        .step_by(queries.len() / 400)
        .collect::<Vec<_>>()
        .into_par_iter()
        .filter(|&q| {
            let want = reference::knn(positions, queries[q], k, radius);
            let want: Vec<(u32, u32)> = want.iter().map(|n| (n.index, n.dist2.to_bits())).collect();
            let have: Vec<(u32, u32)> = got[q].iter().map(|&(i, d)| (i, d.to_bits())).collect();
            want != have
        })
        .count();
    assert_eq!(
        sample_differs, 0,
        "{name}: differs from the brute-force reference"
    );
}

/// The team and chunk tests' frame with the final gather: 100 × 70
/// pixels, 2 spp, `photons` in each map, 16 gather rays at irradiance
/// samples every 3 pixels, irradiance precomputed at every 16th photon.
fn final_gather_settings(photons: u64) -> PhotonRenderSettings {
    PhotonRenderSettings {
        gather_rays: 16,
        global_photons: photons,
        caustic_photons: photons,
        precompute: 16,
        samples: caustic_render::photon::irradiance_samples::SampleSettings {
            spacing: 3.0,
            ..Default::default()
        },
        ..global_map_settings(100, 70, 2)
    }
}

/// The two GPU photon frames of a team test: `single` and a member's.
fn check_team_frame(
    what: &str,
    single: &(Option<Film>, PhotonRenderStats),
    member: &(Option<Film>, PhotonRenderStats),
    rank: usize,
) {
    let ((a, s), (b, t)) = (single, member);
    let a = a.as_ref().expect("a team of one holds its image");
    // Only the root holds the image; the others sent their bands to it.
    assert_eq!(b.is_some(), rank == 0, "{what}: the image on member {rank}");
    if let Some(b) = b {
        let bits = |p: &caustic_geom::Rgb| p.to_array().map(f32::to_bits);
        let differing = a
            .pixels
            .iter()
            .zip(&b.pixels)
            .filter(|(x, y)| bits(x) != bits(y))
            .count();
        let worst = a.max_relative_difference(b);
        eprintln!(
            "{what}: largest relative difference {worst:.2e}, {differing} of {} pixels not bit for bit",
            a.pixels.len(),
        );
        assert!(a.mean().length() > 0.0);
        assert!(worst <= 1e-5, "{what}: {worst:e}");
    }
    eprintln!(
        "{what}: stored {}/{}, precomputed {}, samples {}, point gathers {}",
        t.global_stored, t.caustic_stored, t.precomputed, t.samples, t.point_gathers
    );
    assert_eq!(
        (t.global_stored, t.caustic_stored, t.precomputed),
        (s.global_stored, s.caustic_stored, s.precomputed),
        "{what}: the maps differ"
    );
    assert_eq!(
        (t.samples, t.point_gathers),
        (s.samples, s.point_gathers),
        "{what}"
    );
    assert_eq!(t.rays, s.rays, "{what}: rays");
}

/// Teams of 2 and 3 members on one GPU, each with its own upload, against
/// the single GPU: the global pass split by whole tracer waves (so the
/// maps are the single GPU's, photon for photon and in order), the eye
/// pass by bands of tile rows, the irradiance samples' gathers by index.
/// Every pixel's contributions are the single GPU's, so the images agree
/// to the rounding of each pixel's sum of non-negative terms, whose order
/// the framebuffer's atomic additions leave open (bound 10^-5 relative).
/// Two frames: the final gather at irradiance samples with one pass of
/// three waves (uneven among 2, one each among 3; the caustic map from the
/// same pass), and the global map read directly with a separate caustic
/// pass and a global pass of one wave (members 1 and 2 trace nothing).
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_photon_team_renders_the_single_gpu_image() {
    use caustic_render::team::{Team, ThreadTeam};
    let gpu = gpu();
    let scene = Scene::builtin("cornell-caustics").unwrap();
    let camera = scene.camera.unwrap();
    let rs = RenderScene::new(&scene, "bvh-binned").unwrap();
    let gathering = final_gather_settings(2 * trace_cuda::WAVE + 12_345);
    let direct = global_map_settings(100, 70, 2);
    let device = GpuScene::upload(&gpu, &rs).unwrap();
    for (name, settings) in [("final gather", &gathering), ("global map", &direct)] {
        let single = render_cuda::render_cuda_in_team(
            &device,
            &rs,
            &camera,
            settings,
            &caustic_render::team::Solo,
        )
        .unwrap();
        assert!(name == "global map" || single.1.samples > 0);
        for size in [2, 3] {
            let members = ThreadTeam::run(size, |team: &dyn Team| {
                let device = GpuScene::upload(&gpu, &rs).unwrap();
                render_cuda::render_cuda_in_team(&device, &rs, &camera, settings, team).unwrap()
            });
            for (rank, member) in members.iter().enumerate() {
                check_team_frame(
                    &format!("{name}, team of {size}, member {rank}"),
                    &single,
                    member,
                    rank,
                );
            }
        }
    }
}

/// A frame whose eye pass is traced in chunks of tiles (3 tiles, then 1;
/// then a team of 2 whose first member chunks by single tiles and whose
/// second traces its band at once) is the frame traced at once: the eye
/// vertices are collected bounce by bounce in chunk order, which is the
/// whole frame's vertex order, so the irradiance samples land on the same
/// vertices and every pixel gets the same contributions (the final gather
/// at irradiance samples, whose placement depends on that order).
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_photon_frame_in_chunks_is_the_whole_frame() {
    use caustic_render::team::{Solo, Team, ThreadTeam};
    let gpu = gpu();
    let scene = Scene::builtin("cornell-caustics").unwrap();
    let camera = scene.camera.unwrap();
    let rs = RenderScene::new(&scene, "bvh-binned").unwrap();
    let settings = final_gather_settings(50_000);
    let tile_slots = 64 * settings.spp as usize;
    let device = GpuScene::upload(&gpu, &rs).unwrap();
    let whole = render_cuda::render_cuda_in_team(&device, &rs, &camera, &settings, &Solo).unwrap();
    assert!(whole.1.samples > 0);
    for tiles in [3, 1] {
        let mut chunked = GpuScene::upload(&gpu, &rs).unwrap();
        chunked.set_max_primary_slots(Some(tiles * tile_slots));
        let frame =
            render_cuda::render_cuda_in_team(&chunked, &rs, &camera, &settings, &Solo).unwrap();
        check_team_frame(&format!("chunks of {tiles} tiles"), &whole, &frame, 0);
    }
    let members = ThreadTeam::run(2, |team: &dyn Team| {
        let mut device = GpuScene::upload(&gpu, &rs).unwrap();
        if team.rank() == 0 {
            device.set_max_primary_slots(Some(tile_slots));
        }
        render_cuda::render_cuda_in_team(&device, &rs, &camera, &settings, team).unwrap()
    });
    for (rank, member) in members.iter().enumerate() {
        check_team_frame(
            &format!("a team of 2 in chunks, member {rank}"),
            &whole,
            member,
            rank,
        );
    }
}
