//! Divide-and-conquer ray tracing (`dacrt`): rays and triangles partitioned
//! together, recursively, with no acceleration structure kept between
//! batches (Wächter and Keller 2009; Mora, "Naive ray-tracing: a
//! divide-and-conquer approach", 2011; Áfra 2012), in the task form of
//! Vinkler, Bittner, Havran and Hapala 2013, §5.
//!
//! A task holds a box, a range of rays and a range of triangles. It picks a
//! split plane ([`DacrtSplit`]: the spatial median of the longest axis, or
//! the ray distribution heuristic over 32 candidates, Bittner and Havran
//! 2009, estimated on √n samples as Vinkler et al. §5.2 do), classifies
//! triangles as left, straddling or right and rays as left, straddling or
//! right, and makes the seven children of Vinkler et al.'s Figure 3: every
//! (ray class, triangle class) pair but left rays with right triangles and
//! right rays with left triangles, which cannot meet. The children run in
//! the paper's three dependency waves, (T1, T4, T7), (T2, T3), (T5, T6):
//! within a wave no two children share rays or triangles, so each owns its
//! slices and the wave runs in parallel (rayon). (On the GPU the default
//! [`DacrtSchedule::Concurrent`] partitions out of place instead, so all
//! seven children run at once.) A task intersects its
//! rays with its triangles directly when fewer than 32 rays or 16 triangles
//! remain, or when `rays · tris · C_INTERS < (rays + tris) · C_SORT`
//! (the paper's Eq. 2, `C_INTERS = 1`, `C_SORT = 80`).
//!
//! **Exact hits.** The results follow the [`Accel`] contract bit for bit
//! (brute force's hits, ties to the lowest id), by two facts about the
//! watertight test that `slab_ray.rs` sets out for the kd-tree and the grid:
//! a reported hit lies within the ray's thickness `delta` of the triangle,
//! and its `t` lies in the depth slab of the triangle's box (widened by the
//! rounding margin). So a ray goes to every child whose box, grown by
//! `delta`, its (infinite) line meets; a triangle to every child whose
//! grown box its box meets; and a ray is dropped from a task only when the
//! depth slab of the box of the task's *whole* triangles cannot reach
//! `[tmin, closest hit]`. A hit pair then meets in some direct test: the
//! point of the line beside the triangle stays inside every box on the way
//! down. Each pair is tested at most once per leaf it shares, and the
//! closest hit keeps the lowest id on equal `t`.
//!
//! DACRT is a batch algorithm: [`Dacrt::closest_hits`] and
//! [`Dacrt::any_hits`] take all rays at once, and [`Accel::intersect_batch`]
//! is that. A single ray (`Accel::intersect`) is the direct case: brute
//! force over every triangle, so [`Accel::prefers_batches`] says so and
//! the CPU renderers trace it by waves. Its "build" only
//! copies the triangles; the trace time includes everything.

mod schedule;
mod split;
mod task;
#[cfg(feature = "cuda")]
mod taskpool_cuda;

use std::time::Instant;

use crate::{Accel, AccelStats};
use caustic_geom::{Hit, Ray, Triangle};

pub use split::DacrtSplit;
#[cfg(feature = "cuda")]
pub use taskpool_cuda::{
    DacrtTracer, GpuDacrtStats, MAX_ITEMS, PARAM_WORDS, kernel_params, kernel_table,
};

/// How a task hands its rays and triangles to its children.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DacrtScheme {
    /// Vinkler et al.'s seven children in three dependency waves, each
    /// ray–triangle pair in one child; the children of a wave run in
    /// parallel (`scheme=seven`, the default).
    #[default]
    Seven,
    /// Mora's two children, left then right, straddlers in both
    /// (`scheme=binary`): fewer triangle passes, no parallel children.
    Binary,
}

/// When the seven children of a task may run (Vinkler et al.'s scheme).
///
/// The children, their splits and the direct-intersection rule are the
/// same under both; only their order and where their index ranges live
/// differ. The CPU twin ([`Dacrt`]) always runs the waves in place (its
/// rays carry their hits); the schedule changes the GPU's run and the
/// chain [`DacrtStats::critical_path`] counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DacrtSchedule {
    /// Every task partitions out of place, into index memory of its own,
    /// so siblings only read the ranges they share and all seven children
    /// start at once (`sched=concurrent`, the default): the chain of
    /// dependent tasks is the tree's depth. A deviation from the paper,
    /// whose in-place partitions make siblings wait; the hits are the
    /// same, as a ray's closest hit is merged across tasks by an atomic
    /// minimum of (t, triangle) keys in either case. The index memory
    /// grows with the tree, not the frontier: a batch whose arenas would
    /// outgrow 32-bit offsets or the device runs in slices of its rays or
    /// triangles (the same hits).
    #[default]
    Concurrent,
    /// The paper's three dependency waves (T1, T4, T7) → (T2, T3) →
    /// (T5, T6) over in-place partitions (§5.3, `sched=waves`): a child
    /// waits for the siblings that share its ranges, so the chain grows
    /// with the tree (2^depth to 3^depth).
    Waves,
}

/// The parameters of a DACRT trace.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DacrtConfig {
    pub split: DacrtSplit,
    pub scheme: DacrtScheme,
    pub schedule: DacrtSchedule,
    /// Cost of one ray–triangle test (Vinkler et al. §5.4: 1).
    pub c_inters: f32,
    /// Cost of sorting one element into a child (Vinkler et al. §5.4: 80).
    pub c_sort: f32,
    /// Below this many rays a task intersects directly (32).
    pub min_rays: usize,
    /// Below this many triangles a task intersects directly (16).
    pub min_tris: usize,
    /// Deepest subdivision; deeper tasks intersect directly.
    pub max_depth: u32,
    /// Concurrent schedule: the levels (from the root) at which the
    /// straddling rays' child on the far side of the plane (T5 or T3, by
    /// where most of those rays head) waits for the near one's subtree,
    /// so the rays that hit there are culled from it, as the waves' T3 →
    /// T5 order does; each such level can double the chain (`near=N`, 0:
    /// none).
    pub near_levels: u32,
}

impl DacrtConfig {
    /// The paper's constants with the spatial median (`dacrt`).
    pub const MEDIAN: Self = Self {
        split: DacrtSplit::Median,
        scheme: DacrtScheme::Seven,
        schedule: DacrtSchedule::Concurrent,
        c_inters: 1.0,
        c_sort: 80.0,
        min_rays: 32,
        min_tris: 16,
        max_depth: 64,
        near_levels: 0,
    };
    /// The paper's constants with the ray distribution heuristic
    /// (`dacrt:split=rdh`).
    pub const RDH: Self = Self {
        split: DacrtSplit::Rdh,
        ..Self::MEDIAN
    };

    /// The spec of this configuration (`dacrt`, `dacrt:split=rdh`, with
    /// the parameters that differ from the paper's); parses back to it.
    pub fn spec(&self) -> String {
        let mut spec = String::from("dacrt");
        if self.split == DacrtSplit::Rdh {
            spec += ":split=rdh";
        }
        if self.scheme == DacrtScheme::Binary {
            spec += ":scheme=binary";
        }
        if self.schedule == DacrtSchedule::Waves {
            spec += ":sched=waves";
        }
        let paper = Self::MEDIAN;
        if self.c_sort != paper.c_sort {
            spec += &format!(":sort={}", self.c_sort);
        }
        if self.min_rays != paper.min_rays {
            spec += &format!(":rays={}", self.min_rays);
        }
        if self.min_tris != paper.min_tris {
            spec += &format!(":tris={}", self.min_tris);
        }
        if self.near_levels != paper.near_levels {
            spec += &format!(":near={}", self.near_levels);
        }
        spec
    }

    /// Parses `dacrt[:split=median|rdh][:scheme=seven|binary][:sched=concurrent|waves][:sort=C][:rays=N][:tris=N][:near=N]`
    /// (`C_SORT` against `C_INTERS = 1`, and the direct-intersection
    /// minimums); `dacrt-rdh` is `dacrt:split=rdh`.
    pub fn parse(spec: &str) -> Result<Self, String> {
        let spec = spec.trim();
        let (mut config, params) = if let Some(rest) = spec.strip_prefix("dacrt-rdh") {
            (Self::RDH, rest)
        } else if let Some(rest) = spec.strip_prefix("dacrt") {
            (Self::MEDIAN, rest)
        } else {
            return Err(format!("`{spec}` is not a dacrt spec"));
        };
        if !(params.is_empty() || params.starts_with(':')) {
            return Err(format!("`{spec}` is not a dacrt spec"));
        }
        for param in params.split(':').filter(|p| !p.is_empty()) {
            let (key, value) = param
                .split_once('=')
                .ok_or_else(|| format!("dacrt parameter `{param}` needs a value (key=value)"))?;
            let count = |max: usize| {
                value
                    .parse::<usize>()
                    .ok()
                    .filter(|n| (1..=max).contains(n))
                    .ok_or_else(|| format!("dacrt `{key}` is a count in 1..={max}, not `{value}`"))
            };
            match key {
                "split" => config.split = value.parse()?,
                "scheme" => {
                    config.scheme = match value {
                        "seven" => DacrtScheme::Seven,
                        "binary" => DacrtScheme::Binary,
                        other => {
                            return Err(format!(
                                "dacrt `scheme` is seven or binary, not `{other}`"
                            ));
                        }
                    }
                }
                "sched" => {
                    config.schedule = match value {
                        "concurrent" => DacrtSchedule::Concurrent,
                        "waves" => DacrtSchedule::Waves,
                        other => {
                            return Err(format!(
                                "dacrt `sched` is concurrent or waves, not `{other}`"
                            ));
                        }
                    }
                }
                "sort" => {
                    config.c_sort = value
                        .parse::<f32>()
                        .ok()
                        .filter(|c| c.is_finite() && *c >= 0.0)
                        .ok_or_else(|| format!("dacrt `sort` is a cost >= 0, not `{value}`"))?;
                }
                "rays" => config.min_rays = count(1 << 20)?,
                "near" => {
                    config.near_levels = value
                        .parse::<u32>()
                        .ok()
                        .filter(|n| *n <= 64)
                        .ok_or_else(|| {
                            format!("dacrt `near` is a level count in 0..=64, not `{value}`")
                        })?;
                }
                "tris" => config.min_tris = count(1 << 20)?,
                other => {
                    return Err(format!(
                        "dacrt has no parameter `{other}`; it takes split=median|rdh, scheme=seven|binary, sched=concurrent|waves, sort=C, rays=N, tris=N, near=N"
                    ));
                }
            }
        }
        Ok(config)
    }

    /// Whether a task of this size intersects directly (Eq. 2 and the
    /// minimum sizes).
    pub fn is_direct(&self, rays: usize, tris: usize) -> bool {
        let (r, t) = (rays as f64, tris as f64);
        rays < self.min_rays
            || tris < self.min_tris
            || r * t * f64::from(self.c_inters) < (r + t) * f64::from(self.c_sort)
    }
}

impl Default for DacrtConfig {
    fn default() -> Self {
        Self::MEDIAN
    }
}

/// What one batch cost.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DacrtStats {
    /// Tasks run, subdivided or direct.
    pub tasks: u64,
    /// Tasks that intersected directly.
    pub direct_tasks: u64,
    /// Ray–triangle tests made.
    pub pair_tests: u64,
    /// Deepest task (root at 0).
    pub max_depth: u32,
    /// Tasks on the longest chain of the children's dependencies under the
    /// configured [`DacrtSchedule`]: the tasks that run one after another
    /// however many processors there are. With the paper's waves (§5.3: a
    /// child waits for the children that share its rays or triangles) it
    /// grows with the tree; with concurrent children it is the depth plus
    /// one; the binary scheme's children are one chain.
    pub critical_path: u64,
    /// Rays and triangles the subdivided tasks partitioned (each counted
    /// once per task): the index words one out-of-place copy of every
    /// subdivided task's ranges takes.
    pub items: u64,
    /// Wall time of the batch.
    pub ms: f64,
}

impl DacrtStats {
    fn add(&mut self, other: &DacrtStats) {
        self.tasks += other.tasks;
        self.direct_tasks += other.direct_tasks;
        self.pair_tests += other.pair_tests;
        self.items += other.items;
        self.max_depth = self.max_depth.max(other.max_depth);
    }
}

/// The triangles, ready to trace batches of rays by DACRT; see the module
/// docs.
#[derive(Clone, Debug)]
pub struct Dacrt {
    triangles: Vec<Triangle>,
    config: DacrtConfig,
    stats: AccelStats,
}

impl Dacrt {
    /// Keeps a copy of `triangles`; nothing else is built.
    pub fn new(triangles: &[Triangle], config: DacrtConfig) -> Self {
        let start = Instant::now();
        let triangles = triangles.to_vec();
        let stats = AccelStats {
            name: split_name(config.split),
            build_ms: start.elapsed().as_secs_f64() * 1e3,
            bytes: std::mem::size_of_val(triangles.as_slice()),
            prims: triangles.len(),
            ..AccelStats::default()
        };
        Self {
            triangles,
            config,
            stats,
        }
    }

    pub fn config(&self) -> &DacrtConfig {
        &self.config
    }

    pub fn triangles(&self) -> &[Triangle] {
        &self.triangles
    }

    /// The closest hit of every ray into `hits` (same length).
    ///
    /// # Panics
    /// If the lengths differ.
    pub fn closest_hits(&self, rays: &[Ray], hits: &mut [Option<Hit>]) -> DacrtStats {
        assert_eq!(rays.len(), hits.len(), "one hit slot per ray");
        let start = Instant::now();
        let mut stats = task::trace(&self.triangles, rays, &self.config, false, |id, hit| {
            hits[id] = hit;
        });
        stats.ms = start.elapsed().as_secs_f64() * 1e3;
        stats
    }

    /// Whether each ray has a hit in `(tmin, tmax)`, into `occluded`.
    ///
    /// # Panics
    /// If the lengths differ.
    pub fn any_hits(&self, rays: &[Ray], occluded: &mut [bool]) -> DacrtStats {
        assert_eq!(rays.len(), occluded.len(), "one result slot per ray");
        let start = Instant::now();
        let mut stats = task::trace(&self.triangles, rays, &self.config, true, |id, hit| {
            occluded[id] = hit.is_some();
        });
        stats.ms = start.elapsed().as_secs_f64() * 1e3;
        stats
    }
}

impl Accel for Dacrt {
    fn intersect(&self, ray: &Ray) -> Option<Hit> {
        let mut hit = [None];
        self.closest_hits(std::slice::from_ref(ray), &mut hit);
        hit[0]
    }

    fn occluded(&self, ray: &Ray) -> bool {
        let mut out = [false];
        self.any_hits(std::slice::from_ref(ray), &mut out);
        out[0]
    }

    fn intersect_batch(&self, rays: &[Ray], hits: &mut [Option<Hit>]) {
        self.closest_hits(rays, hits);
    }

    fn occluded_batch(&self, rays: &[Ray], out: &mut [bool]) {
        self.any_hits(rays, out);
    }

    fn prefers_batches(&self) -> bool {
        true
    }

    fn stats(&self) -> &AccelStats {
        &self.stats
    }

    fn name(&self) -> &'static str {
        split_name(self.config.split)
    }
}

/// The name a DACRT tracer reports (summaries, bench rows): `dacrt`, or
/// `dacrt:split=rdh` for the ray distribution heuristic.
fn split_name(split: DacrtSplit) -> &'static str {
    match split {
        DacrtSplit::Median => "dacrt",
        DacrtSplit::Rdh => "dacrt:split=rdh",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BruteForce;
    use caustic_geom::{Pcg32, Vec3};

    fn soup(rng: &mut Pcg32, n: usize) -> Vec<Triangle> {
        let mut point = |s: f32| Vec3::new(rng.next_f32(), rng.next_f32(), rng.next_f32()) * s;
        (0..n)
            .map(|i| {
                let c = point(10.0);
                // Small, large and flat (degenerate) triangles mixed.
                let size = [0.2, 3.0, 0.0][i % 3];
                let a = c + point(size);
                let b = if size == 0.0 { c } else { c + point(size) };
                Triangle::new(c, a, b)
            })
            .collect()
    }

    fn rays(rng: &mut Pcg32, n: usize) -> Vec<Ray> {
        (0..n)
            .map(|i| {
                let o = Vec3::new(rng.next_f32(), rng.next_f32(), rng.next_f32()) * 12.0 - 1.0;
                let d = Vec3::new(
                    rng.next_f32() - 0.5,
                    rng.next_f32() - 0.5,
                    rng.next_f32() - 0.5,
                );
                // Every third ray a short segment, as collision rays are.
                let tmax = if i % 3 == 0 { 0.5 } else { f32::INFINITY };
                Ray::segment(o, d, 0.0, tmax)
            })
            .collect()
    }

    #[test]
    fn batches_equal_brute_force_with_both_splits() {
        let mut rng = Pcg32::new(7, 1);
        let tris = soup(&mut rng, 3000);
        let rays = rays(&mut rng, 5000);
        let brute = BruteForce::new(&tris);
        let want: Vec<Option<Hit>> = rays.iter().map(|r| brute.intersect(r)).collect();
        let want_any: Vec<bool> = want.iter().map(Option::is_some).collect();
        let binary = DacrtConfig {
            scheme: DacrtScheme::Binary,
            ..DacrtConfig::RDH
        };
        for config in [DacrtConfig::MEDIAN, DacrtConfig::RDH, binary] {
            let dacrt = Dacrt::new(&tris, config);
            let mut hits = vec![None; rays.len()];
            let stats = dacrt.closest_hits(&rays, &mut hits);
            assert_eq!(hits, want, "{config:?}");
            assert!(stats.tasks > 1 && stats.direct_tasks > 0, "{stats:?}");
            // Fewer tests than brute force's rays x triangles.
            assert!(
                stats.pair_tests < (rays.len() * tris.len() / 4) as u64,
                "{stats:?}"
            );
            let mut any = vec![false; rays.len()];
            dacrt.any_hits(&rays, &mut any);
            assert_eq!(any, want_any, "{config:?}");
        }
    }

    #[test]
    fn degenerate_inputs_give_the_contract_answers() {
        let tri = Triangle::new(Vec3::ZERO, Vec3::X, Vec3::Y);
        let ray = Ray::new(Vec3::new(0.2, 0.2, 1.0), -Vec3::Z);
        // No triangles, no rays, untraceable rays, a non-finite triangle.
        let empty = Dacrt::new(&[], DacrtConfig::MEDIAN);
        assert_eq!(empty.intersect(&ray), None);
        let dacrt = Dacrt::new(&[tri], DacrtConfig::RDH);
        dacrt.closest_hits(&[], &mut []);
        assert_eq!(dacrt.intersect(&ray).map(|h| h.prim), Some(0));
        let nan = Ray::new(Vec3::splat(f32::NAN), -Vec3::Z);
        assert_eq!(dacrt.intersect(&nan), None);
        assert!(!dacrt.occluded(&Ray::new(Vec3::ZERO, Vec3::ZERO)));
        let bad = Triangle::new(Vec3::splat(f32::INFINITY), Vec3::X, Vec3::Y);
        let dacrt = Dacrt::new(&[bad, tri], DacrtConfig::MEDIAN);
        assert_eq!(dacrt.intersect(&ray).map(|h| h.prim), Some(1));
        // Duplicated triangles: the lowest id wins the exact tie, in a
        // batch large enough to subdivide.
        let tris = vec![tri; 64];
        let rays = vec![ray; 256];
        let mut hits = vec![None; rays.len()];
        let stats = Dacrt::new(&tris, DacrtConfig::MEDIAN).closest_hits(&rays, &mut hits);
        assert!(
            hits.iter().all(|h| h.map(|h| h.prim) == Some(0)),
            "{stats:?}"
        );
    }

    #[test]
    fn the_direct_rule_is_the_papers() {
        let c = DacrtConfig::MEDIAN;
        assert!(c.is_direct(31, 1000) && c.is_direct(1000, 15));
        // 100 x 100 = 10^4 tests against 200 x 80 = 16000 sorts: direct.
        assert!(c.is_direct(100, 100));
        assert!(!c.is_direct(1000, 1000));
        assert_eq!(DacrtConfig::RDH.spec(), "dacrt:split=rdh");
        for spec in [
            "dacrt",
            "dacrt:split=rdh",
            "dacrt:sort=2:rays=8:tris=2",
            "dacrt:scheme=binary:sort=1",
            "dacrt:split=rdh:sched=waves:rays=4",
            "dacrt:near=3",
        ] {
            assert_eq!(DacrtConfig::parse(spec).unwrap().spec(), spec);
        }
        assert_eq!(DacrtConfig::parse("dacrt-rdh"), Ok(DacrtConfig::RDH));
        assert_eq!(
            DacrtConfig::parse("dacrt:sched=concurrent"),
            Ok(DacrtConfig::MEDIAN)
        );
        for bad in [
            "dacrt:split=sah",
            "dacrt:sort=-1",
            "dacrt:rays=0",
            "dacrt:leaf=4",
            "dacrt:sched=fast",
            "dacrt:near=65",
            "dacrtx",
        ] {
            assert!(DacrtConfig::parse(bad).is_err(), "{bad}");
        }
    }
}
