//! Compiled modules kept on disk between runs.
//!
//! NVRTC takes a few hundred milliseconds to seconds per module, and a
//! render uses a dozen modules: without a cache, every `caustic render
//! --device cuda` spends seconds compiling before its first frame. The
//! cubins are stored under a key that covers everything the machine code
//! depends on (the module's source and every header it may include, the
//! options, the architecture, NVRTC's version, this crate's version), so a
//! changed kernel, header or compiler is a miss, never a stale hit.
//!
//! Where: `$CAUSTIC_KERNEL_CACHE` (`off`, `0` or empty: no disk cache),
//! else `$XDG_CACHE_HOME/caustic/kernels`, else `~/.cache/caustic/kernels`.
//! A file is written to a temporary name and renamed into place, so
//! concurrent processes never read half a file; one that cannot be read
//! back whole (truncated, another format, another key) is a miss and is
//! replaced. Failing to read or write the cache never fails a compile.

use sha1::{Digest, Sha1};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::kernel::Module;

/// The first bytes of a cache file (the format's version is its last digit).
const MAGIC: &[u8; 16] = b"caustic-cubin-1\n";

/// The folder of the disk cache, or `None` when it is off or no home is
/// known.
pub fn cache_dir() -> Option<PathBuf> {
    if let Some(setting) = std::env::var_os("CAUSTIC_KERNEL_CACHE") {
        let text = setting.to_string_lossy();
        if matches!(text.trim(), "" | "0" | "off" | "false") {
            return None;
        }
        return Some(PathBuf::from(setting));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("caustic").join("kernels"))
}

/// The hex digest naming `module` compiled with `options` by NVRTC
/// `nvrtc` (major, minor).
pub fn key(module: &Module, options: &[String], nvrtc: (i32, i32)) -> String {
    let mut hash = Sha1::new();
    let mut field = |bytes: &[u8]| {
        // Lengths first, so that no two field lists hash alike.
        hash.update((bytes.len() as u64).to_le_bytes());
        hash.update(bytes);
    };
    field(env!("CARGO_PKG_VERSION").as_bytes());
    field(format!("nvrtc {}.{}", nvrtc.0, nvrtc.1).as_bytes());
    field(module.name.as_bytes());
    field(module.source.as_bytes());
    for (name, text) in module.headers() {
        field(name.as_bytes());
        field(text.as_bytes());
    }
    for option in options {
        field(option.as_bytes());
    }
    hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The file of `key` in `dir`: the module's file name for a reader, then
/// the key.
fn file(dir: &Path, module: &Module, key: &str) -> PathBuf {
    dir.join(format!("{}-{key}.cubin", module.file_name()))
}

/// The cubin and log stored for `key`, if a whole file is there.
pub fn load(dir: &Path, module: &Module, key: &str) -> Option<(Vec<u8>, String)> {
    let bytes = std::fs::read(file(dir, module, key)).ok()?;
    decode(&bytes, key)
}

/// Stores the cubin and log for `key` (best effort: errors are ignored,
/// the next run compiles again).
pub fn store(dir: &Path, module: &Module, key: &str, cubin: &[u8], log: &str) {
    let _ = try_store(dir, module, key, cubin, log);
}

fn try_store(
    dir: &Path,
    module: &Module,
    key: &str,
    cubin: &[u8],
    log: &str,
) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let target = file(dir, module, key);
    let temporary = target.with_extension(format!("tmp{}", std::process::id()));
    let mut out = std::fs::File::create(&temporary)?;
    out.write_all(&encode(key, cubin, log))?;
    out.sync_all()?;
    drop(out);
    std::fs::rename(&temporary, &target).inspect_err(|_| {
        let _ = std::fs::remove_file(&temporary);
    })
}

/// `MAGIC`, the key, then the cubin and the log, each after its length.
fn encode(key: &str, cubin: &[u8], log: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(MAGIC.len() + key.len() + cubin.len() + log.len() + 24);
    out.extend_from_slice(MAGIC);
    for part in [key.as_bytes(), cubin, log.as_bytes()] {
        out.extend_from_slice(&(part.len() as u64).to_le_bytes());
        out.extend_from_slice(part);
    }
    out
}

fn decode(bytes: &[u8], key: &str) -> Option<(Vec<u8>, String)> {
    let mut rest = bytes.strip_prefix(MAGIC.as_slice())?;
    let mut part = || {
        let (length, tail) = rest.split_first_chunk::<8>()?;
        let length = usize::try_from(u64::from_le_bytes(*length)).ok()?;
        let (part, tail) = (tail.get(..length)?, tail.get(length..)?);
        rest = tail;
        Some(part)
    };
    let stored_key = part()?;
    let cubin = part()?.to_vec();
    let log = String::from_utf8(part()?.to_vec()).ok()?;
    (stored_key == key.as_bytes() && !cubin.is_empty() && rest.is_empty()).then_some((cubin, log))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_follows_everything_the_code_depends_on() {
        static A: Module = Module {
            name: "x/src/a.cu",
            source: "__global__ void k() {}",
            headers: &[],
            kernels: &["k"],
        };
        static B: Module = Module {
            source: "__global__ void k() { }",
            ..A
        };
        let options = vec!["--gpu-architecture=sm_90".to_owned()];
        let base = key(&A, &options, (13, 0));
        assert_eq!(base, key(&A, &options, (13, 0)), "stable");
        assert_eq!(base.len(), 40, "a SHA-1 in hex");
        assert_ne!(base, key(&B, &options, (13, 0)), "the source");
        assert_ne!(base, key(&A, &["-G".to_owned()], (13, 0)), "the options");
        assert_ne!(base, key(&A, &options, (13, 1)), "the compiler");
    }

    #[test]
    fn a_file_reads_back_only_whole_and_under_its_key() {
        let bytes = encode("abc", b"\x7fELF cubin", "a warning");
        assert_eq!(
            decode(&bytes, "abc"),
            Some((b"\x7fELF cubin".to_vec(), "a warning".to_owned()))
        );
        assert_eq!(decode(&bytes, "abd"), None, "another key");
        for cut in [0, 5, MAGIC.len() + 3, bytes.len() - 1] {
            assert_eq!(decode(&bytes[..cut], "abc"), None, "truncated at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(decode(&longer, "abc"), None, "trailing bytes");
        assert_eq!(
            decode(&encode("abc", b"", ""), "abc"),
            None,
            "no machine code"
        );
    }
}
