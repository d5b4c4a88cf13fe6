//! Traversal speed of structures on the anchor protocol's rays, one thread,
//! after checking their answers against `bvh-binned`: the quick check of a
//! change to the wide BVH's SIMD code (`bvh-wide` is the default render
//! structure).
//!
//! `cargo run --release -p caustic-accel --example trace_wide [SCENE] [SPECS] [REPS]`
//!
//! `SCENE` is a path relative to the scenes folder (default
//! `sibenik/sibenik.obj`); `SPECS` a comma-separated list of registry specs
//! (default `bvh-wide,bvh-wide:width=4`); `REPS` the timed passes per ray
//! set (default 5), of which the best is printed. Rays: 512x512 primary
//! rays of the protocol's framing camera in 16x16 tiles, traced by
//! `intersect_batch` in runs of 256 (the packet path); their diffuse
//! secondary rays, also by batch (incoherent: mostly single rays); and
//! ambient-occlusion segments by `occluded`. The specs take turns within
//! each repetition, so they see the same load on a shared machine.

use caustic_accel::{Accel, build_accel};
use caustic_geom::protocol::{self, hit_checksum};
use caustic_geom::{Hit, Ray, Triangle};
use std::hint::black_box;
use std::time::Instant;

const SIDE: u32 = 512;
const TILE: u32 = 16;
const RUN: usize = 256;

fn main() {
    let mut args = std::env::args().skip(1);
    let scene = args.next().unwrap_or_else(|| "sibenik/sibenik.obj".into());
    let specs = args
        .next()
        .unwrap_or_else(|| "bvh-wide,bvh-wide:width=4".into());
    let reps: usize = args.next().map_or(5, |s| s.parse().expect("repetitions"));
    let path = caustic_scene::data_dirs::find_scene(&scene).unwrap_or_else(|missing| {
        eprintln!("{missing}");
        std::process::exit(2);
    });
    let tris = caustic_scene::Scene::load(&path)
        .expect("scene loads")
        .triangles();
    let sets = RaySets::new(&tris);
    let accels: Vec<Box<dyn Accel>> = specs
        .split(',')
        .map(|spec| build_accel(spec, &tris).unwrap_or_else(|e| panic!("{e}")))
        .collect();
    for accel in &accels {
        sets.check(accel.as_ref());
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("one-thread pool");
    let mut best = vec![[f64::INFINITY; 3]; accels.len()];
    pool.install(|| {
        for _ in 0..reps {
            for (accel, best) in accels.iter().zip(&mut best) {
                for (slot, ms) in best.iter_mut().zip(sets.time(accel.as_ref())) {
                    *slot = slot.min(ms);
                }
            }
        }
    });
    println!(
        "{scene}: {} triangles, one thread, best of {reps}",
        tris.len()
    );
    for (spec, best) in specs.split(',').zip(&best) {
        let rate = |rays: usize, ms: f64| rays as f64 / ms / 1e3;
        println!(
            "{spec:>24}: primary {:6.2}, diffuse {:6.2}, AO {:6.2} Mrays/s",
            rate(sets.primary.len(), best[0]),
            rate(sets.diffuse.len(), best[1]),
            rate(sets.ao.len(), best[2]),
        );
    }
}

/// The three ray sets and the reference answers.
struct RaySets {
    primary: Vec<Ray>,
    diffuse: Vec<Ray>,
    ao: Vec<Ray>,
    expected: [(u64, f64); 2],
    expected_occluded: usize,
}

impl RaySets {
    fn new(tris: &[Triangle]) -> Self {
        let camera = protocol::framing_camera(tris, 40.0);
        let rays = protocol::primary_rays(&camera, SIDE, SIDE);
        let reference = build_accel("bvh-binned", tris).expect("registered");
        let primary_hits = closest(reference.as_ref(), &rays);
        let diag = protocol::scene_diagonal(tris);
        let diffuse = protocol::secondary_rays(&rays, &primary_hits, tris, diag);
        let ao_tmax = protocol::ao_tmax(diag);
        let ao: Vec<Ray> = diffuse
            .iter()
            .map(|r| Ray::segment(r.origin, r.dir, 0.0, ao_tmax))
            .collect();
        let primary: Vec<Ray> = tile_order().map(|i| rays[i as usize]).collect::<Vec<_>>();
        Self {
            expected: [
                hit_checksum(&closest(reference.as_ref(), &primary)),
                hit_checksum(&closest(reference.as_ref(), &diffuse)),
            ],
            expected_occluded: occluded(reference.as_ref(), &ao),
            primary,
            diffuse,
            ao,
        }
    }

    /// Panics unless `accel` gives the reference's answers.
    fn check(&self, accel: &dyn Accel) {
        let got = [
            hit_checksum(&closest(accel, &self.primary)),
            hit_checksum(&closest(accel, &self.diffuse)),
        ];
        assert_eq!(got, self.expected, "{}: closest hits differ", accel.name());
        assert_eq!(
            occluded(accel, &self.ao),
            self.expected_occluded,
            "{}: occlusion differs",
            accel.name()
        );
    }

    /// Milliseconds of one pass over each set.
    fn time(&self, accel: &dyn Accel) -> [f64; 3] {
        let ms = |pass: &dyn Fn()| {
            let start = Instant::now();
            pass();
            start.elapsed().as_secs_f64() * 1e3
        };
        [
            ms(&|| drop(black_box(closest(accel, &self.primary)))),
            ms(&|| drop(black_box(closest(accel, &self.diffuse)))),
            ms(&|| _ = black_box(occluded(accel, &self.ao))),
        ]
    }
}

fn closest(accel: &dyn Accel, rays: &[Ray]) -> Vec<Option<Hit>> {
    let mut hits = vec![None; rays.len()];
    for (rays, hits) in rays.chunks(RUN).zip(hits.chunks_mut(RUN)) {
        accel.intersect_batch(rays, hits);
    }
    hits
}

fn occluded(accel: &dyn Accel, rays: &[Ray]) -> usize {
    rays.iter().filter(|ray| accel.occluded(ray)).count()
}

/// Pixel indices of the image in `TILE`-square tiles, row-major tiles.
fn tile_order() -> impl Iterator<Item = u32> {
    (0..SIDE).step_by(TILE as usize).flat_map(|ty| {
        (0..SIDE).step_by(TILE as usize).flat_map(move |tx| {
            (ty..ty + TILE).flat_map(move |y| (tx..tx + TILE).map(move |x| y * SIDE + x))
        })
    })
}
