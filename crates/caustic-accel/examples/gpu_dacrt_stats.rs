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
use caustic_gpu::{DeviceBuffer, Gpu};

#[path = "common/protocol_scene.rs"]
mod protocol_scene;

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [scene, width, height, camera, reps, specs @ ..] = args.as_slice() else {
        return Err("usage: gpu_dacrt_stats SCENE WIDTH HEIGHT EYE,AT,UP,FOV REPS SPEC...".into());
    };
    let protocol_scene::ProtocolScene {
        triangles,
        rays,
        want,
    } = protocol_scene::load(scene, width, height, camera)?;
    let reps: u32 = reps.parse().map_err(|e| format!("{reps}: {e}"))?;
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
        for _ in 0..reps {
            let stats = tracer
                .intersect(&device_tris, &device_rays, &mut hits)
                .map_err(fail)?;
            let mrays = rays.len() as f64 / stats.wall_ms / 1e3;
            println!("{spec}: {mrays:.0} Mrays/s, {stats}");
        }
    }
    Ok(())
}
