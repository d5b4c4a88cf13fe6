use caustic_geom::{Ray, Vec3};
use caustic_scene::Camera;

/// Primary-ray generator for a [`Camera`] and an image size.
///
/// Pixel `(i, j)` (column from the left, row from the top) with film
/// position `(u, v)` in `[0, 1)²` inside it gets the direction
/// `normalize(forward + (2 sx - 1) tx right + (1 - 2 sy) ty up)` with
/// `sx = (i + u) / width`, `sy = (j + v) / height` and `(tx, ty)` the tangents
/// of the half field of view: Mitsuba's perspective sensor and the ray
/// protocol's camera, in one formula.
#[derive(Clone, Copy, Debug)]
pub struct PinholeCamera {
    pub eye: Vec3,
    forward: Vec3,
    right: Vec3,
    up: Vec3,
    width: u32,
    height: u32,
}

impl PinholeCamera {
    pub fn new(camera: &Camera, width: u32, height: u32) -> Self {
        let (forward, right, up) = camera.frame();
        let (tx, ty) = camera.half_extents(width as f32 / height as f32);
        Self {
            eye: camera.eye,
            forward,
            right: right * tx,
            up: up * ty,
            width,
            height,
        }
    }

    /// The ray through film position `(x, y)` in pixels from the top left.
    pub fn ray(&self, x: f32, y: f32) -> Ray {
        let sx = 2.0 * x / self.width as f32 - 1.0;
        let sy = 1.0 - 2.0 * y / self.height as f32;
        let dir = (self.forward + sx * self.right + sy * self.up).normalize();
        Ray::new(self.eye, dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_camera_convention() {
        // The refs' camera: eye (0,0,3.9) looking down -z, horizontal fov 39.3077°.
        let cam = Camera {
            eye: Vec3::new(0.0, 0.0, 3.9),
            target: Vec3::ZERO,
            up: Vec3::Y,
            fov_deg: 39.3077,
            fov_axis: caustic_scene::FovAxis::X,
        };
        let pc = PinholeCamera::new(&cam, 512, 512);
        let centre = pc.ray(256.0, 256.0);
        assert!((centre.dir - Vec3::NEG_Z).length() < 1e-6);
        // Right edge of the image: (2*1-1)*t with t = 0.357143, image right = +x.
        let right = pc.ray(512.0, 256.0);
        let expected = Vec3::new(0.357143, 0.0, -1.0).normalize();
        assert!((right.dir - expected).length() < 1e-5, "{:?}", right.dir);
        let top = pc.ray(256.0, 0.0);
        assert!(top.dir.y > 0.0);
    }
}
