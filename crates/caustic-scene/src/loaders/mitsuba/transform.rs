//! `<transform name="to_world">`: `matrix`, `translate`, `scale`, `rotate`
//! and `lookat` steps, composed in document order. Each step is applied
//! after the ones before it (pre-multiplied), as in Mitsuba.

use super::{Loader, elements};
use crate::{ErrorKind, SceneError};
use caustic_geom::{Mat3, Mat4, Vec3};
use roxmltree::Node;

/// The `<transform name="to_world">` child (`toWorld` in older files).
fn to_world_element<'a, 'input>(node: Node<'a, 'input>) -> Option<Node<'a, 'input>> {
    elements(node).find(|c| {
        c.tag_name().name() == "transform"
            && matches!(c.attribute("name"), Some("to_world" | "toWorld"))
    })
}

impl<'a, 'input> Loader<'a, 'input> {
    /// The plugin's `to_world` transform (`toWorld` in older files), if any.
    pub(super) fn to_world(&self, node: Node<'a, 'input>) -> Result<Option<Mat4>, SceneError> {
        to_world_element(node)
            .map(|t| self.transform(t))
            .transpose()
    }

    /// `(origin, target, up)` when `to_world` is exactly one `<lookat>`
    /// with an `up`: a camera keeps the numbers as written, rather than
    /// the rounded ones recovered from the matrix.
    pub(super) fn single_lookat(
        &self,
        node: Node<'a, 'input>,
    ) -> Result<Option<(Vec3, Vec3, Vec3)>, SceneError> {
        let Some(transform) = to_world_element(node) else {
            return Ok(None);
        };
        let steps: Vec<Node> = elements(transform).collect();
        let [step] = steps[..] else {
            return Ok(None);
        };
        if !matches!(step.tag_name().name(), "lookat" | "lookAt") {
            return Ok(None);
        }
        // Validates the frame (errors on a degenerate one).
        self.lookat(step)?;
        let origin = self.vec3_attr(step, "origin")?;
        let target = self.vec3_attr(step, "target")?;
        let up = self.vec3_attr(step, "up")?;
        Ok(origin.zip(target).zip(up).map(|((o, t), u)| (o, t, u)))
    }

    fn transform(&self, node: Node) -> Result<Mat4, SceneError> {
        let mut m = Mat4::IDENTITY;
        for step in elements(node) {
            m = self.transform_step(step)? * m;
        }
        Ok(m)
    }

    fn transform_step(&self, step: Node) -> Result<Mat4, SceneError> {
        match step.tag_name().name() {
            "matrix" => self.matrix(step),
            "translate" => Ok(Mat4::from_translation(self.xyz_or_value(step, 0.0)?)),
            "scale" => self.scale(step),
            "rotate" => self.rotate(step),
            "lookat" | "lookAt" => self.lookat(step),
            other => Err(self.error(
                ErrorKind::Unsupported,
                step,
                format!("unknown transform step <{other}>"),
            )),
        }
    }

    /// `value="16 numbers"` (or 9 for a 3x3 linear map), row-major.
    fn matrix(&self, step: Node) -> Result<Mat4, SceneError> {
        let values = self.numbers(step, &self.required_attr(step, "value")?)?;
        match values.len() {
            16 => Ok(Mat4::from_cols_slice(&values).transpose()),
            9 => Ok(Mat4::from_mat3(Mat3::from_cols_slice(&values).transpose())),
            n => Err(self.error(
                ErrorKind::InvalidValue,
                step,
                format!("a matrix needs 16 (or 9) numbers, got {n}"),
            )),
        }
    }

    /// `value="x y z"`, or `x= y= z=` attributes defaulting to `default`.
    fn xyz_or_value(&self, step: Node, default: f32) -> Result<Vec3, SceneError> {
        if let Some(v) = self.vec3_attr(step, "value")? {
            return Ok(v);
        }
        Ok(Vec3::new(
            self.float_attr(step, "x", default)?,
            self.float_attr(step, "y", default)?,
            self.float_attr(step, "z", default)?,
        ))
    }

    /// `value="s"` (uniform), `value="x y z"`, or `x= y= z=` (default 1).
    fn scale(&self, step: Node) -> Result<Mat4, SceneError> {
        if let Some(text) = self.attr(step, "value")?
            && let [s] = self.numbers(step, &text)?[..]
        {
            return Ok(Mat4::from_scale(Vec3::splat(s)));
        }
        Ok(Mat4::from_scale(self.xyz_or_value(step, 1.0)?))
    }

    /// Right-handed rotation by `angle` degrees about the axis given as
    /// `value="x y z"` or `x= y= z=` attributes.
    fn rotate(&self, step: Node) -> Result<Mat4, SceneError> {
        let axis = self.xyz_or_value(step, 0.0)?;
        let angle = self.float_attr(step, "angle", 0.0)?;
        let Some(axis) = axis.try_normalize() else {
            return Err(self.error(ErrorKind::InvalidValue, step, "rotation axis is zero"));
        };
        Ok(Mat4::from_axis_angle(axis, angle.to_radians()))
    }

    /// Mitsuba's look-at frame: local +z looks at the target, +y is up and
    /// +x = up x forward (which points to the image's left for a camera).
    fn lookat(&self, step: Node) -> Result<Mat4, SceneError> {
        let need = |name: &str| {
            self.vec3_attr(step, name)?.ok_or_else(|| {
                self.error(
                    ErrorKind::Syntax,
                    step,
                    format!("missing attribute '{name}'"),
                )
            })
        };
        let origin = need("origin")?;
        let target = need("target")?;
        let dir = (target - origin).try_normalize();
        let up = match self.vec3_attr(step, "up")? {
            Some(up) => up,
            // Mitsuba picks any up vector when none is given.
            None if dir.is_some_and(|d| d.y.abs() < 0.99) => Vec3::Y,
            None => Vec3::Z,
        };
        let left = dir.and_then(|d| up.cross(d).try_normalize());
        let (Some(dir), Some(left)) = (dir, left) else {
            return Err(self.error(
                ErrorKind::InvalidValue,
                step,
                "degenerate lookat (origin equals target, or up is parallel to the view direction)",
            ));
        };
        let new_up = dir.cross(left);
        Ok(Mat4::from_cols(
            left.extend(0.0),
            new_up.extend(0.0),
            dir.extend(0.0),
            origin.extend(1.0),
        ))
    }
}
