//! Prefix sums of u32 (`kernels/scan.cu`): exclusive or inclusive, forward
//! or backward, plain or segmented by head flags, each one pass over the data
//! with a decoupled look-back (Merrill & Garland 2016). Sums wrap modulo
//! 2^32. Semantics and the thesis's test vectors: [`super::cpu`].

use super::{
    MAX_SCAN_LEN, SCAN_THREADS, check_len, check_same_len, lookback_blocks, lookback_scratch,
};
use crate::buffer::DeviceBuffer;
use crate::error::GpuError;
use crate::kernel::DevicePtrMut;
use crate::kernels::ops_scan as k;

/// Whether element i of the result includes input i.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanKind {
    /// `out[i] = in[0] + … + in[i-1]`, `out[0] = 0`.
    Exclusive,
    /// `out[i] = in[0] + … + in[i]`.
    Inclusive,
}

/// Which end the sums start from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Forward,
    /// Sums run from the last element: `out[i]` sums `in[i+1..]` (exclusive).
    Backward,
}

/// Scans `input` into `output` (same length). When `total` is given, its
/// single element receives the sum of the whole input (the thesis's ScanTail).
pub fn scan_u32(
    input: &DeviceBuffer<u32>,
    output: &mut DeviceBuffer<u32>,
    kind: ScanKind,
    direction: Direction,
    total: Option<&mut DeviceBuffer<u32>>,
) -> Result<(), GpuError> {
    let kernel = match (kind, direction) {
        (ScanKind::Exclusive, Direction::Forward) => k::SCAN_EXCLUSIVE_U32,
        (ScanKind::Inclusive, Direction::Forward) => k::SCAN_INCLUSIVE_U32,
        (ScanKind::Exclusive, Direction::Backward) => k::SCAN_EXCLUSIVE_BACKWARD_U32,
        (ScanKind::Inclusive, Direction::Backward) => k::SCAN_INCLUSIVE_BACKWARD_U32,
    };
    let n = input.len();
    check_len(kernel.name(), n, MAX_SCAN_LEN)?;
    check_same_len(kernel.name(), "output", n, output.len())?;
    if direction == Direction::Forward && kind == ScanKind::Exclusive {
        if let Some(v) = default_variant() {
            return scan_pipelined(input, output, v, total);
        }
    }
    let total = total_arg(kernel.name(), total)?;
    if n == 0 {
        return Ok(());
    }
    let gpu = input.gpu();
    let mut scratch = lookback_scratch(gpu, n)?;
    let (status, counter) = scratch.pointers();
    let args = (
        input.ptr(),
        output.ptr_mut(),
        total,
        n as u64,
        status,
        counter,
    );
    gpu.launch(kernel, lookback_blocks(n), SCAN_THREADS, args)
}

/// Forward exclusive scan.
pub fn exclusive_u32(
    input: &DeviceBuffer<u32>,
    output: &mut DeviceBuffer<u32>,
) -> Result<(), GpuError> {
    scan_u32(input, output, ScanKind::Exclusive, Direction::Forward, None)
}

/// Forward inclusive scan.
pub fn inclusive_u32(
    input: &DeviceBuffer<u32>,
    output: &mut DeviceBuffer<u32>,
) -> Result<(), GpuError> {
    scan_u32(input, output, ScanKind::Inclusive, Direction::Forward, None)
}

/// Scan that restarts at every element whose head flag is non-zero (element
/// 0 always starts a segment). An exclusive result is 0 at every head. When
/// `total` is given, it receives the sum of the last segment.
pub fn segmented_u32(
    values: &DeviceBuffer<u32>,
    heads: &DeviceBuffer<u32>,
    output: &mut DeviceBuffer<u32>,
    kind: ScanKind,
    total: Option<&mut DeviceBuffer<u32>>,
) -> Result<(), GpuError> {
    let kernel = match kind {
        ScanKind::Exclusive => k::SCAN_SEGMENTED_EXCLUSIVE_U32,
        ScanKind::Inclusive => k::SCAN_SEGMENTED_INCLUSIVE_U32,
    };
    let n = values.len();
    check_len(kernel.name(), n, MAX_SCAN_LEN)?;
    check_same_len(kernel.name(), "head flags", n, heads.len())?;
    check_same_len(kernel.name(), "output", n, output.len())?;
    let total = total_arg(kernel.name(), total)?;
    if n == 0 {
        return Ok(());
    }
    let gpu = values.gpu();
    let mut scratch = lookback_scratch(gpu, n)?;
    let (status, counter) = scratch.pointers();
    let args = (
        values.ptr(),
        heads.ptr(),
        output.ptr_mut(),
        total,
        n as u64,
        status,
        counter,
    );
    gpu.launch(kernel, lookback_blocks(n), SCAN_THREADS, args)
}

/// The address of the one-element total buffer, or null.
fn total_arg<'a>(
    operation: &'static str,
    total: Option<&'a mut DeviceBuffer<u32>>,
) -> Result<DevicePtrMut<'a, u32>, GpuError> {
    match total {
        None => Ok(DevicePtrMut::null()),
        Some(total) => {
            check_same_len(operation, "total", 1, total.len())?;
            // An empty input launches nothing, so set its total here.
            total.fill_zero()?;
            Ok(total.ptr_mut())
        }
    }
}

/// Shapes of the pipelined forward scan, for side-by-side measurements
/// (notes: scan v4). `Tile` is the one-tile-per-block scan of tile_scan.cuh.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanVariant {
    Tile,
    P256x16,
    P256x32,
    P128x32,
    P256x16Stream,
    /// P256x16 with one block per tile (no prefetch across tiles).
    P256x16OneTile,
}

impl ScanVariant {
    pub const ALL: [ScanVariant; 6] = [
        ScanVariant::Tile,
        ScanVariant::P256x16,
        ScanVariant::P256x32,
        ScanVariant::P128x32,
        ScanVariant::P256x16Stream,
        ScanVariant::P256x16OneTile,
    ];

    pub fn key(self) -> &'static str {
        match self {
            ScanVariant::Tile => "tile",
            ScanVariant::P256x16 => "p256x16",
            ScanVariant::P256x32 => "p256x32",
            ScanVariant::P128x32 => "p128x32",
            ScanVariant::P256x16Stream => "p256x16s",
            ScanVariant::P256x16OneTile => "p256x16-one-tile",
        }
    }
}

fn default_variant() -> Option<ScanVariant> {
    let name = std::env::var("CAUSTIC_SCAN_VARIANT").unwrap_or_default();
    ScanVariant::ALL.into_iter().find(|v| v.key() == name)
}

/// Forward exclusive scan with the given kernel shape.
#[doc(hidden)]
pub fn exclusive_u32_variant(
    input: &DeviceBuffer<u32>,
    output: &mut DeviceBuffer<u32>,
    variant: ScanVariant,
) -> Result<(), GpuError> {
    if variant == ScanVariant::Tile {
        let n = input.len();
        let gpu = input.gpu();
        if n == 0 {
            return Ok(());
        }
        let mut scratch = lookback_scratch(gpu, n)?;
        let (status, counter) = scratch.pointers();
        let args = (
            input.ptr(),
            output.ptr_mut(),
            DevicePtrMut::null(),
            n as u64,
            status,
            counter,
        );
        return gpu.launch(k::SCAN_EXCLUSIVE_U32, lookback_blocks(n), SCAN_THREADS, args);
    }
    scan_pipelined(input, output, variant, None)
}

fn scan_pipelined(
    input: &DeviceBuffer<u32>,
    output: &mut DeviceBuffer<u32>,
    variant: ScanVariant,
    total: Option<&mut DeviceBuffer<u32>>,
) -> Result<(), GpuError> {
    let (kernel, threads, items) = match variant {
        ScanVariant::P256x16 | ScanVariant::P256x16OneTile => (k::SCAN_EXCLUSIVE_U32_P256X16, 256u32, 16usize),
        ScanVariant::P256x32 => (k::SCAN_EXCLUSIVE_U32_P256X32, 256, 32),
        ScanVariant::P128x32 => (k::SCAN_EXCLUSIVE_U32_P128X32, 128, 32),
        ScanVariant::P256x16Stream => (k::SCAN_EXCLUSIVE_U32_P256X16S, 256, 16),
        ScanVariant::Tile => unreachable!(),
    };
    let n = input.len();
    let total = total_arg(kernel.name(), total)?;
    if n == 0 {
        return Ok(());
    }
    let gpu = input.gpu();
    let tiles = n.div_ceil(threads as usize * items);
    let mut scratch = super::LookbackScratch::new(gpu, "scan tile status", tiles)?;
    let (status, counter) = scratch.pointers();
    // As many blocks as the SMs hold threads: every resident block loops
    // over tiles; any beyond start when others finish and take what is left.
    let most = gpu.info().multiprocessors.max(1) * (2048 / threads);
    let blocks = if variant == ScanVariant::P256x16OneTile {
        tiles as u32
    } else {
        (tiles as u32).min(most)
    };
    let args = (
        input.ptr(),
        output.ptr_mut(),
        total,
        n as u64,
        status,
        counter,
    );
    gpu.launch(kernel, blocks, threads, args)
}
