//! Reading PLY body values one at a time: whitespace-separated tokens in
//! ASCII, packed little- or big-endian values in binary.

use super::header::{Element, Scalar};

/// Why a value could not be read.
pub(super) enum ReadError {
    /// The body ended.
    End,
    /// An ASCII token that is not a number of the expected type.
    Bad(String),
}

/// One value at a time from the body, as `f64` (exact for every PLY integer
/// type and for `float`).
pub(super) trait ValueReader {
    fn read(&mut self, ty: Scalar) -> Result<f64, ReadError>;
    /// Where the reader is, for error messages ("line 12").
    fn location(&self) -> String;
    /// Body bytes not read yet, to bound reservations.
    fn remaining(&self) -> usize;
    /// Skips all records of a list-free element whose binary records are
    /// `stride` bytes; on a short body, says how many records were whole.
    fn skip_fixed(&mut self, element: &Element, stride: usize) -> Result<(), usize>;
}

pub(super) struct AsciiReader<'a> {
    data: &'a [u8],
    pos: usize,
    line: usize,
    /// Line of the token read last.
    token_line: usize,
}

impl<'a> AsciiReader<'a> {
    pub(super) fn new(data: &'a [u8], first_line: usize) -> Self {
        Self {
            data,
            pos: 0,
            line: first_line,
            token_line: first_line,
        }
    }

    fn token(&mut self) -> Option<&'a [u8]> {
        let data = self.data;
        while let Some(&b) = data.get(self.pos) {
            if !b.is_ascii_whitespace() {
                break;
            }
            self.line += usize::from(b == b'\n');
            self.pos += 1;
        }
        if self.pos == data.len() {
            return None;
        }
        let start = self.pos;
        while data.get(self.pos).is_some_and(|b| !b.is_ascii_whitespace()) {
            self.pos += 1;
        }
        self.token_line = self.line;
        Some(&data[start..self.pos])
    }
}

impl ValueReader for AsciiReader<'_> {
    fn read(&mut self, ty: Scalar) -> Result<f64, ReadError> {
        let token = self.token().ok_or(ReadError::End)?;
        let bad = || ReadError::Bad(String::from_utf8_lossy(token).into_owned());
        let text = std::str::from_utf8(token).map_err(|_| bad())?;
        // Parse `float` as f32 so ASCII and binary files of the same data
        // give bit-identical meshes (no double rounding through f64).
        let value = match ty {
            Scalar::F32 => text.parse::<f32>().map(f64::from).ok(),
            Scalar::F64 => text.parse::<f64>().ok(),
            _ => text.parse::<i64>().ok().map(|v| v as f64),
        };
        value.ok_or_else(bad)
    }

    fn location(&self) -> String {
        format!("line {}", self.token_line)
    }

    fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    fn skip_fixed(&mut self, element: &Element, _stride: usize) -> Result<(), usize> {
        let per_record = element.properties.len();
        for record in 0..element.count {
            for _ in 0..per_record {
                if self.token().is_none() {
                    return Err(record);
                }
            }
        }
        Ok(())
    }
}

pub(super) struct BinaryReader<'a> {
    data: &'a [u8],
    pos: usize,
    big_endian: bool,
}

impl<'a> BinaryReader<'a> {
    pub(super) fn new(data: &'a [u8], big_endian: bool) -> Self {
        Self {
            data,
            pos: 0,
            big_endian,
        }
    }

    fn bytes<const N: usize>(&mut self) -> Result<[u8; N], ReadError> {
        let chunk = self
            .data
            .get(self.pos..self.pos + N)
            .ok_or(ReadError::End)?;
        self.pos += N;
        let mut out = [0; N];
        out.copy_from_slice(chunk);
        if self.big_endian {
            out.reverse();
        }
        Ok(out)
    }
}

impl ValueReader for BinaryReader<'_> {
    fn read(&mut self, ty: Scalar) -> Result<f64, ReadError> {
        // `bytes` returns little-endian order whatever the file's order.
        Ok(match ty {
            Scalar::I8 => f64::from(i8::from_le_bytes(self.bytes()?)),
            Scalar::U8 => f64::from(u8::from_le_bytes(self.bytes()?)),
            Scalar::I16 => f64::from(i16::from_le_bytes(self.bytes()?)),
            Scalar::U16 => f64::from(u16::from_le_bytes(self.bytes()?)),
            Scalar::I32 => f64::from(i32::from_le_bytes(self.bytes()?)),
            Scalar::U32 => f64::from(u32::from_le_bytes(self.bytes()?)),
            Scalar::F32 => f64::from(f32::from_le_bytes(self.bytes()?)),
            Scalar::F64 => f64::from_le_bytes(self.bytes()?),
        })
    }

    fn location(&self) -> String {
        format!("body byte {}", self.pos)
    }

    fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    fn skip_fixed(&mut self, element: &Element, stride: usize) -> Result<(), usize> {
        let whole = self.remaining() / stride;
        if whole < element.count {
            self.pos = self.data.len();
            return Err(whole);
        }
        self.pos += element.count * stride;
        Ok(())
    }
}
