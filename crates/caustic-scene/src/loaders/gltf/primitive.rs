//! Mesh primitives to caustic meshes: triangle lists, strips and fans
//! (strips and fans are only index patterns over the same vertices, so
//! they are unrolled here into triangle lists), with their attributes.

use super::Loader;
use crate::{Mesh, SceneError};
use ::gltf::mesh::{Mode, Semantic};
use caustic_geom::{Vec2, Vec3};

impl Loader<'_> {
    pub(super) fn primitive(
        &mut self,
        prim: &::gltf::Primitive,
        at: &str,
        name: String,
    ) -> Result<Option<Mesh>, SceneError> {
        let mode = prim.mode();
        if !matches!(
            mode,
            Mode::Triangles | Mode::TriangleStrip | Mode::TriangleFan
        ) {
            self.warn(
                at,
                format!(
                    "mode {} is not supported (caustic renders triangles, strips and fans); skipped",
                    mode_name(mode)
                ),
            );
            return Ok(None);
        }
        let Some(positions) = prim.get(&Semantic::Positions) else {
            self.warn(at, "no POSITION attribute; skipped");
            return Ok(None);
        };
        if prim.get(&Semantic::Colors(0)).is_some() {
            self.warn(
                at,
                "vertex colours (COLOR_0) are ignored (caustic shades with materials)",
            );
        }
        let positions: Vec<Vec3> = self
            .read_floats::<3>(&positions, at, "POSITION")?
            .into_iter()
            .map(Vec3::from_array)
            .collect();
        let normals = match prim.get(&Semantic::Normals) {
            Some(acc) => self
                .read_floats::<3>(&acc, at, "NORMAL")?
                .into_iter()
                .map(Vec3::from_array)
                .collect(),
            None => Vec::new(),
        };
        let uvs = match prim.get(&Semantic::TexCoords(0)) {
            Some(acc) => self
                .read_floats::<2>(&acc, at, "TEXCOORD_0")?
                .into_iter()
                .map(|[u, v]| Vec2::new(u, 1.0 - v))
                .collect(),
            None => Vec::new(),
        };
        let flat = match prim.indices() {
            Some(acc) => self.read_indices(&acc, at)?,
            None => (0..positions.len() as u32).collect(),
        };
        let indices = match mode {
            Mode::TriangleStrip => strip(&flat),
            Mode::TriangleFan => fan(&flat),
            _ => self.list(&flat, at),
        };
        let material = self.material(&prim.material());
        Ok(Some(Mesh {
            name,
            positions,
            normals,
            uvs,
            material_ids: vec![material; indices.len()],
            indices,
        }))
    }

    /// A triangle list; a count that is not a multiple of 3 is a warning.
    fn list(&mut self, flat: &[u32], at: &str) -> Vec<[u32; 3]> {
        if !flat.len().is_multiple_of(3) {
            self.warn(
                at,
                format!(
                    "index count {} is not a multiple of 3; the last {} ignored",
                    flat.len(),
                    flat.len() % 3
                ),
            );
        }
        flat.chunks_exact(3).map(|t| [t[0], t[1], t[2]]).collect()
    }
}

/// The name the glTF specification gives a mode.
fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Points => "POINTS",
        Mode::Lines => "LINES",
        Mode::LineLoop => "LINE_LOOP",
        Mode::LineStrip => "LINE_STRIP",
        Mode::Triangles => "TRIANGLES",
        Mode::TriangleStrip => "TRIANGLE_STRIP",
        Mode::TriangleFan => "TRIANGLE_FAN",
    }
}

/// Triangle `i` of a strip is `(i, i+1, i+2)`, with the last two swapped
/// for odd `i` so that every triangle keeps the strip's winding (glTF 2.0
/// specification, section 3.7.2.1).
fn strip(flat: &[u32]) -> Vec<[u32; 3]> {
    flat.windows(3)
        .enumerate()
        .map(|(i, w)| {
            if i % 2 == 0 {
                [w[0], w[1], w[2]]
            } else {
                [w[0], w[2], w[1]]
            }
        })
        .collect()
}

/// Triangle `i` of a fan is `(i+1, i+2, 0)` (the same section).
fn fan(flat: &[u32]) -> Vec<[u32; 3]> {
    match flat.split_first() {
        Some((&hub, rim)) => rim.windows(2).map(|w| [w[0], w[1], hub]).collect(),
        None => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_alternate_to_keep_the_winding() {
        assert_eq!(strip(&[0, 1, 2, 3, 4]), [[0, 1, 2], [1, 3, 2], [2, 3, 4]]);
        assert!(strip(&[0, 1]).is_empty());
    }

    #[test]
    fn fans_turn_around_the_first_vertex() {
        assert_eq!(fan(&[0, 1, 2, 3]), [[1, 2, 0], [2, 3, 0]]);
        assert!(fan(&[]).is_empty() && fan(&[0, 1]).is_empty());
    }
}
