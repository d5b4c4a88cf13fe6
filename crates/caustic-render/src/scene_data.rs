//! The scene as the renderers see it: flattened triangles in scene
//! numbering, the acceleration structure, per-triangle materials and
//! shading attributes, and the area lights.

use crate::lights::{AreaLight, build_area_lights};
use caustic_accel::Accel;
use caustic_geom::{Aabb, Hit, Ray, Rgb, Triangle, Vec2, Vec3};
use caustic_scene::{Bsdf, Light, Material, Scene, Texture};
use std::ops::Range;

/// Shading attributes of one triangle corner set, present only for meshes
/// that carry them.
#[derive(Clone, Copy, Debug)]
struct CornerNormals([Vec3; 3]);

#[derive(Clone, Copy, Debug)]
struct CornerUvs([Vec2; 3]);

/// A scene ready to trace.
pub struct RenderScene {
    pub triangles: Vec<Triangle>,
    /// Material index per triangle.
    pub triangle_material: Vec<u32>,
    normals: Vec<Option<CornerNormals>>,
    uvs: Vec<Option<CornerUvs>>,
    pub materials: Vec<Material>,
    pub textures: Vec<Texture>,
    pub lights: Vec<Light>,
    pub area_lights: Vec<AreaLight>,
    pub background: Rgb,
    pub accel: Box<dyn Accel>,
    /// Diagonal of the scene bounds: scales ray offsets.
    pub scene_diagonal: f32,
}

/// Everything a shader needs about a hit point.
#[derive(Clone, Copy, Debug)]
pub struct SurfaceHit {
    pub point: Vec3,
    /// Unit geometric normal, `cross(v1 - v0, v2 - v0)` normalised: points to
    /// the front side.
    pub geometric_normal: Vec3,
    /// Unit shading normal on the same side as the geometric normal.
    pub shading_normal: Vec3,
    pub uv: Vec2,
    pub material: u32,
    pub prim: u32,
    pub t: f32,
}

impl SurfaceHit {
    /// The dielectric interface a ray travelling along `dir` meets here:
    /// the shading normal turned to face the ray's side, and the ratio of
    /// refractive indices `eta` (outside to inside when entering, the
    /// inverse when leaving), as `bsdf::refract` and `fresnel_*` take them.
    pub fn interface(&self, dir: Vec3, ior: f32) -> (Vec3, f32) {
        if self.geometric_normal.dot(dir) < 0.0 {
            (self.shading_normal, 1.0 / ior)
        } else {
            (-self.shading_normal, ior)
        }
    }
}

impl RenderScene {
    /// Flattens `scene` and builds the acceleration structure `accel_name`
    /// (a name from `caustic_accel::ACCEL_NAMES`).
    pub fn new(scene: &Scene, accel_name: &str) -> Result<Self, caustic_accel::UnknownAccel> {
        let triangles = scene.triangles();
        let accel = caustic_accel::build_accel(accel_name, &triangles)?;
        Ok(Self::assemble(scene, triangles, accel))
    }

    /// The scene with a structure built elsewhere over `scene.triangles()`
    /// (a tree refitted from the previous frame of an animation).
    pub fn with_accel(scene: &Scene, accel: Box<dyn Accel>) -> Self {
        Self::assemble(scene, scene.triangles(), accel)
    }

    fn assemble(scene: &Scene, triangles: Vec<Triangle>, accel: Box<dyn Accel>) -> Self {
        let mut triangle_material = Vec::with_capacity(triangles.len());
        let mut normals = Vec::with_capacity(triangles.len());
        let mut uvs = Vec::with_capacity(triangles.len());
        for mesh in &scene.meshes {
            triangle_material.extend_from_slice(&mesh.material_ids);
            for tri in &mesh.indices {
                let corner = |i: usize| tri[i] as usize;
                normals.push(
                    (!mesh.normals.is_empty())
                        .then(|| CornerNormals([0, 1, 2].map(|i| mesh.normals[corner(i)]))),
                );
                uvs.push(
                    (!mesh.uvs.is_empty())
                        .then(|| CornerUvs([0, 1, 2].map(|i| mesh.uvs[corner(i)]))),
                );
            }
        }
        let area_lights = build_area_lights(&triangles, &triangle_material, &scene.materials);
        Self {
            scene_diagonal: scene.bounds().diagonal(),
            triangles,
            triangle_material,
            normals,
            uvs,
            materials: scene.materials.clone(),
            textures: scene.textures.clone(),
            lights: scene.lights.clone(),
            area_lights,
            background: scene.background,
            accel,
        }
    }

    /// Follows `scene` posed at another instant (the scene this was
    /// flattened from, [`Scene::set_time`] since): rewrites only what
    /// `layout` says moves — the triangles and corner normals of the moving
    /// meshes, the analytic lights, the area lights where an emissive
    /// triangle moves, the scene's diagonal — and returns the scene-order
    /// triangle ranges that moved (what a GPU scene uploads). The structure
    /// in `accel` is left as it is: the caller refits or rebuilds it.
    ///
    /// # Errors
    /// When `scene` no longer has `layout`'s meshes and triangle counts (a
    /// mesh sequence, another scene): flatten it afresh instead.
    pub fn repose(
        &mut self,
        scene: &Scene,
        layout: &MeshLayout,
    ) -> Result<Vec<Range<usize>>, String> {
        if !layout.matches(scene) || self.triangles.len() != layout.triangles() {
            return Err("the scene's meshes changed since it was flattened".into());
        }
        use rayon::prelude::*;
        let moved = layout.moved_ranges();
        // Each moving mesh's triangles and corner normals, split off the
        // flat arrays (the meshes in increasing order), rewritten in parallel.
        let mut parts = Vec::with_capacity(layout.moving.len());
        let (mut triangles, mut normals) = (&mut self.triangles[..], &mut self.normals[..]);
        let mut at = 0;
        for &m in &layout.moving {
            let (first, end) = (layout.offsets[m], layout.offsets[m + 1]);
            let (_, tail) = triangles.split_at_mut(first - at);
            let (mesh_triangles, tail) = tail.split_at_mut(end - first);
            triangles = tail;
            let (_, tail) = normals.split_at_mut(first - at);
            let (mesh_normals, tail) = tail.split_at_mut(end - first);
            normals = tail;
            at = end;
            parts.push((&scene.meshes[m], mesh_triangles, mesh_normals));
        }
        let bounds = parts
            .into_par_iter()
            .map(|(mesh, triangles, normals)| {
                triangles
                    .par_iter_mut()
                    .with_min_len(4096)
                    .enumerate()
                    .for_each(|(i, tri)| *tri = mesh.triangle(i));
                if !mesh.normals.is_empty() {
                    normals
                        .par_iter_mut()
                        .with_min_len(4096)
                        .zip(&mesh.indices)
                        .for_each(|(slot, corners)| {
                            *slot = Some(CornerNormals(corners.map(|c| mesh.normals[c as usize])));
                        });
                }
                mesh.bounds()
            })
            .reduce(|| Aabb::EMPTY, Aabb::union);
        self.scene_diagonal = layout.static_bounds.union(bounds).diagonal();
        self.lights.clone_from(&scene.lights);
        if layout.emissive_moves {
            self.area_lights =
                build_area_lights(&self.triangles, &self.triangle_material, &self.materials);
        }
        Ok(moved)
    }

    /// Offset for spawning rays off a surface, relative to the scene size,
    /// so that secondary rays do not re-hit their own triangle.
    pub fn ray_epsilon(&self) -> f32 {
        (1e-5 * self.scene_diagonal).max(1e-6)
    }

    pub fn intersect(&self, ray: &Ray) -> Option<Hit> {
        self.accel.intersect(ray)
    }

    pub fn occluded(&self, ray: &Ray) -> bool {
        self.accel.occluded(ray)
    }

    /// A ray leaving `surface` in `dir`, its origin pushed off the surface
    /// to the side `dir` goes to, so it cannot hit its own triangle: how
    /// every renderer spawns secondary rays.
    pub fn spawn(&self, surface: &SurfaceHit, dir: Vec3) -> Ray {
        let n = crate::direct::face_towards(surface.geometric_normal, dir);
        Ray::new(surface.point + n * self.ray_epsilon(), dir)
    }

    /// Shading data at a hit.
    pub fn surface(&self, ray: &Ray, hit: &Hit) -> SurfaceHit {
        let prim = hit.prim as usize;
        let tri = &self.triangles[prim];
        let geometric_normal = tri.normal().unwrap_or(Vec3::Z);
        let w = 1.0 - hit.u - hit.v;
        let shading_normal = match self.normals[prim] {
            Some(CornerNormals(n)) => {
                let n = (w * n[0] + hit.u * n[1] + hit.v * n[2]).normalize_or_zero();
                match n.dot(geometric_normal) {
                    d if d > 0.0 => n,
                    d if d < 0.0 => -n,
                    _ => geometric_normal,
                }
            }
            None => geometric_normal,
        };
        let uv = match self.uvs[prim] {
            Some(CornerUvs(t)) => w * t[0] + hit.u * t[1] + hit.v * t[2],
            None => Vec2::new(hit.u, hit.v),
        };
        SurfaceHit {
            point: ray.at(hit.t),
            geometric_normal,
            shading_normal,
            uv,
            material: self.triangle_material[prim],
            prim: hit.prim,
            t: hit.t,
        }
    }

    /// The corner normals and uvs of triangle `prim`, where its mesh has
    /// them (the GPU renderer uploads them).
    pub fn corner_attributes(&self, prim: usize) -> (Option<[Vec3; 3]>, Option<[Vec2; 3]>) {
        (
            self.normals[prim].map(|CornerNormals(n)| n),
            self.uvs[prim].map(|CornerUvs(t)| t),
        )
    }

    /// Diffuse albedo at a hit (texture or constant).
    pub fn albedo(&self, material: &Material, uv: Vec2) -> Rgb {
        let (albedo, texture) = match material.bsdf {
            Bsdf::Diffuse { albedo, texture } => (albedo, texture),
            Bsdf::Glossy {
                albedo, texture, ..
            } => (albedo, texture),
            _ => return Rgb::ZERO,
        };
        match texture.and_then(|t| self.textures.get(t as usize)) {
            Some(tex) => tex.sample(uv) * albedo,
            None => albedo,
        }
    }
}

/// Where each mesh's triangles lie in a flattened scene and which meshes
/// move: what [`RenderScene::repose`] needs to rewrite only the moving
/// part of an animated scene. Made once, from the first pose.
#[derive(Clone, Debug)]
pub struct MeshLayout {
    /// `offsets[m] .. offsets[m + 1]`: mesh `m`'s triangles (scene order).
    offsets: Vec<usize>,
    /// The meshes that move ([`caustic_scene::Animation::moving_meshes`]).
    moving: Vec<usize>,
    /// Whether a moving mesh has an emissive material (its area lights
    /// change with it).
    emissive_moves: bool,
    /// The union of the still meshes' boxes.
    static_bounds: Aabb,
}

impl MeshLayout {
    /// The layout of `scene` as posed now; `None` when its triangles do
    /// not keep their numbering from pose to pose (a mesh sequence).
    pub fn new(scene: &Scene) -> Option<Self> {
        let moving = match &scene.animation {
            Some(animation) if !animation.fixed_topology() => return None,
            Some(animation) => animation.moving_meshes(),
            None => Vec::new(),
        };
        let mut offsets = Vec::with_capacity(scene.meshes.len() + 1);
        let mut total = 0;
        offsets.push(0);
        for mesh in &scene.meshes {
            total += mesh.indices.len();
            offsets.push(total);
        }
        let moving: Vec<usize> = moving
            .into_iter()
            .filter(|&m| m < scene.meshes.len())
            .collect();
        let emissive_moves = moving.iter().any(|&m| {
            scene.meshes[m].material_ids.iter().any(|&id| {
                scene
                    .materials
                    .get(id as usize)
                    .is_some_and(|material| material.is_emissive())
            })
        });
        let static_bounds = scene
            .meshes
            .iter()
            .enumerate()
            .filter(|(m, _)| moving.binary_search(m).is_err())
            .fold(Aabb::EMPTY, |b, (_, mesh)| b.union(mesh.bounds()));
        Some(Self {
            offsets,
            moving,
            emissive_moves,
            static_bounds,
        })
    }

    /// Triangles in the scene.
    pub fn triangles(&self) -> usize {
        self.offsets.last().copied().unwrap_or(0)
    }

    /// The meshes that move.
    pub fn moving_meshes(&self) -> &[usize] {
        &self.moving
    }

    /// Whether `scene` has this layout's meshes with their triangle counts.
    pub fn matches(&self, scene: &Scene) -> bool {
        scene.meshes.len() + 1 == self.offsets.len()
            && scene
                .meshes
                .iter()
                .zip(self.offsets.windows(2))
                .all(|(mesh, w)| mesh.indices.len() == w[1] - w[0])
    }

    /// The scene-order triangle ranges of the moving meshes, in order,
    /// adjacent ones merged (one upload each); empty meshes add none.
    pub fn moved_ranges(&self) -> Vec<Range<usize>> {
        let mut ranges: Vec<Range<usize>> = Vec::new();
        for &m in &self.moving {
            let range = self.offsets[m]..self.offsets[m + 1];
            if range.is_empty() {
                continue;
            }
            match ranges.last_mut() {
                Some(last) if last.end == range.start => last.end = range.end,
                _ => ranges.push(range),
            }
        }
        ranges
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moving_scene() -> Scene {
        Scene::builtin("cornell-caustics-moving").expect("a built-in scene")
    }

    /// A reposed scene is the posed scene flattened afresh, field for
    /// field, and only the moving mesh's triangles are reported moved.
    #[test]
    fn a_reposed_scene_equals_a_fresh_flattening() {
        let mut scene = moving_scene();
        let layout = MeshLayout::new(&scene).expect("the sphere keeps its triangles");
        assert!(!layout.moving_meshes().is_empty());
        let mut carried = RenderScene::new(&scene, "brute").unwrap();
        let clock = scene.timeline().unwrap();
        for frame in [3, 17, clock.frames - 1] {
            scene.set_time(clock.time_of_frame(frame));
            let moved = carried.repose(&scene, &layout).unwrap();
            let fresh = RenderScene::new(&scene, "brute").unwrap();
            assert_eq!(carried.triangles, fresh.triangles, "frame {frame}");
            for prim in 0..fresh.triangles.len() {
                let (a, b) = (
                    carried.corner_attributes(prim),
                    fresh.corner_attributes(prim),
                );
                assert_eq!(format!("{a:?}"), format!("{b:?}"), "triangle {prim}");
            }
            assert_eq!(carried.scene_diagonal, fresh.scene_diagonal);
            assert_eq!(
                format!("{:?}", carried.lights),
                format!("{:?}", fresh.lights)
            );
            assert_eq!(
                format!("{:?}", carried.area_lights),
                format!("{:?}", fresh.area_lights)
            );
            // The moved ranges are exactly the moving meshes' triangles,
            // and every triangle outside them is unchanged from frame 0.
            let expected: usize = layout
                .moving_meshes()
                .iter()
                .map(|&m| scene.meshes[m].indices.len())
                .sum();
            assert_eq!(moved.iter().map(|r| r.len()).sum::<usize>(), expected);
            let first = RenderScene::new(&scene.at_frame(0), "brute").unwrap();
            for (i, (a, b)) in fresh.triangles.iter().zip(&first.triangles).enumerate() {
                if a != b {
                    assert!(
                        moved.iter().any(|r| r.contains(&i)),
                        "triangle {i} moved unreported"
                    );
                }
            }
        }
    }

    #[test]
    fn moved_ranges_merge_adjacent_meshes_and_skip_still_ones() {
        let layout = MeshLayout {
            offsets: vec![0, 4, 10, 10, 12, 20],
            moving: vec![1, 2, 3, 4],
            emissive_moves: false,
            static_bounds: Aabb::EMPTY,
        };
        assert_eq!(layout.moved_ranges(), vec![4..20]);
        let layout = MeshLayout {
            moving: vec![0, 3],
            ..layout
        };
        assert_eq!(layout.moved_ranges(), vec![0..4, 10..12]);
        assert_eq!(layout.triangles(), 20);
    }

    #[test]
    fn a_scene_with_other_meshes_is_refused() {
        let scene = moving_scene();
        let layout = MeshLayout::new(&scene).unwrap();
        let mut carried = RenderScene::new(&scene, "brute").unwrap();
        let mut other = scene.clone();
        other.meshes.pop();
        assert!(!layout.matches(&other));
        assert!(carried.repose(&other, &layout).is_err());
        let still = Scene::builtin("cornell-box").unwrap();
        let layout = MeshLayout::new(&still).unwrap();
        assert!(layout.moving_meshes().is_empty() && layout.moved_ranges().is_empty());
    }
}
