use caustic_geom::Rgb;

/// A linear-radiance image, row 0 at the top.
#[derive(Clone, Debug, PartialEq)]
pub struct Film {
    pub width: u32,
    pub height: u32,
    pub pixels: Vec<Rgb>,
}

impl Film {
    pub fn new(width: u32, height: u32) -> Self {
        Self {
            width,
            height,
            pixels: vec![Rgb::ZERO; width as usize * height as usize],
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

    /// Mean over all pixels, per channel.
    pub fn mean(&self) -> Rgb {
        let sum = self
            .pixels
            .iter()
            .fold(caustic_geom::DVec3::ZERO, |s, p| s + p.as_dvec3());
        (sum / self.pixels.len().max(1) as f64).as_vec3()
    }
}
