//! The GPU grid's kernels run on the CPU: `src/grid/build.cu` and `dda.cu`,
//! compiled unchanged by the host C++ compiler over a small CUDA shim
//! (`tests/cpu_emulation/`, floating-point contraction off, so each
//! operation rounds once as the kernels' `_rn` intrinsics do) and run one
//! thread at a time, against the CPU grid:
//!
//! - every triangle goes into exactly the cells the CPU build puts it in
//!   (`for_each_covered_cell`, the body of the count and write passes), with
//!   box and with exact overlap;
//! - every ray's closest hit (bits) and any-hit answer from the DDA kernels,
//!   walking the CPU-built grid in the device layout, equal the CPU grid's.
//!
//! What this cannot see (warp shuffles, atomics, the primitives, the host
//! code) the GPU tests (`gpu_grid.rs`) check on the device; this catches a
//! wrong rounding or a mistranslated step of the walk without one. Needs a
//! C++17 compiler (`CXX`, else `c++`); without one it says so and skips.

#[path = "common/scenes.rs"]
mod scenes;

#[path = "common/soups.rs"]
mod soups;

#[path = "common/host_harness.rs"]
mod host_harness;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use caustic_accel::Accel;
use caustic_accel::bvh::traverse_cuda::{GpuHit, GpuRay};
use caustic_accel::bvh::triangle_bvh_cuda::GpuTriangle;
use caustic_accel::grid::build_cuda::GridFrame;
use caustic_accel::grid::{GridConfig, UniformGrid};
use caustic_geom::{Pcg32, Ray, Triangle, Vec3};
use soups::{awkward_rays, awkward_soup, far_rays, grid_soup};

/// The harness, compiled once per test process; `None` without a compiler.
fn harness() -> Option<&'static Path> {
    static HARNESS: OnceLock<Option<PathBuf>> = OnceLock::new();
    host_harness::compile_once(&HARNESS, "grid-kernels", "grid_kernels.cpp")
}

/// What the kernels answered.
struct Emulated {
    /// Per triangle, its cells in the order the build writes them.
    cells: Vec<Vec<u32>>,
    hits: Vec<GpuHit>,
    occluded: Vec<u32>,
}

/// Runs the kernels over `grid` (built by the CPU, laid out as the device
/// holds it) and `rays`.
fn emulate(exe: &Path, grid: &UniformGrid, config: &GridConfig, rays: &[Ray]) -> Emulated {
    let frame = GridFrame::new(grid, config.exact_overlap);
    let cells = if grid.is_empty() {
        0
    } else {
        grid.cell_count()
    };
    let slabs: Vec<f32> = grid
        .slab_bounds
        .iter()
        .flatten()
        .flat_map(|&(lo, hi)| [lo, hi])
        .collect();
    let tris: Vec<GpuTriangle> = grid
        .triangles
        .iter()
        .enumerate()
        .map(|(i, t)| GpuTriangle::new(t, i as u32))
        .collect();
    let rays: Vec<GpuRay> = rays.iter().map(GpuRay::from).collect();
    let counts = [
        tris.len(),
        cells,
        grid.prims.len(),
        grid.macro_bounds.len(),
        slabs.len(),
        rays.len(),
    ]
    .map(|n| n as u32);
    let mut input: Vec<u8> = bytemuck::bytes_of(&frame).to_vec();
    input.extend_from_slice(bytemuck::cast_slice(&counts));
    input.extend_from_slice(bytemuck::cast_slice(&tris));
    // The CPU's cell_start as per-cell (start, end).
    if cells > 0 {
        input.extend_from_slice(bytemuck::cast_slice(&grid.cell_start[..cells]));
        input.extend_from_slice(bytemuck::cast_slice(&grid.cell_start[1..]));
    }
    input.extend_from_slice(bytemuck::cast_slice(&grid.prims));
    input.extend_from_slice(bytemuck::cast_slice(&grid.macro_bounds));
    input.extend_from_slice(bytemuck::cast_slice(&slabs));
    input.extend_from_slice(bytemuck::cast_slice(&rays));
    let output = host_harness::run(exe, "grid-kernels", &input);
    let words: &[u32] = bytemuck::cast_slice(&output);
    let mut at = 0;
    let cells = (0..tris.len())
        .map(|_| {
            let n = words[at] as usize;
            at += 1 + n;
            words[at - n..at].to_vec()
        })
        .collect();
    let hits = bytemuck::cast_slice(&words[at..at + 4 * rays.len()]).to_vec();
    let occluded = words[at + 4 * rays.len()..].to_vec();
    assert_eq!(occluded.len(), rays.len());
    Emulated {
        cells,
        hits,
        occluded,
    }
}

/// Checks the kernels against the CPU grid over `tris` with `config`;
/// returns the first problems found.
fn check(what: &str, tris: &[Triangle], rays: &[Ray], config: &GridConfig) -> Vec<String> {
    let Some(exe) = harness() else {
        return Vec::new();
    };
    let grid = UniformGrid::build_with(tris, config);
    let got = emulate(exe, &grid, config, rays);
    let mut problems = Vec::new();
    // The CPU's cells per triangle, ascending, as the kernels write them.
    let mut want: Vec<Vec<u32>> = vec![Vec::new(); tris.len()];
    if !grid.is_empty() {
        for c in 0..grid.cell_count() {
            for &p in &grid.prims[grid.cell_refs(c)] {
                want[p as usize].push(c as u32);
            }
        }
    }
    if let Some(i) = (0..tris.len()).find(|&i| got.cells[i] != want[i]) {
        problems.push(format!(
            "{what}: triangle {i} {:?} goes into cells {:?}, the CPU's are {:?}",
            tris[i], got.cells[i], want[i]
        ));
    }
    let bits = |h: &GpuHit| bytemuck::cast::<GpuHit, [u32; 4]>(*h);
    let mut differ = 0;
    for (i, ray) in rays.iter().enumerate() {
        let hit = GpuHit::from_hit(grid.intersect(ray));
        let occluded = u32::from(grid.occluded(ray));
        if bits(&hit) != bits(&got.hits[i]) || occluded != got.occluded[i] {
            differ += 1;
            if differ <= 4 {
                problems.push(format!(
                    "{what}: ray {i} {ray:?}: CPU {hit:?} / {occluded}, kernels {:?} / {}",
                    got.hits[i], got.occluded[i]
                ));
            }
        }
    }
    if differ > 0 {
        problems.push(format!("{what}: {differ} of {} rays differ", rays.len()));
    }
    let hits = got.hits.iter().filter(|h| h.prim != GpuHit::NO_HIT).count();
    eprintln!(
        "{what}: {} triangles, {} refs, {} rays ({hits} hits): {}",
        tris.len(),
        grid.prims.len(),
        rays.len(),
        if problems.is_empty() {
            "identical"
        } else {
            "DIFFERENT"
        }
    );
    problems
}

fn configs() -> [(&'static str, GridConfig); 4] {
    let with = |density, exact_overlap, macro_size| GridConfig {
        density,
        exact_overlap,
        macro_size,
    };
    [
        ("box", GridConfig::DEFAULT),
        ("exact", with(5.0, true, 4)),
        ("k=1 macro 1", with(1.0, false, 1)),
        ("k=12 exact macro 3", with(12.0, true, 3)),
    ]
}

#[test]
fn kernels_match_the_cpu_grid_on_awkward_soups() {
    let mut rng = Pcg32::new(0x6e1d, 7);
    let nan = Triangle::new(Vec3::splat(f32::NAN), Vec3::X, Vec3::Y);
    let mut huge = awkward_soup(&mut rng, 500);
    huge.push(Triangle::new(
        Vec3::new(-1e5, -1e5, 0.0),
        Vec3::new(1e5, -1e5, 0.1),
        Vec3::new(0.0, 1e5, -0.1),
    ));
    let soups: Vec<(&str, Vec<Triangle>)> = vec![
        ("empty", Vec::new()),
        ("one non-finite", vec![nan]),
        (
            "one triangle",
            vec![Triangle::new(Vec3::ZERO, Vec3::X, Vec3::Y)],
        ),
        (
            "duplicates",
            vec![Triangle::new(Vec3::ZERO, Vec3::X, Vec3::Y); 20],
        ),
        ("awkward 37", awkward_soup(&mut rng, 37)),
        ("awkward 3000", awkward_soup(&mut rng, 3000)),
        ("huge triangle", huge),
        ("height field", grid_soup(&mut rng, 24)),
    ];
    let mut problems = Vec::new();
    for (name, tris) in &soups {
        let mut rays = if tris.is_empty() {
            vec![Ray::new(Vec3::splat(-1.0), Vec3::ONE)]
        } else {
            awkward_rays(&mut rng, tris, 4000)
        };
        if tris.iter().any(Triangle::is_finite) {
            rays.extend(far_rays(&mut rng, tris, 300));
        }
        for (config_name, config) in configs() {
            problems.extend(check(
                &format!("{name}, {config_name}"),
                tris,
                &rays,
                &config,
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn kernels_match_the_cpu_grid_on_scenes() {
    let mut problems = Vec::new();
    for relative in [
        "bunny/bun_zipper.ply",
        "sponza-dabrovic/sponza.obj",
        "conference-69k/conference.obj",
        "sibenik/sibenik.obj",
    ] {
        let Some(tris) = scenes::load(relative) else {
            continue;
        };
        let rays = scenes::rays(&tris, 20_000, 5, 23);
        for (config_name, config) in &configs()[..2] {
            problems.extend(check(
                &format!("{relative}, {config_name}"),
                &tris,
                &rays,
                config,
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
