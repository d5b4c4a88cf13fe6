//! kNN and radius queries of the photon kd-tree on the GPU (`query.cu`),
//! the twin of `super::query`: answers equal `caustic_accel::points`'s
//! contract bit for bit (ties by `(dist2, index)`), as the hash grid's do.

use caustic_gpu::ops::launch_grid_stride as launch;
use caustic_gpu::{DeviceBuffer, GpuError};

use super::build_cuda::GpuPointKdTree;
use crate::kernels::points_kdtree_query as k;
use crate::points::hash_grid_cuda::{GpuNeighbours, GpuRadiusNeighbours, MAX_K, radius_two_pass};

impl GpuPointKdTree {
    /// The `k` nearest points within `max_radius` of every query.
    pub fn knn(
        &self,
        queries: &DeviceBuffer<[f32; 3]>,
        k: usize,
        max_radius: f32,
    ) -> Result<GpuNeighbours, GpuError> {
        if k > MAX_K {
            return Err(GpuError::Invalid {
                what: "kNN k",
                message: format!("{k} neighbours asked, the GPU kernels keep at most {MAX_K}"),
            });
        }
        let gpu = queries.gpu();
        let m = queries.len();
        let mut out = GpuNeighbours::new(gpu, m, k)?;
        launch(
            gpu,
            k::POINT_KDTREE_KNN,
            m,
            (
                self.nodes.ptr(),
                self.sorted.ptr(),
                self.sorted.len() as u32,
                queries.ptr().cast(),
                m as u64,
                k as u32,
                max_radius,
                out.index.ptr_mut(),
                out.dist2.ptr_mut(),
                out.count.ptr_mut(),
            ),
        )?;
        Ok(out)
    }

    /// Every point within `radius` (any, `+inf` included) of every query,
    /// sorted by `(dist2, index)`.
    pub fn radius(
        &self,
        queries: &DeviceBuffer<[f32; 3]>,
        radius: f32,
    ) -> Result<GpuRadiusNeighbours, GpuError> {
        let gpu = queries.gpu();
        let m = queries.len();
        let kernel = k::POINT_KDTREE_RADIUS;
        radius_two_pass(gpu, kernel.name(), m, |tail| {
            let args = (
                self.nodes.ptr(),
                self.sorted.ptr(),
                self.sorted.len() as u32,
                queries.ptr().cast(),
                m as u64,
                radius,
                tail.offsets,
                tail.counts,
                tail.total,
                tail.keys,
                tail.index,
                tail.dist2,
            );
            launch(gpu, kernel, m, args)
        })
    }
}
