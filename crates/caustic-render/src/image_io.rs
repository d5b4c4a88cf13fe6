//! Image files and image metrics.
//!
//! EXR holds linear float RGB (the comparable quantity); PNG holds 8-bit
//! sRGB made the same way as the reference PNGs in `refs/`: scale by
//! `2^exposure`, clip to `[0, 1]`, apply the sRGB transfer function.

use crate::Film;
use caustic_geom::Rgb;
use rayon::prelude::*;
use std::path::Path;
use std::sync::OnceLock;

#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("{path}: unknown image format '.{ext}' (expected .exr or .png)")]
    UnknownFormat { path: String, ext: String },
    #[error("{path}: {message}")]
    Io { path: String, message: String },
    #[error("images differ in size: {0}x{1} vs {2}x{3}")]
    SizeMismatch(u32, u32, u32, u32),
}

fn io_error(path: &Path, err: impl std::fmt::Display) -> ImageError {
    ImageError::Io {
        path: path.display().to_string(),
        message: err.to_string(),
    }
}

/// sRGB opto-electronic transfer function on a linear value in `[0, 1]`.
pub fn linear_to_srgb(x: f32) -> f32 {
    if x <= 0.0031308 {
        12.92 * x
    } else {
        1.055 * x.powf(1.0 / 2.4) - 0.055
    }
}

/// The inverse of [`linear_to_srgb`]: an sRGB-encoded value in `[0, 1]`
/// to linear.
pub fn srgb_to_linear(x: f32) -> f32 {
    if x <= 0.04045 {
        x / 12.92
    } else {
        ((x + 0.055) / 1.055).powf(2.4)
    }
}

/// The lower-case extension of `path`, or `""`.
fn extension(path: &Path) -> String {
    path.extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase()
}

/// Reads an image as linear radiance: EXR as stored, PNG (or any 8/16-bit
/// image the `image` crate reads by that extension) decoded from sRGB.
/// A PNG holds values clipped to `[0, 1]` after the exposure it was
/// written with, so metrics against it are approximate where the scene
/// is brighter than 1.
pub fn read_image(path: &Path) -> Result<Film, ImageError> {
    match extension(path).as_str() {
        "exr" => read_exr(path),
        "png" => read_png(path),
        ext => Err(ImageError::UnknownFormat {
            path: path.display().to_string(),
            ext: ext.to_owned(),
        }),
    }
}

/// Reads a PNG and converts its sRGB values to linear.
pub fn read_png(path: &Path) -> Result<Film, ImageError> {
    let image = image::open(path)
        .map_err(|e| io_error(path, e))?
        .into_rgb32f();
    let mut film = Film::new(image.width(), image.height());
    for (p, rgb) in film.pixels.iter_mut().zip(image.pixels()) {
        let [r, g, b] = rgb.0.map(srgb_to_linear);
        *p = Rgb::new(r, g, b);
    }
    Ok(film)
}

/// Writes `film` as EXR (linear) or PNG (sRGB), chosen by the extension.
/// An EXR's blocks are compressed by a pool of threads made for the write.
pub fn write_image(film: &Film, path: &Path, exposure: f32) -> Result<(), ImageError> {
    write_image_with(film, path, exposure, true)
}

/// [`write_image`] on the calling thread alone: for writers that run
/// several images at once (an animation's frames), where a pool of threads
/// for each image would only be made and torn down again.
pub fn write_image_on_this_thread(
    film: &Film,
    path: &Path,
    exposure: f32,
) -> Result<(), ImageError> {
    write_image_with(film, path, exposure, false)
}

fn write_image_with(
    film: &Film,
    path: &Path,
    exposure: f32,
    parallel: bool,
) -> Result<(), ImageError> {
    let ext = extension(path);
    match ext.as_str() {
        "exr" => write_exr_with(film, path, parallel),
        "png" => write_png(film, path, exposure),
        _ => Err(ImageError::UnknownFormat {
            path: path.display().to_string(),
            ext,
        }),
    }
}

pub fn write_exr(film: &Film, path: &Path) -> Result<(), ImageError> {
    write_exr_with(film, path, true)
}

fn write_exr_with(film: &Film, path: &Path, parallel: bool) -> Result<(), ImageError> {
    use exr::prelude::*;
    let channels = SpecificChannels::rgb(|Vec2(x, y)| {
        let p = film.get(x as u32, y as u32);
        (p.x, p.y, p.z)
    });
    let image = Image::from_channels((film.width as usize, film.height as usize), channels);
    let written = match parallel {
        true => image.write().to_file(path),
        false => image.write().non_parallel().to_file(path),
    };
    written.map_err(|e| io_error(path, e))
}

pub fn write_png(film: &Film, path: &Path, exposure: f32) -> Result<(), ImageError> {
    image::save_buffer(
        path,
        &srgb_bytes(film, exposure),
        film.width,
        film.height,
        image::ColorType::Rgb8,
    )
    .map_err(|e| io_error(path, e))
}

/// The 8-bit sRGB values of `film` (RGB, row by row) as PNG and JPEG
/// images hold them: scaled by `2^exposure`, clipped to `[0, 1]`, encoded
/// by the sRGB transfer function ([`srgb_byte`]); a non-finite value is
/// black. In parallel: a live viewer converts every frame it streams.
pub fn srgb_bytes(film: &Film, exposure: f32) -> Vec<u8> {
    let scale = exposure.exp2();
    let to_byte = |v: f32| srgb_byte(if v.is_finite() { v * scale } else { 0.0 });
    let mut bytes = vec![0u8; film.pixels.len() * 3];
    bytes
        .par_chunks_mut(3)
        .zip(film.pixels.par_iter())
        .with_min_len(4096)
        .for_each(|(out, p)| out.copy_from_slice(&[to_byte(p.x), to_byte(p.y), to_byte(p.z)]));
    bytes
}

/// The sRGB byte of linear `value`: `(linear_to_srgb(value.clamp(0, 1))
/// * 255 + 0.5) as u8`, to the bit, found among the 255 linear values at
/// which that byte steps up ([`srgb_steps`], computed once) rather than
/// by a `powf` per value, which was most of a frame's encoding time.
pub fn srgb_byte(value: f32) -> u8 {
    srgb_step_table().partition_point(|&step| step <= value) as u8
}

/// For each byte `k` in 1..=255, the least linear value whose
/// [`srgb_byte`] is `k` or more (ascending): a value's byte is the number
/// of steps at or below it. The GPU's display conversion reads this table.
pub fn srgb_step_table() -> &'static [f32; 255] {
    SRGB_STEPS.get_or_init(srgb_steps)
}

static SRGB_STEPS: OnceLock<[f32; 255]> = OnceLock::new();

/// For each byte `k` in 1..=255, the least linear value in `[0, 1]` whose
/// byte by the formula is `k` or more: a bisection over the bit patterns
/// of non-negative floats, which are ordered as their values.
fn srgb_steps() -> [f32; 255] {
    let formula = |v: f32| (linear_to_srgb(v.clamp(0.0, 1.0)) * 255.0 + 0.5) as u8;
    std::array::from_fn(|i| {
        let byte = i as u8 + 1;
        let (mut below, mut at) = (0u32, 1f32.to_bits());
        while at - below > 1 {
            let mid = below + (at - below) / 2;
            if formula(f32::from_bits(mid)) >= byte {
                at = mid;
            } else {
                below = mid;
            }
        }
        f32::from_bits(at)
    })
}

/// `film` as a JPEG file in memory, sRGB as [`srgb_bytes`], at `quality`
/// (1 to 100): the compact form a live viewer streams.
pub fn jpeg_bytes(film: &Film, exposure: f32, quality: u8) -> Result<Vec<u8>, ImageError> {
    let mut jpeg = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut jpeg, quality.clamp(1, 100))
        .encode(
            &srgb_bytes(film, exposure),
            film.width,
            film.height,
            image::ExtendedColorType::Rgb8,
        )
        .map_err(|e| io_error(Path::new("(JPEG in memory)"), e))?;
    Ok(jpeg)
}

/// Reads the RGB channels of the first layer of an EXR file.
pub fn read_exr(path: &Path) -> Result<Film, ImageError> {
    use exr::prelude::*;
    let image = read_first_rgba_layer_from_file(
        path,
        |resolution, _channels| Film::new(resolution.width() as u32, resolution.height() as u32),
        |film: &mut Film, pos, (r, g, b, _a): (f32, f32, f32, f32)| {
            film.set(pos.x() as u32, pos.y() as u32, Rgb::new(r, g, b));
        },
    )
    .map_err(|e| io_error(path, e))?;
    Ok(image.layer_data.channel_data.pixels)
}

fn check_sizes(a: &Film, b: &Film) -> Result<(), ImageError> {
    if a.width != b.width || a.height != b.height {
        return Err(ImageError::SizeMismatch(
            a.width, a.height, b.width, b.height,
        ));
    }
    Ok(())
}

/// Root-mean-square difference over all pixels and channels, in linear
/// radiance (the refs README's metric).
pub fn rmse(a: &Film, b: &Film) -> Result<f64, ImageError> {
    check_sizes(a, b)?;
    let sum: f64 = a
        .pixels
        .iter()
        .zip(&b.pixels)
        .map(|(p, q)| (*p - *q).as_dvec3().length_squared())
        .sum();
    Ok((sum / (3 * a.pixels.len().max(1)) as f64).sqrt())
}

/// The image box-filtered down by `block` (each output pixel the mean of a
/// `block × block` square; a partial border square is dropped). The RMSE of
/// two downsampled images measures low-frequency differences (the bias and
/// blur of photon estimates) apart from per-pixel sampling noise.
pub fn downsample(film: &Film, block: u32) -> Film {
    let block = block.max(1);
    let mut out = Film::new(film.width / block, film.height / block);
    let scale = 1.0 / (block * block) as f32;
    for y in 0..out.height {
        for x in 0..out.width {
            let mut sum = Rgb::ZERO;
            for dy in 0..block {
                for dx in 0..block {
                    sum += film.get(x * block + dx, y * block + dy);
                }
            }
            out.set(x, y, sum * scale);
        }
    }
    out
}

/// Peak signal-to-noise ratio in dB with the given peak value.
pub fn psnr(a: &Film, b: &Film, peak: f64) -> Result<f64, ImageError> {
    let e = rmse(a, b)?;
    Ok(if e == 0.0 {
        f64::INFINITY
    } else {
        20.0 * (peak / e).log10()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exr_round_trip_is_exact() {
        let mut film = Film::new(7, 5);
        for (i, p) in film.pixels.iter_mut().enumerate() {
            *p = Rgb::new(i as f32 * 0.5, 1e-3 * i as f32, 100.0 - i as f32);
        }
        let path = std::env::temp_dir().join(format!("caustic-exr-{}.exr", std::process::id()));
        write_exr(&film, &path).unwrap();
        let back = read_exr(&path).unwrap();
        std::fs::remove_file(&path).ok();
        assert_eq!(back, film);
        assert_eq!(rmse(&film, &back).unwrap(), 0.0);
    }

    #[test]
    fn png_reads_back_as_linear() {
        let mut film = Film::new(3, 2);
        let values = [0.0, 0.002, 0.18, 0.5, 0.9, 1.0];
        for (p, v) in film.pixels.iter_mut().zip(values) {
            *p = Rgb::new(v, v * 0.5, 1.0 - v);
        }
        let path = std::env::temp_dir().join(format!("caustic-png-{}.png", std::process::id()));
        write_image(&film, &path, 0.0).unwrap();
        let back = read_image(&path).unwrap();
        std::fs::remove_file(&path).ok();
        assert_eq!((back.width, back.height), (3, 2));
        // 8 bits of sRGB: within half a code step, relative to the slope.
        assert!(rmse(&film, &back).unwrap() < 4e-3, "{back:?}");
        assert!(read_image(Path::new("x.tif")).is_err());
    }

    #[test]
    fn rmse_of_constant_offset() {
        let a = Film::new(4, 4);
        let mut b = Film::new(4, 4);
        b.pixels.iter_mut().for_each(|p| *p = Rgb::splat(0.5));
        assert!((rmse(&a, &b).unwrap() - 0.5).abs() < 1e-12);
        assert!(rmse(&a, &Film::new(2, 2)).is_err());
    }

    #[test]
    fn srgb_curve_endpoints() {
        assert_eq!(linear_to_srgb(0.0), 0.0);
        assert!((linear_to_srgb(1.0) - 1.0).abs() < 1e-6);
        assert!((linear_to_srgb(0.18) - 0.4614).abs() < 1e-3);
    }

    #[test]
    fn jpeg_frames_decode_to_the_film() {
        let mut film = Film::new(16, 8);
        for (i, p) in film.pixels.iter_mut().enumerate() {
            // Left half dark grey, right half white (JPEG keeps grey
            // but blurs colour), one NaN: black.
            *p = if i % 16 < 8 {
                Rgb::splat(0.2)
            } else {
                Rgb::ONE
            };
        }
        film.pixels[0] = Rgb::splat(f32::NAN);
        let jpeg = jpeg_bytes(&film, 0.0, 90).unwrap();
        let image = image::load_from_memory_with_format(&jpeg, image::ImageFormat::Jpeg)
            .unwrap()
            .into_rgb8();
        assert_eq!(image.dimensions(), (16, 8));
        let srgb = srgb_bytes(&film, 0.0);
        assert_eq!(&srgb[..3], &[0, 0, 0]);
        let close = |a: u8, b: u8| a.abs_diff(b) <= 12;
        for (x, y) in [(3, 4), (12, 4)] {
            let at = (y * 16 + x) as usize * 3;
            let got = image.get_pixel(x, y).0;
            assert!(
                (0..3).all(|c| close(got[c], srgb[at + c])),
                "{got:?} at {x},{y}"
            );
        }
    }

    #[test]
    fn srgb_bytes_by_steps_are_the_formula_s() {
        let formula = |v: f32| (linear_to_srgb(v.clamp(0.0, 1.0)) * 255.0 + 0.5) as u8;
        // Every 1024th float in [0, 1], the floats around every step, and
        // what the clamp handles.
        let one = 1f32.to_bits();
        let spread = (0..=one).step_by(1024).map(f32::from_bits);
        let steps = SRGB_STEPS.get_or_init(srgb_steps);
        let near = steps
            .iter()
            .flat_map(|s| [s.to_bits() - 1, s.to_bits(), s.to_bits() + 1])
            .map(f32::from_bits);
        let outside = [-1.0, -0.0, 1.5, f32::INFINITY, f32::MAX];
        for v in spread.chain(near).chain(outside) {
            assert_eq!(srgb_byte(v), formula(v), "{v:e}");
        }
        assert_eq!((srgb_byte(0.0), srgb_byte(1.0)), (0, 255));
    }
}
