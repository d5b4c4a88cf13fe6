//! `<sensor type="perspective">` and its `<film>` to the scene's camera and
//! film size.
//!
//! Mitsuba's camera looks along local `+z` of `to_world` with `+y` up; its
//! local `+x` points to the image's *left*. caustic's camera takes `right =
//! forward x up`, which for a proper rotation is exactly Mitsuba's image
//! right (`-x`), so eye, target and up carry over unchanged (for the
//! reference scenes: eye (0, 0, 3.9) looking down `-z`, image right = `+x`).
//! A mirroring `to_world` cannot be represented and is warned about.
//!
//! The field of view: `fov` along `fov_axis` (`x` default, `y`, `smaller`
//! and `larger` resolved with the film's aspect ratio, `diagonal` converted
//! exactly to `x`), or without `fov` the `focal_length` (default `50mm`) of
//! a 36 x 24 mm frame, which Mitsuba measures along the diagonal.

use super::{Loader, elements};
use crate::{Camera, ErrorKind, FilmSize, FovAxis, SceneError};
use caustic_geom::{Mat4, Vec3};
use roxmltree::Node;

/// Mitsuba's `hdrfilm` size when the file gives none.
const DEFAULT_FILM: FilmSize = FilmSize {
    width: 768,
    height: 576,
};

impl<'a, 'input> Loader<'a, 'input> {
    pub(super) fn sensor(&mut self, node: Node<'a, 'input>) -> Result<(), SceneError> {
        let ty = self.required_attr(node, "type")?;
        match ty.as_str() {
            "perspective" => {}
            "thinlens" => self.warn(
                node,
                "thin lens read as a pinhole camera (no depth of field)",
            ),
            _ => {
                self.warn(node, "unsupported sensor type; skipped");
                return Ok(());
            }
        }
        if self.scene.camera.is_some() {
            self.warn(node, "only the first sensor is used; skipped");
            return Ok(());
        }
        let film = self.film(node)?;
        let (fov_deg, fov_axis) = self.field_of_view(node, film.unwrap_or(DEFAULT_FILM))?;
        let (eye, target, up) = match self.single_lookat(node)? {
            Some(frame) => frame,
            None => self.camera_frame(node)?,
        };
        self.scene.camera = Some(Camera {
            eye,
            target,
            up,
            fov_deg,
            fov_axis,
        });
        self.scene.film = film;
        Ok(())
    }

    /// Eye, target and up of a general `to_world`: the origin, local `+z`
    /// and local `+y` mapped to world space.
    fn camera_frame(&mut self, node: Node<'a, 'input>) -> Result<(Vec3, Vec3, Vec3), SceneError> {
        let to_world = self.to_world(node)?.unwrap_or(Mat4::IDENTITY);
        if to_world.determinant() < 0.0 {
            self.warn(
                node,
                "sensor to_world mirrors the image; caustic renders it unmirrored",
            );
        }
        let eye = to_world.transform_point3(Vec3::ZERO);
        let forward = to_world.transform_vector3(Vec3::Z).normalize_or_zero();
        Ok((eye, eye + forward, to_world.transform_vector3(Vec3::Y)))
    }

    /// The sensor's `<film>` size, or `None` when it has no film.
    fn film(&mut self, sensor: Node<'a, 'input>) -> Result<Option<FilmSize>, SceneError> {
        let Some(film) = elements(sensor).find(|n| n.tag_name().name() == "film") else {
            return Ok(None);
        };
        let size = |name: &str, default: u32| -> Result<u32, SceneError> {
            match self.integer(film, name)? {
                None => Ok(default),
                Some(v) if (1..=1 << 16).contains(&v) => Ok(v as u32),
                Some(v) => Err(self.error(
                    ErrorKind::InvalidValue,
                    film,
                    format!("film {name} must be in 1..=65536, got {v}"),
                )),
            }
        };
        let width = size("width", DEFAULT_FILM.width)?;
        let height = size("height", DEFAULT_FILM.height)?;
        Ok(Some(FilmSize { width, height }))
    }

    fn field_of_view(
        &mut self,
        sensor: Node<'a, 'input>,
        film: FilmSize,
    ) -> Result<(f32, FovAxis), SceneError> {
        let aspect = film.width as f32 / film.height as f32;
        let (fov, axis) = match self.float(sensor, "fov")? {
            Some(fov) => {
                let axis = self
                    .string(sensor, "fov_axis")?
                    .unwrap_or_else(|| "x".into());
                (fov, axis)
            }
            None => (self.focal_length_fov(sensor)?, "diagonal".to_string()),
        };
        if !(fov > 0.0 && fov < 180.0) {
            return Err(self.error(
                ErrorKind::InvalidValue,
                sensor,
                format!("field of view must be in (0°, 180°), got {fov}°"),
            ));
        }
        let landscape = aspect >= 1.0;
        let resolved = match axis.as_str() {
            "x" => (fov, FovAxis::X),
            "y" => (fov, FovAxis::Y),
            "smaller" if landscape => (fov, FovAxis::Y),
            "smaller" => (fov, FovAxis::X),
            "larger" if landscape => (fov, FovAxis::X),
            "larger" => (fov, FovAxis::Y),
            "diagonal" => {
                // tan(fov_x / 2) = tan(fov_d / 2) * width / diagonal.
                let t = (0.5 * fov.to_radians()).tan() * aspect / (aspect * aspect + 1.0).sqrt();
                (2.0 * t.atan().to_degrees(), FovAxis::X)
            }
            other => {
                return Err(self.error(
                    ErrorKind::InvalidValue,
                    sensor,
                    format!("unknown fov_axis '{other}'"),
                ));
            }
        };
        Ok(resolved)
    }

    /// Diagonal field of view of a 36 x 24 mm frame behind `focal_length`.
    fn focal_length_fov(&self, sensor: Node<'a, 'input>) -> Result<f32, SceneError> {
        let text = self
            .string(sensor, "focal_length")?
            .unwrap_or_else(|| "50mm".into());
        let focal = self.number(sensor, text.trim().trim_end_matches("mm"))?;
        if focal <= 0.0 {
            return Err(self.error(
                ErrorKind::InvalidValue,
                sensor,
                format!("focal length must be positive, got {text}"),
            ));
        }
        let diagonal = (36.0f32 * 36.0 + 24.0 * 24.0).sqrt();
        Ok(2.0 * (0.5 * diagonal / focal).atan().to_degrees())
    }
}
