//! The compressed 8-wide BVH against the binary traversal on the GPU: for
//! each scene, the `bvh-binned` tree built on the CPU and uploaded,
//! collapsed on the device (build time by stage, nodes, bytes), and traced
//! with the anchor protocol's primary, AO and diffuse rays at 1920x1080
//! (generated on the device) by the binary kernel and by the compressed
//! kernel with each box test, every result checked against the binary one
//! first (`caustic_accel::bvh::wide::trace_bench_compressed_cuda`). Prints
//! markdown tables.
//!
//!     cargo run --release -p caustic-accel --example wide_bench -- [SCENE ...]
//!
//! SCENE is a standard scene's name (`tests/common/gpu_scenes.rs`; default:
//! the OptiX anchor's set, bunny, dragon, sponza, sibenik, conference) or
//! `dragon@16` for the anchor's 16 dragons. `CAUSTIC_BENCH_REPEATS=N` sets
//! the timed repetitions (20; 3 warm-ups).

#[path = "../tests/common/gpu_scenes.rs"]
mod scenes;

use caustic_accel::bvh::wide::trace_bench_compressed_cuda::{markdown, trace_scene_wide};
use caustic_gpu::Gpu;
use caustic_gpu::bench::Repeats;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn main() -> Result<()> {
    let mut names: Vec<String> = std::env::args().skip(1).collect();
    if names.is_empty() {
        names = ["bunny", "dragon", "sponza", "sibenik", "conference"]
            .map(String::from)
            .to_vec();
    }
    let repeats = Repeats {
        warm_up: 3,
        repeats: std::env::var("CAUSTIC_BENCH_REPEATS")
            .ok()
            .and_then(|r| r.parse().ok())
            .unwrap_or(20),
    };
    let gpu = Gpu::probe()?;
    println!("device: {}", gpu.info());
    // Resident blocks of 128 threads per multiprocessor: what registers and
    // local memory leave of the occupancy.
    use caustic_accel::kernels::{bvh_traverse as bin, bvh_wide_traverse_compressed as wide};
    for (name, blocks) in [
        (
            "binary closest",
            gpu.resident_blocks(bin::TRAVERSE_BVH2_CLOSEST, 128)?,
        ),
        (
            "binary any",
            gpu.resident_blocks(bin::TRAVERSE_BVH2_ANY, 128)?,
        ),
        (
            "wide closest",
            gpu.resident_blocks(wide::TRAVERSE_CWBVH_CLOSEST, 128)?,
        ),
        (
            "wide any",
            gpu.resident_blocks(wide::TRAVERSE_CWBVH_ANY, 128)?,
        ),
        (
            "wide-eager closest",
            gpu.resident_blocks(wide::TRAVERSE_CWBVH_CLOSEST_EAGER, 128)?,
        ),
        (
            "wide-exact closest",
            gpu.resident_blocks(wide::TRAVERSE_CWBVH_CLOSEST_EXACT, 128)?,
        ),
    ] {
        println!("{name}: {blocks} blocks of 128 threads per multiprocessor");
    }
    let mut results = Vec::new();
    for name in &names {
        let (base, copies) = match name.split_once('@') {
            Some((base, copies)) => (base, copies.parse::<usize>()?),
            None => (name.as_str(), 1),
        };
        let Some(loaded) = scenes::scene(base).load() else {
            println!("{name}: not unpacked, skipped");
            continue;
        };
        let loaded = if copies > 1 {
            scenes::replicated(&loaded, copies, 40.0)
        } else {
            loaded
        };
        let camera = scenes::gpu_camera(&loaded.camera);
        let result = trace_scene_wide(&gpu, &loaded.triangles, &camera, (1920, 1080), repeats)?;
        println!(
            "{}: {} triangles, binary build {:.0} ms (CPU), {} binary nodes; wide {:?}",
            loaded.name,
            result.triangles,
            result.binary_build_ms,
            result.binary_nodes,
            result.compress
        );
        for pass in &result.passes {
            let t = &pass.timings;
            println!(
                "  {} ({} rays): median (best) ms binary {:.3} ({:.3}), wide {:.3} ({:.3}), wide-eager {:.3} ({:.3}), wide-exact {:.3} ({:.3})",
                pass.kind,
                pass.rays,
                t[0].median_ms,
                t[0].best_ms,
                t[1].median_ms,
                t[1].best_ms,
                t[2].median_ms,
                t[2].best_ms,
                t[3].median_ms,
                t[3].best_ms
            );
        }
        results.push((loaded.name.clone(), result));
    }
    println!("\n{}", markdown(&results));
    Ok(())
}
