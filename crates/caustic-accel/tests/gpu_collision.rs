//! The collision experiment's frames on the GPU (`src/collision.cu`,
//! `collision_cuda.rs`: segments made on the device by the counter-based
//! generator, traced by any structure, reduced per agent on the device),
//! held to the CPU:
//!
//! - the device's segments are [`Agents::frame_rays`]' bit for bit;
//! - every agent's answer (collides, nearest distance, triangle, ties to
//!   the lowest id) equals the CPU's ([`Agents::answers`] over brute
//!   force's or the CPU BVH's hits) for every GPU structure (every BVH
//!   builder, the wide BVH, the kd-tree, the grid, DACRT with both splits,
//!   a CPU-built tree), on random soups with awkward triangles and on every
//!   standard scene present, in several frames, and after
//!   [`DeviceAccel::rebuild_in_place`] as after a fresh build;
//! - the reduction alone, fed known hits, picks the CPU's answer, ties and
//!   misses included.
//!
//! These need a CUDA GPU: run with `--include-ignored --test-threads=1` on
//! the GPU machine. Random tests print their seed; `CAUSTIC_TEST_SEED`
//! replays one.

#[path = "common/gpu_scenes.rs"]
mod scenes;

#[path = "common/device.rs"]
mod device;

#[path = "common/soups.rs"]
mod soups;

use caustic_accel::bvh::device_accel_cuda::{DeviceAccel, GpuAccelSpec};
use caustic_accel::bvh::traverse_cuda::{GpuHit, GpuRay};
use caustic_accel::collision::{Agents, FrameAnswers};
use caustic_accel::collision_cuda::DeviceAgents;
use caustic_accel::{Accel, BruteForce};
use caustic_geom::{Aabb, Hit, Pcg32, Triangle, Vec3};
use caustic_gpu::DeviceBuffer;
use device::gpu;
use soups::{awkward_soup, grid_soup};

/// Every kind of GPU structure.
const METHODS: &[&str] = &[
    "lbvh",
    "lbvh:bits=63",
    "hlbvh",
    "ploc",
    "bvh-binned",
    "bvh-binned-staged",
    "bvh-sweep",
    "bvh-taskpool",
    "bvh-wide",
    "kdtree",
    "grid",
    "dacrt",
    "dacrt-rdh",
    "cpu:bvh-binned",
];

fn rng(test: &str) -> Pcg32 {
    device::seeded_rng(test, 0xc011)
}

/// The CPU's answers of `frame`.
fn cpu_answers(accel: &dyn Accel, agents: &Agents, frame: usize) -> FrameAnswers {
    let rays = agents.frame_rays(frame);
    let mut hits = vec![None; rays.len()];
    accel.intersect_batch(&rays, &mut hits);
    agents.answers(&hits)
}

/// Every method's answers against the CPU's in `frames`; the failures.
fn check_methods(
    name: &str,
    tris: &[Triangle],
    reference: &dyn Accel,
    agents: &Agents,
    frames: &[usize],
) -> Vec<String> {
    let mut failures = Vec::new();
    let want: Vec<FrameAnswers> = frames
        .iter()
        .map(|&f| cpu_answers(reference, agents, f))
        .collect();
    let colliding: usize = want[0].iter().filter(|a| a.collides).count();
    eprintln!(
        "{name}: {} triangles, {} agents x {} rays, {colliding} colliding in frame {}",
        tris.len(),
        agents.count(),
        agents.rays_per_agent(),
        frames[0]
    );
    let mut device_agents = DeviceAgents::new(gpu(), agents).unwrap();
    for &frame in frames {
        let rays: Vec<GpuRay> = agents.frame_rays(frame).iter().map(GpuRay::from).collect();
        let made = device_agents.make_rays(frame).unwrap().download().unwrap();
        if bytemuck::cast_slice::<_, u8>(&made) != bytemuck::cast_slice::<_, u8>(&rays) {
            let first = made.iter().zip(&rays).position(|(a, b)| a != b);
            failures.push(format!(
                "{name}: frame {frame}: segments differ at {first:?}"
            ));
        }
    }
    for method in METHODS {
        let spec: GpuAccelSpec = method.parse().unwrap();
        let mut accel = DeviceAccel::build(gpu(), tris, &spec).unwrap();
        let mut tracer = accel.tracer().unwrap();
        for round in ["build", "rebuild"] {
            if round == "rebuild" {
                match accel.rebuild_in_place() {
                    Ok(()) => {}
                    Err(e) => {
                        // Only the CPU-built tree, the kd-tree and the grid
                        // are rebuilt by DeviceAccel::build.
                        assert!(
                            matches!(
                                spec,
                                GpuAccelSpec::Uploaded(_)
                                    | GpuAccelSpec::KdTree(_)
                                    | GpuAccelSpec::Grid(_)
                            ),
                            "{method}: {e}"
                        );
                        continue;
                    }
                }
            }
            for (&frame, want) in frames.iter().zip(&want) {
                let got = device_agents.frame(&accel, &mut tracer, frame).unwrap();
                let differ: Vec<String> = got
                    .iter()
                    .zip(want)
                    .enumerate()
                    .filter(|(_, (g, w))| g != w)
                    .take(3)
                    .map(|(a, (g, w))| format!("agent {a}: {g:?} against {w:?}"))
                    .collect();
                if !differ.is_empty() || got.len() != want.len() {
                    failures.push(format!(
                        "{name}, {method} ({round}), frame {frame}: {}",
                        differ.join("; ")
                    ));
                }
            }
        }
    }
    failures
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn every_structure_answers_as_the_cpu_on_soups() {
    let mut rng = rng("every_structure_answers_as_the_cpu_on_soups");
    let unit = Aabb::new(Vec3::splat(-0.1), Vec3::splat(1.1));
    let mut failures = Vec::new();
    for (name, tris) in [
        ("awkward soup", awkward_soup(&mut rng, 3000)),
        ("height field", grid_soup(&mut rng, 40)),
    ] {
        let reference = BruteForce::new(&tris);
        // Segments per agent: a multiple of the grouped trace's probe
        // stride, one that is not (a partial last stride), and one (no
        // probes).
        for rays in [64, 13, 1] {
            let seed = u64::from(rng.next_u32());
            // Long steps (few frames), so most agents collide.
            let agents = Agents::random(&unit, 300, 3, rays, seed);
            let label = format!("{name}, {rays} segments an agent");
            failures.extend(check_methods(
                &label,
                &tris,
                &reference,
                &agents,
                &[0, 1, 2],
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn every_structure_answers_as_the_cpu_on_the_standard_scenes() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for scene in scenes::SCENES {
        let Some(loaded) = scene.load() else { continue };
        checked += 1;
        let tris = &loaded.triangles;
        let bounds = tris.iter().fold(Aabb::EMPTY, |b, t| b.union(t.bounds()));
        let reference = caustic_accel::TriangleBvh::build(tris);
        let agents = Agents::random(&bounds, 1000, 20, 128, 7);
        failures.extend(check_methods(
            &loaded.name,
            tris,
            &reference,
            &agents,
            &[0, 9, 19],
        ));
    }
    eprintln!("{checked} standard scenes checked");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_reduction_takes_the_nearest_hit_and_the_lowest_triangle() {
    let mut rng = rng("the_reduction_takes_the_nearest_hit_and_the_lowest_triangle");
    let unit = Aabb::new(Vec3::ZERO, Vec3::ONE);
    // 1, 31, 32, 33 and 100 rays per agent: partial and several warps' worth.
    for rays in [1usize, 31, 32, 33, 100] {
        let agents = Agents::random(&unit, 77, 2, rays, 3);
        let mut device_agents = DeviceAgents::new(gpu(), &agents).unwrap();
        device_agents.make_rays(0).unwrap();
        // Few distinct distances and triangles: many exact ties; a third
        // of the rays miss; whole agents miss.
        let hits: Vec<Option<Hit>> = (0..agents.count() * rays)
            .map(|i| {
                let agent = i / rays;
                (!agent.is_multiple_of(5) && !rng.next_u32().is_multiple_of(3)).then(|| Hit {
                    t: [0.25f32, 0.5, 0.125, 3.0][rng.next_u32() as usize % 4],
                    prim: rng.next_u32() % 4,
                    u: rng.next_f32(),
                    v: rng.next_f32(),
                })
            })
            .collect();
        let words: Vec<GpuHit> = hits.iter().map(|h| GpuHit::from_hit(*h)).collect();
        let buffer = DeviceBuffer::from_slice(gpu(), "test hits", &words).unwrap();
        let got = device_agents.nearest(Some(&buffer)).unwrap();
        assert_eq!(got, agents.answers(&hits), "{rays} rays per agent");
        assert!(got.iter().any(|a| !a.collides) && got.iter().any(|a| a.collides));
    }
}
