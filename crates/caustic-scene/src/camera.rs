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

    /// A camera in front of the box (on its +z side), looking at its centre
    /// with a 45° vertical field of view, far enough to see all of it.
    pub fn framing(bounds: Aabb) -> Self {
        let (center, radius) = if bounds.is_empty() || !bounds.is_finite() {
            (Vec3::ZERO, 1.0)
        } else {
            (bounds.center(), (0.5 * bounds.diagonal()).max(1e-6))
        };
        let half = 22.5f32.to_radians();
        let dist = radius / half.sin();
        Self::look_at(center + Vec3::Z * dist, center, Vec3::Y, 45.0)
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
