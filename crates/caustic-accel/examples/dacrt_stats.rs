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
#[path = "common/protocol_scene.rs"]
mod protocol_scene;

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [scene, width, height, camera, specs @ ..] = args.as_slice() else {
        return Err("usage: dacrt_stats SCENE WIDTH HEIGHT EYE,AT,UP,FOV SPEC...".into());
    };
    let protocol_scene::ProtocolScene {
        triangles,
        rays,
        want,
    } = protocol_scene::load(scene, width, height, camera)?;
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
