//! `--device`: the facade's [`caustic::Device`] opened, and the one line
//! that says which device a run took.

use anyhow::Result;
use caustic::{Backend, Device};
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether the device line was printed: it says the same thing every
/// time (and, when `auto` falls back, carries the driver-install hint), so
/// a run prints it once at most.
static SAID: AtomicBool = AtomicBool::new(false);

/// Opens the backend `choice` names. Only an explicit `cuda` request fails
/// when no GPU opens (or the build has no CUDA support); `auto` falls back
/// to the CPU. Prints the device line unless `-q`.
pub fn open(choice: Device) -> Result<Backend> {
    let backend = choice.resolve()?;
    say(&backend);
    Ok(backend)
}

/// Prints `backend`'s device line, once per run and not under `-q`.
pub fn say(backend: &Backend) {
    if !crate::notes::quiet() && !SAID.swap(true, Ordering::Relaxed) {
        eprintln!("{}", backend.note());
    }
}
