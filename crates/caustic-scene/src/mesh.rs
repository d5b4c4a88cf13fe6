use crate::error::ErrorKind;
use crate::{SceneError, Warning};
use caustic_geom::{Aabb, Triangle, Vec2, Vec3};
use std::path::Path;

/// An indexed triangle mesh. Per-vertex attributes share `indices`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Mesh {
    pub name: String,
    pub positions: Vec<Vec3>,
    /// Empty, or one shading normal per position.
    pub normals: Vec<Vec3>,
    /// Empty, or one texture coordinate per position.
    pub uvs: Vec<Vec2>,
    pub indices: Vec<[u32; 3]>,
    /// One material index per triangle, into `Scene::materials`.
    pub material_ids: Vec<u32>,
}

impl Mesh {
    pub fn triangle(&self, i: usize) -> Triangle {
        let [a, b, c] = self.indices[i];
        Triangle::new(
            self.positions[a as usize],
            self.positions[b as usize],
            self.positions[c as usize],
        )
    }

    pub fn bounds(&self) -> Aabb {
        self.indices
            .iter()
            .flatten()
            .fold(Aabb::EMPTY, |b, &i| b.grown(self.positions[i as usize]))
    }

    /// Applies an affine transform to positions and normals.
    pub fn transform(&mut self, m: &caustic_geom::Mat4) {
        for p in &mut self.positions {
            *p = m.transform_point3(*p);
        }
        let normal_matrix = caustic_geom::Mat3::from_mat4(*m).inverse().transpose();
        for n in &mut self.normals {
            *n = (normal_matrix * *n).normalize_or_zero();
        }
        // A mirroring transform flips the winding: restore counter-clockwise
        // order so geometric normals keep pointing the same way.
        if m.determinant() < 0.0 {
            for tri in &mut self.indices {
                tri.swap(1, 2);
            }
        }
    }

    /// Checks index ranges and attribute lengths (errors: malformed file),
    /// then drops triangles with non-finite or zero-area geometry with one
    /// warning per class naming how many were dropped. Returns that number.
    pub fn sanitize(
        &mut self,
        path: &Path,
        warnings: &mut Vec<Warning>,
    ) -> Result<usize, SceneError> {
        self.check(path)?;
        self.drop_degenerate(path, warnings)
    }

    /// Checks index ranges and attribute lengths: errors name the mesh.
    pub fn check(&self, path: &Path) -> Result<(), SceneError> {
        let n = self.positions.len();
        if !self.normals.is_empty() && self.normals.len() != n {
            return Err(SceneError::new(
                ErrorKind::Syntax,
                path,
                format!(
                    "mesh '{}': {} normals for {} positions",
                    self.name,
                    self.normals.len(),
                    n
                ),
            ));
        }
        if !self.uvs.is_empty() && self.uvs.len() != n {
            return Err(SceneError::new(
                ErrorKind::Syntax,
                path,
                format!(
                    "mesh '{}': {} uvs for {} positions",
                    self.name,
                    self.uvs.len(),
                    n
                ),
            ));
        }
        if self.material_ids.len() != self.indices.len() {
            return Err(SceneError::new(
                ErrorKind::Syntax,
                path,
                format!(
                    "mesh '{}': {} material ids for {} triangles",
                    self.name,
                    self.material_ids.len(),
                    self.indices.len()
                ),
            ));
        }
        if let Some((t, bad)) = self
            .indices
            .iter()
            .enumerate()
            .find_map(|(t, tri)| tri.iter().find(|&&i| i as usize >= n).map(|&i| (t, i)))
        {
            return Err(SceneError::new(
                ErrorKind::IndexOutOfRange,
                path,
                format!(
                    "mesh '{}': triangle {t} refers to vertex {bad}, but there are only {n} vertices",
                    self.name
                ),
            ));
        }
        Ok(())
    }

    /// Drops triangles with non-finite or zero-area geometry, one warning
    /// per class; returns how many.
    fn drop_degenerate(
        &mut self,
        path: &Path,
        warnings: &mut Vec<Warning>,
    ) -> Result<usize, SceneError> {
        let mut non_finite = 0usize;
        let mut zero_area = 0usize;
        let mut keep = Vec::with_capacity(self.indices.len());
        for i in 0..self.indices.len() {
            let tri = self.triangle(i);
            if !tri.is_finite() {
                non_finite += 1;
            } else if tri.cross() == Vec3::ZERO {
                zero_area += 1;
            } else {
                keep.push(i);
            }
        }
        if non_finite > 0 {
            warnings.push(Warning::new(
                path,
                format!(
                    "mesh '{}': skipped {non_finite} triangle(s) with NaN or infinite coordinates",
                    self.name
                ),
            ));
        }
        if zero_area > 0 {
            warnings.push(Warning::new(
                path,
                format!(
                    "mesh '{}': skipped {zero_area} zero-area triangle(s)",
                    self.name
                ),
            ));
        }
        if keep.len() != self.indices.len() {
            self.indices = keep.iter().map(|&i| self.indices[i]).collect();
            self.material_ids = keep.iter().map(|&i| self.material_ids[i]).collect();
        }
        Ok(non_finite + zero_area)
    }
}
