//! Stable stream compaction (`kernels/compact.cu`): keep the elements whose
//! flag is non-zero, in input order, in one pass (flag scan and scatter fused
//! in a decoupled look-back scan). Semantics: [`super::cpu::compact_u32`].

use super::{
    LookbackScratch, MAX_SCAN_LEN, SCAN_THREADS, check_len, check_same_len, lookback_blocks,
    lookback_scratch,
};
use crate::Gpu;
use crate::buffer::DeviceBuffer;
use crate::error::GpuError;
use crate::kernels::ops_compact as k;

/// Writes the kept values to the front of `out` (at least as long as the
/// input) and their number to `count[0]`, without waiting for the GPU.
pub fn select_u32_into(
    values: &DeviceBuffer<u32>,
    flags: &DeviceBuffer<u32>,
    out: &mut DeviceBuffer<u32>,
    count: &mut DeviceBuffer<u32>,
) -> Result<(), GpuError> {
    let kernel = k::COMPACT_SELECT_U32;
    let n = values.len();
    check_inputs(kernel.name(), n, flags, out, count)?;
    if n == 0 {
        return Ok(());
    }
    let gpu = values.gpu();
    let mut scratch = lookback_scratch(gpu, n)?;
    let (status, counter) = scratch.pointers();
    let args = (
        values.ptr(),
        flags.ptr(),
        out.ptr_mut(),
        count.ptr_mut(),
        n as u64,
        status,
        counter,
    );
    gpu.launch(kernel, lookback_blocks(n), SCAN_THREADS, args)
}

/// Writes the indices of the non-zero flags, ascending, to the front of
/// `out` and their number to `count[0]`, without waiting for the GPU.
pub fn select_indices_into(
    flags: &DeviceBuffer<u32>,
    out: &mut DeviceBuffer<u32>,
    count: &mut DeviceBuffer<u32>,
) -> Result<(), GpuError> {
    let kernel = k::COMPACT_SELECT_INDICES;
    let n = flags.len();
    check_inputs(kernel.name(), n, flags, out, count)?;
    if n == 0 {
        return Ok(());
    }
    let gpu = flags.gpu();
    let mut scratch = lookback_scratch(gpu, n)?;
    let (status, counter) = scratch.pointers();
    let args = (
        flags.ptr(),
        out.ptr_mut(),
        count.ptr_mut(),
        n as u64,
        status,
        counter,
    );
    gpu.launch(kernel, lookback_blocks(n), SCAN_THREADS, args)
}

/// The kept values, in a new buffer of exactly their number (waits for the GPU).
pub fn select_u32(
    values: &DeviceBuffer<u32>,
    flags: &DeviceBuffer<u32>,
) -> Result<DeviceBuffer<u32>, GpuError> {
    let gpu = values.gpu();
    let mut out = DeviceBuffer::uninit(gpu, "compacted values", values.len())?;
    let mut count = DeviceBuffer::uninit(gpu, "compacted count", 1)?;
    select_u32_into(values, flags, &mut out, &mut count)?;
    out.truncate(count.download()?[0] as usize);
    Ok(out)
}

/// The look-back scratch of [`select_indices_at`] for inputs of up to
/// `max_len` elements, allocated once: each selection then costs a zeroing
/// and a launch, not also an allocation and a free (a wavefront selects
/// three times a bounce, and the driver calls, not the GPU, set the pace of
/// its small late waves).
pub struct SelectScratch {
    lookback: LookbackScratch,
    max_len: usize,
}

impl SelectScratch {
    pub fn new(gpu: &Gpu, max_len: usize) -> Result<Self, GpuError> {
        Ok(Self {
            lookback: lookback_scratch(gpu, max_len.max(1))?,
            max_len,
        })
    }
}

/// [`select_indices_into`] with the count written to `counts[slot]`: a
/// wavefront keeps all its steps' counts in one buffer, so the host reads
/// them with one wait, and only when it must (`gather_wave_padded` uses a
/// count where it lies).
pub fn select_indices_at(
    flags: &DeviceBuffer<u32>,
    out: &mut DeviceBuffer<u32>,
    (counts, slot): (&mut DeviceBuffer<u32>, usize),
    scratch: &mut SelectScratch,
) -> Result<(), GpuError> {
    let kernel = k::COMPACT_SELECT_INDICES;
    let n = flags.len();
    check_slot(kernel.name(), counts, slot)?;
    check_len(kernel.name(), n, MAX_SCAN_LEN.min(scratch.max_len))?;
    if out.len() < n {
        return Err(GpuError::LengthMismatch {
            operation: kernel.name(),
            what: "output",
            expected: n,
            actual: out.len(),
        });
    }
    if n == 0 {
        return counts.upload_at(slot, &[0]);
    }
    let gpu = flags.gpu();
    scratch.lookback.reset()?;
    let (status, counter) = scratch.lookback.pointers();
    let args = (
        flags.ptr(),
        out.ptr_mut(),
        counts.ptr_mut_at(slot),
        n as u64,
        status,
        counter,
    );
    gpu.launch(kernel, lookback_blocks(n), SCAN_THREADS, args)
}

/// [`gather_wave`] for a wave whose kept count the host has not read: the
/// first `counts[slot]` slots of `out_rays`/`out_paths` get the kept rays
/// and records, the rest (up to their length, the host's bound on the
/// count) `pad_ray`/`pad_path`, which the caller's kernels must skip (an
/// untraceable ray; a path record with no pixel). No wait for the GPU.
#[allow(clippy::too_many_arguments)]
pub fn gather_wave_padded<R: bytemuck::Pod, P: bytemuck::Pod>(
    rays: &DeviceBuffer<R>,
    paths: &DeviceBuffer<P>,
    indices: &DeviceBuffer<u32>,
    (counts, slot): (&DeviceBuffer<u32>, usize),
    pad_ray: &DeviceBuffer<R>,
    pad_path: &DeviceBuffer<P>,
    out_rays: &mut DeviceBuffer<R>,
    out_paths: &mut DeviceBuffer<P>,
) -> Result<(), GpuError> {
    const { assert!(size_of::<P>() == 32 && size_of::<R>() == 32) };
    let kernel = k::COMPACT_GATHER_WAVE_PADDED;
    let n = out_rays.len();
    check_slot(kernel.name(), counts, slot)?;
    check_same_len(kernel.name(), "rays", rays.len(), paths.len())?;
    check_same_len(kernel.name(), "out_paths", n, out_paths.len())?;
    check_same_len(kernel.name(), "pad ray", 1, pad_ray.len())?;
    check_same_len(kernel.name(), "pad path", 1, pad_path.len())?;
    if indices.len() < n || rays.len() < n {
        return Err(GpuError::Invalid {
            what: "padded wave gather",
            message: format!(
                "a bound of {n} slots needs as many indices and rays ({} indices, {} rays)",
                indices.len(),
                rays.len()
            ),
        });
    }
    let args = (
        rays.ptr().cast(),
        paths.ptr().cast(),
        indices.ptr(),
        counts.ptr(),
        slot as u32,
        n as u32,
        pad_ray.ptr().cast(),
        pad_path.ptr().cast(),
        out_rays.ptr_mut().cast(),
        out_paths.ptr_mut().cast(),
    );
    super::launch_per_element(rays.gpu(), kernel, n, args)
}

fn check_slot(
    operation: &'static str,
    counts: &DeviceBuffer<u32>,
    slot: usize,
) -> Result<(), GpuError> {
    if slot < counts.len() {
        return Ok(());
    }
    Err(GpuError::Invalid {
        what: "count slot",
        message: format!(
            "{operation}: slot {slot} of a count buffer of {}",
            counts.len()
        ),
    })
}

/// The indices of the non-zero flags, ascending (waits for the GPU).
pub fn select_indices(flags: &DeviceBuffer<u32>) -> Result<DeviceBuffer<u32>, GpuError> {
    let gpu = flags.gpu();
    let mut out = DeviceBuffer::uninit(gpu, "selected indices", flags.len())?;
    let mut count = DeviceBuffer::uninit(gpu, "selected count", 1)?;
    select_indices_into(flags, &mut out, &mut count)?;
    out.truncate(count.download()?[0] as usize);
    Ok(out)
}

/// `out_rays[i] = rays[indices[i]]` and the same for the rays' 32-byte path
/// records (every renderer's rays and path records are 32 bytes: the
/// compaction of a wavefront after `select_indices`).
pub fn gather_wave<R: bytemuck::Pod, P: bytemuck::Pod>(
    rays: &DeviceBuffer<R>,
    paths: &DeviceBuffer<P>,
    indices: &DeviceBuffer<u32>,
    out_rays: &mut DeviceBuffer<R>,
    out_paths: &mut DeviceBuffer<P>,
) -> Result<(), GpuError> {
    const { assert!(size_of::<P>() == 32 && size_of::<R>() == 32) };
    let kernel = k::COMPACT_GATHER_WAVE;
    let n = indices.len();
    check_same_len(kernel.name(), "rays", rays.len(), paths.len())?;
    check_same_len(kernel.name(), "out_rays", n, out_rays.len())?;
    check_same_len(kernel.name(), "out_paths", n, out_paths.len())?;
    let args = (
        rays.ptr().cast(),
        paths.ptr().cast(),
        indices.ptr(),
        n as u32,
        out_rays.ptr_mut().cast(),
        out_paths.ptr_mut().cast(),
    );
    super::launch_per_element(rays.gpu(), kernel, n, args)
}

fn check_inputs(
    operation: &'static str,
    n: usize,
    flags: &DeviceBuffer<u32>,
    out: &DeviceBuffer<u32>,
    count: &mut DeviceBuffer<u32>,
) -> Result<(), GpuError> {
    check_len(operation, n, MAX_SCAN_LEN)?;
    check_same_len(operation, "flags", n, flags.len())?;
    check_same_len(operation, "count", 1, count.len())?;
    if out.len() < n {
        return Err(GpuError::LengthMismatch {
            operation,
            what: "output",
            expected: n,
            actual: out.len(),
        });
    }
    // An empty input launches nothing, so its count is set here.
    count.fill_zero()
}
