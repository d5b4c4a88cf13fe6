//! The Cornell boxes of `refs/`, written out in code so the tests, the
//! benchmarks and the CLI have them without any file.
//!
//! The numbers are those of `refs/cornell-box/*.obj` (Mitsuba's
//! `cornell_box()` exported to 6 decimals) and of `refs/README.md`: the same
//! vertices in the same order, the same one-sided diffuse materials, the
//! same one-sided area light, camera and film. The spheres of
//! `cornell-caustics` are level-5 icospheres, generated vertex for vertex as
//! in the reference OBJ files.

use super::icosphere::{SPHERE_LEVEL, icosphere};
use crate::animation::graph::{GraphNode, KeyedTransform, Local};
use crate::animation::spline::{TcbKey, VectorSpline};
use crate::animation::{Animation, Deform, MeshTrack};
use crate::{Bsdf, Camera, DEFAULT_FPS, FilmSize, FovAxis, Material, Mesh, Scene, Timeline};
use caustic_geom::{Rgb, Vec3};
use glam::DVec3;
use std::sync::Arc;

const WHITE: Rgb = Rgb::new(0.885809, 0.698859, 0.666422);
const RED: Rgb = Rgb::new(0.570068, 0.0430135, 0.0443706);
const GREEN: Rgb = Rgb::new(0.105421, 0.37798, 0.076425);
const LIGHT_RADIANCE: Rgb = Rgb::new(18.387, 13.9873, 6.75357);

/// Material indices, in the order the Mitsuba loader creates them for the
/// reference XML files (first use), so both give the same `Scene`.
const M_WHITE: u32 = 0;
const M_RED: u32 = 1;
const M_GREEN: u32 = 2;
const M_LIGHT: u32 = 3;
const M_MIRROR: u32 = 4;
const M_GLASS: u32 = 5;

/// Sphere centres and radius of `cornell-caustics` (README).
const MIRROR_CENTER: Vec3 = Vec3::new(-0.42, -0.67, -0.35);
const GLASS_CENTER: Vec3 = Vec3::new(0.45, -0.67, 0.40);
const SPHERE_RADIUS: f32 = 0.33;

/// Corners of the five room quads and the light, counter-clockwise seen from
/// the side the normal points to (into the room; the light faces down).
const QUADS: [(&str, [[f32; 3]; 4], u32); 6] = [
    (
        "floor",
        [
            [-1., -1., 1.],
            [1., -1., 1.],
            [1., -1., -1.],
            [-1., -1., -1.],
        ],
        M_WHITE,
    ),
    (
        "ceiling",
        [[-1., 1., -1.], [1., 1., -1.], [1., 1., 1.], [-1., 1., 1.]],
        M_WHITE,
    ),
    (
        "back",
        [
            [-1., -1., -1.],
            [1., -1., -1.],
            [1., 1., -1.],
            [-1., 1., -1.],
        ],
        M_WHITE,
    ),
    (
        "red_wall",
        [
            [-1., -1., 1.],
            [-1., -1., -1.],
            [-1., 1., -1.],
            [-1., 1., 1.],
        ],
        M_RED,
    ),
    (
        "green_wall",
        [[1., -1., -1.], [1., -1., 1.], [1., 1., 1.], [1., 1., -1.]],
        M_GREEN,
    ),
    (
        "light",
        [
            [-0.23, 0.99, -0.18],
            [0.23, 0.99, -0.18],
            [0.23, 0.99, 0.2],
            [-0.23, 0.99, 0.2],
        ],
        M_LIGHT,
    ),
];

/// The boxes of `cornell-box`: footprint corners `(x, z)` in the order of
/// the reference OBJ, bottom and top `y`.
const LARGE_BOX: ([[f32; 2]; 4], f32, f32) = (
    [
        [-0.520961, 0.098859],
        [-0.708859, -0.470961],
        [-0.139039, -0.658859],
        [0.048859, -0.089039],
    ],
    -1.01,
    0.21,
);
const SMALL_BOX: ([[f32; 2]; 4], f32, f32) = (
    [
        [-0.039603, 0.57918],
        [0.13582, 0.005397],
        [0.709603, 0.18082],
        [0.53418, 0.754603],
    ],
    -1.0,
    -0.4,
);

/// A mesh of quads `(q0, q1, q2, q3)`, each split as `(0, 1, 2), (2, 3, 0)`
/// like the reference OBJ files.
fn quads_mesh(name: &str, corners: Vec<Vec3>, material: u32) -> Mesh {
    let quads = corners.len() as u32 / 4;
    let indices: Vec<[u32; 3]> = (0..quads)
        .flat_map(|q| {
            let b = 4 * q;
            [[b, b + 1, b + 2], [b + 2, b + 3, b]]
        })
        .collect();
    Mesh {
        name: name.to_string(),
        positions: corners,
        normals: Vec::new(),
        uvs: Vec::new(),
        material_ids: vec![material; indices.len()],
        indices,
    }
}

/// A box given by its footprint `a, b, c, d` and its height range, with the
/// six faces in the reference OBJ's order, wound outwards.
fn box_mesh(name: &str, (footprint, y0, y1): ([[f32; 2]; 4], f32, f32)) -> Mesh {
    let at = |corner: usize, y: f32| Vec3::new(footprint[corner][0], y, footprint[corner][1]);
    let (a, b, c, d) = (0, 1, 2, 3);
    let faces = [
        [at(a, y0), at(a, y1), at(b, y1), at(b, y0)],
        [at(c, y0), at(c, y1), at(d, y1), at(d, y0)],
        [at(c, y0), at(d, y0), at(a, y0), at(b, y0)],
        [at(b, y1), at(a, y1), at(d, y1), at(c, y1)],
        [at(b, y1), at(c, y1), at(c, y0), at(b, y0)],
        [at(a, y0), at(d, y0), at(d, y1), at(a, y1)],
    ];
    quads_mesh(name, faces.into_iter().flatten().collect(), M_WHITE)
}

fn one_sided(name: &str, bsdf: Bsdf) -> Material {
    Material {
        two_sided: false,
        ..Material::with_bsdf(name, bsdf)
    }
}

fn diffuse(name: &str, albedo: Rgb) -> Material {
    one_sided(
        name,
        Bsdf::Diffuse {
            albedo,
            texture: None,
        },
    )
}

fn room_materials() -> Vec<Material> {
    let mut light = diffuse("white+area", WHITE);
    light.emission = LIGHT_RADIANCE;
    vec![
        diffuse("white", WHITE),
        diffuse("red", RED),
        diffuse("green", GREEN),
        light,
    ]
}

/// The room: floor, ceiling, back, red and green walls, then the light.
fn room_meshes() -> Vec<Mesh> {
    QUADS
        .iter()
        .map(|(name, corners, material)| {
            let corners = corners.iter().map(|&p| Vec3::from_array(p)).collect();
            quads_mesh(name, corners, *material)
        })
        .collect()
}

fn room_scene(meshes: Vec<Mesh>, materials: Vec<Material>) -> Scene {
    Scene {
        meshes,
        materials,
        camera: Some(Camera {
            eye: Vec3::new(0.0, 0.0, 3.9),
            target: Vec3::ZERO,
            up: Vec3::Y,
            fov_deg: 39.3077,
            fov_axis: FovAxis::X,
        }),
        film: Some(FilmSize {
            width: 512,
            height: 512,
        }),
        ..Scene::default()
    }
}

/// `refs/cornell-box`: the room with the two diffuse boxes.
pub(crate) fn cornell_box() -> Scene {
    let mut meshes = room_meshes();
    meshes.push(box_mesh("large_box", LARGE_BOX));
    meshes.push(box_mesh("small_box", SMALL_BOX));
    room_scene(meshes, room_materials())
}

/// `refs/cornell-caustics`: the room with a mirror and a glass sphere.
pub(crate) fn cornell_caustics() -> Scene {
    let mut meshes = room_meshes();
    meshes.push(icosphere(
        "mirror_sphere",
        MIRROR_CENTER,
        SPHERE_RADIUS,
        SPHERE_LEVEL,
        M_MIRROR,
    ));
    meshes.push(icosphere(
        "glass_sphere",
        GLASS_CENTER,
        SPHERE_RADIUS,
        SPHERE_LEVEL,
        M_GLASS,
    ));
    let mut materials = room_materials();
    materials.push(one_sided(
        "mirror",
        Bsdf::Mirror {
            reflectance: Rgb::ONE,
        },
    ));
    // Glass refracts on both faces by nature: the ray leaving the sphere
    // meets the back of a face, so the material is two-sided.
    materials.push(Material::with_bsdf(
        "glass",
        Bsdf::Dielectric {
            ior: 1.5,
            tint: Rgb::ONE,
        },
    ));
    room_scene(meshes, materials)
}

/// Seconds the glass sphere of `cornell-caustics-moving` takes to hop to
/// the left wall and back.
const HOP_SECONDS: f32 = 4.0;

/// `cornell-caustics` with its glass sphere hopping along x in front of the
/// mirror sphere and back (a Catmull–Rom path through five keys, plus one
/// before and one after that shape the ends): it rests on the floor at the
/// start, at the middle and at the end, and rises 0.42 between. Frame 0 is
/// `cornell-caustics` exactly. The path stays 0.75 from the mirror sphere
/// in z (radii 0.33 each) and inside the walls.
pub(crate) fn cornell_caustics_moving() -> Scene {
    let mut scene = cornell_caustics();
    let glass = scene.meshes.len() - 1;
    let (x, y) = (GLASS_CENTER.x as f64, GLASS_CENTER.y as f64);
    let top = y + 0.42;
    let offset = |px: f64, py: f64| DVec3::new(px - x, py - y, 0.0);
    let keys: Vec<TcbKey<DVec3>> = [
        (-1.0, offset(2.0 * x, top)),
        (0.0, offset(x, y)),
        (1.0, offset(0.0, top)),
        (2.0, offset(-x, y)),
        (3.0, offset(0.0, top)),
        (4.0, offset(x, y)),
        (5.0, offset(2.0 * x, top)),
    ]
    .into_iter()
    .map(|(t, v)| TcbKey::new(t * HOP_SECONDS as f64 / 4.0, v))
    .collect();
    let path = VectorSpline::new(&keys).expect("fixed keys are valid");
    let mut animation = Animation::new(Timeline::from_duration(HOP_SECONDS, DEFAULT_FPS));
    animation.graph = vec![GraphNode {
        parent: None,
        local: Local::Keyed(Box::new(KeyedTransform {
            translation: Some(path),
            ..KeyedTransform::default()
        })),
    }];
    animation.meshes = vec![MeshTrack {
        mesh: glass,
        node: Some(0),
        rest_positions: scene.meshes[glass].positions.clone(),
        rest_normals: Vec::new(),
        deform: Deform::default(),
    }];
    animation.objects = 1;
    scene.animation = Some(Arc::new(animation));
    scene
}
