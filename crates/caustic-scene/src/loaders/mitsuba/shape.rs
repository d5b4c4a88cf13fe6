//! `<shape>` plugins to meshes: `obj` and `ply` files, and Mitsuba's
//! built-in `rectangle`, `cube` and `sphere` as triangle meshes.
//!
//! Normals follow Mitsuba: with `face_normals="true"` shading uses the flat
//! face normal (vertex normals dropped); otherwise a file's own normals are
//! kept, and a file without normals gets smooth angle-weighted vertex
//! normals, as Mitsuba computes them. The sphere is an inscribed level-5
//! icosphere with normals pointing exactly away from the centre, standing
//! in for Mitsuba's analytic sphere.

use super::Loader;
use super::bsdf::default_bsdf;
use crate::builtin::{SPHERE_LEVEL, icosphere};
use crate::loaders::{obj, ply};
use crate::{ErrorKind, Mesh, SceneError};
use caustic_geom::{Rgb, Vec2, Vec3};
use roxmltree::Node;

impl<'a, 'input> Loader<'a, 'input> {
    pub(super) fn shape(&mut self, node: Node<'a, 'input>) -> Result<(), SceneError> {
        let ty = self.required_attr(node, "type")?;
        let mut mesh = match ty.as_str() {
            "obj" | "ply" => self.mesh_file(node, &ty)?,
            "rectangle" => rectangle(),
            "cube" => cube(),
            "sphere" => self.sphere(node)?,
            _ => {
                self.warn(node, "unsupported shape type; skipped");
                return Ok(());
            }
        };
        if let Some(to_world) = self.to_world(node)? {
            mesh.transform(&to_world);
        }
        if matches!(ty.as_str(), "obj" | "ply") {
            if self.boolean(node, "face_normals")?.unwrap_or(false) {
                mesh.normals.clear();
            } else if mesh.normals.is_empty() {
                mesh.normals = smooth_normals(&mesh);
            }
        }
        if self.boolean(node, "flip_normals")?.unwrap_or(false) {
            flip(&mut mesh);
        }
        if let Some(id) = self.attr(node, "id")? {
            mesh.name = id;
        }
        let emission = self.area_emission(node)?;
        let material = self.shape_material(node, emission)?;
        mesh.material_ids = vec![material; mesh.indices.len()];
        self.scene.meshes.push(mesh);
        Ok(())
    }

    /// Reads the `filename` of an `obj` or `ply` shape.
    fn mesh_file(&mut self, node: Node<'a, 'input>, ty: &str) -> Result<Mesh, SceneError> {
        let Some(file) = self.string(node, "filename")? else {
            return Err(self.error(
                ErrorKind::Syntax,
                node,
                "missing <string name=\"filename\">",
            ));
        };
        let path = self.resolve(&file);
        if !path.is_file() {
            return Err(self.error(
                ErrorKind::MissingReference,
                node,
                format!("mesh file '{file}' not found ({})", path.display()),
            ));
        }
        let mut mesh = if ty == "obj" {
            obj::read_obj_geometry(&path, &mut self.scene.warnings)?
        } else {
            ply::read_ply_mesh(&path, &mut self.scene.warnings)?
        };
        if let Some(stem) = path.file_stem() {
            mesh.name = stem.to_string_lossy().into_owned();
        }
        Ok(mesh)
    }

    /// `center` (default origin) and `radius` (default 1), before `to_world`.
    fn sphere(&mut self, node: Node<'a, 'input>) -> Result<Mesh, SceneError> {
        let center = self.point(node, "center")?.unwrap_or(Vec3::ZERO);
        let radius = self.float(node, "radius")?.unwrap_or(1.0);
        if radius <= 0.0 {
            return Err(self.error(
                ErrorKind::InvalidValue,
                node,
                format!("sphere radius must be positive, got {radius}"),
            ));
        }
        let mut mesh = icosphere("sphere", center, radius, SPHERE_LEVEL, 0);
        mesh.normals = mesh
            .positions
            .iter()
            .map(|&p| (p - center).normalize_or_zero())
            .collect();
        Ok(mesh)
    }

    /// The shape's material: its BSDF (shared by every shape that refers to
    /// the same id) or Mitsuba's default; a shape that emits gets its own
    /// copy with the emitted radiance.
    fn shape_material(
        &mut self,
        node: Node<'a, 'input>,
        emission: Option<Rgb>,
    ) -> Result<u32, SceneError> {
        let bsdfs = self.nested_bsdfs(node)?;
        if bsdfs.len() > 1 {
            self.warn(node, "a shape takes one BSDF; only the first is used");
        }
        let Some(emission) = emission else {
            return match bsdfs.first() {
                Some(&bsdf) => self.shared_material(bsdf),
                None => Ok(self.default_material()),
            };
        };
        let mut material = match bsdfs.first() {
            Some(&bsdf) => self.bsdf(bsdf, 0)?,
            None => default_bsdf("default"),
        };
        if material.two_sided {
            self.warn(
                node,
                "two-sided BSDF on an area light: it emits from both faces (Mitsuba: front only)",
            );
        }
        material.name.push_str("+area");
        material.emission = emission;
        Ok(self.add_material(material))
    }

    /// One material per BSDF element with an id; inline BSDFs are unique.
    fn shared_material(&mut self, bsdf: Node<'a, 'input>) -> Result<u32, SceneError> {
        let id = self.attr(bsdf, "id")?;
        if let Some(&index) = id.as_ref().and_then(|id| self.bsdf_materials.get(id)) {
            return Ok(index);
        }
        let material = self.bsdf(bsdf, 0)?;
        let index = self.add_material(material);
        if let Some(id) = id {
            self.bsdf_materials.insert(id, index);
        }
        Ok(index)
    }

    fn default_material(&mut self) -> u32 {
        if let Some(index) = self.default_material {
            return index;
        }
        let index = self.add_material(default_bsdf("default"));
        self.default_material = Some(index);
        index
    }
}

fn unit_uvs(quads: usize) -> Vec<Vec2> {
    let corners = [Vec2::ZERO, Vec2::X, Vec2::ONE, Vec2::Y];
    corners.iter().copied().cycle().take(4 * quads).collect()
}

/// Quads of 4 consecutive vertices, split as `(0, 1, 2), (2, 3, 0)`.
fn quad_indices(quads: u32) -> Vec<[u32; 3]> {
    (0..quads)
        .flat_map(|q| [[4 * q, 4 * q + 1, 4 * q + 2], [4 * q + 2, 4 * q + 3, 4 * q]])
        .collect()
}

/// Mitsuba's rectangle: `[-1, 1]^2` at `z = 0`, facing `+z`.
fn rectangle() -> Mesh {
    let positions = vec![
        Vec3::new(-1.0, -1.0, 0.0),
        Vec3::new(1.0, -1.0, 0.0),
        Vec3::new(1.0, 1.0, 0.0),
        Vec3::new(-1.0, 1.0, 0.0),
    ];
    Mesh {
        name: "rectangle".into(),
        positions,
        uvs: unit_uvs(1),
        indices: quad_indices(1),
        material_ids: vec![0; 2],
        ..Mesh::default()
    }
}

/// Mitsuba's cube: `[-1, 1]^3`, 6 quads of 4 own vertices, facing out.
fn cube() -> Mesh {
    let mut positions = Vec::with_capacity(24);
    for axis in 0..3 {
        let (n, b, c) = (
            Vec3::AXES[axis],
            Vec3::AXES[(axis + 1) % 3],
            Vec3::AXES[(axis + 2) % 3],
        );
        // b x c = n: (b, c) spans the +n face counter-clockwise from
        // outside, (c, b) the -n face.
        for (normal, u, v) in [(n, b, c), (-n, c, b)] {
            positions.extend([
                normal - u - v,
                normal + u - v,
                normal + u + v,
                normal - u + v,
            ]);
        }
    }
    Mesh {
        name: "cube".into(),
        positions,
        uvs: unit_uvs(6),
        indices: quad_indices(6),
        material_ids: vec![0; 12],
        ..Mesh::default()
    }
}

/// Reverses the winding and the shading normals (`flip_normals`).
fn flip(mesh: &mut Mesh) {
    for tri in &mut mesh.indices {
        tri.swap(1, 2);
    }
    for n in &mut mesh.normals {
        *n = -*n;
    }
}

/// Vertex normals as the sum of the adjacent face normals weighted by the
/// face's angle at the vertex (so a vertex's normal does not depend on how
/// its neighbourhood is triangulated). Indices are checked later by
/// `finish`; out-of-range ones are skipped here.
fn smooth_normals(mesh: &Mesh) -> Vec<Vec3> {
    let mut normals = vec![Vec3::ZERO; mesh.positions.len()];
    let n = mesh.positions.len();
    for tri in &mesh.indices {
        if tri.iter().any(|&i| i as usize >= n) {
            continue;
        }
        let p = tri.map(|i| mesh.positions[i as usize]);
        let Some(face) = (p[1] - p[0]).cross(p[2] - p[0]).try_normalize() else {
            continue;
        };
        for k in 0..3 {
            let e1 = p[(k + 1) % 3] - p[k];
            let e2 = p[(k + 2) % 3] - p[k];
            let angle = e1.angle_between(e2);
            if angle.is_finite() {
                normals[tri[k] as usize] += face * angle;
            }
        }
    }
    normals.iter().map(|v| v.normalize_or_zero()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_outward(mesh: &Mesh) {
        for i in 0..mesh.indices.len() {
            let tri = mesh.triangle(i);
            assert!(tri.cross().dot(tri.centroid()) > 0.0, "triangle {i}");
        }
    }

    #[test]
    fn rectangle_faces_plus_z() {
        let mesh = rectangle();
        for i in 0..2 {
            let n = mesh.triangle(i).normal().unwrap();
            assert!((n - Vec3::Z).length() < 1e-6);
        }
    }

    #[test]
    fn cube_is_closed_and_faces_out() {
        let mesh = cube();
        assert_eq!(mesh.indices.len(), 12);
        assert_outward(&mesh);
        let area: f32 = (0..12).map(|i| mesh.triangle(i).area()).sum();
        assert!((area - 24.0).abs() < 1e-5);
        assert!(mesh.positions.iter().all(|p| p.abs().max_element() == 1.0));
    }

    #[test]
    fn smooth_normals_of_a_cube_corner_point_diagonally() {
        // A cube with shared corners: each corner's normal is the diagonal.
        let mut mesh = cube();
        let corners: Vec<Vec3> = mesh.positions.clone();
        let mut shared: Vec<Vec3> = Vec::new();
        for tri in &mut mesh.indices {
            for i in tri.iter_mut() {
                let p = corners[*i as usize];
                let k = shared.iter().position(|&q| q == p).unwrap_or_else(|| {
                    shared.push(p);
                    shared.len() - 1
                });
                *i = k as u32;
            }
        }
        mesh.positions = shared;
        for (p, n) in mesh.positions.iter().zip(smooth_normals(&mesh)) {
            assert!((n - p.normalize()).length() < 1e-5);
        }
    }
}
