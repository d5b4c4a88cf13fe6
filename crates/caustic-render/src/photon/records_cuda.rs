//! The device records of the GPU photon mapper, byte for byte the CUDA
//! structs of `photon.cuh` (checked through `render_layout.cuh`): photons,
//! light sources, photons in flight, pass parameters, hash-grid and
//! photon-map views, eye vertices and gather paths.

use bytemuck::{Pod, Zeroable};
use caustic_accel::points::hash_grid_cuda::GpuHashGrid;
use caustic_gpu::{DeviceBuffer, GpuError};

/// A stored photon: `caustic_render::photon::Photon` byte for byte
/// (position, power divided by the emitted count, octahedral incoming
/// direction and normal).
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct GpuPhoton {
    pub position: [f32; 3],
    pub power: [f32; 3],
    pub incoming: u32,
    pub normal: u32,
}

/// A stored photon as the radiance estimate reads it: its power, its
/// incoming direction (octahedral, decoded for glossy surfaces only) and
/// its normal decoded once (`photon_shaded`), where the estimate would
/// decode it for every query that finds the photon.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct GpuShadedPhoton {
    pub power: [f32; 3],
    pub incoming: u32,
    pub normal: [f32; 3],
    pub pad: u32,
}

/// `GpuPhotonSource::kind` values.
pub mod source_kind {
    pub const AREA: u32 = 0;
    pub const POINT: u32 = 1;
    pub const SPOT: u32 = 2;
    pub const DIRECTIONAL: u32 = 3;
}

/// One light as a photon source, with its selection probability.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct GpuPhotonSource {
    /// Position (point, spot) or unit direction (directional).
    pub a: [f32; 3],
    pub kind: u32,
    /// Unit spot axis, or the centre of a directional light's disc.
    pub b: [f32; 3],
    /// Index of the area light.
    pub area: u32,
    /// Emitted power (area, point, directional) or intensity (spot).
    pub power: [f32; 3],
    pub cos_start: f32,
    pub cos_width: f32,
    /// Radius of a directional light's disc.
    pub radius: f32,
    pub pick: f32,
    /// Running sum of `pick`, ending at 1.
    pub cdf: f32,
}

/// `GpuPhotonPath::kind` values: the bounces since the light.
pub mod path_kind {
    pub const LIGHT: u32 = 0;
    pub const SPECULAR: u32 = 1;
    pub const DIFFUSE: u32 = 2;
}

/// A photon in flight: its PCG32 state, power and path kind.
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct GpuPhotonPath {
    pub state: u64,
    pub inc: u64,
    pub power: [f32; 3],
    pub kind: u32,
}

/// `PhotonParams::global_rule` values (`caustic_render`'s `GlobalRule`).
pub mod global_rule {
    pub const AFTER_FIRST_BOUNCE: u32 = 0;
    pub const INDIRECT_ONLY: u32 = 1;
    pub const ALL: u32 = 2;
}

/// One photon pass.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct PhotonParams {
    /// Device address of `source_count` [`GpuPhotonSource`]s.
    pub sources: u64,
    /// Index of the first photon of the emitted wave.
    pub first_photon: u64,
    pub seed: u64,
    pub source_count: u32,
    pub max_bounces: u32,
    /// `1 / photons emitted`.
    pub inv_photons: f32,
    pub global_rule: u32,
    /// 1: survival by mean albedo, 0: by max albedo.
    pub mean_roulette: u32,
    /// 1: caustic photons only, stopping at the first diffuse hit.
    pub caustic_only: u32,
}

/// One hash grid as kernels read it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct GridView {
    pub start: u64,
    pub end: u64,
    pub sorted: u64,
    pub origin: [f32; 3],
    pub inv_cell: f32,
    pub dims: [u32; 3],
    pub table_bits: u32,
}

impl GridView {
    pub fn new(grid: &GpuHashGrid) -> Self {
        let g = grid.geometry();
        let (start, end, sorted) = grid.device_arrays();
        Self {
            start,
            end,
            sorted,
            origin: g.origin,
            inv_cell: 1.0 / g.cell,
            dims: g.dims,
            table_bits: g.table_bits,
        }
    }
}

/// A photon map as the estimate kernel reads it: the photons in two hash
/// grids over their positions, and the estimate's settings. The `coarse`
/// grid has cells of at least `max_radius` and answers exactly from the 27
/// cells around a query; the `fine` one has cells about the k-th
/// neighbour's distance where the map is dense, and is searched in growing
/// shells of cells until the k nearest are certain (exact for any radius).
/// A query takes the coarse grid when its 27 cells hold at most
/// `coarse_limit` photons, else the fine one: both give the same answer,
/// at the cost of a few hundred candidates instead of thousands. A limit
/// of 0 skips counting and always tries the fine cells first (lookups of
/// a few points in an evenly dense map); `u32::MAX` means coarse only.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct PhotonMapView {
    pub coarse: GridView,
    pub fine: GridView,
    pub photons: u64,
    /// The photons as the estimate reads them (`GpuShadedPhoton`, same order).
    pub shaded: u64,
    /// Photons per estimate (the k-th sets the radius), 2..=128.
    pub k: u32,
    pub max_radius: f32,
    /// 1: cone filter.
    pub cone: u32,
    /// Photons in the map; 0 estimates nothing.
    pub count: u32,
    pub coarse_limit: u32,
    pub pad: u32,
}

impl PhotonMapView {
    /// The view of `photons` indexed by `coarse` (cells of at least
    /// `max_radius`) and `fine` (any cell), both built over their
    /// positions, and read by the estimate as `shaded` (one per photon).
    pub fn new(
        coarse: &GpuHashGrid,
        fine: &GpuHashGrid,
        photons: &DeviceBuffer<GpuPhoton>,
        shaded: &DeviceBuffer<GpuShadedPhoton>,
        k: u32,
        max_radius: f32,
        cone: bool,
    ) -> Result<Self, GpuError> {
        if !(max_radius.is_finite()
            && max_radius > 0.0
            && max_radius <= coarse.geometry().max_radius)
        {
            return Err(GpuError::Invalid {
                what: "photon estimate radius",
                message: format!(
                    "{max_radius} is not in (0, {}], the coarse grid's radius",
                    coarse.geometry().max_radius
                ),
            });
        }
        if !(2..=caustic_accel::points::hash_grid_cuda::MAX_K as u32).contains(&k) {
            return Err(GpuError::Invalid {
                what: "photon estimate k",
                message: format!(
                    "k = {k}; the estimate takes 2..={}",
                    caustic_accel::points::hash_grid_cuda::MAX_K
                ),
            });
        }
        if shaded.len() != photons.len() {
            return Err(GpuError::Invalid {
                what: "photon map view",
                message: format!(
                    "{} shaded records for {} photons",
                    shaded.len(),
                    photons.len()
                ),
            });
        }
        Ok(Self {
            coarse: GridView::new(coarse),
            fine: GridView::new(fine),
            photons: photons.device_ptr(),
            shaded: shaded.device_ptr(),
            k,
            max_radius,
            cone: u32::from(cone),
            count: photons.len() as u32,
            // A shell of 27 fine cells holds about 9 · 1.44 / π · k ≈ 4k.
            coarse_limit: 8 * k,
            pad: 0,
        })
    }
}

/// A diffuse end of an eye path, where the radiance estimates are added.
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct GpuEyeVertex {
    pub point: [f32; 3],
    pub pixel: u32,
    /// The path's throughput.
    pub weight: [f32; 3],
    pub material: u32,
    /// Shading normal towards the viewer.
    pub n: [f32; 3],
    pub pad0: u32,
    /// Geometric normal towards the viewer.
    pub ng: [f32; 3],
    pub pad1: u32,
    /// Unit direction towards the viewer.
    pub wo: [f32; 3],
    pub pad2: u32,
    pub albedo: [f32; 3],
    pub pad3: u32,
    /// The path's random key (`draw`), which keys its gather rays.
    pub key: u64,
    pub pad4: u64,
}

/// One final-gather ray in flight.
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct GpuGatherPath {
    pub key: u64,
    pub throughput: [f32; 3],
    /// Result slot: vertex (in the chunk) × rays per vertex + ray.
    pub slot: u32,
    pub depth: u32,
    pub pad: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_have_the_kernel_sizes() {
        assert_eq!(size_of::<GpuPhoton>(), 32);
        assert_eq!(size_of::<GpuPhotonSource>(), 64);
        assert_eq!(size_of::<GpuPhotonPath>(), 32);
        assert_eq!(size_of::<PhotonParams>(), 48);
        assert_eq!(size_of::<GridView>(), 56);
        assert_eq!(size_of::<GpuEyeVertex>(), 112);
        assert_eq!(size_of::<GpuGatherPath>(), 32);
        assert_eq!(size_of::<PhotonMapView>(), 152);
        assert_eq!(size_of::<GpuShadedPhoton>(), 32);
    }
}
