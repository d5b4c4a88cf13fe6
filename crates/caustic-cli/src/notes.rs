//! What the CLI tells the user besides its results: notes (what it chose
//! for them, such as the device or an automatic camera), which `-q`
//! silences, and warnings, which always print.

use std::sync::atomic::{AtomicBool, Ordering};

/// Set once by a subcommand's `-q`; read wherever a note is printed, so
/// that the scene, camera and device code need no flag of their own.
static QUIET: AtomicBool = AtomicBool::new(false);

pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

pub fn quiet() -> bool {
    QUIET.load(Ordering::Relaxed)
}

/// `note: …` on stderr, unless `-q`.
pub fn note(message: impl std::fmt::Display) {
    if !quiet() {
        eprintln!("note: {message}");
    }
}

/// `warning: …` on stderr, also under `-q`: something is probably wrong.
pub fn warn(message: impl std::fmt::Display) {
    eprintln!("warning: {message}");
}
