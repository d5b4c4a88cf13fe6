use caustic_geom::{Rgb, Vec3};

/// Analytic lights. Area lights are emissive triangles (see
/// [`crate::Material::emission`]), not a variant here.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Light {
    /// Isotropic point light of radiant intensity `intensity` (W/sr).
    Point { position: Vec3, intensity: Rgb },
    /// Spot light: intensity `intensity` inside the cone of half-angle
    /// `cos_falloff_start`, smoothly falling to zero at `cos_total_width`
    /// (cosines of the half-angles; `cos_total_width <= cos_falloff_start`).
    Spot {
        position: Vec3,
        /// Unit direction the spot points to.
        direction: Vec3,
        intensity: Rgb,
        cos_falloff_start: f32,
        cos_total_width: f32,
    },
    /// Distant light arriving from infinitely far, travelling along the unit
    /// vector `direction`, with irradiance `irradiance` (W/m²) on a surface
    /// facing it.
    Directional { direction: Vec3, irradiance: Rgb },
}

impl Light {
    /// Intensity of a spot light towards unit direction `w` (from the light).
    pub fn spot_falloff(cos_angle: f32, cos_falloff_start: f32, cos_total_width: f32) -> f32 {
        if cos_angle >= cos_falloff_start {
            1.0
        } else if cos_angle <= cos_total_width {
            0.0
        } else {
            let x = (cos_angle - cos_total_width) / (cos_falloff_start - cos_total_width);
            x * x * (3.0 - 2.0 * x) // smoothstep
        }
    }
}
