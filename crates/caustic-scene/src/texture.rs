use caustic_geom::{Rgb, Vec2};

/// Index into `Scene::textures`.
pub type TextureId = u32;

/// An RGB texture in linear radiometric values (sRGB files are decoded on
/// load), sampled bilinearly with repeat wrapping.
#[derive(Clone, Debug, PartialEq)]
pub struct Texture {
    pub name: String,
    pub width: u32,
    pub height: u32,
    /// Row-major, row 0 at the top of the image (v = 1).
    pub texels: Vec<Rgb>,
}

impl Texture {
    /// Decodes 8-bit sRGB to linear.
    pub fn srgb_to_linear(c: u8) -> f32 {
        let x = c as f32 / 255.0;
        if x <= 0.04045 {
            x / 12.92
        } else {
            ((x + 0.055) / 1.055).powf(2.4)
        }
    }

    /// Bilinear lookup with repeat wrapping; `uv = (0, 0)` is the bottom left
    /// of the image (OBJ and Mitsuba convention; glTF uvs are flipped on load).
    pub fn sample(&self, uv: Vec2) -> Rgb {
        if self.texels.is_empty() {
            return Rgb::ZERO;
        }
        let (w, h) = (self.width as i64, self.height as i64);
        let x = uv.x * self.width as f32 - 0.5;
        let y = (1.0 - uv.y) * self.height as f32 - 0.5;
        if !x.is_finite() || !y.is_finite() {
            return self.texels[0];
        }
        let (x0, y0) = (x.floor(), y.floor());
        let (fx, fy) = (x - x0, y - y0);
        let texel = |xi: i64, yi: i64| {
            let xi = xi.rem_euclid(w) as usize;
            let yi = yi.rem_euclid(h) as usize;
            self.texels[yi * self.width as usize + xi]
        };
        let (xi, yi) = (x0 as i64, y0 as i64);
        let top = texel(xi, yi) * (1.0 - fx) + texel(xi + 1, yi) * fx;
        let bottom = texel(xi, yi + 1) * (1.0 - fx) + texel(xi + 1, yi + 1) * fx;
        top * (1.0 - fy) + bottom * fy
    }
}

/// Decodes an sRGB image (any format the `image` crate was built with) to
/// linear texels, through 8 bits per channel.
pub(crate) fn decode_srgb(bytes: &[u8]) -> Result<(u32, u32, Vec<Rgb>), String> {
    let decoded =
        image::load_from_memory(bytes).map_err(|e| format!("cannot decode image: {e}"))?;
    let rgb = decoded.to_rgb8();
    let texels = rgb
        .pixels()
        .map(|p| Rgb::from_array(p.0.map(Texture::srgb_to_linear)))
        .collect();
    Ok((rgb.width(), rgb.height(), texels))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_texture_samples_constant() {
        let t = Texture {
            name: "c".into(),
            width: 2,
            height: 2,
            texels: vec![Rgb::splat(0.25); 4],
        };
        for uv in [Vec2::ZERO, Vec2::new(0.3, 0.9), Vec2::new(-4.2, 7.1)] {
            assert!((t.sample(uv) - Rgb::splat(0.25)).length() < 1e-6);
        }
    }

    #[test]
    fn srgb_decoding_endpoints() {
        assert_eq!(Texture::srgb_to_linear(0), 0.0);
        assert!((Texture::srgb_to_linear(255) - 1.0).abs() < 1e-6);
    }
}
