//! GPU photon-map search timings: hash-grid build for 10^6 points (seed
//! 003's headline number; issue target ≤ 0.5 ms) and kNN for one query per
//! pixel of a 1920×1080 image, on a uniform cloud and a clustered one (a
//! caustic map is clustered): `knn` (the queries sorted into Morton order
//! on the device first, the sort timed with the search) and `knn_as_given`
//! (the same queries in their random order). Device events around the work alone, after
//! warm-up, median of the repeats. Answers are checked against the CPU hash
//! grid on a sample of queries before timing.
//!
//!     cargo run --release -p caustic-accel --example points_bench -- [POINTS] [K]

use caustic_accel::points::build_point_structure;
use caustic_accel::points::hash_grid_cuda::{GpuHashGrid, knn_brute};
use caustic_geom::{Pcg32, Vec3};
use caustic_gpu::{DeviceBuffer, Gpu};

const WARM_UP: usize = 3;
const REPEATS: usize = 20;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn main() -> Result<()> {
    let n: usize = std::env::args()
        .nth(1)
        .map_or(Ok(1_000_000), |a| a.parse())?;
    let k: usize = std::env::args().nth(2).map_or(Ok(50), |a| a.parse())?;
    let gpu = Gpu::probe()?;
    println!("device: {}", gpu.info());
    gpu.load(&caustic_accel::kernels::points_hash_grid::MODULE)?;
    gpu.load(&caustic_gpu::kernels::ops_radix_sort::MODULE)?;
    gpu.load(&caustic_gpu::kernels::ops_segment::MODULE)?;
    let mut rng = Pcg32::new(0x9e0, 3);
    let uniform: Vec<Vec3> = (0..n)
        .map(|_| Vec3::new(rng.next_f32(), rng.next_f32(), rng.next_f32()))
        .collect();
    let centres: Vec<Vec3> = (0..64)
        .map(|_| Vec3::new(rng.next_f32(), rng.next_f32(), rng.next_f32()))
        .collect();
    let clustered: Vec<Vec3> = (0..n)
        .map(|i| {
            let offset = Vec3::new(rng.next_f32(), rng.next_f32(), rng.next_f32()) - 0.5;
            centres[i % 64] + offset * 0.05
        })
        .collect();
    let queries = 1920 * 1080;
    for (name, points) in [("uniform", &uniform), ("clustered", &clustered)] {
        // A radius holding about 2k points around a query of the cloud.
        let radius = (2.0 * k as f32 / n as f32).cbrt() * if name == "uniform" { 0.6 } else { 0.2 };
        let qs: Vec<[f32; 3]> = (0..queries)
            .map(|_| {
                let p = points[(rng.next_u32() as usize) % n];
                (p + (Vec3::new(rng.next_f32(), rng.next_f32(), rng.next_f32()) - 0.5) * 0.01)
                    .to_array()
            })
            .collect();
        let raw: Vec<[f32; 3]> = points.iter().map(|p| p.to_array()).collect();
        let device_points = DeviceBuffer::from_slice(&gpu, "points", &raw)?;
        let device_queries = DeviceBuffer::from_slice(&gpu, "queries", &qs)?;
        check(points, &qs[..20_000], &device_points, radius, k)?;
        let build_ms = median(&gpu, || {
            GpuHashGrid::build(&device_points, radius).map(drop)
        })?;
        let grid = GpuHashGrid::build(&device_points, radius)?;
        let knn_ms = median(&gpu, || grid.knn(&device_queries, k, radius).map(drop))?;
        // The same queries searched in their random order, without the
        // Morton sort.
        let as_given_ms = median(&gpu, || {
            grid.knn_as_given(&device_queries, k, radius).map(drop)
        })?;
        let found = grid.knn(&device_queries, k, radius)?.count.download()?;
        let mean = found.iter().map(|&c| c as f64).sum::<f64>() / found.len() as f64;
        println!(
            "{name:>9}: {n} points, radius {radius:.4}, {} buckets ({}): build {build_ms:.3} ms; kNN k={k} x {queries} queries {knn_ms:.3} ms ({:.0} Mqueries/s, {mean:.1} found on average); {:.1} MB",
            grid.geometry().buckets,
            if grid.geometry().table_bits == 0 {
                "linear"
            } else {
                "Teschner"
            },
            queries as f64 / knn_ms as f64 / 1e3,
            grid.bytes() as f64 / (1 << 20) as f64,
        );
        println!(
            "RESULT cloud={name} points={n} build_ms={build_ms:.4} knn_ms={knn_ms:.4} queries={queries} k={k} random_order_ms={as_given_ms:.4}"
        );
    }
    // Brute force on a smaller problem: it is O(points x queries).
    let small: Vec<[f32; 3]> = uniform[..100_000].iter().map(|p| p.to_array()).collect();
    let device_small = DeviceBuffer::from_slice(&gpu, "points", &small)?;
    let device_queries = DeviceBuffer::from_slice(&gpu, "queries", &small[..10_000])?;
    let brute_ms = median(&gpu, || {
        knn_brute(&device_small, &device_queries, k, f32::INFINITY).map(drop)
    })?;
    println!(
        "    brute: 100000 points x 10000 queries, k={k}: {brute_ms:.3} ms ({:.1} G distance tests/s)",
        1e9 / brute_ms as f64 / 1e6
    );
    Ok(())
}

/// The GPU grid's answers equal the CPU hash grid's on `qs`.
fn check(
    points: &[Vec3],
    qs: &[[f32; 3]],
    device_points: &DeviceBuffer<[f32; 3]>,
    radius: f32,
    k: usize,
) -> Result<()> {
    let gpu = device_points.gpu();
    let grid = GpuHashGrid::build(device_points, radius)?;
    let device_queries = DeviceBuffer::from_slice(gpu, "check queries", qs)?;
    let got = grid.knn(&device_queries, k, radius)?.download()?;
    let as_given = grid.knn_as_given(&device_queries, k, radius)?.download()?;
    if got != as_given {
        return Err("the Morton-ordered and the given-order search disagree".into());
    }
    let cpu = build_point_structure("hashgrid", points, radius)?;
    let mut out = Vec::new();
    for (q, row) in qs.iter().zip(&got) {
        cpu.knn(Vec3::from_array(*q), k, radius, &mut out);
        let want: Vec<(u32, u32)> = out.iter().map(|n| (n.index, n.dist2.to_bits())).collect();
        let have: Vec<(u32, u32)> = row.iter().map(|&(i, d)| (i, d.to_bits())).collect();
        if want != have {
            return Err(format!("GPU and CPU disagree at query {q:?}").into());
        }
    }
    Ok(())
}

fn median(
    gpu: &Gpu,
    mut f: impl FnMut() -> std::result::Result<(), caustic_gpu::GpuError>,
) -> Result<f32> {
    for _ in 0..WARM_UP {
        f()?;
    }
    gpu.synchronize()?;
    let mut times = Vec::with_capacity(REPEATS);
    for _ in 0..REPEATS {
        times.push(gpu.time_ms(&mut f)?);
    }
    times.sort_by(f32::total_cmp);
    Ok(times[REPEATS / 2])
}
