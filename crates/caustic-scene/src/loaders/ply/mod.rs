//! PLY (Stanford polygon file format) loader: ASCII, binary little endian
//! and binary big endian, version 1.0.
//!
//! The header is text: `ply`, one `format` line, then `element NAME COUNT`
//! lines each followed by its `property TYPE NAME` or
//! `property list COUNT_TYPE ITEM_TYPE NAME` lines, with `comment` and
//! `obj_info` lines anywhere, and `end_header`. Scalar types are
//! `char uchar short ushort int uint float double` and their sized aliases
//! (`int8` ... `float64`). The body holds the elements in header order, each
//! record its properties in order: whitespace-separated numbers in ASCII,
//! packed values in binary.
//!
//! caustic reads the `vertex` element (`x y z`, optional `nx ny nz`, uvs as
//! `u v`, `s t` or `texture_u texture_v`) and the `face` element's
//! `vertex_indices` (or `vertex_index`) list, its polygons ear-clipped as
//! OBJ's are (`loaders/polygon.rs`). Every other element and property is
//! skipped by its declared layout, with a warning, so files with
//! tristrips, edges or per-vertex colours (named as ignored) still load.
//!
//! The whole file is read into memory and parsed by hand: no per-value
//! allocation, no per-line `String`. Problems become [`SceneError`]s naming
//! the header line, body line (ASCII) or element record.
//!
//! Layout: `header.rs` (the header), `reader.rs` (ASCII and binary value
//! readers), `body.rs` (vertices, faces, skipped elements).

mod body;
mod header;
mod reader;

use crate::loaders::input::{read_file, reject_utf16};
use crate::{Material, Mesh, Scene, SceneError, Warning};
use body::read_body;
use header::{Format, parse_header};
use reader::{AsciiReader, BinaryReader};
use std::path::Path;

/// Loads a PLY file as a one-mesh scene with the default material.
pub(crate) fn load(path: &Path) -> Result<Scene, SceneError> {
    let mut warnings = Vec::new();
    let mesh = match read_ply_mesh(path, &mut warnings) {
        Ok(mesh) => mesh,
        Err(e) => return Err(e.with_warnings(warnings)),
    };
    Ok(Scene {
        meshes: vec![mesh],
        materials: vec![Material::default_grey()],
        warnings,
        ..Scene::default()
    })
}

/// Reads a PLY file as one mesh (`material_ids` all 0).
pub(crate) fn read_ply_mesh(path: &Path, warnings: &mut Vec<Warning>) -> Result<Mesh, SceneError> {
    let data = read_file(path)?;
    // The header is text; the check only looks at its first bytes.
    reject_utf16(path, &data)?;
    let header = parse_header(path, &data)?;
    let body = &data[header.body_start..];
    let mut mesh = match header.format {
        Format::Ascii => {
            let mut reader = AsciiReader::new(body, header.line_count + 1);
            read_body(path, &header, &mut reader, warnings)?
        }
        Format::BinaryLittleEndian | Format::BinaryBigEndian => {
            let big_endian = header.format == Format::BinaryBigEndian;
            let mut reader = BinaryReader::new(body, big_endian);
            read_body(path, &header, &mut reader, warnings)?
        }
    };
    mesh.name = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(mesh)
}
