//! Mitsuba 3 XML scene subset (roxmltree).
//!
//! Supported: everything the scenes of `refs/` use, and the common core of
//! hand-written Mitsuba 3 scenes:
//!
//! - `<scene version=..>`, `<default name value>` with `$name` substitution
//!   in every attribute value;
//! - BSDFs (`bsdf.rs`): `diffuse`, `twosided`, `conductor`, `dielectric`
//!   exactly; `roughconductor`, `plastic`, `roughplastic`, `thindielectric`,
//!   `roughdielectric` and the `bumpmap`/`normalmap`/`mask` wrappers as
//!   approximations, with a warning; declared at top level with an `id` and
//!   used through `<ref id>`, or nested inline;
//! - shapes (`shape.rs`): `obj`, `ply` (files relative to the XML's folder),
//!   `rectangle`, `cube`, and `sphere` as a level-5 icosphere with smooth
//!   normals (Mitsuba's sphere is analytic; the mesh is inscribed in it);
//!   `to_world` transforms (`transform.rs`), `face_normals`, `flip_normals`;
//! - emitters (`emitter.rs`): `area` inside a shape, `point`, `spot`,
//!   `directional`, `constant` (the background);
//! - the first `perspective` (or `thinlens`) sensor and its `hdrfilm`
//!   (`sensor.rs`).
//!
//! Render settings (`integrator`, `sampler`, `rfilter`) are ignored silently.
//! Unknown plugins are skipped with a warning naming the element and line
//! (a shape is left out, a BSDF becomes the default grey diffuse, an
//! emitter or sensor is dropped); a scene left with no shape at all is an
//! `Empty` error. Errors, because the scene would be wrong rather than
//! incomplete: malformed XML (`Syntax`, line and column), a mesh file that
//! is missing (`MissingReference`) or unreadable, a `<ref id>` or `$name`
//! that names nothing, an unknown `<transform>` step, bad or non-finite
//! numbers (`InvalidValue`). Errors and warnings name the file and the
//! element with its line (`<shape type="obj"> at line 34`).
//!
//! Conventions: every material is one-sided as in Mitsuba (`two_sided`
//! false) unless wrapped in `twosided`; dielectrics are two-sided because a
//! refracted ray meets the back of the interface. A shape with an area
//! emitter gets its own material: its BSDF plus the emitted radiance.

mod bsdf;
mod emitter;
mod props;
mod sensor;
mod shape;
mod transform;

use super::guard::guarded;
use super::input::read_text_bytes;
use crate::{ErrorKind, Material, Scene, SceneError, Warning};
use roxmltree::{Document, Node};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

pub(crate) fn load(path: &Path) -> Result<Scene, SceneError> {
    let bytes = read_text_bytes(path)?;
    let text = std::str::from_utf8(&bytes)
        .map_err(|e| SceneError::new(ErrorKind::Syntax, path, format!("not UTF-8 text: {e}")))?;
    let doc = guarded(path, "roxmltree", || {
        Document::parse(text).map_err(|e| {
            let pos = e.pos();
            SceneError::new(ErrorKind::Syntax, path, format!("malformed XML: {e}"))
                .at(format!("line {}, column {}", pos.row, pos.col))
        })
    })?;
    let mut loader = Loader::new(path, &doc)?;
    match loader.load_scene() {
        Ok(()) => Ok(loader.scene),
        Err(e) => Err(e.with_warnings(loader.scene.warnings)),
    }
}

/// State of one scene file's load.
struct Loader<'a, 'input> {
    path: &'a Path,
    /// Folder that relative file names are resolved against.
    dir: PathBuf,
    doc: &'a Document<'input>,
    /// `<default>` values, substituted for `$name` in attributes.
    defaults: HashMap<String, String>,
    /// Every element with an `id`, for `<ref id>` (forward references work).
    ids: HashMap<String, Node<'a, 'input>>,
    /// Material index of each referenced BSDF id, so shapes share it.
    bsdf_materials: HashMap<String, u32>,
    /// Material index of Mitsuba's default BSDF, once a shape needs it.
    default_material: Option<u32>,
    scene: Scene,
}

impl<'a, 'input> Loader<'a, 'input> {
    fn new(path: &'a Path, doc: &'a Document<'input>) -> Result<Self, SceneError> {
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let mut loader = Self {
            path,
            dir,
            doc,
            defaults: HashMap::new(),
            ids: HashMap::new(),
            bsdf_materials: HashMap::new(),
            default_material: None,
            scene: Scene::default(),
        };
        let root = doc.root_element();
        if root.tag_name().name() != "scene" {
            return Err(loader.error(ErrorKind::Syntax, root, "the root element must be <scene>"));
        }
        loader.collect_defaults(root)?;
        loader.collect_ids(root)?;
        Ok(loader)
    }

    /// `<default name value>` children of `<scene>`, in document order (a
    /// default may use an earlier one).
    fn collect_defaults(&mut self, root: Node<'a, 'input>) -> Result<(), SceneError> {
        for node in elements(root).filter(|n| n.tag_name().name() == "default") {
            let name = self.required_attr(node, "name")?;
            let value = self.required_attr(node, "value")?;
            self.defaults.entry(name).or_insert(value);
        }
        Ok(())
    }

    fn collect_ids(&mut self, root: Node<'a, 'input>) -> Result<(), SceneError> {
        // `<ref id>` uses an id; every other element with one declares it.
        let declarations = root
            .descendants()
            .filter(|n| n.is_element() && n.tag_name().name() != "ref");
        for node in declarations {
            // Substituting every attribute once reports an undefined
            // `$name` wherever it is, as Mitsuba does, not only where read.
            for attribute in node.attributes() {
                self.attr(node, attribute.name())?;
            }
            if let Some(id) = self.attr(node, "id")?
                && self.ids.insert(id.clone(), node).is_some()
            {
                return Err(self.error(
                    ErrorKind::InvalidValue,
                    node,
                    format!("id '{id}' is declared twice"),
                ));
            }
        }
        Ok(())
    }

    fn load_scene(&mut self) -> Result<(), SceneError> {
        let root = self.doc.root_element();
        self.check_version(root);
        for node in elements(root) {
            match node.tag_name().name() {
                "shape" => self.shape(node)?,
                "emitter" => self.top_level_emitter(node)?,
                "sensor" => self.sensor(node)?,
                // Declarations, used where a `<ref>` names them.
                "default" | "bsdf" | "texture" => {}
                // Render settings: the renderer's own options decide these.
                "integrator" | "sampler" | "film" | "rfilter" => {}
                "include" => self.warn(node, "<include> is not supported; skipped"),
                _ => self.warn(node, "unsupported element; skipped"),
            }
        }
        Ok(())
    }

    fn check_version(&mut self, root: Node<'a, 'input>) {
        let version = root.attribute("version").unwrap_or("");
        if !version.is_empty() && !version.starts_with('2') && !version.starts_with('3') {
            self.warn(
                root,
                format!("scene version {version} is read as Mitsuba 3; plugins may differ"),
            );
        }
    }

    /// Adds a material and returns its index.
    fn add_material(&mut self, material: Material) -> u32 {
        self.scene.materials.push(material);
        (self.scene.materials.len() - 1) as u32
    }

    /// Resolves `file` (a `filename` value) against the XML's folder.
    fn resolve(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    /// `<tag type="..">` at line N: how errors and warnings name elements.
    fn location(&self, node: Node) -> String {
        let line = self.doc.text_pos_at(node.range().start).row;
        let tag = node.tag_name().name();
        match (node.attribute("type"), node.attribute("name")) {
            (Some(ty), _) => format!("<{tag} type=\"{ty}\"> at line {line}"),
            (None, Some(name)) => format!("<{tag} name=\"{name}\"> at line {line}"),
            (None, None) => format!("<{tag}> at line {line}"),
        }
    }

    fn error(&self, kind: ErrorKind, node: Node, message: impl Into<String>) -> SceneError {
        SceneError::new(kind, self.path, message).at(self.location(node))
    }

    fn warn(&mut self, node: Node, message: impl Into<String>) {
        let warning = Warning::new(self.path, message).at(self.location(node));
        self.scene.warnings.push(warning);
    }
}

/// Element children of `node`, in document order.
fn elements<'a, 'input>(node: Node<'a, 'input>) -> impl Iterator<Item = Node<'a, 'input>> {
    node.children().filter(Node::is_element)
}
