//! Wavefront OBJ + MTL loader, on top of the `tobj` crate.
//!
//! OBJ is line based: `v x y z` positions, `vt u [v]` texture coordinates,
//! `vn x y z` normals, `f a b c ...` polygons whose corners are `v`, `v/vt`,
//! `v//vn` or `v/vt/vn` with 1-based indices (negative ones count back from
//! the last element defined so far), `o`/`g` names, `usemtl` picking a
//! material from the `mtllib` files, `#` comments. Polygons are
//! triangulated by ear clipping in their best-fit plane
//! (`loaders/polygon.rs`);
//! points and lines are ignored. Each tobj model (an object, group or
//! `usemtl` run) becomes one [`Mesh`].
//!
//! MTL (`mtl.rs`) maps onto caustic's BSDFs: `illum 3`/`5` is a mirror
//! (reflectance `Ks`), `illum 4`/`6`/`7` a dielectric (`Ni`, tinted by
//! `Tf`), otherwise a non-zero `Ks` gives a Phong-glossy surface (`Ns` the
//! exponent) and the rest is Lambertian (`Kd`, `map_Kd`). `Ke` is emitted
//! radiance. OBJ materials are two-sided.
//!
//! tobj gives no line numbers, panics on some malformed input (an MTL
//! colour with fewer than three numbers; absurd indices overflow in debug
//! builds) and splits `usemtl`/`mtllib` at a single space, so indented or
//! tab-separated files lose names. So a pre-pass (`prepass.rs`) reads each
//! file once, checks every statement caustic uses (with its line number),
//! and hands tobj a normalised copy: one statement per line, words
//! separated by one space, no comments, only the statements caustic reads.
//! tobj itself still runs under the panic guard (`loaders/guard.rs`).

mod mtl;
mod prepass;

use super::guard::guarded;
use super::input::read_text_bytes;
use super::polygon::Triangulator;
use crate::error::ErrorKind;
use crate::{Material, Mesh, Scene, SceneError, Warning};
use caustic_geom::{Vec2, Vec3};
use mtl::{Library, TextureCache, convert_material, load_libraries};
use prepass::prepare_obj;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Loads an OBJ file with its MTL materials as a scene.
pub(crate) fn load(path: &Path) -> Result<Scene, SceneError> {
    let mut warnings = Vec::new();
    match load_into(path, &mut warnings) {
        Ok(scene) => Ok(Scene { warnings, ..scene }),
        Err(e) => Err(e.with_warnings(warnings)),
    }
}

fn load_into(path: &Path, warnings: &mut Vec<Warning>) -> Result<Scene, SceneError> {
    let source = read_text(path, warnings)?;
    let obj = prepare_obj(path, &source, warnings)?;
    let libraries = load_libraries(path, &obj, warnings)?;
    let (models, mtl_materials) = parse_with_tobj(path, &obj.text, &libraries)?;

    let mut textures = TextureCache::default();
    let mut materials: Vec<Material> = mtl_materials
        .iter()
        .map(|m| convert_material(m, path, &mut textures, warnings))
        .collect();
    // Faces without a (known) material share one default, appended once.
    let mut default_id = None;
    let mut meshes = Vec::with_capacity(models.len());
    let mut triangulator = Triangulator::default();
    for model in models {
        let id = match model.mesh.material_id {
            Some(id) if id < materials.len() => id,
            _ => *default_id.get_or_insert_with(|| {
                materials.push(Material::default_grey());
                materials.len() - 1
            }),
        };
        if let Some(mesh) = model_to_mesh(model, id as u32, path, &mut triangulator, warnings) {
            meshes.push(mesh);
        }
    }
    triangulator.stats.warn(path, warnings);
    Ok(Scene {
        meshes,
        materials,
        textures: textures.into_textures(),
        ..Scene::default()
    })
}

/// Reads only the geometry of an OBJ file as one mesh (all groups merged,
/// MTL ignored, `material_ids` all 0): what Mitsuba's `<shape type="obj">`
/// needs.
pub(crate) fn read_obj_geometry(
    path: &Path,
    warnings: &mut Vec<Warning>,
) -> Result<Mesh, SceneError> {
    let source = read_text(path, warnings)?;
    let obj = prepare_obj(path, &source, warnings)?;
    let (models, _) = parse_with_tobj(path, &obj.text, &HashMap::new())?;
    let mut triangulator = Triangulator::default();
    let parts: Vec<Mesh> = models
        .into_iter()
        .filter_map(|model| model_to_mesh(model, 0, path, &mut triangulator, warnings))
        .collect();
    triangulator.stats.warn(path, warnings);
    let mut mesh = merge_meshes(parts, path, warnings);
    mesh.name = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(mesh)
}

/// Reads a text file; bytes that are not UTF-8 (Latin-1 comments, say) are
/// replaced, with one warning, rather than failing the whole file. UTF-16
/// is an error (it would be all replacement characters).
fn read_text(path: &Path, warnings: &mut Vec<Warning>) -> Result<String, SceneError> {
    let bytes = read_text_bytes(path)?;
    Ok(match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => {
            warnings.push(Warning::new(
                path,
                "file is not valid UTF-8; invalid bytes replaced",
            ));
            String::from_utf8_lossy(e.as_bytes()).into_owned()
        }
    })
}

// --------------------------------------------------------------- tobj --

/// Runs tobj on the normalised text; `libraries` answers its `mtllib`
/// requests (names it does not know give no materials).
fn parse_with_tobj(
    path: &Path,
    text: &str,
    libraries: &HashMap<PathBuf, Library>,
) -> Result<(Vec<tobj::Model>, Vec<tobj::Material>), SceneError> {
    // Polygons kept whole (`face_arities`) for `Triangulator`, one index
    // per vertex, points and lines dropped.
    let options = tobj::LoadOptions {
        triangulate: false,
        ..tobj::GPU_LOAD_OPTIONS
    };
    let (models, materials) = guarded(path, "tobj", || {
        tobj::load_obj_buf(&mut text.as_bytes(), &options, |name| {
            libraries
                .get(name)
                .cloned()
                .unwrap_or_else(|| Ok(Default::default()))
        })
        // The pre-pass rejects everything tobj would; this is a safety net.
        .map_err(|e| SceneError::new(ErrorKind::Syntax, path, format!("OBJ parser: {e}")))
    })?;
    Ok((models, materials.unwrap_or_default()))
}

/// Converts one tobj model; `None` for models without triangles (tobj
/// makes one for every group name, even with no faces after it).
fn model_to_mesh(
    model: tobj::Model,
    material: u32,
    path: &Path,
    triangulator: &mut Triangulator,
    warnings: &mut Vec<Warning>,
) -> Option<Mesh> {
    let m = model.mesh;
    if m.indices.is_empty() {
        return None;
    }
    let positions: Vec<Vec3> = m.positions.chunks_exact(3).map(Vec3::from_slice).collect();
    let n = positions.len();
    let mut partial = |what: &str| {
        warnings.push(Warning::new(
            path,
            format!(
                "mesh '{}': {what} given for only some vertices; ignored",
                model.name
            ),
        ));
    };
    // tobj adds an attribute only to the vertices whose corner names one,
    // so anything but a full set cannot be matched to positions.
    let mut normals: Vec<Vec3> = m.normals.chunks_exact(3).map(Vec3::from_slice).collect();
    if !normals.is_empty() && normals.len() != n {
        partial("normals");
        normals.clear();
    }
    let mut uvs: Vec<Vec2> = m.texcoords.chunks_exact(2).map(Vec2::from_slice).collect();
    if !uvs.is_empty() && uvs.len() != n {
        partial("texture coordinates");
        uvs.clear();
    }
    let indices = triangles(&positions, &m.indices, &m.face_arities, triangulator);
    Some(Mesh {
        name: model.name,
        positions,
        normals,
        uvs,
        material_ids: vec![material; indices.len()],
        indices,
    })
}

/// The triangles of tobj's faces: `arities` gives each face's corner count
/// (empty when every face is a triangle).
fn triangles(
    positions: &[Vec3],
    indices: &[u32],
    arities: &[u32],
    triangulator: &mut Triangulator,
) -> Vec<[u32; 3]> {
    if arities.is_empty() {
        return indices
            .chunks_exact(3)
            .map(|c| [c[0], c[1], c[2]])
            .collect();
    }
    let mut out = Vec::with_capacity(indices.len());
    let mut start = 0;
    for &arity in arities {
        // tobj's arities add up to its index count; should they not, the
        // faces that fit are kept rather than indexing past the end.
        let Some(corners) = indices.get(start..start + arity as usize) else {
            break;
        };
        start += arity as usize;
        triangulator.triangulate(positions, corners, &mut out);
    }
    out
}

/// Concatenates meshes into one; normals and uvs survive only if every
/// part has them.
fn merge_meshes(parts: Vec<Mesh>, path: &Path, warnings: &mut Vec<Warning>) -> Mesh {
    let all_normals = parts.iter().all(|m| !m.normals.is_empty());
    let all_uvs = parts.iter().all(|m| !m.uvs.is_empty());
    if !all_normals && parts.iter().any(|m| !m.normals.is_empty()) {
        warnings.push(Warning::new(
            path,
            "normals given for only some groups; ignored",
        ));
    }
    if !all_uvs && parts.iter().any(|m| !m.uvs.is_empty()) {
        warnings.push(Warning::new(
            path,
            "texture coordinates given for only some groups; ignored",
        ));
    }
    let mut mesh = Mesh::default();
    for part in parts {
        let offset = mesh.positions.len() as u32;
        mesh.positions.extend(part.positions);
        if all_normals {
            mesh.normals.extend(part.normals);
        }
        if all_uvs {
            mesh.uvs.extend(part.uvs);
        }
        mesh.indices
            .extend(part.indices.iter().map(|t| t.map(|i| i + offset)));
    }
    mesh.material_ids = vec![0; mesh.indices.len()];
    mesh
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/obj")
            .join(name)
    }

    #[test]
    fn geometry_merges_all_groups_into_one_mesh() {
        let mut warnings = Vec::new();
        let mesh = read_obj_geometry(&fixture("quad_polygon.obj"), &mut warnings).unwrap();
        assert_eq!(mesh.name, "quad_polygon");
        assert_eq!(mesh.positions.len(), 9);
        assert_eq!(mesh.indices.len(), 5);
        assert_eq!(mesh.material_ids, vec![0; 5]);
        // The pentagon's corners come after the quad's four.
        assert!(mesh.indices[2..].iter().flatten().all(|&i| i >= 4));
        assert!(warnings.is_empty());
    }

    #[test]
    fn geometry_ignores_materials_and_drops_partial_attributes() {
        let mut warnings = Vec::new();
        let mesh = read_obj_geometry(&fixture("materials.obj"), &mut warnings).unwrap();
        assert_eq!(mesh.indices.len(), 6);
        assert_eq!(mesh.material_ids, vec![0; 6]);
        // Only one group has normals and uvs, so the merged mesh has none.
        assert!(mesh.normals.is_empty() && mesh.uvs.is_empty());
        assert_eq!(warnings.len(), 2, "{warnings:?}");
    }

    #[test]
    fn mixed_faces_are_split_by_their_arities() {
        let positions = [
            Vec3::ZERO,
            Vec3::X,
            Vec3::new(1.0, 1.0, 0.0),
            Vec3::Y,
            Vec3::new(2.0, 0.0, 0.0),
        ];
        let mut t = Triangulator::default();
        // A quad, then a triangle.
        let tris = triangles(&positions, &[0, 1, 2, 3, 1, 4, 2], &[4, 3], &mut t);
        assert_eq!(tris, [[0, 1, 2], [0, 2, 3], [1, 4, 2]]);
    }
}
