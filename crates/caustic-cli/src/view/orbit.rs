//! The viewer's camera moves, as the mouse makes them: orbit around the
//! target, pan across the view, zoom towards the target; and the camera as
//! the protocol writes it.

use caustic_geom::{Mat3, Vec3};
use caustic_scene::{Camera, FovAxis};
use serde::Serialize;

/// A camera on the wire: eye, target, up, and the vertical field of view
/// in degrees.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct CameraWire {
    pub eye: [f32; 3],
    pub target: [f32; 3],
    pub up: [f32; 3],
    pub fov: f32,
}

impl CameraWire {
    /// `camera` for an image of `aspect` (width / height): a horizontal
    /// field of view becomes the vertical one it gives at that aspect, so
    /// the wire has one convention.
    pub fn from_camera(camera: &Camera, aspect: f32) -> Self {
        Self {
            eye: camera.eye.to_array(),
            target: camera.target.to_array(),
            up: camera.up.to_array(),
            fov: vertical_fov(camera, aspect),
        }
    }

    pub fn to_camera(self) -> Camera {
        Camera::look_at(
            Vec3::from(self.eye),
            Vec3::from(self.target),
            Vec3::from(self.up),
            self.fov,
        )
    }
}

/// The vertical field of view in degrees of `camera` at `aspect`.
fn vertical_fov(camera: &Camera, aspect: f32) -> f32 {
    match camera.fov_axis {
        FovAxis::Y => camera.fov_deg,
        FovAxis::X => 2.0 * camera.half_extents(aspect).1.atan().to_degrees(),
    }
}

/// How close to straight up or down an orbit may look: at the pole the
/// up vector would lie along the view and the image would spin.
const POLE_MARGIN: f32 = 1.0 * std::f32::consts::PI / 180.0;

/// `camera` turned around its target: `yaw` radians about its up vector,
/// then `pitch` radians over the top (positive raises the eye), stopping
/// short of the poles. Distance, target, up and field of view are kept.
pub fn orbit(camera: &Camera, yaw: f32, pitch: f32) -> Camera {
    let up = camera.up.normalize();
    let offset = Mat3::from_axis_angle(up, -yaw) * (camera.eye - camera.target);
    let polar = offset.normalize().dot(up).clamp(-1.0, 1.0).acos();
    let wanted = (polar - pitch).clamp(POLE_MARGIN, std::f32::consts::PI - POLE_MARGIN);
    let right = (-offset).cross(up).normalize();
    let offset = Mat3::from_axis_angle(right, wanted - polar) * offset;
    Camera {
        eye: camera.target + offset,
        ..*camera
    }
}

/// `camera` moved across the view with its target: `right` and `up` are
/// fractions of the image height at the target's distance, for an image
/// of `aspect`.
pub fn pan(camera: &Camera, right: f32, up: f32, aspect: f32) -> Camera {
    let (_, image_right, image_up) = camera.frame();
    let distance = camera.eye.distance(camera.target);
    let height = 2.0 * distance * camera.half_extents(aspect).1;
    let shift = (image_right * right + image_up * up) * height;
    Camera {
        eye: camera.eye + shift,
        target: camera.target + shift,
        ..*camera
    }
}

/// `camera` with its distance to the target multiplied by `factor`.
pub fn zoom(camera: &Camera, factor: f32) -> Camera {
    Camera {
        eye: camera.target + (camera.eye - camera.target) * factor,
        ..*camera
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: Vec3, b: Vec3) -> bool {
        a.distance(b) < 1e-4
    }

    fn front() -> Camera {
        Camera::look_at(Vec3::new(0.0, 0.0, 4.0), Vec3::ZERO, Vec3::Y, 60.0)
    }

    #[test]
    fn orbits_keep_the_distance_and_stop_at_the_poles() {
        let quarter = std::f32::consts::FRAC_PI_2;
        let turned = orbit(&front(), quarter, 0.0);
        assert!(
            close(turned.eye, Vec3::new(-4.0, 0.0, 0.0)),
            "{}",
            turned.eye
        );
        let raised = orbit(&front(), 0.0, 0.5);
        assert!((raised.eye.length() - 4.0).abs() < 1e-4);
        assert!(
            raised.eye.y > 1.5 && raised.eye.x.abs() < 1e-4,
            "{}",
            raised.eye
        );
        // However far the drag, the view never lines up with up.
        let top = orbit(&front(), 0.0, 10.0);
        assert!(crate::camera::usable(&top), "{top:?}");
        assert!(top.eye.y > 3.99 && top.eye.y < 4.0);
        let bottom = orbit(&front(), 0.0, -10.0);
        assert!(crate::camera::usable(&bottom) && bottom.eye.y < -3.99);
    }

    #[test]
    fn pans_move_eye_and_target_together_and_zoom_scales_the_distance() {
        let moved = pan(&front(), 0.5, 0.0, 1.0);
        // The view is 2 * 4 * tan(30°) high: half of it to the right.
        let half = 4.0 * 30f32.to_radians().tan();
        assert!(
            close(moved.target, Vec3::new(half, 0.0, 0.0)),
            "{}",
            moved.target
        );
        assert!(close(moved.eye - moved.target, front().eye));
        let nearer = zoom(&front(), 0.5);
        assert!(close(nearer.eye, Vec3::new(0.0, 0.0, 2.0)));
    }

    #[test]
    fn the_wire_uses_the_vertical_field_of_view() {
        let wide = Camera {
            fov_axis: FovAxis::X,
            ..front()
        };
        let wire = CameraWire::from_camera(&wide, 2.0);
        // tan(30°) across 2:1 is tan(30°) / 2 up.
        let want = 2.0 * (30f32.to_radians().tan() / 2.0).atan().to_degrees();
        assert!((wire.fov - want).abs() < 1e-3, "{}", wire.fov);
        let back = wire.to_camera();
        assert_eq!((back.eye, back.fov_axis), (wide.eye, FovAxis::Y));
    }
}
