//! Scattering helpers shared by the renderers: reflection, refraction and
//! the Fresnel equations.

use caustic_geom::Vec3;

/// Mirror reflection of the incoming direction `d` (pointing towards the
/// surface) about the normal `n`.
pub fn reflect(d: Vec3, n: Vec3) -> Vec3 {
    d - 2.0 * d.dot(n) * n
}

/// Refracts the incoming direction `d` (unit, pointing towards the surface)
/// through a surface with unit normal `n` facing the incoming side, with
/// `eta` = eta_incident / eta_transmitted. `None` on total internal
/// reflection.
pub fn refract(d: Vec3, n: Vec3, eta: f32) -> Option<Vec3> {
    let cos_i = -d.dot(n);
    let sin2_t = eta * eta * (1.0 - cos_i * cos_i).max(0.0);
    if sin2_t >= 1.0 {
        return None;
    }
    let cos_t = (1.0 - sin2_t).sqrt();
    Some((eta * d + (eta * cos_i - cos_t) * n).normalize())
}

/// Exact unpolarised Fresnel reflectance of a smooth dielectric interface.
/// `cos_i` is the cosine of the incident angle (>= 0) and `eta` the ratio
/// eta_incident / eta_transmitted. Returns 1 on total internal reflection.
pub fn fresnel_dielectric(cos_i: f32, eta: f32) -> f32 {
    let cos_i = cos_i.clamp(0.0, 1.0);
    let sin2_t = eta * eta * (1.0 - cos_i * cos_i);
    if sin2_t >= 1.0 {
        return 1.0;
    }
    let cos_t = (1.0 - sin2_t).sqrt();
    // r_s and r_p with the incident medium's index normalised to 1.
    let r_s = (eta * cos_i - cos_t) / (eta * cos_i + cos_t);
    let r_p = (cos_i - eta * cos_t) / (cos_i + eta * cos_t);
    0.5 * (r_s * r_s + r_p * r_p)
}

/// Schlick's approximation of [`fresnel_dielectric`], with total internal
/// reflection handled exactly (Schlick alone misses it).
pub fn fresnel_schlick(cos_i: f32, eta: f32) -> f32 {
    let cos_i = cos_i.clamp(0.0, 1.0);
    let sin2_t = eta * eta * (1.0 - cos_i * cos_i);
    if sin2_t >= 1.0 {
        return 1.0;
    }
    // Schlick uses the cosine on the optically thinner side.
    let cos = if eta > 1.0 {
        (1.0 - sin2_t).sqrt()
    } else {
        cos_i
    };
    let r0 = ((eta - 1.0) / (eta + 1.0)).powi(2);
    r0 + (1.0 - r0) * (1.0 - cos).powi(5)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresnel_normal_incidence_glass() {
        // ((1.5 - 1) / (1.5 + 1))^2 = 0.04 from either side.
        assert!((fresnel_dielectric(1.0, 1.0 / 1.5) - 0.04).abs() < 1e-6);
        assert!((fresnel_dielectric(1.0, 1.5) - 0.04).abs() < 1e-6);
        assert!((fresnel_schlick(1.0, 1.0 / 1.5) - 0.04).abs() < 1e-6);
    }

    #[test]
    fn fresnel_grazing_and_tir() {
        assert!((fresnel_dielectric(0.0, 1.0 / 1.5) - 1.0).abs() < 1e-6);
        // Inside glass beyond the critical angle (41.8°): total reflection.
        let cos_60 = 0.5;
        assert_eq!(fresnel_dielectric(cos_60, 1.5), 1.0);
        assert_eq!(fresnel_schlick(cos_60, 1.5), 1.0);
        assert!(refract(Vec3::new(0.866, -0.5, 0.0), Vec3::Y, 1.5).is_none());
    }

    #[test]
    fn refraction_obeys_snell() {
        let d = Vec3::new(0.6, -0.8, 0.0);
        let t = refract(d, Vec3::Y, 1.0 / 1.5).unwrap();
        let sin_i = 0.6f32;
        let sin_t = t.x;
        assert!((sin_i - 1.5 * sin_t).abs() < 1e-5);
        assert!(t.y < 0.0);
        assert!((reflect(d, Vec3::Y) - Vec3::new(0.6, 0.8, 0.0)).length() < 1e-6);
    }
}
