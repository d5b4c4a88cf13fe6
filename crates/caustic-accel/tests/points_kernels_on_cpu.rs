//! The hash grid's warp-per-query kNN (`src/points/hash_grid.cu`'s
//! `points_knn_hashgrid` over `points.cuh`'s `WarpBest`), the shell
//! search of the photon estimates (`grid_knn_rings`) and their tiled
//! search (`warp_tile_knn`, 32 queries a warp) run on the CPU:
//! the kernels compiled unchanged by the host C++ compiler over the fiber
//! shim (`tests/cpu_emulation/cuda_fibers.h`, every CUDA thread a fiber,
//! shuffles and ballots included), the grid built by the build kernels
//! (`points_kernels.cpp`). Every answer equals the exact reference
//! (`points::reference::knn`) bit for bit: linear and Teschner-hashed
//! grids (a tiny table, so buckets collide), queries in the order given
//! and permuted, ties between duplicated points, lists that overflow the
//! warp's buffer and are cut (the farther cells then skipped), queries off
//! the cloud and non-finite ones.
//!
//! Needs a C++17 compiler (`CXX`, else `c++`) and an x86-64 host; without
//! them it says so and skips.

#[path = "common/host_harness.rs"]
mod host_harness;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use rayon::prelude::*;

use caustic_accel::points::reference;
use caustic_geom::{Pcg32, Vec3};

fn harness() -> Option<&'static Path> {
    static HARNESS: OnceLock<Option<PathBuf>> = OnceLock::new();
    host_harness::compile_fibers_once(&HARNESS, "points-kernels", "points_kernels.cpp")
}

/// A grid over `points` with cells of `cell` (linear, or Teschner over
/// 2^`table_bits` buckets), as `GridGeometry` lays it out.
struct Grid {
    origin: [f32; 3],
    cell: f32,
    dims: [u32; 3],
    table_bits: u32,
}

impl Grid {
    fn new(points: &[Vec3], cell: f32, table_bits: u32) -> Self {
        let (mut lo, mut hi) = ([f32::INFINITY; 3], [f32::NEG_INFINITY; 3]);
        for p in points.iter().filter(|p| p.is_finite()) {
            for (a, v) in p.to_array().into_iter().enumerate() {
                lo[a] = lo[a].min(v);
                hi[a] = hi[a].max(v);
            }
        }
        Self {
            origin: lo.map(|l| l - cell),
            cell,
            dims: [0, 1, 2].map(|a| ((hi[a] - lo[a]) / cell).floor() as u32 + 3),
            table_bits,
        }
    }
}

/// Each query's `(index, dist2 bits)` list.
type Rows = Vec<Vec<(u32, u32)>>;

struct Answers {
    knn: Rows,
    rings: Rows,
    /// Where the shell search answered (else its list is partial).
    answered: Vec<bool>,
    tiles: Rows,
    /// Where the tiled search answered (else the caller searches).
    tile_answered: Vec<bool>,
}

/// The tiled search's block: `whole` (cells of at least the radius: the
/// block holds every query's neighbours) and the margin of cells.
#[derive(Clone, Copy)]
struct Tile {
    whole: bool,
    margin: u32,
}

fn flags(bytes: &[u8]) -> Vec<bool> {
    bytes
        .chunks_exact(4)
        .map(|c| match u32::from_le_bytes(c.try_into().unwrap()) {
            0 => false,
            1 => true,
            other => panic!("answered flag {other}"),
        })
        .collect()
}

fn rows(bytes: &[u8], m: usize, k: usize) -> (Rows, &[u8]) {
    let word = |i: usize| u32::from_le_bytes(bytes[4 * i..4 * i + 4].try_into().unwrap());
    let rows = (0..m)
        .map(|q| {
            let count = word(2 * m * k + q) as usize;
            assert!(count <= k, "count {count} of query {q}");
            (0..k)
                .map(|j| (word(q * k + j), word(m * k + q * k + j)))
                .enumerate()
                .inspect(|&(j, (i, d))| {
                    if j >= count {
                        assert_eq!((i, d), (u32::MAX, f32::INFINITY.to_bits()), "padding");
                    }
                })
                .take(count)
                .map(|(_, row)| row)
                .collect()
        })
        .collect();
    (rows, &bytes[4 * (2 * m * k + m)..])
}

fn emulate(
    exe: &Path,
    points: &[Vec3],
    queries: &[Vec3],
    order: Option<&[u32]>,
    grid: &Grid,
    (k, max_radius, max_shells): (usize, f32, u32),
    tile: Tile,
) -> Answers {
    let mut input = Vec::new();
    let [dx, dy, dz] = grid.dims;
    let header = [
        points.len() as u32,
        queries.len() as u32,
        k as u32,
        dx,
        dy,
        dz,
        grid.table_bits,
        max_shells,
        u32::from(order.is_some()),
        u32::from(tile.whole),
        tile.margin,
    ];
    input.extend(header.iter().flat_map(|v| v.to_le_bytes()));
    let [ox, oy, oz] = grid.origin;
    let floats = [ox, oy, oz, 1.0 / grid.cell, max_radius];
    input.extend(floats.iter().flat_map(|v| v.to_le_bytes()));
    for p in points.iter().chain(queries) {
        input.extend(p.to_array().iter().flat_map(|v| v.to_le_bytes()));
    }
    input.extend(order.unwrap_or(&[]).iter().flat_map(|v| v.to_le_bytes()));
    let out = host_harness::run(exe, "points-kernels", &input);
    let m = queries.len();
    let (knn, rest) = rows(&out, m, k);
    let (rings, rest) = rows(rest, m, k);
    let answered = flags(&rest[..4 * m]);
    let (tiles, rest) = rows(&rest[4 * m..], m, k);
    assert_eq!(rest.len(), 4 * m);
    Answers {
        knn,
        rings,
        answered,
        tiles,
        tile_answered: flags(rest),
    }
}

fn exact(points: &[Vec3], q: Vec3, k: usize, max_radius: f32) -> Vec<(u32, u32)> {
    reference::knn(points, q, k, max_radius)
        .iter()
        .map(|n| (n.index, n.dist2.to_bits()))
        .collect()
}

/// Queries near points of the cloud, uniform in a box around it, and a
/// few that are not finite.
fn queries(points: &[Vec3], m: usize, rng: &mut Pcg32) -> Vec<Vec3> {
    let mut qs: Vec<Vec3> = (0..m)
        .map(|i| {
            let jitter = Vec3::new(rng.next_f32(), rng.next_f32(), rng.next_f32()) - 0.5;
            if i % 3 == 0 {
                jitter * 1.6 + 0.5
            } else {
                points[rng.next_u32() as usize % points.len()] + jitter * 0.05
            }
        })
        .collect();
    qs.push(Vec3::new(f32::NAN, 0.5, 0.5));
    qs.push(Vec3::new(0.5, f32::INFINITY, 0.5));
    qs
}

/// `n` points uniform in the unit cube.
fn uniform_cloud(rng: &mut Pcg32, n: usize) -> Vec<Vec3> {
    (0..n)
        .map(|_| Vec3::new(rng.next_f32(), rng.next_f32(), rng.next_f32()))
        .collect()
}

/// 40 positions, each 50 times.
fn duplicated_cloud() -> Vec<Vec3> {
    (0..2000)
        .map(|i| {
            let j = (i % 40) as f32;
            Vec3::new(0.3 + 0.01 * (j % 4.0), 0.5 + 0.013 * (j / 4.0).floor(), 0.4)
        })
        .collect()
}

#[test]
fn warp_knn_equals_the_reference() {
    let Some(exe) = harness() else { return };
    let mut rng = Pcg32::new(0x51, 5);
    let uniform = uniform_cloud(&mut rng, 3000);
    // Ties that only the index breaks, and more candidates than the warp's
    // list holds (it is cut).
    let duplicated = duplicated_cloud();
    // Dense enough that about 400 points lie within the radius: the list
    // is cut, and the cells beyond its new bound are skipped.
    let dense = uniform_cloud(&mut rng, 12_000);
    for (name, points, radius, k) in [
        ("uniform", &uniform, 0.12f32, 16usize),
        ("dense", &dense, 0.2, 16),
        ("uniform, k = 1", &uniform, 0.12, 1),
        ("duplicated", &duplicated, 0.2, 128),
        ("duplicated, k = 50", &duplicated, 0.05, 50),
    ] {
        let qs = queries(points, 200, &mut rng);
        let reversed: Vec<u32> = (0..qs.len() as u32).rev().collect();
        let cell = radius * (1.0 + 1e-3);
        for (grid, bits) in [
            (Grid::new(points, cell, 0), 0),
            (Grid::new(points, cell, 4), 4),
        ] {
            for order in [None, Some(&reversed[..])] {
                let tile = Tile {
                    whole: true,
                    margin: 1,
                };
                let got = emulate(exe, points, &qs, order, &grid, (k, radius, 3), tile);
                for (q, &p) in qs.iter().enumerate() {
                    let want = exact(points, p, k, radius);
                    assert_eq!(got.knn[q], want, "{name}, table bits {bits}, query {q}");
                    // Cells of the radius: the shells answer after two.
                    assert!(got.answered[q], "{name}: the shells gave up at query {q}");
                    assert_eq!(got.rings[q], want, "{name} shells, bits {bits}, query {q}");
                }
            }
        }
    }
}

#[test]
fn shell_search_equals_the_reference_for_small_cells() {
    let Some(exe) = harness() else { return };
    let mut rng = Pcg32::new(0x52, 9);
    // A dense blob beside a sparse spread: the shells end early in the
    // blob and give up in the sparse part (the estimates then fall back).
    let points: Vec<Vec3> = (0..4000)
        .map(|i| {
            let u = Vec3::new(rng.next_f32(), rng.next_f32(), rng.next_f32());
            if i % 4 == 0 { u } else { u * 0.1 + 0.45 }
        })
        .collect();
    let qs = queries(&points, 300, &mut rng);
    let radius = 0.3;
    for bits in [0, 6] {
        let grid = Grid::new(&points, 0.02, bits);
        let tile = Tile {
            whole: false,
            margin: 1,
        };
        let got = emulate(exe, &points, &qs, None, &grid, (24, radius, 3), tile);
        let mut answered = 0;
        for (q, &p) in qs.iter().enumerate() {
            if got.answered[q] {
                answered += 1;
                assert_eq!(
                    got.rings[q],
                    exact(&points, p, 24, radius),
                    "bits {bits}, query {q}"
                );
            }
        }
        assert!(
            answered > qs.len() / 2,
            "bits {bits}: only {answered} answered"
        );
        assert!(answered < qs.len(), "bits {bits}: every query answered");
    }
}

/// `qs` sorted by the Morton code of their cells of `cell` (non-finite
/// ones last): neighbouring queries in neighbouring tiles.
fn morton_sorted(qs: &[Vec3], cell: f32) -> Vec<Vec3> {
    let key = |q: &Vec3| {
        if !q.is_finite() {
            return u32::MAX;
        }
        let c = q
            .to_array()
            .map(|v| ((v + 1.0) / cell).clamp(0.0, 1023.0) as u32);
        caustic_geom::morton::encode_30(c[0], c[1], c[2])
    };
    let mut sorted = qs.to_vec();
    sorted.sort_by_key(key);
    sorted
}

/// The tiled search (`warp_tile_knn`): every query it answers equals the
/// reference, with blocks that hold every neighbour (cells of the radius)
/// and with blocks of small cells that cover only part of the radius (the
/// lanes whose k-th lies beyond their covered distance are left to the
/// caller); linear and Teschner-hashed grids, ties between duplicated
/// points, dense clouds whose k-th bins overflow, blocks of fewer than k
/// points (no counting pass), queries in Morton order
/// (tiles of neighbours) and as drawn (tiles spread over the grid).
#[test]
fn tiles_equal_the_reference() {
    let Some(exe) = harness() else { return };
    let mut rng = Pcg32::new(0x53, 11);
    let uniform = uniform_cloud(&mut rng, 3000);
    let sparse = uniform_cloud(&mut Pcg32::new(0x54, 11), 300);
    let duplicated = duplicated_cloud();
    // A dense blob beside a sparse spread, and a plane (photons on a
    // surface).
    let blob: Vec<Vec3> = (0..6000)
        .map(|i| {
            let u = Vec3::new(rng.next_f32(), rng.next_f32(), rng.next_f32());
            if i % 4 == 0 { u } else { u * 0.1 + 0.45 }
        })
        .collect();
    let plane: Vec<Vec3> = (0..6000)
        .map(|_| Vec3::new(rng.next_f32(), rng.next_f32(), 0.5))
        .collect();
    let configs = [
        ("uniform", &uniform, 0.12f32, 0.12f32, 16usize, true, 1),
        ("uniform, k = 1", &uniform, 0.12, 0.12, 1, true, 1),
        // Blocks of fewer than k points (a sparse map): no counting pass.
        ("sparse", &sparse, 0.12, 0.12, 64, true, 1),
        ("duplicated", &duplicated, 0.05, 0.05, 50, true, 1),
        ("duplicated, k = 128", &duplicated, 0.2, 0.2, 128, true, 1),
        ("plane", &plane, 0.1, 0.1, 40, true, 1),
        ("plane, small cells", &plane, 0.3, 0.03, 40, false, 1),
        (
            "plane, small cells, margin 2",
            &plane,
            0.3,
            0.03,
            40,
            false,
            2,
        ),
        ("blob, small cells", &blob, 0.3, 0.02, 24, false, 1),
        (
            "plane, small cells, margin 3",
            &plane,
            0.3,
            0.03,
            40,
            false,
            3,
        ),
    ];
    // Every configuration's queries, drawn in order; then every grid and
    // order emulated side by side (each emulation is a process), and the
    // answers checked in order.
    let drawn: Vec<Vec<Vec3>> = configs
        .iter()
        .map(|&(_, points, ..)| queries(points, 1500, &mut rng))
        .collect();
    let sorted: Vec<Vec<Vec3>> = configs
        .iter()
        .zip(&drawn)
        .map(|(&(_, _, _, cell, ..), qs)| morton_sorted(qs, cell))
        .collect();
    // 2^6 buckets: many cells a bucket; 2^12: a few.
    let mut cases = Vec::new();
    for c in 0..configs.len() {
        for bits in [0, 6, 12] {
            cases.push((c, bits, "Morton", &sorted[c]));
            cases.push((c, bits, "drawn", &drawn[c]));
        }
    }
    let answers: Vec<Answers> = cases
        .par_iter()
        .map(|&(c, bits, _, qs)| {
            let (_, points, radius, cell, k, whole, margin) = configs[c];
            let grid = Grid::new(points, cell * (1.0 + 1e-3), bits);
            let tile = Tile { whole, margin };
            emulate(exe, points, qs, None, &grid, (k, radius, 3), tile)
        })
        .collect();
    for ((c, bits, order, qs), got) in cases.into_iter().zip(answers) {
        let (name, points, radius, _, k, ..) = configs[c];
        let mut answered = 0;
        for (q, &p) in qs.iter().enumerate() {
            if got.tile_answered[q] {
                answered += 1;
                assert_eq!(
                    got.tiles[q],
                    exact(points, p, k, radius),
                    "{name}, {order} order, bits {bits}, query {q}"
                );
            }
        }
        eprintln!(
            "{name}, {order} order, bits {bits}: {answered} of {} answered by tiles",
            qs.len()
        );
        // (The tiny hashed table puts about 50 points in every
        // bucket: most blocks exceed the tiles' point bound. Ties
        // of 50 duplicates overflow the k-th's bin; wide margins
        // make blocks of more than TILE_MAX_CELLS.)
        if order == "Morton" {
            let least = if bits == 6 { 1 } else { qs.len() / 8 };
            assert!(
                answered >= least,
                "{name}, bits {bits}: only {answered} answered"
            );
        }
    }
}
