//! `<emitter>` plugins: `area` inside a shape (emitted radiance of its
//! material), and at top level `point` (intensity), `spot` (intensity,
//! `cutoff_angle`, `beam_width`), `directional` (irradiance) and
//! `constant` (the background radiance, seen by rays that leave the scene).
//! Other emitters (`envmap`, `projector`, ...) are skipped with a warning.

use super::{Loader, elements};
use crate::{ErrorKind, Light, SceneError};
use caustic_geom::{Mat4, Rgb, Vec3};
use roxmltree::Node;

impl<'a, 'input> Loader<'a, 'input> {
    /// Radiance of the shape's `<emitter type="area">`, if it has one.
    pub(super) fn area_emission(
        &mut self,
        shape: Node<'a, 'input>,
    ) -> Result<Option<Rgb>, SceneError> {
        let mut emission = None;
        for emitter in elements(shape).filter(|n| n.tag_name().name() == "emitter") {
            let ty = self.required_attr(emitter, "type")?;
            if ty != "area" {
                self.warn(
                    emitter,
                    "only area emitters can be attached to shapes; skipped",
                );
            } else if emission.is_some() {
                self.warn(emitter, "a shape takes one area emitter; skipped");
            } else {
                let radiance = self.color(emitter, "radiance")?.unwrap_or(Rgb::ONE);
                self.check_non_negative(emitter, radiance)?;
                emission = Some(radiance);
            }
        }
        Ok(emission)
    }

    pub(super) fn top_level_emitter(&mut self, node: Node<'a, 'input>) -> Result<(), SceneError> {
        let ty = self.required_attr(node, "type")?;
        let light = match ty.as_str() {
            "point" => self.point_light(node)?,
            "spot" => self.spot_light(node)?,
            "directional" => self.directional_light(node)?,
            "constant" => {
                let radiance = self.color(node, "radiance")?.unwrap_or(Rgb::ONE);
                self.check_non_negative(node, radiance)?;
                self.scene.background = radiance;
                return Ok(());
            }
            "area" => {
                self.warn(node, "an area emitter must be inside a shape; skipped");
                return Ok(());
            }
            _ => {
                self.warn(node, "unsupported emitter type; skipped");
                return Ok(());
            }
        };
        self.scene.lights.push(light);
        Ok(())
    }

    fn point_light(&mut self, node: Node<'a, 'input>) -> Result<Light, SceneError> {
        let to_world = self.to_world(node)?.unwrap_or(Mat4::IDENTITY);
        let position = match self.point(node, "position")? {
            Some(p) => p,
            None => to_world.transform_point3(Vec3::ZERO),
        };
        let intensity = self.intensity(node)?;
        Ok(Light::Point {
            position,
            intensity,
        })
    }

    /// Mitsuba's spot light shines along local `+z` of `to_world`, full
    /// intensity up to `beam_width` and none beyond `cutoff_angle`.
    fn spot_light(&mut self, node: Node<'a, 'input>) -> Result<Light, SceneError> {
        let to_world = self.to_world(node)?.unwrap_or(Mat4::IDENTITY);
        let cutoff = self.float(node, "cutoff_angle")?.unwrap_or(20.0);
        let beam = self.float(node, "beam_width")?.unwrap_or(0.75 * cutoff);
        if !(cutoff > 0.0 && cutoff <= 180.0 && beam >= 0.0) {
            return Err(self.error(
                ErrorKind::InvalidValue,
                node,
                format!("spot angles out of range (cutoff {cutoff}°, beam {beam}°)"),
            ));
        }
        let direction = self.unit(node, to_world.transform_vector3(Vec3::Z))?;
        Ok(Light::Spot {
            position: to_world.transform_point3(Vec3::ZERO),
            direction,
            intensity: self.intensity(node)?,
            cos_falloff_start: beam.min(cutoff).to_radians().cos(),
            cos_total_width: cutoff.to_radians().cos(),
        })
    }

    /// Light travels along `direction` (or local `+z` of `to_world`).
    fn directional_light(&mut self, node: Node<'a, 'input>) -> Result<Light, SceneError> {
        let direction = match self.point(node, "direction")? {
            Some(d) => d,
            None => {
                let to_world = self.to_world(node)?.unwrap_or(Mat4::IDENTITY);
                to_world.transform_vector3(Vec3::Z)
            }
        };
        let irradiance = self.color(node, "irradiance")?.unwrap_or(Rgb::ONE);
        self.check_non_negative(node, irradiance)?;
        Ok(Light::Directional {
            direction: self.unit(node, direction)?,
            irradiance,
        })
    }

    fn intensity(&mut self, node: Node<'a, 'input>) -> Result<Rgb, SceneError> {
        let intensity = self.color(node, "intensity")?.unwrap_or(Rgb::ONE);
        self.check_non_negative(node, intensity)?;
        Ok(intensity)
    }

    fn unit(&self, node: Node, v: Vec3) -> Result<Vec3, SceneError> {
        v.try_normalize()
            .ok_or_else(|| self.error(ErrorKind::InvalidValue, node, "direction is zero"))
    }

    fn check_non_negative(&self, node: Node, c: Rgb) -> Result<(), SceneError> {
        if c.min_element() >= 0.0 {
            Ok(())
        } else {
            Err(self.error(
                ErrorKind::InvalidValue,
                node,
                format!("emitted power must not be negative, got {c}"),
            ))
        }
    }
}
