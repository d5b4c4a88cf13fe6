//! The scene as the renderers see it: flattened triangles in scene
//! numbering, the acceleration structure, per-triangle materials and
//! shading attributes, and the area lights.

use crate::lights::{AreaLight, build_area_lights};
use caustic_accel::Accel;
use caustic_geom::{Hit, Ray, Rgb, Triangle, Vec2, Vec3};
use caustic_scene::{Bsdf, Light, Material, Scene, Texture};

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
