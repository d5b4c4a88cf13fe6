//! Wavefront OBJ + MTL loader, on top of the `tobj` crate.
//!
//! OBJ is line based: `v x y z` positions, `vt u [v]` texture coordinates,
//! `vn x y z` normals, `f a b c ...` polygons whose corners are `v`, `v/vt`,
//! `v//vn` or `v/vt/vn` with 1-based indices (negative ones count back from
//! the last element defined so far), `o`/`g` names, `usemtl` picking a
//! material from the `mtllib` files, `#` comments. Polygons are fan
//! triangulated; points and lines are ignored. Each tobj model (an object,
//! group or `usemtl` run) becomes one [`Mesh`].
//!
//! MTL maps onto caustic's BSDFs: `illum 3`/`5` is a mirror (reflectance
//! `Ks`), `illum 4`/`6`/`7` a dielectric (`Ni`, tinted by `Tf`), otherwise a
//! non-zero `Ks` gives a Phong-glossy surface (`Ns` the exponent) and the
//! rest is Lambertian (`Kd`, `map_Kd`). `Ke` is emitted radiance. OBJ
//! materials are two-sided.
//!
//! tobj gives no line numbers, panics on some malformed input (an MTL
//! colour with fewer than three numbers; absurd indices overflow in debug
//! builds) and splits `usemtl`/`mtllib` at a single space, so indented or
//! tab-separated files lose names. So a pre-pass reads each file once,
//! checks every statement caustic uses (with its line number), and hands
//! tobj a normalised copy: one statement per line, words separated by one
//! space, no comments, only the statements caustic reads.

use crate::error::ErrorKind;
use crate::{Bsdf, Material, Mesh, Scene, SceneError, Texture, TextureId, Warning};
use caustic_geom::{Rgb, Vec2, Vec3};
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Loads an OBJ file with its MTL materials as a scene.
pub(crate) fn load(path: &Path) -> Result<Scene, SceneError> {
    let mut warnings = Vec::new();
    let source = read_text(path, &mut warnings)?;
    let obj = prepare_obj(path, &source, &mut warnings)?;
    let libraries = load_libraries(path, &obj, &mut warnings)?;
    let (models, mtl_materials) = parse_with_tobj(path, &obj.text, &libraries)?;

    let mut textures = TextureCache::default();
    let mut materials: Vec<Material> = mtl_materials
        .iter()
        .map(|m| convert_material(m, path, &mut textures, &mut warnings))
        .collect();
    // Faces without a (known) material share one default, appended once.
    let mut default_id = None;
    let mut meshes = Vec::with_capacity(models.len());
    for model in models {
        let id = match model.mesh.material_id {
            Some(id) if id < materials.len() => id,
            _ => *default_id.get_or_insert_with(|| {
                materials.push(Material::default_grey());
                materials.len() - 1
            }),
        };
        if let Some(mesh) = model_to_mesh(model, id as u32, path, &mut warnings) {
            meshes.push(mesh);
        }
    }
    Ok(Scene {
        meshes,
        materials,
        textures: textures.textures,
        warnings,
        ..Scene::default()
    })
}

/// Reads only the geometry of an OBJ file as one mesh (all groups merged,
/// MTL ignored, `material_ids` all 0): what Mitsuba's `<shape type="obj">`
/// needs.
pub(crate) fn read_obj_geometry(
    path: &Path,
    warnings: &mut Vec<Warning>,
) -> Result<Mesh, SceneError> {
    let source = read_text(path, warnings)?;
    let obj = prepare_obj(path, &source, warnings)?;
    let (models, _) = parse_with_tobj(path, &obj.text, &HashMap::new())?;
    let parts: Vec<Mesh> = models
        .into_iter()
        .filter_map(|model| model_to_mesh(model, 0, path, warnings))
        .collect();
    let mut mesh = merge_meshes(parts, path, warnings);
    mesh.name = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(mesh)
}

/// Reads a text file; bytes that are not UTF-8 (Latin-1 comments, say) are
/// replaced, with one warning, rather than failing the whole file.
fn read_text(path: &Path, warnings: &mut Vec<Warning>) -> Result<String, SceneError> {
    let bytes = std::fs::read(path).map_err(|e| SceneError::io(path, &e))?;
    Ok(match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => {
            warnings.push(Warning::new(
                path,
                "file is not valid UTF-8; invalid bytes replaced",
            ));
            String::from_utf8_lossy(e.as_bytes()).into_owned()
        }
    })
}

// ------------------------------------------------------------ pre-pass --

/// An error found on one line: its class and message.
type LineError = (ErrorKind, String);

fn at_line(path: &Path, line: usize, (kind, message): LineError) -> SceneError {
    SceneError::new(kind, path, message).at(format!("line {line}"))
}

fn syntax(message: impl Into<String>) -> LineError {
    (ErrorKind::Syntax, message.into())
}

/// Splits a statement into its keyword and the rest, both trimmed.
fn split_statement(line: &str) -> (&str, &str) {
    let line = line.trim();
    match line.find(|c: char| c.is_whitespace()) {
        Some(i) => (&line[..i], line[i..].trim()),
        None => (line, ""),
    }
}

/// The part of a numeric statement before a trailing `#` comment.
fn strip_comment(text: &str) -> &str {
    text.find('#').map_or(text, |i| &text[..i])
}

/// An OBJ file after the pre-pass.
struct PreparedObj {
    /// The normalised text handed to tobj.
    text: String,
    /// `mtllib` file names in file order, with their lines.
    libraries: Vec<(String, usize)>,
    /// Each distinct `usemtl` name with the line of its first use.
    used_materials: Vec<(String, usize)>,
}

/// Statements skipped because caustic does not render them, reported once.
#[derive(Default)]
struct Ignored {
    count: usize,
    first: Option<(usize, String)>,
}

impl Ignored {
    fn note(&mut self, line: usize, keyword: &str) {
        self.count += 1;
        self.first
            .get_or_insert_with(|| (line, keyword.to_string()));
    }

    fn warn(self, path: &Path, warnings: &mut Vec<Warning>) {
        if let Some((line, keyword)) = self.first {
            warnings.push(Warning::new(
                path,
                format!(
                    "ignored {} statement(s) caustic does not render (points, lines, faces with fewer than 3 corners, free-form geometry; first: '{keyword}' at line {line})",
                    self.count
                ),
            ));
        }
    }
}

/// Checks every statement and writes the normalised copy for tobj.
fn prepare_obj(
    path: &Path,
    source: &str,
    warnings: &mut Vec<Warning>,
) -> Result<PreparedObj, SceneError> {
    let mut obj = PreparedObj {
        text: String::with_capacity(source.len()),
        libraries: Vec::new(),
        used_materials: Vec::new(),
    };
    let mut seen_materials = HashSet::new();
    // How many v, vt, vn are defined so far: relative indices count back
    // from these, and indices may not point past them.
    let mut defined = [0usize; 3];
    let mut ignored = Ignored::default();
    for (i, line) in source.lines().enumerate() {
        let line_no = i + 1;
        let (keyword, rest) = split_statement(line);
        let out = &mut obj.text;
        let result = match keyword {
            "v" => write_numbers(out, "v", strip_comment(rest), 3, 3).map(|()| defined[0] += 1),
            "vt" => write_numbers(out, "vt", strip_comment(rest), 1, 2).map(|()| defined[1] += 1),
            "vn" => write_numbers(out, "vn", strip_comment(rest), 3, 3).map(|()| defined[2] += 1),
            "f" => write_face(out, strip_comment(rest), &defined).map(|written| {
                if !written {
                    ignored.note(line_no, keyword);
                }
            }),
            "o" | "g" => {
                let _ = writeln!(out, "{keyword} {rest}");
                Ok(())
            }
            "usemtl" | "mtllib" if rest.is_empty() => {
                Err(syntax(format!("'{keyword}' without a name")))
            }
            "usemtl" => {
                if seen_materials.insert(rest) {
                    obj.used_materials.push((rest.to_string(), line_no));
                }
                let _ = writeln!(out, "usemtl {rest}");
                Ok(())
            }
            "mtllib" => {
                obj.libraries.push((rest.to_string(), line_no));
                let _ = writeln!(out, "mtllib {rest}");
                Ok(())
            }
            // Smoothing groups only matter to normal generation.
            "" | "s" => Ok(()),
            _ if keyword.starts_with('#') => Ok(()),
            _ => {
                ignored.note(line_no, keyword);
                Ok(())
            }
        };
        result.map_err(|e| at_line(path, line_no, e))?;
    }
    ignored.warn(path, warnings);
    Ok(obj)
}

/// Writes `keyword` and its first `keep` numbers, padding with zeros (a
/// `vt` may omit `v`); all words must be numbers and at least `need` given.
/// Extra numbers (a `w` weight, vertex colours) are checked and dropped.
fn write_numbers(
    out: &mut String,
    keyword: &str,
    rest: &str,
    need: usize,
    keep: usize,
) -> Result<(), LineError> {
    let start = out.len();
    out.push_str(keyword);
    let mut count = 0;
    for word in rest.split_whitespace() {
        if word.parse::<f32>().is_err() {
            out.truncate(start);
            return Err(syntax(format!("'{keyword}': '{word}' is not a number")));
        }
        if count < keep {
            out.push(' ');
            out.push_str(word);
        }
        count += 1;
    }
    if count < need {
        out.truncate(start);
        return Err(syntax(format!(
            "'{keyword}' needs at least {need} numbers, found {count}"
        )));
    }
    for _ in count..keep {
        out.push_str(" 0");
    }
    out.push('\n');
    Ok(())
}

/// Checks a face's corners and writes it; returns `false` (and writes
/// nothing) for faces with fewer than three corners.
fn write_face(out: &mut String, rest: &str, defined: &[usize; 3]) -> Result<bool, LineError> {
    let mut corners = 0;
    for corner in rest.split_whitespace() {
        check_corner(corner, defined)?;
        corners += 1;
    }
    if corners < 3 {
        return Ok(false);
    }
    out.push('f');
    for corner in rest.split_whitespace() {
        out.push(' ');
        out.push_str(corner);
    }
    out.push('\n');
    Ok(true)
}

/// Checks one `v[/vt[/vn]]` corner against the elements defined so far.
fn check_corner(corner: &str, defined: &[usize; 3]) -> Result<(), LineError> {
    const WHAT: [&str; 3] = ["vertex", "texture coordinate", "normal"];
    for (slot, part) in corner.split('/').enumerate() {
        if slot >= 3 {
            return Err(syntax(format!(
                "face corner '{corner}' has more than three indices"
            )));
        }
        if part.is_empty() {
            if slot == 0 {
                return Err(syntax(format!(
                    "face corner '{corner}' has no vertex index"
                )));
            }
            continue;
        }
        let index: i64 = part
            .parse()
            .map_err(|_| syntax(format!("face corner '{corner}': '{part}' is not an index")))?;
        check_index(index, defined[slot], WHAT[slot])?;
    }
    Ok(())
}

/// A 1-based index must name an element defined so far; a negative one
/// counts back from the last (-1 is the last).
fn check_index(index: i64, defined: usize, what: &str) -> Result<(), LineError> {
    let reach = index.unsigned_abs();
    if index != 0 && reach <= defined as u64 {
        return Ok(());
    }
    let message = if index == 0 {
        format!("{what} index 0 is invalid (OBJ indices start at 1)")
    } else {
        format!("{what} index {index} is out of range: {defined} defined before this line")
    };
    Err((ErrorKind::IndexOutOfRange, message))
}

// -------------------------------------------------------------- MTL ----

/// A parsed material library, as tobj's loader callback returns it
/// (always `Ok`: failures are handled before tobj sees them).
type Library = tobj::MTLLoadResult;

/// Reads every `mtllib` file, keyed by the name tobj will ask for. A missing
/// library is a warning: its materials fall back to the default.
fn load_libraries(
    obj_path: &Path,
    obj: &PreparedObj,
    warnings: &mut Vec<Warning>,
) -> Result<HashMap<PathBuf, Library>, SceneError> {
    let dir = obj_path.parent().unwrap_or(Path::new(""));
    let mut libraries = HashMap::new();
    let mut all_found = true;
    for (name, line) in &obj.libraries {
        let file = dir.join(portable(name));
        let source = match std::fs::read(&file) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(e) => {
                warnings.push(
                    Warning::new(
                        obj_path,
                        format!(
                            "cannot read material library '{}' ({e}); using the default material",
                            file.display()
                        ),
                    )
                    .at(format!("line {line}")),
                );
                all_found = false;
                continue;
            }
        };
        let text = prepare_mtl(&file, &source)?;
        let library = tobj::load_mtl_buf(&mut text.as_bytes())
            .map_err(|e| SceneError::new(ErrorKind::Syntax, &file, format!("MTL parser: {e}")))?;
        libraries.insert(PathBuf::from(name), Ok(library));
    }
    // Unknown names are worth a line each only when every library loaded;
    // otherwise the missing library already explains them.
    if all_found {
        for (name, line) in &obj.used_materials {
            let defines = |lib: &Library| {
                lib.as_ref()
                    .is_ok_and(|(_, names)| names.contains_key(name))
            };
            if !libraries.values().any(defines) {
                warnings.push(
                    Warning::new(
                        obj_path,
                        format!("material '{name}' is not defined; using the default material"),
                    )
                    .at(format!("line {line}")),
                );
            }
        }
    }
    Ok(libraries)
}

/// Files written on Windows use `\` in paths.
fn portable(name: &str) -> PathBuf {
    PathBuf::from(name.replace('\\', "/"))
}

/// Checks an MTL file and writes the normalised copy for tobj: only the
/// statements caustic maps (`Ka`, `d`, bump maps and the like are dropped
/// unchecked), with `map_Kd` paths resolved against the MTL file's folder.
fn prepare_mtl(path: &Path, source: &str) -> Result<String, SceneError> {
    let dir = path.parent().unwrap_or(Path::new(""));
    let mut out = String::with_capacity(source.len());
    for (i, line) in source.lines().enumerate() {
        let (keyword, rest) = split_statement(line);
        let result = match keyword {
            "newmtl" if rest.is_empty() => Err(syntax("'newmtl' without a name")),
            "newmtl" => {
                let _ = writeln!(out, "newmtl {rest}");
                Ok(())
            }
            "Kd" | "Ks" | "Ke" | "Tf" => write_colour(&mut out, keyword, strip_comment(rest)),
            "Ns" | "Ni" => write_scalar(&mut out, keyword, strip_comment(rest)),
            "illum" => match strip_comment(rest).trim().parse::<u8>() {
                Ok(model) => {
                    let _ = writeln!(out, "illum {model}");
                    Ok(())
                }
                Err(_) => Err(syntax(format!(
                    "'illum {rest}': expected an illumination model number"
                ))),
            },
            "map_Kd" => {
                if let Some(file) = texture_file(rest) {
                    let _ = writeln!(out, "map_Kd {}", dir.join(portable(file)).display());
                }
                Ok(())
            }
            _ => Ok(()),
        };
        result.map_err(|e| at_line(path, i + 1, e))?;
    }
    Ok(out)
}

/// An MTL colour: one number (grey) or three, finite and non-negative.
fn write_colour(out: &mut String, keyword: &str, rest: &str) -> Result<(), LineError> {
    let mut rgb = [0f32; 3];
    let mut count = 0;
    for word in rest.split_whitespace().take(3) {
        rgb[count] = parse_value(keyword, word)?;
        if rgb[count] < 0.0 {
            return Err((
                ErrorKind::InvalidValue,
                format!("'{keyword}': negative value {word}"),
            ));
        }
        count += 1;
    }
    match count {
        1 => rgb = [rgb[0]; 3],
        3 => {}
        _ => {
            return Err(syntax(format!(
                "'{keyword}' needs 1 or 3 numbers, found {count}"
            )));
        }
    }
    let _ = writeln!(out, "{keyword} {} {} {}", rgb[0], rgb[1], rgb[2]);
    Ok(())
}

/// An MTL scalar (`Ns`, `Ni`): one finite, non-negative number.
fn write_scalar(out: &mut String, keyword: &str, rest: &str) -> Result<(), LineError> {
    let word = rest
        .split_whitespace()
        .next()
        .ok_or_else(|| syntax(format!("'{keyword}' needs a number")))?;
    let value = parse_value(keyword, word)?;
    if value < 0.0 {
        return Err((
            ErrorKind::InvalidValue,
            format!("'{keyword}': negative value {word}"),
        ));
    }
    let _ = writeln!(out, "{keyword} {value}");
    Ok(())
}

fn parse_value(keyword: &str, word: &str) -> Result<f32, LineError> {
    let value: f32 = word
        .parse()
        .map_err(|_| syntax(format!("'{keyword}': '{word}' is not a number")))?;
    if value.is_finite() {
        Ok(value)
    } else {
        Err((
            ErrorKind::InvalidValue,
            format!("'{keyword}': {word} is not finite"),
        ))
    }
}

/// The file of a texture statement: options (`-s 1 1 1 file.png`) come
/// first, so with options the name is the last word; without, the whole
/// rest (names may contain spaces).
fn texture_file(rest: &str) -> Option<&str> {
    if rest.starts_with('-') {
        rest.split_whitespace().last()
    } else {
        Some(rest).filter(|r| !r.is_empty())
    }
}

// --------------------------------------------------------------- tobj --

/// Runs tobj on the normalised text; `libraries` answers its `mtllib`
/// requests (names it does not know give no materials).
fn parse_with_tobj(
    path: &Path,
    text: &str,
    libraries: &HashMap<PathBuf, Library>,
) -> Result<(Vec<tobj::Model>, Vec<tobj::Material>), SceneError> {
    // Fan-triangulated faces, one index per vertex, points and lines dropped.
    let options = tobj::GPU_LOAD_OPTIONS;
    let (models, materials) = tobj::load_obj_buf(&mut text.as_bytes(), &options, |name| {
        libraries
            .get(name)
            .cloned()
            .unwrap_or_else(|| Ok(Default::default()))
    })
    // The pre-pass rejects everything tobj would; this is a safety net.
    .map_err(|e| SceneError::new(ErrorKind::Syntax, path, format!("OBJ parser: {e}")))?;
    Ok((models, materials.unwrap_or_default()))
}

/// Converts one tobj model; `None` for models without triangles (tobj
/// makes one for every group name, even with no faces after it).
fn model_to_mesh(
    model: tobj::Model,
    material: u32,
    path: &Path,
    warnings: &mut Vec<Warning>,
) -> Option<Mesh> {
    let m = model.mesh;
    if m.indices.is_empty() {
        return None;
    }
    let positions: Vec<Vec3> = m.positions.chunks_exact(3).map(Vec3::from_slice).collect();
    let n = positions.len();
    let mut partial = |what: &str| {
        warnings.push(Warning::new(
            path,
            format!(
                "mesh '{}': {what} given for only some vertices; ignored",
                model.name
            ),
        ));
    };
    // tobj adds an attribute only to the vertices whose corner names one,
    // so anything but a full set cannot be matched to positions.
    let mut normals: Vec<Vec3> = m.normals.chunks_exact(3).map(Vec3::from_slice).collect();
    if !normals.is_empty() && normals.len() != n {
        partial("normals");
        normals.clear();
    }
    let mut uvs: Vec<Vec2> = m.texcoords.chunks_exact(2).map(Vec2::from_slice).collect();
    if !uvs.is_empty() && uvs.len() != n {
        partial("texture coordinates");
        uvs.clear();
    }
    let indices: Vec<[u32; 3]> = m
        .indices
        .chunks_exact(3)
        .map(|c| [c[0], c[1], c[2]])
        .collect();
    Some(Mesh {
        name: model.name,
        positions,
        normals,
        uvs,
        material_ids: vec![material; indices.len()],
        indices,
    })
}

/// Concatenates meshes into one; normals and uvs survive only if every
/// part has them.
fn merge_meshes(parts: Vec<Mesh>, path: &Path, warnings: &mut Vec<Warning>) -> Mesh {
    let all_normals = parts.iter().all(|m| !m.normals.is_empty());
    let all_uvs = parts.iter().all(|m| !m.uvs.is_empty());
    if !all_normals && parts.iter().any(|m| !m.normals.is_empty()) {
        warnings.push(Warning::new(
            path,
            "normals given for only some groups; ignored",
        ));
    }
    if !all_uvs && parts.iter().any(|m| !m.uvs.is_empty()) {
        warnings.push(Warning::new(
            path,
            "texture coordinates given for only some groups; ignored",
        ));
    }
    let mut mesh = Mesh::default();
    for part in parts {
        let offset = mesh.positions.len() as u32;
        mesh.positions.extend(part.positions);
        if all_normals {
            mesh.normals.extend(part.normals);
        }
        if all_uvs {
            mesh.uvs.extend(part.uvs);
        }
        mesh.indices
            .extend(part.indices.iter().map(|t| t.map(|i| i + offset)));
    }
    mesh.material_ids = vec![0; mesh.indices.len()];
    mesh
}

// ---------------------------------------------------------- materials --

/// Maps an MTL material onto a caustic BSDF (rules in the module header).
fn convert_material(
    m: &tobj::Material,
    obj_path: &Path,
    textures: &mut TextureCache,
    warnings: &mut Vec<Warning>,
) -> Material {
    let rgb = |c: Option<[f32; 3]>, default: Rgb| c.map_or(default, Rgb::from);
    let specular = rgb(m.specular, Rgb::ZERO);
    let bsdf = match m.illumination_model {
        Some(3 | 5) => Bsdf::Mirror {
            reflectance: if specular == Rgb::ZERO {
                Rgb::ONE
            } else {
                specular
            },
        },
        Some(4 | 6 | 7) => Bsdf::Dielectric {
            // Ni <= 1 is common in exported "glass" (an unset field).
            ior: m.optical_density.filter(|&n| n > 1.0).unwrap_or(1.5),
            tint: m
                .unknown_param
                .get("Tf")
                .and_then(|tf| parse_rgb(tf))
                .unwrap_or(Rgb::ONE),
        },
        _ => {
            let texture = m
                .diffuse_texture
                .as_deref()
                .and_then(|file| textures.get(Path::new(file), obj_path, warnings));
            // The texture is scaled by Kd, so a texture without Kd shows as is.
            let plain = if texture.is_some() {
                Rgb::ONE
            } else {
                Rgb::splat(0.5)
            };
            let albedo = rgb(m.diffuse, plain);
            if specular.max_element() > 0.0 {
                Bsdf::Glossy {
                    albedo,
                    texture,
                    specular,
                    // No Ns: a broad lobe.
                    exponent: m.shininess.unwrap_or(1.0),
                }
            } else {
                Bsdf::Diffuse { albedo, texture }
            }
        }
    };
    Material {
        name: m.name.clone(),
        bsdf,
        emission: rgb(m.emissive, Rgb::ZERO),
        two_sided: true,
    }
}

/// Parses "r g b" as written by [`write_colour`].
fn parse_rgb(text: &str) -> Option<Rgb> {
    let mut words = text.split_whitespace().map(|w| w.parse::<f32>().ok());
    Some(Rgb::new(words.next()??, words.next()??, words.next()??))
}

/// Textures loaded so far, each file decoded once however many materials
/// use it.
#[derive(Default)]
struct TextureCache {
    textures: Vec<Texture>,
    by_file: HashMap<PathBuf, Option<TextureId>>,
}

impl TextureCache {
    /// The texture of `file`, loading it on first use; a file that cannot
    /// be read gives one warning and `None` (the material stays untextured).
    fn get(
        &mut self,
        file: &Path,
        obj_path: &Path,
        warnings: &mut Vec<Warning>,
    ) -> Option<TextureId> {
        if let Some(&id) = self.by_file.get(file) {
            return id;
        }
        let id = match load_texture(file) {
            Ok(texture) => {
                self.textures.push(texture);
                Some((self.textures.len() - 1) as TextureId)
            }
            Err(e) => {
                warnings.push(Warning::new(
                    obj_path,
                    format!(
                        "cannot load texture '{}' ({e}); materials using it are untextured",
                        file.display()
                    ),
                ));
                None
            }
        };
        self.by_file.insert(file.to_path_buf(), id);
        id
    }
}

/// Decodes an 8-bit sRGB image to linear RGB, row 0 at the top.
fn load_texture(file: &Path) -> Result<Texture, image::ImageError> {
    // The format comes from the content, not the extension, so a PNG named
    // `.jpg` still loads.
    let image = image::ImageReader::open(file)?
        .with_guessed_format()?
        .decode()?
        .into_rgb8();
    let to_linear: [f32; 256] = std::array::from_fn(|i| Texture::srgb_to_linear(i as u8));
    let texels = image
        .pixels()
        .map(|p| {
            Rgb::new(
                to_linear[p[0] as usize],
                to_linear[p[1] as usize],
                to_linear[p[2] as usize],
            )
        })
        .collect();
    Ok(Texture {
        name: file.display().to_string(),
        width: image.width(),
        height: image.height(),
        texels,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/obj")
            .join(name)
    }

    #[test]
    fn geometry_merges_all_groups_into_one_mesh() {
        let mut warnings = Vec::new();
        let mesh = read_obj_geometry(&fixture("quad_polygon.obj"), &mut warnings).unwrap();
        assert_eq!(mesh.name, "quad_polygon");
        assert_eq!(mesh.positions.len(), 9);
        assert_eq!(mesh.indices.len(), 5);
        assert_eq!(mesh.material_ids, vec![0; 5]);
        // The pentagon's corners come after the quad's four.
        assert!(mesh.indices[2..].iter().flatten().all(|&i| i >= 4));
        assert!(warnings.is_empty());
    }

    #[test]
    fn geometry_ignores_materials_and_drops_partial_attributes() {
        let mut warnings = Vec::new();
        let mesh = read_obj_geometry(&fixture("materials.obj"), &mut warnings).unwrap();
        assert_eq!(mesh.indices.len(), 6);
        assert_eq!(mesh.material_ids, vec![0; 6]);
        // Only one group has normals and uvs, so the merged mesh has none.
        assert!(mesh.normals.is_empty() && mesh.uvs.is_empty());
        assert_eq!(warnings.len(), 2, "{warnings:?}");
    }

    #[test]
    fn corner_indices_follow_obj_rules() {
        let defined = [3, 1, 0];
        assert!(check_corner("1", &defined).is_ok());
        assert!(check_corner("-3/-1", &defined).is_ok());
        assert!(check_corner("3/1", &defined).is_ok());
        assert_eq!(
            check_corner("4", &defined).unwrap_err().0,
            ErrorKind::IndexOutOfRange
        );
        assert_eq!(
            check_corner("-4", &defined).unwrap_err().0,
            ErrorKind::IndexOutOfRange
        );
        assert_eq!(
            check_corner("1//1", &defined).unwrap_err().0,
            ErrorKind::IndexOutOfRange
        );
        assert_eq!(
            check_corner("/1", &defined).unwrap_err().0,
            ErrorKind::Syntax
        );
        assert_eq!(
            check_corner("1/1/1/1", &[3, 1, 1]).unwrap_err().0,
            ErrorKind::Syntax
        );
    }

    #[test]
    fn texture_file_skips_options() {
        assert_eq!(texture_file("wood grain.png"), Some("wood grain.png"));
        assert_eq!(texture_file("-s 2 2 1 wood.png"), Some("wood.png"));
        assert_eq!(texture_file(""), None);
    }
}
