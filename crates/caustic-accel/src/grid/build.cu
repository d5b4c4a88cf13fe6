// build.cu: the uniform grid built on the device (grid/build_cuda.rs), after
// Ivson's multi-pass construction (count, scan, write, sort, cell ranges;
// his thesis, chapter 4) in the form of Kalojanov and Slusallek (HPG 2009):
// CUDA throughout, per-triangle writes instead of the thesis's per-slot
// gather (which GLSL forced on it), ranges from the sorted keys' boundaries.
// The scan, the radix sort and the boundaries are caustic_gpu's primitives;
// the kernels here are the passes that know about triangles and cells.
//
// Every pass computes a triangle's cells exactly as grid/build.rs does (the
// same box, grown by the same margin, mapped by the same rounding; with exact
// overlap the same separating-axis test), so the device's cells list the
// CPU's triangles, and in the same order once the stable sort has run.
#include "grid.cuh"

#define GRID_THREADS 256u

// ------------------------------------------------------------- scene box

// boxes[i] = triangle i's box, or the empty box for a triangle with a
// non-finite vertex (which no cell references); finite[i] = 1 for the others.
extern "C" __global__ void __launch_bounds__(GRID_THREADS)
grid_triangle_boxes(const Triangle* tris, u64 n, Aabb* boxes, u32* finite) {
    for (u64 i = global_thread(); i < n; i += grid_threads()) {
        float3 a, b, c;
        load_triangle(tris, (u32)i, a, b, c);
        const bool ok = finite3(a) && finite3(b) && finite3(c);
        boxes[i] = ok ? triangle_bounds(a, b, c) : aabb_empty();
        finite[i] = ok ? 1u : 0u;
    }
}

// ------------------------------------------------------------ cells of one

// Calls visit(linear cell index) for every cell triangle (a, b, c) goes into,
// x fastest (covered_cells in grid/build.rs): the cells its box grown by the
// tolerance overlaps, or with exact overlap those whose box grown by the
// tolerance the triangle overlaps. Nothing for a non-finite triangle.
template <class Visit>
__device__ __forceinline__ void for_each_covered_cell(const GridFrame& f, float3 a, float3 b,
                                                      float3 c, Visit visit) {
    if (!(finite3(a) && finite3(b) && finite3(c))) return;
    const Aabb box = triangle_bounds(a, b, c);
    const float m = f.tolerance;
    const u32 lo[3] = {grid_cell_of(f, 0, __fsub_rn(box.min.x, m)),
                       grid_cell_of(f, 1, __fsub_rn(box.min.y, m)),
                       grid_cell_of(f, 2, __fsub_rn(box.min.z, m))};
    const u32 hi[3] = {grid_cell_of(f, 0, __fadd_rn(box.max.x, m)),
                       grid_cell_of(f, 1, __fadd_rn(box.max.y, m)),
                       grid_cell_of(f, 2, __fadd_rn(box.max.z, m))};
    for (u32 z = lo[2]; z <= hi[2]; ++z) {
        for (u32 y = lo[1]; y <= hi[1]; ++y) {
            for (u32 x = lo[0]; x <= hi[0]; ++x) {
                if (f.exact) {
                    // UniformGrid::cell_box grown by the tolerance.
                    const float3 cmin = make_float3(__fsub_rn(grid_boundary(f, 0, (int)x), m),
                                                    __fsub_rn(grid_boundary(f, 1, (int)y), m),
                                                    __fsub_rn(grid_boundary(f, 2, (int)z), m));
                    const float3 cmax =
                        make_float3(__fadd_rn(grid_boundary(f, 0, (int)x + 1), m),
                                    __fadd_rn(grid_boundary(f, 1, (int)y + 1), m),
                                    __fadd_rn(grid_boundary(f, 2, (int)z + 1), m));
                    if (!triangle_overlaps_box(a, b, c, cmin, cmax)) continue;
                }
                visit(grid_linear(f, x, y, z));
            }
        }
    }
}

// ------------------------------------------------------- count and write

// Pass 1: counts[i] = the cells triangle i goes into; *total (zeroed by the
// host) += all counts, in 64 bits, so that a grid whose references overflow
// the 32-bit scan is an error rather than a wrap. The box count is a product
// when the overlap is by boxes (at most 2^28, the cell budget).
extern "C" __global__ void __launch_bounds__(GRID_THREADS)
grid_count(const GridFrame* frame, const Triangle* tris, u32 n, u32* counts, u64* total) {
    const GridFrame f = *frame;
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    u32 count = 0;
    if (i < n) {
        float3 a, b, c;
        load_triangle(tris, i, a, b, c);
        if (f.exact) {
            for_each_covered_cell(f, a, b, c, [&](u32) { ++count; });
        } else if (finite3(a) && finite3(b) && finite3(c)) {
            const Aabb box = triangle_bounds(a, b, c);
            const float m = f.tolerance;
            count = (grid_cell_of(f, 0, __fadd_rn(box.max.x, m)) -
                     grid_cell_of(f, 0, __fsub_rn(box.min.x, m)) + 1) *
                    (grid_cell_of(f, 1, __fadd_rn(box.max.y, m)) -
                     grid_cell_of(f, 1, __fsub_rn(box.min.y, m)) + 1) *
                    (grid_cell_of(f, 2, __fadd_rn(box.max.z, m)) -
                     grid_cell_of(f, 2, __fsub_rn(box.min.z, m)) + 1);
        }
        counts[i] = count;
    }
    // One atomic per warp: a million triangles adding to one word one by one
    // would queue a million atomics at one address.
    u64 sum = count;
    for (int d = 16; d > 0; d >>= 1) sum += __shfl_xor_sync(CAUSTIC_FULL_MASK, sum, d);
    if (lane_id() == 0 && sum != 0) atomicAdd(total, sum);
}

// Pass 3: triangle i writes its (cell, i) pairs into its run from
// offsets[i] (the exclusive scan of the counts), cells ascending. The runs
// are in triangle order, so after the stable sort by cell each cell lists
// its triangles by id, as the CPU's (cell, triangle) order does.
extern "C" __global__ void __launch_bounds__(GRID_THREADS)
grid_write_pairs(const GridFrame* frame, const Triangle* tris, u32 n, const u32* offsets,
                 u32* cells, u32* prims) {
    const GridFrame f = *frame;
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float3 a, b, c;
    load_triangle(tris, i, a, b, c);
    u32 at = offsets[i];
    for_each_covered_cell(f, a, b, c, [&](u32 cell) {
        cells[at] = cell;
        prims[at] = i;
        ++at;
    });
}

// ------------------------------------------------------------ culling data

// Floats as integers that compare in the same order (for atomicMin / Max).
__device__ __forceinline__ int grid_ordered(float x) {
    const int i = __float_as_int(x);
    return i >= 0 ? i : i ^ 0x7fffffff;
}
__device__ __forceinline__ float grid_unordered(int i) {
    return __int_as_float(i >= 0 ? i : i ^ 0x7fffffff);
}

// One warp per macro cell: the box of the whole triangles its cells
// reference (lanes split the macro_size^3 cells, then a shuffle reduction),
// into macro_bounds; and each axis's slab extremes, lows[s] = smallest lower
// face and highs[s] = largest upper face of the macro boxes in slab s, by
// ordered-integer atomics (`slab_ord`: the lows of axes x, y, z one after the
// other, macro_res[0] + macro_res[1] + macro_res[2] of them, then the highs;
// the host fills them with the ordered +inf and -inf).
extern "C" __global__ void __launch_bounds__(GRID_THREADS)
grid_macro_bounds(const GridFrame* frame, const Triangle* tris, const u32* cell_start,
                  const u32* cell_end, const u32* prims, Aabb* macro_bounds, int* slab_ord) {
    const GridFrame f = *frame;
    const u32 warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32u;
    if (warp >= f.macros) return;
    const u32 m = f.macro_size;
    const u32 mi[3] = {warp % f.macro_res[0], (warp / f.macro_res[0]) % f.macro_res[1],
                       warp / (f.macro_res[0] * f.macro_res[1])};
    Aabb box = aabb_empty();
    for (u32 j = lane_id(); j < m * m * m; j += 32u) {
        const u32 x = mi[0] * m + j % m, y = mi[1] * m + (j / m) % m, z = mi[2] * m + j / (m * m);
        if (x >= f.res[0] || y >= f.res[1] || z >= f.res[2]) continue;
        const u32 cell = grid_linear(f, x, y, z);
        for (u32 r = cell_start[cell]; r < cell_end[cell]; ++r) {
            float3 a, b, c;
            load_triangle(tris, prims[r], a, b, c);
            const Aabb t = triangle_bounds(a, b, c);
            box.min = make_float3(glam_min(box.min.x, t.min.x), glam_min(box.min.y, t.min.y),
                                  glam_min(box.min.z, t.min.z));
            box.max = make_float3(glam_max(box.max.x, t.max.x), glam_max(box.max.y, t.max.y),
                                  glam_max(box.max.z, t.max.z));
        }
    }
    for (int d = 16; d > 0; d >>= 1) {
        box.min.x = glam_min(box.min.x, __shfl_xor_sync(CAUSTIC_FULL_MASK, box.min.x, d));
        box.min.y = glam_min(box.min.y, __shfl_xor_sync(CAUSTIC_FULL_MASK, box.min.y, d));
        box.min.z = glam_min(box.min.z, __shfl_xor_sync(CAUSTIC_FULL_MASK, box.min.z, d));
        box.max.x = glam_max(box.max.x, __shfl_xor_sync(CAUSTIC_FULL_MASK, box.max.x, d));
        box.max.y = glam_max(box.max.y, __shfl_xor_sync(CAUSTIC_FULL_MASK, box.max.y, d));
        box.max.z = glam_max(box.max.z, __shfl_xor_sync(CAUSTIC_FULL_MASK, box.max.z, d));
    }
    if (lane_id() != 0) return;
    macro_bounds[warp] = box;
    const u32 slabs = f.macro_res[0] + f.macro_res[1] + f.macro_res[2];
    u32 offset = 0;
#pragma unroll
    for (u32 axis = 0; axis < 3; ++axis) {
        atomicMin(&slab_ord[offset + mi[axis]], grid_ordered(component(box.min, axis)));
        atomicMax(&slab_ord[slabs + offset + mi[axis]], grid_ordered(component(box.max, axis)));
        offset += pick(f.macro_res, axis);
    }
}

// One warp per axis: the running extremes over the slabs (slab_bounds in
// grid/build.rs), slabs[2 s] = the smallest lower face in slabs s and above
// (a suffix minimum), slabs[2 s + 1] = the largest upper face in slabs s and
// below (a prefix maximum), axes x, y, z one after the other. 32 slabs a
// step, the carry passed from step to step.
extern "C" __global__ void __launch_bounds__(96)
grid_slab_running(const GridFrame* frame, const int* slab_ord, float* slabs) {
    const GridFrame f = *frame;
    const u32 axis = threadIdx.x / 32u;
    if (axis >= 3) return;
    const u32 total = f.macro_res[0] + f.macro_res[1] + f.macro_res[2];
    const u32 offset = axis == 0 ? 0u : (axis == 1 ? f.macro_res[0] : f.macro_res[0] + f.macro_res[1]);
    const u32 len = pick(f.macro_res, axis);
    const u32 lane = lane_id();
    float low_carry = CAUSTIC_INF, high_carry = -CAUSTIC_INF;
    for (u32 base = 0; base < len; base += 32u) {
        // Highs ascend from slab 0; lows descend from the last slab.
        const u32 up = base + lane;
        const u32 down = len - 1u - up;
        const bool in = up < len;
        float high = in ? grid_unordered(slab_ord[total + offset + up]) : -CAUSTIC_INF;
        float low = in ? grid_unordered(slab_ord[offset + down]) : CAUSTIC_INF;
        for (u32 d = 1; d < 32u; d <<= 1) {
            const float h = __shfl_up_sync(CAUSTIC_FULL_MASK, high, d);
            const float l = __shfl_up_sync(CAUSTIC_FULL_MASK, low, d);
            if (lane >= d) {
                high = fmaxf(high, h);
                low = fminf(low, l);
            }
        }
        high = fmaxf(high, high_carry);
        low = fminf(low, low_carry);
        if (in) {
            slabs[2u * (offset + up) + 1u] = high;
            slabs[2u * (offset + down)] = low;
        }
        high_carry = __shfl_sync(CAUSTIC_FULL_MASK, high, 31);
        low_carry = __shfl_sync(CAUSTIC_FULL_MASK, low, 31);
    }
}
