//! What the GPU test and the GPU benchmark share: the large scene and the
//! image agreement measure.
#![allow(dead_code)] // each user takes a part

use caustic_geom::Vec3;
use caustic_render::{Film, image_io};
use caustic_scene::{Camera, Light, Scene, data_dirs};

/// Dabrovic's Sponza (the trace benchmark's view) lit by one point light
/// under the roof, or `None`, saying why, without the standard scenes.
pub fn sponza_with_point_light() -> Option<Scene> {
    let path = data_dirs::scene_file("sponza-dabrovic/sponza.obj")?;
    let mut scene = Scene::load(&path).expect("sponza loads");
    scene.camera = Some(Camera::look_at(
        Vec3::new(-14.0, 0.0, 2.5),
        Vec3::new(0.0, 0.0, 4.0),
        Vec3::Z,
        65.0,
    ));
    scene.lights = vec![Light::Point {
        position: Vec3::new(0.0, 0.0, 10.0),
        intensity: Vec3::splat(200.0),
    }];
    Some(scene)
}

/// How close two renders of one image are.
#[derive(Clone, Copy, Debug)]
pub struct Agreement {
    /// PSNR with peak 1.
    pub psnr: f64,
    /// Fraction of pixels whose channels all differ by at most 1e-3.
    pub close: f64,
    pub max_abs: f32,
}

impl Agreement {
    pub fn measure(a: &Film, b: &Film) -> Self {
        let psnr = image_io::psnr(a, b, 1.0).expect("same size");
        let diffs: Vec<f32> = a
            .pixels
            .iter()
            .zip(&b.pixels)
            .map(|(x, y)| (*x - *y).abs().max_element())
            .collect();
        let close = diffs.iter().filter(|&&d| d <= 1e-3).count() as f64 / diffs.len() as f64;
        let max_abs = diffs.iter().fold(0.0f32, |m, &d| m.max(d));
        Self {
            psnr,
            close,
            max_abs,
        }
    }

    /// The acceptance rule: PSNR of at least 50 dB, or at most 1e-3 on
    /// 99.9 % of the pixels.
    pub fn passes(&self) -> bool {
        self.psnr >= 50.0 || self.close >= 0.999
    }
}

impl std::fmt::Display for Agreement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "PSNR {:.2} dB, {:.4} % of pixels within 1e-3, max abs diff {:.3e}",
            self.psnr,
            100.0 * self.close,
            self.max_abs
        )
    }
}
