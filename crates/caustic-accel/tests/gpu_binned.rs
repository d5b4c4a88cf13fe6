//! The GPU top-down SAH builders (`bvh-binned`, `bvh-binned-staged`,
//! `bvh-sweep`: `DeviceBvh::build_with` on a `SahBuilderConfig`) against
//! their CPU twins, with the registered settings and others (bin counts,
//! schedules, leaf bounds, exact-sweep sizes):
//!
//! - every device tree passes the structural validator
//!   (`DeviceBvh::validate`: `Bvh2::validate`, exact boxes and leaf bounds
//!   by `Bvh2::validate_tight`, slot triangles and maps), and its stats
//!   (nodes, depth, device SAH) agree with the downloaded tree;
//! - its SAH cost is within 1 % of the CPU builder's with the same bins
//!   and schedule (`BinnedSahBuilder` on `SahBuilderConfig::binned`; for
//!   `bvh-sweep` the CPU's full sweep is printed beside it);
//! - tracing it on the GPU gives the CPU reference's hits (the same
//!   triangle, `t`, `u`, `v` as bits; exact ties are counted apart and
//!   allowed to name another triangle) for random rays on soups with
//!   degenerate, huge, thin, duplicated and non-finite triangles, and for
//!   the protocol's primary, AO and diffuse rays on every standard scene
//!   present;
//! - `DeviceAccel` builds them by spec, and a device out of memory is an
//!   error naming the allocation.
//!
//! These need a CUDA GPU: run with `--include-ignored --test-threads=1` on
//! the GPU machine (`scripts/gpu-binned-run.sh`). Random tests print their
//! seed; `CAUSTIC_TEST_SEED` replays one. The kernels' logic also runs on
//! the CPU in `sah_kernels_on_cpu.rs`.

#[path = "common/gpu_scenes.rs"]
mod scenes;

#[path = "common/device.rs"]
mod device;

#[path = "common/gpu_compare.rs"]
mod compare;

#[path = "common/soups.rs"]
mod soups;

#[path = "common/protocol_rays.rs"]
mod protocol_rays;

use caustic_accel::bvh::build::{
    BinnedSahBuilder, Bvh2Builder, DeviceBuildStats, GPU_SAH_MAX_TRIANGLES, upload_triangles,
};
use caustic_accel::bvh::device_accel_cuda::{DeviceAccel, GpuAccelSpec};
use caustic_accel::bvh::traverse_cuda::Tracer;
use caustic_accel::bvh::triangle_bvh_cuda::{DeviceBvh, GpuTriangle};
use caustic_accel::registry::SahBuilderConfig;
use caustic_accel::{BuildInput, Bvh2, TriangleBvh, sah_cost};
use caustic_geom::{Pcg32, Triangle, Vec3};
use caustic_gpu::DeviceBuffer;
use compare::{
    Report, compare_closest, compare_occluded, cpu_closest, cpu_occluded, gpu_closest,
    gpu_occluded, upload_rays,
};
use device::gpu;
use protocol_rays::ProtocolRays;
use soups::{awkward_rays, awkward_soup, grid_soup};

/// The registered builders with their default settings.
const REGISTERED: &[&str] = &["bvh-binned", "bvh-binned-staged", "bvh-sweep"];

/// Other settings the GPU must follow.
const VARIANTS: &[&str] = &[
    "bvh-binned:bins=8:leaf=1",
    "bvh-binned:bins=64:leaf=16",
    "bvh-binned:sweep=0",
    "bvh-binned:sweep=9:schedule=4096@16/0@4",
    "bvh-binned-staged:leaf=4:sweep=16",
    "bvh-sweep:leaf=2",
];

fn rng(test: &str) -> Pcg32 {
    device::seeded_rng(test, 0xb1b5)
}

/// A GPU build of `spec` over `tris`, validated, with its stats checked
/// against the downloaded tree.
fn gpu_build(spec: &str, tris: &[Triangle]) -> Result<(DeviceBvh, Bvh2, DeviceBuildStats), String> {
    let config = SahBuilderConfig::parse(spec).map_err(|e| e.to_string())?;
    let device = upload_triangles(gpu(), tris).map_err(|e| e.to_string())?;
    let (bvh, stats) =
        DeviceBvh::build_with(gpu(), &device, config).map_err(|e| format!("{spec}: {e}"))?;
    let tree = bvh
        .validate(tris, config.max_leaf_size())
        .map_err(|e| format!("{spec}: invalid tree: {e}"))?;
    if stats.nodes != tree.nodes.len() || stats.prims != tris.len() || stats.name != config.name() {
        return Err(format!("{spec}: stats {stats:?} disagree with the tree"));
    }
    if !tree.nodes.is_empty() && stats.height != tree.shape().max_depth {
        return Err(format!(
            "{spec}: depth {} reported, the tree's is {}",
            stats.height,
            tree.shape().max_depth
        ));
    }
    let cost = sah_cost(&tree);
    if (stats.sah_cost - cost).abs() > 1e-4 * cost.max(1.0) {
        return Err(format!("{spec}: device SAH {} vs {cost}", stats.sah_cost));
    }
    Ok((bvh, tree, stats))
}

/// The SAH check against the CPU twin (same bins and schedule); a line
/// for the log, or why it fails.
fn sah_against_the_cpu(
    spec: &str,
    tris: &[Triangle],
    tree: &Bvh2,
    stats: &DeviceBuildStats,
) -> Result<String, String> {
    let config = SahBuilderConfig::parse(spec).unwrap();
    let input = BuildInput::from_triangles(tris);
    let twin = BinnedSahBuilder::new(config.binned()).build(&input);
    let (gpu_sah, cpu_sah) = (sah_cost(tree), sah_cost(&twin));
    let off = if cpu_sah > 0.0 {
        gpu_sah / cpu_sah - 1.0
    } else {
        0.0
    };
    let mut line = format!(
        "{spec}: SAH {gpu_sah:.4}, CPU same bins {cpu_sah:.4} ({:+.3} %), {} nodes, depth {}, {} levels, {} small roots, {:.2} ms",
        100.0 * off,
        tree.nodes.len(),
        stats.height,
        stats.iterations,
        stats.small_roots,
        stats.build_ms
    );
    if matches!(config, SahBuilderConfig::Sweep(_)) {
        let full = sah_cost(&config.cpu_builder().build(&input));
        line += &format!(
            ", CPU full sweep {full:.4} ({:+.3} %)",
            100.0 * (gpu_sah / full - 1.0)
        );
    }
    if off.abs() > 0.01 && (gpu_sah - cpu_sah).abs() > 1e-5 {
        return Err(format!("SAH beyond 1 % of the CPU's: {line}"));
    }
    Ok(line)
}

/// Closest hits must be the CPU's; exact ties may name another triangle.
fn hits_agree(report: &Report) -> bool {
    report.others == 0
}

// ------------------------------------------------------------ random soups

fn point_tris(points: &[Vec3]) -> Vec<Triangle> {
    points.iter().map(|&p| Triangle::new(p, p, p)).collect()
}

/// Every kind of input the builders must survive.
fn soups(rng: &mut Pcg32) -> Vec<(String, Vec<Triangle>)> {
    let one = Triangle::new(Vec3::ZERO, Vec3::X, Vec3::Y);
    let nan = Triangle::new(Vec3::splat(f32::NAN), Vec3::X, Vec3::Y);
    let inf = Triangle::new(Vec3::ZERO, Vec3::splat(f32::INFINITY), Vec3::ONE);
    let mut coincident_and_far = vec![one; 3000];
    coincident_and_far.extend(awkward_soup(rng, 500));
    let mut soups: Vec<(String, Vec<Triangle>)> = vec![
        ("empty".into(), vec![]),
        ("one triangle".into(), vec![one]),
        ("only non-finite".into(), vec![nan; 5]),
        ("some non-finite".into(), vec![one, nan, one, inf]),
        (
            "geometric series".into(),
            point_tris(
                &(0..120)
                    .map(|k| Vec3::splat(0.5f32.powi(k)))
                    .collect::<Vec<_>>(),
            ),
        ),
        (
            "huge coordinates".into(),
            point_tris(&[
                Vec3::splat(-3e38),
                Vec3::splat(3e38),
                Vec3::ZERO,
                Vec3::new(1e-30, 0.0, 0.0),
                Vec3::new(2e-45, 0.0, 0.0),
            ]),
        ),
        ("3000 coincident + 500 awkward".into(), coincident_and_far),
        ("20000 coincident".into(), vec![one; 20_000]),
        ("height field 2x128x128".into(), grid_soup(rng, 128)),
    ];
    for n in [37, 64, 65, 2049, 9000, 20_000, 200_000] {
        soups.push((format!("awkward soup {n}"), awkward_soup(rng, n)));
    }
    soups
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn soups_build_valid_trees_within_one_percent_of_the_cpu_and_trace_alike() {
    let mut rng = rng("soups_build_valid_trees_within_one_percent_of_the_cpu_and_trace_alike");
    let mut tracer = Tracer::new(gpu()).unwrap();
    let mut failures = Vec::new();
    for (name, tris) in soups(&mut rng) {
        let rays = if tris.is_empty() {
            Vec::new()
        } else {
            awkward_rays(&mut rng, &tris, 50_000)
        };
        let reference = TriangleBvh::build(&tris);
        let expected = (
            cpu_closest(&reference, &rays),
            cpu_occluded(&reference, &rays),
        );
        let buffer = (!rays.is_empty()).then(|| upload_rays(&rays));
        for &spec in REGISTERED.iter().chain(VARIANTS) {
            if tris.len() > 20_000 && !REGISTERED.contains(&spec) {
                continue;
            }
            let (bvh, tree, stats) = match gpu_build(spec, &tris) {
                Ok(built) => built,
                Err(e) => {
                    failures.push(format!("{name}: {e}"));
                    continue;
                }
            };
            match sah_against_the_cpu(spec, &tris, &tree, &stats) {
                Ok(line) => eprintln!("{name} ({} tris), {line}", tris.len()),
                Err(e) => failures.push(format!("{name}: {e}")),
            }
            let Some(buffer) = &buffer else { continue };
            let closest =
                compare_closest(&rays, &gpu_closest(&mut tracer, &bvh, buffer), &expected.0);
            let any =
                compare_occluded(&rays, &gpu_occluded(&mut tracer, &bvh, buffer), &expected.1);
            for (kind, report) in [("closest", closest), ("any", any)] {
                let line = report.summary(&format!("{name}, {spec}, {kind}"));
                if !hits_agree(&report) {
                    failures.push(line);
                } else if !report.identical() {
                    eprintln!("{line}");
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

// ---------------------------------------------------------- standard scenes

const WIDTH: u32 = 1280;
const HEIGHT: u32 = 720;

#[test]
#[ignore = "needs a CUDA GPU"]
fn standard_scenes_build_within_one_percent_of_the_cpu_and_trace_identically() {
    let mut tracer = Tracer::new(gpu()).unwrap();
    let mut failures = Vec::new();
    let mut checked = 0;
    for scene in scenes::SCENES {
        let Some(loaded) = scene.load() else { continue };
        checked += 1;
        let tris = &loaded.triangles;
        let rays = ProtocolRays::new(&loaded, WIDTH, HEIGHT);
        eprintln!("{}: {} triangles", loaded.name, tris.len());
        for &spec in REGISTERED {
            let (bvh, tree, stats) = match gpu_build(spec, tris) {
                Ok(built) => built,
                Err(e) => {
                    failures.push(format!("{}: {e}", loaded.name));
                    continue;
                }
            };
            match sah_against_the_cpu(spec, tris, &tree, &stats) {
                Ok(line) => eprintln!("  {line}"),
                Err(e) => failures.push(format!("{}: {e}", loaded.name)),
            }
            for (kind, report) in rays.compare_bvh(&mut tracer, &bvh) {
                let line = report.summary(&format!("{spec} {kind}"));
                eprintln!("    {line}");
                if !hits_agree(&report) {
                    failures.push(format!("{}: {line}", loaded.name));
                }
            }
        }
    }
    scenes::finish(checked, &failures);
}

// ------------------------------------------------------------ integration

#[test]
#[ignore = "needs a CUDA GPU"]
fn device_accel_builds_them_by_spec_and_traces_like_the_cpu() {
    let mut rng = rng("device_accel_builds_them_by_spec_and_traces_like_the_cpu");
    let tris = awkward_soup(&mut rng, 5000);
    let rays = awkward_rays(&mut rng, &tris, 20_000);
    let reference = TriangleBvh::build(&tris);
    let expected = cpu_closest(&reference, &rays);
    for spec in [
        "bvh-binned",
        "bvh-binned-staged:bins=16",
        "bvh-sweep",
        "bvh-wide:from=bvh-binned",
    ] {
        let spec: GpuAccelSpec = spec.parse().unwrap();
        let accel = DeviceAccel::build(gpu(), &tris, &spec).unwrap();
        let stats = accel.stats();
        assert_eq!(stats.prims, tris.len());
        assert!(
            stats.stages.iter().any(|(s, _)| *s == "small nodes"),
            "{spec}: {:?}",
            stats.stages
        );
        assert!(
            stats.sah_cost > 0.0 && stats.nodes > 0 && stats.bytes > 0,
            "{spec}: {stats:?}"
        );
        let mut tracer = accel.tracer().unwrap();
        let buffer = upload_rays(&rays);
        let mut hits = DeviceBuffer::uninit(gpu(), "test hits", rays.len()).unwrap();
        hits.poison().unwrap();
        tracer.intersect(&accel, &buffer, &mut hits).unwrap();
        let report = compare_closest(&rays, &hits.download().unwrap(), &expected);
        eprintln!("{}", report.summary(&format!("DeviceAccel {spec}")));
        assert!(hits_agree(&report), "{}", report.summary(&spec.to_string()));
    }
    let (_, stats) = DeviceBvh::build_from_host(gpu(), &tris, "bvh-binned:bins=16").unwrap();
    assert_eq!(stats.name, "bvh-binned");
    let message = DeviceBvh::build_from_host(gpu(), &tris, "kdtree")
        .err()
        .unwrap()
        .to_string();
    assert!(
        message.contains("no GPU builder") && message.contains("bvh-sweep"),
        "{message}"
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn exhausted_device_memory_is_an_error_naming_the_allocation() {
    // Triangles filling half the free memory: their two reference buffers
    // (64 bytes a triangle) cannot fit beside them. The poison bytes make
    // every triangle the same finite point.
    let (free, _) = gpu().memory().unwrap();
    let n = (free / 2 / size_of::<GpuTriangle>()).min(GPU_SAH_MAX_TRIANGLES);
    let mut tris = DeviceBuffer::<GpuTriangle>::uninit(gpu(), "test triangles", n).unwrap();
    tris.poison().unwrap();
    // Where the builder's triangle limit caps n (an H200's 140 GiB), half
    // the memory is still free and the references would fit; ballast
    // leaves as much free as the uncapped case does, one triangle buffer.
    let (left, _) = gpu().memory().unwrap();
    let keep = n * size_of::<GpuTriangle>();
    let _ballast =
        (left > keep).then(|| DeviceBuffer::<u8>::uninit(gpu(), "ballast", left - keep).unwrap());
    let config = SahBuilderConfig::parse("bvh-binned").unwrap();
    device::expect_out_of_memory(
        DeviceBvh::build_with(gpu(), &tris, config).map(|(_, stats)| stats),
        "BVH references",
        &format!("{n} triangles"),
    );
}
