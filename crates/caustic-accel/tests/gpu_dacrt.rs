//! DACRT on the GPU (`dacrt/taskpool.cu`: divide-and-conquer ray tracing on
//! the task pool of persistent warps, Vinkler et al. 2013, §5), held to the
//! exact reference:
//!
//! - on random soups with degenerate, huge, thin, duplicated and
//!   non-finite triangles, with awkward, far-away, untraceable and short
//!   rays, every closest hit (triangle, `t`, `u`, `v` bit for bit, ties to
//!   the lowest id) and every any-hit answer equals brute force's and the
//!   CPU DACRT's, for the median and RDH splits and for constants that
//!   subdivide down to a few rays and triangles, under the concurrent
//!   schedule and the paper's waves (deep dependency chains);
//! - index arenas far too small for a batch grow (the run repeated) and
//!   the answers stay exact;
//! - on every standard scene present, traced through `DeviceAccel` as a
//!   renderer traces (`dacrt`, `dacrt-rdh`), the protocol's primary, AO and
//!   diffuse rays and collision segments answer as the CPU BVH does;
//! - empty inputs answer misses, a pool too small for a batch and device
//!   memory running out are errors that say so, and neither hangs.
//!
//! These need a CUDA GPU: run with `--include-ignored --test-threads=1` on
//! the GPU machine. Random tests print their seed; `CAUSTIC_TEST_SEED`
//! replays one.

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

use caustic_accel::bvh::build::upload_triangles;
use caustic_accel::bvh::device_accel_cuda::{DeviceAccel, GpuAccelSpec};
use caustic_accel::bvh::traverse_cuda::GpuHit;
use caustic_accel::bvh::triangle_bvh_cuda::GpuTriangle;
use caustic_accel::collision::Agents;
use caustic_accel::dacrt::{Dacrt, DacrtConfig, DacrtTracer, GpuDacrtStats};
use caustic_accel::{Accel, BruteForce};
use caustic_geom::{Aabb, Hit, Pcg32, Ray, Triangle, Vec3};
use caustic_gpu::{DeviceBuffer, GpuError};
use compare::{Report, compare_closest, compare_occluded, upload_rays};
use device::gpu;
use protocol_rays::{GpuAnswers, ProtocolRays};
use soups::{awkward_rays, awkward_soup, far_rays, grid_soup, segments};

/// The paper's two splits, and constants that subdivide down to a few
/// rays and triangles, under the concurrent schedule (the default; the
/// deep RDH one with near-before-far dependencies down six levels) and the
/// paper's waves.
fn configs() -> [DacrtConfig; 6] {
    [
        DacrtConfig::MEDIAN,
        DacrtConfig::RDH,
        DacrtConfig::parse("dacrt:sort=1:rays=2:tris=2").unwrap(),
        DacrtConfig::parse("dacrt-rdh:sort=2:rays=4:tris=4:near=6").unwrap(),
        DacrtConfig::parse("dacrt:sched=waves").unwrap(),
        DacrtConfig::parse("dacrt-rdh:sched=waves:sort=2:rays=4:tris=4").unwrap(),
    ]
}

fn rng(test: &str) -> Pcg32 {
    device::seeded_rng(test, 0xdac7)
}

/// The GPU's closest hits and occlusion flags for `rays`.
fn gpu_trace(
    tracer: &mut DacrtTracer,
    tris: &DeviceBuffer<GpuTriangle>,
    rays: &[Ray],
) -> Result<(Vec<GpuHit>, Vec<u32>, GpuDacrtStats), GpuError> {
    let buffer = upload_rays(rays);
    let mut hits = DeviceBuffer::uninit(gpu(), "test hits", rays.len())?;
    hits.poison()?;
    let stats = tracer.intersect(tris, &buffer, &mut hits)?;
    let mut occluded = DeviceBuffer::uninit(gpu(), "test occlusion", rays.len())?;
    occluded.poison()?;
    tracer.occluded(tris, &buffer, &mut occluded)?;
    Ok((hits.download()?, occluded.download()?, stats))
}

/// Brute force's answers.
fn brute(tris: &[Triangle], rays: &[Ray]) -> (Vec<Option<Hit>>, Vec<bool>) {
    let brute = BruteForce::new(tris);
    let mut closest = vec![None; rays.len()];
    brute.intersect_batch(rays, &mut closest);
    let mut occluded = vec![false; rays.len()];
    brute.occluded_batch(rays, &mut occluded);
    (closest, occluded)
}

/// Failures of `report` (any difference at all: DACRT's ties go to the
/// lowest id, as brute force's), logged as one line.
fn check(failures: &mut Vec<String>, what: &str, report: &Report) {
    let line = report.summary(what);
    if report.identical() {
        eprintln!("{line}");
    } else {
        failures.push(line);
    }
}

/// [`check`] of a trace's closest hits and any-hit answers against brute
/// force's (`truth`), named `what`.
fn check_both(
    failures: &mut Vec<String>,
    what: &str,
    rays: &[Ray],
    (hits, any): (&[GpuHit], &[u32]),
    (closest, occluded): (&[Option<Hit>], &[bool]),
) {
    let report = compare_closest(rays, hits, closest);
    check(failures, &format!("{what}, closest"), &report);
    let report = compare_occluded(rays, any, occluded);
    check(failures, &format!("{what}, any"), &report);
}

/// Every kind of soup the structures must survive.
fn soups(rng: &mut Pcg32) -> Vec<(String, Vec<Triangle>)> {
    let one = Triangle::new(Vec3::ZERO, Vec3::X, Vec3::Y);
    let mut coincident_and_awkward = vec![one; 3000];
    coincident_and_awkward.extend(awkward_soup(rng, 500));
    let mut soups = vec![
        (
            "3000 coincident + 500 awkward".into(),
            coincident_and_awkward,
        ),
        ("height field 2x64x64".into(), grid_soup(rng, 64)),
    ];
    for n in [37, 2049, 20_000] {
        soups.push((format!("awkward soup {n}"), awkward_soup(rng, n)));
    }
    soups
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn random_soups_equal_brute_force_and_the_cpu() {
    let mut rng = rng("random_soups_equal_brute_force_and_the_cpu");
    let mut failures = Vec::new();
    let mut tracers: Vec<DacrtTracer> = configs()
        .iter()
        .map(|c| DacrtTracer::new(gpu(), *c).unwrap())
        .collect();
    for (name, tris) in soups(&mut rng) {
        let mut rays = awkward_rays(&mut rng, &tris, 6000);
        rays.extend(far_rays(&mut rng, &tris, 1000));
        rays.extend(segments(&rays.clone(), 0.1));
        let (closest, occluded) = brute(&tris, &rays);
        let device_tris = upload_triangles(gpu(), &tris).unwrap();
        for tracer in &mut tracers {
            let config = *tracer.config();
            let spec = config.spec();
            // The CPU twin answers as brute force does.
            let cpu = Dacrt::new(&tris, config);
            let mut cpu_closest = vec![None; rays.len()];
            cpu.closest_hits(&rays, &mut cpu_closest);
            if cpu_closest != closest {
                failures.push(format!(
                    "{name}, {spec}: the CPU DACRT differs from brute force"
                ));
            }
            let (hits, any, stats) = match gpu_trace(tracer, &device_tris, &rays) {
                Ok(answers) => answers,
                Err(e) => {
                    failures.push(format!("{name}, {spec}: {e}"));
                    continue;
                }
            };
            eprintln!("{name} ({} tris), {spec}: {}", tris.len(), stats);
            let what = format!("{name}, {spec}");
            check_both(
                &mut failures,
                &what,
                &rays,
                (&hits, &any),
                (&closest, &occluded),
            );
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn empty_and_degenerate_inputs_answer_as_brute_force() {
    let one = Triangle::new(Vec3::ZERO, Vec3::X, Vec3::Y);
    let nan = Triangle::new(Vec3::splat(f32::NAN), Vec3::X, Vec3::Y);
    let down = Ray::new(Vec3::new(0.2, 0.2, 1.0), -Vec3::Z);
    let untraceable = [
        Ray::new(Vec3::new(f32::NAN, 0.2, 1.0), -Vec3::Z),
        Ray::new(Vec3::new(0.2, 0.2, 1.0), Vec3::ZERO),
        Ray::segment(Vec3::new(0.2, 0.2, 1.0), -Vec3::Z, 2.0, 1.0),
    ];
    let mut rays: Vec<Ray> = vec![down; 33];
    rays.extend(untraceable);
    let cases: Vec<(&str, Vec<Triangle>, Vec<Ray>)> = vec![
        ("no triangles", vec![], rays.clone()),
        ("no rays", vec![one], vec![]),
        ("only non-finite triangles", vec![nan; 40], rays.clone()),
        ("one triangle", vec![one], rays.clone()),
        (
            "a non-finite and a finite one",
            vec![nan, one],
            rays.clone(),
        ),
        ("64 duplicates, 256 rays", vec![one; 64], vec![down; 256]),
    ];
    let mut failures = Vec::new();
    for config in configs() {
        let mut tracer = DacrtTracer::new(gpu(), config).unwrap();
        for (name, tris, rays) in &cases {
            let (closest, occluded) = brute(tris, rays);
            let device_tris = upload_triangles(gpu(), tris).unwrap();
            match gpu_trace(&mut tracer, &device_tris, rays) {
                Ok((hits, any, _)) => {
                    let what = format!("{name}, {}", config.spec());
                    check_both(
                        &mut failures,
                        &what,
                        rays,
                        (&hits, &any),
                        (&closest, &occluded),
                    );
                }
                Err(e) => failures.push(format!("{name}: {e}")),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

const WIDTH: u32 = 1280;
const HEIGHT: u32 = 720;

#[test]
#[ignore = "needs a CUDA GPU"]
fn standard_scenes_trace_as_the_cpu_bvh_through_device_accel() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for scene in scenes::SCENES {
        let Some(loaded) = scene.load() else { continue };
        checked += 1;
        let tris = &loaded.triangles;
        let rays = ProtocolRays::new(&loaded, WIDTH, HEIGHT);
        // Collision segments: 4096 agents, 128 rays each, one frame.
        let bounds = tris.iter().fold(Aabb::EMPTY, |b, t| b.union(t.bounds()));
        let segments = Agents::random(&bounds, 4096, 20, 128, 7).frame_rays(3);
        let reference = caustic_accel::TriangleBvh::build(tris);
        let want = compare::cpu_closest(&reference, &segments);
        eprintln!("{}: {} triangles", loaded.name, tris.len());
        for spec in ["dacrt", "dacrt-rdh"] {
            let spec: GpuAccelSpec = spec.parse().unwrap();
            let accel = DeviceAccel::build(gpu(), tris, &spec).unwrap();
            assert_eq!(accel.stats().build_ms, 0.0, "DACRT builds nothing");
            let mut tracer = accel.tracer().unwrap();
            let trace = |pass: &protocol_rays::Pass| {
                let buffer = upload_rays(&pass.rays);
                if pass.any_hit {
                    let mut out =
                        DeviceBuffer::uninit(gpu(), "test occlusion", pass.rays.len()).unwrap();
                    out.poison().unwrap();
                    tracer.occluded(&accel, &buffer, &mut out).unwrap();
                    GpuAnswers::Occluded(out.download().unwrap())
                } else {
                    let mut hits =
                        DeviceBuffer::uninit(gpu(), "test hits", pass.rays.len()).unwrap();
                    hits.poison().unwrap();
                    tracer.intersect(&accel, &buffer, &mut hits).unwrap();
                    GpuAnswers::Closest(hits.download().unwrap())
                }
            };
            let mut reports = rays.compare(trace);
            let buffer = upload_rays(&segments);
            let mut hits = DeviceBuffer::uninit(gpu(), "test hits", segments.len()).unwrap();
            hits.poison().unwrap();
            tracer.intersect(&accel, &buffer, &mut hits).unwrap();
            reports.push((
                "collision",
                compare_closest(&segments, &hits.download().unwrap(), &want),
            ));
            for (kind, report) in reports {
                check(
                    &mut failures,
                    &format!("{}, {spec}, {kind}", loaded.name),
                    &report,
                );
            }
        }
    }
    scenes::finish(checked, &failures);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_full_pool_is_an_error_and_the_tracer_recovers() {
    let mut rng = rng("a_full_pool_is_an_error_and_the_tracer_recovers");
    let tris = awkward_soup(&mut rng, 20_000);
    let rays = awkward_rays(&mut rng, &tris, 20_000);
    let device_tris = upload_triangles(gpu(), &tris).unwrap();
    let mut tracer = DacrtTracer::new(gpu(), DacrtConfig::MEDIAN).unwrap();
    tracer.set_pool_slots(Some(4));
    let start = std::time::Instant::now();
    match gpu_trace(&mut tracer, &device_tris, &rays) {
        Err(e @ GpuError::TaskPool { .. }) => {
            eprintln!(
                "4 slots: {e} (after {:.2} s)",
                start.elapsed().as_secs_f64()
            );
            assert!(e.to_string().contains("watchdog"), "{e}");
        }
        other => panic!(
            "expected a task-pool error, got {:?}",
            other.map(|(_, _, s)| s)
        ),
    }
    tracer.set_pool_slots(None);
    let (hits, _, stats) = gpu_trace(&mut tracer, &device_tris, &rays).unwrap();
    let (closest, _) = brute(&tris, &rays);
    let report = compare_closest(&rays, &hits, &closest);
    assert!(report.identical(), "{}", report.summary("after the error"));
    eprintln!("then: {}", stats);
}

/// A 20 000-triangle awkward soup on the device, 20 000 rays at it and
/// brute force's answers (closest, occluded), for the arena tests.
struct ArenaCase {
    tris: DeviceBuffer<GpuTriangle>,
    rays: Vec<Ray>,
    want: (Vec<Option<Hit>>, Vec<bool>),
}

impl ArenaCase {
    fn new(test: &str) -> Self {
        let mut rng = rng(test);
        let tris = awkward_soup(&mut rng, 20_000);
        let rays = awkward_rays(&mut rng, &tris, 20_000);
        Self {
            tris: upload_triangles(gpu(), &tris).unwrap(),
            want: brute(&tris, &rays),
            rays,
        }
    }

    /// The tracer's statistics, after checking its answers (both kinds).
    fn trace_exactly(&self, tracer: &mut DacrtTracer, what: &str) -> GpuDacrtStats {
        let (hits, any, stats) = gpu_trace(tracer, &self.tris, &self.rays).unwrap();
        eprintln!("{what}: {stats}");
        let mut failures = Vec::new();
        let (closest, occluded) = (&self.want.0, &self.want.1);
        check_both(
            &mut failures,
            what,
            &self.rays,
            (&hits, &any),
            (closest, occluded),
        );
        assert!(failures.is_empty(), "{}", failures.join("\n"));
        stats
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn arenas_that_run_out_grow_and_the_answers_stay_exact() {
    let case = ArenaCase::new("arenas_that_run_out_grow_and_the_answers_stay_exact");
    for config in [DacrtConfig::MEDIAN, DacrtConfig::RDH] {
        let mut tracer = DacrtTracer::new(gpu(), config).unwrap();
        // 1024 words beyond the batch's own: far less than its tasks take.
        tracer.set_arena_extra(Some(1024));
        let stats = case.trace_exactly(&mut tracer, &format!("small arenas, {}", config.spec()));
        assert!(stats.runs > 1, "the small arenas sufficed: {stats:?}");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn batches_beyond_the_arena_limit_run_in_slices_and_the_answers_stay_exact() {
    let case =
        ArenaCase::new("batches_beyond_the_arena_limit_run_in_slices_and_the_answers_stay_exact");
    for config in [DacrtConfig::MEDIAN, DacrtConfig::RDH] {
        let mut tracer = DacrtTracer::new(gpu(), config).unwrap();
        let whole = case.trace_exactly(&mut tracer, &format!("whole, {}", config.spec()));
        assert_eq!(whole.slices, 1, "{whole}");
        // A limit under a quarter of what the whole batch's tasks asked
        // (beyond the root's ranges): the batch cannot run in one piece.
        // The second batch starts from the slices the first one found.
        let demand = whole.arena_words[0].max(whole.arena_words[1]) as usize;
        let limit = 20_000 + demand / 4;
        tracer.set_arena_limit(Some(limit));
        for round in ["first", "second"] {
            let what = format!("sliced, {}, limit {limit}, {round}", config.spec());
            let stats = case.trace_exactly(&mut tracer, &what);
            assert!(stats.slices > 1, "the limit did not slice: {stats}");
            assert!(
                stats.arena_words.iter().all(|&w| w as usize <= limit),
                "{stats}"
            );
            assert_eq!(stats.traced_rays, whole.traced_rays, "{stats}");
        }
        // No slice fits a limit below the root's ranges.
        tracer.set_arena_limit(Some(1024));
        let err = gpu_trace(&mut tracer, &case.tris, &case.rays).unwrap_err();
        assert!(err.to_string().contains("dacrt index arena"), "{err}");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn exhausted_device_memory_is_an_error_naming_the_allocation() {
    let (free, _) = gpu().memory().unwrap();
    // The triangles take most of the memory; their boxes and index
    // arrays cannot fit beside them.
    let n = (free / 10 * 7 / size_of::<GpuTriangle>()).min(caustic_accel::dacrt::MAX_ITEMS - 1);
    let mut tris = DeviceBuffer::<GpuTriangle>::uninit(gpu(), "test triangles", n).unwrap();
    tris.poison().unwrap();
    // Where the cap on DACRT's items leaves most of a large card free (an
    // H200's 141 GB), a ballast takes all but 1 GiB of the rest: far less
    // than the tracer's per-triangle arrays need.
    let (left, _) = gpu().memory().unwrap();
    let ballast = left.saturating_sub(1 << 30);
    let _ballast = DeviceBuffer::<u8>::uninit(gpu(), "test ballast", ballast).unwrap();
    let rays = upload_rays(&[Ray::new(Vec3::ZERO, Vec3::X); 64]);
    let mut hits = DeviceBuffer::uninit(gpu(), "test hits", 64).unwrap();
    let mut tracer = DacrtTracer::new(gpu(), DacrtConfig::RDH).unwrap();
    device::expect_out_of_memory(
        tracer.intersect(&tris, &rays, &mut hits),
        "allocating dacrt",
        &format!("{n} triangles"),
    );
}
