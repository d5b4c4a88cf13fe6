use caustic_geom::Rgb;

/// A linear-radiance image, row 0 at the top.
#[derive(Clone, Debug, PartialEq)]
pub struct Film {
    pub width: u32,
    pub height: u32,
    pub pixels: Vec<Rgb>,
}

impl Film {
    /// A black image. Its pixels come from zeroed allocation (`calloc`):
    /// a large image's pages are mapped zero on first touch, where
    /// `vec![Rgb::ZERO; n]` writes every pixel on this thread first (0.3 s
    /// for an 8192² film).
    pub fn new(width: u32, height: u32) -> Self {
        Self {
            width,
            height,
            pixels: bytemuck::zeroed_vec(width as usize * height as usize),
        }
    }

    pub fn get(&self, x: u32, y: u32) -> Rgb {
        self.pixels[y as usize * self.width as usize + x as usize]
    }

    pub fn set(&mut self, x: u32, y: u32, value: Rgb) {
        self.pixels[y as usize * self.width as usize + x as usize] = value;
    }

    /// How many pixels of `other` differ from this image's in any bit
    /// (every pixel when the sizes differ): 0 means the same image, bit
    /// for bit.
    pub fn pixels_differing_from(&self, other: &Film) -> usize {
        if (self.width, self.height) != (other.width, other.height) {
            return self.pixels.len().max(other.pixels.len());
        }
        let bits = |p: &Rgb| p.to_array().map(f32::to_bits);
        self.pixels
            .iter()
            .zip(&other.pixels)
            .filter(|(a, b)| bits(a) != bits(b))
            .count()
    }

    /// The largest per-channel difference of `other` from this image,
    /// relative to this image's value (values under 1e-3 count as 1e-3):
    /// how far a render of the same sums in another order drifts. Infinite
    /// when the sizes differ.
    pub fn max_relative_difference(&self, other: &Film) -> f32 {
        if (self.width, self.height) != (other.width, other.height) {
            return f32::INFINITY;
        }
        self.pixels
            .iter()
            .zip(&other.pixels)
            .map(|(a, b)| ((*a - *b).abs() / a.abs().max(Rgb::splat(1e-3))).max_element())
            .fold(0.0, f32::max)
    }

    /// Mean over all pixels, per channel.
    pub fn mean(&self) -> Rgb {
        let sum = self
            .pixels
            .iter()
            .fold(caustic_geom::DVec3::ZERO, |s, p| s + p.as_dvec3());
        (sum / self.pixels.len().max(1) as f64).as_vec3()
    }
}
