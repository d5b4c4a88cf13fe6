// morton.cu: the common first step of the GPU Morton-code builders (lbvh,
// ploc, hlbvh), the twin of morton_order.rs, driven by morton_cuda.rs.
//
// - morton_prepare: each triangle's centroid (Triangle::centroid: (v0 + v1
//   + v2) * (1/3), each operation rounded) and whether it can be placed
//   (BuildInput::is_placeable: finite non-empty box (Triangle::bounds:
//   NaN-skipping min/max of the vertices), finite centroid), and each
//   block's box of placeable centroids, which the host's reduction unites
//   into the centroid box. The boxes are not kept: the one-launch lbvh
//   never reads them, and morton_gather makes the sorted ones again from
//   the triangles.
// - morton_codes_30 / _63: the grid of morton_order.rs's Grid over that box
//   (cells / extent per usable axis, 0 on flat or overflowing axes; a cell
//   is (p - origin) * scale, clamped to the top cell by SSE's min, which
//   also sends NaN there, then truncated with saturation) and the code of
//   caustic_geom::morton; unplaceable primitives get the sentinel (bit 31 of
//   a 30-bit key, u64::MAX for 63 bits), so the stable radix sort puts them
//   last in id order, as the CPU's (code, id) sort does.
// - morton_placed_*: where the sentinels start in the sorted keys.
// - morton_gather: the sorted primitives' boxes (from their triangles) and
//   centroids in order.
#include "common.cuh"
#include "bvh.cuh"

#define MORTON_THREADS 256u
#define MORTON_PARKED_30 0x80000000u
#define MORTON_PARKED_63 0xffffffffffffffffull

__device__ __forceinline__ bool finite(float x) { return fabsf(x) < CAUSTIC_INF; }

extern "C" __global__ void __launch_bounds__(MORTON_THREADS)
morton_prepare(const Triangle* triangles, u64 n, float4* centroids, Aabb* block_boxes) {
    Aabb points = aabb_empty();
    for (u64 i = global_thread(); i < n; i += grid_threads()) {
        const Triangle t = triangles[i];
        const float3 a = make_float3(t.v0[0], t.v0[1], t.v0[2]);
        const float3 b = make_float3(t.v1[0], t.v1[1], t.v1[2]);
        const float3 c = make_float3(t.v2[0], t.v2[1], t.v2[2]);
        const Aabb box = triangle_bounds(t);
        const float third = 1.0f / 3.0f;
        const float3 m = make_float3(__fmul_rn(__fadd_rn(__fadd_rn(a.x, b.x), c.x), third),
                                     __fmul_rn(__fadd_rn(__fadd_rn(a.y, b.y), c.y), third),
                                     __fmul_rn(__fadd_rn(__fadd_rn(a.z, b.z), c.z), third));
        const bool box_finite = finite(box.min.x) && finite(box.min.y) && finite(box.min.z) &&
                                finite(box.max.x) && finite(box.max.y) && finite(box.max.z);
        const bool box_empty = box.min.x > box.max.x || box.min.y > box.max.y || box.min.z > box.max.z;
        const bool placeable = box_finite && !box_empty && finite(m.x) && finite(m.y) && finite(m.z);
        centroids[i] = make_float4(m.x, m.y, m.z, placeable ? 1.0f : 0.0f);
        if (placeable) {
            points.min = min3(points.min, m);
            points.max = max3(points.max, m);
        }
    }
    // The block's box of placeable centroids (the host reduces the blocks'):
    // min and max are exact, so any order gives the same box, up to the
    // sign of a zero bound, which moves no code (a cell is (p - origin) *
    // scale, the same for either zero).
    __shared__ Aabb warp_boxes[MORTON_THREADS / 32];
    for (u32 d = 16; d > 0; d >>= 1) points = aabb_union(points, shfl_down(points, d));
    if (lane_id() == 0) warp_boxes[warp_id()] = points;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (u32 w = 1; w < MORTON_THREADS / 32; ++w) points = aabb_union(points, warp_boxes[w]);
        block_boxes[blockIdx.x] = points;
    }
}

struct Grid {
    float3 origin;
    float3 scale;
    float top;
};

__device__ __forceinline__ float axis_scale(float lo, float hi, float cells) {
    const float extent = __fsub_rn(hi, lo);
    const bool usable = extent > 0.0f && extent < CAUSTIC_INF;
    return usable ? __fdiv_rn(cells, extent) : 0.0f;
}

__device__ __forceinline__ Grid make_grid(const Aabb& box, float cells) {
    Grid g;
    g.origin = box.min;
    g.scale = make_float3(axis_scale(box.min.x, box.max.x, cells),
                          axis_scale(box.min.y, box.max.y, cells),
                          axis_scale(box.min.z, box.max.z, cells));
    g.top = cells - 1.0f;
    return g;
}

// One coordinate's cell: SSE's min sends NaN to the top cell; the
// conversion truncates and saturates, as Rust's `as u32` does.
__device__ __forceinline__ u32 cell(float p, float origin, float scale, float top) {
    const float q = __fmul_rn(__fsub_rn(p, origin), scale);
    return __float2uint_rz(q < top ? q : top);
}

extern "C" __global__ void __launch_bounds__(MORTON_THREADS)
morton_codes_30(const float4* centroids, const Aabb* centroid_box, u64 n, u32* keys, u32* ids) {
    const Grid g = make_grid(centroid_box[0], 1024.0f);
    for (u64 i = global_thread(); i < n; i += grid_threads()) {
        const float4 c = centroids[i];
        u32 key = MORTON_PARKED_30;
        if (c.w != 0.0f) {
            key = (morton_expand_10(cell(c.x, g.origin.x, g.scale.x, g.top)) << 2) |
                  (morton_expand_10(cell(c.y, g.origin.y, g.scale.y, g.top)) << 1) |
                  morton_expand_10(cell(c.z, g.origin.z, g.scale.z, g.top));
        }
        keys[i] = key;
        ids[i] = (u32)i;
    }
}

extern "C" __global__ void __launch_bounds__(MORTON_THREADS)
morton_codes_63(const float4* centroids, const Aabb* centroid_box, u64 n, u64* keys, u32* ids) {
    const Grid g = make_grid(centroid_box[0], 2097152.0f);
    for (u64 i = global_thread(); i < n; i += grid_threads()) {
        const float4 c = centroids[i];
        u64 key = MORTON_PARKED_63;
        if (c.w != 0.0f) {
            key = (morton_expand_21(cell(c.x, g.origin.x, g.scale.x, g.top)) << 2) |
                  (morton_expand_21(cell(c.y, g.origin.y, g.scale.y, g.top)) << 1) |
                  morton_expand_21(cell(c.z, g.origin.z, g.scale.z, g.top));
        }
        keys[i] = key;
        ids[i] = (u32)i;
    }
}

// *placed = the number of keys before the first sentinel (the host zeroes
// it first; only the last real key writes).
template <typename Key>
__device__ void placed(const Key* keys, u64 n, Key parked, u32* out) {
    for (u64 i = global_thread(); i < n; i += grid_threads()) {
        if (keys[i] != parked && (i + 1 == n || keys[i + 1] == parked)) out[0] = (u32)(i + 1);
    }
}

extern "C" __global__ void __launch_bounds__(MORTON_THREADS)
morton_placed_30(const u32* keys, u64 n, u32* out) {
    placed(keys, n, MORTON_PARKED_30, out);
}

extern "C" __global__ void __launch_bounds__(MORTON_THREADS)
morton_placed_63(const u64* keys, u64 n, u32* out) {
    placed(keys, n, MORTON_PARKED_63, out);
}

// The first `placed` primitives of the Morton order: boxes (Triangle::bounds
// of each triangle, as morton_prepare tested them), and centroids when
// `item_centroids` is not null.
extern "C" __global__ void __launch_bounds__(MORTON_THREADS)
morton_gather(const u32* ids, u64 placed, const Triangle* triangles, const float4* centroids,
              Aabb* item_bounds, float4* item_centroids) {
    for (u64 k = global_thread(); k < placed; k += grid_threads()) {
        const u32 id = ids[k];
        item_bounds[k] = triangle_bounds(triangles[id]);
        if (item_centroids != nullptr) item_centroids[k] = centroids[id];
    }
}
