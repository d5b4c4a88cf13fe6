//! Numbered mesh sequences (`frame_####.obj`): one frame per file, in
//! numeric order, topology free to change.

mod common;

use caustic_scene::{ErrorKind, Scene};
use common::*;

fn obj_triangles(n: usize, dx: f32) -> String {
    let mut text = String::new();
    for i in 0..n {
        let x = dx + i as f32;
        text += &format!("v {x} 0 0\nv {} 0 0\nv {x} 1 0\n", x + 1.0);
    }
    for i in 0..n {
        let b = 3 * i + 1;
        text += &format!("f {b} {} {}\n", b + 1, b + 2);
    }
    text
}

#[test]
fn numbered_files_load_as_frames_in_numeric_order() {
    let dir = TempDir::new();
    dir.write("frame_0010.obj", obj_triangles(3, 10.0));
    dir.write("frame_0002.obj", obj_triangles(2, 2.0));
    dir.write("frame_0001.obj", obj_triangles(1, 1.0));
    dir.write("frame_01.obj", obj_triangles(1, 0.0)); // too few digits
    dir.write("other_0003.obj", obj_triangles(1, 0.0));
    let pattern = dir.0.join("frame_####.obj");
    assert!(Scene::is_sequence_pattern(&pattern));
    let scene = Scene::load(&pattern).unwrap();
    let clock = scene.timeline().unwrap();
    assert_eq!(clock.frames, 3);
    assert!((clock.fps().unwrap() - caustic_scene::DEFAULT_FPS).abs() < 1e-3);
    let animation = scene.animation.as_ref().unwrap();
    assert!(!animation.fixed_topology());
    let counts: Vec<usize> = (0..3).map(|f| scene.at_frame(f).triangle_count()).collect();
    assert_eq!(counts, [1, 2, 3]);
    assert_eq!(scene.triangle_count(), 1);
    let last = scene.at_frame(2);
    assert_eq!(last.bounds().min.x, 10.0);
    // Posing back to the start restores frame 0.
    assert_eq!(last.at_frame(0).meshes, scene.meshes);
}

#[test]
fn ply_frames_and_a_pattern_matching_nothing() {
    let dir = TempDir::new();
    let ply = "ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\nproperty float y\nproperty float z\nelement face 1\nproperty list uchar int vertex_indices\nend_header\n0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n";
    dir.write("f1.ply", ply);
    dir.write("f2.ply", ply);
    let scene = Scene::load(dir.0.join("f#.ply")).unwrap();
    assert_eq!(scene.timeline().unwrap().frames, 2);
    assert_error(
        Scene::load(dir.0.join("g###.ply")),
        ErrorKind::Io,
        "g###.ply",
        "no files match",
    );
}
