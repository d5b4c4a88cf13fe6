//! Geometry shared by every caustic crate: axis-aligned boxes, rays, hits,
//! triangles with the watertight ray/triangle test of Woop, Benthin and Wald
//! (JCGT 2013), the PCG32 generator, and the sampling routines and rays of
//! the ray protocol (`anchors/PROTOCOL.md`, [`protocol`]).
//!
//! Everything is `f32` and built on [`glam`]; colours are linear RGB in a
//! [`Rgb`] (a `Vec3`), as in the rest of the engine.

mod aabb;
pub mod morton;
pub mod protocol;
mod ray;
pub mod rng;
pub mod sampling;
mod triangle;

pub use aabb::Aabb;
pub use glam::{DVec3, Mat3, Mat4, Vec2, Vec3, Vec3A, Vec4};
pub use ray::{Hit, Ray};
pub use rng::Pcg32;
pub use triangle::{
    CONDITIONED, CROSSING_ROUNDING, CROSSING_SLACK, RayTriangleTest, Triangle, conditioned,
};

/// Linear RGB radiance, reflectance or power, one `f32` per channel.
pub type Rgb = Vec3;
