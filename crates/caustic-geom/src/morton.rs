//! Morton codes (Z-order curve keys) of points on an integer grid, as used by
//! the linear BVH builders (Lauterbach et al. 2009; Karras 2012) and by the
//! GPU kernels' shared header.
//!
//! A code interleaves the bits of the three grid coordinates, `x` in the
//! highest position of each triple: bit `3i + 2` is bit `i` of `x`, bit
//! `3i + 1` bit `i` of `y`, bit `3i` bit `i` of `z`. Sorting points by code
//! orders them along the Z curve, so points close in the order are close in
//! space, and the leading `3k` bits name the cell of a `2^k`-per-axis grid
//! that holds the point.
//!
//! Two widths: 30 bits (10 bits per axis, fits a `u32`) and 63 bits (21 bits
//! per axis, fits a `u64`). Coordinates above the width are masked to it.

/// Bits per axis of a 30-bit code.
pub const BITS_PER_AXIS_30: u32 = 10;
/// Bits per axis of a 63-bit code.
pub const BITS_PER_AXIS_63: u32 = 21;

/// Spreads the low 10 bits of `v` so that two zero bits separate each pair
/// (bit `i` moves to bit `3i`); higher bits of `v` are dropped.
#[inline]
pub fn expand_bits_10(v: u32) -> u32 {
    let mut x = v & 0x3ff;
    x = (x | (x << 16)) & 0x0300_00ff;
    x = (x | (x << 8)) & 0x0300_f00f;
    x = (x | (x << 4)) & 0x030c_30c3;
    x = (x | (x << 2)) & 0x0924_9249;
    x
}

/// Spreads the low 21 bits of `v` so that two zero bits separate each pair
/// (bit `i` moves to bit `3i`); higher bits of `v` are dropped.
#[inline]
pub fn expand_bits_21(v: u32) -> u64 {
    let mut x = u64::from(v) & 0x1f_ffff;
    x = (x | (x << 32)) & 0x001f_0000_0000_ffff;
    x = (x | (x << 16)) & 0x001f_0000_ff00_00ff;
    x = (x | (x << 8)) & 0x100f_00f0_0f00_f00f;
    x = (x | (x << 4)) & 0x10c3_0c30_c30c_30c3;
    x = (x | (x << 2)) & 0x1249_2492_4924_9249;
    x
}

/// Inverse of [`expand_bits_21`]: gathers bits `0, 3, 6, ...` of `x`.
#[inline]
pub fn compact_bits_21(x: u64) -> u32 {
    let mut x = x & 0x1249_2492_4924_9249;
    x = (x | (x >> 2)) & 0x10c3_0c30_c30c_30c3;
    x = (x | (x >> 4)) & 0x100f_00f0_0f00_f00f;
    x = (x | (x >> 8)) & 0x001f_0000_ff00_00ff;
    x = (x | (x >> 16)) & 0x001f_0000_0000_ffff;
    x = (x | (x >> 32)) & 0x1f_ffff;
    x as u32
}

/// The 30-bit code of grid point `(x, y, z)`, each coordinate below `2^10`.
#[inline]
pub fn encode_30(x: u32, y: u32, z: u32) -> u32 {
    (expand_bits_10(x) << 2) | (expand_bits_10(y) << 1) | expand_bits_10(z)
}

/// The 63-bit code of grid point `(x, y, z)`, each coordinate below `2^21`.
#[inline]
pub fn encode_63(x: u32, y: u32, z: u32) -> u64 {
    (expand_bits_21(x) << 2) | (expand_bits_21(y) << 1) | expand_bits_21(z)
}

/// The grid point of a code made by [`encode_63`] (or [`encode_30`], widened).
#[inline]
pub fn decode_63(code: u64) -> [u32; 3] {
    [
        compact_bits_21(code >> 2),
        compact_bits_21(code >> 1),
        compact_bits_21(code),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bit-by-bit reference interleave.
    fn slow_encode(p: [u32; 3], bits: u32) -> u64 {
        let mut code = 0u64;
        for i in 0..bits {
            for (axis, &c) in p.iter().enumerate() {
                let bit = u64::from((c >> i) & 1);
                code |= bit << (3 * i + 2 - axis as u32);
            }
        }
        code
    }

    fn samples(bits: u32) -> Vec<[u32; 3]> {
        let top = (1u32 << bits) - 1;
        let mut state = 0x9e37_79b9u32;
        let random = std::iter::repeat_with(move || {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state & top
        });
        let corners = [[0, 0, 0], [top, top, top], [top, 0, 1], [1, 2, 4]];
        let random: Vec<u32> = random.take(3 * 200).collect();
        corners
            .into_iter()
            .chain(random.chunks(3).map(|c| [c[0], c[1], c[2]]))
            .collect()
    }

    #[test]
    fn encode_30_matches_the_bitwise_definition() {
        for p in samples(10) {
            assert_eq!(
                u64::from(encode_30(p[0], p[1], p[2])),
                slow_encode(p, 10),
                "{p:?}"
            );
        }
        assert_eq!(encode_30(1023, 1023, 1023), (1 << 30) - 1);
        assert_eq!(encode_30(1, 0, 0), 0b100);
    }

    #[test]
    fn encode_63_matches_the_bitwise_definition_and_decodes() {
        for p in samples(21) {
            let code = encode_63(p[0], p[1], p[2]);
            assert_eq!(code, slow_encode(p, 21), "{p:?}");
            assert_eq!(decode_63(code), p);
        }
        assert_eq!(encode_63(0x1f_ffff, 0x1f_ffff, 0x1f_ffff), (1 << 63) - 1);
    }

    #[test]
    fn the_two_widths_agree_on_the_common_bits() {
        // A 10-bit point scaled to 21 bits keeps its 30-bit code as the prefix.
        for p in samples(10) {
            let wide = encode_63(p[0] << 11, p[1] << 11, p[2] << 11);
            assert_eq!(wide >> 33, u64::from(encode_30(p[0], p[1], p[2])));
        }
    }

    #[test]
    fn out_of_range_coordinates_are_masked() {
        assert_eq!(expand_bits_10(0x400), 0);
        assert_eq!(expand_bits_21(0x20_0000), 0);
        assert_eq!(encode_30(0x401, 0, 0), encode_30(1, 0, 0));
    }
}
