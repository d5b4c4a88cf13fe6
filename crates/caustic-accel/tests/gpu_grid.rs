//! The uniform grid on the GPU against the CPU grid.
//!
//! - Build: the grid built on the device ([`GpuGrid`]) must pass the CPU
//!   grid's validator and equal [`UniformGrid::build_with`] on the same
//!   triangles and config: the same frame to the bit, every cell listing
//!   the same triangles in the same order, the same culling data
//!   (`validate_cuda::first_difference`). With box overlap and with exact
//!   overlap, several densities and macro-cell sizes.
//! - Traversal: every closest hit (`t`, triangle, `u`, `v`, as bits) and
//!   every any-hit answer of [`GridTracer`] must equal the CPU grid's, on
//!   random soups (degenerate, huge, flat, duplicated and non-finite
//!   triangles, shared edges) with random and adversarial rays and rays
//!   from far away (the exact slow path), and on the standard scenes with
//!   the ray protocol's primary (tile and buffer order), AO and diffuse
//!   rays, generated on the device; on the scenes also every hit of the BVH
//!   [`Tracer`] (held to brute force by `gpu_trace.rs`).
//!
//! These need a CUDA GPU: run with `--include-ignored --test-threads=1` on
//! the GPU machine (`scripts/gpu-grid-run.sh`). Each random test prints its
//! seed; set `CAUSTIC_TEST_SEED` to replay it.

#[path = "common/gpu_scenes.rs"]
mod scenes;

#[path = "common/device.rs"]
mod device;

#[path = "common/soups.rs"]
mod soups;

use caustic_accel::bvh::device_accel_cuda::{AccelTracer, DeviceAccel, GpuAccelSpec};
use caustic_accel::bvh::traverse_cuda::{GpuHit, GpuRay, Tracer};
use caustic_accel::bvh::triangle_bvh_cuda::DeviceBvh;
use caustic_accel::grid::build_cuda::GpuGrid;
use caustic_accel::grid::dda_cuda::GridTracer;
use caustic_accel::grid::validate_cuda::first_difference;
use caustic_accel::grid::{GridConfig, UniformGrid};
use caustic_accel::protocol_cuda as rays;
use caustic_accel::{Accel, TriangleBvh};
use caustic_geom::protocol;
use caustic_geom::{Hit, Pcg32, Ray, Triangle, Vec3};
use caustic_gpu::{DeviceBuffer, GpuError};
use device::gpu;
use soups::{awkward_rays, awkward_soup, far_rays, grid_soup};

/// Primary rays of the scene tests (the benchmark traces 1920x1080).
const WIDTH: u32 = 960;
const HEIGHT: u32 = 544;

fn configs() -> [(&'static str, GridConfig); 4] {
    let with = |density, exact_overlap, macro_size| GridConfig {
        density,
        exact_overlap,
        macro_size,
    };
    [
        ("grid", GridConfig::DEFAULT),
        ("grid exact", with(5.0, true, 4)),
        ("grid k=1 macro 1", with(1.0, false, 1)),
        ("grid k=12 exact macro 3", with(12.0, true, 3)),
    ]
}

/// Builds on the device, downloads and compares with the CPU build.
fn build_both(
    what: &str,
    tris: &[Triangle],
    config: &GridConfig,
) -> Result<(GpuGrid, UniformGrid), String> {
    let grid = GpuGrid::build_from_host(gpu(), tris, config).map_err(|e| format!("{what}: {e}"))?;
    let cpu = UniformGrid::build_with(tris, config);
    let down = grid.download().map_err(|e| format!("{what}: {e}"))?;
    down.validate(tris, config)
        .and_then(|()| first_difference(&down, &cpu, config))
        .map_err(|e| format!("{what}: {e}"))?;
    let s = grid.stats();
    eprintln!(
        "{what}: {} triangles, res {:?}, {} refs, build {:.3} ms device ({:.3} ms host), peak {} KiB",
        tris.len(),
        cpu.res,
        s.references,
        s.stages_ms(),
        s.total_ms,
        s.peak_bytes / 1024
    );
    if s.references != cpu.prims.len() || s.cells != cpu.stats().leaves {
        return Err(format!("{what}: stats {s:?} disagree with the CPU grid"));
    }
    Ok((grid, cpu))
}

fn upload_rays(rays: &[Ray]) -> DeviceBuffer<GpuRay> {
    let words: Vec<GpuRay> = rays.iter().map(GpuRay::from).collect();
    DeviceBuffer::from_slice(gpu(), "test rays", &words).unwrap()
}

/// Closest hits and occlusion of `rays` on the GPU grid, poisoned first so
/// that an unwritten result differs.
fn gpu_results(
    tracer: &GridTracer,
    grid: &GpuGrid,
    rays: &DeviceBuffer<GpuRay>,
    image_width: Option<u32>,
) -> Result<(Vec<GpuHit>, Vec<u32>), GpuError> {
    let mut hits = DeviceBuffer::<GpuHit>::uninit(gpu(), "test hits", rays.len())?;
    hits.poison()?;
    match image_width {
        Some(w) => tracer.intersect_image(grid, rays, w, &mut hits)?,
        None => tracer.intersect(grid, rays, &mut hits)?,
    }
    let mut occluded = DeviceBuffer::<u32>::uninit(gpu(), "test occlusion", rays.len())?;
    occluded.poison()?;
    tracer.occluded(grid, rays, &mut occluded)?;
    Ok((hits.download()?, occluded.download()?))
}

/// A summary of the rays whose results differ (the first few spelled out),
/// or `None` when every result is identical to the bit.
fn differences(
    what: &str,
    rays: &[Ray],
    want: &[GpuHit],
    got: &[GpuHit],
    want_any: Option<&[u32]>,
    got_any: &[u32],
) -> Option<String> {
    let bits = |h: &GpuHit| bytemuck::cast::<GpuHit, [u32; 4]>(*h);
    let mut details = Vec::new();
    let mut count = 0;
    for i in 0..rays.len() {
        let closest = want.get(i).is_some_and(|w| bits(w) != bits(&got[i]));
        let any = want_any.is_some_and(|w| w[i] != got_any[i]);
        if closest || any {
            count += 1;
            if details.len() < 6 {
                details.push(format!(
                    "ray {i} {:?}: want {:?} / {:?}, got {:?} / {}",
                    rays[i],
                    want.get(i),
                    want_any.map(|w| w[i]),
                    got[i],
                    got_any[i]
                ));
            }
        }
    }
    (count > 0).then(|| {
        let mut s = format!("{what}: {count} of {} rays differ", rays.len());
        for d in details {
            s += &format!("\n    {d}");
        }
        s
    })
}

/// The CPU grid's answers for `rays`.
fn cpu_results(cpu: &UniformGrid, rays: &[Ray]) -> (Vec<GpuHit>, Vec<u32>) {
    let mut hits: Vec<Option<Hit>> = vec![None; rays.len()];
    cpu.intersect_batch(rays, &mut hits);
    let mut occluded = vec![false; rays.len()];
    cpu.occluded_batch(rays, &mut occluded);
    (
        hits.into_iter().map(GpuHit::from_hit).collect(),
        occluded.into_iter().map(u32::from).collect(),
    )
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn random_soups_build_and_trace_as_on_the_cpu() {
    let mut rng = device::seeded_rng("random_soups_build_and_trace_as_on_the_cpu", 0x9e1d);
    let tracer = GridTracer::new(gpu()).unwrap();
    let mut failures = Vec::new();
    let flat = |rng: &mut Pcg32| -> Vec<Triangle> {
        awkward_soup(rng, 3000)
            .into_iter()
            .map(|t| {
                let squash = Vec3::new(1.0, 1.0, 0.0);
                Triangle::new(t.v0 * squash, t.v1 * squash, t.v2 * squash)
            })
            .collect()
    };
    let mut huge = awkward_soup(&mut rng, 2000);
    huge.push(Triangle::new(
        Vec3::new(-1e5, -1e5, 0.0),
        Vec3::new(1e5, -1e5, 0.1),
        Vec3::new(0.0, 1e5, -0.1),
    ));
    let nan = Triangle::new(Vec3::splat(f32::NAN), Vec3::X, Vec3::Y);
    let soups: Vec<(String, Vec<Triangle>)> = vec![
        ("empty".into(), Vec::new()),
        ("one non-finite".into(), vec![nan]),
        (
            "one triangle".into(),
            vec![Triangle::new(Vec3::ZERO, Vec3::X, Vec3::Y)],
        ),
        (
            "50 duplicates".into(),
            vec![Triangle::new(Vec3::ZERO, Vec3::X, Vec3::Y); 50],
        ),
        ("awkward soup, 37".into(), awkward_soup(&mut rng, 37)),
        ("awkward soup, 20k".into(), awkward_soup(&mut rng, 20_000)),
        ("flat awkward soup, 3k".into(), flat(&mut rng)),
        ("soup with a huge triangle".into(), huge),
        ("height field, 2x64x64".into(), grid_soup(&mut rng, 64)),
        ("height field, 2x256x256".into(), grid_soup(&mut rng, 256)),
    ];
    for (name, tris) in &soups {
        let mut rays = if tris.is_empty() {
            vec![Ray::new(Vec3::splat(-1.0), Vec3::ONE)]
        } else {
            awkward_rays(&mut rng, tris, 50_000)
        };
        if tris.iter().any(Triangle::is_finite) {
            rays.extend(far_rays(&mut rng, tris, 2_000));
        }
        let device_rays = upload_rays(&rays);
        for (config_name, config) in configs() {
            let what = format!("{name}, {config_name}");
            let (grid, cpu) = match build_both(&what, tris, &config) {
                Ok(both) => both,
                Err(e) => {
                    failures.push(e);
                    continue;
                }
            };
            let (want, want_any) = cpu_results(&cpu, &rays);
            let (got, got_any) = gpu_results(&tracer, &grid, &device_rays, None).unwrap();
            match differences(&what, &rays, &want, &got, Some(&want_any), &got_any) {
                Some(line) => {
                    eprintln!("{line}");
                    failures.push(line);
                }
                None => eprintln!("{what}: {} rays, identical", rays.len()),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn empty_grids_and_errors() {
    let empty = GpuGrid::build_from_host(gpu(), &[], &GridConfig::DEFAULT).unwrap();
    assert!(empty.is_empty());
    assert_eq!(empty.stats().references, 0);
    let tracer = GridTracer::new(gpu()).unwrap();
    let rays = upload_rays(&[Ray::new(Vec3::ZERO, Vec3::X)]);
    let mut hits = DeviceBuffer::<GpuHit>::uninit(gpu(), "hits", 2).unwrap();
    let mismatch = tracer.intersect(&empty, &rays, &mut hits).unwrap_err();
    assert!(
        matches!(mismatch, GpuError::LengthMismatch { .. }),
        "{mismatch}"
    );
    // 16 triangles spanning the whole box at 10^8 cells per triangle: the
    // cell budget halves the grid to 585^3 cells, and 16 x 585^3
    // references are more than the sort takes, refused after the count.
    let spanning = vec![
        Triangle::new(
            Vec3::ZERO,
            Vec3::new(1.0, 1.0, 0.0),
            Vec3::new(0.0, 1.0, 1.0)
        );
        16
    ];
    let dense = GridConfig {
        density: 1e8,
        ..GridConfig::DEFAULT
    };
    match GpuGrid::build_from_host(gpu(), &spanning, &dense) {
        Err(e @ GpuError::TooLarge { .. }) => eprintln!("as expected: {e}"),
        Err(e) => panic!("expected too large, got {e}"),
        Ok(g) => panic!("expected too large, built {:?}", g.stats()),
    }
    // Out of memory: fill the device, leave 1 to 2 GiB, and ask for 5 such
    // triangles over 397^3 cells: 3.1 x 10^8 references, 1.25 GB per array.
    let mut filler = Vec::new();
    while let Ok(chunk) = DeviceBuffer::<u8>::uninit(gpu(), "filler", 1 << 30) {
        filler.push(chunk);
    }
    filler.pop();
    match GpuGrid::build_from_host(gpu(), &spanning[..5], &dense) {
        Err(e @ GpuError::OutOfMemory { .. }) => {
            eprintln!("as expected: {e}");
            assert!(e.to_string().contains("grid"), "{e}");
        }
        Err(e) => panic!("expected out of memory, got {e}"),
        Ok(g) => panic!("expected out of memory, built {:?}", g.stats()),
    }
    drop(filler);
    gpu().synchronize().unwrap();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn standard_scenes_build_and_trace_as_on_the_cpu() {
    let tracer = GridTracer::new(gpu()).unwrap();
    let mut bvh_tracer = Tracer::new(gpu()).unwrap();
    let mut failures = Vec::new();
    let mut checked = 0;
    for scene in scenes::SCENES {
        let Some(loaded) = scene.load() else { continue };
        checked += 1;
        let name = &loaded.name;
        let tris = &loaded.triangles;
        // Box overlap everywhere; exact overlap on the smaller scenes.
        let mut configs = vec![("grid", GridConfig::DEFAULT)];
        if tris.len() < 300_000 {
            let exact = GridConfig {
                exact_overlap: true,
                ..GridConfig::DEFAULT
            };
            configs.push(("grid exact", exact));
        }
        let accel = TriangleBvh::build(tris);
        let bvh = DeviceBvh::upload(gpu(), &accel).unwrap();
        let camera = scenes::gpu_camera(&loaded.camera);
        let primary = rays::primary_rays(gpu(), &camera, WIDTH, HEIGHT).unwrap();
        let mut hits =
            DeviceBuffer::<GpuHit>::uninit(gpu(), "primary hits", primary.len()).unwrap();
        bvh_tracer.intersect(&bvh, &primary, &mut hits).unwrap();
        let diag = protocol::scene_diagonal(tris);
        let secondary = rays::secondary_rays(&bvh, &primary, &hits, diag).unwrap();
        for (config_name, config) in configs {
            let what = format!("{name}, {config_name}");
            let (grid, cpu) = match build_both(&what, tris, &config) {
                Ok(both) => both,
                Err(e) => {
                    failures.push(e);
                    continue;
                }
            };
            for (pass, device_rays, image) in [
                ("primary", &primary, Some(WIDTH)),
                ("primary rows", &primary, None),
                ("AO", &secondary.ao, None),
                ("diffuse", &secondary.diffuse, None),
            ] {
                let host: Vec<Ray> = device_rays
                    .download()
                    .unwrap()
                    .iter()
                    .map(GpuRay::to_ray)
                    .collect();
                let (got, got_any) = gpu_results(&tracer, &grid, device_rays, image).unwrap();
                // The BVH on the device: every ray, closest and any hit.
                let mut want =
                    DeviceBuffer::<GpuHit>::uninit(gpu(), "bvh hits", host.len()).unwrap();
                bvh_tracer.intersect(&bvh, device_rays, &mut want).unwrap();
                let mut want_any =
                    DeviceBuffer::<u32>::uninit(gpu(), "bvh any", host.len()).unwrap();
                bvh_tracer
                    .occluded(&bvh, device_rays, &mut want_any)
                    .unwrap();
                let (want, want_any) = (want.download().unwrap(), want_any.download().unwrap());
                let label = format!("{what} {pass} vs the BVH");
                let mut report = |line: Option<String>, label: &str| match line {
                    Some(line) => {
                        eprintln!("{line}");
                        failures.push(line);
                    }
                    None => eprintln!("{label}: {} rays, identical", host.len()),
                };
                report(
                    differences(&label, &host, &want, &got, Some(&want_any), &got_any),
                    &label,
                );
                // The CPU grid: every 4th ray (its time, not the GPU's, sets
                // the test's length).
                let every = 4;
                let sample: Vec<Ray> = host.iter().step_by(every).copied().collect();
                let (cpu_hits, cpu_any) = cpu_results(&cpu, &sample);
                let got: Vec<GpuHit> = got.iter().step_by(every).copied().collect();
                let got_any: Vec<u32> = got_any.iter().step_by(every).copied().collect();
                let label = format!("{what} {pass} vs the CPU grid (every {every}th ray)");
                report(
                    differences(&label, &sample, &cpu_hits, &got, Some(&cpu_any), &got_any),
                    &label,
                );
            }
        }
    }
    eprintln!(
        "{checked} of {} standard scenes checked",
        scenes::SCENES.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The grid, the kd-tree and the task-pool BVH as the renderers and `bench
/// gpu` get them, through [`DeviceAccel`] and [`AccelTracer`] by spec:
/// every closest hit and any-hit answer equal to the default BVH's through
/// the same path, and the secondary rays generated from the scene-order
/// triangles equal to those generated from the BVH's own (the protocol's
/// rays do not depend on the structure).
#[test]
#[ignore = "needs a CUDA GPU"]
fn structures_through_device_accel_trace_as_the_default_bvh() {
    let mut failures = Vec::new();
    let mut cases: Vec<(String, Vec<Triangle>, protocol::ProtocolCamera)> = Vec::new();
    for scene in scenes::SCENES.iter().take(3) {
        if let Some(loaded) = scene.load() {
            cases.push((loaded.name.clone(), loaded.triangles, loaded.camera));
        }
    }
    let mut rng = device::seeded_rng("device accel soup", 7);
    let soup = awkward_soup(&mut rng, 4000);
    let framing = protocol::framing_camera(&soup, 60.0);
    cases.push(("awkward soup".into(), soup, framing));
    for (name, tris, camera) in &cases {
        let bvh = DeviceAccel::build(gpu(), tris, &GpuAccelSpec::default()).unwrap();
        let mut bvh_tracer = bvh.tracer().unwrap();
        let primary = rays::primary_rays(gpu(), &scenes::gpu_camera(camera), 320, 192).unwrap();
        let mut hits = DeviceBuffer::<GpuHit>::uninit(gpu(), "hits", primary.len()).unwrap();
        bvh_tracer.intersect(&bvh, &primary, &mut hits).unwrap();
        let diag = protocol::scene_diagonal(tris);
        let secondary = rays::secondary_rays(bvh.binary().unwrap(), &primary, &hits, diag).unwrap();
        let scene_order =
            rays::secondary_rays_scene_order(bvh.scene_triangles(), &primary, &hits, diag).unwrap();
        let words = |b: &DeviceBuffer<GpuRay>| -> Vec<[u32; 8]> {
            b.download()
                .unwrap()
                .iter()
                .map(|r| bytemuck::cast(*r))
                .collect()
        };
        if words(&secondary.diffuse) != words(&scene_order.diffuse) {
            failures.push(format!(
                "{name}: secondary rays depend on the triangle order"
            ));
        }
        for spec in ["grid:k=3", "kdtree", "kdtree:small=16", "bvh-taskpool"] {
            let parsed: GpuAccelSpec = spec.parse().unwrap();
            let accel = match DeviceAccel::build(gpu(), tris, &parsed) {
                Ok(accel) => accel,
                Err(e) => {
                    failures.push(format!("{name}, {spec}: {e}"));
                    continue;
                }
            };
            let stats = accel.stats();
            assert_eq!(stats.spec, spec);
            assert_eq!(stats.sah_cost.is_nan(), spec.starts_with("grid"), "{spec}");
            assert_eq!(accel.grid().is_some(), spec.starts_with("grid"));
            assert_eq!(accel.kdtree().is_some(), spec.starts_with("kdtree"));
            eprintln!(
                "{name}, {spec}: build {:.2} ms ({}), SAH {:.2}, {} nodes, {} references",
                stats.build_ms,
                stats
                    .stages
                    .iter()
                    .map(|(s, ms)| format!("{s} {ms:.2}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                stats.sah_cost,
                stats.nodes,
                stats.references
            );
            let mut tracer = accel.tracer().unwrap();
            if accel.binary().is_none() {
                // A tracer of one kind refuses the other kind's structure.
                assert!(tracer.intersect(&bvh, &primary, &mut hits).is_err());
            }
            for (pass, device_rays) in [
                ("primary", &primary),
                ("AO", &secondary.ao),
                ("diffuse", &secondary.diffuse),
            ] {
                let n = device_rays.len();
                let run = |tracer: &mut AccelTracer, accel: &DeviceAccel| {
                    let mut hits = DeviceBuffer::<GpuHit>::uninit(gpu(), "hits", n).unwrap();
                    hits.poison().unwrap();
                    tracer.intersect(accel, device_rays, &mut hits).unwrap();
                    let mut any = DeviceBuffer::<u32>::uninit(gpu(), "any", n).unwrap();
                    any.poison().unwrap();
                    tracer.occluded(accel, device_rays, &mut any).unwrap();
                    (hits.download().unwrap(), any.download().unwrap())
                };
                let (want, want_any) = run(&mut bvh_tracer, &bvh);
                let (got, got_any) = run(&mut tracer, &accel);
                let host: Vec<Ray> = device_rays
                    .download()
                    .unwrap()
                    .iter()
                    .map(GpuRay::to_ray)
                    .collect();
                let label = format!("{name} {pass}, {spec} vs bvh-binned through DeviceAccel");
                match differences(&label, &host, &want, &got, Some(&want_any), &got_any) {
                    Some(line) => failures.push(line),
                    None => eprintln!("{label}: {n} rays, identical"),
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
