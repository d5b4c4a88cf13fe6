//! glTF 2.0 loader (`.gltf` with external or `data:` buffers, and binary
//! `.glb`), on the `gltf` crate's validated document model.
//!
//! Supported subset:
//! - the default scene (else the first) walked from its roots with node
//!   transforms (matrix or TRS) composed down the tree;
//! - mesh primitives of mode `TRIANGLES`, `TRIANGLE_STRIP` and
//!   `TRIANGLE_FAN` (points and lines are skipped with a warning naming the
//!   mode), indexed or not, with `POSITION`, `NORMAL` and `TEXCOORD_0` (v
//!   flipped to the OBJ convention `Texture::sample` uses, since glTF's uv
//!   origin is the top left of the image); vertex colours are ignored with
//!   a warning (`primitive.rs`);
//! - materials: `baseColorFactor` and `baseColorTexture` (PNG, JPEG, BMP,
//!   TGA; sRGB decoded to linear; the renderer multiplies it by the factor),
//!   emission `emissiveFactor * KHR_materials_emissive_strength`,
//!   `doubleSided`, and the BSDF chosen by [`bsdf_for`];
//! - the first perspective camera reached in the walk (looking down the
//!   node's -Z with +Y up, vertical `yfov`); orthographic cameras and
//!   further cameras are ignored with a warning;
//! - `KHR_lights_punctual` point, spot and directional lights, their
//!   photometric intensity (cd, lux) taken as the radiometric one.
//!
//! The JSON is checked before the `gltf` crate validates it (one of its
//! validation hooks indexes without checking), and the crate runs under the
//! panic guard (`loaders/guard.rs`). Required extensions caustic cannot
//! read are errors naming them (Draco, `KHR_draco_mesh_compression`, in
//! particular); `KHR_texture_transform` is ignored with a warning.
//! Buffers are read here rather than by `gltf::import`, so that every byte
//! range is checked before it is sliced: a bad file is an error naming the
//! buffer, view or accessor, never a panic. A missing external buffer is
//! `MissingReference`; a missing or undecodable texture image is a warning
//! (the material keeps its factor). Animations (node TRS and morph-weight
//! channels, with morph targets and skins of the meshes they move) are read
//! by `animation.rs`; files without animations load their meshes' rest
//! pose. Layout: `files.rs` (GLB, JSON checks, buffers, URIs, error
//! mapping), `primitive.rs` (primitives to meshes), `accessor.rs` (checked
//! accessor reads).

mod accessor;
mod animation;
mod files;
mod primitive;

use super::guard::guarded;
use super::input::{read_file, reject_utf16};
use accessor::view_range;
use files::{load_buffers, parse_document, read_uri, split_glb};

use crate::{
    Bsdf, Camera, ErrorKind, FovAxis, Light, Material, Scene, SceneError, Texture, TextureId,
    Warning,
};
use ::gltf::khr_lights_punctual::Kind as LightKind;
use ::gltf::{Document, Node};
use caustic_geom::{Mat4, Rgb, Vec3};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub(crate) fn load(path: &Path) -> Result<Scene, SceneError> {
    let bytes = read_file(path)?;
    let (json, blob) = if bytes.starts_with(b"glTF") {
        split_glb(path, &bytes)?
    } else {
        reject_utf16(path, &bytes)?;
        (&bytes[..], None)
    };
    let (document, warnings) = parse_document(path, json)?;
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let buffers =
        load_buffers(path, &dir, &document, blob).map_err(|e| e.with_warnings(warnings.clone()))?;
    let mut loader = Loader {
        path,
        dir,
        doc: &document,
        buffers,
        materials: HashMap::new(),
        textures: HashMap::new(),
        scene: Scene {
            warnings,
            ..Scene::default()
        },
        anim: None,
    };
    // The walk calls the gltf crate's accessors, which unwrap what they
    // take the validation to have checked; `parse_document` checks what it
    // does not (see files.rs), and the guard is the last line of defence.
    let read = |loader: &mut Loader| -> Result<(), SceneError> {
        loader.anim = loader.read_animations()?;
        loader.walk()?;
        if let Some(anim) = loader.anim.take() {
            let animation = loader.finish_animation(anim);
            loader.scene.animation = Some(Arc::new(animation));
        }
        Ok(())
    };
    match guarded(path, "gltf", || read(&mut loader)) {
        Ok(()) => Ok(loader.scene),
        Err(e) => Err(e.with_warnings(loader.scene.warnings)),
    }
}

/// State of one file's load.
struct Loader<'a> {
    path: &'a Path,
    dir: PathBuf,
    doc: &'a Document,
    buffers: Vec<Vec<u8>>,
    /// Scene material of each glTF material (`None`: the default material).
    materials: HashMap<Option<usize>, u32>,
    /// Scene texture of each glTF image (`None`: it could not be read).
    textures: HashMap<usize, Option<TextureId>>,
    scene: Scene,
    /// The animation being gathered (files with animations only).
    anim: Option<animation::GltfAnimation>,
}

impl Loader<'_> {
    fn warn(&mut self, location: impl Into<String>, message: impl Into<String>) {
        let warning = Warning::new(self.path, message).at(location);
        self.scene.warnings.push(warning);
    }

    fn error(
        &self,
        kind: ErrorKind,
        location: impl Into<String>,
        message: impl Into<String>,
    ) -> SceneError {
        SceneError::new(kind, self.path, message).at(location)
    }

    /// Depth-first walk in document order with an explicit stack (deep
    /// hierarchies cannot overflow the call stack). glTF requires a tree;
    /// a node reached twice (a cycle or a shared child) is skipped.
    fn walk(&mut self) -> Result<(), SceneError> {
        let doc = self.doc;
        let roots: Vec<Node> = match doc.default_scene().or_else(|| doc.scenes().next()) {
            Some(scene) => scene.nodes().collect(),
            None => {
                self.warn("scenes", "the file has no scene; reading every root node");
                root_nodes(doc)
            }
        };
        let mut visited = vec![false; doc.nodes().len()];
        let mut stack: Vec<(Node, Mat4, Option<u32>)> = roots
            .into_iter()
            .rev()
            .map(|n| (n, Mat4::IDENTITY, None))
            .collect();
        while let Some((node, parent, parent_id)) = stack.pop() {
            if std::mem::replace(&mut visited[node.index()], true) {
                self.warn(
                    format!("node {}", node.index()),
                    "node reached twice (not a tree); skipped",
                );
                continue;
            }
            let world = parent * Mat4::from_cols_array_2d(&node.transform().matrix());
            let graph_id = self.anim.as_mut().map(|a| a.add_node(&node, parent_id).0);
            self.node(&node, &world, graph_id)?;
            let children: Vec<Node> = node.children().collect();
            stack.extend(children.into_iter().rev().map(|c| (c, world, graph_id)));
        }
        Ok(())
    }

    fn node(&mut self, node: &Node, world: &Mat4, graph_id: Option<u32>) -> Result<(), SceneError> {
        let moves = match (&self.anim, graph_id) {
            (Some(anim), Some(id)) => anim.mesh_moves(node, id),
            _ => false,
        };
        if let Some(mesh) = node.mesh() {
            let name = mesh
                .name()
                .map_or_else(|| format!("mesh {}", mesh.index()), str::to_string);
            let count = mesh.primitives().len();
            for prim in mesh.primitives() {
                let at = format!(
                    "mesh {} ('{name}') primitive {}",
                    mesh.index(),
                    prim.index()
                );
                let mesh_name = if count > 1 {
                    format!("{name}#{}", prim.index())
                } else {
                    name.clone()
                };
                let Some(mut out) = self.primitive(&prim, &at, mesh_name)? else {
                    continue;
                };
                if let (true, Some(id), Some(mut anim)) = (moves, graph_id, self.anim.take()) {
                    let index = self.scene.meshes.len();
                    let result =
                        self.moving_primitive(&mut anim, (node, id), &prim, (&out, index), &at);
                    self.anim = Some(anim);
                    result?;
                } else {
                    out.transform(world);
                }
                self.scene.meshes.push(out);
            }
        }
        if let Some(camera) = node.camera() {
            let had = self.scene.camera.is_some();
            self.camera(&camera, node.index(), world);
            if let (false, true, Some(anim), Some(id)) = (
                had,
                self.scene.camera.is_some(),
                self.anim.as_mut(),
                graph_id,
            ) {
                anim.camera_on(id);
            }
        }
        if let Some(light) = node.light() {
            let index = self.scene.lights.len();
            self.light(&light, node.index(), world);
            if let (true, Some(anim), Some(id)) = (
                self.scene.lights.len() > index,
                self.anim.as_mut(),
                graph_id,
            ) {
                anim.light_on(index, id);
            }
        }
        Ok(())
    }

    fn camera(&mut self, camera: &::gltf::Camera, node: usize, world: &Mat4) {
        let at = format!("node {node} camera {}", camera.index());
        let ::gltf::camera::Projection::Perspective(projection) = camera.projection() else {
            self.warn(at, "orthographic cameras are not supported; ignored");
            return;
        };
        if self.scene.camera.is_some() {
            self.warn(at, "only the first camera is used; ignored");
            return;
        }
        let eye = world.transform_point3(Vec3::ZERO);
        let forward = world.transform_vector3(Vec3::NEG_Z).normalize_or_zero();
        let camera = Camera {
            eye,
            target: eye + forward,
            up: world.transform_vector3(Vec3::Y),
            fov_deg: projection.yfov().to_degrees(),
            fov_axis: FovAxis::Y,
        };
        // A degenerate camera would fail the whole load in `finish`; the
        // geometry is still worth having with a default view.
        if camera.is_valid() && camera.eye.is_finite() {
            self.scene.camera = Some(camera);
        } else {
            self.warn(at, "degenerate camera (yfov or node transform); ignored");
        }
    }

    fn light(&mut self, light: &::gltf::khr_lights_punctual::Light, node: usize, world: &Mat4) {
        let at = format!("node {node} light {}", light.index());
        let power = Rgb::from_array(light.color()) * light.intensity();
        if !power.is_finite() || power.min_element() < 0.0 {
            self.warn(
                at,
                "light colour or intensity is negative or not finite; ignored",
            );
            return;
        }
        let position = world.transform_point3(Vec3::ZERO);
        // Spot and directional lights shine down the node's -Z axis.
        let direction = world.transform_vector3(Vec3::NEG_Z).try_normalize();
        let light = match (light.kind(), direction) {
            (LightKind::Point, _) => Light::Point {
                position,
                intensity: power,
            },
            (LightKind::Directional, Some(direction)) => Light::Directional {
                direction,
                irradiance: power,
            },
            (
                LightKind::Spot {
                    inner_cone_angle,
                    outer_cone_angle,
                },
                Some(direction),
            ) => Light::Spot {
                position,
                direction,
                intensity: power,
                cos_falloff_start: inner_cone_angle.min(outer_cone_angle).cos(),
                cos_total_width: outer_cone_angle.cos(),
            },
            (_, None) => {
                self.warn(at, "node transform collapses the light direction; ignored");
                return;
            }
        };
        if !position.is_finite() {
            self.warn(at, "light position is not finite; ignored");
            return;
        }
        self.scene.lights.push(light);
    }
}

/// Nodes that are nobody's child, in document order.
fn root_nodes(doc: &Document) -> Vec<Node<'_>> {
    let mut is_child = vec![false; doc.nodes().len()];
    for node in doc.nodes() {
        for child in node.children() {
            is_child[child.index()] = true;
        }
    }
    doc.nodes().filter(|n| !is_child[n.index()]).collect()
}

// ---------------------------------------------------------------------------
// Materials

/// The BSDF of a metallic-roughness material:
/// - `KHR_materials_transmission` factor > 0.5: smooth glass with
///   `KHR_materials_ior` (default 1.5), tinted by the base colour;
/// - metallic >= 0.99 and roughness <= 0.05: a perfect mirror of the base
///   colour;
/// - roughness >= 0.9: Lambertian with the base colour (a lobe that wide is
///   diffuse; this covers glTF's default material, metallic 1 roughness 1);
/// - otherwise [`Bsdf::Glossy`]: diffuse `base * (1 - metallic)` plus a
///   Phong lobe of colour `mix(0.04, base, metallic)` (the normal-incidence
///   reflectance of the metallic-roughness model) and exponent
///   `2/alpha^2 - 2` with `alpha = roughness^2`, the Phong exponent whose
///   highlight matches a microfacet lobe of that roughness.
fn bsdf_for(
    base: Rgb,
    texture: Option<TextureId>,
    metallic: f32,
    roughness: f32,
    transmission: f32,
    ior: f32,
) -> Bsdf {
    if transmission > 0.5 {
        return Bsdf::Dielectric { ior, tint: base };
    }
    if metallic >= 0.99 && roughness <= 0.05 {
        return Bsdf::Mirror { reflectance: base };
    }
    if roughness >= 0.9 {
        return Bsdf::Diffuse {
            albedo: base,
            texture,
        };
    }
    let alpha = (roughness * roughness).max(1e-3);
    let metallic = metallic.clamp(0.0, 1.0);
    Bsdf::Glossy {
        albedo: base * (1.0 - metallic),
        texture,
        specular: Rgb::splat(0.04).lerp(base, metallic),
        exponent: (2.0 / (alpha * alpha) - 2.0).clamp(1.0, 1e4),
    }
}

impl Loader<'_> {
    /// Scene material index of a glTF material, created on first use.
    fn material(&mut self, material: &::gltf::Material) -> u32 {
        if let Some(&index) = self.materials.get(&material.index()) {
            return index;
        }
        let converted = self.convert_material(material);
        self.scene.materials.push(converted);
        let index = (self.scene.materials.len() - 1) as u32;
        self.materials.insert(material.index(), index);
        index
    }

    fn convert_material(&mut self, material: &::gltf::Material) -> Material {
        let at = match material.index() {
            Some(i) => format!("material {i}"),
            None => "default material".to_string(),
        };
        let pbr = material.pbr_metallic_roughness();
        let [r, g, b, _alpha] = pbr.base_color_factor();
        let base = Rgb::new(r, g, b);
        let texture = pbr
            .base_color_texture()
            .and_then(|info| self.base_color_texture(&info, &at));
        let transmission = material
            .transmission()
            .map_or(0.0, |t| t.transmission_factor());
        let ior = material.ior().filter(|&x| x > 0.0).unwrap_or(1.5);
        let bsdf = bsdf_for(
            base,
            texture,
            pbr.metallic_factor(),
            pbr.roughness_factor(),
            transmission,
            ior,
        );
        let emission = Rgb::from_array(material.emissive_factor())
            * material.emissive_strength().unwrap_or(1.0);
        if material.emissive_texture().is_some() {
            self.warn(
                &at,
                "emissive textures are not supported; using the emissive factor alone",
            );
        }
        Material {
            name: material.name().map_or_else(|| at.clone(), str::to_string),
            bsdf,
            emission,
            // Glass needs both faces: a refracted ray leaves through a back face.
            two_sided: material.double_sided() || matches!(bsdf, Bsdf::Dielectric { .. }),
        }
    }

    /// The texture of a base colour image, or `None` (with a warning) when
    /// the image cannot be read.
    fn base_color_texture(&mut self, info: &::gltf::texture::Info, at: &str) -> Option<TextureId> {
        if info.tex_coord() != 0 {
            self.warn(
                at,
                format!(
                    "base colour texture uses TEXCOORD_{}; only TEXCOORD_0 is read",
                    info.tex_coord()
                ),
            );
        }
        let image = info.texture().source();
        if let Some(&id) = self.textures.get(&image.index()) {
            return id;
        }
        let id = match self
            .image_bytes(&image)
            .and_then(|bytes| crate::texture::decode_srgb(&bytes))
        {
            Ok((width, height, texels)) => {
                let name = image
                    .name()
                    .map_or_else(|| format!("image {}", image.index()), str::to_string);
                self.scene.textures.push(Texture {
                    name,
                    width,
                    height,
                    texels,
                });
                Some((self.scene.textures.len() - 1) as TextureId)
            }
            Err(message) => {
                self.warn(
                    format!("image {}", image.index()),
                    format!("{message}; using the base colour factor"),
                );
                None
            }
        };
        self.textures.insert(image.index(), id);
        id
    }

    /// The encoded bytes of an image: a buffer view, a `data:` URI or a file.
    fn image_bytes(&self, image: &::gltf::Image) -> Result<Vec<u8>, String> {
        match image.source() {
            ::gltf::image::Source::View { view, .. } => {
                let buffer = &self.buffers[view.buffer().index()];
                view_range(&view, buffer.len())
                    .map(|range| buffer[range].to_vec())
                    .ok_or_else(|| {
                        format!("buffer view {} is past the end of its buffer", view.index())
                    })
            }
            ::gltf::image::Source::Uri { uri, .. } => read_uri(&self.dir, uri),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_material_is_diffuse() {
        let bsdf = bsdf_for(Rgb::ONE, None, 1.0, 1.0, 0.0, 1.5);
        assert!(matches!(bsdf, Bsdf::Diffuse { .. }));
    }
}
