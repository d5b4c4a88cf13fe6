//! The compressed 8-wide BVH on the GPU against the binary traversal.
//!
//! - Build: the tree collapsed on the device from a [`DeviceBvh`] must pass
//!   [`CompressedBvh::validate`] (every node and triangle reachable exactly
//!   once, quantised boxes containing their triangles, depth within the
//!   traversal's stack) and hold every triangle bit for bit under its
//!   scene id.
//! - Traversal: every closest hit (`t`, triangle, `u`, `v`, as bits) and
//!   every any-hit answer of [`CompressedTracer`], with each kernel, must
//!   equal the binary [`Tracer`]'s on the same tree (which `gpu_trace.rs`
//!   holds to the CPU's): on random soups (degenerate, huge, flat,
//!   duplicated and non-finite triangles, shared edges) with random and
//!   adversarial rays, over binary trees with leaves of one triangle, of
//!   the SAH's choice and of up to 24, and on every standard scene with the
//!   ray protocol's primary (tile and buffer order), AO and diffuse rays at
//!   1920x1080, generated on the device.
//!
//! These need a CUDA GPU: run with `--include-ignored --test-threads=1` on
//! the GPU machine (`scripts/gpu-run.sh`). Each random test prints its
//! seed; set `CAUSTIC_TEST_SEED` to replay it.

#[path = "common/gpu_scenes.rs"]
mod scenes;

#[path = "common/device.rs"]
mod device;

#[path = "common/soups.rs"]
mod soups;

use caustic_accel::TriangleBvh;
use caustic_accel::bvh::build::{BinnedSahBuilder, BinnedSahConfig, LbvhBuilder, LbvhConfig};
use caustic_accel::bvh::traverse_cuda::{GpuHit, GpuRay, Tracer};
use caustic_accel::bvh::triangle_bvh_cuda::DeviceBvh;
use caustic_accel::bvh::wide::compressed::{CompressedBvh, CompressedShape};
use caustic_accel::bvh::wide::compressed_cuda::{CompressedWideBvh, MAX_WIDE_DEPTH};
use caustic_accel::bvh::wide::traverse_compressed_cuda::{CompressedTracer, TraversalKernel};
use caustic_accel::protocol_cuda as rays;
use caustic_geom::protocol;
use caustic_geom::{Ray, Triangle, Vec3};
use caustic_gpu::DeviceBuffer;
use device::gpu;
use soups::{awkward_rays, awkward_soup, grid_soup};

const WIDTH: u32 = 1920;
const HEIGHT: u32 = 1080;

/// The binary tracer (the reference) and the compressed one with each kernel.
struct Tracers {
    binary: Tracer,
    wide: [(TraversalKernel, CompressedTracer); 3],
}

impl Tracers {
    fn new() -> Self {
        let wide = |kernel| {
            (
                kernel,
                CompressedTracer::with_kernel(gpu(), kernel).unwrap(),
            )
        };
        Tracers {
            binary: Tracer::new(gpu()).unwrap(),
            wide: [
                wide(TraversalKernel::Fast),
                wide(TraversalKernel::Eager),
                wide(TraversalKernel::Exact),
            ],
        }
    }
}

/// How a batch of rays is traced.
#[derive(Clone, Copy, PartialEq)]
enum Query {
    Closest,
    /// Closest hits of an image this wide, handed out in tiles.
    Image(u32),
    Any,
}

/// The results of one query as raw 32-bit words per ray (four for a hit,
/// one for occlusion), poisoned before the launch so that an unwritten
/// result differs.
fn binary_words(
    t: &mut Tracer,
    bvh: &DeviceBvh,
    rays: &DeviceBuffer<GpuRay>,
    q: Query,
) -> Vec<u32> {
    match q {
        Query::Any => {
            let mut out = DeviceBuffer::uninit(gpu(), "test occlusion", rays.len()).unwrap();
            out.poison().unwrap();
            t.occluded(bvh, rays, &mut out).unwrap();
            out.download().unwrap()
        }
        _ => {
            let mut hits = DeviceBuffer::<GpuHit>::uninit(gpu(), "test hits", rays.len()).unwrap();
            hits.poison().unwrap();
            match q {
                Query::Image(w) => t.intersect_image(bvh, rays, w, &mut hits).unwrap(),
                _ => t.intersect(bvh, rays, &mut hits).unwrap(),
            }
            bytemuck::cast_slice(&hits.download().unwrap()).to_vec()
        }
    }
}

fn wide_words(
    t: &mut CompressedTracer,
    bvh: &CompressedWideBvh,
    rays: &DeviceBuffer<GpuRay>,
    q: Query,
) -> Vec<u32> {
    match q {
        Query::Any => {
            let mut out = DeviceBuffer::uninit(gpu(), "test occlusion", rays.len()).unwrap();
            out.poison().unwrap();
            t.occluded(bvh, rays, &mut out).unwrap();
            out.download().unwrap()
        }
        _ => {
            let mut hits = DeviceBuffer::<GpuHit>::uninit(gpu(), "test hits", rays.len()).unwrap();
            hits.poison().unwrap();
            match q {
                Query::Image(w) => t.intersect_image(bvh, rays, w, &mut hits).unwrap(),
                _ => t.intersect(bvh, rays, &mut hits).unwrap(),
            }
            bytemuck::cast_slice(&hits.download().unwrap()).to_vec()
        }
    }
}

/// Rays whose results differ, as a summary line with the first few spelled
/// out; `None` when all are identical. Exact ties (same `t`, another
/// triangle) are counted apart, though the tie rule makes them equal too.
fn differences(what: &str, q: Query, rays: &[GpuRay], want: &[u32], got: &[u32]) -> Option<String> {
    let per = if q == Query::Any { 1 } else { 4 };
    let (mut ties, mut others, mut details) = (0, 0, Vec::new());
    for (i, (w, g)) in want.chunks(per).zip(got.chunks(per)).enumerate() {
        if w == g {
            continue;
        }
        let tie = per == 4 && w[0] == g[0] && w[1] != g[1] && g[1] != GpuHit::NO_HIT;
        if tie {
            ties += 1;
        } else {
            others += 1;
        }
        if details.len() < 6 {
            details.push(format!(
                "ray {i} {:?}: binary {w:x?}, wide {g:x?}",
                rays[i].to_ray()
            ));
        }
    }
    (ties + others > 0).then(|| {
        let mut s = format!(
            "{what}: {} of {} rays differ ({ties} exact ties, {others} others)",
            ties + others,
            rays.len()
        );
        for d in details {
            s += &format!("\n    {d}");
        }
        s
    })
}

/// Compresses `bvh`, validates the download against `accel`'s triangles
/// and returns the tree with its shape.
fn compress(
    accel: &TriangleBvh,
    bvh: &DeviceBvh,
) -> Result<(CompressedWideBvh, CompressedShape), String> {
    let tree = CompressedWideBvh::build(bvh).map_err(|e| e.to_string())?;
    let host: CompressedBvh = tree.download().map_err(|e| e.to_string())?;
    let shape = host.validate(MAX_WIDE_DEPTH)?;
    // Every triangle under its scene id, bit for bit.
    let by_id: Vec<Option<&Triangle>> = {
        let mut v = vec![None; accel.leaf_triangles().len()];
        for (tri, &id) in accel.leaf_triangles().iter().zip(&accel.bvh().prim_indices) {
            v[id as usize] = Some(tri);
        }
        v
    };
    for (k, (tri, &id)) in host.triangles.iter().zip(&host.prims).enumerate() {
        let want = by_id[id as usize].ok_or(format!("triangle {k}: unknown id {id}"))?;
        if bytemuck::bytes_of(tri) != bytemuck::bytes_of(want) {
            return Err(format!("triangle {k} (id {id}) differs from the input"));
        }
    }
    let stats = tree.stats();
    if (stats.nodes, stats.leaves) != (shape.nodes, shape.leaves) {
        return Err(format!(
            "stats {stats:?} disagree with the download {shape:?}"
        ));
    }
    Ok((tree, shape))
}

/// Traces `rays` with every tracer and reports each difference from the
/// binary traversal.
fn compare_all(
    tracers: &mut Tracers,
    what: &str,
    bvh: &DeviceBvh,
    tree: &CompressedWideBvh,
    rays: &DeviceBuffer<GpuRay>,
    queries: &[Query],
    failures: &mut Vec<String>,
) {
    let host_rays = rays.download().unwrap();
    for &q in queries {
        let want = binary_words(&mut tracers.binary, bvh, rays, q);
        for (kernel, tracer) in &mut tracers.wide {
            let got = wide_words(tracer, tree, rays, q);
            let label = format!("{what}, {} ({kernel:?})", query_name(q));
            match differences(&label, q, &host_rays, &want, &got) {
                Some(line) => {
                    eprintln!("{line}");
                    failures.push(line);
                }
                None => eprintln!("{label}: {} rays, identical", host_rays.len()),
            }
        }
    }
}

fn query_name(q: Query) -> &'static str {
    match q {
        Query::Closest => "closest",
        Query::Image(_) => "closest in tiles",
        Query::Any => "any",
    }
}

fn upload_rays(rays: &[Ray]) -> DeviceBuffer<GpuRay> {
    let words: Vec<GpuRay> = rays.iter().map(GpuRay::from).collect();
    DeviceBuffer::from_slice(gpu(), "test rays", &words).unwrap()
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn random_soups_match_the_binary_traversal() {
    let mut rng = device::seeded_rng("random_soups_match_the_binary_traversal", 0x31de);
    let mut tracers = Tracers::new();
    let mut failures = Vec::new();
    // Leaves of one triangle (Karras's LBVH), of the SAH's choosing, and
    // long ones that the collapse must open into runs of three.
    let karras = LbvhBuilder::new(LbvhConfig::KARRAS);
    let binned = BinnedSahBuilder::default();
    let long = BinnedSahBuilder::new(BinnedSahConfig {
        min_leaf_size: 10,
        max_leaf_size: 24,
        ..BinnedSahConfig::DEFAULT
    });
    let builders: [(&str, &dyn caustic_accel::bvh::build::Bvh2Builder); 3] = [
        ("lbvh leaves of 1", &karras),
        ("bvh-binned", &binned),
        ("leaves of 10-24", &long),
    ];
    for (name, tris) in [
        ("awkward soup, 1 tri", awkward_soup(&mut rng, 1)),
        ("awkward soup, 4 tris", awkward_soup(&mut rng, 4)),
        ("awkward soup, 37 tris", awkward_soup(&mut rng, 37)),
        ("awkward soup, 20k tris", awkward_soup(&mut rng, 20_000)),
        ("awkward soup, 200k tris", awkward_soup(&mut rng, 200_000)),
        ("height field, 2x64x64 tris", grid_soup(&mut rng, 64)),
        ("height field, 2x512x512 tris", grid_soup(&mut rng, 512)),
    ] {
        let rays = upload_rays(&awkward_rays(&mut rng, &tris, 200_000));
        for (builder_name, builder) in builders {
            let what = format!("{name}, {builder_name}");
            let accel = TriangleBvh::build_with(&tris, builder);
            let bvh = DeviceBvh::upload(gpu(), &accel).unwrap();
            let (tree, shape) = match compress(&accel, &bvh) {
                Ok(built) => built,
                Err(e) => {
                    failures.push(format!("{what}: {e}"));
                    continue;
                }
            };
            eprintln!("{what}: {shape:?}");
            let queries = [Query::Closest, Query::Any];
            compare_all(
                &mut tracers,
                &what,
                &bvh,
                &tree,
                &rays,
                &queries,
                &mut failures,
            );
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn empty_and_single_triangle_trees() {
    let mut tracers = Tracers::new();
    let rays = upload_rays(&[
        Ray::new(Vec3::new(0.2, 0.2, -1.0), Vec3::Z),
        Ray::new(Vec3::new(0.9, 0.9, -1.0), Vec3::Z),
    ]);
    let empty = DeviceBvh::upload(gpu(), &TriangleBvh::build(&[])).unwrap();
    let tree = CompressedWideBvh::build(&empty).unwrap();
    assert_eq!(tree.stats().nodes, 0);
    assert_eq!(
        tree.download().unwrap().validate(0).unwrap(),
        CompressedShape::default()
    );
    for (_, tracer) in &mut tracers.wide {
        let words = wide_words(tracer, &tree, &rays, Query::Closest);
        assert_eq!(
            words,
            bytemuck::cast_slice::<GpuHit, u32>(&[GpuHit::MISS; 2])
        );
        assert_eq!(wide_words(tracer, &tree, &rays, Query::Any), [0, 0]);
    }
    let accel = TriangleBvh::build(&[Triangle::new(Vec3::ZERO, Vec3::X, Vec3::Y)]);
    let bvh = DeviceBvh::upload(gpu(), &accel).unwrap();
    let (tree, shape) = compress(&accel, &bvh).unwrap();
    assert_eq!((shape.nodes, shape.leaves, shape.triangles), (1, 1, 1));
    let (_, fast) = &mut tracers.wide[0];
    let words = wide_words(fast, &tree, &rays, Query::Closest);
    assert_eq!((f32::from_bits(words[0]), words[1]), (1.0, 0));
    assert_eq!(
        &words[4..8],
        bytemuck::cast_slice::<GpuHit, u32>(&[GpuHit::MISS])
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn standard_scenes_match_the_binary_traversal() {
    let mut tracers = Tracers::new();
    let mut failures = Vec::new();
    let mut checked = 0;
    for scene in scenes::SCENES {
        let Some(loaded) = scene.load() else { continue };
        checked += 1;
        let accel = TriangleBvh::build(&loaded.triangles);
        let bvh = DeviceBvh::upload(gpu(), &accel).unwrap();
        let (tree, shape) = match compress(&accel, &bvh) {
            Ok(built) => built,
            Err(e) => {
                failures.push(format!("{}: {e}", loaded.name));
                continue;
            }
        };
        eprintln!(
            "{}: {} triangles, {:?}, {shape:?}",
            loaded.name,
            loaded.triangles.len(),
            tree.stats()
        );
        // The protocol's rays, generated on the device as the benchmark does.
        let camera = scenes::gpu_camera(&loaded.camera);
        let primary = rays::primary_rays(gpu(), &camera, WIDTH, HEIGHT).unwrap();
        let name = &loaded.name;
        let queries = [Query::Image(WIDTH), Query::Closest];
        compare_all(
            &mut tracers,
            &format!("{name} primary"),
            &bvh,
            &tree,
            &primary,
            &queries,
            &mut failures,
        );
        let mut hits =
            DeviceBuffer::<GpuHit>::uninit(gpu(), "primary hits", primary.len()).unwrap();
        tracers.binary.intersect(&bvh, &primary, &mut hits).unwrap();
        let diag = protocol::scene_diagonal(&loaded.triangles);
        let secondary = rays::secondary_rays(&bvh, &primary, &hits, diag).unwrap();
        compare_all(
            &mut tracers,
            &format!("{name} AO"),
            &bvh,
            &tree,
            &secondary.ao,
            &[Query::Any],
            &mut failures,
        );
        compare_all(
            &mut tracers,
            &format!("{name} diffuse"),
            &bvh,
            &tree,
            &secondary.diffuse,
            &[Query::Closest],
            &mut failures,
        );
    }
    eprintln!(
        "{checked} of {} standard scenes checked",
        scenes::SCENES.len()
    );
    if std::env::var_os("CAUSTIC_REQUIRE_SCENES").is_some() {
        assert_eq!(checked, scenes::SCENES.len(), "scenes are missing");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
