//! `--device`: opening the backend, and the one line that says which.

use anyhow::Result;
use caustic_gpu::{Device, Gpu};
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether the device line was printed: it says the same thing every
/// time (and, when `auto` falls back, carries the driver-install hint), so
/// a run prints it once at most.
static SAID: AtomicBool = AtomicBool::new(false);

/// Opens the backend `choice` names: `Some(gpu)` for CUDA, `None` for the
/// CPU. Only an explicit `cuda` request fails when no GPU opens; `auto`
/// falls back to the CPU. Prints the device line unless `-q`.
pub fn open(choice: Device) -> Result<Option<Gpu>> {
    let selection = caustic_gpu::select(choice)?;
    say(&selection.message);
    Ok(selection.gpu)
}

/// The CPU because the settings have no GPU version; `why` says which.
pub fn cpu_because(why: &str) {
    say(&format!("device: CPU (auto; {why})"));
}

fn say(line: &str) {
    if !crate::notes::quiet() && !SAID.swap(true, Ordering::Relaxed) {
        eprintln!("{line}");
    }
}

/// The name a summary line gives the backend.
pub fn backend_name(gpu: Option<&Gpu>) -> String {
    match gpu {
        Some(gpu) => gpu.info().name.clone(),
        None => format!("{} CPU threads", rayon::current_num_threads()),
    }
}
