use crate::TextureId;
use caustic_geom::Rgb;

/// How a surface scatters light.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Bsdf {
    /// Lambertian, `f = albedo / pi`; a texture, when present, is multiplied
    /// by the albedo (as MTL's `Kd` with `map_Kd`, and glTF's base colour).
    Diffuse {
        albedo: Rgb,
        texture: Option<TextureId>,
    },
    /// Lambertian base plus a Phong highlight `specular * (n+2)/(2 pi) * cos^n`
    /// around the mirror direction: the Whitted shader's glossy model.
    Glossy {
        albedo: Rgb,
        texture: Option<TextureId>,
        specular: Rgb,
        exponent: f32,
    },
    /// Perfect mirror with a constant reflectance and no Fresnel term.
    Mirror { reflectance: Rgb },
    /// Smooth dielectric interface with exact Fresnel reflection and
    /// refraction; `ior` is inside over outside, the face normal points out.
    Dielectric { ior: f32, tint: Rgb },
}

/// A surface material: a BSDF, an emitted radiance, and whether both faces
/// are active.
#[derive(Clone, Debug, PartialEq)]
pub struct Material {
    pub name: String,
    pub bsdf: Bsdf,
    /// Emitted radiance (W/m²/sr); non-zero makes every triangle with this
    /// material an area light.
    pub emission: Rgb,
    /// One-sided materials (Mitsuba's default) are black when seen or lit
    /// from behind, and emit only on the side of the geometric normal.
    /// Two-sided ones (OBJ, PLY, glTF with `doubleSided`) shade both faces.
    pub two_sided: bool,
}

impl Material {
    pub fn diffuse(name: impl Into<String>, albedo: Rgb) -> Self {
        Self {
            name: name.into(),
            bsdf: Bsdf::Diffuse {
                albedo,
                texture: None,
            },
            emission: Rgb::ZERO,
            two_sided: true,
        }
    }

    pub fn with_bsdf(name: impl Into<String>, bsdf: Bsdf) -> Self {
        Self {
            name: name.into(),
            bsdf,
            emission: Rgb::ZERO,
            two_sided: true,
        }
    }

    /// The material used where a file names none: 50 % grey diffuse.
    pub fn default_grey() -> Self {
        Self::diffuse("default", Rgb::splat(0.5))
    }

    pub fn is_emissive(&self) -> bool {
        self.emission.max_element() > 0.0
    }

    /// Perfectly specular BSDFs (mirror, glass) continue the eye path instead
    /// of being shaded with light samples.
    pub fn is_specular(&self) -> bool {
        matches!(self.bsdf, Bsdf::Mirror { .. } | Bsdf::Dielectric { .. })
    }
}
