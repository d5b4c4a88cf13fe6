//! Helpers of the glTF and Mitsuba tests: a scratch folder per test,
//! fixtures, comparisons.

use caustic_geom::Vec3;
use caustic_scene::{ErrorKind, Scene, SceneError};
use std::fs;
use std::path::{Path, PathBuf};

/// A fresh, empty folder for one test's files.
pub fn scratch(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("loaders")
        .join(test);
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

pub fn write(dir: &Path, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
    let path = dir.join(name);
    fs::write(&path, contents).unwrap();
    path
}

pub fn data(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(relative)
}

pub fn close(a: Vec3, b: Vec3, tolerance: f32) -> bool {
    (a - b).abs().max_element() <= tolerance
}

#[track_caller]
pub fn assert_close(a: Vec3, b: Vec3) {
    assert!(close(a, b, 1e-5), "{a} != {b}");
}

#[track_caller]
pub fn expect_error(result: Result<Scene, SceneError>, kind: ErrorKind) -> SceneError {
    match result {
        Ok(_) => panic!("expected a {kind:?} error, but the scene loaded"),
        Err(e) => {
            assert_eq!(e.kind, kind, "{e}");
            e
        }
    }
}

pub fn has_warning(scene: &Scene, needle: &str) -> bool {
    scene
        .warnings
        .iter()
        .any(|w| w.to_string().contains(needle))
}

pub fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | (b as u32) << (16 - 8 * i));
        for k in 0..=chunk.len() {
            out.push(ALPHABET[(n >> (18 - 6 * k) & 63) as usize] as char);
        }
        out.push_str(&"=".repeat(3 - chunk.len()));
    }
    out
}

/// A deterministic byte generator for the mutation tests.
pub fn lcg(seed: &mut u64) -> u64 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *seed >> 33
}

/// The first mesh's triangle, in world space.
pub fn first_triangle(scene: &Scene) -> [Vec3; 3] {
    let tri = scene.meshes[0].triangle(0);
    [tri.v0, tri.v1, tri.v2]
}
