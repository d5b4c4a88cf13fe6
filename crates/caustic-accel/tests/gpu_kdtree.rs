//! The SAH kd-tree over triangles on the GPU against the CPU kd-tree and
//! brute force.
//!
//! - Build: the tree built on the device ([`GpuKdTree`]), downloaded, must
//!   pass [`KdTree::validate`] (every triangle covered, cells partition
//!   space, culling boxes exact) and be the CPU builder's tree node for node
//!   (same planes, same leaves listing the same triangles in the same
//!   order; only the array layout differs), with the same figures (nodes,
//!   leaves, references, depth, SAH cost).
//! - Traversal: every closest hit (`t`, triangle, `u`, `v`, as bits) and
//!   every any-hit answer of [`KdTracer`] must equal the CPU kd-tree's and
//!   brute force's on random soups (degenerate, huge, flat, thin,
//!   duplicated and non-finite triangles) with random, adversarial and
//!   far-away rays, and on the standard scenes with the ray protocol's
//!   primary (tile and buffer order), AO and diffuse rays generated on the
//!   device, there also against the BVH [`Tracer`] (held to brute force by
//!   `gpu_trace.rs`) on every ray.
//!
//! These need a CUDA GPU: run with `--include-ignored --test-threads=1` on
//! the GPU machine (`scripts/gpu-kdtree-run.sh`). Each random test prints
//! its seed; set `CAUSTIC_TEST_SEED` to replay it.

#[path = "common/gpu_scenes.rs"]
mod scenes;

#[path = "common/device.rs"]
mod device;

#[path = "common/soups.rs"]
mod soups;

use caustic_accel::bvh::traverse_cuda::{GpuHit, GpuRay, Tracer};
use caustic_accel::bvh::triangle_bvh_cuda::{DeviceBvh, GpuTriangle};
use caustic_accel::kdtree::build_cuda::GpuKdTree;
use caustic_accel::kdtree::traverse_cuda::KdTracer;
use caustic_accel::kdtree::{KdTree, KdTreeConfig, TriangleKdTree};
use caustic_accel::protocol_cuda as rays;
use caustic_accel::{Accel, BruteForce, TriangleBvh};
use caustic_geom::protocol;
use caustic_geom::{Hit, Pcg32, Ray, Triangle, Vec3};
use caustic_gpu::{DeviceBuffer, GpuError};
use device::gpu;
use soups::{awkward_rays, awkward_soup, far_rays, grid_soup};

/// Primary rays of the scene tests (the benchmark traces 1920x1080).
const WIDTH: u32 = 960;
const HEIGHT: u32 = 544;

fn configs() -> [(&'static str, KdTreeConfig); 3] {
    [
        ("kdtree", KdTreeConfig::DEFAULT),
        (
            "kdtree T=8 C_e=0.1 C_trav=0.5",
            KdTreeConfig {
                small_node_max: 8,
                empty_space_ratio: 0.1,
                traversal_cost: 0.5,
                ..KdTreeConfig::DEFAULT
            },
        ),
        (
            "kdtree max depth 12",
            KdTreeConfig {
                max_depth: 12,
                ..KdTreeConfig::DEFAULT
            },
        ),
    ]
}

fn upload_triangles(tris: &[Triangle]) -> DeviceBuffer<GpuTriangle> {
    let words: Vec<GpuTriangle> = tris
        .iter()
        .enumerate()
        .map(|(i, t)| GpuTriangle::new(t, i as u32))
        .collect();
    DeviceBuffer::from_slice(gpu(), "test triangles", &words).unwrap()
}

/// The first difference between two trees walked side by side (same
/// planes, same leaves in the same order), or `None`.
fn tree_difference(gpu_tree: &KdTree, cpu_tree: &KdTree) -> Option<String> {
    if gpu_tree.nodes.len() != cpu_tree.nodes.len() || gpu_tree.prims.len() != cpu_tree.prims.len()
    {
        return Some(format!(
            "{} nodes and {} references on the GPU, {} and {} on the CPU",
            gpu_tree.nodes.len(),
            gpu_tree.prims.len(),
            cpu_tree.nodes.len(),
            cpu_tree.prims.len()
        ));
    }
    if gpu_tree.bounds != cpu_tree.bounds {
        return Some(format!(
            "root cells {:?} and {:?}",
            gpu_tree.bounds, cpu_tree.bounds
        ));
    }
    if gpu_tree.nodes.is_empty() {
        return None;
    }
    let mut stack = vec![(0usize, 0usize)];
    while let Some((g, c)) = stack.pop() {
        let (a, b) = (&gpu_tree.nodes[g], &cpu_tree.nodes[c]);
        if gpu_tree.ref_bounds[g] != cpu_tree.ref_bounds[c] {
            return Some(format!("GPU node {g} / CPU node {c}: culling boxes differ"));
        }
        match (a.is_leaf(), b.is_leaf()) {
            (true, true) => {
                let (pa, pb) = (&gpu_tree.prims[a.refs()], &cpu_tree.prims[b.refs()]);
                if pa != pb {
                    return Some(format!(
                        "GPU leaf {g} holds {pa:?}, CPU leaf {c} holds {pb:?}"
                    ));
                }
            }
            (false, false) => {
                if a.axis() != b.axis() || a.split() != b.split() {
                    return Some(format!(
                        "GPU node {g} splits {} at {}, CPU node {c} {} at {}",
                        a.axis(),
                        a.split(),
                        b.axis(),
                        b.split()
                    ));
                }
                stack.push((a.left_child(), b.left_child()));
                stack.push((a.left_child() + 1, b.left_child() + 1));
            }
            _ => return Some(format!("GPU node {g} and CPU node {c}: leaf and inner")),
        }
    }
    None
}

/// Builds on the device, downloads, validates and compares with the CPU
/// build; returns the device tree and the CPU kd-tree.
fn build_both(
    what: &str,
    tris: &[Triangle],
    config: &KdTreeConfig,
) -> Result<(GpuKdTree, TriangleKdTree), String> {
    let device_tris = upload_triangles(tris);
    let tree = GpuKdTree::build(gpu(), &device_tris, config).map_err(|e| format!("{what}: {e}"))?;
    let cpu = TriangleKdTree::build_with(tris, *config);
    let down = tree.download().map_err(|e| format!("{what}: {e}"))?;
    down.validate(tris)
        .map_err(|e| format!("{what}: the device tree is invalid: {e}"))?;
    if let Some(d) = tree_difference(&down, cpu.tree()) {
        return Err(format!("{what}: not the CPU's tree: {d}"));
    }
    let s = tree.stats();
    let shape = down.shape();
    eprintln!(
        "{what}: {} triangles, {} nodes, {} leaves, {} refs, depth {}, SAH {:.3} (CPU {:.3}), \
         build {:.3} ms device ({:.3} ms host, {} levels, {} small roots), peak {} KiB",
        tris.len(),
        s.nodes,
        s.leaves,
        s.references,
        s.max_depth,
        s.sah_cost,
        cpu.stats().sah_cost,
        s.stages_ms(),
        s.total_ms,
        s.levels,
        s.small_roots,
        s.peak_bytes / 1024
    );
    let sah = down.sah_cost();
    let sah_close = (s.sah_cost - sah).abs() <= 1e-4 * sah.abs().max(1.0);
    if (s.nodes, s.leaves, s.references, s.max_depth)
        != (shape.nodes, shape.leaves, shape.references, shape.max_depth)
        || !sah_close
    {
        return Err(format!(
            "{what}: stats {s:?} disagree with the tree's shape {shape:?} (SAH {sah})"
        ));
    }
    Ok((tree, cpu))
}

fn upload_rays(rays: &[Ray]) -> DeviceBuffer<GpuRay> {
    let words: Vec<GpuRay> = rays.iter().map(GpuRay::from).collect();
    DeviceBuffer::from_slice(gpu(), "test rays", &words).unwrap()
}

/// Closest hits and occlusion of `rays` on the GPU tree, poisoned first so
/// that an unwritten result differs.
fn gpu_results(
    tracer: &KdTracer,
    tree: &GpuKdTree,
    rays: &DeviceBuffer<GpuRay>,
    image_width: Option<u32>,
) -> Result<(Vec<GpuHit>, Vec<u32>), GpuError> {
    let mut hits = DeviceBuffer::<GpuHit>::uninit(gpu(), "test hits", rays.len())?;
    hits.poison()?;
    match image_width {
        Some(w) => tracer.intersect_image(tree, rays, w, &mut hits)?,
        None => tracer.intersect(tree, rays, &mut hits)?,
    }
    let mut occluded = DeviceBuffer::<u32>::uninit(gpu(), "test occlusion", rays.len())?;
    occluded.poison()?;
    tracer.occluded(tree, rays, &mut occluded)?;
    Ok((hits.download()?, occluded.download()?))
}

/// A CPU structure's answers for `rays`.
fn cpu_results(accel: &dyn Accel, rays: &[Ray]) -> (Vec<GpuHit>, Vec<u32>) {
    let mut hits: Vec<Option<Hit>> = vec![None; rays.len()];
    accel.intersect_batch(rays, &mut hits);
    let mut occluded = vec![false; rays.len()];
    accel.occluded_batch(rays, &mut occluded);
    (
        hits.into_iter().map(GpuHit::from_hit).collect(),
        occluded.into_iter().map(u32::from).collect(),
    )
}

/// A summary of the rays whose results differ (the first few spelled out),
/// or `None` when every result is identical to the bit.
fn differences(
    what: &str,
    rays: &[Ray],
    want: &[GpuHit],
    got: &[GpuHit],
    want_any: &[u32],
    got_any: &[u32],
) -> Option<String> {
    let bits = |h: &GpuHit| bytemuck::cast::<GpuHit, [u32; 4]>(*h);
    let mut details = Vec::new();
    let mut count = 0;
    for i in 0..rays.len() {
        if bits(&want[i]) != bits(&got[i]) || want_any[i] != got_any[i] {
            count += 1;
            if details.len() < 6 {
                details.push(format!(
                    "ray {i} {:?}: want {:?} / {}, got {:?} / {}",
                    rays[i], want[i], want_any[i], got[i], got_any[i]
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

/// Records a comparison: printed, and kept when it failed.
fn report(failures: &mut Vec<String>, line: Option<String>, label: &str, rays: usize) {
    match line {
        Some(line) => {
            eprintln!("{line}");
            failures.push(line);
        }
        None => eprintln!("{label}: {rays} rays, identical"),
    }
}

fn soups(rng: &mut Pcg32) -> Vec<(String, Vec<Triangle>)> {
    let flat = |rng: &mut Pcg32| -> Vec<Triangle> {
        awkward_soup(rng, 3000)
            .into_iter()
            .map(|t| {
                let squash = Vec3::new(1.0, 1.0, 0.0);
                Triangle::new(t.v0 * squash, t.v1 * squash, t.v2 * squash)
            })
            .collect()
    };
    // Long slivers along x: thin in y and z, straddling every x split.
    let thin = |rng: &mut Pcg32| -> Vec<Triangle> {
        (0..2000)
            .map(|_| {
                let y = rng.next_f32() * 10.0;
                let z = rng.next_f32() * 10.0;
                let x = rng.next_f32() * 100.0;
                Triangle::new(
                    Vec3::new(x, y, z),
                    Vec3::new(x + 80.0, y + 1e-3, z),
                    Vec3::new(x + 40.0, y, z + 1e-4),
                )
            })
            .collect()
    };
    let mut huge = awkward_soup(rng, 2000);
    huge.push(Triangle::new(
        Vec3::new(-1e5, -1e5, 0.0),
        Vec3::new(1e5, -1e5, 0.1),
        Vec3::new(0.0, 1e5, -0.1),
    ));
    let nan = Triangle::new(Vec3::splat(f32::NAN), Vec3::X, Vec3::Y);
    let mut with_nan = awkward_soup(rng, 500);
    with_nan.insert(17, nan);
    vec![
        ("empty".into(), Vec::new()),
        ("one non-finite".into(), vec![nan]),
        (
            "one triangle".into(),
            vec![Triangle::new(Vec3::ZERO, Vec3::X, Vec3::Y)],
        ),
        (
            "200 duplicates".into(),
            vec![Triangle::new(Vec3::ZERO, Vec3::X, Vec3::Y); 200],
        ),
        (
            "100 points".into(),
            vec![Triangle::new(Vec3::ONE, Vec3::ONE, Vec3::ONE); 100],
        ),
        ("awkward soup, 37".into(), awkward_soup(rng, 37)),
        ("awkward soup with a NaN, 501".into(), with_nan),
        ("awkward soup, 6k".into(), awkward_soup(rng, 6_000)),
        ("flat awkward soup, 3k".into(), flat(rng)),
        ("thin slivers, 2k".into(), thin(rng)),
        ("soup with a huge triangle".into(), huge),
        ("height field, 2x64x64".into(), grid_soup(rng, 64)),
        ("height field, 2x256x256".into(), grid_soup(rng, 256)),
    ]
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn random_soups_build_the_cpu_tree_and_trace_as_brute_force() {
    let mut rng = device::seeded_rng(
        "random_soups_build_the_cpu_tree_and_trace_as_brute_force",
        0x6b64,
    );
    let tracer = KdTracer::new(gpu()).unwrap();
    let mut failures = Vec::new();
    for (name, tris) in &soups(&mut rng) {
        let mut rays = if tris.is_empty() {
            vec![Ray::new(Vec3::splat(-1.0), Vec3::ONE)]
        } else {
            awkward_rays(&mut rng, tris, 30_000)
        };
        if tris.iter().any(Triangle::is_finite) {
            rays.extend(far_rays(&mut rng, tris, 2_000));
        }
        let device_rays = upload_rays(&rays);
        let brute = BruteForce::new(tris);
        let (brute_hits, brute_any) = cpu_results(&brute, &rays);
        for (config_name, config) in configs() {
            let what = format!("{name}, {config_name}");
            let (tree, cpu) = match build_both(&what, tris, &config) {
                Ok(both) => both,
                Err(e) => {
                    eprintln!("{e}");
                    failures.push(e);
                    continue;
                }
            };
            let (got, got_any) = gpu_results(&tracer, &tree, &device_rays, None).unwrap();
            let label = format!("{what} vs brute force");
            let line = differences(&label, &rays, &brute_hits, &got, &brute_any, &got_any);
            report(&mut failures, line, &label, rays.len());
            let (want, want_any) = cpu_results(&cpu, &rays);
            let label = format!("{what} vs the CPU kd-tree");
            let line = differences(&label, &rays, &want, &got, &want_any, &got_any);
            report(&mut failures, line, &label, rays.len());
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn empty_trees_miss_and_bad_input_is_an_error() {
    let tracer = KdTracer::new(gpu()).unwrap();
    let rays = upload_rays(&[
        Ray::new(Vec3::ZERO, Vec3::X),
        Ray::new(Vec3::splat(-1.0), Vec3::ONE),
    ]);
    let nan = Triangle::new(Vec3::splat(f32::NAN), Vec3::X, Vec3::Y);
    for tris in [Vec::new(), vec![nan; 3]] {
        let tree =
            GpuKdTree::build(gpu(), &upload_triangles(&tris), &KdTreeConfig::DEFAULT).unwrap();
        assert!(tree.is_empty());
        assert_eq!(tree.stats().nodes, 0);
        assert_eq!(tree.download().unwrap(), KdTree::empty());
        let (hits, any) = gpu_results(&tracer, &tree, &rays, None).unwrap();
        assert!(hits.iter().all(|h| h.to_hit().is_none()), "{hits:?}");
        assert_eq!(any, [0, 0]);
    }
    let one = upload_triangles(&[Triangle::new(Vec3::ZERO, Vec3::X, Vec3::Y)]);
    let tree = GpuKdTree::build(gpu(), &one, &KdTreeConfig::DEFAULT).unwrap();
    let mut hits = DeviceBuffer::<GpuHit>::uninit(gpu(), "hits", 3).unwrap();
    let mismatch = tracer.intersect(&tree, &rays, &mut hits).unwrap_err();
    assert!(
        matches!(mismatch, GpuError::LengthMismatch { .. }),
        "{mismatch}"
    );
    let wide = KdTreeConfig {
        small_node_max: 100,
        ..KdTreeConfig::DEFAULT
    };
    match GpuKdTree::build(gpu(), &one, &wide) {
        Err(e @ GpuError::Invalid { .. }) => eprintln!("as expected: {e}"),
        Err(e) => panic!("expected an invalid configuration, got {e}"),
        Ok(_) => panic!("built with 100 references per small root"),
    }
    // Out of memory: fill the device but for about 1 GiB, then build over
    // 8 M triangles (384 MiB of them, several times that to build).
    let mut rng = Pcg32::new(3, 5);
    let big = awkward_soup(&mut rng, 8_000_000);
    let big = upload_triangles(&big);
    let mut filler = Vec::new();
    while let Ok(chunk) = DeviceBuffer::<u8>::uninit(gpu(), "filler", 1 << 30) {
        filler.push(chunk);
    }
    filler.pop();
    match GpuKdTree::build(gpu(), &big, &KdTreeConfig::DEFAULT) {
        Err(e @ GpuError::OutOfMemory { .. }) => {
            eprintln!("as expected: {e}");
            assert!(e.to_string().contains("kd-tree"), "{e}");
        }
        Err(e) => panic!("expected out of memory, got {e}"),
        Ok(t) => eprintln!(
            "note: the build fit in the memory left ({:?}); out of memory not reached",
            t.stats()
        ),
    }
    drop(filler);
    gpu().synchronize().unwrap();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn standard_scenes_build_the_cpu_tree_and_trace_as_the_cpu() {
    let tracer = KdTracer::new(gpu()).unwrap();
    let mut bvh_tracer = Tracer::new(gpu()).unwrap();
    let mut failures = Vec::new();
    let mut checked = 0;
    for scene in scenes::SCENES {
        let Some(loaded) = scene.load() else { continue };
        checked += 1;
        let name = &loaded.name;
        let tris = &loaded.triangles;
        let what = format!("{name}, kdtree");
        let (tree, cpu) = match build_both(&what, tris, &KdTreeConfig::DEFAULT) {
            Ok(both) => both,
            Err(e) => {
                eprintln!("{e}");
                failures.push(e);
                continue;
            }
        };
        let accel = TriangleBvh::build(tris);
        let bvh = DeviceBvh::upload(gpu(), &accel).unwrap();
        let camera = scenes::gpu_camera(&loaded.camera);
        let primary = rays::primary_rays(gpu(), &camera, WIDTH, HEIGHT).unwrap();
        let mut hits =
            DeviceBuffer::<GpuHit>::uninit(gpu(), "primary hits", primary.len()).unwrap();
        bvh_tracer.intersect(&bvh, &primary, &mut hits).unwrap();
        let diag = protocol::scene_diagonal(tris);
        let secondary = rays::secondary_rays(&bvh, &primary, &hits, diag).unwrap();
        let brute = BruteForce::new(tris);
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
            let (got, got_any) = gpu_results(&tracer, &tree, device_rays, image).unwrap();
            // The BVH on the device: every ray, closest and any hit.
            let mut want = DeviceBuffer::<GpuHit>::uninit(gpu(), "bvh hits", host.len()).unwrap();
            bvh_tracer.intersect(&bvh, device_rays, &mut want).unwrap();
            let mut want_any = DeviceBuffer::<u32>::uninit(gpu(), "bvh any", host.len()).unwrap();
            bvh_tracer
                .occluded(&bvh, device_rays, &mut want_any)
                .unwrap();
            let (want, want_any) = (want.download().unwrap(), want_any.download().unwrap());
            let label = format!("{what} {pass} vs the BVH");
            let line = differences(&label, &host, &want, &got, &want_any, &got_any);
            report(&mut failures, line, &label, host.len());
            // The CPU kd-tree on every 4th ray, brute force on every 256th
            // (their time, not the GPU's, sets the test's length).
            for (every, cpu_accel, against) in [
                (4, &cpu as &dyn Accel, "the CPU kd-tree"),
                (256, &brute as &dyn Accel, "brute force"),
            ] {
                let sample: Vec<Ray> = host.iter().step_by(every).copied().collect();
                let (cpu_hits, cpu_any) = cpu_results(cpu_accel, &sample);
                let got: Vec<GpuHit> = got.iter().step_by(every).copied().collect();
                let got_any: Vec<u32> = got_any.iter().step_by(every).copied().collect();
                let label = format!("{what} {pass} vs {against} (every {every}th ray)");
                let line = differences(&label, &sample, &cpu_hits, &got, &cpu_any, &got_any);
                report(&mut failures, line, &label, sample.len());
            }
        }
    }
    eprintln!(
        "{checked} of {} standard scenes checked",
        scenes::SCENES.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
