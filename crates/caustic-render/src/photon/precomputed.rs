//! Irradiance precomputed at photon positions (Christensen, "Faster photon
//! map global illumination", JGT 1999), for the final gather's lookups.
//!
//! A final gather makes one global-map lookup per gather ray: millions of
//! `k`-nearest queries of `k ≈ 64`. Irradiance varies slowly, so it is
//! estimated once at every `stride`-th photon of the global map (full `k`
//! query, the photon's own normal), and a gather ray then takes the value
//! of the nearest such photon whose normal agrees with the surface's: a
//! query for a handful of points instead of 64. The cost is a little more
//! blur (about the spacing of the chosen photons, far below the estimate's
//! own radius) and a diffuse-only answer at the gather hit: the radiance
//! returned is `albedo/π · E`, so a glossy lobe's share of the light
//! reflected towards the gather point is left out.

use super::PhotonRenderError;
use super::estimate::{self, EstimateSettings};
use super::map::PhotonMap;
use crate::team::{Team, gather_concat, share};
use caustic_accel::points::build_point_structure;
use caustic_accel::points::{Neighbour, PointStructure};
use caustic_geom::{Rgb, Vec3};
use rayon::prelude::*;

/// Precomputed photons looked at per lookup, for one with a matching normal.
const CANDIDATES: usize = 8;

/// Smallest cosine between the surface's normal and a precomputed
/// photon's for its irradiance to be used.
const NORMAL_COS: f32 = 0.9;

/// Irradiance estimates at a subset of the global map's photons.
pub struct IrradianceMap {
    normals: Vec<Vec3>,
    irradiance: Vec<Rgb>,
    index: Box<dyn PointStructure>,
    max_radius: f32,
}

impl IrradianceMap {
    /// Estimates the irradiance at every `stride`-th photon of `global`
    /// (in index order, so the choice does not depend on threads). A team
    /// shares the estimates (each member a contiguous share, exchanged in
    /// index order): every member gets the same map.
    pub fn build(
        global: &PhotonMap,
        settings: &EstimateSettings,
        stride: usize,
        structure: &str,
        team: &dyn Team,
    ) -> Result<Self, PhotonRenderError> {
        let chosen: Vec<usize> = (0..global.len()).step_by(stride.max(1)).collect();
        let mine = share(team, chosen.len() as u64);
        let estimates: Vec<[Vec3; 2]> = chosen[mine.start as usize..mine.end as usize]
            .par_iter()
            .map_init(Vec::new, |scratch, &i| {
                let photon = &global.photons[i];
                let (p, n) = (photon.position(), photon.normal());
                [n, estimate::irradiance(global, settings, p, n, scratch)]
            })
            .collect();
        let estimates = gather_concat(team, estimates)?;
        let positions: Vec<Vec3> = chosen
            .iter()
            .map(|&i| global.photons[i].position())
            .collect();
        let index = build_point_structure(structure, &positions, settings.max_radius)?;
        let (normals, irradiance) = estimates.into_iter().map(|[n, e]| (n, e)).unzip();
        Ok(Self {
            normals,
            irradiance,
            index,
            max_radius: settings.max_radius,
        })
    }

    pub fn len(&self) -> usize {
        self.normals.len()
    }

    pub fn is_empty(&self) -> bool {
        self.normals.is_empty()
    }

    /// Irradiance at `point` on a surface with unit normal `normal`: that
    /// of the nearest precomputed photon whose normal agrees, zero where
    /// none lies within the search radius.
    pub fn irradiance(&self, point: Vec3, normal: Vec3, scratch: &mut Vec<Neighbour>) -> Rgb {
        self.index.knn(point, CANDIDATES, self.max_radius, scratch);
        scratch
            .iter()
            .find(|n| self.normals[n.index as usize].dot(normal) >= NORMAL_COS)
            .map_or(Rgb::ZERO, |n| self.irradiance[n.index as usize])
    }
}
