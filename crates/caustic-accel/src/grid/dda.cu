// dda.cu: closest-hit and any-hit traversal of a device-built uniform grid
// (grid/dda_cuda.rs) by the 3D-DDA of Amanatides and Woo (Eurographics
// 1987), one ray per thread as in Ivson's GPU tracer (his thesis, section
// 5), under the exact culling rules of the CPU grid (grid/dda.rs and
// slab_ray.rs, whose module docs give the argument):
//
// - the walk is two-level, over macro cells and then over the cells of a
//   macro cell whose box of whole triangles can hold a hit in [tmin,
//   closest]; hits are taken wherever they lie (never limited to the cell's
//   interval: the watertight test's t for a sliver or a grazing ray can lie
//   cells away), the closest wins, ties to the lowest id;
// - it starts at the first slab of macro cells (along the ray's depth axis)
//   whose triangles can reach tmin, and stops when every slab ahead holds
//   only triangles that start beyond the closest hit;
// - rays from origins so far away that the triangle test's sideways rounding
//   may exceed the grid's tolerance test every macro cell the delta-thick ray
//   passes (slow, exact, as on the CPU).
//
// The arithmetic is the CPU's, rounding for rounding (grid.cuh), so the walk
// visits the cells the CPU visits, in the same order, and tests the same
// triangles with the same watertight test: the hits equal the CPU grid's bit
// for bit, and so brute force's. Triangles are referenced by scene id and
// stored once, in scene order.
#include "grid.cuh"
#include "slab_ray.cuh"

// Threads per block (GRID_TRACE_THREADS in dda_cuda.rs).
#define GRID_TRACE_THREADS 128u
// Triangles the per-ray mailbox remembers (MAILBOX in grid/mod.rs).
#define GRID_MAILBOX 8u

// The grid as the traversal reads it.
struct GridView {
    GridFrame f;
    const u32* cell_start;
    const u32* cell_end;
    const u32* prims;
    const Triangle* tris;
    const Aabb* macro_bounds;
    // Per axis x, y, z in turn, per slab: (suffix-minimum lower face,
    // prefix-maximum upper face).
    const float2* slabs;
};

__device__ __forceinline__ bool aabb_is_empty(const Aabb& b) {
    return b.min.x > b.max.x || b.min.y > b.max.y || b.min.z > b.max.z;
}

// ------------------------------------------------------------------ Walk

// dda.rs's Walk: a 3D-DDA over the index box lo ..= hi of a lattice whose
// cells are `span` grid cells wide.
struct Walk {
    int3 idx, step, lo, hi;
    // Per axis, the t of the next boundary (inf where the ray is parallel).
    float3 next;
    int span;
};

__device__ __forceinline__ float boundary_t(const GridFrame& f, const SlabRay& r, const Walk& w,
                                            u32 k) {
    const int step = component_i(w.step, k);
    if (step == 0) return CAUSTIC_INF;
    const int face = component_i(w.idx, k) + (step > 0 ? 1 : 0);
    return __fmul_rn(__fsub_rn(grid_boundary(f, k, face * w.span), component(r.o, k)),
                     component(r.inv, k));
}

// Starts in the lattice cell holding the ray's point at t, clamped to lo ..= hi.
__device__ __forceinline__ Walk walk_start(const GridFrame& f, const SlabRay& r, int span, int3 lo,
                                           int3 hi, float t) {
    Walk w;
    w.lo = lo;
    w.hi = hi;
    w.span = span;
#pragma unroll
    for (u32 k = 0; k < 3; ++k) {
        const float o = component(r.o, k);
        const float p = bit(r.parallel, k) ? o : __fadd_rn(o, __fmul_rn(t, component(r.d, k)));
        const float cells = __fmul_rn(__fsub_rn(p, pick(f.bounds_min, k)), pick(f.inv_cell_size, k));
        float q = floorf(__fdiv_rn(cells, (float)span));
        // Rust's `as i64` sends NaN to 0 and saturates; the clamp does the rest.
        if (q != q) q = 0.0f;
        q = fminf(fmaxf(q, (float)component_i(lo, k)), (float)component_i(hi, k));
        set_component_i(w.idx, k, (int)q);
        set_component_i(w.step, k, bit(r.parallel, k) ? 0 : (bit(r.negative, k) ? -1 : 1));
    }
#pragma unroll
    for (u32 k = 0; k < 3; ++k) set_component(w.next, k, boundary_t(f, r, w, k));
    return w;
}

__device__ __forceinline__ float walk_exit(const Walk& w) {
    return fminf(fminf(w.next.x, w.next.y), w.next.z);
}

// Steps into the next cell; false when the walk leaves its index box.
__device__ __forceinline__ bool walk_advance(const GridFrame& f, const SlabRay& r, Walk& w) {
    const u32 k = (w.next.x <= w.next.y && w.next.x <= w.next.z) ? 0u
                  : (w.next.y <= w.next.z ? 1u : 2u);
    if (component(w.next, k) == CAUSTIC_INF) return false;
    const int i = component_i(w.idx, k) + component_i(w.step, k);
    if (i < component_i(w.lo, k) || i > component_i(w.hi, k)) return false;
    set_component_i(w.idx, k, i);
    set_component(w.next, k, boundary_t(f, r, w, k));
    return true;
}

// ------------------------------------------------------------ cell tests

// The last GRID_MAILBOX triangles a ray tested (grid/mod.rs's Mailbox): a
// triangle met again in a later cell gives the same answer, so it is
// skipped. Constant indices only, so the ring stays in registers.
struct Mailbox {
    u32 ids[GRID_MAILBOX];
    u32 next;

    __device__ __forceinline__ void clear() {
#pragma unroll
        for (u32 j = 0; j < GRID_MAILBOX; ++j) ids[j] = NO_HIT;
        next = 0;
    }

    // Whether id was seen recently; remembers it if not.
    __device__ __forceinline__ bool seen(u32 id) {
        bool found = false;
#pragma unroll
        for (u32 j = 0; j < GRID_MAILBOX; ++j) found |= ids[j] == id;
        if (found) return true;
        const u32 slot = next % GRID_MAILBOX;
#pragma unroll
        for (u32 j = 0; j < GRID_MAILBOX; ++j)
            if (j == slot) ids[j] = id;
        ++next;
        return false;
    }
};

// What one ray knows: its triangle test, interval and closest hit so far.
struct RayState {
    TriangleTest tri;
    float tmin, tmax;
    float closest;
    u32 prim;
    float u, v;
    Mailbox mailbox;
};

// Tests the references begin .. end. Closest hit: true when the closest hit
// improved (s.closest is the new cutoff); accepts t == closest for a lower
// id, as the CPU does. Any hit: true at the first hit in (tmin, tmax).
template <bool ANY_HIT>
__device__ __forceinline__ bool test_cell(const GridView& g, u32 begin, u32 end, RayState& s) {
    bool improved = false;
    float limit = ANY_HIT ? s.tmax : next_up(s.closest);
    for (u32 r = begin; r < end; ++r) {
        const u32 prim = __ldg(g.prims + r);
        if (s.mailbox.seen(prim)) continue;
        float3 a, b, c;
        load_triangle(g.tris, prim, a, b, c);
        float t, u, v;
        if (!triangle_intersect(s.tri, a, b, c, s.tmin, limit, t, u, v)) continue;
        if (ANY_HIT) return true;
        if (t < s.closest || (s.prim != NO_HIT && prim < s.prim)) {
            s.closest = t;
            limit = next_up(t);
            s.prim = prim;
            s.u = u;
            s.v = v;
            improved = true;
        }
    }
    return improved;
}

// Tests cell `cell` when it references anything; see test_cell.
template <bool ANY_HIT>
__device__ __forceinline__ bool visit_cell(const GridView& g, u32 cell, RayState& s) {
    const u32 begin = __ldg(g.cell_start + cell), end = __ldg(g.cell_end + cell);
    return begin < end && test_cell<ANY_HIT>(g, begin, end, s);
}

// ------------------------------------------------------------- the walk

__device__ __forceinline__ float2 slab(const GridView& g, u32 axis, int s) {
    const u32 offset = axis == 0 ? 0u
                       : (axis == 1 ? g.f.macro_res[0] : g.f.macro_res[0] + g.f.macro_res[1]);
    return __ldg(g.slabs + offset + (u32)s);
}

// dda.rs's nothing_ahead: no triangle in the macro cells from `idx` on
// (along the depth axis) can report a t up to `cutoff`.
__device__ __forceinline__ bool nothing_ahead(const GridView& g, const SlabRay& r, int3 idx,
                                              float cutoff) {
    const float2 b = slab(g, r.depth, component_i(idx, r.depth));
    const float face = bit(r.negative, r.depth) ? b.y : b.x;
    return t_below(depth_t(r, face)) > cutoff;
}

// dda.rs's first_relevant_t: where the walk may start, or false when no
// triangle can report a t from t_min on.
__device__ __forceinline__ bool first_relevant_t(const GridView& g, const SlabRay& r, float t_min,
                                                 float t_in, float& t_start) {
    const u32 k = r.depth;
    const int len = (int)pick(g.f.macro_res, k), m = (int)g.f.macro_size;
    float plane;
    if (bit(r.negative, k)) {
        int s = len - 1;
        while (s >= 0 && !(t_above(depth_t(r, slab(g, k, s).x)) >= t_min)) --s;
        if (s < 0) return false;
        plane = grid_boundary(g.f, k, min((s + 1) * m, (int)pick(g.f.res, k)));
    } else {
        int s = 0;
        while (s < len && !(t_above(depth_t(r, slab(g, k, s).y)) >= t_min)) ++s;
        if (s == len) return false;
        plane = grid_boundary(g.f, k, s * m);
    }
    t_start = fmaxf(t_in, depth_t(r, plane));
    return true;
}

__device__ __forceinline__ u32 macro_index(const GridFrame& f, int3 idx) {
    return (u32)idx.x + f.macro_res[0] * ((u32)idx.y + f.macro_res[1] * (u32)idx.z);
}

// dda.rs's far_origin: every macro cell the delta-thick ray passes whose
// triangles can report a t up to the closest hit, cell by cell.
template <bool ANY_HIT>
__device__ __forceinline__ bool far_origin(const GridView& g, const SlabRay& r, RayState& s) {
    const GridFrame& f = g.f;
    const u32 m = f.macro_size;
    float cutoff = s.tmax;
    bool found = false;
    for (u32 index = 0; index < f.macros; ++index) {
        const u32 mi[3] = {index % f.macro_res[0], (index / f.macro_res[0]) % f.macro_res[1],
                           index / (f.macro_res[0] * f.macro_res[1])};
        const u32 lo[3] = {mi[0] * m, mi[1] * m, mi[2] * m};
        const u32 hi[3] = {min(lo[0] + m, f.res[0]), min(lo[1] + m, f.res[1]),
                           min(lo[2] + m, f.res[2])};
        const float3 rmin = make_float3(grid_boundary(f, 0, (int)lo[0]),
                                        grid_boundary(f, 1, (int)lo[1]),
                                        grid_boundary(f, 2, (int)lo[2]));
        const float3 rmax = make_float3(grid_boundary(f, 0, (int)hi[0]),
                                        grid_boundary(f, 1, (int)hi[1]),
                                        grid_boundary(f, 2, (int)hi[2]));
        const Aabb b = g.macro_bounds[index];
        float t0, t1;
        if (aabb_is_empty(b) || !clip_to(r, rmin, rmax, r.delta, t0, t1) ||
            !reach(r, b, s.tmin, cutoff))
            continue;
        for (u32 z = lo[2]; z < hi[2]; ++z) {
            for (u32 y = lo[1]; y < hi[1]; ++y) {
                for (u32 x = lo[0]; x < hi[0]; ++x) {
                    if (visit_cell<ANY_HIT>(g, grid_linear(f, x, y, z), s)) {
                        found = true;
                        if (ANY_HIT) return true;
                        cutoff = s.closest;
                    }
                }
            }
        }
    }
    return found;
}

// dda.rs's traverse for a traceable ray; true when a hit was found (any hit)
// or improved on (closest hit; s holds it).
template <bool ANY_HIT>
__device__ __forceinline__ bool traverse(const GridView& g, float3 origin, float3 dir, RayState& s) {
    const GridFrame& f = g.f;
    const SlabRay r = slab_ray_new(origin, dir, f.scale);
    // A direction whose depth component has no finite reciprocal cannot give
    // a finite t in the triangle test.
    if (bit(r.parallel, r.depth)) return false;
    const float t_min = s.tmin;
    float cutoff = s.tmax;
    if (r.delta > f.tolerance) return far_origin<ANY_HIT>(g, r, s);
    const float3 bmin = make_float3(f.bounds_min[0], f.bounds_min[1], f.bounds_min[2]);
    const float3 bmax = make_float3(f.bounds_max[0], f.bounds_max[1], f.bounds_max[2]);
    float t_in, t_out, t_start;
    if (!clip_to(r, bmin, bmax, 0.0f, t_in, t_out)) return false;
    if (!first_relevant_t(g, r, t_min, t_in, t_start)) return false;
    if (t_start > t_out) return false;
    const int m = (int)f.macro_size;
    const int3 last_macro =
        make_int3((int)f.macro_res[0] - 1, (int)f.macro_res[1] - 1, (int)f.macro_res[2] - 1);
    const int3 last_cell = make_int3((int)f.res[0] - 1, (int)f.res[1] - 1, (int)f.res[2] - 1);
    Walk outer = walk_start(f, r, m, make_int3(0, 0, 0), last_macro, t_start);
    float t_enter = t_start;
    bool found = false;
    while (true) {
        if (nothing_ahead(g, r, outer.idx, cutoff)) return found;
        const float t_exit = fminf(walk_exit(outer), t_out);
        const Aabb b = g.macro_bounds[macro_index(f, outer.idx)];
        const bool relevant =
            (t_enter <= cutoff && t_exit >= t_min) || reach(r, b, t_min, cutoff);
        if (!aabb_is_empty(b) && relevant) {
            const int3 lo = make_int3(outer.idx.x * m, outer.idx.y * m, outer.idx.z * m);
            const int3 hi = make_int3(min(lo.x + m - 1, last_cell.x), min(lo.y + m - 1, last_cell.y),
                                      min(lo.z + m - 1, last_cell.z));
            Walk inner = walk_start(f, r, 1, lo, hi, t_enter);
            do {
                const u32 cell = grid_linear(f, (u32)inner.idx.x, (u32)inner.idx.y,
                                             (u32)inner.idx.z);
                if (visit_cell<ANY_HIT>(g, cell, s)) {
                    found = true;
                    if (ANY_HIT) return true;
                    cutoff = s.closest;
                }
            } while (walk_advance(f, r, inner));
        }
        if (t_exit >= t_out || !walk_advance(f, r, outer)) return found;
        t_enter = t_exit;
    }
}

// ----------------------------------------------------------------- kernels

template <bool ANY_HIT>
__device__ __forceinline__ void trace(const GridFrame* frame, const u32* cell_start,
                                      const u32* cell_end, const u32* prims, const Triangle* tris,
                                      const Aabb* macro_bounds, const float* slabs,
                                      u32 references, const Ray* rays, u32 ray_count,
                                      u32 image_width, Hit* hits, u32* occluded) {
    const u32 work = blockIdx.x * blockDim.x + threadIdx.x;
    if (work >= ray_count) return;
    const u32 index = ray_of_work(work, image_width);
    GridView g;
    g.f = *frame;
    g.cell_start = cell_start;
    g.cell_end = cell_end;
    g.prims = prims;
    g.tris = tris;
    g.macro_bounds = macro_bounds;
    g.slabs = reinterpret_cast<const float2*>(slabs);
    const float4* words = reinterpret_cast<const float4*>(rays) + 2 * (u64)index;
    const float4 o = __ldg(words), d = __ldg(words + 1);
    RayState s;
    s.tmin = o.w;
    s.tmax = d.w;
    s.closest = d.w;
    s.prim = NO_HIT;
    s.u = 0.0f;
    s.v = 0.0f;
    bool found = false;
    if (references != 0 && is_traceable(o, d)) {
        s.tri = triangle_test_new(xyz(o), xyz(d));
        s.mailbox.clear();
        found = traverse<ANY_HIT>(g, xyz(o), xyz(d), s);
    }
    if (ANY_HIT) {
        occluded[index] = found ? 1u : 0u;
        return;
    }
    const bool hit = s.prim != NO_HIT;
    reinterpret_cast<float4*>(hits)[index] =
        make_float4(hit ? s.closest : CAUSTIC_INF, __uint_as_float(s.prim), s.u, s.v);
}

// The closest hit of every ray; image_width != 0 hands the rays out in 8x4
// pixel tiles of an image that wide (bvh.cuh's ray_of_work).
extern "C" __global__ void __launch_bounds__(GRID_TRACE_THREADS)
grid_trace_closest(const GridFrame* frame, const u32* cell_start, const u32* cell_end,
                   const u32* prims, const Triangle* tris, const Aabb* macro_bounds,
                   const float* slabs, u32 references, const Ray* rays, u32 ray_count,
                   u32 image_width, Hit* hits) {
    trace<false>(frame, cell_start, cell_end, prims, tris, macro_bounds, slabs, references, rays,
                 ray_count, image_width, hits, nullptr);
}

// 1 for every ray with a hit in (tmin, tmax), else 0.
extern "C" __global__ void __launch_bounds__(GRID_TRACE_THREADS)
grid_trace_any(const GridFrame* frame, const u32* cell_start, const u32* cell_end,
               const u32* prims, const Triangle* tris, const Aabb* macro_bounds,
               const float* slabs, u32 references, const Ray* rays, u32 ray_count,
               u32 image_width, u32* occluded) {
    trace<true>(frame, cell_start, cell_end, prims, tris, macro_bounds, slabs, references, rays,
                ray_count, image_width, nullptr, occluded);
}
