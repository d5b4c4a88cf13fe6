//! The anchor protocol's rays of a standard scene (primary at the camera,
//! AO and diffuse from the primary hits) with the CPU BVH's answers, and
//! the comparison of a GPU tracer's answers with them; shared by the GPU
//! tests of structures traced through the protocol (`gpu_binned.rs`,
//! `gpu_taskpool.rs`, `gpu_dacrt.rs`). The includer names `common/gpu_scenes.rs` `scenes` and
//! `common/gpu_compare.rs` `compare`.

#![allow(dead_code)] // each includer uses its own part

use caustic_accel::TriangleBvh;
use caustic_accel::bvh::traverse_cuda::GpuHit;
use caustic_geom::{Hit, Ray, protocol};

use caustic_accel::bvh::traverse_cuda::Tracer;
use caustic_accel::bvh::triangle_bvh_cuda::DeviceBvh;

use super::compare::{
    Report, compare_closest, compare_occluded, cpu_closest, cpu_occluded, gpu_closest,
    gpu_occluded, upload_rays,
};
use super::scenes::Loaded;

/// A pass's rays, named, and whether it asks for any hit.
pub struct Pass {
    pub name: &'static str,
    pub rays: Vec<Ray>,
    pub any_hit: bool,
}

/// What a GPU tracer answered for one pass.
pub enum GpuAnswers {
    Closest(Vec<GpuHit>),
    Occluded(Vec<u32>),
}

/// The protocol's passes of one scene and the CPU reference's answers.
pub struct ProtocolRays {
    pub passes: Vec<Pass>,
    closest: Vec<Vec<Option<Hit>>>,
    occluded: Vec<Vec<bool>>,
}

impl ProtocolRays {
    pub fn new(scene: &Loaded, width: u32, height: u32) -> Self {
        let reference = TriangleBvh::build(&scene.triangles);
        let primary = protocol::primary_rays(&scene.camera, width, height);
        let hits = cpu_closest(&reference, &primary);
        let diag = protocol::scene_diagonal(&scene.triangles);
        let diffuse = protocol::secondary_rays(&primary, &hits, &scene.triangles, diag);
        let ao_tmax = protocol::ao_tmax(diag);
        let ao: Vec<Ray> = diffuse
            .iter()
            .map(|r| Ray::segment(r.origin, r.dir, 0.0, ao_tmax))
            .collect();
        let passes = vec![
            Pass {
                name: "primary",
                rays: primary,
                any_hit: false,
            },
            Pass {
                name: "AO",
                rays: ao,
                any_hit: true,
            },
            Pass {
                name: "diffuse",
                rays: diffuse,
                any_hit: false,
            },
        ];
        let closest = passes
            .iter()
            .map(|p| {
                if p.any_hit {
                    Vec::new()
                } else {
                    cpu_closest(&reference, &p.rays)
                }
            })
            .collect();
        let occluded = passes
            .iter()
            .map(|p| {
                if p.any_hit {
                    cpu_occluded(&reference, &p.rays)
                } else {
                    Vec::new()
                }
            })
            .collect();
        Self {
            passes,
            closest,
            occluded,
        }
    }

    /// Reports of `trace` (a pass's rays, whether any hit will do) against
    /// the CPU reference, pass by pass.
    pub fn compare(
        &self,
        mut trace: impl FnMut(&Pass) -> GpuAnswers,
    ) -> Vec<(&'static str, Report)> {
        let mut reports = Vec::new();
        for (k, pass) in self.passes.iter().enumerate() {
            let report = match trace(pass) {
                GpuAnswers::Closest(hits) => compare_closest(&pass.rays, &hits, &self.closest[k]),
                GpuAnswers::Occluded(out) => compare_occluded(&pass.rays, &out, &self.occluded[k]),
            };
            reports.push((pass.name, report));
        }
        reports
    }

    /// [`Self::compare`] for the binary BVH traversal (`Tracer`) of `bvh`.
    pub fn compare_bvh(&self, tracer: &mut Tracer, bvh: &DeviceBvh) -> Vec<(&'static str, Report)> {
        self.compare(|pass| {
            let buffer = upload_rays(&pass.rays);
            if pass.any_hit {
                GpuAnswers::Occluded(gpu_occluded(tracer, bvh, &buffer))
            } else {
                GpuAnswers::Closest(gpu_closest(tracer, bvh, &buffer))
            }
        })
    }
}
