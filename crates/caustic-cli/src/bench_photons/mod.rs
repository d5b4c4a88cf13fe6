//! `caustic bench photons`: the measurements of Fleisz (2009), "Photon
//! Mapping on the GPU", for every point structure: build time and memory
//! (after the build and at its peak) against the photon count, and kNN /
//! radius query time against map size, k, radius and image resolution, for
//! the global and the caustic map of a scene. The queries are the visible
//! points of the camera's pixels (the first diffuse surface along each
//! pixel's specular chain), as a photon-mapping renderer issues them.
//!
//! All structures answer every query identically (the crate's query
//! contract); each query pass folds its answers into a checksum and the
//! benchmark fails if two structures disagree. With `--device cuda` the
//! GPU's kd-tree, hash grid and brute force join the sweeps (rows `cuda:…`),
//! checked against the CPU's answers the same way; a build without the
//! `cuda` feature has no GPU rows (`auto` is the CPU, `cuda` an error).
//!
//! This file holds the flags and the order of the sweeps; `maps.rs` makes
//! the photons and queries, `measure.rs` times the CPU structures, `gpu.rs`
//! the GPU's, and `report.rs` writes the tables, JSON and plots.

#[cfg(feature = "cuda")]
mod gpu;
mod maps;
mod measure;
mod report;

use crate::camera::CameraArgs;
use crate::render::DEFAULT_ACCEL;
use crate::{camera_presets, parse, scene_arg};
use anyhow::{Result, bail};
use caustic::Device;
use caustic_accel::points::{POINT_STRUCTURE_NAMES, build_point_structure};
use caustic_geom::Vec3;
use caustic_render::RenderScene;
use caustic_scene::Camera;
use clap::Args;
#[cfg(feature = "cuda")]
use gpu::GpuBench;
use maps::{MapPoints, trace_maps, visible_points};
use measure::{BuildRow, Query, QueryContext, QueryRow, check_agreement, measure_build};
use std::path::PathBuf;

/// Examples, then how cameras are chosen.
pub fn help() -> String {
    format!(
        "Examples:\n  caustic bench photons\n  \
         caustic bench photons --sizes 1e5,1e6 --k 10,50 --resolution 512x512 --json photons.jsonl --plot photons\n\n{}",
        camera_presets::help()
    )
}

#[derive(Args)]
pub struct PhotonBenchArgs {
    /// Scene file or built-in scene name.
    #[arg(long, default_value = "cornell-caustics")]
    scene: String,
    /// Point structures, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "kdtree,hashgrid,brute")]
    points: Vec<String>,
    /// Photon maps to measure: `global`, `caustic`.
    #[arg(long, value_delimiter = ',', default_value = "global,caustic")]
    maps: Vec<String>,
    /// Map sizes (stored photons) of the build and map-size sweeps; `1e6`
    /// and `250k` style counts are accepted.
    #[arg(long, value_delimiter = ',', default_value = "1e4,1e5,1e6,5e6", value_parser = parse::positive_count, allow_negative_numbers = true)]
    sizes: Vec<usize>,
    /// Map size of the k, radius and resolution sweeps (the largest size
    /// up to it that the map reaches).
    #[arg(long, default_value = "1e6", value_parser = parse::positive_count, allow_negative_numbers = true)]
    at_size: usize,
    /// Neighbour counts of the k sweep.
    #[arg(long, value_delimiter = ',', default_value = "10,25,50,100", value_parser = parse::positive_count, allow_negative_numbers = true)]
    k: Vec<usize>,
    /// k of the other sweeps.
    #[arg(long, default_value = "50", value_parser = parse::positive_count, allow_negative_numbers = true)]
    at_k: usize,
    /// Radii of the radius-query sweep, as fractions of the scene diagonal.
    #[arg(long, value_delimiter = ',', default_value = "0.0025,0.005,0.01,0.02", value_parser = parse::diagonal_fraction, allow_negative_numbers = true)]
    radius: Vec<f32>,
    /// Largest kNN radius, as a fraction of the scene diagonal (the hash
    /// grid's cell size and the kd-tree's VVH radius).
    #[arg(long, default_value_t = 0.02, value_parser = parse::diagonal_fraction, allow_negative_numbers = true)]
    max_radius: f32,
    /// Image sizes of the resolution sweep (one query per pixel).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "256x256,512x512,1024x768,1920x1080",
        value_parser = parse::resolution
    )]
    resolution: Vec<(u32, u32)>,
    /// Image size of the other sweeps.
    #[arg(long, default_value = "512x512", value_parser = parse::resolution, allow_negative_numbers = true)]
    at_resolution: (u32, u32),
    /// Timed repetitions of each build and query pass (after one warm-up).
    #[arg(long, default_value = "3", value_parser = parse::positive_count, allow_negative_numbers = true)]
    reps: usize,
    /// Worker threads (0 = all cores).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u16).range(0..=4096), allow_negative_numbers = true)]
    threads: u16,
    /// Most photons emitted to fill the largest map (caustic maps fill
    /// slowly: sizes they cannot reach are skipped, saying so).
    #[arg(long, default_value = "1e7", value_parser = parse::positive_count, allow_negative_numbers = true)]
    max_emitted: usize,
    /// Brute force is skipped where queries × photons exceeds this.
    #[arg(long, default_value = "2e10", value_parser = parse::count, allow_negative_numbers = true)]
    brute_limit: usize,
    /// Seed of the photon paths.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// `cuda` (or `cuda:N`) also measures the GPU's kd-tree, hash grid and
    /// brute force (rows `cuda:kdtree`, `cuda:hashgrid`, `cuda:brute`),
    /// answers checked against the CPU structures'; `auto` when a GPU opens.
    #[arg(long, default_value = "cpu")]
    device: Device,
    /// Append one JSON object per measurement to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write PREFIX-build.svg and PREFIX-query.svg (time against map size).
    #[arg(long)]
    plot: Option<PathBuf>,
    #[command(flatten)]
    camera: CameraArgs,
}

/// One run's fixed parts: the scene, its queries at the sweeps' default
/// resolution, and the GPU when one is measured.
struct Bench<'a> {
    args: &'a PhotonBenchArgs,
    scene: RenderScene,
    camera: Camera,
    /// The kNN radius cap in scene units.
    max_radius: f32,
    at_points: Vec<Vec3>,
    #[cfg(feature = "cuda")]
    gpu: Option<GpuBench<'a>>,
}

/// What the sweeps measured, in the order the tables list it.
#[derive(Default)]
struct Rows {
    builds: Vec<BuildRow>,
    queries: Vec<QueryRow>,
}

pub fn run(args: PhotonBenchArgs) -> Result<()> {
    crate::set_threads(args.threads.into())?;
    check_args(&args)?;
    let loaded = scene_arg::load(&args.scene)?;
    let camera = args.camera.resolve(&loaded)?;
    let scene = RenderScene::new(&loaded.scene, DEFAULT_ACCEL)?;
    if scene.lights.is_empty() && scene.area_lights.is_empty() {
        bail!("{}: no lights, so no photons to map", args.scene);
    }
    let diag = scene.scene_diagonal;
    let maps = trace_maps(&scene, &args)?;
    let (at_w, at_h) = args.at_resolution;
    let at_points = visible_points(&scene, &camera, at_w, at_h);
    eprintln!(
        "bench photons: {} visible points at {at_w}x{at_h}",
        at_points.len()
    );
    // The CPU-only default stays quiet; `auto` and `cuda` say which device.
    let backend = match args.device {
        Device::Cpu => None,
        device => Some(crate::device::open(device)?),
    };
    if let Some(backend) = backend.as_ref().filter(|b| b.is_gpu()) {
        eprintln!(
            "bench photons: also on {} (kd-tree, hash grid, brute force)",
            backend.name()
        );
    }
    let bench = Bench {
        args: &args,
        max_radius: args.max_radius * diag,
        scene,
        camera,
        at_points,
        #[cfg(feature = "cuda")]
        gpu: backend
            .as_ref()
            .and_then(caustic::Backend::gpu)
            .map(|gpu| GpuBench { gpu, args: &args }),
    };
    let mut rows = Rows::default();
    for map in &maps {
        bench.size_sweep(map, &mut rows)?;
        bench.at_size_sweeps(map, &mut rows)?;
    }
    check_agreement(&rows.queries)?;
    report::print_tables(&rows.builds, &rows.queries, &args, diag);
    if let Some(path) = &args.json {
        report::write_json(path, &rows.builds, &rows.queries, &args)?;
    }
    if let Some(prefix) = &args.plot {
        report::write_plots(prefix, &rows.builds, &rows.queries)?;
    }
    Ok(())
}

impl Bench<'_> {
    /// The map sizes of `--sizes` this map reaches, in order, repeats
    /// (sizes cut to the map's size) dropped.
    fn sizes_of(&self, map: &MapPoints) -> Vec<usize> {
        let mut sizes: Vec<usize> = self
            .args
            .sizes
            .iter()
            .map(|&s| s.min(map.positions.len()))
            .filter(|&s| s > 0)
            .collect();
        sizes.dedup();
        sizes
    }

    fn knn_at(&self) -> Query {
        Query::Knn {
            k: self.args.at_k,
            max_radius: self.max_radius,
        }
    }

    /// Build time and kNN time at every map size, per structure.
    fn size_sweep(&self, map: &MapPoints, rows: &mut Rows) -> Result<()> {
        let resolution = self.args.at_resolution;
        for size in self.sizes_of(map) {
            let points = &map.positions[..size];
            for name in &self.args.points {
                eprintln!("bench photons: {} map, {size} photons, {name}", map.name);
                let (structure, row) =
                    measure_build(name, &map.name, points, self.max_radius, self.args)?;
                rows.builds.push(row);
                let context = QueryContext {
                    map: &map.name,
                    structure: structure.as_ref(),
                    photons: size,
                    args: self.args,
                };
                let row = context.measure("size", self.knn_at(), &self.at_points, resolution);
                rows.queries.extend(row);
            }
            #[cfg(feature = "cuda")]
            if let Some(bench) = &self.gpu {
                let mut on = bench.on(&map.name, points, self.max_radius)?;
                rows.builds.extend(on.build_rows()?);
                let measured = on.measure("size", self.knn_at(), &self.at_points, resolution)?;
                rows.queries.extend(measured);
            }
        }
        Ok(())
    }

    /// The k, radius and resolution sweeps at the map size `--at-size`
    /// (the largest measured size up to it).
    fn at_size_sweeps(&self, map: &MapPoints, rows: &mut Rows) -> Result<()> {
        let size = self
            .sizes_of(map)
            .into_iter()
            .filter(|&s| s <= self.args.at_size)
            .max()
            .unwrap_or(map.positions.len().min(self.args.at_size));
        let points = &map.positions[..size];
        for name in &self.args.points {
            eprintln!(
                "bench photons: {} map, {size} photons, {name}: k, radius and resolution sweeps",
                map.name
            );
            let structure = build_point_structure(name, points, self.max_radius)?;
            let context = QueryContext {
                map: &map.name,
                structure: structure.as_ref(),
                photons: size,
                args: self.args,
            };
            for (sweep, query, points, resolution) in self.sweep_queries() {
                rows.queries
                    .extend(context.measure(sweep, query, &points, resolution));
            }
        }
        #[cfg(feature = "cuda")]
        if let Some(bench) = &self.gpu {
            let mut on = bench.on(&map.name, points, self.max_radius)?;
            for (sweep, query, points, resolution) in self.sweep_queries() {
                rows.queries
                    .extend(on.measure(sweep, query, &points, resolution)?);
            }
        }
        Ok(())
    }

    /// The query passes of the k, radius and resolution sweeps, in order:
    /// (sweep, query, query points, resolution).
    fn sweep_queries(
        &self,
    ) -> impl Iterator<
        Item = (
            &'static str,
            Query,
            std::borrow::Cow<'_, [Vec3]>,
            (u32, u32),
        ),
    > + '_ {
        use std::borrow::Cow;
        let at = self.args.at_resolution;
        let diag = self.scene.scene_diagonal;
        let k = self.args.k.iter().map(move |&k| {
            let query = Query::Knn {
                k,
                max_radius: self.max_radius,
            };
            ("k", query, Cow::Borrowed(&self.at_points[..]), at)
        });
        let radius = self.args.radius.iter().map(move |&fraction| {
            let query = Query::Radius {
                radius: fraction * diag,
            };
            ("radius", query, Cow::Borrowed(&self.at_points[..]), at)
        });
        let resolution = self.args.resolution.iter().map(move |&(w, h)| {
            let points = visible_points(&self.scene, &self.camera, w, h);
            ("resolution", self.knn_at(), Cow::Owned(points), (w, h))
        });
        k.chain(radius).chain(resolution)
    }
}

/// Checks what the value parsers cannot: names from fixed lists.
fn check_args(args: &PhotonBenchArgs) -> Result<()> {
    for name in &args.points {
        if !POINT_STRUCTURE_NAMES.contains(&name.as_str()) {
            bail!(
                "unknown point structure `{name}` (known: {})",
                POINT_STRUCTURE_NAMES.join(", ")
            );
        }
    }
    for map in &args.maps {
        if map != "global" && map != "caustic" {
            bail!("unknown map `{map}`: use global or caustic");
        }
    }
    for path in args.json.iter() {
        crate::output::check_writable(path)?;
    }
    Ok(())
}
