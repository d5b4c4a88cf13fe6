//! The GPU refit (`bvh/refit_cuda.rs`) against the CPU refit and against
//! fresh builds, on every frame of a short animation (the built-in
//! `cornell-caustics-moving`, whose glass sphere moves; and the BART robots
//! where `CAUSTIC_SCENES` holds them).
//!
//! - The refitted device tree's boxes equal [`Bvh2::refit`]'s over the same
//!   triangles, bit for bit (the sign of a zero aside: min and max leave it
//!   to the operand order, and the two compare equal), and its SAH equals
//!   [`sah_cost`]'s up to the order of the device's `f64` sums.
//! - Only the triangles that moved are uploaded (the ranges where the
//!   posed triangles differ from the previous frame's), and the refitted
//!   structure's closest hits equal a fresh device build's and brute
//!   force's (same triangle, same `t`, `u`, `v` bits) for random rays.
//!
//! These need a CUDA GPU: run with `--include-ignored --test-threads=1` on
//! the GPU machine (`scripts/gpu-run.sh`).

#[path = "common/device.rs"]
mod device;

use std::ops::Range;

use caustic_accel::bvh::device_accel_cuda::{DeviceAccel, GpuAccelSpec};
use caustic_accel::bvh::traverse_cuda::{GpuHit, GpuRay};
use caustic_accel::{Accel, BruteForce, BuildInput, Bvh2, BvhNode, sah_cost};
use caustic_geom::{Ray, Triangle, Vec3};
use caustic_gpu::DeviceBuffer;
use caustic_scene::Scene;
use device::{gpu, seeded_rng};

/// The ranges of `now` that differ from `before` (the moved triangles).
fn changed_ranges(before: &[Triangle], now: &[Triangle]) -> Vec<Range<usize>> {
    let mut ranges: Vec<Range<usize>> = Vec::new();
    for (i, (a, b)) in before.iter().zip(now).enumerate() {
        if a == b {
            continue;
        }
        match ranges.last_mut() {
            Some(last) if last.end == i => last.end = i + 1,
            _ => ranges.push(i..i + 1),
        }
    }
    ranges
}

/// A node's box words with -0.0 read as +0.0, and its topology words.
fn node_words(node: &BvhNode) -> [u32; 8] {
    let zero = |x: f32| if x == 0.0 { 0 } else { x.to_bits() };
    [
        zero(node.min[0]),
        zero(node.min[1]),
        zero(node.min[2]),
        node.first,
        zero(node.max[0]),
        zero(node.max[1]),
        zero(node.max[2]),
        node.count,
    ]
}

fn assert_same_nodes(gpu: &[BvhNode], cpu: &[BvhNode], context: &str) {
    assert_eq!(gpu.len(), cpu.len(), "{context}: node count");
    for (i, (g, c)) in gpu.iter().zip(cpu).enumerate() {
        assert_eq!(
            node_words(g),
            node_words(c),
            "{context}: node {i}: GPU {g:?}, CPU {c:?}"
        );
    }
}

fn random_rays(triangles: &[Triangle], test: &str, n: usize) -> Vec<Ray> {
    let bounds = BuildInput::from_triangles(triangles)
        .bounds
        .iter()
        .filter(|b| b.is_finite())
        .fold(caustic_geom::Aabb::EMPTY, |a, b| a.union(*b));
    let mut rng = seeded_rng(test, 3);
    let extent = bounds.max - bounds.min;
    let mut point = || {
        bounds.min + Vec3::new(rng.next_f32(), rng.next_f32(), rng.next_f32()) * extent * 1.2
            - extent * 0.1
    };
    (0..n)
        .map(|_| {
            let (o, target) = (point(), point());
            Ray::new(o, target - o)
        })
        .collect()
}

fn closest(accel: &DeviceAccel, rays: &DeviceBuffer<GpuRay>) -> Vec<GpuHit> {
    let mut hits = DeviceBuffer::uninit(gpu(), "test hits", rays.len()).unwrap();
    hits.poison().unwrap();
    accel
        .tracer()
        .unwrap()
        .intersect(accel, rays, &mut hits)
        .unwrap();
    hits.download().unwrap()
}

/// Refits `spec`'s device structure through `frames` poses of `scene`,
/// checking boxes, SAH and hits on each.
fn follow_animation(scene: &mut Scene, frames: u32, spec: &str, test: &str) {
    let clock = scene.timeline().expect("an animated scene");
    let spec: GpuAccelSpec = spec.parse().unwrap();
    scene.set_time(clock.time_of_frame(0));
    let mut triangles = scene.triangles();
    let mut accel = DeviceAccel::build(gpu(), &triangles, &spec).unwrap();
    let (mut cpu_bvh, _) = accel.binary().unwrap().download().unwrap();
    // A refit of the unmoved scene leaves the build's (tight) boxes.
    accel.refit().unwrap();
    let (refitted, _) = accel.binary().unwrap().download().unwrap();
    assert_same_nodes(&refitted.nodes, &cpu_bvh.nodes, &format!("{spec}, frame 0"));
    let step = (clock.frames / frames.max(1)).max(1);
    for frame in (1..=frames).map(|f| f * step) {
        let context = format!("{spec}, frame {frame}");
        scene.set_time(clock.time_of_frame(frame));
        let posed = scene.triangles();
        let moved = changed_ranges(&triangles, &posed);
        assert!(!moved.is_empty(), "{context}: nothing moved");
        let moved_count: usize = moved.iter().map(|r| r.len()).sum();
        let bytes = accel.move_triangles(&posed, &moved).unwrap();
        assert_eq!(bytes, moved_count * 48, "{context}: uploaded bytes");
        assert!(moved_count < posed.len(), "{context}: a static part stays");
        triangles = posed;
        let refit = accel.refit().unwrap();
        let cpu_bounds = BuildInput::from_triangles(&triangles).bounds;
        cpu_bvh.refit(&cpu_bounds).unwrap();
        let (gpu_bvh, slot_triangles): (Bvh2, Vec<Triangle>) =
            accel.binary().unwrap().download().unwrap();
        assert_same_nodes(&gpu_bvh.nodes, &cpu_bvh.nodes, &context);
        assert_eq!(gpu_bvh.prim_indices, cpu_bvh.prim_indices, "{context}");
        for (slot, (tri, &prim)) in slot_triangles.iter().zip(&gpu_bvh.prim_indices).enumerate() {
            assert_eq!(*tri, triangles[prim as usize], "{context}: slot {slot}");
        }
        let cpu_sah = sah_cost(&cpu_bvh);
        assert!(
            (refit.sah_cost - cpu_sah).abs() <= 1e-4 * cpu_sah.max(1.0),
            "{context}: SAH {} on the GPU, {cpu_sah} on the CPU",
            refit.sah_cost
        );
        // Hits: the refitted tree, a fresh device build, brute force.
        let rays = random_rays(&triangles, test, 4_000);
        let words: Vec<GpuRay> = rays.iter().map(GpuRay::from).collect();
        let ray_buffer = DeviceBuffer::from_slice(gpu(), "test rays", &words).unwrap();
        let refitted_hits = closest(&accel, &ray_buffer);
        let fresh = DeviceAccel::build(gpu(), &triangles, &spec).unwrap();
        let fresh_hits = closest(&fresh, &ray_buffer);
        let brute = BruteForce::new(&triangles);
        let mut hit = 0;
        for (i, ray) in rays.iter().enumerate() {
            let expected = GpuHit::from_hit(brute.intersect(ray));
            assert_eq!(
                bytemuck::bytes_of(&refitted_hits[i]),
                bytemuck::bytes_of(&fresh_hits[i]),
                "{context}: ray {i}: refit {:?}, fresh build {:?}",
                refitted_hits[i],
                fresh_hits[i]
            );
            assert_eq!(
                bytemuck::bytes_of(&refitted_hits[i]),
                bytemuck::bytes_of(&expected),
                "{context}: ray {i} against brute force"
            );
            hit += usize::from(expected.prim != u32::MAX);
        }
        assert!(hit > rays.len() / 10, "{context}: only {hit} rays hit");
        eprintln!(
            "{context}: {moved_count} moved triangles, refit {:.2} ms, SAH {:.2} (fresh build {:.2}), {hit} hits",
            refit.ms,
            refit.sah_cost,
            fresh.stats().sah_cost
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn refit_equals_the_cpu_refit_and_a_fresh_build_on_the_moving_cornell_box() {
    for spec in ["bvh-binned", "lbvh", "ploc", "cpu:bvh-binned", "bvh-wide"] {
        let mut scene = Scene::builtin("cornell-caustics-moving").unwrap();
        follow_animation(&mut scene, 6, spec, "cornell");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn refit_follows_the_bart_robots() {
    let Some(dir) = std::env::var_os("CAUSTIC_SCENES") else {
        eprintln!("CAUSTIC_SCENES unset: skipped");
        return;
    };
    let path = std::path::Path::new(&dir).join("bart-robot/aff/Robot.aff");
    if !path.exists() {
        eprintln!("{} missing: skipped", path.display());
        return;
    }
    let mut scene = Scene::load(&path).unwrap();
    follow_animation(&mut scene, 4, "bvh-binned", "robots");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_kd_tree_moves_its_triangles_and_rebuilds_but_does_not_refit() {
    let mut scene = Scene::builtin("cornell-caustics-moving").unwrap();
    let clock = scene.timeline().unwrap();
    let before = scene.triangles();
    let mut accel = DeviceAccel::build(gpu(), &before, &"kdtree".parse().unwrap()).unwrap();
    assert!(!accel.refits());
    assert!(accel.refit().unwrap_err().to_string().contains("not a BVH"));
    scene.set_time(clock.time_of_frame(clock.frames / 2));
    let after = scene.triangles();
    let moved = changed_ranges(&before, &after);
    accel.move_triangles(&after, &moved).unwrap();
    accel.rebuild(&after).unwrap();
    let triangles: Vec<Triangle> = accel
        .scene_triangles()
        .download()
        .unwrap()
        .iter()
        .map(|t| t.triangle())
        .collect();
    assert_eq!(triangles, after);
    assert!(accel.move_triangles(&after[1..], &[]).is_err());
    let past_the_end = [0..1, 0..after.len() + 1];
    assert!(accel.move_triangles(&after, &past_the_end).is_err());
}
