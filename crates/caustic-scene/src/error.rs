use std::fmt;
use std::path::{Path, PathBuf};

/// What went wrong, for callers (and tests) that branch on the failure class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The file could not be opened or read.
    Io,
    /// The extension names no known format.
    UnsupportedFormat,
    /// Text or binary content that does not follow the format.
    Syntax,
    /// The file ends before the content its header announces.
    Truncated,
    /// A face or accessor refers to a vertex that does not exist.
    IndexOutOfRange,
    /// A number that must be finite or positive is not.
    InvalidValue,
    /// A file the scene refers to (mesh, texture) is missing or unreadable.
    MissingReference,
    /// A scene-file element or plugin caustic does not know.
    Unsupported,
    /// The scene has no triangles at all.
    Empty,
    /// A parsing dependency failed in a way its API does not report (a
    /// panic caught by the loader); the message names the crate.
    Internal,
}

/// A loader error: the file, where in it (line, element, accessor) when
/// known, and what is wrong.
#[derive(Clone, Debug)]
pub struct SceneError {
    pub kind: ErrorKind,
    pub path: PathBuf,
    pub location: Option<String>,
    pub message: String,
    /// Warnings the loader collected before it failed (collapsed): often
    /// they explain the failure ("no triangles" after every shape was
    /// skipped as unsupported). Displayed after the message, one a line.
    pub warnings: Vec<Warning>,
}

impl SceneError {
    pub fn new(kind: ErrorKind, path: &Path, message: impl Into<String>) -> Self {
        Self {
            kind,
            path: path.to_path_buf(),
            location: None,
            message: message.into(),
            warnings: Vec::new(),
        }
    }

    pub fn at(mut self, location: impl Into<String>) -> Self {
        self.location = Some(location.into());
        self
    }

    /// Attaches the warnings collected before the failure (after any
    /// already attached), collapsing repeats.
    pub fn with_warnings(mut self, warnings: Vec<Warning>) -> Self {
        self.warnings.extend(warnings);
        self.warnings = collapse_warnings(std::mem::take(&mut self.warnings));
        self
    }

    /// Shorthand for a syntax error at a 1-based line.
    pub fn syntax_at_line(path: &Path, line: usize, message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Syntax, path, message).at(format!("line {line}"))
    }

    pub fn io(path: &Path, err: &std::io::Error) -> Self {
        Self::new(ErrorKind::Io, path, format!("cannot read: {err}"))
    }
}

impl fmt::Display for SceneError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())?;
        if let Some(loc) = &self.location {
            write!(f, ": {loc}")?;
        }
        write!(f, ": {}", self.message)?;
        if !self.warnings.is_empty() {
            write!(f, "\n  warnings before the error:")?;
        }
        for warning in &self.warnings {
            write!(f, "\n  warning: {warning}")?;
        }
        Ok(())
    }
}

impl std::error::Error for SceneError {}

/// Something a loader skipped or changed, printed as one line
/// (`warning: FILE[: LOCATION]: MESSAGE`, with ` (×N)` when it repeated).
#[derive(Clone, Debug, PartialEq)]
pub struct Warning {
    pub path: PathBuf,
    pub location: Option<String>,
    pub message: String,
    /// How many identical warnings this one stands for (1 unless
    /// collapsed: an instanced mesh warns once per instance).
    pub count: usize,
}

impl Warning {
    pub fn new(path: &Path, message: impl Into<String>) -> Self {
        Self {
            path: path.to_path_buf(),
            location: None,
            message: message.into(),
            count: 1,
        }
    }

    pub fn at(mut self, location: impl Into<String>) -> Self {
        self.location = Some(location.into());
        self
    }

    fn same_as(&self, other: &Warning) -> bool {
        self.path == other.path && self.location == other.location && self.message == other.message
    }
}

/// Merges identical warnings (same file, location and message) into the
/// first of them with the summed count, keeping first-occurrence order.
pub(crate) fn collapse_warnings(warnings: Vec<Warning>) -> Vec<Warning> {
    let mut out: Vec<Warning> = Vec::with_capacity(warnings.len());
    // Index by message: a scene with many distinct warnings stays linear.
    let mut by_message: std::collections::HashMap<String, Vec<usize>> = Default::default();
    for warning in warnings {
        let slots = by_message.entry(warning.message.clone()).or_default();
        match slots.iter().find(|&&i| out[i].same_as(&warning)) {
            Some(&i) => out[i].count += warning.count,
            None => {
                slots.push(out.len());
                out.push(warning);
            }
        }
    }
    out
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())?;
        if let Some(loc) = &self.location {
            write!(f, ": {loc}")?;
        }
        write!(f, ": {}", self.message)?;
        if self.count > 1 {
            write!(f, " (×{})", self.count)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_warnings_collapse_with_a_count_in_first_order() {
        let path = Path::new("a.gltf");
        let w = |loc: &str, msg: &str| Warning::new(path, msg).at(loc);
        let collapsed = collapse_warnings(vec![
            w("mesh 0", "COLOR_0 ignored"),
            w("mesh 1", "COLOR_0 ignored"),
            w("mesh 0", "COLOR_0 ignored"),
            w("mesh 0", "other"),
            w("mesh 0", "COLOR_0 ignored"),
        ]);
        let lines: Vec<String> = collapsed.iter().map(|w| w.to_string()).collect();
        assert_eq!(
            lines,
            [
                "a.gltf: mesh 0: COLOR_0 ignored (×3)",
                "a.gltf: mesh 1: COLOR_0 ignored",
                "a.gltf: mesh 0: other",
            ]
        );
    }

    #[test]
    fn errors_list_their_warnings_after_the_message() {
        let path = Path::new("s.xml");
        let err = SceneError::new(ErrorKind::Empty, path, "the scene contains no triangles")
            .with_warnings(vec![
                Warning::new(path, "unsupported shape 'disk'; skipped"),
                Warning::new(path, "unsupported shape 'disk'; skipped"),
            ]);
        assert_eq!(
            err.to_string(),
            "s.xml: the scene contains no triangles\n  warnings before the error:\n  warning: s.xml: unsupported shape 'disk'; skipped (×2)"
        );
    }
}
