//! A [`Bvh2`] over triangles on the device, in the node layout the CPU uses:
//! the nodes are uploaded byte for byte ([`BvhNode`] is shared, and
//! `kernels/bvh.cuh` checks its CUDA twin against it field by field), so a
//! tree built by any builder, CPU or GPU, is traced by the same kernels.
//!
//! The triangles go in leaf-slot order (as [`TriangleBvh`] keeps them), one
//! [`GpuTriangle`] of three 16-byte words per slot, so a leaf is one
//! contiguous run of aligned loads; the fourth lane of the first word holds
//! the triangle's scene id, which spares the kernel a load from the slot map
//! on every candidate hit.

use crate::bvh::MAX_DEPTH;
use crate::{BuildInput, Bvh2, BvhNode, TriangleBvh};
use bytemuck::{Pod, Zeroable};
use caustic_geom::Triangle;

use caustic_gpu::DeviceBuffer;
use caustic_gpu::Gpu;
use caustic_gpu::GpuError;

/// One leaf slot's triangle on the device: three vertices padded to 16 bytes
/// each, with the scene id in the first padding word.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct GpuTriangle {
    pub v0: [f32; 3],
    /// The triangle's scene id (`Bvh2::prim_indices` of its slot).
    pub prim: u32,
    pub v1: [f32; 3],
    pub pad1: u32,
    pub v2: [f32; 3],
    pub pad2: u32,
}

const _: () = assert!(size_of::<GpuTriangle>() == 48);

impl GpuTriangle {
    pub fn new(tri: &Triangle, prim: u32) -> Self {
        Self {
            v0: tri.v0.to_array(),
            prim,
            v1: tri.v1.to_array(),
            pad1: 0,
            v2: tri.v2.to_array(),
            pad2: 0,
        }
    }

    pub fn triangle(&self) -> Triangle {
        Triangle::new(self.v0.into(), self.v1.into(), self.v2.into())
    }
}

/// A triangle BVH resident on the device.
pub struct DeviceBvh {
    nodes: DeviceBuffer<BvhNode>,
    /// Slot k holds the triangle `prim_indices[k]`.
    triangles: DeviceBuffer<GpuTriangle>,
    /// Slot to scene id (`Bvh2::prim_indices`).
    prim_indices: DeviceBuffer<u32>,
    /// Scene id to slot: where a hit's triangle lies (the secondary rays
    /// need its vertices).
    slots: DeviceBuffer<u32>,
}

impl DeviceBvh {
    /// Uploads a CPU-built triangle BVH.
    pub fn upload(gpu: &Gpu, accel: &TriangleBvh) -> Result<Self, GpuError> {
        Self::from_parts(gpu, accel.bvh(), accel.leaf_triangles())
    }

    /// Uploads `bvh` with `leaf_triangles[k]`, the triangle of slot `k`.
    /// Refuses a tree deeper than [`MAX_DEPTH`], which would overflow the
    /// traversal stack.
    pub fn from_parts(
        gpu: &Gpu,
        bvh: &Bvh2,
        leaf_triangles: &[Triangle],
    ) -> Result<Self, GpuError> {
        if leaf_triangles.len() != bvh.prim_indices.len() {
            return Err(GpuError::LengthMismatch {
                operation: "DeviceBvh::from_parts",
                what: "leaf triangles",
                expected: bvh.prim_indices.len(),
                actual: leaf_triangles.len(),
            });
        }
        let depth = bvh.shape().max_depth;
        if depth > MAX_DEPTH {
            return Err(GpuError::Invalid {
                what: "BVH",
                message: format!("depth {depth} exceeds the traversal stack ({MAX_DEPTH})"),
            });
        }
        let triangles: Vec<GpuTriangle> = leaf_triangles
            .iter()
            .zip(&bvh.prim_indices)
            .map(|(tri, &prim)| GpuTriangle::new(tri, prim))
            .collect();
        Ok(Self {
            nodes: DeviceBuffer::from_slice(gpu, "BVH nodes", &bvh.nodes)?,
            triangles: DeviceBuffer::from_slice(gpu, "BVH leaf triangles", &triangles)?,
            prim_indices: DeviceBuffer::from_slice(gpu, "BVH prim indices", &bvh.prim_indices)?,
            slots: DeviceBuffer::from_slice(gpu, "BVH slots", &inverse(&bvh.prim_indices)?)?,
        })
    }

    /// Wraps buffers a device builder filled (the inverse map included).
    pub(crate) fn from_device_parts(
        nodes: DeviceBuffer<BvhNode>,
        triangles: DeviceBuffer<GpuTriangle>,
        prim_indices: DeviceBuffer<u32>,
        slots: DeviceBuffer<u32>,
    ) -> Self {
        Self {
            nodes,
            triangles,
            prim_indices,
            slots,
        }
    }

    /// Bytes held on the device: nodes, triangles, slot maps.
    pub fn bytes(&self) -> usize {
        self.nodes.bytes() + self.triangles.bytes() + self.prim_indices.bytes() + self.slots.bytes()
    }

    pub fn gpu(&self) -> &Gpu {
        self.nodes.gpu()
    }

    pub fn nodes(&self) -> &DeviceBuffer<BvhNode> {
        &self.nodes
    }

    /// The nodes and the leaf-slot triangles, writable, with the slot map:
    /// what a refit rewrites in place (`refit_cuda.rs`).
    pub(crate) fn refit_parts(
        &mut self,
    ) -> (
        &mut DeviceBuffer<BvhNode>,
        &mut DeviceBuffer<GpuTriangle>,
        &DeviceBuffer<u32>,
    ) {
        (&mut self.nodes, &mut self.triangles, &self.prim_indices)
    }

    /// Triangles in leaf-slot order.
    pub fn triangles(&self) -> &DeviceBuffer<GpuTriangle> {
        &self.triangles
    }

    /// Slot to scene id.
    pub fn prim_indices(&self) -> &DeviceBuffer<u32> {
        &self.prim_indices
    }

    /// Scene id to slot.
    pub fn slots(&self) -> &DeviceBuffer<u32> {
        &self.slots
    }

    /// Number of triangles.
    pub fn prims(&self) -> usize {
        self.prim_indices.len()
    }

    /// Copies the hierarchy back (for validation, or to trace on the CPU).
    pub fn download(&self) -> Result<(Bvh2, Vec<Triangle>), GpuError> {
        let bvh = Bvh2 {
            nodes: self.nodes.download()?,
            prim_indices: self.prim_indices.download()?,
        };
        let triangles = self.triangles.download()?;
        Ok((bvh, triangles.iter().map(GpuTriangle::triangle).collect()))
    }
}

impl DeviceBvh {
    /// The structural validator of device-built trees: downloads the tree
    /// and checks it against the scene triangles it was built over (scene
    /// order): every invariant of [`Bvh2::validate`] (each triangle in
    /// exactly one leaf, child boxes inside their parents, every node
    /// reachable once, no cycles, depth at most [`MAX_DEPTH`]), exact tight
    /// boxes and leaves of at most `max_leaf_size` triangles
    /// ([`Bvh2::validate_tight`]), each slot's triangle equal to its scene
    /// triangle bit for bit with its scene id, and the scene-id-to-slot map
    /// the inverse of the slots. Returns the downloaded tree.
    pub fn validate(&self, scene: &[Triangle], max_leaf_size: usize) -> Result<Bvh2, String> {
        let download = |e: GpuError| format!("downloading the tree: {e}");
        let bvh = Bvh2 {
            nodes: self.nodes.download().map_err(download)?,
            prim_indices: self.prim_indices.download().map_err(download)?,
        };
        let input = BuildInput::from_triangles(scene);
        bvh.validate(&input.bounds)?;
        bvh.validate_tight(&input, max_leaf_size)?;
        let triangles = self.triangles.download().map_err(download)?;
        let slots = self.slots.download().map_err(download)?;
        if triangles.len() != scene.len() || slots.len() != scene.len() {
            return Err(format!(
                "{} slot triangles and {} slot entries for {} triangles",
                triangles.len(),
                slots.len(),
                scene.len()
            ));
        }
        for (slot, (stored, &id)) in triangles.iter().zip(&bvh.prim_indices).enumerate() {
            let expected = GpuTriangle::new(&scene[id as usize], id);
            if bytemuck::bytes_of(stored) != bytemuck::bytes_of(&expected) {
                return Err(format!(
                    "slot {slot} holds {stored:?}, expected scene triangle {id}"
                ));
            }
            if slots[id as usize] as usize != slot {
                return Err(format!(
                    "triangle {id} sits in slot {slot} but the map says {}",
                    slots[id as usize]
                ));
            }
        }
        Ok(bvh)
    }
}

/// Scene id to slot: the inverse of `prim_indices`, a permutation, or for a
/// tree with spatial splits (`bvh-spatial`, a triangle in several slots) the
/// first slot of each id; any of them holds the same triangle.
fn inverse(prim_indices: &[u32]) -> Result<Vec<u32>, GpuError> {
    let mut slots = vec![u32::MAX; prim_indices.len()];
    for (slot, &prim) in prim_indices.iter().enumerate() {
        match slots.get_mut(prim as usize) {
            Some(entry) if *entry == u32::MAX => *entry = slot as u32,
            Some(_) => {}
            None => {
                return Err(GpuError::Invalid {
                    what: "BVH",
                    message: format!(
                        "slot {slot} holds id {prim}, past the {} slots",
                        prim_indices.len()
                    ),
                });
            }
        }
    }
    Ok(slots)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inverse_of_a_permutation() {
        assert_eq!(inverse(&[2, 0, 1]).unwrap(), [1, 2, 0]);
        // A triangle in two slots (spatial splits): its first slot.
        assert_eq!(inverse(&[1, 0, 1]).unwrap(), [1, 0, u32::MAX]);
        assert!(inverse(&[3]).is_err());
        assert!(inverse(&[]).unwrap().is_empty());
    }

    #[test]
    fn triangle_round_trips_with_its_id() {
        let tri = Triangle::new(
            [1.0, 2.0, 3.0].into(),
            [4.0, 5.0, 6.0].into(),
            [7.0, 8.0, 9.0].into(),
        );
        let gpu = GpuTriangle::new(&tri, 42);
        assert_eq!(gpu.triangle(), tri);
        let words: [u32; 12] = bytemuck::cast(gpu);
        assert_eq!(words[3], 42);
        assert_eq!(f32::from_bits(words[4]), 4.0);
    }
}
