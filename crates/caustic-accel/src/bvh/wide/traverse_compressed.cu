// traverse_compressed.cu: closest-hit and any-hit traversal of the
// compressed 8-wide BVH (compressed.cuh) over a device buffer of rays.
//
// The traversal is Ylitie, Karras and Laine's (HPG 2017, their traversal
// section and its pseudocode): the stack holds groups, not nodes. A node
// group is (index of the first inner child, hit bits of the children not yet
// visited in bits 24..31 | the node's inner mask in bits 0..7); a triangle
// group is (index of the first triangle, hit bits of the triangles not yet
// tested in bits 0..23). Visiting a node tests its eight child boxes at once
// and yields one of each; the children are taken lowest bit first, and since
// an inner child's bit is 24 + (slot ^ octant_inverse) and the build put each
// child in the slot of its octant, that is roughly front to back. Triangle
// groups are tested right away, unless few lanes of the warp have triangles
// while the others could go on with nodes: then the group is postponed on
// the stack. Around that, the persistent loop of traverse.cu (Aila and
// Laine's while-while kernel with dynamic fetch) hands out the rays.
//
// The results are the binary traversal's, bit for bit (caustic_accel's
// Accel contract): the same watertight test, leaves accepting a hit at
// exactly the closest distance when its id is lower, and a box test that
// never culls a child the binary kernel's box_entry would keep on the exact
// child box. Two such tests:
// - EXACT: decodes the planes (compressed::decode) and runs box_entry on
//   them; a decoded box contains the exact box, and box_entry keeps every
//   box that holds a hit (traverse.rs's docs say why).
// - fast: the paper's one fused multiply-add per plane,
//   t = q * (scale / d) + (origin - o) / d (with q as 2^23 + q straight
//   from a byte permutation, the 2^23 folded into the per-node term, again
//   rounded outwards), with the per-node terms widened
//   so that the result brackets box_entry's arithmetic: each term's
//   rounding is bounded by CW_REL_ERROR of the magnitudes involved, the
//   planes are rounded outwards (__fmaf_rd / _ru), and box_entry's margin
//   (BVH_SLACK times the child's depth-slab distance) is replaced by a
//   larger one, bounded from the node's depth slab, folded into the same
//   terms. An axis whose terms are not finite (a zero direction component,
//   overflow) imposes no limit. So the fast test keeps a superset of what
//   box_entry keeps on the decoded box, at one FMA per plane.
#include "common.cuh"
#include "bvh.cuh"
#include "compressed.cuh"

// Threads per block (traverse_compressed_cuda::CW_TRACE_THREADS).
#define CW_TRACE_THREADS 128u
// Stack entries. A node pushes at most one node group per level, and a
// triangle group is postponed only while the stack holds fewer than
// CW_STACK_POSTPONE entries, so a tree of depth CW_STACK - CW_STACK_POSTPONE
// fits (compressed_cuda checks the depth).
#define CW_STACK 64u
#define CW_STACK_POSTPONE 16u
// A warp with fewer active lanes than this goes back to fetch rays.
#define CW_FETCH_THRESHOLD 20u
// Triangle tests are postponed when fewer than this percentage of the
// warp's traversing lanes have any.
#define CW_POSTPONE_PERCENT 20u
// Bound of the fast test's rounding error relative to the magnitudes of
// the node's planes and the ray origin: 8 units of 2^-24 (the error terms
// add up to 6, see the Rust module docs), and an absolute floor for
// products that go subnormal.
#define CW_REL_ERROR (1.0f / 2097152.0f)
#define CW_ABS_ERROR 1.17549435e-38f
// The fast test's margin: BVH_SLACK widened by 1/8, which covers the
// rounding of the bound it multiplies.
#define CW_SLACK (BVH_SLACK * 1.125f)
// Bits of a group's hit mask: inner children in the top byte.
#define CW_CHILD_BITS 0xff000000u
#define CW_TRIANGLE_BITS 0x00ffffffu

struct CwStack {
    uint2 entries[CW_STACK];
    u32 size;

    __device__ __forceinline__ void push(uint2 group) {
        // Only a tree deeper than the build allows can overflow.
        if (size == CW_STACK) __trap();
        entries[size++] = group;
    }
    __device__ __forceinline__ uint2 pop() { return entries[--size]; }
};

// What one lane knows about its ray.
struct CwRay {
    RayBoxTest box;
    TriangleTest tri;
    float tmin;
    // The closest hit so far (tmax until there is one): the culling cutoff.
    float closest;
    u32 prim;
    float u, v;
    // Bit k set where the direction's axis (4: x, 2: y, 1: z) is not
    // negative: child slots are visited in the order slot ^ oct_inv.
    u32 oct_inv;
};

// 2^23 + byte k of w, as a float, in one PRMT: the byte becomes the low
// mantissa bits of 2^23. The fast test folds the 2^23 into its per-node
// terms (axis_terms), so a plane costs this and one FFMA.
__device__ __forceinline__ float byte_mantissa(u32 w, u32 k) {
    return __uint_as_float(__byte_perm(w, 0x4b000000u, 0x7540u | k));
}

// The fast test's per-node terms of one axis: t = q * b + a for step q, as
// m * b + (a - 2^23 b) for m = 2^23 + q, with a widened by `widen` (entry
// planes: a_lo, exit planes: a_hi) and the fold rounded outwards; an axis
// whose terms are not finite gets (0, -inf, +inf): no limit.
struct AxisTerms {
    float b, a_lo, a_hi;
};

// Rounding bound of the axis's terms (see the file's docs).
__device__ __forceinline__ float axis_error(float p, float s, float o, float inv) {
    const float magnitude = __fadd_ru(__fadd_ru(fabsf(p), __fmul_ru(255.0f, s)), fabsf(o));
    return __fmaf_ru(__fmul_ru(magnitude, fabsf(inv)), CW_REL_ERROR, CW_ABS_ERROR);
}

__device__ __forceinline__ AxisTerms axis_terms(float a, float b, float widen) {
    // 2^23 b is exact (a power of two times b) unless it overflows, which
    // the check below catches with room for m up to 2^24.
    const float shift = __fmul_rn(8388608.0f, b);
    AxisTerms t;
    t.b = b;
    t.a_lo = __fsub_rd(__fsub_rd(a, widen), shift);
    t.a_hi = __fsub_ru(__fadd_ru(a, widen), shift);
    if (!(fabsf(t.a_lo) < CAUSTIC_INF && fabsf(t.a_hi) < CAUSTIC_INF &&
          fabsf(__fmul_rn(16777216.0f, b)) < CAUSTIC_INF)) {
        t.b = 0.0f;
        t.a_lo = -CAUSTIC_INF;
        t.a_hi = CAUSTIC_INF;
    }
    return t;
}

// Where four children's hits go in a node's hit mask, from their meta
// bytes (one 32-bit word), four bytes at once as in Ylitie et al.'s
// pseudocode: `index4` the bit (a leaf's triangle offset; 24 + (slot ^
// oct_inv) for an inner child, whose meta byte's low bits are 24 + slot:
// 0b11xxx), `bits4` what to set there (the unary triangle count; 1 for an
// inner child; 0 for an empty slot).
struct MetaBits {
    u32 index4, bits4;
};

__device__ __forceinline__ MetaBits meta_bits(u32 meta4, u32 oct_inv) {
    // Bit 4 of each byte: both bits 4 and 3 of its meta byte set (the
    // shift cannot carry into bit 4 of the next byte).
    const u32 inner4 = (meta4 & (meta4 << 1)) & 0x10101010u;
    MetaBits m;
    // (inner4 >> 4) is 1 in the bytes of inner children; times oct_inv
    // (< 8) puts oct_inv in those bytes without carries.
    m.index4 = (meta4 ^ ((inner4 >> 4) * oct_inv)) & 0x1f1f1f1fu;
    m.bits4 = (meta4 >> 5) & 0x07070707u;
    return m;
}

// The hit bits of child k (0..3) of a group of four.
__device__ __forceinline__ u32 child_hit_bits(MetaBits m, u32 k) {
    return ((m.bits4 >> (8 * k)) & 0xffu) << ((m.index4 >> (8 * k)) & 0xffu);
}

// The two words of a plane array's eight bytes, by slot half.
__device__ __forceinline__ u32 pick(uint2 words, u32 half) { return half ? words.y : words.x; }

// Visits node `index`: tests its children's boxes and returns the groups of
// the inner children and of the triangles that were hit.
template <bool EXACT>
__device__ __forceinline__ void visit_node(const CompressedNode* __restrict__ nodes, u32 index,
                                           const CwRay& s, uint2& node_group, uint2& tri_group) {
    const uint4* w = reinterpret_cast<const uint4*>(nodes) + CW_NODE_WORDS * (u64)index;
    const uint4 w0 = __ldg(w), w1 = __ldg(w + 1), w2 = __ldg(w + 2), w3 = __ldg(w + 3),
                w4 = __ldg(w + 4);
    const float px = __uint_as_float(w0.x), py = __uint_as_float(w0.y), pz = __uint_as_float(w0.z);
    const float sx = cw_exponent_scale(w0.w & 0xffu), sy = cw_exponent_scale((w0.w >> 8) & 0xffu),
                sz = cw_exponent_scale((w0.w >> 16) & 0xffu);
    const uint2 lo_x = make_uint2(w2.x, w2.y), lo_y = make_uint2(w2.z, w2.w),
                lo_z = make_uint2(w3.x, w3.y), hi_x = make_uint2(w3.z, w3.w),
                hi_y = make_uint2(w4.x, w4.y), hi_z = make_uint2(w4.z, w4.w);
    const RayBoxTest& r = s.box;
    const MetaBits meta_lo = meta_bits(w1.z, s.oct_inv), meta_hi = meta_bits(w1.w, s.oct_inv);
    u32 hits = 0;
    if (EXACT) {
#pragma unroll
        for (u32 i = 0; i < CW_WIDTH; ++i) {
            const u32 half = i >> 2, k = i & 3u;
            const float4 lo = make_float4(cw_decode((pick(lo_x, half) >> (8 * k)) & 0xffu, sx, px),
                                          cw_decode((pick(lo_y, half) >> (8 * k)) & 0xffu, sy, py),
                                          cw_decode((pick(lo_z, half) >> (8 * k)) & 0xffu, sz, pz),
                                          0.0f);
            const float4 hi = make_float4(cw_decode((pick(hi_x, half) >> (8 * k)) & 0xffu, sx, px),
                                          cw_decode((pick(hi_y, half) >> (8 * k)) & 0xffu, sy, py),
                                          cw_decode((pick(hi_z, half) >> (8 * k)) & 0xffu, sz, pz),
                                          0.0f);
            float bound, order;
            if (box_entry(r, lo, hi, s.tmin, s.closest, bound, order)) {
                hits |= child_hit_bits(half ? meta_hi : meta_lo, k);
            }
        }
    } else {
        // Per-node terms: a = (p - o) / d and b = scale / d per axis, their
        // rounding bound, and the margin from the depth slab's distances.
        const float ax = __fmul_rn(__fsub_rn(px, r.origin.x), r.inv_dir.x), bx = __fmul_rn(sx, r.inv_dir.x);
        const float ay = __fmul_rn(__fsub_rn(py, r.origin.y), r.inv_dir.y), by = __fmul_rn(sy, r.inv_dir.y);
        const float az = __fmul_rn(__fsub_rn(pz, r.origin.z), r.inv_dir.z), bz = __fmul_rn(sz, r.inv_dir.z);
        const float ex = axis_error(px, sx, r.origin.x, r.inv_dir.x);
        const float ey = axis_error(py, sy, r.origin.y, r.inv_dir.y);
        const float ez = axis_error(pz, sz, r.origin.z, r.inv_dir.z);
        const float ad = r.depth == 0 ? ax : (r.depth == 1 ? ay : az);
        const float bd = r.depth == 0 ? bx : (r.depth == 1 ? by : bz);
        const float ed = r.depth == 0 ? ex : (r.depth == 1 ? ey : ez);
        // Every child's depth-slab distance is at most `reach` in magnitude.
        const float top = __fmaf_rn(255.0f, bd, ad);
        const float reach = __fadd_ru(fmaxf(fabsf(ad), fabsf(top)), __fmul_ru(2.0f, ed));
        float margin = __fmul_ru(reach, CW_SLACK);
        if (!(margin < CAUSTIC_INF)) margin = CAUSTIC_INF;
        const AxisTerms tx = axis_terms(ax, bx, __fadd_ru(ex, margin));
        const AxisTerms ty = axis_terms(ay, by, __fadd_ru(ey, margin));
        const AxisTerms tz = axis_terms(az, bz, __fadd_ru(ez, margin));
        // The entry plane of an axis is the upper one where the direction
        // is negative.
        const uint2 nx = r.neg_x ? hi_x : lo_x, fx = r.neg_x ? lo_x : hi_x;
        const uint2 ny = r.neg_y ? hi_y : lo_y, fy = r.neg_y ? lo_y : hi_y;
        const uint2 nz = r.neg_z ? hi_z : lo_z, fz = r.neg_z ? lo_z : hi_z;
#pragma unroll
        for (u32 i = 0; i < CW_WIDTH; ++i) {
            const u32 half = i >> 2, k = i & 3u;
            const float enter_x = __fmaf_rd(byte_mantissa(pick(nx, half), k), tx.b, tx.a_lo);
            const float leave_x = __fmaf_ru(byte_mantissa(pick(fx, half), k), tx.b, tx.a_hi);
            const float enter_y = __fmaf_rd(byte_mantissa(pick(ny, half), k), ty.b, ty.a_lo);
            const float leave_y = __fmaf_ru(byte_mantissa(pick(fy, half), k), ty.b, ty.a_hi);
            const float enter_z = __fmaf_rd(byte_mantissa(pick(nz, half), k), tz.b, tz.a_lo);
            const float leave_z = __fmaf_ru(byte_mantissa(pick(fz, half), k), tz.b, tz.a_hi);
            const float enter = fmaxf(fmaxf(enter_x, enter_y), enter_z);
            const float leave = fminf(fminf(leave_x, leave_y), leave_z);
            const float enter_d = r.depth == 0 ? enter_x : (r.depth == 1 ? enter_y : enter_z);
            const float leave_d = r.depth == 0 ? leave_x : (r.depth == 1 ? leave_y : leave_z);
            // box_entry's conditions, each widened: crosses, and the depth
            // slab overlapping [tmin, closest].
            if (enter <= leave && enter_d <= s.closest && leave_d >= s.tmin) {
                hits |= child_hit_bits(half ? meta_hi : meta_lo, k);
            }
        }
    }
    const u32 imask = w0.w >> 24;
    node_group = make_uint2(w1.x, (hits & CW_CHILD_BITS) ? ((hits & CW_CHILD_BITS) | imask) : 0u);
    tri_group = make_uint2(w1.y, hits & CW_TRIANGLE_BITS);
}

// Tests triangle `index`. Closest-hit keeps the smallest t (and on equal t
// the lowest id); returns true for an any-hit ray that hit.
template <bool ANY_HIT>
__device__ __forceinline__ bool test_triangle(const Triangle* __restrict__ tris, u32 index,
                                              CwRay& s) {
    const float4* words = reinterpret_cast<const float4*>(tris) + 3 * (u64)index;
    const float4 a = __ldg(words), b = __ldg(words + 1), c = __ldg(words + 2);
    const float limit = ANY_HIT ? s.closest : next_up(s.closest);
    float t, u, v;
    if (!triangle_intersect(s.tri, xyz(a), xyz(b), xyz(c), s.tmin, limit, t, u, v)) return false;
    if (ANY_HIT) return true;
    const u32 prim = __float_as_uint(a.w);
    if (t < s.closest || (s.prim != NO_HIT && prim < s.prim)) {
        s.closest = t;
        s.prim = prim;
        s.u = u;
        s.v = v;
    }
    return false;
}

// Traverses until the ray is done (group and stack empty) or the warp wants
// to refill idle lanes. Returns whether an any-hit ray found a hit.
template <bool ANY_HIT, bool EXACT, bool POSTPONE>
__device__ __forceinline__ bool traverse(const CompressedNode* __restrict__ nodes,
                                         const Triangle* __restrict__ tris, CwRay& s,
                                         uint2& group, CwStack& stack) {
    while (true) {
        uint2 triangles;
        if (group.y & CW_CHILD_BITS) {
            // The next child in octant order.
            const u32 k = __ffs(group.y >> 24) - 1u;
            group.y &= ~(1u << (24u + k));
            const u32 slot = k ^ s.oct_inv;
            const u32 child = group.x + __popc(group.y & ((1u << slot) - 1u));
            if (group.y & CW_CHILD_BITS) stack.push(group);
            visit_node<EXACT>(nodes, child, s, group, triangles);
        } else {
            triangles = group;
            group = make_uint2(0u, 0u);
        }
        if (POSTPONE) {
            // Postponing (Ylitie et al.): when few of the lanes stepping
            // together have triangles, those push them and go on with
            // nodes instead of keeping the others waiting. Decided once per
            // step, by a vote among the lanes that are here together.
            const u32 active = __activemask();
            const u32 testing = __ballot_sync(active, triangles.y != 0u);
            if (triangles.y != 0u && (group.y & CW_CHILD_BITS) && stack.size < CW_STACK_POSTPONE &&
                __popc(testing) * 100u < __popc(active) * CW_POSTPONE_PERCENT) {
                stack.push(triangles);
                triangles.y = 0u;
            }
        }
        while (triangles.y != 0u) {
            const u32 k = __ffs(triangles.y) - 1u;
            triangles.y &= triangles.y - 1u;
            if (test_triangle<ANY_HIT>(tris, triangles.x + k, s)) {
                group = make_uint2(0u, 0u);
                stack.size = 0;
                return true;
            }
        }
        if (!(group.y & CW_CHILD_BITS)) {
            if (stack.size == 0) {
                group = make_uint2(0u, 0u);
                return false;
            }
            group = stack.pop();
        }
        if (__popc(__activemask()) < CW_FETCH_THRESHOLD) return false;
    }
}

// Sets up the ray; false when it cannot be traced (or the tree is empty).
// On success `group` holds the root as the one inner child of slot 0.
__device__ __forceinline__ bool start_ray(const Ray* rays, u32 index, u32 node_count, CwRay& s,
                                          uint2& group) {
    const float4* words = reinterpret_cast<const float4*>(rays) + 2 * (u64)index;
    const float4 o = __ldg(words), d = __ldg(words + 1);
    s.tmin = o.w;
    s.closest = d.w;
    s.prim = NO_HIT;
    s.u = 0.0f;
    s.v = 0.0f;
    group = make_uint2(0u, 0u);
    if (node_count == 0 || !is_traceable(o, d)) return false;
    s.box = ray_box_test_new(xyz(o), xyz(d));
    s.tri = triangle_test_new(xyz(o), xyz(d));
    s.oct_inv = (s.box.neg_x ? 0u : 4u) | (s.box.neg_y ? 0u : 2u) | (s.box.neg_z ? 0u : 1u);
    group = make_uint2(0u, (1u << (24u + s.oct_inv)) | 1u);
    return true;
}

__device__ __forceinline__ void store_result(bool any_hit, u32 index, const CwRay& s,
                                             bool occluded_ray, Hit* hits, u32* occluded) {
    if (any_hit) {
        occluded[index] = occluded_ray ? 1u : 0u;
        return;
    }
    const bool hit = s.prim != NO_HIT;
    reinterpret_cast<float4*>(hits)[index] =
        make_float4(hit ? s.closest : CAUSTIC_INF, __uint_as_float(s.prim), s.u, s.v);
}

// The persistent loop of traverse.cu's trace(): every round starts with the
// whole warp converged, idle lanes take consecutive rays with one atomic,
// busy lanes traverse until done or too few remain.
template <bool ANY_HIT, bool EXACT, bool POSTPONE>
__device__ __forceinline__ void trace(const CompressedNode* __restrict__ nodes, u32 node_count,
                                      const Triangle* __restrict__ tris,
                                      const Ray* __restrict__ rays, u32 ray_count,
                                      u32 image_width, Hit* __restrict__ hits,
                                      u32* __restrict__ occluded, u32* counter) {
    CwStack stack;
    CwRay s;
    uint2 group = make_uint2(0u, 0u);
    u32 index = 0;
    bool busy = false, exhausted = false;
    while (true) {
        const bool wants = !busy && !exhausted;
        const u32 idle = __ballot_sync(CAUSTIC_FULL_MASK, wants);
        if (idle != 0) {
            u32 base = 0;
            if (lane_id() == 0) base = atomicAdd(counter, (u32)__popc(idle));
            base = __shfl_sync(CAUSTIC_FULL_MASK, base, 0);
            if (wants) {
                const u32 work = base + __popc(idle & lanemask_lt());
                exhausted = work >= ray_count;
                if (!exhausted) {
                    index = ray_of_work(work, image_width);
                    stack.size = 0;
                    busy = start_ray(rays, index, node_count, s, group);
                    if (!busy) store_result(ANY_HIT, index, s, false, hits, occluded);
                }
            }
        }
        if (__all_sync(CAUSTIC_FULL_MASK, exhausted)) break;
        if (busy) {
            const bool found = traverse<ANY_HIT, EXACT, POSTPONE>(nodes, tris, s, group, stack);
            if (group.y == 0u && stack.size == 0) {
                store_result(ANY_HIT, index, s, found, hits, occluded);
                busy = false;
            }
        }
    }
}

// The kernels: the fast box test with postponing, the fast test without
// postponing ("eager"), the exact test with postponing (the host's default,
// see traverse_compressed_cuda.rs for why).

extern "C" __global__ void __launch_bounds__(CW_TRACE_THREADS)
    traverse_cwbvh_closest(const CompressedNode* nodes, u32 node_count, const Triangle* tris,
        const Ray* rays, u32 ray_count, u32 image_width, Hit* hits, u32* counter) {
    trace<false, false, true>(nodes, node_count, tris, rays, ray_count, image_width,
        hits, nullptr, counter);
}

extern "C" __global__ void __launch_bounds__(CW_TRACE_THREADS)
    traverse_cwbvh_any(const CompressedNode* nodes, u32 node_count, const Triangle* tris,
        const Ray* rays, u32 ray_count, u32 image_width, u32* occluded, u32* counter) {
    trace<true, false, true>(nodes, node_count, tris, rays, ray_count, image_width,
        nullptr, occluded, counter);
}

extern "C" __global__ void __launch_bounds__(CW_TRACE_THREADS)
    traverse_cwbvh_closest_eager(const CompressedNode* nodes, u32 node_count, const Triangle* tris,
        const Ray* rays, u32 ray_count, u32 image_width, Hit* hits, u32* counter) {
    trace<false, false, false>(nodes, node_count, tris, rays, ray_count, image_width,
        hits, nullptr, counter);
}

extern "C" __global__ void __launch_bounds__(CW_TRACE_THREADS)
    traverse_cwbvh_any_eager(const CompressedNode* nodes, u32 node_count, const Triangle* tris,
        const Ray* rays, u32 ray_count, u32 image_width, u32* occluded, u32* counter) {
    trace<true, false, false>(nodes, node_count, tris, rays, ray_count, image_width,
        nullptr, occluded, counter);
}

extern "C" __global__ void __launch_bounds__(CW_TRACE_THREADS)
    traverse_cwbvh_closest_exact(const CompressedNode* nodes, u32 node_count, const Triangle* tris,
        const Ray* rays, u32 ray_count, u32 image_width, Hit* hits, u32* counter) {
    trace<false, true, true>(nodes, node_count, tris, rays, ray_count, image_width,
        hits, nullptr, counter);
}

extern "C" __global__ void __launch_bounds__(CW_TRACE_THREADS)
    traverse_cwbvh_any_exact(const CompressedNode* nodes, u32 node_count, const Triangle* tris,
        const Ray* rays, u32 ray_count, u32 image_width, u32* occluded, u32* counter) {
    trace<true, true, true>(nodes, node_count, tris, rays, ray_count, image_width,
        nullptr, occluded, counter);
}
