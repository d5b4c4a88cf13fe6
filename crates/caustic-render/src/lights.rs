//! Area lights: emissive triangles grouped by material, sampled uniformly by
//! area, and the shared light-sampling step of every integrator.

use caustic_geom::{Rgb, Triangle, Vec2, Vec3, sampling};
use caustic_scene::Material;

/// All emissive triangles of one material: one light for the renderer
/// (`N` light samples per shading point are spread over its total area).
#[derive(Clone, Debug)]
pub struct AreaLight {
    pub material: u32,
    pub emission: Rgb,
    pub two_sided: bool,
    /// Triangle ids (scene numbering) of the light.
    pub triangles: Vec<u32>,
    /// Running sum of triangle areas, normalised to end at 1.
    cdf: Vec<f32>,
    pub total_area: f32,
}

/// A point on a light as seen from a shading point.
#[derive(Clone, Copy, Debug)]
pub struct LightSample {
    pub point: Vec3,
    /// Unit geometric normal of the light at `point`.
    pub normal: Vec3,
    /// Probability density per unit area.
    pub pdf_area: f32,
    pub triangle: u32,
}

impl AreaLight {
    /// Emitted power `pi * A * L` (one-sided), twice that when two-sided.
    pub fn power(&self) -> Rgb {
        let sides = if self.two_sided { 2.0 } else { 1.0 };
        std::f32::consts::PI * self.total_area * sides * self.emission
    }

    /// A point uniformly distributed over the light's area from two
    /// uniforms; `u.x` picks the triangle (by area) and is reused, rescaled,
    /// for the position inside it, so stratifying `u` stratifies the light.
    pub fn sample(&self, triangles: &[Triangle], u: Vec2) -> LightSample {
        let idx = self
            .cdf
            .partition_point(|&c| c <= u.x)
            .min(self.triangles.len() - 1);
        let lo = if idx == 0 { 0.0 } else { self.cdf[idx - 1] };
        let hi = self.cdf[idx];
        let ux = if hi > lo {
            ((u.x - lo) / (hi - lo)).clamp(0.0, 1.0 - f32::EPSILON)
        } else {
            0.5
        };
        let id = self.triangles[idx];
        let tri = &triangles[id as usize];
        let b = sampling::uniform_triangle(Vec2::new(ux, u.y));
        LightSample {
            point: tri.point_at(b.x, b.y),
            normal: tri.normal().unwrap_or(Vec3::Z),
            pdf_area: 1.0 / self.total_area,
            triangle: id,
        }
    }

    /// The running area sum over [`AreaLight::triangles`], ending at 1.
    pub fn cdf(&self) -> &[f32] {
        &self.cdf
    }

    /// Radiance leaving the light at a point with unit normal `normal`
    /// towards the unit direction `towards` (from the light).
    pub fn radiance(&self, normal: Vec3, towards: Vec3) -> Rgb {
        if self.two_sided || normal.dot(towards) > 0.0 {
            self.emission
        } else {
            Rgb::ZERO
        }
    }
}

/// Groups the emissive triangles by material into area lights.
pub(crate) fn build_area_lights(
    triangles: &[Triangle],
    triangle_material: &[u32],
    materials: &[Material],
) -> Vec<AreaLight> {
    let mut by_material: Vec<Vec<u32>> = vec![Vec::new(); materials.len()];
    for (id, &m) in triangle_material.iter().enumerate() {
        if materials[m as usize].is_emissive() && triangles[id].area() > 0.0 {
            by_material[m as usize].push(id as u32);
        }
    }
    by_material
        .into_iter()
        .enumerate()
        .filter(|(_, tris)| !tris.is_empty())
        .map(|(m, tris)| {
            let mut cdf = Vec::with_capacity(tris.len());
            let mut sum = 0.0f64;
            for &t in &tris {
                sum += triangles[t as usize].area() as f64;
                cdf.push(sum as f32);
            }
            for c in &mut cdf {
                *c /= sum as f32;
            }
            let material = &materials[m];
            AreaLight {
                material: m as u32,
                emission: material.emission,
                two_sided: material.two_sided,
                triangles: tris,
                cdf,
                total_area: sum as f32,
            }
        })
        .collect()
}
