//! The PLY header: format line, elements and their properties.

use crate::SceneError;
use crate::error::ErrorKind;
use std::path::Path;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Format {
    Ascii,
    BinaryLittleEndian,
    BinaryBigEndian,
}

/// A PLY scalar type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Scalar {
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
    pub(super) fn from_name(name: &str) -> Option<Self> {
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
    pub(super) fn size(self) -> usize {
        match self {
            Self::I8 | Self::U8 => 1,
            Self::I16 | Self::U16 => 2,
            Self::I32 | Self::U32 | Self::F32 => 4,
            Self::F64 => 8,
        }
    }

    pub(super) fn is_float(self) -> bool {
        matches!(self, Self::F32 | Self::F64)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum PropertyKind {
    Scalar(Scalar),
    List { count: Scalar, item: Scalar },
}

#[derive(Clone, Debug)]
pub(super) struct Property {
    pub(super) name: String,
    pub(super) kind: PropertyKind,
}

#[derive(Clone, Debug)]
pub(super) struct Element {
    pub(super) name: String,
    pub(super) count: usize,
    pub(super) properties: Vec<Property>,
    /// Header line of the `element` statement, for error messages.
    pub(super) line: usize,
}

impl Element {
    pub(super) fn property(&self, names: &[&str]) -> Option<usize> {
        self.properties
            .iter()
            .position(|p| names.contains(&p.name.as_str()))
    }

    /// Bytes one record takes at least in binary (lists count as empty), so
    /// a lying element count cannot make us reserve more than the file holds.
    pub(super) fn min_record_bytes(&self) -> usize {
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
pub(super) struct Header {
    pub(super) format: Format,
    pub(super) elements: Vec<Element>,
    /// Byte offset of the first byte after the `end_header` line.
    pub(super) body_start: usize,
    /// Number of header lines, so ASCII body lines can be numbered.
    pub(super) line_count: usize,
}

pub(super) fn parse_header(path: &Path, data: &[u8]) -> Result<Header, SceneError> {
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
