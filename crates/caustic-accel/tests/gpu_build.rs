//! The GPU builders (`DeviceBvh::build`: `lbvh`, `ploc`, `hlbvh`) against
//! their CPU twins.
//!
//! - `lbvh` and `ploc` must give the CPU builder's `Bvh2` node for node
//!   (boxes, children, leaf ranges, slot order) for the same triangles and
//!   spec, 30- and 63-bit codes, with and without leaf collapsing, on random
//!   soups (degenerate, huge, thin, duplicated and non-finite triangles,
//!   coincident centroids, chains deeper than `MAX_DEPTH`) and on every
//!   standard scene present; `hlbvh` (whose group subtrees differ from the
//!   CPU's by design) must come within 2 % of the CPU `hlbvh`'s SAH cost on
//!   the standard scenes with its default clusters, within 4 % with others.
//! - Every GPU-built tree must pass the structural validator
//!   (`DeviceBvh::validate`), and tracing it on the GPU must give the CPU
//!   reference's hits (the watertight test's `t`, triangle, `u`, `v` as
//!   bits; exact ties reported apart and required equal too) for random
//!   rays on the soups and the protocol's primary, AO and diffuse rays on
//!   the scenes.
//!
//! These need a CUDA GPU: run with `--include-ignored --test-threads=1` on
//! the GPU machine (`scripts/gpu-run.sh`). Each random test prints its
//! seed; set `CAUSTIC_TEST_SEED` to replay it.

#[path = "common/gpu_scenes.rs"]
mod scenes;

#[path = "common/device.rs"]
mod device;

#[path = "common/gpu_compare.rs"]
mod compare;

#[path = "common/soups.rs"]
mod soups;

use caustic_accel::bvh::build::upload_triangles;
use caustic_accel::bvh::traverse_cuda::Tracer;
use caustic_accel::bvh::triangle_bvh_cuda::DeviceBvh;
use caustic_accel::registry::MortonBuilderConfig;
use caustic_accel::{BuildInput, Bvh2, TriangleBvh, sah_cost};
use caustic_geom::{Pcg32, Ray, Triangle, Vec3, protocol};
use compare::{
    Report, compare_closest, compare_occluded, cpu_closest, cpu_occluded, gpu_closest,
    gpu_occluded, upload_rays,
};
use device::gpu;
use soups::{awkward_rays, awkward_soup, grid_soup};

/// The specs whose GPU tree must equal the CPU's node for node.
const EXACT_SPECS: &[&str] = &[
    "lbvh",
    "lbvh:bits=63",
    "lbvh:leaf=1",
    "lbvh:bits=63:leaf=1",
    "lbvh:bits=63:leaf=3",
    "ploc",
    "ploc:bits=63",
    "ploc:leaf=1:r=1",
    "ploc:r=40",
];

/// The `hlbvh` specs checked against the CPU's SAH cost on the scenes.
const HLBVH_SPECS: &[&str] = &["hlbvh", "hlbvh:k=12", "hlbvh:bits=63:k=18"];

/// How far the GPU `hlbvh`'s SAH cost may stray from the CPU's: 2 % for
/// the default 15-bit clusters (at most +1.5 %, on the dragon, measured on
/// an H200); 4 % for other prefixes, where bigger groups leave more of the
/// tree to PLOC (12 bits: +2.8 % on the dragon, within 1.7 % elsewhere).
fn hlbvh_sah_limit(spec: &str) -> f32 {
    if spec == "hlbvh" { 0.02 } else { 0.04 }
}

fn rng(test: &str) -> Pcg32 {
    device::seeded_rng(test, 0xb01d)
}

/// The largest leaf a spec allows.
fn max_leaf(config: &MortonBuilderConfig) -> usize {
    match config {
        MortonBuilderConfig::Lbvh(c) => c.max_leaf_size as usize,
        MortonBuilderConfig::Ploc(c) => c.max_leaf_size as usize,
        MortonBuilderConfig::Hlbvh(c) => c.max_leaf_size,
    }
}

/// A GPU build of `spec` over `tris`, validated; the downloaded tree.
fn gpu_build(spec: &str, tris: &[Triangle]) -> Result<(DeviceBvh, Bvh2), String> {
    let config = MortonBuilderConfig::parse(spec).map_err(|e| e.to_string())?;
    let device = upload_triangles(gpu(), tris).map_err(|e| e.to_string())?;
    let (bvh, stats) =
        DeviceBvh::build_with(gpu(), &device, config).map_err(|e| format!("{spec}: {e}"))?;
    let tree = bvh
        .validate(tris, max_leaf(&config))
        .map_err(|e| format!("{spec}: invalid tree: {e}"))?;
    if stats.nodes != tree.nodes.len() || stats.prims != tris.len() {
        return Err(format!("{spec}: stats {stats:?} disagree with the tree"));
    }
    let cpu_cost = sah_cost(&tree);
    if (stats.sah_cost - cpu_cost).abs() > 1e-4 * cpu_cost.max(1.0) {
        return Err(format!(
            "{spec}: device SAH {} vs {cpu_cost}",
            stats.sah_cost
        ));
    }
    Ok((bvh, tree))
}

/// The CPU twin's tree of `spec` over `tris`.
fn cpu_build(spec: &str, tris: &[Triangle]) -> Bvh2 {
    let config = MortonBuilderConfig::parse(spec).unwrap();
    config
        .cpu_builder()
        .build(&BuildInput::from_triangles(tris))
}

/// Where two trees first differ, or `None` when they are equal.
fn first_difference(gpu: &Bvh2, cpu: &Bvh2) -> Option<String> {
    if gpu.nodes.len() != cpu.nodes.len() {
        return Some(format!("{} nodes vs {}", gpu.nodes.len(), cpu.nodes.len()));
    }
    if let Some(i) = (0..gpu.nodes.len()).find(|&i| gpu.nodes[i] != cpu.nodes[i]) {
        return Some(format!(
            "node {i}: gpu {:?}, cpu {:?}",
            gpu.nodes[i], cpu.nodes[i]
        ));
    }
    let slots = gpu.prim_indices.iter().zip(&cpu.prim_indices);
    if let Some((slot, (g, c))) = slots.enumerate().find(|(_, (g, c))| g != c) {
        return Some(format!("slot {slot}: gpu {g}, cpu {c}"));
    }
    None
}

// ------------------------------------------------------------ random soups

/// Triangles whose centroids halve their distance to the origin: a Morton
/// tree as deep as the code is long, past MAX_DEPTH for 63-bit codes.
fn geometric_chain(n: usize) -> Vec<Triangle> {
    (0..n)
        .map(|k| {
            let c = Vec3::splat(0.7f32.powi(k as i32));
            let d = 0.001 * c.x;
            Triangle::new(c, c + Vec3::new(d, 0.0, 0.0), c + Vec3::new(0.0, d, d))
        })
        .collect()
}

/// Point-like triangles (centroids exactly on grid cells) whose 63-bit
/// codes have one bit set each, every bit once, above 1024 triangles at the
/// origin: Karras's tree is a chain 63 levels deep over a balanced tree of
/// 10 levels, past MAX_DEPTH, so the layout must rebalance as the CPU does.
fn deep_radix_chain() -> Vec<Triangle> {
    let point = |p: Vec3| Triangle::new(p, p, p);
    let mut tris = vec![point(Vec3::ZERO); 1024];
    tris.push(point(Vec3::ONE));
    for level in 0..21 {
        let x = 2f32.powi(level - 21);
        tris.extend(
            [
                Vec3::new(x, 0.0, 0.0),
                Vec3::new(0.0, x, 0.0),
                Vec3::new(0.0, 0.0, x),
            ]
            .map(point),
        );
    }
    tris
}

/// Every kind of input the builders must survive.
fn soups(rng: &mut Pcg32) -> Vec<(&'static str, Vec<Triangle>)> {
    let one = Triangle::new(Vec3::ZERO, Vec3::X, Vec3::Y);
    let nan = Triangle::new(Vec3::splat(f32::NAN), Vec3::X, Vec3::Y);
    let mut coincident_and_far = vec![one; 3000];
    coincident_and_far.extend(awkward_soup(rng, 500));
    vec![
        ("empty", Vec::new()),
        ("one triangle", vec![one]),
        (
            "two triangles",
            vec![one, Triangle::new(Vec3::ONE, Vec3::Z, Vec3::X)],
        ),
        ("only non-finite", vec![nan; 5]),
        ("one finite among non-finite", vec![nan, one, nan]),
        ("awkward soup, 37", awkward_soup(rng, 37)),
        ("awkward soup, 20k", awkward_soup(rng, 20_000)),
        ("awkward soup, 200k", awkward_soup(rng, 200_000)),
        ("height field, 2x128x128", grid_soup(rng, 128)),
        ("3000 coincident + 500 awkward", coincident_and_far),
        ("geometric chain, 120", geometric_chain(120)),
        ("deep radix chain", deep_radix_chain()),
    ]
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn lbvh_and_ploc_equal_the_cpu_node_for_node_on_random_soups() {
    let mut rng = rng("lbvh_and_ploc_equal_the_cpu_node_for_node_on_random_soups");
    let mut failures = Vec::new();
    for (name, tris) in soups(&mut rng) {
        for &spec in EXACT_SPECS {
            let outcome = gpu_build(spec, &tris).and_then(|(_, tree)| {
                match first_difference(&tree, &cpu_build(spec, &tris)) {
                    Some(difference) => Err(format!("differs from the CPU: {difference}")),
                    None => Ok(tree.shape()),
                }
            });
            match outcome {
                Ok(shape) => eprintln!(
                    "{name}, {spec}: equal ({} nodes, depth {})",
                    shape.nodes, shape.max_depth
                ),
                Err(e) => failures.push(format!("{name}, {spec}: {e}")),
            }
        }
        for &spec in HLBVH_SPECS {
            if let Err(e) = gpu_build(spec, &tris) {
                failures.push(format!("{name}: {e}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_built_trees_trace_like_the_cpu_on_random_soups() {
    let mut rng = rng("gpu_built_trees_trace_like_the_cpu_on_random_soups");
    let mut tracer = Tracer::new(gpu()).unwrap();
    let mut failures = Vec::new();
    for (name, tris) in soups(&mut rng) {
        if tris.is_empty() {
            continue;
        }
        let rays = awkward_rays(&mut rng, &tris, 100_000);
        let reference = TriangleBvh::build(&tris);
        let expected = (
            cpu_closest(&reference, &rays),
            cpu_occluded(&reference, &rays),
        );
        let buffer = upload_rays(&rays);
        for &spec in ["lbvh", "lbvh:bits=63", "ploc", "hlbvh"].iter() {
            let (bvh, _) = match gpu_build(spec, &tris) {
                Ok(built) => built,
                Err(e) => {
                    failures.push(format!("{name}: {e}"));
                    continue;
                }
            };
            let closest =
                compare_closest(&rays, &gpu_closest(&mut tracer, &bvh, &buffer), &expected.0);
            let any = compare_occluded(
                &rays,
                &gpu_occluded(&mut tracer, &bvh, &buffer),
                &expected.1,
            );
            for (kind, report) in [("closest", closest), ("any", any)] {
                let line = report.summary(&format!("{name}, {spec}, {kind}"));
                eprintln!("{line}");
                if !report.identical() {
                    failures.push(line);
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn specs_without_a_gpu_builder_are_clear_errors() {
    let tris = [Triangle::new(Vec3::ZERO, Vec3::X, Vec3::Y)];
    for spec in ["grid", "brute", "kdtree:small=8"] {
        let message = DeviceBvh::build_from_host(gpu(), &tris, spec)
            .err()
            .expect("no GPU builder")
            .to_string();
        assert!(
            message.contains("no GPU builder") && message.contains("lbvh, hlbvh, ploc"),
            "{message}"
        );
    }
    let message = DeviceBvh::build_from_host(gpu(), &tris, "ploc:r=999")
        .err()
        .unwrap()
        .to_string();
    assert!(message.contains("1..=256"), "{message}");
}

// ---------------------------------------------------------- standard scenes

/// The protocol's rays of one scene and the CPU reference's answers.
struct SceneRays {
    primary: Vec<Ray>,
    ao: Vec<Ray>,
    diffuse: Vec<Ray>,
    reference: TriangleBvh,
}

const WIDTH: u32 = 1280;
const HEIGHT: u32 = 720;

impl SceneRays {
    fn new(scene: &scenes::Loaded) -> Self {
        let reference = TriangleBvh::build(&scene.triangles);
        let primary = protocol::primary_rays(&scene.camera, WIDTH, HEIGHT);
        let hits = cpu_closest(&reference, &primary);
        let diag = protocol::scene_diagonal(&scene.triangles);
        let diffuse = protocol::secondary_rays(&primary, &hits, &scene.triangles, diag);
        let ao_tmax = protocol::ao_tmax(diag);
        let ao = diffuse
            .iter()
            .map(|r| Ray::segment(r.origin, r.dir, 0.0, ao_tmax))
            .collect();
        Self {
            primary,
            ao,
            diffuse,
            reference,
        }
    }

    /// Reports of primary closest, AO any and diffuse closest hits of the
    /// GPU traversal on `bvh` against the CPU reference.
    fn compare(&self, tracer: &mut Tracer, bvh: &DeviceBvh) -> Vec<(&'static str, Report)> {
        let closest = |tracer: &mut Tracer, rays: &[Ray]| {
            let buffer = upload_rays(rays);
            compare_closest(
                rays,
                &gpu_closest(tracer, bvh, &buffer),
                &cpu_closest(&self.reference, rays),
            )
        };
        let ao_buffer = upload_rays(&self.ao);
        let ao = compare_occluded(
            &self.ao,
            &gpu_occluded(tracer, bvh, &ao_buffer),
            &cpu_occluded(&self.reference, &self.ao),
        );
        vec![
            ("primary", closest(tracer, &self.primary)),
            ("AO", ao),
            ("diffuse", closest(tracer, &self.diffuse)),
        ]
    }
}

/// Builds every spec on one scene and checks it; lines for the log, and
/// the failures.
fn check_scene(tracer: &mut Tracer, scene: &scenes::Loaded) -> (Vec<String>, Vec<String>) {
    let tris = &scene.triangles;
    let rays = SceneRays::new(scene);
    let mut lines = vec![format!("{}: {} triangles", scene.name, tris.len())];
    let mut failures = Vec::new();
    let mut fail = |what: String, lines: &mut Vec<String>| {
        lines.push(format!("  FAILED {what}"));
        failures.push(format!("{}: {what}", scene.name));
    };
    for &spec in ["lbvh", "lbvh:bits=63", "ploc"].iter().chain(HLBVH_SPECS) {
        let (bvh, tree) = match gpu_build(spec, tris) {
            Ok(built) => built,
            Err(e) => {
                fail(e, &mut lines);
                continue;
            }
        };
        let cpu = cpu_build(spec, tris);
        let (gpu_cost, cpu_cost) = (sah_cost(&tree), sah_cost(&cpu));
        let exact = !spec.starts_with("hlbvh");
        let verdict = match first_difference(&tree, &cpu) {
            None => "equal to the CPU".to_owned(),
            Some(d) if exact => {
                fail(format!("{spec} differs from the CPU: {d}"), &mut lines);
                "differs".to_owned()
            }
            Some(_) => {
                let ratio = gpu_cost / cpu_cost;
                let limit = hlbvh_sah_limit(spec);
                if (ratio - 1.0).abs() > limit {
                    let message = format!(
                        "{spec}: SAH {gpu_cost:.3} vs CPU {cpu_cost:.3}, beyond {} %",
                        limit * 100.0
                    );
                    fail(message, &mut lines);
                }
                format!("SAH {:+.2} % of the CPU's", (ratio - 1.0) * 100.0)
            }
        };
        lines.push(format!(
            "  {spec}: valid, {} nodes, SAH {gpu_cost:.3} (CPU {cpu_cost:.3}), {verdict}",
            tree.nodes.len()
        ));
        for (kind, report) in rays.compare(tracer, &bvh) {
            let line = report.summary(&format!("{spec} {kind}"));
            if report.identical() {
                lines.push(format!("    {line}"));
            } else {
                fail(line, &mut lines);
            }
        }
    }
    (lines, failures)
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn standard_scenes_build_like_the_cpu_and_trace_identically() {
    let mut tracer = Tracer::new(gpu()).unwrap();
    let mut failures = Vec::new();
    let mut checked = 0;
    for scene in scenes::SCENES {
        let Some(loaded) = scene.load() else { continue };
        let (lines, failed) = check_scene(&mut tracer, &loaded);
        eprintln!("{}", lines.join("\n"));
        failures.extend(failed);
        checked += 1;
    }
    eprintln!(
        "{checked} of {} standard scenes checked",
        scenes::SCENES.len()
    );
    if std::env::var_os("CAUSTIC_REQUIRE_SCENES").is_some() {
        assert_eq!(checked, scenes::SCENES.len(), "scenes are missing");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
