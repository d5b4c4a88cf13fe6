//! The GPU `lbvh`'s one-launch tree for one primitive per leaf
//! (`lbvh_karras_30` in `src/bvh/build/lbvh.cu`: Apetrei's bottom-up
//! construction, 2014, writing Karras's numbering as it merges) run on the
//! CPU: compiled unchanged by the host C++ compiler over the fiber
//! emulation (`tests/cpu_emulation/cuda_fibers.h`) and launched in blocks
//! of 256 threads as on the GPU, its nodes must be those of Karras's radix
//! tree built top down (each range split at its smallest common prefix,
//! equal codes told apart by position) and numbered as `lbvh.rs`'s `karras_layout`
//! numbers it (the children of inner node `k` at `2k + 1` and `2k + 2`),
//! bit for bit, on sorted codes with long runs of duplicates; the leaf
//! slots get their triangles (with their scene ids) and every triangle its
//! slot, read through a shuffled order as the sort leaves it. The GPU tests
//! (`gpu_build.rs`) compare whole builds with the CPU's node for node.
//! Needs a C++17 compiler (`CXX`, else `c++`); without one it says so and
//! skips.

#[path = "common/host_harness.rs"]
mod host_harness;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use caustic_accel::BvhNode;
use caustic_geom::{Aabb, Pcg32, Vec3};

fn harness() -> Option<&'static Path> {
    static HARNESS: OnceLock<Option<PathBuf>> = OnceLock::new();
    host_harness::compile_once(&HARNESS, "lbvh-kernels", "lbvh_kernels.cpp")
}

/// Karras's common prefix of the keys (code, position) at `i` and `j`.
fn prefix(codes: &[u32], i: usize, j: usize) -> u32 {
    let x = u64::from(codes[i] ^ codes[j]);
    if x != 0 {
        x.leading_zeros()
    } else {
        64 + ((i ^ j) as u32).leading_zeros()
    }
}

/// glam's SSE union: `a < b ? a : b` and `a > b ? a : b`, lane by lane.
fn union(a: &Aabb, b: &Aabb) -> Aabb {
    let lo = |x: f32, y: f32| if x < y { x } else { y };
    let hi = |x: f32, y: f32| if x > y { x } else { y };
    Aabb::new(
        Vec3::new(
            lo(a.min.x, b.min.x),
            lo(a.min.y, b.min.y),
            lo(a.min.z, b.min.z),
        ),
        Vec3::new(
            hi(a.max.x, b.max.x),
            hi(a.max.y, b.max.y),
            hi(a.max.z, b.max.z),
        ),
    )
}

/// The subtree over `[lo, hi]` (inner node `k` when `lo < hi`): writes its
/// children's records and returns its box and height.
fn subtree(
    codes: &[u32],
    boxes: &[Aabb],
    lo: usize,
    hi: usize,
    k: usize,
    out: &mut [BvhNode],
) -> (Aabb, u32) {
    if lo == hi {
        return (boxes[lo], 0);
    }
    let split = (lo..hi).min_by_key(|&s| prefix(codes, s, s + 1)).unwrap();
    let (lbox, lh) = subtree(codes, boxes, lo, split, split, out);
    let (rbox, rh) = subtree(codes, boxes, split + 1, hi, split + 1, out);
    let record = |a: usize, b: usize, c: usize, bounds: Aabb| {
        if a == b {
            BvhNode::leaf(bounds, a as u32, 1)
        } else {
            BvhNode::inner(bounds, 2 * c as u32 + 1)
        }
    };
    out[2 * k + 1] = record(lo, split, split, lbox);
    out[2 * k + 2] = record(split + 1, hi, split + 1, rbox);
    (union(&lbox, &rbox), 1 + lh.max(rh))
}

fn reference(codes: &[u32], boxes: &[Aabb]) -> (Vec<BvhNode>, u32) {
    let n = codes.len();
    let mut out = vec![BvhNode::leaf(Aabb::EMPTY, 0, 1); 2 * n - 1];
    let (root, height) = subtree(codes, boxes, 0, n - 1, 0, &mut out);
    out[0] = BvhNode::inner(root, 1);
    (out, height)
}

/// What the kernel writes: the nodes, the leaf slots' triangles (48-byte
/// records: v0, the scene id, v1, 0, v2, 0), the slot of each scene
/// triangle, and the root's height.
struct Emulated {
    nodes: Vec<BvhNode>,
    leaves: Vec<[u32; 12]>,
    slots: Vec<u32>,
    height: u32,
}

/// The scene triangle whose box is `b`: v0 at the low corner, v1 at the
/// high one, v2 at v0 again (every test box is strictly wider than a
/// point, so min and max pick their operands without ties).
fn triangle_of(b: &Aabb) -> [u32; 12] {
    let (lo, hi) = (
        b.min.to_array().map(f32::to_bits),
        b.max.to_array().map(f32::to_bits),
    );
    [
        lo[0], lo[1], lo[2], 0, hi[0], hi[1], hi[2], 0, lo[0], lo[1], lo[2], 0,
    ]
}

/// Runs the kernel on `codes` with slot `k` holding scene triangle
/// `ids[k]`, whose box is `boxes[k]`.
fn emulate(exe: &Path, codes: &[u32], ids: &[u32], boxes: &[Aabb]) -> Emulated {
    let n = codes.len();
    let mut scene = vec![[0u32; 12]; n];
    for (k, &id) in ids.iter().enumerate() {
        scene[id as usize] = triangle_of(&boxes[k]);
    }
    let mut input = Vec::new();
    input.extend((n as u32).to_le_bytes());
    for word in codes.iter().chain(ids).chain(scene.iter().flatten()) {
        input.extend(word.to_le_bytes());
    }
    let output = host_harness::run(exe, "lbvh-kernels", &input);
    let (nodes, rest) = output.split_at((2 * n - 1) * 32);
    let (leaves, rest) = rest.split_at(n * 48);
    let (slots, height) = rest.split_at(n * 4);
    Emulated {
        nodes: bytemuck::pod_collect_to_vec(nodes),
        leaves: bytemuck::pod_collect_to_vec(leaves),
        slots: bytemuck::pod_collect_to_vec(slots),
        height: u32::from_le_bytes(height.try_into().unwrap()),
    }
}

#[test]
fn the_one_launch_tree_is_karras_tree_in_karras_numbering() {
    let Some(exe) = harness() else { return };
    let mut rng = Pcg32::new(14, 2);
    for (n, distinct) in [
        (2usize, 2u32),
        (3, 1),
        (17, 5),
        (1000, 1 << 30),
        (3000, 40),
        (5000, 1),
    ] {
        let mut codes: Vec<u32> = (0..n).map(|_| rng.next_u32() % distinct).collect();
        codes.sort_unstable();
        let boxes: Vec<Aabb> = (0..n)
            .map(|_| {
                let p = Vec3::new(rng.next_f32(), rng.next_f32(), rng.next_f32());
                // Signed zeros too: the union's operand order shows on them.
                let q = if rng.next_u32().is_multiple_of(4) {
                    Vec3::ZERO * -1.0
                } else {
                    p
                };
                Aabb::new(q.min(p), q.max(p) + 0.01)
            })
            .collect();
        // The slots' scene triangles in a shuffled order, as a sort leaves them.
        let mut ids: Vec<u32> = (0..n as u32).collect();
        for i in (1..n).rev() {
            ids.swap(i, rng.next_u32() as usize % (i + 1));
        }
        let (want, want_height) = reference(&codes, &boxes);
        let got = emulate(exe, &codes, &ids, &boxes);
        assert_eq!(got.height, want_height, "n {n}: height");
        for (i, (g, w)) in got.nodes.iter().zip(&want).enumerate() {
            assert_eq!(
                bytemuck::bytes_of(g),
                bytemuck::bytes_of(w),
                "n {n}, node {i}: {g:?} against {w:?}"
            );
        }
        for (k, &id) in ids.iter().enumerate() {
            let mut leaf = triangle_of(&boxes[k]);
            leaf[3] = id;
            assert_eq!(got.leaves[k], leaf, "n {n}: the triangle of slot {k}");
            assert_eq!(got.slots[id as usize], k as u32, "n {n}: the slot of {id}");
        }
    }
}
