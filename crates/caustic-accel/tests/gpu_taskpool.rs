//! `bvh-taskpool` on the GPU (the SAH BVH built by the task pool of
//! persistent warps, Vinkler et al. 2013, §4):
//!
//! - every device tree passes the structural validator
//!   (`DeviceBvh::validate`: every triangle referenced once, exact tight
//!   boxes, leaf bounds, slot maps) and its stats agree with it;
//! - on soups and scenes its SAH cost is within `TWIN_TOLERANCE` of its CPU
//!   twin's (`TaskPoolBvhBuilder`: it prices the kernel's candidate planes
//!   with the kernel's arithmetic, so they differ only where equal split
//!   points meet in another order), and, for the default spec from
//!   `BOUNDED_MIN` triangles on, within `SAH_FACTOR` of the CPU
//!   `bvh-binned`'s (both ratios are printed);
//! - tracing it on the GPU gives the CPU reference's hits (same triangle and
//!   `t`; exact ties may name another triangle) for random rays on soups
//!   with degenerate, huge, thin, duplicated and non-finite triangles, and
//!   for the protocol's primary, AO and diffuse rays on every standard scene
//!   present;
//! - the registry builds it by spec, and running out of device memory is an
//!   error naming the allocation.
//!
//! These need a CUDA GPU: run with `--include-ignored --test-threads=1` on
//! the GPU machine (`scripts/gpu-taskpool-run.sh`). Random tests print
//! their seed; `CAUSTIC_TEST_SEED` replays one.

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

use caustic_accel::bvh::build::{DeviceBuildStats, GPU_TASKPOOL_MAX_TRIANGLES, upload_triangles};
use caustic_accel::bvh::traverse_cuda::Tracer;
use caustic_accel::bvh::triangle_bvh_cuda::{DeviceBvh, GpuTriangle};
use caustic_accel::registry::{DeviceBuilderConfig, SahBuilderConfig};
use caustic_accel::{BuildInput, Bvh2, sah_cost};
use caustic_geom::{Hit, Pcg32, Triangle, Vec3};
use caustic_gpu::DeviceBuffer;
use compare::{compare_closest, compare_occluded, gpu_closest, gpu_occluded, upload_rays};
use device::gpu;
use protocol_rays::ProtocolRays;
use soups::{awkward_rays, awkward_soup, grid_soup};

const SPECS: &[&str] = &[
    "bvh-taskpool",
    "bvh-taskpool:leaf=1",
    "bvh-taskpool:leaf=16",
    "bvh-taskpool:grab=1",
];

/// How much worse than the CPU `bvh-binned` (32 bins, exact sweep below 64
/// primitives, leaves of up to 8) the task-pool tree's SAH may be: it
/// prices 32 planes per node above 32 primitives, where `bvh-binned`
/// prices 93.
const SAH_FACTOR: f32 = 1.15;

/// The fewest triangles for which `SAH_FACTOR` holds: on awkward soups of a
/// few dozen triangles (a node of 32 to 64 references priced by 32 planes
/// against `bvh-binned`'s exact sweep) the CPU twin itself is beyond it on
/// 6 to 9 % of seeds (2000 soups each of 37, 64 and 65 triangles: worst
/// 1.48), on none of 2000 of 2049 triangles (worst 1.11). Below it the
/// ratio is printed, and the twin bounds the tree.
const BOUNDED_MIN: usize = 1000;

/// How far from its CPU twin's the tree's SAH may be (relative).
const TWIN_TOLERANCE: f32 = 0.01;

fn rng(test: &str) -> Pcg32 {
    device::seeded_rng(test, 0x7a5c)
}

fn gpu_build(spec: &str, tris: &[Triangle]) -> Result<(DeviceBvh, Bvh2, DeviceBuildStats), String> {
    let config = DeviceBuilderConfig::parse(spec).map_err(|e| e.to_string())?;
    let device = upload_triangles(gpu(), tris).map_err(|e| e.to_string())?;
    let (bvh, stats) =
        DeviceBvh::build_with(gpu(), &device, config).map_err(|e| format!("{spec}: {e}"))?;
    let tree = bvh
        .validate(tris, config.max_leaf_size())
        .map_err(|e| format!("{spec}: invalid tree: {e}"))?;
    if stats.nodes != tree.nodes.len() || stats.prims != tris.len() || stats.name != "bvh-taskpool"
    {
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

/// The SAH against the CPU `bvh-binned` and the CPU twin; a log line, or
/// why it fails (`bounded`: hold it to `TWIN_TOLERANCE` of the twin's and,
/// for the default spec from `BOUNDED_MIN` triangles, to `SAH_FACTOR` of
/// `bvh-binned`'s, whose leaves are the default's).
fn sah_line(
    spec: &str,
    tris: &[Triangle],
    tree: &Bvh2,
    stats: &DeviceBuildStats,
    bounded: bool,
) -> Result<String, String> {
    let input = BuildInput::from_triangles(tris);
    let binned = SahBuilderConfig::parse("bvh-binned").unwrap().cpu_builder();
    let twin = DeviceBuilderConfig::parse(spec).unwrap().cpu_builder();
    let (gpu_sah, binned_sah, twin_sah) = (
        sah_cost(tree),
        sah_cost(&binned.build(&input)),
        sah_cost(&twin.build(&input)),
    );
    let ratio_to = |other: f32| if other > 0.0 { gpu_sah / other } else { 1.0 };
    let (ratio, twin_ratio) = (ratio_to(binned_sah), ratio_to(twin_sah));
    let pool = stats.pool.map(|p| p.to_string()).unwrap_or_default();
    let line = format!(
        "{spec}: SAH {gpu_sah:.4}, CPU bvh-binned {binned_sah:.4} (ratio {ratio:.4}), CPU twin {twin_sah:.4} (ratio {twin_ratio:.4}); {} nodes, depth {}, {:.2} ms; {pool}",
        tree.nodes.len(),
        stats.height,
        stats.build_ms
    );
    if bounded && (twin_ratio - 1.0).abs() > TWIN_TOLERANCE && (gpu_sah - twin_sah).abs() > 1e-5 {
        return Err(format!(
            "SAH beyond {TWIN_TOLERANCE} of the CPU twin's: {line}"
        ));
    }
    let sized = tris.len() >= BOUNDED_MIN && spec == "bvh-taskpool";
    if bounded && sized && ratio > SAH_FACTOR && (gpu_sah - binned_sah).abs() > 1e-5 {
        return Err(format!("SAH beyond {SAH_FACTOR} x bvh-binned: {line}"));
    }
    Ok(line)
}

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
fn soups_build_valid_trees_and_trace_like_brute_force() {
    let mut rng = rng("soups_build_valid_trees_and_trace_like_brute_force");
    let mut tracer = Tracer::new(gpu()).unwrap();
    let mut failures = Vec::new();
    for (name, tris) in soups(&mut rng) {
        // Brute force's cost is rays x triangles: fewer rays for the
        // largest soup keep it to seconds (measured: 50 000 rays on the
        // 200 000-triangle soup took minutes on one thread).
        let count = if tris.len() > 50_000 { 5_000 } else { 50_000 };
        let rays = if tris.is_empty() {
            Vec::new()
        } else {
            awkward_rays(&mut rng, &tris, count)
        };
        let brute = caustic_accel::BruteForce::new(&tris);
        let mut closest = vec![None; rays.len()];
        caustic_accel::Accel::intersect_batch(&brute, &rays, &mut closest);
        let mut occluded = vec![false; rays.len()];
        caustic_accel::Accel::occluded_batch(&brute, &rays, &mut occluded);
        let expected: (Vec<Option<Hit>>, Vec<bool>) = (closest, occluded);
        let buffer = (!rays.is_empty()).then(|| upload_rays(&rays));
        // Coincident triangles give no SAH choice, and their median
        // halves follow the device's partition order: the bounds are for
        // soups.
        let bounded = name.starts_with("awkward") || name.starts_with("height");
        for &spec in SPECS {
            let (bvh, tree, stats) = match gpu_build(spec, &tris) {
                Ok(built) => built,
                Err(e) => {
                    failures.push(format!("{name}: {e}"));
                    continue;
                }
            };
            match sah_line(spec, &tris, &tree, &stats, bounded) {
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
                if report.others != 0 {
                    failures.push(line);
                } else if !report.identical() {
                    eprintln!("{line}");
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

const WIDTH: u32 = 1280;
const HEIGHT: u32 = 720;

#[test]
#[ignore = "needs a CUDA GPU"]
fn standard_scenes_build_near_bvh_binned_and_trace_identically() {
    let mut tracer = Tracer::new(gpu()).unwrap();
    let mut failures = Vec::new();
    let mut checked = 0;
    for scene in scenes::SCENES {
        let Some(loaded) = scene.load() else { continue };
        checked += 1;
        let tris = &loaded.triangles;
        let rays = ProtocolRays::new(&loaded, WIDTH, HEIGHT);
        eprintln!("{}: {} triangles", loaded.name, tris.len());
        let (bvh, tree, stats) = match gpu_build("bvh-taskpool", tris) {
            Ok(built) => built,
            Err(e) => {
                failures.push(format!("{}: {e}", loaded.name));
                continue;
            }
        };
        match sah_line("bvh-taskpool", tris, &tree, &stats, true) {
            Ok(line) => eprintln!("  {line}"),
            Err(e) => failures.push(format!("{}: {e}", loaded.name)),
        }
        for (kind, report) in rays.compare_bvh(&mut tracer, &bvh) {
            let line = report.summary(&format!("bvh-taskpool {kind}"));
            eprintln!("    {line}");
            if report.others != 0 {
                failures.push(format!("{}: {line}", loaded.name));
            }
        }
    }
    scenes::finish(checked, &failures);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn built_by_spec_with_pool_stats() {
    let mut rng = rng("built_by_spec_with_pool_stats");
    let tris = awkward_soup(&mut rng, 50_000);
    let (_, stats) = DeviceBvh::build_from_host(gpu(), &tris, "bvh-taskpool:leaf=2").unwrap();
    assert_eq!(stats.name, "bvh-taskpool");
    for stage in ["references", "pool setup", "task pool", "triangles"] {
        assert!(stats.stage_ms(stage) > 0.0, "{stage}: {:?}", stats.stages);
    }
    let pool = stats.pool.expect("pool stats");
    eprintln!("{pool}");
    assert!(pool.warps > 0 && pool.tasks_stored > 0 && pool.chunks > 0);
    assert!(pool.work_cycles > 0 && pool.pool_cycles > 0);
    assert!(stats.peak_device_bytes.is_none_or(|b| b > 0));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn exhausted_device_memory_is_an_error_naming_the_allocation() {
    let (free, _) = gpu().memory().unwrap();
    let n = (free / 2 / size_of::<GpuTriangle>()).min(GPU_TASKPOOL_MAX_TRIANGLES);
    let mut tris = DeviceBuffer::<GpuTriangle>::uninit(gpu(), "test triangles", n).unwrap();
    tris.poison().unwrap();
    let config = DeviceBuilderConfig::parse("bvh-taskpool").unwrap();
    device::expect_out_of_memory(
        DeviceBvh::build_with(gpu(), &tris, config).map(|(_, stats)| stats),
        "allocating",
        &format!("{n} triangles"),
    );
}
