//! AFF materials (`f`, NFF's; `fm`, AFF's) and textures, mapped onto
//! caustic's BSDFs.
//!
//! `fm` gives ambient, diffuse and specular colours, a Phong `shine`, a
//! transmittance `T` and an index of refraction; `f` gives one colour with
//! `Kd`, `Ks`, `shine`, `T` and the index (diffuse = colour·Kd, specular =
//! Ks grey). Ambient has no counterpart in a radiometric renderer and is
//! dropped, except on the surfaces below that let light through without
//! refracting. The rest follows what the BART renders show:
//!
//! - `T ≥ 0.5` with an index above 1: smooth glass (BART's glasses are
//!   `T 0.85`, index 1.55); a smaller `T` is ignored with a warning;
//! - `T ≥ 0.5` with an index below 1 (the files write 0): a surface that
//!   lets light through without refracting, like the robots' sky (`T 0.5`,
//!   index 0, the city's only light above it). caustic has neither partial
//!   transparency nor shadow rays that pass a surface, so kept opaque it
//!   would shut that light out and leave the city black. It keeps the BSDF
//!   of the rules below and glows instead: the loader gives it the emission
//!   `ambient · am + T · E / π`, its ambient colour under the global
//!   ambient light (what BART shows of the sky) plus, spread diffusely, the
//!   share `T` of the irradiance `E` its point lights deliver onto it (see
//!   `Loader::glow` in `aff.rs`);
//! - no specular colour (or `shine` 0): Lambertian with the diffuse colour;
//! - no diffuse colour and a specular one of at least 0.5: a mirror of
//!   that reflectance (BART's polished metal);
//! - otherwise Lambert + Phong ([`Bsdf::Glossy`]) with exponent
//!   `4 · shine`, the factor BART's parser template passes to its
//!   renderer (`viAddExtendedMaterial(..., 4.0*phong_pow, ...)`).
//!
//! Textures (`texture` names in `m`, `tt`, `ttp`) multiply the diffuse
//! colour. All AFF materials are two-sided: the files mix windings freely.

use crate::{Bsdf, Material};
use caustic_geom::Rgb;

/// An `f` or `fm` statement's numbers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct AffMaterial {
    /// `fm`'s ambient colour (black for `f`).
    pub ambient: Rgb,
    pub diffuse: Rgb,
    pub specular: Rgb,
    pub shine: f32,
    pub transmittance: f32,
    pub ior: f32,
}

impl AffMaterial {
    /// Bits of the numbers, to share identical materials (the ambient
    /// colour only counts where it is used, on surfaces that glow).
    pub fn key(&self) -> [u32; 12] {
        let [dr, dg, db] = self.diffuse.to_array();
        let [sr, sg, sb] = self.specular.to_array();
        let [ar, ag, ab] = if self.glows() {
            self.ambient.to_array()
        } else {
            [0.0; 3]
        };
        [
            ar,
            ag,
            ab,
            dr,
            dg,
            db,
            sr,
            sg,
            sb,
            self.shine,
            self.transmittance,
            self.ior,
        ]
        .map(f32::to_bits)
    }

    /// Whether `T` asks for transparency that is dropped.
    pub fn ignored_transparency(&self) -> bool {
        self.transmittance > 0.0 && !self.is_glass() && !self.glows()
    }

    /// Whether the surface lets light through without refracting, and so
    /// glows instead (module docs).
    pub fn glows(&self) -> bool {
        self.transmittance >= 0.5 && self.ior < 1.0
    }

    fn is_glass(&self) -> bool {
        self.transmittance >= 0.5 && self.ior > 1.0
    }

    pub fn bsdf(&self, texture: Option<u32>) -> Bsdf {
        let (d, s) = (self.diffuse, self.specular);
        if self.is_glass() {
            return Bsdf::Dielectric {
                ior: self.ior,
                tint: Rgb::ONE,
            };
        }
        if s.max_element() <= 0.0 || self.shine <= 0.0 {
            return Bsdf::Diffuse { albedo: d, texture };
        }
        if d.max_element() <= 0.0 && s.min_element() >= 0.5 && texture.is_none() {
            return Bsdf::Mirror { reflectance: s };
        }
        Bsdf::Glossy {
            albedo: d,
            texture,
            specular: s,
            exponent: (4.0 * self.shine).clamp(1.0, 1e4),
        }
    }

    pub fn material(&self, name: String, texture: Option<u32>) -> Material {
        Material {
            two_sided: true,
            ..Material::with_bsdf(name, self.bsdf(texture))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fm(d: f32, s: f32, shine: f32, t: f32, ior: f32) -> AffMaterial {
        AffMaterial {
            ambient: Rgb::splat(0.5),
            diffuse: Rgb::splat(d),
            specular: Rgb::splat(s),
            shine,
            transmittance: t,
            ior,
        }
    }

    #[test]
    fn mapping_of_the_bart_materials() {
        assert!(
            matches!(fm(0.1, 0.05, 20.0, 0.85, 1.55).bsdf(None), Bsdf::Dielectric { ior, .. } if ior == 1.55)
        );
        assert!(matches!(
            fm(0.5, 0.0, 20.0, 0.0, 0.0).bsdf(None),
            Bsdf::Diffuse { .. }
        ));
        assert!(matches!(
            fm(0.0, 0.9, 97.0, 0.0, 0.0).bsdf(None),
            Bsdf::Mirror { .. }
        ));
        match fm(0.5, 0.3, 20.0, 0.0, 0.0).bsdf(Some(2)) {
            Bsdf::Glossy {
                exponent, texture, ..
            } => assert_eq!((exponent, texture), (80.0, Some(2))),
            other => panic!("{other:?}"),
        }
        assert!(fm(0.5, 0.3, 20.0, 0.3, 1.0).ignored_transparency());
        // The robots' sky: T 0.5, index 0 glows, keeps its glossy BSDF and
        // is not reported as dropped transparency.
        let sky = fm(0.17, 0.39, 185.0, 0.5, 0.0);
        assert!(sky.glows() && !sky.ignored_transparency());
        assert!(matches!(sky.bsdf(Some(1)), Bsdf::Glossy { .. }));
        assert!(!fm(0.5, 0.3, 20.0, 0.7, 1.0).glows());
        assert!(!fm(0.1, 0.05, 20.0, 0.85, 1.55).glows());
        // The ambient colour tells glowing materials apart, no others.
        let mut other = sky;
        other.ambient = Rgb::splat(0.1);
        assert_ne!(sky.key(), other.key());
        let (mut a, mut b) = (fm(0.5, 0.3, 20.0, 0.0, 0.0), fm(0.5, 0.3, 20.0, 0.0, 0.0));
        b.ambient = Rgb::splat(0.1);
        a.ambient = Rgb::splat(0.9);
        assert_eq!(a.key(), b.key());
    }
}
