//! Numbered mesh sequences: a path whose file name has a run of `#`
//! (`frames/frame_####.obj`) names every file of that folder whose name
//! has digits in place of the run (at least as many as there are `#`),
//! taken in numeric order as the frames of an animation at
//! [`DEFAULT_FPS`]. Each frame is any scene file `Scene::load` reads; the
//! first gives the camera, lights and film. Materials and textures of all
//! frames are gathered (frames with the same list as the first share it).
//! The meshes of every frame are held in memory, and the topology may
//! change from frame to frame ([`crate::Animation::fixed_topology`] is
//! false).

use crate::animation::Animation;
use crate::{Bsdf, DEFAULT_FPS, ErrorKind, Mesh, Scene, SceneError, Timeline};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Most frames a sequence may have.
const MAX_FRAMES: usize = 100_000;

/// The run of `#` in a file name: `(prefix, digits, suffix)`.
pub(crate) fn pattern(path: &Path) -> Option<(String, usize, String)> {
    let name = path.file_name()?.to_str()?;
    let start = name.find('#')?;
    let digits = name[start..].chars().take_while(|&c| c == '#').count();
    let suffix = &name[start + digits..];
    if suffix.contains('#') {
        return None;
    }
    Some((name[..start].to_string(), digits, suffix.to_string()))
}

/// The frame files of a pattern, in numeric order.
fn frame_files(path: &Path) -> Result<Vec<PathBuf>, SceneError> {
    let (prefix, digits, suffix) = pattern(path)
        .ok_or_else(|| SceneError::new(ErrorKind::Io, path, "not a '#' file pattern"))?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let entries = std::fs::read_dir(&dir).map_err(|e| SceneError::io(&dir, &e))?;
    let mut frames: Vec<(u64, PathBuf)> = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(middle) = name
            .strip_prefix(&prefix)
            .and_then(|rest| rest.strip_suffix(&suffix))
        else {
            continue;
        };
        if middle.len() < digits || !middle.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        if let Ok(number) = middle.parse::<u64>() {
            frames.push((number, entry.path()));
        }
    }
    if frames.is_empty() {
        return Err(SceneError::new(
            ErrorKind::Io,
            path,
            format!(
                "no files match the sequence pattern (names '{prefix}' + {digits} or more digits + '{suffix}' in {})",
                dir.display()
            ),
        ));
    }
    if frames.len() > MAX_FRAMES {
        return Err(SceneError::new(
            ErrorKind::InvalidValue,
            path,
            format!(
                "{} frames; a sequence may have at most {MAX_FRAMES}",
                frames.len()
            ),
        ));
    }
    frames.sort();
    Ok(frames.into_iter().map(|(_, p)| p).collect())
}

pub(crate) fn load(path: &Path) -> Result<Scene, SceneError> {
    let files = frame_files(path)?;
    let mut frames: Vec<Vec<Mesh>> = Vec::with_capacity(files.len());
    let mut scene: Option<Scene> = None;
    for file in &files {
        let frame = super::load(file)?;
        match &mut scene {
            None => {
                frames.push(frame.meshes.clone());
                scene = Some(frame);
            }
            Some(first) => frames.push(merge_frame(first, frame)),
        }
    }
    let mut scene = scene.expect("at least one frame");
    let fps = DEFAULT_FPS;
    let mut animation = Animation::new(Timeline::from_duration(
        (frames.len() - 1) as f32 / fps,
        fps,
    ));
    animation.timeline.frames = frames.len() as u32;
    animation.objects = frames.iter().map(Vec::len).max().unwrap_or(0);
    animation.frames = Some(frames);
    scene.animation = Some(Arc::new(animation));
    Ok(scene)
}

/// A later frame's meshes, with its materials and textures merged into the
/// first frame's scene (shared when they are the same list).
fn merge_frame(first: &mut Scene, frame: Scene) -> Vec<Mesh> {
    first.warnings.extend(frame.warnings);
    let same = frame.materials
        == first.materials[..frame.materials.len().min(first.materials.len())]
        && frame.textures.len() <= first.textures.len()
        && frame
            .textures
            .iter()
            .zip(&first.textures)
            .all(|(a, b)| a.name == b.name && a.width == b.width);
    if same {
        return frame.meshes;
    }
    let material_base = first.materials.len() as u32;
    let texture_base = first.textures.len() as u32;
    first.textures.extend(frame.textures);
    first
        .materials
        .extend(frame.materials.into_iter().map(|mut m| {
            match &mut m.bsdf {
                Bsdf::Diffuse { texture, .. } | Bsdf::Glossy { texture, .. } => {
                    if let Some(t) = texture {
                        *t += texture_base;
                    }
                }
                Bsdf::Mirror { .. } | Bsdf::Dielectric { .. } => {}
            }
            m
        }));
    let mut meshes = frame.meshes;
    for mesh in &mut meshes {
        for id in &mut mesh.material_ids {
            *id += material_base;
        }
    }
    meshes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns() {
        assert_eq!(
            pattern(Path::new("a/frame_####.obj")),
            Some(("frame_".into(), 4, ".obj".into()))
        );
        assert_eq!(pattern(Path::new("a/frame.obj")), None);
        assert_eq!(pattern(Path::new("a/#_#.obj")), None);
    }
}
