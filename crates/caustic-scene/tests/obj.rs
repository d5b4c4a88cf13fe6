//! OBJ + MTL loading through `Scene::load`: small fixtures in
//! `tests/data`, one test per failure class, polygon triangulation.

mod common;

use caustic_geom::{Rgb, Vec2, Vec3};
use caustic_scene::{Bsdf, ErrorKind, Scene, Texture};
use common::*;

// ------------------------------------------------------------ OBJ good --

#[test]
fn obj_quad_with_negative_indices_and_polygon_are_fanned() {
    let scene = Scene::load(fixture("obj/quad_polygon.obj")).unwrap();
    assert_eq!(scene.triangle_count(), 5);
    assert!(scene.warnings.is_empty(), "{}", warnings_text(&scene));
    let quad = &scene.meshes[0];
    assert_eq!(quad.name, "quad");
    // -4 -3 -2 -1 after 4 vertices are the 1st..4th: a unit quad of area 1.
    let area: f32 = (0..quad.indices.len())
        .map(|i| quad.triangle(i).cross().length() / 2.0)
        .sum();
    assert!((area - 1.0).abs() < 1e-6);
    let pentagon = &scene.meshes[1];
    assert_eq!(pentagon.indices.len(), 3);
    let first = pentagon.positions[pentagon.indices[0][0] as usize];
    assert!(
        pentagon
            .indices
            .iter()
            .all(|t| pentagon.positions[t[0] as usize] == first)
    );
    // No MTL: everything gets the one default material.
    assert_eq!(scene.materials.len(), 1);
    assert_eq!(scene.materials[0].name, "default");
}

/// Total area of a mesh's triangles, and whether all face along `normal`.
fn area_and_facing(mesh: &caustic_scene::Mesh, normal: Vec3) -> (f32, bool) {
    let tris = (0..mesh.indices.len()).map(|i| mesh.triangle(i));
    let area = tris.clone().map(|t| t.cross().length() / 2.0).sum();
    (area, tris.into_iter().all(|t| t.cross().dot(normal) > 0.0))
}

#[test]
fn obj_concave_polygon_is_ear_clipped_to_its_own_area() {
    // The star's first corner is a tip: fanned from it, the triangles
    // covered 2.08 (the notches next to it and overlaps) for a star of 1.18.
    let scene = Scene::load(fixture("obj/concave_star.obj")).unwrap();
    let star = &scene.meshes[0];
    assert_eq!(star.indices.len(), 8);
    let (area, facing) = area_and_facing(star, Vec3::Z);
    let expected = 10.0 * 0.5 * 0.4 * 36f32.to_radians().sin();
    assert!(
        (area - expected).abs() < 1e-5,
        "area {area}, expected {expected}"
    );
    assert!(facing, "every triangle keeps the polygon's winding");
    assert!(scene.warnings.is_empty(), "{}", warnings_text(&scene));
}

#[test]
fn obj_concave_polygon_facing_away_keeps_its_winding() {
    // The same kind of shape listed clockwise seen from +z (so facing -z),
    // and not starting at a convenient corner: a U.
    let obj = "v 0 0 0\nv 0 2 0\nv 1 2 0\nv 1 1 0\nv 2 1 0\nv 2 2 0\nv 3 2 0\nv 3 0 0\n\
               f 4 5 6 7 8 1 2 3\n";
    let scene = load_text("u.obj", obj).unwrap();
    let (area, facing) = area_and_facing(&scene.meshes[0], -Vec3::Z);
    assert!((area - 5.0).abs() < 1e-5, "area {area}");
    assert!(facing);
}

#[test]
fn obj_non_planar_polygons_warn_once_with_a_count() {
    // Three quads with one corner lifted by a fifth of their size.
    let mut obj = String::new();
    for q in 0..3 {
        let x = 2.0 * q as f32;
        obj += &format!(
            "v {x} 0 0\nv {} 0 0\nv {} 1 0.2\nv {x} 1 0\n",
            x + 1.0,
            x + 1.0
        );
        let b = 4 * q + 1;
        obj += &format!("f {b} {} {} {}\n", b + 1, b + 2, b + 3);
    }
    let scene = load_text("bent.obj", obj).unwrap();
    assert_eq!(scene.triangle_count(), 6);
    assert_eq!(scene.warnings.len(), 1, "{}", warnings_text(&scene));
    let text = warnings_text(&scene);
    assert!(
        text.contains("3 polygon(s) are not planar (up to 3.5% of their size off")
            && text.contains("triangulated in that plane"),
        "{text}"
    );
}

#[test]
fn obj_vertex_colours_are_ignored_with_a_warning() {
    let obj = "v 0 0 0 1 0 0\nv 1 0 0 0 1 0\nv 0 1 0 0 0 1\nv 1 1 0 1\nf 1 2 3\n";
    let scene = load_text("colours.obj", obj).unwrap();
    assert_eq!(scene.warnings.len(), 1, "{}", warnings_text(&scene));
    assert!(
        warnings_text(&scene).contains("vertex colours are ignored (caustic shades with materials; 3 vertices have them, first at line 1)"),
        "{}",
        warnings_text(&scene)
    );
}

#[test]
fn obj_with_crlf_and_tabs_loads_like_plain_file() {
    let dir = materials_dir();
    let plain = std::fs::read_to_string(dir.0.join("materials.obj")).unwrap();
    let windows = plain.replace(' ', "\t").replace('\n', "\r\n");
    let a = Scene::load(dir.0.join("materials.obj")).unwrap();
    let b = Scene::load(dir.write("windows.obj", windows)).unwrap();
    assert_eq!(a.meshes, b.meshes);
    assert_eq!(a.materials, b.materials);
    assert_eq!(b.warnings, []);
}

#[test]
fn obj_mtl_materials_map_to_bsdfs() {
    let scene = load_materials_scene();
    assert!(scene.warnings.is_empty(), "{}", warnings_text(&scene));
    assert_eq!(scene.triangle_count(), 6);
    let material_of = |mesh: &str| {
        let m = scene.meshes.iter().find(|m| m.name == mesh).unwrap();
        &scene.materials[m.material_ids[0] as usize]
    };
    let painted = material_of("textured");
    assert_eq!(
        painted.bsdf,
        Bsdf::Diffuse {
            albedo: Rgb::new(0.8, 0.6, 0.4),
            texture: Some(0)
        }
    );
    assert!(painted.two_sided);
    assert_eq!(material_of("lamp").emission, Rgb::new(17.0, 12.0, 4.0));
    assert!(material_of("lamp").is_emissive());
    assert_eq!(
        material_of("looking_glass").bsdf,
        Bsdf::Mirror {
            reflectance: Rgb::splat(0.9)
        }
    );
    assert_eq!(
        material_of("window").bsdf,
        Bsdf::Dielectric {
            ior: 1.33,
            tint: Rgb::new(0.9, 0.95, 1.0)
        }
    );
    assert_eq!(
        material_of("teapot").bsdf,
        Bsdf::Glossy {
            albedo: Rgb::splat(0.2),
            texture: None,
            specular: Rgb::splat(0.5),
            exponent: 50.0
        }
    );
    // The face before any `usemtl` gets the default grey, appended once.
    let unnamed = material_of("unnamed_object");
    assert_eq!(unnamed.name, "default");
    assert_eq!(
        scene
            .materials
            .iter()
            .filter(|m| m.name == "default")
            .count(),
        1
    );
    // Normals and uvs survive where every corner names them.
    let textured = scene.meshes.iter().find(|m| m.name == "textured").unwrap();
    assert_eq!(textured.normals, vec![Vec3::Z; 3]);
    assert_eq!(textured.uvs, vec![Vec2::ZERO, Vec2::X, Vec2::Y]);
    assert!(
        scene
            .meshes
            .iter()
            .find(|m| m.name == "lamp")
            .unwrap()
            .uvs
            .is_empty()
    );
}

#[test]
fn obj_texture_is_linear_with_row_zero_on_top() {
    let scene = load_materials_scene();
    assert_eq!(scene.textures.len(), 1);
    let t = &scene.textures[0];
    assert_eq!((t.width, t.height), (2, 2));
    let grey = Texture::srgb_to_linear(128);
    assert!((grey - 0.2158).abs() < 1e-3);
    assert_close(t.texels[0], Rgb::X);
    assert_close(t.texels[1], Rgb::splat(grey));
    assert_close(t.texels[2], Rgb::Z);
    assert_close(t.texels[3], Rgb::ONE);
}

#[test]
fn obj_textures_are_shared_between_materials() {
    let dir = materials_dir();
    dir.write(
        "two.mtl",
        "newmtl a\nmap_Kd checker.png\nnewmtl b\nKd 0.1 0.1 0.1\nmap_Kd checker.png\n",
    );
    let obj = dir.write(
        "two.obj",
        "mtllib two.mtl\nv 0 0 0\nv 1 0 0\nv 0 1 0\nusemtl a\nf 1 2 3\nusemtl b\nf 1 2 3\n",
    );
    let scene = Scene::load(obj).unwrap();
    assert_eq!(scene.textures.len(), 1);
    for m in &scene.materials {
        assert!(
            matches!(
                m.bsdf,
                Bsdf::Diffuse {
                    texture: Some(0),
                    ..
                }
            ),
            "{m:?}"
        );
    }
}

// --------------------------------------------------- OBJ with problems --

#[test]
fn obj_missing_mtl_warns_and_uses_default_material() {
    let scene = Scene::load(fixture("obj/missing_mtl.obj")).unwrap();
    assert_eq!(scene.warnings.len(), 1, "{}", warnings_text(&scene));
    let warning = scene.warnings[0].to_string();
    assert!(warning.contains("not_there.mtl"), "{warning}");
    assert_eq!(scene.materials.len(), 1);
    assert_eq!(scene.materials[0].name, "default");
}

#[test]
fn obj_missing_texture_warns_and_keeps_material_untextured() {
    let scene = Scene::load(fixture("obj/missing_texture.obj")).unwrap();
    assert_eq!(scene.warnings.len(), 1, "{}", warnings_text(&scene));
    assert!(scene.warnings[0].to_string().contains("not_there.png"));
    assert_eq!(scene.materials[0].name, "wood");
    assert_eq!(
        scene.materials[0].bsdf,
        Bsdf::Diffuse {
            albedo: Rgb::new(0.5, 0.3, 0.1),
            texture: None
        }
    );
}

#[test]
fn obj_undefined_material_warns() {
    let dir = TempDir::new();
    dir.write("lib.mtl", "newmtl known\nKd 1 0 0\n");
    let obj = dir.write(
        "u.obj",
        "mtllib lib.mtl\nv 0 0 0\nv 1 0 0\nv 0 1 0\nusemtl unknown\nf 1 2 3\n",
    );
    let scene = Scene::load(obj).unwrap();
    let text = warnings_text(&scene);
    assert!(
        text.contains("'unknown'") && text.contains("line 5"),
        "{text}"
    );
    assert_eq!(scene.materials.last().unwrap().name, "default");
}

#[test]
fn obj_non_numeric_coordinate_names_line() {
    let result = load_text("bad.obj", "v 0 0 0\nv 1 0 0\nv a b c\nf 1 2 3\n");
    assert_error(result, ErrorKind::Syntax, "bad.obj", "line 3");
}

#[test]
fn obj_too_few_coordinates_names_line() {
    let result = load_text("short.obj", "# comment\nv 0 0 0\nv 1 2\n");
    let err = assert_error(result, ErrorKind::Syntax, "short.obj", "line 3");
    assert!(err.message.contains("found 2"), "{err}");
}

#[test]
fn obj_bad_face_index_names_line() {
    let result = load_text("face.obj", "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 x 3\n");
    assert_error(result, ErrorKind::Syntax, "face.obj", "line 4");
}

#[test]
fn obj_face_index_out_of_range_names_line() {
    for face in [
        "f 1 2 4",
        "f 1 2 -4",
        "f 0 1 2",
        "f 1/2 2/1 3/1",
        "f 1//2 2//1 3//1",
    ] {
        let text = format!("v 0 0 0\nv 1 0 0\nv 0 1 0\nvt 0 0\nvn 0 0 1\n{face}\n");
        assert_error(
            load_text("range.obj", text),
            ErrorKind::IndexOutOfRange,
            "range.obj",
            "line 6",
        );
    }
    // Indices far beyond anything an integer type holds are a syntax error.
    let huge = "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 99999999999999999999999\n";
    assert_error(
        load_text("huge.obj", huge),
        ErrorKind::Syntax,
        "huge.obj",
        "line 4",
    );
}

#[test]
fn obj_nan_coordinate_skips_triangle_with_warning() {
    let text = "v 0 0 0\nv 1 0 0\nv 0 1 0\nv nan 0 0\nf 1 2 3\nf 1 2 4\n";
    let scene = load_text("nan.obj", text).unwrap();
    assert_eq!(scene.triangle_count(), 1);
    assert!(
        warnings_text(&scene).contains("NaN"),
        "{}",
        warnings_text(&scene)
    );
}

#[test]
fn obj_zero_area_triangle_skipped_with_warning() {
    let text = "v 0 0 0\nv 1 0 0\nv 0 1 0\nv 2 0 0\nf 1 2 3\nf 1 2 4\n";
    let scene = load_text("flat.obj", text).unwrap();
    assert_eq!(scene.triangle_count(), 1);
    assert!(
        warnings_text(&scene).contains("zero-area"),
        "{}",
        warnings_text(&scene)
    );
}

#[test]
fn obj_without_faces_is_empty() {
    let result = load_text("empty.obj", "v 0 0 0\nv 1 0 0\nv 0 1 0\nl 1 2\ng nothing\n");
    assert_error(result, ErrorKind::Empty, "empty.obj", "no triangles");
}

#[test]
fn obj_malformed_mtl_names_mtl_line() {
    let dir = TempDir::new();
    dir.write("bad.mtl", "newmtl a\nKd 1 0 0\nKs 1 1\n");
    let obj = dir.write(
        "m.obj",
        "mtllib bad.mtl\nv 0 0 0\nv 1 0 0\nv 0 1 0\nusemtl a\nf 1 2 3\n",
    );
    assert_error(Scene::load(obj), ErrorKind::Syntax, "bad.mtl", "line 3");
}

#[test]
fn missing_file_is_io_error() {
    let dir = TempDir::new();
    let result = Scene::load(dir.0.join("nowhere.obj"));
    assert_error(result, ErrorKind::Io, "nowhere.obj", "no such file");
}

#[test]
fn unknown_extension_is_unsupported_format() {
    let result = load_text("scene.stl", "solid nothing\n");
    assert_error(result, ErrorKind::UnsupportedFormat, "scene.stl", ".stl");
}
