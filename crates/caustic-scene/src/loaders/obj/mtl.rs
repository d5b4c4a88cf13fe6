//! MTL material libraries: the pre-pass that checks them and normalises
//! them for tobj, the mapping of MTL materials onto caustic's BSDFs, and
//! the `map_Kd` textures.

use super::prepass::{LineError, PreparedObj, at_line, split_statement, strip_comment, syntax};
use crate::error::ErrorKind;
use crate::loaders::guard::guarded;
use crate::loaders::input::{read_file, read_text_bytes};
use crate::{Bsdf, Material, SceneError, Texture, TextureId, Warning};
use caustic_geom::Rgb;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// A parsed material library, as tobj's loader callback returns it
/// (always `Ok`: failures are handled before tobj sees them).
pub(super) type Library = tobj::MTLLoadResult;

/// Reads every `mtllib` file, keyed by the name tobj will ask for. A missing
/// library is a warning: its materials fall back to the default.
pub(super) fn load_libraries(
    obj_path: &Path,
    obj: &PreparedObj,
    warnings: &mut Vec<Warning>,
) -> Result<HashMap<PathBuf, Library>, SceneError> {
    let dir = obj_path.parent().unwrap_or(Path::new(""));
    let mut libraries = HashMap::new();
    let mut all_found = true;
    for (name, line) in &obj.libraries {
        let file = dir.join(portable(name));
        let source = match read_text_bytes(&file) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            // A missing library leaves the geometry usable; a library in
            // a form caustic cannot read (UTF-16) is worth stopping for.
            Err(e) if e.kind == ErrorKind::Io => {
                warnings.push(
                    Warning::new(
                        obj_path,
                        format!(
                            "cannot read material library '{}' ({}); using the default material",
                            file.display(),
                            e.message
                        ),
                    )
                    .at(format!("line {line}")),
                );
                all_found = false;
                continue;
            }
            Err(e) => return Err(e),
        };
        let text = prepare_mtl(&file, &source)?;
        let library = guarded(&file, "tobj", || {
            tobj::load_mtl_buf(&mut text.as_bytes())
                .map_err(|e| SceneError::new(ErrorKind::Syntax, &file, format!("MTL parser: {e}")))
        })?;
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

/// Maps an MTL material onto a caustic BSDF (rules in the module header).
pub(super) fn convert_material(
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
pub(super) struct TextureCache {
    textures: Vec<Texture>,
    by_file: HashMap<PathBuf, Option<TextureId>>,
}

impl TextureCache {
    pub(super) fn into_textures(self) -> Vec<Texture> {
        self.textures
    }

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
fn load_texture(file: &Path) -> Result<Texture, String> {
    let bytes = read_file(file).map_err(|e| e.message)?;
    // The format comes from the content, not the extension, so a PNG named
    // `.jpg` still loads.
    let image = image::load_from_memory(&bytes)
        .map_err(|e| e.to_string())?
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

    #[test]
    fn texture_file_skips_options() {
        assert_eq!(texture_file("wood grain.png"), Some("wood grain.png"));
        assert_eq!(texture_file("-s 2 2 1 wood.png"), Some("wood.png"));
        assert_eq!(texture_file(""), None);
    }
}
