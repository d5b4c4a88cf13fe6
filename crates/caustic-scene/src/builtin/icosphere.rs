//! Icospheres: a regular icosahedron whose triangles are split into four,
//! `level` times, with every new vertex pushed out onto the sphere.
//!
//! Invariants: `20 * 4^level` triangles, `10 * 4^level + 2` vertices, every
//! vertex on the sphere (computed in `f64`, so within `f32` rounding of the
//! radius), counter-clockwise winding seen from outside (geometric normals
//! point out). The mesh is inscribed in the sphere.
//!
//! The vertex and triangle order is fixed and matches the sphere meshes of
//! `refs/cornell-caustics` (the twelve icosahedron corners first, then each
//! level's edge midpoints in the order the triangles meet them; each triangle
//! `(a, b, c)` becomes `(a, ab, ca)`, `(b, bc, ab)`, `(c, ca, bc)`,
//! `(ab, bc, ca)`), so the built-in scenes reproduce those files vertex for
//! vertex.

use crate::Mesh;
use caustic_geom::Vec3;
use std::collections::HashMap;

/// Subdivision level of the spheres in the reference scenes and of
/// Mitsuba's `<shape type="sphere">` here: 20480 triangles.
pub(crate) const SPHERE_LEVEL: u32 = 5;

type P = [f64; 3];

fn normalized(p: P) -> P {
    let len = (p[0] * p[0] + p[1] * p[1] + p[2] * p[2]).sqrt();
    [p[0] / len, p[1] / len, p[2] / len]
}

/// The 12 corners of the icosahedron `(±1, ±t, 0)` and its cyclic
/// permutations, `t` the golden ratio, projected onto the unit sphere, and
/// its 20 faces wound counter-clockwise from outside.
fn icosahedron() -> (Vec<P>, Vec<[u32; 3]>) {
    let t = (1.0 + 5f64.sqrt()) / 2.0;
    let corners = [
        [-1.0, t, 0.0],
        [1.0, t, 0.0],
        [-1.0, -t, 0.0],
        [1.0, -t, 0.0],
        [0.0, -1.0, t],
        [0.0, 1.0, t],
        [0.0, -1.0, -t],
        [0.0, 1.0, -t],
        [t, 0.0, -1.0],
        [t, 0.0, 1.0],
        [-t, 0.0, -1.0],
        [-t, 0.0, 1.0],
    ];
    let faces = vec![
        [0, 11, 5],
        [0, 5, 1],
        [0, 1, 7],
        [0, 7, 10],
        [0, 10, 11],
        [1, 5, 9],
        [5, 11, 4],
        [11, 10, 2],
        [10, 7, 6],
        [7, 1, 8],
        [3, 9, 4],
        [3, 4, 2],
        [3, 2, 6],
        [3, 6, 8],
        [3, 8, 9],
        [4, 9, 5],
        [2, 4, 11],
        [6, 2, 10],
        [8, 6, 7],
        [9, 8, 1],
    ];
    (corners.into_iter().map(normalized).collect(), faces)
}

/// One subdivision step: each edge gets one shared midpoint vertex (on the
/// unit sphere), each triangle four children.
fn subdivide(points: &mut Vec<P>, faces: &[[u32; 3]]) -> Vec<[u32; 3]> {
    let mut midpoints: HashMap<(u32, u32), u32> = HashMap::with_capacity(faces.len() * 3 / 2);
    let mut midpoint = |a: u32, b: u32| -> u32 {
        let key = (a.min(b), a.max(b));
        *midpoints.entry(key).or_insert_with(|| {
            let (pa, pb) = (points[a as usize], points[b as usize]);
            points.push(normalized([pa[0] + pb[0], pa[1] + pb[1], pa[2] + pb[2]]));
            (points.len() - 1) as u32
        })
    };
    let mut out = Vec::with_capacity(faces.len() * 4);
    for &[a, b, c] in faces {
        let ab = midpoint(a, b);
        let bc = midpoint(b, c);
        let ca = midpoint(c, a);
        out.extend([[a, ab, ca], [b, bc, ab], [c, ca, bc], [ab, bc, ca]]);
    }
    out
}

/// Unit-sphere icosphere of the given subdivision level, in `f64`.
fn unit_icosphere(level: u32) -> (Vec<P>, Vec<[u32; 3]>) {
    let (mut points, mut faces) = icosahedron();
    for _ in 0..level {
        faces = subdivide(&mut points, &faces);
    }
    (points, faces)
}

/// An icosphere mesh of `center` and `radius` (no normals, no uvs,
/// `material_ids` all `material`). Positions are scaled and offset in `f64`
/// and rounded once, so they lie on the sphere to `f32` precision.
pub(crate) fn icosphere(name: &str, center: Vec3, radius: f32, level: u32, material: u32) -> Mesh {
    let (points, indices) = unit_icosphere(level);
    let c = [center.x as f64, center.y as f64, center.z as f64];
    let r = radius as f64;
    let positions = points
        .iter()
        .map(|p| {
            Vec3::new(
                (c[0] + r * p[0]) as f32,
                (c[1] + r * p[1]) as f32,
                (c[2] + r * p[2]) as f32,
            )
        })
        .collect();
    Mesh {
        name: name.to_string(),
        positions,
        normals: Vec::new(),
        uvs: Vec::new(),
        material_ids: vec![material; indices.len()],
        indices,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_follow_the_subdivision_formula() {
        for level in 0..=3 {
            let (points, faces) = unit_icosphere(level);
            let four = 4usize.pow(level);
            assert_eq!(faces.len(), 20 * four);
            assert_eq!(points.len(), 10 * four + 2);
        }
    }

    #[test]
    fn winding_is_outward() {
        let mesh = icosphere("s", Vec3::new(1.0, 2.0, 3.0), 0.5, 2, 0);
        let center = Vec3::new(1.0, 2.0, 3.0);
        for i in 0..mesh.indices.len() {
            let tri = mesh.triangle(i);
            assert!(tri.cross().dot(tri.centroid() - center) > 0.0);
        }
    }

    #[test]
    fn south_pole_is_a_vertex() {
        let mesh = icosphere("s", Vec3::ZERO, 1.0, 1, 0);
        assert!(
            mesh.positions
                .iter()
                .any(|p| (*p - -Vec3::Y).length() < 1e-7)
        );
    }
}
