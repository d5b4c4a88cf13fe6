//! The PLY body: vertices, faces, and skipping every other element by its
//! declared layout.

use super::header::{Element, Header, Property, PropertyKind, Scalar};
use super::reader::{ReadError, ValueReader};
use crate::error::ErrorKind;
use crate::loaders::polygon::Triangulator;
use crate::{Mesh, SceneError, Warning};
use caustic_geom::{Vec2, Vec3};
use std::path::Path;

/// Where each vertex property goes: x y z, nx ny nz, u v.
const VERTEX_SLOTS: [&[&str]; 8] = [
    &["x"],
    &["y"],
    &["z"],
    &["nx"],
    &["ny"],
    &["nz"],
    &["u", "s", "texture_u", "texture_s"],
    &["v", "t", "texture_v", "texture_t"],
];

/// Reads every element of the body in header order into one mesh.
pub(super) fn read_body<R: ValueReader>(
    path: &Path,
    header: &Header,
    reader: &mut R,
    warnings: &mut Vec<Warning>,
) -> Result<Mesh, SceneError> {
    let vertex_count = header
        .elements
        .iter()
        .find(|e| e.name == "vertex")
        .map(|e| e.count)
        .ok_or_else(|| {
            SceneError::new(
                ErrorKind::Syntax,
                path,
                "the header declares no 'vertex' element",
            )
        })?;
    if u32::try_from(vertex_count).is_err() {
        return Err(SceneError::new(
            ErrorKind::InvalidValue,
            path,
            format!("{vertex_count} vertices is more than 32-bit indices can address"),
        ));
    }
    let mut mesh = Mesh::default();
    let mut polygons = Polygons::default();
    for element in &header.elements {
        let cx = Context { path, element };
        match element.name.as_str() {
            "vertex" => {
                warn_colours(path, element, warnings);
                read_vertices(&cx, reader, &mut mesh)?
            }
            "face" => read_faces(&cx, reader, vertex_count as u32, &mut polygons, warnings)?,
            _ => {
                skip_element(&cx, reader)?;
                warnings.push(Warning::new(
                    path,
                    format!(
                        "skipped element '{}' (caustic reads 'vertex' and 'face')",
                        element.name
                    ),
                ));
            }
        }
    }
    // After the whole body: the vertex element may follow the faces.
    polygons.triangulate(&mut mesh, path, warnings);
    mesh.material_ids = vec![0; mesh.indices.len()];
    Ok(mesh)
}

/// The faces as read: every polygon's corners, one after the other.
#[derive(Default)]
struct Polygons {
    corners: Vec<u32>,
    arities: Vec<u32>,
}

impl Polygons {
    /// Ear-clips every polygon (triangles pass through), as OBJ's are.
    fn triangulate(&self, mesh: &mut Mesh, path: &Path, warnings: &mut Vec<Warning>) {
        let mut triangulator = Triangulator::default();
        mesh.indices.reserve(self.corners.len() / 3);
        let mut start = 0;
        for &arity in &self.arities {
            let corners = &self.corners[start..start + arity as usize];
            start += arity as usize;
            triangulator.triangulate(&mesh.positions, corners, &mut mesh.indices);
        }
        triangulator.stats.warn(path, warnings);
    }
}

/// Vertex colours are common in scanned PLY meshes; caustic shades with
/// materials, so say that they are not used.
fn warn_colours(path: &Path, element: &Element, warnings: &mut Vec<Warning>) {
    const COLOURS: [&str; 12] = [
        "red",
        "green",
        "blue",
        "alpha",
        "r",
        "g",
        "b",
        "a",
        "diffuse_red",
        "diffuse_green",
        "diffuse_blue",
        "diffuse_alpha",
    ];
    let found: Vec<&str> = element
        .properties
        .iter()
        .map(|p| p.name.as_str())
        .filter(|name| COLOURS.contains(name))
        .collect();
    if !found.is_empty() {
        warnings.push(Warning::new(
            path,
            format!(
                "vertex colours ({}) are ignored (caustic shades with materials)",
                found.join(", ")
            ),
        ));
    }
}

/// The element being read, for error messages.
struct Context<'a> {
    path: &'a Path,
    element: &'a Element,
}

impl Context<'_> {
    fn truncated(&self, done: usize) -> SceneError {
        let noun = match self.element.name.as_str() {
            "vertex" => "vertices".to_string(),
            "face" => "faces".to_string(),
            other => format!("'{other}' elements"),
        };
        SceneError::new(
            ErrorKind::Truncated,
            self.path,
            format!("file ends after {done} of {} {noun}", self.element.count),
        )
    }

    /// Turns a read failure of `property` in record `record` into an error.
    fn read_error<R: ValueReader>(
        &self,
        err: ReadError,
        reader: &R,
        record: usize,
        property: &str,
    ) -> SceneError {
        match err {
            ReadError::End => self.truncated(record),
            ReadError::Bad(token) => SceneError::new(
                ErrorKind::Syntax,
                self.path,
                format!(
                    "{} {record}, property '{property}': '{token}' is not a number of the declared type",
                    self.element.name
                ),
            )
            .at(reader.location()),
        }
    }

    /// Reads a list's item count, which must be a non-negative integer.
    fn list_len<R: ValueReader>(
        &self,
        reader: &mut R,
        ty: Scalar,
        record: usize,
        property: &str,
    ) -> Result<usize, SceneError> {
        let n = reader
            .read(ty)
            .map_err(|e| self.read_error(e, reader, record, property))?;
        if n < 0.0 {
            return Err(SceneError::new(
                ErrorKind::Syntax,
                self.path,
                format!(
                    "{} {record}: list '{property}' has negative length {n}",
                    self.element.name
                ),
            )
            .at(reader.location()));
        }
        Ok(n as usize)
    }

    /// Reads and discards one property value (scalar or whole list).
    fn skip_property<R: ValueReader>(
        &self,
        reader: &mut R,
        property: &Property,
        record: usize,
    ) -> Result<(), SceneError> {
        match property.kind {
            PropertyKind::Scalar(ty) => {
                reader
                    .read(ty)
                    .map_err(|e| self.read_error(e, reader, record, &property.name))?;
            }
            PropertyKind::List { count, item } => {
                let n = self.list_len(reader, count, record, &property.name)?;
                for _ in 0..n {
                    reader
                        .read(item)
                        .map_err(|e| self.read_error(e, reader, record, &property.name))?;
                }
            }
        }
        Ok(())
    }

    /// How many records to reserve for: the declared count, but no more
    /// than the remaining bytes could hold.
    fn reservation<R: ValueReader>(&self, reader: &R) -> usize {
        self.element
            .count
            .min(reader.remaining() / self.element.min_record_bytes())
    }
}

fn read_vertices<R: ValueReader>(
    cx: &Context,
    reader: &mut R,
    mesh: &mut Mesh,
) -> Result<(), SceneError> {
    let element = cx.element;
    // slots[p] = the VERTEX_SLOTS entry property p fills, if any.
    let slots: Vec<Option<usize>> = element
        .properties
        .iter()
        .map(|p| match p.kind {
            PropertyKind::Scalar(_) => VERTEX_SLOTS
                .iter()
                .position(|names| names.contains(&p.name.as_str())),
            PropertyKind::List { .. } => None,
        })
        .collect();
    let has = |slot: usize| slots.contains(&Some(slot));
    if let Some(missing) = (0..3).find(|&s| !has(s)) {
        return Err(SceneError::syntax_at_line(
            cx.path,
            element.line,
            format!(
                "vertex element has no scalar property '{}'",
                VERTEX_SLOTS[missing][0]
            ),
        ));
    }
    let with_normals = (3..6).all(has);
    let with_uvs = (6..8).all(has);
    let reserve = cx.reservation(reader);
    mesh.positions.reserve(reserve);
    if with_normals {
        mesh.normals.reserve(reserve);
    }
    if with_uvs {
        mesh.uvs.reserve(reserve);
    }
    let mut values = [0f64; 8];
    for record in 0..element.count {
        for (property, slot) in element.properties.iter().zip(&slots) {
            match (property.kind, slot) {
                (PropertyKind::Scalar(ty), Some(slot)) => {
                    values[*slot] = reader
                        .read(ty)
                        .map_err(|e| cx.read_error(e, reader, record, &property.name))?;
                }
                _ => cx.skip_property(reader, property, record)?,
            }
        }
        let v = values.map(|x| x as f32);
        mesh.positions.push(Vec3::new(v[0], v[1], v[2]));
        if with_normals {
            mesh.normals.push(Vec3::new(v[3], v[4], v[5]));
        }
        if with_uvs {
            mesh.uvs.push(Vec2::new(v[6], v[7]));
        }
    }
    Ok(())
}

fn read_faces<R: ValueReader>(
    cx: &Context,
    reader: &mut R,
    vertex_count: u32,
    polygons: &mut Polygons,
    warnings: &mut Vec<Warning>,
) -> Result<(), SceneError> {
    let element = cx.element;
    let list = element
        .property(&["vertex_indices", "vertex_index"])
        .filter(|&p| matches!(element.properties[p].kind, PropertyKind::List { .. }))
        .ok_or_else(|| {
            SceneError::syntax_at_line(
                cx.path,
                element.line,
                "face element has no 'vertex_indices' list property",
            )
        })?;
    polygons.arities.reserve(cx.reservation(reader));
    let mut polygon: Vec<u32> = Vec::with_capacity(16);
    let mut too_small = 0usize;
    for record in 0..element.count {
        for (p, property) in element.properties.iter().enumerate() {
            if p != list {
                cx.skip_property(reader, property, record)?;
                continue;
            }
            let PropertyKind::List { count, item } = property.kind else {
                unreachable!("checked above");
            };
            let n = cx.list_len(reader, count, record, &property.name)?;
            polygon.clear();
            for _ in 0..n {
                let index = reader
                    .read(item)
                    .map_err(|e| cx.read_error(e, reader, record, &property.name))?;
                polygon.push(vertex_index(cx, reader, record, index, vertex_count)?);
            }
        }
        if polygon.len() < 3 {
            too_small += 1;
            continue;
        }
        polygons.corners.extend_from_slice(&polygon);
        polygons.arities.push(polygon.len() as u32);
    }
    if too_small > 0 {
        warnings.push(Warning::new(
            cx.path,
            format!("skipped {too_small} face(s) with fewer than 3 vertices"),
        ));
    }
    Ok(())
}

/// Checks one face index against the vertex count.
fn vertex_index<R: ValueReader>(
    cx: &Context,
    reader: &R,
    face: usize,
    index: f64,
    vertex_count: u32,
) -> Result<u32, SceneError> {
    if index >= 0.0 && index < f64::from(vertex_count) && index.fract() == 0.0 {
        return Ok(index as u32);
    }
    Err(SceneError::new(
        ErrorKind::IndexOutOfRange,
        cx.path,
        format!("face {face} refers to vertex {index}, but there are {vertex_count} vertices"),
    )
    .at(reader.location()))
}

fn skip_element<R: ValueReader>(cx: &Context, reader: &mut R) -> Result<(), SceneError> {
    let element = cx.element;
    // Records without properties take no bytes, whatever their count: do
    // not loop over a count of 10^19 to read nothing.
    if element.properties.is_empty() {
        return Ok(());
    }
    let fixed: Option<usize> = element
        .properties
        .iter()
        .map(|p| match p.kind {
            PropertyKind::Scalar(s) => Some(s.size()),
            PropertyKind::List { .. } => None,
        })
        .sum();
    if let Some(stride) = fixed.filter(|&s| s > 0) {
        return reader
            .skip_fixed(element, stride)
            .map_err(|done| cx.truncated(done));
    }
    for record in 0..element.count {
        for property in &element.properties {
            cx.skip_property(reader, property, record)?;
        }
    }
    Ok(())
}
