//! AFF, the Animated File Format of the BART benchmark (Lext, Assarsson
//! and Möller, "BART: A Benchmark for Animated Ray Tracing", IEEE CG&A
//! 21(2), 2001, and the format description distributed with it): Eric
//! Haines's NFF plus includes, extended materials, meshes, textured and
//! animated triangles, transform groups and Kochanek–Bartels keyframes.
//!
//! Statements (one word, then its numbers; `#` or `%` starts a comment):
//!
//! | statement | meaning | here |
//! | --- | --- | --- |
//! | `v` from/at/up/angle/hither/resolution | camera; angle is the vertical field of view | [`Camera`], film size |
//! | `b r g b` | background | `Scene::background` |
//! | `l x y z [r g b]`, `la name x y z [r g b]` | point light, animated by `k name` | [`Light::Point`], intensity below |
//! | `am r g b` | global ambient light | no ambient term in caustic (a warning); scales the glow of surfaces that let light through |
//! | `f …`, `fm …` | material for what follows | `material.rs` |
//! | `p n …`, `pp n …` | polygon, polygonal patch (with normals) | ear-clipped (`polygon.rs`) |
//! | `tt tex …`, `ttp tex …` | textured triangle (patch) | triangles with uvs |
//! | `tpa n …` | triangle keyed in time, interpolated linearly | deforming mesh |
//! | `m vertices … [normals …] [texturecoords n tex …] triangles …` | indexed mesh; per triangle vertex, normal and uv indices | mesh |
//! | `c`, `s` | cone (no caps), sphere | tessellated (32 sides; icosphere level 3) |
//! | `i level file`, `d level` | include (relative to the including file) when its level ≤ the detail level (0) | recursive |
//! | `xs s… axis… deg t… {`, `x name {`, `}` | static `T·R·S` group, keyframed group | transform hierarchy |
//! | `k name { transl/rot/scale/visibility n … }` | keyframes of a group, of `camera` or of a light | TCB splines |
//! | `a start end frames` | the clock | [`Timeline`] |
//!
//! Geometry outside keyframed groups is transformed to world space once;
//! geometry inside one keeps its local coordinates and becomes an animated
//! mesh of the scene's [`crate::Animation`], posed by the group's world
//! transform. Unknown statements are skipped with a warning naming the
//! file and line; malformed ones are errors naming them.
//!
//! Light intensity: NFF lights have "a non-zero intensity of no particular
//! value" and no fall-off (Haines's SPD renders): a colour is what a light
//! delivers. caustic's point lights are radiometric and fall off with the
//! squared distance, so a light of colour `c` gets intensity `c · r²`, `r`
//! its distance to the centre of the scene's bounds (at the start of the
//! clock): the scene's centre receives the irradiance the file names.
//!
//! Surfaces that let light through without refracting (`T ≥ 0.5`, index
//! below 1: the robots' sky, with the city's only light above it) cannot
//! pass light in caustic, so they glow instead (`aff/material.rs`):
//! emission `ambient · am + T · E / π`, `E` the area-weighted mean
//! irradiance the point lights (at the start of the clock) deliver onto
//! the surface, ignoring occlusion.

mod keys;
mod lexer;
mod material;
mod shapes;

use super::input::read_text_bytes;
use crate::{Camera, ErrorKind, FilmSize, FovAxis, Light, Scene, SceneError, Timeline, Warning};
use caustic_geom::{Mat4, Rgb, Vec3};
use glam::Quat;
use keys::Keys;
use lexer::Cursor;
use material::AffMaterial;
use shapes::Batches;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Deepest include nesting (a file that includes itself fails here).
const MAX_INCLUDE_DEPTH: usize = 32;

pub(crate) fn load(path: &Path) -> Result<Scene, SceneError> {
    let mut loader = Loader::new(path);
    let result = loader
        .include(path, 0)
        .and_then(|()| loader.check_groups_closed())
        .and_then(|()| loader.finish());
    match result {
        Ok(scene) => Ok(scene),
        Err(e) => Err(e.with_warnings(std::mem::take(&mut loader.warnings))),
    }
}

/// A transform group: a static matrix or a named (keyframed) group.
#[derive(Clone, Debug)]
enum GroupKind {
    Static(Mat4),
    Named(String),
}

#[derive(Clone, Debug)]
struct Group {
    parent: Option<u32>,
    kind: GroupKind,
    /// World matrix when no ancestor (nor itself) is named.
    world: Option<Mat4>,
    /// Where it was opened.
    path: PathBuf,
    line: u32,
}

/// State of one AFF load (all included files together).
struct Loader {
    top: PathBuf,
    scene: Scene,
    warnings: Vec<Warning>,
    materials: Vec<AffMaterial>,
    material_index: HashMap<[u32; 12], usize>,
    current_material: Option<usize>,
    /// Scene material of each (AFF material, texture).
    scene_materials: HashMap<(Option<usize>, Option<u32>), u32>,
    /// Scene texture of each texture name (`None`: unreadable).
    textures: HashMap<String, Option<u32>>,
    groups: Vec<Group>,
    /// Open groups (innermost last) and where each was opened.
    open: Vec<(u32, PathBuf, u32)>,
    batches: Batches,
    keys: Keys,
    /// `la` lights: (index in scene.lights, name, file, line).
    named_lights: Vec<(usize, String, PathBuf, u32)>,
    clock: Option<Timeline>,
    /// `am`: the global ambient light (BART's default is white).
    ambient_light: Rgb,
    detail: i64,
    /// Text of each file read, shared by its includes (BART's robots
    /// include each limb file ten times).
    files: HashMap<PathBuf, Arc<str>>,
    /// Numbers a file's first statement of a kind warned about, to warn
    /// once per kind and file.
    warned: HashMap<(PathBuf, String), usize>,
}

impl Loader {
    fn new(top: &Path) -> Self {
        Self {
            top: top.to_path_buf(),
            scene: Scene::default(),
            warnings: Vec::new(),
            materials: Vec::new(),
            material_index: HashMap::new(),
            current_material: None,
            scene_materials: HashMap::new(),
            textures: HashMap::new(),
            groups: Vec::new(),
            open: Vec::new(),
            batches: Batches::default(),
            keys: Keys::default(),
            named_lights: Vec::new(),
            clock: None,
            ambient_light: Rgb::ONE,
            detail: 0,
            files: HashMap::new(),
            warned: HashMap::new(),
        }
    }

    /// A warning at a line; repeats of one message in one file are
    /// counted into the first (a file with a thousand unknown lines says
    /// so once, with the first line and a count).
    fn warn(&mut self, path: &Path, line: u32, message: String) {
        let key = (path.to_path_buf(), message.clone());
        if let Some(&i) = self.warned.get(&key) {
            self.warnings[i].count += 1;
            return;
        }
        self.warned.insert(key, self.warnings.len());
        self.warnings
            .push(Warning::new(path, message).at(format!("line {line}")));
    }

    /// Parses a file (the top-level one or an include) into the state.
    fn include(&mut self, path: &Path, depth: usize) -> Result<(), SceneError> {
        let text = self.read(path)?;
        let mut cursor = Cursor::new(path, &text);
        while let Some(token) = cursor.next() {
            self.statement(token.text, token.line, &mut cursor, depth)?;
        }
        Ok(())
    }

    fn read(&mut self, path: &Path) -> Result<Arc<str>, SceneError> {
        if let Some(text) = self.files.get(path) {
            return Ok(text.clone());
        }
        let bytes = read_text_bytes(path)?;
        // Latin-1 in comments is common in these old files: decode lossily
        // rather than refuse the file for a byte no statement uses.
        let text: Arc<str> = String::from_utf8_lossy(&bytes).into();
        self.files.insert(path.to_path_buf(), text.clone());
        Ok(text)
    }

    fn statement(
        &mut self,
        word: &str,
        line: u32,
        c: &mut Cursor,
        depth: usize,
    ) -> Result<(), SceneError> {
        match word {
            "v" => self.view(c),
            "b" => {
                self.scene.background = Rgb::from(c.vec3("background colour")?);
                Ok(())
            }
            "l" => self.light(c, None),
            "la" => {
                let name = c.word("the light's name")?.text.to_string();
                self.light(c, Some((name, line)))
            }
            "am" => {
                self.ambient_light = Rgb::from(c.vec3("ambient colour")?);
                let path = c.path.clone();
                self.warn(
                    &path,
                    line,
                    "global ambient light (am): caustic has no ambient term; it only scales the glow of surfaces that let light through".into(),
                );
                Ok(())
            }
            "a" => self.clock(c, line),
            "f" | "fm" => self.fill(c, word == "fm"),
            "p" | "pp" => self.polygon(c, word == "pp"),
            "tt" | "ttp" => self.textured_triangle(c, word == "ttp"),
            "tpa" => self.animated_triangle(c),
            "m" => self.mesh(c),
            "c" => self.cone(c),
            "s" => self.sphere(c),
            "i" => self.include_statement(c, line, depth),
            "d" => {
                self.detail = c.count("detail level", i32::MAX as usize)? as i64;
                Ok(())
            }
            "xs" => self.static_group(c, line),
            "x" => {
                let name = c.word("the transform's name")?.text.to_string();
                c.expect("{", "after 'x name'")?;
                self.open_group(GroupKind::Named(name), &c.path.clone(), line);
                Ok(())
            }
            "}" => self.close_group(c, line),
            "k" => self.keyframes(c, line),
            _ => {
                self.skip_unknown(word, line, c);
                Ok(())
            }
        }
    }

    /// Skips an unknown statement: its numbers (up to the next word, which
    /// starts the next statement), or a `{ … }` block that follows it
    /// directly.
    fn skip_unknown(&mut self, word: &str, line: u32, c: &mut Cursor) {
        let path = c.path.clone();
        self.warn(&path, line, format!("unknown statement '{word}'; skipped"));
        if c.peek().is_some_and(|t| t.text == "{") {
            let mut depth = 0usize;
            while let Some(t) = c.next() {
                match t.text {
                    "{" => depth += 1,
                    "}" => {
                        depth -= 1;
                        if depth == 0 {
                            return;
                        }
                    }
                    _ => {}
                }
            }
            return;
        }
        while c.next_is_number() {
            c.next();
        }
    }

    fn view(&mut self, c: &mut Cursor) -> Result<(), SceneError> {
        let line = c.line();
        let (mut from, mut at, mut up, mut angle) = (None, None, None, None);
        while let Some(t) = c.peek() {
            match t.text {
                "from" => from = Some(skip_then(c, |c| c.vec3("view 'from'"))?),
                "at" => at = Some(skip_then(c, |c| c.vec3("view 'at'"))?),
                "up" => up = Some(skip_then(c, |c| c.vec3("view 'up'"))?),
                "angle" => angle = Some(skip_then(c, |c| c.number("view 'angle'"))?),
                "hither" | "yon" => {
                    skip_then(c, |c| c.number("view 'hither'"))?;
                }
                "resolution" => {
                    c.next();
                    let w = c.count("horizontal resolution", 1 << 16)?;
                    let h = c.count("vertical resolution", 1 << 16)?;
                    if w > 0 && h > 0 {
                        self.scene.film = Some(FilmSize {
                            width: w as u32,
                            height: h as u32,
                        });
                    }
                }
                _ => break,
            }
        }
        let (Some(eye), Some(target), Some(up), Some(fov)) = (from, at, up, angle) else {
            return Err(c.error_at(
                line,
                ErrorKind::Syntax,
                "view 'v' needs 'from', 'at', 'up' and 'angle'",
            ));
        };
        // AFF: with unequal width and height the angle spans the vertical.
        let camera = Camera {
            eye,
            target,
            up,
            fov_deg: fov,
            fov_axis: FovAxis::Y,
        };
        if !camera.is_valid() {
            return Err(c.error_at(
                line,
                ErrorKind::InvalidValue,
                format!("degenerate view (from {eye}, at {target}, up {up}, angle {fov}°)"),
            ));
        }
        self.scene.camera = Some(camera);
        Ok(())
    }

    fn light(&mut self, c: &mut Cursor, name: Option<(String, u32)>) -> Result<(), SceneError> {
        let line = c.line();
        let position = c.vec3("light position")?;
        let colour = if c.next_is_number() {
            Rgb::from(c.vec3("light colour")?)
        } else {
            Rgb::ONE
        };
        if !self.open.is_empty() {
            let path = c.path.clone();
            self.warn(
                &path,
                line,
                "light inside a transform group: taken in world coordinates, as BART's parser does"
                    .into(),
            );
        }
        if let Some((name, line)) = name {
            self.named_lights
                .push((self.scene.lights.len(), name, c.path.clone(), line));
        }
        // Scaled to an intensity in `finish` (module docs).
        self.scene.lights.push(Light::Point {
            position,
            intensity: colour,
        });
        Ok(())
    }

    fn clock(&mut self, c: &mut Cursor, line: u32) -> Result<(), SceneError> {
        let start = c.number("animation start time")?;
        let end = c.number("animation end time")?;
        let frames = c.count("frame count", u32::MAX as usize)?;
        if end < start || frames == 0 {
            return Err(c.error_at(
                line,
                ErrorKind::InvalidValue,
                format!("animation clock 'a {start} {end} {frames}': needs end ≥ start and at least one frame"),
            ));
        }
        self.clock = Some(Timeline {
            start,
            end,
            frames: frames as u32,
        });
        Ok(())
    }

    fn fill(&mut self, c: &mut Cursor, extended: bool) -> Result<(), SceneError> {
        let line = c.line();
        let m = if extended {
            let ambient = Rgb::from(c.vec3("ambient colour")?);
            let diffuse = Rgb::from(c.vec3("diffuse colour")?);
            let specular = Rgb::from(c.vec3("specular colour")?);
            AffMaterial {
                ambient,
                diffuse,
                specular,
                shine: c.number("shine")?,
                transmittance: c.number("transmittance")?,
                ior: c.number("index of refraction")?,
            }
        } else {
            let colour = Rgb::from(c.vec3("fill colour")?);
            let kd = c.number("Kd")?;
            let ks = c.number("Ks")?;
            AffMaterial {
                ambient: Rgb::ZERO,
                diffuse: colour * kd,
                specular: Rgb::splat(ks),
                shine: c.number("shine")?,
                transmittance: c.number("transmittance")?,
                ior: c.number("index of refraction")?,
            }
        };
        if m.ignored_transparency() {
            let path = c.path.clone();
            self.warn(
                &path,
                line,
                format!(
                    "transmittance {} with index {}: partial transparency is not supported; opaque",
                    m.transmittance, m.ior
                ),
            );
        }
        if m.glows() {
            let path = c.path.clone();
            self.warn(
                &path,
                line,
                format!(
                    "transmittance {} without refraction (index {}): caustic has no partial transparency; the surface glows with its ambient colour and the light it would let through",
                    m.transmittance, m.ior
                ),
            );
        }
        let next = self.materials.len();
        let index = *self.material_index.entry(m.key()).or_insert(next);
        if index == next {
            self.materials.push(m);
        }
        self.current_material = Some(index);
        Ok(())
    }

    /// The scene material for the current AFF material with `texture`.
    fn material_id(&mut self, texture: Option<u32>) -> u32 {
        let key = (self.current_material, texture);
        if let Some(&id) = self.scene_materials.get(&key) {
            return id;
        }
        let id = self.scene.materials.len() as u32;
        let tex_name = texture.map(|t| self.scene.textures[t as usize].name.clone());
        let material = match self.current_material {
            Some(i) => {
                let name = match &tex_name {
                    Some(t) => format!("fm{i}+{t}"),
                    None => format!("fm{i}"),
                };
                self.materials[i].material(name, texture)
            }
            None => crate::Material::with_bsdf(
                "default",
                crate::Bsdf::Diffuse {
                    albedo: Rgb::splat(0.5),
                    texture,
                },
            ),
        };
        self.scene.materials.push(material);
        self.scene_materials.insert(key, id);
        id
    }

    /// The texture named by a statement: next to the file, else in the
    /// `TextureFiles` folder beside or above it (BART's layout). Unreadable
    /// ones warn once and leave the surface untextured.
    fn texture(&mut self, name: &str, c: &Cursor, line: u32) -> Option<u32> {
        if let Some(&id) = self.textures.get(name) {
            return id;
        }
        let dir = c.path.parent().map(Path::to_path_buf).unwrap_or_default();
        let candidates = [
            dir.join(name),
            dir.join("TextureFiles").join(name),
            dir.join("../TextureFiles").join(name),
        ];
        let found = candidates.iter().find(|p| p.is_file());
        let id = match found.map(|p| load_texture(p, name)) {
            Some(Ok(texture)) => {
                self.scene.textures.push(texture);
                Some(self.scene.textures.len() as u32 - 1)
            }
            Some(Err(why)) => {
                self.warn(
                    &c.path,
                    line,
                    format!("texture '{name}': {why}; untextured"),
                );
                None
            }
            None => {
                self.warn(
                    &c.path,
                    line,
                    format!("texture '{name}' not found (looked beside the file and in TextureFiles); untextured"),
                );
                None
            }
        };
        self.textures.insert(name.to_string(), id);
        id
    }

    fn include_statement(
        &mut self,
        c: &mut Cursor,
        line: u32,
        depth: usize,
    ) -> Result<(), SceneError> {
        let level = c.word("include detail level")?;
        let level: i64 = level.text.parse().map_err(|_| {
            c.error_at(
                level.line,
                ErrorKind::Syntax,
                format!("expected a detail level, found '{}'", level.text),
            )
        })?;
        let name = c.word("the included file's name")?.text;
        if level > self.detail {
            return Ok(());
        }
        if depth >= MAX_INCLUDE_DEPTH {
            return Err(c.error_at(
                line,
                ErrorKind::InvalidValue,
                format!("includes nest deeper than {MAX_INCLUDE_DEPTH} files (does '{name}' include itself?)"),
            ));
        }
        let dir = c.path.parent().map(Path::to_path_buf).unwrap_or_default();
        let target = dir.join(name);
        if !target.is_file() {
            return Err(c.error_at(
                line,
                ErrorKind::MissingReference,
                format!("included file '{}' not found", target.display()),
            ));
        }
        self.batches.begin_file(&target);
        let result = self.include(&target, depth + 1);
        self.batches.end_file();
        result
    }

    fn static_group(&mut self, c: &mut Cursor, line: u32) -> Result<(), SceneError> {
        let scale = c.vec3("static transform scale")?;
        let axis = c.vec3("static transform rotation axis")?;
        let degrees = c.number("static transform angle")?;
        let translation = c.vec3("static transform translation")?;
        c.expect("{", "after a static transform 'xs'")?;
        let rotation = match axis.try_normalize() {
            Some(axis) => Quat::from_axis_angle(axis, degrees.to_radians()),
            None => Quat::IDENTITY,
        };
        let m = Mat4::from_scale_rotation_translation(scale, rotation, translation);
        self.open_group(GroupKind::Static(m), &c.path.clone(), line);
        Ok(())
    }

    fn open_group(&mut self, kind: GroupKind, path: &Path, line: u32) {
        let parent = self.open.last().map(|&(g, _, _)| g);
        let parent_world = match parent {
            Some(p) => self.groups[p as usize].world,
            None => Some(Mat4::IDENTITY),
        };
        let world = match (&kind, parent_world) {
            (GroupKind::Static(m), Some(pw)) => Some(pw * *m),
            _ => None,
        };
        self.groups.push(Group {
            parent,
            kind,
            world,
            path: path.to_path_buf(),
            line,
        });
        self.open
            .push((self.groups.len() as u32 - 1, path.to_path_buf(), line));
    }

    fn close_group(&mut self, c: &Cursor, line: u32) -> Result<(), SceneError> {
        match self.open.pop() {
            Some(_) => Ok(()),
            None => Err(c.error_at(line, ErrorKind::Syntax, "'}' closes no transform group")),
        }
    }

    fn check_groups_closed(&self) -> Result<(), SceneError> {
        match self.open.last() {
            Some((_, path, line)) => Err(SceneError::new(
                ErrorKind::Truncated,
                path,
                "transform group opened here is never closed with '}'",
            )
            .at(format!("line {line}"))),
            None => Ok(()),
        }
    }

    /// Where new geometry goes: the innermost open group, and the static
    /// world matrix when no keyframed group encloses it.
    fn placement(&self) -> (Option<u32>, Option<Mat4>) {
        match self.open.last() {
            Some(&(g, _, _)) => (Some(g), self.groups[g as usize].world),
            None => (None, Some(Mat4::IDENTITY)),
        }
    }
}

/// Consumes the keyword the caller peeked, then reads its value.
fn skip_then<T>(
    c: &mut Cursor,
    read: impl FnOnce(&mut Cursor) -> Result<T, SceneError>,
) -> Result<T, SceneError> {
    c.next();
    read(c)
}

/// Decodes a texture image (PPM in BART; any format the `image` crate was
/// built with) as sRGB to linear texels.
fn load_texture(path: &Path, name: &str) -> Result<crate::Texture, String> {
    let bytes = super::input::read_file(path).map_err(|e| e.message)?;
    let (width, height, texels) = crate::texture::decode_srgb(&bytes)?;
    Ok(crate::Texture {
        name: name.to_string(),
        width,
        height,
        texels,
    })
}

impl Loader {
    /// Lights to intensities (module docs), geometry into meshes,
    /// keyframes into the animation.
    fn finish(&mut self) -> Result<Scene, SceneError> {
        let mut scene = std::mem::take(&mut self.scene);
        let animation = keys::build(self, &mut scene)?;
        let centre = scene.bounds().center();
        let centre = if centre.is_finite() {
            centre
        } else {
            Vec3::ZERO
        };
        for light in &mut scene.lights {
            if let Light::Point {
                position,
                intensity,
            } = light
            {
                let r2 = position.distance_squared(centre).max(1e-6);
                *intensity *= r2;
            }
        }
        self.glow(&mut scene);
        if let Some(animation) = animation {
            scene.animation = Some(Arc::new(animation));
        }
        scene.warnings = std::mem::take(&mut self.warnings);
        Ok(scene)
    }
}

impl Loader {
    /// Emission of the surfaces that let light through without refracting
    /// (module docs): `ambient · am + T · E / π`, `E` the area-weighted mean
    /// over their triangles (as posed at the start) of the irradiance the
    /// point lights deliver, from either side and without occlusion.
    fn glow(&self, scene: &mut Scene) {
        let mut glowing: Vec<(u32, usize)> = self
            .scene_materials
            .iter()
            .filter_map(|(&(m, _), &id)| {
                let m = m?;
                self.materials[m].glows().then_some((id, m))
            })
            .collect();
        glowing.sort_unstable();
        for (id, m) in glowing {
            let mut area = 0.0f32;
            let mut power = Rgb::ZERO;
            for mesh in &scene.meshes {
                for (t, _) in mesh
                    .material_ids
                    .iter()
                    .enumerate()
                    .filter(|&(_, &mid)| mid == id)
                {
                    let triangle = mesh.triangle(t);
                    let (Some(normal), a) = (triangle.normal(), triangle.area()) else {
                        continue;
                    };
                    let centre = triangle.centroid();
                    area += a;
                    for light in &scene.lights {
                        if let Light::Point {
                            position,
                            intensity,
                        } = light
                        {
                            let d = *position - centre;
                            let d2 = d.length_squared().max(1e-6);
                            let cos = normal.dot(d).abs() / d2.sqrt();
                            power += *intensity * (a * cos / d2);
                        }
                    }
                }
            }
            let irradiance = if area > 0.0 {
                power * (1.0 / area)
            } else {
                Rgb::ZERO
            };
            let material = &self.materials[m];
            let emission = material.ambient * self.ambient_light
                + irradiance * (material.transmittance / std::f32::consts::PI);
            if emission.is_finite() {
                scene.materials[id as usize].emission = emission;
            }
        }
    }
}
