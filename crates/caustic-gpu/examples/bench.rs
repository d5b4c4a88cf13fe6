//! Throughput of the primitives on the GPU, next to the memory ceiling:
//! device-to-device copy, exclusive scan, and radix sort of u32 and u64
//! key-value pairs. Every operation is checked once against the CPU before
//! it is timed; timings are device events around the operation alone, after
//! warm-up, as the median of the repeats.
//!
//!     cargo run --release -p caustic-gpu --example bench -- [LOG2_N]
//!
//! The last line, `RESULT key=value ...`, is for scripts (gpu-run.sh).

use caustic_geom::Pcg32;
use caustic_gpu::ops::scan::{Direction, ScanKind};
use caustic_gpu::ops::{cpu, radix_sort, scan};
use caustic_gpu::{DeviceBuffer, Gpu, GpuError, ModuleId};

const WARM_UP: usize = 3;
const REPEATS: usize = 20;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn main() -> Result<()> {
    let log2: u32 = std::env::args().nth(1).map_or(Ok(26), |a| a.parse())?;
    let n = 1usize << log2;
    let gpu = Gpu::probe()?;
    println!("device: {}", gpu.info());
    for module in ModuleId::ALL {
        gpu.load(module)?; // compile outside the timings
    }
    let mut rng = Pcg32::new(0x0be7c4, 1);
    let keys: Vec<u32> = (0..n).map(|_| rng.next_u32()).collect();

    let mut rows = Vec::new();
    let copy_ms = time_copy(&gpu, &keys)?;
    rows.push(row(
        "device-to-device copy",
        n,
        copy_ms,
        gbps(8 * n, copy_ms),
    ));
    let scan_ms = time_scan(&gpu, &keys)?;
    rows.push(row("exclusive scan u32", n, scan_ms, gbps(8 * n, scan_ms)));
    let sort32_ms = time_sort(&gpu, &keys)?;
    rows.push(row(
        "radix sort u32 keys + u32 values",
        n,
        sort32_ms,
        gkeys(n, sort32_ms),
    ));
    let keys_only_ms = time_sort_keys(&gpu, &keys)?;
    rows.push(row(
        "radix sort u32 keys only",
        n,
        keys_only_ms,
        gkeys(n, keys_only_ms),
    ));
    let keys64: Vec<u64> = keys
        .iter()
        .map(|&k| (u64::from(rng.next_u32()) << 32) | u64::from(k))
        .collect();
    let sort64_ms = time_sort(&gpu, &keys64)?;
    rows.push(row(
        "radix sort u64 keys + u32 values",
        n,
        sort64_ms,
        gkeys(n, sort64_ms),
    ));

    println!("\n| operation | n | median ms | throughput |\n| --- | --- | --- | --- |");
    for r in &rows {
        println!("{r}");
    }
    println!(
        "\nRESULT n={n} copy_gbps={:.1} scan_gbps={:.1} sort_u32_pairs_gkeys={:.3} sort_u32_keys_gkeys={:.3} sort_u64_pairs_gkeys={:.3}",
        8.0 * n as f64 / copy_ms / 1e6,
        8.0 * n as f64 / scan_ms / 1e6,
        n as f64 / sort32_ms / 1e6,
        n as f64 / keys_only_ms / 1e6,
        n as f64 / sort64_ms / 1e6,
    );
    Ok(())
}

fn row(name: &str, n: usize, ms: f64, throughput: String) -> String {
    format!(
        "| {name} | 2^{} | {ms:.3} | {throughput} |",
        n.trailing_zeros()
    )
}

/// Bytes read plus bytes written, per second.
fn gbps(bytes: usize, ms: f64) -> String {
    format!("{:.1} GB/s", bytes as f64 / ms / 1e6)
}

fn gkeys(n: usize, ms: f64) -> String {
    format!("{:.3} Gkeys/s", n as f64 / ms / 1e6)
}

/// Median of REPEATS timings of `step` after WARM_UP untimed runs;
/// `prepare` runs before each, outside the timed region.
fn median_ms(
    gpu: &Gpu,
    mut prepare: impl FnMut() -> std::result::Result<(), GpuError>,
    mut step: impl FnMut() -> std::result::Result<(), GpuError>,
) -> Result<f64> {
    let mut times = Vec::with_capacity(REPEATS);
    for i in 0..WARM_UP + REPEATS {
        prepare()?;
        let ms = gpu.time_ms(&mut step)?;
        if i >= WARM_UP {
            times.push(f64::from(ms));
        }
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

fn time_copy(gpu: &Gpu, data: &[u32]) -> Result<f64> {
    let source = DeviceBuffer::from_slice(gpu, "copy source", data)?;
    let mut target = DeviceBuffer::<u32>::uninit(gpu, "copy target", data.len())?;
    target.copy_from(&source)?;
    if target.download()? != data {
        return Err("device copy differs from its source".into());
    }
    median_ms(gpu, || Ok(()), || target.copy_from(&source))
}

fn time_scan(gpu: &Gpu, data: &[u32]) -> Result<f64> {
    let input = DeviceBuffer::from_slice(gpu, "scan input", data)?;
    let mut output = DeviceBuffer::<u32>::uninit(gpu, "scan output", data.len())?;
    output.poison()?;
    scan::exclusive_u32(&input, &mut output)?;
    let (expected, _) = cpu::scan_u32(data, ScanKind::Exclusive, Direction::Forward);
    if output.download()? != expected {
        return Err("GPU scan differs from the CPU scan".into());
    }
    median_ms(gpu, || Ok(()), || scan::exclusive_u32(&input, &mut output))
}

fn time_sort<K: radix_sort::RadixKey + Ord + std::fmt::Debug>(
    gpu: &Gpu,
    keys: &[K],
) -> Result<f64> {
    let n = keys.len();
    let order: Vec<u32> = (0..n as u32).collect();
    let pristine_keys = DeviceBuffer::from_slice(gpu, "sort input keys", keys)?;
    let pristine_values = DeviceBuffer::from_slice(gpu, "sort input values", &order)?;
    let mut work_keys = DeviceBuffer::<K>::uninit(gpu, "sort keys", n)?;
    let mut work_values = DeviceBuffer::<u32>::uninit(gpu, "sort values", n)?;
    work_keys.copy_from(&pristine_keys)?;
    work_values.copy_from(&pristine_values)?;
    radix_sort::sort_pairs(&mut work_keys, &mut work_values)?;
    cpu::verify_stable_sort(keys, &work_keys.download()?, &work_values.download()?)?;
    // Each repetition sorts a fresh copy of the unsorted input.
    let work = std::cell::RefCell::new((work_keys, work_values));
    median_ms(
        gpu,
        || {
            let (k, v) = &mut *work.borrow_mut();
            k.copy_from(&pristine_keys)?;
            v.copy_from(&pristine_values)
        },
        || {
            let (k, v) = &mut *work.borrow_mut();
            radix_sort::sort_pairs(k, v)
        },
    )
}

fn time_sort_keys(gpu: &Gpu, keys: &[u32]) -> Result<f64> {
    let pristine = DeviceBuffer::from_slice(gpu, "sort input keys", keys)?;
    let mut work = DeviceBuffer::<u32>::uninit(gpu, "sort keys", keys.len())?;
    work.copy_from(&pristine)?;
    radix_sort::sort_keys(&mut work)?;
    let mut expected = keys.to_vec();
    expected.sort_unstable();
    if work.download()? != expected {
        return Err("GPU keys-only sort differs from the CPU sort".into());
    }
    let work = std::cell::RefCell::new(work);
    median_ms(
        gpu,
        || work.borrow_mut().copy_from(&pristine),
        || radix_sort::sort_keys(&mut *work.borrow_mut()),
    )
}
