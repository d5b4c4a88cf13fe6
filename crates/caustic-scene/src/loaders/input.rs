//! Reading the files a scene consists of: only regular files (a device or
//! FIFO named by a scene, `mtllib /dev/zero` say, would never end), and
//! text checked for the UTF-16 encoding some Windows tools write, which no
//! loader reads and which otherwise fails with a confusing parse error.

use crate::{ErrorKind, SceneError};
use std::path::Path;

/// The bytes of `path`, which must be a regular file.
pub(crate) fn read_file(path: &Path) -> Result<Vec<u8>, SceneError> {
    let meta = std::fs::metadata(path).map_err(|e| SceneError::io(path, &e))?;
    if !meta.is_file() {
        return Err(SceneError::new(
            ErrorKind::Io,
            path,
            "not a regular file (a directory, device or pipe)",
        ));
    }
    std::fs::read(path).map_err(|e| SceneError::io(path, &e))
}

/// Reads a text file, refusing UTF-16.
pub(crate) fn read_text_bytes(path: &Path) -> Result<Vec<u8>, SceneError> {
    let bytes = read_file(path)?;
    reject_utf16(path, &bytes)?;
    Ok(bytes)
}

/// Errors on text that starts with a UTF-16 byte-order mark, or whose first
/// characters are ASCII interleaved with NUL bytes (UTF-16 without a mark).
/// Binary formats start with ASCII magic (`ply`, `glTF`), so this never
/// fires on them.
pub(crate) fn reject_utf16(path: &Path, bytes: &[u8]) -> Result<(), SceneError> {
    if looks_like_utf16(bytes) {
        return Err(SceneError::new(
            ErrorKind::Syntax,
            path,
            "UTF-16 text is not supported; convert the file to UTF-8",
        ));
    }
    Ok(())
}

fn looks_like_utf16(bytes: &[u8]) -> bool {
    if bytes.starts_with(&[0xFF, 0xFE]) || bytes.starts_with(&[0xFE, 0xFF]) {
        return true;
    }
    // Four characters are enough: text never has NUL bytes, and UTF-16 of
    // ASCII has one in every pair.
    let head = &bytes[..bytes.len().min(8)];
    if head.len() < 8 {
        return false;
    }
    let pairs = head.chunks_exact(2);
    let le = pairs.clone().all(|p| p[0] != 0 && p[1] == 0);
    let be = pairs.clone().all(|p| p[0] == 0 && p[1] != 0);
    le || be
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utf16le(text: &str) -> Vec<u8> {
        text.encode_utf16().flat_map(u16::to_le_bytes).collect()
    }

    fn utf16be(text: &str) -> Vec<u8> {
        text.encode_utf16().flat_map(u16::to_be_bytes).collect()
    }

    #[test]
    fn utf16_with_and_without_a_mark_is_recognised() {
        assert!(looks_like_utf16(&utf16le("\u{feff}v 0 0 0\n")));
        assert!(looks_like_utf16(&utf16be("\u{feff}v 0 0 0\n")));
        assert!(looks_like_utf16(&utf16le("v 0 0 0\n")));
        assert!(looks_like_utf16(&utf16be("<scene>")));
    }

    #[test]
    fn utf8_and_binary_magic_are_not_utf16() {
        assert!(!looks_like_utf16(b"v 0 0 0\nv 1 0 0\n"));
        assert!(!looks_like_utf16("\u{feff}v 0 0 0\n".as_bytes()));
        assert!(!looks_like_utf16(b"ply\nformat binary_little_endian 1.0\n"));
        assert!(!looks_like_utf16(b"glTF\x02\0\0\0\x10\0\0\0"));
        assert!(!looks_like_utf16(b"v\0"));
    }

    #[test]
    fn devices_are_not_read() {
        let err = read_file(Path::new("/dev/zero")).unwrap_err();
        assert!(err.message.contains("not a regular file"), "{err}");
    }
}
