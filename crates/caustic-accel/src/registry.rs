//! The one list of accel names. The CLI's `--accel`, the tests and the
//! benchmarks all loop over [`ACCEL_NAMES`] and build through
//! [`build_accel`], so a new structure is registered here once.

use crate::{Accel, BruteForce, TriangleBvh};
use caustic_geom::Triangle;
use std::fmt;

/// Every accel name [`build_accel`] knows, in the order reports list them.
pub const ACCEL_NAMES: &[&str] = &[
    "bvh-binned",
    "bvh-binned-staged",
    "bvh-sweep",
    "bvh-wide",
    "lbvh",
    "hlbvh",
    "ploc",
    "kdtree",
    "grid",
    "brute",
];

/// A name that is not in [`ACCEL_NAMES`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownAccel {
    pub name: String,
}

impl fmt::Display for UnknownAccel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown accel `{}`; valid names: {}",
            self.name,
            ACCEL_NAMES.join(", ")
        )
    }
}

impl std::error::Error for UnknownAccel {}

/// Builds the accel called `name` over `triangles` with its default
/// settings; its `stats().build_ms` is the build's wall time.
pub fn build_accel(name: &str, triangles: &[Triangle]) -> Result<Box<dyn Accel>, UnknownAccel> {
    match name {
        "bvh-binned" => Ok(Box::new(TriangleBvh::build(triangles))),
        "bvh-binned-staged" => Ok(Box::new(TriangleBvh::build_with(
            triangles,
            &crate::bvh::build::BinnedSahBuilder::new(crate::bvh::build::BinnedSahConfig::STAGED),
        ))),
        "bvh-sweep" => Ok(Box::new(TriangleBvh::build_with(
            triangles,
            &crate::bvh::build::SweepSahBuilder::default(),
        ))),
        "bvh-wide" => Ok(Box::new(crate::bvh::wide::WideTriangleBvh::build(
            triangles,
        ))),
        "lbvh" => Ok(Box::new(TriangleBvh::build_with(
            triangles,
            &crate::bvh::build::LbvhBuilder::default(),
        ))),
        "hlbvh" => Ok(Box::new(TriangleBvh::build_with(
            triangles,
            &crate::bvh::build::HlbvhBuilder::default(),
        ))),
        "ploc" => Ok(Box::new(TriangleBvh::build_with(
            triangles,
            &crate::bvh::build::PlocBuilder::default(),
        ))),
        "kdtree" => Ok(Box::new(crate::kdtree::TriangleKdTree::build(triangles))),
        "grid" => Ok(Box::new(crate::grid::UniformGrid::build(triangles))),
        "brute" => Ok(Box::new(BruteForce::new(triangles))),
        _ => Err(UnknownAccel {
            name: name.to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use caustic_geom::Vec3;

    #[test]
    fn every_registered_name_builds_and_reports_it() {
        let tris = [Triangle::new(Vec3::ZERO, Vec3::X, Vec3::Y)];
        for &name in ACCEL_NAMES {
            let accel = build_accel(name, &tris).unwrap();
            assert_eq!(accel.name(), name);
            assert_eq!(accel.stats().name, name);
            assert_eq!(accel.stats().prims, 1);
            assert!(accel.stats().build_ms >= 0.0);
        }
    }

    #[test]
    fn unknown_name_lists_the_valid_ones() {
        let err = build_accel("octree", &[]).err().unwrap();
        let message = err.to_string();
        assert!(message.contains("octree"));
        for name in ACCEL_NAMES {
            assert!(message.contains(name));
        }
    }
}
