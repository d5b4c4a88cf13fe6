//! Helpers shared by the loader tests (each test file is its own crate and
//! uses a part of them).
#![allow(dead_code)]

pub mod scratch;

use caustic_geom::Rgb;
use caustic_scene::{ErrorKind, Scene, SceneError};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

pub fn fixture(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(relative)
}

/// A fresh folder under the system temp dir, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new() -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("caustic-loader-test-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    pub fn write(&self, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, contents).unwrap();
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Loads `contents` written to a temp file called `name`.
pub fn load_text(name: &str, contents: impl AsRef<[u8]>) -> Result<Scene, SceneError> {
    let dir = TempDir::new();
    Scene::load(dir.write(name, contents))
}

/// Asserts the error class and that the message names the file and `place`.
pub fn assert_error(
    result: Result<Scene, SceneError>,
    kind: ErrorKind,
    file: &str,
    place: &str,
) -> SceneError {
    let err = result.expect_err("loading should fail");
    let text = err.to_string();
    assert_eq!(err.kind, kind, "{text}");
    assert!(text.contains(file), "'{text}' should name {file}");
    assert!(text.contains(place), "'{text}' should name {place}");
    err
}

/// The `materials.obj` fixture and its MTL copied into a temp folder, with
/// the 2x2 texture the MTL names (top row red and sRGB grey 128, bottom row
/// blue and white), made here because the repository ignores `*.png`.
pub fn materials_dir() -> TempDir {
    let dir = TempDir::new();
    for file in ["materials.obj", "materials.mtl"] {
        std::fs::copy(fixture(&format!("obj/{file}")), dir.0.join(file)).unwrap();
    }
    let texels = vec![255, 0, 0, 128, 128, 128, 0, 0, 255, 255, 255, 255];
    image::RgbImage::from_raw(2, 2, texels)
        .unwrap()
        .save(dir.0.join("checker.png"))
        .unwrap();
    dir
}

pub fn load_materials_scene() -> Scene {
    let dir = materials_dir();
    Scene::load(dir.0.join("materials.obj")).unwrap()
}

pub fn warnings_text(scene: &Scene) -> String {
    scene
        .warnings
        .iter()
        .map(|w| w.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

pub fn assert_close(a: Rgb, b: Rgb) {
    assert!((a - b).abs().max_element() < 1e-6, "{a} != {b}");
}

/// Asserts that some warning contains `needle`.
pub fn assert_warns(scene: &Scene, needle: &str) {
    let text = warnings_text(scene);
    assert!(
        text.contains(needle),
        "no warning with '{needle}' in:\n{text}"
    );
}

/// A small PLY: 5 vertices with normals and uvs, a quad and a triangle
/// (with an extra per-face property) and an unknown element with a list.
pub struct PlyData {
    pub vertices: Vec<[f32; 8]>,
    pub faces: Vec<Vec<i32>>,
}

impl PlyData {
    pub fn sample() -> Self {
        Self {
            vertices: vec![
                [0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0],
                [1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0],
                [1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0],
                [0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 1.0],
                [0.1, 0.2, 0.3, 0.6, 0.0, 0.8, 0.25, 0.75],
            ],
            faces: vec![vec![0, 1, 2, 3], vec![2, 4, 3]],
        }
    }

    pub fn header(&self, format: &str) -> String {
        format!(
            "ply\nformat {format} 1.0\ncomment test data\n\
             element vertex {}\nproperty float x\nproperty float y\nproperty float z\n\
             property double nx\nproperty double ny\nproperty double nz\n\
             property float u\nproperty float v\n\
             element face {}\nproperty list uchar int vertex_indices\nproperty short flags\n\
             element strip 1\nproperty list int uint vertex_indices\n\
             end_header\n",
            self.vertices.len(),
            self.faces.len()
        )
    }

    pub fn ascii(&self) -> Vec<u8> {
        let mut out = self.header("ascii");
        for v in &self.vertices {
            let words: Vec<String> = v.iter().map(|x| x.to_string()).collect();
            out += &format!("{}\n", words.join(" "));
        }
        for f in &self.faces {
            let words: Vec<String> = f.iter().map(|x| x.to_string()).collect();
            out += &format!("{} {} -7\n", f.len(), words.join(" "));
        }
        out += "3 0 1 2\n";
        out.into_bytes()
    }

    pub fn binary(&self, big_endian: bool) -> Vec<u8> {
        let format = if big_endian {
            "binary_big_endian"
        } else {
            "binary_little_endian"
        };
        let mut out = self.header(format).into_bytes();
        fn put<const N: usize>(out: &mut Vec<u8>, mut bytes: [u8; N], big_endian: bool) {
            if big_endian {
                bytes.reverse();
            }
            out.extend_from_slice(&bytes);
        }
        for v in &self.vertices {
            for (i, &x) in v.iter().enumerate() {
                if (3..6).contains(&i) {
                    put(&mut out, f64::from(x).to_le_bytes(), big_endian);
                } else {
                    put(&mut out, x.to_le_bytes(), big_endian);
                }
            }
        }
        for f in &self.faces {
            out.push(f.len() as u8);
            for &i in f {
                put(&mut out, i.to_le_bytes(), big_endian);
            }
            put(&mut out, (-7i16).to_le_bytes(), big_endian);
        }
        put(&mut out, 3i32.to_le_bytes(), big_endian);
        for i in 0u32..3 {
            put(&mut out, i.to_le_bytes(), big_endian);
        }
        out
    }
}
