//! The Mitsuba 3 XML loader: the reference scenes of `refs/` when present,
//! the feature fixture in `tests/data/mitsuba`, sensors written inline, and
//! malformed input (errors, never panics).

mod common;

use caustic_geom::{Rgb, Vec3};
use caustic_scene::{Bsdf, Camera, ErrorKind, FilmSize, FovAxis, Light, Scene, SceneError};
use common::scratch::*;
use std::fs;

// ---------------------------------------------------------------------------
// Mitsuba: the reference scenes

/// The white, red and green reflectances of `refs/README.md`.
const WHITE: Rgb = Rgb::new(0.885809, 0.698859, 0.666422);
const RED: Rgb = Rgb::new(0.570068, 0.0430135, 0.0443706);
const GREEN: Rgb = Rgb::new(0.105421, 0.37798, 0.076425);
const LIGHT: Rgb = Rgb::new(18.387, 13.9873, 6.75357);

fn reference_camera() -> Camera {
    Camera {
        eye: Vec3::new(0.0, 0.0, 3.9),
        target: Vec3::ZERO,
        up: Vec3::Y,
        fov_deg: 39.3077,
        fov_axis: FovAxis::X,
    }
}

/// Checks what both reference scenes share: room materials, the light,
/// one-sidedness, flat normals, camera and film.
fn check_reference_room(scene: &Scene) {
    let material_of = |mesh: &str| {
        let mesh = scene.meshes.iter().find(|m| m.name == mesh).unwrap();
        &scene.materials[mesh.material_ids[0] as usize]
    };
    let diffuse = |albedo| Bsdf::Diffuse {
        albedo,
        texture: None,
    };
    for (mesh, albedo) in [
        ("floor", WHITE),
        ("ceiling", WHITE),
        ("back", WHITE),
        ("red_wall", RED),
        ("green_wall", GREEN),
        ("light", WHITE),
    ] {
        let material = material_of(mesh);
        assert_eq!(material.bsdf, diffuse(albedo), "{mesh}");
        assert!(!material.two_sided, "{mesh} must be one-sided");
    }
    assert_eq!(material_of("light").emission, LIGHT);
    assert_eq!(material_of("floor").emission, Rgb::ZERO);
    assert_eq!(scene.emissive_materials().count(), 1);
    // The light faces down.
    let light = scene.meshes.iter().find(|m| m.name == "light").unwrap();
    for i in 0..light.indices.len() {
        assert_close(light.triangle(i).normal().unwrap(), -Vec3::Y);
    }
    assert!(
        scene.meshes.iter().all(|m| m.normals.is_empty()),
        "face_normals"
    );
    let camera = scene.camera.unwrap();
    assert_eq!(camera, reference_camera());
    // Image right is world +x (the green wall).
    assert_close(camera.frame().1, Vec3::X);
    assert_eq!(
        scene.film,
        Some(FilmSize {
            width: 512,
            height: 512
        })
    );
    assert!(scene.lights.is_empty());
    assert_eq!(scene.background, Rgb::ZERO);
    assert!(scene.warnings.is_empty(), "{:?}", scene.warnings);
}

#[test]
fn mitsuba_reference_cornell_box() {
    let Some(path) = caustic_scene::data_dirs::ref_file("cornell-box/cornell-box.xml") else {
        return;
    };
    let scene = Scene::load(path).unwrap();
    assert_eq!(scene.meshes.len(), 8);
    assert_eq!(scene.triangle_count(), 36);
    check_reference_room(&scene);
    let bounds = scene.bounds();
    assert_close(bounds.min, Vec3::new(-1.0, -1.01, -1.0));
    assert_close(bounds.max, Vec3::ONE);
}

#[test]
fn mitsuba_reference_cornell_caustics() {
    let Some(path) = caustic_scene::data_dirs::ref_file("cornell-caustics/cornell-caustics.xml")
    else {
        return;
    };
    let scene = Scene::load(path).unwrap();
    assert_eq!(scene.triangle_count(), 12 + 2 * 20480);
    check_reference_room(&scene);
    let material_of = |mesh: &str| {
        let mesh = scene.meshes.iter().find(|m| m.name == mesh).unwrap();
        &scene.materials[mesh.material_ids[0] as usize]
    };
    assert_eq!(
        material_of("mirror_sphere").bsdf,
        Bsdf::Mirror {
            reflectance: Rgb::ONE
        }
    );
    assert_eq!(
        material_of("glass_sphere").bsdf,
        Bsdf::Dielectric {
            ior: 1.5,
            tint: Rgb::ONE
        }
    );
}

// ---------------------------------------------------------------------------
// Mitsuba: the feature fixture (tests/data/mitsuba/features.xml)

fn features() -> Scene {
    Scene::load(data("mitsuba/features.xml")).unwrap()
}

#[test]
fn mitsuba_defaults_and_bsdfs() {
    let scene = features();
    let names: Vec<&str> = scene.materials.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(
        names[..3],
        ["paint", "paper", "water"],
        "materials in order of first use"
    );
    let [paint, paper, water] = [0, 1, 2].map(|i| &scene.materials[i]);
    assert_eq!(
        paint.bsdf,
        Bsdf::Diffuse {
            albedo: Rgb::new(0.2, 0.4, 0.6),
            texture: None
        }
    );
    assert!(!paint.two_sided);
    assert_eq!(
        paper.bsdf,
        Bsdf::Diffuse {
            albedo: Rgb::splat(0.5),
            texture: None
        }
    );
    assert!(paper.two_sided);
    assert_eq!(
        water.bsdf,
        Bsdf::Dielectric {
            ior: 1.333,
            tint: Rgb::ONE
        }
    );
    let by_name = |name: &str| scene.materials.iter().find(|m| m.name == name).unwrap();
    assert_eq!(
        by_name("chrome").bsdf,
        Bsdf::Mirror {
            reflectance: Rgb::splat(0.9)
        }
    );
    assert!(matches!(by_name("plastic").bsdf, Bsdf::Glossy { .. }));
    assert!(has_warning(&scene, "roughplastic approximated"));
    // The unknown BSDF becomes the default grey diffuse, with a warning.
    assert_eq!(
        by_name("fur").bsdf,
        Bsdf::Diffuse {
            albedo: Rgb::splat(0.5),
            texture: None
        }
    );
    assert!(has_warning(&scene, "<bsdf type=\"hair\"> at line 44"));
}

#[test]
fn mitsuba_transforms_compose_in_document_order() {
    let scene = features();
    // translate x=1 then scale 2: [-1, 1]^2 -> [0, 4] x [-2, 2].
    let quad = &scene.meshes[0];
    let bounds = quad.bounds();
    assert_close(bounds.min, Vec3::new(0.0, -2.0, 0.0));
    assert_close(bounds.max, Vec3::new(4.0, 2.0, 0.0));
    assert_close(quad.triangle(0).normal().unwrap(), Vec3::Z);
    // scale 0.5, rotate 45° about y, then translate: a unit cube turned
    // by 45° about y, centred at (0, -1, 0).
    let cube = &scene.meshes[1];
    let b = cube.bounds();
    let half_diagonal = 0.5 * 2f32.sqrt();
    assert_close(b.min, Vec3::new(-half_diagonal, -1.5, -half_diagonal));
    assert_close(b.max, Vec3::new(half_diagonal, -0.5, half_diagonal));
    for i in 0..cube.indices.len() {
        let tri = cube.triangle(i);
        let outward = tri.centroid() - Vec3::new(0.0, -1.0, 0.0);
        assert!(tri.cross().dot(outward) > 0.0, "cube triangle {i} faces in");
    }
}

#[test]
fn mitsuba_sphere_is_an_icosphere_with_radial_normals() {
    let scene = features();
    let sphere = &scene.meshes[2];
    assert_eq!(sphere.indices.len(), 20480);
    let center = Vec3::new(0.0, 1.0, 0.0);
    for (p, n) in sphere.positions.iter().zip(&sphere.normals) {
        assert!(((*p - center).length() - 0.5).abs() < 1e-6);
        assert_close(*n, (*p - center).normalize());
    }
}

#[test]
fn mitsuba_area_emitter_gets_its_own_one_sided_material() {
    let scene = features();
    let light = &scene.meshes[3];
    let material = &scene.materials[light.material_ids[0] as usize];
    assert_eq!(material.emission, Rgb::splat(5.0));
    assert!(!material.two_sided);
    assert_eq!(
        material.bsdf,
        Bsdf::Diffuse {
            albedo: Rgb::splat(0.5),
            texture: None
        }
    );
    assert_eq!(scene.emissive_materials().count(), 1);
    for i in 0..light.indices.len() {
        let tri = light.triangle(i);
        assert_close(tri.normal().unwrap(), -Vec3::Y);
        assert!((tri.centroid().y - 2.0).abs() < 1e-6);
    }
}

#[test]
fn mitsuba_obj_normals_follow_face_normals_flag() {
    let scene = features();
    let smooth = &scene.meshes[4];
    assert_eq!(smooth.name, "tent");
    assert_eq!(smooth.normals.len(), smooth.positions.len());
    // (1, 0, 0) belongs to the flat triangle only.
    let corner = smooth.positions.iter().position(|&p| p == Vec3::X).unwrap();
    assert_close(smooth.normals[corner], Vec3::Z);
    let shared = smooth
        .positions
        .iter()
        .position(|&p| p == Vec3::ZERO)
        .unwrap();
    assert!(smooth.normals[shared].dot(Vec3::Z) < 0.99, "blended normal");
    let flat = &scene.meshes[5];
    assert!(flat.normals.is_empty(), "face_normals drops vertex normals");
    // flip_normals reverses the winding: the flat triangle now faces -z.
    let tri = (0..2)
        .map(|i| flat.triangle(i))
        .find(|t| t.v0.z == 0.0 && t.v1.z == 0.0 && t.v2.z == 0.0)
        .unwrap();
    assert_close(tri.normal().unwrap(), -Vec3::Z);
}

#[test]
fn mitsuba_unknown_plugins_are_skipped_with_warnings() {
    let scene = features();
    assert_eq!(scene.meshes.len(), 7, "the nurbs shape is skipped");
    assert!(has_warning(&scene, "<shape type=\"nurbs\"> at line 93"));
    assert!(has_warning(&scene, "<emitter type=\"envmap\">"));
}

#[test]
fn mitsuba_emitters_and_sensor() {
    let scene = features();
    assert_eq!(
        scene.lights,
        [
            Light::Point {
                position: Vec3::new(0.0, 3.0, 0.0),
                intensity: Rgb::splat(10.0)
            },
            Light::Directional {
                direction: -Vec3::Y,
                irradiance: Rgb::splat(2.0)
            },
        ]
    );
    assert_eq!(scene.background, Rgb::new(0.1, 0.2, 0.3));
    // fov_axis "smaller" on a 200 x 100 film is the vertical axis.
    let camera = scene.camera.unwrap();
    assert_eq!(camera.fov_axis, FovAxis::Y);
    assert_eq!(camera.fov_deg, 60.0);
    assert_close(camera.eye, Vec3::new(0.0, 0.0, 5.0));
    assert_close(camera.target, Vec3::ZERO);
    assert_eq!(
        scene.film,
        Some(FilmSize {
            width: 200,
            height: 100
        })
    );
}

// ---------------------------------------------------------------------------
// Mitsuba: sensors written inline

fn scene_with(body: &str) -> String {
    format!("<scene version=\"3.0.0\">\n{body}\n<shape type=\"rectangle\"/>\n</scene>\n")
}

fn load_xml(test: &str, xml: &str) -> Result<Scene, SceneError> {
    let dir = scratch(test);
    Scene::load(write(&dir, "scene.xml", xml))
}

#[test]
fn mitsuba_sensor_matrix_gives_the_same_camera_as_lookat() {
    // The reference camera's lookat as a row-major matrix: columns are
    // left = (-1, 0, 0), up = (0, 1, 0), forward = (0, 0, -1), origin.
    let xml = scene_with(
        r#"<sensor type="perspective">
             <float name="fov" value="39.3077"/>
             <transform name="to_world">
               <matrix value="-1 0 0 0  0 1 0 0  0 0 -1 3.9  0 0 0 1"/>
             </transform>
           </sensor>"#,
    );
    let camera = load_xml("mitsuba_sensor_matrix", &xml)
        .unwrap()
        .camera
        .unwrap();
    let reference = reference_camera();
    assert_close(camera.eye, reference.eye);
    assert_close(camera.up, reference.up);
    assert_close(camera.frame().0, -Vec3::Z);
    assert_close(camera.frame().1, Vec3::X);
    assert_eq!(camera.fov_axis, FovAxis::X);
}

#[test]
fn mitsuba_diagonal_fov_is_converted_to_horizontal() {
    let xml = scene_with(
        r#"<sensor type="perspective">
             <float name="fov" value="90"/>
             <string name="fov_axis" value="diagonal"/>
             <film type="hdrfilm">
               <integer name="width" value="300"/>
               <integer name="height" value="400"/>
             </film>
           </sensor>"#,
    );
    let camera = load_xml("mitsuba_diagonal", &xml).unwrap().camera.unwrap();
    assert_eq!(camera.fov_axis, FovAxis::X);
    // tan(fov_x / 2) = tan(45°) * 300 / 500.
    let expected = 2.0 * 0.6f32.atan().to_degrees();
    assert!((camera.fov_deg - expected).abs() < 1e-4);
}

#[test]
fn mitsuba_ply_shape_and_spot_light() {
    let dir = scratch("mitsuba_ply_spot");
    let ply = "ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\n\
               property float y\nproperty float z\nelement face 1\n\
               property list uchar int vertex_indices\nend_header\n\
               0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n";
    write(&dir, "tri.ply", ply);
    let xml = r#"<scene version="3.0.0">
        <shape type="ply">
            <string name="filename" value="tri.ply"/>
            <boolean name="face_normals" value="true"/>
            <transform name="to_world"><translate z="-2"/></transform>
        </shape>
        <emitter type="spot">
            <transform name="to_world">
                <lookat origin="0, 5, 0" target="0, 0, 0" up="0, 0, 1"/>
            </transform>
            <float name="cutoff_angle" value="30"/>
            <rgb name="intensity" value="7"/>
        </emitter>
    </scene>"#;
    let scene = Scene::load(write(&dir, "scene.xml", xml)).unwrap();
    let [a, b, c] = first_triangle(&scene);
    assert_close(a, Vec3::new(0.0, 0.0, -2.0));
    assert_close(b, Vec3::new(1.0, 0.0, -2.0));
    assert_close(c, Vec3::new(0.0, 1.0, -2.0));
    let Light::Spot {
        position,
        direction,
        intensity,
        cos_falloff_start,
        cos_total_width,
    } = scene.lights[0]
    else {
        panic!("{:?}", scene.lights)
    };
    assert_close(position, Vec3::new(0.0, 5.0, 0.0));
    assert_close(direction, -Vec3::Y);
    assert_close(intensity, Rgb::splat(7.0));
    assert!((cos_total_width - 30f32.to_radians().cos()).abs() < 1e-6);
    assert!((cos_falloff_start - 22.5f32.to_radians().cos()).abs() < 1e-6);
}

// ---------------------------------------------------------------------------
// Mitsuba: malformed input

#[test]
fn mitsuba_malformed_xml_is_a_syntax_error_with_line_and_column() {
    let e = expect_error(
        load_xml(
            "mitsuba_bad_xml",
            "<scene version=\"3.0.0\">\n  <shape type=\"cube\">\n</scene>\n",
        ),
        ErrorKind::Syntax,
    );
    let location = e.location.unwrap();
    assert!(location.starts_with("line 3, column"), "{location}");
}

#[test]
fn mitsuba_missing_mesh_file_names_file_and_line() {
    let xml = scene_with(
        r#"<shape type="obj">
             <string name="filename" value="nowhere.obj"/>
           </shape>"#,
    );
    let e = expect_error(
        load_xml("mitsuba_missing_mesh", &xml),
        ErrorKind::MissingReference,
    );
    assert!(e.message.contains("nowhere.obj"), "{e}");
    assert_eq!(
        e.location.as_deref(),
        Some("<shape type=\"obj\"> at line 2")
    );
}

#[test]
fn mitsuba_unknown_ref_is_an_error() {
    let xml = scene_with(r#"<shape type="cube"><ref id="nothing"/></shape>"#);
    let e = expect_error(
        load_xml("mitsuba_unknown_ref", &xml),
        ErrorKind::MissingReference,
    );
    assert!(e.message.contains("nothing"), "{e}");
}

#[test]
fn mitsuba_bad_numbers_are_invalid_values_with_a_line() {
    for (test, body) in [
        (
            "mitsuba_bad_float",
            r#"<bsdf type="diffuse" id="a"><rgb name="reflectance" value="0.5, zero, 1"/></bsdf><shape type="cube"><ref id="a"/></shape>"#,
        ),
        (
            "mitsuba_nan",
            r#"<shape type="sphere"><float name="radius" value="nan"/></shape>"#,
        ),
        (
            "mitsuba_negative_radius",
            r#"<shape type="sphere"><float name="radius" value="-1"/></shape>"#,
        ),
        (
            "mitsuba_short_matrix",
            r#"<shape type="cube"><transform name="to_world"><matrix value="1 2 3"/></transform></shape>"#,
        ),
        (
            "mitsuba_undefined_default",
            r#"<shape type="cube"><float name="x" value="$nope"/></shape>"#,
        ),
    ] {
        let e = expect_error(load_xml(test, &scene_with(body)), ErrorKind::InvalidValue);
        assert!(e.location.unwrap().contains("at line 2"), "{test}");
    }
}

#[test]
fn mitsuba_wrong_root_and_empty_scene_are_errors() {
    expect_error(load_xml("mitsuba_root", "<world/>"), ErrorKind::Syntax);
    expect_error(
        load_xml("mitsuba_empty", "<scene version=\"3.0.0\"/>"),
        ErrorKind::Empty,
    );
}

#[test]
fn mitsuba_truncated_xml_never_panics() {
    let text = fs::read_to_string(data("mitsuba/features.xml")).unwrap();
    let dir = scratch("mitsuba_truncated");
    fs::copy(data("mitsuba/tent.obj"), dir.join("tent.obj")).unwrap();
    for cut in (0..text.len()).step_by(53) {
        let _ = Scene::load(write(&dir, "t.xml", &text[..cut]));
    }
}
