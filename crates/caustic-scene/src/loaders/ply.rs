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
//! `vertex_indices` (or `vertex_index`) list, fan-triangulating polygons.
//! Every other element and property is skipped by its declared layout, so
//! files with tristrips, edges or per-vertex colours still load.
//!
//! The whole file is read into memory and parsed by hand: no per-value
//! allocation, no per-line `String`. Problems become [`SceneError`]s naming
//! the header line, body line (ASCII) or element record.

use crate::error::ErrorKind;
use crate::{Material, Mesh, Scene, SceneError, Warning};
use caustic_geom::{Vec2, Vec3};
use std::path::Path;

/// Loads a PLY file as a one-mesh scene with the default material.
pub(crate) fn load(path: &Path) -> Result<Scene, SceneError> {
    let mut warnings = Vec::new();
    let mesh = read_ply_mesh(path, &mut warnings)?;
    Ok(Scene {
        meshes: vec![mesh],
        materials: vec![Material::default_grey()],
        warnings,
        ..Scene::default()
    })
}

/// Reads a PLY file as one mesh (`material_ids` all 0).
pub(crate) fn read_ply_mesh(path: &Path, warnings: &mut Vec<Warning>) -> Result<Mesh, SceneError> {
    let data = std::fs::read(path).map_err(|e| SceneError::io(path, &e))?;
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

// ---------------------------------------------------------------- header --

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Ascii,
    BinaryLittleEndian,
    BinaryBigEndian,
}

/// A PLY scalar type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scalar {
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    F32,
    F64,
}

impl Scalar {
    fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "char" | "int8" => Self::I8,
            "uchar" | "uint8" => Self::U8,
            "short" | "int16" => Self::I16,
            "ushort" | "uint16" => Self::U16,
            "int" | "int32" => Self::I32,
            "uint" | "uint32" => Self::U32,
            "float" | "float32" => Self::F32,
            "double" | "float64" => Self::F64,
            _ => return None,
        })
    }

    /// Size in bytes in the binary formats.
    fn size(self) -> usize {
        match self {
            Self::I8 | Self::U8 => 1,
            Self::I16 | Self::U16 => 2,
            Self::I32 | Self::U32 | Self::F32 => 4,
            Self::F64 => 8,
        }
    }

    fn is_float(self) -> bool {
        matches!(self, Self::F32 | Self::F64)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PropertyKind {
    Scalar(Scalar),
    List { count: Scalar, item: Scalar },
}

#[derive(Clone, Debug)]
struct Property {
    name: String,
    kind: PropertyKind,
}

#[derive(Clone, Debug)]
struct Element {
    name: String,
    count: usize,
    properties: Vec<Property>,
    /// Header line of the `element` statement, for error messages.
    line: usize,
}

impl Element {
    fn property(&self, names: &[&str]) -> Option<usize> {
        self.properties
            .iter()
            .position(|p| names.contains(&p.name.as_str()))
    }

    /// Bytes one record takes at least in binary (lists count as empty), so
    /// a lying element count cannot make us reserve more than the file holds.
    fn min_record_bytes(&self) -> usize {
        let bytes: usize = self
            .properties
            .iter()
            .map(|p| match p.kind {
                PropertyKind::Scalar(s) => s.size(),
                PropertyKind::List { count, .. } => count.size(),
            })
            .sum();
        bytes.max(1)
    }
}

#[derive(Debug)]
struct Header {
    format: Format,
    elements: Vec<Element>,
    /// Byte offset of the first byte after the `end_header` line.
    body_start: usize,
    /// Number of header lines, so ASCII body lines can be numbered.
    line_count: usize,
}

fn parse_header(path: &Path, data: &[u8]) -> Result<Header, SceneError> {
    let syntax = |line: usize, msg: String| SceneError::syntax_at_line(path, line, msg);
    let mut format = None;
    let mut elements: Vec<Element> = Vec::new();
    let mut pos = 0;
    let mut line_no = 0;
    while pos < data.len() {
        let end = data[pos..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(data.len(), |i| pos + i);
        let raw = &data[pos..end];
        pos = (end + 1).min(data.len());
        line_no += 1;
        let text = std::str::from_utf8(raw)
            .map_err(|_| syntax(line_no, "header line is not text".into()))?
            .trim();
        if line_no == 1 {
            if text != "ply" {
                return Err(syntax(
                    1,
                    "not a PLY file (the first line must be 'ply')".into(),
                ));
            }
            continue;
        }
        let mut words = text.split_whitespace();
        match words.next() {
            None | Some("comment" | "obj_info") => {}
            Some("format") => {
                if format.is_some() {
                    return Err(syntax(line_no, "second 'format' line".into()));
                }
                format = Some(parse_format(words.collect()).ok_or_else(|| {
                    syntax(
                        line_no,
                        format!("bad format line '{text}' (expected 'format ascii|binary_little_endian|binary_big_endian 1.0')"),
                    )
                })?);
            }
            Some("element") => elements
                .push(parse_element(words.collect(), line_no).map_err(|m| syntax(line_no, m))?),
            Some("property") => {
                let element = elements
                    .last_mut()
                    .ok_or_else(|| syntax(line_no, "property before any element".into()))?;
                let property = parse_property(words.collect()).map_err(|m| syntax(line_no, m))?;
                element.properties.push(property);
            }
            Some("end_header") => {
                let format =
                    format.ok_or_else(|| syntax(line_no, "header has no 'format' line".into()))?;
                return Ok(Header {
                    format,
                    elements,
                    body_start: pos,
                    line_count: line_no,
                });
            }
            Some(other) => {
                return Err(syntax(line_no, format!("unknown header keyword '{other}'")));
            }
        }
    }
    Err(SceneError::new(
        ErrorKind::Truncated,
        path,
        "file ends inside the header (no 'end_header' line)",
    ))
}

fn parse_format(words: Vec<&str>) -> Option<Format> {
    let [kind, version] = words[..] else {
        return None;
    };
    if version != "1.0" && version != "1" {
        return None;
    }
    match kind {
        "ascii" => Some(Format::Ascii),
        "binary_little_endian" => Some(Format::BinaryLittleEndian),
        "binary_big_endian" => Some(Format::BinaryBigEndian),
        _ => None,
    }
}

fn parse_element(words: Vec<&str>, line: usize) -> Result<Element, String> {
    let [name, count] = words[..] else {
        return Err("expected 'element NAME COUNT'".into());
    };
    let count = count
        .parse()
        .map_err(|_| format!("element '{name}': bad count '{count}'"))?;
    Ok(Element {
        name: name.to_string(),
        count,
        properties: Vec::new(),
        line,
    })
}

fn parse_property(words: Vec<&str>) -> Result<Property, String> {
    let scalar = |name: &str| {
        Scalar::from_name(name).ok_or_else(|| format!("unknown property type '{name}'"))
    };
    let (kind, name) = match words[..] {
        ["list", count, item, name] => {
            let count = scalar(count)?;
            if count.is_float() {
                return Err(format!("list '{name}' has a floating-point count type"));
            }
            (
                PropertyKind::List {
                    count,
                    item: scalar(item)?,
                },
                name,
            )
        }
        [ty, name] if ty != "list" => (PropertyKind::Scalar(scalar(ty)?), name),
        _ => {
            return Err(
                "expected 'property TYPE NAME' or 'property list COUNT_TYPE ITEM_TYPE NAME'".into(),
            );
        }
    };
    Ok(Property {
        name: name.to_string(),
        kind,
    })
}

// --------------------------------------------------------------- readers --

/// Why a value could not be read.
enum ReadError {
    /// The body ended.
    End,
    /// An ASCII token that is not a number of the expected type.
    Bad(String),
}

/// One value at a time from the body, as `f64` (exact for every PLY integer
/// type and for `float`).
trait ValueReader {
    fn read(&mut self, ty: Scalar) -> Result<f64, ReadError>;
    /// Where the reader is, for error messages ("line 12").
    fn location(&self) -> String;
    /// Body bytes not read yet, to bound reservations.
    fn remaining(&self) -> usize;
    /// Skips all records of a list-free element whose binary records are
    /// `stride` bytes; on a short body, says how many records were whole.
    fn skip_fixed(&mut self, element: &Element, stride: usize) -> Result<(), usize>;
}

struct AsciiReader<'a> {
    data: &'a [u8],
    pos: usize,
    line: usize,
    /// Line of the token read last.
    token_line: usize,
}

impl<'a> AsciiReader<'a> {
    fn new(data: &'a [u8], first_line: usize) -> Self {
        Self {
            data,
            pos: 0,
            line: first_line,
            token_line: first_line,
        }
    }

    fn token(&mut self) -> Option<&'a [u8]> {
        let data = self.data;
        while let Some(&b) = data.get(self.pos) {
            if !b.is_ascii_whitespace() {
                break;
            }
            self.line += usize::from(b == b'\n');
            self.pos += 1;
        }
        if self.pos == data.len() {
            return None;
        }
        let start = self.pos;
        while data.get(self.pos).is_some_and(|b| !b.is_ascii_whitespace()) {
            self.pos += 1;
        }
        self.token_line = self.line;
        Some(&data[start..self.pos])
    }
}

impl ValueReader for AsciiReader<'_> {
    fn read(&mut self, ty: Scalar) -> Result<f64, ReadError> {
        let token = self.token().ok_or(ReadError::End)?;
        let bad = || ReadError::Bad(String::from_utf8_lossy(token).into_owned());
        let text = std::str::from_utf8(token).map_err(|_| bad())?;
        // Parse `float` as f32 so ASCII and binary files of the same data
        // give bit-identical meshes (no double rounding through f64).
        let value = match ty {
            Scalar::F32 => text.parse::<f32>().map(f64::from).ok(),
            Scalar::F64 => text.parse::<f64>().ok(),
            _ => text.parse::<i64>().ok().map(|v| v as f64),
        };
        value.ok_or_else(bad)
    }

    fn location(&self) -> String {
        format!("line {}", self.token_line)
    }

    fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    fn skip_fixed(&mut self, element: &Element, _stride: usize) -> Result<(), usize> {
        let per_record = element.properties.len();
        for record in 0..element.count {
            for _ in 0..per_record {
                if self.token().is_none() {
                    return Err(record);
                }
            }
        }
        Ok(())
    }
}

struct BinaryReader<'a> {
    data: &'a [u8],
    pos: usize,
    big_endian: bool,
}

impl<'a> BinaryReader<'a> {
    fn new(data: &'a [u8], big_endian: bool) -> Self {
        Self {
            data,
            pos: 0,
            big_endian,
        }
    }

    fn bytes<const N: usize>(&mut self) -> Result<[u8; N], ReadError> {
        let chunk = self
            .data
            .get(self.pos..self.pos + N)
            .ok_or(ReadError::End)?;
        self.pos += N;
        let mut out = [0; N];
        out.copy_from_slice(chunk);
        if self.big_endian {
            out.reverse();
        }
        Ok(out)
    }
}

impl ValueReader for BinaryReader<'_> {
    fn read(&mut self, ty: Scalar) -> Result<f64, ReadError> {
        // `bytes` returns little-endian order whatever the file's order.
        Ok(match ty {
            Scalar::I8 => f64::from(i8::from_le_bytes(self.bytes()?)),
            Scalar::U8 => f64::from(u8::from_le_bytes(self.bytes()?)),
            Scalar::I16 => f64::from(i16::from_le_bytes(self.bytes()?)),
            Scalar::U16 => f64::from(u16::from_le_bytes(self.bytes()?)),
            Scalar::I32 => f64::from(i32::from_le_bytes(self.bytes()?)),
            Scalar::U32 => f64::from(u32::from_le_bytes(self.bytes()?)),
            Scalar::F32 => f64::from(f32::from_le_bytes(self.bytes()?)),
            Scalar::F64 => f64::from_le_bytes(self.bytes()?),
        })
    }

    fn location(&self) -> String {
        format!("body byte {}", self.pos)
    }

    fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    fn skip_fixed(&mut self, element: &Element, stride: usize) -> Result<(), usize> {
        let whole = self.remaining() / stride;
        if whole < element.count {
            self.pos = self.data.len();
            return Err(whole);
        }
        self.pos += element.count * stride;
        Ok(())
    }
}

// ------------------------------------------------------------------ body --

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
fn read_body<R: ValueReader>(
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
    for element in &header.elements {
        let cx = Context { path, element };
        match element.name.as_str() {
            "vertex" => read_vertices(&cx, reader, &mut mesh)?,
            "face" => read_faces(&cx, reader, vertex_count as u32, &mut mesh, warnings)?,
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
    mesh.material_ids = vec![0; mesh.indices.len()];
    Ok(mesh)
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
    mesh: &mut Mesh,
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
    mesh.indices.reserve(cx.reservation(reader));
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
        // Fan around the first corner: exact for convex polygons, which is
        // what PLY writers emit.
        mesh.indices
            .extend(polygon.windows(2).skip(1).map(|w| [polygon[0], w[0], w[1]]));
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
