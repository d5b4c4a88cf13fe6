//! What the DACRT statistics examples share: a scene's triangles, the
//! protocol's primary rays through a camera given as ten numbers, and the
//! CPU BVH's closest hits to check every spec's answers against.

use caustic_accel::{Accel, TriangleBvh};
use caustic_geom::protocol::{self, ProtocolCamera};
use caustic_geom::{Hit, Ray, Triangle, Vec3};

pub struct ProtocolScene {
    pub triangles: Vec<Triangle>,
    pub rays: Vec<Ray>,
    /// The CPU BVH's closest hit of each ray.
    pub want: Vec<Option<Hit>>,
}

/// The scene at `path` with `width × height` primary rays through
/// `camera`, `EYE_X,EYE_Y,EYE_Z,AT_X,AT_Y,AT_Z,UP_X,UP_Y,UP_Z,FOV`.
pub fn load(path: &str, width: &str, height: &str, camera: &str) -> Result<ProtocolScene, String> {
    let scene =
        caustic_scene::Scene::load(std::path::Path::new(path)).map_err(|e| e.to_string())?;
    let triangles = scene.triangles();
    let size = |s: &str| s.parse::<u32>().map_err(|e| format!("{s}: {e}"));
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
    let rays = protocol::primary_rays(&camera, size(width)?, size(height)?);
    let mut want = vec![None; rays.len()];
    TriangleBvh::build(&triangles).intersect_batch(&rays, &mut want);
    Ok(ProtocolScene {
        triangles,
        rays,
        want,
    })
}
