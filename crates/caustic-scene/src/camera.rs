use caustic_geom::{Aabb, Vec3};

/// Which image side the field of view spans.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FovAxis {
    /// Horizontal (Mitsuba's default).
    X,
    /// Vertical (OBJ scene tables, glTF, the ray protocol).
    #[default]
    Y,
}

/// A pinhole camera given by a look-at frame and a full field-of-view angle.
///
/// The frame is `forward = normalize(target - eye)`,
/// `right = normalize(forward x up)`, `up' = right x forward`: image right is
/// `right`, image up is `up'` (the convention of Mitsuba's `lookat` and of the
/// ray protocol).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Camera {
    pub eye: Vec3,
    pub target: Vec3,
    pub up: Vec3,
    /// Full field of view in degrees along [`Self::fov_axis`].
    pub fov_deg: f32,
    pub fov_axis: FovAxis,
}

impl Camera {
    /// A camera with a vertical field of view.
    pub fn look_at(eye: Vec3, target: Vec3, up: Vec3, fov_y_deg: f32) -> Self {
        Self {
            eye,
            target,
            up,
            fov_deg: fov_y_deg,
            fov_axis: FovAxis::Y,
        }
    }

    /// A camera that sees all of the box: looking at its centre with a 45°
    /// vertical field of view from a 3/4 view above its front (+z) right
    /// (+x) side, +y up, 30° round and 30° up. The view is oblique to every
    /// axis so that a flat model lying in an axis plane (a floor plan, a
    /// relief facing +z, a terrain) is never seen edge-on.
    pub fn framing(bounds: Aabb) -> Self {
        let (center, radius) = if bounds.is_empty() || !bounds.is_finite() {
            (Vec3::ZERO, 1.0)
        } else {
            (bounds.center(), (0.5 * bounds.diagonal()).max(1e-6))
        };
        let (round, up) = (30f32.to_radians(), 30f32.to_radians());
        let towards_eye = Vec3::new(round.sin() * up.cos(), up.sin(), round.cos() * up.cos());
        let half = 22.5f32.to_radians();
        let dist = radius / half.sin();
        Self::look_at(center + towards_eye * dist, center, Vec3::Y, 45.0)
    }

    /// `(tan(fov_x / 2), tan(fov_y / 2))` for an image of the given aspect
    /// ratio (width / height).
    pub fn half_extents(&self, aspect: f32) -> (f32, f32) {
        let t = (self.fov_deg.to_radians() * 0.5).tan();
        match self.fov_axis {
            FovAxis::X => (t, t / aspect),
            FovAxis::Y => (t * aspect, t),
        }
    }

    /// Orthonormal `(forward, right, up)` frame.
    pub fn frame(&self) -> (Vec3, Vec3, Vec3) {
        let forward = (self.target - self.eye).normalize();
        let right = forward.cross(self.up).normalize();
        let up = right.cross(forward);
        (forward, right, up)
    }

    /// True when the frame is well defined (eye ≠ target, up not parallel to
    /// the view direction, a field of view in (0°, 180°)).
    pub fn is_valid(&self) -> bool {
        let (f, r, u) = self.frame();
        f.is_finite()
            && r.is_finite()
            && u.is_finite()
            && self.fov_deg > 0.0
            && self.fov_deg < 180.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A flat square in each axis plane: the framing camera sees its face
    /// at a steep enough angle (not edge-on) and has all of it in view.
    #[test]
    fn framing_sees_flat_models_face_on_enough() {
        for normal in [Vec3::X, Vec3::Y, Vec3::Z] {
            let extent = Vec3::ONE - normal;
            let bounds = Aabb::new(-extent, extent);
            let camera = Camera::framing(bounds);
            assert!(camera.is_valid());
            let (forward, _, _) = camera.frame();
            assert!(forward.dot(normal).abs() > 0.4, "{normal}: {forward}");
            let to_corner = (extent - camera.eye).normalize();
            let half = (camera.fov_deg * 0.5).to_radians();
            assert!(
                to_corner.dot(forward) > half.cos(),
                "{normal}: corner out of view"
            );
        }
    }
}
