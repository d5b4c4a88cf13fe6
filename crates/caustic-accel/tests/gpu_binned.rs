//! The GPU top-down SAH builders (`bvh-binned`, `bvh-binned-staged`,
//! `bvh-sweep`; `GpuSahBuilder`) against their CPU twins with the same
//! configuration:
//!
//! - the device tree passes `Bvh2::validate` (every triangle in one leaf,
//!   child boxes inside their parents, every node reachable once, depth at
//!   most `MAX_DEPTH`, `2 * leaves - 1` nodes), every box is exactly the
//!   union of what lies below it, leaves hold at most `max_leaf_size`
//!   triangles (the parking leaf of non-finite ones aside), every slot
//!   holds its scene triangle with its id, and the slot map inverts;
//! - its SAH cost is within 1 % of the CPU builder's;
//! - the GPU traversal of it gives exactly the CPU traversal's hits (of the
//!   CPU builder's tree: hits do not depend on the tree) for primary, AO and
//!   diffuse rays on the standard scenes and random rays on soups with
//!   degenerate, huge, flat, duplicated and non-finite triangles.
//!
//! These need a CUDA GPU: run with `--include-ignored --test-threads=1` on
//! the GPU machine (`scripts/gpu-run.sh`). Random tests print their seed;
//! `CAUSTIC_TEST_SEED` replays one.

#[path = "common/gpu_scenes.rs"]
mod scenes;

#[path = "common/device.rs"]
mod device;

#[path = "common/soups.rs"]
mod soups;

use caustic_accel::bvh::build::{
    BinSchedule, BinnedSahBuilder, BinnedSahConfig, Bvh2Builder, FIVE_STAGES,
    GPU_SAH_MAX_TRIANGLES, GpuSahBuilder, SweepSahBuilder, SweepSahConfig,
};
use caustic_accel::bvh::traverse_cuda::{GpuHit, GpuRay, Tracer};
use caustic_accel::bvh::triangle_bvh_cuda::{DeviceBvh, GpuTriangle};
use caustic_accel::{Accel, BuildInput, Bvh2, TriangleBvh, sah_cost};
use caustic_geom::{Aabb, Hit, Ray, Triangle, Vec3, protocol};
use caustic_gpu::DeviceBuffer;
use device::gpu;
use soups::{awkward_rays, awkward_soup, grid_soup};

/// A GPU builder and its CPU twin.
struct Twins {
    label: String,
    gpu: GpuSahBuilder,
    cpu: Box<dyn Bvh2Builder>,
    max_leaf: usize,
}

fn binned(label: &str, config: BinnedSahConfig) -> Twins {
    Twins {
        label: label.to_owned(),
        gpu: GpuSahBuilder::binned(config),
        cpu: Box::new(BinnedSahBuilder::new(config)),
        max_leaf: config.max_leaf_size,
    }
}

fn sweep(label: &str, config: SweepSahConfig) -> Twins {
    Twins {
        label: label.to_owned(),
        gpu: GpuSahBuilder::sweep(config),
        cpu: Box::new(SweepSahBuilder::new(config)),
        max_leaf: config.max_leaf_size,
    }
}

/// The three registered builders with their default settings.
fn registered() -> Vec<Twins> {
    vec![
        binned("bvh-binned", BinnedSahConfig::DEFAULT),
        binned("bvh-binned-staged", BinnedSahConfig::STAGED),
        sweep("bvh-sweep", SweepSahConfig::DEFAULT),
    ]
}

/// Other settings the GPU must follow: bin counts, leaf bounds, no exact
/// sweep at all, a schedule of our own.
fn variants() -> Vec<Twins> {
    let d = BinnedSahConfig::DEFAULT;
    vec![
        binned("bins=8", BinnedSahConfig { bins: 8, ..d }),
        binned("bins=64", BinnedSahConfig { bins: 64, ..d }),
        binned("leaf=1", BinnedSahConfig { max_leaf_size: 1, ..d }),
        binned("leaf=16", BinnedSahConfig { max_leaf_size: 16, ..d }),
        binned("sweep=0", BinnedSahConfig { sweep_max_prims: 0, ..d }),
        binned("sweep=9", BinnedSahConfig { sweep_max_prims: 9, ..d }),
        binned(
            "schedule=4096@16/0@4",
            BinnedSahConfig {
                stages: BinSchedule::parse("4096@16/0@4").unwrap(),
                ..d
            },
        ),
        binned(
            "staged, leaf=4, sweep=16",
            BinnedSahConfig {
                stages: FIVE_STAGES,
                max_leaf_size: 4,
                sweep_max_prims: 16,
                ..d
            },
        ),
    ]
}

// ------------------------------------------------------------ the tree

/// The structural checks of the module docs; returns the downloaded tree.
fn check_tree(bvh: &DeviceBvh, scene: &[Triangle], max_leaf: usize) -> Result<Bvh2, String> {
    let (tree, leaf_triangles) = bvh.download().map_err(|e| e.to_string())?;
    let input = BuildInput::from_triangles(scene);
    tree.validate(&input.bounds)?;
    if !tree.nodes.is_empty() {
        tight_box(&tree, &input.bounds, 0, max_leaf)?;
    }
    for (slot, (&id, tri)) in tree.prim_indices.iter().zip(&leaf_triangles).enumerate() {
        let expected = scene[id as usize];
        if bytemuck::bytes_of(&GpuTriangle::new(tri, id)) != bytemuck::bytes_of(&GpuTriangle::new(&expected, id)) {
            return Err(format!("slot {slot} holds {tri:?}, not scene triangle {id}"));
        }
    }
    let slots = bvh.slots().download().map_err(|e| e.to_string())?;
    for (slot, &id) in tree.prim_indices.iter().enumerate() {
        if slots[id as usize] as usize != slot {
            return Err(format!("triangle {id} is in slot {slot}, the map says {}", slots[id as usize]));
        }
    }
    Ok(tree)
}

/// Checks that node `index`'s box is exactly the union below it and that
/// its leaves respect `max_leaf`; returns the box. Depth is bounded by
/// `Bvh2::validate`, which runs first.
fn tight_box(tree: &Bvh2, bounds: &[Aabb], index: usize, max_leaf: usize) -> Result<Aabb, String> {
    let node = tree.nodes[index];
    let exact = if node.is_leaf() {
        let parking = node.bounds().is_empty();
        if !parking && node.count as usize > max_leaf {
            return Err(format!("leaf {index} holds {} > {max_leaf} triangles", node.count));
        }
        node.prim_range().fold(Aabb::EMPTY, |b, slot| {
            let id = tree.prim_indices[slot] as usize;
            if parking { b } else { b.union(bounds[id]) }
        })
    } else {
        let left = tight_box(tree, bounds, node.left_child(), max_leaf)?;
        let right = tight_box(tree, bounds, node.left_child() + 1, max_leaf)?;
        left.union(right)
    };
    let same = |a: Vec3, b: Vec3| a.to_array().map(f32::to_bits) == b.to_array().map(f32::to_bits);
    let (have, want) = (node.bounds(), exact);
    let empty_both = have.is_empty() && want.is_empty();
    if !empty_both && !(same(have.min, want.min) && same(have.max, want.max)) {
        return Err(format!("node {index}'s box {have:?} is not the union below it, {want:?}"));
    }
    Ok(exact)
}

/// Builds on both sides; checks the GPU tree and its SAH against the
/// CPU's. Returns the GPU tree, the CPU accel and a one-line summary.
fn build_both(twins: &Twins, tris: &[Triangle]) -> Result<(DeviceBvh, TriangleBvh, String), String> {
    let (bvh, stats) = twins
        .gpu
        .build_from_host(gpu(), tris)
        .map_err(|e| format!("{}: {e}", twins.label))?;
    let tree = check_tree(&bvh, tris, twins.max_leaf).map_err(|e| format!("{}: {e}", twins.label))?;
    let cpu = TriangleBvh::build_with(tris, twins.cpu.as_ref());
    let (gpu_sah, cpu_sah) = (sah_cost(&tree), cpu.stats().sah_cost);
    if (stats.sah_cost - gpu_sah).abs() > 1e-4 * gpu_sah.max(1.0) {
        return Err(format!("{}: device SAH {} but the tree's is {gpu_sah}", twins.label, stats.sah_cost));
    }
    let ratio = if cpu_sah > 0.0 { gpu_sah / cpu_sah } else { 1.0 };
    let line = format!(
        "{}: SAH gpu {gpu_sah:.4} cpu {cpu_sah:.4} ({:+.3} %), nodes {} / {}, depth {}, levels {}, small roots {}",
        twins.label,
        100.0 * (ratio - 1.0),
        tree.nodes.len(),
        cpu.bvh().nodes.len(),
        stats.max_depth,
        stats.levels,
        stats.small_roots
    );
    if (ratio - 1.0).abs() > 0.01 && (gpu_sah - cpu_sah).abs() > 1e-6 {
        return Err(format!("SAH differs by more than 1 %: {line}"));
    }
    if stats.max_depth != tree.shape().max_depth {
        return Err(format!("{}: stats depth {} but the tree's is {}", twins.label, stats.max_depth, tree.shape().max_depth));
    }
    Ok((bvh, cpu, line))
}

// ------------------------------------------------------------ hits

fn upload_rays(rays: &[Ray]) -> DeviceBuffer<GpuRay> {
    let words: Vec<GpuRay> = rays.iter().map(GpuRay::from).collect();
    DeviceBuffer::from_slice(gpu(), "test rays", &words).unwrap()
}

/// Rays whose GPU closest hit (on `bvh`) or any-hit answer differs in any
/// bit from the CPU's (on `cpu`); the first few spelled out.
fn hit_differences(tracer: &mut Tracer, bvh: &DeviceBvh, cpu: &TriangleBvh, rays: &[Ray], any: bool) -> Vec<String> {
    let buffer = upload_rays(rays);
    let mut out = Vec::new();
    if any {
        let mut flags = DeviceBuffer::<u32>::uninit(gpu(), "test occlusion", rays.len()).unwrap();
        flags.poison().unwrap();
        tracer.occluded(bvh, &buffer, &mut flags).unwrap();
        let mut expected = vec![false; rays.len()];
        cpu.occluded_batch(rays, &mut expected);
        for (i, (g, c)) in flags.download().unwrap().iter().zip(&expected).enumerate() {
            if *g != u32::from(*c) && out.len() < 5 {
                out.push(format!("ray {i} {:?}: gpu occluded {g:#x}, cpu {c}", rays[i]));
            }
        }
        return out;
    }
    let mut hits = DeviceBuffer::<GpuHit>::uninit(gpu(), "test hits", rays.len()).unwrap();
    hits.poison().unwrap();
    tracer.intersect(bvh, &buffer, &mut hits).unwrap();
    let mut expected: Vec<Option<Hit>> = vec![None; rays.len()];
    cpu.intersect_batch(rays, &mut expected);
    for (i, (g, c)) in hits.download().unwrap().iter().zip(&expected).enumerate() {
        if bytemuck::bytes_of(g) != bytemuck::bytes_of(&GpuHit::from_hit(*c)) && out.len() < 5 {
            out.push(format!("ray {i} {:?}: gpu {g:?}, cpu {c:?}", rays[i]));
        }
    }
    out
}

// ------------------------------------------------------------ tests

/// Triangles collapsed to points, one per position.
fn point_tris(points: &[Vec3]) -> Vec<Triangle> {
    points.iter().map(|&p| Triangle::new(p, p, p)).collect()
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn awkward_inputs_build_valid_trees() {
    let unit = Triangle::new(Vec3::ZERO, Vec3::X, Vec3::Y);
    let nan = Triangle::new(Vec3::splat(f32::NAN), Vec3::X, Vec3::Y);
    let mut rng = device::seeded_rng("awkward_inputs_build_valid_trees", 0xb1);
    let mut cases: Vec<(&str, Vec<Triangle>)> = vec![
        ("empty", vec![]),
        ("one triangle", vec![unit]),
        ("only non-finite", vec![nan, nan]),
        ("some non-finite", vec![unit, nan, unit, Triangle::new(Vec3::ZERO, Vec3::splat(f32::INFINITY), Vec3::ONE)]),
        ("geometric series", point_tris(&(0..120).map(|k| Vec3::splat(0.5f32.powi(k))).collect::<Vec<_>>())),
        ("huge coordinates", point_tris(&[Vec3::splat(-3e38), Vec3::splat(3e38), Vec3::ZERO, Vec3::new(1e-30, 0.0, 0.0), Vec3::new(2e-45, 0.0, 0.0)])),
    ];
    for n in [5, 64, 65, 100, 3000, 20_000] {
        cases.push(("coincident", vec![unit; n]));
    }
    for n in [63, 64, 65, 2048, 2049, 9000] {
        cases.push(("awkward soup", awkward_soup(&mut rng, n)));
    }
    let mut failures = Vec::new();
    for twins in registered().iter().chain(&variants()) {
        for (name, tris) in &cases {
            match build_both(twins, tris) {
                Ok((_, _, line)) => eprintln!("{name} ({} tris), {line}", tris.len()),
                Err(e) => failures.push(format!("{name} ({} tris): {e}", tris.len())),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn random_soups_match_the_cpu() {
    let mut rng = device::seeded_rng("random_soups_match_the_cpu", 0xb2);
    let mut tracer = Tracer::new(gpu()).unwrap();
    let soups = [
        ("awkward soup, 37 tris", awkward_soup(&mut rng, 37)),
        ("awkward soup, 20k tris", awkward_soup(&mut rng, 20_000)),
        ("awkward soup, 200k tris", awkward_soup(&mut rng, 200_000)),
        ("height field, 2x64x64 tris", grid_soup(&mut rng, 64)),
        ("height field, 2x512x512 tris", grid_soup(&mut rng, 512)),
    ];
    let mut failures = Vec::new();
    for twins in registered().iter().chain(&variants()) {
        for (name, tris) in &soups {
            let (bvh, cpu, line) = match build_both(twins, tris) {
                Ok(built) => built,
                Err(e) => {
                    failures.push(format!("{name}: {e}"));
                    continue;
                }
            };
            eprintln!("{name}, {line}");
            let rays = awkward_rays(&mut rng, tris, 50_000);
            for any in [false, true] {
                let differ = hit_differences(&mut tracer, &bvh, &cpu, &rays, any);
                if !differ.is_empty() {
                    failures.push(format!("{name}, {} (any hit: {any}):\n  {}", twins.label, differ.join("\n  ")));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Protocol rays at this size (the trace tests use 1920x1080; the builders
/// are what is checked here).
const WIDTH: u32 = 640;
const HEIGHT: u32 = 360;

#[test]
#[ignore = "needs a CUDA GPU"]
fn standard_scenes_match_the_cpu() {
    let mut tracer = Tracer::new(gpu()).unwrap();
    let mut failures = Vec::new();
    let mut checked = 0;
    for scene in scenes::SCENES {
        let Some(loaded) = scene.load() else { continue };
        checked += 1;
        let tris = &loaded.triangles;
        let primary = protocol::primary_rays(&loaded.camera, WIDTH, HEIGHT);
        let reference = TriangleBvh::build(tris);
        let mut primary_hits = vec![None; primary.len()];
        reference.intersect_batch(&primary, &mut primary_hits);
        let diag = protocol::scene_diagonal(tris);
        let diffuse = protocol::secondary_rays(&primary, &primary_hits, tris, diag);
        let ao_tmax = protocol::ao_tmax(diag);
        let ao: Vec<Ray> = diffuse.iter().map(|r| Ray::segment(r.origin, r.dir, 0.0, ao_tmax)).collect();
        for twins in registered() {
            let (bvh, cpu, line) = match build_both(&twins, tris) {
                Ok(built) => built,
                Err(e) => {
                    failures.push(format!("{}: {e}", loaded.name));
                    continue;
                }
            };
            eprintln!("{} ({} tris), {line}", loaded.name, tris.len());
            for (kind, rays, any) in [("primary", &primary, false), ("AO", &ao, true), ("diffuse", &diffuse, false)] {
                let differ = hit_differences(&mut tracer, &bvh, &cpu, rays, any);
                if !differ.is_empty() {
                    failures.push(format!("{}, {}, {kind} rays:\n  {}", loaded.name, twins.label, differ.join("\n  ")));
                }
            }
        }
    }
    eprintln!("{checked} of {} standard scenes checked", scenes::SCENES.len());
    if std::env::var_os("CAUSTIC_REQUIRE_SCENES").is_some() {
        assert_eq!(checked, scenes::SCENES.len(), "scenes are missing");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn bad_settings_and_exhausted_memory_are_clear_errors() {
    let bad = GpuSahBuilder::binned(BinnedSahConfig {
        bins: 1,
        ..BinnedSahConfig::DEFAULT
    });
    let err = bad
        .build_from_host(gpu(), &[Triangle::new(Vec3::ZERO, Vec3::X, Vec3::Y)])
        .map(|_| ())
        .unwrap_err();
    assert!(err.to_string().contains("bins"), "{err}");
    // Triangles filling half the free memory: their references (64 bytes
    // each, two buffers) cannot fit, so the build fails early, naming the
    // allocation. The poison bytes make every triangle the same finite point.
    let (free, _) = gpu().memory().unwrap();
    let n = (free / 2 / size_of::<GpuTriangle>()).min(GPU_SAH_MAX_TRIANGLES);
    let mut tris = DeviceBuffer::<GpuTriangle>::uninit(gpu(), "test triangles", n).unwrap();
    tris.poison().unwrap();
    let err = GpuSahBuilder::binned(BinnedSahConfig::DEFAULT)
        .build(gpu(), &tris)
        .map(|_| ())
        .unwrap_err();
    eprintln!("{n} triangles: {err}");
    assert!(err.to_string().contains("out of GPU memory"), "{err}");
}
