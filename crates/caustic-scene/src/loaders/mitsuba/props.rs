//! Attribute values and plugin properties: `$name` substitution, and typed
//! lookups of `<float|integer|boolean|string|point|vector|rgb|spectrum
//! name=.. value=..>` children, with errors that name the element and line.

use super::{Loader, elements};
use crate::ErrorKind;
use crate::SceneError;
use caustic_geom::{Rgb, Vec3};
use roxmltree::Node;

impl<'a, 'input> Loader<'a, 'input> {
    /// An attribute's value with `$name` replaced by `<default>` values.
    pub(super) fn attr(&self, node: Node, name: &str) -> Result<Option<String>, SceneError> {
        node.attribute(name)
            .map(|raw| self.substitute(node, raw))
            .transpose()
    }

    pub(super) fn required_attr(&self, node: Node, name: &str) -> Result<String, SceneError> {
        self.attr(node, name)?.ok_or_else(|| {
            self.error(
                ErrorKind::Syntax,
                node,
                format!("missing attribute '{name}'"),
            )
        })
    }

    /// Replaces each `$identifier` (letters, digits, `_`) by its default;
    /// an identifier with no `<default>` is an error, as in Mitsuba.
    fn substitute(&self, node: Node, raw: &str) -> Result<String, SceneError> {
        if !raw.contains('$') {
            return Ok(raw.to_string());
        }
        let mut out = String::with_capacity(raw.len());
        let mut rest = raw;
        while let Some(at) = rest.find('$') {
            out.push_str(&rest[..at]);
            let after = &rest[at + 1..];
            let len = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            let key = &after[..len];
            let value = self.defaults.get(key).ok_or_else(|| {
                self.error(
                    ErrorKind::InvalidValue,
                    node,
                    format!("'${key}' has no <default> value"),
                )
            })?;
            out.push_str(value);
            rest = &after[len..];
        }
        out.push_str(rest);
        Ok(out)
    }

    /// The property child named `name`, e.g. `<float name="fov" ..>`.
    pub(super) fn property(&self, node: Node<'a, 'input>, name: &str) -> Option<Node<'a, 'input>> {
        elements(node).find(|child| child.attribute("name") == Some(name))
    }

    /// Parses one number; NaN and infinities are invalid values.
    pub(super) fn number(&self, node: Node, token: &str) -> Result<f32, SceneError> {
        match token.trim().parse::<f32>() {
            Ok(x) if x.is_finite() => Ok(x),
            _ => Err(self.error(
                ErrorKind::InvalidValue,
                node,
                format!("'{token}' is not a finite number"),
            )),
        }
    }

    /// A list of numbers separated by commas and/or white space.
    pub(super) fn numbers(&self, node: Node, text: &str) -> Result<Vec<f32>, SceneError> {
        text.split(|c: char| c == ',' || c.is_whitespace())
            .filter(|t| !t.is_empty())
            .map(|t| self.number(node, t))
            .collect()
    }

    /// A three-number attribute such as `origin="0, 0, 3.9"`.
    pub(super) fn vec3_attr(&self, node: Node, name: &str) -> Result<Option<Vec3>, SceneError> {
        let Some(text) = self.attr(node, name)? else {
            return Ok(None);
        };
        match self.numbers(node, &text)?[..] {
            [x, y, z] => Ok(Some(Vec3::new(x, y, z))),
            _ => Err(self.error(
                ErrorKind::InvalidValue,
                node,
                format!("'{name}' needs three numbers, got '{text}'"),
            )),
        }
    }

    /// A number attribute with a default (`x="1"` of `<translate>`).
    pub(super) fn float_attr(
        &self,
        node: Node,
        name: &str,
        default: f32,
    ) -> Result<f32, SceneError> {
        match self.attr(node, name)? {
            Some(text) => self.number(node, &text),
            None => Ok(default),
        }
    }

    /// The property `name` if present, checking its tag is one of `tags`.
    fn typed(
        &self,
        node: Node<'a, 'input>,
        name: &str,
        tags: &[&str],
    ) -> Result<Option<Node<'a, 'input>>, SceneError> {
        let Some(prop) = self.property(node, name) else {
            return Ok(None);
        };
        if tags.contains(&prop.tag_name().name()) {
            Ok(Some(prop))
        } else {
            Err(self.error(
                ErrorKind::InvalidValue,
                prop,
                format!("'{name}' must be <{}>", tags.join("> or <")),
            ))
        }
    }

    pub(super) fn float(
        &self,
        node: Node<'a, 'input>,
        name: &str,
    ) -> Result<Option<f32>, SceneError> {
        let Some(prop) = self.typed(node, name, &["float", "integer"])? else {
            return Ok(None);
        };
        let text = self.required_attr(prop, "value")?;
        self.number(prop, &text).map(Some)
    }

    pub(super) fn integer(
        &self,
        node: Node<'a, 'input>,
        name: &str,
    ) -> Result<Option<i64>, SceneError> {
        let Some(prop) = self.typed(node, name, &["integer"])? else {
            return Ok(None);
        };
        let text = self.required_attr(prop, "value")?;
        text.trim().parse().map(Some).map_err(|_| {
            self.error(
                ErrorKind::InvalidValue,
                prop,
                format!("'{text}' is not an integer"),
            )
        })
    }

    pub(super) fn boolean(
        &self,
        node: Node<'a, 'input>,
        name: &str,
    ) -> Result<Option<bool>, SceneError> {
        let Some(prop) = self.typed(node, name, &["boolean"])? else {
            return Ok(None);
        };
        match self.required_attr(prop, "value")?.trim() {
            "true" => Ok(Some(true)),
            "false" => Ok(Some(false)),
            other => Err(self.error(
                ErrorKind::InvalidValue,
                prop,
                format!("'{other}' is not 'true' or 'false'"),
            )),
        }
    }

    pub(super) fn string(
        &self,
        node: Node<'a, 'input>,
        name: &str,
    ) -> Result<Option<String>, SceneError> {
        match self.typed(node, name, &["string"])? {
            Some(prop) => self.required_attr(prop, "value").map(Some),
            None => Ok(None),
        }
    }

    /// `<point|vector name=..>` with `value="x, y, z"` or `x= y= z=`
    /// (missing coordinates are 0).
    pub(super) fn point(
        &self,
        node: Node<'a, 'input>,
        name: &str,
    ) -> Result<Option<Vec3>, SceneError> {
        let Some(prop) = self.typed(node, name, &["point", "vector"])? else {
            return Ok(None);
        };
        if let Some(v) = self.vec3_attr(prop, "value")? {
            return Ok(Some(v));
        }
        Ok(Some(Vec3::new(
            self.float_attr(prop, "x", 0.0)?,
            self.float_attr(prop, "y", 0.0)?,
            self.float_attr(prop, "z", 0.0)?,
        )))
    }

    /// A colour property: `<rgb>` (three numbers, or one for grey), a
    /// constant `<spectrum>` or `<float>` (grey). A sampled spectrum becomes
    /// the mean of its values with a warning; a texture is not supported
    /// here and yields `None` (the caller's default) with a warning.
    pub(super) fn color(
        &mut self,
        node: Node<'a, 'input>,
        name: &str,
    ) -> Result<Option<Rgb>, SceneError> {
        let Some(prop) = self.property(node, name) else {
            return Ok(None);
        };
        match prop.tag_name().name() {
            "rgb" | "float" => {
                let text = self.required_attr(prop, "value")?;
                self.grey_or_rgb(prop, &text).map(Some)
            }
            "spectrum" => self.spectrum(prop).map(Some),
            "texture" | "ref" => {
                self.warn(
                    prop,
                    "textures are not supported here; using the default colour",
                );
                Ok(None)
            }
            _ => Err(self.error(
                ErrorKind::InvalidValue,
                prop,
                format!("'{name}' must be a colour (<rgb>, <spectrum> or <float>)"),
            )),
        }
    }

    fn grey_or_rgb(&self, node: Node, text: &str) -> Result<Rgb, SceneError> {
        match self.numbers(node, text)?[..] {
            [grey] => Ok(Rgb::splat(grey)),
            [r, g, b] => Ok(Rgb::new(r, g, b)),
            _ => Err(self.error(
                ErrorKind::InvalidValue,
                node,
                format!("a colour needs one or three numbers, got '{text}'"),
            )),
        }
    }

    /// `<spectrum value="0.5">` is grey; `value="400:0.1, 700:0.3"` (sampled)
    /// is approximated by the mean of its values.
    fn spectrum(&mut self, prop: Node) -> Result<Rgb, SceneError> {
        let Some(text) = self.attr(prop, "value")? else {
            return Err(self.error(
                ErrorKind::Unsupported,
                prop,
                "only constant or sampled spectra given by 'value' are supported",
            ));
        };
        if !text.contains(':') {
            return self.grey_or_rgb(prop, &text);
        }
        let mut values = Vec::new();
        for pair in text.split(',').filter(|p| !p.trim().is_empty()) {
            let value = pair.split(':').nth(1).unwrap_or("");
            values.push(self.number(prop, value)?);
        }
        if values.is_empty() {
            return Err(self.error(ErrorKind::InvalidValue, prop, "empty spectrum"));
        }
        self.warn(
            prop,
            "sampled spectrum approximated by its mean value (grey)",
        );
        Ok(Rgb::splat(values.iter().sum::<f32>() / values.len() as f32))
    }
}
