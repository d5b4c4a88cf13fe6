//! Tokens of an AFF file: words separated by white space, with their line
//! numbers. `#` or `%` at the start of a word comments out the rest of the
//! line (BART writes `a -1.0 5.0 300 % the last number is ...`), and the
//! braces of transform groups and keyframe blocks are words of their own
//! even when written against a neighbour (`{` in `camera{`).

use crate::{ErrorKind, SceneError};
use std::path::{Path, PathBuf};

/// A word and the 1-based line it is on.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Token<'a> {
    pub text: &'a str,
    pub line: u32,
}

/// Splits `text` into tokens.
pub(super) fn tokenize(text: &str) -> Vec<Token<'_>> {
    let mut tokens = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line_no = (n + 1).min(u32::MAX as usize) as u32;
        for word in line.split_whitespace() {
            if word.starts_with('#') || word.starts_with('%') {
                break;
            }
            split_braces(word, line_no, &mut tokens);
        }
    }
    tokens
}

fn split_braces<'a>(word: &'a str, line: u32, out: &mut Vec<Token<'a>>) {
    let mut rest = word;
    while let Some(at) = rest.find(['{', '}']) {
        if at > 0 {
            out.push(Token {
                text: &rest[..at],
                line,
            });
        }
        out.push(Token {
            text: &rest[at..at + 1],
            line,
        });
        rest = &rest[at + 1..];
    }
    if !rest.is_empty() {
        out.push(Token { text: rest, line });
    }
}

/// A cursor over one file's tokens that reads the numbers and words the
/// statements are made of, with errors naming the file and line.
pub(super) struct Cursor<'a> {
    pub path: PathBuf,
    tokens: Vec<Token<'a>>,
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(path: &Path, text: &'a str) -> Self {
        Self {
            path: path.to_path_buf(),
            tokens: tokenize(text),
            pos: 0,
        }
    }

    /// The next token without consuming it.
    pub fn peek(&self) -> Option<Token<'a>> {
        self.tokens.get(self.pos).copied()
    }

    pub fn next(&mut self) -> Option<Token<'a>> {
        let token = self.peek()?;
        self.pos += 1;
        Some(token)
    }

    /// Tokens not read yet.
    pub fn remaining(&self) -> usize {
        self.tokens.len() - self.pos
    }

    /// The line of the next token, or of the last one at the end.
    pub fn line(&self) -> u32 {
        self.peek()
            .or_else(|| self.tokens.last().copied())
            .map_or(1, |t| t.line)
    }

    pub fn error_at(&self, line: u32, kind: ErrorKind, message: impl Into<String>) -> SceneError {
        SceneError::new(kind, &self.path, message).at(format!("line {line}"))
    }

    pub fn syntax(&self, message: impl Into<String>) -> SceneError {
        self.error_at(self.line(), ErrorKind::Syntax, message)
    }

    /// The next word, whatever it is; `what` names it in the error.
    pub fn word(&mut self, what: &str) -> Result<Token<'a>, SceneError> {
        match self.next() {
            Some(t) => Ok(t),
            None => Err(self.error_at(
                self.line(),
                ErrorKind::Truncated,
                format!("the file ends where {what} should be"),
            )),
        }
    }

    /// Consumes `keyword` or fails naming it.
    pub fn expect(&mut self, keyword: &str, context: &str) -> Result<(), SceneError> {
        let t = self.word(&format!("'{keyword}' ({context})"))?;
        if t.text == keyword {
            Ok(())
        } else {
            Err(self.error_at(
                t.line,
                ErrorKind::Syntax,
                format!("expected '{keyword}' ({context}), found '{}'", t.text),
            ))
        }
    }

    /// A finite number; `what` names it in the error.
    pub fn number(&mut self, what: &str) -> Result<f32, SceneError> {
        let t = self.word(what)?;
        match t.text.parse::<f32>() {
            Ok(x) if x.is_finite() => Ok(x),
            Ok(_) => Err(self.error_at(
                t.line,
                ErrorKind::InvalidValue,
                format!("{what} is not finite ('{}')", t.text),
            )),
            Err(_) => Err(self.error_at(
                t.line,
                ErrorKind::Syntax,
                format!("expected a number for {what}, found '{}'", t.text),
            )),
        }
    }

    pub fn vec3(&mut self, what: &str) -> Result<glam::Vec3, SceneError> {
        Ok(glam::Vec3::new(
            self.number(what)?,
            self.number(what)?,
            self.number(what)?,
        ))
    }

    /// A whole number in `0..=max`.
    pub fn count(&mut self, what: &str, max: usize) -> Result<usize, SceneError> {
        let t = self.word(what)?;
        match t.text.parse::<i64>() {
            Ok(n) if n >= 0 && (n as u64) <= max as u64 => Ok(n as usize),
            Ok(n) => Err(self.error_at(
                t.line,
                ErrorKind::InvalidValue,
                format!("{what} {n} is out of range (0 to {max})"),
            )),
            Err(_) => Err(self.error_at(
                t.line,
                ErrorKind::Syntax,
                format!("expected a whole number for {what}, found '{}'", t.text),
            )),
        }
    }

    /// A count of items of `tokens_each` tokens that must all be present:
    /// a count larger than the rest of the file is a truncated file, found
    /// before anything is allocated for it.
    pub fn items(&mut self, what: &str, tokens_each: usize) -> Result<usize, SceneError> {
        let line = self.line();
        let n = self.count(what, u32::MAX as usize)?;
        if n.saturating_mul(tokens_each) > self.remaining() {
            return Err(self.error_at(
                line,
                ErrorKind::Truncated,
                format!(
                    "{what} is {n}, but the file has only {} more words",
                    self.remaining()
                ),
            ));
        }
        Ok(n)
    }

    /// Whether the next token reads as a number (optional arguments).
    pub fn next_is_number(&self) -> bool {
        self.peek().is_some_and(|t| t.text.parse::<f32>().is_ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(s: &str) -> Vec<(&str, u32)> {
        tokenize(s).iter().map(|t| (t.text, t.line)).collect()
    }

    #[test]
    fn comments_and_braces() {
        assert_eq!(
            texts("a 0 1 2 % frames\n# all\nk cam{\n  x}\n"),
            [
                ("a", 1),
                ("0", 1),
                ("1", 1),
                ("2", 1),
                ("k", 3),
                ("cam", 3),
                ("{", 3),
                ("x", 4),
                ("}", 4)
            ]
        );
    }

    #[test]
    fn counts_beyond_the_file_are_truncation() {
        let mut c = Cursor::new(Path::new("t.aff"), "p 1000000000 0 0 0");
        c.next();
        let err = c.items("vertex count", 3).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Truncated);
        assert_eq!(err.location.as_deref(), Some("line 1"));
    }
}
