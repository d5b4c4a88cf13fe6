//! The last line of defence around third-party parsers.
//!
//! Each loader checks what it hands its parsing crate (tobj, gltf,
//! roxmltree), so that known panics in those crates cannot be reached. But
//! a parser is code we do not control: a panic inside it must still end as
//! a [`SceneError`] for the caller, never as a crashed process (the CLI
//! loads user files; a library user may load files from the network). So
//! every call into a parsing dependency runs under `catch_unwind`, and a
//! panic becomes an `Internal` error naming the crate and its message.
//!
//! Fuzzing still sees such panics: its panic hook aborts before the unwind
//! reaches this guard, so the campaign reports them as crashes to fix.

use crate::{ErrorKind, SceneError};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

/// Runs `call` (a call into the parsing crate `dependency`) and turns a
/// panic into an error.
///
/// `AssertUnwindSafe` is sound here because the closures only read their
/// input and build new values: on a panic nothing half-updated is observed
/// afterwards, the partial result is dropped with the unwind.
pub(crate) fn guarded<T>(
    path: &Path,
    dependency: &str,
    call: impl FnOnce() -> Result<T, SceneError>,
) -> Result<T, SceneError> {
    catch_unwind(AssertUnwindSafe(call)).unwrap_or_else(|payload| {
        let reason = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".to_string());
        Err(SceneError::new(
            ErrorKind::Internal,
            path,
            format!(
                "the {dependency} parser failed on this file ({reason}); the file is malformed or uses a feature caustic does not read"
            ),
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_an_internal_error_with_its_message() {
        let err = guarded::<()>(Path::new("x.gltf"), "gltf", || {
            panic!("index 7 out of range")
        })
        .unwrap_err();
        assert_eq!(err.kind, ErrorKind::Internal);
        assert!(err.message.contains("gltf parser failed"), "{err}");
        assert!(err.message.contains("index 7 out of range"), "{err}");
    }

    #[test]
    fn results_pass_through() {
        assert_eq!(guarded(Path::new("x"), "tobj", || Ok(3)).unwrap(), 3);
    }
}
