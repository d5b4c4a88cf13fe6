//! [`WideTriangleBvh`], the accel `bvh-wide`: a binary BVH from any
//! [`Bvh2Builder`] (binned SAH by default) collapsed into a 4- or 8-wide
//! tree ([`mod@super::collapse`]) and traced with SIMD ([`super::traverse`],
//! [`super::leaf`], [`super::packet`], [`super::stream`],
//! [`super::stream_closest`]).
//!
//! The SIMD backend is chosen once, at build time: for 8-wide trees AVX-512
//! (AVX-512 F/VL/BW/DQ with FMA, BMI1/2, LZCNT and POPCNT) where the CPU has
//! it, else AVX2 (with FMA) where it has that (`is_x86_feature_detected!`),
//! SSE for 4-wide trees on every x86_64 CPU, and the portable lanes
//! otherwise. All backends give the same bits, but for the box tests' fused
//! plane distances, whose margins cover either rounding (see
//! [`super::simd`]), so the choice never changes a result.
//! `CAUSTIC_WIDE_SIMD=avx2` (or `sse`, `portable`) caps the choice, to
//! measure one backend against another in the same binary.
//! The tree keeps the chosen backend's token ([`super::simd`] explains
//! why the AVX2 and AVX-512 code needs one), and the one `unsafe` step,
//! entering code compiled with those features enabled, takes it as its
//! proof.

use super::WideBvh;
use super::collapse::{CollapseConfig, collapse};
use super::leaf::{Closest, RayTriangles};
use super::node::TriangleGroup;
use super::simd::{AnyCpu, Lanes, Portable};
use super::stream;
use super::stream_closest;
use super::traverse::{LeafTest, RayBoxes, traverse};
use crate::bvh::Bvh2;
use crate::bvh::build::{BinnedSahBuilder, Bvh2Builder};
use crate::{Accel, AccelStats, BuildInput, is_traceable};
use caustic_geom::{Hit, Ray, Triangle};
use rayon::prelude::*;
use std::time::Instant;

/// Rays per rayon task in [`WideTriangleBvh::intersect_batch`]: the rays
/// that packets cannot take are regrouped by direction class inside one
/// task's rays (see [`super::stream_closest`]).
const BATCH_RUN: usize = stream::RUN;

/// Rays per rayon task in [`WideTriangleBvh::occluded_batch`]: the
/// regrouping by direction class works inside one task's rays (the
/// protocol's runs of 1024 secondary rays).
const OCCLUDED_RUN: usize = stream::RUN;

/// Rays per packet in [`WideTriangleBvh::intersect_run`]: four rows of the
/// benchmark's 16x16 tiles, or one 8x8 tile of a renderer. Measured on
/// sibenik primary rays (one thread): 8 rays 14, 16 rays 18, 32 rays 20,
/// 64 rays 20 Mrays/s.
const PACKET_RAYS: usize = 64;

/// Children per node (and triangles per leaf group).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Width {
    /// 4 children: one SSE register per coordinate; 128-byte nodes.
    Four,
    /// 8 children: one AVX register per coordinate; 256-byte nodes.
    Eight,
}

/// Settings of a [`WideTriangleBvh`] build (the binary builder is passed
/// separately, see [`WideTriangleBvh::build_with`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WideBvhConfig {
    pub width: Width,
    pub collapse: CollapseConfig,
}

impl WideBvhConfig {
    /// 8-wide, subtrees of up to 8 triangles folded into one group.
    pub const EIGHT: Self = Self {
        width: Width::Eight,
        collapse: CollapseConfig::one_group(8),
    };
    /// 4-wide, subtrees of up to 4 triangles folded into one group.
    pub const FOUR: Self = Self {
        width: Width::Four,
        collapse: CollapseConfig::one_group(4),
    };
    pub const DEFAULT: Self = Self::EIGHT;
}

impl Default for WideBvhConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// The instruction set a [`WideTriangleBvh`] traces with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// AVX-512 (8 lanes with mask registers, see `simd::Avx8k`) for 8-wide
    /// trees, SSE for 4-wide ones.
    Avx512,
    /// AVX2 for 8-wide trees, SSE for 4-wide ones.
    Avx2,
    /// SSE for 4-wide trees, portable lanes for 8-wide ones.
    Sse,
    /// Plain arrays, any CPU.
    Portable,
}

impl Backend {
    /// The best backend this CPU runs (at most `CAUSTIC_WIDE_SIMD`'s, see
    /// the module docs).
    pub fn detect() -> Self {
        Engine::detect().backend()
    }
}

/// A backend with its token, the proof that the CPU runs it: what the
/// queries dispatch on.
#[derive(Clone, Copy, Debug)]
enum Engine {
    #[cfg(target_arch = "x86_64")]
    Avx512(super::simd::Avx512),
    #[cfg(target_arch = "x86_64")]
    Avx2(super::simd::Avx2),
    #[cfg(target_arch = "x86_64")]
    Sse(super::simd::Sse2),
    Portable,
}

impl Engine {
    /// The best engine this CPU runs, at most [`simd_ceiling`]'s.
    fn detect() -> Self {
        Self::best_up_to(simd_ceiling())
    }

    /// `backend` where the CPU runs it, else the best one below it.
    fn best_up_to(backend: Backend) -> Self {
        #[cfg(target_arch = "x86_64")]
        return Self::best_x86_up_to(backend);
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = backend; // only the portable lanes on this target
            Self::Portable
        }
    }

    /// [`Engine::best_up_to`] on x86_64.
    #[cfg(target_arch = "x86_64")]
    fn best_x86_up_to(backend: Backend) -> Self {
        use super::simd::{Avx2, Avx512, Sse2};
        if backend == Backend::Avx512
            && let Some(isa) = Avx512::detect()
        {
            return Self::Avx512(isa);
        }
        match (backend, Avx2::detect()) {
            (Backend::Avx512 | Backend::Avx2, Some(avx)) => Self::Avx2(avx),
            (Backend::Avx512 | Backend::Avx2 | Backend::Sse, _) => Self::Sse(Sse2),
            (Backend::Portable, _) => Self::Portable,
        }
    }

    fn backend(self) -> Backend {
        match self {
            #[cfg(target_arch = "x86_64")]
            Self::Avx512(_) => Backend::Avx512,
            #[cfg(target_arch = "x86_64")]
            Self::Avx2(_) => Backend::Avx2,
            #[cfg(target_arch = "x86_64")]
            Self::Sse(_) => Backend::Sse,
            Self::Portable => Backend::Portable,
        }
    }
}

/// The best backend new trees may use: `CAUSTIC_WIDE_SIMD` (`avx512`,
/// `avx2`, `sse` or `portable`; for measuring one backend against another
/// in the same binary), else [`Backend::Avx512`]; read once per process. An
/// unknown value counts as unset.
fn simd_ceiling() -> Backend {
    static CEILING: std::sync::OnceLock<Backend> = std::sync::OnceLock::new();
    *CEILING.get_or_init(
        || match std::env::var("CAUSTIC_WIDE_SIMD").as_deref().map(str::trim) {
            Ok("avx2") => Backend::Avx2,
            Ok("sse") => Backend::Sse,
            Ok("portable") => Backend::Portable,
            _ => Backend::Avx512,
        },
    )
}

/// The tree in one of its widths.
#[derive(Clone, Debug)]
enum Tree {
    Four(WideBvh<4>),
    Eight(WideBvh<8>),
}

/// A wide BVH over triangles, traced with SIMD (`bvh-wide`).
#[derive(Clone, Debug)]
pub struct WideTriangleBvh {
    tree: Tree,
    engine: Engine,
    stats: AccelStats,
}

impl WideTriangleBvh {
    /// Builds with the binned SAH builder and [`WideBvhConfig::DEFAULT`].
    pub fn build(triangles: &[Triangle]) -> Self {
        Self::build_with(
            triangles,
            &BinnedSahBuilder::default(),
            &WideBvhConfig::DEFAULT,
        )
    }

    /// Builds the binary tree with `builder` and collapses it;
    /// `stats().build_ms` covers both. `stats().peak_build_bytes` is the
    /// [`BuildInput`] plus the larger of the builder's own peak and the
    /// binary tree with the wide tree beside it (the collapse holds both),
    /// or 0 when the builder does not count its memory.
    pub fn build_with(
        triangles: &[Triangle],
        builder: &dyn Bvh2Builder,
        config: &WideBvhConfig,
    ) -> Self {
        let start = Instant::now();
        let input = BuildInput::from_triangles(triangles);
        let (bvh, builder_peak) = builder.build_triangles(&input, triangles);
        let tree = Self::collapse_tree(&bvh, triangles, config);
        let build_ms = start.elapsed().as_secs_f64() * 1e3;
        let mut accel = Self::assemble(tree, triangles, build_ms);
        if builder_peak > 0 {
            let input_bytes = std::mem::size_of_val(input.bounds.as_slice())
                + std::mem::size_of_val(input.centroids.as_slice());
            let binary_bytes = std::mem::size_of_val(bvh.nodes.as_slice())
                + std::mem::size_of_val(bvh.prim_indices.as_slice());
            accel.stats.peak_build_bytes =
                input_bytes + builder_peak.max(binary_bytes + accel.stats.bytes);
        }
        accel
    }

    /// Collapses a binary tree built elsewhere, after checking it against
    /// `triangles`; `build_ms` is the collapse alone.
    pub fn from_bvh2(
        bvh: &Bvh2,
        triangles: &[Triangle],
        config: &WideBvhConfig,
    ) -> Result<Self, String> {
        bvh.validate_any(&BuildInput::from_triangles(triangles).bounds)?;
        let start = Instant::now();
        let tree = Self::collapse_tree(bvh, triangles, config);
        Ok(Self::assemble(
            tree,
            triangles,
            start.elapsed().as_secs_f64() * 1e3,
        ))
    }

    fn collapse_tree(bvh: &Bvh2, triangles: &[Triangle], config: &WideBvhConfig) -> Tree {
        let tree = match config.width {
            Width::Four => Tree::Four(collapse(bvh, triangles, &config.collapse)),
            Width::Eight => Tree::Eight(collapse(bvh, triangles, &config.collapse)),
        };
        if cfg!(debug_assertions) {
            let checked = match &tree {
                Tree::Four(t) => t.validate(triangles),
                Tree::Eight(t) => t.validate(triangles),
            };
            if let Err(problem) = checked {
                panic!("collapse built an invalid wide BVH: {problem}");
            }
        }
        tree
    }

    fn assemble(tree: Tree, triangles: &[Triangle], build_ms: f64) -> Self {
        let (shape, bytes) = match &tree {
            Tree::Four(t) => (t.shape(), t.bytes()),
            Tree::Eight(t) => (t.shape(), t.bytes()),
        };
        let stats = AccelStats {
            name: "bvh-wide",
            build_ms,
            sah_cost: shape.sah_cost,
            // Every node of the tree, leaves included, as for the binary BVH.
            nodes: shape.inner + shape.leaves,
            leaves: shape.leaves,
            max_depth: shape.max_depth,
            max_leaf_size: shape.max_leaf_size,
            avg_leaf_size: if shape.leaves == 0 {
                0.0
            } else {
                shape.prims as f32 / shape.leaves as f32
            },
            bytes,
            prims: triangles.len(),
            ..AccelStats::default()
        };
        Self {
            tree,
            engine: Engine::detect(),
            stats,
        }
    }

    /// The same tree traced with `backend` (tests compare backends; where
    /// the CPU lacks it, the best backend below it: see [`Self::backend`]).
    pub fn with_backend(mut self, backend: Backend) -> Self {
        self.engine = Engine::best_up_to(backend);
        self
    }

    /// The backend the queries run on.
    pub fn backend(&self) -> Backend {
        self.engine.backend()
    }

    /// Node width of the tree.
    pub fn width(&self) -> Width {
        match self.tree {
            Tree::Four(_) => Width::Four,
            Tree::Eight(_) => Width::Eight,
        }
    }
}

/// Closest hit of one traceable ray.
#[inline(always)]
pub(super) fn closest<const N: usize, V: Lanes<N>>(
    isa: V::Isa,
    bvh: &WideBvh<N>,
    ray: &Ray,
) -> Option<Hit> {
    let boxes =
        RayBoxes::<N, V>::new(isa, ray.origin, ray.dir, &bvh.bounds).crossing(bvh.whole_leaves);
    let mut leaf = ClosestLeaf {
        triangles: RayTriangles::<N, V>::new(isa, ray),
        t_min: ray.tmin,
        best: Closest::new(ray.tmax),
    };
    traverse::<N, V, false>(bvh, &boxes, ray.tmin, ray.tmax, &mut leaf);
    leaf.best.hit
}

/// Whether one traceable ray hits anything.
#[inline(always)]
pub(super) fn occluded<const N: usize, V: Lanes<N>>(
    isa: V::Isa,
    bvh: &WideBvh<N>,
    ray: &Ray,
) -> bool {
    let boxes =
        RayBoxes::<N, V>::new(isa, ray.origin, ray.dir, &bvh.bounds).crossing(bvh.whole_leaves);
    let mut leaf = AnyLeaf {
        triangles: RayTriangles::<N, V>::new(isa, ray),
        t_min: ray.tmin,
        t_max: ray.tmax,
    };
    traverse::<N, V, true>(bvh, &boxes, ray.tmin, ray.tmax, &mut leaf)
}

/// Closest-hit leaf test: keeps the best hit so far.
struct ClosestLeaf<'a, const N: usize, V: Lanes<N>> {
    triangles: RayTriangles<'a, N, V>,
    t_min: f32,
    best: Closest,
}

impl<const N: usize, V: Lanes<N>> LeafTest<N> for ClosestLeaf<'_, N, V> {
    #[inline(always)]
    fn test(&mut self, groups: &[TriangleGroup<N>]) -> Option<f32> {
        let improved = self.triangles.closest(groups, self.t_min, &mut self.best);
        improved.then_some(self.best.t)
    }
}

/// Any-hit leaf test.
struct AnyLeaf<'a, const N: usize, V: Lanes<N>> {
    triangles: RayTriangles<'a, N, V>,
    t_min: f32,
    t_max: f32,
}

impl<const N: usize, V: Lanes<N>> LeafTest<N> for AnyLeaf<'_, N, V> {
    #[inline(always)]
    fn test(&mut self, groups: &[TriangleGroup<N>]) -> Option<f32> {
        self.triangles
            .any(groups, self.t_min, self.t_max)
            .then_some(self.t_max)
    }
}

/// The generic queries compiled with an instruction set enabled, so that
/// the backend's lane methods inline into them: each wrapper takes the
/// backend's token, the proof that the CPU runs that instruction set, and
/// that proof is what makes entering them safe.
#[cfg(target_arch = "x86_64")]
macro_rules! isa_queries {
    ($module:ident, $token:ident, $lanes:ident, $features:literal) => {
        mod $module {
            use super::*;
            use crate::bvh::wide::simd::{$lanes, $token};

            #[inline]
            pub fn closest(isa: $token, bvh: &WideBvh<8>, ray: &Ray) -> Option<Hit> {
                #[target_feature(enable = $features)]
                unsafe fn run(isa: $token, bvh: &WideBvh<8>, ray: &Ray) -> Option<Hit> {
                    super::closest::<8, $lanes>(isa, bvh, ray)
                }
                // SAFETY: `isa` exists, so the CPU has the features.
                unsafe { run(isa, bvh, ray) }
            }

            #[inline]
            pub fn occluded(isa: $token, bvh: &WideBvh<8>, ray: &Ray) -> bool {
                #[target_feature(enable = $features)]
                unsafe fn run(isa: $token, bvh: &WideBvh<8>, ray: &Ray) -> bool {
                    super::occluded::<8, $lanes>(isa, bvh, ray)
                }
                // SAFETY: `isa` exists, so the CPU has the features.
                unsafe { run(isa, bvh, ray) }
            }

            #[inline]
            pub fn occluded_stream(
                isa: $token,
                bvh: &WideBvh<8>,
                rays: &[Ray],
                out: &mut [bool],
                step: StreamStep,
            ) {
                #[target_feature(enable = $features)]
                unsafe fn run(
                    isa: $token,
                    bvh: &WideBvh<8>,
                    rays: &[Ray],
                    out: &mut [bool],
                    step: StreamStep,
                ) {
                    stream::occluded_batch_with::<8, 4, $lanes>(isa, bvh, rays, out, step)
                }
                // SAFETY: `isa` exists, so the CPU has the features.
                unsafe { run(isa, bvh, rays, out, step) }
            }

            #[inline]
            pub fn occluded_single(isa: $token, bvh: &WideBvh<8>, rays: &[Ray], out: &mut [bool]) {
                #[target_feature(enable = $features)]
                unsafe fn run(isa: $token, bvh: &WideBvh<8>, rays: &[Ray], out: &mut [bool]) {
                    for (ray, out) in rays.iter().zip(out.iter_mut()) {
                        *out = is_traceable(ray) && super::occluded::<8, $lanes>(isa, bvh, ray);
                    }
                }
                // SAFETY: `isa` exists, so the CPU has the features.
                unsafe { run(isa, bvh, rays, out) }
            }

            #[inline]
            pub fn closest_packets(
                isa: $token,
                bvh: &WideBvh<8>,
                rays: &[Ray],
                hits: &mut [Option<Hit>],
                step: StreamStep,
            ) {
                #[target_feature(enable = $features)]
                unsafe fn run(
                    isa: $token,
                    bvh: &WideBvh<8>,
                    rays: &[Ray],
                    hits: &mut [Option<Hit>],
                    step: StreamStep,
                ) {
                    stream_closest::closest_batch::<8, { PACKET_RAYS / 8 }, $lanes>(
                        isa,
                        bvh,
                        rays,
                        hits,
                        // SAFETY: as below.
                        |rays, rest, hits| unsafe { streams(isa, bvh, rays, rest, hits, step) },
                    )
                }
                // A function of its own (see `closest_batch`).
                #[target_feature(enable = $features)]
                #[inline(never)]
                unsafe fn streams(
                    isa: $token,
                    bvh: &WideBvh<8>,
                    rays: &[Ray],
                    rest: &[u16],
                    hits: &mut [Option<Hit>],
                    step: StreamStep,
                ) {
                    stream_closest::closest_leftovers::<8, 4, $lanes>(
                        isa, bvh, rays, rest, hits, step,
                    )
                }
                // SAFETY: `isa` exists, so the CPU has the features.
                unsafe { run(isa, bvh, rays, hits, step) }
            }
        }
    };
}

#[cfg(target_arch = "x86_64")]
isa_queries!(avx, Avx2, Avx8, "avx2,fma,bmi1,bmi2,lzcnt,popcnt");

// The features `Avx2::detect` and `Avx512::detect` check. BMI1/2, LZCNT
// and POPCNT turn the traversal's bit loops (`set_bits`, the stream's ray
// counts) into single instructions; FMA serves only `Lanes::mul_add` (the
// box tests' plane distances): the compiler never fuses a product and a
// sum by itself, so every other one is still rounded alone.
#[cfg(target_arch = "x86_64")]
isa_queries!(
    avx512,
    Avx512,
    Avx8k,
    "avx2,fma,avx512f,avx512vl,avx512bw,avx512dq,bmi1,bmi2,lzcnt,popcnt"
);

impl WideTriangleBvh {
    /// Closest hits of a run of rays, in packets where they are coherent
    /// (see [`super::packet`]) and in streams of rays regrouped by
    /// direction elsewhere (see [`super::stream_closest`]);
    /// `hits.len() == rays.len()`.
    /// `CAUSTIC_WIDE_DIFFUSE=lanes` traces the streams with
    /// [`StreamStep::Lanes`], to measure one node step against the other in
    /// one binary.
    pub fn intersect_run(&self, rays: &[Ray], hits: &mut [Option<Hit>]) {
        self.intersect_streams(rays, hits, closest_stream_step());
    }

    /// Closest hits of a run of rays in packets where they are coherent
    /// and in streams with the node step `step` elsewhere;
    /// `hits.len() == rays.len()`.
    pub fn intersect_streams(&self, rays: &[Ray], hits: &mut [Option<Hit>], step: StreamStep) {
        use stream_closest::{closest_batch, closest_leftovers};
        assert_eq!(rays.len(), hits.len(), "one hit slot per ray");
        match (&self.tree, self.engine) {
            #[cfg(target_arch = "x86_64")]
            (Tree::Eight(t), Engine::Avx512(isa)) => {
                avx512::closest_packets(isa, t, rays, hits, step)
            }
            #[cfg(target_arch = "x86_64")]
            (Tree::Eight(t), Engine::Avx2(avx)) => avx::closest_packets(avx, t, rays, hits, step),
            (Tree::Eight(t), _) => closest_batch::<8, { PACKET_RAYS / 8 }, Portable<8>>(
                AnyCpu,
                t,
                rays,
                hits,
                |rays, rest, hits| {
                    closest_leftovers::<8, 4, Portable<8>>(AnyCpu, t, rays, rest, hits, step)
                },
            ),
            #[cfg(target_arch = "x86_64")]
            (Tree::Four(t), Engine::Avx512(_) | Engine::Avx2(_) | Engine::Sse(_)) => {
                let sse = super::simd::Sse2;
                closest_batch::<4, { PACKET_RAYS / 4 }, super::simd::Sse4>(
                    sse,
                    t,
                    rays,
                    hits,
                    |rays, rest, hits| {
                        closest_leftovers::<4, 8, super::simd::Sse4>(sse, t, rays, rest, hits, step)
                    },
                )
            }
            (Tree::Four(t), _) => closest_batch::<4, { PACKET_RAYS / 4 }, Portable<4>>(
                AnyCpu,
                t,
                rays,
                hits,
                |rays, rest, hits| {
                    closest_leftovers::<4, 8, Portable<4>>(AnyCpu, t, rays, rest, hits, step)
                },
            ),
        }
    }
}

/// The closest-hit streams' node step: [`StreamStep::PerRay`] unless
/// `CAUSTIC_WIDE_DIFFUSE=lanes`; read once.
fn closest_stream_step() -> StreamStep {
    static STEP: std::sync::OnceLock<StreamStep> = std::sync::OnceLock::new();
    *STEP.get_or_init(|| {
        match std::env::var("CAUSTIC_WIDE_DIFFUSE")
            .unwrap_or_default()
            .trim()
        {
            "lanes" => StreamStep::Lanes,
            _ => StreamStep::PerRay,
        }
    })
}

/// The node step of the any-hit streams
/// ([`WideTriangleBvh::occluded_streams`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamStep {
    /// Each ray of a node's mask tests all its children at once, and its
    /// bit goes into the masks of those it keeps (see [`super::stream`]);
    /// the default.
    PerRay,
    /// The stream's interval test, then a lane-wise test per kept child
    /// and vector of rays; subtrees at most three rays enter are finished
    /// by those rays alone (`CAUSTIC_WIDE_AO=lanes`; the default before
    /// session 16 of docs/BENCHMARKS.md).
    Lanes,
}

/// How [`WideTriangleBvh::occluded_run`] traces: `None` for single rays
/// (`CAUSTIC_WIDE_AO=single`), else the streams' node step
/// (`CAUSTIC_WIDE_AO=lanes` for [`StreamStep::Lanes`]); read once.
fn occlusion_mode() -> Option<StreamStep> {
    static MODE: std::sync::OnceLock<Option<StreamStep>> = std::sync::OnceLock::new();
    *MODE.get_or_init(
        || match std::env::var("CAUSTIC_WIDE_AO").unwrap_or_default().trim() {
            "single" => None,
            "lanes" => Some(StreamStep::Lanes),
            _ => Some(StreamStep::PerRay),
        },
    )
}

impl WideTriangleBvh {
    /// Occlusion of a run of rays, regrouped by direction and traced in
    /// streams with the per-ray node step (see [`super::stream`]);
    /// `out.len() == rays.len()`. `CAUSTIC_WIDE_AO=single` traces them
    /// with [`WideTriangleBvh::occluded_alone`] instead and
    /// `CAUSTIC_WIDE_AO=lanes` with [`StreamStep::Lanes`], to measure one
    /// against the other in one binary.
    pub fn occluded_run(&self, rays: &[Ray], out: &mut [bool]) {
        match occlusion_mode() {
            Some(step) => self.occluded_streams(rays, out, step),
            None => self.occluded_alone(rays, out),
        }
    }

    /// Occlusion of a run of rays in streams with the node step `step`;
    /// `out.len() == rays.len()`.
    pub fn occluded_streams(&self, rays: &[Ray], out: &mut [bool], step: StreamStep) {
        assert_eq!(rays.len(), out.len(), "one result slot per ray");
        match (&self.tree, self.engine) {
            #[cfg(target_arch = "x86_64")]
            (Tree::Eight(t), Engine::Avx512(isa)) => {
                avx512::occluded_stream(isa, t, rays, out, step)
            }
            #[cfg(target_arch = "x86_64")]
            (Tree::Eight(t), Engine::Avx2(avx)) => avx::occluded_stream(avx, t, rays, out, step),
            (Tree::Eight(t), _) => {
                stream::occluded_batch_with::<8, 4, Portable<8>>(AnyCpu, t, rays, out, step)
            }
            #[cfg(target_arch = "x86_64")]
            (Tree::Four(t), Engine::Avx512(_) | Engine::Avx2(_) | Engine::Sse(_)) => {
                let sse = super::simd::Sse2;
                stream::occluded_batch_with::<4, 8, super::simd::Sse4>(sse, t, rays, out, step)
            }
            (Tree::Four(t), _) => {
                stream::occluded_batch_with::<4, 8, Portable<4>>(AnyCpu, t, rays, out, step)
            }
        }
    }

    /// Occlusion of a run of rays, each traced alone by the single-ray
    /// traversal ([`super::traverse`]), as Embree's `rtcOccluded1M` traces
    /// incoherent rays; `out.len() == rays.len()`. Fewer instructions per
    /// ray than the lane-wise streams but slower on the benchmark's AO
    /// rays (docs/BENCHMARKS.md, "CPU rays, session 15"; the per-ray
    /// streams, session 16, are faster still).
    pub fn occluded_alone(&self, rays: &[Ray], out: &mut [bool]) {
        assert_eq!(rays.len(), out.len(), "one result slot per ray");
        match (&self.tree, self.engine) {
            #[cfg(target_arch = "x86_64")]
            (Tree::Eight(t), Engine::Avx512(isa)) => avx512::occluded_single(isa, t, rays, out),
            #[cfg(target_arch = "x86_64")]
            (Tree::Eight(t), Engine::Avx2(avx)) => avx::occluded_single(avx, t, rays, out),
            _ => {
                for (ray, out) in rays.iter().zip(out.iter_mut()) {
                    *out = self.occluded(ray);
                }
            }
        }
    }
}

impl Accel for WideTriangleBvh {
    /// In parallel over runs of 1024 rays, each traced by
    /// [`WideTriangleBvh::intersect_run`] (packets where rays are coherent,
    /// streams elsewhere).
    fn intersect_batch(&self, rays: &[Ray], hits: &mut [Option<Hit>]) {
        assert_eq!(rays.len(), hits.len(), "one hit slot per ray");
        rays.par_chunks(BATCH_RUN)
            .zip(hits.par_chunks_mut(BATCH_RUN))
            .for_each(|(rays, hits)| self.intersect_run(rays, hits));
    }

    /// In parallel over runs of 1024 rays, each traced by
    /// [`WideTriangleBvh::occluded_run`] (rays regrouped by direction into
    /// streams).
    fn occluded_batch(&self, rays: &[Ray], out: &mut [bool]) {
        assert_eq!(rays.len(), out.len(), "one result slot per ray");
        rays.par_chunks(OCCLUDED_RUN)
            .zip(out.par_chunks_mut(OCCLUDED_RUN))
            .for_each(|(rays, out)| self.occluded_run(rays, out));
    }

    fn intersect(&self, ray: &Ray) -> Option<Hit> {
        if !is_traceable(ray) {
            return None;
        }
        match (&self.tree, self.engine) {
            #[cfg(target_arch = "x86_64")]
            (Tree::Eight(t), Engine::Avx512(isa)) => avx512::closest(isa, t, ray),
            #[cfg(target_arch = "x86_64")]
            (Tree::Eight(t), Engine::Avx2(avx)) => avx::closest(avx, t, ray),
            (Tree::Eight(t), _) => closest::<8, Portable<8>>(AnyCpu, t, ray),
            #[cfg(target_arch = "x86_64")]
            (Tree::Four(t), Engine::Avx512(_) | Engine::Avx2(_) | Engine::Sse(_)) => {
                closest::<4, super::simd::Sse4>(super::simd::Sse2, t, ray)
            }
            (Tree::Four(t), _) => closest::<4, Portable<4>>(AnyCpu, t, ray),
        }
    }

    fn occluded(&self, ray: &Ray) -> bool {
        if !is_traceable(ray) {
            return false;
        }
        match (&self.tree, self.engine) {
            #[cfg(target_arch = "x86_64")]
            (Tree::Eight(t), Engine::Avx512(isa)) => avx512::occluded(isa, t, ray),
            #[cfg(target_arch = "x86_64")]
            (Tree::Eight(t), Engine::Avx2(avx)) => avx::occluded(avx, t, ray),
            (Tree::Eight(t), _) => occluded::<8, Portable<8>>(AnyCpu, t, ray),
            #[cfg(target_arch = "x86_64")]
            (Tree::Four(t), Engine::Avx512(_) | Engine::Avx2(_) | Engine::Sse(_)) => {
                occluded::<4, super::simd::Sse4>(super::simd::Sse2, t, ray)
            }
            (Tree::Four(t), _) => occluded::<4, Portable<4>>(AnyCpu, t, ray),
        }
    }

    fn stats(&self) -> &AccelStats {
        &self.stats
    }

    fn name(&self) -> &'static str {
        self.stats.name
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BruteForce;
    use caustic_geom::{Pcg32, Vec3};

    /// A soup with duplicates (exact ties) and slivers in `[-10, 10]^3`.
    fn soup(count: usize, seed: u64) -> Vec<Triangle> {
        let mut rng = Pcg32::new(seed, 5);
        let mut unit = move || rng.next_f32() * 2.0 - 1.0;
        let mut tris: Vec<Triangle> = Vec::with_capacity(count);
        for i in 0..count {
            let p = Vec3::new(unit(), unit(), unit()) * 10.0;
            let (a, b) = (
                Vec3::new(unit(), unit(), unit()),
                Vec3::new(unit(), unit(), unit()),
            );
            tris.push(match i % 7 {
                0 if i > 0 => tris[i / 2],
                1 => Triangle::new(p, p + 3.0 * a, p + 3.0 * a + 1e-5 * b),
                _ => Triangle::new(p, p + a, p + b),
            });
        }
        tris
    }

    /// Camera rays from `eye` through a `size`-square grid, in rows: what
    /// packets are made for. Every 97th ray gets a clipped interval and one
    /// row runs exactly along an axis (zero components: no packet).
    fn camera_rays(eye: Vec3, size: usize) -> Vec<Ray> {
        let mut rays = Vec::with_capacity(size * size);
        for y in 0..size {
            for x in 0..size {
                let s = |i: usize| (i as f32 + 0.5) / size as f32 * 2.0 - 1.0;
                let mut dir = Vec3::new(s(x), s(y), 1.0) - eye.normalize() * 0.2;
                if y == size / 2 {
                    dir = Vec3::new(0.0, -0.0, 1.0);
                }
                let i = rays.len();
                rays.push(if i % 97 == 0 {
                    Ray::segment(eye, dir, 2.0 + (i % 5) as f32, 14.0)
                } else {
                    Ray::new(eye, dir)
                });
            }
        }
        rays
    }

    /// Every backend this CPU runs, the portable one always; a missing AVX2
    /// is said (or fails the test under `CAUSTIC_REQUIRE_AVX2=1`).
    fn backends(test: &str) -> Vec<Backend> {
        let mut out = vec![Backend::Portable];
        if cfg!(target_arch = "x86_64") {
            out.push(Backend::Sse);
        }
        #[cfg(target_arch = "x86_64")]
        if super::super::simd::avx2_for_test(test).is_some() {
            out.push(Backend::Avx2);
        }
        #[cfg(target_arch = "x86_64")]
        if super::super::simd::avx512_for_test(test).is_some() {
            out.push(Backend::Avx512);
        }
        out
    }

    fn configs() -> [WideBvhConfig; 3] {
        [
            WideBvhConfig::EIGHT,
            WideBvhConfig::FOUR,
            WideBvhConfig {
                width: Width::Eight,
                collapse: CollapseConfig::KEEP_LEAVES,
            },
        ]
    }

    /// `check` on the wide BVH of `tris` for every config of [`configs`]
    /// and every backend of [`backends`] (each checked to be the one in
    /// use: no silent fallback).
    fn for_each_bvh(
        test: &str,
        tris: &[Triangle],
        mut check: impl FnMut(&WideTriangleBvh, &WideBvhConfig, Backend),
    ) {
        for config in configs() {
            let built = WideTriangleBvh::build_with(tris, &BinnedSahBuilder::default(), &config);
            for backend in backends(test) {
                let bvh = built.clone().with_backend(backend);
                assert_eq!(bvh.backend(), backend, "no silent fallback");
                check(&bvh, &config, backend);
            }
        }
    }

    /// `bvh`'s closest hits of `rays` as one batch, and of the run
    /// `rays[run]` (not a whole number of packets or streams), are
    /// `expected`'s; `context` names the case in a failure.
    fn assert_closest_batch_and_run(
        bvh: &WideTriangleBvh,
        rays: &[Ray],
        expected: &[Option<Hit>],
        run: std::ops::Range<usize>,
        context: &str,
    ) {
        let mut hits = vec![None; rays.len()];
        bvh.intersect_batch(rays, &mut hits);
        assert!(hits == expected, "{context}");
        let mut hits = vec![None; run.len()];
        bvh.intersect_run(&rays[run.clone()], &mut hits);
        assert!(hits[..] == expected[run], "{context}");
    }

    #[test]
    fn every_backend_and_width_matches_brute_force() {
        let test = "every_backend_and_width_matches_brute_force";
        let tris = soup(800, 1);
        let brute = BruteForce::new(&tris);
        let mut rng = Pcg32::new(2, 1);
        let mut unit = move || rng.next_f32() * 2.0 - 1.0;
        let rays: Vec<Ray> = (0..4000)
            .map(|_| {
                Ray::new(
                    Vec3::new(unit(), unit(), unit()) * 15.0,
                    Vec3::new(unit(), unit(), unit()),
                )
            })
            .collect();
        for_each_bvh(test, &tris, |bvh, config, backend| {
            for ray in &rays {
                let expected = brute.intersect(ray);
                assert_eq!(
                    bvh.intersect(ray),
                    expected,
                    "{config:?} {backend:?} {ray:?}"
                );
                assert_eq!(
                    bvh.occluded(ray),
                    expected.is_some(),
                    "{config:?} {backend:?}"
                );
            }
        });
    }

    #[test]
    fn packets_match_brute_force_on_camera_rays() {
        let test = "packets_match_brute_force_on_camera_rays";
        let tris = soup(1500, 3);
        let brute = BruteForce::new(&tris);
        // Eyes outside and inside the soup, looking down each axis sign.
        for eye in [Vec3::new(0.3, -0.2, -25.0), Vec3::new(1.0, 2.0, -3.0)] {
            let rays = camera_rays(eye, 48);
            let expected: Vec<Option<Hit>> = rays.iter().map(|r| brute.intersect(r)).collect();
            for_each_bvh(test, &tris, |bvh, config, backend| {
                let context = format!("{config:?} {backend:?} eye {eye:?}");
                assert_closest_batch_and_run(bvh, &rays, &expected, 5..306, &context);
            });
        }
    }

    /// Secondary rays as the benchmark protocol makes them: four directions
    /// from each of a row of nearby origins, in segments, with awkward rays
    /// mixed in (zero direction components, empty or inverted intervals,
    /// non-finite origins, huge and tiny directions).
    fn secondary_rays(count: usize, seed: u64) -> Vec<Ray> {
        let mut rng = Pcg32::new(seed, 9);
        let mut unit = move || rng.next_f32() * 2.0 - 1.0;
        let mut rays = Vec::with_capacity(count);
        let mut origin = Vec3::new(unit(), unit(), unit()) * 8.0;
        while rays.len() < count {
            if rays.len() % 4 == 0 {
                origin += Vec3::new(unit(), unit(), unit()) * 0.3;
            }
            let mut dir = Vec3::new(unit(), unit(), unit());
            let i = rays.len();
            let (tmin, tmax) = match i % 11 {
                0 => (0.0, f32::INFINITY),
                1 => (0.5 + unit().abs(), 1.0 + 6.0 * unit().abs()),
                2 => (3.0, 3.0), // empty
                3 => (5.0, 1.0), // inverted
                _ => (0.0, 4.0 + 20.0 * unit().abs()),
            };
            match i % 53 {
                7 => dir.x = 0.0,
                8 => dir = Vec3::new(0.0, -0.0, 1.0),
                9 => dir *= 1e-20,
                10 => dir *= 1e20,
                11 => dir = Vec3::ZERO,
                12 => dir.y = f32::NAN,
                // Subnormal: an infinite reciprocal inside a stream's class.
                13 => dir.y = 1e-39,
                _ => {}
            }
            let o = if i % 97 == 5 {
                Vec3::new(f32::INFINITY, 0.0, 0.0)
            } else {
                origin
            };
            rays.push(Ray::segment(o, dir, tmin, tmax));
        }
        rays
    }

    /// A soup of [`soup`] with huge, thin, degenerate and non-finite
    /// triangles added.
    fn awkward_soup(count: usize, seed: u64) -> Vec<Triangle> {
        let mut tris = soup(count, seed);
        let p = Vec3::new(1.0, -2.0, 0.5);
        tris.extend([
            Triangle::new(
                Vec3::splat(-1e4),
                Vec3::new(1e4, -1e4, 0.0),
                Vec3::new(0.0, 1e4, 1e4),
            ),
            Triangle::new(p, p + Vec3::X * 9.0, p + Vec3::X * 9.0 + Vec3::Y * 1e-6),
            Triangle::new(p, p + Vec3::Y, p + Vec3::Y * 2.0),
            Triangle::new(p, p, p),
            Triangle::new(p, Vec3::new(f32::NAN, 0.0, 0.0), p + Vec3::Z),
        ]);
        tris
    }

    #[test]
    fn occlusion_batches_match_single_rays_and_brute_force() {
        let test = "occlusion_batches_match_single_rays_and_brute_force";
        let tris = awkward_soup(1200, 11);
        let brute = BruteForce::new(&tris);
        let rays = secondary_rays(5000, 12);
        let expected: Vec<bool> = rays.iter().map(|r| brute.occluded(r)).collect();
        let hits = expected.iter().filter(|&&o| o).count();
        assert!(hits > rays.len() / 8 && hits < rays.len() * 7 / 8, "{hits}");
        for_each_bvh(test, &tris, |bvh, config, backend| {
            let single: Vec<bool> = rays.iter().map(|r| bvh.occluded(r)).collect();
            assert!(single == expected, "{config:?} {backend:?}");
            let mut out = vec![false; rays.len()];
            bvh.occluded_batch(&rays, &mut out);
            assert!(out == expected, "{config:?} {backend:?}");
            // A run that is not a whole number of packets or streams.
            let mut out = vec![true; 1337];
            bvh.occluded_run(&rays[3..1340], &mut out);
            assert!(out[..] == expected[3..1340], "{config:?} {backend:?}");
            // Both node steps of the streams, whichever the default is.
            for step in [StreamStep::PerRay, StreamStep::Lanes] {
                let mut out = vec![true; 1337];
                bvh.occluded_streams(&rays[3..1340], &mut out, step);
                assert!(
                    out[..] == expected[3..1340],
                    "{config:?} {backend:?} {step:?}"
                );
            }
            let mut out = vec![true; rays.len()];
            bvh.occluded_alone(&rays, &mut out);
            assert!(out == expected, "{config:?} {backend:?}");
        });
    }

    #[test]
    fn closest_streams_match_single_rays_and_brute_force() {
        let test = "closest_streams_match_single_rays_and_brute_force";
        let tris = awkward_soup(1200, 13);
        let brute = BruteForce::new(&tris);
        // Incoherent rays (packets take none of them), with the awkward
        // ones mixed in, and a coherent camera run in the middle.
        let mut rays = secondary_rays(2500, 14);
        rays.extend(camera_rays(Vec3::new(0.3, -0.2, -25.0), 24));
        rays.extend(secondary_rays(2500, 15));
        let expected: Vec<Option<Hit>> = rays.iter().map(|r| brute.intersect(r)).collect();
        let hits = expected.iter().flatten().count();
        assert!(hits > rays.len() / 8 && hits < rays.len() * 7 / 8, "{hits}");
        for_each_bvh(test, &tris, |bvh, config, backend| {
            let context = format!("{config:?} {backend:?}");
            assert_closest_batch_and_run(bvh, &rays, &expected, 3..1340, &context);
            // Both node steps of the streams, whichever the default is.
            for step in [StreamStep::PerRay, StreamStep::Lanes] {
                let mut hits = vec![None; rays.len()];
                bvh.intersect_streams(&rays, &mut hits, step);
                assert!(hits == expected, "{context} {step:?}");
            }
            // The single-ray traversal on the awkward rays too.
            let single: Vec<Option<Hit>> = rays.iter().map(|r| bvh.intersect(r)).collect();
            assert!(single == expected, "{context}");
        });
    }

    /// The bunny's triangles, their wide BVH, their box, and an eye in
    /// front of them; `None` (the test skips) without the scenes.
    fn bunny_in_view() -> Option<(Vec<Triangle>, WideTriangleBvh, caustic_geom::Aabb, Vec3)> {
        let path = caustic_scene_path()?;
        let tris = caustic_scene::Scene::load(&path)
            .expect("bunny loads")
            .triangles();
        let bvh = WideTriangleBvh::build(&tris);
        let bounds = caustic_geom::Aabb::from_points(tris.iter().flat_map(|t| [t.v0, t.v1, t.v2]));
        let eye = bounds.center() - Vec3::new(0.0, 0.0, 2.5 * bounds.diagonal());
        Some((tris, bvh, bounds, eye))
    }

    #[test]
    fn packets_match_single_rays_on_the_bunny() {
        let Some((_, bvh, _, eye)) = bunny_in_view() else {
            return;
        };
        let rays: Vec<Ray> = camera_rays(eye, 128)
            .into_iter()
            .map(|r| Ray::segment(r.origin, r.dir * Vec3::new(0.15, 0.15, 1.0), r.tmin, r.tmax))
            .collect();
        let mut hits = vec![None; rays.len()];
        bvh.intersect_batch(&rays, &mut hits);
        let single: Vec<Option<Hit>> = rays.iter().map(|r| bvh.intersect(r)).collect();
        assert!(hits == single);
        assert!(
            hits.iter().flatten().count() > rays.len() / 10,
            "rays aimed at the bunny hit it"
        );
    }

    #[test]
    fn streams_match_single_rays_on_the_bunny() {
        let Some((tris, bvh, bounds, eye)) = bunny_in_view() else {
            return;
        };
        let primary: Vec<Ray> = camera_rays(eye, 96)
            .into_iter()
            .map(|r| Ray::new(r.origin, r.dir * Vec3::new(0.15, 0.15, 1.0)))
            .collect();
        // AO rays as the protocol makes them: four from each hit point,
        // lifted off the surface, a tenth of the diagonal long.
        let mut rng = Pcg32::new(21, 4);
        let mut unit = move || rng.next_f32() * 2.0 - 1.0;
        let reach = 0.1 * bounds.diagonal();
        let mut rays = Vec::new();
        for ray in &primary {
            let Some(hit) = bvh.intersect(ray) else {
                continue;
            };
            let tri = tris[hit.prim as usize];
            let mut normal = (tri.v1 - tri.v0).cross(tri.v2 - tri.v0).normalize();
            if normal.dot(ray.dir) > 0.0 {
                normal = -normal;
            }
            let origin = ray.at(hit.t) + normal * (1e-4 * bounds.diagonal());
            for _ in 0..4 {
                let dir = (normal + Vec3::new(unit(), unit(), unit()) * 0.9).normalize();
                rays.push(Ray::segment(origin, dir, 0.0, reach));
            }
        }
        assert!(rays.len() > 4000, "rays aimed at the bunny hit it");
        let mut out = vec![false; rays.len()];
        bvh.occluded_batch(&rays, &mut out);
        let single: Vec<bool> = rays.iter().map(|r| bvh.occluded(r)).collect();
        assert!(out == single);
        let occluded = out.iter().filter(|&&o| o).count();
        assert!(
            occluded > rays.len() / 20 && occluded < rays.len(),
            "{occluded}"
        );
        let brute = BruteForce::new(&tris);
        for (ray, &o) in rays.iter().zip(&out).step_by(37) {
            assert_eq!(o, brute.occluded(ray));
        }
        // The same rays unbounded, as diffuse bounces: closest hits
        // through the streams.
        let diffuse: Vec<Ray> = rays.iter().map(|r| Ray::new(r.origin, r.dir)).collect();
        let mut hits = vec![None; diffuse.len()];
        bvh.intersect_batch(&diffuse, &mut hits);
        let single: Vec<Option<Hit>> = diffuse.iter().map(|r| bvh.intersect(r)).collect();
        assert!(hits == single);
        let found = hits.iter().flatten().count();
        assert!(
            found > diffuse.len() / 20 && found < diffuse.len(),
            "{found}"
        );
        for (ray, hit) in diffuse.iter().zip(&hits).step_by(37) {
            assert_eq!(*hit, brute.intersect(ray));
        }
    }

    fn caustic_scene_path() -> Option<std::path::PathBuf> {
        caustic_scene::data_dirs::scene_file("bunny/bun_zipper.ply")
    }
}
