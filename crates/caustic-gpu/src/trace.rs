//! A launch timeline for machines where no timeline profiler runs (the
//! device machines of this workplace have no working Nsight Systems): with
//! `CAUSTIC_GPU_TRACE` set, every kernel launch records a device event
//! before and after it on its stream, and every host wait its host span;
//! [`begin`] and [`finish`] bracket the work to look at and return each
//! launch's stream, enqueue time and device start and end, in milliseconds
//! since [`begin`]. The start event completes when the stream reaches the
//! launch, so a kernel that waits for multiprocessors held by another
//! stream shows that wait in its span. Off (the default), a launch pays
//! one relaxed load.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use cudarc::driver::CudaEvent;

use crate::{Gpu, GpuError};

/// Whether the environment asks for a timeline.
fn wanted() -> bool {
    static WANTED: OnceLock<bool> = OnceLock::new();
    *WANTED.get_or_init(|| std::env::var_os("CAUSTIC_GPU_TRACE").is_some())
}

/// Recording between [`begin`] and [`finish`].
static ON: AtomicBool = AtomicBool::new(false);

struct Launch {
    name: &'static str,
    blocks: u32,
    stream: usize,
    host: Instant,
    start: CudaEvent,
    end: CudaEvent,
}

struct Wait {
    name: &'static str,
    stream: usize,
    from: Instant,
    to: Instant,
}

#[derive(Default)]
struct Records {
    epoch: Option<(CudaEvent, Instant)>,
    launches: Vec<Launch>,
    waits: Vec<Wait>,
}

fn records() -> &'static Mutex<Records> {
    static RECORDS: OnceLock<Mutex<Records>> = OnceLock::new();
    RECORDS.get_or_init(Mutex::default)
}

/// The start event of a launch on `gpu`'s stream, while recording.
pub(crate) fn before_launch(gpu: &Gpu) -> Option<(CudaEvent, Instant)> {
    if !ON.load(Ordering::Relaxed) {
        return None;
    }
    Some((gpu.timing_event().ok()?, Instant::now()))
}

/// Records the launch `name` that followed `start`.
pub(crate) fn after_launch(
    gpu: &Gpu,
    name: &'static str,
    blocks: u32,
    start: Option<(CudaEvent, Instant)>,
) {
    let Some((start, host)) = start else { return };
    let Ok(end) = gpu.timing_event() else {
        return;
    };
    let stream = gpu.stream().cu_stream() as usize;
    let mut records = records().lock().unwrap_or_else(|e| e.into_inner());
    records.launches.push(Launch {
        name,
        blocks,
        stream,
        host,
        start,
        end,
    });
}

/// Records a host wait `name` on `gpu`'s stream from `from` to now.
pub(crate) fn host_wait(gpu: &Gpu, name: &'static str, from: Instant) {
    if !ON.load(Ordering::Relaxed) {
        return;
    }
    let stream = gpu.stream().cu_stream() as usize;
    let mut records = records().lock().unwrap_or_else(|e| e.into_inner());
    records.waits.push(Wait {
        name,
        stream,
        from,
        to: Instant::now(),
    });
}

/// Whether `CAUSTIC_GPU_TRACE` asks for timelines.
pub fn enabled() -> bool {
    wanted()
}

/// Starts a timeline (when [`enabled`]): waits for the device, then
/// records from here on.
pub fn begin(gpu: &Gpu) -> Result<(), GpuError> {
    if !wanted() {
        return Ok(());
    }
    gpu.context()
        .synchronize()
        .map_err(GpuError::driver("waiting for the device"))?;
    let epoch = gpu.timing_event()?;
    let mut records = records().lock().unwrap_or_else(|e| e.into_inner());
    *records = Records {
        epoch: Some((epoch, Instant::now())),
        ..Default::default()
    };
    ON.store(true, Ordering::Relaxed);
    Ok(())
}

/// One row of a timeline: what, on which stream (numbered in order of
/// appearance), and when in milliseconds since [`begin`] (the host's
/// enqueue or wait start, the device's start and end; for a host wait the
/// device times are the wait's host span).
#[derive(Clone, Debug)]
pub struct Row {
    pub name: &'static str,
    /// The launch's blocks (0 for a wait).
    pub blocks: u32,
    pub stream: usize,
    pub wait: bool,
    pub host_ms: f64,
    pub start_ms: f64,
    pub end_ms: f64,
}

/// Stops recording and returns the timeline since [`begin`], ordered by
/// start (empty when not [`enabled`]).
pub fn finish(gpu: &Gpu) -> Result<Vec<Row>, GpuError> {
    if !wanted() {
        return Ok(Vec::new());
    }
    ON.store(false, Ordering::Relaxed);
    gpu.context()
        .synchronize()
        .map_err(GpuError::driver("waiting for the device"))?;
    let records = std::mem::take(&mut *records().lock().unwrap_or_else(|e| e.into_inner()));
    let Some((epoch, t0)) = records.epoch else {
        return Ok(Vec::new());
    };
    let mut streams: Vec<usize> = Vec::new();
    let mut number = |s: usize| match streams.iter().position(|&x| x == s) {
        Some(i) => i,
        None => {
            streams.push(s);
            streams.len() - 1
        }
    };
    let since = |t: Instant| t.saturating_duration_since(t0).as_secs_f64() * 1e3;
    let elapsed = |e: &CudaEvent| -> Result<f64, GpuError> {
        Ok(f64::from(
            epoch
                .elapsed_ms(e)
                .map_err(GpuError::driver("timing with events"))?,
        ))
    };
    let mut rows = Vec::new();
    for l in &records.launches {
        rows.push(Row {
            name: l.name,
            blocks: l.blocks,
            stream: number(l.stream),
            wait: false,
            host_ms: since(l.host),
            start_ms: elapsed(&l.start)?,
            end_ms: elapsed(&l.end)?,
        });
    }
    for w in &records.waits {
        rows.push(Row {
            name: w.name,
            blocks: 0,
            stream: number(w.stream),
            wait: true,
            host_ms: since(w.from),
            start_ms: since(w.from),
            end_ms: since(w.to),
        });
    }
    rows.sort_by(|a, b| a.start_ms.total_cmp(&b.start_ms));
    Ok(rows)
}
