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
}
