//! The CPU DACRT's task statistics (`DacrtStats`: tasks, direct tasks,
//! pair tests, depth, the critical path of the children's dependencies
//! under the spec's schedule, e.g. `dacrt` against `dacrt:sched=waves`,
//! and the items partitioned) for a scene's protocol primary rays, each
//! spec's hits checked against the BVH's:
//!
//!     cargo run --release -p caustic-accel --example dacrt_stats -- \
//!         SCENE WIDTH HEIGHT EYE_X,EYE_Y,EYE_Z,AT_X,AT_Y,AT_Z,UP_X,UP_Y,UP_Z,FOV SPEC...
//!
//! e.g. Sponza with its standard camera: `target/scenes/sponza-dabrovic/sponza.obj
//! 1920 1080 -14,0,2.5,0,0,4,0,0,1,65 dacrt dacrt:sort=300`.

use caustic_accel::dacrt::{Dacrt, DacrtConfig};
use caustic_accel::{Accel, TriangleBvh};
use caustic_geom::Vec3;
use caustic_geom::protocol::{self, ProtocolCamera};

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [scene, width, height, camera, specs @ ..] = args.as_slice() else {
        return Err("usage: dacrt_stats SCENE WIDTH HEIGHT EYE,AT,UP,FOV SPEC...".into());
    };
    let scene =
        caustic_scene::Scene::load(std::path::Path::new(scene)).map_err(|e| e.to_string())?;
    let triangles = scene.triangles();
    let size = |s: &String| s.parse::<u32>().map_err(|e| format!("{s}: {e}"));
    let numbers: Vec<f32> = camera
        .split(',')
        .map(|x| x.trim().parse::<f32>().map_err(|e| format!("{x}: {e}")))
        .collect::<Result<_, _>>()?;
    let [ex, ey, ez, ax, ay, az, ux, uy, uz, fov] = numbers[..] else {
        return Err("the camera is ten numbers: eye, at, up, fov".into());
    };
    let camera = caustic_scene::Camera::look_at(
        Vec3::new(ex, ey, ez),
        Vec3::new(ax, ay, az),
        Vec3::new(ux, uy, uz),
        fov,
    );
    let camera = ProtocolCamera::from_f32(camera.eye, camera.target, camera.up, camera.fov_deg);
    let rays = protocol::primary_rays(&camera, size(width)?, size(height)?);
    let mut want = vec![None; rays.len()];
    TriangleBvh::build(&triangles).intersect_batch(&rays, &mut want);
    for spec in specs {
        let dacrt = Dacrt::new(&triangles, DacrtConfig::parse(spec)?);
        let mut got = vec![None; rays.len()];
        let stats = dacrt.closest_hits(&rays, &mut got);
        if got != want {
            return Err(format!("{spec}: hits differ from the BVH's"));
        }
        println!("{spec}: {} rays, {stats:?}", rays.len());
    }
    Ok(())
}
