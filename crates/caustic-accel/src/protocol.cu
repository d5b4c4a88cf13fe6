// rays.cu: the rays of the anchor ray protocol (shared/anchors/PROTOCOL.md,
// sections 3 and 4), generated on the device: primary camera rays, and the
// four AO / diffuse rays of every primary hit.
//
// The protocol computes in f64 and stores f32, and caustic_geom::protocol
// does so on the CPU; these kernels repeat its arithmetic operation for
// operation so that the rays are the same bits. Every f64 operation is an
// _rn intrinsic: NVRTC would otherwise fuse a * b + c into one fused
// multiply-add, which rounds once where Rust rounds twice. The one place
// where the two may still differ is cos and sin, which CUDA computes within
// 2 ulp and glibc within 1: a rounding to f32 can then flip in the rare ray
// whose exact value lies that close to a tie. The GPU tests count them; on
// an H200 none of 53 M secondary rays of the standard scenes differed.
#include "common.cuh"
#include "bvh.cuh"

#define RAYS_THREADS 256u

// caustic_accel::protocol_cuda::PrimaryFrame: the camera basis, computed on the host.
struct PrimaryFrame {
    double forward[3];
    double right[3];
    double up[3];
    double half_height;
    double aspect;
    float eye[3];
    u32 pad;
};
CAUSTIC_CHECK_SIZE(PrimaryFrame);
CAUSTIC_CHECK_FIELD(PrimaryFrame, forward);
CAUSTIC_CHECK_FIELD(PrimaryFrame, right);
CAUSTIC_CHECK_FIELD(PrimaryFrame, up);
CAUSTIC_CHECK_FIELD(PrimaryFrame, half_height);
CAUSTIC_CHECK_FIELD(PrimaryFrame, aspect);
CAUSTIC_CHECK_FIELD(PrimaryFrame, eye);
CAUSTIC_CHECK_FIELD(PrimaryFrame, pad);

// ------------------------------------------------------------- f64 vectors

struct d3 {
    double x, y, z;
};

__device__ __forceinline__ d3 make_d3(double x, double y, double z) {
    d3 r;
    r.x = x;
    r.y = y;
    r.z = z;
    return r;
}
__device__ __forceinline__ d3 load_d3(const double* p) { return make_d3(p[0], p[1], p[2]); }
__device__ __forceinline__ d3 widen(float x, float y, float z) {
    return make_d3((double)x, (double)y, (double)z);
}
__device__ __forceinline__ d3 add(d3 a, d3 b) {
    return make_d3(__dadd_rn(a.x, b.x), __dadd_rn(a.y, b.y), __dadd_rn(a.z, b.z));
}
__device__ __forceinline__ d3 sub(d3 a, d3 b) {
    return make_d3(__dsub_rn(a.x, b.x), __dsub_rn(a.y, b.y), __dsub_rn(a.z, b.z));
}
__device__ __forceinline__ d3 scale(double s, d3 v) {
    return make_d3(__dmul_rn(s, v.x), __dmul_rn(s, v.y), __dmul_rn(s, v.z));
}
__device__ __forceinline__ d3 neg(d3 v) { return make_d3(-v.x, -v.y, -v.z); }
// glam's DVec3::dot: (x * x') + (y * y') + (z * z'), left to right.
__device__ __forceinline__ double dot(d3 a, d3 b) {
    return __dadd_rn(__dadd_rn(__dmul_rn(a.x, b.x), __dmul_rn(a.y, b.y)), __dmul_rn(a.z, b.z));
}
// glam's DVec3::cross, term for term.
__device__ __forceinline__ d3 cross(d3 a, d3 b) {
    return make_d3(__dsub_rn(__dmul_rn(a.y, b.z), __dmul_rn(b.y, a.z)),
                   __dsub_rn(__dmul_rn(a.z, b.x), __dmul_rn(b.z, a.x)),
                   __dsub_rn(__dmul_rn(a.x, b.y), __dmul_rn(b.x, a.y)));
}
// The protocol's normalize: one division per component by the length.
__device__ __forceinline__ d3 normalize(d3 v) {
    const double len = __dsqrt_rn(dot(v, v));
    return make_d3(__ddiv_rn(v.x, len), __ddiv_rn(v.y, len), __ddiv_rn(v.z, len));
}
__device__ __forceinline__ bool is_finite(d3 v) {
    return fabs(v.x) < CAUSTIC_INF && fabs(v.y) < CAUSTIC_INF && fabs(v.z) < CAUSTIC_INF;
}

// A protocol ray, narrowed to f32 once here, starts at t = 0; it goes out
// through bvh.cuh's word view of the record.
__device__ __forceinline__ void store_ray(Ray* out, u64 index, d3 origin, d3 dir, float tmax) {
    Ray r;
    r.origin[0] = (float)origin.x;
    r.origin[1] = (float)origin.y;
    r.origin[2] = (float)origin.z;
    r.tmin = 0.0f;
    r.dir[0] = (float)dir.x;
    r.dir[1] = (float)dir.y;
    r.dir[2] = (float)dir.z;
    r.tmax = tmax;
    store_ray(out, index, r);
}

// ------------------------------------------------------------ primary rays

// Ray i = y * width + x through the centre of pixel (x, y), row 0 at the top.
extern "C" __global__ void __launch_bounds__(RAYS_THREADS)
    rays_primary(const PrimaryFrame* frame, u32 width, u32 height, Ray* out) {
    const u64 n = (u64)width * height;
    const d3 f = load_d3(frame->forward), r = load_d3(frame->right), u = load_d3(frame->up);
    const double h = frame->half_height, a = frame->aspect;
    const d3 eye = widen(frame->eye[0], frame->eye[1], frame->eye[2]);
    for (u64 i = global_thread(); i < n; i += grid_threads()) {
        const double x = (double)(i % width), y = (double)(i / width);
        // (2 * (x + 0.5) / width - 1) * h * a and (1 - 2 * (y + 0.5) / height) * h
        const double sx = __dmul_rn(
            __dmul_rn(__dsub_rn(__ddiv_rn(__dmul_rn(2.0, __dadd_rn(x, 0.5)), (double)width), 1.0), h),
            a);
        const double sy =
            __dmul_rn(__dsub_rn(1.0, __ddiv_rn(__dmul_rn(2.0, __dadd_rn(y, 0.5)), (double)height)), h);
        const d3 dir = normalize(add(add(f, scale(sx, r)), scale(sy, u)));
        store_ray(out, i, eye, dir, CAUSTIC_INF);
    }
}

// ---------------------------------------------------------- secondary rays

// 1 where the primary ray hit something, else 0: the flags the compaction
// of hit pixels reads.
extern "C" __global__ void __launch_bounds__(RAYS_THREADS)
    rays_hit_flags(const Hit* hits, u32 n, u32* flags) {
    for (u64 i = global_thread(); i < n; i += grid_threads()) flags[i] = hits[i].prim != NO_HIT;
}

// PCG-XSH-RR 64/32 (O'Neill's pcg_basic.c), as caustic_geom::Pcg32.
struct Pcg32 {
    u64 state, inc;
};

__device__ __forceinline__ u32 pcg32_next(Pcg32& g) {
    const u64 old = g.state;
    g.state = old * 6364136223846793005ull + g.inc;
    const u32 xorshifted = (u32)(((old >> 18) ^ old) >> 27);
    const u32 rot = (u32)(old >> 59);
    return (xorshifted >> rot) | (xorshifted << ((0u - rot) & 31u));
}

__device__ __forceinline__ Pcg32 pcg32_seed(u64 initstate, u64 initseq) {
    Pcg32 g;
    g.state = 0;
    g.inc = (initseq << 1) | 1u;
    pcg32_next(g);
    g.state += initstate;
    pcg32_next(g);
    return g;
}

// A uniform in [0, 1) with 24 bits, exact in f64.
__device__ __forceinline__ double pcg32_f64_24(Pcg32& g) {
    return (double)(pcg32_next(g) >> 8) * (1.0 / 16777216.0);
}

// The geometric normal of the hit triangle, facing the ray's origin
// (-dir for a degenerate triangle).
__device__ __forceinline__ d3 facing_normal(const Triangle& tri, d3 dir) {
    const d3 v0 = widen(tri.v0[0], tri.v0[1], tri.v0[2]);
    const d3 v1 = widen(tri.v1[0], tri.v1[1], tri.v1[2]);
    const d3 v2 = widen(tri.v2[0], tri.v2[1], tri.v2[2]);
    d3 n = normalize(cross(sub(v1, v0), sub(v2, v0)));
    if (dot(n, dir) > 0.0) n = neg(n);
    return is_finite(n) ? n : neg(dir);
}

// For the j-th hit pixel i = pixels[j], rays 4j .. 4j + 3: from the hit point
// offset along the normal by `offset` (1e-4 * diag), cosine-distributed about
// the normal with the pixel's PCG32 stream (initstate i, initseq 54) and
// Duff et al.'s basis ("Building an Orthonormal Basis, Revisited", JCGT
// 2017). `diffuse` gets tmax = inf, `ao` the AO length; both tmin = 0.
extern "C" __global__ void __launch_bounds__(RAYS_THREADS)
    rays_secondary(const Ray* primary, const Hit* hits, const u32* pixels, u32 count,
                   const Triangle* tris, const u32* slots, double offset, float ao_tmax,
                   Ray* diffuse, Ray* ao) {
    const double two_pi = 2.0 * 3.141592653589793;
    for (u64 j = global_thread(); j < count; j += grid_threads()) {
        const u32 i = pixels[j];
        const Ray ray = primary[i];
        const Hit hit = hits[i];
        const d3 dir = widen(ray.dir[0], ray.dir[1], ray.dir[2]);
        const d3 p = add(widen(ray.origin[0], ray.origin[1], ray.origin[2]), scale((double)hit.t, dir));
        // Null slots: the triangles are in scene order (grids and others).
        const d3 n = facing_normal(tris[slots != nullptr ? slots[hit.prim] : hit.prim], dir);
        // n * offset: the same products as scale(offset, n).
        const d3 origin = add(p, scale(offset, n));
        // onb: s = copysign(1, n.z); a = -1 / (s + n.z); b = n.x * n.y * a.
        const double s = copysign(1.0, n.z);
        const double a = __ddiv_rn(-1.0, __dadd_rn(s, n.z));
        const double b = __dmul_rn(__dmul_rn(n.x, n.y), a);
        const d3 tangent = make_d3(__dadd_rn(1.0, __dmul_rn(__dmul_rn(__dmul_rn(s, n.x), n.x), a)),
                                   __dmul_rn(s, b), __dmul_rn(-s, n.x));
        const d3 bitangent = make_d3(b, __dadd_rn(s, __dmul_rn(__dmul_rn(n.y, n.y), a)), -n.y);
        Pcg32 rng = pcg32_seed(i, 54);
        for (u32 k = 0; k < 4; ++k) {
            const double u1 = pcg32_f64_24(rng);
            const double u2 = pcg32_f64_24(rng);
            const double rr = __dsqrt_rn(u1);
            const double phi = __dmul_rn(two_pi, u2);
            const double lx = __dmul_rn(rr, cos(phi)), ly = __dmul_rn(rr, sin(phi));
            const double lz = __dsqrt_rn(fmax(__dsub_rn(1.0, u1), 0.0));
            const d3 d = normalize(add(add(scale(lx, tangent), scale(ly, bitangent)), scale(lz, n)));
            store_ray(diffuse, 4 * j + k, origin, d, CAUSTIC_INF);
            store_ray(ao, 4 * j + k, origin, d, ao_tmax);
        }
    }
}
