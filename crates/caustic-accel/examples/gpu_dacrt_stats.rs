//! The GPU DACRT's task statistics (`GpuDacrtStats`: tasks, direct tasks,
//! pairs handed to direct tasks, depth, arena words, runs, the pool's
//! cycles) for a scene's protocol primary rays, the GPU twin of
//! `dacrt_stats.rs`; each spec's hits checked against the CPU BVH's, then
//! traced `REPS` more times (host wall time of each trace, everything
//! included):
//!
//!     cargo run --release -p caustic-accel --example gpu_dacrt_stats -- \
//!         SCENE WIDTH HEIGHT EYE_X,EYE_Y,EYE_Z,AT_X,AT_Y,AT_Z,UP_X,UP_Y,UP_Z,FOV REPS SPEC...

use caustic_accel::bvh::build::upload_triangles;
use caustic_accel::bvh::traverse_cuda::{GpuHit, GpuRay};
use caustic_accel::dacrt::{DacrtConfig, DacrtTracer};
use caustic_accel::{Accel, TriangleBvh};
use caustic_geom::Vec3;
use caustic_geom::protocol::{self, ProtocolCamera};
use caustic_gpu::{DeviceBuffer, Gpu};

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [scene, width, height, camera, reps, specs @ ..] = args.as_slice() else {
        return Err("usage: gpu_dacrt_stats SCENE WIDTH HEIGHT EYE,AT,UP,FOV REPS SPEC...".into());
    };
    let scene =
        caustic_scene::Scene::load(std::path::Path::new(scene)).map_err(|e| e.to_string())?;
    let triangles = scene.triangles();
    let number = |s: &String| s.parse::<u32>().map_err(|e| format!("{s}: {e}"));
    let numbers: Vec<f32> = camera
        .split(',')
        .map(|x| x.trim().parse::<f32>().map_err(|e| format!("{x}: {e}")))
        .collect::<Result<_, _>>()?;
    let [ex, ey, ez, ax, ay, az, ux, uy, uz, fov] = numbers[..] else {
        return Err("the camera is ten numbers: eye, at, up, fov".into());
    };
    let camera = ProtocolCamera::from_f32(
        Vec3::new(ex, ey, ez),
        Vec3::new(ax, ay, az),
        Vec3::new(ux, uy, uz),
        fov,
    );
    let rays = protocol::primary_rays(&camera, number(width)?, number(height)?);
    let mut want = vec![None; rays.len()];
    TriangleBvh::build(&triangles).intersect_batch(&rays, &mut want);
    let gpu = Gpu::probe().map_err(|e| e.to_string())?;
    println!("device: {}", gpu.info());
    let fail = |e: caustic_gpu::GpuError| e.to_string();
    let device_tris = upload_triangles(&gpu, &triangles).map_err(fail)?;
    let words: Vec<GpuRay> = rays.iter().map(GpuRay::from).collect();
    let device_rays = DeviceBuffer::from_slice(&gpu, "rays", &words).map_err(fail)?;
    let mut hits = DeviceBuffer::<GpuHit>::uninit(&gpu, "hits", rays.len()).map_err(fail)?;
    for spec in specs {
        let mut tracer = DacrtTracer::new(&gpu, DacrtConfig::parse(spec)?).map_err(fail)?;
        let first = tracer
            .intersect(&device_tris, &device_rays, &mut hits)
            .map_err(fail)?;
        let got: Vec<_> = hits
            .download()
            .map_err(fail)?
            .iter()
            .map(GpuHit::to_hit)
            .collect();
        if got != want {
            return Err(format!("{spec}: hits differ from the BVH's"));
        }
        println!("{spec}: {} rays, first trace {first:?}", rays.len());
        for _ in 0..number(reps)? {
            let stats = tracer
                .intersect(&device_tris, &device_rays, &mut hits)
                .map_err(fail)?;
            let pool = stats.pool.map(|p| p.to_string()).unwrap_or_default();
            println!(
                "{spec}: {:.2} ms ({:.0} Mrays/s), {} tasks ({} direct, {} pairs), depth {}, \
                 arenas {} + {} words, {} runs; {pool}",
                stats.wall_ms,
                rays.len() as f64 / stats.wall_ms / 1e3,
                stats.tasks,
                stats.direct_tasks,
                stats.pair_tests,
                stats.max_depth,
                stats.arena_words[0],
                stats.arena_words[1],
                stats.runs
            );
        }
    }
    Ok(())
}
