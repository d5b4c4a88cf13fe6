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
}

/// A loader error: the file, where in it (line, element, accessor) when
/// known, and what is wrong.
#[derive(Clone, Debug)]
pub struct SceneError {
    pub kind: ErrorKind,
    pub path: PathBuf,
    pub location: Option<String>,
    pub message: String,
}

impl SceneError {
    pub fn new(kind: ErrorKind, path: &Path, message: impl Into<String>) -> Self {
        Self {
            kind,
            path: path.to_path_buf(),
            location: None,
            message: message.into(),
        }
    }

    pub fn at(mut self, location: impl Into<String>) -> Self {
        self.location = Some(location.into());
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
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for SceneError {}

/// Something a loader skipped or changed, printed as one line
/// (`warning: FILE[: LOCATION]: MESSAGE`).
#[derive(Clone, Debug, PartialEq)]
pub struct Warning {
    pub path: PathBuf,
    pub location: Option<String>,
    pub message: String,
}

impl Warning {
    pub fn new(path: &Path, message: impl Into<String>) -> Self {
        Self {
            path: path.to_path_buf(),
            location: None,
            message: message.into(),
        }
    }

    pub fn at(mut self, location: impl Into<String>) -> Self {
        self.location = Some(location.into());
        self
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())?;
        if let Some(loc) = &self.location {
            write!(f, ": {loc}")?;
        }
        write!(f, ": {}", self.message)
    }
}
