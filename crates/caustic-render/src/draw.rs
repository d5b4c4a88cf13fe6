//! The counter-based random numbers shared by the CPU and GPU renderers.
//!
//! A *path key* names one vertex of the specular tree of one sample:
//! `sample_key(seed, pixel, sample)` at the primary ray, then
//! `child_key(parent, branch)` for each specular bounce (`branch` is
//! [`REFLECT`] or [`REFRACT`]). A decision draws from
//! `Pcg32::new(key, purpose)`: the key is the generator's initial state and
//! the purpose its stream, so different decisions at one vertex never share
//! numbers. Keys mix with the SplitMix64 finaliser; `draw.cuh`
//! has the same functions for every kernel (the GPU tests compare whole images, ray counts
//! included).

use caustic_geom::{Pcg32, Vec2};

/// Jitter of the primary ray inside its pixel (key: the sample key).
pub const CAMERA: u64 = 1;
/// Russian roulette of a weak branch (key: the branch's child key).
pub const ROULETTE: u64 = 2;
/// Area-light samples (key: `light_key(path, light, k)`).
pub const LIGHT: u64 = 3;
/// A pixel's shift of its low-discrepancy sequence over passes (key:
/// `mix(seed, pixel)`; [`pass_jitter`]).
pub const SEQUENCE: u64 = 4;
/// Branch bit of a reflected ray (mirror or Fresnel reflection).
pub const REFLECT: u64 = 0;
/// Branch bit of a refracted ray.
pub const REFRACT: u64 = 1;

/// The SplitMix64 output function: a bijective 64-bit mixer.
pub fn fmix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Folds `value` into the key `key`.
pub fn mix(key: u64, value: u64) -> u64 {
    fmix(key ^ fmix(value.wrapping_add(0x9e37_79b9_7f4a_7c15)))
}

/// Key of the primary ray of sample `sample` of pixel `pixel`
/// (`y * width + x`).
pub fn sample_key(seed: u64, pixel: u64, sample: u32) -> u64 {
    mix(mix(seed, pixel), sample as u64)
}

/// Where sample `sample` of `spp` falls inside pixel `pixel`, in pixel
/// units from its corner, with the sample's key ([`sample_key`]): the
/// centre for one sample, a jittered cell of a `√spp × √spp` grid when
/// `spp` is a square, uniform jitter otherwise. Every CPU renderer's camera
/// rays start here (the GPU kernels draw the same numbers).
pub fn pixel_sample(seed: u64, pixel: u64, sample: u32, spp: u32) -> (Vec2, u64) {
    let key = sample_key(seed, pixel, sample);
    let grid = (spp as f32).sqrt() as u32;
    let offset = if spp == 1 {
        Vec2::splat(0.5)
    } else if grid * grid == spp {
        let cell = Vec2::new((sample % grid) as f32, (sample / grid) as f32);
        (cell + uniform2(key, CAMERA)) / grid as f32
    } else {
        uniform2(key, CAMERA)
    };
    (offset, key)
}

/// Where pass `pass`'s primary ray falls inside pixel `pixel`, in pixel
/// units from its corner, when the passes follow a low-discrepancy
/// sequence: point `pass` of the two-dimensional Sobol sequence (Sobol
/// 1967; a (0,2)-sequence in base 2), its bits XORed with a random shift
/// of the pixel's own (a random digital shift, which keeps the net
/// property). Each pass's point is uniform in the pixel (the shift is),
/// so the estimate stays unbiased, while any 2^m consecutive passes from
/// a multiple of 2^m put one point in every elementary box of area 2^-m
/// (in particular every 2^-m-wide row and column): a pixel cut by an edge
/// (a light's outline) converges about like `1/passes` instead of
/// `1/√passes`. Integer arithmetic, so `draw.cuh` gives the same bits.
pub fn pass_jitter(seed: u64, pixel: u64, pass: u32) -> Vec2 {
    let mut rng = Pcg32::new(mix(seed, pixel), SEQUENCE);
    let shift = [rng.next_u32(), rng.next_u32()];
    let point = sobol2(pass);
    let coordinate = |axis: usize| ((point[axis] ^ shift[axis]) >> 8) as f32 * (1.0 / 16_777_216.0);
    Vec2::new(coordinate(0), coordinate(1))
}

/// Point `index` of the first two Sobol dimensions as 32-bit fractions:
/// the van der Corput sequence (bits reversed) and the dimension of the
/// primitive polynomial `x + 1`, whose direction numbers are
/// `v_{i+1} = v_i ^ (v_i >> 1)` from `v_0 = 2^31`.
fn sobol2(index: u32) -> [u32; 2] {
    let (mut y, mut v, mut bits) = (0u32, 1u32 << 31, index);
    while bits != 0 {
        if bits & 1 != 0 {
            y ^= v;
        }
        bits >>= 1;
        v ^= v >> 1;
    }
    [index.reverse_bits(), y]
}

/// Key of the ray that leaves the vertex `parent` along `branch`.
pub fn child_key(parent: u64, branch: u64) -> u64 {
    mix(parent, branch)
}

/// Key of the `k`-th shadow sample of area light `light` at the vertex
/// `path` (`samples` per light).
pub fn light_key(path: u64, light: u32, k: u32, samples: u32) -> u64 {
    mix(path, light as u64 * samples as u64 + k as u64)
}

/// The first uniform of decision `(key, purpose)`.
pub fn uniform(key: u64, purpose: u64) -> f32 {
    Pcg32::new(key, purpose).next_f32()
}

/// The first two uniforms of decision `(key, purpose)`.
pub fn uniform2(key: u64, purpose: u64) -> Vec2 {
    let mut rng = Pcg32::new(key, purpose);
    let x = rng.next_f32();
    Vec2::new(x, rng.next_f32())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_separate_decisions() {
        assert_eq!(fmix(0), 0);
        let k = sample_key(0, 0, 0);
        assert_ne!(k, child_key(k, REFLECT));
        assert_ne!(child_key(k, REFLECT), child_key(k, REFRACT));
        assert_ne!(light_key(k, 0, 1, 4), light_key(k, 1, 0, 4));
        let u = uniform2(k, LIGHT);
        assert!((0.0..1.0).contains(&u.x) && (0.0..1.0).contains(&u.y));
    }

    /// The passes of one pixel stratify it: 64 passes put one point in
    /// every box of an 8x8, 4x16, 16x4, 64x1 and 1x64 grid, whatever the
    /// pixel and seed (independent draws leave about 64/e = 23.5 of an
    /// 8x8 grid's cells empty); two pixels or seeds follow different shifts.
    #[test]
    fn pass_jitter_stratifies_the_pixel() {
        for (seed, pixel) in [(7, 123), (0, 0), (u64::MAX, 99_999)] {
            let points: Vec<Vec2> = (0..64).map(|pass| pass_jitter(seed, pixel, pass)).collect();
            for (columns, rows) in [(8, 8), (4, 16), (16, 4), (64, 1), (1, 64)] {
                let mut cells = vec![0u32; 64];
                for u in &points {
                    assert!((0.0..1.0).contains(&u.x) && (0.0..1.0).contains(&u.y));
                    let (cx, cy) = (
                        (u.x * columns as f32) as usize,
                        (u.y * rows as f32) as usize,
                    );
                    cells[cy * columns + cx] += 1;
                }
                assert!(
                    cells.iter().all(|&c| c == 1),
                    "seed {seed}, pixel {pixel}: {columns}x{rows} cells {cells:?}"
                );
            }
        }
        assert_ne!(pass_jitter(7, 123, 0), pass_jitter(7, 124, 0));
        assert_ne!(pass_jitter(7, 123, 0), pass_jitter(8, 123, 0));
    }
}
