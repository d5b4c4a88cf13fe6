//! Frame time of the GPU photon mapper (global-map mode: no final gather)
//! on the Cornell box with the glass sphere at 1920x1080, 1 spp, eye depth
//! 5 (the CLI's defaults), with 10^6 photons for the global and the
//! caustic map (one pass fills both), and
//! the stage times: photon tracing, map builds (hash grids), eye pass (the
//! Whitted wavefront plus the radiance estimates, image download included).
//! Then one CPU frame with the same settings, for the speed-up and the
//! agreement of the images.
//!
//! `cargo run --release -p caustic-render --example photon_gpu_bench [PHOTONS] [WIDTHxHEIGHT] [--gather N] [--spacing S] [--depth D] [--photon-bounces B] [--light-samples L] [--no-cpu] [--photon-priority same|above|below] [--early-estimates on|off] [--serial] [--save PATH] [--compare PATH]`
//! (`--gather N`: the final gather with N rays, reading irradiance
//! precomputed at every 4th global photon, at irradiance samples placed
//! every `S` pixels on average (default 4, the CLI's) and interpolated, or
//! at every shading point with `--spacing 0`; `--save PATH` writes the
//! median frame as raw f32 RGB, `--compare PATH` measures this frame's
//! agreement with one saved so). Then the same frame for a display
//! (`render_display`: 8-bit sRGB converted on the device, downloaded into
//! a pinned buffer), its time and stages, and its bytes against the host's
//! conversion of the f32 frame. `--serial`: the photon pass before the
//! eye pass on one stream, for each pass's time alone.
//! `CAUSTIC_GPU_TRACE=PATH`: three more display frames with a launch
//! timeline ([`caustic_gpu::trace`]) written to PATH.

#[path = "../tests/common/mod.rs"]
mod common;

use caustic_render::RenderScene;
use caustic_render::photon::render_cuda::GpuPhotonRenderer;
use caustic_render::photon::{PhotonRenderSettings, PhotonRenderStats, render};
use caustic_scene::Scene;
use common::{Agreement, display_byte_differences};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let photons: u64 = args
        .iter()
        .enumerate()
        .filter(|(i, _)| *i == 0 || !args[i - 1].starts_with("--"))
        .find_map(|(_, a)| a.parse().ok())
        .unwrap_or(1_000_000);
    let (width, height) = args
        .iter()
        .find_map(|a| {
            let (w, h) = a.split_once('x')?;
            Some((w.parse().ok()?, h.parse().ok()?))
        })
        .unwrap_or((1920, 1080));
    let cpu = !args.iter().any(|a| a == "--no-cpu");
    let flag = |name: &str| -> Option<u32> {
        let i = args.iter().position(|a| a == name)?;
        args.get(i + 1)?.parse().ok()
    };
    // `--gather N`: the final gather with N rays; `--spacing S`: its
    // irradiance samples' spacing in pixels (0: gather at every point).
    let gather_rays = flag("--gather").unwrap_or(0);
    let spacing = flag("--spacing").unwrap_or(4) as f32;
    let defaults = PhotonRenderSettings::default();
    // `caustic render --integrator photon`'s defaults: eye depth 5, 4
    // shadow rays per area light, 32 photon bounces.
    let max_depth = flag("--depth").unwrap_or(5);
    let photon_bounces = flag("--photon-bounces").unwrap_or(defaults.photon_bounces);
    let light_samples = flag("--light-samples").unwrap_or(defaults.light_samples);
    let gpu = caustic_gpu::Gpu::probe()?;
    println!("device: {}", gpu.info().name);
    let scene = Scene::builtin("cornell-caustics").ok_or("built-in scene")?;
    let camera = scene.camera.ok_or("the scene has no camera")?;
    let rs = RenderScene::new(&scene, "bvh-binned")?;
    let settings = PhotonRenderSettings {
        width,
        height,
        spp: 1,
        global_photons: photons,
        caustic_photons: photons,
        gather_rays,
        max_depth,
        photon_bounces,
        light_samples,
        samples: caustic_render::photon::irradiance_samples::SampleSettings {
            spacing,
            ..Default::default()
        },
        points: "hashgrid".to_owned(),
        ..Default::default()
    };
    let mode = if gather_rays > 0 && spacing > 0.0 {
        format!("final gather {gather_rays} rays at irradiance samples every {spacing} pixels")
    } else if gather_rays > 0 {
        format!("final gather {gather_rays} rays at every shading point")
    } else {
        "no final gather".to_owned()
    };
    // `--photon-priority same|above|below`: the photon stream's priority
    // against the eye waves' stream (the renderer's default otherwise).
    let priority = match args.iter().position(|a| a == "--photon-priority") {
        None => caustic_render::photon::render_cuda::PHOTON_STREAM_PRIORITY,
        Some(i) => match args.get(i + 1).map(String::as_str) {
            Some("same") => caustic_gpu::StreamPriority::Same,
            Some("above") => caustic_gpu::StreamPriority::Above,
            Some("below") => caustic_gpu::StreamPriority::Below,
            _ => return Err("--photon-priority takes same, above or below".into()),
        },
    };
    // `--serial`: the photon pass before the eye pass on one stream (the
    // renderer on a borrowed upload), for the passes' times alone.
    // One upload: the serial renderer borrows it, the owned one takes it.
    let scene = caustic_render::whitted::render_cuda::GpuScene::upload(&gpu, &rs)?;
    let serial_scene;
    let mut renderer = if args.iter().any(|a| a == "--serial") {
        serial_scene = scene;
        GpuPhotonRenderer::on(&serial_scene, &rs)
    } else {
        GpuPhotonRenderer::from_scene_at(scene, &rs, priority)?
    };
    // `--early-estimates on|off`: the primary wave's estimates beside the
    // later waves (on, the renderer's default) or all after the last.
    match args.iter().position(|a| a == "--early-estimates") {
        None => {}
        Some(i) => match args.get(i + 1).map(String::as_str) {
            Some("on") => renderer.set_early_estimates(true),
            Some("off") => renderer.set_early_estimates(false),
            _ => return Err("--early-estimates takes on or off".into()),
        },
    }
    // The first frame compiles and loads the kernels; time the later ones.
    renderer.render(&camera, &settings)?;
    let mut frames = Vec::new();
    for _ in 0..10 {
        frames.push(renderer.render(&camera, &settings)?);
    }
    let mut order: Vec<usize> = (0..frames.len()).collect();
    order.sort_by(|&a, &b| frames[a].1.seconds.total_cmp(&frames[b].1.seconds));
    let (film, median) = &frames[order[order.len() / 2]];
    println!(
        "PHOTON-GPU cornell-caustics {width}x{height} 1 spp, {photons} photons, eye depth {max_depth}, {photon_bounces} photon bounces, {light_samples} light samples, {mode}: median {:.2} ms/frame ({:.1} fps), best {:.2} ms; {}",
        median.seconds * 1e3,
        1.0 / median.seconds,
        frames[order[0]].1.seconds * 1e3,
        stages(median),
    );
    // The frame a display needs: the same frame as 8-bit sRGB converted
    // on the device into a pinned buffer the caller keeps (no f32 image
    // on the host), 10 frames after a warm-up; its bytes against the
    // host's conversion of the median f32 frame above.
    let mut display = caustic_gpu::PinnedBuffer::<u8>::zeroed(&gpu, 3 * film.pixels.len())?;
    renderer.render_display(&camera, &settings, 0.0, &mut display)?;
    let mut shown = Vec::new();
    for _ in 0..10 {
        shown.push(renderer.render_display(&camera, &settings, 0.0, &mut display)?);
    }
    shown.sort_by(|a, b| a.seconds.total_cmp(&b.seconds));
    let shown_median = &shown[shown.len() / 2];
    let host_bytes = caustic_render::image_io::srgb_bytes(film, 0.0);
    let (differing, largest) = display_byte_differences(&host_bytes, display.as_slice());
    println!(
        "PHOTON-GPU-DISPLAY same frame as 8-bit sRGB converted on the device (pinned, {} MB): median {:.2} ms/frame ({:.1} fps), best {:.2} ms; {}; bytes against the host's sRGB of the median f32 frame: {differing} of {} differ, by at most {largest}",
        display.len() / 1_000_000,
        shown_median.seconds * 1e3,
        1.0 / shown_median.seconds,
        shown[0].seconds * 1e3,
        stages(shown_median),
        host_bytes.len(),
    );
    // `CAUSTIC_GPU_TRACE=PATH`: three more display frames with every
    // launch's device span recorded, as a table at PATH (tab-separated:
    // frame, stream, kernel, blocks, host enqueue, device start and end in
    // ms since the frame's start; `wait` rows are host waits).
    if let Some(trace_path) = std::env::var_os("CAUSTIC_GPU_TRACE") {
        use std::fmt::Write as _;
        let mut table =
            String::from("frame\tstream\tname\tblocks\twait\thost_ms\tstart_ms\tend_ms\n");
        for frame in 0..3 {
            caustic_gpu::trace::begin(&gpu)?;
            let stats = renderer.render_display(&camera, &settings, 0.0, &mut display)?;
            for r in caustic_gpu::trace::finish(&gpu)? {
                writeln!(
                    table,
                    "{frame}\t{}\t{}\t{}\t{}\t{:.4}\t{:.4}\t{:.4}",
                    r.stream,
                    r.name,
                    r.blocks,
                    u8::from(r.wait),
                    r.host_ms,
                    r.start_ms,
                    r.end_ms
                )?;
            }
            println!(
                "TRACED frame {frame}: {:.2} ms; {}",
                stats.seconds * 1e3,
                stages(&stats)
            );
        }
        std::fs::write(trace_path, table)?;
    }
    // The eye pass without photons: the Whitted wavefront alone, same
    // settings, for the share of the frame the photon estimates take.
    let whitted = caustic_render::WhittedSettings {
        width,
        height,
        spp: 1,
        max_depth: settings.max_depth,
        light_samples: settings.light_samples,
        seed: settings.seed,
        ..Default::default()
    };
    let eye_only = caustic_render::whitted::render_cuda::GpuScene::upload(&gpu, &rs)?;
    eye_only.render(&camera, &whitted)?;
    // The frame's time and, within it, its own image download (into the
    // renderer's pinned staging buffer), each the median of 5 frames.
    let mut eye_times = Vec::new();
    let mut download_times = Vec::new();
    for _ in 0..5 {
        let stats = eye_only.render(&camera, &whitted)?.1;
        eye_times.push(stats.seconds * 1e3);
        download_times.push(stats.download_ms);
    }
    eye_times.sort_by(f64::total_cmp);
    download_times.sort_by(f64::total_cmp);
    println!(
        "WHITTED-GPU eye pass alone (depth {}, {} light samples): median {:.2} ms; of which the image download (3 floats per pixel, pinned) {:.2} ms",
        settings.max_depth,
        settings.light_samples,
        eye_times[eye_times.len() / 2],
        download_times[download_times.len() / 2]
    );
    // `--save PATH`: the median frame as raw little-endian f32 RGB;
    // `--compare PATH`: its agreement with a frame saved so (another build's).
    let path = |name: &str| {
        let i = args.iter().position(|a| a == name)?;
        args.get(i + 1).cloned()
    };
    if let Some(save) = path("--save") {
        let bytes: Vec<u8> = film
            .pixels
            .iter()
            .flat_map(|p| p.to_array())
            .flat_map(f32::to_le_bytes)
            .collect();
        std::fs::write(&save, bytes)?;
    }
    if let Some(other) = path("--compare") {
        let bytes = std::fs::read(&other)?;
        let floats: Vec<f32> = bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        if floats.len() != film.pixels.len() * 3 {
            return Err(format!("{other} is not a {width}x{height} frame").into());
        }
        let mut saved = caustic_render::Film::new(width, height);
        for (p, c) in saved.pixels.iter_mut().zip(floats.chunks_exact(3)) {
            *p = caustic_geom::Vec3::new(c[0], c[1], c[2]);
        }
        println!(
            "COMPARE this frame vs {other}: {}",
            Agreement::measure(&saved, film)
        );
    }
    if cpu {
        let (cpu_film, cpu_stats) = render(&rs, &camera, &settings, &|_| {})?;
        println!(
            "PHOTON-CPU same settings, {} threads: {:.0} ms ({}); speed-up {:.0}x; GPU vs CPU image: {}",
            rayon::current_num_threads(),
            cpu_stats.seconds * 1e3,
            stages(&cpu_stats),
            cpu_stats.seconds / median.seconds,
            Agreement::measure(&cpu_film, film),
        );
    }
    Ok(())
}

fn stages(s: &PhotonRenderStats) -> String {
    format!(
        "photons {:.2} ms ({} global, {} caustic stored), map builds {:.2} ms, precompute {:.2} ms ({} points), eye pass {:.2} ms (final gather {:.2} ms: {} irradiance samples + {} point gathers; stages {}), {:.1} M rays",
        s.photon_ms,
        s.global_stored,
        s.caustic_stored,
        s.build_ms,
        s.precompute_ms,
        s.precomputed,
        s.render_ms,
        s.sample_ms,
        s.samples,
        s.point_gathers,
        s.stage_ms
            .iter()
            .map(|(name, ms)| format!("{name} {ms:.2} ms"))
            .collect::<Vec<_>>()
            .join(", "),
        s.rays as f64 / 1e6
    )
}
