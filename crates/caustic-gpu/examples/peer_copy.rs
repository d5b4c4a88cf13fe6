//! Device-to-device copy bandwidth between the GPUs of this machine, the
//! floor of a team's exchanges (caustic-render's `team_cuda`): for every
//! ordered pair, `cuMemcpyPeerAsync` of a pool-allocated buffer before
//! and after [`Gpu::enable_peer_access`] (which grants the pair's
//! contexts and memory pools to each other), timed with events on the
//! receiving device's stream; the median of the repetitions.
//!
//!   peer_copy [MIB] [REPS]     (default 1024 MiB, 5 repetitions)

use caustic_gpu::{DeviceBuffer, Gpu, GpuError, device_count};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mib: usize = args.next().map_or(Ok(1024), |a| a.parse())?;
    let reps: usize = args.next().map_or(Ok(5), |a| a.parse())?;
    let count = device_count()?;
    if count < 2 {
        println!("peer_copy: {count} GPU; nothing to measure");
        return Ok(());
    }
    let gpus = (0..count).map(Gpu::open).collect::<Result<Vec<_>, _>>()?;
    println!(
        "{count} × {}, {mib} MiB a copy, median of {reps}",
        gpus[0].info().name
    );
    println!("| from → to | before peer access | after |");
    println!("|---|---:|---:|");
    let mut rows = Vec::new();
    for to in 0..count {
        for from in (0..count).filter(|&f| f != to) {
            rows.push((from, to, bandwidth(&gpus[from], &gpus[to], mib, reps)?));
        }
    }
    for from in &gpus {
        for to in &gpus {
            from.enable_peer_access(to)?;
        }
    }
    for (from, to, before) in rows {
        let after = bandwidth(&gpus[from], &gpus[to], mib, reps)?;
        println!("| {from} → {to} | {before:.1} GB/s | {after:.1} GB/s |");
    }
    Ok(())
}

/// GB/s of copies of `mib` MiB from a buffer on `from` into one on `to`.
fn bandwidth(from: &Gpu, to: &Gpu, mib: usize, reps: usize) -> Result<f64, GpuError> {
    let bytes = mib << 20;
    let mut source = DeviceBuffer::<u8>::uninit(from, "peer copy source", bytes)?;
    source.fill_bytes(1)?;
    from.synchronize()?;
    let mut target = DeviceBuffer::<u8>::uninit(to, "peer copy target", bytes)?;
    let mut times = Vec::with_capacity(reps);
    for _ in 0..=reps {
        // SAFETY: the source is complete (its device synchronised) and
        // outlives the copy, which `time_ms` waits for.
        let ms = to.time_ms(|| unsafe { target.copy_from_peer(0, source.peer_handle()) })?;
        times.push(ms);
    }
    times.remove(0); // the first copy warms the mappings up
    times.sort_by(f32::total_cmp);
    Ok(bytes as f64 / (f64::from(times[times.len() / 2]) * 1e-3) / 1e9)
}
