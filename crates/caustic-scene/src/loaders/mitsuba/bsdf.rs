//! `<bsdf>` plugins to [`Material`]s.
//!
//! Exact: `diffuse` (reflectance, default 0.5), `twosided`, `conductor` with
//! `material="none"` (Mitsuba 3's default: a perfect mirror of reflectance
//! `specular_reflectance`, default 1) and smooth `dielectric` (`ior =
//! int_ior / ext_ior`, numbers or Mitsuba's names such as `bk7` or `water`).
//!
//! Approximated, with a warning: other conductors (a perfect mirror, no
//! Fresnel colour), `roughconductor` and `plastic`/`roughplastic` (the
//! Phong-lobe [`Bsdf::Glossy`] with exponent `2/alpha^2 - 2`, the Phong
//! exponent whose highlight matches a Beckmann lobe of roughness `alpha`;
//! smooth plastic gets exponent 1000 and a specular weight of the normal
//! Fresnel reflectance), `thindielectric` and `roughdielectric` (smooth
//! glass), and the `bumpmap`, `normalmap` and `mask` wrappers (their nested
//! BSDF). Unknown types become Mitsuba's default BSDF, with a warning.

use super::{Loader, elements};
use crate::{Bsdf, ErrorKind, Material, SceneError};
use caustic_geom::Rgb;
use roxmltree::Node;

/// Deeper nesting than this (`twosided` inside `twosided` ...) can only be
/// a reference cycle.
const MAX_NESTING: usize = 8;

/// Named indices of refraction from Mitsuba's table (a common subset).
const NAMED_IOR: &[(&str, f32)] = &[
    ("vacuum", 1.0),
    ("air", 1.000277),
    ("water", 1.333),
    ("water ice", 1.31),
    ("acetone", 1.36),
    ("ethanol", 1.361),
    ("glycerol", 1.4729),
    ("fused quartz", 1.458),
    ("pyrex", 1.47),
    ("acrylic glass", 1.49),
    ("polypropylene", 1.49),
    ("bk7", 1.5046),
    ("sodium chloride", 1.544),
    ("amber", 1.55),
    ("pet", 1.575),
    ("diamond", 2.419),
];

/// Phong exponent of smooth plastic (a sharp but finite highlight).
const SMOOTH_PLASTIC_EXPONENT: f32 = 1000.0;

/// Mitsuba's default BSDF, used by shapes that name none: one-sided grey.
pub(super) fn default_bsdf(name: &str) -> Material {
    one_sided(name, diffuse(Rgb::splat(0.5)))
}

fn one_sided(name: &str, bsdf: Bsdf) -> Material {
    Material {
        two_sided: false,
        ..Material::with_bsdf(name, bsdf)
    }
}

fn diffuse(albedo: Rgb) -> Bsdf {
    Bsdf::Diffuse {
        albedo,
        texture: None,
    }
}

/// Phong exponent with the highlight width of roughness `alpha`.
fn phong_exponent(alpha: f32) -> f32 {
    let alpha = alpha.max(1e-3);
    (2.0 / (alpha * alpha) - 2.0).clamp(1.0, 1e4)
}

impl<'a, 'input> Loader<'a, 'input> {
    /// The element a `<ref id>` names; an unknown id is an error.
    pub(super) fn resolve_ref(
        &self,
        node: Node<'a, 'input>,
    ) -> Result<Node<'a, 'input>, SceneError> {
        let id = self.required_attr(node, "id")?;
        self.ids.get(&id).copied().ok_or_else(|| {
            self.error(
                ErrorKind::MissingReference,
                node,
                format!("no element has id '{id}'"),
            )
        })
    }

    /// The BSDF elements nested in `node`, inline or through `<ref>`;
    /// references to other kinds of objects are skipped with a warning.
    pub(super) fn nested_bsdfs(
        &mut self,
        node: Node<'a, 'input>,
    ) -> Result<Vec<Node<'a, 'input>>, SceneError> {
        let mut found = Vec::new();
        for child in elements(node) {
            match child.tag_name().name() {
                "bsdf" => found.push(child),
                "ref" => {
                    let target = self.resolve_ref(child)?;
                    if target.tag_name().name() == "bsdf" {
                        found.push(target);
                    } else {
                        self.warn(child, "reference to a non-BSDF object here; ignored");
                    }
                }
                _ => {}
            }
        }
        Ok(found)
    }

    /// Converts a `<bsdf>` element to a material named after its id.
    pub(super) fn bsdf(
        &mut self,
        node: Node<'a, 'input>,
        depth: usize,
    ) -> Result<Material, SceneError> {
        if depth > MAX_NESTING {
            return Err(self.error(
                ErrorKind::InvalidValue,
                node,
                "BSDFs nested too deeply (a reference cycle?)",
            ));
        }
        let ty = self.required_attr(node, "type")?;
        let name = match self.attr(node, "id")? {
            Some(id) => id,
            None => self.location(node),
        };
        match ty.as_str() {
            "diffuse" => {
                let albedo = self.color(node, "reflectance")?.unwrap_or(Rgb::splat(0.5));
                Ok(one_sided(&name, diffuse(albedo)))
            }
            "twosided" => self.twosided(node, depth),
            "conductor" => self.conductor(node, &name),
            "roughconductor" => self.rough_conductor(node, &name),
            "dielectric" | "thindielectric" | "roughdielectric" => {
                self.dielectric(node, &name, &ty)
            }
            "plastic" | "roughplastic" => self.plastic(node, &name, &ty),
            "bumpmap" | "normalmap" | "mask" => {
                self.warn(node, format!("{ty} is ignored; using the BSDF inside it"));
                self.first_nested(node, depth, &name)
            }
            _ => {
                self.warn(node, "unsupported BSDF; using the default grey diffuse");
                Ok(default_bsdf(&name))
            }
        }
    }

    /// The first nested BSDF (warning about any others), or the default.
    fn first_nested(
        &mut self,
        node: Node<'a, 'input>,
        depth: usize,
        name: &str,
    ) -> Result<Material, SceneError> {
        let nested = self.nested_bsdfs(node)?;
        if nested.len() > 1 {
            self.warn(node, "only the first nested BSDF is used");
        }
        match nested.first() {
            Some(&inner) => self.bsdf(inner, depth + 1),
            None => {
                self.warn(node, "no nested BSDF; using the default grey diffuse");
                Ok(default_bsdf(name))
            }
        }
    }

    fn twosided(&mut self, node: Node<'a, 'input>, depth: usize) -> Result<Material, SceneError> {
        let name = self.attr(node, "id")?;
        let mut material = self.first_nested(node, depth, "twosided")?;
        material.two_sided = true;
        if let Some(id) = name {
            material.name = id;
        }
        Ok(material)
    }

    fn conductor(&mut self, node: Node<'a, 'input>, name: &str) -> Result<Material, SceneError> {
        let kind = self.string(node, "material")?;
        let named = kind.as_deref().is_some_and(|m| m != "none");
        if named || self.property(node, "eta").is_some() || self.property(node, "k").is_some() {
            self.warn(
                node,
                "conductor approximated as a perfect mirror (no Fresnel colour)",
            );
        }
        let reflectance = self
            .color(node, "specular_reflectance")?
            .unwrap_or(Rgb::ONE);
        Ok(one_sided(name, Bsdf::Mirror { reflectance }))
    }

    fn rough_conductor(
        &mut self,
        node: Node<'a, 'input>,
        name: &str,
    ) -> Result<Material, SceneError> {
        let alpha = self.float(node, "alpha")?.unwrap_or(0.1);
        self.warn(node, "roughconductor approximated by a Phong lobe");
        let specular = self
            .color(node, "specular_reflectance")?
            .unwrap_or(Rgb::ONE);
        let bsdf = Bsdf::Glossy {
            albedo: Rgb::ZERO,
            texture: None,
            specular,
            exponent: phong_exponent(alpha),
        };
        Ok(one_sided(name, bsdf))
    }

    fn dielectric(
        &mut self,
        node: Node<'a, 'input>,
        name: &str,
        ty: &str,
    ) -> Result<Material, SceneError> {
        if ty != "dielectric" {
            self.warn(node, format!("{ty} approximated by a smooth dielectric"));
        }
        let ior = self.ior(node, "int_ior", 1.5046)? / self.ior(node, "ext_ior", 1.000277)?;
        let tint = self
            .color(node, "specular_transmittance")?
            .unwrap_or(Rgb::ONE);
        // Both faces refract: a ray leaving the glass meets a back face.
        Ok(Material::with_bsdf(name, Bsdf::Dielectric { ior, tint }))
    }

    fn plastic(
        &mut self,
        node: Node<'a, 'input>,
        name: &str,
        ty: &str,
    ) -> Result<Material, SceneError> {
        self.warn(
            node,
            format!("{ty} approximated by diffuse plus a Phong lobe"),
        );
        let eta = self.ior(node, "int_ior", 1.49)? / self.ior(node, "ext_ior", 1.000277)?;
        let f0 = ((eta - 1.0) / (eta + 1.0)).powi(2);
        let exponent = if ty == "plastic" {
            SMOOTH_PLASTIC_EXPONENT
        } else {
            phong_exponent(self.float(node, "alpha")?.unwrap_or(0.1))
        };
        let albedo = self
            .color(node, "diffuse_reflectance")?
            .unwrap_or(Rgb::splat(0.5));
        let specular = self
            .color(node, "specular_reflectance")?
            .unwrap_or(Rgb::ONE);
        let bsdf = Bsdf::Glossy {
            albedo: albedo * (1.0 - f0),
            texture: None,
            specular: specular * f0,
            exponent,
        };
        Ok(one_sided(name, bsdf))
    }

    /// An index of refraction given as a number or by material name.
    fn ior(&self, node: Node<'a, 'input>, name: &str, default: f32) -> Result<f32, SceneError> {
        let Some(prop) = self.property(node, name) else {
            return Ok(default);
        };
        let text = self.required_attr(prop, "value")?;
        let ior = match prop.tag_name().name() {
            "string" => NAMED_IOR
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(text.trim()))
                .map(|&(_, ior)| ior)
                .ok_or_else(|| {
                    self.error(
                        ErrorKind::InvalidValue,
                        prop,
                        format!("unknown index of refraction '{text}'"),
                    )
                })?,
            _ => self.number(prop, &text)?,
        };
        if ior > 0.0 {
            Ok(ior)
        } else {
            Err(self.error(
                ErrorKind::InvalidValue,
                prop,
                format!("index of refraction must be positive, got {ior}"),
            ))
        }
    }
}
