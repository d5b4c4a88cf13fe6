//! The containers around a glTF document: the GLB chunks, the JSON
//! (checked before the `gltf` crate validates it), buffers from the BIN
//! chunk, `data:` URIs or files next to the glTF file, and the mapping of
//! the `gltf` crate's errors to [`SceneError`]s.

use crate::loaders::guard::guarded;
use crate::loaders::input::read_file;
use crate::{ErrorKind, SceneError, Warning};
use ::gltf::Document;
use ::gltf::json::Root;
use std::path::Path;

/// The extension that stores meshes Draco-compressed; caustic has no
/// decoder for it.
const DRACO: &str = "KHR_draco_mesh_compression";

/// Deserializes the JSON, checks what the `gltf` crate's validation takes
/// for granted, then lets it validate. Returns the document and the
/// warnings about extensions caustic reads only in part.
pub(super) fn parse_document(
    path: &Path,
    json: &[u8],
) -> Result<(Document, Vec<Warning>), SceneError> {
    let root = guarded(path, "glTF JSON", || {
        Root::from_slice(json).map_err(|e| gltf_error(path, ::gltf::Error::Deserialize(e)))
    })?;
    let warnings = check_extensions(path, &root)?;
    check_attribute_accessors(path, &root)?;
    check_draco_accessors(path, &root)?;
    check_images_and_cameras(path, &root)?;
    // gltf-json's validation hooks index arrays with indices that other
    // hooks have not checked yet; `check_attribute_accessors` covers the
    // one known to panic (gltf-json 1.4.1, mesh.rs:151, see
    // tests/data/fuzz-regressions). The guard catches any other.
    // `check_images_and_cameras` covers what the validation lets through
    // but the crate's accessors then unwrap (found by fuzzing).
    let document = guarded(path, "gltf", || {
        Document::from_json(root).map_err(|e| gltf_error(path, e))
    })?;
    Ok((document, warnings))
}

/// Refuses extensions the file requires but caustic cannot read, naming
/// them, and warns about used ones it reads only in part.
fn check_extensions(path: &Path, root: &Root) -> Result<Vec<Warning>, SceneError> {
    let unsupported = |what: String| Err(SceneError::new(ErrorKind::Unsupported, path, what));
    if root.extensions_required.iter().any(|e| e == DRACO) {
        return unsupported(format!(
            "Draco-compressed meshes ({DRACO}) are not supported; convert the file to uncompressed accessors first"
        ));
    }
    let known = ::gltf::json::extensions::ENABLED_EXTENSIONS;
    let missing: Vec<&str> = root
        .extensions_required
        .iter()
        .map(String::as_str)
        .filter(|e| !known.contains(e))
        .collect();
    if !missing.is_empty() {
        return unsupported(format!(
            "the file requires glTF extension(s) caustic does not support: {}",
            missing.join(", ")
        ));
    }
    let mut warnings = Vec::new();
    for used in &root.extensions_used {
        let message = match used.as_str() {
            DRACO => format!(
                "{DRACO} is not supported; reading the uncompressed fallback data where the file has it"
            ),
            "KHR_texture_transform" => {
                "KHR_texture_transform is ignored: textures are mapped without their offset, rotation and scale".to_string()
            }
            _ => continue,
        };
        warnings.push(Warning::new(path, message).at("extensionsUsed"));
    }
    Ok(warnings)
}

/// A file that uses Draco but not as a requirement should carry plain
/// accessors as a fallback; one whose primitive accessor has no data of its
/// own (no buffer view, not sparse) has only the compressed copy. Named
/// here, because the validation would only say "Missing data".
fn check_draco_accessors(path: &Path, root: &Root) -> Result<(), SceneError> {
    if !root.extensions_used.iter().any(|e| e == DRACO) {
        return Ok(());
    }
    let empty = |index: usize| {
        root.accessors
            .get(index)
            .is_some_and(|a| a.buffer_view.is_none() && a.sparse.is_none())
    };
    for (m, mesh) in root.meshes.iter().enumerate() {
        for (p, primitive) in mesh.primitives.iter().enumerate() {
            let accessors = primitive
                .attributes
                .values()
                .chain(primitive.indices.as_ref())
                .map(|i| i.value());
            if let Some(index) = accessors.into_iter().find(|&i| empty(i)) {
                return Err(SceneError::new(
                    ErrorKind::Unsupported,
                    path,
                    format!(
                        "accessor {index} has no uncompressed data: the mesh is Draco-compressed ({DRACO}), which caustic does not decode; convert the file to uncompressed accessors first"
                    ),
                )
                .at(format!("meshes[{m}].primitives[{p}]")));
            }
        }
    }
    Ok(())
}

/// What the validation of gltf 1.4.1 accepts but its accessors unwrap
/// (`Image::source`, `Camera::projection`): an image needs a `uri` or a
/// `bufferView` with a `mimeType`, and a camera the projection object its
/// `type` names.
fn check_images_and_cameras(path: &Path, root: &Root) -> Result<(), SceneError> {
    use ::gltf::json::camera::Type;
    use ::gltf::json::validation::Checked;
    let invalid = |at: String, what: &str| {
        Err(SceneError::new(ErrorKind::Syntax, path, what.to_string()).at(at))
    };
    for (i, image) in root.images.iter().enumerate() {
        match (&image.buffer_view, &image.uri, &image.mime_type) {
            (Some(_), _, None) => {
                return invalid(
                    format!("images[{i}]"),
                    "an image in a buffer view needs a mimeType",
                );
            }
            (None, None, _) => {
                return invalid(
                    format!("images[{i}]"),
                    "an image needs a uri or a bufferView",
                );
            }
            _ => {}
        }
    }
    for (i, camera) in root.cameras.iter().enumerate() {
        let (name, present) = match camera.type_ {
            Checked::Valid(Type::Perspective) => ("perspective", camera.perspective.is_some()),
            Checked::Valid(Type::Orthographic) => ("orthographic", camera.orthographic.is_some()),
            // An unknown type is the validation's to report.
            Checked::Invalid => continue,
        };
        if !present {
            return invalid(
                format!("cameras[{i}]"),
                &format!("a camera of type '{name}' needs a '{name}' object"),
            );
        }
    }
    Ok(())
}

/// Every primitive attribute must name an existing accessor.
fn check_attribute_accessors(path: &Path, root: &Root) -> Result<(), SceneError> {
    let accessors = root.accessors.len();
    for (m, mesh) in root.meshes.iter().enumerate() {
        for (p, primitive) in mesh.primitives.iter().enumerate() {
            for (semantic, index) in &primitive.attributes {
                if index.value() >= accessors {
                    let name = match semantic {
                        ::gltf::json::validation::Checked::Valid(s) => s.to_string(),
                        ::gltf::json::validation::Checked::Invalid => "(unknown)".to_string(),
                    };
                    return Err(SceneError::new(
                        ErrorKind::IndexOutOfRange,
                        path,
                        format!(
                            "attribute {name} refers to accessor {}, but the file has {accessors} accessor(s)",
                            index.value()
                        ),
                    )
                    .at(format!("meshes[{m}].primitives[{p}]")));
                }
            }
        }
    }
    Ok(())
}

/// Splits a GLB file into its JSON chunk and optional BIN chunk, checking
/// every length against the bytes actually present.
pub(super) fn split_glb<'b>(
    path: &Path,
    bytes: &'b [u8],
) -> Result<(&'b [u8], Option<&'b [u8]>), SceneError> {
    let word = |at: usize| {
        bytes
            .get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let truncated = |what: &str| {
        SceneError::new(
            ErrorKind::Truncated,
            path,
            format!("GLB file ends inside {what}"),
        )
    };
    let version = word(4).ok_or_else(|| truncated("the header"))?;
    let length = word(8).ok_or_else(|| truncated("the header"))? as usize;
    if version != 2 {
        return Err(SceneError::new(
            ErrorKind::Unsupported,
            path,
            format!("GLB version {version} (only 2 is supported)"),
        ));
    }
    if length > bytes.len() {
        return Err(SceneError::new(
            ErrorKind::Truncated,
            path,
            format!(
                "GLB header announces {length} bytes, the file has {}",
                bytes.len()
            ),
        ));
    }
    let mut chunks = Vec::new();
    let mut at = 12;
    while at < length {
        let chunk_len = word(at).ok_or_else(|| truncated("a chunk header"))? as usize;
        let chunk_type = word(at + 4).ok_or_else(|| truncated("a chunk header"))?;
        let data = bytes
            .get(at + 8..at + 8 + chunk_len)
            .ok_or_else(|| truncated("a chunk"))?;
        chunks.push((chunk_type, data));
        at += 8 + chunk_len;
    }
    const JSON: u32 = 0x4E4F_534A;
    const BIN: u32 = 0x004E_4942;
    match chunks.first() {
        Some(&(JSON, json)) => Ok((
            json,
            chunks.iter().skip(1).find(|c| c.0 == BIN).map(|c| c.1),
        )),
        _ => Err(SceneError::new(
            ErrorKind::Syntax,
            path,
            "GLB file does not start with a JSON chunk",
        )),
    }
}

pub(super) fn gltf_error(path: &Path, err: ::gltf::Error) -> SceneError {
    use ::gltf::json::validation::Error as Invalid;
    match err {
        ::gltf::Error::Deserialize(e) => SceneError::new(
            ErrorKind::Syntax,
            path,
            format!("invalid glTF JSON: {e}"),
        )
        .at(format!("line {}, column {}", e.line(), e.column())),
        ::gltf::Error::Validation(errors) => {
            let kind = if errors
                .iter()
                .any(|(_, e)| matches!(e, Invalid::IndexOutOfBounds))
            {
                ErrorKind::IndexOutOfRange
            } else if errors
                .iter()
                .all(|(_, e)| matches!(e, Invalid::Unsupported))
            {
                ErrorKind::Unsupported
            } else {
                ErrorKind::Syntax
            };
            let listed: Vec<String> = errors
                .iter()
                .take(4)
                .map(|(p, e)| format!("{p}: {e}"))
                .collect();
            let more = errors.len().saturating_sub(listed.len());
            let tail = if more > 0 {
                format!(" (and {more} more)")
            } else {
                String::new()
            };
            SceneError::new(
                kind,
                path,
                format!("invalid glTF: {}{tail}", listed.join("; ")),
            )
        }
        ::gltf::Error::Io(e) => SceneError::io(path, &e),
        other => SceneError::new(ErrorKind::Syntax, path, format!("invalid glTF: {other}")),
    }
}

/// Reads every buffer: the GLB BIN chunk, `data:` URIs and files relative
/// to the glTF file; a buffer shorter than its `byteLength` is an error.
pub(super) fn load_buffers(
    path: &Path,
    dir: &Path,
    doc: &Document,
    blob: Option<&[u8]>,
) -> Result<Vec<Vec<u8>>, SceneError> {
    let mut buffers = Vec::with_capacity(doc.buffers().len());
    for buffer in doc.buffers() {
        let at = format!("buffer {}", buffer.index());
        let data = match buffer.source() {
            ::gltf::buffer::Source::Bin => blob.map(<[u8]>::to_vec).ok_or_else(|| {
                SceneError::new(
                    ErrorKind::MissingReference,
                    path,
                    "refers to the GLB binary chunk, but there is none",
                )
                .at(&at)
            })?,
            ::gltf::buffer::Source::Uri(uri) => read_uri(dir, uri)
                .map_err(|m| SceneError::new(ErrorKind::MissingReference, path, m).at(&at))?,
        };
        if data.len() < buffer.length() {
            return Err(SceneError::new(
                ErrorKind::Truncated,
                path,
                format!(
                    "byteLength is {}, but the data has {} bytes",
                    buffer.length(),
                    data.len()
                ),
            )
            .at(at));
        }
        buffers.push(data);
    }
    Ok(buffers)
}

/// The bytes of a `data:...;base64,` URI or of a file relative to `dir`
/// (percent-escapes decoded). Other schemes are refused.
pub(super) fn read_uri(dir: &Path, uri: &str) -> Result<Vec<u8>, String> {
    if let Some(rest) = uri.strip_prefix("data:") {
        let Some((_, payload)) = rest.split_once(";base64,") else {
            return Err("only base64 data URIs are supported".into());
        };
        return decode_base64(payload).ok_or_else(|| "data URI is not valid base64".to_string());
    }
    if uri.contains("://") {
        return Err(format!(
            "'{uri}': only relative file names and data URIs are supported"
        ));
    }
    let file = dir.join(percent_decode(uri));
    read_file(&file).map_err(|e| format!("cannot read '{}': {}", file.display(), e.message))
}

/// Decodes `%XX` escapes; a malformed escape is kept as written.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Standard base64 (padding optional, white space ignored); `None` on any
/// other character.
fn decode_base64(text: &str) -> Option<Vec<u8>> {
    let sextet = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        } as u32)
    };
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in text.bytes().filter(|c| !c.is_ascii_whitespace()) {
        if c == b'=' {
            break;
        }
        acc = (acc << 6) | sextet(c)?;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_values() {
        assert_eq!(decode_base64("TWFu").unwrap(), b"Man");
        assert_eq!(decode_base64("TWE=").unwrap(), b"Ma");
        assert_eq!(decode_base64("TQ==").unwrap(), b"M");
        assert_eq!(decode_base64("TQ").unwrap(), b"M");
        assert!(decode_base64("T!Q").is_none());
    }

    #[test]
    fn percent_escapes() {
        assert_eq!(percent_decode("a%20b.bin"), "a b.bin");
        assert_eq!(percent_decode("100%.bin"), "100%.bin");
        assert_eq!(percent_decode("%FF"), "\u{FFFD}");
    }

    #[test]
    fn truncated_glb_is_an_error() {
        let path = Path::new("x.glb");
        for bytes in [
            &b"glTF"[..],
            b"glTF\x02\0\0\0\xff\0\0\0",
            b"glTF\x02\0\0\0\x14\0\0\0\xff\0\0\0JSON",
        ] {
            assert!(split_glb(path, bytes).is_err());
        }
    }
}
