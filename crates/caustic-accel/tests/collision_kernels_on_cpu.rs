//! The collision frames' ray generation (`src/collision.cu`) run on the
//! CPU: compiled unchanged by the host C++ compiler over the fiber
//! emulator (`tests/cpu_emulation/cuda_fibers.h`, floating-point
//! contraction off, so each operation rounds once as the kernel's `_rn`
//! intrinsics do) and launched a warp per agent as on the device, its
//! segments must be [`Agents::frame_rays`]' bit for bit, in the same order
//! (by direction class, ranked by warp ballots): the counter-based
//! generator and the agents' positions are the same functions on both
//! sides. The per-agent reduction is checked on the device
//! (`gpu_collision.rs`). Needs a C++17 compiler
//! (`CXX`, else `c++`); without one it says so and skips.

#[path = "common/host_harness.rs"]
mod host_harness;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use caustic_accel::bvh::traverse_cuda::GpuRay;
use caustic_accel::collision::Agents;
use caustic_geom::{Aabb, Vec3};

fn harness() -> Option<&'static Path> {
    static HARNESS: OnceLock<Option<PathBuf>> = OnceLock::new();
    host_harness::compile_once(&HARNESS, "collision-kernels", "collision_kernels.cpp")
}

/// The kernel's segments of `frame`.
fn emulate(exe: &Path, agents: &Agents, frame: usize) -> Vec<GpuRay> {
    let mut input = Vec::new();
    input.extend((agents.count() as u32).to_le_bytes());
    input.extend((agents.rays_per_agent() as u32).to_le_bytes());
    input.extend(agents.progress(frame).to_le_bytes());
    input.extend((frame as u32).to_le_bytes());
    input.extend(agents.seed().to_le_bytes());
    for (agent, &(a, b)) in agents.paths().iter().enumerate() {
        for v in [a.extend(agents.step(agent)), b.extend(0.0)] {
            for x in v.to_array() {
                input.extend(x.to_le_bytes());
            }
        }
    }
    let output = host_harness::run(exe, "collision-kernels", &input);
    bytemuck::pod_collect_to_vec(&output)
}

#[test]
fn the_kernel_makes_the_cpu_segments_bit_for_bit() {
    let Some(exe) = harness() else { return };
    let cases = [
        (Aabb::new(Vec3::ZERO, Vec3::ONE), 40, 20, 128, 1u64),
        (
            Aabb::new(Vec3::new(-1e4, -3.0, 2.0), Vec3::new(2e4, 5.0, 7e3)),
            17,
            3,
            33,
            0xdead_beef_u64,
        ),
        (
            Aabb::new(Vec3::splat(1e-6), Vec3::splat(2e-6)),
            5,
            2,
            1,
            u64::MAX,
        ),
    ];
    for (bounds, count, frames, rays, seed) in cases {
        let agents = Agents::random(&bounds, count, frames, rays, seed);
        for frame in [0, frames / 2, frames - 1] {
            let cpu: Vec<GpuRay> = agents.frame_rays(frame).iter().map(GpuRay::from).collect();
            let kernel = emulate(exe, &agents, frame);
            assert_eq!(kernel.len(), cpu.len());
            for (i, (k, c)) in kernel.iter().zip(&cpu).enumerate() {
                assert_eq!(
                    bytemuck::bytes_of(k),
                    bytemuck::bytes_of(c),
                    "seed {seed}, frame {frame}, segment {i}: {k:?} against {c:?}"
                );
            }
        }
    }
}
