//! Sampling routines shared by the renderers and the ray protocol.

use glam::{DVec3, Vec2, Vec3};
use std::f32::consts::PI;

/// Orthonormal basis `(t, b)` around the unit vector `n`: the branchless
/// construction of Duff et al., "Building an Orthonormal Basis, Revisited"
/// (JCGT 2017), in the exact form the ray protocol prescribes.
pub fn onb(n: Vec3) -> (Vec3, Vec3) {
    let s = 1.0f32.copysign(n.z);
    let a = -1.0 / (s + n.z);
    let b = n.x * n.y * a;
    (
        Vec3::new(1.0 + s * n.x * n.x * a, s * b, -s * n.x),
        Vec3::new(b, s + n.y * n.y * a, -n.y),
    )
}

/// [`onb`] in `f64`, for the protocol's secondary-ray generator.
pub fn onb_f64(n: DVec3) -> (DVec3, DVec3) {
    let s = 1.0f64.copysign(n.z);
    let a = -1.0 / (s + n.z);
    let b = n.x * n.y * a;
    (
        DVec3::new(1.0 + s * n.x * n.x * a, s * b, -s * n.x),
        DVec3::new(b, s + n.y * n.y * a, -n.y),
    )
}

/// Cosine-weighted direction in the local frame (z up) from two uniforms.
/// Density `cos(theta) / pi`.
pub fn cosine_hemisphere(u: Vec2) -> Vec3 {
    let r = u.x.sqrt();
    let phi = 2.0 * PI * u.y;
    Vec3::new(r * phi.cos(), r * phi.sin(), (1.0 - u.x).max(0.0).sqrt())
}

/// Uniform barycentrics `(b1, b2)` over a triangle from two uniforms.
pub fn uniform_triangle(u: Vec2) -> Vec2 {
    let su = u.x.sqrt();
    Vec2::new(1.0 - su, u.y * su)
}

/// Uniform direction in a cone around +z with `cos_max` half-angle cosine.
pub fn uniform_cone(u: Vec2, cos_max: f32) -> Vec3 {
    let cos_theta = (1.0 - u.x) + u.x * cos_max;
    let sin_theta = (1.0 - cos_theta * cos_theta).max(0.0).sqrt();
    let phi = 2.0 * PI * u.y;
    Vec3::new(sin_theta * phi.cos(), sin_theta * phi.sin(), cos_theta)
}

/// Radical inverse in base 2 of `i` (van der Corput), for stratified
/// sample sequences.
pub fn radical_inverse_base2(i: u32) -> f32 {
    (i.reverse_bits() >> 8) as f32 * (1.0 / 16_777_216.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn onb_is_orthonormal() {
        for n in [
            Vec3::Z,
            -Vec3::Z,
            Vec3::X,
            Vec3::new(1.0, 2.0, -3.0).normalize(),
        ] {
            let (t, b) = onb(n);
            assert!(t.dot(b).abs() < 1e-6 && t.dot(n).abs() < 1e-6 && b.dot(n).abs() < 1e-6);
            assert!((t.length() - 1.0).abs() < 1e-6 && (b.length() - 1.0).abs() < 1e-6);
            assert!((t.cross(b) - n).length() < 1e-5, "right-handed");
        }
    }

    #[test]
    fn cosine_hemisphere_is_upper_and_unit() {
        for i in 0..64 {
            let u = Vec2::new(i as f32 / 64.0, radical_inverse_base2(i));
            let d = cosine_hemisphere(u);
            assert!(d.z >= 0.0 && (d.length() - 1.0).abs() < 1e-5);
        }
    }

    #[test]
    fn triangle_samples_are_inside() {
        for i in 0..64 {
            let b = uniform_triangle(Vec2::new(i as f32 / 64.0, radical_inverse_base2(i)));
            assert!(b.x >= 0.0 && b.y >= 0.0 && b.x + b.y <= 1.0 + 1e-6);
        }
    }
}
