//! The OBJ pre-pass: checks every statement caustic uses, with its line
//! number, and writes the normalised copy tobj parses (see the header of
//! `obj/mod.rs` for why). Also shared by the MTL pre-pass: statement
//! splitting and line-numbered errors.

use crate::error::ErrorKind;
use crate::{SceneError, Warning};
use std::collections::HashSet;
use std::fmt::Write as _;
use std::path::Path;

/// An error found on one line: its class and message.
pub(super) type LineError = (ErrorKind, String);

pub(super) fn at_line(path: &Path, line: usize, (kind, message): LineError) -> SceneError {
    SceneError::new(kind, path, message).at(format!("line {line}"))
}

pub(super) fn syntax(message: impl Into<String>) -> LineError {
    (ErrorKind::Syntax, message.into())
}

/// Splits a statement into its keyword and the rest, both trimmed.
pub(super) fn split_statement(line: &str) -> (&str, &str) {
    let line = line.trim();
    match line.find(|c: char| c.is_whitespace()) {
        Some(i) => (&line[..i], line[i..].trim()),
        None => (line, ""),
    }
}

/// The part of a numeric statement before a trailing `#` comment.
pub(super) fn strip_comment(text: &str) -> &str {
    text.find('#').map_or(text, |i| &text[..i])
}

/// An OBJ file after the pre-pass.
pub(super) struct PreparedObj {
    /// The normalised text handed to tobj.
    pub text: String,
    /// `mtllib` file names in file order, with their lines.
    pub libraries: Vec<(String, usize)>,
    /// Each distinct `usemtl` name with the line of its first use.
    pub used_materials: Vec<(String, usize)>,
}

/// Statements (or parts of them: vertex colours) caustic does not render,
/// counted so that each kind is reported once, with its first line.
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
pub(super) fn prepare_obj(
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
    let mut coloured = Ignored::default();
    for (i, line) in source.lines().enumerate() {
        let line_no = i + 1;
        let (keyword, rest) = split_statement(line);
        let out = &mut obj.text;
        let result = match keyword {
            "v" => write_numbers(out, "v", strip_comment(rest), 3, 3).map(|count| {
                defined[0] += 1;
                // `v x y z r g b` is the common vertex-colour extension
                // (`v x y z w` has four numbers).
                if count >= 6 {
                    coloured.note(line_no, keyword);
                }
            }),
            "vt" => write_numbers(out, "vt", strip_comment(rest), 1, 2).map(|_| defined[1] += 1),
            "vn" => write_numbers(out, "vn", strip_comment(rest), 3, 3).map(|_| defined[2] += 1),
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
    if let Some((line, _)) = coloured.first {
        warnings.push(Warning::new(
            path,
            format!(
                "vertex colours are ignored (caustic shades with materials; {} vertices have them, first at line {line})",
                coloured.count
            ),
        ));
    }
    Ok(obj)
}

/// Writes `keyword` and its first `keep` numbers, padding with zeros (a
/// `vt` may omit `v`); all words must be numbers and at least `need` given.
/// Extra numbers (a `w` weight, vertex colours) are checked and dropped.
/// Returns how many numbers the statement has.
fn write_numbers(
    out: &mut String,
    keyword: &str,
    rest: &str,
    need: usize,
    keep: usize,
) -> Result<usize, LineError> {
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
    Ok(count)
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
