//! The stored photon: one 32-byte `#[repr(C)]` record, the layout the CPU
//! maps and the GPU buffers share.
//!
//! | bytes | field | encoding |
//! |---|---|---|
//! | 0–11 | `position` | 3 × `f32`, on the surface |
//! | 12–23 | `power` | 3 × `f32`, linear RGB flux in watts, already divided by the number of emitted photons |
//! | 24–27 | `incoming` | unit vector towards where the photon came from, octahedral, 2 × 16-bit |
//! | 28–31 | `normal` | unit geometric normal on the side the photon arrived, octahedral, 2 × 16-bit |
//!
//! Zeidan 2011 (§15.1) stores position, a 2-byte quantised direction and
//! 3 float powers; Fleisz (2009) packs power as 4-byte RGBE. Full `f32`
//! power keeps the estimate free of quantisation bias (RGBE rounds each
//! photon by up to 1/256 of its largest channel) for 8 more bytes, and
//! makes the record exactly half a 64-byte cache line. The octahedral
//! encoding (Cigolle et al., JCGT 2014) keeps directions to about 0.01°,
//! the normal lets a radiance estimate reject photons from the other side
//! of a thin wall.
//!
//! All fields are plain `f32`/`u32`: the record is `Pod` (no padding, any
//! bit pattern valid), uploads as bytes, and its size and alignment are
//! asserted.

use bytemuck::{Pod, Zeroable};
use caustic_geom::{Rgb, Vec2, Vec3};

/// One photon stored at a diffuse surface.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct Photon {
    pub position: [f32; 3],
    pub power: [f32; 3],
    pub incoming: u32,
    pub normal: u32,
}

const _: () = assert!(std::mem::size_of::<Photon>() == 32);
const _: () = assert!(std::mem::align_of::<Photon>() == 4);

impl Photon {
    /// A photon at `position` carrying `power`, arrived from the unit
    /// direction `incoming` (pointing away from the surface) on the side of
    /// the unit normal `normal`.
    pub fn new(position: Vec3, power: Rgb, incoming: Vec3, normal: Vec3) -> Self {
        Self {
            position: position.to_array(),
            power: power.to_array(),
            incoming: octahedral_encode(incoming),
            normal: octahedral_encode(normal),
        }
    }

    pub fn position(&self) -> Vec3 {
        Vec3::from_array(self.position)
    }

    pub fn power(&self) -> Rgb {
        Rgb::from_array(self.power)
    }

    /// Unit direction towards where the photon came from.
    pub fn incoming(&self) -> Vec3 {
        octahedral_decode(self.incoming)
    }

    /// Unit geometric normal on the side the photon arrived from.
    pub fn normal(&self) -> Vec3 {
        octahedral_decode(self.normal)
    }
}

/// Positions of `photons`, in order: the input of a point structure.
pub fn positions(photons: &[Photon]) -> Vec<Vec3> {
    photons.iter().map(Photon::position).collect()
}

/// `1` for non-negative values (and +0), `-1` otherwise.
fn sign_not_zero(x: f32) -> f32 {
    if x >= 0.0 { 1.0 } else { -1.0 }
}

/// Folds the lower hemisphere of the octahedron onto the outer triangles.
fn fold(p: Vec2) -> Vec2 {
    Vec2::new(
        (1.0 - p.y.abs()) * sign_not_zero(p.x),
        (1.0 - p.x.abs()) * sign_not_zero(p.y),
    )
}

/// Unit vector to 2 × 16-bit octahedral coordinates (x in the low half).
pub fn octahedral_encode(v: Vec3) -> u32 {
    let l1 = v.x.abs() + v.y.abs() + v.z.abs();
    if !l1.is_finite() || l1 <= 0.0 {
        return octahedral_encode(Vec3::Z);
    }
    let p = Vec2::new(v.x, v.y) / l1;
    let p = if v.z < 0.0 { fold(p) } else { p };
    let q = ((p.clamp(Vec2::NEG_ONE, Vec2::ONE) * 0.5 + 0.5) * 65535.0).round();
    (q.x as u32) | ((q.y as u32) << 16)
}

/// Inverse of [`octahedral_encode`], normalised.
pub fn octahedral_decode(bits: u32) -> Vec3 {
    let q = Vec2::new((bits & 0xffff) as f32, (bits >> 16) as f32);
    let p = q / 65535.0 * 2.0 - 1.0;
    let z = 1.0 - p.x.abs() - p.y.abs();
    let p = if z < 0.0 { fold(p) } else { p };
    Vec3::new(p.x, p.y, z).normalize()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Angle between unit vectors, accurate near zero (unlike `acos`).
    fn angle_degrees(a: Vec3, b: Vec3) -> f32 {
        a.cross(b).length().atan2(a.dot(b)).to_degrees()
    }

    #[test]
    fn octahedral_round_trip_is_within_a_hundredth_of_a_degree() {
        let mut worst = 0.0f32;
        let axes = [Vec3::X, -Vec3::X, Vec3::Y, -Vec3::Y, Vec3::Z, -Vec3::Z];
        let spread = (0..4000).map(|i| {
            let u = Vec2::new(
                caustic_geom::sampling::radical_inverse_base2(i),
                (i as f32 + 0.5) / 4000.0,
            );
            caustic_geom::sampling::uniform_cone(u, -1.0)
        });
        for v in spread.chain(axes) {
            worst = worst.max(angle_degrees(octahedral_decode(octahedral_encode(v)), v));
        }
        assert!(worst < 0.01, "worst error {worst}°");
    }

    #[test]
    fn photon_fields_round_trip() {
        let n = Vec3::new(0.0, -1.0, 0.0);
        let w = Vec3::new(0.3, -0.5, 0.81).normalize();
        let p = Photon::new(Vec3::new(1.0, 2.0, 3.0), Rgb::new(0.1, 0.2, 0.3), w, n);
        assert_eq!(p.position(), Vec3::new(1.0, 2.0, 3.0));
        assert_eq!(p.power(), Rgb::new(0.1, 0.2, 0.3));
        assert!(p.incoming().dot(w) > 0.99999);
        assert!(p.normal().dot(n) > 0.99999);
    }
}
