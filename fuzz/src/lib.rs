//! What every fuzz target shares: writing the input as scene files into a
//! scratch folder of this process, loading them through the public entry
//! point (`Scene::load`, so extension dispatch, file reading and `finish`
//! are fuzzed too), and checking what a successful load promises.

use caustic_scene::{Scene, SceneError};
use std::path::PathBuf;
use std::sync::OnceLock;

/// A folder of this process's own (parallel fuzzing jobs must not share
/// files), in memory where the system has `/dev/shm`.
pub fn scratch() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let shm = PathBuf::from("/dev/shm");
        let base = if shm.is_dir() {
            shm
        } else {
            std::env::temp_dir()
        };
        let dir = base.join(format!("caustic-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("cannot create the scratch folder");
        dir
    })
}

/// Writes `files` (name, bytes) into the scratch folder and loads the
/// first one. Files from earlier inputs are removed first so that no input
/// sees another's.
pub fn load(files: &[(&str, &[u8])]) -> Result<Scene, SceneError> {
    let dir = scratch();
    for (name, bytes) in files {
        std::fs::write(dir.join(name), bytes).expect("cannot write to the scratch folder");
    }
    let result = Scene::load(dir.join(files[0].0));
    for (name, _) in files {
        let _ = std::fs::remove_file(dir.join(name));
    }
    result
}

/// Checks a load's result: an error must say something; a scene must hold
/// what `Scene::load` promises (indices, attributes and material ids in
/// range, at least one triangle, finite bounds).
pub fn check(result: Result<Scene, SceneError>) {
    let scene = match result {
        Ok(scene) => scene,
        Err(e) => {
            assert!(!e.message.is_empty(), "an error without a message: {e:?}");
            return;
        }
    };
    assert!(
        scene.triangle_count() > 0,
        "a scene without triangles loaded"
    );
    assert!(
        !scene.materials.is_empty(),
        "a scene without materials loaded"
    );
    for mesh in &scene.meshes {
        let n = mesh.positions.len();
        assert!(mesh.normals.is_empty() || mesh.normals.len() == n);
        assert!(mesh.uvs.is_empty() || mesh.uvs.len() == n);
        assert_eq!(mesh.material_ids.len(), mesh.indices.len());
        assert!(mesh.indices.iter().flatten().all(|&i| (i as usize) < n));
        assert!(
            mesh.material_ids
                .iter()
                .all(|&m| (m as usize) < scene.materials.len())
        );
    }
    let bounds = scene.bounds();
    assert!(
        bounds.min.is_finite() && bounds.max.is_finite(),
        "{bounds:?}"
    );
}
