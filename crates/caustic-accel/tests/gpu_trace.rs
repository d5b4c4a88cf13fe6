//! The GPU traversal and the GPU ray generators against their CPU twins.
//!
//! - Traversal: every closest hit (`t`, triangle, `u`, `v`, compared as
//!   bits) and every any-hit answer of the GPU on a [`DeviceBvh`] must equal
//!   `TriangleBvh`'s on the same tree, on random triangle soups (degenerate,
//!   huge, flat, duplicated and non-finite triangles, shared edges) with
//!   random and adversarial rays, and on every standard scene with the ray
//!   protocol's primary, AO and diffuse rays at 1920x1080. A difference
//!   that is an exact tie (same `t`, other triangle) is reported apart; the
//!   tie rule makes even those equal, and the tests require it.
//! - Rays: the GPU's primary rays must equal `caustic_geom::protocol`'s
//!   bit for bit; its secondary rays may differ only where CUDA's `cos` and
//!   `sin` round differently from glibc's: at most one ulp, in very few rays.
//!
//! These need a CUDA GPU: run with `--include-ignored --test-threads=1` on
//! the GPU machine (`scripts/gpu-run.sh`, which unpacks the carried scenes,
//! points `CAUSTIC_SCENES` at them and sets `CAUSTIC_REQUIRE_SCENES`). Each random test prints its seed;
//! set `CAUSTIC_TEST_SEED` to replay it.

#[path = "common/gpu_scenes.rs"]
mod scenes;

#[path = "common/device.rs"]
mod device;

#[path = "common/soups.rs"]
mod soups;

#[path = "common/gpu_compare.rs"]
mod compare;

use caustic_accel::TriangleBvh;
use caustic_accel::bvh::traverse_cuda::{GpuHit, GpuRay, Tracer};
use caustic_accel::bvh::triangle_bvh_cuda::DeviceBvh;
use caustic_accel::protocol_cuda as rays;
use caustic_geom::protocol;
use caustic_geom::{Pcg32, Ray, Triangle, Vec3};
use caustic_gpu::DeviceBuffer;
use compare::{
    Report, compare_closest, compare_occluded, cpu_closest, cpu_occluded, gpu_closest,
    gpu_closest_image, gpu_occluded, upload_rays,
};
use device::gpu;
use soups::{awkward_rays, awkward_soup, grid_soup};

const WIDTH: u32 = 1920;
const HEIGHT: u32 = 1080;

fn rng(test: &str) -> Pcg32 {
    device::seeded_rng(test, 0x7ace)
}

/// Rays that differ in any bit, and the largest difference in ulps of any
/// component.
fn compare_rays(gpu: &[GpuRay], cpu: &[Ray]) -> (usize, u32, Vec<String>) {
    assert_eq!(gpu.len(), cpu.len(), "ray counts differ");
    let mut differ = 0;
    let mut max_ulps = 0;
    let mut details = Vec::new();
    for (i, (g, c)) in gpu.iter().zip(cpu).enumerate() {
        let expected = GpuRay::from(c);
        let g_words: &[f32; 8] = bytemuck::cast_ref(g);
        let c_words: &[f32; 8] = bytemuck::cast_ref(&expected);
        let ulps = g_words
            .iter()
            .zip(c_words)
            .map(|(a, b)| (a.to_bits() as i32).abs_diff(b.to_bits() as i32))
            .max()
            .unwrap();
        if ulps > 0 {
            differ += 1;
            max_ulps = max_ulps.max(ulps);
            if details.len() < 4 {
                details.push(format!("ray {i}: gpu {g:?}, cpu {expected:?}"));
            }
        }
    }
    (differ, max_ulps, details)
}

/// Traces `rays` on the GPU and the CPU with the same tree over `tris`;
/// returns the closest-hit and any-hit reports.
fn trace_both(tracer: &mut Tracer, tris: &[Triangle], rays: &[Ray]) -> (Report, Report) {
    let accel = TriangleBvh::build(tris);
    let bvh = DeviceBvh::upload(gpu(), &accel).unwrap();
    let buffer = upload_rays(rays);
    let closest = compare_closest(
        rays,
        &gpu_closest(tracer, &bvh, &buffer),
        &cpu_closest(&accel, rays),
    );
    let any = compare_occluded(
        rays,
        &gpu_occluded(tracer, &bvh, &buffer),
        &cpu_occluded(&accel, rays),
    );
    (closest, any)
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn random_soups_match_the_cpu_traversal() {
    let mut rng = rng("random_soups_match_the_cpu_traversal");
    let mut tracer = Tracer::new(gpu()).unwrap();
    let mut failures = Vec::new();
    for (name, tris) in [
        ("awkward soup, 1 tri", awkward_soup(&mut rng, 1)),
        ("awkward soup, 37 tris", awkward_soup(&mut rng, 37)),
        ("awkward soup, 20k tris", awkward_soup(&mut rng, 20_000)),
        ("awkward soup, 200k tris", awkward_soup(&mut rng, 200_000)),
        ("height field, 2x64x64 tris", grid_soup(&mut rng, 64)),
        ("height field, 2x512x512 tris", grid_soup(&mut rng, 512)),
    ] {
        let rays = awkward_rays(&mut rng, &tris, 300_000);
        let (closest, any) = trace_both(&mut tracer, &tris, &rays);
        for (kind, report) in [("closest", closest), ("any", any)] {
            let line = report.summary(&format!("{name}, {kind}"));
            eprintln!("{line}");
            if !report.identical() {
                failures.push(line);
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn empty_tree_misses_and_single_leaf_tree_hits() {
    let mut tracer = Tracer::new(gpu()).unwrap();
    let rays = [
        Ray::new(Vec3::new(0.2, 0.2, -1.0), Vec3::Z),
        Ray::new(Vec3::new(0.9, 0.9, -1.0), Vec3::Z),
    ];
    let buffer = upload_rays(&rays);
    let empty = DeviceBvh::upload(gpu(), &TriangleBvh::build(&[])).unwrap();
    assert_eq!(gpu_closest(&mut tracer, &empty, &buffer), [GpuHit::MISS; 2]);
    assert_eq!(gpu_occluded(&mut tracer, &empty, &buffer), [0, 0]);
    let tri = [Triangle::new(Vec3::ZERO, Vec3::X, Vec3::Y)];
    let (closest, any) = trace_both(&mut tracer, &tri, &rays);
    assert!(closest.identical() && any.identical());
    let one = DeviceBvh::upload(gpu(), &TriangleBvh::build(&tri)).unwrap();
    let hits = gpu_closest(&mut tracer, &one, &buffer);
    assert_eq!((hits[0].t, hits[0].prim), (1.0, 0));
    assert_eq!(hits[1], GpuHit::MISS);
}

// ---------------------------------------------------------- standard scenes

/// Everything one scene checks; lines for the log, and whether all passed.
struct SceneCheck {
    lines: Vec<String>,
    passed: bool,
}

impl SceneCheck {
    fn traversal(&mut self, what: &str, report: &Report) {
        self.lines.push(report.summary(what));
        self.passed &= report.identical();
    }

    /// Ray generation: `exact` demands identical bits; otherwise at most
    /// one ulp in at most one ray in 100 000 (CUDA's cos/sin).
    fn rays(&mut self, what: &str, gpu: &[GpuRay], cpu: &[Ray], exact: bool) {
        let (differ, max_ulps, details) = compare_rays(gpu, cpu);
        let ok = differ == 0 || (!exact && max_ulps <= 1 && differ * 100_000 <= cpu.len());
        let mut line = format!(
            "{what}: {} rays, {differ} differ from the CPU's (largest difference {max_ulps} ulp)",
            cpu.len()
        );
        for d in details {
            line += &format!("\n    {d}");
        }
        self.lines.push(line);
        self.passed &= ok;
    }
}

fn check_scene(tracer: &mut Tracer, scene: &scenes::Loaded) -> SceneCheck {
    let mut check = SceneCheck {
        lines: vec![format!(
            "{}: {} triangles",
            scene.name,
            scene.triangles.len()
        )],
        passed: true,
    };
    let accel = TriangleBvh::build(&scene.triangles);
    let bvh = DeviceBvh::upload(gpu(), &accel).unwrap();

    // Primary rays: generation, then tracing the CPU's rays on both sides.
    let cpu_primary = protocol::primary_rays(&scene.camera, WIDTH, HEIGHT);
    let gpu_primary =
        rays::primary_rays(gpu(), &scenes::gpu_camera(&scene.camera), WIDTH, HEIGHT).unwrap();
    check.rays(
        "primary ray generation",
        &gpu_primary.download().unwrap(),
        &cpu_primary,
        true,
    );
    let cpu_hits = cpu_closest(&accel, &cpu_primary);
    let primary = upload_rays(&cpu_primary);
    let gpu_hits = gpu_closest_image(tracer, &bvh, &primary, WIDTH);
    let report = compare_closest(&cpu_primary, &gpu_hits, &cpu_hits);
    check.traversal("primary closest hits (8x4 tile order)", &report);
    let in_buffer_order = gpu_closest(tracer, &bvh, &primary);
    let report = compare_closest(&cpu_primary, &in_buffer_order, &cpu_hits);
    check.traversal("primary closest hits (buffer order)", &report);

    // Secondary rays: the GPU's from its own primary hits, the CPU's from
    // its own; then the CPU's rays traced on both sides.
    let diag = protocol::scene_diagonal(&scene.triangles);
    let cpu_secondary = protocol::secondary_rays(&cpu_primary, &cpu_hits, &scene.triangles, diag);
    let ao_tmax = protocol::ao_tmax(diag);
    let cpu_ao: Vec<Ray> = cpu_secondary
        .iter()
        .map(|r| Ray::segment(r.origin, r.dir, 0.0, ao_tmax))
        .collect();
    let gpu_hit_buffer = DeviceBuffer::from_slice(gpu(), "primary hits", &gpu_hits).unwrap();
    let generated = rays::secondary_rays(&bvh, &gpu_primary, &gpu_hit_buffer, diag).unwrap();
    assert_eq!(generated.ao_tmax, ao_tmax);
    let gpu_diffuse = generated.diffuse.download().unwrap();
    check.rays(
        "diffuse ray generation",
        &gpu_diffuse,
        &cpu_secondary,
        false,
    );
    check.rays(
        "AO ray generation",
        &generated.ao.download().unwrap(),
        &cpu_ao,
        false,
    );

    let ao = upload_rays(&cpu_ao);
    let any = compare_occluded(
        &cpu_ao,
        &gpu_occluded(tracer, &bvh, &ao),
        &cpu_occluded(&accel, &cpu_ao),
    );
    check.traversal("AO any hits", &any);
    let diffuse = upload_rays(&cpu_secondary);
    let closest = compare_closest(
        &cpu_secondary,
        &gpu_closest(tracer, &bvh, &diffuse),
        &cpu_closest(&accel, &cpu_secondary),
    );
    check.traversal("diffuse closest hits", &closest);
    check
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn standard_scenes_match_the_cpu_traversal_and_rays() {
    let mut tracer = Tracer::new(gpu()).unwrap();
    let mut failed = Vec::new();
    let mut checked = 0;
    for scene in scenes::SCENES {
        let Some(loaded) = scene.load() else { continue };
        let check = check_scene(&mut tracer, &loaded);
        eprintln!("{}", check.lines.join("\n  "));
        checked += 1;
        if !check.passed {
            failed.push(loaded.name);
        }
    }
    eprintln!(
        "{checked} of {} standard scenes checked",
        scenes::SCENES.len()
    );
    // gpu-run.sh carries every scene; there a missing one is a failure.
    if std::env::var_os("CAUSTIC_REQUIRE_SCENES").is_some() {
        assert_eq!(checked, scenes::SCENES.len(), "scenes are missing");
    }
    assert!(failed.is_empty(), "GPU differs from the CPU on {failed:?}");
}
