//! Accessor reading with every byte range checked first, so a malformed
//! file is an error naming the accessor and never an out-of-bounds slice.
//! Integer components are converted to floats; normalized ones map to
//! [0, 1] or [-1, 1] as the glTF specification says. Sparse accessors and
//! accessors without a buffer view are not supported (an error).

use super::Loader;
use crate::{ErrorKind, SceneError};
use ::gltf::Accessor;
use ::gltf::accessor::{DataType, Dimensions};

/// Byte range of a buffer view inside a buffer of `len` bytes, if it fits.
pub(super) fn view_range(
    view: &::gltf::buffer::View,
    len: usize,
) -> Option<std::ops::Range<usize>> {
    let end = view.offset().checked_add(view.length())?;
    (end <= len).then_some(view.offset()..end)
}

/// Reads one component at the start of `bytes` as a float; normalized
/// integers map to [0, 1] or [-1, 1] as the glTF specification says.
fn component(ty: DataType, normalized: bool, bytes: &[u8]) -> f32 {
    let (value, scale) = match ty {
        DataType::F32 => return f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]),
        DataType::U8 => (bytes[0] as f32, 255.0),
        DataType::I8 => (bytes[0] as i8 as f32, 127.0),
        DataType::U16 => (u16::from_le_bytes([bytes[0], bytes[1]]) as f32, 65535.0),
        DataType::I16 => (i16::from_le_bytes([bytes[0], bytes[1]]) as f32, 32767.0),
        DataType::U32 => (
            u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as f32,
            1.0,
        ),
    };
    if normalized {
        (value / scale).max(-1.0)
    } else {
        value
    }
}

/// Reads one unsigned index at the start of `bytes` (exactly: 32-bit
/// indices do not fit a float's mantissa).
fn index(ty: DataType, bytes: &[u8]) -> u32 {
    match ty {
        DataType::U8 => bytes[0] as u32,
        DataType::U16 => u16::from_le_bytes([bytes[0], bytes[1]]) as u32,
        _ => u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]),
    }
}

impl Loader<'_> {
    /// The bytes an accessor covers: `(data, stride, count)`, with `data`
    /// starting at the first element. Every range is checked here, so the
    /// readers below index within bounds.
    fn accessor_bytes(
        &self,
        acc: &Accessor,
        at: &str,
        what: &str,
    ) -> Result<(&[u8], usize, usize), SceneError> {
        let at = format!("{at}, accessor {} ({what})", acc.index());
        if acc.sparse().is_some() {
            return Err(self.error(
                ErrorKind::Unsupported,
                at,
                "sparse accessors are not supported",
            ));
        }
        let Some(view) = acc.view() else {
            return Err(self.error(ErrorKind::Unsupported, at, "accessor without a buffer view"));
        };
        let buffer = &self.buffers[view.buffer().index()];
        let Some(range) = view_range(&view, buffer.len()) else {
            return Err(self.error(
                ErrorKind::IndexOutOfRange,
                at,
                format!(
                    "buffer view {} (offset {}, length {}) is past the end of buffer {} ({} bytes)",
                    view.index(),
                    view.offset(),
                    view.length(),
                    view.buffer().index(),
                    buffer.len()
                ),
            ));
        };
        let data = &buffer[range];
        let element = acc.size();
        let stride = view.stride().unwrap_or(element);
        if stride < element {
            return Err(self.error(
                ErrorKind::Syntax,
                at,
                format!("byte stride {stride} is smaller than the element size {element}"),
            ));
        }
        let count = acc.count();
        if count == 0 {
            return Ok((&[], stride, 0));
        }
        let end = (count - 1)
            .checked_mul(stride)
            .and_then(|x| x.checked_add(element))
            .and_then(|x| x.checked_add(acc.offset()));
        match end {
            Some(end) if end <= data.len() => Ok((&data[acc.offset()..end], stride, count)),
            _ => Err(self.error(
                ErrorKind::IndexOutOfRange,
                at,
                format!(
                    "{count} elements from offset {} run past the end of buffer view {} ({} bytes)",
                    acc.offset(),
                    view.index(),
                    data.len()
                ),
            )),
        }
    }

    /// An accessor of `N`-component vectors as floats.
    pub(super) fn read_floats<const N: usize>(
        &self,
        acc: &Accessor,
        at: &str,
        what: &str,
    ) -> Result<Vec<[f32; N]>, SceneError> {
        if acc.dimensions().multiplicity() != N {
            return Err(self.error(
                ErrorKind::Syntax,
                format!("{at}, accessor {} ({what})", acc.index()),
                format!(
                    "type {:?}, expected a {N}-component vector",
                    acc.dimensions()
                ),
            ));
        }
        let (data, stride, count) = self.accessor_bytes(acc, at, what)?;
        let (ty, normalized, size) = (acc.data_type(), acc.normalized(), acc.data_type().size());
        Ok((0..count)
            .map(|i| {
                std::array::from_fn(|k| component(ty, normalized, &data[i * stride + k * size..]))
            })
            .collect())
    }

    /// A scalar accessor of unsigned integers (primitive indices).
    pub(super) fn read_indices(&self, acc: &Accessor, at: &str) -> Result<Vec<u32>, SceneError> {
        let integer = matches!(
            acc.data_type(),
            DataType::U8 | DataType::U16 | DataType::U32
        );
        if acc.dimensions() != Dimensions::Scalar || !integer {
            return Err(self.error(
                ErrorKind::Syntax,
                format!("{at}, accessor {} (indices)", acc.index()),
                format!(
                    "indices must be unsigned integer scalars, not {:?} {:?}",
                    acc.dimensions(),
                    acc.data_type()
                ),
            ));
        }
        let (data, stride, count) = self.accessor_bytes(acc, at, "indices")?;
        let ty = acc.data_type();
        Ok((0..count).map(|i| index(ty, &data[i * stride..])).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalized_components() {
        assert_eq!(component(DataType::U8, true, &[255]), 1.0);
        assert_eq!(component(DataType::I8, true, &[0x80]), -1.0);
        assert_eq!(component(DataType::U16, false, &[1, 1]), 257.0);
    }

    #[test]
    fn large_indices_are_exact() {
        let big = 16_777_217u32; // 2^24 + 1: not a float
        assert_eq!(index(DataType::U32, &big.to_le_bytes()), big);
        assert_eq!(index(DataType::U16, &[0xff, 0xff]), 65535);
    }
}
