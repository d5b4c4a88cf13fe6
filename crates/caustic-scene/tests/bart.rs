//! The three BART scenes (Lext, Assarsson and Möller 2001) from the
//! standard scenes, when unpacked: they load, their clocks are the files',
//! triangle counts hold on every sampled frame, animated objects move and
//! the cameras follow their keyframes.

use caustic_accel::{Accel, TriangleBvh};
use caustic_geom::{Aabb, Ray, Triangle, Vec3};
use caustic_scene::{Light, Scene, data_dirs};
use std::time::Instant;

fn load_bart(relative: &str) -> Option<Scene> {
    let path = data_dirs::scene_file(relative)?;
    let start = Instant::now();
    let scene = Scene::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let clock = scene.timeline().expect("BART scenes are animated");
    let animation = scene.animation.as_ref().unwrap();
    eprintln!(
        "{relative}: {} triangles in {} meshes ({} moving), {} animated objects, {} frames over {} s, {} textures, loaded in {:.3} s",
        scene.triangle_count(),
        scene.meshes.len(),
        animation.moving_meshes().len(),
        animation.animated_objects(),
        clock.frames,
        clock.duration(),
        scene.textures.len(),
        start.elapsed().as_secs_f64()
    );
    for w in &scene.warnings {
        eprintln!("  warning: {w}");
    }
    Some(scene)
}

/// Bounds of the moving meshes only.
fn moving_bounds(scene: &Scene) -> Aabb {
    let animation = scene.animation.as_ref().unwrap();
    animation
        .moving_meshes()
        .into_iter()
        .fold(Aabb::EMPTY, |b, i| b.union(scene.meshes[i].bounds()))
}

/// Frames 0, a quarter, the middle and the last: same triangles in the same
/// meshes, finite geometry, moving meshes' bounds changing, and the
/// camera moving when the file animates it.
fn check_animation(scene: &Scene, camera_moves: bool) {
    let clock = scene.timeline().unwrap();
    let animation = scene.animation.as_ref().unwrap();
    assert!(animation.fixed_topology());
    let frames = [0, clock.frames / 4, clock.frames / 2, clock.frames - 1];
    let posed: Vec<Scene> = frames.iter().map(|&f| scene.at_frame(f)).collect();
    for (f, p) in frames.iter().zip(&posed) {
        assert_eq!(p.triangle_count(), scene.triangle_count(), "frame {f}");
        assert_eq!(p.meshes.len(), scene.meshes.len(), "frame {f}");
        assert!(p.bounds().is_finite(), "frame {f}");
        let camera = p.camera.expect("a camera");
        assert!(camera.is_valid(), "frame {f}: {camera:?}");
    }
    let first = moving_bounds(&posed[0]);
    assert!(
        posed[1..].iter().any(|p| moving_bounds(p) != first),
        "the moving meshes do not move"
    );
    // Frame 0 is the scene as loaded.
    assert_eq!(posed[0].meshes, scene.meshes);
    let eyes: Vec<_> = posed.iter().map(|p| p.camera.unwrap().eye).collect();
    assert_eq!(
        eyes.windows(2).any(|w| (w[0] - w[1]).length() > 1e-3),
        camera_moves,
        "camera eyes {eyes:?}"
    );
}

#[test]
fn bart_museum() {
    let Some(scene) = load_bart("bart-museum/aff/museum5.aff") else {
        return;
    };
    let clock = scene.timeline().unwrap();
    assert_eq!((clock.start, clock.end, clock.frames), (-1.0, 5.0, 300));
    let animation = scene.animation.as_ref().unwrap();
    // The art piece: 1024 keyed triangles, one deforming object.
    let art: usize = animation
        .moving_meshes()
        .iter()
        .map(|&i| scene.meshes[i].indices.len())
        .sum();
    assert_eq!(art, 1024);
    // 10,143 polygons triangulated, plus the 8 tessellated cones.
    assert!(
        (10_143..14_000).contains(&(scene.triangle_count() - art)),
        "{}",
        scene.triangle_count()
    );
    assert!(animation.animates_camera());
    check_animation(&scene, true);
}

#[test]
fn bart_kitchen() {
    let Some(scene) = load_bart("bart-kitchen/aff/kitchen.aff") else {
        return;
    };
    let clock = scene.timeline().unwrap();
    assert_eq!((clock.start, clock.end, clock.frames), (0.0, 20.0, 800));
    assert!((100_000..130_000).contains(&scene.triangle_count()));
    let animation = scene.animation.as_ref().unwrap();
    // The toy car and its four wheels.
    assert_eq!(animation.animated_objects(), 5);
    assert!(!scene.textures.is_empty());
    check_animation(&scene, true);
}

#[test]
fn bart_robots() {
    let Some(scene) = load_bart("bart-robot/aff/Robot.aff") else {
        return;
    };
    let clock = scene.timeline().unwrap();
    assert_eq!((clock.start, clock.end, clock.frames), (0.0, 50.0, 800));
    assert!((60_000..90_000).contains(&scene.triangle_count()));
    let animation = scene.animation.as_ref().unwrap();
    assert!(animation.animated_objects() >= 10, "ten robots at least");
    check_animation(&scene, true);
    // The city is a closed box whose only point light is above its sky
    // (BART's sky lets half the light through); the camera, inside, must
    // see geometry, and some of it lit: directly by the point light or by
    // an emitter (the sky glows, as the AFF loader documents).
    for t in [0.0, 6.0, 20.0, 45.0] {
        let (hit, lit) = view_coverage(&scene.at_time(t), 16, 12);
        eprintln!(
            "robots at t = {t} s: {hit:.2} of the primary rays hit, {lit:.2} of the hits see light"
        );
        assert!(
            hit > 0.5,
            "t = {t}: the camera sees little geometry ({hit:.2})"
        );
        assert!(
            lit > 0.2,
            "t = {t}: the visible geometry is unlit ({lit:.2})"
        );
    }
}

/// Traces a `w`×`h` grid of primary rays from the scene's camera and
/// returns the fraction that hits a triangle and, of those, the fraction
/// that sees a point light or a sample point of an emissive triangle
/// unoccluded.
fn view_coverage(scene: &Scene, w: u32, h: u32) -> (f32, f32) {
    let mut triangles = Vec::new();
    let mut emitters = Vec::new();
    for mesh in &scene.meshes {
        for (i, &m) in mesh.material_ids.iter().enumerate() {
            let tri = mesh.triangle(i);
            if scene.materials[m as usize].is_emissive() {
                emitters.push(tri);
            }
            triangles.push(tri);
        }
    }
    let bvh = TriangleBvh::build(&triangles);
    let mut targets: Vec<Vec3> = scene
        .lights
        .iter()
        .filter_map(|l| match l {
            Light::Point { position, .. } => Some(*position),
            _ => None,
        })
        .collect();
    for tri in &emitters {
        targets.extend(samples(tri));
    }
    let camera = scene.camera.expect("a camera");
    let forward = (camera.target - camera.eye).normalize();
    let right = forward.cross(camera.up).normalize();
    let up = right.cross(forward);
    let tan_y = (camera.fov_deg.to_radians() * 0.5).tan();
    let tan_x = tan_y * w as f32 / h as f32;
    let (mut hits, mut lit) = (0u32, 0u32);
    for y in 0..h {
        for x in 0..w {
            let sx = (2.0 * (x as f32 + 0.5) / w as f32 - 1.0) * tan_x;
            let sy = (1.0 - 2.0 * (y as f32 + 0.5) / h as f32) * tan_y;
            let dir = (forward + right * sx + up * sy).normalize();
            let Some(hit) = bvh.intersect(&Ray::new(camera.eye, dir)) else {
                continue;
            };
            hits += 1;
            let point = camera.eye + dir * hit.t;
            let sees = targets.iter().any(|&target| {
                let to = target - point;
                let d = to.length();
                d > 1e-3 && !bvh.occluded(&Ray::segment(point, to / d, 1e-3 * d, 0.999 * d))
            });
            lit += u32::from(sees);
        }
    }
    let n = (w * h) as f32;
    (hits as f32 / n, lit as f32 / hits.max(1) as f32)
}

/// A lattice of points inside a triangle (the robots' sky is two large
/// triangles above narrow streets: a few points would miss the strip a
/// street sees).
fn samples(tri: &Triangle) -> Vec<Vec3> {
    const N: u32 = 16;
    let mut out = Vec::new();
    for i in 0..N {
        for j in 0..N - i {
            let (u, v) = (
                (i as f32 + 1.0 / 3.0) / N as f32,
                (j as f32 + 1.0 / 3.0) / N as f32,
            );
            out.push(tri.v0 + (tri.v1 - tri.v0) * u + (tri.v2 - tri.v0) * v);
        }
    }
    out
}
