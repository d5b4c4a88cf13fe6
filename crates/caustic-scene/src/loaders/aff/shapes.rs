//! AFF geometry statements (`p`, `pp`, `tt`, `ttp`, `tpa`, `m`, `c`, `s`)
//! and the batches that gather them into meshes.
//!
//! Primitives go to one mesh per place and attribute set: world-space
//! geometry per included file (its name), geometry of a group inside a
//! keyframed group per group, animated triangles (`tpa`) per group on
//! their own; with or without normals and uvs apart, so that a mesh's
//! attributes are all or nothing and no normal is invented.

use super::Loader;
use super::lexer::Cursor;
use crate::animation::TriangleKeys;
use crate::builtin::icosphere;
use crate::loaders::polygon::Triangulator;
use crate::{ErrorKind, Mesh, SceneError};
use caustic_geom::{Mat3, Mat4, Vec2, Vec3};
use std::collections::HashMap;
use std::path::Path;

/// Sides of a tessellated cone.
const CONE_SIDES: u32 = 32;
/// Subdivision level of a tessellated sphere (1280 triangles).
const SPHERE_LEVEL: u32 = 3;

/// Where a batch's vertices live.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Place {
    /// World space; geometry of one included file instance.
    World(usize),
    /// The local space of a group inside a keyframed group.
    Group(u32),
    /// Animated triangles in a group's space (`None`: world).
    Keyed(Option<u32>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct BatchKey {
    place: Place,
    normals: bool,
    uvs: bool,
}

/// A mesh being gathered, and the keys of its animated triangles.
pub(super) struct Batch {
    pub place: Place,
    pub mesh: Mesh,
    pub keys: Vec<TriangleKeys>,
}

/// All batches of a load, in creation order.
#[derive(Default)]
pub(super) struct Batches {
    pub list: Vec<Batch>,
    index: HashMap<BatchKey, usize>,
    /// Names of file instances (each include is one); the open ones.
    files: Vec<String>,
    open_files: Vec<usize>,
    pub triangulator: Triangulator,
}

impl Batches {
    pub fn begin_file(&mut self, path: &Path) {
        let name = path
            .file_stem()
            .map_or_else(|| "aff".to_string(), |s| s.to_string_lossy().into_owned());
        self.files.push(name);
        self.open_files.push(self.files.len() - 1);
    }

    pub fn end_file(&mut self) {
        self.open_files.pop();
    }

    fn batch(&mut self, key: BatchKey, name: impl FnOnce() -> String) -> &mut Batch {
        let next = self.list.len();
        let i = *self.index.entry(key).or_insert(next);
        if i == next {
            self.list.push(Batch {
                place: key.place,
                mesh: Mesh {
                    name: name(),
                    ..Mesh::default()
                },
                keys: Vec::new(),
            });
        }
        &mut self.list[i]
    }
}

/// One primitive's vertices and triangles (indices into its vertices).
struct Primitive<'p> {
    positions: &'p [Vec3],
    normals: Option<&'p [Vec3]>,
    uvs: Option<&'p [Vec2]>,
    triangles: &'p [[u32; 3]],
    material: u32,
}

impl Loader {
    /// Appends a primitive where the open groups put it: in world space
    /// (transformed now) or in a keyframed group's space.
    fn add(&mut self, prim: Primitive) {
        let (group, world) = self.placement();
        let place = match (world, group) {
            (Some(_), _) | (None, None) => Place::World(self.current_file()),
            (None, Some(g)) => Place::Group(g),
        };
        let key = BatchKey {
            place,
            normals: prim.normals.is_some(),
            uvs: prim.uvs.is_some(),
        };
        let name = self.place_name(place);
        let batch = self.batches.batch(key, || name);
        let mesh = &mut batch.mesh;
        let base = mesh.positions.len() as u32;
        let m = world.unwrap_or(Mat4::IDENTITY);
        mesh.positions
            .extend(prim.positions.iter().map(|p| m.transform_point3(*p)));
        if let Some(normals) = prim.normals {
            let nm = Mat3::from_mat4(m).inverse().transpose();
            mesh.normals
                .extend(normals.iter().map(|n| (nm * *n).normalize_or_zero()));
        }
        if let Some(uvs) = prim.uvs {
            mesh.uvs.extend_from_slice(uvs);
        }
        // A mirroring group flips the winding; restore it (Mesh::transform).
        let flip = m.determinant() < 0.0;
        mesh.indices.extend(prim.triangles.iter().map(|t| {
            let t = t.map(|i| i + base);
            if flip { [t[0], t[2], t[1]] } else { t }
        }));
        mesh.material_ids
            .extend(std::iter::repeat_n(prim.material, prim.triangles.len()));
    }

    fn current_file(&self) -> usize {
        *self.batches.open_files.last().unwrap_or(&0)
    }

    fn place_name(&self, place: Place) -> String {
        let group_name = |g: u32| match &self.groups[g as usize].kind {
            super::GroupKind::Named(name) => name.clone(),
            super::GroupKind::Static(_) => format!("group {g}"),
        };
        match place {
            Place::World(f) => self
                .batches
                .files
                .get(f)
                .cloned()
                .unwrap_or_else(|| "aff".into()),
            Place::Group(g) => group_name(g),
            Place::Keyed(Some(g)) => format!("{} (animated triangles)", group_name(g)),
            Place::Keyed(None) => "animated triangles".into(),
        }
    }

    /// `p n` + n positions, `pp n` + n (position, normal).
    pub(super) fn polygon(&mut self, c: &mut Cursor, patch: bool) -> Result<(), SceneError> {
        let per = if patch { 6 } else { 3 };
        let n = c.items("polygon vertex count", per)?;
        let mut positions = Vec::with_capacity(n);
        let mut normals = Vec::with_capacity(if patch { n } else { 0 });
        for _ in 0..n {
            positions.push(c.vec3("polygon vertex")?);
            if patch {
                normals.push(c.vec3("polygon normal")?);
            }
        }
        let corners: Vec<u32> = (0..n as u32).collect();
        let mut triangles = Vec::with_capacity(n.saturating_sub(2));
        self.batches
            .triangulator
            .triangulate(&positions, &corners, &mut triangles);
        let material = self.material_id(None);
        self.add(Primitive {
            positions: &positions,
            normals: patch.then_some(&normals[..]),
            uvs: None,
            triangles: &triangles,
            material,
        });
        Ok(())
    }

    /// `tt tex` + 3 (position, uv); `ttp tex` + 3 (position, normal, uv).
    pub(super) fn textured_triangle(
        &mut self,
        c: &mut Cursor,
        patch: bool,
    ) -> Result<(), SceneError> {
        let line = c.line();
        let name = c.word("the texture's name")?.text;
        let mut positions = [Vec3::ZERO; 3];
        let mut normals = [Vec3::ZERO; 3];
        let mut uvs = [Vec2::ZERO; 3];
        for k in 0..3 {
            positions[k] = c.vec3("textured triangle vertex")?;
            if patch {
                normals[k] = c.vec3("textured triangle normal")?;
            }
            uvs[k] = Vec2::new(c.number("texture u")?, c.number("texture v")?);
        }
        let texture = self.texture(name, c, line);
        let material = self.material_id(texture);
        self.add(Primitive {
            positions: &positions,
            normals: patch.then_some(&normals[..]),
            uvs: Some(&uvs),
            triangles: &[[0, 1, 2]],
            material,
        });
        Ok(())
    }

    /// `tpa n` + n × (time, 3 × (position, normal)): a triangle keyed in
    /// time, interpolated linearly between its keys.
    pub(super) fn animated_triangle(&mut self, c: &mut Cursor) -> Result<(), SceneError> {
        let line = c.line();
        let n = c.items("animated triangle key count", 19)?;
        if n == 0 {
            return Err(c.error_at(
                line,
                ErrorKind::InvalidValue,
                "animated triangle 'tpa' with no keys",
            ));
        }
        let mut keys = TriangleKeys {
            times: Vec::with_capacity(n),
            corners: Vec::with_capacity(n),
        };
        for _ in 0..n {
            let time = c.number("animated triangle key time")?;
            if keys.times.last().is_some_and(|&last| time < last) {
                return Err(c.syntax(format!(
                    "animated triangle key times must not decrease ({time} after {})",
                    keys.times[keys.times.len() - 1]
                )));
            }
            keys.times.push(time);
            let mut corners = [(Vec3::ZERO, Vec3::ZERO); 3];
            for corner in &mut corners {
                *corner = (
                    c.vec3("animated triangle vertex")?,
                    c.vec3("animated triangle normal")?,
                );
            }
            keys.corners.push(corners);
        }
        let material = self.material_id(None);
        let group = self.open.last().map(|&(g, _, _)| g);
        let place = Place::Keyed(group);
        let key = BatchKey {
            place,
            normals: true,
            uvs: false,
        };
        let name = self.place_name(place);
        let batch = self.batches.batch(key, || name);
        let base = batch.mesh.positions.len() as u32;
        for &(p, nrm) in &keys.corners[0] {
            batch.mesh.positions.push(p);
            batch.mesh.normals.push(nrm.normalize_or_zero());
        }
        batch.mesh.indices.push([base, base + 1, base + 2]);
        batch.mesh.material_ids.push(material);
        batch.keys.push(keys);
        Ok(())
    }

    /// `m vertices n … [normals n …] [texturecoords n tex …] triangles n …`,
    /// each triangle's vertex, then normal, then uv indices.
    pub(super) fn mesh(&mut self, c: &mut Cursor) -> Result<(), SceneError> {
        c.expect("vertices", "mesh 'm'")?;
        let positions = vec3_list(c, "mesh vertex")?;
        let mut normals = None;
        let mut uvs = None;
        let mut texture = None;
        if c.peek().is_some_and(|t| t.text == "normals") {
            c.next();
            normals = Some(vec3_list(c, "mesh normal")?);
        }
        if c.peek().is_some_and(|t| t.text == "texturecoords") {
            c.next();
            let n = c.items("mesh texture coordinate count", 2)?;
            let line = c.line();
            let name = c.word("the mesh's texture name")?.text;
            let mut list = Vec::with_capacity(n);
            for _ in 0..n {
                list.push(Vec2::new(c.number("texture u")?, c.number("texture v")?));
            }
            texture = self.texture(name, c, line);
            uvs = Some(list);
        }
        c.expect("triangles", "mesh 'm'")?;
        let per = 3 * (1 + normals.is_some() as usize + uvs.is_some() as usize);
        let n = c.items("mesh triangle count", per)?;
        let sizes = [
            Some(positions.len()),
            normals.as_ref().map(Vec::len),
            uvs.as_ref().map(Vec::len),
        ];
        let mut corners: Vec<[[u32; 3]; 3]> = Vec::with_capacity(n);
        for _ in 0..n {
            let mut tri = [[0u32; 3]; 3];
            for (set, size) in sizes.iter().enumerate() {
                let Some(size) = *size else { continue };
                for corner in &mut tri {
                    let line = c.line();
                    let i = c.count("mesh index", u32::MAX as usize)?;
                    if i >= size {
                        let what = ["vertex", "normal", "texture coordinate"][set];
                        return Err(c.error_at(
                            line,
                            ErrorKind::IndexOutOfRange,
                            format!("mesh {what} index {i}, but the mesh has only {size}"),
                        ));
                    }
                    corner[set] = i as u32;
                }
            }
            corners.push(tri);
        }
        let material = self.material_id(texture);
        let unified = unify(&positions, normals.as_deref(), uvs.as_deref(), &corners);
        self.add(Primitive {
            positions: &unified.positions,
            normals: normals.is_some().then_some(&unified.normals[..]),
            uvs: uvs.is_some().then_some(&unified.uvs[..]),
            triangles: &unified.triangles,
            material,
        });
        Ok(())
    }

    /// `c` base.xyz base_radius apex.xyz apex_radius: an open cone or
    /// cylinder, tessellated; negative radii show its inside.
    pub(super) fn cone(&mut self, c: &mut Cursor) -> Result<(), SceneError> {
        let base = c.vec3("cone base")?;
        let r0 = c.number("cone base radius")?;
        let apex = c.vec3("cone apex")?;
        let r1 = c.number("cone apex radius")?;
        let (positions, normals, triangles) = cone_mesh(base, r0, apex, r1);
        let material = self.material_id(None);
        self.add(Primitive {
            positions: &positions,
            normals: Some(&normals),
            uvs: None,
            triangles: &triangles,
            material,
        });
        Ok(())
    }

    /// `s` center.xyz radius: a sphere, tessellated.
    pub(super) fn sphere(&mut self, c: &mut Cursor) -> Result<(), SceneError> {
        let center = c.vec3("sphere centre")?;
        let radius = c.number("sphere radius")?;
        let material = self.material_id(None);
        let sphere = icosphere("sphere", center, radius.abs(), SPHERE_LEVEL, material);
        let normals: Vec<Vec3> = sphere
            .positions
            .iter()
            .map(|p| (*p - center).normalize_or_zero() * radius.signum())
            .collect();
        self.add(Primitive {
            positions: &sphere.positions,
            normals: Some(&normals),
            uvs: None,
            triangles: &sphere.indices,
            material,
        });
        Ok(())
    }
}

fn vec3_list(c: &mut Cursor, what: &str) -> Result<Vec<Vec3>, SceneError> {
    let n = c.items(&format!("{what} count"), 3)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(c.vec3(what)?);
    }
    Ok(out)
}

/// A mesh with one index per vertex.
struct Unified {
    positions: Vec<Vec3>,
    normals: Vec<Vec3>,
    uvs: Vec<Vec2>,
    triangles: Vec<[u32; 3]>,
}

/// AFF meshes index positions, normals and uvs separately; caustic meshes
/// share one index. Each distinct (position, normal, uv) triple becomes a
/// vertex.
fn unify(
    positions: &[Vec3],
    normals: Option<&[Vec3]>,
    uvs: Option<&[Vec2]>,
    corners: &[[[u32; 3]; 3]],
) -> Unified {
    let mut out = Unified {
        positions: Vec::new(),
        normals: Vec::new(),
        uvs: Vec::new(),
        triangles: Vec::with_capacity(corners.len()),
    };
    if normals.is_none() && uvs.is_none() {
        out.positions = positions.to_vec();
        out.triangles = corners.iter().map(|t| t.map(|c| c[0])).collect();
        return out;
    }
    let mut seen: HashMap<[u32; 3], u32> = HashMap::new();
    for tri in corners {
        let t = tri.map(|corner| {
            *seen.entry(corner).or_insert_with(|| {
                out.positions.push(positions[corner[0] as usize]);
                if let Some(n) = normals {
                    out.normals.push(n[corner[1] as usize]);
                }
                if let Some(uv) = uvs {
                    out.uvs.push(uv[corner[2] as usize]);
                }
                out.positions.len() as u32 - 1
            })
        });
        out.triangles.push(t);
    }
    out
}

/// An open cone from `base` (radius `r0`) to `apex` (radius `r1`): two
/// rings of [`CONE_SIDES`] vertices with the cone's normals, outward, or
/// inward when the radii are negative (NFF's convention).
fn cone_mesh(base: Vec3, r0: f32, apex: Vec3, r1: f32) -> (Vec<Vec3>, Vec<Vec3>, Vec<[u32; 3]>) {
    let inside = r0 < 0.0;
    let (r0, r1) = (r0.abs(), r1.abs());
    let axis = apex - base;
    let height = axis.length();
    let dir = axis.normalize_or_zero();
    let (u, v) = dir.any_orthonormal_pair();
    let mut positions = Vec::with_capacity(2 * CONE_SIDES as usize);
    let mut normals = Vec::with_capacity(2 * CONE_SIDES as usize);
    let sign = if inside { -1.0 } else { 1.0 };
    for i in 0..CONE_SIDES {
        let a = i as f32 / CONE_SIDES as f32 * std::f32::consts::TAU;
        let radial = u * a.cos() + v * a.sin();
        // The surface normal tilts towards the narrow end by the slope.
        let normal = (radial * height + dir * (r0 - r1)).normalize_or_zero() * sign;
        positions.push(base + radial * r0);
        positions.push(apex + radial * r1);
        normals.extend([normal, normal]);
    }
    let mut triangles = Vec::with_capacity(2 * CONE_SIDES as usize);
    for i in 0..CONE_SIDES {
        let (b0, a0) = (2 * i, 2 * i + 1);
        let (b1, a1) = (2 * ((i + 1) % CONE_SIDES), 2 * ((i + 1) % CONE_SIDES) + 1);
        if inside {
            triangles.extend([[b0, a0, b1], [b1, a0, a1]]);
        } else {
            triangles.extend([[b0, b1, a0], [b1, a1, a0]]);
        }
    }
    (positions, normals, triangles)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unify_shares_identical_corners() {
        let positions = [Vec3::ZERO, Vec3::X, Vec3::Y, Vec3::ONE];
        let normals = [Vec3::Z, -Vec3::Z];
        let corners = [
            [[0, 0, 0], [1, 0, 0], [2, 0, 0]],
            [[2, 0, 0], [1, 0, 0], [3, 1, 0]],
        ];
        let u = unify(&positions, Some(&normals), None, &corners);
        assert_eq!(u.positions.len(), 4);
        assert_eq!(u.triangles, [[0, 1, 2], [2, 1, 3]]);
        assert_eq!(u.normals[3], -Vec3::Z);
    }

    #[test]
    fn cone_faces_outwards() {
        let (p, n, t) = cone_mesh(Vec3::ZERO, 1.0, Vec3::Y, 0.5);
        assert_eq!(t.len(), 2 * CONE_SIDES as usize);
        for tri in &t {
            let [a, b, c] = tri.map(|i| p[i as usize]);
            let face = (b - a).cross(c - a);
            let centre_axis = Vec3::new(0.0, (a.y + b.y + c.y) / 3.0, 0.0);
            assert!(face.dot((a + b + c) / 3.0 - centre_axis) > 0.0);
            assert!(face.dot(n[tri[0] as usize]) > 0.0);
        }
    }
}
