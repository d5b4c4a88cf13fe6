use glam::Vec3;

/// A ray `origin + t * dir` for `t` in `[tmin, tmax]`. `dir` need not be
/// normalised; `t` is measured in units of `dir`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ray {
    pub origin: Vec3,
    pub dir: Vec3,
    pub tmin: f32,
    pub tmax: f32,
}

impl Ray {
    /// A ray over `[0, +inf)`.
    pub fn new(origin: Vec3, dir: Vec3) -> Self {
        Self {
            origin,
            dir,
            tmin: 0.0,
            tmax: f32::INFINITY,
        }
    }

    pub fn segment(origin: Vec3, dir: Vec3, tmin: f32, tmax: f32) -> Self {
        Self {
            origin,
            dir,
            tmin,
            tmax,
        }
    }

    pub fn at(&self, t: f32) -> Vec3 {
        self.origin + t * self.dir
    }
}

/// The closest intersection found along a ray: distance, the triangle id in
/// the scene's numbering, and the barycentrics of the hit point (the point is
/// `(1-u-v) v0 + u v1 + v v2`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hit {
    pub t: f32,
    pub prim: u32,
    pub u: f32,
    pub v: f32,
}
