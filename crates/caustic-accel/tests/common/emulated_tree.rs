//! The trees the emulated GPU builders write back (`sah_kernels_on_cpu.rs`,
//! `taskpool_kernels_on_cpu.rs`): read from a harness's output, and their
//! leaf slots checked against the scene.

use caustic_accel::bvh::triangle_bvh_cuda::GpuTriangle;
use caustic_accel::{Bvh2, BvhNode};
use caustic_geom::Triangle;

/// A device-built tree: the nodes and slots' triangle ids, the triangles
/// copied into the slots, and the slot of each scene triangle.
pub struct EmulatedTree {
    pub tree: Bvh2,
    pub leaf_triangles: Vec<GpuTriangle>,
    pub slots: Vec<u32>,
}

/// The triangles as the builders' input words, each with its id.
pub fn triangle_words(tris: &[Triangle]) -> Vec<GpuTriangle> {
    tris.iter()
        .enumerate()
        .map(|(i, t)| GpuTriangle::new(t, i as u32))
        .collect()
}

/// The tree at the front of `output` for `n` triangles (the node count,
/// the nodes, the slots' ids, the slots' triangles, the slot map), and the
/// output after it.
pub fn read_tree(output: &[u8], n: usize) -> (EmulatedTree, &[u8]) {
    let mut at = 0;
    let mut take = |bytes: usize| {
        at += bytes;
        &output[at - bytes..at]
    };
    let nodes = u32::from_le_bytes(take(4).try_into().unwrap()) as usize;
    let nodes: Vec<BvhNode> = bytemuck::pod_collect_to_vec(take(32 * nodes));
    let prim_indices: Vec<u32> = bytemuck::pod_collect_to_vec(take(4 * n));
    let leaf_triangles: Vec<GpuTriangle> = bytemuck::pod_collect_to_vec(take(48 * n));
    let slots: Vec<u32> = bytemuck::pod_collect_to_vec(take(4 * n));
    let tree = Bvh2 {
        nodes,
        prim_indices,
    };
    let got = EmulatedTree {
        tree,
        leaf_triangles,
        slots,
    };
    (got, &output[at..])
}

/// Every slot holds its scene triangle with its id, the slot map inverts,
/// and `depth` (what the build reported) is the tree's.
pub fn check_slots(got: &EmulatedTree, depth: u32, tris: &[Triangle]) -> Result<(), String> {
    let tree = &got.tree;
    for (slot, (stored, &id)) in got
        .leaf_triangles
        .iter()
        .zip(&tree.prim_indices)
        .enumerate()
    {
        let expected = GpuTriangle::new(&tris[id as usize], id);
        if bytemuck::bytes_of(stored) != bytemuck::bytes_of(&expected) {
            return Err(format!("slot {slot} holds {stored:?}, not triangle {id}"));
        }
        if got.slots[id as usize] as usize != slot {
            return Err(format!(
                "triangle {id} is in slot {slot}, the map says {}",
                got.slots[id as usize]
            ));
        }
    }
    if !tree.nodes.is_empty() && depth as usize != tree.shape().max_depth {
        return Err(format!(
            "depth {depth} reported, the tree's is {}",
            tree.shape().max_depth
        ));
    }
    Ok(())
}
