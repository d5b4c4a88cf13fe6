//! The per-ray node step of the any-hit streams ([`super::stream`]), after
//! Embree's incoherent stream traversal (Fuetterling et al., "Efficient
//! Ray Tracing Kernels for Modern CPU Architectures", JCGT 2015, section
//! 4; Embree's `bvh_intersector_stream`): at an inner node, each ray of the
//! stream's mask tests all `N` children at once with its own constants
//! broadcast, and ORs its bit into a vector of `N` ray masks (one per
//! child) in the lanes of the children it keeps. The transposition from
//! "children of a ray" to "rays of a child" is one masked OR per ray, with
//! no scalar loop over children or rays; the node's six rows are loaded
//! once for all the rays.
//!
//! Exactness: a ray's test is [`RayBoxes::test`] with the constants
//! [`RayBoxes::from_parts`] would broadcast (the same operations in the
//! same order on the same values, so the same bits, which a test checks),
//! its `tmin` and, for any-hit, its `tmax` as the cutoff: each ray keeps
//! exactly the children its own single-ray traversal keeps, and so reaches
//! exactly the leaves that traversal could reach.

use super::leaf::set_bits;
use super::node::WideNode;
use super::simd::Lanes;
use super::stream::{BoxScalars, STREAM};
use super::traverse::{RowOffsets, slab_rule, splat3};

/// One ray's box constants for the per-ray step, as scalars that each node
/// broadcasts from memory (a cache line per ray).
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(64))]
struct RayBox {
    inv: [f32; 3],
    near: [f32; 3],
    far: [f32; 3],
    t_min: f32,
    t_max: f32,
    /// The ray's bit in the stream's masks, as the bits of an `f32`.
    bit: f32,
}

/// A stream's rays as the per-ray node step tests them.
pub(super) struct StreamBoxes<const N: usize> {
    /// The rows of the entry and exit planes, shared by the stream's rays
    /// (one depth axis and one sign per axis).
    rows: RowOffsets<N>,
    rays: [RayBox; STREAM],
}

impl<const N: usize> StreamBoxes<N> {
    /// The stream of rays `r` = 0, 1, ... with box constants `boxes(r)`
    /// (the single-ray ones, in the frame `rows`) and interval
    /// `intervals(r)`; rays past the last keep no child.
    #[inline(always)]
    pub(super) fn new(
        rows: RowOffsets<N>,
        count: usize,
        mut boxes: impl FnMut(usize) -> BoxScalars,
        mut interval: impl FnMut(usize) -> (f32, f32),
    ) -> Self {
        debug_assert!(count <= STREAM);
        let mut rays = [RayBox::default(); STREAM];
        for (r, ray) in rays.iter_mut().enumerate().take(count) {
            let (inv, near, far) = boxes(r);
            let (t_min, t_max) = interval(r);
            *ray = RayBox {
                inv,
                near,
                far,
                t_min,
                t_max,
                bit: f32::from_bits(1 << r),
            };
        }
        Self { rows, rays }
    }

    /// The children of `node` the rays `mask` keep (bit per slot) and,
    /// per slot, the rays that keep it (bit per ray).
    #[inline(always)]
    pub(super) fn children<V: Lanes<N>>(
        &self,
        isa: V::Isa,
        node: &WideNode<N>,
        mask: u32,
    ) -> (u32, [u32; N]) {
        let rows = self.rows.load::<V>(isa, node);
        let mut masks = V::splat(isa, 0.0);
        let mut used = 0;
        for r in set_bits(mask) {
            let ray = &self.rays[r];
            let keeps = ray.keeps::<N, V>(isa, &rows);
            masks = masks.or_where(keeps, V::splat(isa, ray.bit));
            used |= V::bits(keeps);
        }
        (used, masks.to_array().map(f32::to_bits))
    }
}

impl RayBox {
    /// [`super::traverse::RayBoxes::test`]'s kept children over `[t_min, t_max]` for the
    /// node rows `rows`: the same rule ([`slab_rule`]) on the same
    /// constants, broadcast.
    #[inline(always)]
    fn keeps<const N: usize, V: Lanes<N>>(&self, isa: V::Isa, rows: &[[V; 3]; 2]) -> V::Mask {
        let (inv, near, far) = (
            splat3(isa, self.inv),
            splat3(isa, self.near),
            splat3(isa, self.far),
        );
        let (t_min, t_max) = (V::splat(isa, self.t_min), V::splat(isa, self.t_max));
        slab_rule(rows, &inv, [&near, &far], t_min, t_max).0
    }
}

#[cfg(test)]
mod tests {
    use super::super::node::ChildRef;
    use super::super::simd::{AnyCpu, Portable};
    use super::super::traverse::{BoxParts, RayBoxes};
    use super::*;
    use caustic_geom::{Aabb, Pcg32, Vec3};

    /// A node of `N - 1` random boxes (one slot empty) and the box of them.
    fn random_node<const N: usize>(unit: &mut impl FnMut() -> f32) -> (WideNode<N>, Aabb) {
        let mut node = WideNode::<N>::empty();
        let mut bounds = Aabb::EMPTY;
        for slot in 0..N - 1 {
            let p = Vec3::new(unit(), unit(), unit()) * 4.0;
            let e = Vec3::new(unit().abs(), unit().abs(), unit().abs()) * 2.0;
            let b = Aabb::new(p - e, p + e);
            node.set(slot, b, ChildRef::Node(0));
            bounds = bounds.union(b);
        }
        (node, bounds)
    }

    /// Each ray's mask bits are its single-ray test's hits, for every ray
    /// of a stream of random rays sharing a direction class, also with
    /// tiny direction components (infinite reciprocals, which
    /// `RayBoxes::new` treats as parallel) and rays in a box's plane.
    fn masks_are_the_single_ray_tests<const N: usize, V: Lanes<N>>(isa: V::Isa) {
        let mut rng = Pcg32::new(5, 3);
        let mut unit = || rng.next_f32() * 2.0 - 1.0;
        let (mut kept, mut tested) = (0, 0);
        for case in 0..400 {
            let (node, bounds) = random_node::<N>(&mut unit);
            // One class: x the depth axis, signs (+, -, +).
            let count = 1 + case % STREAM;
            let rays: Vec<(Vec3, Vec3, f32, f32)> = (0..count)
                .map(|r| {
                    // From the -x side, towards the boxes.
                    let mut origin = Vec3::new(-8.0 + unit(), 4.0 * unit(), 4.0 * unit());
                    let mut dir = Vec3::new(1.0, -0.3 * unit().abs(), 0.3 * unit().abs());
                    match (case + r) % 5 {
                        1 => dir.y = -1e-39,
                        2 => dir.z = 1e-30,
                        3 => origin.z = node.bounds[2][0],
                        _ => {}
                    }
                    (origin, dir, unit().abs(), 4.0 + 12.0 * unit().abs())
                })
                .collect();
            let parts: Vec<BoxParts> = rays
                .iter()
                .map(|&(o, d, _, _)| BoxParts::new(o, d, &bounds))
                .collect();
            let rows = RowOffsets::new(parts[0].rows);
            let stream = StreamBoxes::<N>::new(
                rows,
                count,
                |r| (parts[r].inv, parts[r].near_shift, parts[r].far_shift),
                |r| (rays[r].2, rays[r].3),
            );
            let mask = (u32::MAX >> (STREAM - count)) & !(1 << (case % count));
            let (used, masks) = stream.children::<V>(isa, &node, mask);
            let mut expected = [0u32; N];
            for r in set_bits(mask) {
                let (o, d, t_min, t_max) = rays[r];
                assert!(RowOffsets::<N>::new(parts[r].rows) == rows);
                let single = RayBoxes::<N, V>::new(isa, o, d, &bounds);
                let (hits, _, _) = single.test(&node, V::splat(isa, t_min), V::splat(isa, t_max));
                for slot in set_bits(hits) {
                    expected[slot] |= 1 << r;
                }
            }
            assert_eq!(masks, expected, "case {case}");
            let nonzero = (0..N).filter(|&s| expected[s] != 0);
            assert_eq!(used, nonzero.fold(0, |u, s| u | (1 << s)), "case {case}");
            kept += expected.iter().map(|m| m.count_ones()).sum::<u32>();
            tested += mask.count_ones() * (N as u32 - 1);
        }
        // Neither all kept nor all culled.
        assert!(
            kept * 40 > tested && kept * 2 < tested,
            "{kept} of {tested} kept"
        );
    }

    #[test]
    fn portable_masks_are_the_single_ray_tests() {
        masks_are_the_single_ray_tests::<8, Portable<8>>(AnyCpu);
        masks_are_the_single_ray_tests::<4, Portable<4>>(AnyCpu);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn simd_masks_are_the_single_ray_tests() {
        use super::super::simd::{Avx8, Avx8k, Sse2, Sse4, avx2_for_test, avx512_for_test};
        masks_are_the_single_ray_tests::<4, Sse4>(Sse2);
        if let Some(avx) = avx2_for_test("simd_masks_are_the_single_ray_tests") {
            masks_are_the_single_ray_tests::<8, Avx8>(avx);
        }
        if let Some(avx512) = avx512_for_test("simd_masks_are_the_single_ray_tests") {
            masks_are_the_single_ray_tests::<8, Avx8k>(avx512);
        }
    }
}
