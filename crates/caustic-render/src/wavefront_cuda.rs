//! Wavefronts whose lengths stay on the device between bounces.
//!
//! A wave's survivors are compacted on the device
//! ([`select_indices_at`](caustic_gpu::ops::compact::select_indices_at)) and
//! gathered into buffers as long as the host's *bound* on their number,
//! padded with records the kernels skip
//! ([`gather_wave_padded`](caustic_gpu::ops::compact::gather_wave_padded)):
//! an untraceable ray ([`GpuRay::UNTRACEABLE`]) and a path record with no
//! pixel. The counts land in one device buffer, and the host reads them (one
//! wait for all) only after bounces 1, 2, 4, 8, …, where it tightens its
//! bound and learns whether any path is left. A wave of L bounces so waits
//! about log2 L times instead of once or more per bounce: the long tails of
//! specular paths (a few photons caught between a mirror and a glass ball
//! for 64 bounces) cost launches, not round trips. Once few paths are left
//! ([`tail_paths`]) and the structure is a binary BVH, one tail kernel
//! follows each path with one thread to its end, so the tail costs one
//! launch rather than ten a bounce (docs/SCALING.md).

use caustic_accel::bvh::traverse_cuda::GpuRay;
use caustic_gpu::{DeviceBuffer, Gpu, GpuError};

/// Whether the host reads a wave's counts after bounce `bounce` (0-based):
/// after bounces 0, 1, 3, 7, 15, … (the 1st, 2nd, 4th, 8th, …).
pub(crate) fn host_reads_after(bounce: u32) -> bool {
    (bounce + 1).is_power_of_two()
}

/// At most how many paths a wave hands to a tail kernel, which follows
/// each remaining path with one thread through all its remaining bounces
/// in one launch (the binary BVH's `trace_one`): a quarter of the GPU's
/// resident threads, so the tail still fills the GPU while its paths
/// diverge (a wave of this size costs a wavefront bounce about 10 launches
/// of mostly idle GPU; the tail's longest path costs about its bounce
/// count in single-ray traversals). `CAUSTIC_TAIL_PATHS=N` sets N paths a
/// multiprocessor instead of 512, for measuring where the tail should
/// start (the image does not depend on it).
pub(crate) fn tail_paths(gpu: &Gpu) -> usize {
    static PER_SM: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    let per_sm = *PER_SM.get_or_init(|| {
        std::env::var("CAUSTIC_TAIL_PATHS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(512)
    });
    gpu.info().multiprocessors as usize * per_sm
}

/// The padding of a wave: an untraceable ray and `path`, a record the
/// wave's kernels skip.
pub(crate) struct WavePad<P: bytemuck::Pod> {
    pub ray: DeviceBuffer<GpuRay>,
    pub path: DeviceBuffer<P>,
}

impl<P: bytemuck::Pod> WavePad<P> {
    pub fn new(gpu: &Gpu, path: P) -> Result<Self, GpuError> {
        Ok(Self {
            ray: DeviceBuffer::from_slice(gpu, "wave pad ray", &[GpuRay::UNTRACEABLE])?,
            path: DeviceBuffer::from_slice(gpu, "wave pad path", &[path])?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::host_reads_after;

    #[test]
    fn the_host_reads_after_doubling_bounce_counts() {
        let reads: Vec<u32> = (0..64).filter(|&b| host_reads_after(b)).collect();
        assert_eq!(reads, [0, 1, 3, 7, 15, 31, 63]);
    }
}
