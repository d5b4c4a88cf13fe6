//! AFF (BART's Animated File Format) from small inline files: statements,
//! transform groups, keyframes, the clock, animated triangles, meshes,
//! includes, and malformed or unknown input.

mod common;

use caustic_geom::{Rgb, Vec3};
use caustic_scene::{Bsdf, ErrorKind, Light, Scene};
use common::*;
use proptest::prelude::*;

const VIEW: &str = "v\nfrom 0 0 5\nat 0 0 0\nup 0 1 0\nangle 45\nhither 0.1\nresolution 64 48\n";

/// A triangle near the origin.
const TRIANGLE: &str = "p 3\n0 0 0\n1 0 0\n0 1 0\n";

fn close(a: Vec3, b: Vec3) -> bool {
    (a - b).length() < 1e-4
}

#[test]
fn a_still_scene() {
    let text = format!(
        "{VIEW}b 0.1 0.2 0.3\nl 0 0 10 1 1 1\nfm 0.1 0.1 0.1  0.5 0.4 0.3  0.2 0.2 0.2  10 0 1\np 4\n0 0 0\n1 0 0\n1 1 0\n0 1 0\n"
    );
    let scene = load_text("still.aff", text).unwrap();
    assert!(!scene.is_animated());
    assert_eq!(scene.triangle_count(), 2);
    assert_eq!(scene.background, Rgb::new(0.1, 0.2, 0.3));
    let film = scene.film.unwrap();
    assert_eq!((film.width, film.height), (64, 48));
    let camera = scene.camera.unwrap();
    assert_eq!(
        (camera.eye, camera.fov_deg),
        (Vec3::new(0.0, 0.0, 5.0), 45.0)
    );
    match scene.materials[0].bsdf {
        Bsdf::Glossy {
            albedo, exponent, ..
        } => {
            assert_close(albedo, Rgb::new(0.5, 0.4, 0.3));
            assert_eq!(exponent, 40.0);
        }
        other => panic!("{other:?}"),
    }
    // Colour 1 at distance r from the scene's centre: intensity r².
    let Light::Point { intensity, .. } = scene.lights[0] else {
        panic!()
    };
    let r2 = Vec3::new(0.0, 0.0, 10.0).distance_squared(scene.bounds().center());
    assert_close(intensity, Rgb::splat(r2));
}

/// `x` group with translation keys, `a` clock: the mesh follows the
/// spline through its keys; the static geometry stays.
#[test]
fn keyframed_group_moves_its_geometry() {
    let text = format!(
        "{VIEW}{TRIANGLE}x ball\n{{\n{TRIANGLE}}}\nk ball\n{{\n transl 4\n -1 0 0 0 0 0 0\n 0 1 0 0 0 0 0\n 1 3 0 0 0 0 0\n 2 4 0 0 0 0 0\n}}\na 0 1 11\n"
    );
    let scene = load_text("moving.aff", text).unwrap();
    let clock = scene.timeline().unwrap();
    assert_eq!((clock.start, clock.end, clock.frames), (0.0, 1.0, 11));
    let animation = scene.animation.as_ref().unwrap();
    assert_eq!(animation.moving_meshes(), [1]);
    assert_eq!(animation.animated_objects(), 1);
    assert!(close(
        scene.meshes[1].positions[0],
        Vec3::new(1.0, 0.0, 0.0)
    ));
    let end = scene.at_frame(10);
    assert!(close(end.meshes[1].positions[0], Vec3::new(3.0, 0.0, 0.0)));
    assert_eq!(end.meshes[0], scene.meshes[0]);
    // Catmull-Rom halfway: (-0 + 9*1 + 9*3 - 4) / 16 = 2.
    let mid = scene.at_time(0.5);
    assert!(close(mid.meshes[1].positions[1], Vec3::new(3.0, 0.0, 0.0)));
    // Posing in place gives the same as a snapshot.
    let mut in_place = scene.clone();
    in_place.set_time(0.5);
    assert_eq!(in_place.meshes, mid.meshes);
}

/// Nested groups compose: a static scale inside a keyed rotation.
#[test]
fn nested_groups_compose_t_r_s() {
    let text = format!(
        "{VIEW}x spin\n{{\nxs 2 2 2  0 0 1 0  1 0 0\n{{\n{TRIANGLE}}}\n}}\nk spin\n{{\n rot 4\n -1 0 0 1 0 0 0 0\n 0 0 0 1 0 0 0 0\n 1 0 0 1 90 0 0 0\n 2 0 0 1 180 0 0 0\n}}\na 0 1 2\n"
    );
    let scene = load_text("nested.aff", text).unwrap();
    // Vertex (1,0,0): scaled to (2,0,0), moved to (3,0,0), turned 90° about z.
    let end = scene.at_time(1.0);
    assert!(
        close(end.meshes[0].positions[1], Vec3::new(0.0, 3.0, 0.0)),
        "{:?}",
        end.meshes[0].positions
    );
    assert!(close(
        scene.meshes[0].positions[1],
        Vec3::new(3.0, 0.0, 0.0)
    ));
}

#[test]
fn camera_keyframes_move_the_camera() {
    let text = format!(
        "{VIEW}{TRIANGLE}k camera\n{{\n transl 4\n -1 0 0 9 0 0 0\n 0 0 0 8 0 0 0\n 1 0 0 6 0 0 0\n 2 0 0 5 0 0 0\n rot 4\n -1 0 1 0 0 0 0 0\n 0 0 1 0 0 0 0 0\n 1 0 1 0 90 0 0 0\n 2 0 1 0 90 0 0 0\n}}\na 0 1 5\n"
    );
    let scene = load_text("camera.aff", text).unwrap();
    let animation = scene.animation.as_ref().unwrap();
    assert!(animation.animates_camera());
    let start = scene.camera.unwrap();
    assert!(close(start.eye, Vec3::new(0.0, 0.0, 8.0)));
    let (forward, _, up) = start.frame();
    assert!(close(forward, -Vec3::Z) && close(up, Vec3::Y));
    let end = scene.at_time(1.0).camera.unwrap();
    assert!(close(end.eye, Vec3::new(0.0, 0.0, 6.0)));
    // 90° about +y turns the view direction -z to -x.
    assert!(close(end.frame().0, -Vec3::X), "{:?}", end.frame());
}

#[test]
fn animated_lights_follow_their_keys() {
    let text = format!(
        "{VIEW}{TRIANGLE}la lamp 0 5 0 1 1 1\nk lamp\n{{\n transl 4\n -1 0 5 0 0 0 0\n 0 0 5 0 0 0 0\n 1 2 5 0 0 0 0\n 2 4 5 0 0 0 0\n}}\na 0 1 3\n"
    );
    let scene = load_text("lamp.aff", text).unwrap();
    let at = |t: f32| match scene.at_time(t).lights[0] {
        Light::Point { position, .. } => position,
        _ => panic!(),
    };
    assert!(close(at(0.0), Vec3::new(0.0, 5.0, 0.0)));
    assert!(close(at(1.0), Vec3::new(2.0, 5.0, 0.0)));
}

/// `tpa`: linear between its keys, clamped outside them.
#[test]
fn animated_triangles_interpolate_linearly() {
    let text = format!(
        "{VIEW}tpa 2\n0\n0 0 0 0 0 1\n1 0 0 0 0 1\n0 1 0 0 0 1\n2\n0 0 2 0 0 1\n1 0 2 0 0 1\n0 1 2 0 0 1\na 0 4 5\n"
    );
    let scene = load_text("tpa.aff", text).unwrap();
    let z = |t: f32| scene.at_time(t).meshes[0].positions[0].z;
    assert_eq!((z(0.0), z(1.0), z(2.0), z(3.5)), (0.0, 1.0, 2.0, 2.0));
    assert_eq!(scene.animation.as_ref().unwrap().animated_objects(), 1);
}

/// `m`: per triangle vertex, normal and uv indices in that order; a
/// missing texture warns and leaves the surface untextured.
#[test]
fn meshes_with_separate_indices() {
    let text = format!(
        "{VIEW}m vertices 3\n0 0 0\n1 0 0\n0 1 0\nnormals 2\n0 0 1\n0 0 -1\ntexturecoords 2 nowhere.ppm\n0 0\n1 1\ntriangles 1\n2 1 0  1 0 0  1 1 0\n"
    );
    let scene = load_text("mesh.aff", text).unwrap();
    let mesh = &scene.meshes[0];
    assert_eq!(mesh.positions.len(), 3);
    let [a, _, _] = mesh.indices[0];
    assert_eq!(mesh.positions[a as usize], Vec3::new(0.0, 1.0, 0.0));
    assert_eq!(mesh.normals[a as usize], -Vec3::Z);
    assert_eq!(mesh.uvs[a as usize], caustic_geom::Vec2::ONE);
    assert_warns(&scene, "texture 'nowhere.ppm' not found");
}

#[test]
fn textures_load_from_ppm_beside_the_file() {
    let dir = TempDir::new();
    dir.write("red.ppm", b"P3\n1 1\n255\n255 0 0\n");
    let path = dir.write(
        "tex.aff",
        format!("{VIEW}tt red.ppm\n0 0 0 0 0\n1 0 0 1 0\n0 1 0 0 1\n"),
    );
    let scene = Scene::load(path).unwrap();
    assert_eq!(scene.textures.len(), 1);
    assert!(matches!(
        scene.materials[0].bsdf,
        Bsdf::Diffuse {
            texture: Some(0),
            ..
        }
    ));
}

#[test]
fn includes_are_relative_to_the_including_file() {
    let dir = TempDir::new();
    std::fs::create_dir_all(dir.0.join("parts")).unwrap();
    dir.write("parts/a.aff", "i 0 b.aff\n");
    dir.write("parts/b.aff", TRIANGLE);
    dir.write("parts/skipped.aff", "this would not parse {");
    let top = dir.write(
        "top.aff",
        format!("{VIEW}i 0 parts/a.aff\ni 1 parts/skipped.aff\n"),
    );
    let scene = Scene::load(top).unwrap();
    assert_eq!(scene.triangle_count(), 1);
    assert_eq!(scene.meshes[0].name, "b");
}

#[test]
fn unknown_statements_warn_with_file_and_line() {
    let text = format!("{VIEW}{TRIANGLE}zz 1 2 3\nanim {{ 1 2 }}\nzz 4\n{TRIANGLE}");
    let scene = load_text("unknown.aff", text).unwrap();
    assert_eq!(scene.triangle_count(), 2);
    assert_warns(
        &scene,
        "unknown.aff: line 12: unknown statement 'zz'; skipped (×2)",
    );
    assert_warns(&scene, "line 13: unknown statement 'anim'");
}

#[test]
fn malformed_statements_are_errors_with_file_and_line() {
    let cases: &[(&str, ErrorKind, &str)] = &[
        ("p 3\n0 0 0\n1 x 0\n0 1 0\n", ErrorKind::Syntax, "line 3"),
        ("p 5\n0 0 0\n", ErrorKind::Truncated, "line 1"),
        ("p 99999999999\n", ErrorKind::InvalidValue, "line 1"),
        (
            "xs 1 1 1 0 0 1 0 0 0 0\n{\n",
            ErrorKind::Truncated,
            "line 1",
        ),
        ("}\n", ErrorKind::Syntax, "line 1"),
        ("i 0 missing.aff\n", ErrorKind::MissingReference, "line 1"),
        (
            "k a\n{\n transl 2\n 0 0 0 0 0 0 0\n 1 0 0 0 0 0 0\n}\n",
            ErrorKind::InvalidValue,
            "line 3",
        ),
        ("a 5 1 10\n", ErrorKind::InvalidValue, "line 1"),
        (
            "v\nfrom 0 0 0\nat 0 0 0\nup 0 1 0\nangle 45\n",
            ErrorKind::InvalidValue,
            "line 2",
        ),
        (
            "m vertices 1\n0 0 0\ntriangles 1\n0 0 5\n",
            ErrorKind::IndexOutOfRange,
            "line 4",
        ),
        ("tpa 1\n0\n0 0 0 0 0 1\n", ErrorKind::Truncated, "line 1"),
        (
            "p 3\n0 0 0\n1 inf 0\n0 1 0\n",
            ErrorKind::InvalidValue,
            "line 3",
        ),
    ];
    for (text, kind, line) in cases {
        let err = assert_error(load_text("bad.aff", text), *kind, "bad.aff", line);
        assert!(!err.message.is_empty());
    }
}

#[test]
fn a_file_that_includes_itself_fails() {
    let dir = TempDir::new();
    let path = dir.write("loop.aff", format!("{TRIANGLE}i 0 loop.aff\n"));
    assert_error(
        Scene::load(path),
        ErrorKind::InvalidValue,
        "loop.aff",
        "include",
    );
}

/// Words that make statements, and numbers, in any order: never a panic.
fn word() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "v",
            "from",
            "at",
            "up",
            "angle",
            "resolution",
            "b",
            "l",
            "la",
            "am",
            "a",
            "f",
            "fm",
            "c",
            "s",
            "p",
            "pp",
            "tt",
            "ttp",
            "tpa",
            "m",
            "vertices",
            "normals",
            "texturecoords",
            "triangles",
            "i",
            "d",
            "x",
            "xs",
            "{",
            "}",
            "k",
            "transl",
            "rot",
            "scale",
            "visibility",
            "%",
            "#",
            "\n",
            "nan",
            "-inf",
            "1e40",
        ])
        .prop_map(str::to_string),
        (-3i32..6).prop_map(|n| n.to_string()),
        (-2.0f32..2.0).prop_map(|x| format!("{x:.2}")),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn token_soup_never_panics(words in prop::collection::vec(word(), 0..120)) {
        let text = format!("{VIEW}{TRIANGLE}{}", words.join(" "));
        if let Ok(scene) = load_text("soup.aff", text) {
            for t in [-1.0, 0.0, 0.5, 3.0] {
                let posed = scene.at_time(t);
                prop_assert_eq!(posed.triangle_count(), scene.triangle_count());
            }
        }
    }
}
